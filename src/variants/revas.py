"""The REVAS paper's variants (sections 3-4): re-orders, option counts with fillers, NOTA replacing the
correct option, true/false, multi-select and the second-stage misleading-option replacement.

Every set that reorders shows k distinct orders of one displayed list, the first being the list as built
(the original order, or the original options followed by fillers, or the kept options in original order);
its `variant_id` ends in `_<j>`, j = 0 for that reference order. Counts per question for A options
(defaults): reorder A; option_count A + 6 + 8 + 10 + 3 + 2 (each level n shows n orders); nota A;
true_false A reorders + A yes/no questions; multi_select 2; misleading 1 per question answered wrong
in the source run (0 for the others).
"""
from __future__ import annotations

import itertools
import math
import random
from typing import Any, Mapping, Sequence

from ..errors import UserError
from ..questions import Question
from .base import FILLER, NOTA, NOTA_TEXT, Variant, rng_for

# Non-semantic filler options (the paper pads with tokens like "Egg"): everyday nouns that answer no
# benchmark question. Fixed, so a run is reproducible from its config alone.
FILLER_TEXTS = (
    "Egg", "Cloud", "Pencil", "Violin", "Tuesday", "Marble", "Lantern", "Seaweed", "Trumpet", "Velvet",
    "Pebble", "Kettle",
)
DEFAULT_LEVELS = (6, 8, 10, 3, 2)  # the paper's option counts beside the original 4
ENUMERATE_UP_TO = 5040  # 7!: below this, draw distinct orders from the full list instead of by rejection

REORDER = "reorder"  # variant_kind of the non-reference orders of the original options
REVAS_KINDS = ("reorder", "more_options", "fewer_options", "nota_replaces_correct", "true_false", "multi_select",
               "misleading_replaced")


def distinct_orders(n: int, k: int, rng: random.Random) -> list[tuple[int, ...]]:
    """k distinct permutations of range(n): the identity first, then k-1 random others.

    >>> distinct_orders(3, 3, random.Random(0))[0]
    (0, 1, 2)
    >>> len(set(distinct_orders(4, 24, random.Random(0))))
    24
    """
    total = math.factorial(n)
    if not 1 <= k <= total:
        raise UserError(f"config key variants.k: {k} distinct orders of {n} options do not exist "
                        f"(1 to {total}); lower variants.k or set it to null (= the number of options)")
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
    """Filler texts that do not repeat one of the question's own options."""
    own = {text.casefold().strip() for text in question.options}
    return [text for text in FILLER_TEXTS if text.casefold() not in own]


def _ordered(question: Question, base: Sequence[tuple[int, str]], *, kind: str, first_kind: str, prefix: str,
             k: int | None, rng: random.Random, target: int, level: int | None = None) -> list[Variant]:
    """k orders of the displayed list `base` ((slot value, text) pairs); `target` is the right slot value."""
    out = []
    for j, perm in enumerate(distinct_orders(len(base), len(base) if k is None else k, rng)):
        shown = [base[i] for i in perm]
        order = tuple(value for value, _ in shown)
        out.append(Variant(question.id, first_kind if j == 0 else kind, f"{prefix}_{j}", order,
                           tuple(text for _, text in shown), order.index(target), level=level))
    return out


def _originals(question: Question, keep: Sequence[int] | None = None) -> list[tuple[int, str]]:
    return [(i, question.options[i]) for i in (range(question.n_options) if keep is None else keep)]


def revas_reorder(question: Question, *, seed: int, k: int | None = None) -> list[Variant]:
    """k distinct orders (default k = A); the first is the original order (kind `original`), the rest `reorder`.

    >>> q = Question(id="q", question="?", options=("a", "b", "c", "d"), answer=2)
    >>> [v.variant_id for v in revas_reorder(q, seed=0)], revas_reorder(q, seed=0)[0].option_order
    (['reorder_0', 'reorder_1', 'reorder_2', 'reorder_3'], (0, 1, 2, 3))
    """
    return _ordered(question, _originals(question), kind=REORDER, first_kind="original", prefix=REORDER, k=k,
                    rng=rng_for(seed, question.id, "revas_reorder"), target=question.answer)


def revas_option_count(question: Question, *, seed: int, levels: Sequence[int] = DEFAULT_LEVELS, k: int | None = None,
                       include_base: bool = True) -> list[Variant]:
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
            raise UserError(f"config key variants.levels: {n} options cannot hold the answer and a distractor; use levels >= 2")
        if n == a:  # the same orders as revas_reorder, so their prompts are shared through the cache
            out += _ordered(question, _originals(question), kind=REORDER, first_kind="original", prefix=REORDER,
                            k=k, rng=rng_for(seed, question.id, "revas_reorder"), target=question.answer, level=n)
        elif n > a:
            available = fillers_for(question)
            if n - a > len(available):
                raise UserError(f"config key variants.levels: level {n} needs {n - a} fillers for question "
                                f"{question.id}, only {len(available)} exist; lower the level")
            pad = rng_for(seed, question.id, f"fillers/{n}").sample(available, n - a)
            out += _ordered(question, _originals(question) + [(FILLER, text) for text in pad], kind="more_options",
                            first_kind="more_options", prefix=f"more_options_{n}", k=k, rng=rng,
                            target=question.answer, level=n)
        else:
            distractors = [i for i in range(a) if i != question.answer]
            keep = sorted([question.answer, *rng_for(seed, question.id, f"drop/{n}").sample(distractors, n - 1)])
            out += _ordered(question, _originals(question, keep), kind="fewer_options", first_kind="fewer_options",
                            prefix=f"fewer_options_{n}", k=k, rng=rng, target=question.answer, level=n)
    return out


def revas_nota(question: Question, *, seed: int, k: int | None = None) -> list[Variant]:
    """NOTA replaces the correct option and is the answer; k orders (default A). The reference order keeps
    the other options in original order with NOTA last, as the paper's Figure 2 shows it.

    >>> q = Question(id="q", question="?", options=("a", "b", "c", "d"), answer=0)
    >>> v = revas_nota(q, seed=0)[0]
    >>> v.option_order, v.correct_label
    ((1, 2, 3, -1), 'D')
    """
    base = [pair for pair in _originals(question) if pair[0] != question.answer] + [(NOTA, NOTA_TEXT)]
    return _ordered(question, base, kind="nota_replaces_correct", first_kind="nota_replaces_correct",
                    prefix="nota_replaces_correct", k=k, rng=rng_for(seed, question.id, "revas_nota"), target=NOTA)


def true_false_variants(question: Question) -> list[Variant]:
    """One yes/no question per option ("Is this the correct answer?"): the correct option expects Yes."""
    return [Variant(question.id, "true_false", f"true_false_{i}", (i,), (text,), 0 if i == question.answer else 1,
                    fmt="true_false", asked_option=i) for i, text in enumerate(question.options)]


def revas_true_false(question: Question, *, seed: int, with_reorder: bool = True, k: int | None = None) -> list[Variant]:
    """The A yes/no questions, after the k reorders (default on) that pick the paper's subset: questions
    answered right in every order (sc = 1). Without them the tf metrics are computed on all questions.

    >>> q = Question(id="q", question="?", options=("a", "b", "c"), answer=1)
    >>> [(v.variant_id, v.correct_label) for v in revas_true_false(q, seed=0, with_reorder=False)]
    [('true_false_0', 'No'), ('true_false_1', 'Yes'), ('true_false_2', 'No')]
    """
    return (revas_reorder(question, seed=seed, k=k) if with_reorder else []) + true_false_variants(question)


def revas_multi_select(question: Question, *, seed: int) -> list[Variant]:
    """The original order asked twice: once as usual (to find the wrong answers and their misleading option),
    once with "select all correct options"."""
    identity = tuple(range(question.n_options))
    return [Variant(question.id, "original", "original", identity, question.options, question.answer),
            Variant(question.id, "multi_select", "multi_select", identity, question.options, question.answer,
                    fmt="multi_select")]


def wrong_answers(records: Any) -> dict[str, int]:
    """{question_id: the original option chosen} for the questions a run answered wrong on its original order
    (repetition 0). INVALID answers and chosen NOTA/filler slots have no option to replace and are left out.
    Raises UserError when the run has no original-order answers."""
    rows = records[(records["variant_kind"] == "original") & (records["repetition"] == 0)]
    if "fmt" in rows.columns:
        rows = rows[rows["fmt"].fillna("mcq") == "mcq"]
    if rows.empty:
        raise UserError("config key variants.source_run: that run has no answers on the original order; "
                        "use a run of variants=original (or cora, revas_reorder, perm_*) as the source")
    out = {}
    for qid, parsed, chosen, correct in zip(rows["question_id"], rows["parsed_label"], rows["chosen_option"], rows["correct"]):
        if parsed is None or parsed != parsed or chosen is None or chosen != chosen or bool(correct):
            continue
        if int(chosen) >= 0:
            out[str(qid)] = int(chosen)
    return out


def revas_misleading(question: Question, *, seed: int, source_run: str | None = None,
                     source_answers: Mapping[str, int] | None = None) -> list[Variant]:
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
        raise UserError("config key variants.source_run: revas_misleading needs the MLflow run id of a finished run "
                        "on the same benchmark; set variants.source_run=<run id>")
    chosen = source_answers.get(question.id)
    if chosen is None or chosen == question.answer:
        return []
    filler = rng_for(seed, question.id, "misleading").choice(fillers_for(question))
    order = tuple(FILLER if i == chosen else i for i in range(question.n_options))
    texts = tuple(filler if i == chosen else text for i, text in enumerate(question.options))
    return [Variant(question.id, "misleading_replaced", "misleading_replaced", order, texts, question.answer,
                    asked_option=chosen)]
