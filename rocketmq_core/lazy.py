"""Package exports imported on first use, so that importing a package stays cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any


def lazy_exports(package: str, module: str, names: Iterable[str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``names`` from its submodule
    ``module`` the first time one is asked for: a plugin's package can then be loaded
    (to find its hooks) without loading aioquic, pyspark or the store behind it."""
    exported = frozenset(names)

    def __getattr__(name: str) -> Any:
        if name in exported:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
