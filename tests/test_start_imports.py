"""A start imports only the SDKs its config uses: each costs up to a second of start-up (aiogram,
the MCP SDK, openai, redis), so the embedded defaults must not pay for a channel that is off.

The child process runs the start path of `bot serve` (the CLI module, then `App` built from the
config and started on the embedded defaults) and prints what it imported. Behaviour, not speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parent.parent
SDKS: tuple[str, ...] = (
    "aiogram",
    "slack_bolt",
    "slack_sdk",
    "lark_oapi",
    "asyncpg",
    "redis",
    "openai",
    "anthropic",
)
SDKS += ("mcp", "PIL", "pypdf")
CHILD = """
import asyncio, json, sys
from pathlib import Path
from bot.runtime import cli  # the command's own imports
from bot.runtime.app import App
from bot.runtime.config import load_config

async def start(started):
    app = App(load_config(None, port=0), base_dir=Path.cwd())
    if started:
        async with app:
            await asyncio.sleep(0.2)  # the channels' and the supervisor's first steps run

asyncio.run(start(sys.argv[1] == "start"))
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in sys.argv[2:])))
"""


def _imported(folder: Path, config: dict[str, Any] | None, start: bool, **env: str) -> set[str]:
    if config is not None:
        (folder / "config.yaml").write_text(json.dumps(config))
    result = subprocess.run(
        [sys.executable, "-c", CHILD, "start" if start else "build", *SDKS],
        cwd=folder,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return {name.split(".")[0] for name in json.loads(result.stdout.splitlines()[-1])}


@pytest.mark.timeout(300)
def test_the_embedded_defaults_start_without_any_sdk(tmp_path: Path) -> None:
    # no config file, no keys: the README's run command (the offline model, the web socket)
    assert _imported(tmp_path, None, start=True) == set()


CASES: dict[str, tuple[dict[str, Any], dict[str, str], str]] = {
    "telegram": (
        {"channels": {"telegram": {"enabled": True}}},
        {"TELEGRAM_BOT_TOKEN": "1:x"},
        "aiogram",
    ),
    "redis": ({"redis": {"url": "redis://127.0.0.1:1/0"}}, {}, "redis"),
    "mcp": ({"mcp": {"servers": {"files": {"command": "true"}}}}, {}, "mcp"),
    "stt": ({"stt": {"base_url": "http://127.0.0.1:1/v1"}}, {}, "openai"),
    "openai": ({"llm": {"provider": "openai"}}, {"OPENAI_API_KEY": "sk-x"}, "openai"),
    "anthropic": ({}, {"ANTHROPIC_API_KEY": "sk-ant-x"}, "anthropic"),
}
# a model that takes images also brings Pillow in (content/images.py prepares what it is sent)
ALSO = {"openai": {"PIL"}, "anthropic": {"PIL"}}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", CASES)
def test_a_part_that_is_on_imports_its_sdk_alone(tmp_path: Path, case: str) -> None:
    """The other side: what the config turns on is imported (built, not started: no network),
    and nothing else is."""
    config, env, sdk = CASES[case]
    imported = _imported(tmp_path, config, start=False, **env)
    assert imported == {sdk, *ALSO.get(case, ())}


LARK_CHILD = """
import json, sys
from adapters.feishu import sdk  # what the Feishu channel imports of lark-oapi
used = sorted(name for name in sys.modules if name.startswith("lark_oapi"))
import lark_oapi  # code that wants the whole SDK still gets it, when it asks for a name
whole = lark_oapi.Client is not None and lark_oapi.api.im.v1.CreateImageRequest
print(json.dumps({"used": used, "same": whole is sdk.CreateImageRequest,
                  "all": sum(name.startswith("lark_oapi") for name in sys.modules)}))
"""


@pytest.mark.timeout(300)
def test_feishu_imports_the_lark_modules_it_uses_not_every_api(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", LARK_CHILD],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.splitlines()[-1])
    used = set(seen["used"])
    assert "lark_oapi.client" not in used and "lark_oapi.api.drive.v1.resource" not in used
    assert {"lark_oapi.ws.client", "lark_oapi.api.im.v1.resource.image"} <= used
    assert len(used) * 5 < seen["all"]  # the rest of the SDK came with `lark_oapi.Client`
    assert seen["same"]
