"""Pairing codes themselves: how they are drawn and typed, the settings, an admin's decision.

Shared by the gate (bot/pipeline/pairing.py), the operator place (bot/pipeline/pairing_place.py),
`bot pairing` and the admin view. Codes are 8 characters from 31 letters and digits without
look-alikes (0 O 1 I L): 31^8 ≈ 8.5·10^11; only an admin ever enters one.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from bot.storage.roles import PairingRecords
from bot.storage.rows import PairingRow

log = logging.getLogger(__name__)

ALPHABET: Final = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0 O 1 I L: read aloud, typed by hand
CODE_LENGTH: Final = 8


def new_code() -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


def normalize(code: str) -> str:
    """What an admin typed, as stored: upper case, without spaces or dashes (`abcd-2345`)."""
    return "".join(code.split()).replace("-", "").upper()


@dataclass(frozen=True, slots=True)
class PairingSettings:
    """`pairing:` in config.yaml."""

    ttl_s: float = 3600.0
    max_pending: int = 10
    resend_s: float = 60.0
    deny_s: float = 86400.0


DEFAULTS: Final = PairingSettings()


async def decide(
    records: PairingRecords,
    code: str,
    *,
    approve: bool,
    by: str,
    settings: PairingSettings = DEFAULTS,
    clock: Callable[[], float] = time.time,
) -> PairingRow | None:
    """An admin's decision on a code (the CLI's, the admin view's); None: no live code is that."""
    row = await records.pairing_decide(
        normalize(code), approve=approve, by=by, now=clock(), block_s=settings.deny_s
    )
    if row is not None:
        verb = "approved" if approve else "denied"
        log.info("pairing %s %s/%s by %s", verb, row.channel, row.user_id, by)
    return row
