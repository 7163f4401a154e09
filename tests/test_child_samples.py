"""data/child_samples.py in-process: a rank's own check of its recorded batches, tagged for the process that launched
it. A real Dataset whose ``__getitem__`` returns the bad label, a real DataLoader under the real bookmark; the GPU
double fails where the loss's kernel would."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.utils.data.dataloader as dl
from gpu_double import fail_like_gpu
from torch.utils.data import DataLoader, Dataset

from cudaassert_ipy.capture.child_lines import child_samples
from cudaassert_ipy.data.bookmark import Bookmark
from cudaassert_ipy.data.child_samples import child_lines


class Birds(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 256

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(8), torch.tensor(195 if i == 137 else i % 195)


def _train(loader: DataLoader, model: nn.Module) -> None:  # type: ignore[type-arg]
    for images, labels in loader:
        model(images)
        if bool((labels >= 195).any()):
            fail_like_gpu("nll_loss_target_out_of_range", threads=2)


def test_a_rank_checks_its_recorded_batches_against_its_models_class_count(capfd: pytest.CaptureFixture[str]) -> None:
    bookmark = Bookmark()
    bookmark.patch(dl)
    try:
        birds = Birds()
        train_loader = DataLoader(birds, batch_size=32, shuffle=True)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 195))
        with pytest.raises(Exception) as raised:
            _train(train_loader, model)
        lines = child_lines(bookmark, raised.value, {"birds": birds, "train_loader": train_loader, "model": model})
    finally:
        bookmark.unpatch()
    read = child_samples("\n".join(lines))
    assert read and {kind for kind, _ in read} == {"class label"}, lines  # no BCE loss module: no [0, 1] check
    assert "from `train_loader`: `birds[137]` has class label 195 (" in read[0][1]
    assert "valid: 0..194 or ignore_index=-100); 1 bad sample in that batch" in read[0][1]


def test_an_ordinary_error_or_no_record_prints_nothing() -> None:
    assert child_lines(Bookmark(), ValueError("no such file: birds.csv"), {}) == []
    with pytest.raises(Exception) as raised:
        fail_like_gpu("nll_loss_target_out_of_range", threads=1)
    assert child_lines(Bookmark(), raised.value, {}) == [], "no loader, no loop: nothing to say"
