"""The answer's media, end to end: a background specialist's chart reaches the answer that
delivers its result (and the model sees it), and the answer's media are kept with the turn, so
the stored transcript (the widget's reload) shows them beside the answer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from adapters.base import ChatRef, InboundMessage
from agent.providers.scripted import Reply, ScriptedProvider
from agent.types import ModelRequest
from bot.runtime.app import App
from content.parts import BlobRef, ImagePart
from tests.conftest import make_config
from tests.test_parts_pipeline import MediaChannel, chart_registry
from tools.builtin import builtin_registry

CHAT = ChatRef("fake", "dm-1")
COORDINATOR = (
    "---\nname: default\ndescription: asks specialists\ntools: [AgentTool, chart]\n---\n"
    "You coordinate.\n"
)
CHARTER = "---\nname: charter\ndescription: draws charts\ntools: [chart]\n---\nYou are CHARTER.\n"
TASK = "Draw the sales chart for the last quarter and say in one line what it shows."


def routed(**scripts: list[Reply]) -> Callable[[ModelRequest], Reply]:
    """Each persona answers from its own script (the specialist's prompt names it)."""

    def answer(request: ModelRequest) -> Reply:
        who = "charter" if "CHARTER" in request.system else "default"
        return scripts[who].pop(0)

    return answer


@pytest.fixture
async def app(
    tmp_path: Path,
) -> AsyncIterator[tuple[App, MediaChannel, ScriptedProvider, list[BlobRef]]]:
    made: list[BlobRef] = []
    holder: list[App] = []
    background = {"description": "sales chart", "subagent_type": "charter", "prompt": TASK}
    provider = ScriptedProvider(
        routed(
            default=[
                Reply(calls=[("AgentTool", background | {"background": True})]),
                Reply("I asked for the chart; it will follow."),
                Reply("Here is the sales chart: sales grew."),
            ],
            charter=[Reply(calls=[("chart", {"title": "sales"})]), Reply("Sales grew 12%.")],
        )
    )
    registry = builtin_registry()
    charts = chart_registry(made, lambda: holder[0])
    registry.add(charts.get("chart"))  # type: ignore[arg-type]
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "default.md").write_text(COORDINATOR)
    (folder / "charter.md").write_text(CHARTER)
    channel = MediaChannel()
    config = make_config(tmp_path, personas={"dirs": [str(folder)]})
    kwargs = {"provider": provider, "registry": registry, "channels": [channel]}
    async with App(config, base_dir=tmp_path, web_server=False, **kwargs) as running:
        holder.append(running)
        yield running, channel, provider, made


async def test_a_background_specialists_chart_reaches_the_answer_that_delivers_it(
    app: tuple[App, MediaChannel, ScriptedProvider, list[BlobRef]],
) -> None:
    running, channel, provider, made = app
    await running.gateway.handle(InboundMessage(CHAT, "u1", "chart please", "e1", "m-e1"))
    await provider.wait_requests(5)  # both coordinator turns, the specialist's two rounds
    await running.gateway.wait_idle()
    chart = (ImagePart(made[0]),)
    notice = provider.requests[-1].messages[-1]
    assert "<task-notification" in notice.content and notice.parts == chart  # the model sees it
    assert channel.shown()[-1] == "Here is the sales chart: sales grew."
    assert channel.media[-1] == chart  # the delivering answer carries the chart
    assert sum(1 for parts in channel.media if parts) == 1  # once, and not with the first answer
