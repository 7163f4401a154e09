"""Shared by the validators' property tests: run a call and keep what happened, error or result."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from hypothesis import settings

from cudaassert_ipy.checks import ValidationError, validators

#: hypothesis settings for the "raises exactly when CPU does" tests (each example runs the call twice)
SETTINGS = settings(max_examples=60, deadline=None)


def outcome(fn: Callable[[], Any]) -> tuple[BaseException | None, Any]:
    """(the exception ``fn`` raised or None, its result or None), warnings silenced."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return None, fn()
    except Exception as e:  # the outcome itself is what the tests compare
        return e, None


def assert_same_verdict(fn: Callable[[], Any]) -> ValidationError | None:
    """Random ops: compare raising, not values."""
    plain_error, _ = outcome(fn)
    with validators():
        checked_error, _ = outcome(fn)
    if plain_error is None:
        assert checked_error is None, f"false positive: {checked_error}"
        return None
    assert isinstance(checked_error, ValidationError), f"missed: CPU raised {plain_error!r}"
    assert isinstance(checked_error, type(plain_error))
    return checked_error
