"""Rule for a graph's node index read from a pasted report: a pooled (graph-level) tensor fed to a conv.

PyG's message passing names the rows it was given (``... point to valid indices in the interval [0, N - 1]``, or
``[0, N)``), and a printed batch names its graphs (``DataBatch(x=[55, 1], ..., batch=[55], ptr=[3])``: 3 - 1 = 2
graphs). When the rows equal the graphs while the batch holds more nodes, the conv got one row per graph: the
output of a readout (``global_add_pool``) went into a conv layer together with the node-level ``edge_index``.
"""

from __future__ import annotations

import re

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding

__all__ = ["pooled_readout"]

_INTERVAL = re.compile(r"valid indices in the interval \[0, (?P<n>\d+)(?P<end>[\])])")
_BATCH = re.compile(r"\bDataBatch\((?P<body>[^()\n]{0,2000})\)")
_FIELD = re.compile(r"\b(?P<key>x|ptr|batch)=\[(?P<n>\d+)")
POOLED = (
    "The conv layer got {rows} row(s) of features, as many as the graphs in the batch ({graphs}), while the "
    "batch holds {nodes} nodes: the features passed to it are graph-level (one row per graph)."
)


def _rows(text: str) -> int | None:
    m = _INTERVAL.search(text)
    if m is None:
        return None
    n = int(m.group("n"))
    return n + 1 if m.group("end") == "]" else n  # [0, N - 1] before ~2.3, [0, N) after


def _batches(text: str) -> list[tuple[int, int]]:
    """(graphs, nodes) of each batch printed in the text."""
    out = []
    for m in _BATCH.finditer(text):
        fields = {f.group("key"): int(f.group("n")) for f in _FIELD.finditer(m.group("body"))}
        if "ptr" in fields and "x" in fields:
            out.append((fields["ptr"] - 1, fields["x"]))
    return out


def pooled_readout(case: Case) -> Finding | None:
    text = case.ev.pasted or case.ev.detection.message
    rows = _rows(case.ev.detection.message) or _rows(text)
    if rows is None:
        return None
    for graphs, nodes in _batches(text):
        if graphs == rows and nodes > rows:
            f = Finding(op="message passing")
            f.sentences.append(POOLED.format(rows=rows, graphs=graphs, nodes=nodes))
            f.facts.append(("conv input", f"{rows} row(s); the batch: {graphs} graph(s), {nodes} nodes"))
            f.fix = hints.GRAPH_POOLED
            return f
    return None
