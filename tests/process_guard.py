"""A test that starts a child process must carry the `process` mark, or it fails naming what ran."""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

MARK = "process"


class ProcessUnmarked(RuntimeError):
    """Not an OSError on purpose: callers catch OSError from a missing program, hiding the cause."""


class ProcessGuard:
    """Wraps `subprocess.Popen._execute_child`, where every child starts: `subprocess.run`,
    `asyncio.create_subprocess_exec` and Playwright's driver alike. Only while a test runs
    (its setup, call and teardown, fixtures of every scope included): collection may start
    processes, such as a `skipif` that asks a program for its version."""

    def __init__(self) -> None:
        self.marked: bool | None = None  # None: no test is running
        # kept even when the caller swallows the exception, so the test still fails
        self.started: list[str] = []

    def install(self) -> Callable[[], None]:
        """Wrap Popen; the returned function puts the original back."""
        # platform.processor() runs `uname -p` once per interpreter, for whichever test first asks
        # (the LLM SDKs do, for their headers): ask now, so no test depends on being first
        platform.processor()
        real = subprocess.Popen._execute_child  # type: ignore[attr-defined]

        def guarded(popen: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> Any:
            if self.marked is False:
                shown = " ".join(map(str, args)) if isinstance(args, list | tuple) else str(args)
                self.started.append(shown)
                raise ProcessUnmarked(
                    f"the test started a process ({shown}) without the `{MARK}` mark: add "
                    f"`@pytest.mark.{MARK}` (or `pytestmark = pytest.mark.{MARK}` for the module) "
                    'so `pytest -m "not process"` stays the quick lane'
                )
            return real(popen, args, *rest, **kw)

        subprocess.Popen._execute_child = guarded  # type: ignore[attr-defined]

        def uninstall() -> None:
            subprocess.Popen._execute_child = real  # type: ignore[attr-defined]

        return uninstall

    @contextmanager
    def running(self, item: pytest.Item) -> Iterator[None]:
        """While `item` runs; clears what an earlier test recorded."""
        self.marked = item.get_closest_marker(MARK) is not None
        self.started.clear()
        try:
            yield
        finally:
            self.marked = None

    def fail_if_started(self, report: pytest.TestReport) -> None:
        """Turn this phase's report into a failure if a process started unmarked in it."""
        if self.started and report.outcome != "failed":
            report.outcome = "failed"
            report.longrepr = f"started a process without the `{MARK}` mark: {self.started}"
        self.started.clear()
