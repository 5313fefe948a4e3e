"""The SSE subscriber between the event hub and a response: bounded, ended once, never raising."""

from __future__ import annotations

import json

from adapters.api.sse import QUEUE_FRAMES, SseSubscriber, event


def test_a_subscriber_that_falls_behind_is_dropped_not_grown() -> None:
    subscriber = SseSubscriber()
    frames = [json.dumps({"type": "message.updated", "seq": n}) for n in range(QUEUE_FRAMES + 5)]
    taken = [subscriber.push(frame) for frame in frames]
    assert taken == [True] * QUEUE_FRAMES + [False] * 5  # False: the hub detaches it
    assert subscriber.overflowed
    subscriber.end()  # the server's shutdown after an overflow: no error, nothing more queued
    assert subscriber.queue.qsize() == QUEUE_FRAMES + 1  # the frames and one end marker


def test_an_ended_subscriber_takes_nothing_more() -> None:
    subscriber = SseSubscriber()
    subscriber.end()
    subscriber.end()
    assert subscriber.push('{"type": "x", "seq": 1}') is False
    assert subscriber.queue.qsize() == 1 and not subscriber.overflowed


def test_an_event_record_carries_the_seq_as_its_id() -> None:
    frame = {"type": "message.completed", "text": "two\nlines", "seq": 7}
    record = event(frame).decode()
    assert record.startswith("id: 7\nevent: message.completed\ndata: {")
    assert record.endswith("}\n\n") and record.count("\n") == 4  # the newline stays escaped
    assert event({"type": "error", "code": "too_slow"}).decode().startswith("event: error\n")
