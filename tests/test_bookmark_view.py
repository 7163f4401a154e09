"""The Bad samples section in every form of the report: text, markdown, HTML, and the panel."""

from __future__ import annotations

from cudaassert_ipy.diagnose.diagnosis import Diagnosis
from cudaassert_ipy.view import panel, report

LINE = (
    "batch 1,234 of epoch 3 from `train_loader`: `train_ds[39817]` has class label 196 (position 15 of `targets`; "
    "valid: 0..195 or ignore_index=-100); 2 bad samples in that batch, none in the 2 batches before it."
)
D = Diagnosis(
    kind="device_assert",
    context_dead=True,
    cause_id="nll_loss_target_out_of_range",
    title="class label out of range",
    headline="GPU context dead · class label out of range",
    status="dead",
    specific=None,
    explanation="e",
    fix="f",
    samples=(LINE,),
)


def test_the_text_markdown_and_html_reports_carry_the_bad_samples_section():
    assert f"Bad samples:\n  {LINE}" in report.to_text(D)
    assert f"**Bad samples:**\n\n- {LINE}" in report.to_markdown(D)
    html = report.to_html(D)
    assert '<ul class="cudaassert-samples"' in html
    assert "<li>batch 1,234 of epoch 3 from `train_loader`: `train_ds[39817]` has class label 196" in html


def test_a_diagnosis_without_samples_has_no_section():
    plain = Diagnosis(**{**D.__dict__, "samples": ()})
    assert "Bad samples" not in report.to_text(plain) and report.samples_html(plain) == ""


def test_the_panel_shows_the_section_between_the_fix_and_the_evidence():
    widget = panel.build(D, [])
    html = [c.value for c in widget.children if hasattr(c, "value") and isinstance(c.value, str)]
    index = next(i for i, h in enumerate(html) if "cudaassert-samples" in h)
    assert "Fix:" in html[index - 1] and "Evidence" in html[index + 1]
