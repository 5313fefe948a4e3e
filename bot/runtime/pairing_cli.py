"""`bot pairing list|approve CODE|deny CODE|revoke CHANNEL USER`: pairing decided from a shell.

It writes to the store the gateway uses (the config's `storage`), so it works with the gateway
running or not, on any host sharing the database; a serving process tells the approved sender
within a few seconds (bot/pipeline/pairing.py `PairingNotices`).
"""

from __future__ import annotations

import argparse
import getpass
import sys
import time
from datetime import UTC, datetime

from bot.pipeline.pairing_codes import decide
from bot.runtime import people_wiring
from bot.runtime.config import Config
from bot.storage import StorageError
from bot.storage.backends import AnyStore
from bot.storage.rows import PairingRow


async def pairing_command(config: Config, store: AnyStore, args: argparse.Namespace) -> int:
    try:
        async with store:
            if args.pairing_command == "list":
                status = "approved" if args.approved else "pending"
                rows = await store.pairing_rows(status, now=time.time(), limit=1000)
                print(_table(rows, status) if rows else f"no {status} pairings")
                return 0
            if args.pairing_command == "revoke":
                if not await store.pairing_revoke(args.channel, args.user):
                    print(
                        f"error: {args.user!r} is not approved on {args.channel!r}", file=sys.stderr
                    )
                    return 1
                print(f"revoked {args.user} on {args.channel}; their next message pairs anew")
                return 0
            approve = args.pairing_command == "approve"
            row = await decide(
                store,
                args.code,
                approve=approve,
                by=f"cli:{getpass.getuser()}",
                settings=people_wiring.pairing_settings(config),
            )
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if row is None:
        print(
            f"error: no pending code {args.code!r} (expired, decided already, or mistyped);"
            " see `bot pairing list`",
            file=sys.stderr,
        )
        return 1
    who = f"{row.user_id}" + (f" ({row.user_name})" if row.user_name else "")
    if approve:
        print(f"approved {who} on {row.channel}; they are told by the running gateway")
    else:
        print(f"denied {who} on {row.channel}")
    return 0


def _table(rows: list[PairingRow], status: str) -> str:
    def utc(seconds: float | None) -> str:
        if seconds is None:
            return "-"
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M")

    if status == "pending":
        head = f"{'CODE':<9} {'CHANNEL':<12} {'USER':<16} {'NAME':<16} {'EXPIRES (UTC)':<17} MSGS"
        lines = [
            f"{r.code:<9} {r.channel:<12} {r.user_id:<16} {(r.user_name or '-'):<16}"
            f" {utc(r.expires_at):<17} {r.attempts}"
            for r in rows
        ]
    else:
        head = f"{'CHANNEL':<12} {'USER':<16} {'NAME':<16} {'APPROVED (UTC)':<17} BY"
        lines = [
            f"{r.channel:<12} {r.user_id:<16} {(r.user_name or '-'):<16}"
            f" {utc(r.decided_at):<17} {r.decided_by or '-'}"
            for r in rows
        ]
    return "\n".join([head, *lines])
