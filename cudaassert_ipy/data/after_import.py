"""Run a callback right after one module is imported, without importing it ourselves.

Why: ``%load_ext cudaassert`` must not import torch (it costs seconds), yet the DataLoader
bookmark has to patch ``torch.utils.data.dataloader`` before the first batch. A finder on
``sys.meta_path`` sees the import of that one name and wraps its loader; removing the finder
undoes it. Every other import passes through untouched (one string comparison).

The finder and loader are duck-typed, not ``importlib.abc`` subclasses: importing that module costs a
script runner's start-up about 7 ms, and the import system only calls the methods.
"""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from cudaassert_ipy.base.passthrough import drop_own_frame

if TYPE_CHECKING:
    import importlib.abc

__all__ = ["AfterImport"]


class _Loader:
    """The module's own loader, plus the callback once the module has executed."""

    def __init__(self, inner: importlib.abc.Loader, callback: Callable[[ModuleType], None]) -> None:
        self._inner = inner
        self._callback = callback

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        __tracebackhide__ = True  # an error in the module itself shows no frame of ours (see passthrough)
        try:
            self._inner.exec_module(module)
        except BaseException as error:
            drop_own_frame(error)
            raise
        self._callback(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... for tracebacks and inspect
        return getattr(self._inner, name)


class AfterImport:
    """Calls ``callback(module)`` once ``name`` has been imported (at once when it already is)."""

    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return None
        spec.loader = cast("importlib.abc.Loader", _Loader(spec.loader, self.callback))  # duck-typed: see above
        return spec

    def install(self) -> None:
        module = sys.modules.get(self.name)
        if module is not None:
            self.callback(module)
        elif self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def uninstall(self) -> None:
        while self in sys.meta_path:
            sys.meta_path.remove(self)
