"""The diagnosis panel: stock ipywidgets composed by one builder; what the buttons do is injected.

Why one raw bundle: ipywidgets cuts a widget's ``text/plain`` at 110 characters, and headless
runs (nbconvert, papermill, Kaggle "Save Version", GitHub's viewer) show only ``text/plain`` or
``text/html``. The panel's output therefore carries the widget view *and* the full report.
Click handlers give feedback through widget state: their prints would go to the log console.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cudaassert_ipy.diagnose.diagnosis import Diagnosis
from cudaassert_ipy.view.actions import Action, FixActions, ReplayChoice
from cudaassert_ipy.view.report import (
    DETAILS,
    GpuInput,
    cause_html,
    details_html,
    evidence_html,
    gpu_html,
    gpu_line,
    header_html,
    headline_bundle,
    samples_html,
    to_html,
    to_markdown,
    to_text,
)
from cudaassert_ipy.view.style import ALIVE, ROOT, block, escape, stylesheet

__all__ = ["PANEL_CLASS", "available", "build", "bundle", "display_panel", "headline_bundle"]

PANEL_CLASS = ROOT
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
COPY_LABEL = "Copy report"
COPY_HIDE = "Hide report"
COPY_HINT = "Select all in the box (Ctrl+A, or ⌘A on macOS), then copy (Ctrl+C / ⌘C)."
REPLAY_HEAD = "Setup cells to replay (untick the ones to skip):"
KEEP_LABEL = "keep"
KEEP_TIP = (
    "Keep this cell's values across the restart (restored, not re-run); values that hold CUDA tensors "
    "are replayed instead"
)
ACTION_FAILED = "{label} failed: {error}"


def available() -> bool:
    """True where a kernel can talk to a widget frontend; batch runs and terminals get the text report."""
    if os.environ.get("KAGGLE_KERNEL_RUN_TYPE", "") == "Batch":
        return False
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def choice_label(choice: ReplayChoice) -> str:
    """'[3] model = Net() (1.2 s)': the prompt number, the cell's first line, how long it took."""
    s = choice.duration
    took = f"{s:.1f} s" if s < 10 else (f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min")
    return f"[{choice.number}] {choice.first_line} ({took})"


# -- the builder --------------------------------------------------------------------------------
def _run_action(action: Action, button: Any, status: Any) -> None:
    """Call the injected action; a failure becomes visible text in the panel, not a log-console trace."""
    if action.callback is None:
        return
    try:
        action.callback(button)
    except Exception as e:
        failed = ACTION_FAILED.format(label=action.label, error=e)
        status.value = block(f'<span class="ca-head">{escape(failed)}</span>')


def _copy_action(widgets: Any, d: Diagnosis, gpu: str | None, box: Any) -> Action:
    """The panel's own Copy report: a Textarea holding the markdown report, shown on demand."""
    area = widgets.Textarea(value=to_markdown(d, gpu), layout=widgets.Layout(width="100%", height="14em"))
    area.add_class("cudaassert-copy")
    hint = widgets.HTML(block(f'<span class="ca-muted">{escape(COPY_HINT)}</span>'))

    def toggle(button: Any) -> None:
        shown = bool(box.children)
        box.children = () if shown else (hint, area)
        button.description = COPY_LABEL if shown else COPY_HIDE
        button.button_style = "" if shown else "info"

    return Action("copy_report", COPY_LABEL, callback=toggle, tooltip="Show the report as markdown, ready to copy")


def _details(widgets: Any, d: Diagnosis) -> tuple[Any, Any]:
    toggle = widgets.ToggleButton(
        value=False,
        description=DETAILS,
        tooltip="Show the raw exception and assertion text",
        layout=widgets.Layout(width="auto"),
    )
    raw = widgets.HTML(details_html(d), layout=widgets.Layout(display="none"))
    raw.add_class("cudaassert-details")

    def flip(change: Mapping[str, object]) -> None:
        raw.layout.display = None if change["new"] else "none"

    toggle.observe(flip, names="value")
    return toggle, raw


def _checklist(widgets: Any, choices: Sequence[ReplayChoice]) -> Any:
    boxes = [widgets.HTML(block(f'<div class="ca-label">{escape(REPLAY_HEAD)}</div>'))]
    for choice in choices:
        box = widgets.Checkbox(
            value=choice.selected, description=choice_label(choice), indent=False, layout=widgets.Layout(width="auto")
        )

        def bind(change: Mapping[str, object], c: ReplayChoice = choice) -> None:
            c.selected = bool(change["new"])

        box.observe(bind, names="value")
        keep = widgets.ToggleButton(
            value=choice.keep, description=KEEP_LABEL, tooltip=KEEP_TIP, layout=widgets.Layout(width="auto")
        )

        def bind_keep(change: Mapping[str, object], c: ReplayChoice = choice) -> None:
            c.keep = bool(change["new"])

        keep.observe(bind_keep, names="value")
        boxes.append(widgets.HBox([box, keep]))
    return widgets.VBox(boxes)


def build(
    diagnosis: Diagnosis,
    actions: Sequence[Action],
    gpu_state: GpuInput = None,
    replay_choices: Sequence[ReplayChoice] | None = None,
    header: bool = True,
    fix: FixActions | None = None,
) -> Any:
    """One VBox: header, cause and fix, the patch (view/fix_panel.py), evidence, Details, GPU state, replay
    checklist, buttons.

    ``header=False`` when the header is displayed as its own output just above (see display_panel).
    """
    import ipywidgets as widgets

    d = diagnosis
    gpu = gpu_line(gpu_state)
    status = widgets.HTML("")
    copy_box = widgets.VBox([])
    if replay_choices is None:  # restart.actions_for returns a list that carries its checkboxes
        replay_choices = getattr(actions, "replay_choices", None)
    actions = list(actions)
    if not any(a.key == "copy_report" for a in actions):
        actions.append(_copy_action(widgets, d, gpu, copy_box))
    buttons: list[Any] = []
    reasons: dict[str, list[str]] = {}  # reason -> labels: one note for buttons that share a reason
    for i, action in enumerate(actions):
        button = widgets.Button(
            description=action.label, tooltip=action.tooltip or action.label, layout=widgets.Layout(width="auto")
        )
        button.add_class(f"cudaassert-action-{action.key.replace('_', '-')}")
        if action.enabled:
            button.on_click(_clicker(action, status))
            if i == 0:
                button.button_style = "primary"
        else:
            button.disabled = True
            button.tooltip = action.disabled_reason or "not available here"
            reasons.setdefault(button.tooltip, []).append(action.label)
        buttons.append(button)
    toggle, raw = _details(widgets, d)
    # the first HTML widget carries the panel's one <style> block (view/style.py)
    children = [widgets.HTML(stylesheet() + header_html(d))] if header else []
    style = "" if header else stylesheet()
    children += [widgets.HTML(style + cause_html(d, with_cause=header))]
    if fix is not None:
        from cudaassert_ipy.view.fix_panel import build_fix

        section = build_fix(widgets, fix)
        if section is not None:
            children.append(section)
    if d.samples:
        children.append(widgets.HTML(samples_html(d)))
    children.append(widgets.HTML(evidence_html(d)))
    if gpu_state is not None:
        children.append(widgets.HTML(gpu_html(gpu_state)))
    if replay_choices:
        children.append(_checklist(widgets, replay_choices))
    children.append(widgets.HBox([*buttons, toggle], layout=widgets.Layout(flex_flow="row wrap")))
    if reasons:
        notes = "<br>".join(f"{escape(', '.join(labels))}: {escape(reason)}" for reason, labels in reasons.items())
        children.append(widgets.HTML(block(f'<span class="ca-muted">{notes}</span>')))
    children += [status, copy_box, raw]
    panel = widgets.VBox(children)
    panel.add_class(PANEL_CLASS)
    if not d.context_dead:
        panel.add_class(ALIVE)
    return panel


def _clicker(action: Action, status: Any) -> Callable[[Any], None]:
    return lambda button: _run_action(action, button, status)


# -- display ------------------------------------------------------------------------------------
def bundle(
    widget: Any, diagnosis: Diagnosis, gpu_state: GpuInput = None, fix: FixActions | None = None
) -> dict[str, Any]:
    """The widget view plus the complete text and HTML report (not ipywidgets' 110-character cut), the patch
    included."""
    make = getattr(widget, "_repr_mimebundle_", None)  # ipywidgets 8
    data = dict(make() or {}) if callable(make) else {}
    if WIDGET_VIEW not in data:  # ipywidgets 7 builds this inside _ipython_display_
        data[WIDGET_VIEW] = {"version_major": 2, "version_minor": 0, "model_id": widget.model_id}
    proposed = fix.fix if fix is not None else None
    data["text/plain"] = to_text(diagnosis, gpu_state, proposed)
    data["text/html"] = to_html(diagnosis, gpu_state, proposed)
    return data


def display_panel(
    diagnosis: Diagnosis,
    actions: Sequence[Action],
    gpu_state: GpuInput = None,
    replay_choices: Sequence[ReplayChoice] | None = None,
    fix: FixActions | None = None,
) -> None:
    """Display the headline, then the panel where widgets render (the full report everywhere else).

    The headline is its own plain output so that a notebook reopened without saved widget state
    (Lab then shows only "Error displaying widget: model not found" for the widget) still says
    what happened and why.
    """
    from cudaassert_ipy.view.display import display

    display(headline_bundle(diagnosis), raw=True)
    widget = build(diagnosis, actions, gpu_state, replay_choices, header=False, fix=fix)
    display(bundle(widget, diagnosis, gpu_state, fix), raw=True)
    if not callable(getattr(type(widget), "_repr_mimebundle_", None)):
        handle = getattr(widget, "_handle_displayed", None)  # ipywidgets 7: fire on_displayed callbacks
        if callable(handle):
            handle()
