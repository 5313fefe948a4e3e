"""The README's Models section names every environment variable the provider choice reads."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PROVIDERS = (ROOT / "agent" / "providers" / "__init__.py").read_text()


def _models_section() -> str:
    return README.split("## Models\n", 1)[1].split("\n## ", 1)[0]


def test_every_variable_the_providers_read_is_in_the_models_section() -> None:
    read = set(re.findall(r"""env(?:\.get\(|\[)["']([A-Z][A-Z0-9_]+)["']""", PROVIDERS))
    read |= set(re.findall(r""""([A-Z]+_API_KEY)\"""", PROVIDERS))
    assert {"ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"} <= read
    section = _models_section()
    missing = sorted(name for name in read if f"`{name}" not in section)
    assert not missing, missing


def test_an_anthropic_compatible_base_url_is_documented_without_v1() -> None:
    section = _models_section()
    paragraph = next(p for p in section.split("\n- ") if "ANTHROPIC_BASE_URL" in p)
    assert "without** `/v1`" in paragraph and "llm.base_url" in paragraph
    assert "provider: anthropic" in paragraph
