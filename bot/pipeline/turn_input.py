"""What a turn is asked: its batch of messages as the model reads them and as the chat showed them.

Both views mask personal data when `tools.pii.mask_user_text` says so, so the transcript and
the model's history agree. Media the messages brought (already in the blob store) go beside the
text, as parts, in both views: the model's user message and the turn record's shown messages.
"""

from __future__ import annotations

from adapters.base import InboundMessage
from agent.coordinator import Coordinator
from content.parts import Part, parts_to_json
from tools.pii import PiiMasker

TASK_EVENT = "task:"  # + a task id: a background specialist's result (bot/pipeline/background.py)


def combine(batch: list[InboundMessage], masker: PiiMasker | None = None) -> str:
    """The turn's input: the batch's messages; personal data masked when `masker` is given."""
    parts = []
    for message in batch:
        text = message.action.describe() if message.action else message.text.strip()
        for attachment in message.attachments:
            label = attachment.name or attachment.mime_type or ""
            text += f"\n[attachment: {attachment.kind} {label}]".rstrip()
        parts.append(text.strip())
    combined = "\n\n".join(parts)
    return masker.mask(combined) if masker is not None else combined


def media(batch: list[InboundMessage]) -> tuple[Part, ...]:
    """The batch's parts in the order they came: the user message's `parts`."""
    if len(batch) == 1:
        return batch[0].parts
    return tuple(part for message in batch for part in message.parts)


def carried(batch: list[InboundMessage]) -> tuple[Part, ...]:
    """The media of the batch's background results (a specialist's chart): made for the user,
    so the answer that tells the result carries them, as a foreground specialist's would be.
    The model sees them too, as the user message's parts."""
    return tuple(p for m in batch if m.event_id.startswith(TASK_EVENT) for p in m.parts)


def shown(batch: list[InboundMessage], masker: PiiMasker | None) -> list[dict[str, str]]:
    """The user's messages of the turn as their chat showed them, for the transcript: with their
    ids, a button press as its label (as the web channel's `message.user`), masked like the
    history, and their parts as JSON text under `parts` when they had any (a replayed transcript
    shows them). System input (a background result, which has no message id) is no one's."""
    shown = []
    for message in batch:
        if message.message_id is None or not message.user_id:
            continue
        action = message.action
        text = (action.label or action.value or action.action_id) if action else message.text
        entry = {"message_id": message.message_id, "text": masker.mask(text) if masker else text}
        if message.parts:
            entry["parts"] = parts_to_json(message.parts) or ""
        shown.append(entry)
    return shown


def user_text_masker(coordinator: Coordinator) -> PiiMasker | None:
    """`tools.pii.mask_user_text`: the tools' settings are those of the coordinator's tools."""
    return coordinator.deps.settings.pii.user_text_masker()
