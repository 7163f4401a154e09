"""The DataLoader bookmark names the bad sample inside each framework's data path, with the real frameworks.

Each test puts one bad class label at a known dataset index, lets the framework iterate its own loader until the
CPU twin of the device assert raises where the framework would surface it, and asks the bookmark's records (and
the check the report runs on them) which sample it was. Lookahead (accelerate, the Trainer, timm) must be accounted
for: the records reach back to the failing batch, and the report says which batch was being processed.
Run with the framework venv: ``.venv-fw/bin/python -m pytest -m frameworks <this file>``.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F
import torch.utils.data.dataloader as dl
from torch.utils.data import DataLoader, Dataset

from cudaassert_ipy.data.bookmark import Bookmark
from cudaassert_ipy.data.post_mortem import loader_names
from cudaassert_ipy.data.samples import check_batches
from cudaassert_ipy.data.valid_range import CLASS, ValidRange

pytestmark = [
    pytest.mark.frameworks,
    # lightning 2.6 calls torch's deprecated pytree LeafSpec; not ours to fix
    pytest.mark.filterwarnings("ignore:`isinstance\\(treespec, LeafSpec\\)` is deprecated:FutureWarning"),
    # an import of Ultralytics scripts a function with torch.jit.script, deprecated in torch 2.14
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:FutureWarning"),
]

BAD = 37  # the dataset index whose label is out of range
CLASSES = 5
LABELS = ValidRange(CLASS, 0, CLASSES, -100)


class Labelled(Dataset):
    """64 samples; sample BAD has label 9 of 5 classes."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i):
        return torch.full((4,), float(i)), torch.tensor(9 if i == BAD else i % CLASSES)


@pytest.fixture(autouse=True)
def no_distributed_left_behind():
    """The frameworks here run in this process: Lightning's DDP sets MASTER_PORT and friends in ``os.environ`` and
    keeps its process group (and its TCPStore's port) open. Later tests' kernels and scripts inherit the environment
    and would try to listen on that port: put both back."""
    environ = dict(os.environ)
    yield
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    os.environ.clear()
    os.environ.update(environ)


@pytest.fixture
def bookmark():
    b = Bookmark()
    b.patch(dl)
    yield b
    b.unpatch()


def step(batch) -> None:
    """One training step's loss: the CPU twin of the device assert raises here, as it would on the GPU."""
    x, y = batch
    F.cross_entropy(torch.zeros(len(y), CLASSES, requires_grad=True) + x[:, :1], y)


def named(bookmark: Bookmark, ns: dict | None = None):
    loaders, datasets = loader_names(ns or {})
    records = bookmark.records(loaders)
    return records, check_batches(records, LABELS, datasets)


def the_bad_record(records):
    return next(r for r in records if r.indices is not None and BAD in r.indices)


# -- accelerate --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dispatch", [False, True], ids=["DataLoaderShard", "DataLoaderDispatcher"])
def test_accelerate_prepared_loaders_name_the_sample_and_the_batch_one_before_the_latest(bookmark, dispatch):
    from accelerate import Accelerator
    from accelerate.utils import DataLoaderConfiguration

    acc = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(dispatch_batches=dispatch))
    train_ds = Labelled()
    train_loader = acc.prepare(
        DataLoader(train_ds, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0))
    )
    assert type(train_loader).__name__ == ("DataLoaderDispatcher" if dispatch else "DataLoaderShard")
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        for batch in train_loader:
            step(batch)
    records, check = named(bookmark, {"train_loader": train_loader, "train_ds": train_ds})
    bad = the_bad_record(records)
    assert records[0].batch == bad.batch + 1, "accelerate had fetched one batch more than the failing one"
    assert [s.dataset_index for s in check.samples] == [BAD]
    assert check.lines[0].startswith(
        f"batch {bad.batch} of epoch 0 from `train_loader`: `train_ds[{BAD}]` has class label 9"
    )
    assert check.lines[0].endswith("none in the 1 batch after it (fetched ahead).")
    kind = (
        "DataLoaderDispatcher fetches the next step's batch" if dispatch else "DataLoaderShard fetches the next batch"
    )
    assert check.lines[1] == (
        f"`train_loader` had yielded 1 batch after the batch being processed at the error "
        f"(accelerate's {kind} before it yields one): that batch is batch {bad.batch} of "
        "epoch 0."
    )


# -- transformers Trainer ----------------------------------------------------------------------------------------
class Pairs(Dataset):
    def __len__(self) -> int:
        return 48

    def __getitem__(self, i):
        return {
            "input_ids": torch.tensor([1, 5 + i % 20, 2, 0]),
            "attention_mask": torch.tensor([1, 1, 1, 0]),
            "labels": torch.tensor(7 if i == BAD else i % 3),
        }


def test_trainer_with_gradient_accumulation_keeps_ga_plus_2_batches_and_lists_the_candidate_micro_batches(
    bookmark, tmp_path
):
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    config = BertConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, num_labels=3
    )
    args = TrainingArguments(
        str(tmp_path),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
    )
    train_ds = Pairs()
    trainer = Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=train_ds)
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        trainer.train()
    records = bookmark.records()
    check = check_batches(records, ValidRange(CLASS, 0, 3, -100), {id(train_ds): "train_ds"})
    bad = the_bad_record(records)
    assert len(records) == 4 or records[-1].batch == 0, "gradient_accumulation_steps + 2 batches are kept"
    assert records[0].ahead is not None and (records[0].ahead.low, records[0].ahead.high) == (1, 2)
    assert records[0].batch - bad.batch in (1, 2)
    assert [s.dataset_index for s in check.samples] == [BAD]
    assert (
        f"`train_ds[{BAD}]` has class label 7 (position {bad.indices.index(BAD)} of `batch['labels']`" in check.lines[0]
    )
    first, last = records[0].batch - 2, records[0].batch - 1
    assert check.lines[1].startswith(
        "an unnamed DataLoader had yielded 1 to 2 batches after the batch being processed at the error (accelerate's "
        "DataLoaderShard fetches the next batch before it yields one; the Trainer fetches its 2 gradient-accumulation "
        f"micro-batches together before the first forward): that batch is one of batches {first} to {last} of epoch 0"
    )
    assert str(list(bad.indices)).replace(" ", "") in check.lines[1].replace(" ", "")


class AllBad(Pairs):
    def __getitem__(self, i):
        return {**super().__getitem__(i), "labels": torch.tensor(7)}


def test_with_4_micro_batches_the_first_one_failing_is_still_kept_and_named_as_the_failing_batch(bookmark, tmp_path):
    """Micro-batch 0 fails after the Trainer fetched 4 and accelerate 1 more: 3 kept batches would have lost it."""
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    config = BertConfig(
        vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, num_labels=3
    )
    args = TrainingArguments(
        str(tmp_path),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=4,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
    )
    train_ds = AllBad()
    trainer = Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=train_ds)
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        trainer.train()
    records = bookmark.records()
    assert [r.batch for r in records] == [4, 3, 2, 1, 0], "gradient_accumulation_steps + 2 = 6 may be kept"
    check = check_batches(records, ValidRange(CLASS, 0, 3, -100), {id(train_ds): "train_ds"})
    assert check.failing is records[-1]
    first = records[-1].indices[0]
    assert check.lines[0].startswith(
        f"batch 0 of epoch 0 from an unnamed DataLoader: `train_ds[{first}]` has class "
        "label 7 (position 0 of `batch['labels']`"
    )
    assert "that batch is one of batches 0 to 3 of epoch 0" in check.lines[-1]


# -- Lightning ---------------------------------------------------------------------------------------------------
def test_lightning_trainer_on_cpu_names_the_sample(bookmark, tmp_path):
    import lightning as L

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, CLASSES)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    train_ds = Labelled()
    train_loader = DataLoader(train_ds, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(1))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
    )
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        trainer.fit(Classifier(), train_loader)
    records, check = named(bookmark, {"train_loader": train_loader, "train_ds": train_ds})
    bad = the_bad_record(records)
    assert records[0] is bad, "Lightning fetches no batch ahead for a sized loader"
    assert [s.dataset_index for s in check.samples] == [BAD]
    assert f"`train_ds[{BAD}]` has class label 9" in check.lines[0]


class Unsized(torch.utils.data.Sampler):
    """A shuffled order with no ``__len__``: the loader's length is unknown, as a streamed dataset's is."""

    def __iter__(self):
        return iter(torch.randperm(64, generator=torch.Generator().manual_seed(3)).tolist())


def test_lightning_with_a_loader_of_unknown_length_names_the_batch_before_the_prefetched_one(bookmark, tmp_path):
    import lightning as L

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, CLASSES)

        def training_step(self, batch, batch_idx):
            return F.cross_entropy(self.layer(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    train_ds = Labelled()
    train_loader = DataLoader(train_ds, batch_size=4, sampler=Unsized())
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
    )
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        trainer.fit(Classifier(), train_loader)
    records, check = named(bookmark, {"train_loader": train_loader, "train_ds": train_ds})
    bad = the_bad_record(records)
    assert records[0].batch == bad.batch + 1, "Lightning had fetched the next batch"
    assert [s.dataset_index for s in check.samples] == [BAD]
    assert check.lines[1] == (
        f"`train_loader` had yielded 1 batch after the batch being processed at the error "
        f"(Lightning's data fetcher fetches the next batch ahead for a loader of unknown "
        f"length): that batch is batch {bad.batch} of epoch 0."
    )


def test_lightning_under_ddp_iterates_a_rebuilt_loader_whose_records_still_name_the_users_loader_and_sample(
    bookmark, tmp_path, monkeypatch
):
    import lightning as L

    # Lightning decides "interactive" once, when it is imported (sys.ps1): an in-process IPython shell of an
    # earlier test would make it refuse strategy="ddp" here; this test runs as a script would
    monkeypatch.setattr("lightning.pytorch.trainer.connectors.accelerator_connector._IS_INTERACTIVE", False)

    class Classifier(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, CLASSES)

        def training_step(self, batch, batch_idx):
            return F.cross_entropy(self.layer(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    train_ds = Labelled()
    train_loader = DataLoader(train_ds, batch_size=4, shuffle=True)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        strategy="ddp",
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
    )
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        trainer.fit(Classifier(), train_loader)
    records, check = named(bookmark, {"train_loader": train_loader, "train_ds": train_ds})
    assert records[0].sampler is not train_loader.batch_sampler, "Lightning iterated a copy of the loader"
    assert type(records[0].sampler.sampler).__name__ == "DistributedSampler"
    assert [s.dataset_index for s in check.samples] == [BAD]
    assert check.lines[0].startswith(
        f"batch {records[0].batch} of epoch 0 from `train_loader`: `train_ds[{BAD}]` has class label 9"
    )


# -- timm --------------------------------------------------------------------------------------------------------
class Images(Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i):
        return torch.full((3, 2, 2), float(i)), 9 if i == BAD else i % CLASSES


def test_timm_multi_epochs_loader_inside_prefetch_loader_names_the_batch_before_the_prefetched_one(bookmark):
    from timm.data.loader import MultiEpochsDataLoader, PrefetchLoader

    train_ds = Images()
    inner = MultiEpochsDataLoader(train_ds, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(2))
    loader = PrefetchLoader(inner, device=torch.device("cpu"))
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        for _ in range(2):
            for images, targets in loader:
                F.cross_entropy(images.mean((2, 3)).repeat(1, 2)[:, :CLASSES], targets)
    records, check = named(bookmark, {"inner": inner, "train_ds": train_ds})
    bad = the_bad_record(records)
    assert records[0].batch == bad.batch + 1, "PrefetchLoader had fetched the next batch"
    assert [s.dataset_index for s in check.samples] == [BAD]
    assert check.lines[1] == (
        f"`inner` had yielded 1 batch after the batch being processed at the error (timm's "
        f"PrefetchLoader fetches the next batch before it yields one): that batch is batch "
        f"{bad.batch} of epoch 0."
    )


# -- Ultralytics -------------------------------------------------------------------------------------------------
class Boxes(Dataset):
    """Detection samples as Ultralytics' YOLODataset yields them: per-box float `cls`, `batch_idx`, `im_file`."""

    def __len__(self) -> int:
        return 40

    def __getitem__(self, i):
        boxes = 1 + i % 3
        cls = torch.full((boxes, 1), float(i % CLASSES))
        if i == BAD:
            cls[-1, 0] = 9.0
        return {
            "img": torch.zeros(3, 8, 8, dtype=torch.uint8),
            "cls": cls,
            "bboxes": torch.rand(boxes, 4),
            "batch_idx": torch.zeros(boxes),
            "im_file": f"images/train/{i:04d}.jpg",
        }


def test_ultralytics_infinite_loader_names_the_image_file_behind_a_bad_box_label(bookmark):
    from ultralytics.data.build import InfiniteDataLoader
    from ultralytics.data.dataset import YOLODataset

    train_ds = Boxes()
    loader = InfiniteDataLoader(
        train_ds,
        batch_size=4,
        shuffle=True,
        collate_fn=YOLODataset.collate_fn,
        generator=torch.Generator().manual_seed(3),
    )
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        for _epoch in range(3):  # one torch iterator for every epoch
            for batch in loader:
                F.one_hot(batch["cls"].long().view(-1), CLASSES)
    records, check = named(bookmark, {"loader": loader, "train_ds": train_ds})
    assert records[0] is the_bad_record(records)
    assert [s.dataset_index for s in check.samples] == [BAD]
    assert f"`train_ds[{BAD}] (images/train/{BAD:04d}.jpg)` has class label 9 (position" in check.lines[0]
    assert "of `batch['cls']`" in check.lines[0]


# -- fastai ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [0, 1])
def test_fastai_dataloader_maps_torchs_batch_counter_to_the_dataset_indices(bookmark, workers):
    from fastai.data.load import DataLoader as FastLoader

    train_ds = [(torch.full((4,), float(i)), torch.tensor(9 if i == BAD else i % CLASSES)) for i in range(64)]
    dls = FastLoader(train_ds, bs=4, shuffle=True, num_workers=workers)
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        for batch in dls:
            step(batch)
    records, check = named(bookmark, {"dls": dls})
    bad = the_bad_record(records)
    assert records[0] is bad
    assert bad.indices is not None and tuple(bad.indices) == tuple(
        dls._DataLoader__idxs[bad.batch * 4 : (bad.batch + 1) * 4]
    )
    assert [s.dataset_index for s in check.samples] == [BAD]
    assert check.lines[0].startswith(f"batch {bad.batch} of epoch 0 from `dls`: `dls.dataset[{BAD}]` has class label 9")


# -- HF datasets -------------------------------------------------------------------------------------------------
def test_a_datasets_dataset_fetched_by_getitems_names_the_row(bookmark):
    import datasets

    train_ds = datasets.Dataset.from_dict(
        {"x": [[float(i)] * 4 for i in range(64)], "label": [9 if i == BAD else i % CLASSES for i in range(64)]}
    )
    train_ds = train_ds.with_format("torch")
    assert hasattr(type(train_ds), "__getitems__")
    train_loader = DataLoader(train_ds, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(4))
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        for batch in train_loader:
            F.cross_entropy(batch["x"][:, :1].repeat(1, CLASSES), batch["label"])
    records, check = named(bookmark, {"train_loader": train_loader, "train_ds": train_ds})
    assert records[0] is the_bad_record(records)
    assert [s.dataset_index for s in check.samples] == [BAD]
    assert check.lines[0].startswith(
        f"batch {records[0].batch} of epoch 0 from `train_loader`: `train_ds[{BAD}]` has class label 9 (position"
    )
    assert "of `batch['label']`" in check.lines[0]


# -- the rank ring: what a rank that dies without Python leaves on disk ------------------------------------------
def test_the_ring_gets_the_same_indices_and_lookahead_as_the_records(bookmark, tmp_path):
    """accelerate's shard (one batch ahead) and fastai (torch's counter mapped to dataset indices), in one rank."""
    from accelerate import Accelerator
    from fastai.data.load import DataLoader as FastLoader

    from cudaassert_ipy.data import ring

    bookmark.ring = written = ring.Ring(str(tmp_path), 1, 1)
    shard = Accelerator(cpu=True).prepare(DataLoader(Labelled(), batch_size=4, shuffle=True))
    fast = FastLoader([(torch.zeros(4), torch.tensor(0))] * 64, bs=4, shuffle=True)
    for loader in (shard, fast):
        for i, _ in enumerate(loader):
            if i == 4:
                break
        records = [r for r in bookmark.records() if r.epoch == 0][:3]
        data = ring.read(written.path)
        assert data is not None and not data.exited
        assert [(b, i) for _, b, i in data.batches[:3]] == [(r.batch, str(list(r.indices))) for r in records]
        assert data.ahead == ((1, 1) if loader is shard else (0, 0))
    written.close()
