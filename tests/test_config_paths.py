"""Paths a config names are read from its own folder; one that resolves to nowhere is an error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bot.runtime.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parent.parent


def _error(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    return str(caught.value)


def test_a_storage_path_into_a_missing_folder_names_the_key_and_the_path(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    config = conf / "config.yaml"
    config.write_text("storage: {path: ../state/db/bot.db}\n")
    message = _error(config)
    assert message.startswith(f"{config}: storage.path: no such folder: {tmp_path / 'state'}")
    assert str(tmp_path / "state" / "db" / "bot.db") in message
    # the database's own folder is made on the first run
    (tmp_path / "state").mkdir()
    assert load_config(config, env={}).storage.path == "../state/db/bot.db"


def test_a_storage_path_that_is_a_folder_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    config = tmp_path / "config.yaml"
    config.write_text("storage: {path: data}\n")
    assert _error(config) == (
        f"{config}: storage.path: {tmp_path / 'data'} is a folder;"
        f" name a file, e.g. {tmp_path / 'data'}/bot.db"
    )


def test_the_reference_config_copied_elsewhere_names_the_persona_folder(tmp_path: Path) -> None:
    # its `personas: {dirs: [personas]}` now reads from the copy's folder, which has none:
    # an error, not a bot that quietly lost its specialists
    copy = tmp_path / "config.yaml"
    shutil.copy(ROOT / "config.yaml", copy)
    assert _error(copy) == f"{copy}: personas.dirs.0: no such folder: {tmp_path / 'personas'}"
    shutil.copytree(ROOT / "personas", tmp_path / "personas")
    assert load_config(copy, env={}).storage.path == "data/bot.db"  # data/ is made on first run
