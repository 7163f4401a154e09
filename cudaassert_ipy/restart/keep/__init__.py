"""Keep expensive CPU setup across Restart & replay: save what kept cells bound, restore it instead of re-running.

The old kernel, just before it restarts, saves the names that each kept cell writes (read from the
cell's code, see :mod:`.names`) into ``<plan dir>/keep-<plan key>/`` (0700): one cloudpickle
stream plus a manifest. The new kernel, replaying the plan, restores a kept cell's names at that
cell's place in the order (so earlier replayed cells cannot overwrite them) and skips running it.

Never wrong, only slower: a cell is kept only when skipping it gives the same state as running it,
and every doubt replays it with a one-line reason: a value that holds a CUDA tensor or parameters,
an open file or socket, a generator; a save over its time or size budget; a full disk; a later
cell that changes the same name; a cell that does more than bind names; a value that fails to
load in the new kernel. The saved state is read only under the plan's key and stamp, only from a
directory and files owned by this user and writable by nobody else, and is deleted after restore
or once the plan has expired.

One module per step: :mod:`.names` (what a cell's code writes), :mod:`.selection` (which cells may be
kept, which to offer), :mod:`.store` (the checked pickle stream), :mod:`.save` (the old kernel),
:mod:`.restore` (the new kernel), :mod:`.result` (what happened, and the words for it). The restart
(``request``) and the replay use the names below.
"""

from __future__ import annotations

from cudaassert_ipy.restart.keep.restore import Restorer, discard, opened, sweep
from cudaassert_ipy.restart.keep.result import KeepBudget, KeepCell, KeepCellOutcome, KeepResult, NameOutcome, keep_dir
from cudaassert_ipy.restart.keep.save import save, save_for_plan
from cudaassert_ipy.restart.keep.selection import cells_for_plan, suggest

__all__ = [
    "KeepBudget",
    "KeepCell",
    "KeepCellOutcome",
    "KeepResult",
    "NameOutcome",
    "Restorer",
    "cells_for_plan",
    "discard",
    "keep_dir",
    "opened",
    "save",
    "save_for_plan",
    "suggest",
    "sweep",
]
