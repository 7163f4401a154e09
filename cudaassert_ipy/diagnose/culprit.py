"""The object a fix would change, as the rules found it: a frozen value the fix layer (fix/) starts from.

A rule knows more than the sentence it words: which module bounded the values (the head's
``nn.Linear``, the embedding), which loss took them, which tokenizer grew. It keeps that here, by
the name the user knows each object by, with the facts its fix was worded from (``hints``), so a
patch is derived from the same facts as the fix sentence, never from live objects.
"""

from __future__ import annotations

from dataclasses import dataclass

from cudaassert_ipy.diagnose.hints import Facts

__all__ = ["BCE", "CLASS_LABELS", "TOKEN_IDS", "Culprit"]

CLASS_LABELS = "class_labels"  # labels outside 0..C-1: the head, the loss's ignore_index, or the data
TOKEN_IDS = "token_ids"  # ids outside the embedding: the embedding, the tokenizer that grew
BCE = "bce"  # binary_cross_entropy got logits (or bad targets): the loss


@dataclass(frozen=True)
class Culprit:
    kind: str  # CLASS_LABELS, TOKEN_IDS, BCE
    facts: Facts  # what the fix sentence was worded from (hints.LabelFacts, TokenFacts, BceFacts)
    module: str | None = None  # "model.head", "model.2", "model.embed_tokens": the bounding module's name
    module_type: str | None = None  # "Linear", "Embedding"
    loss: str | None = None  # "criterion": the loss module the values went to, when one is named
    loss_type: str | None = None  # "BCELoss", "CrossEntropyLoss"
    op: str | None = None  # the functional call that failed ("cross_entropy"), for a call-site patch
    tokenizer: str | None = None  # the tokenizer's name, when its size matters
    dataset: str | None = None  # the dataset that declared the class count ("train_ds")
