"""checks/sample_naming.py: the one slot through which validators name samples, set and undone by its owner."""

from __future__ import annotations

import contextvars

from cudaassert_ipy.checks.sample_naming import SampleNaming


def lookup(shape, examples):
    return (("`train_ds[7]`",), "batch 1 of epoch 0 from `loader`")


def test_a_lookup_is_current_until_its_undo_runs():
    naming = SampleNaming()
    assert naming.current() is None
    undo = naming.install(lookup)
    assert naming.current() is lookup
    undo()
    assert naming.current() is None


def test_an_undo_run_from_another_context_clears_the_slot_there():
    naming = SampleNaming()
    undo = naming.install(lookup)
    other = contextvars.copy_context()  # e.g. %unload_ext run where the loading cell's context is not current
    other.run(undo)  # the token belongs to the loading context, so reset() refuses: the slot is set to None instead
    assert other.run(naming.current) is None
