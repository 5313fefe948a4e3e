"""Feishu event payloads as the platform sends them (platforms.md §3.3), and signed callbacks."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import os
import time
from typing import Any

from Crypto.Cipher import AES

from tests.feishu_fake import APP_ID, BOT_OPEN_ID

TOKEN = "verify-token-1"
ENCRYPT_KEY = "encrypt-key-1"
_ids = itertools.count(1)


def message_event(
    text: str = "hi",
    *,
    chat_id: str = "oc_p2p",
    chat_type: str = "p2p",
    message_id: str | None = None,
    event_id: str | None = None,
    kind: str = "text",
    content: dict[str, Any] | None = None,
    mentions: list[dict[str, Any]] | None = None,
    thread_id: str | None = None,
    user: str = "ou_user",
) -> dict[str, Any]:
    number = next(_ids)
    message: dict[str, Any] = {
        "message_id": message_id or f"om_in_{number}",
        "root_id": "",
        "parent_id": "",
        "create_time": str(int(time.time() * 1000)),
        "chat_id": chat_id,
        "chat_type": chat_type,
        "message_type": kind,
        "content": json.dumps(content if content is not None else {"text": text}),
        "mentions": mentions or [],
    }
    if thread_id:
        message["thread_id"] = thread_id
    return {
        "schema": "2.0",
        "header": _header(event_id, "im.message.receive_v1"),
        "event": {
            "sender": {
                "sender_id": {"open_id": user, "union_id": "on_x", "user_id": "u1"},
                "sender_type": "user",
                "tenant_key": "tk",
            },
            "message": message,
        },
    }


def mention(key: str, open_id: str = BOT_OPEN_ID, name: str = "Bot") -> dict[str, Any]:
    return {"key": key, "id": {"open_id": open_id}, "name": name, "tenant_key": "tk"}


def action_event(
    value: dict[str, Any], *, chat_id: str, message_id: str, user: str = "ou_user"
) -> dict[str, Any]:
    return {
        "schema": "2.0",
        "header": _header(None, "card.action.trigger"),
        "event": {
            "operator": {"open_id": user, "tenant_key": "tk"},
            "token": "c-123",
            "action": {"tag": "button", "value": value},
            "host": "im_message",
            "context": {"open_message_id": message_id, "open_chat_id": chat_id},
        },
    }


def _header(event_id: str | None, kind: str) -> dict[str, Any]:
    return {
        "event_id": event_id or f"ev_{next(_ids)}",
        "event_type": kind,
        "create_time": str(int(time.time() * 1000)),
        "token": TOKEN,
        "app_id": APP_ID,
        "tenant_key": "tk",
    }


def signed(
    payload: dict[str, Any],
    *,
    key: str = ENCRYPT_KEY,
    timestamp: float | None = None,
    nonce: str | None = None,
) -> tuple[bytes, dict[str, str]]:
    """The body and headers Feishu sends: encrypted with `key`, signed over the body."""
    body = json.dumps({"encrypt": encrypt(json.dumps(payload).encode(), key)})
    stamp = str(int(timestamp if timestamp is not None else time.time()))
    nonce = nonce or f"n{next(_ids)}"
    digest = hashlib.sha256((stamp + nonce + key).encode() + body.encode()).hexdigest()
    headers = {
        "X-Lark-Request-Timestamp": stamp,
        "X-Lark-Request-Nonce": nonce,
        "X-Lark-Signature": digest,
        "Content-Type": "application/json",
    }
    return body.encode(), headers


def encrypt(plain: bytes, key: str) -> str:
    """base64(iv + AES-256-CBC(PKCS7(plain))) with key sha256(encrypt_key), as Feishu sends it."""
    iv = os.urandom(16)
    pad = 16 - len(plain) % 16
    cipher = AES.new(hashlib.sha256(key.encode()).digest(), AES.MODE_CBC, iv)
    return base64.b64encode(iv + cipher.encrypt(plain + bytes([pad]) * pad)).decode()
