"""`bot sessions list/show` print what users wrote escaped: no terminal control reaches the admin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.types import AuditRecord
from bot.storage import SqliteStore
from tests.test_cli import _bot

TITLE = "\x1b]0;pwned\x07"  # sets the terminal's window title
CLEAR = "\x1b[2J"  # clears the screen
BIDI = "\u202e"  # right-to-left override: shows text reversed


@pytest.mark.process
async def test_control_characters_in_stored_values_are_printed_escaped(tmp_path: Path) -> None:
    config = {"storage": {"path": str(tmp_path / "chat.db")}}
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    store = SqliteStore(tmp_path / "chat.db")
    await store.open()
    try:
        session_id = await store.create_session(
            agent_id="default",
            channel="web",
            conversation_key=f"web:{CLEAR}chat\nfake line",
            user_id=f"{TITLE}alice{BIDI}",
        )
        await store.record_tool_call(
            AuditRecord(
                session_id, None, "c1", f"lookup{CLEAR}", f"not json {TITLE}", CLEAR, True, 1
            )
        )
    finally:
        await store.close()

    listing = _bot("sessions", "list", cwd=tmp_path)
    tree = _bot("sessions", "show", session_id, cwd=tmp_path)
    for result in (listing, tree):
        assert result.returncode == 0, result.stderr
        assert not {"\x1b", "\x07", BIDI} & set(result.stdout), result.stdout
        assert r"\x1b]0;pwned\x07alice\u202e" in result.stdout
        assert r"web:\x1b[2Jchat\nfake line" in result.stdout
    assert r"lookup\x1b[2J(not json \x1b]0;pwned\x07)" in tree.stdout
    assert len(listing.stdout.splitlines()) == 2  # the header and one session: no forged line
