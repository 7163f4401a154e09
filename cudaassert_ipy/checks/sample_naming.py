"""The one slot through which the validators name the dataset samples behind bad values; process-wide by nature.

A validator can be on anywhere (``with cudaassert_ipy.validators():``, ``%%cuda_debug``, the restart's
``CUDAASSERT_VALIDATORS=1``), while what knows the samples, the DataLoader bookmark, belongs to the loaded IPython
extension. So the extension installs a lookup here on load and removes it on unload (data/sample_lookup.py), and
checks/ names samples without importing the bookmark. The value sits in a ``ContextVar`` (what the extension set at
``%load_ext`` is seen by the cells after it, and a context the extension never touched sees none).

Standard library only: the extension installs its lookup at load, which must not import torch.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only: the errors module (the validators' exceptions) is not needed at load
    from collections.abc import Sequence
    from typing import TypeAlias

    from cudaassert_ipy.checks.errors import Example, SampleNames

    #: ``lookup(checked tensor's shape, examples)``: the samples of a recorded batch field of that shape holding
    #: those values, or None. Reads shapes and recorded CPU batches only, never GPU memory.
    SampleLookup: TypeAlias = Callable[[tuple[int, ...], Sequence[Example]], SampleNames | None]

__all__ = ["SAMPLE_NAMING", "SampleLookup", "SampleNaming"]


class SampleNaming:
    """Holds the lookup the validators ask when they raise (see the module docstring); one per process."""

    def __init__(self) -> None:
        self._lookup: ContextVar[SampleLookup | None] = ContextVar("cudaassert_sample_lookup", default=None)

    def current(self) -> SampleLookup | None:
        """The installed lookup, or None (no extension loaded, or its bookmark is off)."""
        return self._lookup.get()

    def install(self, lookup: SampleLookup) -> Callable[[], None]:
        """Make ``lookup`` the current one; returns the undo (for the extension's unload)."""
        token = self._lookup.set(lookup)

        def remove() -> None:
            try:
                self._lookup.reset(token)
            except ValueError:  # unloaded from another context than the one that loaded
                self._lookup.set(None)

        return remove


#: The process's one slot (set by the IPython extension while it is loaded with its bookmark on).
SAMPLE_NAMING = SampleNaming()
