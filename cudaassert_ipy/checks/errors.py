"""Exceptions raised by the validators, and the message templates they use.

A :class:`ValidationError` is raised *before* a kernel launches, so the GPU context stays
alive. Each concrete class also subclasses the exception type CPU PyTorch raises for the same
bad input (``IndexError`` for ``cross_entropy`` targets, ``RuntimeError`` for ``gather`` ...),
so ``except IndexError:`` written against CPU behaviour keeps working.

The attributes are a contract read by the extension's diagnosis code: ``op``, ``argument``,
``valid``, ``n_bad``, ``examples``, ``cause_id``, ``hint``. ``str(exc)`` is the full message.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from cudaassert_ipy.wording import plural

__all__ = [
    "FOOTER",
    "GENERIC_LINE",
    "HINT_LINE",
    "NONFINITE_TEMPLATE",
    "OUTPUT_SIZE_HEADLINE",
    "PREFLIGHT_FOOTER",
    "PREFLIGHT_HEADLINE",
    "RANGE_HEADLINE",
    "ZERO_ROWS_HEADLINE",
    "NonFiniteError",
    "ValidationError",
    "ValidationIndexError",
    "ValidationIndexRuntimeError",
    "ValidationRuntimeError",
    "ValidationValueError",
    "format_examples",
    "generic_fix",
]

Position = Tuple[int, ...]
Example = Tuple[Position, Any]

# ---------------------------------------------------------------- message templates
#: First line of most messages.
RANGE_HEADLINE = "{op}: {argument} has {count}; valid: {valid}. First bad: {examples}."
#: multinomial / Categorical rows whose weights sum to zero.
ZERO_ROWS_HEADLINE = "{op}: {argument} has {count} whose weights sum to 0; valid: {valid}. First: {examples}."
#: repeat_interleave with an ``output_size`` that does not match the repeats.
OUTPUT_SIZE_HEADLINE = "{op}: output_size={output_size} but the repeats add up to {total}; valid: {valid}."
#: The specific fix for this case.
HINT_LINE = "Likely fix: {hint}"
#: The generic fix from the causes catalogue.
GENERIC_LINE = "In general: {fix}"
#: Last line: what happened to the GPU.
FOOTER = (
    "(Caught by cudaassert validators: on a GPU this input triggers a device-side assert; raised as this "
    "Python error instead, so no GPU context is harmed.)"
)
#: Errors from check_labels / check_token_ids / preflight: nothing ran on the GPU.
PREFLIGHT_FOOTER = "(Found by cudaassert on the CPU, before anything ran on the GPU.)"
#: ``PreflightReport.raise_if_bad``.
PREFLIGHT_HEADLINE = "{op}: {count} with bad {argument}; valid: {valid}. First: {examples}."
#: ``%%cuda_debug --nan``.
NONFINITE_TEMPLATE = (
    "{op} produced {what} in its output (shape {shape}, dtype {dtype}){where}.\n"
    "{inputs}\n"
    "Likely fix: {hint}"
)

MAX_EXAMPLES = 5

# ---------------------------------------------------------------- the specific fixes ("Likely fix: ...")
# class labels (cross_entropy, nll_loss, check_labels, preflight)
CLASSES_OF_INPUT = "the input has {n} classes (input.shape[{dim}] == {n})"
CLASSES_OF_PREFLIGHT = "num_classes is {n}"
HINT_VOC_VOID = "VOC-style masks use 255 for 'void' pixels: pass ignore_index=255"
HINT_ONE_MORE_CLASS = (
    "{classes} but {reaches} {top}: if you have {more} classes, make the last layer output {more} logits "
    "(out_features={more}); if labels start at 1, subtract 1"
)
HINT_REMAP_LABELS = (
    "{classes} but {reaches} {top}: remap the labels to 0..{last} (for example "
    "torch.unique(labels, return_inverse=True)) or make the last layer output {more} logits (out_features={more})"
)
HINT_NEAREST_RESIZE = "resize label masks with nearest-neighbour interpolation only (bilinear invents labels)"
HINT_MINUS_100 = (
    "-100 is the usual 'ignore this position' label but {now}: pass ignore_index=-100 "
    "(cross_entropy's default) or pad with the value you ignore"
)
HINT_MINUS_ONE = "if -1 marks unlabelled items, pass ignore_index=-1"
HINT_NEGATIVE_LABELS = "class labels cannot be negative: find where they become negative"
HINT_NOT_INTEGER_LABELS = "labels must be whole class ids, not fractions, NaN or inf"
# binary_cross_entropy
HINT_BCE_LOGITS = (
    "the input must be probabilities in [0, 1], not logits: pass the raw logits to nn.BCEWithLogitsLoss / "
    "F.binary_cross_entropy_with_logits (numerically stable), or apply torch.sigmoid first"
)
HINT_BCE_NAN_INPUT = (
    "the input holds NaN: the model's outputs diverged or the data has NaN "
    "(lower the learning rate, clip gradients, check the inputs with torch.isfinite)"
)
HINT_BCE_MASK_PIXELS = "targets look like 0..255 mask pixels: divide by 255 or binarise with (mask > 0).float()"
HINT_BCE_MULTICLASS = "for integer class labels with more than two classes use CrossEntropyLoss instead"
HINT_BCE_NEGATIVE_TARGETS = "targets cannot be negative: mask padding (-1/-100) out with a weight instead"
HINT_BCE_SCALE_TARGETS = "scale the targets into [0, 1] (label smoothing must stay inside [0, 1] too)"
HINT_BCE_NAN_TARGET = "the target holds NaN: check how the labels are built"
# ctc_loss
HINT_CTC_BLANK = (
    "the targets contain the blank label {blank}, which CTC reserves: shift 0-based labels by one "
    "(labels 1..C-1 with blank=0) or choose another blank index"
)
HINT_CTC_TOO_BIG = (
    "log_probs has C={n_classes} classes but the targets reach {top}: the output layer needs one unit per "
    "label plus one for blank"
)
HINT_CTC_NEGATIVE = "negative padding must lie beyond each target length (check target_lengths)"
HINT_CTC_CPU_SILENT = "CPU PyTorch does not check this and silently returns a wrong loss"
# embedding, embedding_bag, check_token_ids
HINT_EMBEDDING_TOO_BIG = (
    "the embedding has num_embeddings={num} (ids 0..{last}) but the ids reach {top}: if the ids come from a "
    "tokenizer with added tokens, resize the embedding (model.resize_token_embeddings(len(tokenizer))) or build "
    "it with num_embeddings={more}; if they are positions, truncate sequences to the model's maximum length"
)
HINT_EMBEDDING_MINUS_100 = (
    "-100 is the 'ignore' value for labels, not an input id: pad input_ids with the tokenizer's pad_token_id instead"
)
HINT_EMBEDDING_NEGATIVE = (
    "embedding ids cannot be negative (a negative padding_idx is normalised on the module, the ids themselves "
    "are not): pad with a real id such as padding_idx"
)
HINT_OFFSETS = (
    "offsets are the start position of each bag in the flat input: build them with torch.cumsum of the bag "
    "lengths, starting at 0 (offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)[:-1]]))"
)
# indexing, gather/scatter, take/put
HINT_INDEX_TOO_BIG = (
    "{where} but the index reaches {top}: indices are 0-based, so the largest valid one is {last} "
    "(off by one? a length computed before filtering?)"
)
HINT_INDEX_NO_NEGATIVES = (
    "this call does not accept negative indices (x[idx] does): wrap them with idx % size if you meant "
    "counting from the end"
)
HINT_INDEX_NEGATIVE_FLOOR = "negative indices count from the end and stop at {lowest}"
# multinomial / Categorical, bernoulli
HINT_PROBS_NONFINITE = (
    "the probabilities hold NaN/inf, usually from NaN/inf logits (fp16 overflow, dividing by temperature=0, "
    "weights that diverged): check torch.isfinite(logits).all() before softmax, sample in float32, and use "
    "argmax for greedy decoding instead of temperature 0"
)
HINT_PROBS_NEGATIVE = "weights cannot be negative: pass probabilities (softmax(logits)), not raw logits"
HINT_PROBS_ZERO_ROWS = (
    "a row with all-zero weights has nothing to sample (every candidate masked out by top-k/top-p or -inf "
    "masking, or probabilities that underflowed): keep at least one candidate per row, add a small epsilon, "
    "or fall back to argmax for such rows"
)
HINT_BERNOULLI_RANGE = (
    "p must be probabilities in [0, 1]: apply torch.sigmoid to logits, or clamp(0, 1) after arithmetic "
    "that can overshoot"
)
HINT_BERNOULLI_NAN = "p holds NaN: find where it comes from (torch.isfinite)"
# one_hot, repeat_interleave
HINT_ONE_HOT_NEGATIVE = (
    "one_hot cannot encode negative labels (often -1/-100 padding): encode only the valid positions, "
    "e.g. F.one_hot(t.clamp(min=0), C) * (t >= 0).unsqueeze(-1)"
)
HINT_ONE_HOT_TOO_BIG = (
    "num_classes={num_classes} but the labels reach {top}: pass num_classes={more} if there are that many "
    "classes, or remap the labels to 0..{last} (1-based labels: subtract 1)"
)
HINT_REPEATS_NEGATIVE = (
    "repeat counts cannot be negative: clamp(min=0) them or find where they go below 0 "
    "(lengths computed as end - start with swapped ends?)"
)
HINT_OUTPUT_SIZE = "pass output_size={required}, or leave it out (PyTorch then computes it, with one sync)"


def format_examples(argument: str, examples: Sequence[Example], n_bad: int, *, row_sums: bool = False) -> str:
    """``target[2]=5, target[3]=-1`` (positions as the user would index them)."""
    parts = []
    for pos, value in examples:
        index = "[" + ", ".join(str(p) for p in pos) + "]" if pos else ""
        suffix = ".sum()" if row_sums else ""
        shown = f"{value:.6g}" if isinstance(value, float) else repr(value)
        parts.append(f"{argument}{index}{suffix}={shown}")
    text = ", ".join(parts)
    if n_bad > len(examples):
        text += f" (and {n_bad - len(examples)} more)"
    return text


def generic_fix(cause_id: str) -> str:
    """The catalogue's plain-language fix for ``cause_id`` ("" when the catalogue lacks it)."""
    try:
        from cudaassert_ipy.diagnose.causes import get_cause

        cause = get_cause(cause_id)
    except (ImportError, LookupError):
        return ""
    # an unknown id comes back as the generic cause, whose fix says nothing about this call
    return str(cause.fix) if getattr(cause, "id", None) == cause_id else ""


class ValidationError(Exception):
    """A bad input, raised as a Python error instead of a device-side assert. See the module docstring."""

    op: str
    argument: str
    valid: str
    n_bad: int
    examples: List[Example]
    cause_id: str
    hint: str

    def __init__(
        self,
        *,
        op: str,
        argument: str,
        valid: str,
        n_bad: int,
        examples: Sequence[Example],
        cause_id: str,
        hint: str,
        headline: Optional[str] = None,
        example_label: Optional[str] = None,
        footer: str = FOOTER,
    ) -> None:
        self.op = op
        self.argument = argument
        self.valid = valid
        self.n_bad = int(n_bad)
        self.examples = [(tuple(int(p) for p in pos), value) for pos, value in examples]
        self.cause_id = cause_id
        self.hint = hint
        if headline is None:
            headline = RANGE_HEADLINE.format(
                op=op,
                argument=argument,
                count=plural(self.n_bad, "bad value"),
                valid=valid,
                examples=format_examples(example_label or argument, self.examples, self.n_bad),
            )
        self.headline = headline
        lines = [headline, HINT_LINE.format(hint=hint)]
        fix = generic_fix(cause_id)
        if fix:
            lines.append(GENERIC_LINE.format(fix=fix))
        lines.append(footer)
        self.footer = footer
        self.message = "\n".join(lines)
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> Any:  # keyword-only __init__: keep pickling (multiprocessing) working
        state = {
            "op": self.op,
            "argument": self.argument,
            "valid": self.valid,
            "n_bad": self.n_bad,
            "examples": self.examples,
            "cause_id": self.cause_id,
            "hint": self.hint,
            "headline": self.headline,
            "footer": self.footer,
        }
        return (_rebuild, (type(self), state))


def _rebuild(cls: type, state: dict) -> Exception:
    return cls(**state)


class ValidationIndexError(ValidationError, IndexError):
    """Raised where CPU PyTorch raises ``IndexError`` (class targets, embedding, indexing, index_*)."""


class ValidationRuntimeError(ValidationError, RuntimeError):
    """Raised where CPU PyTorch raises ``RuntimeError`` (gather/scatter, one_hot, BCE, sampling ...)."""


class ValidationIndexRuntimeError(ValidationIndexError, ValidationRuntimeError):
    """Both: where CPU PyTorch raises either, depending on the code path.

    ``index_select`` raises ``IndexError`` along dim 0 and ``RuntimeError`` ("INDICES element is
    out of DATA bounds") along other dims; ``index_add_`` raises either depending on the shape;
    ``embedding_bag`` raises ``RuntimeError``, but ``IndexError`` for a negative offset.
    """


class ValidationValueError(ValidationError, ValueError):
    """Reserved for checks whose CPU twin raises ``ValueError`` (``Categorical`` argument validation).

    ``Categorical(probs)`` with ``validate_args`` on already raises ``ValueError`` itself, on the GPU
    too (its check is a host-side sync, not a device assert), so no validator needs this today;
    with ``validate_args=False`` the bad probabilities reach ``torch.multinomial`` and the
    validator raises :class:`ValidationRuntimeError` as CPU PyTorch does.
    """


class NonFiniteError(RuntimeError):
    """``%%cuda_debug --nan``: the first torch call whose output holds NaN or inf."""

    def __init__(
        self,
        *,
        op: str,
        n_nan: int,
        n_inf: int,
        shape: Tuple[int, ...],
        dtype: str,
        filename: Optional[str],
        lineno: Optional[int],
        line: str,
        cell_label: str,
        inputs_finite: Optional[bool],
        hint: str,
    ) -> None:
        self._fields = {
            "op": op, "n_nan": n_nan, "n_inf": n_inf, "shape": shape, "dtype": dtype, "filename": filename,
            "lineno": lineno, "line": line, "cell_label": cell_label, "inputs_finite": inputs_finite, "hint": hint,
        }
        self.op = op
        self.n_nan = n_nan
        self.n_inf = n_inf
        self.shape = shape
        self.dtype = dtype
        self.filename = filename
        self.lineno = lineno
        self.line = line
        self.inputs_finite = inputs_finite
        self.hint = hint
        what = " and ".join(
            part for part in (plural(n_nan, "NaN") if n_nan else "", plural(n_inf, "inf") if n_inf else "")
            if part
        )
        where = ""
        if lineno is not None:
            where = f" at {cell_label}, line {lineno}"
            if line:
                where += f": {line.strip()}"
        if inputs_finite is True:
            inputs = "Its tensor inputs were all finite, so this call created the first NaN/inf."
        elif inputs_finite is False:
            inputs = (
                "One of its tensor inputs already held NaN/inf before this call: it got there without a "
                "torch call this guard saw (loaded data, a value assigned in place, an earlier cell?)."
            )
        else:
            inputs = "It had no floating-point tensor inputs."
        self.message = NONFINITE_TEMPLATE.format(
            op=op, what=what, shape=tuple(shape), dtype=dtype, where=where, inputs=inputs, hint=hint
        )
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self._fields))
