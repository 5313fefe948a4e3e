"""`GatewaySettings`: how the gateway runs turns, built once from the config (bot/runtime/app.py)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.pipeline.persona_choice import PersonaChoice
from bot.pipeline.resume import ResumeSettings
from content.texts import DEFAULT_LANGUAGE


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    turn_timeout_s: float = 120.0
    persona: PersonaChoice = PersonaChoice()
    resume: ResumeSettings = ResumeSettings()
    language: str = DEFAULT_LANGUAGE  # `gateway.language`: texts where no other is known
