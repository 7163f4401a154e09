"""From a diagnosis's culprit to a proposed fix: the alternatives, each with its patch and the data's evidence,
ranked when the data decides, and the safety class.

Safe: one meaning only (the loss takes logits; the embedding follows a tokenizer that grew). Decision:
the patch changes the label space or the data (widen the head, ignore a value, drop rows): the
alternatives are offered side by side, the one the data decides for first; when nothing decides,
there is no default. The words come from ``diagnose/hints.py`` (``PATCH_*``, ``set_classes``).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.culprit import BCE, CLASS_LABELS, TOKEN_IDS, Culprit
from cudaassert_ipy.diagnose.diagnosis import Diagnosis
from cudaassert_ipy.diagnose.hints import BceFacts, LabelFacts, TokenFacts
from cudaassert_ipy.fix.locate import History, Site, keyword_edit
from cudaassert_ipy.fix.model import DECISION, NONE, SAFE, Alternative, CellSource, LabelSurvey, Patch, ProposedFix
from cudaassert_ipy.fix.source import Edit, Parsed, apply_edits, unified_diff, walk

__all__ = ["propose", "resizable_roots"]

HANDFUL = 0.01  # at most this share of the samples (or HANDFUL_ROWS) counts as "a handful of bad rows"
HANDFUL_ROWS = 10
_COUNT_ARG = {"Linear": (1, "out_features"), "Dense": (0, "units"), "LazyLinear": (0, "out_features")}


def _none(why: str, culprit: str = "") -> ProposedFix:
    return ProposedFix(NONE, why=why, culprit=culprit)


def propose(
    diagnosis: Diagnosis,
    cells: Sequence[CellSource],
    survey: LabelSurvey | None = None,
    resizable: frozenset[str] = frozenset(),
) -> ProposedFix:
    """The proposed fix for ``diagnosis`` over ``cells`` (oldest first, the failing cell last).

    ``survey``: the whole training set's labels (a preflight scan), the data's evidence for a decision.
    ``resizable``: the names whose object has ``resize_token_embeddings``.
    """
    c = diagnosis.culprit
    if c is None:
        return _none(hints.PATCH_WHY["no_culprit"].format(title=diagnosis.title))
    history = History(cells)
    if c.kind == BCE and isinstance(c.facts, BceFacts):
        return _bce(c, c.facts, history)
    if c.kind == TOKEN_IDS and isinstance(c.facts, TokenFacts):
        return _tokens(c, c.facts, history, resizable)
    if c.kind == CLASS_LABELS and isinstance(c.facts, LabelFacts):
        return _labels(c, c.facts, history, survey)
    return _none(hints.PATCH_WHY["no_culprit"].format(title=diagnosis.title))


# -- patches ------------------------------------------------------------------------------------------------------
def _patch(edits: list[Edit], why: str) -> Patch:
    p = edits[0].parsed
    new = apply_edits(edits)
    cell = p.cell
    name = cell.path or (f"cell[{cell.number}]" if cell.number is not None else "cell")
    return Patch(cell.number, cell.cell_id, cell.source, new, unified_diff(cell.source, new, name), why, cell.path)


def _cell_name(p: Parsed) -> str:
    return p.cell.path or (f"cell [{p.cell.number}]" if p.cell.number is not None else "this cell")


def _why(p: Parsed, verb: str, name: str, code: str) -> str:
    code = " ".join(code.split())
    return f"{_cell_name(p)} {verb} `{name}` (`{code[:80]}`)"


def _rename_call(p: Parsed, call: Any, new: str) -> Edit:
    import libcst as cst

    node = call.func.attr if isinstance(call.func, cst.Attribute) else call.func
    start, end = p.span(node)
    return Edit(p, start, end, new)


def _insert_after(p: Parsed, node: Any, code: str) -> Edit:
    """A new line after the top-level statement holding ``node``, at its indentation."""
    stmt = next(s for s in p.module.body if any(n is node for n in walk(s)))
    _, end = p.span(stmt)
    source = p.cell.source
    newline = source.find("\n", end)
    if newline < 0:
        return Edit(p, len(source), len(source), "\n" + code)
    return Edit(p, newline + 1, newline + 1, code + "\n")


def _op_sites(history: History, op: str) -> list[tuple[Parsed, Any]]:
    """Calls of the functional ``op`` anywhere in the cells (inside functions too), newest cell first."""
    import libcst as cst

    out = []
    for p in history.parsed(op):
        out += [
            (p, n)
            for n in walk(p.module)
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == op
        ]
    return out


# -- BCE: logits into BCELoss ------------------------------------------------------------------------------------
def _bce(c: Culprit, f: BceFacts, history: History) -> ProposedFix:
    if f.argument != "input" or not (f.lo < 0 or f.hi > 1):
        return _none(
            hints.PATCH_WHY["no_edit"].format(what="the targets are out of range; the data needs fixing, not the code"),
            c.loss or "",
        )
    evidence = hints.PATCH_EVIDENCE["logits"].format(lo=f.lo, hi=f.hi)
    patch = None
    if c.loss is not None:
        site = history.module_site(c.loss)
        if site is not None and (site.parsed.code(site.call.func).endswith("BCELoss")):
            patch = _patch(
                [_rename_call(site.parsed, site.call, hints.PATCH_CODE["bce_module"])],
                _why(site.parsed, "built", c.loss, site.text),
            )
    if patch is None:
        sites = _op_sites(history, "binary_cross_entropy")
        if sites:
            p = sites[0][0]
            calls = [n for q, n in sites if q is p]
            patch = _patch(
                [_rename_call(p, n, hints.PATCH_CODE["bce_function"]) for n in calls],
                _why(p, "calls", "binary_cross_entropy", p.code(calls[0])),
            )
    if patch is None:
        return _none(hints.PATCH_WHY["no_cell"].format(name=c.loss or "binary_cross_entropy"), c.loss or "")
    alt = Alternative("bce_logits", hints.PATCH_TITLES["bce_logits"], evidence, patch)
    return ProposedFix(SAFE, (alt,), 0, hints.PATCH_WHY["safe"].format(evidence=evidence), c.loss or "")


# -- token ids: the tokenizer grew -------------------------------------------------------------------------------
def _tokens(c: Culprit, f: TokenFacts, history: History, resizable: frozenset[str]) -> ProposedFix:
    import libcst as cst

    if f.tokenizer_size is None or c.tokenizer is None or f.num_embeddings >= f.tokenizer_size or c.module is None:
        return _none(
            hints.PATCH_WHY["no_edit"].format(
                what="the ids do not come from a tokenizer that grew past "
                "the embedding; where they come from decides the fix"
            ),
            c.module or "",
        )
    model = c.module.split(".")[0]
    if model not in resizable:
        return _none(hints.PATCH_WHY["no_edit"].format(what=f"`{model}` has no resize_token_embeddings()"), model)
    grew: list[tuple[tuple[int, int], Parsed, Any]] = []
    for p in history.parsed(c.tokenizer):
        for n in walk(p.module):
            if (
                isinstance(n, cst.Call)
                and isinstance(n.func, cst.Attribute)
                and n.func.attr.value in ("add_tokens", "add_special_tokens")
                and p.code(n.func.value) == c.tokenizer
            ):
                grew.append(((p.order, p.line_of(n)), p, n))
    built = next(iter(history.assignments(model)), None)
    places = grew[:1] + ([((built[0].order, built[0].line_of(built[1])), built[0], built[1])] if built else [])
    if not places:
        return _none(hints.PATCH_WHY["no_cell"].format(name=c.tokenizer), model)
    _, p, node = max(places, key=lambda t: t[0])
    code = hints.PATCH_CODE["resize"].format(model=model, tokenizer=c.tokenizer)
    evidence = hints.PATCH_EVIDENCE["grew"].format(tokenizer_size=f.tokenizer_size, num=f.num_embeddings)
    verb = "grew" if grew and p is grew[0][1] and node is grew[0][2] else "built"
    patch = _patch(
        [_insert_after(p, node, code)], _why(p, verb, c.tokenizer if verb == "grew" else model, p.code(node))
    )
    title = hints.PATCH_TITLES["resize_embeddings"].format(tokenizer_size=f.tokenizer_size, num=f.num_embeddings)
    alt = Alternative("resize_embeddings", title, evidence, patch)
    return ProposedFix(
        SAFE, (alt,), 0, hints.PATCH_WHY["safe"].format(evidence=evidence), c.module, vocab_size=f.tokenizer_size
    )


# -- class labels: head, ignore_index, rows ------------------------------------------------------------------------
def _labels(c: Culprit, f: LabelFacts, history: History, survey: LabelSurvey | None) -> ProposedFix:
    yaml_names = None  # Ultralytics: the data YAML that sets nc names this many classes
    if f.head is not None and f.head.file:
        f, survey, yaml_names = _yaml_evidence(f, f.head.file, survey)
    alts: list[tuple[Alternative, str]] = []  # (alternative, the evidence that decides for it, "" when none)
    too_big = [v for v in f.bad if v >= f.n_classes]
    negative = [v for v in f.bad if v < 0]
    last = f.n_classes - 1
    dense_void = 255 in too_big and f.ignore_index != 255
    if dense_void:
        count = survey.count(255) if survey is not None else 0
        ev = hints.PATCH_EVIDENCE["void"].format(value=255, count=count or "the", last=last) if f.dense else ""
        alts.append((_ignore_alt(c, history, 255, ev), ev))
    top = max((v for v in too_big if v != 255), default=None)
    shift = _shift_alt(f, history, survey, top, negative)  # code that moved the labels by one, when there is
    shifted = shift is not None and bool(shift[1])  # the data says that code is why the labels are out of range
    widen_site: Site | None = None
    if top is not None:
        n_new = f.declared if f.declared is not None and top < f.declared else top + 1
        alt, widen_site = _widen_alt(c, f, history, n_new)
        decides = ""
        if f.declared is not None and top < f.declared:
            decides = hints.PATCH_EVIDENCE["declared"].format(declared=f.declared, by=c.dataset or f.declared_by)
        elif survey is not None and not shifted and _common(survey, top, f.n_classes):
            decides = hints.PATCH_EVIDENCE["new_class"].format(top=top, count=survey.count(top), n=survey.n_samples)
        alts.append(
            (alt if not decides else Alternative(alt.key, alt.title, decides, alt.patch, alt.no_patch), decides)
        )
        if shift is None and survey is not None and top == f.n_classes and survey.count(0) == 0 and survey.count(1):
            ev = hints.PATCH_EVIDENCE["one_based"].format(low=1, top=top)
            alts.append(
                (
                    Alternative(
                        "shift_labels",
                        hints.PATCH_TITLES["shift_labels"].format(last=last),
                        ev,
                        no_patch="where the labels are made is not one call to edit",
                    ),
                    ev,
                )
            )
    if shift is not None:
        alts.append(shift)
    if survey is not None and 0 < len(survey.bad_rows) <= max(HANDFUL_ROWS, HANDFUL * survey.n_samples):
        negative = sorted({*negative, *(v for v, _ in survey.counts if v < 0 and v != f.ignore_index)})
        drop, decides = _drop_alt(c, f, history, survey, widen_site, negative, top, yaml_names)
        alts.append((drop, "" if shifted else decides))
    if not alts:
        return _none(hints.PATCH_WHY["no_edit"].format(what="no alternative fits these labels"), c.module or "")
    widened = f.declared if f.declared is not None and top is not None and top < f.declared else (top or 0) + 1
    alts = [
        (
            dataclasses.replace(
                a,
                num_classes=widened if a.key == "widen_head" else f.n_classes,
                ignore_index=255 if a.key == "ignore_index" else f.ignore_index,
            ),
            d,
        )
        for a, d in alts
    ]  # what the verification checks after each one
    ranked = sorted(range(len(alts)), key=lambda i: not alts[i][1])  # the ones the data decides for first
    decided = [i for i in ranked if alts[i][1]]
    alternatives = tuple(alts[i][0] for i in ranked)
    default = 0 if len(decided) == 1 and alternatives[0].patch is not None else None
    if default is not None:
        why = hints.PATCH_WHY["decided"].format(evidence=alts[decided[0]][1])
    elif len(decided) == 1:  # the data decides for an alternative no code change makes: said, nothing applied
        why = hints.PATCH_WHY["decided_no_patch"].format(
            evidence=alts[decided[0]][1], no_patch=alternatives[0].no_patch
        )
    else:
        why = hints.PATCH_WHY["undecided"]
    chosen = alternatives[default] if default is not None else None
    n_classes = f.n_classes
    if chosen is not None and chosen.key == "widen_head":
        n_classes = f.declared if f.declared is not None and top is not None and top < f.declared else (top or 0) + 1
    return ProposedFix(
        DECISION,
        alternatives,
        default,
        why,
        c.module or c.loss or "",
        dataset=survey.source if survey is not None else c.dataset,
        num_classes=n_classes,
        ignore_index=255 if chosen is not None and chosen.key == "ignore_index" else f.ignore_index,
    )


def _shift_alt(
    f: LabelFacts, history: History, survey: LabelSurvey | None, top: int | None, negative: list[int]
) -> tuple[Alternative, str] | None:
    """A collate_fn or ``__getitem__`` that moves the labels by one, in the direction that put them out of range
    (``+ 1`` and labels reaching C; ``- 1`` and labels at -1): the alternative that takes the shift out, and the
    data's evidence that decides for it ("" when the data does not say)."""
    wanted = [d for d, bad in ((1, top == f.n_classes), (-1, -1 in negative)) if bad]
    if not wanted or not any(w in cell.source for cell in history.cells for w in ("collate_fn", "__getitem__")):
        return None
    shift = next((s for s in history.label_shifts() if s.delta in wanted), None)
    if shift is None:
        return None
    last = f.n_classes - 1
    delta = f"{shift.delta:+d}"
    decides = ""
    if survey is not None:
        seen = [v for v, n in survey.counts if n and v != f.ignore_index]
        low, high = (min(seen), max(seen)) if seen else (0, 0)
        if shift.collate and seen and not survey.bad_rows and (high == last if shift.delta > 0 else low == 0):
            decides = hints.PATCH_EVIDENCE["shifted_raw"].format(
                dataset=survey.source, low=low, high=high, where=shift.where, delta=delta
            )
        elif not shift.collate and seen and (low, high) == ((1, last + 1) if shift.delta > 0 else (-1, last - 1)):
            decides = hints.PATCH_EVIDENCE["shifted_item"].format(
                where=shift.where, low=low, high=high, delta=delta, last=last
            )
    evidence = decides or hints.PATCH_EVIDENCE["shift_code"].format(
        where=shift.where, delta=delta, code=" ".join(shift.code.split())
    )
    title = hints.PATCH_TITLES["shift_code"].format(op="+" if shift.delta > 0 else "-", where=shift.where, last=last)
    p = shift.parsed
    why = f"{_cell_name(p)} defines {shift.where}, which moves the labels by {delta} (`{' '.join(shift.code.split())}`)"
    return Alternative("shift_labels", title, evidence, _patch([shift.edit], why)), decides


def _common(survey: LabelSurvey, top: int, n_classes: int) -> bool:
    """Whether label ``top`` is about as common as the valid classes (a class of its own, not a stray row)."""
    valid = [survey.count(v) for v in range(n_classes) if survey.count(v)]
    return bool(valid) and survey.count(top) >= 0.5 * statistics.median(valid)


def _ignore_alt(c: Culprit, history: History, value: int, evidence: str) -> Alternative:
    title = hints.PATCH_TITLES["ignore_index"].format(value=value)
    code = hints.PATCH_CODE["ignore_index"].format(value=value)
    if c.loss is not None:
        site = history.module_site(c.loss)
        if site is not None:
            return Alternative(
                "ignore_index",
                title,
                evidence,
                _patch([keyword_edit(site.parsed, site.call, code)], _why(site.parsed, "built", c.loss, site.text)),
            )
    sites = _op_sites(history, c.op or "cross_entropy")
    if sites:
        p, call = sites[0]
        return Alternative(
            "ignore_index",
            title,
            evidence,
            _patch([keyword_edit(p, call, code)], _why(p, "calls", c.op or "cross_entropy", p.code(call))),
        )
    return Alternative("ignore_index", title, evidence, no_patch="no cell built the loss")


def _widen_alt(c: Culprit, f: LabelFacts, history: History, n: int) -> tuple[Alternative, Site | None]:
    import libcst as cst

    words = hints.set_classes(f.head, f.n_classes)
    title = hints.PATCH_TITLES["widen_head"].format(
        set_classes=words(n) if words is not None else hints.GENERIC_CLASS_WORDS["set"].format(n=n)
    )
    if f.head is not None and f.head.file:  # Ultralytics: the data YAML's nc: wins over the model's own
        yaml_alt = _yaml_alt(f.head.file, f.head.owner, n)
        if yaml_alt is not None:
            return yaml_alt, None
    site = history.module_site(c.module) if c.module is not None else None
    edits: list[Edit] = []
    by_hand = ""  # id2label / label2id that no edit extends
    name = c.module or ""
    if site is not None:
        kind = _callee(site)
        position, keyword = _COUNT_ARG.get(kind, (None, None))
        arg = _arg(site.call, position, keyword)
        edit = history.value_edit(site.parsed, arg, str(n), site.frames) if arg is not None else None
        if edit is not None:
            edits.append(edit)
    if not edits and f.head is not None and (f.head.owner or "").endswith(".layers[-1]"):
        site = _last_layer_site(history, str(f.head.owner).split(".")[0])  # keras.Sequential([..., Dense(3)])
        arg = _arg(site.call, *_COUNT_ARG.get(_callee(site), (None, None))) if site is not None else None
        edit = history.value_edit(site.parsed, arg, str(n), site.frames) if site is not None and arg else None
        if edit is not None:
            edits.append(edit)
            name = str(f.head.owner)
    if not edits and f.head is not None and f.head.setting:
        site = history.keyword_site(f.head.setting)
        arg = _arg(site.call, None, f.head.setting) if site is not None else None
        if site is not None and arg is not None:
            edit = history.value_edit(site.parsed, arg, str(n), site.frames)
            if edit is not None:
                edits.append(edit)
                name = f.head.owner or f.head.setting
                if (
                    isinstance(site.call.func, cst.Attribute)
                    and site.call.func.attr.value == "from_pretrained"
                    and edit.parsed.order == site.parsed.order
                    and not any(
                        a.keyword is not None and a.keyword.value == "ignore_mismatched_sizes" for a in site.call.args
                    )
                ):
                    edits.append(keyword_edit(site.parsed, site.call, hints.PATCH_CODE["mismatched"]))
                maps, by_hand = _label_maps(history, site, arg, edit, n)
                edits += maps
    if not edits or site is None:
        return Alternative("widen_head", title, no_patch=f"no cell of this kernel built `{name or 'the head'}`"), None
    same = [e for e in edits if e.parsed.order == edits[0].parsed.order]
    where = edits[0].parsed
    why = _why(site.parsed, "built", name, site.text)
    if where.order != site.parsed.order:
        why += f"; {_cell_name(where)} gives it the class count"
    if by_hand:
        why += f"; {by_hand}"
    return Alternative("widen_head", title, patch=_patch(same, why)), site


def _label_maps(history: History, site: Site, count: Any, count_edit: Edit, n: int) -> tuple[list[Edit], str]:
    """The Hugging Face fix sets ``id2label``/``label2id`` too when the call passes them: literal dicts (in the call,
    or a name given one in the cell the patch changes) get the missing entries (``4: "LABEL_4"``), in their own
    style; any other expression that does not follow the class count gets one line: extend it by hand."""
    import libcst as cst

    edits: list[Edit] = []
    manual: list[str] = []
    follows = {str(count.value)} if isinstance(count, cst.Name) else set()  # `LABELS[:num_labels]` follows the edit
    for a in site.call.args:
        key = a.keyword.value if a.keyword is not None else None
        if key not in ("id2label", "label2id"):
            continue
        p, value = site.parsed, a.value
        if isinstance(value, cst.Name):
            assigned = next(iter(history.assignments(str(value.value))), None)
            if assigned is not None and isinstance(assigned[2], cst.Dict):
                p, value = assigned[0], assigned[2]
        if follows and any(isinstance(x, cst.Name) and x.value in follows for x in walk(value)):
            continue
        edit = _extend_map(p, value, str(key), n) if isinstance(value, cst.Dict) else None
        if edit is not None and edit.parsed.order == count_edit.parsed.order:
            edits += [edit] if edit.text else []
        else:
            manual.append(f"`{key}`")
    note = hints.PATCH_WHY["labels_by_hand"].format(names=" and ".join(manual), n=n, last=n - 1) if manual else ""
    return edits, note


def _extend_map(p: Parsed, d: Any, key: str, n: int) -> Edit | None:
    """``{0: "neg", 1: "pos"}`` (id2label) or ``{"neg": 0, "pos": 1}`` (label2id) with the ids up to ``n`` it lacks,
    as an insertion after its last entry (an empty edit when none is missing); None when an entry is not a literal."""
    import ast

    import libcst as cst

    items: list[tuple[Any, Any]] = []
    for e in d.elements:
        if not isinstance(e, cst.DictElement):
            return None
        try:
            items.append((ast.literal_eval(p.code(e.key)), ast.literal_eval(p.code(e.value))))
        except (ValueError, SyntaxError):
            return None
    ids = [k for k, _ in items] if key == "id2label" else [v for _, v in items]
    try:
        have = {int(i) for i in ids}
    except (TypeError, ValueError):
        return None
    strings = [x for e in d.elements for x in (e.key, e.value) if isinstance(x, cst.SimpleString)]
    q = strings[0].quote if strings else '"'
    string_ids = key == "id2label" and any(isinstance(e.key, cst.SimpleString) for e in d.elements)
    entries = []
    for i in range(n):
        if i in have:
            continue
        label = f"{q}{hints.PATCH_CODE['hf_label'].format(i=i)}{q}"
        index = f"{q}{i}{q}" if string_ids else str(i)
        entries.append(f"{index}: {label}" if key == "id2label" else f"{label}: {i}")
    source = p.cell.source
    if not d.elements:
        start, _ = p.span(d)
        return Edit(p, start + 1, start + 1, ", ".join(entries))
    last = d.elements[-1]
    _, end = p.span(last.value)
    if not entries:
        return Edit(p, end, end, "")
    first_start = p.span(d.elements[0].key)[0]
    if isinstance(last.comma, cst.Comma) and "\n" in source[first_start:end]:  # one entry a line, trailing comma
        comma = source.index(",", end) + 1
        line_start = source.rfind("\n", 0, p.span(last.key)[0]) + 1
        indent = source[line_start : p.span(last.key)[0]]
        return Edit(p, comma, comma, "".join(f"\n{indent}{x}," for x in entries))
    return Edit(p, end, end, "".join(f", {x}" for x in entries))


def _yaml_evidence(
    f: LabelFacts, path: str, survey: LabelSurvey | None
) -> tuple[LabelFacts, LabelSurvey | None, int | None]:
    """Ultralytics: the data YAML's ``names:`` (more names than ``nc``: the class count it declares) and its label
    files' class ids (a scan of the training set, when no other survey was made), as the decision's evidence."""
    from cudaassert_ipy.fix import data_yaml

    text = data_yaml.read(path)
    names = data_yaml.names_count(text) if text is not None else None
    if names is not None and names > f.n_classes and f.declared is None:
        f = dataclasses.replace(f, declared=names, declared_by=f"`names:` in {path}")
    if survey is None:
        survey = data_yaml.label_survey(path, f.n_classes)
    return f, survey, names


def _yaml_alt(path: str, owner: str, n: int) -> Alternative | None:
    """Ultralytics: the data YAML sets ``nc``, so the patch is a file patch of it (applied only when asked)."""
    from cudaassert_ipy.fix import data_yaml

    old = data_yaml.read(path)
    new = data_yaml.set_nc(old, n) if old is not None else None
    if old is None or new is None:
        return None
    why = f"{path} sets nc for `{owner or 'the model'}` (the data YAML the trainer read)"
    patch = Patch(None, None, old, new, unified_diff(old, new, path), why, path)
    return Alternative("widen_head", hints.PATCH_TITLES["yaml_nc"].format(n=n, path=path), patch=patch)


def _last_layer_site(history: History, model: str) -> Site | None:
    """The last layer of ``model = Sequential([..., Dense(3)])`` (Keras lists its layers), as a site."""
    import libcst as cst

    for p, _, value in history.assignments(model):
        if (
            isinstance(value, cst.Call)
            and _callee(Site(p, value)) == "Sequential"
            and value.args
            and isinstance(value.args[0].value, cst.List)
            and value.args[0].value.elements
        ):
            last = value.args[0].value.elements[-1].value
            return Site(p, last) if isinstance(last, cst.Call) else None
        return None
    return None


def _callee(site: Site) -> str:
    import libcst as cst

    func = site.call.func
    return str(func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else "")


def _arg(call: Any, position: int | None, keyword: str | None) -> Any | None:
    for a in call.args:
        if keyword is not None and a.keyword is not None and a.keyword.value == keyword:
            return a.value
    positional = [a for a in call.args if a.keyword is None and a.star == ""]
    if position is not None and position < len(positional):
        return positional[position].value
    return None


def _drop_alt(
    c: Culprit,
    f: LabelFacts,
    history: History,
    survey: LabelSurvey,
    widen_site: Site | None,
    negative: list[int],
    top: int | None,
    yaml_names: int | None = None,
) -> tuple[Alternative, str]:
    rows = survey.bad_rows
    named = survey.row_names or tuple(map(str, rows))
    shown = ", ".join(named[:8]) + (f", ... ({len(rows) - 8} more)" if len(rows) > 8 else "")
    last = f.n_classes - 1
    title = (
        hints.PATCH_TITLES["label_lines"].format(count=len(rows), last=last, rows=shown)
        if survey.row_names
        else hints.PATCH_TITLES["drop_rows"].format(count=len(rows), dataset=survey.source, rows=shown)
    )
    evidence = hints.PATCH_EVIDENCE["handful"].format(count=len(rows), n=survey.n_samples, last=last, rows=shown)
    handful = len(rows) <= max(HANDFUL_ROWS, HANDFUL * survey.n_samples)
    decides = ""
    names = _names_list(widen_site)
    bad_text = ", ".join(map(str, sorted({v for v in f.bad if v >= f.n_classes or v < 0})))
    if handful and names is not None:
        decides = hints.PATCH_EVIDENCE["names"].format(names=names, n=f.n_classes, bad=bad_text) + "; " + evidence
    elif handful and yaml_names == f.n_classes and f.head is not None:
        decides = (
            hints.PATCH_EVIDENCE["yaml_names"].format(path=f.head.file, n=f.n_classes, bad=bad_text) + "; " + evidence
        )
    elif handful and negative and not any(v in (-1, -100) and f.ignore_index is None for v in negative):
        decides = hints.PATCH_EVIDENCE["negative"].format(bad=", ".join(map(str, negative))) + "; " + evidence
    elif handful and (top is None or top > f.n_classes or negative):
        decides = evidence  # scattered bad values in a few rows: not a class the head misses
    if survey.row_names:  # label files: data, not code
        return Alternative(
            "drop_rows",
            title,
            decides or evidence,
            no_patch="label files are data, not code: correct or delete those lines",
        ), decides
    code_key = "drop_rows_hf" if survey.has_select else "drop_rows_torch"
    code = hints.PATCH_CODE[code_key].format(dataset=survey.source, rows="{" + ", ".join(map(str, rows)) + "}")
    built = next(iter(history.assignments(survey.source)), None)
    if built is None or len(rows) > 1000:
        return Alternative(
            "drop_rows",
            title,
            decides or evidence,
            no_patch=f"no cell of this kernel built `{survey.source}`"
            if built is None
            else "too many rows to list in code",
        ), decides
    p, stmt, _ = built
    patch = _patch([_insert_after(p, stmt, code)], _why(p, "built", survey.source, p.code(stmt)))
    return Alternative("drop_rows", title, decides or evidence, patch), decides


def _names_list(site: Site | None) -> str | None:
    """``classes`` when the head's class count is written ``len(classes)``: the author named the classes."""
    import libcst as cst

    if site is None:
        return None
    position, keyword = _COUNT_ARG.get(_callee(site), (None, None))
    arg = _arg(site.call, position, keyword)
    if isinstance(arg, cst.Call) and isinstance(arg.func, cst.Name) and arg.func.value == "len" and len(arg.args) == 1:
        return site.parsed.code(arg.args[0].value)
    return None


def resizable_roots(culprit: Culprit | None, ns: Mapping[str, Any]) -> frozenset[str]:
    """The culprit's root object when it can resize its token embeddings (``model.resize_token_embeddings``)."""
    if culprit is None or culprit.module is None:
        return frozenset()
    root = culprit.module.split(".")[0]
    return frozenset({root}) if callable(getattr(ns.get(root), "resize_token_embeddings", None)) else frozenset()
