"""Specialist sub-agents: each dispatch runs a persona's own tool loop in its own session.

A foreground dispatch returns the specialist's result as the AgentTool result. A background
dispatch returns a task id at once; its result reaches the coordinator exactly once, through
`deliver`, as a new turn in the same conversation (the gateway merges results that arrive together).
A stopped task is marked `killed`; whatever it produced is recorded and never delivered.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace

from agent.fence import FencedWrites
from agent.log_context import bound
from agent.loop import run_loop
from agent.personas import COORDINATOR, PersonaLibrary
from agent.providers.base import Provider
from agent.store import Store, UsageLog
from agent.types import Message
from agent.worker_tasks import BackgroundResult, Deliver, WorkerSettings, WorkerTask
from tools.approval import asked
from tools.base import ToolContext, ToolError, ToolResult
from tools.control import CONTROL_TOOLS
from tools.events import AgentFinished, AgentStarted, TurnEvent
from tools.registry import ToolRegistry

log = logging.getLogger(__name__)

MIN_PROMPT_WORDS = 6

# the names the gateway, the recovery and the app's wiring import from here
__all__ = ["BackgroundResult", "Deliver", "WorkerSettings", "WorkerTask", "Workers"]


async def _quiet(event: TurnEvent) -> None:
    """A worker's own text and tool events never reach the user: only its result does."""


class Workers:
    def __init__(
        self,
        *,
        provider: Provider,
        registry: ToolRegistry,
        store: Store,
        personas: PersonaLibrary,
        settings: WorkerSettings,
        deliver: Deliver | None = None,
        stop_elsewhere: Callable[[str, str], Awaitable[None]] | None = None,
    ) -> None:
        """`deliver`: where a background result goes (None: nowhere). `stop_elsewhere`: with
        several gateway processes, asks the others to stop a task this one does not run
        (conversation key, task id); None with one process."""
        self.provider = provider
        self.registry = registry
        self.store = store
        self.personas = personas
        self.settings = settings
        self.deliver = deliver
        self.stop_elsewhere = stop_elsewhere
        self.tasks: dict[str, WorkerTask] = {}
        self._slots = asyncio.Semaphore(settings.max_total)
        self._group: asyncio.TaskGroup | None = None

    async def run(self) -> None:
        """Own every worker task until cancelled."""
        async with asyncio.TaskGroup() as group:
            self._group = group
            try:
                await asyncio.Future()
            finally:
                self._group = None

    def specialists(self) -> list[str]:
        return sorted(name for name in self.personas.all() if name != COORDINATOR)

    async def dispatch(
        self,
        ctx: ToolContext,
        *,
        description: str,
        subagent_type: str,
        prompt: str,
        background: bool,
    ) -> ToolResult:
        valid = self.specialists()
        if subagent_type == COORDINATOR:
            raise ToolError(
                f"'{COORDINATOR}' is the coordinator (you) and cannot be dispatched; valid subagent_type: {valid}"
            )
        if subagent_type not in valid:
            raise ToolError(f"unknown subagent_type {subagent_type!r}; valid: {valid}")
        text = prompt.strip()
        if not text:
            raise ToolError(
                f"prompt is empty; give {subagent_type} a self-contained task. Valid subagent_type: {valid}"
            )
        if len(text.split()) < MIN_PROMPT_WORDS:
            raise ToolError(
                f"prompt {text!r} is too short to stand alone: the specialist cannot see this chat. "
                "If this is a simple question, answer it directly; otherwise state the goal, the facts "
                "it needs and what to return."
            )
        joined = self._running_twin(ctx, subagent_type, text)
        if joined is None:
            joined = await self._start(ctx, subagent_type, description, text, background)
        if background:
            later = joined.background and joined.waiters == 0
            note = (
                "running in the background; the result will arrive as a new message"
                if later
                else "an identical task is already running for a waiting call; it gets the result"
            )
            return ToolResult(json.dumps(joined.summary() | {"note": note}))
        joined.deliver_later = False  # this call takes the result: it must not come twice
        return await self._wait(joined)

    async def _start(
        self, ctx: ToolContext, subagent_type: str, description: str, prompt: str, background: bool
    ) -> WorkerTask:
        if self._group is None:
            raise ToolError("specialists are not running in this process")
        # Counted per conversation, background tasks of earlier turns included: one user
        # cannot take every slot of the process.
        mine = [
            t
            for t in self.tasks.values()
            if t.status == "running" and t.parent.conversation_key == ctx.conversation_key
        ]
        if len(mine) >= self.settings.max_per_turn:
            raise ToolError(
                f"{len(mine)} specialists are already running in this conversation (the limit is "
                f"{self.settings.max_per_turn}); wait for their results or stop one with TaskStop"
            )
        task = WorkerTask(
            uuid.uuid4().hex[:12], subagent_type, description.strip(), prompt, background, ctx
        )
        persona = self.personas.get(subagent_type)
        task.display_name, task.display_description = (
            persona.shown_name,
            persona.display_description,
        )
        task.deliver_later = background
        self.tasks[task.task_id] = task
        started = AgentStarted(
            task.task_id,
            subagent_type,
            task.description,
            task.display_name,
            task.display_description,
        )
        await ctx.emit(started)
        task.task = self._group.create_task(self._work(task), name=f"worker:{task.task_id}")
        return task

    async def stop(self, ctx: ToolContext, task_id: str) -> ToolResult:
        task = self.tasks.get(task_id)
        if task is None and self.stop_elsewhere is not None:
            # a turn of this conversation may have started it on another process
            await self.stop_elsewhere(ctx.conversation_key, task_id)
            note = "not running in this process; the other gateway processes were asked to stop it"
            return ToolResult(
                json.dumps({"task_id": task_id, "status": "stop_requested", "note": note})
            )
        if task is None or task.parent.conversation_key != ctx.conversation_key:
            raise ToolError(f"no task {task_id!r} in this conversation")
        if task.status != "running":
            return ToolResult(json.dumps(task.summary() | {"note": "already finished"}))
        self._kill(task)
        return ToolResult(json.dumps(task.summary()))

    def stop_task(self, conversation_key: str, task_id: str) -> bool:
        """Kill one running task of the conversation (TaskStop from another process)."""
        task = self.tasks.get(task_id)
        if task is None or task.status != "running":
            return False
        if task.parent.conversation_key != conversation_key:
            return False
        self._kill(task)
        return True

    def stop_conversation(self, conversation_key: str) -> int:
        """Kill every running task of a conversation (the user's /stop); how many were running."""
        running = [
            t
            for t in self.tasks.values()
            if t.status == "running" and t.parent.conversation_key == conversation_key
        ]
        for task in running:
            self._kill(task)
        return len(running)

    def _kill(self, task: WorkerTask) -> None:
        task.status = "killed"  # first: a result racing the stop sees it and is not delivered
        if task.task is not None:
            task.task.cancel()

    def _running_twin(self, ctx: ToolContext, subagent_type: str, prompt: str) -> WorkerTask | None:
        for task in self.tasks.values():
            if (
                task.status == "running"
                and task.subagent_type == subagent_type
                and task.prompt == prompt
                and task.parent.session_id == ctx.session_id
            ):
                return task
        return None

    async def _wait(self, task: WorkerTask) -> ToolResult:
        task.waiters += 1
        try:
            await task.done.wait()
        except asyncio.CancelledError:
            task.waiters -= 1
            if task.waiters == 0 and task.status == "running":
                if task.background:
                    task.deliver_later = True  # as promised when it was dispatched
                else:
                    self._kill(task)  # the turn that wanted it is gone
            raise
        task.waiters -= 1
        payload = task.summary() | {"result": task.result}
        text = json.dumps(payload, ensure_ascii=False)
        ok = task.status == "completed"
        return ToolResult(text, ok=ok, display=task.display, parts=task.parts)

    async def _work(self, task: WorkerTask) -> None:
        """A worker task's whole life. Only cancellation leaves it as an exception: anything
        else becomes a failed result, so one specialist can never stop the process."""
        # its log lines name the task and the specialist, beside the turn that started it
        with bound(task_id=task.task_id, persona=task.subagent_type):
            await self._work_bound(task)

    async def _work_bound(self, task: WorkerTask) -> None:
        log.debug("specialist %s starts: %s", task.subagent_type, task.description)
        try:
            # The deadline covers the wait for a slot too: a queued task cannot wait forever.
            async with asyncio.timeout(self.settings.timeout_s):
                async with self._slots:
                    if task.status == "running":
                        await self._run(task)
        except asyncio.CancelledError:
            task.status = "killed"
            raise
        except TimeoutError:
            task.status = "timeout"
            task.result = (
                f"{task.subagent_type} ran out of time after {self.settings.timeout_s:g} s"
            )
        except Exception as exc:
            log.warning("worker %s (%s) failed", task.task_id, task.subagent_type, exc_info=True)
            task.status = "failed"
            task.result = f"{task.subagent_type} failed: {type(exc).__name__}: {exc}"
        finally:
            task.done.set()
            log.debug("specialist %s ended: %s", task.subagent_type, task.status)
            await self._finished(task)
        if task.deliver_later and task.status != "killed" and self.deliver is not None:
            parent = task.parent
            result = BackgroundResult(
                task.task_id,
                task.subagent_type,
                task.description,
                task.status,
                task.result,
                parent.conversation_key,
                parent.channel,
                parent.user_id,
                task.parts,
            )
            try:
                await self.deliver(result)
            except Exception:
                log.exception("background result %s could not be queued", task.task_id)

    async def _finished(self, task: WorkerTask) -> None:
        try:
            if task.session_id is not None:
                await self.store.set_session_status(task.session_id, task.status)
            finished = AgentFinished(
                task.task_id,
                task.subagent_type,
                task.description,
                task.status,
                task.display_name,
                task.display_description,
            )
            await task.parent.emit(finished)
        except Exception:
            log.exception("could not record the end of worker %s", task.task_id)
        self._forget_later(task)

    async def _run(self, task: WorkerTask) -> None:
        persona = self.personas.get(task.subagent_type)  # pinned for the whole task
        parent = task.parent
        task.session_id = await self.store.create_session(
            agent_id=persona.name,
            channel=parent.channel,
            conversation_key=parent.conversation_key,
            user_id=parent.user_id,
            parent_session_id=parent.session_id,
            persona_version=persona.version,
        )
        await self.store.set_session_status(task.session_id, "running")
        allowed = tuple(n for n in self.registry.resolve(persona.tools) if n not in CONTROL_TOOLS)
        ctx = replace(
            parent,
            session_id=task.session_id,
            persona=persona.name,
            emit=_quiet,
            tool_name="",
            call_id="",
        )
        user = Message("user", task.prompt)
        written = [user]
        usage_log = UsageLog(self.provider, persona.model)
        # the parent turn's fence: a specialist of a turn lost to another process writes nothing
        writes = FencedWrites(self.store, parent.fence, parent.turn_id or task.task_id)
        try:
            result = await run_loop(
                provider=self.provider,
                system=persona.prompt,
                messages=[user],
                tools=self.registry.specs(allowed),
                registry=self.registry,
                allowed=allowed,
                ctx=ctx,
                emit=_quiet,
                settings=replace(
                    self.settings.loop,
                    max_rounds=persona.max_rounds or self.settings.loop.max_rounds,
                    redirects={},
                    # asked as the coordinator's are; a specialist has no gate to ask, so such
                    # a call is not run and the specialist says so (agent/loop.py NO_GATE)
                    approve=asked(
                        self.registry,
                        allowed,
                        (*self.settings.loop.globs, *persona.approve),
                        self.settings.loop.exempt,
                    ),
                ),
                model=persona.model,
                audit=writes.record_tool_call,
                on_usage=usage_log,
            )
            written.extend(result.messages)
            task.result = _budget(result.text, self.settings.result_chars)
            task.display = tuple(result.display)
            task.parts = tuple(result.parts)
            if task.status == "running":
                task.status = "completed"
        finally:
            try:
                await writes.append_messages(task.session_id, writes.turn_id, written)
                # the parent's turn id: a turn's usage totals include its specialists
                await usage_log.write(writes, session_id=task.session_id, turn_id=parent.turn_id)
            except Exception:
                log.exception("could not record the transcript of worker %s", task.task_id)

    def _forget_later(self, task: WorkerTask) -> None:
        """Keep finished tasks for a while (TaskStop answers "already finished"), then drop them."""
        finished = [t for t in self.tasks.values() if t.status != "running"]
        for old in finished[: max(0, len(finished) - 1000)]:
            self.tasks.pop(old.task_id, None)


def _budget(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n…[truncated {len(text) - limit} characters]"
