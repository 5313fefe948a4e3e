"""Channel instances: `channels.<kind>` as one mapping (one instance, id = the kind) or a list.

Two Telegram bots, two Slack apps, a Feishu and a Lark app side by side: each list item is a
whole section with an `id`, its own credentials, access lists and persona. The id starts its
conversations' keys and event ids, so the single mapping of older configs (id = the kind) keeps
the keys it always had: nothing stored needs migrating.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel

from adapters.access import AccessConfig

INSTANCE_KINDS = ("telegram", "slack", "feishu")  # the kinds that may run several accounts
SINGLE_KINDS = ("websocket", "api", "terminal")  # one per server; their names are taken
# marks such a field for the loader: a section left out is one instance of the defaults, whose
# secrets come from the environment like any section's
INSTANCES: dict[str, Any] = {"json_schema_extra": {"instances": True}}


def as_instances(kind: str, value: Any) -> Any:
    """The before-validator of `channels.<kind>`: a mapping is one instance with id = kind."""
    if value is None:
        return [{"id": kind}]
    if isinstance(value, Mapping):
        return [{**value, "id": value.get("id") or kind}]
    if isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, Mapping) and not item.get("id"):
                raise ValueError(
                    f"item {i} has no id; each of several {kind} instances needs one "
                    f"(e.g. id: {kind}-support), which names its conversations"
                )
    return value


def instances(channels: BaseModel) -> Iterator[tuple[str, str, AccessConfig]]:
    """(kind, instance id, section) of every configured channel, enabled or not."""
    for kind in type(channels).model_fields:
        value = getattr(channels, kind)
        for section in value if isinstance(value, list) else [value]:
            yield kind, getattr(section, "id", None) or kind, section


def check_instances(channels: BaseModel) -> None:
    """Ids unique across every channel; no account or web path claimed by two instances.
    A ValueError names both instances, as `channels.<kind>.<id>`."""
    ids: dict[str, str] = {}
    accounts: dict[str, str] = {}
    routes: dict[str, str] = {}
    for kind, name, section in instances(channels):
        where = f"channels.{kind}" if name == kind else f"channels.{kind} (id {name!r})"
        if name in SINGLE_KINDS and name != kind or name in INSTANCE_KINDS and name != kind:
            raise ValueError(f"{where}: id {name!r} is another channel's name; choose another")
        if name in ids:
            raise ValueError(f"{where}: id {name!r} is also used by {ids[name]}; ids must differ")
        ids[name] = where
        if not getattr(section, "enabled", False):
            continue
        credential = section.credential()
        if credential is not None:
            other = accounts.setdefault(f"{kind} {credential}", where)
            if other != where:
                raise ValueError(
                    f"{where}: the same account (bot token / app id) as {other}: two instances "
                    "of one account would fight over its updates; give each its own"
                )
        for path in section.routes():
            other = routes.setdefault(path, where)
            if other != where:
                raise ValueError(f"{where}: web path {path!r} is also {other}'s; give each its own")


def single_instance_loc(error: Mapping[str, Any], channels: Any) -> Mapping[str, Any]:
    """A pydantic error inside `channels.<kind>` written as one mapping is about that mapping:
    `channels.telegram.token`, as the file says it, not the list item `channels.telegram.0.token`
    validation made of it."""
    loc = tuple(error["loc"])
    if len(loc) > 2 and loc[0] == "channels" and loc[1] in INSTANCE_KINDS and loc[2] == 0:
        written = channels.get(loc[1]) if isinstance(channels, Mapping) else None
        if not isinstance(written, list):
            return {**error, "loc": loc[:2] + loc[3:]}
    return error
