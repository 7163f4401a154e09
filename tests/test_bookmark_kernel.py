"""The bookmark in real kernels: the GPU failure double with no CPU copy of the labels left, only the loader.

The loop moves each batch to the ``meta`` device, as ``.to(device)`` moves it to a GPU: afterwards
no CPU tensor of the labels is left in the namespace or the frames, so only the recorded batch
can name the sample. The double then writes the real assertion lines and raises the real error.
"""

from __future__ import annotations

import json
import re

import pytest
from helpers.kernels import execute, running_kernel, text_of

pytestmark = pytest.mark.kernel

SETUP = """
import torch, torch.nn as nn
from torch.utils.data import DataLoader, Dataset
from gpu_double import fail_like_gpu
class Birds(Dataset):
    classes = [f"species_{i}" for i in range(196)]
    def __len__(self):
        return 1000
    def __getitem__(self, i):
        return torch.randn(8), torch.tensor(195 if i in (397, 811) else i % 195)
train_ds = Birds()
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 195))
device = "meta"  # stands in for "cuda": values cannot be read back
"""

TUPLE_LOOP = """
for epoch in range(2):
    for i, (images, targets) in enumerate(train_loader):
        bad_here = bool((targets >= 195).any())  # what the GPU kernel finds; the test double needs the moment
        images, targets = images.to(device), targets.to(device)
        if bad_here and epoch == 1:
            fail_like_gpu("nll_loss_target_out_of_range")
"""


def _report(msgs: list[dict]) -> str:
    shown = [m for m in msgs if m["type"] == "display_data"]
    assert shown, text_of(msgs)[-2000:]
    return shown[-1]["content"]["data"]["text/plain"]


def _indices(kc) -> list[tuple]:
    _, msgs = execute(
        kc,
        "import cudaassert_ipy, json\n"
        "print(json.dumps([(b.dataset_index, b.value, b.field, b.epoch) "
        "for b in cudaassert_ipy.bad_samples()]))",
    )
    return [tuple(x) for x in json.loads(text_of(msgs))]


@pytest.mark.parametrize("workers", [0, 2])
def test_the_gpu_double_after_a_shuffled_loop_names_the_bad_dataset_index_from_the_recorded_batch(workers):
    with running_kernel() as kc:
        execute(kc, "%load_ext cudaassert")
        execute(kc, SETUP + f"train_loader = DataLoader(train_ds, batch_size=64, shuffle=True, num_workers={workers})")
        reply, msgs = execute(kc, TUPLE_LOOP, timeout=120)
        assert reply["status"] == "error" and reply["ename"] == "AcceleratorError"
        plain = _report(msgs)
        assert plain.startswith("[cudaassert] The GPU context of this kernel is dead.")
        m = re.search(
            r"Bad samples:\n  batch (\d+) of epoch 1 from `train_loader`: `train_ds\[(\d+)\]` has class "
            r"label 195 \(position (\d+) of `targets`; valid: 0\.\.194 or ignore_index=-100\); "
            r"(\d) bad samples? in that batch, (none in the \d batch(es)? before it|no earlier batch was "
            r"recorded)\.",
            plain,
        )
        assert m, plain
        assert int(m.group(2)) in (397, 811)
        found = _indices(kc)
        assert {f[0] for f in found} <= {397, 811} and all(f[1:] == (195, "targets", 1) for f in found)
        assert len(found) == int(m.group(4))


def test_dict_batches_moved_to_the_device_still_name_the_sample_and_the_key():
    with running_kernel() as kc:
        execute(kc, "%load_ext cudaassert")
        execute(
            kc,
            SETUP
            + """
class Tagged(Dataset):
    def __len__(self):
        return 96
    def __getitem__(self, i):
        labels = torch.full((5,), i % 4)
        if i == 70:
            labels[2] = -3
        return {"input_ids": torch.arange(5) + i, "labels": labels}
tag_ds = Tagged()
tag_loader = DataLoader(tag_ds, batch_size=8, shuffle=True)
head = nn.Linear(16, 4)
del model
""",
        )
        reply, msgs = execute(
            kc,
            """
for batch in tag_loader:
    bad_here = bool((batch["labels"] < 0).any())
    batch = {k: v.to(device) for k, v in batch.items()}
    if bad_here:
        fail_like_gpu("nll_loss_target_out_of_range")
""",
        )
        assert reply["status"] == "error"
        plain = _report(msgs)
        assert re.search(
            r"from `tag_loader`: `tag_ds\[70\]` has class label -3 \(position \[\d, 2\] of "
            r"`batch\['labels'\]`; valid: 0\.\.3 or ignore_index=-100\)",
            plain,
        ), plain
