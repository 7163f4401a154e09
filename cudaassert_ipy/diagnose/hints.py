"""The one place where each specific fix ("Likely fix: ...") is worded, from plain facts.

The post-mortem rules, the validators and preflight all call these functions, so the same bad
input gets the same fix sentence on every path. A fix is a string of lowercase clauses joined by
"; " (it follows "Likely fix: "). Inputs are plain values (ints, floats, bools), never tensors:
each path extracts its facts first (from an exception's evidence, a checked call, or a dataset).
Standard library only: ``diagnose`` imports neither torch nor IPython.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # hints load with the validators (and %load_ext): the adapters only with a framework's words
    from cudaassert_ipy.frameworks.base import ClassHead

__all__ = [
    "CLASS_TEMPLATES_AS",
    "CODE_CHECKS",
    "FRAMEWORK_ADVICE",
    "FRAME_FIXES",
    "GENERIC_CLASS_WORDS",
    "HEAD_WORDS",
    "BceFacts",
    "Facts",
    "LabelFacts",
    "TokenFacts",
    "bce",
    "class_labels",
    "fix",
    "frame_fix",
    "label_value",
    "set_classes",
    "token_ids",
]

# ---------------------------------------------------------------- class labels (cross_entropy, nll_loss, preflight)
VOC_VOID = "255 is the 'void' label of VOC-style segmentation masks: pass ignore_index=255 to the loss"
#: How many classes the data declares, by who declares it (``LabelFacts.declared_by``).
DECLARED = {
    "dataset": "the dataset lists {declared} classes",
    "config": "the model's config has num_labels={declared}",
}
DECLARED_CLASSES = "{declared_text} but the model outputs {n_classes}: set out_features={declared}"
ONE_MORE_CLASS = (
    "the labels reach {top} with {n_classes} classes: if you have {more} classes, make the last layer output "
    "{more} logits (out_features={more}); if labels start at 1, subtract 1"
)
REMAP_LABELS = (
    "the labels reach {top} with {n_classes} classes: remap the labels to 0..{last} (for example "
    "torch.unique(labels, return_inverse=True)) or make the last layer output {more} logits (out_features={more})"
)
NEAREST_RESIZE = "resize label masks with nearest-neighbour interpolation only (bilinear invents labels)"
PADDING_LABEL = (
    "negative labels are only allowed as the loss's ignore_index ({now}): if {value} marks padding or "
    "unlabelled items, pass ignore_index={value}"
)
NEGATIVE_LABELS = "class labels cannot be negative: find where they become negative"
NOT_INTEGER_LABELS = "labels must be whole class ids, not fractions, NaN or inf"
# ---------------------------------------------------------------- token ids (embedding, check_token_ids, preflight)
TOKENIZER_RESIZE = (
    "the tokenizer has {tokenizer_size} tokens but the embedding only {num} rows: call "
    "model.resize_token_embeddings(len(tokenizer))"
)
CONFIG_VOCAB = (
    "the model's config has vocab_size={vocab}: the ids come from a larger vocabulary than the model's "
    "(tokenizer and model from different checkpoints?); resize the embeddings with "
    "model.resize_token_embeddings(len(tokenizer))"
)
EMBEDDING_TOO_BIG = (
    "the embedding has num_embeddings={num} (ids 0..{last}) but the ids reach {top}: if the ids come from a "
    "tokenizer with added tokens, resize the embedding (model.resize_token_embeddings(len(tokenizer))) or build "
    "it with num_embeddings={more}; if they are positions, truncate sequences to the model's maximum length"
)
EMBEDDING_MINUS_100 = (
    "-100 is the 'ignore' value for labels, not an input id: pad input_ids with the tokenizer's pad_token_id instead"
)
EMBEDDING_NEGATIVE = (
    "embedding ids cannot be negative (a negative padding_idx is normalised on the module, the ids themselves "
    "are not): pad with a real id such as padding_idx"
)
# ---------------------------------------------------------------- binary_cross_entropy
BCE_LOGITS = (
    "the input must be probabilities in [0, 1], not logits: pass the raw logits to nn.BCEWithLogitsLoss / "
    "F.binary_cross_entropy_with_logits (numerically stable), or apply torch.sigmoid first"
)
BCE_NAN_INPUT = (
    "the input holds NaN: the model's outputs diverged or the data has NaN "
    "(lower the learning rate, clip gradients, check the inputs with torch.isfinite)"
)
BCE_MASK_PIXELS = "targets look like 0..255 mask pixels: divide by 255 or binarise with (mask > 0).float()"
BCE_MULTICLASS = "for integer class labels with more than two classes use CrossEntropyLoss instead"
BCE_NEGATIVE_TARGETS = "targets cannot be negative: mask padding (-1/-100) out with a weight instead"
BCE_SCALE_TARGETS = "scale the targets into [0, 1] (label smoothing must stay inside [0, 1] too)"
BCE_NAN_TARGET = "the target holds NaN: check how the labels are built"
# ---------------------------------------------------------------- validator-only families (worded here all the same)
CTC_BLANK = (
    "the targets contain the blank label {blank}, which CTC reserves: shift 0-based labels by one "
    "(labels 1..C-1 with blank=0) or choose another blank index"
)
CTC_TOO_BIG = (
    "log_probs has C={n_classes} classes but the targets reach {top}: the output layer needs one unit per "
    "label plus one for blank"
)
CTC_NEGATIVE = "negative padding must lie beyond each target length (check target_lengths)"
CTC_CPU_SILENT = "CPU PyTorch does not check this and silently returns a wrong loss"
OFFSETS = (
    "offsets are the start position of each bag in the flat input: build them with torch.cumsum of the bag "
    "lengths, starting at 0 (offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)[:-1]]))"
)
INDEX_TOO_BIG = (
    "{where} but the index reaches {top}: indices are 0-based, so the largest valid one is {last} "
    "(off by one? a length computed before filtering?)"
)
INDEX_NO_NEGATIVES = (
    "this call does not accept negative indices (x[idx] does): wrap them with idx % size if you meant "
    "counting from the end"
)
INDEX_NEGATIVE_FLOOR = "negative indices count from the end and stop at {lowest}"
PROBS_NONFINITE = (
    "the probabilities hold NaN/inf, usually from NaN/inf logits (fp16 overflow, dividing by temperature=0, "
    "weights that diverged): check torch.isfinite(logits).all() before softmax, sample in float32, and use "
    "argmax for greedy decoding instead of temperature 0"
)
PROBS_NEGATIVE = "weights cannot be negative: pass probabilities (softmax(logits)), not raw logits"
PROBS_ZERO_ROWS = (
    "a row with all-zero weights has nothing to sample (every candidate masked out by top-k/top-p or -inf "
    "masking, or probabilities that underflowed): keep at least one candidate per row, add a small epsilon, "
    "or fall back to argmax for such rows"
)
BERNOULLI_RANGE = (
    "p must be probabilities in [0, 1]: apply torch.sigmoid to logits, or clamp(0, 1) after arithmetic "
    "that can overshoot"
)
BERNOULLI_NAN = "p holds NaN: find where it comes from (torch.isfinite)"
ONE_HOT_NEGATIVE = (
    "one_hot cannot encode negative labels (often -1/-100 padding): encode only the valid positions, "
    "e.g. F.one_hot(t.clamp(min=0), C) * (t >= 0).unsqueeze(-1)"
)
ONE_HOT_TOO_BIG = (
    "num_classes={num_classes} but the labels reach {top}: pass num_classes={more} if there are that many "
    "classes, or remap the labels to 0..{last} (1-based labels: subtract 1)"
)
REPEATS_NEGATIVE = (
    "repeat counts cannot be negative: clamp(min=0) them or find where they go below 0 "
    "(lengths computed as end - start with swapped ends?)"
)
OUTPUT_SIZE = "pass output_size={required}, or leave it out (PyTorch then computes it, with one sync)"
#: Ultralytics: a label file names a class the data YAML does not have
YOLO_CLASS_ID = (
    "add the class to the data YAML (nc: {more} and {more} names) or correct that label file (class ids 0..{last})"
)
#: an index checked against a named size, by what the index is (diagnose/causes/rule_sizes.py)
SIZED_INDEX = {
    "class id": "make the class ids 0..{last}, or make the model output {more} classes",
    "position": "truncate the inputs to {size} tokens (max_position_embeddings), or use a model with more positions",
    "token type id": "keep token_type_ids below {size} (type_vocab_size): most models have 1 or 2 segment types",
    "node id": "make the node ids 0..{last}: renumber the nodes after filtering the graph, or pass num_nodes",
    "token id": "keep the token ids below {size}: resize the embeddings to the tokenizer",
}

_PADDING_VALUES = (-1, -100)


@dataclass(frozen=True)
class LabelFacts:
    """Class labels outside ``0..n_classes-1``: what every path knows about them."""

    bad: tuple[int, ...]  # distinct bad (integer) values
    n_classes: int
    ignore_index: int | None = None
    dense: bool = False  # segmentation masks (N×H×W), not one label per sample
    declared: int | None = None  # how many classes the data says there are
    declared_by: str = "dataset"  # a key of DECLARED
    non_integer: bool = False  # some labels are fractions, NaN or inf
    head: ClassHead | None = None  # where the user's framework sets the class count (frameworks adapters)


@dataclass(frozen=True)
class TokenFacts:
    """Ids outside ``0..num_embeddings-1`` given to an embedding."""

    bad: tuple[int, ...]
    num_embeddings: int
    tokenizer_size: int | None = None  # len(tokenizer), when known
    config_vocab: int | None = None  # the model config's vocab_size, when known


@dataclass(frozen=True)
class BceFacts:
    """binary_cross_entropy's input or target outside [0, 1]."""

    argument: str  # "input" or "target"
    lo: float  # finite minimum
    hi: float  # finite maximum
    has_nan: bool
    whole: bool = False  # the finite values outside [0, 1] are all whole numbers


Facts = LabelFacts | TokenFacts | BceFacts


def _join(clauses: Sequence[str]) -> str:
    return "; ".join(clauses)


def class_labels(f: LabelFacts) -> str:
    """The fix for class labels outside ``0..n_classes-1`` (``ignore_index`` excepted)."""
    clauses = [NOT_INTEGER_LABELS] if f.non_integer else []
    too_big = [v for v in f.bad if v >= f.n_classes]
    negative = sorted({v for v in f.bad if v < 0})
    if 255 in too_big and f.ignore_index != 255:
        clauses.append(VOC_VOID)
    top = max((v for v in too_big if v != 255), default=None)
    if top is not None:
        words = set_classes(f.head, f.n_classes)
        if f.declared is not None and f.n_classes < f.declared and top < f.declared:
            text = DECLARED.get(f.declared_by, DECLARED["dataset"]).format(declared=f.declared)
            if words is None:
                clauses.append(DECLARED_CLASSES.format(declared_text=text, n_classes=f.n_classes, declared=f.declared))
            else:
                clauses.append(
                    CLASS_TEMPLATES_AS["DECLARED_CLASSES"].format(
                        declared_text=text, n_classes=f.n_classes, set_classes=words(f.declared)
                    )
                )
        elif words is None:
            template = ONE_MORE_CLASS if top == f.n_classes else REMAP_LABELS
            clauses.append(template.format(top=top, n_classes=f.n_classes, more=top + 1, last=f.n_classes - 1))
        else:
            template = CLASS_TEMPLATES_AS["ONE_MORE_CLASS" if top == f.n_classes else "REMAP_LABELS"]
            clauses.append(
                template.format(
                    top=top, n_classes=f.n_classes, last=f.n_classes - 1, more=top + 1, set_classes=words(top + 1)
                )
            )
        if f.dense and top < 255:
            clauses.append(NEAREST_RESIZE)
    now = "none is set" if f.ignore_index is None else f"now {f.ignore_index}"
    clauses += [PADDING_LABEL.format(now=now, value=v) for v in negative if v in _PADDING_VALUES]
    if any(v not in _PADDING_VALUES for v in negative):
        clauses.append(NEGATIVE_LABELS)
    return _join(clauses)


def token_ids(f: TokenFacts) -> str:
    """The fix for ids outside ``0..num_embeddings-1``."""
    clauses = []
    too_big = [v for v in f.bad if v >= f.num_embeddings]
    if too_big:
        top = max(too_big)
        if f.tokenizer_size is not None and f.num_embeddings < f.tokenizer_size and top < f.tokenizer_size:
            clauses.append(TOKENIZER_RESIZE.format(tokenizer_size=f.tokenizer_size, num=f.num_embeddings))
        elif f.tokenizer_size is None and f.config_vocab is not None and top >= f.config_vocab:
            clauses.append(CONFIG_VOCAB.format(vocab=f.config_vocab))
        else:
            clauses.append(
                EMBEDDING_TOO_BIG.format(num=f.num_embeddings, last=f.num_embeddings - 1, top=top, more=top + 1)
            )
    if -100 in f.bad:
        clauses.append(EMBEDDING_MINUS_100)
    if any(v < 0 and v != -100 for v in f.bad):
        clauses.append(EMBEDDING_NEGATIVE)
    return _join(clauses)


def yolo_class_id(nc: int, class_id: int) -> str:
    """The fix for an Ultralytics label file's ``class_id`` outside ``0..nc-1``."""
    return YOLO_CLASS_ID.format(more=max(class_id, nc) + 1, last=nc - 1)


def sized_index(what: str, size: int, index: int) -> str:
    """The fix for an ``index`` that reached the ``size`` of a named quantity (what the index is: ``class id``)."""
    return SIZED_INDEX[what].format(size=size, last=size - 1, more=max(index, size) + 1)


def bce(f: BceFacts) -> str:
    """The fix for binary_cross_entropy's input or target outside [0, 1] (or NaN)."""
    outside = f.lo < 0 or f.hi > 1
    if f.argument == "input":
        return _join(([BCE_LOGITS] if outside else []) + ([BCE_NAN_INPUT] if f.has_nan else []))
    clauses = []
    if outside and f.whole:
        if 1 < f.hi <= 255:
            clauses.append(BCE_MASK_PIXELS)
        if f.hi > 1:
            clauses.append(BCE_MULTICLASS)
        if f.lo < 0:
            clauses.append(BCE_NEGATIVE_TARGETS)
    elif outside:
        clauses.append(BCE_SCALE_TARGETS)
    if f.has_nan:
        clauses.append(BCE_NAN_TARGET)
    return _join(clauses)


# ---------------------------------------------------------------- framework words (frameworks/ adapters: ClassHead)
# Where the model's class count is set in the user's framework, the fix says it in that framework's terms
# instead of "out_features=N". An adapter reports what it saw (ClassHead) and keeps its framework's words; the
# sentences are composed here.
#: The generic phrases the framework words replace, as ONE_MORE_CLASS / REMAP_LABELS / DECLARED_CLASSES say them.
GENERIC_CLASS_WORDS: dict[str, str] = {
    "output": "make the last layer output {n} logits (out_features={n})",
    "set": "set out_features={n}",
}


class _FrameworkWords(Mapping[str, str]):
    """Every framework's words of one kind, read-only: each framework keeps its own in its module
    (``Adapter.head_words`` / ``advice_words`` in frameworks/<name>.py); the sentences are composed here. The
    adapters are loaded at the first read (a fix with a class head, an adapter's note), not with the hints."""

    def __init__(self, kind: str) -> None:
        self._kind = kind

    def _words(self) -> Mapping[str, str]:
        from cudaassert_ipy.frameworks.registry import WORDS

        return WORDS[self._kind]

    def __getitem__(self, key: str) -> str:
        return self._words()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._words())

    def __len__(self) -> int:
        return len(self._words())


#: How each framework sets a model's class count, by ``ClassHead.framework``; {n}: the count wanted, {now}: the
#: count now, {setting}: the knob's name, {owner}: who holds it (ClassHead's fields).
HEAD_WORDS: Mapping[str, str] = _FrameworkWords("head_words")
#: Notes a framework adapter asks for by key (``Found.advice``): said once under the report.
FRAMEWORK_ADVICE: Mapping[str, str] = _FrameworkWords("advice_words")
#: ONE_MORE_CLASS, REMAP_LABELS and DECLARED_CLASSES with {set_classes} (the framework's words) in place of the
#: generic phrase; a test holds them equal to those templates when given GENERIC_CLASS_WORDS.
CLASS_TEMPLATES_AS: dict[str, str] = {
    "ONE_MORE_CLASS": (
        "the labels reach {top} with {n_classes} classes: if you have {more} classes, {set_classes}; if labels "
        "start at 1, subtract 1"
    ),
    "REMAP_LABELS": (
        "the labels reach {top} with {n_classes} classes: remap the labels to 0..{last} (for example "
        "torch.unique(labels, return_inverse=True)) or {set_classes}"
    ),
    "DECLARED_CLASSES": "{declared_text} but the model outputs {n_classes}: {set_classes}",
}


def set_classes(head: ClassHead | None, n_classes: int) -> Callable[[int], str] | None:
    """The framework's words for "give the model N classes", or None for the generic words.

    Only when the head the adapter saw is the one that failed (its count is ``n_classes``, or unknown).
    """
    if head is None or head.framework not in HEAD_WORDS or head.now not in (None, n_classes):
        return None
    template = HEAD_WORDS[head.framework]
    now = "?" if head.now is None else head.now
    return lambda n: template.format(n=n, now=now, setting=head.setting, owner=head.owner)


#: Which facts (and so which wording) each cause id takes.
FAMILIES: dict[str, type] = {
    **dict.fromkeys(
        (
            "nll_loss_target_out_of_range",
            "nll_loss_target_out_of_range_no_reduce",
            "thcunn_class_nll_target_out_of_range",
            "nll_loss2d_target_out_of_range",
            "nll_loss2d_target_out_of_range_no_reduce",
            "thcunn_spatial_class_nll_target_out_of_range",
            "multi_margin_target_out_of_range",
        ),
        LabelFacts,
    ),
    **dict.fromkeys(
        (
            "index_select_out_of_range",
            "thc_index_select_out_of_range",
            "embedding_bag_index_out_of_range",
        ),
        TokenFacts,
    ),
    **dict.fromkeys(
        (
            "bce_input_out_of_range",
            "thcunn_bce_input_out_of_range",
            "thcunn_bce_no_reduce_input_out_of_range",
            "bce_target_out_of_range",
        ),
        BceFacts,
    ),
}


def fix(cause_id: str, facts: Facts) -> str:
    """The specific fix for ``cause_id`` from ``facts``; raises TypeError when they are the wrong kind."""
    family = FAMILIES.get(cause_id)
    if family is None or not isinstance(facts, family):
        raise TypeError(f"no fix wording for {cause_id} from {type(facts).__name__}")
    if isinstance(facts, LabelFacts):
        return class_labels(facts)
    if isinstance(facts, TokenFacts):
        return token_ids(facts)
    return bce(facts)


# ==================================================================================================================
# The cause catalogue's wording (diagnose/causes/): internal invariants, uint8 labels, scatter indices,
# repeat_interleave's printed sizes, message-less GPU checks. Kept in its own section, below the families above,
# so that other wording added above merges cleanly.
# ==================================================================================================================

#: Whom to report a check that never fails on valid input to, by the kernel's owner: (name, where).
INTERNAL_WHO: dict[str, tuple[str, str]] = {
    "PyTorch": ("PyTorch", "https://github.com/pytorch/pytorch/issues"),
    "mmcv": ("mmcv", "https://github.com/open-mmlab/mmcv/issues"),
}
INTERNAL_CHECK = (
    "run {op} on the CPU with the same inputs (a real bug or a bad input raises a readable error there); run the "
    "script under NVIDIA's compute-sanitizer (compute-sanitizer --tool memcheck python script.py) to find an earlier "
    "kernel that writes out of bounds; if it still fails, report it to {name} ({url}) with {line}, the torch version "
    "and the GPU model"
)
UINT8_LABELS = (
    "the labels are uint8: they cannot hold -1 or -100 (those wrap to 255 and 156), so cast them with labels.long() "
    "and mark padding with the loss's ignore_index"
)
SCATTER_TOO_BIG = (
    "`{name}` reaches {top} but `{rows_of}` has {rows} rows: every index must be 0..{last} (size the output by "
    "index.max() + 1, or drop the indices from another graph or batch)"
)
SCATTER_NEGATIVE = (
    "`{name}` holds negative values (down to {low}): scatter-style ops do not wrap them; remove -1 padding with a "
    "mask first"
)
ASYNC_INDEX_PUT = (
    "compare the indices' min and max with the size of the dimension they index (-size..size-1) before index_put_ "
    "or x[idx] = v"
)
ASYNC_CTC = (
    "on the cuDNN path ctc_loss needs input_lengths <= log_probs.size(0) and every target length <= its input "
    "length: check both before the call (or run it on the CPU, which raises the readable error)"
)
ASYNC_OWN = "your own torch._assert_async(...) failed: the tensor it checked was zero or False"
SPARSE_ON_CPU = (
    "build the same sparse tensor on the CPU ({call} with .cpu() indices and values): the CPU check names the rule "
    "that fails"
)


def internal_check(who: tuple[str, str], line: str | None = None, op: str | None = None) -> str:
    """What to try when a check that never fails on valid input failed: the CPU, compute-sanitizer, a report."""
    name, url = who
    return INTERNAL_CHECK.format(
        op=f"`{op}`" if op else "the same op",
        name=name,
        url=url,
        line=f"this line (`{line}`)" if line else "the assertion line",
    )


#: A conv layer given one row per graph (rule_graph.pooled_readout): a readout's output fed back into message passing.
GRAPH_POOLED = (
    "keep node-level features (one row per node) flowing from conv layer to conv layer and pool "
    "(global_add_pool / global_mean_pool(x, batch)) once, after the last conv, for the readout: a conv after the "
    "pooling gets the batch's node-level edge_index, which points past the pooled rows"
)
#: multinomial's ``!isinf(sum)``: finite weights whose sum overflows (rule_sampling).
SAMPLING_SUM_INF = (
    "normalize the weights before sampling (divide each row by its max, or sample from torch.softmax of "
    "log-weights) so that a row's sum stays finite; weights as large as exp() of big values overflow to inf"
)
#: A negative embedding id that is a valid id wrapped by a 16-bit integer (rule_narrow_ids).
INT16_WRAPPED = (
    "the id {value} is {wrapped} stored in 16 bits: ids above 32767 wrap to negative numbers in int16, so store "
    "and load token ids as int64 (torch.long, np.int64), never int16"
)


def scatter_index(name: str, low: int, top: int, rows_of: str | None = None, rows: int | None = None) -> str:
    """The fix for an index tensor seen outside the rows it scatters into (or negative)."""
    clauses = []
    if rows_of is not None and rows is not None and top >= rows:
        clauses.append(SCATTER_TOO_BIG.format(name=name, top=top, rows_of=rows_of, rows=rows, last=rows - 1))
    if low < 0:
        clauses.append(SCATTER_NEGATIVE.format(name=name, low=low))
    return _join(clauses)


# What to check for each likely cause that a user's code line ranks when nothing decides (diagnose/code_lines.py, data
# in causes/code_lines.json), keyed by the rule's check key: one clause each, a cause and how to see it.
CODE_CHECKS: dict[str, str] = {
    "labels": (
        "class labels outside 0..C-1: compare labels.min() and labels.max() with the number of classes the model "
        "outputs (the last layer's out_features / num_classes / num_labels); 1-based labels need -1, and padding "
        "such as -1 or 255 needs ignore_index="
    ),
    "bce": (
        "BCELoss on values outside [0, 1]: apply torch.sigmoid to the output first, or use BCEWithLogitsLoss on the "
        "raw logits; targets must be in [0, 1] too"
    ),
    "one_hot": (
        "class values outside 0..num_classes-1 before one_hot: compare the labels' max with num_classes (255 in a "
        "mask is usually a void label)"
    ),
    "probs": (
        "probabilities with NaN, inf or negative values, or a row that sums to 0: check torch.isfinite(probs).all() "
        "and probs.min() >= 0 before sampling (fp16 logits overflow; temperature 0 divides by zero)"
    ),
    "gather_range": (
        "gather/scatter index values outside 0..size-1 along dim: compare index.min() and index.max() with "
        "input.size(dim) (negative values are not allowed)"
    ),
    "embedding_ids": (
        "ids >= an embedding's num_embeddings: compare the input ids' max with each nn.Embedding's size "
        "(vocab_size and len(tokenizer), or the number of categories of a column)"
    ),
    "index_range": (
        "an index outside the dimension it indexes: compare idx.min() and idx.max() with x.size(dim) (idx must be "
        "in -size..size-1)"
    ),
    "positions": (
        "sequences longer than the model's position table: compare the input's length with "
        "max_position_embeddings, and truncate (max_length=...)"
    ),
    "category_codes": (
        "categorical codes (or user / item / field ids) >= the size their embedding was built with: compare each "
        "categorical column's largest code with its embedding's cardinality (cat_dims, field_dims, input_dim, "
        "cardinality, embedding_sizes); count the categories over every split the model will see (a category "
        "unseen in training, at prediction time) or map unseen ones to a reserved code, and shift ids that start "
        "at 1"
    ),
    "graph_nodes": (
        "an edge_index node id >= the number of nodes: compare edge_index.max() with x.size(0) (num_nodes); "
        "re-index the edges after dropping or sampling nodes, give every node an edge names a row of features, "
        "and use cached=True on a conv only when every call gets the same graph"
    ),
}


# ==================================================================================================================
# Failure points read from a traceback's frames (diagnose/frame_points.py, data in causes/frame_points.json): the
# fix in the words of the framework whose code the frame is in, keyed by the point's ``fix`` key. {bound}: " (512)"
# when the error or the host facts named the number, else empty.
# ===========================================================================================================


FRAME_FIXES: dict[str, str] = {
    "truncate": (
        "truncate the inputs to the model's max_position_embeddings{bound}: tokenizer(..., truncation=True, "
        "max_length=model.config.max_position_embeddings), and check that position_ids (or a long-context config) "
        "stay below it"
    ),
    "token_type": (
        "token_type_ids must be below the config's type_vocab_size{bound}: pass return_token_type_ids=False "
        "(or all zeros) for models trained without segment ids (RoBERTa, DistilBERT), or use the tokenizer of the "
        "same checkpoint"
    ),
    "token_ids": (
        "every input id must be below the embedding's size{bound}: load tokenizer and model from the same "
        "checkpoint, call model.resize_token_embeddings(len(tokenizer)) after adding tokens, and check "
        "pad_token_id and vocab_size in the config"
    ),
    "positions": (
        "position ids must stay below the position table's size{bound} (max_position_embeddings, max_seq_len, the "
        "model's context length, vLLM's max_model_len): truncate or split longer inputs (truncation=True, "
        "max_length=...), or filter out samples longer than the context"
    ),
    "st_max_seq_length": (
        "a SentenceTransformer truncates to model.max_seq_length only: set it to at most the model's "
        "max_position_embeddings{bound} (RoBERTa-style models: 2 less), and load the tokenizer of the same model"
    ),
    "resized_vocab": (
        "the vocabulary was extended: every id must be below the rows of the embedding that actually runs{bound}: "
        "resize after adding the tokens and before the model is wrapped or sharded (under ZeRO-3 the "
        "partitioned weights are not resized in place: resize before the ZeRO engine is initialized, or with the "
        "parameters gathered), resize the output head too, and save and load the resized model with its tokenizer"
    ),
    "hf_num_labels": (
        "labels must be 0..num_labels-1: load the model with from_pretrained(..., num_labels=<number of classes>, "
        "ignore_mismatched_sizes=True) (and id2label/label2id), map labels to 0-based ids, and mark padding with "
        "-100"
    ),
    "hf_lm_labels": (
        "labels of a language-model head must be token ids below the config's vocab_size, with -100 (not -1 or "
        "the pad id of another vocabulary) for positions to ignore: build them with DataCollatorForLanguageModeling "
        "or replace padding with -100, and call model.resize_token_embeddings(len(tokenizer)) after adding tokens"
    ),
    "hf_token_labels": (
        "token-classification labels must be 0..num_labels-1 with -100 on sub-word and padding positions: set "
        "num_labels (and id2label/label2id) to the number of tags, and align labels with word_ids()"
    ),
    "generation_probs": (
        "the sampling probabilities hold NaN/inf or negatives, usually from fp16 overflow in the logits: load the "
        "model in bfloat16 or float32, keep temperature > 0 (or do_sample=False for greedy decoding), and check "
        "that pad_token_id/eos_token_id are inside the vocabulary"
    ),
    "detection_nc": (
        "every class id in the label files must be 0..nc-1: set nc: (and names:) in the data YAML to the number "
        "of classes the labels use, or correct the label files that hold a larger id"
    ),
    "torchvision_background": (
        "torchvision detection models count the background as class 0: num_classes must be the number of object "
        "classes + 1, and box labels must be 1..num_classes-1"
    ),
    "mmdet_num_classes": (
        "set num_classes in the model's bbox_head/roi_head (every head of a cascade) to the number of classes "
        "listed in the dataset's metainfo/classes (mmdetection 2.x and later: the object classes, without the "
        "background; 1.x counted the background), and keep the annotation category ids inside it"
    ),
    "detectron2_num_classes": (
        "set cfg.MODEL.ROI_HEADS.NUM_CLASSES (and RETINANET.NUM_CLASSES / SEM_SEG_HEAD.NUM_CLASSES) to the number of "
        "registered thing classes, and make the dataset's category ids contiguous 0..N-1"
    ),
    "pyg_nodes": (
        "every node id in edge_index must be below the number of nodes (x.size(0), data.num_nodes): re-index the "
        "edges after filtering or batching nodes (torch_geometric.utils.subgraph(..., relabel_nodes=True)), and "
        "check data.validate(); a conv built with cached=True (GCNConv, SGConv, ChebConv) reuses the normalized edges "
        "of the first graph it saw, so use cached=True only when every call gets that same graph"
    ),
    "dgl_nodes": (
        "every node id in the edges must be below the graph's number of nodes (g.num_nodes()): build the graph with "
        "num_nodes= set, and re-index node ids after filtering"
    ),
    "crf_tags": (
        "a CRF indexes its transition tables with the tag values, so every tag must be 0..num_tags-1, padding "
        "included: -100 (cross_entropy's ignore_index) is not ignored by a CRF; pad the tags with a valid tag (0) "
        "and pass mask= with 0 at the padded and sub-word positions (the first mask column must be 1)"
    ),
    "ignore_value_as_index": (
        "only cross_entropy and nll_loss skip -100 (their ignore_index): before any op that uses the labels as an "
        "index (a CRF, gather, one_hot, x[labels], an embedding) replace -100 with a valid value such as 0 and keep "
        "those positions out with a mask"
    ),
    "time_idx": (
        "pytorch-forecasting computes each series' encoder length from the time_idx column: time_idx must be an "
        "integer that grows by exactly 1 per time step within each series (not a timestamp, no duplicates), so "
        "that no encoder length passes max_encoder_length{bound}; rebuild the time index and the TimeSeriesDataSet"
    ),
    "forecasting_categories": (
        "every categorical column must be encoded by the TimeSeriesDataSet's own encoders: give categories that may "
        "be unseen in training NaNLabelEncoder(add_nan=True) in categorical_encoders, build the validation and "
        "prediction sets with TimeSeriesDataSet.from_dataset(training, ...), and check that time_idx grows by 1 per "
        "step"
    ),
    "gluonts_cardinality": (
        "every categorical feature value must be below the cardinality the model was built with "
        "(static_cardinalities / dynamic_cardinalities / cardinality): count the categories over every dataset the "
        "model will see (prediction data included), or reserve a code for unseen categories"
    ),
    "tabnet_cat_dims": (
        "encode every categorical column as 0..cat_dims[i]-1 with cat_dims (and cat_idxs) counted over all the data "
        "the model will see: map categorical values unseen in training to a reserved 'unknown' code included in "
        "cat_dims before predict()"
    ),
    "widedeep_dims": (
        "size each component from its preprocessor: Wide(input_dim=wide_preprocessor.wide_dim) (np.unique over the "
        "whole frame undercounts when columns share values), and TabMlp/TabResnet from tab_preprocessor's "
        "cat_embed_input; encode test data with the fitted preprocessors' transform()"
    ),
    "torchfm_field_dims": (
        "each field's ids must be 0..field_dims[i]-1 (pytorch-fm's FeaturesEmbedding adds per-field offsets to one "
        "table of sum(field_dims) rows): ids that start at 1 (MovieLens) need field_dims = max id + 1 per field, or "
        "ids shifted to start at 0"
    ),
    "category_codes": (
        "every categorical code (a user, item or field id, an encoded column) must be below the size of the "
        "embedding it is looked up in{bound} (its cardinality: vocabulary_size, categorical_cardinality, "
        "cardinalities, n_users / n_items): count the categories over every split the model will see, map values "
        "unseen in training to a reserved code included in that count, and shift ids that start at 1"
    ),
    "quantized_probs": (
        "compare the logits with the unquantized model's on one prompt (torch.isfinite(logits).all()); try the "
        "library's other kernel backend (GPTQ: the Triton or exllama kernels instead of its CUDA ones), keep the "
        "compute dtype and the LayerNorm weights in float32 or bfloat16 (prepare_model_for_kbit_training), and "
        "decode with do_sample=False to check whether sampling is the only victim"
    ),
    "layoutlm_bbox": (
        "normalize every word box to 0..1000 (x0, y0, x1, y1 scaled by 1000 / the page's width and height) and "
        "clamp them, so that no coordinate reaches max_2d_position_embeddings, with x0 <= x1 and y0 <= y1 (a box "
        "of negative width or height indexes the width/height embeddings out of range); and keep input_ids below "
        "vocab_size (tokenizer and model from the same checkpoint)"
    ),
    "scatter_add_index": (
        "keep every index value below the size of the output's dimension (out.size(dim)): for a graph, every node "
        "id in edge_index must be below the number of nodes (x.size(0), num_nodes), so re-index or remap the edges "
        "after dropping nodes, and give every node an edge refers to a row of features"
    ),
    "nnunet_labels": (
        "nnU-Net needs consecutive label values 0..N-1 in every segmentation, matching the labels in dataset.json: "
        "remap the label files (e.g. 255 -> 1) and run the plan-and-preprocess step again"
    ),
    "seg_labels": (
        "every mask value must be 0..classes-1 or the loss's ignore_index: pass ignore_index=255 for void borders, "
        "map a binary mask saved as 0/255 to 0/1 (mask // 255), set the model's number of classes to the mask's, and "
        "resize masks with nearest-neighbour interpolation"
    ),
    "class_labels": (
        "labels must be 0..C-1 where C is the number of model outputs: make the last layer output one logit per "
        "class (num_classes / out_features), map 1-based labels to 0-based, and pass ignore_index= for padding"
    ),
    "bce_logits": BCE_LOGITS,
    "one_hot": (
        "class values must be 0..num_classes-1 before one_hot / a one-hot scatter: make num_classes (n_classes, "
        "n_labels) the number of classes the labels use, map 1-based labels to 0-based and labels that skip a value "
        "(0, 1, 2, 4) to consecutive ones, and drop or ignore void values such as 255"
    ),
    "detr_num_classes": (
        "num_classes must be larger than the largest category id (DETR-style models add a no-object class at index "
        "num_classes): set num_classes from the dataset's categories, or map category ids to 0..N-1"
    ),
    "yolo_num_classes": (
        "every class id in the targets must be 0..num_classes-1: set the class count everywhere the model and its "
        "loss read it (classes= of each [yolo] layer of a Darknet .cfg, with filters=(classes + 5) * anchors in the "
        "conv before it; num_classes / class_num / nc in the code or data file, also where a loss builds its own "
        "one-hot), and correct label files that hold a larger id (ids start at 0)"
    ),
    "detection_num_classes": (
        "every box's class id must be below the head's num_classes: set num_classes to the dataset's number of "
        "classes and map the annotation category ids to contiguous 0-based ids (COCO's ids run to 90 with gaps); "
        "check whether this head counts the background as a class of its own"
    ),
    "ssd_zero_based": (
        "SSD-style matchers add 1 to every box label for the background (class 0): the dataset's labels must be "
        "0-based object class ids (0..num_classes-2), not 1-based, and num_classes must be the number of object "
        "classes + 1"
    ),
    "maskrcnn_benchmark_num_classes": (
        "set MODEL.ROI_BOX_HEAD.NUM_CLASSES (MODEL.RETINANET.NUM_CLASSES / MODEL.FCOS.NUM_CLASSES for those heads) "
        "to the number of object classes + 1 for the background, and map the dataset's category ids to contiguous "
        "1..N"
    ),
    "yolo_box_coords": (
        "box coordinates in the label files must be normalised to [0, 1] (x_center, y_center, width, height divided "
        "by the image's width and height): a value >= 1 puts the grid cell index past the grid; correct those "
        "labels, or clamp the coordinates into [0, 1) before the targets are built"
    ),
    "mmseg_labels": (
        "set num_classes of decode_head and auxiliary_head to the number of classes in the masks; every mask value "
        "must be 0..num_classes-1 or 255 (the default ignore_index: VOC's void border); with reduce_zero_label=True "
        "(0 means 'unlabelled') the classes are the mask values 1..N shifted down by one"
    ),
    "cityscapes_train_ids": (
        "Cityscapes' *_labelIds.png masks hold the 34 raw label ids: train on the *_labelTrainIds.png masks that "
        "cityscapesScripts' createTrainIdLabelImgs.py writes (19 trainIds 0..18, 255 for void) and pass "
        "ignore_index=255 to the loss, or map labelIds to trainIds when loading the masks"
    ),
    "monai_labels": (
        "the label volumes must hold class indices 0..out_channels-1 (not image intensities): set out_channels of "
        "the network (and num_classes of AsDiscrete / one_hot) to the number of classes, and check np.unique() of "
        "a few label files"
    ),
    "node_index": (
        "every index must be below the size of the dimension it indexes: compare index.max() with that size "
        "before the call"
    ),
    "tokenizer_max_length": (
        "give the tokenizer the model's real maximum{bound}: tokenizer.model_max_length = "
        "model.config.max_position_embeddings (512 for BERT-style models), or pass max_length=... with "
        "truncation=True, so that sequences are truncated before the model (a max_len / max_seq_len derived from "
        "tokenizer.model_max_length inherits the 1e30 placeholder)"
    ),
    "printed_minus_one_labels": (
        "labels of -1 are out of range: cross_entropy / nll_loss skip only their ignore_index, -100 by default, so "
        "mark the positions to skip with -100 (or pass ignore_index=-1 to the loss), and keep every real label in "
        "0..num_classes-1 (a label shifted by - 1 must start at 1)"
    ),
}


def frame_fix(key: str, bound: int | None = None) -> str | None:
    """The fix for a failure point read from a frame, in its framework's words (None: no such key)."""
    template = FRAME_FIXES.get(key)
    if template is None:
        return None
    return template.format(bound=f" ({bound})" if bound is not None else "") if "{bound}" in template else template


# The value a label error names (``Target 255 is out of bounds``), when no host facts are there to say more: a pasted
# report or a log. Worded from the value alone; the post-mortem's class_labels() says more when it has the model.
LABEL_255 = (
    "255 in a mask is either the 'void' label of VOC-style masks (pass ignore_index=255 to the loss) or the white of "
    "a 0/255 binary mask (map it to class 1: mask = mask // 255, and resize masks with nearest-neighbour only)"
)
LABEL_TOO_BIG = (
    "the labels reach {value}: the model must output at least {more} classes (num_classes / num_labels / "
    "out_features={more}), or the labels must be mapped to 0..num_classes-1 (1-based labels: subtract 1)"
)
#: A label in the hundreds below 255: an 8-bit mask image's grey level or palette colour read as the class.
LABEL_MASK_PIXELS = (
    "if the labels come from mask images, {value} is a pixel's grey level or colour, not a class index: map each "
    "mask value to its class index (0..num_classes-1) when the masks are loaded"
)
LABEL_NEGATIVE = (
    "the labels hold {value}: if {value} marks padding, pass ignore_index={value} to the loss or replace it by -100, "
    "the default ignore_index (older releases of some libraries padded labels with -1)"
)


def label_value(value: int) -> str:
    """The fix a label error's own value points to, when nothing else is known of the model or the data."""
    if value == 255:
        return LABEL_255
    if value < 0:
        return LABEL_NEGATIVE.format(value=value) if value != -100 else NEGATIVE_LABELS
    too_big = LABEL_TOO_BIG.format(value=value, more=value + 1)
    return _join((too_big, LABEL_MASK_PIXELS.format(value=value))) if 100 <= value < 255 else too_big


# ==================================================================================================================
# Patches (fix/): the words of each alternative a proposed patch offers, the evidence that ranks it, and the code
# it writes. The class-count words are the fix sentences' own (set_classes / GENERIC_CLASS_WORDS / HEAD_WORDS),
# so the patch and the "Likely fix" say the same. Kept in its own section so that wording added above merges
# cleanly.
# ==================================================================================================================

#: Each alternative's title; {set_classes}: the framework's words for giving the model {n} classes.
PATCH_TITLES: dict[str, str] = {
    "widen_head": "{set_classes}",
    "ignore_index": "pass ignore_index={value} to the loss (the labels' {value} is not a class)",
    "drop_rows": "drop the {count} bad row(s) of `{dataset}` ({rows})",
    "label_lines": "correct or delete the {count} label line(s) whose class id is outside 0..{last} ({rows})",
    "shift_labels": "the labels are 1-based: subtract 1 from them (labels 0..{last})",
    "shift_code": "take out the `{op} 1` that {where} applies to the labels (labels 0..{last})",
    "bce_logits": BCE_LOGITS,
    "resize_embeddings": TOKENIZER_RESIZE,
    "yaml_nc": "set nc: {n} in the data YAML {path} and list {n} names",
}
#: What the data says for (or against) an alternative.
PATCH_EVIDENCE: dict[str, str] = {
    "declared": "the data declares {declared} classes ({by}) and the labels stay below {declared}",
    "void": "{value} appears in {count} mask(s) next to labels 0..{last}: VOC's 'void' border, not a class",
    "one_based": "the labels run {low}..{top} and no sample has label 0",
    "shifted_raw": "`{dataset}` holds labels {low}..{high}, all in range; {where} moves each batch's labels by {delta}",
    "shifted_item": "the labels {where} returns run {low}..{high}: its {delta} moves them out of 0..{last}",
    "shift_code": "{where} moves the labels by {delta} (`{code}`)",
    "new_class": "label {top} is in {count} of {n} samples, as common as the other classes",
    "names": "`{names}` lists {n} class names and sizes the head: label(s) {bad} have no name",
    "yaml_names": "the data YAML {path} names {n} classes (nc: {n}): class id(s) {bad} have no name",
    "handful": "{count} of {n} samples hold labels outside 0..{last} (rows {rows})",
    "negative": "negative labels ({bad}) cannot be classes",
    "logits": "the loss got values from {lo:.4g} to {hi:.4g}: raw logits, not probabilities",
    "grew": "the tokenizer has {tokenizer_size} tokens, the embedding {num} rows",
}
#: Why a ranking was (or was not) made, and why nothing was proposed.
PATCH_WHY: dict[str, str] = {
    "decided": "the data decides: {evidence}",
    "decided_no_patch": "the data decides: {evidence}; but no code change makes that fix ({no_patch}), so nothing "
    "is applied by default",
    "labels_by_hand": "{names}: not written as a literal dict, so extend by hand to {n} entries (ids 0..{last})",
    "undecided": "the data does not decide between these: choose one (nothing is applied by default)",
    "safe": "one meaning only: {evidence}",
    "no_culprit": "no patch: the diagnosis names no object a patch could change ({title})",
    "no_cell": "no patch: no cell of this kernel's history built `{name}` (defined in an imported module, or in a "
    "cell since deleted?)",
    "edited": "no patch: cell [{number}] was edited since it ran; run it again, then ask again",
    "no_edit": "no patch: {what}",
}
#: The code a patch writes.
PATCH_CODE: dict[str, str] = {
    "resize": "{model}.resize_token_embeddings(len({tokenizer}))",
    "drop_rows_torch": "{dataset} = torch.utils.data.Subset({dataset}, [i for i in range(len({dataset})) "
    "if i not in {rows}])  # cudaassert fix: drop the bad rows",
    "drop_rows_hf": "{dataset} = {dataset}.select([i for i in range(len({dataset})) if i not in {rows}])"
    "  # cudaassert fix: drop the bad rows",
    "ignore_index": "ignore_index={value}",
    "mismatched": "ignore_mismatched_sizes=True",
    "bce_module": "BCEWithLogitsLoss",
    "bce_function": "binary_cross_entropy_with_logits",
    "yaml_nc": "nc: {n}",
    "hf_label": "LABEL_{i}",  # the name Hugging Face gives a class id2label does not name
    "yaml_name": "class_{i}",  # a placeholder name the data YAML's names: gets for each new class
}
