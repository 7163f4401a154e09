"""The typed contract between a validator's error (checks/) and the diagnosis: what the validator knew.

A validator stops a bad call before its kernel launches and raises an error whose class provides
``validator_stop()`` (``checks.errors.ValidationError`` does). The diagnosis reads that frozen value, not
the exception's attributes one ``getattr`` at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cudaassert_ipy.diagnose.hints import Facts

__all__ = ["StopsCalls", "ValidatorStop", "stop_of"]


@dataclass(frozen=True)
class ValidatorStop:
    """One stopped call: the op, the argument, its valid range, the bad values, the cause and the fix."""

    op: str  # "cross_entropy"
    argument: str  # "target"
    valid: str  # "0..2 (or ignore_index=-100)"
    n_bad: int
    examples: tuple[tuple[tuple[int, ...], bool | int | float], ...]  # (position, value), the first few
    cause_id: str
    hint: str  # the fix, worded by diagnose/hints.py
    facts: Facts | None = None  # the plain values the hint was worded from


@runtime_checkable
class StopsCalls(Protocol):
    """An exception raised by a validator instead of a device-side assert."""

    def validator_stop(self) -> ValidatorStop: ...


def stop_of(exc: BaseException) -> ValidatorStop | None:
    """The validator's stop, when ``exc`` is one of our validator errors; None otherwise (never raises)."""
    if not type(exc).__module__.startswith("cudaassert_ipy.") or not isinstance(exc, StopsCalls):
        return None
    try:
        stop = exc.validator_stop()
    except Exception:  # a broken error object: not a stop we can read
        return None
    return stop if isinstance(stop, ValidatorStop) else None
