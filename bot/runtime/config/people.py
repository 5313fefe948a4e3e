"""The sections of the person in the loop: pairing codes for unknown senders and approvals
before sensitive tools (the handoff's own section is bot/runtime/config/handoff.py)."""

from __future__ import annotations

from pydantic import Field, field_validator

from bot.pipeline.places import parse_place
from bot.runtime.config.section import Section as _Section


class PairingConfig(_Section):
    """Codes for unknown senders on channel instances with `dm_policy: pairing`."""

    ttl_s: float = Field(3600, gt=0, le=30 * 86400)  # how long a code waits for an admin
    max_pending: int = Field(10, ge=1, le=1000)  # live codes per instance; more senders wait
    resend_s: float = Field(60, ge=0)  # a pending code is sent again at most this often
    deny_s: float = Field(86400, ge=0)  # a denied sender gets no new code for this long
    # slack:<instance>/<channel id>: each new code posted there with Approve / Deny buttons
    place: str | None = None
    approvers: list[str] = []  # who may press them there (platform user ids); empty: anyone

    @field_validator("place")
    @classmethod
    def _place(cls, value: str | None) -> str | None:
        if value:
            parse_place(value)  # a clear ValueError
        return value or None


class ApprovalsConfig(_Section):
    """Approvals before sensitive tools (bot/approvals/)."""

    tools: list[str] = []  # names or globs asked about in every persona, e.g. mcp__github__*
    # tools that declare approval (create_payment) but run unasked here: the payment provider
    # confirms each payment itself, say (approvals.tools and a persona's approve: still ask)
    exempt: list[str] = []
    approvers: list[str] = []  # `<channel>:<user id>` or a bare user id; empty: the user
    timeout_s: float = Field(300, gt=0, le=7 * 86400)  # unanswered this long: denied
    place: str | None = None  # slack:<instance>/<channel id>: approvers are asked there

    @field_validator("place")
    @classmethod
    def _slack_channel(cls, value: str | None) -> str | None:
        if value is not None:
            parse_place(value)  # a clear ValueError
        return value
