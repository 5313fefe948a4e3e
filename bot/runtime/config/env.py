"""`${VAR}` and `${VAR:-default}` expansion from the environment, with `$${` as a literal."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bot.runtime.config.errors import ConfigError

# `$${` is an escaped literal; a bare `${` that is not a well-formed reference is an error.
_REFERENCE = re.compile(r"\$\$\{|\$\{(?:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\})?")


def expand_env(value: Any, env: Mapping[str, str]) -> Any:
    """Expand `${VAR}` / `${VAR:-default}` in every string inside `value` (mapping keys excepted).

    An unset `${VAR}` becomes ""; `:-default` applies when VAR is unset or empty; `$${` is `${`.
    A malformed reference raises ConfigError naming its dotted key.
    """
    return _expand(value, env, "")


def _expand(value: Any, env: Mapping[str, str], key: str) -> Any:
    if isinstance(value, str):
        return _expand_str(value, env, key)
    if isinstance(value, Mapping):
        return {k: _expand(v, env, f"{key}{k}.") for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, env, f"{key}{i}.") for i, v in enumerate(value)]
    return value


def _expand_str(text: str, env: Mapping[str, str], key: str) -> str:
    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name, default = match.group(1), match.group(2)
        if name is None:
            where = f"{key[:-1]}: " if key else ""
            raise ConfigError(
                # the value itself may be a secret (a token with a `${` in it): never repeat it
                f"{where}bad reference at character {match.start() + 1} of the value; write"
                " ${NAME} or ${NAME:-default}, or $${ for a literal ${"
            )
        found = env.get(name, "")
        return default if default is not None and not found else found

    return _REFERENCE.sub(replace, text)
