"""Turn ids: time-ordered, so each turn's row lands at the end of its key's index.

Why: `turns.id` is a text primary key, with an index of its own. A random key (`uuid4`) put
every new row on a random leaf page of that index, and once the index and the pages each turn
needs outgrew SQLite's page cache (2 MB by default) a turn read pages back from the file, on the
event loop: with 10,000 conversations stored (20,000 turn rows), the loop
made 812 `pread64`s of the database in 10 s of a paced load at 200 turns/s, against 139 with
50 conversations; with these keys, 225 (bench/many_bench.py --sockets 0, counted with strace).
A page the kernel has let go of (this machine's DAMON pages out cold memory) is a read from disk
inside a turn, and a year of turns is an index of hundreds of MB. Keys that grow with time keep
the index's last page hot, and its random page splits go with the reads.

The format is a UUID version 7 (RFC 9562) as 32 hex characters, as `uuid4().hex` was: 48 bits
of Unix milliseconds, then 74 random bits; ids of one millisecond are in random order, so two
processes never collide and none needs a counter. Where a turn is named by 12 characters, they
are its random end (`short_turn_id`). Session ids stay random: one is made per
conversation, not per turn, and an admin names a session by the start of its id (`bot sessions
show 3f2a`), which time-ordered ids made in one millisecond share.
"""

from __future__ import annotations

import os
import time

_VERSION_7 = 0x7 << 76
_VARIANT = 0x2 << 62
_RANDOM_A = (1 << 12) - 1  # the 12 random bits after the version
_RANDOM_B = (1 << 62) - 1  # the 62 random bits after the variant


def time_ordered_id() -> str:
    """A new UUID version 7, as 32 lowercase hex characters (the newest sorts last)."""
    random = int.from_bytes(os.urandom(10), "big")
    value = (time.time_ns() // 1_000_000) << 80
    value |= _VERSION_7 | ((random >> 62) & _RANDOM_A) << 64 | _VARIANT | (random & _RANDOM_B)
    return f"{value:032x}"


def short_turn_id(turn_id: str) -> str:
    """12 hex characters that name a turn: a time-ordered id's last (its first are the
    millisecond it was made), an older random one's first (as it was named before)."""
    return turn_id[-12:] if turn_id[12:13] == "7" else turn_id[:12]
