"""The file name a recording is uploaded under: its extension is what Whisper servers decode by.

OpenAI's endpoint (and servers copying it) picks the decoder from the upload's file name, and
refuses a name whose extension it does not know, so the name comes from the bytes where they
tell (an `.ogg` that is really an MP4 would fail), else from the stored media type.
"""

from __future__ import annotations

STEM = "voice"

# media type -> the extension Whisper servers take (flac mp3 mp4 mpeg mpga m4a ogg wav webm)
_BY_TYPE = {
    "audio/ogg": "ogg",
    "audio/opus": "ogg",
    "audio/webm": "webm",
    "video/webm": "webm",
    "audio/mp4": "m4a",
    "audio/x-m4a": "m4a",
    "audio/aac": "m4a",
    "video/mp4": "mp4",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/flac": "flac",
    "audio/x-flac": "flac",
}
_TYPE_OF = {
    "ogg": "audio/ogg",
    "webm": "audio/webm",
    "m4a": "audio/mp4",
    "mp4": "video/mp4",
    "mp3": "audio/mpeg",
    "wav": "audio/wav",
    "flac": "audio/flac",
}


def sniffed_extension(data: bytes) -> str | None:
    """The container the bytes are in, as the extension it goes by; None when they do not say."""
    head = data[:16]
    if head.startswith(b"OggS"):
        return "ogg"
    if head.startswith(b"\x1a\x45\xdf\xa3"):  # EBML: WebM (browsers' MediaRecorder, Slack clips)
        return "webm"
    if head[4:8] == b"ftyp":
        return "m4a" if head[8:11] == b"M4A" else "mp4"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "wav"
    if head.startswith(b"fLaC"):
        return "flac"
    if head.startswith(b"ID3"):
        return "mp3"
    # an MPEG audio frame: sync bits, and a layer (ADTS AAC has the same sync, layer bits 00)
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06:
        return "mp3"
    return None


def upload_name(data: bytes, mime_type: str) -> tuple[str, str]:
    """(file name, content type) to upload the recording under."""
    declared = mime_type.split(";", 1)[0].strip().lower()
    extension = sniffed_extension(data) or _BY_TYPE.get(declared)
    if extension is None:
        return STEM, declared or "application/octet-stream"  # the server may still read it
    if declared in _BY_TYPE and _BY_TYPE[declared] == extension:
        return f"{STEM}.{extension}", declared
    return f"{STEM}.{extension}", _TYPE_OF[extension]
