"""The report as a notebook user sees it: a real kernel, the real fd tap, the GPU test double."""

from __future__ import annotations

import re

import pytest
from helpers.kernels import execute, running_kernel, text_of

pytestmark = pytest.mark.kernel

SETUP = """
import torch, torch.nn as nn
class Birds:
    classes = [f"species_{i}" for i in range(196)]
train_ds = Birds()
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 195))
"""


def test_a_device_assert_in_a_real_kernel_gets_the_folded_line_the_cause_and_the_dead_context():
    with running_kernel() as kc:
        reply, _ = execute(kc, "%load_ext cudaassert")
        assert reply["status"] == "ok"
        execute(kc, SETUP + "from gpu_double import fail_like_gpu")
        reply, msgs = execute(kc, "fail_like_gpu('nll_loss_target_out_of_range', threads=64, blocks=2)")
        assert reply["status"] == "error" and reply["ename"] == "AcceleratorError"
        kinds = [m["type"] for m in msgs]
        assert "error" in kinds
        report = [m for m in msgs if m["type"] == "display_data"]
        assert kinds.index("error") < kinds.index("display_data"), "the report follows the traceback"
        plain = report[-1]["content"]["data"]["text/plain"]
        assert plain.startswith(
            "[cudaassert] The GPU context of this kernel is dead. Nothing on the GPU can be "
            "used again in this process; restart the kernel."
        )
        assert "GPU context dead · class label out of range in cross_entropy" in plain
        assert (
            "Loss.cu:250 nll_loss_forward_reduce_cuda_kernel_2d: `t >= 0 && t < n_classes` failed in "
            "128 threads of 2 blocks"
        ) in plain
        assert "model.2: out_features=195" in plain and "train_ds.classes: 196 entries" in plain
        assert "text/html" in report[-1]["content"]["data"]
        # the cell keeps the first 3 raw lines of the site and says where the other 125 went (issue #16)
        streamed = text_of(msgs)
        assert len(re.findall(r"Assertion `t >= 0 && t < n_classes` failed\.", streamed)) == 3
        assert (
            "[cudaassert] … 125 more lines of this assertion (Loss.cu:250) were written to the kernel's log."
            in streamed
        )

        reply, msgs = execute(kc, "fail_like_gpu()")
        banners = [m for m in msgs if m["type"] == "display_data"]
        assert len(banners) == 1
        assert banners[0]["content"]["data"]["text/plain"].startswith(
            "[cudaassert] This failure is a consequence of the dead GPU context (since cell [3]: "
            "class label out of range)"
        )

        reply, msgs = execute(kc, "%cudaassert status")
        assert "GPU context: DEAD since cell [3] (class label out of range); restart the kernel" in text_of(msgs)
        assert "fd tap: on (fds 2, 1)" in text_of(msgs)


def test_an_unknown_assertion_still_gets_a_generic_diagnosis_with_the_raw_line():
    line = (
        "/pytorch/aten/src/ATen/native/cuda/SomethingNew.cu:42: brand_new_kernel: block: [0,0,0], "
        "thread: [3,0,0] Assertion `x < limit` failed.\\n"
    )
    with running_kernel() as kc:
        execute(kc, "%load_ext cudaassert")
        _, msgs = execute(
            kc,
            f"import os, torch\nos.write(2, b'{line}')\nraise RuntimeError('CUDA error: device-side assert triggered')",
        )
        plain = [m for m in msgs if m["type"] == "display_data"][-1]["content"]["data"]["text/plain"]
        assert "GPU context dead · a kernel assertion failed" in plain
        assert "The kernel reported: `x < limit` failed in aten/src/ATen/native/cuda/SomethingNew.cu." in plain
        assert "SomethingNew.cu:42 brand_new_kernel: `x < limit` failed in 1 thread of 1 block" in plain


# --- every other exception renders byte-identical with and without the extension ----------
CORPUS = [
    "1/0",
    "{}['k']",
    "[][3]",
    "None + 1",
    "int('x')",
    "object().nope",
    "undefined_name",
    "import not_a_module_abc",
    "from os import nope",
    "assert 1 == 2, 'msg'",
    "raise StopIteration",
    "def f(:\n  pass",
    "  x = 1\n y = 2",
    "b'\\xff'.decode('utf-8')",
    "open('/nonexistent/file')",
    "import math; math.exp(1000)",
    "raise NotImplementedError('later')",
    "raise RuntimeError('plain runtime')",
    "class MyErr(Exception): pass\nraise MyErr('custom')",
    "raise ValueError('multi\\nline\\nmessage')",
    "raise ValueError('x' * 5000)",
    "try:\n    1/0\nexcept ZeroDivisionError as e:\n    raise KeyError('k') from e",
    "try:\n    1/0\nexcept ZeroDivisionError:\n    raise KeyError('during')",
    "raise KeyboardInterrupt",
    "raise SystemExit(3)",
    "import json; json.loads('{bad')",
    "import torch; torch.randn(2, 3) @ torch.randn(2, 3)",
    "import torch; torch.zeros(2).view(3)",
    "import torch; torch.randn(2) + torch.randn(3)",
    "import torch; torch.tensor([1.0]).long().sqrt_()",
    "import torch; torch.zeros(1, device='cuda')",
    "import torch; torch.cat([torch.zeros(2), torch.zeros(2, 2)])",
    "import torch; raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 20.00 MiB')",
    "raise RuntimeError('CUDA error: invalid argument')",
    "raise RuntimeError('CUDA error: out of memory')",
    "import torch.nn as nn; nn.Linear(3, 4)(__import__('torch').zeros(2, 5))",
    # bodies on their own line: for a one-line method IPython 8's traceback (stack_data) picks the source excerpt
    # nondeterministically, with or without the extension (seen on Python 3.10)
    "class R:\n    def __repr__(self):\n        raise ValueError('bad repr')\nR()",
    "class H:\n    def _repr_html_(self):\n        raise TypeError('bad html')\nH()",
    "def deep(n): return deep(n - 1) if n else 1/0\ndeep(50)",
    "lambda: (yield)",
    "(1).bit_length(2)",
    "import itertools; next(itertools.count(), 1, 2)",
    "'abc'.index('z')",
    "[1, 2].remove(3)",
    "float('nan') < 'x'",
    "dict(a=1)['b']",
    "import sys; sys.exit('bye')",
    "raise OSError(28, 'No space left')",
    "raise PermissionError('denied')",
    "raise TimeoutError('slow')",
    "raise MemoryError()",
    "raise UnicodeError('u')",
    "raise LookupError('l')",
    "import warnings; warnings.warn('w'); 1/0",
]


def _normalise(messages: list[dict]) -> list:
    out = []
    for m in messages:
        c = dict(m["content"])
        c.pop("execution_count", None)
        text = re.sub(r"ipykernel_\d+", "ipykernel_N", repr(c))
        out.append((m["type"], re.sub(r" at 0x[0-9a-f]+", " at 0xADDR", text)))  # object addresses vary
    return out


def test_at_least_50_ordinary_exceptions_render_byte_identical_with_the_extension():
    assert len(CORPUS) >= 50
    results = []
    for load in (False, True):
        with running_kernel() as kc:
            execute(kc, "%load_ext cudaassert" if load else "pass", silent=True)
            results.append([_normalise(execute(kc, code)[1]) for code in CORPUS])
    for code, plain, with_ext in zip(CORPUS, *results):
        assert with_ext == plain, f"output differs for {code!r}"
