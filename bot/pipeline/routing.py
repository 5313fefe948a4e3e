"""The routing step: the access policy, then the command table, then the conversation's mode.

`Router.route` runs before the event is claimed and reads nothing (the access policy and the
table are pure), so the gateway can claim and queue a message for the model in one step
(Redis: one script). What it cannot know without a read, the conversation's mode, is decided
where the message is queued: a conversation in `bot` mode takes it into a turn; in any other
mode its `ModeHandler` takes it instead and the model never sees it. The next features are one
more `Command` in the table (`/human`, `/model`) or one more `ModeHandler`, not a change here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from adapters.base import InboundMessage
from content.texts import DEFAULT_LANGUAGE, has, t

# "pair": a direct message from a sender the policy does not know, on an instance that pairs
# (bot/pipeline/pairing.py): allowed once an admin approved the sender's code
Access = Literal["allow", "ignore", "refuse", "pair"]
Reply = Callable[[InboundMessage, str], Awaitable[None]]  # the gateway's answer in the chat


class AccessPolicy(Protocol):
    def check(self, message: InboundMessage) -> Access: ...


@dataclass(frozen=True, slots=True)
class DefaultAccess:
    """Allowlisted users only (when a list is set); in groups, only messages addressed to the bot."""

    allowed_users: frozenset[str] = frozenset()
    group_reply: Literal["mention", "all"] = "mention"

    def check(self, message: InboundMessage) -> Access:
        # Ignore first: group chatter not addressed to the bot must not draw a refusal each time.
        if message.is_group and self.group_reply == "mention" and not message.mentioned:
            return "ignore"
        if self.allowed_users and message.user_id not in self.allowed_users:
            return "refuse"
        return "allow"


class Command(Protocol):
    """A command the gateway answers itself: `/<name>`, with its line in `/help`."""

    @property
    def name(self) -> str: ...

    @property
    def help(self) -> str:
        """What it does, in a few words (after "/name — " in the list): a key of the text
        catalogues (content/locales/), said in the conversation's language, or plain text."""
        ...

    async def run(self, message: InboundMessage, reply: Reply) -> None:
        """`message.language` is the conversation's language here (the gateway sets it)."""
        ...


class ModeHandler(Protocol):
    """What becomes of a message whose conversation is not in `bot` mode (its event is claimed
    already): recorded, acknowledged as the mode says — never a model call."""

    async def take(self, message: InboundMessage, mode: str, reply: Reply) -> None: ...


HELP_LINE: Final = "command.help_help"  # a text key (content/locales/)


def help_text(lines: Iterable[tuple[str, str]], language: str | None = DEFAULT_LANGUAGE) -> str:
    """`/help`'s answer, from (name, line) pairs in the table's order; a line that is a text
    key is said in `language`."""
    shown = "\n".join(
        f"/{name} — {t(language, line) if has(line) else line}" for name, line in lines
    )
    head, foot = t(language, "command.help_head"), t(language, "command.help_foot")
    return f"{head}\n{shown}\n\n{foot}"


@dataclass(frozen=True, slots=True)
class HelpCommand:
    lines: tuple[tuple[str, str], ...]  # (name, line) of each command, in the table's order
    name: str = "help"
    help: str = HELP_LINE

    async def run(self, message: InboundMessage, reply: Reply) -> None:
        await reply(message, help_text(self.lines, message.language))


class CommandTable:
    """The commands by name, in order, `/help` last and generated from the others' lines. A
    later command of a name already taken replaces it (a feature refining `/stop`, say)."""

    def __init__(self, commands: Iterable[Command]) -> None:
        by_name: dict[str, Command] = {}
        for command in commands:
            by_name[command.name] = command
        lines = [(c.name, c.help) for c in by_name.values()] + [("help", HELP_LINE)]
        by_name["help"] = HelpCommand(tuple(lines))
        self._by_name = by_name

    def get(self, name: str | None) -> Command | None:
        return None if name is None else self._by_name.get(name)

    def names(self) -> list[str]:
        return list(self._by_name)


@dataclass(frozen=True, slots=True)
class Route:
    """Where a message goes: nowhere, a refusal, a command, or its conversation (whose mode
    decides between a turn and its `ModeHandler`)."""

    to: Literal["ignore", "refuse", "pair", "command", "conversation"]
    command: Command | None = None


IGNORE: Final = Route("ignore")
REFUSE: Final = Route("refuse")
PAIR: Final = Route("pair")  # the pairing gate first, then `Router.allowed`
CONVERSATION: Final = Route("conversation")


class Router:
    def __init__(self, access: AccessPolicy, commands: CommandTable) -> None:
        self.access = access
        self.commands = commands

    def route(self, message: InboundMessage) -> Route:
        decision = self.access.check(message)
        if decision != "allow":
            return {"ignore": IGNORE, "pair": PAIR}.get(decision, REFUSE)
        return self.allowed(message)

    def allowed(self, message: InboundMessage) -> Route:
        """Where a message the access policy admits goes (a paired sender's, after the gate)."""
        command = self.commands.get(message.command)
        if command is not None:
            return Route("command", command)
        if (
            message.text.strip()
            or message.attachments
            or message.parts
            or message.action is not None
        ):
            return CONVERSATION
        return IGNORE  # nothing to answer (an empty edit, a sticker a channel let through)
