"""Speech to text: voice notes read by an OpenAI-compatible transcription endpoint (`stt`)."""
