"""Exceptions raised by the validators, and the message templates they use.

A :class:`ValidationError` is raised *before* a kernel launches, so the GPU context stays
alive. Each concrete class also subclasses the exception type CPU PyTorch raises for the same
bad input (``IndexError`` for ``cross_entropy`` targets, ``RuntimeError`` for ``gather`` ...),
so ``except IndexError:`` written against CPU behaviour keeps working.

The attributes (``op``, ``argument``, ``valid``, ``n_bad``, ``examples``, ``cause_id``, ``hint``, ``facts``)
reach the diagnosis as one frozen value, ``validator_stop()`` (``diagnose.validator_stop.ValidatorStop``).
``str(exc)`` is the full message.
The "Likely fix" wording itself lives in :mod:`cudaassert_ipy.diagnose.hints`, shared with the
post-mortem rules and preflight; ``facts`` are the plain values it was worded from (or None).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from cudaassert_ipy.base.wording import plural

if TYPE_CHECKING:  # the diagnosis side of the contract loads at the first failure, not with the validators
    from cudaassert_ipy.diagnose.hints import Facts, TokenFacts
    from cudaassert_ipy.diagnose.validator_stop import ValidatorStop

__all__ = [
    "FOOTER",
    "GENERIC_LINE",
    "HINT_LINE",
    "NONFINITE_TEMPLATE",
    "OUTPUT_SIZE_HEADLINE",
    "PREFLIGHT_FOOTER",
    "PREFLIGHT_HEADLINE",
    "RANGE_HEADLINE",
    "SAMPLE_LINE",
    "ZERO_ROWS_HEADLINE",
    "NonFiniteError",
    "SampleNames",
    "ValidationError",
    "ValidationIndexError",
    "ValidationIndexRuntimeError",
    "ValidationRuntimeError",
    "format_examples",
    "generic_fix",
    "range_text",
]

Position = tuple[int, ...]
Scalar = bool | int | float  # one value of a tensor, as tolist() gives it
Example = tuple[Position, Scalar]
#: (the dataset sample of each example, or None; where they sat: "batch 8 of epoch 0 from `train_loader`")
SampleNames = tuple[tuple[str | None, ...], str]

# ---------------------------------------------------------------- message templates
#: First line of most messages.
RANGE_HEADLINE = "{op}: {argument} has {count}; valid: {valid}. First bad: {examples}."
#: multinomial / Categorical rows whose weights sum to zero.
ZERO_ROWS_HEADLINE = "{op}: {argument} has {count} whose weights sum to 0; valid: {valid}. First: {examples}."
#: repeat_interleave with an ``output_size`` that does not match the repeats.
OUTPUT_SIZE_HEADLINE = "{op}: output_size={output_size} but the repeats add up to {total}; valid: {valid}."
#: Under the headline, when the bad values sit in the DataLoader's latest recorded batch.
SAMPLE_LINE = "From the DataLoader: {samples} ({where})."
#: One example of SAMPLE_LINE: ``target[15]=195 → `train_ds[39817]```.
SAMPLE_OF = "{example} → {sample}"
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
    "{op} produced {what} in its output (shape {shape}, dtype {dtype}){where}.\n{inputs}\nLikely fix: {hint}"
)

MAX_EXAMPLES = 5

_E = TypeVar("_E", bound="ValidationError")


def range_text(lo: int, hi_exclusive: int) -> str:
    """``0..9``; ``empty (size 0)`` when nothing is valid."""
    return f"{lo}..{hi_exclusive - 1}" if hi_exclusive > lo else f"empty (size {hi_exclusive - lo})"


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
    examples: list[Example]
    cause_id: str
    hint: str
    facts: Facts | None

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
        headline: str | None = None,
        example_label: str | None = None,
        footer: str = FOOTER,
        facts: Facts | None = None,
        sample_line: str | None = None,
    ) -> None:
        self.op = op
        self.argument = argument
        self.valid = valid
        self.n_bad = int(n_bad)
        self.examples = [(tuple(int(p) for p in pos), value) for pos, value in examples]
        self.cause_id = cause_id
        self.hint = hint
        self.facts = facts
        if headline is None:
            headline = RANGE_HEADLINE.format(
                op=op,
                argument=argument,
                count=plural(self.n_bad, "bad value"),
                valid=valid,
                examples=format_examples(example_label or argument, self.examples, self.n_bad),
            )
        self.headline = headline
        self.footer = footer
        self.example_label = example_label or argument
        self.sample_line = sample_line
        self.message = self._compose()
        super().__init__(self.message)

    # -- the ways a validation error is built (each case words its message in one place) --------------------------
    @classmethod
    def out_of_range(
        cls: type[_E],
        op: str,
        argument: str,
        valid: str,
        n_bad: int,
        examples: Sequence[Example],
        *,
        cause_id: str,
        hint: str,
        facts: Facts | None = None,
        found_on_cpu: bool = False,
        example_label: str | None = None,
    ) -> _E:
        """Values of ``argument`` outside ``valid`` (RANGE_HEADLINE). ``found_on_cpu``: by check_labels and friends,
        before anything ran on the GPU (PREFLIGHT_FOOTER), not by a validator in front of a kernel.
        ``example_label`` names the examples when ``argument`` says more (``index`` for "index for dimension 2")."""
        return cls(
            op=op,
            argument=argument,
            valid=valid,
            n_bad=n_bad,
            examples=examples,
            cause_id=cause_id,
            hint=hint,
            facts=facts,
            footer=PREFLIGHT_FOOTER if found_on_cpu else FOOTER,
            example_label=example_label,
        )

    @classmethod
    def token_ids(
        cls: type[_E],
        op: str,
        argument: str,
        n_bad: int,
        examples: Sequence[Example],
        facts: TokenFacts,
        *,
        cause_id: str = "index_select_out_of_range",
        size_name: str = "num_embeddings",
        found_on_cpu: bool = False,
    ) -> _E:
        """Token ids outside ``0..facts.num_embeddings-1``: ``embedding``, ``embedding_bag``, ``check_token_ids``.

        ``size_name`` names the size as the caller knows it (``num_embeddings``, ``vocab_size``); the fix is
        ``hints.token_ids``, the same sentence the post-mortem rule and preflight give.
        """
        from cudaassert_ipy.diagnose import hints  # not at import: %load_ext loads this module (sample naming)

        size = facts.num_embeddings
        return cls.out_of_range(
            op,
            argument,
            f"{range_text(0, size)} ({size_name}={size})",
            n_bad,
            examples,
            cause_id=cause_id,
            hint=hints.token_ids(facts),
            facts=facts,
            found_on_cpu=found_on_cpu,
        )

    @classmethod
    def zero_rows(
        cls: type[_E],
        op: str,
        argument: str,
        valid: str,
        n_bad: int,
        examples: Sequence[Example],
        *,
        cause_id: str,
        hint: str,
    ) -> _E:
        """Rows of sampling weights that sum to zero (``multinomial``); ``examples`` hold each row's sum."""
        headline = ZERO_ROWS_HEADLINE.format(
            op=op,
            argument=argument,
            count=plural(n_bad, "row"),
            valid=valid,
            examples=format_examples(argument, examples, n_bad, row_sums=True),
        )
        return cls(
            op=op,
            argument=argument,
            valid=valid,
            n_bad=n_bad,
            examples=examples,
            cause_id=cause_id,
            hint=hint,
            headline=headline,
        )

    @classmethod
    def output_size(cls: type[_E], op: str, output_size: Any, required: int, *, cause_id: str, hint: str) -> _E:
        """An ``output_size`` that is not what the inputs add up to (``repeat_interleave``)."""
        valid = f"output_size == {required} (the repeats add up to that)"
        headline = OUTPUT_SIZE_HEADLINE.format(op=op, output_size=output_size, total=required, valid=valid)
        return cls(
            op=op,
            argument="output_size",
            valid=valid,
            n_bad=1,
            examples=[((), output_size)],
            cause_id=cause_id,
            hint=hint,
            headline=headline,
        )

    @classmethod
    def bad_samples(
        cls: type[_E],
        op: str,
        argument: str,
        valid: str,
        n_bad: int,
        examples: Sequence[Example],
        *,
        cause_id: str,
        hint: str,
    ) -> _E:
        """Dataset samples holding bad values, found by a scan on the CPU (``PreflightReport.raise_if_bad``);
        ``examples`` are ``((sample index,), first bad value)``."""
        headline = PREFLIGHT_HEADLINE.format(
            op=op,
            count=plural(n_bad, "sample"),
            argument=argument,
            valid=valid,
            examples=format_examples("sample", examples, n_bad),
        )
        return cls(
            op=op,
            argument=argument,
            valid=valid,
            n_bad=n_bad,
            examples=examples,
            cause_id=cause_id,
            hint=hint,
            headline=headline,
            footer=PREFLIGHT_FOOTER,
        )

    def _compose(self) -> str:
        lines = [self.headline, HINT_LINE.format(hint=self.hint)]
        if self.sample_line:
            lines.insert(1, self.sample_line)
        fix = generic_fix(self.cause_id)
        if fix:
            lines.append(GENERIC_LINE.format(fix=fix))
        lines.append(self.footer)
        return "\n".join(lines)

    def name_samples(self, names: SampleNames) -> None:
        """Add the line naming the dataset samples the bad values came from (see :mod:`.sample_naming`)."""
        samples, where = names
        parts = [
            SAMPLE_OF.format(example=format_examples(self.example_label, [example], 1), sample=sample)
            for example, sample in zip(self.examples, samples)
            if sample is not None
        ]
        if not parts:
            return
        self.sample_line = SAMPLE_LINE.format(samples=", ".join(parts), where=where)
        self.message = self._compose()
        self.args = (self.message,)

    def __str__(self) -> str:
        return self.message

    def validator_stop(self) -> ValidatorStop:
        """What the diagnosis reads from this stop (its typed contract, ``diagnose.validator_stop``)."""
        from cudaassert_ipy.diagnose.validator_stop import ValidatorStop

        return ValidatorStop(
            op=self.op,
            argument=self.argument,
            valid=self.valid,
            n_bad=self.n_bad,
            examples=tuple(self.examples),
            cause_id=self.cause_id,
            hint=self.hint,
            facts=self.facts,
        )

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
            "facts": self.facts,
            "sample_line": self.sample_line,
        }
        return (_rebuild, (type(self), state))


def _rebuild(cls: type[Exception], state: dict[str, Any]) -> Exception:
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


class NonFiniteError(RuntimeError):
    """``%%cuda_debug --nan``: the first torch call whose output holds NaN or inf."""

    def __init__(
        self,
        *,
        op: str,
        n_nan: int,
        n_inf: int,
        shape: tuple[int, ...],
        dtype: str,
        filename: str | None,
        lineno: int | None,
        line: str,
        cell_label: str,
        inputs_finite: bool | None,
        hint: str,
    ) -> None:
        self._fields = {
            "op": op,
            "n_nan": n_nan,
            "n_inf": n_inf,
            "shape": shape,
            "dtype": dtype,
            "filename": filename,
            "lineno": lineno,
            "line": line,
            "cell_label": cell_label,
            "inputs_finite": inputs_finite,
            "hint": hint,
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
            part for part in (plural(n_nan, "NaN") if n_nan else "", plural(n_inf, "inf") if n_inf else "") if part
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

    @classmethod
    def from_output(
        cls,
        op: str,
        n_nan: int,
        n_inf: int,
        shape: tuple[int, ...],
        dtype: str,
        cell_line: tuple[str | None, int | None, str, str],
        inputs_finite: bool | None,
        hint: str,
    ) -> NonFiniteError:
        """The first non-finite output of ``op``, at ``cell_line`` (filename, line number, text, label)."""
        filename, lineno, line, label = cell_line
        return cls(
            op=op,
            n_nan=n_nan,
            n_inf=n_inf,
            shape=shape,
            dtype=dtype,
            filename=filename,
            lineno=lineno,
            line=line,
            cell_label=label,
            inputs_finite=inputs_finite,
            hint=hint,
        )

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self._fields))
