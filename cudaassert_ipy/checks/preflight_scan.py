"""How preflight walks a dataset or DataLoader: which field of a sample holds labels or ids, and progress.

Kept apart from :mod:`.preflight`, which checks the values and words the report.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from torch import Tensor

__all__ = ["IDS_KEYS", "LABEL_KEYS", "Key", "Progress", "batch_len", "map_style", "pick_field", "samples"]

#: Sample fields tried, in order, when no key is given (dict-like samples).
LABEL_KEYS = ("labels", "label", "targets", "target", "y", "mask", "masks")
IDS_KEYS = ("input_ids", "ids", "tokens", "token_ids")
#: Where a sample keeps its labels or ids: a key, a tuple position, or a function of the sample.
Key = str | int | Callable[[Any], Any] | None


# ---------------------------------------------------------------- progress
class Progress:
    """tqdm when it is installed, otherwise one self-overwriting line on stderr."""

    def __init__(self, total: int | None, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled
        self.count = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._bar: Any = None
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                pass
            else:
                self._bar = tqdm(total=total, desc="preflight", unit="sample")

    def update(self, n: int) -> None:
        self.count += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.enabled and time.monotonic() - self._last > 0.2:
            self._last = time.monotonic()
            self._write("\r")

    def _write(self, end: str) -> None:
        of = f"/{self.total}" if self.total is not None else ""
        pct = f" ({100 * self.count // self.total}%)" if self.total else ""
        sys.stderr.write(f"\rpreflight: {self.count}{of} samples{pct}, {time.monotonic() - self.start:.1f} s{end}")
        sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled:
            self._write("\n")


# ---------------------------------------------------------------- scanning
def pick_field(sample: Any, key: Key, candidates: tuple[str, ...], position: int) -> Any:
    if callable(key):
        return key(sample)
    if key is not None:
        return sample[key]
    if isinstance(sample, dict) or hasattr(sample, "keys"):
        for name in candidates:
            if name in sample:
                return sample[name]
        raise KeyError(f"none of {candidates} in the sample's keys {list(sample.keys())}")
    if isinstance(sample, (tuple, list)) and len(sample) >= 2:
        return sample[position]
    if position == 0:
        return sample  # a bare tensor of ids
    raise KeyError("cannot tell which part of the sample holds the labels")


def samples(data: Any) -> tuple[Iterator[tuple[int, Any, bool]], int | None, str]:
    """(iterator of (first sample index, item, item_is_batch), total, description)."""
    dataset = getattr(data, "dataset", None)
    is_loader = dataset is not None and hasattr(data, "batch_size")
    if is_loader and map_style(dataset):
        data = dataset  # scan by dataset index: the numbers the user can look up
        source = f"loader.dataset ({type(dataset).__name__}, by dataset index)"
        is_loader = False
    elif is_loader:
        source = "the DataLoader's batches (sample index = position in iteration order)"
    else:
        source = type(data).__name__
    if map_style(data):
        n = len(data)
        return ((i, data[i], False) for i in range(n)), n, source

    def iterate() -> Iterator[tuple[int, Any, bool]]:
        offset = 0
        for item in data:
            yield offset, item, is_loader
            offset += batch_len(item) if is_loader else 1

    return iterate(), None, source


def map_style(data: Any) -> bool:
    from torch.utils.data import IterableDataset

    if isinstance(data, (IterableDataset, dict)):
        return False
    return hasattr(data, "__getitem__") and hasattr(data, "__len__")


def batch_len(batch: Any) -> int:
    if isinstance(batch, Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, dict) or hasattr(batch, "keys"):
        batch = next(iter(batch.values()), None)
        return batch_len(batch) if batch is not None else 0
    if isinstance(batch, (tuple, list)) and batch:
        return batch_len(batch[0])
    return 1
