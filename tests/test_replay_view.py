"""view/replay_view.py: the replay's progress (widget and text) and the banner of what is on in this kernel."""

from __future__ import annotations


def test_the_widget_progress_collapses_outputs_and_opens_a_failed_cell():
    from cudaassert_ipy.view.replay_view import WidgetProgress

    cells = [{"number": 2, "first_line": "import torch"}, {"number": 3, "first_line": "model = Net()"}]
    p = WidgetProgress(cells)
    assert p.accordion.selected_index is None and p.bar.max == 2
    with p.cell(0):
        pass
    p.cell_done(0, 0.5, None)
    assert p.bar.value == 1 and p.accordion.get_title(0) == "✓ [2] import torch (0.50 s)"
    p.cell_done(1, 0.1, ValueError("x"))
    assert p.accordion.selected_index == 1 and p.label.value == "Replay stopped at cell [3]"
    p.finish(False)
    assert p.bar.bar_style == "danger"


def test_the_what_is_on_banner_names_each_setting_its_cost_and_the_way_back():
    from cudaassert_ipy.view.replay_view import OnBanner, on_text

    assert on_text("debug") == (
        "[cudaassert] On in this kernel:\n"
        "  - CUDA_LAUNCH_BLOCKING=1: each CUDA call waits for the GPU, so an error is raised at the line that caused "
        "it. Cost: GPU work runs slower (often 1.2–3x).\n"
        "  - validators: cross_entropy, indexing, embedding, gather, one_hot … check their inputs before the kernel "
        "launches, so a bad value is a Python error and the GPU stays alive. Cost: one small check and one GPU sync "
        "per checked call (one to a few per training step).\n"
        "  Back to normal speed: `%cudaassert restart --normal` (restarts and replays your setup without these)."
    )
    html = OnBanner("cpu")._repr_mimebundle_()["text/html"]
    assert "<code>%cudaassert restart --normal</code>" in html and "CPU mode: CUDA_VISIBLE_DEVICES= hides" in html


def test_the_widget_label_counts_the_cells_as_they_replay():
    from cudaassert_ipy.view.replay_view import WidgetProgress

    p = WidgetProgress([{"number": 2, "first_line": "a = 1"}, {"number": 3, "first_line": "b = 2"}])
    assert p.label.value == "Replaying setup: 0/2"
    with p.cell(1):
        assert p.label.value == "Replaying setup: 2/2"
    p.finish(True)
    assert p.label.value == "Setup replayed: 2/2" and p.bar.bar_style == "success"
