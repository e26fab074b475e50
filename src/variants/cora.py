"""The CoRA paper's divergent set (section 5): 2 + 6(A-1) displayed option lists per question.

Shuffles redraw on identity, so a "shuffled" variant always differs from the order it shuffles
(for two options that is the swap, as in the paper's Figure 1). Under the validity rules (`rules=`,
src/variants/rules.py) shuffles move only the free options and the variants that cannot keep the
question's references, NOTA rule or distinct texts are left out, each counted with its reason.
"""

from __future__ import annotations

from src.core.questions import Question, rng_for
from src.core.variant import (
    CORA_KINDS as CORA_KINDS,  # the kinds written here, named in src/core/variant.py
    NOTA,
    NOTA_TEXT,
    ORIGINAL,
    Variant,
)

from .base import shuffled
from .rules import OPTION_REFS, Rules


def make_variant(
    question: Question, kind: str, variant_id: str, order: tuple[int, ...], *, answer_slot_value: int | None = None
) -> Variant:
    """Build a Variant from an order of original indices (NOTA = -1). The right answer is the original
    correct option unless `answer_slot_value` names another slot value (e.g. NOTA)."""
    target = question.answer if answer_slot_value is None else answer_slot_value
    texts = tuple(NOTA_TEXT if i == NOTA else question.options[i] for i in order)
    return Variant(question.id, kind, variant_id, order, texts, order.index(target))


def cora_variants(
    question: Question, *, seed: int, n_shuffles: int = 1, same_size_only: bool = False, rules: Rules | None = None
) -> list[Variant]:
    """The divergent set of `question`, in the paper's order.

    With `rules` (src/variants/rules.py) a shuffle permutes only the free options, and a variant that
    cannot honour the question's references, adds NOTA beside a none-like option or shows a duplicate
    text twice is left out and counted in `rules.excluded`; the others keep their variant_ids.

    >>> q = Question(id="q", question="?", options=("a", "b", "c", "d"), answer=2)
    >>> vs = cora_variants(q, seed=0)
    >>> len(vs), vs[0].option_order, vs[0].correct_label
    (20, (0, 1, 2, 3), 'C')
    >>> r = Rules(Question(id="r", question="?", options=("a", "b", "c", "All of the above"), answer=0))
    >>> vs = cora_variants(r.question, seed=0, rules=r)
    >>> [v.variant_id for v in vs[:4]], len(vs), dict(r.excluded)
    (['original', 'shuffled_0', 'nota_2', 'nota_shuffled_2'], 12, {'option_refs': 8})
    >>> vs[1].option_order[-1], vs[2].option_order  # "All of the above" stays last; NOTA only in its place
    (3, (0, 1, 2, -1))
    """
    rules = Rules.off(question) if rules is None else rules
    a = question.answer
    n = question.n_options
    original = tuple(range(n))
    distractors = [i for i in original if i != a]
    out: list[Variant] = [make_variant(question, ORIGINAL, ORIGINAL, original)]
    wanted = (lambda size: size == n) if same_size_only else (lambda size: True)

    def add(kind: str, variant_id: str, base: tuple[int, ...], purpose: str | None) -> tuple[int, ...] | None:
        """Arrange and check `base`; with a purpose, shuffle its free options. The order made, or None."""
        if not wanted(len(base)):
            return None
        positions = rules.arrange(base)
        if positions is None:
            rules.skip(OPTION_REFS)
            return None
        order = tuple(base[p] for p in positions)
        reason = rules.check(order, kind=kind, answer_value=a)
        if reason is None and purpose is not None:
            free = rules.free_slots(order)
            if len(free) < 2 and len(order) > 1:
                reason = OPTION_REFS  # nothing left to shuffle
            else:
                moved = shuffled(tuple(order[s] for s in free), rng_for(seed, question.id, purpose))
                slots = list(order)
                for slot, value in zip(free, moved):
                    slots[slot] = value
                order = tuple(slots)
        if reason is not None:
            rules.skip(reason)
            return None
        out.append(make_variant(question, kind, variant_id, order))
        return order

    for s in range(n_shuffles):
        add("shuffled", f"shuffled_{s}", original, f"shuffled/{s}")
    for j, d in enumerate(distractors):
        nota = tuple(NOTA if i == d else i for i in original)
        add("nota", f"nota_{j}", nota, None)
        add("nota_shuffled", f"nota_shuffled_{j}", nota, f"nota_shuffled/{j}")
    for j, d in enumerate(distractors):
        pair = (a, d)
        add("decoupled", f"decoupled_{j}", pair, None)
        add("decoupled_shuffled", f"decoupled_shuffled_{j}", pair, f"decoupled_shuffled/{j}")
        triple = (a, d, NOTA)
        add("decoupled_nota", f"decoupled_nota_{j}", triple, None)
        add("decoupled_nota_shuffled", f"decoupled_nota_shuffled_{j}", triple, f"decoupled_nota_shuffled/{j}")
    return out
