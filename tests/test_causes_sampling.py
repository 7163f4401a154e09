"""Sampling: Poisson's rate check, and multinomial's renorm check in its ATen spelling."""

from __future__ import annotations

from helpers.causes import explain_one
from log_samples import CENSUS

from cudaassert_ipy.diagnose.causes import get_cause

LINE = {e["id"]: e["line"] for e in CENSUS}
# A user's line (the rate check printed at :50 in a 2024 release; :49 in 2.14.1)
POISSON_2024 = (
    "../aten/src/ATen/native/cuda/Distributions.cu:50: operator(): block: [134,0,0], thread: [494,0,0] "
    'Assertion `lambda >= 0 && "invalid Poisson rate, expected rate to be non-negative"` failed.'
)


def test_a_negative_poisson_rate_is_named_from_this_release_and_from_a_users_older_line() -> None:
    for line in (LINE["poisson_negative_rate"], POISSON_2024):
        d = explain_one(line)
        assert (d.cause_id, d.title) == ("poisson_negative_rate", "negative or NaN Poisson rate")
        assert "rates.clamp_min(0)" in d.fix


def test_the_renorm_check_in_its_aten_spelling_is_multinomials_invalid_probabilities() -> None:
    d = explain_one(LINE["multinomial_renorm_negative_v2"])
    assert d.cause_id == "multinomial_renorm_negative"
    assert d.title == "invalid probabilities for sampling"
    assert "torch.isfinite(logits)" in d.fix
    assert get_cause("multinomial_renorm_negative").releases.startswith("2.14.1 (MultinomialKernel.cu:60, :66")
