"""Shared by the tests of restart/keep/: run cells in one namespace as the old kernel, restore them in another.

The old and the new kernel are two namespaces in one process; tests/test_keep_kernels.py does the same across two
real kernels.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from cudaassert_ipy.restart import keep
from cudaassert_ipy.restart.keep import KeepCell, KeepCellOutcome

__all__ = ["STAMP", "restore_all", "run_cells"]

STAMP = 1700000000.0


def run_cells(*cells: tuple[str, bool]) -> tuple[dict, list[KeepCell]]:
    """Run sources in one namespace, as a notebook would; (namespace, history)."""
    ns: dict = {"__name__": "__main__"}
    history = []
    for n, (source, kept) in enumerate(cells, start=1):
        exec(compile(textwrap.dedent(source), f"<cell {n}>", "exec"), ns)
        history.append(KeepCell(n, f"id{n}", textwrap.dedent(source), kept))
    return ns, history


def restore_all(
    tmp_path: Path, history: list[KeepCell], key: str = "k1", stamp: float = STAMP, new_ns: dict | None = None
) -> tuple[dict, dict[int, KeepCellOutcome], str | None]:
    """The new kernel's side: each cell in order is restored or (when not kept) run."""
    ns = {"__name__": "__main__"} if new_ns is None else new_ns
    outcomes = {}
    with keep.opened(key, stamp, ns, tmp_path) as restorer:
        for cell in history:
            outcome = restorer.restore(cell.number, cell.cell_id, cell.source)
            if outcome is not None:
                outcomes[cell.number] = outcome
            if outcome is None or not outcome.kept:
                exec(compile(cell.source, f"<replay {cell.number}>", "exec"), ns)
    return ns, outcomes, restorer.note
