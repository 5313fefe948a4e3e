"""Rate budgets: when a call to a platform may go, per scope (a chat, a workspace, a bot)."""

from adapters.budget.base import Busy, Rank, Rate, RateBudget
from adapters.budget.local import LocalRateBudget

__all__ = ["Busy", "LocalRateBudget", "Rank", "Rate", "RateBudget"]
