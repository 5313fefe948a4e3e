"""A turn's steps (its specialists and labelled tools): as status lines and as `Step`s.

The status lines under a preview's text show what runs now. A quick tool that ends before any
preview showed its line stays for one preview, so the user sees what the bot did; a line
already shown goes when its tool ends. A native live message (Slack's task cards, Feishu's
panels) also shows what ended and how, so the `Step`s are kept to the end of the turn.
"""

from __future__ import annotations

from dataclasses import replace

from adapters.live import Step


class Steps:
    def __init__(self) -> None:
        self._steps: dict[str, Step] = {}
        self._workers: dict[str, str] = {}  # task_id -> status line
        self._tools: dict[str, str] = {}  # call_id -> status line of a tool call
        self._tools_shown: set[str] = set()
        self._tools_ended: set[str] = set()

    def agent_started(self, task_id: str, title: str) -> None:
        self._workers[task_id] = f"⏳ {title}"
        self._steps[task_id] = Step(task_id, "agent", title)

    def agent_finished(self, task_id: str, status: str) -> None:
        self._workers.pop(task_id, None)
        self._finished(task_id, status)

    def tool_started(self, call_id: str, label: str) -> None:
        self._tools[call_id] = f"🔧 {label}…"
        self._steps[call_id] = Step(call_id, "tool", label)

    def tool_finished(self, call_id: str, ok: bool) -> None:
        self._finished(call_id, "completed" if ok else "failed")
        if call_id in self._tools_shown:
            self._forget_tool(call_id)
        else:
            self._tools_ended.add(call_id)

    def lines(self) -> list[str]:
        """The status lines of what runs now (and of quick tools not shown yet)."""
        return [*self._workers.values(), *self._tools.values()]

    def showing(self) -> set[str]:
        """The tools whose lines a preview made now shows."""
        return set(self._tools)

    def previewed(self, call_ids: set[str]) -> bool:
        """These tools' lines were in a preview: the ended ones go now (True: lines went)."""
        self._tools_shown |= call_ids
        ended = self._tools_ended & call_ids
        for call_id in ended:
            self._forget_tool(call_id)
        return bool(ended)

    def view(self) -> tuple[Step, ...]:
        return tuple(self._steps.values())

    def _finished(self, step_id: str, status: str) -> None:
        step = self._steps.get(step_id)
        if step is not None:
            self._steps[step_id] = replace(step, status=status)

    def _forget_tool(self, call_id: str) -> None:
        self._tools.pop(call_id, None)
        self._tools_shown.discard(call_id)
        self._tools_ended.discard(call_id)
