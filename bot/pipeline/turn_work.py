"""The coordinator's part of a turn, new or resumed, within its deadline.

Shared by the runner of new turns (`bot/pipeline/turn.py`) and of resumed ones (`bot/pipeline/resume.py`): a
stop, a timeout or a failure becomes the `Outcome` its placeholder ends with.
"""

from __future__ import annotations

import asyncio
import logging

from agent.coordinator import Coordinator, TurnInput
from agent.providers.base import ProviderError
from agent.replay import ReplayPoint
from bot.pipeline.conversations import TurnSignal
from bot.pipeline.delivery import Delivery
from bot.pipeline.turn_outcome import Outcome, describe, storage_fault
from bot.storage.base import StorageError
from content.texts import t
from tools.approval import ApprovalPending

log = logging.getLogger(__name__)


class TurnWork:
    def __init__(self, coordinator: Coordinator, timeout_s: float) -> None:
        self.coordinator = coordinator
        self.timeout_s = timeout_s

    async def run(
        self,
        turn: TurnInput,
        delivery: Delivery,
        control: TurnSignal,
        replay: ReplayPoint | None = None,
    ) -> Outcome:
        """The coordinator's part of a turn (new, or resumed from `replay`), within its deadline;
        a stop, a timeout or a failure becomes what the placeholder says (in the delivery's
        language)."""
        language = delivery.language
        if control.stopped:  # a /stop while the placeholder was being posted
            return Outcome("stopped", t(language, "turn.stopped"))
        control.work = asyncio.create_task(
            self.coordinator.run_turn(turn, delivery.on_event, replay, control)
        )
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await control.work
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise  # shutdown (awaiting the work cancelled it too)
            return Outcome("stopped", t(language, "turn.stopped"))
        except StorageError:
            raise  # the turn ends with its own note (see `TurnRunner.run`)
        except ApprovalPending as paused:  # the live message asks; the answer resumes the turn
            log.info("turn %s waits for approval %s", turn.turn_id, paused.pause.approval_id)
            return Outcome("waiting", paused.pause.prompt, paused.pause.display)
        except TimeoutError:
            log.warning("turn %s timed out after %ss", turn.turn_id, self.timeout_s)
            return Outcome("failed", t(language, "turn.timed_out"), error="turn timeout")
        except ProviderError as exc:
            log.error("turn %s failed: model provider: %s", turn.turn_id, exc)
            sorry = t(language, exc.user_key) if exc.user_key else f"Sorry — {exc.user_message}"
            return Outcome("failed", sorry, error=describe(exc))
        except Exception as exc:
            if (fault := storage_fault(exc)) is not None:
                raise fault from exc  # a tool's audit row, say, failed inside a task group
            log.exception("turn %s failed", turn.turn_id)
            return Outcome("failed", t(language, "turn.apology"), error=describe(exc))
        finally:
            control.work = None
        return Outcome("completed", result.text, tuple(result.display), parts=tuple(result.parts))
