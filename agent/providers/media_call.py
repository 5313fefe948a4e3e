"""One model call's media: the plan of which images go, their bytes read, and a refusal met.

A vendor refuses an image it cannot take (Anthropic: "Could not process image", a size over its
cap; OpenAI: `invalid_image`, `image_parse_error` …) with a 400 naming the image, and it would
refuse every later request of the conversation too, since the history sends it again. So the
call is made once more without the images it may have meant, which are marked (in this
process and as a mark in the blob store: media_load.py) and go as their description from then
on, saying the model refused them. The suspects are the images no request of this process has
got through with yet (the one just sent, usually); when there are none, every image sent.

A model that takes no images at all ("image_url is only supported by certain models") is
answered the same way for this process, without marks: a configuration fix (`llm.media`) is
what it needs, not a forgotten photo.

A PDF the vendor refuses as a document (over its page cap, not a valid PDF: a 400 naming a PDF
or a document) is handled the same way, and goes as its text from then on (content/pdf_text.py).
"""

from __future__ import annotations

import logging
import re

from agent.providers.base import ProviderError, ProviderRejected
from agent.providers.image_plan import Plan, plan_images
from agent.providers.media import Media
from agent.providers.media_load import SHELF, ImageShelf, load
from agent.types import ModelRequest

log = logging.getLogger(__name__)

_IMAGE = re.compile(r"\bimages?\b|image_url|invalid_image|image_parse_error", re.IGNORECASE)
_DOCUMENT = re.compile(r"\bpdfs?\b|\bdocuments?\b|file_data|invalid_file", re.IGNORECASE)
_NO_VISION = re.compile(
    r"only supported by certain models|does not support (image|vision)|not a multimodal"
    r"|image input is not supported|vision is not supported",
    re.IGNORECASE,
)
ATTEMPTS = 4  # plan, load, and plan again when a loaded image turned out refused or unreadable


def refuses_images(error: ProviderError) -> bool:
    """The vendor refused the request for an image in it (a 400 that names one)."""
    return isinstance(error, ProviderRejected) and bool(_IMAGE.search(str(error)))


def refuses_documents(error: ProviderError) -> bool:
    """The vendor refused the request for a PDF in it (too many pages, not a valid PDF …)."""
    return isinstance(error, ProviderRejected) and bool(_DOCUMENT.search(str(error)))


class MediaCall:
    """For one `stream` call: `ready` before the body is built (and again after a refusal),
    `refused` when the call failed, `sent` once the vendor took it."""

    def __init__(
        self,
        request: ModelRequest,
        media: Media,
        prefix_key: str,
        base: str,
        shelf: ImageShelf = SHELF,
    ) -> None:
        self.request = request
        self.media = media
        self.prefix_key = prefix_key
        self.base = base
        self.shelf = shelf

    async def ready(self) -> Plan:
        """The plan for the request, with what it sends read and prepared."""
        messages = self.request.messages
        for _ in range(ATTEMPTS):
            plan = plan_images(messages, self.media, self.prefix_key, self.shelf.dropped)
            if await load(messages, self.media, self.request.blobs, plan, self.base, self.shelf):
                return plan
        return plan_images(messages, self.media, self.prefix_key, self.shelf.dropped)

    async def refused(self, error: ProviderError, plan: Plan) -> bool:
        """True: images (or PDFs) the error may mean are dropped from now on; call again
        without them (a PDF then goes as its text)."""
        images = bool(plan.live) and refuses_images(error)
        if plan.documents and refuses_documents(error) and not images:
            sent = plan.blob_ids(self.request.messages, documents=True)
            suspects = [b for b in sent if b not in self.shelf.accepted] or sent
            log.warning("the model refused %d PDF(s); sent again as text: %s", len(suspects), error)
            await self.shelf.refuse(suspects, self.request.blobs)
            return True
        if not images:
            return False
        sent = plan.blob_ids(self.request.messages)
        if _NO_VISION.search(str(error)):
            for blob_id in sent:
                self.shelf.dropped.keep(blob_id, "refused")
            log.warning("%s; images are described instead (set llm.media)", error)
            return True
        suspects = [b for b in sent if b not in self.shelf.accepted] or sent
        log.warning(
            "the model refused %d image(s) (%s); sent again without them: %s",
            len(suspects), ", ".join(s[:12] for s in suspects), error,
        )  # fmt: skip
        await self.shelf.refuse(suspects, self.request.blobs)
        return True

    def sent(self, plan: Plan) -> None:
        """The vendor took the request: its images are no suspects of a later refusal."""
        messages = self.request.messages
        for blob_id in plan.blob_ids(messages) + plan.blob_ids(messages, documents=True):
            self.shelf.accepted.keep(blob_id, True)
