"""CPU twins: the readable errors PyTorch raises on the CPU for the same bad inputs.

The texts are the ones torch raises on the CPU (measured on 2.13; older wordings kept where the
reference records them). A twin maps to the same cause as the device assertion, so a user who
reproduces on the CPU gets the same diagnosis.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CpuTwin", "bare_twin", "match_cpu_twin"]


@dataclass(frozen=True)
class CpuTwin:
    """A recognised CPU error: which cause, and the offending value when the text names one."""

    cause_id: str
    value: int | None = None
    dim: int | None = None
    size: int | None = None


# (pattern, exception type names it is raised as, cause id); first match wins.
_TWINS: tuple[tuple[re.Pattern[str], tuple[str, ...], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE), types, cause)  # a paste may capitalise the first word
    for p, types, cause in (
        (
            r"^Target (?P<value>-?\d+) is out(?:\s+of\s+bounds?|\s*$)",
            ("IndexError", "RuntimeError"),
            "nll_loss_target_out_of_range",
        ),
        (r"^index out of range in self", ("IndexError", "RuntimeError"), "index_select_out_of_range"),
        # 1.0-1.4's CPU embedding / index_select: names the table's last row (TH printed size - 1 as "rows")
        (
            r"^index out of range: Tried to access index (?P<value>-?\d+) out of table with (?P<rows>\d+) rows",
            ("IndexError", "RuntimeError"),
            "index_select_out_of_range",
        ),
        # 1.0-1.2's CPU embedding / index_select (TH): names neither the id nor the table, only TH's source file
        (
            r"^(?:invalid argument \d+: )?index out of range at \S*[/\\]TH[/\\]",
            ("IndexError", "RuntimeError"),
            "index_select_out_of_range",
        ),
        # 1.x's CPU scatter_add_ (TH): no value printed
        (r"^Invalid index in scatter(?:Add)?", ("RuntimeError",), "scatter_gather_index_out_of_range_v1"),
        (
            r"^Index \d+ of input takes value (?P<value>-?\d+) which is not in the valid range \[0, (?P<size>\d+)\)",
            ("RuntimeError",),
            "embedding_bag_index_out_of_range",
        ),
        (
            r"^offsets\[-1\] can not be greater than input's length",
            ("RuntimeError",),
            "embedding_bag_offsets_not_increasing",
        ),
        (
            r"^index_copy_\(\): index (?P<value>-?\d+) is out of bounds for dimension (?P<dim>\d+) with size "
            r"(?P<size>\d+)",
            ("IndexError", "RuntimeError"),
            "index_copy_out_of_range",
        ),
        (
            r"^index (?P<value>-?\d+) is out of bounds for dimension (?P<dim>\d+) with size (?P<size>\d+)",
            ("IndexError",),
            "advanced_indexing_out_of_range_v1",
        ),
        (
            r"^index (?P<value>-?\d+) is out of bounds for dimension (?P<dim>\d+) with size (?P<size>\d+)",
            ("RuntimeError",),
            "scatter_gather_index_out_of_range_v1",
        ),
        (
            r"^out of range: tried to access index (?P<value>-?\d+) on a tensor of (?P<size>\d+) elements",
            ("IndexError", "RuntimeError"),
            "take_put_out_of_range",
        ),
        (
            r"^Class values must be (non-negative|smaller than num_classes)\.",
            ("RuntimeError",),
            "scatter_gather_index_out_of_range_v1",
        ),
        (r"^all elements of input should be between 0 and 1", ("RuntimeError",), "bce_input_out_of_range"),
        (r"^all elements of target should be between 0 and 1", ("RuntimeError",), "bce_target_out_of_range"),
        (
            r"^probability tensor contains either `?inf`?, `?nan`? or element < 0",
            ("RuntimeError",),
            "multinomial_invalid_probs_async",
        ),
        (
            r"^invalid multinomial distribution \(sum of probabilities <= 0\)",
            ("RuntimeError",),
            "multinomial_zero_sum_async",
        ),
        (r"^Expected parameter probs .* distribution Categorical", ("ValueError",), "multinomial_invalid_probs_async"),
        (r"^Expected p_in >= 0 && p_in <= 1 to be true", ("RuntimeError",), "bernoulli_prob_out_of_range"),
        (r"^repeats can not be negative", ("RuntimeError",), "repeat_interleave_negative_repeats"),
        (r"^allocated size does not match required size", ("RuntimeError",), "repeat_interleave_output_size_mismatch"),
        (r"^target out of range", ("RuntimeError",), "multi_margin_target_out_of_range"),
        (
            r"^Found an invalid max index: (?P<value>-?\d+) \(output volumes are of size \d+x\d+x\d+",
            ("RuntimeError",),
            "max_unpool3d_index_out_of_range",
        ),
        (r"^Found an invalid max index: (?P<value>-?\d+)", ("RuntimeError",), "max_unpool2d_index_out_of_range"),
        (r"^Expected i < index_size to be true, but got false", ("RuntimeError",), "embedding_bag_index_out_of_range"),
        (
            r"^embedding_bag: Expected idx >= 0 && idx < num_embeddings but found idx to be (?P<value>-?\d+)",
            ("RuntimeError",),
            "embedding_bag_index_out_of_range",
        ),
        # frameworks' own checks of the same data, on the CPU before any kernel: PyG's validate(), YOLOv5's labels
        (
            r"^'edge_index' (?:point|contain)s? .*valid indices in the interval \[0, (?P<size>\d+)\)",
            ("ValueError", "IndexError"),
            "graph_node_index_out_of_range",
        ),
        # PyG's message passing, before ~2.3 ("Encountered an index error. Please ensure that all indices in"
        # '...' "point to valid indices in the interval [0, N - 1] (got interval [min, max])") and after
        # ("Found indices in 'edge_index' that are larger than N - 1 (got max). Please ensure ...")
        (
            r"^(?:Encountered an index error\. Please ensure that all indices in |Found indices in 'edge_index' that "
            r"are larger than \d+ \(got (?P<value>\d+)\)\. Please ensure that all indices in )?'?edge_index' point to "
            r"valid indices in the interval \[0, \d+[\])]",
            ("ValueError", "IndexError"),
            "graph_node_index_out_of_range",
        ),
        (r"^Label class (?P<value>\d+) exceeds nc=(?P<size>\d+)", ("AssertionError",), "detection_class_out_of_range"),
        (r"^Expected Tensor with single nonzero value, but got zero", ("RuntimeError",), "assert_async_false"),
        (
            r"^Number of elements of source < number of ones in mask",
            ("RuntimeError",),
            "masked_scatter_source_too_small",
        ),
    )
)


def match_cpu_twin(type_names: tuple[str, ...], message: str) -> CpuTwin | None:
    """The cause of a CPU error, from its exception type names (MRO) and its message."""
    first = message.strip().strip("\"'`").strip()  # a paste quotes the message: "Index out of range in self"
    for pattern, types, cause_id in _TWINS:
        if not any(t in type_names for t in types):
            continue
        m = pattern.match(first)
        if m:
            groups = {k: int(v) for k, v in m.groupdict().items() if v is not None and k != "1"}
            if "rows" in groups:
                groups["size"] = groups.pop("rows") + 1
            return CpuTwin(cause_id, groups.get("value"), groups.get("dim"), groups.get("size"))
    return None


#: The types a message printed without its exception type is tried as, in order (a paste that kept only the
#: message: ``"Target -1 is out of bound"``, ``index 50264 is out of bounds for dimension 0 with size 50264``).
BARE_TYPES = ("IndexError", "RuntimeError", "ValueError")


def bare_twin(line: str) -> tuple[str, CpuTwin] | None:
    """A CPU twin's message on a line of its own, with no exception type: the type it is read as, and the twin."""
    for type_name in BARE_TYPES:
        twin = match_cpu_twin((type_name,), line)
        if twin is not None:
            return type_name, twin
    return None
