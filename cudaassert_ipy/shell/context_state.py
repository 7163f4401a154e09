"""Is this process's GPU context alive? After a sticky error it is dead for good.

While dead, IPython displays a CUDA tensor by its shape and dtype instead of raising (a
``text/plain`` printer registered by type name, so torch need not be imported); unload removes
the printer and the normal repr is back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the diagnosis modules load at the first failure, not with %load_ext
    from cudaassert_ipy.diagnose.diagnosis import Diagnosis

__all__ = ["ContextState", "safe_tensor_text"]

SAFE_REPR = "<CUDA tensor shape={shape} dtype={dtype} device={device}: not shown, the GPU context is dead>"


def safe_tensor_text(t: Any) -> str:
    return SAFE_REPR.format(shape=tuple(t.shape), dtype=t.dtype, device=t.device)


@dataclass
class ContextState:
    """Alive until the first sticky failure; then remembers which cell and which cause."""

    dead_since: Diagnosis | None = None
    _formatter: Any = None
    _previous: Any = None

    @property
    def dead(self) -> bool:
        return self.dead_since is not None

    def mark_dead(self, diagnosis: Diagnosis, shell: Any) -> None:
        if self.dead_since is None:
            self.dead_since = diagnosis
            self._install_printer(shell)

    def _install_printer(self, shell: Any) -> None:
        formatter = shell.display_formatter.formatters["text/plain"]

        def printer(obj: Any, p: Any, cycle: bool) -> None:
            if getattr(obj, "is_cuda", False) or getattr(getattr(obj, "device", None), "type", "cpu") != "cpu":
                p.text(safe_tensor_text(obj))
            else:
                p.text(repr(obj))

        self._previous = formatter.for_type_by_name("torch", "Tensor", printer)
        self._formatter = formatter

    def reset(self) -> None:
        """Forget the dead state and remove the printer (unload, or a test)."""
        if self._formatter is not None:
            self._formatter.pop("torch.Tensor", None)
            if self._previous is not None:  # someone else's printer was there first: put it back
                self._formatter.for_type_by_name("torch", "Tensor", self._previous)
            self._formatter = self._previous = None
        self.dead_since = None
