"""A fake Anthropic Messages API: `POST /v1/messages` answered in the real SSE wire format.

Every event carries an `event:` line (the SDK skips events without one), a `ping` comes early as
the real API sends it, and errors mid-stream are `event: error`. It accepts the key as
`Authorization: Bearer` (anthropic 2.x) or `x-api-key`, and does not pin `anthropic-version`.
"""

from __future__ import annotations

from typing import Any

from tests.fake_llm import FakeLLM, Reply, pieces, sse


class FakeAnthropic(FakeLLM):
    vendor = "anthropic"
    path = "/v1/messages"

    def error_body(self, reply: Reply) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {"type": reply.error or "api_error", "message": reply.message},
        }

    def keepalive(self) -> str:
        return sse({"type": "ping"}, "ping")

    def frames(self, reply: Reply, body: dict[str, Any]) -> list[str]:
        n = len(self.requests)
        usage_in, usage_out = reply.usage or (0, 0)
        message = {
            "id": f"msg_{n}", "type": "message", "role": "assistant", "model": body["model"],
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": usage_in, "output_tokens": 1},
        }  # fmt: skip
        out = [sse({"type": "message_start", "message": message}, "message_start")]
        out.append(sse({"type": "ping"}, "ping"))
        index = 0
        if reply.text:
            out.append(_start(index, {"type": "text", "text": ""}))
            for piece in reply.text:
                out.append(_delta(index, {"type": "text_delta", "text": piece}))
            out.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
            index += 1
        for k, call in enumerate(reply.calls):
            block = {
                "type": "tool_use",
                "id": call.id or f"toolu_{n}_{k}",
                "name": call.name,
                "input": {},
            }
            out.append(_start(index, block))
            for piece in pieces(call.arguments, call.split):
                out.append(_delta(index, {"type": "input_json_delta", "partial_json": piece}))
            out.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
            index += 1
        if reply.error:
            error = {"type": "error", "error": {"type": reply.error, "message": reply.message}}
            return [*out, sse(error, "error")]
        stop = reply.stop or ("tool_use" if reply.calls else "end_turn")
        delta = {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}}
        if reply.usage is not None:
            delta["usage"] = {"output_tokens": usage_out}
        out.append(sse(delta, "message_delta"))
        out.append(sse({"type": "message_stop"}, "message_stop"))
        return out


def _start(index: int, block: dict[str, Any]) -> str:
    event = {"type": "content_block_start", "index": index, "content_block": block}
    return sse(event, "content_block_start")


def _delta(index: int, delta: dict[str, Any]) -> str:
    return sse(
        {"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"
    )
