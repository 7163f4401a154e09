"""Framework adapters: what each training framework does to a CUDA failure, and where it keeps the facts.

Most notebook users call ``trainer.train()`` / ``trainer.fit(...)``, not a loop of their own. The generic
path (diagnose/) explains a failure from the exception chain, the frames and the user's namespace; an
adapter only ADDS what one framework knows. It never imports its framework: it runs only while one of its
packages is in ``sys.modules``, and works on frames and on objects found in them and in the user's
namespace, duck-typed by class names (``type(obj).__mro__``, never ``obj.__class__``) and attributes.

The adapter shape (:class:`Adapter`, in ``base.py``): one module per framework, ``frameworks/<import
name>.py``, defining ``ADAPTER = Adapter(name=..., packages=(...), ...)`` with any of these hooks, and one row
in ``table.py`` naming the packages that turn it on and the hooks it defines:

``owns(stack) -> bool``
    Does this stack belong to me? Default: a frame runs code from one of ``packages``.
``unwrap(exc, text) -> str | None``
    The error's own text when my framework rewrote or wrapped it (fastai's "Exception occured in `X` when
    calling event `Y`" prefix, Keras' ANSI-wrapped re-created message); None when this link is not mine.
    (The Python chain itself, ``__cause__`` / ``__context__``, is walked by diagnose/detection.py.)
``found(stack, read) -> Found | None``
    The host facts I know where to find, from the first error's frames (``stack.frames``, outermost first)
    and the user's namespace: ``objects`` for the generic fact scanner (models, tokenizers, configs, batch
    tensors, each under the name the user knows), ``facts`` lines only I know (``("model.hparams",
    "num_classes=3")``), ``declared`` class counts of the data, ``head``, and ``advice``: keys of my
    ``advice_words`` (Keras: how to see the frames it filtered).
``head(obj, name, read) -> ClassHead | None``
    Where this object (a model, a trainer) sets its class count: the parameters of my fix words, my
    ``head_words`` (by ``ClassHead.framework``). diagnose/hints.py, the one place that composes fix sentences,
    reads them (``hints.HEAD_WORDS``), so the post-mortem, the validators (:func:`class_head_near`) and
    ``preflight(model=...)`` (:func:`class_head_of`) say the same sentence.
``step(frames) -> Step | None``
    Which of my steps raised a LATER CUDA error (teardown, checkpoint on exception, a cache clear), from
    that error's frames: the report names it in one follow-on line, and ``Step.lost`` says what is missing.
``launch(exc) -> Launch | None``
    This exception is only my launcher's or engine's wrapper around a failure in another process
    (``ChildFailedError``, ``ProcessRaisedException``, ``CalledProcessError``, vLLM's ``EngineDeadError``):
    which process failed first and what of its output the wrapper carries. The diagnosis is then built
    from the child's error and the kernel lines it wrote (the fd tap sees children: they inherit fd 1/2),
    read through launcher prefixes (capture/child_lines.py), and says the child's context died, not this
    kernel's (diagnose/launched.py). Launchers and engines: ``launchers.py``, ``engines.py``.
``head_words``, ``advice_words``
    My words, as plain data: how my framework sets a class count (``{n}``, ``{now}``, ``{setting}``,
    ``{owner}``), and the notes ``found`` asks for by key.

What my loaders add to a torch DataLoader iteration (data/loaders asks, once per iteration, only the modules
whose packages are imported):

``ahead(obj, frame) -> Ahead | None``
    How many batches my loader (a frame's ``self`` above the iteration's first ``__next__``) had fetched beyond
    the one being processed (accelerate's ``DataLoaderShard``, Lightning's fetcher, timm's ``PrefetchLoader``).
``batches(dataset) -> BatchIndices | None``
    Batch k's dataset indices, where my loader drives torch's iterator over a counter (fastai).
``is_loader(obj) -> bool``, ``image_of(batch, row, rows)``, ``float_labels``
    My own loader objects (the records are filed under them); which image a per-box row belongs to, and the
    float fields that hold class labels (Ultralytics' ``batch_idx``, ``im_file``, ``cls``).

Rules every hook follows: read attributes through the :class:`Reader` (``read.get(obj, "config.num_labels",
"model", needed=True)``), and anything else that can raise (a call, iterating a container) through
``read.call(fn, what)``, never a silent ``except``: a property that raises, or a needed value that is absent,
becomes part of ONE "could not read" line and the rest of the report stands. Never touch GPU memory: shapes,
dtypes, module attributes and CPU tensors only. A hook that raises anyway costs one "[internal]" note
(registry.py).

To add a framework: write ``frameworks/<name>.py`` (copy ``lightning.py``: ``PACKAGES``, duck-typed
``is_...`` checks with :func:`~cudaassert_ipy.frameworks.base.is_class`, the hooks, the words) and add its row
to ``ROWS`` in ``table.py`` (before ``generic``); nothing else names a framework (tests/test_frameworks_table.py
holds the table and the modules to each other). Test it with the real framework on the CPU (tests marked
``frameworks``).

Layer: just above ``base`` and below ``diagnose`` (standard library only), so diagnose/, checks/ and
data/ can all use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cudaassert_ipy.base.lazy import lazy_names
from cudaassert_ipy.frameworks.base import Adapter, ClassHead, Found, Launch, Reader, Stack, Step

if TYPE_CHECKING:
    from cudaassert_ipy.frameworks.registry import (
        ADAPTERS,
        Gathered,
        active,
        class_head_near,
        class_head_of,
        cleanup_step,
        gather,
        launch_of,
        own_text,
    )

#: imported on first use: ``%load_ext`` loads no module of this package; ``base`` and ``table`` come with the first
#: DataLoader iteration (data/loaders asks for loader hooks), the registry and every adapter with the first
#: failure or validator stop that needs them
_REGISTRY_NAMES = frozenset(
    {
        "ADAPTERS",
        "Gathered",
        "active",
        "class_head_near",
        "class_head_of",
        "cleanup_step",
        "gather",
        "launch_of",
        "own_text",
    }
)

__getattr__, __dir__ = lazy_names(__name__, "cudaassert_ipy.frameworks.registry", _REGISTRY_NAMES, globals())


__all__ = [
    "ADAPTERS",
    "Adapter",
    "ClassHead",
    "Found",
    "Gathered",
    "Launch",
    "Reader",
    "Stack",
    "Step",
    "active",
    "class_head_near",
    "class_head_of",
    "cleanup_step",
    "gather",
    "launch_of",
    "own_text",
]
