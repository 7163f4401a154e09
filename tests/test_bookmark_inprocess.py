"""The DataLoader bookmark in an in-process shell: real loaders, real CPU twin errors, real hooks."""

from __future__ import annotations

import gc
import sys
import weakref

import pytest
import torch

import cudaassert_ipy

SETUP = """
import torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, IterableDataset
class Birds(Dataset):
    classes = [f"species_{i}" for i in range(196)]
    def __init__(self, bad=(41,)):
        self.y = torch.arange(400) % 195
        for i in bad:
            self.y[i] = 195
    def __len__(self):
        return 400
    def __getitem__(self, i):
        return torch.randn(8), self.y[i]
train_ds = Birds()
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 195))
"""

LOOP = """
for i, (images, targets) in enumerate(train_loader):
    loss = F.cross_entropy(model(images), targets)
"""


def _run(shell, code):
    return shell.run_cell(code, store_history=True)


def _samples_lines(capsys) -> list[str]:
    out = capsys.readouterr().out
    assert "Bad samples:" in out, out[-3000:]
    block = out.split("Bad samples:\n", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in block.splitlines()]


def test_a_cpu_twin_failure_names_the_dataset_index_of_the_bad_label(loaded, shell, capsys):
    _run(shell, SETUP + "train_loader = DataLoader(train_ds, batch_size=32, shuffle=False)")
    result = _run(shell, LOOP)
    assert isinstance(result.error_in_exec, IndexError)
    assert _samples_lines(capsys) == [
        "batch 1 of epoch 0 from `train_loader`: `train_ds[41]` has class label 195 (position 9 of `targets`; "
        "valid: 0..194 or ignore_index=-100); 1 bad sample in that batch, none in the 1 batch before it.",
        "Reproduce in one step: `cudaassert_ipy.failing_batch(train_loader)` is a DataLoader over exactly these 32 "
        "samples (same dataset, collate_fn and batch size).",
    ]
    bad = cudaassert_ipy.bad_samples()
    assert [(b.dataset_index, b.value, b.field, b.valid, b.position) for b in bad] == [
        (41, 195, "targets", "0..194 or ignore_index=-100", (9,))
    ]
    records = cudaassert_ipy.last_batches()
    assert [(r.loader, r.epoch, r.batch) for r in records] == [("train_loader", 0, 1), ("train_loader", 0, 0)]
    assert records[0].indices == tuple(range(32, 64))
    assert torch.equal(records[0].batch_object[1], shell.user_ns["train_ds"].y[32:64])


def test_shuffled_batches_are_matched_to_their_own_indices_and_every_bad_sample_is_counted(loaded, shell, capsys):
    _run(
        shell,
        SETUP + "train_ds = Birds(bad=(5, 77, 300))\ntrain_loader = DataLoader(train_ds, batch_size=100, shuffle=True)",
    )
    _run(shell, "for epoch in range(2):\n" + LOOP.replace("\n", "\n    ").rstrip() + "\n")
    lines = _samples_lines(capsys)
    bad = cudaassert_ipy.bad_samples()
    rec = cudaassert_ipy.last_batches()[0]  # the failing batch is the latest: the CPU kernel fails at once
    assert rec.epoch == 0 and (rec.loader, rec.batch) == ("train_loader", bad[0].batch)
    assert sorted(b.dataset_index for b in bad) == sorted(i for i in rec.indices if i in (5, 77, 300))
    for b in bad:
        assert rec.indices[b.position[0]] == b.dataset_index and b.value == 195
    assert lines[0].startswith(
        f"batch {rec.batch} of epoch 0 from `train_loader`: `train_ds[{bad[0].dataset_index}]`"
        f" has class label 195 (position {bad[0].position[0]} of `targets`"
    )
    assert f"{len(bad)} bad sample" in lines[0]


def test_dict_batches_of_token_labels_name_the_sample_and_the_key(loaded, shell, capsys):
    _run(
        shell,
        """
import torch, torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
class Tokens(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        labels = torch.full((6,), i % 5)
        if i == 50:
            labels[4] = 9
        return {"input_ids": torch.arange(6) + i, "attention_mask": torch.ones(6, dtype=torch.long),
                "labels": labels}
tok_ds = Tokens()
loader = DataLoader(tok_ds, batch_size=16)
""",
    )
    _run(
        shell,
        "for batch in loader:\n"
        "    logits = torch.randn(batch['labels'].numel(), 5)\n"
        "    loss = F.cross_entropy(logits, batch['labels'].view(-1))\n",
    )
    lines = _samples_lines(capsys)
    assert lines[0] == (
        "batch 3 of epoch 0 from `loader`: `tok_ds[50]` has class label 9 (position [2, 4] of "
        "`batch['labels']`; valid: 0..4 or ignore_index=-100); 1 bad sample in that batch, none "
        "in the 2 batches before it."
    )


def test_nested_batches_are_searched_for_the_label_field(loaded, shell, capsys):
    _run(
        shell,
        SETUP
        + """
class Nested(Dataset):
    def __len__(self):
        return 40
    def __getitem__(self, i):
        return (torch.randn(8), {"meta": torch.tensor(i), "y": torch.tensor(195 if i == 13 else 1)})
nested_ds = Nested()
nested_loader = DataLoader(nested_ds, batch_size=8)
""",
    )
    _run(shell, "for x, extra in nested_loader:\n    F.cross_entropy(model(x), extra['y'])")
    lines = _samples_lines(capsys)
    assert lines[0].startswith(
        "batch 1 of epoch 0 from `nested_loader`: `nested_ds[13]` has class label 195 (position 5 of `extra['y']`;"
    )


def test_a_late_report_names_the_earlier_batch_that_held_the_bad_value(loaded, shell, capsys):
    _run(shell, SETUP + "train_loader = DataLoader(train_ds, batch_size=32)")
    # what CUDA does: the bad batch's kernel fails, the error surfaces two batches later
    _run(
        shell,
        "for i, (images, targets) in enumerate(train_loader):\n"
        "    if i == 2:\n"
        "        F.cross_entropy(model(images), torch.full_like(targets, 195))\n",
    )
    lines = _samples_lines(capsys)
    assert lines[0].startswith("batch 1 of epoch 0 from `train_loader`: `train_ds[41]` has class label 195")
    assert lines[0].endswith("none in the 1 batch before it and none in the 1 batch after it (CUDA reported it late).")


def test_an_iterable_dataset_says_it_has_no_indices_but_names_the_batch(loaded, shell, capsys):
    _run(
        shell,
        SETUP
        + """
class Stream(IterableDataset):
    def __iter__(self):
        for i in range(64):
            yield torch.randn(8), torch.tensor(195 if i == 20 else 3)
stream_loader = DataLoader(Stream(), batch_size=16)
""",
    )
    _run(shell, "for images, targets in stream_loader:\n    F.cross_entropy(model(images), targets)")
    lines = _samples_lines(capsys)
    assert lines[0].startswith(
        "batch 1 of epoch 0 from `stream_loader`: sample 4 of the batch (an IterableDataset "
        "has no sample indices; only the batch number is known) has class label 195"
    )
    assert cudaassert_ipy.bad_samples()[0].dataset_index is None


def test_a_generator_instead_of_a_dataloader_gets_a_line_saying_why_no_sample_is_named(loaded, shell, capsys):
    _run(shell, SETUP + "def batches():\n    yield torch.randn(4, 8), torch.tensor([1, 2, 195, 3])")
    _run(shell, "for images, targets in batches():\n    F.cross_entropy(model(images), targets)")
    assert _samples_lines(capsys) == [
        "No DataLoader batch was recorded, so no sample can be named: the failing loop did not iterate a torch "
        "DataLoader (a generator, a list or a custom iterator is not recorded)."
    ]


def test_a_cell_with_no_loop_and_no_loader_gets_no_bad_samples_section(loaded, shell, capsys):
    _run(shell, SETUP)
    capsys.readouterr()
    _run(shell, "F.cross_entropy(model(torch.randn(4, 8)), torch.tensor([1, 2, 195, 3]))")
    out = capsys.readouterr().out
    assert "Cause:" in out and "Bad samples" not in out and "No DataLoader batch" not in out


def test_a_validator_stop_counts_the_bad_values_once_and_names_the_tensor(loaded, shell, capsys):
    _run(shell, SETUP + "targets = torch.tensor([1, 2, 195, 3])")
    shell.run_line_magic("cudaassert", "validators on")
    capsys.readouterr()
    _run(shell, "loss = F.cross_entropy(model(torch.randn(4, 8)), targets)")
    shell.run_line_magic("cudaassert", "validators off")
    evidence = capsys.readouterr().out.split("Evidence:\n", 1)[1].split("\n\n", 1)[0]
    assert "  bad values: 1 (in `targets`)\n  first: 195 at [2]" in evidence
    assert evidence.count("195 at [2]") == 1, evidence


def test_batches_not_on_the_cpu_are_not_kept_and_the_report_says_why(loaded, shell, capsys):
    _run(
        shell,
        SETUP + "meta_loader = DataLoader(train_ds, batch_size=32, "
        "collate_fn=lambda b: [t.to('meta') for t in torch.utils.data.default_collate(b)])",
    )
    _run(
        shell, "for images, targets in meta_loader:\n    F.cross_entropy(torch.randn(32, 195), torch.full((32,), 195))"
    )
    assert _samples_lines(capsys) == [
        "batch 0 of epoch 0 from `meta_loader` was not recorded because the batch was not on the CPU when the "
        "loader yielded it (nothing is read from GPU memory)."
    ]


def test_a_loader_of_strings_gets_a_line_and_no_exception(loaded, shell, capsys):
    _run(shell, SETUP + "words = DataLoader(['a', 'b', 'c', 'd'], batch_size=2)")
    _run(shell, "for w in words:\n    F.cross_entropy(torch.randn(2, 195), torch.tensor([1, 195]))")
    assert _samples_lines(capsys) == ["`words` yields a list: none of its fields holds class labels to check."]


def test_interleaved_train_and_val_loaders_are_checked_apart(loaded, shell, capsys):
    _run(
        shell,
        SETUP + "val_ds = Birds(bad=())\n"
        "train_loader = DataLoader(train_ds, batch_size=32)\nval_loader = DataLoader(val_ds, "
        "batch_size=32)",
    )
    _run(
        shell,
        "for i, (images, targets) in enumerate(train_loader):\n"
        "    for vx, vy in val_loader:\n        break\n"
        "    F.cross_entropy(model(images), targets)",
    )
    lines = _samples_lines(capsys)
    assert lines[0].startswith("batch 0 of epoch 1 from `val_loader`") is False
    assert any(line.startswith("batch 1 of epoch 0 from `train_loader`: `train_ds[41]`") for line in lines)
    assert "`val_loader`: no class label outside 0..194 or ignore_index=-100 in its 1 batch recorded." in lines


def test_a_dataset_that_raises_keeps_its_traceback_and_the_loader_keeps_working(loaded, shell, capsys):
    _run(
        shell,
        SETUP
        + """
class Flaky(Birds):
    def __getitem__(self, i):
        if i == 3:
            raise ValueError("corrupt image 3")
        return super().__getitem__(i)
flaky_loader = DataLoader(Flaky(), batch_size=4)
""",
    )
    result = _run(shell, "it = iter(flaky_loader)\nnext(it)")
    assert isinstance(result.error_in_exec, ValueError) and str(result.error_in_exec) == "corrupt image 3"
    assert len(list(shell.user_ns["it"])) == 99  # the rest of the epoch still comes, unchanged


@pytest.mark.parametrize("workers", [0, 2])
def test_unloading_removes_the_patch_and_every_per_iterator_trace(shell, workers):
    import torch.utils.data.dataloader as dl

    from cudaassert_ipy.shell.extension import current

    original = dl._BaseDataLoaderIter.__next__, dl._BaseDataLoaderIter._next_index
    meta_path = list(sys.meta_path)
    shell.config.CudaAssert.tap = False
    shell.run_line_magic("load_ext", "cudaassert")
    assert dl._BaseDataLoaderIter.__next__ is not original[0]
    it = iter(torch.utils.data.DataLoader(list(range(8)), batch_size=2, num_workers=workers))
    attributes = set(vars(it))
    sampler_iter = it._sampler_iter
    next(it)
    assert set(vars(it)) == attributes  # the iterator carries nothing of ours (CPython's attribute caches stay)
    assert len(cudaassert_ipy.last_batches()) == 1
    held = [current(shell).bookmark]  # in a list we can empty: IPython's magics keep their caller's locals
    assert held[0].tracked == 1
    unloaded = weakref.ref(held[0])
    shell.run_line_magic("unload_ext", "cudaassert")
    # torch's own attributes below are the ones the patch replaced: each must be torch's again
    assert (dl._BaseDataLoaderIter.__next__, dl._BaseDataLoaderIter._next_index) == original
    assert held[0].tracked == 0
    held.clear()
    gc.collect()
    assert unloaded() is None  # the live iterator keeps nothing of ours alive (no finalizer left on it)
    assert sys.meta_path == meta_path
    assert cudaassert_ipy.last_batches() == ()
    assert it._sampler_iter is sampler_iter  # the loader reads its sampler directly again, from where it was
    assert [b.tolist() for b in it] == [[2, 3], [4, 5], [6, 7]]
    assert "_next_index" not in vars(dl._MultiProcessingDataLoaderIter)


def test_a_finished_iterator_is_forgotten_but_its_records_stay(loaded, shell):
    loader = torch.utils.data.DataLoader(list(range(40)), batch_size=4)
    shell.user_ns["short_loader"] = loader
    it = iter(loader)
    next(it), next(it)
    assert loaded.bookmark.tracked == 1
    unused = weakref.ref(it)
    del it
    assert unused() is None and loaded.bookmark.tracked == 0
    assert [(r.loader, r.batch, r.indices) for r in cudaassert_ipy.last_batches()] == [
        ("short_loader", 1, (4, 5, 6, 7)),
        ("short_loader", 0, (0, 1, 2, 3)),
    ]


@pytest.mark.parametrize("workers", [0, 2])
def test_an_iterator_made_before_loading_is_recorded_too(shell, workers):
    loader = torch.utils.data.DataLoader(list(range(40)), batch_size=4, num_workers=workers)
    it = iter(loader)
    next(it)
    shell.config.CudaAssert.tap = False
    shell.run_line_magic("load_ext", "cudaassert")
    shell.user_ns["early"] = loader
    batches = [next(it) for _ in range(8)]
    records = cudaassert_ipy.last_batches()
    assert [r.batch for r in records] == [8, 7, 6]
    assert [list(r.indices) for r in records] == [b.tolist() for b in batches[::-1][:3]]
    assert records[0].loader == "early"


def test_failing_batch_in_the_same_kernel_reproduces_the_failure_in_one_step(loaded, shell, capsys):
    _run(shell, SETUP + "train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)")
    _run(shell, LOOP)
    bad = cudaassert_ipy.bad_samples()[0]
    _run(shell, "import cudaassert_ipy\nfb = cudaassert_ipy.failing_batch(train_loader)\nreplayed = list(fb)")
    replayed = shell.user_ns["replayed"]
    record = cudaassert_ipy.last_batches()[0]
    assert len(replayed) == 1 and replayed[0][1].tolist() == shell.user_ns["train_ds"].y[list(record.indices)].tolist()
    assert bad.dataset_index in record.indices
    capsys.readouterr()
    result = _run(shell, "for images, targets in fb:\n    F.cross_entropy(model(images), targets)")
    assert str(result.error_in_exec) == "Target 195 is out of bounds."
    assert f"`train_ds[{bad.dataset_index}]` has class label 195" in capsys.readouterr().out


def test_failing_batch_of_a_loader_that_never_failed_says_so_in_one_line(loaded, shell):
    _run(shell, SETUP + "val_loader = DataLoader(train_ds, batch_size=8)")
    result = _run(shell, "import cudaassert_ipy\ncudaassert_ipy.failing_batch(val_loader)")
    assert isinstance(result.error_in_exec, LookupError)
    assert str(result.error_in_exec) == (
        "No failing batch is known for `val_loader`: failing_batch() needs a failure whose bad values the "
        "DataLoader bookmark found in a recorded batch of this loader (see the report's Bad samples)."
    )
    result = _run(shell, "cudaassert_ipy.failing_batch(iter([1, 2]))")
    assert str(result.error_in_exec) == (
        "failing_batch() takes the torch DataLoader the training loop iterated, not a list_iterator."
    )


def test_a_loop_inside_a_function_from_an_earlier_cell_still_names_the_field(loaded, shell, capsys):
    _run(
        shell,
        SETUP + "train_loader = DataLoader(train_ds, batch_size=50)\n"
        "def train_one_epoch():\n"
        "    for images, targets in train_loader:\n"
        "        images, targets = images.to('meta'), targets.to('meta')\n"
        "        F.cross_entropy(torch.randn(50, 195), torch.full((50,), 195))\n",
    )
    _run(shell, "train_one_epoch()")
    assert _samples_lines(capsys)[0].startswith(
        "batch 0 of epoch 0 from `train_loader`: `train_ds[41]` has class label 195 (position 41 of `targets`;"
    )


def test_a_sampler_of_string_keys_names_the_sample_by_its_key_and_offers_no_restart_entry(loaded, shell, capsys):
    _run(
        shell,
        SETUP
        + """
class ByName(Dataset):
    labels = {"sparrow": 3, "robin": 195, "owl": 7, "wren": 1}
    def __getitem__(self, key):
        return torch.randn(8), self.labels[key]
    def __len__(self):
        return 4
names_ds = ByName()
named_loader = DataLoader(names_ds, batch_size=2, sampler=["sparrow", "wren", "owl", "robin"])
""",
    )
    _run(shell, LOOP.replace("train_loader", "named_loader"))
    lines = _samples_lines(capsys)
    assert lines == [
        "batch 1 of epoch 0 from `named_loader`: `names_ds['robin']` has class label 195 (position 1 of "
        "`targets`; valid: 0..194 or ignore_index=-100); 1 bad sample in that batch, none in the 1 batch "
        "before it."
    ]  # no "Reproduce" line: the restart plan carries integer indices only


def test_a_subset_names_the_sample_in_the_full_dataset_too(loaded, shell, capsys):
    _run(
        shell,
        SETUP + "from torch.utils.data import Subset\n"
        "val_part = Subset(train_ds, list(range(30, 60)))\n"
        "val_loader = DataLoader(val_part, batch_size=10)",
    )
    _run(shell, LOOP.replace("train_loader", "val_loader"))
    assert _samples_lines(capsys)[0].startswith(
        "batch 1 of epoch 0 from `val_loader`: `val_part[11] (= train_ds[41])` has class label 195 (position 1 of"
    )


def test_status_says_what_the_bookmark_holds(loaded, shell, capsys):
    _run(
        shell,
        SETUP + "train_loader = DataLoader(train_ds, batch_size=100)\nval_loader = DataLoader(train_ds)\n"
        "first = next(iter(val_loader))\nfor b in train_loader:\n    pass",
    )
    capsys.readouterr()
    shell.run_line_magic("cudaassert", "status")
    assert "DataLoader bookmark: on (4 recent batches of 2 loaders recorded)" in capsys.readouterr().out


def test_status_says_the_bookmark_is_off_when_turned_off(shell, capsys):
    shell.config.CudaAssert.tap = False
    shell.config.CudaAssert.bookmark = False
    shell.run_line_magic("load_ext", "cudaassert")
    shell.run_line_magic("cudaassert", "status")
    assert "DataLoader bookmark: off" in capsys.readouterr().out
    assert cudaassert_ipy.last_batches() == ()
