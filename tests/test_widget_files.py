"""The widget's files in a real browser (headless Chromium, a fake microphone): the labelled
attach and mic buttons, an image pasted from the clipboard and a PDF from the file picker shown
as chips (one removed again), a file over the cap refused on the spot with the limit named,
the message arriving with its files as parts, then an image dropped on the panel and a voice
clip recorded with MediaRecorder going out as attachments through the same upload route.

The screenshot of the panel with its buttons and chips is the README's (docs/widget-files.png is
a copy of artifacts/widget/files.png).
"""

import base64
from typing import Any

import pytest

from agent.providers.scripted import Reply, ScriptedProvider
from content.parts import FilePart, ImagePart
from tests.blob_kit import png
from tests.conftest import Running
from tests.widget_kit import ARGS, CHROMIUM, shot

playwright_api = pytest.importorskip("playwright.async_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no system Chromium (apt-get install chromium); .ci/run installs it",
    ),
]
# a microphone that plays a tone, allowed without asking
MIC = ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]
MAX_BYTES = 60_000
PDF = b"%PDF-1.4\n" + bytes(range(256)) * 8 + b"\n%%EOF\n"
PICTURE = png(40, 30, "orange")

PASTE_JS = """([name, b64]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], name, { type: "image/png" }));
  const input = document.querySelector("chat-gateway-widget").shadowRoot.querySelector(".cgw-input");
  input.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
}"""

DROP_JS = PASTE_JS.replace(".cgw-input", ".cgw-panel").replace(
    'new ClipboardEvent("paste", { clipboardData: data,',
    'new DragEvent("drop", { dataTransfer: data,',
)


async def label(page: Any, selector: str) -> tuple[str | None, str | None]:
    button = page.locator(selector)
    return await button.get_attribute("aria-label"), await button.get_attribute("title")


async def test_files_and_a_voice_clip_go_from_the_widget(running: Running) -> None:
    provider = ScriptedProvider([Reply("A picture and a PDF."), Reply("Heard you.")])
    app = await running(provider, media={"max_bytes": MAX_BYTES})
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS + MIC)
        try:
            page = await browser.new_page(viewport={"width": 520, "height": 720})
            await page.goto(app.url + "/")
            await page.wait_for_selector(".cgw-state:has-text('Online')")
            assert await label(page, ".cgw-attach") == ("Attach a file", "Attach a file")
            assert await label(page, ".cgw-mic") == ("Record a voice message",) * 2

            await page.evaluate(PASTE_JS, ["pasted.png", base64.b64encode(PICTURE).decode()])
            await page.set_input_files(
                ".cgw-picker",
                files=[
                    {"name": "report.pdf", "mimeType": "application/pdf", "buffer": PDF},
                    {"name": "extra.pdf", "mimeType": "application/pdf", "buffer": PDF[:500]},
                ],
            )
            await page.set_input_files(
                ".cgw-picker",
                files=[{"name": "huge.bin", "mimeType": "text/plain", "buffer": bytes(70_000)}],
            )
            error = page.locator(".cgw-file-error")
            await error.wait_for()
            assert "“huge.bin” is too large (at most 60 KB)" in await error.inner_text()
            chips = page.locator(".cgw-chip")
            assert await chips.count() == 3  # the refused file never became one
            await page.locator(".cgw-chip-remove[aria-label='Remove extra.pdf']").click()
            assert await chips.count() == 2
            assert await page.locator(".cgw-chip img").count() == 1  # the image's preview
            await page.wait_for_selector(".cgw-chip-state:has-text('KB')")  # uploaded

            await page.fill(".cgw-input", "what are these?")
            await page.press(".cgw-input", "Enter")
            await page.wait_for_selector(".cgw-msg.cgw-bot:not(.cgw-pending):has-text('A picture')")
            assert await chips.count() == 0
            user = page.locator(".cgw-msg.cgw-user").first
            await user.locator("a.cgw-file").nth(1).wait_for()  # the echo's signed links
            assert await user.locator("img.cgw-file-image").count() == 1
            asked = provider.requests[0].messages[-1]
            assert "what are these?" in asked.content
            image, pdf = asked.parts
            assert isinstance(image, ImagePart) and isinstance(pdf, FilePart)
            assert (await app.blobs.get(image.blob.blob_id))[1] == PICTURE
            assert pdf.blob.name == "report.pdf"

            await page.evaluate(DROP_JS, ["dropped.png", base64.b64encode(PICTURE).decode()])
            await page.wait_for_selector(
                ".cgw-chip:has-text('dropped.png') .cgw-chip-state:has-text('KB')"
            )
            await page.click(".cgw-mic")
            await page.wait_for_selector(".cgw-mic.cgw-recording[aria-pressed='true']")
            assert await label(page, ".cgw-mic") == ("Stop recording and send",) * 2
            await page.wait_for_selector(".cgw-mic-state:has-text('0:01')")  # a second of tone
            await shot(page, "files")  # the README's: a conversation, a chip, the mic recording
            await page.click(".cgw-mic")
            second = page.locator(".cgw-msg.cgw-user").nth(1)
            clip = second.locator("a.cgw-file[download^='voice-note.']")
            await clip.wait_for()  # the echo: the clip and the dropped image, as signed links
            assert await second.locator("img.cgw-file-image[alt='dropped.png']").count() == 1
            served = await page.request.get(await clip.get_attribute("href"))
            assert served.headers["content-type"].split(";")[0] in ("audio/webm", "audio/ogg")
            assert len(await served.body()) > 0
        finally:
            await browser.close()
