"""Names a package re-exports but loads on first use (PEP 562): a room whose modules are also programs
(``python -m``) or carry heavy imports keeps them out of its ``import``, and still offers every name from one place.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

__all__ = ["lazy_names"]


def lazy_names(
    package: str, home: dict[str, str], names: list[str], bound: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's module-level ``__getattr__`` and ``__dir__``: a name of ``home`` (name -> the package's module
    that defines it) is imported from its module on first use and bound in ``bound`` (the package's globals)."""

    def __getattr__(name: str) -> Any:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home[name]}"), name)
        bound[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*bound, *names})

    return __getattr__, __dir__
