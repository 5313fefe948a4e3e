"""`llm.choices`, the soft quota keys and `personas.switchable`: what is wrong is said in one line
naming the key and the fix, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.runtime.app import App
from bot.runtime.config import ConfigError, load_config
from tests.conftest import make_config
from tests.test_config import error_of, write

MINI = "{name: mini, provider: openai, base_url: 'http://127.0.0.1:9/v1', display: GPT mini}"


def test_a_choice_loads_with_its_price_and_channels(tmp_path: Path) -> None:
    text = (
        "llm:\n  choices:\n    - {name: mini, provider: openai, model: gpt-mini,"
        " price: {input_per_mtok: 0.15, output_per_mtok: 0.6}, channels: [websocket]}\n"
        "quotas: {soft_model: mini, per_user: {tokens_per_day: 1000, soft_ratio: 0.8}}\n"
    )
    config = load_config(write(tmp_path, text), env={})
    (choice,) = config.llm.choices
    assert (choice.shown, choice.price.input_per_mtok if choice.price else None) == ("mini", 0.15)
    assert config.quotas.per_user.soft_ratio == 0.8


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"llm: {{choices: [{MINI}, {MINI}]}}", "llm.choices: the name 'mini' is used twice"),
        (
            "llm: {choices: [{name: default, provider: offline}]}",
            "'default' is the word that goes back to the default",
        ),
        (
            "llm: {choices: [{name: x, provider: offline, channels: [nowhere]}]}",
            "llm.choices (x): channels: no channel instance 'nowhere'",
        ),
        (
            f"llm: {{choices: [{MINI}]}}\nquotas: {{soft_model: big}}",
            "quotas.soft_model: 'big' is not in llm.choices (known: ['mini'])",
        ),
        (
            "quotas: {per_user: {turns_per_day: 10, soft_ratio: 0.8}}",
            "a soft_ratio is set but quotas.soft_model is not",
        ),
        ("quotas: {per_user: {soft_ratio: 1.5}}", "soft_ratio"),
    ],
)
def test_bad_choices_are_one_line_errors(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in error_of(tmp_path, text)


async def test_an_unknown_switchable_persona_stops_the_start(tmp_path: Path) -> None:
    config = make_config(tmp_path, personas={"switchable": ["nobody"]})
    with pytest.raises(ConfigError, match=r"personas.switchable: .*nobody"):
        async with App(config, base_dir=tmp_path):
            pass
