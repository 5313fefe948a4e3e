"""A fake OpenAI Chat Completions API: `POST /v1/chat/completions` in the real SSE wire format.

`data:` lines only, ended by `data: [DONE]`; tool calls arrive as deltas keyed by `index` with the
id and name on the first one; the usage chunk comes only when `stream_options.include_usage` asks
for it. `compat=True` behaves like many compatible servers: no usage chunk at all.
"""

from __future__ import annotations

from typing import Any

from tests.fake_llm import FakeLLM, Reply, pieces, sse


class FakeOpenAI(FakeLLM):
    vendor = "openai"
    path = "/v1/chat/completions"
    api_prefix = "/v1"

    def __init__(self, *, compat: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.compat = compat

    def error_body(self, reply: Reply) -> dict[str, Any]:
        code = reply.error if reply.error in ("insufficient_quota", "invalid_api_key") else None
        error = {
            "message": reply.message,
            "type": reply.error or "server_error",
            "param": None,
            "code": code,
        }
        return {"error": error}

    def frames(self, reply: Reply, body: dict[str, Any]) -> list[str]:
        n = len(self.requests)
        head = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": body["model"],
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return sse({**head, "choices": [choice]})

        out = [chunk({"role": "assistant", "content": ""})]
        out.extend(chunk({"content": piece}) for piece in reply.text)
        for k, call in enumerate(reply.calls):
            at = {"index": k} if call.indexed else {}
            first: dict[str, Any] = {**at, "type": "function"}
            if call.id != "":
                first["id"] = call.id or f"call_{n}_{k}"
            args = pieces(call.arguments, call.split)
            if call.split <= 0:  # all at once, name and arguments in one delta
                first["function"] = {"name": call.name, "arguments": call.arguments}
                out.append(chunk({"tool_calls": [first]}))
                continue
            first["function"] = {"name": call.name, "arguments": ""}
            out.append(chunk({"tool_calls": [first]}))
            named = {"name": call.name} if call.name_every_delta else {}
            for piece in [*args, call.arguments] if call.resent else args:
                function = {**named, "arguments": piece}
                out.append(chunk({"tool_calls": [{**at, "function": function}]}))
        if reply.error:
            error = {
                "message": reply.message,
                "type": reply.error,
                "param": None,
                "code": reply.error,
            }
            return [*out, sse({"error": error})]
        out.append(chunk({}, reply.stop or ("tool_calls" if reply.calls else "stop")))
        wants_usage = (body.get("stream_options") or {}).get("include_usage")
        if reply.usage is not None and wants_usage and not self.compat:
            prompt, completion = reply.usage
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
            out.append(sse({**head, "choices": [], "usage": usage}))
        out.append(sse("[DONE]"))
        return out
