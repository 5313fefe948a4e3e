"""The README's commands and config keys exist, and CI runs the README's test command."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.runtime.config import config_keys

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _code_blocks(heading: str) -> list[str]:
    section = README.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def test_the_two_commands_are_there_and_ci_runs_the_test_command() -> None:
    run = _code_blocks("Run it")[0].strip()
    test = _code_blocks("Test it")[0].strip()
    assert run.endswith("bot serve")
    assert "pytest" in test
    assert test in (ROOT / ".ci" / "run").read_text()


def test_the_quick_lane_leaves_out_the_process_mark_the_suite_registers() -> None:
    quick = _code_blocks("Test it")[1].strip()
    assert quick.endswith('pytest -m "not process"')
    registered = (ROOT / "pyproject.toml").read_text()
    assert '\n  "process: ' in registered  # the marker exists (--strict-markers refuses others)


def test_every_config_key_in_the_readme_exists() -> None:
    keys = set(config_keys())
    documented = re.findall(r"^\| `([a-z_.]+)(?:\.\*)?` \|", README, re.M)
    assert len(documented) > 30
    missing = [key for key in documented if key not in keys]
    assert not missing, missing
    for channel, names in re.findall(
        r"^\| `channels\.(\w+)\.\*` \| disabled \| (.*) \|$", README, re.M
    ):
        for name in re.findall(r"`(\w+)`", names):
            assert f"channels.{channel}.{name}" in keys, (channel, name)


def test_every_config_key_is_documented() -> None:
    leaves = [k for k in config_keys() if not any(o.startswith(k + ".") for o in config_keys())]
    undocumented = [
        key
        for key in leaves
        if f"`{key}`" not in README
        and not (key.startswith("channels.") and f"`channels.{key.split('.')[1]}.*`" in README)
        and not key.startswith(("llm.fallback.", "llm.choices.", "tools.news.static_items."))
    ]
    assert not undocumented, undocumented


@pytest.mark.process
def test_cli_commands_in_the_readme_exist() -> None:
    for command in (["serve"], ["chat"], ["personas", "check"], ["usage"]):
        assert f"bot {' '.join(command)}" in README
        result = subprocess.run(
            [sys.executable, "-m", "bot", *command, "--help"],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert result.returncode == 0, result.stderr
        assert "--config" in result.stdout
