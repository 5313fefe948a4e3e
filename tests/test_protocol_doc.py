"""docs/websocket-protocol.md names every frame type and error code the code has, and no others."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path
from typing import get_args

from adapters.websocket.protocol import ErrorCode

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "websocket-protocol.md").read_text()
WEBSOCKET = sorted((ROOT / "adapters" / "websocket").glob("*.py"))
DELIVERY = (
    ROOT / "bot" / "pipeline" / "status_frame.py"
)  # emits the agent.* and tool.* frames through Channel.emit_event (for the delivery)
NOTICES = ROOT / "bot" / "handoff" / "notices.py"  # emits handoff.updated, its `EVENT`


def _section(heading: str, end: str = "\n## ") -> str:
    return DOC.split(f"\n{heading}\n", 1)[1].split(end, 1)[0]


def _table_names(section: str) -> set[str]:
    """The first column of a markdown table: | `name` | ..."""
    return set(re.findall(r"^\| `([a-z_.]+)` \|", section, re.M))


def _same(documented: set[str], in_code: set[str]) -> None:
    assert documented == in_code, (
        f"documented but not in the code: {sorted(documented - in_code)}; "
        f"in the code but not documented: {sorted(in_code - documented)}"
    )


def _trees(paths: list[Path]) -> list[ast.Module]:
    return [ast.parse(path.read_text(), str(path)) for path in paths]


def _calls(trees: Sequence[ast.AST], name: str) -> list[ast.Call]:
    """Calls of `name(...)` or `anything.name(...)`."""
    return [
        node
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == name)
            or (isinstance(node.func, ast.Attribute) and node.func.attr == name)
        )
    ]


def _strings(node: ast.AST) -> set[str]:
    return {
        n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def _arg(call: ast.Call, index: int) -> str | None:
    arg = call.args[index] if len(call.args) > index else None
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def client_frame_types() -> set[str]:
    """The keys of protocol.py's parser table: every frame type a client may send."""
    [tree] = _trees([ROOT / "adapters" / "websocket" / "protocol.py"])
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            continue
        targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
        if any(isinstance(t, ast.Name) and t.id == "_PARSERS" for t in targets):
            assert isinstance(node.value, ast.Dict), "_PARSERS is a dict literal"
            return {key for k in node.value.keys if k is not None for key in _strings(k)}
    raise AssertionError("protocol.py has no _PARSERS table; update this test to find the types")


def server_frame_types() -> set[str]:
    """`{"type": ...}` literals, `hub.publish(identity, type, ...)`, and delivery's emit_event kinds."""
    trees = _trees(WEBSOCKET)
    found: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "type":
                        found |= _strings(value)
    found |= {kind for call in _calls(trees, "publish") if (kind := _arg(call, 1))}
    [delivery] = _trees([DELIVERY])
    for function in ast.walk(delivery):
        if not isinstance(function, ast.AsyncFunctionDef | ast.FunctionDef):
            continue
        for call in _calls([function], "emit_event"):
            variable = call.args[1]
            assert isinstance(variable, ast.Name), "emit_event's type is a local name"
            for node in ast.walk(function):
                if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == variable.id for t in node.targets
                ):
                    found |= _strings(node.value)
    [notices] = _trees([NOTICES])
    for node in notices.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "EVENT" for t in node.targets
        ):
            found |= _strings(node.value)
    return found


def error_codes_sent() -> set[str]:
    """The code of every `ProtocolError(code, ...)` raised and `send_error(code, ...)` sent."""
    trees = _trees(WEBSOCKET)
    calls = _calls(trees, "ProtocolError") + _calls(trees, "send_error")
    return {code for call in calls if (code := _arg(call, 0))}


def test_the_code_finds_the_frames_and_codes_it_should() -> None:
    # guards the collectors themselves: a refactor that hides a frame from them fails here
    assert {"hello", "message", "stop", "action"} <= client_frame_types()
    assert {"ready", "error", "message.completed", "agent.finished"} <= server_frame_types()
    assert {"bad_json", "binary_not_supported", "rate_limited"} <= error_codes_sent()


def test_every_client_frame_type_is_documented_and_no_other() -> None:
    documented = set(re.findall(r"^### `(\w+)`", _section("## 2. Client → server frames"), re.M))
    _same(documented, client_frame_types())
    unknown_type = re.search(r"^\| `unknown_type` \|(.*)$", _section("## 5. Errors"), re.M)
    assert unknown_type is not None
    listed = unknown_type.group(1).split("one of", 1)[-1]
    _same(set(re.findall(r"`(\w+)`", listed)), client_frame_types())


def test_every_server_frame_type_is_documented_and_no_other() -> None:
    frames = _section("## 3. Server → client frames", "\n### ")
    _same(_table_names(frames), server_frame_types())


def test_every_error_code_is_documented_and_no_other() -> None:
    codes = set(get_args(ErrorCode))
    sent = error_codes_sent()
    assert sent <= codes, f"codes sent but missing from protocol.ErrorCode: {sorted(sent - codes)}"
    # a code may also reach ProtocolError through a helper's argument (`_optional_str(..., code)`)
    used = {s for call in _calls(_trees(WEBSOCKET), "_optional_str") for s in _strings(call)}
    assert codes <= sent | used, f"codes never sent: {sorted(codes - sent - used)}"
    _same(_table_names(_section("## 5. Errors")), codes)
