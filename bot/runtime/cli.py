"""The `bot` command: serve, chat in a terminal, check personas, read sessions and usage,
decide pairing codes."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from agent.providers.base import ProviderConfigError
from bot.runtime.config import Config, ConfigError, config_folder, load_config
from bot.runtime.config.choices import model_prices
from bot.runtime.event_loop import loop_factory, loop_name

log = logging.getLogger("bot")
SETTLE_HEAP_AFTER_S = 1.0  # after the channels have connected (or failed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "command", None) != "serve":
        gc.enable()  # off since the entry point (bot/runtime/command.py); `serve` turns it on
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return _run(args)
    # The one place a config or start error becomes one line: a bad value names its key.
    except (ConfigError, ProviderConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.command == "api-key":  # needs no config
        return _api_key(args)
    host, port = getattr(args, "host", None), getattr(args, "port", None)
    config = load_config(args.config, host=host, port=port)
    base_dir = config_folder(args.config)
    if args.command == "personas":
        return _personas_check(config, base_dir)
    if args.command == "sessions":
        return asyncio.run(_sessions(config, base_dir, args))
    if args.command == "usage":
        return asyncio.run(_usage(config, base_dir, args))
    if args.command == "pairing":
        return asyncio.run(_pairing(config, base_dir, args))
    if args.command == "mcp":
        from bot.runtime.mcp_cli import mcp_command

        return asyncio.run(mcp_command(config, base_dir, args))
    _setup_logging(config, _chat_log(config, base_dir) if args.command == "chat" else None)
    runner = (
        _serve(config, base_dir)
        if args.command == "serve"
        else _chat(config, base_dir, args.persona)
    )
    factory = loop_factory(config.server.event_loop) if args.command == "serve" else None
    with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=factory) as running:
        return running.run(runner)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bot", description="Multi-channel chat bot gateway.")
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="run every enabled channel and the web server")
    serve.add_argument("--host", help="address to bind (default: server.host, or $BOT_HOST)")
    serve.add_argument(
        "--port", type=_port, help="port to bind, 0 for any free one (server.port, or $BOT_PORT)"
    )
    chat = commands.add_parser("chat", help="talk to the bot in this terminal")
    chat.add_argument("--persona", default="default", help="persona to talk to (default: default)")
    personas = commands.add_parser("personas", help="persona files")
    personas_commands = personas.add_subparsers(dest="personas_command", required=True)
    check = personas_commands.add_parser("check", help="validate every persona file")
    sessions = commands.add_parser("sessions", help="read stored sessions and their tool calls")
    sessions_commands = sessions.add_subparsers(dest="sessions_command", required=True)
    listing = sessions_commands.add_parser("list", help="the newest conversations' sessions")
    listing.add_argument(
        "--limit", type=_at_least_one, default=20, help="how many sessions (default: 20)"
    )
    show = sessions_commands.add_parser("show", help="one session's tree with every tool call")
    show.add_argument("session_id", help="a session id (or its first characters)")
    mcp = commands.add_parser("mcp", help="the MCP tool servers of mcp.servers")
    mcp_commands = mcp.add_subparsers(dest="mcp_command", required=True)
    mcp_list = mcp_commands.add_parser("list", help="connect to each server; print its tools")
    mcp_list.add_argument("name", nargs="?", help="one server (default: every enabled one)")
    mcp_check = mcp_commands.add_parser("check", help="exit 1 if a server is down, saying why")
    mcp_check.add_argument("name", nargs="?", help="one server (default: every enabled one)")
    api_key = commands.add_parser("api-key", help="keys for the sessions API (channels.api)")
    api_key_commands = api_key.add_subparsers(dest="api_key_command", required=True)
    new_key = api_key_commands.add_parser("new", help="make a key; print it and its config entry")
    new_key.add_argument("--id", default="default", help="the key's name in channels.api.keys")
    api_key_commands.add_parser("hash", help="print the sha256 of a key read from stdin")
    usage = commands.add_parser("usage", help="model calls, tokens and cost from usage.prices")
    usage.add_argument("--since", help="from this UTC date on (YYYY-MM-DD); default: all")
    usage.add_argument("--by", choices=["user", "model", "channel", "day"], default="model")
    usage.add_argument("--json", action="store_true", help="one JSON object, for scripts")
    pairing = _pairing_parsers(commands)
    for command in (serve, chat, check, listing, show, usage, mcp_list, mcp_check, *pairing):
        command.add_argument("--config", help="config file (default: ./config.yaml if present)")
    return parser


def _pairing_parsers(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> list[argparse.ArgumentParser]:
    """The `pairing` command's parsers; those that read the config are returned."""
    pairing = commands.add_parser("pairing", help="approve or deny unknown senders' pairing codes")
    sub = pairing.add_subparsers(dest="pairing_command", required=True)
    listing = sub.add_parser("list", help="pending codes (and, with --approved, who is approved)")
    listing.add_argument("--approved", action="store_true", help="list the approved senders")
    approve = sub.add_parser("approve", help="let the code's sender talk to the bot; they are told")
    approve.add_argument("code", help="the code the sender was given (case and dashes ignored)")
    deny = sub.add_parser("deny", help="refuse the code; its sender gets no new one for deny_s")
    deny.add_argument("code", help="the code the sender was given")
    revoke = sub.add_parser("revoke", help="forget an approval: the sender pairs anew")
    revoke.add_argument("channel", help="the channel instance (as `list --approved` shows it)")
    revoke.add_argument("user", help="the sender's user id there")
    return [listing, approve, deny, revoke]


def _api_key(args: argparse.Namespace) -> int:
    from adapters.api.keys import hash_key, new_key

    if args.api_key_command == "hash":
        key = sys.stdin.readline().strip()
        if not key:
            print(
                'error: give the key on stdin, e.g. echo "$KEY" | bot api-key hash', file=sys.stderr
            )
            return 2
        print(hash_key(key))
        return 0
    key = new_key()
    print(f"key (give it to the client; it is not stored anywhere): {key}")
    print("for config.yaml, under channels.api.keys:")
    print(f"  - {{id: {args.id}, sha256: {hash_key(key)}}}")
    return 0


class _Version(argparse.Action):
    """`--version`, looked up only when asked (importlib.metadata and the lookup: ~50 ms)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(f"{parser.prog} {_version()}")
        parser.exit()


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("chat-gateway")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "(not installed)"


def _at_least_one(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {number}")
    return number


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0..65535, got {text!r}")
    return int(text)


def _setup_logging(config: Config, log_file: Path | None) -> None:
    """To stderr; for `bot chat` to a file instead, so log lines never cut into the conversation."""
    from bot.runtime.logs import secret_env_values, secret_values, setup_logging

    secrets = [*secret_values(config), *secret_env_values(os.environ)]
    setup_logging(config.log.level, config.log.format, secrets=secrets, file=log_file)


def _chat_log(config: Config, base_dir: Path) -> Path:
    """`chat.log` beside the database (in the config's folder for an in-memory or a server one)."""
    if config.storage.url or config.storage.path == ":memory:":
        return base_dir / "chat.log"
    path = Path(config.storage.path)
    return (path if path.is_absolute() else base_dir / path).parent / "chat.log"


async def _serve(config: Config, base_dir: Path) -> int:
    # No cyclic collection until the app has started (`settle_heap` collects once and turns it
    # back on): importing the enabled channels' SDKs builds hundreds of thousands of objects,
    # and the collections they set off walked them again and again, a third of the start's CPU.
    gc.disable()
    try:
        return await _serve_app(config, base_dir)
    finally:
        gc.enable()  # settle_heap has, unless the start failed


async def _serve_app(config: Config, base_dir: Path) -> int:
    from bot.runtime.app import App
    from bot.runtime.heap import collect_young_periodically, settle_heap, sweep_periodically

    loop = asyncio.get_running_loop()
    log.info("event loop: %s (server.event_loop: %s)", loop_name(loop), config.server.event_loop)
    main_task = asyncio.current_task()
    assert main_task is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main_task.cancel)
    try:
        async with App(config, base_dir=base_dir) as app:
            # its full collection pauses the loop (0.2-0.5 s): not while the channels connect,
            # nor as they answer their platforms' first calls and /readyz's first 200
            await app.channels_started()
            await asyncio.sleep(SETTLE_HEAP_AFTER_S)
            settle_heap()
            sweeper = asyncio.create_task(
                sweep_periodically(busy=app.gateway.busy_here), name="heap-sweep"
            )
            young = asyncio.create_task(collect_young_periodically(), name="heap-young")
            try:
                with app.ops.collections_watched():  # each collection's pause in /metrics
                    await app.wait()
            finally:
                sweeper.cancel()
                young.cancel()
    except asyncio.CancelledError:
        log.info("stopped")
    except OSError as exc:
        log.error("cannot serve on %s:%s: %s", config.server.host, config.server.port, exc)
        return 1
    return 0


async def _chat(config: Config, base_dir: Path, persona: str) -> int:
    from adapters.terminal import TerminalChannel
    from bot.runtime.app import App

    terminal = TerminalChannel(wait_turn=lambda: app.gateway.wait_idle())
    app = App(config, base_dir=base_dir, channels=[terminal], persona=persona, web_server=False)
    keys = "Ctrl-C stops an answer, Ctrl-D quits" if terminal.interactive else "Ctrl-D to quit"
    terminal.greeting = (
        f"Chatting with {persona!r} on {app.provider.name} ({app.provider.model}). "
        f"{keys}, /help for commands. Log: {_chat_log(config, base_dir)}"
    )
    async with app:
        if persona not in app.personas.all():
            print(
                f"error: unknown persona {persona!r}; known: {sorted(app.personas.all())}",
                file=sys.stderr,
            )
            return 2
        await terminal.closed.wait()
        await app.gateway.wait_idle()
    return 0


def _personas_check(config: Config, base_dir: Path) -> int:
    from agent.personas import PersonaLibrary
    from tools.builtin import builtin_registry

    dirs = [base_dir / d for d in config.personas.dirs]
    library = PersonaLibrary(dirs, known_tools=builtin_registry().names())
    errors = library.check()
    for error in errors:
        print(error)
    if errors:
        print(f"{len(errors)} persona file(s) broken", file=sys.stderr)
        return 1
    library.load()
    for persona in library.all().values():
        for warning in persona.warnings:
            print(f"warning: {warning}")
    names = ", ".join(sorted(library.all()))
    print(f"ok: {len(library.all())} persona(s): {names}")
    return 0


def _database(config: Config, base_dir: Path) -> Path | None:
    """The config's SQLite file, if it exists (else the error is printed); with `storage.url`
    the path is not used, and whether the database answers shows when it is opened."""
    path = Path(config.storage.path)
    path = path if path.is_absolute() else base_dir / path
    if config.storage.url is None and not path.exists():
        print(f"error: no database at {path}; has the bot run with this config?", file=sys.stderr)
        return None
    return path


async def _usage(config: Config, base_dir: Path, args: argparse.Namespace) -> int:
    from bot.reports.usage import format_report, parse_since, usage_report
    from bot.storage import StorageError
    from bot.storage.backends import build_store

    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path = _database(config, base_dir)
    if path is None:
        return 2
    store = build_store(path, config.storage.url)
    try:
        async with store:
            prices = model_prices(config)  # `usage.prices` and each choice's `price`
            report = await usage_report(store, prices, by=(args.by,), since=since)
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.as_json(), indent=2) if args.json else format_report(report))
    return 0


async def _pairing(config: Config, base_dir: Path, args: argparse.Namespace) -> int:
    from bot.runtime.pairing_cli import pairing_command
    from bot.storage.backends import build_store

    path = _database(config, base_dir)
    if path is None:
        return 2
    return await pairing_command(config, build_store(path, config.storage.url), args)


async def _sessions(config: Config, base_dir: Path, args: argparse.Namespace) -> int:
    from bot.reports.sessions_view import list_sessions, show_session
    from bot.storage import StorageError
    from bot.storage.backends import build_store

    path = _database(config, base_dir)
    if path is None:
        return 2
    store = build_store(path, config.storage.url)
    try:
        await store.open()
    except StorageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.sessions_command == "list":
            print(await list_sessions(store, args.limit))
        else:
            print(await show_session(store, args.session_id))
    except (LookupError, StorageError) as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 1
    finally:
        await store.close()
    return 0
