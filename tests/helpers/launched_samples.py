"""A torchrun worker that watches itself (``import cudaassert_ipy.auto``, as a script under a launcher does): rank 1
meets a bad class label from a real Dataset's ``__getitem__`` in its DataLoader's batch, and the GPU double fails
where the loss's kernel would. Run as ``torchrun ... -m helpers.launched_samples`` (tests/test_frameworks_launchers.py).
"""

from __future__ import annotations

import os

import torch
import torch.nn as nn
from gpu_double import fail_like_gpu
from torch.utils.data import DataLoader, Dataset

import cudaassert_ipy.auto  # noqa: F401  # the rank's own bookmark, tap and report


class Birds(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(8), torch.tensor(195 if i == 137 else i % 195)


birds = Birds()
train_loader = DataLoader(birds, batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 195))

for images, labels in train_loader:
    logits = model(images)
    if bool((labels >= 195).any()) and os.environ["RANK"] == "1":
        fail_like_gpu("nll_loss_target_out_of_range", threads=2)
