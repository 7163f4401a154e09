"""Zero false positives on whole valid programs: an MLP classifier, a tiny transformer LM (with
-100 label padding and sampling) and a small segmentation net with ignore_index=255, each trained
for a few steps with validators on. The losses equal those of the same run with validators off
(same seeds), so the checks neither raise nor change anything."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from cudaassert_ipy.checks import mode, validators

pytestmark = pytest.mark.usefixtures("validator_strategy")


@pytest.fixture
def checks() -> Any:
    """Counts the checks that ran, by call name (proves the programs are really checked): run by
    the checker before the call, or left to an exact CPU kernel (``cpu-kernel-first``)."""
    counts: Counter = Counter()
    table = {}
    for fn, (checker, name, self_checked) in mode._TABLE.items():

        def counted(op: str, args: Any, kwargs: Any, checker: Any = checker) -> Any:
            counts[op] += 1
            return checker(op, args, kwargs)

        def delegated(args: Any, kwargs: Any, self_checked: Any = self_checked, name: str = name) -> bool:
            trusted = self_checked(args, kwargs)
            counts[name] += trusted
            return trusted

        table[fn] = (counted, name, delegated if self_checked is not None else None)
    original = mode._TABLE
    mode._TABLE = table
    yield counts
    mode._TABLE = original


def train(make_step: Callable[[], Callable[[int], torch.Tensor]], steps: int, checked: bool) -> list[float]:
    torch.manual_seed(0)
    step = make_step()
    losses = []
    if checked:
        with validators():
            losses = [step(i).item() for i in range(steps)]
    else:
        losses = [step(i).item() for i in range(steps)]
    return losses


def mlp_classifier() -> Callable[[int], torch.Tensor]:
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = torch.randn(64, 20)
    y = torch.randint(0, 10, (64,))

    def step(i: int) -> torch.Tensor:
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y, label_smoothing=0.1)
        accuracy = (logits.argmax(1) == y).float().mean()
        loss.backward()
        opt.step()
        return loss + 0 * accuracy

    return step


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 50, dim: int = 32) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim, padding_idx=0)
        self.pos = nn.Embedding(16, dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1]).unsqueeze(0).expand_as(ids)
        mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
        return self.head(self.encoder(self.tok(ids) + self.pos(positions), mask=mask, is_causal=True))


def tiny_lm() -> Callable[[int], torch.Tensor]:
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(1, 50, (8, 16))
    ids[:, 12:] = 0  # padding
    labels = ids.roll(-1, dims=1)
    labels[:, 11:] = -100  # ignored positions

    def step(i: int) -> torch.Tensor:
        model.train()
        opt.zero_grad()
        logits = model(ids)
        loss = F.cross_entropy(logits.reshape(-1, 50), labels.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model.eval()
        with torch.no_grad():  # sample a few tokens, top-k filtered
            generated = ids[:1, :4]
            for _ in range(3):
                next_logits = model(generated)[:, -1]
                top = next_logits.topk(5)
                choice = torch.multinomial(top.values.softmax(-1), 1)
                generated = torch.cat([generated, top.indices.gather(1, choice)], dim=1)
        return loss + 0 * generated.sum()

    return step


def segmentation_net() -> Callable[[int], torch.Tensor]:
    n_classes = 4
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, n_classes, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(2, 3, 16, 16)
    masks = torch.randint(0, n_classes, (2, 8, 8))
    masks[:, 0, :] = 255  # VOC-style void border
    masks = F.interpolate(masks[:, None].float(), size=(16, 16), mode="nearest")[:, 0].long()

    def step(i: int) -> torch.Tensor:
        opt.zero_grad()
        logits = model(images)
        loss = F.cross_entropy(logits, masks, ignore_index=255)
        valid = masks != 255
        one_hot = F.one_hot(masks.clamp(max=n_classes - 1), n_classes).permute(0, 3, 1, 2).float()
        dice = (logits.softmax(1) * one_hot)[valid.unsqueeze(1).expand_as(one_hot)].mean()
        (loss - 0.1 * dice).backward()
        opt.step()
        return loss

    return step


def test_mlp_classifier_trains_identically_with_validators_on(checks: Counter) -> None:
    assert train(mlp_classifier, 5, checked=True) == train(mlp_classifier, 5, checked=False)
    assert checks["cross_entropy"] == 5


def test_tiny_transformer_lm_with_padding_and_sampling_trains_identically_with_validators_on(
    checks: Counter,
) -> None:
    checked = train(tiny_lm, 3, checked=True)
    assert checks["cross_entropy"] == 3
    assert checks["embedding"] == 3 * 2 * 4  # token + position embeddings: 1 training + 3 sampling forwards
    assert checks["torch.multinomial"] == 9 and checks["Tensor.gather"] == 9
    plain = train(tiny_lm, 3, checked=False)
    # eval-mode encoder layers take the slow path while any function mode is on: tiny float differences
    torch.testing.assert_close(torch.tensor(checked), torch.tensor(plain), rtol=1e-4, atol=1e-4)


def test_segmentation_net_with_ignore_index_255_trains_identically_with_validators_on(checks: Counter) -> None:
    assert train(segmentation_net, 4, checked=True) == train(segmentation_net, 4, checked=False)
    assert checks["cross_entropy"] == 4 and checks["one_hot"] == 4
    assert checks["Tensor.__getitem__"] >= 4
