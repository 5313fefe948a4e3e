"""config.yaml loading: defaults, `${VAR}` expansion, and one-line errors."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from adapters.access import AccessConfig
from bot.runtime.config import (
    Config,
    ConfigError,
    config_folder,
    config_keys,
    expand_env,
    load_config,
)

REPO_CONFIG = Path(__file__).resolve().parents[1] / "config.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text), env=env or {})
    message = str(caught.value)
    assert "\n" not in message
    return message


# --- defaults ---------------------------------------------------------------------------------


def test_no_file_gives_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(env={})
    assert config == Config()
    assert config.server.host == "127.0.0.1" and config.server.port == 8080
    assert config.storage.path == "data/bot.db"
    assert config.redis.url is None
    assert config.llm.provider == "auto" and config.llm.api_key == "" and config.llm.fallback == []
    assert config.agent.max_rounds == 8 and config.agent.context_budget_tokens == 24000
    assert config.personas.dirs == ["personas"]
    assert config.channels.websocket.enabled is True
    assert config.channels.websocket.allowed_origins == [
        "http://127.0.0.1:8080",
        "http://localhost:8080",
    ]
    assert config.channels.telegram[0].enabled is False and config.channels.telegram[0].token == ""


def test_no_path_reads_config_yaml_in_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "server: {port: 9000}\n")
    monkeypatch.chdir(tmp_path)
    assert load_config(env={}).server.port == 9000


def test_empty_file_and_empty_section_give_defaults(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, ""), env={}) == Config()
    # a section whose keys are all commented out parses as null
    assert load_config(write(tmp_path, "llm:\n  # provider: openai\n"), env={}) == Config()


def test_repo_config_yaml_equals_defaults(tmp_path: Path) -> None:
    empty = write(tmp_path, "")
    assert load_config(REPO_CONFIG, env={}) == load_config(empty, env={})


def test_repo_config_yaml_takes_secrets_from_env(tmp_path: Path) -> None:
    env = {"LLM_API_KEY": "k", "TELEGRAM_BOT_TOKEN": "1:t", "TELEGRAM_WEBHOOK_SECRET": "s"}
    config = load_config(REPO_CONFIG, env=env)
    assert config.llm.api_key == "k"
    assert config.channels.telegram[0].token == "1:t"
    assert config.channels.telegram[0].webhook_secret == "s"
    assert config == load_config(write(tmp_path, ""), env=env)


def test_config_is_frozen_and_repr_hides_secrets(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, ""), env={"TELEGRAM_BOT_TOKEN": "123:SECRET"})
    assert config.channels.telegram[0].token == "123:SECRET"
    assert "SECRET" not in repr(config)
    with pytest.raises(ValueError):
        config.server.port = 1  # type: ignore[misc]


# --- environment expansion --------------------------------------------------------------------


def test_expand_env_rules() -> None:
    env = {"SET": "v", "EMPTY": ""}
    assert expand_env("${SET}", env) == "v"
    assert expand_env("${UNSET}", env) == ""
    assert expand_env("${UNSET:-dflt}", env) == "dflt"
    assert expand_env("${EMPTY:-dflt}", env) == "dflt"
    assert expand_env("${SET:-dflt}", env) == "v"
    assert expand_env("${UNSET:-}", env) == ""
    assert expand_env("a-${SET}-b-${SET}", env) == "a-v-b-v"
    assert expand_env("$${SET}", env) == "${SET}"
    assert expand_env("cost $5 and $$ stay", env) == "cost $5 and $$ stay"


def test_expand_env_walks_nested_values_not_keys() -> None:
    env = {"A": "1"}
    data = {"${A}": ["${A}", {"k": "${A}"}, 7, None, True], "n": 3}
    assert expand_env(data, env) == {"${A}": ["1", {"k": "1"}, 7, None, True], "n": 3}


def test_expand_env_rejects_malformed_reference() -> None:
    with pytest.raises(ConfigError, match=r"^server\.host: bad reference at character 1 "):
        expand_env({"server": {"host": "${oops"}}, {})


def test_a_malformed_reference_does_not_repeat_the_value() -> None:
    with pytest.raises(ConfigError) as caught:
        expand_env({"llm": {"api_key": "sk-s3cret${"}}, {})
    assert str(caught.value).startswith("llm.api_key: bad reference at character 10 ")
    assert "s3cret" not in str(caught.value)


def test_file_values_expand(tmp_path: Path) -> None:
    text = """
server: {host: "${HOST}", port: "${PORT:-8081}"}
redis: {url: "${REDIS_URL}"}
gateway: {allowed_users: ["${ADMIN}", "u-${MISSING:-2}", "$${ADMIN}"]}
llm:
  fallback:
    - {provider: openai, api_key: "${OPENAI_KEY}"}
channels: {telegram: {enabled: "${TG_ON:-false}"}}
"""
    env = {"HOST": "0.0.0.0", "ADMIN": "42", "OPENAI_KEY": "sk-1"}
    config = load_config(write(tmp_path, text), env=env)
    assert config.server.host == "0.0.0.0"
    assert config.server.port == 8081
    assert config.redis.url is None  # an unset ${REDIS_URL} is no Redis, not a bad URL
    assert config.gateway.allowed_users == ["42", "u-2", "${ADMIN}"]
    assert config.llm.fallback[0].api_key == "sk-1"
    assert config.channels.telegram[0].enabled is False


def test_expanded_value_cannot_inject_yaml(tmp_path: Path) -> None:
    env = {"HOST": "x\nllm: {provider: openai}", "PORT": "1}, storage: {path: /etc"}
    config = load_config(write(tmp_path, "server: {host: '${HOST}'}\n"), env=env)
    assert config.server.host == env["HOST"]
    assert config.llm.provider == "auto"


def test_env_sourced_secrets_default_from_env_but_file_wins(tmp_path: Path) -> None:
    env = {"LLM_API_KEY": "from-env", "TELEGRAM_BOT_TOKEN": "t", "TELEGRAM_WEBHOOK_SECRET": "s"}
    config = load_config(write(tmp_path, "llm: {model: m}\n"), env=env)
    assert config.llm.api_key == "from-env"
    assert config.channels.telegram[0].token == "t"
    assert config.channels.telegram[0].webhook_secret == "s"
    config = load_config(write(tmp_path, "llm: {api_key: ''}\n"), env=env)
    assert config.llm.api_key == ""
    path = write(tmp_path, "llm: {api_key: '${OTHER_KEY}'}\n")
    assert load_config(path, env={"OTHER_KEY": "o"}).llm.api_key == "o"


def test_literal_secret_in_file_is_warned(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="bot.runtime.config"):
        load_config(write(tmp_path, "channels: {telegram: {token: '123:ABC'}}\n"), env={})
        load_config(write(tmp_path, "channels: {telegram: {token: '${T}'}}\n"), env={})
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "channels.telegram.token" in warned[0]
    assert "123:ABC" not in warned[0]


def test_numbers_load_as_strings_where_text_is_expected(tmp_path: Path) -> None:
    path = write(tmp_path, "channels: {telegram: {allowed_users: [123, 456]}}\n")
    config = load_config(path, env={})
    assert config.channels.telegram[0].allowed_users == ["123", "456"]


# --- errors -----------------------------------------------------------------------------------


def test_unknown_top_level_key(tmp_path: Path) -> None:
    assert error_of(tmp_path, "servr: {}\n") == (
        "config.yaml: servr: unknown key; expected one of: "
        "admin, agent, approvals, channels, gateway, handoff, knowledge, llm, log, mcp, media,"
        " pairing, personas, quotas, redis, schedules, server, storage, stt, tools, usage"
    ).replace("config.yaml", str(tmp_path / "config.yaml"))


def test_unknown_nested_key(tmp_path: Path) -> None:
    message = error_of(tmp_path, "agent:\n  max_round: 3\n")
    assert message == (
        f"{tmp_path / 'config.yaml'}: agent.max_round: unknown key; expected one of: "
        "context_budget_tokens, default_timezone, max_rounds, max_workers, max_workers_total, "
        "resume_max_age_s, resume_max_attempts, tool_timeout_s, turn_timeout_s, "
        "worker_result_chars, worker_timeout_s"
    )
    message = error_of(tmp_path, "channels: {websocket: {origins: []}}\n")
    assert message.endswith(
        ": channels.websocket.origins: unknown key; expected one of: allowed_chats, "
        "allowed_origins, allowed_users, client_address_header, dm_policy, enabled, group_reply, "
        "heartbeat_s, hello_timeout_s, identity_secret, max_connections, max_connections_per_address, max_frame_bytes, "
        "max_text_chars, path, persona, rate_limit_per_minute, replay_events"
    )


def test_unknown_key_in_list_item(tmp_path: Path) -> None:
    message = error_of(tmp_path, "llm: {fallback: [{provider: offline, modle: x}]}\n")
    assert message.endswith(
        ": llm.fallback.0.modle: unknown key; expected one of: api_key, base_url, media, model, provider"
    )


def test_bad_literal(tmp_path: Path) -> None:
    assert error_of(tmp_path, "llm: {provider: antrhopic}\n").endswith(
        ": llm.provider: expected one of 'auto', 'anthropic', 'openai', 'offline', got 'antrhopic'"
    )
    assert error_of(tmp_path, "llm: {fallback: [{provider: auto}]}\n").endswith(
        ": llm.fallback.0.provider: expected one of 'anthropic', 'openai', 'offline', got 'auto'"
    )


def test_bad_int(tmp_path: Path) -> None:
    assert error_of(tmp_path, "server: {port: eighty}\n").endswith(
        ": server.port: expected an integer between 0 and 65535, got 'eighty'"
    )
    assert error_of(tmp_path, "server: {port: '${PORT}'}\n", {"PORT": "x1"}).endswith(
        ": server.port: expected an integer between 0 and 65535, got 'x1'"
    )


def test_out_of_range(tmp_path: Path) -> None:
    assert error_of(tmp_path, "server: {port: 70000}\n").endswith(
        ": server.port: expected an integer between 0 and 65535, got 70000"
    )
    assert error_of(tmp_path, "agent: {context_budget_tokens: 10}\n").endswith(
        ": agent.context_budget_tokens: expected an integer >= 1000, got 10"
    )
    assert error_of(tmp_path, "agent: {tool_timeout_s: 0}\n").endswith(
        ": agent.tool_timeout_s: expected a number > 0, got 0"
    )


def test_other_type_errors(tmp_path: Path) -> None:
    assert error_of(tmp_path, "server: [1, 2]\n").endswith(
        ": server: expected a mapping, got a list"
    )
    assert error_of(tmp_path, "personas: {dirs: personas}\n").endswith(
        ": personas.dirs: expected a list, got 'personas'"
    )
    assert error_of(tmp_path, "gateway: {allowed_users: [a, null]}\n").endswith(
        ": gateway.allowed_users.1: expected a string, got null"
    )
    assert error_of(tmp_path, "channels: {websocket: {enabled: maybe}}\n").endswith(
        ": channels.websocket.enabled: expected true or false, got 'maybe'"
    )
    assert error_of(tmp_path, "llm: {fallback: [{model: x}]}\n").endswith(
        ": llm.fallback.0.provider: required; expected one of 'anthropic', 'openai', 'offline'"
    )


def test_semantic_checks(tmp_path: Path) -> None:
    assert error_of(tmp_path, "agent: {default_timezone: Mars/Base}\n").endswith(
        ": agent.default_timezone: expected an IANA time zone such as 'UTC' or 'Europe/Berlin',"
        " got 'Mars/Base'"
    )
    assert error_of(tmp_path, "channels: {websocket: {path: ws}}\n").endswith(
        ": channels.websocket.path: expected a URL path starting with '/', got 'ws'"
    )


def test_first_of_several_errors_is_reported(tmp_path: Path) -> None:
    message = error_of(tmp_path, "server: {port: 0, host: [x]}\nllm: {provider: nope}\n")
    # pydantic checks fields in schema order, so host (declared first) is the first error
    assert message == f"{tmp_path / 'config.yaml'}: server.host: expected a string, got a list"


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, "server:\n  host: a\n  port: [8080\nllm: {}\n")
    assert message.startswith(f"{tmp_path / 'config.yaml'}: line ")
    assert "invalid YAML: " in message
    message = error_of(tmp_path, "server:\n  host: a\n port: 1\n")
    assert message.startswith(f"{tmp_path / 'config.yaml'}: line 3: invalid YAML: ")


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    message = error_of(tmp_path, "llm: {provider: openai}\nserver: {}\nllm: {}\n")
    assert message == f"{tmp_path / 'config.yaml'}: line 3: invalid YAML: duplicate key 'llm'"


def test_non_string_key_is_an_error(tmp_path: Path) -> None:
    # YAML 1.1 reads an unquoted `on` as true
    message = error_of(tmp_path, "channels: {websocket: {on: true}}\n")
    assert message.startswith(f"{tmp_path / 'config.yaml'}: channels.websocket.True: keys must be")


@pytest.mark.parametrize(
    ("text", "got"),
    [("- server\n- llm\n", "a list"), ("just text\n", "'just text'"), ("42\n", "42")],
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, got: str) -> None:
    message = error_of(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'config.yaml'}: expected a mapping of sections (")
    assert message.endswith(f") at the top level, got {got}")


def test_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_config("missing.yaml", env={})
    assert str(caught.value) == "missing.yaml: file not found"


# --- keys -------------------------------------------------------------------------------------


def test_config_keys() -> None:
    keys = config_keys()
    assert len(keys) == len(set(keys))
    for key in [
        "server",
        "server.host",
        "server.port",
        "server.public_url",
        "storage.path",
        "redis.url",
        "log.level",
        "llm.provider",
        "llm.api_key",
        "llm.fallback",
        "llm.fallback.provider",
        "llm.tool_mode",
        "agent.max_rounds",
        "agent.default_timezone",
        "gateway.coalesce_ms",
        "gateway.group_reply",
        "personas.dirs",
        "channels.websocket.allowed_origins",
        "channels.telegram.webhook_secret",
        "channels.websocket.allowed_users",
        "channels.websocket.group_reply",
        "channels.telegram.allowed_chats",
        "channels.telegram.group_reply",
    ]:
        assert key in keys
    assert not any(part.isdigit() for key in keys for part in key.split("."))
    assert "channels.slack.signing_secret" in keys
    assert "channels.feishu.encrypt_key" in keys


def test_repo_config_yaml_shows_every_key() -> None:
    text = REPO_CONFIG.read_text(encoding="utf-8")
    for key in config_keys():
        if not key.startswith("llm.fallback."):  # entries are shown as a commented example
            assert f"{key.rsplit('.', 1)[-1]}:" in text, key


# --- config says only what is true -------------------------------------------------------------


def test_a_channel_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    message = error_of(tmp_path, "channels: {whatsapp: {enabled: true}}\n")
    assert "channels.whatsapp" in message


def test_a_redis_url_is_checked_and_an_empty_one_is_no_redis(tmp_path: Path) -> None:
    message = error_of(tmp_path, "redis: {url: '${REDIS_URL}'}\n", {"REDIS_URL": "redis:/:pw@h"})
    assert ": redis.url: expected a Redis URL such as redis://host:6379/0" in message
    assert "pw" not in message
    loaded = load_config(
        write(tmp_path, "redis: {url: '${REDIS_URL}'}\n"), env={"REDIS_URL": "redis://:pw@h:6380/2"}
    )
    assert (loaded.redis.url, loaded.redis.prefix) == ("redis://:pw@h:6380/2", "bot:")
    for text in ("redis: {url: ''}\n", "redis: {url: null}\n", "redis:\n"):
        assert load_config(write(tmp_path, text), env={}).redis.url is None


def test_every_channel_section_takes_the_shared_access_keys(tmp_path: Path) -> None:
    text = """
channels:
  websocket: {allowed_users: [7], allowed_chats: [c], group_reply: all}
  telegram: {allowed_users: [42], allowed_chats: [-100], group_reply: mention}
"""
    channels = load_config(write(tmp_path, text), env={}).channels
    assert isinstance(channels.websocket, AccessConfig)
    (telegram,) = channels.telegram
    assert isinstance(telegram, AccessConfig)
    assert (channels.websocket.allowed_users, channels.websocket.allowed_chats) == (["7"], ["c"])
    assert (telegram.allowed_users, telegram.allowed_chats) == (["42"], ["-100"])
    assert (channels.websocket.group_reply, telegram.group_reply) == ("all", "mention")
    assert Config().channels.telegram[0].group_reply is None  # None: gateway.group_reply applies
    assert error_of(tmp_path, "channels: {telegram: {group_reply: always}}\n").endswith(
        ": channels.telegram.group_reply: expected one of 'mention', 'all', got 'always'"
    )


@pytest.mark.parametrize(
    ("origin", "expected"),
    [
        ("https://a.example/", "expected no trailing '/'; browsers send 'https://a.example'"),
        ("https://a.example/chat", "expected an origin: scheme://host[:port], no path"),
        ("a.example", "expected an origin: scheme://host[:port], no path"),
        ("https://a.example:port", "expected an origin: scheme://host[:port], no path"),
        ("https://user@a.example", "expected an origin: scheme://host[:port], no path"),
        ("https://a.example?x", "expected an origin: scheme://host[:port], no path"),
        ("https://A.example", "expected lower case, as browsers send it: 'https://a.example'"),
    ],
)
def test_allowed_origins_are_origins(tmp_path: Path, origin: str, expected: str) -> None:
    text = f"channels: {{websocket: {{allowed_origins: ['http://ok:1', '{origin}']}}}}\n"
    message = error_of(tmp_path, text)
    assert f": channels.websocket.allowed_origins.1: {expected}" in message


def test_good_origins_load(tmp_path: Path) -> None:
    origins = ["http://127.0.0.1:8080", "https://a.example", "http://[::1]:8080"]
    text = f"channels: {{websocket: {{allowed_origins: {origins}}}}}\n"
    assert load_config(write(tmp_path, text), env={}).channels.websocket.allowed_origins == origins


@pytest.mark.parametrize("token", ["123456", "abc:DEF", "123:", "123:AB CD", ":ABC"])
def test_a_malformed_telegram_token_is_refused_without_repeating_it(
    tmp_path: Path, token: str
) -> None:
    text = "channels: {telegram: {enabled: true}}\n"
    message = error_of(tmp_path, text, {"TELEGRAM_BOT_TOKEN": token})
    assert message.endswith(
        ": channels.telegram.token: malformed; expected the token @BotFather"
        " gave you, digits:letters (like 123456789:AA...), with no spaces"
    )
    good = {"TELEGRAM_BOT_TOKEN": "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"}
    assert load_config(write(tmp_path, text), env=good).channels.telegram[0].enabled
    # a disabled channel does not use the variable: another config may have set it
    assert load_config(write(tmp_path, ""), env={"TELEGRAM_BOT_TOKEN": token}).channels


def test_every_named_folder_must_exist(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    message = error_of(tmp_path, "personas: {dirs: [p, extra]}\n")
    assert (
        message
        == f"{tmp_path / 'config.yaml'}: personas.dirs.1: no such folder: {tmp_path / 'extra'}"
    )
    message = error_of(tmp_path, "knowledge: {dirs: [../kb]}\n")
    assert message.endswith(f": knowledge.dirs.0: no such folder: {tmp_path.parent / 'kb'}")
    config = load_config(write(tmp_path, f"personas: {{dirs: [p, {tmp_path}]}}\n"), env={})
    assert config.personas.dirs == ["p", str(tmp_path)]


def test_folders_are_read_from_the_config_files_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf" / "p").mkdir(parents=True)
    (tmp_path / "conf" / "config.yaml").write_text("personas: {dirs: [p]}\n")
    monkeypatch.chdir(tmp_path)
    assert load_config("conf/config.yaml", env={}).personas.dirs == ["p"]
    assert config_folder("conf/config.yaml") == tmp_path / "conf"
    assert config_folder(None) == tmp_path


def test_the_default_personas_folder_may_be_missing(tmp_path: Path) -> None:
    # `bot serve` anywhere serves the built-in coordinator: only a folder a config names is checked
    assert not (tmp_path / "personas").exists()
    assert load_config(write(tmp_path, "personas: {}\n"), env={}).personas.dirs == ["personas"]


@pytest.mark.process
def test_channel_config_does_not_import_aiogram() -> None:
    check = "import adapters.telegram.config, sys; assert 'aiogram' not in sys.modules"
    result = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, cwd=REPO_CONFIG.parent
    )
    assert result.returncode == 0, result.stderr


def test_an_empty_value_is_named_once_not_echoed_as_quotes(tmp_path: Path) -> None:
    telegram = error_of(tmp_path, "channels:\n  telegram: {enabled: true}\n")
    assert telegram.endswith("set TELEGRAM_BOT_TOKEN to the token @BotFather gave you")
    command = error_of(tmp_path, "mcp:\n  servers:\n    x: {command: ''}\n")
    assert command.endswith("command is empty; name the program, e.g. command: npx")
    path = error_of(tmp_path, "channels:\n  websocket: {path: ''}\n")
    assert path.endswith("expected a URL path starting with '/', got an empty value")
    assert "got ''" not in telegram + command + path
