"""Write the example notebooks in ``examples/notebooks/`` from the cell texts below.

The notebooks are generated so that their diffs stay reviewable: cell ids are fixed, no outputs
or execution counts are stored, and the JSON is written the same way every time.

    python examples/make_notebooks.py            # (re)write the notebooks
    python examples/make_notebooks.py --check    # exit 1 if a committed notebook differs

Each notebook tells one story a user lives through. The first code cell is
``%load_ext cudaassert``; ``device = "cuda" if torch.cuda.is_available() else "cpu"`` makes the
same notebook show the real device-side assert on a GPU and its CPU twin on a CPU. The cell
meant to fail carries the ``raises-exception`` tag (nbclient and papermill then go on), and a
cell tagged ``fix`` shows the fix working. Data is synthetic and made in the notebook.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

HERE = Path(__file__).resolve().parent
OUT = HERE / "notebooks"

FAILS = "raises-exception"
FIX = "fix"


class Md:
    def __init__(self, text: str) -> None:
        self.text = text.strip("\n")


class Code:
    def __init__(self, text: str, *tags: str) -> None:
        self.text = text.strip("\n")
        self.tags = tags


Cell = Md | Code

LOAD = Code("%load_ext cudaassert")

GPU_RESTART_NOTE = Md("""
> **On a GPU** the cell above killed the GPU context: every later CUDA call in this kernel fails, and the
> panel says so. Click **Restart & replay setup** in the panel (or run `%cudaassert restart`): the kernel
> restarts with `CUDA_LAUNCH_BLOCKING=1` and validators on, and the setup cells replay inside the next cell
> you run. Then continue below. **On a CPU** nothing died: just continue.
""")

# --------------------------------------------------------------------------------------------------
QUICKSTART: list[Cell] = [
    Md("""
# Quickstart: one label out of range

A classifier trains for a few batches, then stops with

```
AcceleratorError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
```

The traceback points at an innocent line, the kernel's own assertion line went to the server log, and the GPU
is unusable until the kernel restarts. `cudaassert` reads the assertion line, looks at the model and the data,
and says what went wrong and how to fix it, right under the traceback.

This notebook runs anywhere: on a GPU you see the real device-side assert; on a CPU PyTorch raises the CPU twin
of the same check (`IndexError: Target 3 is out of bounds.`) and you get the same diagnosis. All data is made
here; nothing is downloaded.
"""),
    Md("Load the extension first (it imports neither torch nor ipywidgets until they are needed):"),
    LOAD,
    Code("""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("device:", device, "| torch", torch.__version__)
"""),
    Md("""
## The data

Sensor readings, 8 features each, in three classes. The labels came from a hand-edited spreadsheet, and one row
says `3`: there is no class 3.
"""),
    Code("""
classes = ["normal", "drift", "spike"]
n = 300
labels = torch.arange(n) % len(classes)
features = torch.randn(n, 8) + 2.0 * F.one_hot(labels, 8).float()  # each class shifts one feature
labels[137] = 3  # the typo

train_ds = TensorDataset(features, labels)
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)
"""),
    Code("""
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, len(classes))).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train_one_epoch():
    for xb, yb in train_loader:
        xb, yb = xb.to(device), yb.to(device)
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()
"""),
    Md("""
## Train

This cell fails (it is tagged `raises-exception`, so a headless run goes on). Under the traceback you get the
panel: what happened to the GPU, the cause in one sentence built from *your* model and data, the fix, the evidence
(on a GPU the kernel's folded assertion line, e.g. ``Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d:
`t >= 0 && t < n_classes` failed in 1 thread of 1 block``), and buttons to restart. Headless runs (nbconvert,
papermill, Kaggle "Save Version") store the same report as text.
"""),
    Code("train_one_epoch()", FAILS, "bad-train"),
    Md(
        "`%cudaassert status` tells you whether the GPU context is still alive (on a GPU it now says DEAD since the "
        "cell above), whether the assertion lines are captured, and whether the validators are on:"
    ),
    Code("%cudaassert status", "status"),
    GPU_RESTART_NOTE,
    Md("""
## Find every bad label, then fix the data

The diagnosis named label 3 against a last layer with 3 outputs. Which rows hold it? `preflight` scans the dataset
on the CPU and lists every offending sample index:
"""),
    Code(
        """
import cudaassert_ipy as ca

report = ca.preflight(train_ds, num_classes=len(classes), progress=False)
report
""",
        "preflight",
    ),
    Md("Row 137 is the typo. Drop it (or correct it), rebuild the loader and train again:"),
    Code(
        """
keep = labels < len(classes)
train_ds = TensorDataset(features[keep], labels[keep])
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)

model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, len(classes))).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    last_loss = train_one_epoch()
print(f"trained 3 epochs on {len(train_ds)} rows; last batch loss {last_loss:.3f}")
""",
        FIX,
    ),
    Md("""
## What next

- `%cudaassert explain` shows the last diagnosis again; `%cudaassert validators on` checks the inputs of risky
  calls before they launch (see `02_kaggle_image_classifier` and `06_cuda_debug_and_preflight`).
- More stories: `03_token_ids_vs_vocab`, `04_bce_without_sigmoid`, `05_segmentation_ignore_255`.
"""),
]

# --------------------------------------------------------------------------------------------------
KAGGLE: list[Cell] = [
    Md("""
# A Kaggle image classifier: 195 outputs for 196 classes

The classic one. A fine-grained car dataset has 196 classes, labelled 0..195. Someone sees "the labels go up to
195" and builds the head with `nn.Linear(..., 195)`. Training runs happily until the first batch that contains
class 195, and then:

```
AcceleratorError: CUDA error: device-side assert triggered
```

This notebook walks through what you see, the one-click **Restart & replay**, and how the validators stop the same
bad call before it reaches the GPU. The images are synthetic (a stand-in for Stanford Cars; nothing is downloaded).
On a CPU the failing cell raises the CPU twin (`IndexError: Target 195 is out of bounds.`) with the same diagnosis.
"""),
    LOAD,
    Code("""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("device:", device, "| torch", torch.__version__)
"""),
    Code("""
# cudaassert: keep
class SyntheticCars(Dataset):
    \"\"\"196 car models, 3x32x32 images: each class is a coarse colour pattern plus noise.\"\"\"

    def __init__(self, per_class=2, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.classes = [f"car_model_{i:03d}" for i in range(196)]
        self.targets = torch.arange(len(self.classes)).repeat_interleave(per_class)
        self.patterns = torch.randn(len(self.classes), 3, 4, 4, generator=g)
        self.noise = 0.5 * torch.randn(len(self.targets), 3, 32, 32, generator=g)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, i):
        y = int(self.targets[i])
        image = self.patterns[y].repeat_interleave(8, 1).repeat_interleave(8, 2) + self.noise[i]
        return image, y


train_ds = SyntheticCars()
train_loader = DataLoader(train_ds, batch_size=32, shuffle=True)
print(len(train_ds), "images,", len(train_ds.classes), "classes, labels",
      int(train_ds.targets.min()), "..", int(train_ds.targets.max()))
"""),
    Md("The mistake: `num_classes = 195`, because the largest label is 195."),
    Code("""
num_classes = 195  # "the labels go up to 195"


class CarNet(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.head(self.features(x))


model = CarNet(num_classes).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)


def train_one_epoch():
    model.train()
    for images, targets in train_loader:
        images, targets = images.to(device), targets.to(device)
        loss = F.cross_entropy(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()
"""),
    Md("""
## Train: the failure

The panel under the traceback names the last layer (`model.head`, out_features=195), the label (195) and the
dataset (`train_ds.classes` has 196 entries), and says **set out_features=196**. On a GPU it also shows the
kernel's folded assertion line (``Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes`
failed in 1 thread of 1 block``), says the GPU context is dead, and offers **Restart & replay setup** and
**Restart on CPU**.

Under **Bad samples** it names the samples of the dataset that hold the bad labels, even on a GPU where
`targets.to(device)` left no CPU copy: while the extension is loaded every DataLoader keeps a reference to its
last 3 batches and their dataset indices, and after the failure those are checked on the CPU against the range
the diagnosis knows (here 0..194).
"""),
    Code("train_one_epoch()", FAILS, "bad-train"),
    Md("""
The same as data: `bad_samples()` after a failure (`last_batches()` gives the records themselves).
"""),
    Code(
        """
import cudaassert_ipy

for s in cudaassert_ipy.bad_samples():
    print(f"{s.sample}: {s.field} = {s.value} (valid {s.valid}), batch {s.batch} of epoch {s.epoch} of {s.loader}")
""",
        "bad-samples",
    ),
    Md("""
## The fix as a patch of your cell

`%cudaassert fix` turns the diagnosis into a patch of the cell that defined the culprit: it finds the cell that
built `model.head` (the one with `num_classes = 195`), scans the training set to check what the labels need, and shows
the change as a diff with how safe it is. Nothing is changed until you ask. To apply it:

- in JupyterLab and Notebook 7 (with the extension installed), the proposal's **Apply** button edits that cell as
  an ordinary, undoable edit, and **Apply, Restart & replay** also restarts the kernel, replays the setup with the
  patched cell and validators on, and checks the failing cell on its failing batch;
- anywhere, `%cudaassert fix apply --restart` does the same from a cell (`%cudaassert fix apply` patches without
  restarting; `--choose N` picks another alternative). Where no frontend edits notebooks (Colab, Kaggle, VS Code,
  a batch run), copy the patched cell into the notebook.

Here the proposal is only shown; the sections below go on with the unpatched model.
"""),
    Code("%cudaassert fix", "fix-proposal"),
    Md("""
## Restart & replay (on a GPU)

After a device-side assert nothing on the GPU works again in this process: any later cell that touches CUDA fails,
and `cudaassert` answers each such failure with one line pointing back to the cell above instead of a new wall of
text. The way out is a restart, and the panel does it in one click:

1. **Restart & replay setup** writes a one-shot resume plan (the setup cells: the ones that succeeded before the
   failure, minus `%` magics of this extension and display-only cells), then asks the Jupyter server to restart
   the kernel. JupyterLab and Notebook 7 show "Kernel Restarting … will restart automatically": press OK.
   (`%cudaassert restart` does the same from a cell; `%cudaassert setup 2,3,5` chooses the cells; VS Code does not
   restart kernels by itself, so there the plan is armed and you press Restart in the toolbar.)
2. The new kernel starts with `CUDA_LAUNCH_BLOCKING=1` and the validators on, before any of your code runs.
3. Run the failing cell again. The setup cells replay first, inside that cell, with progress. Then the validator
   stops `cross_entropy` **before the kernel launches**: you get a normal Python error naming the bad labels and
   their positions, and the GPU stays alive.
4. Fix the head, train, and when you are done `%cudaassert restart --normal` goes back to full speed.

The dataset cell starts with `# cudaassert: keep`: before the restart the old kernel saves what that cell bound
(`SyntheticCars`, `train_ds`, `train_loader`; CPU values, nothing touched the GPU), and the new kernel restores them
instead of running the cell again; the replay says so per cell (`[n] kept: ...`), and says why when it cannot keep
a value (one holding a CUDA tensor or CUDA parameters is replayed). On Kaggle or Colab, where loading and
tokenizing take minutes, this is the difference between minutes and seconds. `%cudaassert setup keep 3,4` marks
cells without editing them; `%cudaassert restart --no-keep` replays everything.

In a headless run (this notebook in CI, papermill, Kaggle "Save Version") nothing can click, so the report carries
the instructions as text. Here, on the CPU, the context is alive; `%cudaassert status` says so:
"""),
    Code("%cudaassert status", "status"),
    Md(
        "`%cudaassert setup` lists the cells a restart would replay (on a GPU after the failure: the cells that "
        "succeeded before it); `%cudaassert setup 3,4,6` pins your own choice, `auto` goes back to the default:"
    ),
    Code("%cudaassert setup", "setup-list"),
    Md("""
## The validator stops the same call before it launches

This is step 3 above. On a GPU, do it after **Restart & replay** (the validators are then already on, and this
kernel's old context is dead, so nothing here would run on it). On a CPU, turn the validators on and run the same
cell again. The validator checks `cross_entropy`'s targets against the number of logits (one small reduction and
one device-to-host read) and raises before the kernel launches, so the GPU context stays alive.
"""),
    Code("%cudaassert validators on", "validators-on"),
    Code("train_one_epoch()", FAILS, "validator-stops"),
    Md("""
### One step instead of an epoch

An epoch here takes a second; on real data it can take hours before the bad batch comes round again.
`failing_batch(train_loader)` is a DataLoader over exactly the samples of the batch that failed (same dataset,
collate_fn and batch size; after **Restart & replay** it comes from the restart plan), so one training step
reproduces the failure at once, with the validators naming the bad value:
"""),
    Code(
        """
one_batch = cudaassert_ipy.failing_batch(train_loader)
for images, targets in one_batch:
    loss = F.cross_entropy(model(images.to(device)), targets.to(device))
""",
        FAILS,
        "one-step",
    ),
    Md("## The fix: one output per class"),
    Code(
        """
model.head = nn.Linear(32, len(train_ds.classes)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    train_one_epoch()  # validators are still on: labels in range are never stopped
print(f"head: {model.head}; 2 epochs trained, the validators stopped nothing")
""",
        FIX,
    ),
    Code("%cudaassert validators off", FIX),
    Md("""
Validators cost about 9-15% per training step; turn them off once the data is clean (after a restart from the panel,
`%cudaassert restart --normal` also drops `CUDA_LAUNCH_BLOCKING=1`).
"""),
]

# --------------------------------------------------------------------------------------------------
TOKENS: list[Cell] = [
    Md("""
# Token ids beyond the model's embedding table

You add a few special tokens to the tokenizer (chat roles, a new domain's words) and forget to resize the model's
embedding table. The new ids are larger than `num_embeddings`, and the embedding lookup fails: on a GPU with a
device-side assert (``Indexing.cu: `srcIndex < srcSelectDimSize` failed``, or the gather kernel's check in newer
builds), on a CPU with `IndexError: index out of range in self`.

The tokenizer here is a tiny hand-written word-level one with the Hugging Face shape (`len(tokenizer)` is the
vocabulary size, `add_tokens`, calling it returns `input_ids`); the model has a Hugging Face style
`resize_token_embeddings`. No `transformers` needed, nothing downloaded.
"""),
    LOAD,
    Code("""
import torch
import torch.nn as nn
import torch.nn.functional as F

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("device:", device, "| torch", torch.__version__)
"""),
    Code("""
class WordTokenizer:
    \"\"\"Word-level tokenizer with the parts of the Hugging Face API this story needs.\"\"\"

    def __init__(self, corpus, max_length=10):
        self.vocab = {"<pad>": 0, "<unk>": 1}
        for line in corpus:
            for word in line.lower().split():
                self.vocab.setdefault(word, len(self.vocab))
        self.max_length = max_length

    def __len__(self):
        return len(self.vocab)

    def add_tokens(self, tokens):
        before = len(self.vocab)
        for token in tokens:
            self.vocab.setdefault(token, len(self.vocab))
        return len(self.vocab) - before

    def __call__(self, texts):
        rows = []
        for text in texts:
            ids = [self.vocab.get(w, 1) for w in text.lower().split()][: self.max_length]
            rows.append(ids + [0] * (self.max_length - len(ids)))
        return {"input_ids": torch.tensor(rows)}


corpus = [
    "the battery lasts all day", "great screen and fast", "the screen broke after a week",
    "slow and the battery died", "fast delivery great price", "it broke on day one",
]
sentiment = torch.tensor([1, 1, 0, 0, 1, 0])
tokenizer = WordTokenizer(corpus)
print("vocabulary:", len(tokenizer), "tokens")
"""),
    Code("""
class TinyConfig:
    def __init__(self, vocab_size, hidden_size=32, num_labels=2):
        self.vocab_size, self.hidden_size, self.num_labels = vocab_size, hidden_size, num_labels


class TinyClassifier(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=0)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, input_ids):
        mask = (input_ids != 0).unsqueeze(-1).float()
        pooled = (self.embed_tokens(input_ids) * mask).sum(1) / mask.sum(1).clamp_min(1)
        return self.classifier(pooled)

    def resize_token_embeddings(self, new_num_tokens):
        \"\"\"Like Hugging Face's: keep the trained rows, add fresh ones for the new tokens.\"\"\"
        old = self.embed_tokens
        new = nn.Embedding(new_num_tokens, old.embedding_dim, padding_idx=old.padding_idx).to(old.weight.device)
        n = min(old.num_embeddings, new_num_tokens)
        with torch.no_grad():
            new.weight[:n] = old.weight[:n]
        self.embed_tokens = new
        self.config.vocab_size = new_num_tokens
        return new


model = TinyClassifier(TinyConfig(vocab_size=len(tokenizer))).to(device)
print(model.embed_tokens)
"""),
    Md("Now the chat format needs two role tokens. The tokenizer grows; the model does not:"),
    Code("""
tokenizer.add_tokens(["<user>", "<bot>"])
print("vocabulary:", len(tokenizer), "tokens; the model's table has", model.embed_tokens.num_embeddings, "rows")

texts = ["<user> " + line for line in corpus]
input_ids = tokenizer(texts)["input_ids"]
"""),
    Md("""
## The failure

The diagnosis compares the ids with the embedding table (`model.embed_tokens`), finds the tokenizer in your
namespace, and names the fix: `model.resize_token_embeddings(len(tokenizer))`.
"""),
    Code(
        """
logits = model(input_ids.to(device))
loss = F.cross_entropy(logits, sentiment.to(device))
""",
        FAILS,
        "bad-forward",
    ),
    GPU_RESTART_NOTE,
    Md("""
## Catch it before the model sees it

`check_token_ids` does the same check on the CPU (any device: the ids are copied once) and names every bad id:
"""),
    Code(
        """
import cudaassert_ipy as ca

ca.check_token_ids(input_ids, vocab_size=model.embed_tokens.num_embeddings)
""",
        FAILS,
        "check-ids",
    ),
    Md("## The fix: resize the embeddings to the tokenizer"),
    Code(
        """
model.resize_token_embeddings(len(tokenizer))
ca.check_token_ids(input_ids, vocab_size=model.config.vocab_size)  # silent: every id is in range now

optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(30):
    loss = F.cross_entropy(model(input_ids.to(device)), sentiment.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(model.embed_tokens, f"loss after 30 steps: {loss.item():.3f}")
""",
        FIX,
    ),
]

# --------------------------------------------------------------------------------------------------
BCE: list[Cell] = [
    Md("""
# `BCELoss` on raw logits

A binary classifier whose last layer is `nn.Linear(..., 1)` outputs **logits**: any real number. `nn.BCELoss`
expects **probabilities** in [0, 1]. On a GPU the loss kernel asserts
(``Loss.cu: `input_val >= zero && input_val <= one` failed``) and the context dies; on a CPU PyTorch raises
`RuntimeError: all elements of input should be between 0 and 1`. The fix is `nn.BCEWithLogitsLoss`, which takes
the logits and is numerically safer than `sigmoid` + `BCELoss`.

The data: windows of a synthetic signal; some contain a spike (label 1).
"""),
    LOAD,
    Code("""
import torch
import torch.nn as nn

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("device:", device, "| torch", torch.__version__)

n, length = 512, 16
signals = 0.3 * torch.randn(n, length)
has_spike = torch.rand(n) < 0.5
signals[has_spike, torch.randint(0, length, (int(has_spike.sum()),))] += 3.0
targets = has_spike.float().unsqueeze(1)  # shape (n, 1), values 0.0 / 1.0
"""),
    Code("""
model = nn.Sequential(nn.Linear(length, 32), nn.ReLU(), nn.Linear(32, 1)).to(device)  # outputs logits
criterion = nn.BCELoss()  # the mistake: BCELoss wants probabilities
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)


def train(steps=50, batch_size=64):
    for step in range(steps):
        idx = torch.randint(0, n, (batch_size,))
        x, y = signals[idx].to(device), targets[idx].to(device)
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()
"""),
    Md("""
## The failure

The diagnosis reads the input's range (on a CPU it can; on a GPU it works from the kernel's assertion line and never
touches the dead GPU memory) and recognises logits: **use `nn.BCEWithLogitsLoss`**.
"""),
    Code("train()", FAILS, "bad-train"),
    GPU_RESTART_NOTE,
    Md("## The fix: `BCEWithLogitsLoss` on the logits, `sigmoid` only for predictions"),
    Code(
        """
criterion = nn.BCEWithLogitsLoss()
last_loss = train()

with torch.no_grad():
    probabilities = torch.sigmoid(model(signals.to(device)))
    accuracy = ((probabilities > 0.5).float().cpu() == targets).float().mean().item()
print(f"loss {last_loss:.3f}, accuracy {accuracy:.1%}")
""",
        FIX,
    ),
]

# --------------------------------------------------------------------------------------------------
SEGMENTATION: list[Cell] = [
    Md("""
# Segmentation masks with 255 and `ignore_index`

Pascal VOC-style masks mark object borders and "don't care" pixels with **255**. A segmentation head with C output
channels accepts labels 0..C-1, so the first mask with a 255 in it makes `cross_entropy` fail: on a GPU with a
device-side assert in ``NLLLoss2d.cu: `t >= 0 && t < n_classes` ``, on a CPU with
`IndexError: Target 255 is out of bounds.` The fix is one argument: `nn.CrossEntropyLoss(ignore_index=255)`.

The data: synthetic 32x32 images with a rectangle of one of three classes on a background (class 0), and a
1-pixel void border of 255 around each rectangle, as in VOC.
"""),
    LOAD,
    Code("""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("device:", device, "| torch", torch.__version__)

VOID = 255
num_classes = 4  # background + 3 shapes
"""),
    Code("""
class SyntheticVOC(Dataset):
    \"\"\"Images (3x32x32) and masks (32x32, int64) with a void border of 255 around each object.\"\"\"

    def __init__(self, n=64, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.images = 0.2 * torch.randn(n, 3, 32, 32, generator=g)
        self.masks = torch.zeros(n, 32, 32, dtype=torch.long)
        for i in range(n):
            cls = int(torch.randint(1, num_classes, (1,), generator=g))
            top, left = (int(v) for v in torch.randint(2, 16, (2,), generator=g))
            h, w = (int(v) for v in torch.randint(8, 14, (2,), generator=g))
            self.masks[i, top - 1:top + h + 1, left - 1:left + w + 1] = VOID  # the void border ...
            self.masks[i, top:top + h, left:left + w] = cls  # ... around the object
            self.images[i, cls - 1, top:top + h, left:left + w] += 1.0  # each class lights one channel

    def __len__(self):
        return len(self.masks)

    def __getitem__(self, i):
        return self.images[i], self.masks[i]


train_ds = SyntheticVOC()
train_loader = DataLoader(train_ds, batch_size=8, shuffle=True)
print("mask values:", torch.unique(train_ds.masks).tolist())
"""),
    Code("""
model = nn.Sequential(
    nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
    nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
    nn.Conv2d(16, num_classes, 1),  # one output channel per class
).to(device)
criterion = nn.CrossEntropyLoss()  # the mistake: 255 is not a class
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)


def train_one_epoch():
    for images, masks in train_loader:
        images, masks = images.to(device), masks.to(device)
        loss = criterion(model(images), masks)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()
"""),
    Md("""
## The failure

The diagnosis recognises 255 as VOC's void label and says: **pass `ignore_index=255` to the loss**.
"""),
    Code("train_one_epoch()", FAILS, "bad-train"),
    GPU_RESTART_NOTE,
    Md("""
## The fix: ignore the void pixels

`preflight` agrees once it knows about the void value: every mask value is a class or `ignore_index`.
"""),
    Code(
        """
import cudaassert_ipy as ca

ca.preflight(train_ds, num_classes=num_classes, ignore_index=VOID, progress=False)
""",
        FIX,
    ),
    Code(
        """
criterion = nn.CrossEntropyLoss(ignore_index=VOID)
for epoch in range(5):
    last_loss = train_one_epoch()

with torch.no_grad():
    predicted = model(train_ds.images.to(device)).argmax(1).cpu()
labelled = train_ds.masks != VOID
pixel_accuracy = (predicted[labelled] == train_ds.masks[labelled]).float().mean().item()
print(f"loss {last_loss:.3f}, pixel accuracy on labelled pixels {pixel_accuracy:.1%}")
""",
        FIX,
    ),
]

# --------------------------------------------------------------------------------------------------
DEBUG: list[Cell] = [
    Md("""
# `%%cuda_debug` and `preflight`: find bad data before the GPU does

Two tools for the moment *before* a device-side assert:

- `%%cuda_debug` runs one cell with the **validators** on: the calls that would assert on the GPU
  (`cross_entropy`, `embedding`, `x[idx]`, `gather`, `one_hot`, `multinomial`, ...) have their inputs checked first,
  and a bad input raises a readable error **before the kernel launches**, so the GPU stays usable. `--sync` adds a
  synchronisation after each CUDA call (the failure surfaces at the line that launched it); `--nan` stops at the
  first call that produces NaN or inf.
- `preflight(dataset_or_loader, num_classes=..., vocab_size=...)` scans the whole dataset on the CPU and lists
  **every** offending sample index, not just the first batch that trips.

The data: 1,000 samples in 10 topics. Three rows were merged from another export, which used 10 for "other" and
-1 for "unlabelled".
"""),
    LOAD,
    Code("""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Subset, TensorDataset

import cudaassert_ipy as ca

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
print("device:", device, "| torch", torch.__version__)

num_classes = 10
labels = torch.randint(0, num_classes, (1000,))
features = torch.randn(1000, 20) + 3.0 * F.one_hot(labels, 20).float()
labels[[17, 256, 731]] = torch.tensor([10, 10, -1])  # rows from the other export

train_ds = TensorDataset(features, labels)
train_loader = DataLoader(train_ds, batch_size=50, shuffle=False)

model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, num_classes)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
"""),
    Md("""
## `%%cuda_debug`: the validator stops the call

The first batch with a bad label stops at `cross_entropy`, before anything is launched. The message names the
argument, the valid range, the bad values with their positions in the batch, and the likely fix; the report under
it says the GPU is still alive.
"""),
    Code(
        """
%%cuda_debug
for xb, yb in train_loader:
    loss = F.cross_entropy(model(xb.to(device)), yb.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
""",
        FAILS,
        "cuda-debug-stops",
    ),
    Md("""
## Which sample was it? The DataLoader bookmark

The report's **Bad samples** section maps the position in the batch back to the dataset (`train_ds[17]`): while
the extension is loaded, every DataLoader remembers the dataset indices of its last 3 batches. The same as data,
and a DataLoader over just that batch, for a one-step repro:
"""),
    Code(
        """
print(ca.bad_samples())
(xb, yb), = ca.failing_batch(train_loader)  # one batch: exactly the samples of the failing one
print("failing batch:", len(yb), "samples; labels out of range:", yb[(yb < 0) | (yb >= num_classes)].tolist())
""",
        "bad-samples",
    ),
    Md("""
## `preflight`: every bad sample at once

The validator saw one batch. `preflight` walks the loader's dataset (by dataset index, so the numbers can be looked
up) and lists every bad sample:
"""),
    Code(
        """
report = ca.preflight(train_loader, num_classes=num_classes)
print(report)
print("bad samples:", report.bad_samples)
""",
        "preflight",
    ),
    Md("## The fix: drop the rows from the other export, check again, train"),
    Code(
        """
bad = set(report.bad_samples)
clean_ds = Subset(train_ds, [i for i in range(len(train_ds)) if i not in bad])
clean_loader = DataLoader(clean_ds, batch_size=50, shuffle=True)
print(ca.preflight(clean_loader, num_classes=num_classes, progress=False))
""",
        FIX,
        "preflight-clean",
    ),
    Code(
        """
%%cuda_debug
for epoch in range(3):
    for xb, yb in clean_loader:
        loss = F.cross_entropy(model(xb.to(device)), yb.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
print(f"3 epochs with validators on, nothing stopped; last loss {loss.item():.3f}")
""",
        FIX,
    ),
    Md("""
## `%%cuda_debug --nan`: where does the first NaN come from?

NaN losses are not device asserts, but they often lead to one (`multinomial` on NaN probabilities, `BCELoss` on
NaN). `--nan` stops at the first torch call whose output holds NaN or inf and names the line:
"""),
    Code(
        """
%%cuda_debug --nan
weights = torch.tensor([0.5, 0.0, 2.0], device=device)
log_weights = torch.log(weights)  # log(0) = -inf
probabilities = torch.softmax(log_weights, 0)
""",
        FAILS,
        "nan-stops",
    ),
    Md("The softmax of log-weights is just the weights, normalised; no log needed:"),
    Code(
        """
%%cuda_debug --nan
probabilities = weights / weights.sum()
print("probabilities:", [round(p, 3) for p in probabilities.tolist()])
""",
        FIX,
        "nan-fixed",
    ),
    Md("""
## In your own code

```python
with ca.validators():                # validators on inside the block only
    train_one_epoch()
ca.enable_validators(); ca.disable_validators()
ca.check_labels(labels, num_classes=10, ignore_index=-100)
ca.check_token_ids(input_ids, vocab_size=len(tokenizer))
```
"""),
]

# --------------------------------------------------------------------------------------------------
HF_TRAINER: list[Cell] = [
    Md("""
# Hugging Face Trainer: a 4th class in the data, a model built for 3

A review classifier was fine-tuned for 3 labels (negative, neutral, positive). Last week the annotators added a
4th, *mixed*, and `trainer.train()` now stops with

```
AcceleratorError: CUDA error: device-side assert triggered
```

On a GPU the traceback ends inside the Trainer, at `torch.isnan(tr_loss_step)` in its epoch loop: that is where
the Trainer first waits for the GPU, and no line of the model is on the stack. The usual advice, "make the last
layer output 4 logits", is not how you fix a Hugging Face model: you ask `from_pretrained` for `num_labels=4`.
`cudaassert` reads the facts where the Trainer keeps them (`trainer.model.config`, the micro-batch, the dataset's
`ClassLabel`) and words the fix that way.

Everything is built here (a tiny BERT from a `BertConfig`; nothing is downloaded). On a CPU the same cell raises
the CPU twin (`IndexError: Target 3 is out of bounds.`) and gets the same diagnosis.
"""),
    LOAD,
    Code("""
import datasets
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

hf_logging.set_verbosity_error()
device = "cuda" if torch.cuda.is_available() else "cpu"
print("device:", device, "| torch", torch.__version__)
"""),
    Md("""
## The data

64 tokenised reviews. The label column is a `ClassLabel` with the 4 names the annotators use now; one review is
labelled *mixed* (3).
"""),
    Code("""
LABELS = ["negative", "neutral", "positive", "mixed"]
g = torch.Generator().manual_seed(0)
rows = {"input_ids": torch.randint(5, 100, (64, 16), generator=g).tolist(), "label": [i % 3 for i in range(64)]}
rows["label"][37] = LABELS.index("mixed")
features = datasets.Features({"input_ids": datasets.Sequence(datasets.Value("int64")),
                              "label": datasets.ClassLabel(names=LABELS)})
train_ds = datasets.Dataset.from_dict(rows, features=features)
train_ds
"""),
    Md("""
## The model, configured for the 3 original labels

In real life this is `BertForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=3)`; here a
tiny BERT is built from its config, with the same classification head.
"""),
    Code("""
def make_trainer(num_labels):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=num_labels,
                        id2label=dict(enumerate(LABELS[:num_labels])),
                        label2id={name: i for i, name in enumerate(LABELS[:num_labels])})
    args = TrainingArguments(output_dir="hf_trainer_out", per_device_train_batch_size=8, num_train_epochs=2,
                             report_to=[], use_cpu=device == "cpu", save_strategy="no", logging_strategy="no",
                             disable_tqdm=True)
    return Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=train_ds)


trainer = make_trainer(num_labels=3)
"""),
    Md("""
## Train

The cell fails. Under the traceback: the cause in one sentence (the dataset lists 4 classes, the head outputs 3),
the fix in the Trainer's terms (`from_pretrained(..., num_labels=4, ignore_mismatched_sizes=True)`), and the
evidence the Trainer kept: `trainer.model.config` (`num_labels=3`), the classifier's `out_features`, the failing
micro-batch `inputs['labels']` and where the Trainer was (epoch, optimizer step, micro-batch).
"""),
    Code("trainer.train()", FAILS, "bad-train"),
    GPU_RESTART_NOTE,
    Md("""
## The fix as a patch of your cell

`%cudaassert fix` turns the diagnosis into a patch of the cell that built the culprit: here the cell that calls
`make_trainer(num_labels=3)`. It scans the dataset to check how many labels it needs and shows the change as a diff,
with how safe it is. Nothing changes until you ask: the proposal's **Apply** / **Apply, Restart & replay** buttons
(JupyterLab and Notebook 7 with the extension) edit the cell as an undoable edit, and
`%cudaassert fix apply --restart` does the same from a cell: it patches the cell, restarts with validators on,
replays the setup with the patched code and checks the failing cell again. Where no frontend edits notebooks
(Colab, Kaggle, VS Code, a batch run), copy the patched cell in. Here it is only shown; the sections below fix
the model by hand.
"""),
    Code("%cudaassert fix", "fix-proposal"),
    Md("""
## Which review?

`preflight` scans the dataset on the CPU and names every offending sample; given the model, it takes the class
count from its config and words the fix the same way:
"""),
    Code(
        """
import cudaassert_ipy as ca

ca.preflight(train_ds, model=trainer.model, progress=False)
""",
        "preflight",
    ),
    Md("""
## The fix

Review 37 is right: *mixed* is a real class. So the model needs 4 labels. With a pretrained checkpoint:

```python
model = BertForSequenceClassification.from_pretrained(
    "bert-base-uncased", num_labels=4, ignore_mismatched_sizes=True,
    id2label=dict(enumerate(LABELS)), label2id={name: i for i, name in enumerate(LABELS)})
```

(`ignore_mismatched_sizes=True` lets the new 4-way head replace the checkpoint's 3-way one.) Here, the same config
with 4 labels:
"""),
    Code(
        """
trainer = make_trainer(num_labels=4)
result = trainer.train()
print(f"trained {result.global_step} steps with {trainer.model.config.num_labels} labels; "
      f"loss {result.training_loss:.3f}")
""",
        FIX,
    ),
]

# --------------------------------------------------------------------------------------------------
LIGHTNING: list[Cell] = [
    Md("""
# Lightning: the error you see is the teardown's, the one that matters came first

On a GPU, a device-side assert inside `training_step` is not the last word. Lightning catches it, runs its
exception hooks and its teardown (`Strategy.teardown` moves the optimizer state and the model to the CPU and empties
the CUDA cache), and every one of those touches the dead GPU context: a **second** CUDA error is raised while the
first is handled. The traceback ends with

```
During handling of the above exception, another exception occurred:
  ...
  File ".../lightning/pytorch/strategies/strategy.py", line 532, in teardown
    _optimizers_to_device(self.optimizers, torch.device("cpu"))
AcceleratorError: CUDA error: device-side assert triggered
```

and the exception that reaches the notebook is the teardown's. `cudaassert` walks the chain back to the first
error, explains that one (from `training_step`'s own frame and the `LightningModule`'s hparams), and says the rest
in one line under the headline:

```
[cudaassert] GPU context dead · class label out of range in cross_entropy
Follow-on: Lightning's teardown (moving the model to the CPU) touched the dead GPU; the failure was in `training_step`.
```

On a CPU nothing dies, the teardown works, and the same cell raises the CPU twin (`IndexError: Target 3 is out of
bounds.`) with the same diagnosis of the first error.
"""),
    LOAD,
    Code("""
import logging
import warnings

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

warnings.filterwarnings("ignore", module="lightning")
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
device = "cuda" if torch.cuda.is_available() else "cpu"
print("device:", device, "| torch", torch.__version__, "| lightning", L.__version__)
"""),
    Md("""
## A classifier whose class count is an hparam

The head is sized by `num_classes`, saved in `self.hparams`. The data has a 4th class the module was not built for.
"""),
    Code("""
class LitClassifier(L.LightningModule):
    def __init__(self, num_classes=3):
        super().__init__()
        self.save_hyperparameters()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.head = nn.Linear(32, self.hparams.num_classes)
        self.losses = []

    def forward(self, x):
        return self.head(self.body(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-2)


torch.manual_seed(0)
labels = torch.arange(256) % 3
labels[201] = 3  # a 4th kind of sample, new in this batch of data
features = torch.randn(256, 8) + 2.0 * F.one_hot(labels, 8).float()
train_ds = TensorDataset(features, labels)
train_loader = DataLoader(train_ds, batch_size=32)


def make_trainer():
    return L.Trainer(max_epochs=2, accelerator=device, devices=1, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False)
"""),
    Md("""
## Train

The cell fails. On a GPU the report's first lines are the dead context, the headline, and the one follow-on line
naming Lightning's teardown; then the cause of the **first** error, with "Your code" at `training_step`'s line and
the evidence from the module (`model.head: out_features=3`, `model.hparams: num_classes=3`, the epoch and step).
The fix speaks Lightning: build the module with `num_classes=4`.
"""),
    Code(
        """
model = LitClassifier(num_classes=3)
make_trainer().fit(model, train_loader)
""",
        FAILS,
        "bad-train",
    ),
    GPU_RESTART_NOTE,
    Md("""
## The fix

Class 3 is real: build the module with 4 classes (its head follows the hparam) and train again:
"""),
    Code(
        """
model = LitClassifier(num_classes=4)
make_trainer().fit(model, train_loader)
print(f"trained {len(model.losses)} steps with num_classes={model.hparams.num_classes}; "
      f"last loss {model.losses[-1]:.3f}")
""",
        FIX,
    ),
]

NOTEBOOKS: dict[str, list[Cell]] = {
    "01_quickstart": QUICKSTART,
    "02_kaggle_image_classifier": KAGGLE,
    "03_token_ids_vs_vocab": TOKENS,
    "04_bce_without_sigmoid": BCE,
    "05_segmentation_ignore_255": SEGMENTATION,
    "06_cuda_debug_and_preflight": DEBUG,
    "07_hf_trainer": HF_TRAINER,
    "08_lightning": LIGHTNING,
}

METADATA = {
    "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
    "language_info": {"name": "python", "pygments_lexer": "ipython3"},
}


def build(name: str, cells: Iterable[Cell]) -> NotebookNode:
    """One notebook: fixed cell ids (<name prefix>-<n>), tags in metadata, no outputs."""
    nb = nbformat.v4.new_notebook(metadata=METADATA)
    prefix = name.split("_", 1)[0]
    for i, cell in enumerate(cells):
        cell_id = f"nb{prefix}-{i:02d}"
        if isinstance(cell, Md):
            nb.cells.append(nbformat.v4.new_markdown_cell(cell.text, id=cell_id))
        else:
            meta = {"tags": list(cell.tags)} if cell.tags else {}
            nb.cells.append(nbformat.v4.new_code_cell(cell.text, id=cell_id, metadata=meta))
    nbformat.validate(nb)
    return nb


def render(nb: NotebookNode) -> str:
    return nbformat.writes(nb, version=4) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a notebook on disk differs")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    stale = []
    for name, cells in NOTEBOOKS.items():
        path = OUT / f"{name}.ipynb"
        text = render(build(name, cells))
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(HERE.parent)}")
    if stale:
        print("out of date (run python examples/make_notebooks.py):", ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
