"""How the replay looks: a progress bar over the setup cells, their outputs, and the "what is on" banner.

Where the panel can render widgets: an ``IntProgress`` and an ``Accordion`` with one collapsed
``Output`` per replayed cell (a failed cell is opened). Elsewhere (headless runs, terminal IPython,
frontends without a widget manager): one plain line per cell, and the outputs as they come.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Protocol, TypedDict

from cudaassert_ipy.base.wording import PREFIX
from cudaassert_ipy.view.style import ACCENTS, box, escape

__all__ = ["CellView", "OnBanner", "PanelSetting", "on_text", "progress_for"]


class CellView(TypedDict):
    """What the progress view shows of one replayed cell."""

    number: int | None  # In [n] before the restart
    first_line: str


class PanelSetting(Protocol):
    """The setting the view reads (``CudaAssert.panel``)."""

    @property
    def panel(self) -> bool:  # widgets where they render
        ...


class _Host(Protocol):
    @property
    def config(self) -> PanelSetting: ...


ON_HEADER = "{prefix} On in this kernel:"
ON_BLOCKING = (
    "CUDA_LAUNCH_BLOCKING=1: each CUDA call waits for the GPU, so an error is raised at the line that "
    "caused it. Cost: GPU work runs slower (often 1.2–3x)."
)
ON_VALIDATORS = (
    "validators: cross_entropy, indexing, embedding, gather, one_hot … check their inputs before the "
    "kernel launches, so a bad value is a Python error and the GPU stays alive. Cost: one small check "
    "and one GPU sync per checked call (one to a few per training step)."
)
ON_CPU = "CPU mode: CUDA_VISIBLE_DEVICES= hides the GPU, so everything runs on the CPU (much slower for training)."
ON_BACK = "Back to normal speed: `%cudaassert restart --normal` (restarts and replays your setup without these)."
ON_NORMAL = "{prefix} Normal speed: no blocking mode, no validators."
ON_FAILING_BATCH = (
    "the failing batch: run one training step on `cudaassert_ipy.failing_batch({loader})`, a "
    "DataLoader over exactly its {count} samples, to name the bad value in seconds."
)
TEXT_STEP = "{prefix} replay [{bar}] {index}/{count}: [{number}] {first_line}"
TEXT_DONE = "{prefix}   ... ok ({seconds:.2f} s)"
TEXT_FAILED = "{prefix}   ... failed ({seconds:.2f} s)"
TEXT_KEPT = "{prefix}   ... kept: restored, not run ({seconds:.2f} s)"
WIDGET_KEPT = "↺ {title}: kept, restored, not run"
WIDGET_LABEL = "Replaying setup: {index}/{count}"
WIDGET_DONE = "Setup replayed: {count}/{count}"
WIDGET_FAILED = "Replay stopped at cell [{number}]"


def on_text(mode: str, failing_batch: tuple[str, tuple[int, ...]] | None = None) -> str:
    if mode == "normal":
        return ON_NORMAL.format(prefix=PREFIX)
    items = [ON_BLOCKING, ON_VALIDATORS] + ([ON_CPU] if mode == "cpu" else [])
    if failing_batch is not None:
        items.append(ON_FAILING_BATCH.format(loader=failing_batch[0], count=len(failing_batch[1])))
    return "\n".join([ON_HEADER.format(prefix=PREFIX), *(f"  - {i}" for i in items), f"  {ON_BACK}"])


def _code(escaped: str) -> str:
    """`%magic` → <code>%magic</code> in already escaped text."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


class OnBanner:
    """Displayed after the replay: what is on, what it costs, and the way back."""

    def __init__(self, mode: str, failing_batch: tuple[str, tuple[int, ...]] | None = None) -> None:
        self.mode = mode
        self.text = on_text(mode, failing_batch)

    def _repr_mimebundle_(self, include: object = None, exclude: object = None) -> dict[str, str]:
        lines = self.text.splitlines()
        body = "".join(f"<div>{_code(escape(line.strip()))}</div>" for line in lines[1:])
        return {
            "text/plain": self.text,
            "text/html": box("cudaassert-on", f"<b>{escape(lines[0])}</b>{body}", ACCENTS["info"]),
        }

    def __repr__(self) -> str:
        return self.text


class TextProgress:
    how = ""

    def __init__(self, cells: list[CellView]) -> None:
        self.cells = cells

    def start(self) -> None:
        return None

    def _step(self, i: int) -> None:
        n, c = len(self.cells), self.cells[i]
        bar = "#" * (i + 1) + "." * (n - i - 1) if n <= 20 else f"{100 * (i + 1) // n:3d}%"
        print(
            TEXT_STEP.format(
                prefix=PREFIX, bar=bar, index=i + 1, count=n, number=c.get("number"), first_line=c.get("first_line", "")
            ),
            flush=True,
        )

    @contextlib.contextmanager
    def cell(self, i: int) -> Iterator[None]:
        self._step(i)
        yield

    def kept(self, i: int, seconds: float) -> None:
        """A kept cell: its values were restored, the cell did not run."""
        self._step(i)
        print(TEXT_KEPT.format(prefix=PREFIX, seconds=seconds), flush=True)

    def cell_done(self, i: int, seconds: float, error: BaseException | None) -> None:
        print((TEXT_FAILED if error is not None else TEXT_DONE).format(prefix=PREFIX, seconds=seconds), flush=True)

    def finish(self, ok: bool) -> None:
        return None


class WidgetProgress:
    how = " below, collapsed (click a cell to open it)"

    def __init__(self, cells: list[CellView]) -> None:
        import ipywidgets as w

        self.cells = cells
        n = len(cells)
        self.bar = w.IntProgress(value=0, min=0, max=n, description="Replay", bar_style="info")
        self.label = w.Label(WIDGET_LABEL.format(index=0, count=n))
        self.outputs = [w.Output() for _ in cells]
        self.accordion = w.Accordion(children=self.outputs)
        for i, c in enumerate(cells):
            self.accordion.set_title(i, f"[{c.get('number')}] {c.get('first_line', '')}")
        self.accordion.selected_index = None
        self.box = w.VBox([w.HBox([self.bar, self.label]), self.accordion])

    def start(self) -> None:
        from cudaassert_ipy.view.display import display

        display(self.box)

    @contextlib.contextmanager
    def cell(self, i: int) -> Iterator[None]:
        self.label.value = WIDGET_LABEL.format(index=i + 1, count=len(self.cells))
        with self.outputs[i]:
            yield

    def cell_done(self, i: int, seconds: float, error: BaseException | None) -> None:
        self.bar.value = i + (0 if error is not None else 1)
        title = f"[{self.cells[i].get('number')}] {self.cells[i].get('first_line', '')} ({seconds:.2f} s)"
        self.accordion.set_title(i, ("✗ " if error is not None else "✓ ") + title)
        if error is not None:
            self.accordion.selected_index = i
            self.label.value = WIDGET_FAILED.format(number=self.cells[i].get("number"))

    def kept(self, i: int, seconds: float) -> None:
        """A kept cell: counted as done, titled as restored (it did not run, so its output stays empty)."""
        self.bar.value = i + 1
        title = f"[{self.cells[i].get('number')}] {self.cells[i].get('first_line', '')} ({seconds:.2f} s)"
        self.accordion.set_title(i, WIDGET_KEPT.format(title=title))

    def finish(self, ok: bool) -> None:
        self.bar.bar_style = "success" if ok else "danger"
        if ok:
            self.label.value = WIDGET_DONE.format(count=len(self.cells))


def progress_for(ext: _Host, cells: list[CellView]) -> TextProgress | WidgetProgress:
    """Widgets only where the panel would render (same test), else plain text."""
    try:
        from cudaassert_ipy.view import panel

        if ext.config.panel and panel.available():
            return WidgetProgress(cells)
    except Exception:  # no panel module, no ipywidgets, no widget manager: text is always right
        return TextProgress(cells)
    return TextProgress(cells)
