"""Plain facts read once from a failure's surroundings: tensor metadata, module bounds, CPU values.

Rules reason on these, never on live objects. Values come from CPU tensors only (kept for lazy
counts and positions); a CUDA tensor is described by its metadata alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CallFacts", "FloatValues", "LabelValues", "ModuleFact", "TensorFact"]

Example = tuple[tuple[int, ...], int]  # (position, value) of one offending value


@dataclass(frozen=True)
class TensorFact:
    name: str
    shape: tuple[int, ...]
    dtype: str
    device: str


@dataclass(frozen=True)
class ModuleFact:
    """An ``nn.Module`` attribute that bounds valid values (out_features, num_embeddings, ...)."""

    name: str  # dotted path as the user would write it: "model.fc.3"
    type_name: str
    attrs: tuple[tuple[str, Any], ...]

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.attrs).get(key, default)


@dataclass(frozen=True)
class LabelValues:
    """Integer values of a CPU tensor: enough to name the offending ones later."""

    name: str
    shape: tuple[int, ...]
    minimum: int
    maximum: int
    tensor: Any = field(repr=False, compare=False)  # the CPU tensor itself; never a CUDA one

    def outside(self, low: int, high: int, ignore: int | None = None, limit: int = 5) -> tuple[int, list[Example]]:
        """How many values are outside [low, high) (and not ``ignore``), and the first few."""
        t = self.tensor
        bad = (t < low) | (t >= high)
        if ignore is not None:
            bad &= t != ignore
        count = int(bad.sum())
        if not count:
            return 0, []
        positions = bad.nonzero()[:limit].tolist()
        return count, [(tuple(p), int(t[tuple(p)])) for p in positions]

    def distinct_outside(self, low: int, high: int, ignore: int | None = None) -> tuple[int, ...]:
        """The distinct values outside [low, high) (and not ``ignore``): all of them up to 10, else 5 + 5."""
        t = self.tensor
        bad = (t < low) | (t >= high)
        if ignore is not None:
            bad &= t != ignore
        values = [int(v) for v in t[bad].unique().tolist()]
        return tuple(values if len(values) <= 10 else values[:5] + values[-5:])


@dataclass(frozen=True)
class FloatValues:
    """Floating-point values of a CPU tensor a failing call got: its finite range and NaN."""

    name: str
    shape: tuple[int, ...]
    lo: float  # finite minimum (0.0 when nothing is finite)
    hi: float
    has_nan: bool
    tensor: Any = field(repr=False, compare=False)  # the CPU tensor itself; never a CUDA one

    def whole_outside(self, low: float, high: float) -> bool:
        """Whether the finite values outside [low, high] exist and are all whole numbers."""
        t = self.tensor
        out = t[t.isfinite() & ((t < low) | (t > high))]
        return bool(out.numel()) and bool((out == out.round()).all())


@dataclass(frozen=True)
class CallFacts:
    """The innermost ``torch.nn.functional`` call of the traceback, read once into plain facts.

    Values come only from CPU tensors; a parameter's values carry the name the user knows the
    tensor by (``labels``) when the same tensor sits in their namespace.
    """

    function: str  # "cross_entropy"
    tensors: tuple[tuple[str, TensorFact], ...] = ()  # parameter -> shape, dtype, device
    ints: tuple[tuple[str, LabelValues], ...] = ()
    floats: tuple[tuple[str, FloatValues], ...] = ()
    scalars: tuple[tuple[str, Any], ...] = ()  # int / float / str / bool / None parameters

    def tensor(self, param: str) -> TensorFact | None:
        return dict(self.tensors).get(param)

    def values(self, param: str) -> LabelValues | None:
        return dict(self.ints).get(param)

    def float_values(self, param: str) -> FloatValues | None:
        return dict(self.floats).get(param)

    def scalar(self, param: str, default: Any = None) -> Any:
        return dict(self.scalars).get(param, default)
