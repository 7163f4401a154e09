"""The panel's fix section (stock ipywidgets): the diff and the cell it changes, the safety class, the
alternatives side by side, and two buttons, Apply and Apply, Restart & replay, that call what the
shell handed in (``FixActions.apply``: the ``%cudaassert fix apply`` path).

Why an Output widget: what applying shows (the apply request a frontend extension reads, the
"Patched cell" line) must land in the notebook, not in the log console a click handler prints to.
Where no frontend edits a cell (Colab, Kaggle, VS Code), the patched cell is offered to copy.
When the data does not decide, no alternative is picked: the buttons wait for the user's choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cudaassert_ipy.fix.model import NONE
from cudaassert_ipy.view.actions import FixActions
from cudaassert_ipy.view.fix_report import fix_html
from cudaassert_ipy.view.style import block, escape

__all__ = ["APPLY", "APPLY_RESTART", "CHOOSE", "COPY_CELL", "build_fix"]

APPLY = "Apply"
APPLY_RESTART = "Apply, Restart & replay"
CHOOSE = "Choose the fix to apply:"
COPY_CELL = "Copy patched cell"
COPY_HIDE = "Hide patched cell"
COPY_HINT = (
    "This frontend does not edit notebook cells: select all in the box (Ctrl+A / ⌘A), copy it (Ctrl+C / ⌘C) "
    "and paste it over cell {where}."
)
NO_CHOICE = "Choose an alternative first: the data does not decide between them."
FAILED = "{label} failed: {error}"


def _where(actions: FixActions, choice: int | None) -> str:
    alt = actions.fix.alternatives[choice - 1] if choice is not None else actions.fix.chosen
    patch = alt.patch if alt is not None else None
    if patch is None:
        return "the cell"
    return f"[{patch.number}]" if patch.number is not None else (patch.path or "the cell")


def build_fix(widgets: Any, actions: FixActions) -> Any | None:
    """The fix section as one VBox, or None when nothing is proposed and nothing needs saying."""
    fix = actions.fix
    if fix.safety == NONE:
        return widgets.HTML(fix_html(fix)) if fix.why else None
    children: list[Any] = [widgets.HTML(fix_html(fix))]
    status = widgets.HTML("")
    output = widgets.Output()
    patched = [(i, a) for i, a in enumerate(fix.alternatives, 1) if a.patch is not None]
    state: dict[str, int | None] = {"choice": fix.default + 1 if fix.default is not None else None}
    picker = None
    if len(patched) > 1 or (patched and fix.default is None):
        options = [(f"[{i}] {a.title}", i) for i, a in patched]
        picker = widgets.RadioButtons(
            options=options, value=state["choice"], description="", layout=widgets.Layout(width="auto")
        )
        picker.add_class("cudaassert-fix-choice")
        children.append(widgets.HTML(block(f'<div class="ca-label">{escape(CHOOSE)}</div>')))
        children.append(picker)
    apply_button = widgets.Button(
        description=APPLY,
        layout=widgets.Layout(width="auto"),
        tooltip="Patch the cell in this kernel's history (and in the notebook where a frontend extension edits cells)",
    )
    restart_button = widgets.Button(
        description=APPLY_RESTART,
        layout=widgets.Layout(width="auto"),
        tooltip="Patch the cell, restart with validators on, replay the setup cells "
        "(the patched one included) and verify on the failing batch",
    )
    apply_button.add_class("cudaassert-action-fix-apply")
    restart_button.add_class("cudaassert-action-fix-apply-restart")
    copy_box = widgets.VBox([])
    copy_button = None
    if not actions.editable:
        copy_button = widgets.Button(
            description=COPY_CELL,
            layout=widgets.Layout(width="auto"),
            tooltip="Show the patched cell, ready to copy into the notebook",
        )
        copy_button.add_class("cudaassert-action-fix-copy")

    def refresh() -> None:
        ready = state["choice"] is not None and actions.apply is not None
        apply_button.disabled = not ready
        restart_button.disabled = not ready or actions.restart_disabled is not None
        apply_button.button_style = "primary" if ready else ""
        reason = actions.restart_disabled if ready else NO_CHOICE
        restart_button.tooltip = reason or restart_button.tooltip
        if copy_button is not None:
            copy_button.disabled = state["choice"] is None
            if copy_box.children:
                show_copy()

    def show_copy() -> None:
        choice = state["choice"]
        alt = fix.alternatives[choice - 1] if choice is not None else None
        if alt is None or alt.patch is None:
            copy_box.children = ()
            return
        area = widgets.Textarea(value=alt.patch.new_source, layout=widgets.Layout(width="100%", height="12em"))
        area.add_class("cudaassert-fix-cell")
        hint = widgets.HTML(
            block(f'<span class="ca-muted">{escape(COPY_HINT.format(where=_where(actions, choice)))}</span>')
        )
        copy_box.children = (hint, area)

    def chose(change: Mapping[str, object]) -> None:
        value = change["new"]
        state["choice"] = value if isinstance(value, int) else None
        refresh()

    def run(restart: bool) -> None:
        label = APPLY_RESTART if restart else APPLY
        if actions.apply is None or state["choice"] is None:
            status.value = block(f'<span class="ca-muted">{escape(NO_CHOICE)}</span>')
            return
        choose = state["choice"] if fix.default is None or state["choice"] != fix.default + 1 else None
        try:
            with output:
                line = actions.apply(choose, restart)
        except Exception as e:  # a usage mistake or a failure: visible in the panel, not in the log console
            line = FAILED.format(label=label, error=e)
        status.value = block(f"<span>{escape(line)}</span>") if line else ""

    if picker is not None:
        picker.observe(chose, names="value")
    apply_button.on_click(lambda _b: run(False))
    restart_button.on_click(lambda _b: run(True))
    buttons = [apply_button, restart_button]
    if copy_button is not None:

        def toggle(_b: Any) -> None:
            if copy_box.children:
                copy_box.children = ()
                copy_button.description = COPY_CELL
            else:
                show_copy()
                copy_button.description = COPY_HIDE

        copy_button.on_click(toggle)
        buttons.append(copy_button)
    refresh()
    children += [widgets.HBox(buttons, layout=widgets.Layout(flex_flow="row wrap")), status, copy_box, output]
    section = widgets.VBox(children)
    section.add_class("cudaassert-fix-section")
    return section
