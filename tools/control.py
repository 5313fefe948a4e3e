"""Control tools of the coordinator: AgentTool, SendMessage, TaskStop, a tool source of their own.

They reach the worker runtime through `ctx.deps.agents` (an `AgentRuntime`), which the agent
package provides: tools import none of our other packages.
"""

from __future__ import annotations

from collections.abc import Iterable

from tools.base import AgentRuntime, ToolContext, ToolError, ToolResult
from tools.events import Interim
from tools.function_source import FunctionSource
from tools.registry import Tool, tool

CONTROL_TOOLS = ("AgentTool", "SendMessage", "TaskStop")
# The worker runtime enforces its own (configurable) deadline; this only bounds a runaway call.
DISPATCH_TIMEOUT_S = 3600.0


def _runtime(ctx: ToolContext) -> AgentRuntime:
    runtime = ctx.deps.agents
    if runtime is None:
        raise ToolError("specialists are not available in this process")
    return runtime


@tool(name="AgentTool", timeout_s=DISPATCH_TIMEOUT_S, destructive=False)
async def agent_tool(
    ctx: ToolContext,
    description: str,
    subagent_type: str,
    prompt: str,
    background: bool = False,
) -> ToolResult:
    """Dispatch a specialist for deep work: a task of many steps, or one needing tools you lack. The specialist works in its own session and cannot see this conversation, so the prompt must be self-contained (goal, the facts it needs, what to return). Answer simple things yourself instead. With background=true you get a task_id at once and the result arrives later as a new message; otherwise you wait for the result.

    Args:
        description: a few words shown to the user while the specialist works
        subagent_type: the specialist's name, from the catalog in the system reminder
        prompt: the complete, self-contained task for the specialist
        background: true to continue without waiting; the result comes later
    """
    return await _runtime(ctx).dispatch(
        ctx,
        description=description,
        subagent_type=subagent_type,
        prompt=prompt,
        background=background,
    )


@tool(name="SendMessage", idempotent=True, destructive=False, open_world=False)
async def send_message(ctx: ToolContext, message: str) -> str:
    """Show the user a short interim note while you keep working (e.g. "Checking two sources — one moment"). It updates your reply in place; it is not a separate message, and your final answer replaces it, so never repeat the final answer here.

    Args:
        message: the interim note, one or two sentences
    """
    text = message.strip()
    if not text:
        raise ToolError("message is empty; write the note to show the user")
    await ctx.emit(Interim(text))
    return "shown to the user; continue with the task and finish with your answer"


@tool(name="TaskStop", idempotent=True, open_world=False)
async def task_stop(ctx: ToolContext, task_id: str) -> ToolResult:
    """Stop a running specialist task (from AgentTool with background=true); its status becomes killed and its result is never delivered.

    Args:
        task_id: the task_id AgentTool returned
    """
    return await _runtime(ctx).stop(ctx, task_id)


CONTROL = (agent_tool, send_message, task_stop)


def control_source(tools: Iterable[Tool] = CONTROL) -> FunctionSource:
    """The control tools as a source of their own (the coordinator's; specialists never get them)."""
    return FunctionSource(tools, name="control")
