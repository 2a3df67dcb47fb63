"""Modules imported at first use: the one lazy-import mechanism of the project.

numpy costs about as much as the whole of ``minewatch status`` and scipy several times
more, yet only the evaluation of some rules and the sound level meter use them; a module
that names them at import time would make every command pay. Such a module writes::

    if TYPE_CHECKING:
        import numpy as np          # the type checker sees the real module
    else:
        np = lazy_import("numpy")   # imported at the first attribute looked up

Nothing is imported (nor put in ``sys.modules``) until an attribute is read.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for module ``name``; imports it at the first attribute read and then forwards."""

    __slots__ = ("_module", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attribute)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # Copied or pickled (e.g. to a worker process) as a stand-in again, importing nothing.
        return (LazyModule, (self._name,))

    def __repr__(self) -> str:
        state = "imported" if self._module is not None else "not imported yet"
        return f"<lazy module {self._name!r} ({state})>"


def lazy_import(name: str) -> Any:
    """A stand-in for ``import name`` that imports it at first use (see the module docstring)."""
    return LazyModule(name)
