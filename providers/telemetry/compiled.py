"""The service's compiled parts (setup.py), imported with an error that says how to build them where they are not."""

from __future__ import annotations

import importlib
from types import ModuleType


def compiled(name: str) -> ModuleType:
    """The extension module `name` (one of setup.py's); an ImportError naming the command that builds it when a
    checkout never built it, or naming what the loader missed when it is built but cannot be loaded (the literal
    search's library, Debian's libvectorscan5, not installed where it runs)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        raise ImportError(
            f"{name} is not built: `make venv` (or `python setup.py build_ext --inplace`) builds the compiled parts"
        ) from error
    except ImportError as error:
        needs = ""
        if "libhs" in str(error):
            needs = " (the literal search needs Vectorscan's libhs: Debian's libvectorscan5)"
        raise ImportError(f"{name} is built but cannot be loaded: {error}{needs}") from error


__all__ = ["compiled"]
