"""The `bot` command as a user runs it: exit codes, one-line errors, a terminal conversation."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

# a hang guard per test: a test runs up to four `bot` processes, each importing every SDK
pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parent.parent


def _bot(
    *args: str, cwd: Path, stdin: str = "", timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)} | (env or {}),
    )


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The stderr of a start refused for a bad value: exit 2, one line, no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_config_typo_stops_the_start_with_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("agent:\n  max_round: 3\n")
    result = _bot("serve", cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "agent.max_round" in lines[0] and "max_rounds" in lines[0]
    assert "Traceback" not in result.stderr


BAD_VALUES = {
    "origin with a trailing slash": (
        {"channels": {"websocket": {"allowed_origins": ["https://chat.example/"]}}},
        {},
        "channels.websocket.allowed_origins.0: expected no trailing '/'",
    ),
    "malformed bot token": (
        {"channels": {"telegram": {"enabled": True}}},
        {"TELEGRAM_BOT_TOKEN": "not-a-token"},
        "channels.telegram.token: malformed",
    ),
    "missing persona folder": (
        {"personas": {"dirs": ["nowhere"]}},
        {},
        "personas.dirs.0: no such folder: ",
    ),
    "slack bot token": (
        {"channels": {"slack": {"enabled": True}}},
        {"SLACK_BOT_TOKEN": "xoxp-a-user-token", "SLACK_APP_TOKEN": "xapp-1"},
        "channels.slack.bot_token: expected the app's Bot User OAuth Token (xoxb-...)",
    ),
    "slack app token": (
        {"channels": {"slack": {"enabled": True}}},
        {"SLACK_BOT_TOKEN": "xoxb-1"},
        "channels.slack.app_token: Socket Mode needs an app-level token (xapp-...)",
    ),
    "redis url": (
        {"redis": {"url": "${REDIS_URL}"}},
        {"REDIS_URL": "http://:pw@127.0.0.1:6379/0"},
        "redis.url: expected a Redis URL",
    ),
}


@pytest.mark.parametrize("case", BAD_VALUES)
def test_a_bad_value_stops_the_start_with_one_line_naming_the_key(
    tmp_path: Path, case: str
) -> None:
    config, env, expected = BAD_VALUES[case]
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    line = _one_line_error(_bot("serve", cwd=tmp_path, env=env, timeout=30))
    assert expected in line
    assert "not-a-token" not in line  # a secret is never repeated


@pytest.mark.parametrize(
    "command", [["chat"], ["personas", "check"], ["sessions", "list"], ["sessions", "show", "x"]]
)
def test_every_command_reports_a_bad_value_the_same_way(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "config.yaml").write_text(json.dumps({"personas": {"dirs": ["nowhere"]}}))
    line = _one_line_error(_bot(*command, cwd=tmp_path, timeout=30))
    assert line.endswith(f": personas.dirs.0: no such folder: {tmp_path / 'nowhere'}")


def test_no_config_in_a_folder_without_personas_uses_the_builtin_coordinator(
    tmp_path: Path,
) -> None:
    # the defaults name `personas`; with no such folder the built-in coordinator serves
    result = _bot("personas", "check", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "ok: 1 persona(s): default" in result.stdout


def test_personas_check_reports_file_and_line(tmp_path: Path) -> None:
    personas = tmp_path / "personas"
    personas.mkdir()
    (personas / "default.md").write_text((ROOT / "personas" / "default.md").read_text())
    (personas / "helper.md").write_text(
        "---\nname: helper\ndescription: x\ntools: [nope]\n---\nHi\n"
    )
    result = _bot("personas", "check", cwd=tmp_path)
    assert result.returncode == 1
    assert f"{personas / 'helper.md'}:4: unknown tool 'nope'" in result.stdout
    (personas / "helper.md").unlink()
    result = _bot("personas", "check", cwd=tmp_path)
    assert result.returncode == 0 and "default" in result.stdout


def test_chat_answers_in_the_terminal(tmp_path: Path) -> None:
    config = {
        "storage": {"path": str(tmp_path / "chat.db")},
        "personas": {"dirs": [str(ROOT / "personas")]},
    }
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    result = _bot("chat", cwd=tmp_path, stdin="hello there\nwhat time is it in UTC?\n/help\n")
    assert result.returncode == 0, result.stderr
    assert "not an LLM" in result.stdout
    assert "It is " in result.stdout and "**" not in result.stdout  # markdown shown as text
    assert "/stop" in result.stdout
    assert "bot> bot>" not in result.stdout and result.stdout.count("bot> ") == 3
    assert "Traceback" not in result.stderr


def test_chat_with_an_unknown_persona_is_a_clear_error(tmp_path: Path) -> None:
    config = {
        "storage": {"path": str(tmp_path / "chat.db")},
        "personas": {"dirs": [str(ROOT / "personas")]},
    }
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    result = _bot("chat", "--persona", "ghost", cwd=tmp_path)
    assert result.returncode == 2
    assert "unknown persona 'ghost'" in result.stderr


def test_sessions_show_prints_the_tree_an_admin_reads(tmp_path: Path) -> None:
    config = {
        "storage": {"path": str(tmp_path / "chat.db")},
        "personas": {"dirs": [str(tmp_path / "p")]},
    }
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "default.md").write_text((ROOT / "personas" / "default.md").read_text())
    (tmp_path / "p" / "specialist-clock.md").write_text(
        "---\nname: specialist-clock\ndescription: Tells the time.\ntools: [get_current_datetime]\n---\nClock.\n"
    )
    result = _bot("chat", cwd=tmp_path, stdin="@specialist-clock what time is it in Asia/Tokyo?\n")
    # one answer, its markdown shown as plain text, the specialist by its display name
    assert result.stdout.count("bot> ") == 1, result.stdout
    assert "bot> Clock reports:" in result.stdout and "**" not in result.stdout, result.stdout
    listing = _bot("sessions", "list", cwd=tmp_path)
    assert listing.returncode == 0 and "terminal:local" in listing.stdout
    session_id = listing.stdout.splitlines()[1].split()[0]
    tree = _bot("sessions", "show", session_id, cwd=tmp_path)
    assert tree.returncode == 0, tree.stderr
    lines = tree.stdout.splitlines()
    assert lines[0].startswith("session ") and "agent=default" in lines[0]
    assert any("ok   AgentTool(" in line for line in lines)
    assert any(
        line.startswith("    └─ session ") and "agent=specialist-clock" in line for line in lines
    )
    assert any("get_current_datetime(" in line and "Asia/Tokyo" in line for line in lines)
    # the messages too, in order with the calls
    said = [line.split("  ", 2)[-1] for line in lines if ": " in line and "  user: " in line]
    assert said and said[0].startswith("user: @specialist-clock what time"), lines
    assert any("  assistant: " in line and "Clock** reports" in line for line in lines)
    missing = _bot("sessions", "show", "nope", cwd=tmp_path)
    assert missing.returncode == 1 and "no session 'nope'" in missing.stderr


def test_version_and_a_limit_below_one_are_answered_plainly(tmp_path: Path) -> None:
    version = _bot("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("bot "), version.stderr
    assert version.stdout.split()[1][0].isdigit() or "not installed" in version.stdout
    zero = _bot("sessions", "list", "--limit", "0", cwd=tmp_path)
    assert zero.returncode == 2 and "Traceback" not in zero.stderr
    assert "--limit: must be 1 or more, not 0" in zero.stderr


def test_the_entry_point_turns_the_collector_off_and_a_command_turns_it_back_on(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    from bot.runtime import command

    try:
        monkeypatch.setattr(sys, "argv", ["bot", "api-key", "new", "--id", "ci"])
        seen = []  # the entry point's own step, then the command's
        monkeypatch.setattr(gc, "disable", lambda: seen.append("off"))
        monkeypatch.setattr(gc, "enable", lambda: seen.append("on"))
        assert command.main() == 0 and "sha256" in capsys.readouterr().out
        assert seen == ["off", "on"]  # `bot serve` turns it on itself, once started
    finally:
        monkeypatch.undo()
        gc.enable()
