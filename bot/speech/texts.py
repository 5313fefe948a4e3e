"""What the gateway tells users about their voice notes: every such text in this one table, so a
translation replaces them in one place. `{…}` fields are filled in by `str.format`."""

from __future__ import annotations

# the live message while the model works: one line per voice note heard
HEARD = "🎙 heard: {transcript}"
HEARD_MORE = "🎙 … and {count} more"  # the lines a short message has no room for
# to the sender of a voice note, once per message, when `stt` is not configured
VOICE_OFF = (
    "🎙 Voice notes are not turned on here (no speech-to-text is set up), so I can't listen to"
    " yours. Please write it as text."
)
# to the sender of a voice note that could not be transcribed; the rest of the message is answered
NOT_TRANSCRIBED = "🎙 Sorry — I couldn't transcribe the voice note: {reason}."
# reasons of our own (the transcriber's come from bot/speech/openai.py)
NOTHING_HEARD = "no speech was heard in it"
NOT_READ = "its recording could not be read back from storage"
