"""Built-in tools, and the registry that holds them.

What they read from `ToolContext.deps` (the app builds it; each tool degrades without a part):
`settings` (ToolsSettings), `http` (the shared aiohttp session), `knowledge` (a KnowledgeBase),
`default_timezone`, `blobs` (where a tool keeps media it makes). User data goes through
`ctx.storage` (tools.memory).
"""

from __future__ import annotations

from tools.builtin.clock import get_current_datetime
from tools.builtin.handoff import transfer_to_human
from tools.builtin.knowledge import check_off_topic, search_knowledge
from tools.builtin.memory import get_user_context, intake_tool, save_user_memory
from tools.builtin.news import fetch_news
from tools.builtin.payment import create_payment
from tools.builtin.rates import get_exchange_rate
from tools.builtin.search import web_search
from tools.registry import ToolRegistry
from tools.schedules import cancel_schedule, list_schedules, schedule_message
from tools.settings import IntakeSettings


def builtin_registry(intake: IntakeSettings | None = None) -> ToolRegistry:
    """A fresh registry with every built-in tool; add control and app tools to it as needed.

    `intake` sets the fields `collect_info` asks for (its schema is built from them).
    """
    return ToolRegistry(
        [
            get_current_datetime,
            get_exchange_rate,
            web_search,
            search_knowledge,
            check_off_topic,
            save_user_memory,
            get_user_context,
            intake_tool(intake),
            create_payment,
            fetch_news,
            schedule_message,
            list_schedules,
            cancel_schedule,
            transfer_to_human,
        ]
    )
