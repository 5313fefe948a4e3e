"""An unset `${DATABASE_URL}` or `${REDIS_URL}` does not silently start a one-process SQLite
gateway: a WARNING names the empty key, and `storage.require_url` / `redis.required` refuse."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from bot.runtime.config import ConfigError, load_config


def _load(tmp_path: Path, env: dict[str, str], **sections: Any) -> Any:
    path = tmp_path / "config.yaml"
    data = {"storage": {"path": str(tmp_path / "bot.db")}} | sections
    if "storage" in sections:
        data["storage"] = {"path": str(tmp_path / "bot.db")} | sections["storage"]
    path.write_text(json.dumps(data))
    return load_config(path, env=env)


@pytest.mark.parametrize(
    ("section", "variable"), [("storage", "DATABASE_URL"), ("redis", "REDIS_URL")]
)
def test_an_empty_url_variable_is_named_in_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, section: str, variable: str
) -> None:
    with caplog.at_level(logging.WARNING):
        config = _load(tmp_path, {}, **{section: {"url": f"${{{variable}}}"}})
    assert getattr(config, section).url is None
    [warning] = [r.getMessage() for r in caplog.records if f"{section}.url" in r.getMessage()]
    assert variable in warning and "empty or unset" in warning
    caplog.clear()
    with caplog.at_level(logging.WARNING):  # not written at all: the embedded default, quietly
        _load(tmp_path, {})
    assert not [r for r in caplog.records if ".url" in r.getMessage()]


@pytest.mark.parametrize(
    ("section", "flag", "variable"),
    [("storage", "require_url", "DATABASE_URL"), ("redis", "required", "REDIS_URL")],
)
def test_a_required_url_that_is_empty_refuses_to_start(
    tmp_path: Path, section: str, flag: str, variable: str
) -> None:
    written = {section: {"url": f"${{{variable}}}", flag: True}}
    with pytest.raises(ConfigError) as refused:
        _load(tmp_path, {}, **written)
    assert f"{section}.url" in str(refused.value) and f"{section}.{flag}" in str(refused.value)
    assert variable in str(refused.value)
    with pytest.raises(ConfigError):
        _load(tmp_path, {}, **{section: {flag: True}})  # not written at all
    url = "postgresql://db.internal:5432/bot" if section == "storage" else "redis://r:6379/0"
    config = _load(tmp_path, {variable: url}, **written)
    assert getattr(config, section).url == url
