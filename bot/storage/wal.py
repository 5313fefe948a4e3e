"""The WAL's pages read back before the loop writes them again.

The WAL starts over in place (after a RESTART, or at the first write once a checkpoint copied
all of it), and SQLite writes each frame, 24 bytes of header and then a page, across two of the
file's 4 KiB pages. A write to part of a page that is not in memory reads it from disk first,
and those writes are the loop's (bot/storage/connection.py). A kernel short of memory drops the
WAL's pages once they are written back, and so does a host that reclaims a VM's page cache: this
machine's kernel runs a DAMON scheme that pages out cold memory with 23 GB free, and a traced
paced load of `bench/many_bench.py` (BENCH_PASSES) had the loop asleep 64.8 ms in one such write.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


def read_wal_back(db_path: str | Path) -> None:
    """On the checkpoint thread, before the WAL starts over: the kernel reads back the pages of
    the WAL file that it dropped, all of them (at most WAL_KEEP_BYTES, bot/storage/connection.py,
    once cut back). What is in memory is skipped, and the reads run in the kernel, off the loop.
    Reading only as many frames as the cycle that ends had was tried: the loop slept 305.7 ms in
    `pwrite64` in a traced paced load, against 9.9 and 35.2 ms with the whole file (two runs),
    the next cycle being longer at times (a RESTART's, after quiet ones). Nothing where the OS
    has no posix_fadvise (macOS)."""
    if not hasattr(os, "posix_fadvise"):
        return
    try:
        fd = os.open(f"{db_path}-wal", os.O_RDONLY)
    except OSError:
        return  # no WAL file (yet): nothing to read
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)  # 0: to the end of the file
    except OSError as exc:
        log.debug("WAL read-back of %s: %s", db_path, exc)
    finally:
        os.close(fd)
