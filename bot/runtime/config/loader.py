"""load_config: read config.yaml (duplicate keys refused), expand `${VAR}`, validate, explain."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from bot.runtime.config.choices import check_choices
from bot.runtime.config.env import expand_env
from bot.runtime.config.errors import ConfigError, describe, show
from bot.runtime.config.instances import check_instances, single_instance_loc
from bot.runtime.config.schema import Config, item_model
from bot.runtime.config.server import follow_server, override_server

log = logging.getLogger(__name__)

DEFAULT_PATH = "config.yaml"


class _Loader(yaml.SafeLoader):
    """A SafeLoader that refuses duplicate keys (plain YAML silently keeps the last one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str):
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def config_folder(path: str | Path | None) -> Path:
    """Where a config's relative paths start: its file's folder, or the working directory."""
    return Path(path).resolve().parent if path is not None else Path.cwd()


def load_config(
    path: str | Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    host: str | None = None,
    port: int | None = None,
) -> Config:
    """Read, expand and validate a config file; None: ./config.yaml if present, else defaults.

    Every folder the config names must exist, relative paths read from `config_folder(path)`.
    `host` and `port` (the command line's), else BOT_HOST and BOT_PORT, override `server`.
    """
    env = os.environ if env is None else env
    server = (host, port)
    if path is None:
        if not Path(DEFAULT_PATH).is_file():
            log.info("no %s in %s; using the built-in defaults", DEFAULT_PATH, Path.cwd())
            return _validate({}, env, "defaults", Path.cwd(), server)
        path = DEFAULT_PATH
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read: {exc}") from exc
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}: " if mark else ""
        raise ConfigError(f"{source}: {where}invalid YAML: {exc.problem or exc.context}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{source}: invalid YAML: {str(exc).splitlines()[0]}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping of sections ({', '.join(Config.model_fields)})"
            f" at the top level, got {show(data)}"
        )
    config = _validate(data, env, source, config_folder(path), server)
    log.debug("loaded config from %s", source)
    return config


def _validate(
    data: dict[Any, Any],
    env: Mapping[str, str],
    source: str,
    folder: Path,
    server: tuple[str | None, int | None],
) -> Config:
    try:
        _prepare(Config, data, "")
        expanded = expand_env(data, env)
        override_server(expanded, env, *server)
        config = follow_server(Config.model_validate(expanded))
        check_instances(config.channels)
        check_choices(config)
        _check_urls(config, data)
        _check_folders(config, folder)
    except ValidationError as exc:  # before ValueError, which it is
        error = single_instance_loc(exc.errors()[0], data.get("channels"))
        raise ConfigError(f"{source}: {describe(error)}") from exc
    except (ConfigError, ValueError) as exc:  # ValueError: check_instances
        raise ConfigError(f"{source}: {exc}") from exc
    return config


def _check_urls(config: Config, data: dict[Any, Any]) -> None:
    """An empty `storage.url` or `redis.url` silently means one process on SQLite: say so when
    the file asked for a variable that is empty, and refuse when the config requires the url."""
    for key, value, required, fallback, flag in (
        ("storage.url", config.storage.url, config.storage.require_url,
         "SQLite at storage.path", "storage.require_url"),
        ("redis.url", config.redis.url, config.redis.required,
         "one process without Redis", "redis.required"),
    ):  # fmt: skip
        if value:
            continue
        section, _, name = key.partition(".")
        raw = data.get(section, {}).get(name) if isinstance(data.get(section), dict) else None
        written = isinstance(raw, str) and "${" in raw
        if required:
            how = f"{raw} is empty or unset" if written else "it is not set"
            raise ConfigError(f"{key}: {flag} is true but {how}; set it, or turn {flag} off")
        if written:
            log.warning(
                "%s is written as %s, which is empty or unset: running on %s (set %s to refuse"
                " to start instead)",
                key,
                raw,
                fallback,
                flag,
            )


def _check_folders(config: Config, folder: Path) -> None:
    # The default `personas` may be missing: `bot serve` in any folder serves the built-in
    # coordinator. A folder the config names must exist: a typo would otherwise go unnoticed.
    for name, section in (("personas", config.personas), ("knowledge", config.knowledge)):
        if "dirs" not in section.model_fields_set:
            continue
        for i, value in enumerate(section.dirs):
            path = Path(os.path.abspath(folder / value))
            if not path.is_dir():
                raise ConfigError(f"{name}.dirs.{i}: no such folder: {path}")
    # The database's own folder (`data/`) is made on the first run; a missing folder above it
    # means the path is read from the wrong place (a config copied elsewhere, say): a fresh
    # empty database there would silently lose every conversation.
    if config.storage.url is None and config.storage.path != ":memory:":
        path = Path(os.path.abspath(folder / config.storage.path))
        if path.is_dir():
            raise ConfigError(f"storage.path: {path} is a folder; name a file, e.g. {path}/bot.db")
        if not path.parent.parent.is_dir():
            raise ConfigError(
                f"storage.path: no such folder: {path.parent.parent} (for {path});"
                " create it or fix the path (relative paths are from the config file's folder)"
            )


def _prepare_item(model: type[BaseModel], data: dict[Any, Any], key: str) -> None:
    """A list item: like a section, but no secret is taken from the environment (two Telegram
    instances must not both read TELEGRAM_BOT_TOKEN: each names its own `${VAR}`)."""
    absent = [name for name in model.model_fields if name not in data]
    _prepare(model, data, key)
    for name in absent:
        data.pop(name, None)


def _prepare(model: type[BaseModel], data: dict[Any, Any], key: str) -> None:
    """Fill env-sourced secrets the file leaves out, and treat an empty section as defaults."""
    for name in data:
        if not isinstance(name, str):
            raise ConfigError(
                f"{key}{name}: keys must be strings; quote it (YAML reads "
                "unquoted on/off/yes/no/null and numbers as other types)"
            )
    for name, field in model.model_fields.items():
        sub = item_model(field.annotation)
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        single = field.annotation is sub or extra.get("instances")  # one mapping, by default
        if sub is not None and single and data.get(name) is None:
            data[name] = {}  # a section whose keys are all commented out parses as null
        value = data.get(name)
        if sub is not None and isinstance(value, dict):
            _prepare(sub, value, f"{key}{name}.")
        elif sub is not None and isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    _prepare_item(sub, item, f"{key}{name}.{i}.")
        if name not in data and "env" in extra:
            data[name] = f"${{{extra['env']}:-}}"
        elif extra.get("secret") and value not in (None, "") and "${" not in str(value):
            log.warning(
                "%s%s is written in the config file; secrets belong in the environment:"
                " use ${VAR} and set VAR",
                key,
                name,
            )
