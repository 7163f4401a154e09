"""Rule for ids out of range in an embedding or index_select.

Example: "Token ids reach 50257, but `model.wte` has num_embeddings=50257 (valid 0..50256). Likely
fix: the tokenizer has 50260 tokens but the embedding only 50257 rows: call
model.resize_token_embeddings(len(tokenizer))."
"""

from __future__ import annotations

from cudaassert_ipy.diagnose import hints
from cudaassert_ipy.diagnose.causes.rule_base import Case, Finding, pick, range_text
from cudaassert_ipy.diagnose.culprit import TOKEN_IDS, Culprit
from cudaassert_ipy.diagnose.hints import TokenFacts

__all__ = ["token_ids"]

IDS_REACH = "Token ids reach {value}, but {where} (valid {valid})."
ID_OUT_OF_RANGE = "An id is out of range, but {where} (valid {valid})."
BAD_IDS = "{count} id(s) in `{name}` are out of range (first: {shown})."
TABLE_ROWS = "the embedding table has {n} rows"
MODULE_ROWS = "`{name}` has num_embeddings={n}"
MAX_NORM = (
    "The embedding has max_norm set{value}: it renormalises the rows an id selects before the lookup, so that step's "
    "check reported the bad id."
)

_ID_WORDS = ("ids", "token", "input", "idx", "index", "x")
_RENORM = ("embedding_renorm_index_out_of_range", "embedding_renorm_wrap_index_out_of_range")


def token_ids(case: Case) -> Finding | None:
    ev, call = case.ev, case.ev.call
    known = case.known if isinstance(case.known, TokenFacts) else None
    f = Finding(op="embedding")
    weight = call.tensor("weight") if call is not None else None
    num: int | None = None
    where = ""
    if weight is not None and len(weight.shape) == 2:
        num = int(weight.shape[0])
        where = TABLE_ROWS.format(n=num)
    elif known is not None:
        num = known.num_embeddings
        where = TABLE_ROWS.format(n=num)
    tables = pick(ev.embeddings, ("word", "embed", "wte", "tok"), ev.cell_source)
    if "embedding_bag" in case.cause_id:  # an EmbeddingBag's own check: its table first
        tables = sorted(tables, key=lambda m: m.type_name != "EmbeddingBag")
    emb = next(iter(tables), None)
    if emb is not None:
        f.facts.append((emb.name, f"num_embeddings={emb.get('num_embeddings')}"))
        if num is None or num == emb.get("num_embeddings"):
            num = emb.get("num_embeddings")
            where = MODULE_ROWS.format(name=emb.name, n=num)
    bad: tuple[int, ...] = known.bad if known is not None else ()
    own = call.values("input") if call is not None else None
    candidates = ([own] if own is not None else []) + [
        c for c in pick(ev.labels, _ID_WORDS, ev.cell_source) if c is not own
    ]
    value = case.value
    if num is not None:
        for cand in candidates:
            count, examples = cand.outside(0, num)
            if count:
                bad = bad or cand.distinct_outside(0, num)
                shown = ", ".join(f"{v} at {list(p)}" for p, v in examples)
                f.facts.append((cand.name, f"{count} id(s) out of range; first: {shown}"))
                f.sentences.append(BAD_IDS.format(count=count, name=cand.name, shown=shown))
                break
        if value is None and bad:
            value = max(bad, key=abs)
        head = (
            IDS_REACH.format(value=value, where=where, valid=range_text(num))
            if value is not None
            else ID_OUT_OF_RANGE.format(where=where, valid=range_text(num))
        )
        f.sentences.insert(0, head)
    tokenizer_size: int | None = None
    for name, n in ev.tokenizers:
        f.facts.append((name, f"len = {n}"))
        tokenizer_size = n if tokenizer_size is None else tokenizer_size
    config_vocab: int | None = None
    for cfg in ev.configs:
        vocab = cfg.get("vocab_size")
        if vocab:
            f.facts.append((cfg.name, f"vocab_size={vocab}"))
            config_vocab = int(vocab) if config_vocab is None else config_vocab
    if value is not None and not bad:
        bad = (value,)
    if num is not None and bad:
        facts = TokenFacts(bad=bad, num_embeddings=num, tokenizer_size=tokenizer_size, config_vocab=config_vocab)
        f.fix = hints.token_ids(facts) or None
        same = emb is not None and emb.get("num_embeddings") == num
        f.culprit = Culprit(
            TOKEN_IDS,
            facts,
            module=emb.name if same and emb else None,
            module_type=emb.type_name if same and emb else None,
            op=f.op,
            tokenizer=ev.tokenizers[0][0] if ev.tokenizers else None,
        )
    if case.cause_id in _RENORM:
        max_norm = call.scalar("max_norm") if call is not None else None
        f.sentences.append(MAX_NORM.format(value=f" (max_norm={max_norm})" if max_norm is not None else ""))
    return f
