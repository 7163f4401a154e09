"""The panel without a browser: its widget tree, its buttons clicked in Python, and the bundle it displays."""

from __future__ import annotations

import html
import re

import ipywidgets as widgets
import pytest
from gpu_double import assertion_lines
from IPython.utils.capture import capture_output

from cudaassert_ipy.capture.assert_lines import scan
from cudaassert_ipy.diagnose.detection import classify
from cudaassert_ipy.diagnose.diagnosis import diagnose
from cudaassert_ipy.diagnose.evidence import collect
from cudaassert_ipy.diagnose.gpu_state import GpuState
from cudaassert_ipy.view import panel
from cudaassert_ipy.view.actions import Action, ReplayChoice
from cudaassert_ipy.view.report import to_html, to_markdown, to_text

SETUP = """
import torch, torch.nn as nn, torch.nn.functional as F
from gpu_double import fail_like_gpu
class Birds:
    classes = [f"species_{i}" for i in range(196)]
train_ds = Birds()
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 195))
labels = torch.tensor([3, 195, 7, 195])
"""
TRAIN = "logits = model(torch.randn(4, 8))\nloss = fail_like_gpu()  # F.cross_entropy(logits, labels) on a GPU\n"
GPU_LINE = "GPU state unavailable: NVML library not found (no NVIDIA driver on this machine)"
H100 = GpuState(
    device_index=0,
    nvml_index=0,
    name="NVIDIA H100 80GB HBM3",
    process_bytes=3 * 2**30,
    used_bytes=3 * 2**30,
    total_bytes=80 * 2**30,
    other_processes=0,
    ecc_volatile_uncorrected=0,
    ecc_aggregate_uncorrected=0,
    remapped_rows_uncorrectable=0,
    remap_pending=False,
    remap_failed=False,
)
DEAD = (
    "The GPU context of this kernel is dead. Nothing on the GPU can be used again in this process; restart the kernel."
)


def _diagnose(shell, cell: str, stderr: str = ""):
    """What the extension would diagnose for this cell, with the assertion lines the double wrote to fd 2."""
    result = shell.run_cell(cell, store_history=True)
    err = result.error_in_exec
    ev = collect(classify(err), scan(stderr), cell, result.execution_count, shell.user_ns, stderr)
    return diagnose(ev)


@pytest.fixture
def diagnosis(shell):
    shell.run_cell(SETUP)
    return _diagnose(shell, TRAIN, assertion_lines("nll_loss_target_out_of_range").decode())


def walk(w):
    yield w
    for child in getattr(w, "children", ()):
        yield from walk(child)


def find(root, kind, **state):
    return [w for w in walk(root) if isinstance(w, kind) and all(getattr(w, k) == v for k, v in state.items())]


def html_of(root) -> str:
    return "\n".join(w.value for w in walk(root) if isinstance(w, widgets.HTML))


def test_the_panel_tells_the_story_header_cause_fix_your_line_and_evidence(diagnosis):
    root = panel.build(diagnosis, [], GPU_LINE)
    state = root.get_state()
    assert "cudaassert-panel" in state["_dom_classes"]
    header, cause, evidence = root.children[:3]
    assert '<div class="ca-head">GPU context dead · class label out of range in cross_entropy</div>' in header.value
    assert DEAD in header.value
    assert diagnosis.specific.startswith("cross_entropy got class label 195")
    assert "out_features=196" in diagnosis.specific
    assert f"<b>Cause:</b> {html.escape(diagnosis.specific)}</p>" in cause.value
    assert "<b>Fix:</b> Make the labels 0-based integers in 0..C-1" in cause.value
    assert (
        "<b>Your code</b> (line 2):</p><pre>loss = fail_like_gpu()  # F.cross_entropy(logits, labels) on a GPU</pre>"
    ) in cause.value
    assert (
        "<pre>Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t &gt;= 0 &amp;&amp; t &lt; n_classes` "
        "failed in 64 threads of 1 block</pre>"
    ) in evidence.value
    assert "<li><code>model.2</code>: out_features=195</li>" in evidence.value
    assert "<li><code>train_ds.classes</code>: 196 entries</li>" in evidence.value
    assert "Exception: <code>AcceleratorError: CUDA error: device-side assert triggered</code>" in evidence.value
    assert f'<div class="ca-label">GPU state</div><div class="ca-muted">{GPU_LINE}</div>' in html_of(root)


def test_details_are_collapsed_and_the_toggle_reveals_the_raw_text(diagnosis):
    root = panel.build(diagnosis, [])
    (toggle,) = find(root, widgets.ToggleButton)
    (raw,) = [w for w in walk(root) if "cudaassert-details" in w.get_state().get("_dom_classes", ())]
    assert toggle.get_state()["description"] == "Details" and toggle.value is False
    assert toggle.tooltip == "Show the raw exception and assertion text"
    assert raw.layout.get_state()["display"] == "none"
    assert "CUDA kernel errors might be asynchronously reported at some other API call" in raw.value
    assert "block: [0,0,0], thread: [0,0,0] Assertion `t &gt;= 0 &amp;&amp; t &lt; n_classes` failed." in raw.value
    assert "<b>What it means:</b> A loss function got a class label that is negative" in raw.value
    toggle.value = True
    assert raw.layout.display is None
    toggle.value = False
    assert raw.layout.display == "none"


def test_clicking_an_enabled_button_calls_the_injected_action_with_that_button(diagnosis):
    clicks = []
    root = panel.build(diagnosis, [Action("restart_replay", "Restart & replay setup", callback=clicks.append)])
    (button,) = find(root, widgets.Button, description="Restart & replay setup")
    assert button.get_state()["disabled"] is False and button.button_style == "primary"
    button.click()
    assert clicks == [button]


def test_a_disabled_action_is_a_disabled_button_with_its_reason_as_tooltip_and_visible_note(diagnosis):
    reason = "VS Code does not restart kernels by itself: press Restart, then run the next cell"
    actions = [
        Action("restart_replay", "Restart & replay setup", callback=print),
        Action("restart_cpu", "Restart on CPU", callback=print, disabled_reason=reason),
    ]
    root = panel.build(diagnosis, actions)
    (button,) = find(root, widgets.Button, description="Restart on CPU")
    state = button.get_state()
    assert state["disabled"] is True and state["tooltip"] == reason
    assert f'<span class="ca-muted">Restart on CPU: {reason}</span>' in html_of(root)


def test_buttons_that_share_a_reason_share_one_note(diagnosis):
    reason = "This run has no interactive frontend (nbclient), so nothing here can restart the kernel."
    actions = [
        Action("restart_replay", "Restart & replay setup", callback=print, disabled_reason=reason),
        Action("restart_cpu", "Restart on CPU", callback=print, disabled_reason=reason),
    ]
    text = html_of(panel.build(diagnosis, actions))
    assert f'<span class="ca-muted">Restart &amp; replay setup, Restart on CPU: {reason}</span>' in text
    assert text.count(reason) == 1


def test_the_checklist_comes_with_the_restart_modules_action_list(diagnosis):
    from cudaassert_ipy.restart.request import ActionList

    choices = [ReplayChoice(2, "import torch", 0.5)]
    root = panel.build(diagnosis, ActionList([Action("restart_replay", "Restart & replay setup", print)], choices))
    (box,) = find(root, widgets.Checkbox)
    box.value = False
    assert box.description == "[2] import torch (0.5 s)" and choices[0].selected is False


def test_an_action_without_a_callback_is_disabled_too(diagnosis):
    root = panel.build(diagnosis, [Action("restart_replay", "Restart & replay setup")])
    (button,) = find(root, widgets.Button, description="Restart & replay setup")
    assert button.disabled and button.tooltip == "not available here"
    assert '<span class="ca-muted">Restart &amp; replay setup: not available here</span>' in html_of(root)


def test_an_action_that_fails_says_so_in_the_panel_not_in_the_log_console(diagnosis):
    def broken(button):
        raise OSError("no Jupyter server answered")

    root = panel.build(diagnosis, [Action("restart_replay", "Restart & replay setup", callback=broken)])
    (button,) = find(root, widgets.Button, description="Restart & replay setup")
    button.click()
    assert "Restart &amp; replay setup failed: no Jupyter server answered" in html_of(root)


def test_replay_checkboxes_show_each_setup_cell_and_flip_selected(diagnosis):
    choices = [
        ReplayChoice(2, "import torch, torch.nn as nn", 1.234),
        ReplayChoice(5, "model = Net()", 12.4),
        ReplayChoice(7, "ds = load_birds()", 300.0, selected=False),
    ]
    root = panel.build(diagnosis, [], None, choices)
    boxes = find(root, widgets.Checkbox)
    assert [b.get_state()["description"] for b in boxes] == [
        "[2] import torch, torch.nn as nn (1.2 s)",
        "[5] model = Net() (12 s)",
        "[7] ds = load_birds() (5.0 min)",
    ]
    assert [b.value for b in boxes] == [True, True, False]
    assert "Setup cells to replay (untick the ones to skip):" in html_of(root)
    boxes[0].value = False
    boxes[2].value = True
    assert [c.selected for c in choices] == [False, True, True]


def test_copy_report_is_added_and_shows_the_markdown_report_ready_to_copy(diagnosis):
    root = panel.build(diagnosis, [Action("restart_replay", "Restart & replay setup", callback=print)], GPU_LINE)
    buttons = find(root, widgets.Button)
    assert [b.description for b in buttons] == ["Restart & replay setup", "Copy report"]
    assert find(root, widgets.Textarea) == []
    assert buttons[1].tooltip == "Show the report as markdown, ready to copy"
    buttons[1].click()
    (area,) = find(root, widgets.Textarea)
    assert area.get_state()["value"] == to_markdown(diagnosis, GPU_LINE)
    assert buttons[1].description == "Hide report"
    assert "Select all in the box (Ctrl+A, or ⌘A on macOS), then copy (Ctrl+C / ⌘C)." in html_of(root)
    buttons[1].click()
    assert find(root, widgets.Textarea) == [] and buttons[1].description == "Copy report"


def test_a_copy_report_action_supplied_by_the_caller_replaces_the_panels_own(diagnosis):
    clicks = []
    root = panel.build(diagnosis, [Action("copy_report", "Copy report", callback=clicks.append)])
    (button,) = find(root, widgets.Button, description="Copy report")
    button.click()
    assert clicks == [button]


def test_a_gpu_snapshot_is_shown_row_by_row_and_an_absent_one_leaves_the_section_out(diagnosis):
    root = panel.build(diagnosis, [], H100)
    assert (
        "NVIDIA H100 80GB HBM3 (GPU 0)<br>this process holds 3.0 GiB of 80.0 GiB<br>no other processes<br>"
        "ECC uncorrectable 0 since driver load, 0 lifetime, remapped rows 0<br>reading: software fault in your "
        "code, not the hardware: the GPU reports no uncorrectable memory errors"
    ) in html_of(root)
    assert "GPU state" not in html_of(panel.build(diagnosis, [], None))


def test_a_cpu_error_gets_the_calmer_colour_and_no_assertion_section(shell):
    shell.run_cell(SETUP)
    d = _diagnose(shell, "F.cross_entropy(model(torch.randn(4, 8)), labels)")
    root = panel.build(d, [])
    assert set(root.get_state()["_dom_classes"]) == {"cudaassert-panel", "cudaassert-alive"}
    assert "CPU error · class label out of range in cross_entropy" in html_of(root)
    assert "This error was raised on the CPU, so no GPU context was harmed." in html_of(root)
    assert "Loss.cu" not in html_of(root)


def test_the_look_uses_the_frontends_theme_variables_and_no_external_assets(diagnosis):
    text = html_of(panel.build(diagnosis, [], H100, [ReplayChoice(1, "x = 1", 0.1)]))
    for var in ("--jp-layout-color1", "--jp-ui-font-color1", "--jp-error-color1", "--jp-border-color2"):
        assert f"var({var}," in text
    assert not re.search(r"<link|<script|<img|<iframe|src=|href=|@import|url\(", text)  # text may name URLs


def test_the_bundle_holds_the_widget_view_and_the_complete_report_not_a_110_character_cut(diagnosis):
    root = panel.build(diagnosis, [], GPU_LINE)
    data = panel.bundle(root, diagnosis, GPU_LINE)
    assert set(data) == {"application/vnd.jupyter.widget-view+json", "text/plain", "text/html"}
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == root.model_id
    assert data["text/plain"] == to_text(diagnosis, GPU_LINE) and len(data["text/plain"]) > 1000
    assert data["text/plain"].startswith(f"[cudaassert] {DEAD}")
    assert data["text/html"] == to_html(diagnosis, GPU_LINE)


def test_display_panel_publishes_the_headline_then_one_output_with_all_three_mimetypes(diagnosis):
    with capture_output() as captured:
        assert panel.display_panel(diagnosis, [], gpu_state=H100) is None  # no second display as a cell result
    headline, output = captured.outputs
    assert set(headline.data) == {"text/plain", "text/html"}
    assert headline.data["text/plain"].startswith(f"[cudaassert] {diagnosis.status}")
    assert set(output.data) == {"application/vnd.jupyter.widget-view+json", "text/plain", "text/html"}
    assert re.fullmatch("[0-9a-f]{32}", output.data["application/vnd.jupyter.widget-view+json"]["model_id"])
    assert "GPU: NVIDIA H100 80GB HBM3 (GPU 0); this process holds 3.0 GiB of 80.0 GiB;" in output.data["text/plain"]


def test_a_shell_without_a_kernel_cannot_show_widgets(shell):
    assert panel.available() is False


def test_the_headline_is_its_own_output_so_a_missing_widget_model_never_hides_the_diagnosis(diagnosis):
    head = panel.headline_bundle(diagnosis)
    assert head["text/plain"].splitlines()[:2] == [
        f"[cudaassert] {diagnosis.status}",
        f"[cudaassert] {diagnosis.headline}",
    ]
    assert f"Cause: {diagnosis.specific}" in head["text/plain"]
    assert diagnosis.headline in head["text/html"] and "Cause:" in head["text/html"]
    root = panel.build(diagnosis, [], header=False)
    assert all('class="ca-head"' not in getattr(c, "value", "") for c in root.children)


# -- one renderer, one look ------------------------------------------------------------------------
def unstyled(text: str) -> str:
    """The markup without the inline style attributes that standalone outputs carry."""
    return re.sub(r' style="[^"]*"', "", text)


def test_the_html_report_is_the_panels_sections_in_one_box_with_details_collapsed(diagnosis):
    from cudaassert_ipy.view import report

    sections = [
        report.header_html(diagnosis),
        report.cause_html(diagnosis),
        report.evidence_html(diagnosis),
        report.gpu_html(H100),
    ]
    details = f"<details><summary>Details</summary>{report.details_html(diagnosis)}</details>"
    assert unstyled(to_html(diagnosis, H100)) == f'<div class="cudaassert-report">{"".join(sections)}{details}</div>'
    panel_html = html_of(panel.build(diagnosis, [], H100))
    assert all(section in panel_html for section in [*sections, report.details_html(diagnosis)])


def test_outputs_that_outlive_the_kernel_carry_their_look_inline_and_the_panel_one_style_block(diagnosis):
    from cudaassert_ipy.view.replay_view import OnBanner
    from cudaassert_ipy.view.report import Banner

    standalone = {
        "report": to_html(diagnosis, H100),
        "headline": panel.headline_bundle(diagnosis)["text/html"],
        "banner": Banner(diagnosis)._repr_mimebundle_()["text/html"],
        "on": OnBanner("debug")._repr_mimebundle_()["text/html"],
    }
    for name, text in standalone.items():
        assert "<style" not in text, name
        assert text.startswith(f'<div class="cudaassert-{name}" style="border-left:4px solid var(--jp-'), name
    assert "var(--jp-info-color1,#0288d1)" in standalone["on"]
    head = '<div class="ca-head" style="font-weight:bold;font-size:1.1em;color:var(--jp-error-color1,#d32f2f)">'
    assert head in standalone["headline"] and head in standalone["report"]
    assert html_of(panel.build(diagnosis, [], H100)).count("<style>") == 1
    assert html_of(panel.build(diagnosis, [], H100)).count(".cudaassert-panel .ca-head{") == 1


def test_a_cpu_error_report_and_headline_take_the_calmer_colour_too(shell):
    shell.run_cell(SETUP)
    d = _diagnose(shell, "F.cross_entropy(model(torch.randn(4, 8)), labels)")
    for text in (to_html(d), panel.headline_bundle(d)["text/html"]):
        assert "border-left:4px solid var(--jp-warn-color1,#f57c00)" in text and "--jp-error-color1" not in text
