"""aiogram, imported with its Telegram types' schemas built when first used rather than all at once.

aiogram's ~300 types are pydantic models declared `defer_build=True`, but `aiogram.types` ends by
calling `model_rebuild(_types_namespace=…)` on every one of them, which builds each type's whole
schema, nested types included, separately: ~1.6 s of CPU at import, most of the channel's start
(aiogram's import: ~2.4 s, now ~0.8 s). While aiogram is imported, that call is not made for a
type not built yet; instead the names it would have resolved the type's annotations with (the
types aiogram imports for type checkers only) are added to the type's module, where pydantic
looks when it builds a deferred model, and pydantic builds each type the first time one is
validated or serialised (`Update`, everything a poll can carry: ~0.1 s, once, right after the
import below; a method's request or response the first time it is called). The ~150 methods'
models, which do not say `defer_build`, are deferred the same way while aiogram is imported
(pydantic's config default; 8 % fewer instructions for the channel's import).

The import is hooked (`install`, from adapters/telegram/__init__.py, which imports nothing), so
aiogram is lazy the same way whoever imports it first. If pydantic's `model_rebuild` is not where
it was, or `Update` does not build, every type is built as aiogram would have (the import costs
what it did) and that is logged.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import logging
import sys
from collections.abc import MutableMapping, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)


class _AiogramFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != "aiogram":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _TypesBuiltLater(spec.loader)
        return spec


class _TypesBuiltLater(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        made: ModuleType | None = self.loader.create_module(spec)
        return made

    def exec_module(self, module: ModuleType) -> None:
        from pydantic import BaseModel

        module.__loader__ = self.loader
        original = BaseModel.__dict__.get("model_rebuild")
        if not isinstance(original, classmethod) or not hasattr(BaseModel, "__pydantic_complete__"):
            log.info("pydantic's model_rebuild is not what it was: aiogram's types built at import")
            self.loader.exec_module(module)
            return
        kept: list[tuple[type[Any], dict[str, Any]]] = []

        def model_rebuild(cls: type[Any], /, **options: Any) -> bool | None:
            namespace = options.get("_types_namespace")
            if (
                namespace is not None
                and not options.get("force")
                and cls.__module__.startswith("aiogram.")
                and not cls.__pydantic_complete__
            ):
                kept.append((cls, namespace))
                return None
            options["_parent_namespace_depth"] = options.get("_parent_namespace_depth", 2) + 1
            result: bool | None = original.__func__(cls, **options)
            return result

        setattr(BaseModel, "model_rebuild", classmethod(model_rebuild))  # noqa: B010
        defaults = _config_defaults()
        if defaults is not None:  # the methods' models too (~150), built on their first call
            defaults["defer_build"] = True
        try:
            self.loader.exec_module(module)
        finally:
            setattr(BaseModel, "model_rebuild", original)  # noqa: B010
            if defaults is not None:
                defaults["defer_build"] = False
        _check(kept)


def _config_defaults() -> MutableMapping[str, Any] | None:
    """pydantic's defaults of a model's config (a model that does not say `defer_build` takes
    it from here), or None if they are not where they were."""
    try:
        from pydantic._internal._config import config_defaults
    except ImportError:
        return None
    defaults: Any = config_defaults  # a ConfigDict: a dict
    if not isinstance(defaults, dict) or defaults.get("defer_build") is not False:
        return None
    return defaults


def _check(kept: list[tuple[type[Any], dict[str, Any]]]) -> None:
    """Each type's module given the names its annotations use (aiogram imports them only for
    type checkers), so a type builds wherever it is first used (a method's request, a response);
    then `Update` (every type a poll can carry) built. If it fails, all are built as before."""
    for cls, namespace in kept:
        names = vars(sys.modules[cls.__module__])
        for name, value in namespace.items():
            names.setdefault(name, value)
    update = next((cls for cls, _ in kept if cls.__name__ == "Update"), None)
    try:
        if update is not None:
            update.model_validate({"update_id": 0})
        return
    except Exception as exc:  # a pydantic that no longer looks where the namespace was kept
        log.info("aiogram's types built at import (lazily: %s: %s)", type(exc).__name__, exc)
    for cls, namespace in kept:
        cls.model_rebuild(force=True, _types_namespace=namespace)


def install() -> None:
    """aiogram, whenever it is first imported, is imported as above (once; not if it already is)."""
    if "aiogram" in sys.modules or any(isinstance(f, _AiogramFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _AiogramFinder())
