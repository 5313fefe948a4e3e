"""`StoredGate`: the tool loop's `ApprovalGate`, every request kept in the store.

Asked about a call, it answers from what the store holds for that call, so the same question
after a restart (the turn resumed) gets the same answer: no request yet -> one is recorded and
posted to the operator place, and the turn pauses; still pending -> it pauses again; allowed ->
the approval is used (once: `allowed` -> `used` is one conditional UPDATE) and the call runs;
denied, expired, withdrawn or used already -> the result the model reads instead. A call that
an "always allow" of this conversation covers (same tool, same target) runs without asking.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from bot.approvals.place import OperatorPlace
from bot.approvals.policy import ApprovalSettings
from bot.approvals.prompt import pause, question
from bot.storage.roles import ApprovalRecords
from bot.storage.rows import ApprovalRow
from tools.approval import RUN, Pause, Verdict, target_of
from tools.base import ToolContext, ToolResult

log = logging.getLogger(__name__)

Language = Callable[[str, str], Awaitable[str]]  # (conversation key, channel) -> its language
Status = Callable[[str], str]  # a tool's status line ("Creating a payment order")

# what the model reads instead of the tool's result (English: it is the model's, not a user's)
REFUSED: Final = {
    "denied": "not run: {who} denied this call. Tell the user it was not done.",
    "expired": (
        "not run: nobody approved this call within {timeout:g} s, so it was not done."
        " Tell the user it was not done."
    ),
    "dismissed": (
        "not run: the user sent a new message instead of approving this call, so it was not"
        " done. Do not call it again unless the user asks for it again."
    ),
    "used": "not run: this approval was used already; the call may have run once. Say so.",
}


class StoredGate:
    def __init__(
        self,
        *,
        records: ApprovalRecords,
        settings: ApprovalSettings,
        place: OperatorPlace | None,
        language: Language,
        status: Status,
        asked: Callable[[], None] = lambda: None,
    ) -> None:
        """`place`: where approvers are asked (None: in the conversation itself); `asked`: told
        of each new request (the desk's expiry sweep)."""
        self.asked = asked
        self.records = records
        self.settings = settings
        self.place = place
        self.language = language
        self.status = status

    async def check(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> Verdict:
        target = target_of(arguments)
        key = ctx.conversation_key
        if ctx.turn_id is None:  # no turn to pause (a call outside any conversation)
            return ToolResult(REFUSED["denied"].format(who="nobody here"), ok=False)
        if await self.records.approval_granted(key, name, target):
            log.info("%s on %r runs: always allowed in %s", name, target, key)
            return RUN
        row = await self.records.approval_for_call(ctx.turn_id, ctx.call_id)
        if row is None:
            row = await self.records.create_approval(self._request(name, arguments, target, ctx))
            log.info("approval %s asked for %s in %s", row.id, name, key)
            self.asked()
        if row.status == "pending":
            return await self._pause(row, arguments, ctx)
        if row.status == "allowed":
            if await self.records.use_approval(row.id):
                return RUN
            row_status = "used"
        else:
            row_status = row.status
        text = REFUSED.get(row_status, REFUSED["denied"])
        return ToolResult(
            text.format(who=row.decided_by or "the approver", timeout=self.settings.timeout_s),
            ok=False,
        )

    def _request(
        self, name: str, arguments: Mapping[str, Any], target: str, ctx: ToolContext
    ) -> ApprovalRow:
        assert ctx.turn_id is not None  # checked by `check`
        now = time.time()
        return ApprovalRow(
            id=secrets.token_hex(8),  # a button's value: short (Telegram's 64-byte callback data)
            turn_id=ctx.turn_id,
            session_id=ctx.session_id,
            call_id=ctx.call_id,
            tool_name=name,
            arguments=json.dumps(dict(arguments), ensure_ascii=False),
            target=target,
            conversation_key=ctx.conversation_key,
            channel=ctx.channel,
            user_id=ctx.user_id,
            status="pending",
            decision=None,
            decided_by=None,
            created_at=now,
            expires_at=now + self.settings.timeout_s,
            decided_at=None,
            notice=None,
        )

    async def _pause(
        self, row: ApprovalRow, arguments: Mapping[str, Any], ctx: ToolContext
    ) -> Pause:
        language = await self.language(ctx.conversation_key, ctx.channel)
        asked = question(language, row.tool_name, self.status(row.tool_name), arguments)
        if self.place is not None and row.notice is None:
            # posted once: a turn resumed after a crash finds the notice and posts no second
            notice = await self.place.ask(row, asked)
            if notice is not None:
                await self.records.set_approval_notice(row.id, notice)
        return pause(language, row.id, asked, user_answers=self.settings.user_answers())
