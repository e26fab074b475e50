"""Where the right answer sits: the slot distribution of a question set, the fixed-slot rule, seeded shuffles.

docs/metrics.md "Answer position": when a benchmark's file order puts the answer at a fixed position
(TruthfulQA mc1/mc2: the true answers come first, mc1's answer is always option A), the
original order is a seeded shuffle of the file's options (`seeded_shuffle`, the TruthfulQA
loaders' default), and the distribution of the answer's slot is reported for every benchmark.

The rule, in one place: a set of at least `MIN_QUESTIONS` questions whose answers sit in one
slot more than `FIXED_SLOT_SHARE` of the time, and more than a uniformly random order would put
there by `MARGIN_SE` standard errors (so 2-option WinoGrande, 634 of 1,267 answers in slot B, is
not flagged), has a fixed answer position (`fixed_answer_slot`);
`load_benchmark` logs `answer_slot_warning` for it once per load. `describe_answer_slots` is the
one-line summary a run logs; `python -m src.data slots BENCHMARK` prints the table.

>>> from src.core.questions import Question
>>> qs = [Question(id=str(i), question="?", options=("a", "b", "c", "d"), answer=i % 4) for i in range(8)]
>>> answer_slot_counts(qs)
{0: 2, 1: 2, 2: 2, 3: 2}
>>> describe_answer_slots(qs)
'answer slots: A 25% B 25% C 25% D 25% (n=8)'
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable, Sequence

from src.core.questions import Question

from .validate import LETTERS

FIXED_SLOT_SHARE = 0.5  # one slot holding more than this share of the answers...
MIN_QUESTIONS = 20  # ...among at least this many questions is a fixed answer position,
MARGIN_SE = 3.0  # ...when also this many binomial standard errors above a uniformly random order's share


def slot_name(slot: int) -> str:
    """'A' for slot 0, ... 'Z'; slot numbers past the alphabet as '#27'."""
    return LETTERS[slot] if slot < len(LETTERS) else f"#{slot + 1}"


def answer_slot_counts(questions: Iterable[Question]) -> dict[int, int]:
    """Slot (0-based displayed position) -> how many questions have their answer there.

    Every slot up to the largest option count is present, empty ones with 0.
    """
    questions = list(questions)
    width = max((q.n_options for q in questions), default=0)
    counts = dict.fromkeys(range(width), 0)
    for q in questions:
        counts[q.answer] += 1
    return counts


def expected_slot_shares(questions: Iterable[Question]) -> dict[int, float]:
    """Slot -> the share of answers it would hold if every question's order were uniformly random.

    The mean over questions of 1/n_options for the questions that have that slot (so with
    2 to 13 options slot A expects more than a quarter, and the last slots little).
    """
    questions = list(questions)
    width = max((q.n_options for q in questions), default=0)
    shares = dict.fromkeys(range(width), 0.0)
    for q in questions:
        for slot in range(q.n_options):
            shares[slot] += 1 / q.n_options / len(questions)
    return shares


def fixed_answer_slot(
    questions: Sequence[Question], *, share: float = FIXED_SLOT_SHARE, min_questions: int = MIN_QUESTIONS
) -> int | None:
    """The slot holding more than `share` of the answers among at least `min_questions` questions, and
    more than `expected_slot_shares` by `MARGIN_SE` standard errors; else None.

    >>> qs = [Question(id=str(i), question="?", options=("a", "b", "c", "d"), answer=0) for i in range(20)]
    >>> fixed_answer_slot(qs), fixed_answer_slot(qs[:19])
    (0, None)
    >>> pairs = [Question(id=str(i), question="?", options=("a", "b"), answer=int(i < 17)) for i in range(30)]
    >>> fixed_answer_slot(pairs)  # 57% of 2-option answers in B is within chance

    """
    n = len(questions)
    if n < min_questions:
        return None
    counts = answer_slot_counts(questions)
    slot = max(counts, key=counts.__getitem__)
    observed = counts[slot] / n
    if observed <= share:
        return None
    expected = expected_slot_shares(questions)[slot]
    return slot if observed > expected + MARGIN_SE * math.sqrt(expected * (1 - expected) / n) else None


def describe_answer_slots(questions: Sequence[Question]) -> str:
    """One log line: `answer slots: A 26% B 24% C 25% D 25% (n=817)` (shares rounded to whole percents)."""
    counts = answer_slot_counts(questions)
    n = len(questions)
    parts = " ".join(f"{slot_name(slot)} {count / n:.0%}" for slot, count in counts.items()) if n else "none"
    return f"answer slots: {parts} (n={n})"


def answer_slot_warning(questions: Sequence[Question], benchmark: str) -> str | None:
    """A one-line warning when the answers sit at a fixed slot (`fixed_answer_slot`), else None."""
    slot = fixed_answer_slot(questions)
    if slot is None:
        return None
    share = answer_slot_counts(questions)[slot] / len(questions)
    fix = (
        "benchmark.shuffle=true balances it"
        if benchmark.startswith("truthfulqa_")
        else "its original order favours that slot; compare with shuffled variants"
    )
    return (
        f"{benchmark}: the answer is in slot {slot_name(slot)} for {share:.0%} of {len(questions)} questions "
        f"(fixed answer position in the file order); {fix}"
    )


def seeded_shuffle(question: Question, seed: int) -> Question:
    """The question with options permuted by `Random(f"{seed}/{id}")`; `metadata["original_order"][new] = old`.

    `answer` and a `metadata["correct_set"]` follow their options. The same seed and id give the
    same order in every process (string seeds are hashed with SHA-512, not `hash()`).
    """
    order = list(range(question.n_options))
    random.Random(f"{seed}/{question.id}").shuffle(order)
    metadata = dict(question.metadata, original_order=tuple(order))
    if "correct_set" in metadata:
        metadata["correct_set"] = tuple(sorted(order.index(i) for i in metadata["correct_set"]))
    return dataclasses.replace(
        question,
        options=tuple(question.options[i] for i in order),
        answer=order.index(question.answer),
        metadata=metadata,
    )
