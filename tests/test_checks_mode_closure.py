"""A closure given to ``optimizer.step`` is checked: the forward and backward run in it.

The validators step off the stack during an optimizer step (its own ops cannot hit an index assert),
but Lightning's automatic optimization runs ``training_step`` inside ``optimizer.step(closure=...)``,
and LBFGS re-evaluates the loss in its closure: a bad label there must still be stopped.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from helpers.own_frames import PY310_KEEPS_OUR_FRAME, no_frame_of_ours

from cudaassert_ipy.checks import ValidationError, validators, validators_enabled


@pytest.mark.parametrize("passed", ["keyword", "positional"])
def test_a_bad_label_in_an_optimizer_steps_closure_is_stopped_and_the_validators_come_back(passed):
    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    labels = torch.tensor([0, 3])

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(torch.randn(2, 4)), labels)
        loss.backward()
        return loss

    with validators():
        with pytest.raises(ValidationError) as stopped:
            optimizer.step(closure=closure) if passed == "keyword" else optimizer.step(closure)
        assert validators_enabled()
    assert "target has 1 bad value; valid: 0..2" in str(stopped.value)
    assert not validators_enabled()


def test_a_good_closure_runs_checked_and_the_step_itself_unchecked():
    model = nn.Linear(4, 3)
    optimizer = torch.optim.LBFGS(model.parameters(), max_iter=2)
    labels = torch.tensor([0, 2])

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(torch.randn(2, 4)), labels)
        loss.backward()
        return loss

    with validators():
        loss = optimizer.step(closure)
        assert validators_enabled()
    assert torch.isfinite(loss)


@PY310_KEEPS_OUR_FRAME
def test_an_ordinary_error_in_a_checked_closure_shows_no_frame_of_ours():
    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def closure() -> torch.Tensor:
        raise KeyError("batch")

    with validators(), pytest.raises(KeyError) as raised:
        optimizer.step(closure)
    no_frame_of_ours([str(entry.path) for entry in raised.traceback])
