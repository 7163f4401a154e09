"""restart/plan.py: the typed resume plan through its file, and every wrong shape named."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers.plans import edit, plan_for, written

from cudaassert_ipy.restart.plan import FrontendKind, Mode
from cudaassert_ipy.restart.plan_files import claim


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"version": 7}, "version 7, expected 2"),
        ({"version": 1}, "version 1, expected 2"),  # a plan written before the typed schema
        ({"mode": "turbo"}, "'mode' is 'turbo', not one of debug, cpu, normal"),
        ({"failing_batch": ["train_loader", ["3"]]}, "'failing_batch' is not [loader name, [dataset indices]]"),
        ({"key": "other"}, "it is for 'other', not 'k1'"),
        ({"cells": "x = 1"}, "'cells' is not a list of cells with a 'source'"),
        ({"env": {"A": 1}}, "'env' is not an object of strings"),
        ({"expires": None}, "'expires' is missing"),
    ],
)
def test_a_plan_with_the_wrong_shape_is_named_and_kept(plan_dir, fields, why):
    edit(written(plan_dir), **fields)
    c = claim("k1", plan_dir)
    assert c.plan is None and f"is not a valid plan ({why})" in c.notes[0]
    assert (plan_dir / "plan-k1.json.invalid").exists()


def test_a_plan_round_trips_through_its_file_with_the_failing_batch_and_every_typed_field(plan_dir):
    from cudaassert_ipy.restart.plan import DiagnosisSummary, FailingCell

    plan = plan_for(
        "k1",
        mode=Mode.CPU,
        frontend=FrontendKind.VSCODE,
        notebook="/nb/a.ipynb",
        kernel_id="v3x",
        env=tuple(Mode.CPU.env.items()),
        validators=True,
        failing=FailingCell(7, "c7", "loss = f(x)", "IndexError: Target 195 is out of bounds."),
        diagnosis=DiagnosisSummary("label_out_of_range", "class label out of range", cell=7),
        failing_batch=("train_loader", (3, 1041, 77)),
    )
    path = written(plan_dir, plan=plan)
    claimed = claim("k1", plan_dir).plan
    assert claimed is not None and claimed.writer_pid is not None
    assert claimed == replace(plan, writer_pid=claimed.writer_pid, writer_start=claimed.writer_start)
    assert claimed.failing_batch == ("train_loader", (3, 1041, 77)) and claimed.mode is Mode.CPU
    assert claimed.env_dict == {"CUDA_LAUNCH_BLOCKING": "1", "CUDAASSERT_VALIDATORS": "1", "CUDA_VISIBLE_DEVICES": ""}
    assert not path.exists()
