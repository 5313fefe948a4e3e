"""The `schedules:` section of config.yaml: limits and timing of scheduled messages."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SchedulesConfig(BaseModel):
    """Limits keep a user or a chat from filling the store or the chat; the timing keys say how
    soon a due message goes out and when a process that died while firing is taken over."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    max_per_user: int = Field(20, ge=0)  # active schedules one user may have
    max_per_conversation: int = Field(20, ge=0)  # active schedules in one conversation
    # the shortest time between two occurrences of a recurrence (and the shortest delay of
    # anything), so no schedule can flood a chat
    min_interval_s: float = Field(300, ge=1)
    max_text_chars: int = Field(2000, ge=1)  # the fixed text, or the task's instructions
    late_after_s: float = Field(
        120, ge=1
    )  # due longer ago than this: fired late with a note, or skipped
    poll_s: float = Field(0.5, gt=0, le=60)  # how often each process looks for due schedules
    lease_s: float = Field(30, ge=1)  # a process that died while firing is taken over after this
    batch: int = Field(200, ge=1, le=5000)  # due schedules claimed at once
    concurrency: int = Field(32, ge=1, le=1000)  # occurrences sent at once by one process
    max_failures: int = Field(3, ge=1)  # failed sends in a row before a schedule is disabled
