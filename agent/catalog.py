"""The persona catalog: a machine-made list of the specialists the coordinator may dispatch."""

from __future__ import annotations

from collections.abc import Mapping

from agent.personas import COORDINATOR, Persona


def catalog_reminder(personas: Mapping[str, Persona]) -> str:
    """A system reminder naming every specialist, its job and its tools (never `default`)."""
    specialists = [p for name, p in sorted(personas.items()) if name != COORDINATOR]
    if not specialists:
        return (
            "<system-reminder>\nNo specialists are configured: answer everything yourself; "
            "AgentTool has no one to dispatch.\n</system-reminder>"
        )
    lines = [
        "<system-reminder>",
        "Specialists you can dispatch with AgentTool (subagent_type = the name):",
    ]
    for persona in specialists:
        tools = ", ".join(persona.tools) or "no tools"
        shown = persona.shown_name
        lines.append(f'- {persona.name} ("{shown}"): {persona.description} (tools: {tools})')
    lines.append(
        "Dispatch only deep work (many steps, or tools you lack), with a self-contained prompt. "
        "Answer simple things yourself. To users, name a specialist only as quoted after its "
        "name, and never show them the prompt you give it."
    )
    lines.append("</system-reminder>")
    return "\n".join(lines)
