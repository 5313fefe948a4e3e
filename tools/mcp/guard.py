"""The watchdog a stdio MCP server runs under, so that no server outlives the gateway.

Run as `python -I -S guard.py PARENT_PID KEEP -- COMMAND ARGS...` (standard library only, started
by path: no import of our packages, a few ms of start-up). It starts the server in its own
process group (the SDK starts the guard with a new session; the server stays in that group), keeps
only the environment variables named in KEEP (comma-separated), then waits. When the server
exits, the guard ends the group's leftovers (SIGTERM, then SIGKILL) and exits with the server's
status. When the gateway
dies (even by SIGKILL: the kernel's parent-death signal, and a check of the parent pid as a
fallback), the server has already seen its stdin close; the guard gives it a grace period, then
SIGTERM to the group, then SIGKILL. The guard drops its own copies of stdin and stdout, so the
gateway still sees end-of-file the moment the server dies.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

GRACE_S = 2.0  # as the SDK: after stdin closes, before SIGTERM; and again before SIGKILL
_PR_SET_PDEATHSIG = 1
_WAKE = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2}


def _on_parent_death(sig: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the parent pid check below still notices


def _wait(pid: int, seconds: float) -> int | None:
    """The server's exit status if it exits within `seconds`."""
    steps = max(1, int(seconds / 0.05))
    for _ in range(steps):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        signal.sigtimedwait({signal.SIGCHLD}, 0.05)
    return None


def _others_in_group() -> bool:
    """Whether a live process other than the guard is in the guard's group (Linux /proc)."""
    group, me = os.getpgid(0), os.getpid()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return True  # cannot tell: the caller escalates
    for pid in pids:
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == group:
            return True
    return False


def _end_group(pid: int, code: int | None) -> int:
    """The server has exited (`code`), or must: grace, SIGTERM, grace; then whatever is left of
    the group (a wrapper's children) gets SIGTERM, a grace, and SIGKILL. The server's status."""
    if code is None:
        code = _wait(pid, GRACE_S)
    if code is None:
        _signal_group(signal.SIGTERM)
        code = _wait(pid, GRACE_S)
    _signal_group(signal.SIGTERM)
    for _ in range(int(GRACE_S / 0.05)):
        if not _others_in_group():
            return code if code is not None else -9
        time.sleep(0.05)
    _signal_group(signal.SIGKILL)  # the guard goes too: it is a member of the group
    return -9


def _signal_group(sig: int) -> None:
    # SIGTERM is blocked in the guard: only the others in the group (the server) receive it
    try:
        os.killpg(os.getpgid(0), sig)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str]) -> int:
    parent, keep, rest = int(argv[0]), argv[1], argv[2:]
    if rest[:1] != ["--"] or len(rest) < 2:
        print("usage: guard.py PARENT_PID KEEP -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    _on_parent_death(signal.SIGUSR2)
    if os.getppid() != parent:
        return 1  # the gateway died before the guard could watch it
    names = set(filter(None, keep.split(",")))
    env = {k: v for k, v in os.environ.items() if k in names}
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAKE)
    try:
        # the signal mask is inherited across exec: the server starts with it cleared
        child = subprocess.Popen(
            rest[1:], env=env, preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, ())
        )
    except OSError as exc:
        print(f"cannot start MCP server {rest[1]!r}: {exc}", file=sys.stderr)
        return 127
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    while True:
        woke = signal.sigtimedwait(_WAKE, 1.0)
        done, status = os.waitpid(child.pid, os.WNOHANG)
        if done:  # what the server left behind (a wrapper's children) goes too
            return _end_group(child.pid, os.waitstatus_to_exitcode(status))
        if (woke is not None and woke.si_signo == signal.SIGUSR2) or os.getppid() != parent:
            return _end_group(child.pid, None)
        # SIGTERM/SIGINT/SIGHUP went to the whole group (the SDK's shutdown): the server got it
        # too; the guard stays until the server is gone, so the group ends as one


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
