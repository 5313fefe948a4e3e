"""The README's sessions API example, run as written: `bot api-key new`, then its curl commands."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from bot.runtime.app import App
from tests.conftest import make_config

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parent.parent
SECTION = (ROOT / "README.md").read_text().split("## The sessions API\n", 1)[1].split("\n## ", 1)[0]


def _commands(block: str) -> list[str]:
    """The block's commands: comments dropped, `\\` continuations joined."""
    lines = [line for line in block.splitlines() if not line.startswith("#")]
    return [c.strip() for c in "\n".join(lines).replace("\\\n", " ").splitlines() if c.strip()]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
async def test_the_readme_example_works_as_written(tmp_path: Path) -> None:
    blocks = re.findall(r"```sh\n(.*?)```", SECTION, re.S)
    [make_key] = _commands(blocks[0])
    assert make_key.startswith(".venv/bin/bot api-key new --id my-site")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *make_key.split()[1:],
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    made, _ = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0
    printed = made.decode()
    key = re.search(r"gk_\S+", printed)
    digest = re.search(r"sha256: ([0-9a-f]{64})", printed)
    assert key and digest, printed
    config_text = re.findall(r"```yaml\n(.*?)```", SECTION, re.S)[0]
    assert '{id: my-site, sha256: "${API_KEY_SHA256}"}' in config_text
    keys = [{"id": "my-site", "sha256": digest[1]}]
    provider = ScriptedProvider(
        [Reply(calls=[("get_current_datetime", {})]), Reply("It is 14:05.")]
    )
    config = make_config(tmp_path, channels={"api": {"enabled": True, "keys": keys}})
    async with App(config, base_dir=tmp_path, provider=provider) as app:
        create, ask = _commands(blocks[1])

        async def curl(command: str) -> str:
            command = command.replace("http://127.0.0.1:8080", app.url)
            process = await asyncio.create_subprocess_exec(
                "bash",
                "-c",
                command,
                env={"KEY": key[0], "PATH": "/usr/bin:/bin"},
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await asyncio.wait_for(process.communicate(), 20)
            assert process.returncode == 0, command
            return out.decode()

        session = json.loads(await curl(create))
        assert session["user_id"] == "42"
        stream = await curl(ask.replace("s_9f…", session["id"]))
    events = re.findall(r"^event: (\S+)$", stream, re.M)
    assert events[0] == "message.created" and events[-1] == "message.completed"
    assert "tool.started" in events
    assert '"text":"It is 14:05."' in stream and "id: 1\n" in stream
