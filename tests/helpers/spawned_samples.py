"""An ``mp.spawn`` target whose module watches the process (``import cudaassert_ipy.auto``, as a user's training
module would): process 1 meets a bad class label from a real Dataset's ``__getitem__`` in its DataLoader's batch,
and the GPU double fails where the loss's kernel would (tests/test_frameworks_launchers.py)."""

from __future__ import annotations

import torch
import torch.nn as nn
from gpu_double import fail_like_gpu
from torch.utils.data import DataLoader, Dataset

import cudaassert_ipy.auto  # noqa: F401  # the process's own bookmark and tap


class Birds(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(8), torch.tensor(195 if i == 137 else i % 195)


birds = Birds()
train_loader = DataLoader(birds, batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 195))


def train(index: int) -> None:
    for images, labels in train_loader:
        model(images)
        if bool((labels >= 195).any()) and index == 1:
            fail_like_gpu("nll_loss_target_out_of_range", threads=2)
