"""The bookmark's records match the batch each loader actually yielded, and change nothing it yields.

Every dataset here yields its own index as the value, so a record is right exactly when its
indices equal the values of the batch it kept. Real DataLoaders, real worker processes.
"""

from __future__ import annotations

import inspect

import pytest
import torch
import torch.utils.data.dataloader as dl
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, SequentialSampler, TensorDataset

from cudaassert_ipy.data.bookmark import Bookmark

DATA = TensorDataset(torch.arange(203), torch.arange(203) % 7)


class MyLoader(DataLoader):
    """A DataLoader subclass, as libraries make them."""


class EveryThird(BatchSampler):
    """A custom batch sampler: batches of uneven size."""

    def __init__(self) -> None:
        super().__init__(SequentialSampler(range(203)), batch_size=5, drop_last=False)

    def __iter__(self):
        start = 0
        for n in [3, 9, 1] * 20:
            if start >= 203:
                return
            yield list(range(start, min(start + n, 203)))
            start += n


# torch warns on every machine without an accelerator that pin_memory=True will not pin; the loaders ask on purpose
pytestmark = pytest.mark.filterwarnings(
    "ignore:'pin_memory' argument is set as true but no accelerator is found:UserWarning"
)


def _seeded(**kw):
    return lambda: DataLoader(DATA, generator=torch.Generator().manual_seed(7), **kw)


CONFIGS = {
    "shuffle": _seeded(batch_size=32, shuffle=True),
    "shuffle, 2 workers": _seeded(batch_size=32, shuffle=True, num_workers=2),
    "2 workers, persistent": _seeded(batch_size=16, shuffle=True, num_workers=2, persistent_workers=True),
    "2 workers, not in order": _seeded(batch_size=8, num_workers=2, in_order=False),
    "pin_memory, drop_last": _seeded(batch_size=32, shuffle=True, pin_memory=True, drop_last=True),
    "custom batch_sampler": lambda: DataLoader(DATA, batch_sampler=EveryThird()),
    "custom batch_sampler, 2 workers": lambda: DataLoader(DATA, batch_sampler=EveryThird(), num_workers=2),
    "DistributedSampler": lambda: DataLoader(
        DATA, batch_size=10, sampler=DistributedSampler(DATA, num_replicas=2, rank=1, seed=3)
    ),
    "batch_size=None": lambda: DataLoader(
        DATA, batch_size=None, shuffle=True, generator=torch.Generator().manual_seed(1)
    ),
    "loader subclass": lambda: MyLoader(DATA, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(2)),
}
if "in_order" not in inspect.signature(DataLoader.__init__).parameters:  # torch < 2.6: no such loader exists there
    del CONFIGS["2 workers, not in order"]


def _epochs(loader, n=2, stop=None):
    out = []
    for _ in range(n):
        for i, batch in enumerate(loader):
            out.append([t.tolist() for t in batch])
            if stop is not None and i == stop:
                break
    return out


@pytest.fixture
def bookmark():
    b = Bookmark()
    b.patch(dl)
    yield b
    b.unpatch()


@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_loader_yields_the_same_batches_in_the_same_order_with_the_bookmark(name):
    plain = _epochs(CONFIGS[name]())
    b = Bookmark()
    b.patch(dl)
    try:
        recorded = _epochs(CONFIGS[name]())
    finally:
        b.unpatch()
    if "not in order" in name:  # in_order=False yields as workers finish, with or without us
        recorded, plain = sorted(recorded), sorted(plain)
    assert recorded == plain


@pytest.mark.parametrize("name", list(CONFIGS))
def test_each_record_holds_the_indices_of_the_batch_it_kept(bookmark, name):
    loader = CONFIGS[name]()
    seen: dict[tuple[int, int], list[int]] = {}
    for epoch in range(2):
        for i, (values, _) in enumerate(loader):
            seen[epoch, i] = values.tolist() if values.dim() else [values.item()]
            if epoch == 1 and i == 4:  # stop early: the lists workers prefetched must not leak into records
                break
    records = bookmark.records({id(loader._index_sampler): "loader"})
    assert [(r.epoch, r.batch) for r in records][:3] == [(1, 4), (1, 3), (1, 2)]
    assert len(records) == 6 and all(r.loader == "loader" for r in records)
    for r in records:
        assert list(r.indices) == seen[r.epoch, r.batch]
        if r.epoch == 1:
            values = r.batch_object[0]
            assert r.note is None and list(r.indices) == (values.tolist() if values.dim() else [values.item()])


def test_a_worker_that_raises_leaves_a_record_and_the_error_unchanged(bookmark):
    class Broken(torch.utils.data.Dataset):
        def __len__(self):
            return 40

        def __getitem__(self, i):
            if i == 9:
                raise KeyError("missing file 9")
            return torch.tensor(i)

    loader = DataLoader(Broken(), batch_size=4, num_workers=2)
    with pytest.raises(KeyError) as info:
        for _ in loader:
            pass
    assert "missing file 9" in str(info.value)
    notes = [r.note for r in bookmark.records()]
    assert any(
        n and n.startswith("the dataset raised KeyError: Caught KeyError in DataLoader worker process") for n in notes
    )


def test_a_batch_larger_than_its_share_of_the_cap_keeps_its_indices_but_not_the_batch():
    b = Bookmark(cap_bytes=3 * 4096)
    b.patch(dl)
    try:
        loader = DataLoader(TensorDataset(torch.zeros(64, 10, dtype=torch.long)), batch_size=32)  # 2,560 bytes: kept
        big = DataLoader(TensorDataset(torch.zeros(64, 100, dtype=torch.long)), batch_size=32)  # 25,600 bytes: not
        list(loader), list(big)
        records = b.records({id(loader.batch_sampler): "small", id(big.batch_sampler): "big"})
    finally:
        b.unpatch()
    assert [(r.loader, r.batch_object is not None) for r in records] == [
        ("big", False),
        ("big", False),
        ("small", True),
        ("small", True),
    ]
    assert records[0].indices == tuple(range(32, 64))
    assert records[0].note == (
        "its fields (25.0 KiB) are larger than CudaAssert.bookmark_bytes / 3 (4.0 KiB): 3 batches are kept"
    )


def test_a_batch_we_cannot_read_is_yielded_unchanged_and_the_note_says_why(bookmark):
    class Odd:
        def keys(self):
            return ["x"]

        def items(self):
            return []

        def __getitem__(self, key):
            raise RuntimeError("odd batch")

    odd = [Odd(), Odd()]
    loader = DataLoader(list(range(4)), batch_size=2, collate_fn=lambda b: odd[b[0] // 2])
    assert list(loader) == odd
    assert bookmark.note == (
        "the DataLoader bookmark could not record a batch (RuntimeError: odd batch); the loader itself was not affected"
    )


def test_a_new_epoch_releases_the_previous_epochs_batches_but_keeps_their_indices(bookmark):
    loader = DataLoader(DATA, batch_size=50)
    list(loader), list(loader)
    records = bookmark.records()
    assert [(r.epoch, r.batch_object is not None) for r in records] == [(1, True)] * 3 + [(0, False)] * 3
    assert records[3].indices == tuple(range(200, 203))
    assert records[3].note == "a later iteration of this loader started, so its batches were released"


def test_large_float_fields_are_not_kept_but_labels_are_kept_by_reference(bookmark):
    images = torch.randn(64, 3, 32, 32)
    loader = DataLoader(TensorDataset(images, torch.arange(64)), batch_size=32)
    batches = list(loader)
    record = bookmark.records()[0]
    assert record.batch_object[0] is None  # 384 KiB of images: the loop's cache, not ours
    assert record.batch_object[1] is batches[1][1]  # the labels: the very tensor the loop got, no copy


@pytest.mark.parametrize("name", ["shuffle", "custom batch_sampler", "batch_size=None", "DistributedSampler"])
def test_failing_loader_yields_exactly_the_recorded_batch(bookmark, name):
    from cudaassert_ipy.data.reproduce import failing_loader

    loader = CONFIGS[name]()
    it = iter(loader)
    batch = [next(it) for _ in range(3)][-1]
    record = bookmark.records()[0]
    (again,) = list(failing_loader(loader, record.indices))
    assert [t.tolist() for t in again] == [t.tolist() for t in batch]


def test_batches_that_change_shape_midway_are_still_kept_right(bookmark):
    def collate(samples):
        values = torch.stack([s[0] for s in samples])
        labels = torch.stack([s[1] for s in samples])
        if int(values[0]) >= 20:  # later batches carry one more field, and then a dict
            return {"x": values, "y": labels} if int(values[0]) >= 30 else (values, torch.zeros(1), labels)
        return values, labels

    it = iter(DataLoader(DATA, batch_size=5, collate_fn=collate))
    for _ in range(8):  # 2-tuples, then 3-tuples (from batch 4), then dicts (from batch 6)
        want = next(it)
        got = bookmark.records()[0].batch_object
        if isinstance(want, dict):
            assert list(got) == ["x", "y"] and got["x"] is want["x"] and got["y"] is want["y"]
        else:
            assert len(got) == len(want) and all(g is w for g, w in zip(got, want))


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("bad", [1, 13])
def test_after_a_caught_dataset_error_later_records_still_match_their_batches(bookmark, workers, bad):
    class Flaky(torch.utils.data.Dataset):
        def __len__(self):
            return 60

        def __getitem__(self, i):
            if i == bad:
                raise OSError(f"unreadable file {i}")
            return torch.tensor(i)

    it = iter(DataLoader(Flaky(), batch_size=4, num_workers=workers))
    errors = 0
    for _ in range(10):
        try:
            next(it)
        except OSError:  # a loop that skips unreadable batches goes on
            errors += 1
    assert errors == 1
    records = bookmark.records()
    assert [(r.epoch, r.batch) for r in records] == [(0, 8), (0, 7), (0, 6)]  # 9 yielded; the error started no epoch
    for record in records:  # each dataset value is its own index
        assert list(record.indices) == record.batch_object.tolist()


def test_a_finished_iterator_lets_go_of_its_samplers_permutation(bookmark):
    import gc
    import weakref

    it = iter(DataLoader(DATA, batch_size=32, shuffle=True))
    source = weakref.ref(it._sampler_iter)  # a generator holding the epoch's whole permutation
    list(it)
    del it
    gc.collect()
    assert source() is None
    assert len(bookmark.records()) == 3  # the records stay
