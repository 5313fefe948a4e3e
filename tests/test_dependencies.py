"""Every third-party package our code imports is a declared dependency, and an SDK's internals are
named only in that SDK's door, so a release that changes them is dealt with in one module."""

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# the packages we ship, as pyproject.toml finds them ("bot*" ...)
OURS = tuple(p.rstrip("*") for p in PROJECT["tool"]["setuptools"]["packages"]["find"]["include"])
# the only modules that may use an SDK's private names (each falls back to its public API)
DOORS = {
    "agent/providers/anthropic_sdk.py",
    "agent/providers/openai_sdk.py",
    "adapters/slack/bolt.py",
    "adapters/feishu/sdk.py",
    "adapters/telegram/sdk.py",
}
# where an SDK's objects are handled: a private attribute there belongs to an SDK
SDK_USERS = ("agent/providers", "adapters/slack", "adapters/feishu")


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for package in OURS:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))


def _imported(tree: ast.Module) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_third_party_import_is_declared() -> None:
    declared = {
        _canonical(re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0])
        for requirement in PROJECT["project"]["dependencies"]
    }
    providers = packages_distributions()
    undeclared = set()
    for where, tree in _modules():
        for module in _imported(tree):
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top in OURS or top == "__future__":
                continue
            names = {_canonical(d) for d in providers.get(top, [top])}
            if not names & declared:
                undeclared.add(f"{where} imports {top} ({', '.join(sorted(names))})")
    assert not undeclared, sorted(undeclared)


def test_sdk_internals_are_named_only_in_their_door() -> None:
    outside = []
    for where, tree in _modules():
        if where in DOORS:
            continue
        for module in _imported(tree):
            top = module.split(".")[0]
            private = any(part.startswith("_") for part in module.split(".")[1:])
            if private and top not in OURS:
                outside.append(f"{where} imports {module}")
        if not where.startswith(SDK_USERS):
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                outside.append(f"{where}:{node.lineno} uses .{node.attr}")
    assert not outside, outside
