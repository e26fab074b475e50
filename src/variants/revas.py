"""The REVAS paper's variants (sections 3-4): re-orders, option counts with fillers, NOTA replacing the
correct option, true/false, multi-select and the second-stage misleading-option replacement.

Every set that reorders shows k distinct orders of one displayed list, the first being the list as built
(the original order, or the original options followed by fillers, or the kept options in original order);
its `variant_id` ends in `_<j>`, j = 0 for that reference order. Counts per question for A options
(defaults): reorder A; option_count A + 6 + 8 + 10 + 3 + 2 (each level n shows n orders); nota A;
true_false A reorders + A yes/no questions; multi_select 2; misleading 1 per question answered wrong
in the source run (0 for the others). Under the validity rules (`rules=`, src/variants/rules.py) a set
shows fewer orders when options are fixed (references in their slots, "... of the above" last, options
named by "Both A and B" at their labels) and leaves out the lists that cannot keep them; the counts say how many, by
reason.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from src.common.errors import UserError
from src.core.questions import Question, rng_for
from src.core.variant import (
    FILLER,
    MISLEADING_REPLACED,
    NOTA,
    NOTA_REPLACES_CORRECT,
    NOTA_TEXT,
    ORIGINAL,
    REORDER,
    Variant,
)

from .rules import DUPLICATES, HAS_NOTA, OPTION_REFS, Rules, capped, free_orders

# Non-semantic filler options (the paper pads with tokens like "Egg"): pronounceable pseudo-words that are
# not English words or names, so that no filler can be a plausible answer. Fixed, so a run is reproducible
# from its config alone; 16 of them, as level 10 needs up to 8 beside a 2-option question.
FILLER_TEXTS = (
    "Vorplex",
    "Quindle",
    "Brastik",
    "Florbit",
    "Skenvat",
    "Plintor",
    "Zarvick",
    "Trevask",
    "Glorpen",
    "Snivrel",
    "Dranquo",
    "Moltrix",
    "Pexalun",
    "Wumbril",
    "Crondel",
    "Yeskarn",
)
DEFAULT_LEVELS = (6, 8, 10, 3, 2)  # the paper's option counts beside the original 4
ENUMERATE_UP_TO = 5040  # 7!: below this, draw distinct orders from the full list instead of by rejection


def distinct_orders(n: int, k: int, rng: random.Random) -> list[tuple[int, ...]]:
    """k distinct permutations of range(n): the identity first, then k-1 random others.

    >>> distinct_orders(3, 3, random.Random(0))[0]
    (0, 1, 2)
    >>> len(set(distinct_orders(4, 24, random.Random(0))))
    24
    """
    total = math.factorial(n)
    if not 1 <= k <= total:
        raise UserError(
            f"config key variants.k: {k} distinct orders of {n} options do not exist "
            f"(1 to {total}); lower variants.k or set it to null (= the number of options)"
        )
    identity = tuple(range(n))
    if total <= ENUMERATE_UP_TO:
        return [identity, *rng.sample(list(itertools.permutations(identity))[1:], k - 1)]
    seen, out = {identity}, [identity]
    while len(out) < k:
        order = list(identity)
        rng.shuffle(order)
        if tuple(order) not in seen:
            seen.add(tuple(order))
            out.append(tuple(order))
    return out


def fillers_for(question: Question) -> list[str]:
    """Filler texts that appear (casefolded) neither in the question text nor in one of its options.

    >>> q = Question(id="q", question="Is a Vorplex a bird?", options=("yes", "no", "quindle"), answer=0)
    >>> fillers_for(q)[:3]
    ['Brastik', 'Florbit', 'Skenvat']
    """
    own = " ".join([str(question.question), *map(str, question.options)]).casefold()
    return [text for text in FILLER_TEXTS if text.casefold() not in own]


def _ordered(
    question: Question,
    base: Sequence[tuple[int, str]],
    *,
    kind: str,
    first_kind: str,
    prefix: str,
    k: int | None,
    rng: random.Random,
    target: int,
    level: int | None = None,
    rules: Rules | None = None,
) -> list[Variant]:
    """k orders of the displayed list `base` ((slot value, text) pairs); `target` is the right slot value.

    With `rules`, the list is first arranged ("... of the above" last, named options at their labels) and the
    orders permute its free slots only: at most F! of them for F free slots, the rest counted as left out. A
    list the rules refuse is not made, except its first order when that is the original (kind `original`)."""
    rules = Rules.off(question) if rules is None else rules
    wanted = len(base) if k is None else k
    positions = rules.arrange([value for value, _ in base])
    if positions is None:
        rules.skip(OPTION_REFS, wanted)
        return []
    base = [base[p] for p in positions]
    values = [value for value, _ in base]
    reason = rules.check(values, kind=kind, answer_value=target)
    if reason is not None:
        rules.skip(reason, wanted - (first_kind == ORIGINAL))
        if first_kind != ORIGINAL:
            return []
        return [
            Variant(
                question.id,
                first_kind,
                f"{prefix}_0",
                tuple(values),
                tuple(t for _, t in base),
                values.index(target),
                level=level,
            )
        ]
    free = [] if rules.broken and rules.active else rules.free_slots(values)
    if len(free) == len(base):
        perms = distinct_orders(len(base), wanted, rng)
    else:
        made = capped(wanted, len(free), len(base))
        rules.skip(OPTION_REFS, wanted - made)
        perms = free_orders(len(base), free, distinct_orders(len(free), made, rng))
    out = []
    for j, perm in enumerate(perms):
        shown = [base[i] for i in perm]
        order = tuple(value for value, _ in shown)
        out.append(
            Variant(
                question.id,
                first_kind if j == 0 else kind,
                f"{prefix}_{j}",
                order,
                tuple(text for _, text in shown),
                order.index(target),
                level=level,
            )
        )
    return out


def _originals(question: Question, keep: Sequence[int] | None = None) -> list[tuple[int, str]]:
    return [(i, question.options[i]) for i in (range(question.n_options) if keep is None else keep)]


def revas_reorder(question: Question, *, seed: int, k: int | None = None, rules: Rules | None = None) -> list[Variant]:
    """k distinct orders (default k = A); the first is the original order (kind `original`), the rest `reorder`.

    >>> q = Question(id="q", question="?", options=("a", "b", "c", "d"), answer=2)
    >>> [v.variant_id for v in revas_reorder(q, seed=0)], revas_reorder(q, seed=0)[0].option_order
    (['reorder_0', 'reorder_1', 'reorder_2', 'reorder_3'], (0, 1, 2, 3))
    """
    return _ordered(
        question,
        _originals(question),
        kind=REORDER,
        first_kind=ORIGINAL,
        prefix=REORDER,
        k=k,
        rng=rng_for(seed, question.id, "revas_reorder"),
        target=question.answer,
        rules=rules,
    )


def revas_option_count(
    question: Question,
    *,
    seed: int,
    levels: Sequence[int] = DEFAULT_LEVELS,
    k: int | None = None,
    include_base: bool = True,
    rules: Rules | None = None,
) -> list[Variant]:
    """Each level n shows n options in k orders (default k = n), `level` = n on every variant.

    n > A pads the original options with seeded fillers (kind `more_options`, fillers after the originals in
    the reference order); n < A keeps the correct option and n-1 seeded distractors in original order (kind
    `fewer_options`); n = A is the base level (kinds `original`/`reorder`), included by `include_base`.

    >>> q = Question(id="q", question="?", options=("a", "b", "c", "d"), answer=2)
    >>> len(revas_option_count(q, seed=0))  # 4 + 6 + 8 + 10 + 3 + 2
    33
    """
    a = question.n_options
    wanted = ([a] if include_base else []) + [int(n) for n in levels]
    out: list[Variant] = []
    for n in dict.fromkeys(wanted):  # unique, in order
        rng = rng_for(seed, question.id, f"revas_option_count/{n}")
        if n < 2:
            raise UserError(
                f"config key variants.levels: {n} options cannot hold the answer and a distractor; use levels >= 2"
            )
        if n == a:  # the same orders as revas_reorder, so their prompts are shared through the cache
            out += _ordered(
                question,
                _originals(question),
                kind=REORDER,
                first_kind=ORIGINAL,
                prefix=REORDER,
                k=k,
                rng=rng_for(seed, question.id, "revas_reorder"),
                target=question.answer,
                level=n,
                rules=rules,
            )
        elif n > a:
            available = fillers_for(question)
            if n - a > len(available):
                raise UserError(
                    f"config key variants.levels: level {n} needs {n - a} fillers for question "
                    f"{question.id}, only {len(available)} exist; lower the level"
                )
            pad = rng_for(seed, question.id, f"fillers/{n}").sample(available, n - a)
            out += _ordered(
                question,
                _originals(question) + [(FILLER, text) for text in pad],
                kind="more_options",
                first_kind="more_options",
                prefix=f"more_options_{n}",
                k=k,
                rng=rng,
                target=question.answer,
                level=n,
                rules=rules,
            )
        else:
            distractors = [i for i in range(a) if i != question.answer]
            keep = sorted([question.answer, *rng_for(seed, question.id, f"drop/{n}").sample(distractors, n - 1)])
            out += _ordered(
                question,
                _originals(question, keep),
                kind="fewer_options",
                first_kind="fewer_options",
                prefix=f"fewer_options_{n}",
                k=k,
                rng=rng,
                target=question.answer,
                level=n,
                rules=rules,
            )
    return out


def revas_nota(question: Question, *, seed: int, k: int | None = None, rules: Rules | None = None) -> list[Variant]:
    """NOTA replaces the correct option and is the answer; k orders (default A). The reference order keeps
    the other options in original order with NOTA last, as the paper's Figure 2 shows it. With `rules`, not
    made for a question that already has a none-like option (`has_nota`) or whose right option refers to
    others ("All of the above": its referents would be right too; `option_refs`).

    >>> q = Question(id="q", question="?", options=("a", "b", "c", "d"), answer=0)
    >>> v = revas_nota(q, seed=0)[0]
    >>> v.option_order, v.correct_label
    ((1, 2, 3, -1), 'D')
    """
    rules = Rules.off(question) if rules is None else rules
    wanted = question.n_options if k is None else k
    if rules.none_like:
        rules.skip(HAS_NOTA, wanted)
        return []
    if rules.answer_refers():
        rules.skip(OPTION_REFS, wanted)
        return []
    base = [pair for pair in _originals(question) if pair[0] != question.answer] + [(NOTA, NOTA_TEXT)]
    return _ordered(
        question,
        base,
        kind=NOTA_REPLACES_CORRECT,
        first_kind=NOTA_REPLACES_CORRECT,
        prefix=NOTA_REPLACES_CORRECT,
        k=k,
        rng=rng_for(seed, question.id, "revas_nota"),
        target=NOTA,
        rules=rules,
    )


def true_false_variants(question: Question, rules: Rules | None = None) -> list[Variant]:
    """One yes/no question per option ("Is this the correct answer?"): the correct option expects Yes.

    With `rules`, no question about an option that refers to others (shown alone it says nothing), about an
    option the right one makes right ("All of the above" is right: each option is), or about a copy of the
    right option's text."""
    rules = Rules.off(question) if rules is None else rules
    out = []
    for i, text in enumerate(question.options):
        if rules.active and (rules.refs[i].kind is not None or rules.implied_right(i)):
            rules.skip(OPTION_REFS)
        elif rules.duplicates_answer(i):
            rules.skip(DUPLICATES)
        else:
            out.append(
                Variant(
                    question.id,
                    "true_false",
                    f"true_false_{i}",
                    (i,),
                    (text,),
                    0 if i == question.answer else 1,
                    fmt="true_false",
                    asked_option=i,
                )
            )
    return out


def revas_true_false(
    question: Question, *, seed: int, with_reorder: bool = True, k: int | None = None, rules: Rules | None = None
) -> list[Variant]:
    """The A yes/no questions, after the k reorders (default on) that pick the paper's subset: questions
    answered right in every order (sc = 1). Without them the tf metrics are computed on all questions.

    >>> q = Question(id="q", question="?", options=("a", "b", "c"), answer=1)
    >>> [(v.variant_id, v.correct_label) for v in revas_true_false(q, seed=0, with_reorder=False)]
    [('true_false_0', 'No'), ('true_false_1', 'Yes'), ('true_false_2', 'No')]
    """
    return (revas_reorder(question, seed=seed, k=k, rules=rules) if with_reorder else []) + true_false_variants(
        question, rules
    )


def revas_multi_select(question: Question, *, seed: int, rules: Rules | None = None) -> list[Variant]:
    """The original order asked twice: once as usual (to find the wrong answers and their misleading option),
    once with "select all correct options". With `rules`, the select-all variant is not made when the right
    option makes others right ("All of the above", "Both A and B") or a text is shown twice."""
    rules = Rules.off(question) if rules is None else rules
    identity = tuple(range(question.n_options))
    out = [Variant(question.id, ORIGINAL, ORIGINAL, identity, question.options, question.answer)]
    reason = rules.check(identity, kind="multi_select", answer_value=question.answer)
    if reason is None and any(rules.implied_right(i) for i in identity):
        reason = OPTION_REFS
    if reason is not None:
        rules.skip(reason)
        return out
    return out + [
        Variant(
            question.id, "multi_select", "multi_select", identity, question.options, question.answer, fmt="multi_select"
        )
    ]


def wrong_answers(records: Any) -> dict[str, int]:
    """{question_id: the original option chosen} for the questions a run answered wrong on its original order
    (repetition 0). INVALID answers and chosen NOTA/filler slots have no option to replace and are left out.
    Raises UserError when the run has no original-order answers."""
    rows = records[(records["variant_kind"] == ORIGINAL) & (records["repetition"] == 0)]
    if "fmt" in rows.columns:
        rows = rows[rows["fmt"].fillna("mcq") == "mcq"]
    if rows.empty:
        raise UserError(
            "config key variants.source_run: that run has no answers on the original order; "
            "use a run of variants=original (or cora, revas_reorder, perm_*) as the source"
        )
    out = {}
    for qid, parsed, chosen, correct in zip(
        rows["question_id"], rows["parsed_label"], rows["chosen_option"], rows["correct"]
    ):
        if parsed is None or parsed != parsed or chosen is None or chosen != chosen or bool(correct):
            continue
        if int(chosen) >= 0:
            out[str(qid)] = int(chosen)
    return out


def revas_misleading(
    question: Question,
    *,
    seed: int,
    source_run: str | None = None,
    source_answers: Mapping[str, int] | None = None,
    rules: Rules | None = None,
) -> list[Variant]:
    """Second stage: for a question answered wrong in `source_run`, the original order with the option the
    model chose (`source_answers[question.id]`, filled in by the runner) replaced by a filler, asked again.

    >>> q = Question(id="q", question="?", options=("a", "b", "c", "d"), answer=2)
    >>> v, = revas_misleading(q, seed=0, source_run="r", source_answers={"q": 1})
    >>> v.option_order, v.asked_option, v.correct_label
    ((0, -2, 2, 3), 1, 'C')
    >>> revas_misleading(q, seed=0, source_run="r", source_answers={})
    []
    """
    if source_answers is None:
        raise UserError(
            "config key variants.source_run: revas_misleading needs the MLflow run id of a finished run "
            "on the same benchmark; set variants.source_run=<run id>"
        )
    chosen = source_answers.get(question.id)
    if chosen is None or chosen == question.answer:
        return []
    filler = rng_for(seed, question.id, "misleading").choice(fillers_for(question))
    order = tuple(FILLER if i == chosen else i for i in range(question.n_options))
    texts = tuple(filler if i == chosen else text for i, text in enumerate(question.options))
    reason = None if rules is None else rules.check(order, kind=MISLEADING_REPLACED, answer_value=question.answer)
    if reason is not None:  # e.g. the replaced option is one "All of the above" or "Both A and B" speaks of
        assert rules is not None  # a reason comes only from rules.check
        rules.skip(reason)
        return []
    return [
        Variant(
            question.id,
            MISLEADING_REPLACED,
            MISLEADING_REPLACED,
            order,
            texts,
            question.answer,
            asked_option=chosen,
        )
    ]
