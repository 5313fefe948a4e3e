"""The gateway's own texts in the conversation's language: the widget's `hello.language`,
Telegram's `language_code`, the conversation's kept language, the persona's, `gateway.language`.
Through a running app, a real web socket client and aiogram against the fake Bot API."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession

from adapters.base import ChatRef, InboundMessage
from agent.providers.scripted import Reply, ScriptedProvider
from bot.pipeline.conversation_state import MemoryConversationState
from bot.pipeline.language import SETTING, ConversationLanguage
from bot.runtime.app import App
from bot.runtime.config import ConfigError
from content.texts import t
from tests.conftest import Running, connect, make_config
from tests.telegram_fake import TOKEN, FakeBotAPI

NO_TURNS = {"per_user": {"turns_per_day": 0}}  # every message refused before the model


def _message(text: str, event: str, language: str | None = None) -> InboundMessage:
    return InboundMessage(ChatRef("websocket", "v:1"), "v:1", text, event, language=language)


async def test_the_told_language_wins_is_kept_and_outlives_a_message_without_one() -> None:
    states = MemoryConversationState()
    languages = ConversationLanguage(states, default="fr", persona_language=lambda c: "zh")
    assert await languages.of(_message("hi", "e1")) == "zh"  # the persona's, before any told
    assert await languages.of(_message("hi", "e2", "de-AT")) == "de"
    assert (await states.get("websocket:v:1")).settings[SETTING] == "de"
    assert await languages.of(_message("hi", "e3")) == "de"  # kept for the conversation
    assert await languages.of(_message("hi", "e4", "pt-BR")) == "de"  # no texts: not told
    assert await languages.of_conversation("websocket:v:1", "websocket") == "de"
    assert await languages.of_conversation("websocket:v:other", "websocket") == "zh"
    plain_states = MemoryConversationState()
    plain = ConversationLanguage(plain_states, default="fr")
    assert await plain.of(_message("hi", "e5", "xx")) == "fr"  # unknown → gateway.language
    assert await plain.of(_message("hi", "e6", "fr-BE")) == "fr"
    # told what it would get anyway: nothing kept (a state is a row or a Redis hash for good)
    assert (await plain_states.get("websocket:v:1")).version == 0


def test_gateway_language_must_be_one_we_have_texts_for(tmp_path: Path) -> None:
    assert make_config(tmp_path, gateway={"language": "de-DE"}).gateway.language == "de"
    with pytest.raises(ConfigError, match="gateway.language"):
        make_config(tmp_path, gateway={"language": "tlh"})


async def test_a_german_widget_gets_german_gateway_texts(
    running: Running, session: ClientSession
) -> None:
    hold = asyncio.Event()
    provider = ScriptedProvider([Reply("never shown", wait=hold)])
    app = await running(provider)
    client = await connect(session, app)
    await client.hello(language="de-DE")

    started = await client.ask("/new")
    assert started["text"] == "Neue Unterhaltung begonnen. Was kann ich für Sie tun?"
    assert (await client.ask("/stop"))["text"] == t("de", "command.nothing_to_stop")
    assert (await client.ask("/help"))["text"].startswith("**Befehle**\n/new — eine neue")

    await client.send(type="message", text="Wie spät ist es?", client_message_id="c_1")
    placeholder = await client.until_type("message.created")
    assert placeholder["text"] == "Ich denke nach…"
    await provider.wait_requests(1)
    await client.send(type="stop")
    stopped = await client.until_type("message.completed")
    assert (stopped["message_id"], stopped["text"]) == (placeholder["message_id"], "⏹ Angehalten.")

    # a reload without the field: the conversation keeps German
    again = await connect(session, app)
    await again.hello()
    assert (await again.ask("/new"))["text"] == t("de", "command.started_new")


async def test_a_german_widget_over_its_quota_is_refused_in_german(
    running: Running, session: ClientSession
) -> None:
    provider = ScriptedProvider([])
    app = await running(provider, quotas=NO_TURNS)
    client = await connect(session, app)
    await client.hello(language="de")
    refused = await client.ask("Hallo")
    assert refused["text"] == (
        "Entschuldigung — Sie haben das heutige Limit erreicht (0 Nachrichten am Tag); es wird "
        "um 00:00 UTC zurückgesetzt. Bitte senden Sie Ihre Nachricht danach noch einmal."
    )
    assert provider.requests == []  # no model call


async def test_a_language_we_lack_gets_the_personas_then_the_gateways(
    running: Running, session: ClientSession, tmp_path: Path
) -> None:
    folder = tmp_path / "personas"
    folder.mkdir()
    (folder / "default.md").write_text(
        "---\nname: default\ndescription: d\ntools: []\nlanguage: fr\n---\nYou help.\n"
    )
    app = await running(
        ScriptedProvider([]), personas={"dirs": [str(folder)]}, gateway={"language": "zh"}
    )
    client = await connect(session, app)
    await client.hello(language="pt-BR")
    assert (await client.ask("/new"))["text"] == t("fr", "command.started_new")

    plain = await running(ScriptedProvider([]), gateway={"language": "zh"})
    visitor = await connect(session, plain)
    await visitor.hello(language="tlh")
    assert (await visitor.ask("/new"))["text"] == "已开始新的对话。有什么可以帮您？"


async def test_a_language_that_is_not_a_string_is_a_bad_field(
    running: Running, session: ClientSession
) -> None:
    app = await running(ScriptedProvider([]))
    client = await connect(session, app)
    await client.send(type="hello", language=["de"])
    error = await client.until_type("error")
    assert error["code"] == "bad_field" and "language" in error["message"]


# -- Telegram: the sender's language_code ------------------------------------------------------


@pytest.fixture
async def fake() -> AsyncIterator[FakeBotAPI]:
    api = FakeBotAPI(interval_s=0.05)
    await api.start()
    yield api
    await api.close()


@pytest.fixture
async def apps() -> AsyncIterator[list[App]]:
    started: list[App] = []
    yield started
    for app in started:
        await app.stop()


async def _telegram(
    tmp_path: Path, fake: FakeBotAPI, apps: list[App], **sections: Any
) -> tuple[App, ScriptedProvider]:
    channel = {"enabled": True, "token": TOKEN, "api_base": fake.url}
    config = make_config(tmp_path, channels={"telegram": channel}, **sections)
    provider = ScriptedProvider([])
    app = App(config, base_dir=tmp_path, provider=provider)
    await app.__aenter__()
    apps.append(app)
    await fake.wait_for(lambda: any(c.method == "getupdates" for c in fake.calls))
    return app, provider


def _said(fake: FakeBotAPI, chat: int) -> list[str]:
    return [fake.messages[(chat, c.message_id)] for c in fake.ok(chat, "sendMessage")]  # type: ignore[index]


async def test_a_telegram_user_with_language_code_fr_gets_french(
    tmp_path: Path, fake: FakeBotAPI, apps: list[App]
) -> None:
    app, provider = await _telegram(tmp_path, fake, apps, quotas=NO_TURNS)
    fake.push(fake.message(42, "/new", language_code="fr"))
    await fake.wait_for(lambda: len(_said(fake, 42)) == 1)
    fake.push(fake.message(42, "Bonjour"))  # no language_code this time: the kept one
    await fake.wait_for(lambda: len(_said(fake, 42)) == 2 and "…" not in _said(fake, 42)[1])
    await app.gateway.wait_idle()
    assert _said(fake, 42) == [
        "Nouvelle conversation commencée. Que puis-je faire pour vous ?",
        "Désolé — vous avez atteint la limite du jour (0 message par jour) ; elle est remise à "
        "zéro à 00:00 UTC. Veuillez renvoyer votre message après cette heure.",
    ]
    assert provider.requests == []


async def test_a_telegram_language_we_lack_gets_the_default(
    tmp_path: Path, fake: FakeBotAPI, apps: list[App]
) -> None:
    await _telegram(tmp_path, fake, apps, gateway={"language": "de"})
    fake.push(fake.message(7, "/new", language_code="pt-br"))
    fake.push(fake.message(8, "/new", language_code="en"))
    await fake.wait_for(lambda: len(_said(fake, 7)) == 1 and len(_said(fake, 8)) == 1)
    assert _said(fake, 7) == [t("de", "command.started_new")]
    assert _said(fake, 8) == ["Started a new conversation. What can I do for you?"]


async def test_a_sticker_from_a_german_telegram_user_is_declined_in_german(
    tmp_path: Path, fake: FakeBotAPI, apps: list[App]
) -> None:
    sticker = {"file_id": "st", "file_unique_id": "st", "type": "regular", "width": 512}
    sticker |= {"height": 512, "is_animated": False, "is_video": False}
    await _telegram(tmp_path, fake, apps)
    fake.push(fake.message(42, None, language_code="de", sticker=sticker))
    await fake.wait_for(lambda: len(_said(fake, 42)) == 1)
    assert _said(fake, 42) == [
        "Entschuldigung — Sticker kann ich noch nicht lesen. Senden Sie mir Text, ein Foto, "
        "ein Dokument oder eine Sprachnachricht."
    ]
