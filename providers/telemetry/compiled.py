"""The service's compiled parts (setup.py), imported with an error that says how to build them where they are not."""

from __future__ import annotations

import importlib
from types import ModuleType


def compiled(name: str) -> ModuleType:
    """The extension module `name` (one of setup.py's); an ImportError naming the command that builds it when a
    checkout never built it."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise ImportError(
            f"{name} is not built: `make venv` (or `python setup.py build_ext --inplace`) builds the compiled parts"
        ) from error


__all__ = ["compiled"]
