"""The CoRA paper's divergent set (section 5): 2 + 6(A-1) displayed option lists per question.

Shuffles redraw on identity, so a "shuffled" variant always differs from the order it shuffles
(for two options that is the swap, as in the paper's Figure 1).
"""
from __future__ import annotations

from ..questions import Question
from .base import NOTA, NOTA_TEXT, Variant, rng_for, shuffled

CORA_KINDS = (
    "original", "shuffled", "nota", "nota_shuffled", "decoupled", "decoupled_shuffled",
    "decoupled_nota", "decoupled_nota_shuffled",
)


def make_variant(question: Question, kind: str, variant_id: str, order: tuple[int, ...], *, answer_slot_value: int | None = None) -> Variant:
    """Build a Variant from an order of original indices (NOTA = -1). The right answer is the original
    correct option unless `answer_slot_value` names another slot value (e.g. NOTA)."""
    target = question.answer if answer_slot_value is None else answer_slot_value
    texts = tuple(NOTA_TEXT if i == NOTA else question.options[i] for i in order)
    return Variant(question.id, kind, variant_id, order, texts, order.index(target))


def cora_variants(question: Question, *, seed: int, n_shuffles: int = 1, same_size_only: bool = False) -> list[Variant]:
    """The divergent set of `question`, in the paper's order.

    >>> q = Question(id="q", question="?", options=("a", "b", "c", "d"), answer=2)
    >>> vs = cora_variants(q, seed=0)
    >>> len(vs), vs[0].option_order, vs[0].correct_label
    (20, (0, 1, 2, 3), 'C')
    """
    a = question.answer
    original = tuple(range(question.n_options))
    distractors = [i for i in original if i != a]
    out = [make_variant(question, "original", "original", original)]
    for s in range(n_shuffles):
        rng = rng_for(seed, question.id, f"shuffled/{s}")
        out.append(make_variant(question, "shuffled", f"shuffled_{s}", shuffled(original, rng)))
    for j, d in enumerate(distractors):
        nota = tuple(NOTA if i == d else i for i in original)
        out.append(make_variant(question, "nota", f"nota_{j}", nota))
        out.append(make_variant(question, "nota_shuffled", f"nota_shuffled_{j}",
                                shuffled(nota, rng_for(seed, question.id, f"nota_shuffled/{j}"))))
    for j, d in enumerate(distractors):
        pair = (a, d)
        out.append(make_variant(question, "decoupled", f"decoupled_{j}", pair))
        out.append(make_variant(question, "decoupled_shuffled", f"decoupled_shuffled_{j}",
                                shuffled(pair, rng_for(seed, question.id, f"decoupled_shuffled/{j}"))))
        triple = (a, d, NOTA)
        out.append(make_variant(question, "decoupled_nota", f"decoupled_nota_{j}", triple))
        out.append(make_variant(question, "decoupled_nota_shuffled", f"decoupled_nota_shuffled_{j}",
                                shuffled(triple, rng_for(seed, question.id, f"decoupled_nota_shuffled/{j}"))))
    if same_size_only:
        out = [v for v in out if v.n_options == question.n_options]
    return out
