"""DataLoader bookmark: every DataLoader iterator remembers its last few yielded batches.

Why: CUDA reports a bad label late and kills the context, so the batch that held it is gone
and nobody knows which *sample of the dataset* was bad. We patch
``_BaseDataLoaderIter.__next__`` and the worker iterator's ``_next_index`` once, at class level
(this also covers iterators made before loading), keep the originals beside them, and undo both
on unload.

Matching indices to batches: without workers the iterator fetches synchronously, so the
sampler's iterator is teed (``itertools.tee``, in C) and the copy is advanced once per yielded
batch: no Python frame around ``_next_index``; unload puts the original iterator back. With
workers ``_MultiProcessingDataLoaderIter`` sends lists ahead under ``_send_idx`` and yields them in
``_rcvd_idx`` order (``in_order=True``) or as they come (then the yielded task is the one that
left ``_task_info``), so its ``_next_index`` is wrapped and each list is filed under its send
number and taken back in yield order. A batch is kept by reference (no copy), CPU tensors only,
within a size cap. Per batch the hot path only appends (order, count, indices, picked fields) to
a bounded deque: the first batch of a shape is walked once into a plan (which fields, size, cap),
later ones are picked by one C call, and every note is worked out when the records are read
(see benchmarks/bench_bookmark.py).
The iterator's attributes stay the same set: its state sits in the bookmark's dict by ``id``
(dropped by a ``weakref.finalize``), because adding an attribute, or even reading
``it.__dict__``, deopts CPython 3.11's attribute caches for torch's own ``self._x`` reads
(measured: +0.4 us a batch).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import sys
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from cudaassert_ipy.base.passthrough import drop_own_frame
from cudaassert_ipy.data.batch_fields import Plan, keepable, plan_for, rebuild

if TYPE_CHECKING:
    from cudaassert_ipy.data.batch_record import BatchRecord
    from cudaassert_ipy.data.loaders import View

__all__ = ["FAILED", "NOT_RECORDED", "Bookmark", "start"]

_RECENT = 8  # iterators whose records outlive them (a failing loop drops its iterator)

NOT_RECORDED = {
    "gpu": "the batch was not on the CPU when the loader yielded it (nothing is read from GPU memory)",
    "too_big": "its fields ({size}) are larger than CudaAssert.bookmark_bytes / {keep} ({share}): {keep} batches "
    "are kept",
    "iterable": "an IterableDataset has no sample indices; only the batch number is known",
    "unmatched": "its sample indices could not be matched to the yielded batch",
    "raised": "the dataset raised {error} while this batch was being loaded",
    "released": "a later iteration of this loader started, so its batches were released",
}


STATUS_ON = "DataLoader bookmark: on ({batches} recent batches of {loaders} loaders recorded)"
STATUS_EMPTY = "DataLoader bookmark: on (nothing recorded yet)"
STATUS_OFF = "DataLoader bookmark: off - {why}"
FAILED = "the DataLoader bookmark could not record a batch ({error}); the loader itself was not affected"


class _NotKept:
    """In a record's batch slot: why the batch is not kept (and its size, for the too_big note)."""

    __slots__ = ("note", "raised", "size")

    def __init__(self, note: str, size: int = 0, raised: bool = False) -> None:
        self.note, self.size, self.raised = note, size, raised


_GPU = _NotKept("gpu")
_RELEASED = _NotKept("released")


class _RingRecords(deque):  # type: ignore[type-arg]
    """The records of a rank under a runner: each one is also written to the rank's ring on disk (data/ring.py),
    for a rank that dies without Python. Only there: elsewhere records are a plain deque."""

    def __init__(self, maxlen: int, ring: Any, epoch: int, view: View) -> None:
        super().__init__(maxlen=maxlen)
        self.write, self.epoch, self.indices = ring.write, epoch, view.batch_indices
        self.low, self.high = (view.ahead.low, view.ahead.high) if view.ahead is not None else (0, 0)

    def append(self, rec: tuple[Any, ...]) -> None:
        _append(self, rec)
        try:
            self.write(
                self.epoch,
                rec[1] - 1,
                rec[2] if self.indices is None else self.indices(rec[1] - 1),
                self.low,
                self.high,
            )
        except Exception:  # a full disk or a closed map must not cost the user a batch
            self.write = _no_write


_append = deque.append


def _no_write(epoch: int, batch: int, indices: Any, low: int = 0, high: int = 0) -> None:
    pass


class _IterState:
    """What one iterator remembers; outlives the iterator in Bookmark's recent list."""

    __slots__ = (
        "__weakref__",
        "collate_fn",
        "dataset",
        "epoch",
        "iterable",
        "lead",
        "owner",
        "pending",
        "plan",
        "records",
        "sampler",
        "source",
        "tee",
        "view",
        "workers",
    )

    def __init__(self, it: Any, epoch: int, view: View, ring: Any = None) -> None:
        # (global order, _num_yielded after the batch, index list, kept batch | picked fields | _NotKept,
        #  the Plan that picked them or None)
        self.records: deque[tuple[Any, ...]] = (
            deque(maxlen=view.keep) if ring is None else _RingRecords(view.keep, ring, epoch, view)
        )
        self.view = (
            view if view.owner is None and view.dataset is None else dataclasses.replace(view, owner=None, dataset=None)
        )  # what its framework adds; the loader only weakly
        self.pending: dict[Any, Any] = {}  # workers: index lists by send number
        self.tee: Any = None  # 0 workers: a copy of the sampler's iterator, advanced once per yielded batch
        self.lead: Any = None  # ... the teed iterator the loader reads now, and the one it read before
        self.source: Any = None
        self.owner = weakref.ref(it)
        self.workers = hasattr(it, "_send_idx")  # _MultiProcessingDataLoaderIter (set before it prefetches)
        self.plan: Plan | None = None
        self.epoch = epoch
        self.iterable = getattr(it, "_dataset_kind", 0) == 1 and view.batch_indices is None  # _DatasetKind.Iterable
        self.dataset = _ref(view.dataset if view.batch_indices is not None else getattr(it, "_dataset", None))
        self.sampler = _ref(view.owner if view.owner is not None else getattr(it, "_index_sampler", None))
        self.collate_fn = _ref(getattr(it, "_collate_fn", None))


def _yielded_any(st: _IterState) -> bool:
    """Whether this iteration yielded a batch (a first fetch that raised leaves only a record of that)."""
    return any(not (isinstance(r[3], _NotKept) and r[3].raised) for r in st.records)


def _ref(obj: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(obj)
    except TypeError:  # not weak-referenceable (None, builtins, some samplers): hold it
        return lambda: obj


class Bookmark:
    """Installs the class-level patch and holds every record; one per loaded extension."""

    def __init__(self, cap_bytes: int = 256 * 1024 * 1024, keep: int | None = None) -> None:
        self.cap_bytes = cap_bytes
        #: batches kept per iterator (None: ``loaders.DEFAULT_KEEP``, the failing one and 2 before it); more where
        #: its framework fetches further ahead (data/loaders, imported at the first iteration, not at load)
        self.keep = keep
        self.ring: Any = None  # a data.ring.Ring in a rank under a runner: every record is written to disk too
        self.note: str | None = None  # why the bookmark is off, when it is
        self._module: Any = None
        self._originals: dict[str, Any] = {}
        self._states: dict[int, _IterState] = {}  # id(iterator) -> its state, while the iterator lives
        self._finalizers: dict[int, weakref.finalize[[int], Any]] = {}
        self._recent: deque[_IterState] = deque(maxlen=_RECENT)
        self._epochs: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._order = itertools.count(1)

    # -- install / uninstall ------------------------------------------------------------------
    def patch(self, module: Any) -> None:
        """Patch ``torch.utils.data.dataloader`` (called once it is imported); never raises."""
        from cudaassert_ipy.checks.torch_compat import reason

        if (unsupported := reason("bookmark")) is not None:  # this torch lacks an internal the bookmark reads
            self.note = unsupported
            return
        try:
            base = module._BaseDataLoaderIter
            if getattr(base.__next__, "__cudaassert_bookmark__", None) is not None:
                self.note = "another cudaassert bookmark is already installed in this process"
                return
            workers = module._MultiProcessingDataLoaderIter
            self._module = module
            self._originals = {"__next__": base.__next__, "_next_index": workers.__dict__.get("_next_index")}
            base.__next__, workers._next_index = self._wrap(base.__next__, workers._next_index, module.torch.Tensor)
        except Exception as e:  # a future torch may rename these: the rest of the extension still works
            self.note = f"the DataLoader bookmark could not be installed ({type(e).__name__}: {e})"

    def unpatch(self) -> None:
        base = getattr(self._module, "_BaseDataLoaderIter", None)
        if base is not None and self._originals:
            base.__next__ = self._originals["__next__"]
            workers = self._module._MultiProcessingDataLoaderIter
            if self._originals["_next_index"] is None:
                del workers._next_index
            else:
                workers._next_index = self._originals["_next_index"]
        for st in self._states.values():  # live iterators read their sampler's own iterator again
            it = st.owner()
            if it is not None and st.lead is not None and getattr(it, "_sampler_iter", None) is st.lead:
                it._sampler_iter = st.source
        for finalizer in self._finalizers.values():
            finalizer.detach()
        self._finalizers.clear()
        self._states.clear()
        self._recent.clear()
        self._epochs.clear()
        self._originals = {}
        self._module = None

    @property
    def installed(self) -> bool:
        return bool(self._originals)

    @property
    def tracked(self) -> int:
        """How many live DataLoader iterators the bookmark follows; one is forgotten when it is collected (its
        records stay) and all of them on unload."""
        return len(self._states)

    def status_line(self) -> str:
        """For ``%cudaassert status``."""
        if self.note is not None and not self.installed:
            return STATUS_OFF.format(why=self.note)
        loaders = {id(st.sampler()) for st in self._recent if st.records}
        batches = sum(len(st.records) for st in self._recent)
        if not batches:  # also before torch is imported: the patch then waits for it
            return STATUS_EMPTY
        return STATUS_ON.format(batches=batches, loaders=len(loaders)) + (f"; {self.note}" if self.note else "")

    # -- the hot path -------------------------------------------------------------------------
    def _wrap(self, next_orig: Any, index_orig: Any, tensor_type: type) -> tuple[Any, Any]:
        bookmark = self
        order = self._order
        states = self._states
        state_of = states.get

        def _next_index(it: Any) -> Any:  # workers only: without them the sampler's iterator is teed
            __tracebackhide__ = True  # a sampler's own error shows no frame of ours (see passthrough)
            try:
                index = index_orig(it)
            except BaseException as e:
                drop_own_frame(e)
                raise
            try:
                st = states.get(id(it))
                if st is None:  # workers prefetch from the iterator's constructor, before any __next__
                    st = bookmark._start(it, None)
                st.pending[it._send_idx] = index
            except Exception as e:  # our bookkeeping must never cost the user a batch
                bookmark._failed(e)
            return index

        def __next__(it: Any) -> Any:
            __tracebackhide__ = True  # dataset and collate errors show no frame of ours (see passthrough)
            st = state_of(id(it))
            try:
                if st is None or (st.records and it._num_yielded == 0 and _yielded_any(st)):  # a new iteration
                    st = bookmark._start(it, st)
            except Exception as e:
                bookmark._failed(e)
                try:
                    return next_orig(it)
                except BaseException as error:
                    drop_own_frame(error)
                    raise
            try:
                data = next_orig(it)
            except BaseException as e:
                if isinstance(e, Exception) and not isinstance(e, StopIteration):
                    bookmark._raised(it, st, e)
                drop_own_frame(e)
                raise
            try:
                tee = st.tee  # 0 workers: the sampler's copy; workers: the list filed under its send number
                index = next(tee) if tee is not None else bookmark._sent_index(it, st) if st.workers else None
                plan = st.plan  # the first batch's fields to keep: later batches of its shape are picked in C
                if plan is not None and type(data) is plan[0] and len(data) == plan[1]:
                    try:
                        st.records.append((next(order), it._num_yielded, index, plan[4](data), plan))
                        return data
                    except (LookupError, TypeError):  # same type and length, other keys
                        pass
                st.records.append((next(order), it._num_yielded, index, bookmark._keep(st, data, tensor_type), None))
            except Exception as e:
                bookmark._failed(e)
            return data

        __next__.__cudaassert_bookmark__ = self  # type: ignore[attr-defined]  # a marker on the function object
        return __next__, _next_index

    def _keep(self, st: _IterState, data: Any, tensor_type: type) -> Any:
        """The slow path (a first batch, or one of another shape): walk it, and plan the next ones."""
        size, kept = keepable(data, tensor_type)
        if size < 0:
            st.plan = None
            return _GPU
        if size > self.cap_bytes // (st.records.maxlen or 1):  # the kept batches of one iterator stay within the cap
            st.plan = None
            return _NotKept("too_big", size)
        st.plan = plan_for(data, kept, size)
        return kept

    @staticmethod
    def _sent_index(it: Any, st: _IterState) -> Any:
        """Workers: take back the index list that was sent for the batch just yielded."""
        pending = st.pending
        key = it._rcvd_idx - 1 if getattr(it, "_in_order", True) else Bookmark._yielded_key(it, pending)
        index = pending.pop(key, None)
        if len(pending) > 64:  # lists of batches lost to errors or skipped workers
            pending.clear()
        return index

    def _raised(self, it: Any, st: _IterState, e: Exception) -> None:
        """The dataset raised: a record says so, and the tee is set level with the loader again."""
        try:
            st.records.append(
                (
                    next(self._order),
                    getattr(it, "_num_yielded", 0) + 1,
                    None,
                    _NotKept(NOT_RECORDED["raised"].format(error=f"{type(e).__name__}: {e}"), raised=True),
                    None,
                )
            )
            if st.lead is not None:  # whether the failed fetch drew its indices is unknown: copy the loader's
                st.tee = copy.copy(st.lead)
        except Exception as inner:
            self._failed(inner)

    def _failed(self, e: Exception) -> None:
        """A batch we could not record: the user's loop goes on, the report says why once."""
        if self.note is None:
            self.note = FAILED.format(error=f"{type(e).__name__}: {e}")

    def _start(self, it: Any, st: _IterState | None) -> _IterState:
        """A new iteration (or an iterator first seen): count the epoch per sampler, start records."""
        from cudaassert_ipy.data import loaders

        keep = self.keep if self.keep is not None else loaders.DEFAULT_KEEP
        view = loaders.inspect(it, sys._getframe(2), keep)  # once per iteration: who asked, how far ahead
        sampler = view.owner if view.owner is not None else getattr(it, "_index_sampler", None)
        try:
            epoch = self._epochs.get(sampler, -1) + 1
            self._epochs[sampler] = epoch
        except TypeError:  # a sampler that cannot be weakly referenced: count per iterator
            epoch = st.epoch + 1 if st is not None else 0
        pending = st.pending if st is not None else {}  # persistent workers prefetch before the first batch
        for old in self._recent:  # an earlier iteration of this loader keeps its indices, not its batches
            if old.sampler() is sampler and any(not isinstance(r[3], _NotKept) for r in old.records):
                old.records = deque(
                    ((*r[:3], r[3] if isinstance(r[3], _NotKept) else _RELEASED, None) for r in old.records),
                    maxlen=old.records.maxlen,
                )
        new = _IterState(it, epoch, view, self.ring)
        new.pending = pending
        if not new.workers and hasattr(it, "_sampler_iter"):
            new.source = it._sampler_iter
            if st is not None and st.lead is not None and st.lead is new.source:  # the same iteration again
                new.source = st.source
            new.lead, new.tee = itertools.tee(it._sampler_iter)
            it._sampler_iter = new.lead
        st = new
        key = id(it)
        self._states[key] = st
        if key not in self._finalizers:  # the iterator's first iteration seen
            self._finalizers[key] = weakref.finalize(it, self._forget, key)
        self._recent.append(st)
        return st

    def _forget(self, key: int) -> None:
        """The iterator is gone: its records stay in the recent list, its id may be reused."""
        st = self._states.pop(key, None)
        if st is not None:  # the sampler's iterator (a whole permutation, for a shuffled loader) goes with it
            st.tee = st.lead = st.source = None
        self._finalizers.pop(key, None)

    @staticmethod
    def _yielded_key(it: Any, pending: dict[Any, Any]) -> Any:
        """``in_order=False``: the one task sent and no longer outstanding is the batch just yielded."""
        info = getattr(it, "_task_info", {})
        gone = [k for k in pending if k not in info]
        return gone[0] if len(gone) == 1 else object()

    # -- reading ------------------------------------------------------------------------------
    def states(self) -> Iterator[_IterState]:
        seen: set[int] = set()
        for st in reversed(self._recent):
            if id(st) not in seen:
                seen.add(id(st))
                yield st

    def records(self, names: dict[int, str] | None = None) -> list[BatchRecord]:
        """Every kept record, latest first; ``names`` maps id(sampler) (or, for a loader a framework re-built,
        id(dataset)) to the loader's name."""
        from cudaassert_ipy.data.batch_record import BatchRecord  # a dataclass: not built at %load_ext

        out = []
        for st in self.states():
            sampler = st.sampler()
            name = (names or {}).get(id(sampler)) if sampler is not None else None
            if name is None and names:  # a loader the framework re-built over the user's dataset
                name = names.get(id(st.dataset()))
            for order, yielded, index, kept, plan in st.records:
                note: str | None = None
                size = 0
                if isinstance(kept, _NotKept):
                    note, size, kept = kept.note, kept.size, None
                elif plan is not None:  # only the planned fields were picked
                    kept = rebuild(plan, kept)
                if st.view.batch_indices is not None:  # fastai: torch's "indices" are batch numbers
                    index = st.view.batch_indices(yielded - 1)
                if st.iterable:
                    index = None
                    note = note or "iterable"
                elif index is None:
                    note = note or "unmatched"
                text = NOT_RECORDED.get(note or "", note)
                if note == "too_big":
                    keep = st.records.maxlen or 1
                    text = NOT_RECORDED["too_big"].format(
                        size=_size(size), keep=keep, share=_size(self.cap_bytes // keep)
                    )
                out.append(
                    BatchRecord(
                        name,
                        st.epoch,
                        yielded - 1,
                        _indices(index),
                        kept,
                        text,
                        order,
                        st.dataset(),
                        sampler,
                        st.collate_fn(),
                        st.view.ahead,
                    )
                )
        out.sort(key=lambda r: r.order, reverse=True)
        return out


def _indices(index: Any) -> tuple[Any, ...] | None:
    if index is None:
        return None
    if isinstance(index, (list, tuple, range)):
        return tuple(index)
    tolist = getattr(index, "tolist", None)  # numpy arrays and tensors from custom samplers
    if callable(tolist):
        value = tolist()
        return tuple(value) if isinstance(value, list) else (value,)
    return (index,)  # batch_size=None: one sample per batch


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def start(cap_bytes: int) -> tuple[Bookmark, Callable[[], None]]:
    """A bookmark patched in as soon as torch's dataloader module exists; and the undo for unload."""
    from cudaassert_ipy.data.after_import import AfterImport

    bookmark = Bookmark(cap_bytes)
    hook = AfterImport("torch.utils.data.dataloader", bookmark.patch)
    hook.install()

    def stop() -> None:
        hook.uninstall()
        bookmark.unpatch()

    return bookmark, stop
