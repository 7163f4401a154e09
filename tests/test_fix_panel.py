"""The panel's fix section (#26), in process: the diff, the cell it changes and why, the safety class, the
alternatives side by side, and Apply / Apply, Restart & replay wired to the `%cudaassert fix apply` path.

The example notebooks' cells run in the in-process shell with the extension loaded (real torch on the
CPU); the buttons are clicked in Python; the restart is simulated as in tests/test_fix.py.
"""

from __future__ import annotations

import ipywidgets as widgets
from helpers.restart_story import restart_in_process
from IPython.core.displaypub import CapturingDisplayPublisher
from test_fix import run_until_failure

from cudaassert_ipy.fix import PATCH_MIME
from cudaassert_ipy.restart.frontend import Frontend, FrontendKind, edits_cells
from cudaassert_ipy.shell import fix as shell_fix
from cudaassert_ipy.view import panel
from cudaassert_ipy.view.fix_panel import APPLY, APPLY_RESTART, COPY_CELL, NO_CHOICE

JUPYTER = Frontend(FrontendKind.SERVER, "k", detail="http://localhost:8888/")
COLAB = Frontend(FrontendKind.SERVER, "k", detail="Colab / Kaggle session")


def walk(w):
    yield w
    for child in getattr(w, "children", ()):
        yield from walk(child)


def button(root, label):
    return next(w for w in walk(root) if isinstance(w, widgets.Button) and w.description == label)


def html_of(root) -> str:
    return "".join(w.value for w in walk(root) if isinstance(w, widgets.HTML))


def built(ext, frontend=JUPYTER):
    proposed = shell_fix.proposed(ext)
    actions = shell_fix.panel_actions(ext, proposed, frontend)
    return proposed, actions, panel.build(ext.last, [], fix=actions)


def test_the_section_shows_the_diff_the_cell_and_why_the_class_and_the_alternatives_default_first(restart_ext, shell):
    run_until_failure(shell, "02_kaggle_image_classifier.ipynb")
    proposed, _, root = built(restart_ext)
    html = html_of(root)
    patch = proposed.patch
    assert "Proposed fix for <code>model.head</code>" in html and "decision" in html
    assert f"Changes cell [{patch.number}]: cell [{patch.number}] built `model.head`" in html
    assert '<span class="ca-diff-del">-num_classes = 195' in html
    assert '<span class="ca-diff-add">+num_classes = 196' in html
    assert html.index("[1] set") < html.index("[2] drop the")  # the one the data decides for first
    assert "the data decides for this one" in html and "the data declares 196 classes" in html
    picker = next(w for w in walk(root) if isinstance(w, widgets.RadioButtons))
    assert picker.value == 1  # the data decides: preselected
    assert not button(root, APPLY).disabled and not button(root, APPLY_RESTART).disabled
    assert not any(isinstance(w, widgets.Button) and w.description == COPY_CELL for w in walk(root))  # Lab edits it


def test_apply_patches_the_cell_in_the_history_and_shows_the_apply_request_inside_the_panel(restart_ext, shell):
    ran = run_until_failure(shell, "02_kaggle_image_classifier.ipynb")
    proposed, _, root = built(restart_ext)
    publisher, shell.display_pub = shell.display_pub, CapturingDisplayPublisher()
    try:
        button(root, APPLY).click()
        requests = [o["data"][PATCH_MIME] for o in shell.display_pub.outputs if PATCH_MIME in o["data"]]
    finally:
        shell.display_pub = publisher
    assert requests == [proposed.patch.request()]
    status = html_of(root)
    assert f"Patched cell [{proposed.execution_count}]: set" in status
    number = next(r[0] for r in ran if "num_classes = 195" in r[2])
    record = next(r for r in restart_ext.history.records if r.number == number)
    assert record.source == proposed.new_source


def test_apply_restart_and_replay_runs_the_patched_cell_and_the_banner_says_the_notebook_holds_the_old_code(
    restart_ext, shell, tmp_path, capsys
):
    ran = run_until_failure(shell, "02_kaggle_image_classifier.ipynb")
    _, _, root = built(restart_ext, COLAB)
    button(root, APPLY_RESTART).click()
    restart_in_process(shell, tmp_path)
    capsys.readouterr()
    shell.run_cell("print('next cell')", store_history=True)
    out = capsys.readouterr().out
    assert "the notebook still holds the old code" in out
    assert f"[cudaassert] fixed: cell [{ran[-1][0]}] ran to the end with validators on" in out
    assert shell.user_ns["model"].head.out_features == 196


def test_when_the_data_does_not_decide_nothing_is_picked_and_the_buttons_wait_for_a_choice(restart_ext, shell):
    shell.run_cell(
        "import torch, torch.nn as nn, torch.nn.functional as F\nlabels = torch.arange(40) % 4\nx = torch.randn(40, 8)",
        store_history=True,
    )
    shell.run_cell("head = nn.Linear(8, 3)", store_history=True)
    shell.run_cell("loss = F.cross_entropy(head(x), labels)", store_history=True)
    proposed, _, root = built(restart_ext)
    assert proposed.default is None
    picker = next(w for w in walk(root) if isinstance(w, widgets.RadioButtons))
    assert picker.value is None
    assert button(root, APPLY).disabled and button(root, APPLY_RESTART).disabled
    assert button(root, APPLY_RESTART).tooltip == NO_CHOICE
    assert "nothing is applied until you choose one" in html_of(root)
    picker.value = 1
    assert not button(root, APPLY).disabled
    button(root, APPLY).click()
    assert any(r.source == "head = nn.Linear(8, 4)" for r in restart_ext.history.records)


def test_where_no_frontend_edits_cells_the_patched_cell_is_offered_to_copy(restart_ext, shell):
    run_until_failure(shell, "04_bce_without_sigmoid.ipynb")
    assert not edits_cells(COLAB) and edits_cells(JUPYTER)
    assert not edits_cells(Frontend(FrontendKind.VSCODE, "k")) and not edits_cells(Frontend(FrontendKind.HEADLESS, "k"))
    proposed, actions, root = built(restart_ext, COLAB)
    assert not actions.editable
    assert not any(isinstance(w, widgets.RadioButtons) for w in walk(root))  # safe: one alternative, no choice
    copy = button(root, COPY_CELL)
    copy.click()
    area = next(w for w in walk(root) if isinstance(w, widgets.Textarea) and "cudaassert-fix-cell" in w._dom_classes)
    assert area.value == proposed.new_source and "nn.BCEWithLogitsLoss()" in area.value
    assert f"paste it over cell [{proposed.execution_count}]" in html_of(root)


def test_a_headless_run_gets_the_diff_in_the_full_text_report(restart_ext, shell):
    publisher, shell.display_pub = shell.display_pub, CapturingDisplayPublisher()
    try:
        run_until_failure(shell, "05_segmentation_ignore_255.ipynb")
        texts = [o["data"].get("text/plain", "") for o in shell.display_pub.outputs]
    finally:
        shell.display_pub = publisher
    report = next(t for t in texts if "Proposed fix for" in t)
    assert report.index("Exception: ") < report.index("[cudaassert] Proposed fix for `criterion` (decision)")
    assert "+criterion = nn.CrossEntropyLoss(ignore_index=255)  # the mistake" in report
    assert "(the data decides for this one) pass ignore_index=255 to the loss" in report


def test_the_panels_apply_of_a_file_patch_says_the_file_was_patched_on_disk(restart_ext, shell, tmp_path):
    from test_fix import _yolo_dataset, _yolo_labels_failure

    from cudaassert_ipy.fix import derive

    data_yaml = _yolo_dataset(tmp_path / "birds", [[i % 4] for i in range(80)])  # class 3 as common as the others
    proposed = derive.propose(*_yolo_labels_failure(data_yaml))
    actions = shell_fix.panel_actions(restart_ext, proposed, JUPYTER)
    publisher, shell.display_pub = shell.display_pub, CapturingDisplayPublisher()
    try:
        said = actions.apply(None, False)  # the data decides: Apply needs no choice
    finally:
        shell.display_pub = publisher
    assert said == (
        f"Patched {data_yaml} on disk (no cell changes): set nc: 4 in the data YAML {data_yaml} and list "
        "4 names. Run the training again to check."
    )
    assert "nc: 4\nnames: [cat, dog, bird, class_3]\n" in data_yaml.read_text()
