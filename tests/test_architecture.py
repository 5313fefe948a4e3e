"""Imports go one way: bot -> adapters, agent, tools; agent -> tools; adapters and tools import none
of ours but the neutral content/."""

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OURS = {"bot", "adapters", "agent", "tools", "content"}
# content/ is the neutral vocabulary of parts and blobs: everyone may import it, it imports no one
ALLOWED = {
    "bot": {"bot", "adapters", "agent", "tools", "content"},
    "agent": {"agent", "tools", "content"},
    "tools": {"tools", "content"},
    "adapters": {"adapters", "content"},
    "content": {"content"},
}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found & OURS


def test_imports_go_one_way() -> None:
    wrong = []
    for package, allowed in ALLOWED.items():
        for path in (ROOT / package).rglob("*.py"):
            for imported in _imports(path) - allowed:
                wrong.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert not wrong, wrong


def test_every_module_has_a_docstring() -> None:
    missing = [
        str(path.relative_to(ROOT))
        for package in ALLOWED
        for path in (ROOT / package).rglob("*.py")
        if ast.get_docstring(ast.parse(path.read_text())) is None
    ]
    assert not missing, missing


# the modules that build and run the app: channels plug in through adapters.registry
APP_MODULES = ("bot.runtime.app", "bot.runtime.wiring", "bot.runtime.web_server")


def _path(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def test_the_app_names_no_channel() -> None:
    """Channels plug in through adapters.registry: the app's modules import no channel package."""
    for name in APP_MODULES:
        path = _path(name)
        modules: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules |= {f"{node.module}.{alias.name}" for alias in node.names}
        adapters = {m for m in modules if m.startswith("adapters.")}
        # the vocabulary, the registry and the cross-channel seams (who holds an account, how
        # fast a user may send)
        allowed = {"base", "registry", "accounts", "rates"}
        assert {m.split(".")[1] for m in adapters} <= allowed, (name, adapters)
        source = path.read_text().lower()
        for channel in ("telegram", "websocket", "terminal"):
            assert channel not in source, f"{name} mentions {channel!r}"


# the modules that build the object graph: each part gets its collaborators in its constructor
COMPOSITION_ROOTS = (
    "bot.runtime.app",
    "bot.runtime.wiring",
    "bot.pipeline.gateway",
    "bot.redis.mode",
)
# the tool registry's masker (and the tools' `services`): the tools' own wiring, not yet passed in
STILL_ASSIGNED = {("bot.runtime.app", "self.registry.pii")}


def test_no_wiring_by_assignment_after_construction() -> None:
    """`workers.deliver = ...`, `self.turns.resumer = ...`: an object finished by someone else
    after it was built. A composition root sets attributes of `self` only (STYLE.md)."""
    found = []
    for name in COMPOSITION_ROOTS:
        for node in ast.walk(ast.parse(_path(name).read_text())):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            else:
                continue
            for target in targets:
                if not isinstance(target, ast.Attribute):
                    continue
                owner = target.value
                if isinstance(owner, ast.Name) and owner.id == "self":
                    continue
                if (name, ast.unparse(target)) not in STILL_ASSIGNED:
                    found.append(f"{name}:{node.lineno}: {ast.unparse(target)} = ...")
    assert not found, found


MAX_LINES = 400  # STYLE.md: at 400, a module becomes a package (or modules) along its seams


def test_no_module_has_outgrown_its_idea() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for package in ALLOWED
        for path in (ROOT / package).rglob("*.py")
        if (lines := len(path.read_text().splitlines())) >= MAX_LINES
    }
    assert not long, f"split these along their seams (STYLE.md, Layout): {long}"


# ToolContext and what it carries: every field typed (tools/base.py)
TYPED_CONTEXT = ("ToolContext", "ToolDeps")


def _names_in(node: ast.AST) -> set[str]:
    """Every name an annotation mentions (`Any`, `typing.Any`, and inside string annotations)."""
    found: set[str] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            found.add(child.id)
        elif isinstance(child, ast.Attribute):
            found.add(child.attr)
        elif isinstance(child, ast.Constant) and isinstance(child.value, str):
            found |= _names_in(ast.parse(child.value, mode="eval"))
    return found


def test_the_tool_context_is_typed() -> None:
    """No `Any` in ToolContext or its deps: a tool's every reach is a typed field."""
    tree = ast.parse((ROOT / "tools" / "base.py").read_text())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    assert set(TYPED_CONTEXT) <= set(classes)
    untyped = [
        f"{name}.{field.target.id}"
        for name in TYPED_CONTEXT
        for field in classes[name].body
        if isinstance(field, ast.AnnAssign)
        and isinstance(field.target, ast.Name)
        and "Any" in _names_in(field.annotation)
    ]
    assert not untyped, f"type these fields (no Any, no bag of services): {untyped}"


def test_no_service_is_looked_up_by_a_string_key() -> None:
    """`ctx.services["http"]` and `services.get("agents")` were wiring by name; a tool reaches
    what it needs through a typed field of its context (`ctx.deps.http`)."""
    found = []
    for package in ALLOWED:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                target: ast.AST | None = None
                if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                    target = node.value
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"get", "setdefault", "pop"}
                ):
                    target = node.func.value
                name = getattr(target, "attr", None) or getattr(target, "id", None)
                if name == "services" and isinstance(node, ast.Subscript | ast.Call):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports anywhere: at the top, under `if TYPE_CHECKING:`
    or inside a function (an import that only hides a cycle still makes one)."""
    paths = {_module_of(path): path for package in OURS for path in (ROOT / package).rglob("*.py")}

    def ours(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        is_package = path.name == "__init__.py"
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                named |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from this module's package, `level - 1` up
                    anchor = module.split(".")[: module.count(".") + 1 - node.level + is_package]
                    base = ".".join([*anchor, *filter(None, [node.module])])
                named |= {f"{base}.{alias.name}" for alias in node.names}
        # a package's own __init__ runs before any of its modules: not an edge of a cycle
        parents = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
        graph[module] = {m for n in named if (m := ours(n)) is not None} - parents - {module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> Iterator[list[str]]:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                yield from visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(component) > 1:
                yield sorted(component)

    for module in sorted(graph):
        if module not in index:
            yield from visit(module)


def test_no_import_cycles() -> None:
    """Two modules that import each other are one module cut in two (STYLE.md): give the shared
    piece its own module, or pass in what is needed. Type-only and in-function imports count."""
    graph = _import_graph()
    cycles = [
        {module: sorted(graph[module] & set(component)) for module in component}
        for component in _cycles(graph)
    ]
    assert not cycles, cycles
