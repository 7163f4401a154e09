"""Write and read the kept values: one cloudpickle stream, one checked pass, never touching GPU memory.

Every name is one ``dump`` into the same stream with one pickler, so its memo spans the names:
an instance and its notebook-defined class, or two names for one object, come back as one object.
The pickler's ``reducer_override`` sees every object that is not a plain int/str/list/dict/...,
so the check ("holds a tensor on cuda:0", "an open file") and the save are one pass; it reads
``.device`` only, never ``.cpu()``. A deadline and a byte limit are checked as it goes; a name
that fails is cut off the file (truncate to where it began, memo restored) and the next goes on.
"""

from __future__ import annotations

import functools
import gc
import io
import pickle
import socket
import sys
import time
import types
from dataclasses import dataclass
from typing import Any, BinaryIO

from cudaassert_ipy.base.wording import error_line

__all__ = ["Refused", "Stored", "StreamReader", "StreamWriter"]

HOLDS_TENSOR = "holds a tensor on {device}"
HOLDS_PARAMETERS = "holds parameters on {device}"
HOLDS_RANDOM = "holds a random number generator on {device}"
HOLDS_FILE = "holds an open file ({name})"
HOLDS_SOCKET = "holds an open socket"
HOLDS_GENERATOR = "holds a {kind}, whose position cannot be saved"
HOLDS_CUDA_OBJECT = "holds a {type} (CUDA state)"
CANNOT_SAVE = "cannot be saved ({error})"
TOO_SLOW = "saving took longer than the {seconds:g} s budget"
TOO_BIG = "is larger than the {limit} left for kept values"
DISK = "the disk refused it ({error})"
CHECK_EVERY = 256  # objects between deadline checks in reducer_override


class Refused(Exception):
    """A value cannot be kept; the message is the reason, in the words of the templates above."""


def _device_of(obj: Any) -> str | None:
    """The device of a torch tensor or storage, read from host-side metadata; None for anything else."""
    torch: Any = sys.modules.get("torch")
    if torch is None:
        return None
    typed = getattr(torch, "TypedStorage", ())
    if isinstance(obj, typed):
        obj = getattr(obj, "_untyped_storage", obj)  # its own `.device` warns that TypedStorage is deprecated
    if isinstance(obj, (torch.Tensor, getattr(torch, "UntypedStorage", ()), typed)):
        device: Any = getattr(obj, "device", None)
        return None if device.type == "cpu" else str(device)
    return None


def _module_device(obj: Any) -> str | None:
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.nn.Module):
        return None
    for t in (*obj.parameters(), *obj.buffers()):
        if t.device.type != "cpu":
            return str(t.device)
    return None


def refusal(obj: Any) -> str | None:
    """Why this one object (not what it contains) must not be saved; None when it may be."""
    device = _module_device(obj)
    if device is not None:
        return HOLDS_PARAMETERS.format(device=device)
    device = _device_of(obj)
    if device is not None:
        return HOLDS_TENSOR.format(device=device)
    torch: Any = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Generator) and obj.device.type != "cpu":
        return HOLDS_RANDOM.format(device=obj.device)  # its state lives on the device
    if isinstance(obj, io.IOBase):
        return HOLDS_FILE.format(name=getattr(obj, "name", type(obj).__name__))
    if isinstance(obj, socket.socket):
        return HOLDS_SOCKET
    if isinstance(obj, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
        return HOLDS_GENERATOR.format(kind=type(obj).__name__)
    module = getattr(type(obj), "__module__", "") or ""
    if module.startswith("torch.cuda"):
        return HOLDS_CUDA_OBJECT.format(type=f"{module}.{type(obj).__qualname__}")
    return None


class _Limits(io.RawIOBase):
    """The file the pickler writes to: counts bytes and enforces the deadline and the byte limit."""

    def __init__(self, f: BinaryIO, deadline: float, budget_s: float, limit: int, limit_text: str) -> None:
        self.f, self.deadline, self.budget_s, self.limit, self.limit_text = f, deadline, budget_s, limit, limit_text
        self.written = f.tell()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        n = len(memoryview(b).cast("B"))
        if self.written + n > self.limit:
            raise Refused(TOO_BIG.format(limit=self.limit_text))
        if time.monotonic() > self.deadline:
            raise Refused(TOO_SLOW.format(seconds=self.budget_s))
        try:
            self.f.write(b)
        except OSError as e:
            raise Refused(DISK.format(error=e.strerror or e)) from e
        self.written += n
        return n


def _notebook_function(
    namespace: dict[str, Any],
    code: types.CodeType,
    name: str,
    qualname: str,
    defaults: Any,
    kwdefaults: Any,
    closure: Any,
    attrs: Any,
    doc: Any,
    module: Any,
) -> Any:
    """A notebook-defined function again, whose globals are the new kernel's namespace (as re-running ``def``)."""
    f = types.FunctionType(code, namespace, name, defaults, closure)
    f.__qualname__, f.__kwdefaults__, f.__doc__, f.__module__ = qualname, kwdefaults, doc, module
    if attrs:
        f.__dict__.update(attrs)
    return f


def _notebook_global(namespace: dict[str, Any], name: str) -> Any:
    """A notebook class or function that a replayed cell defines: the new kernel's own, found by name."""
    return namespace[name]


def _pickler_class() -> type:
    import cloudpickle

    class CheckingPickler(cloudpickle.Pickler):  # type: ignore[misc]  # cloudpickle is untyped: the boundary
        """cloudpickle's pickler with the refusal check and the deadline in ``reducer_override``.

        Functions whose globals are the notebook's namespace are rebuilt on the new namespace (not a
        copy of the globals they used). A notebook class or function bound under its own name is saved
        by value only as that name's own entry; inside any other value it is looked up by that name in
        the new kernel (restored or replayed before, in the plan's order), so it stays one class.
        """

        def __init__(self, file: _Limits, namespace: dict[str, Any]) -> None:
            super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
            self.limits, self.namespace = file, namespace
            self.top: Any = None  # the value of the name being dumped
            self.seen = 0

        def reducer_override(self, obj: Any) -> Any:
            why = refusal(obj)
            if why is not None:
                raise Refused(why)
            self.seen += 1
            if self.seen % CHECK_EVERY == 0 and time.monotonic() > self.limits.deadline:
                raise Refused(TOO_SLOW.format(seconds=self.limits.budget_s))
            is_function = isinstance(obj, types.FunctionType)
            if (is_function or isinstance(obj, type)) and getattr(obj, "__module__", None) == "__main__":
                name = getattr(obj, "__name__", "")
                if self.namespace.get(name) is obj and obj is not self.top:
                    return _notebook_global, (name,)
            if is_function and obj.__globals__ is self.namespace:
                return _notebook_function, (
                    obj.__code__,
                    obj.__name__,
                    obj.__qualname__,
                    obj.__defaults__,
                    obj.__kwdefaults__,
                    obj.__closure__,
                    obj.__dict__ or None,
                    obj.__doc__,
                    obj.__module__,
                )
            return super().reducer_override(obj)

    return CheckingPickler


@dataclass(frozen=True)
class Stored:
    """One name in the stream: where it lies, its size, and how long it took to write."""

    name: str
    offset: int
    size: int
    seconds: float
    fresh: bool = False  # written after a failed name: read with a fresh unpickler (the memo was cleared)


class StreamWriter:
    """Dumps names one after another into ``f``; a failed name is cut off the file and clears the memo
    (copying the memo before every name to roll it back costs O(objects) per name)."""

    def __init__(
        self, f: BinaryIO, namespace: dict[str, Any], deadline: float, budget_s: float, limit: int, limit_text: str
    ) -> None:
        self.f = f
        self.limits = _Limits(f, deadline, budget_s, limit, limit_text)
        self.pickler = _pickler_class()(self.limits, namespace)
        self.fresh = False

    def dump(self, name: str, value: Any) -> Stored:
        """Refused (with the reason) when the value cannot be kept; the file is as before the call."""
        offset = self.f.tell()
        started = time.perf_counter()
        self.pickler.top = value
        gc_was_on = gc.isenabled()
        gc.disable()  # millions of new memo entries and containers: the collector's passes find nothing
        try:
            self.pickler.dump(value)
            self.f.flush()
        except BaseException as e:
            self.f.seek(offset)
            self.f.truncate()
            self.limits.written = offset
            self.pickler.clear_memo()
            self.fresh = True
            if isinstance(e, Refused):
                raise
            if isinstance(e, OSError):
                raise Refused(DISK.format(error=e.strerror or e)) from e
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise Refused(CANNOT_SAVE.format(error=error_line(e))) from e
        finally:
            self.pickler.top = None
            if gc_was_on:
                gc.enable()
        stored = Stored(name, offset, self.f.tell() - offset, time.perf_counter() - started, self.fresh)
        self.fresh = False
        return stored


class StreamReader:
    """Loads names in the order they were written; after a failure the next name starts a fresh unpickler."""

    def __init__(self, f: BinaryIO, namespace: dict[str, Any]) -> None:
        self.f, self.namespace = f, namespace
        self.unpickler: pickle.Unpickler | None = None

    def load(self, stored: Stored) -> Any:
        if self.unpickler is None or stored.fresh or self.f.tell() != stored.offset:
            self.f.seek(stored.offset)
            self.unpickler = _Unpickler(self.f, self.namespace)
        gc_was_on = gc.isenabled()
        gc.disable()  # building millions of lists with the collector on costs several times more
        try:
            return self.unpickler.load()
        except BaseException:
            self.unpickler = None  # its memo may miss what this name added: later names that need it fail too
            raise
        finally:
            if gc_was_on:
                gc.enable()


class _Unpickler(pickle.Unpickler):
    """Gives the notebook's namespace to the two loaders above (bound here, so no global state holds it)."""

    def __init__(self, f: BinaryIO, namespace: dict[str, Any]) -> None:
        super().__init__(f)
        self.namespace = namespace

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == "_notebook_function":
            return functools.partial(_notebook_function, self.namespace)
        if module == __name__ and name == "_notebook_global":
            return functools.partial(_notebook_global, self.namespace)
        return super().find_class(module, name)
