"""A fake LLM server for benchmarks: OpenAI chat.completions and Anthropic messages, streamed, 0 ms.

It serves both APIs on one port in their real SSE wire formats (the frames tests/fake_openai.py and
tests/fake_anthropic.py send), with a fixed answer of `--deltas` text pieces rendered once at start:
the model costs nothing, so what a benchmark measures is the gateway and the vendor's SDK. It does
not record or parse the requests (tests/fake_llm.py does, for tests); it reads and drops them.
Run as its own process, optionally pinned to CPUs so it does not share the gateway's core:

    python bench/fake_llm_server.py [--deltas 5] [--cpus 0]    # prints "PORT <n>"

Point `llm.base_url` at `http://127.0.0.1:<n>/v1` for openai, `http://127.0.0.1:<n>` for anthropic.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

ANSWER = ("ok", ": ", "noted", ", ", "thank", "s", " ", "a", " lot", ".")


def answer_pieces(deltas: int) -> list[str]:
    """The streamed answer, `deltas` pieces (the scripted model in ws_bench answers the same)."""
    return [ANSWER[i % len(ANSWER)] for i in range(deltas)]


def _sse(data: Any, event: str | None = None) -> str:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return (f"event: {event}\n" if event else "") + f"data: {text}\n\n"


def openai_stream(pieces: list[str], model: str = "bench-model") -> bytes:
    head = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _sse({**head, "choices": [choice]})

    usage = {
        "prompt_tokens": 12,
        "completion_tokens": len(pieces),
        "total_tokens": 12 + len(pieces),
    }
    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"content": piece}) for piece in pieces]
    frames += [chunk({}, "stop"), _sse({**head, "choices": [], "usage": usage}), _sse("[DONE]")]
    return "".join(frames).encode()


def anthropic_stream(pieces: list[str], model: str = "bench-model") -> bytes:
    message: dict[str, Any] = {
        "id": "msg_bench", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }  # fmt: skip
    block = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    }
    frames = [_sse({"type": "message_start", "message": message}, "message_start")]
    frames += [_sse({"type": "ping"}, "ping"), _sse(block, "content_block_start")]
    for piece in pieces:
        delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}  # fmt: skip
        frames.append(_sse(delta, "content_block_delta"))
    stop = {"stop_reason": "end_turn", "stop_sequence": None}
    end = {"type": "message_delta", "delta": stop, "usage": {"output_tokens": len(pieces)}}
    frames += [_sse({"type": "content_block_stop", "index": 0}, "content_block_stop")]
    frames += [_sse(end, "message_delta"), _sse({"type": "message_stop"}, "message_stop")]
    return "".join(frames).encode()


def application(deltas: int) -> web.Application:
    pieces = answer_pieces(deltas)

    def streaming(body: bytes) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            await request.read()  # the whole request arrives, as a real server would read it
            response = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await response.prepare(request)
            await response.write(body)
            await response.write_eof()
            return response

        return handler

    app = web.Application(client_max_size=64 * 2**20)  # a long conversation's body is large
    app.router.add_post("/v1/chat/completions", streaming(openai_stream(pieces)))
    app.router.add_post("/v1/messages", streaming(anthropic_stream(pieces)))
    return app


async def serve(deltas: int) -> None:
    runner = web.AppRunner(application(deltas), handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(f"PORT {runner.addresses[0][1]}", flush=True)
    await asyncio.Future()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--deltas", type=int, default=5, help="text pieces in the answer")
    parser.add_argument("--cpus", help="comma-separated CPUs to pin this process to")
    args = parser.parse_args()
    if args.cpus:
        os.sched_setaffinity(0, {int(cpu) for cpu in args.cpus.split(",")})
    asyncio.run(serve(args.deltas))


if __name__ == "__main__":
    main()
