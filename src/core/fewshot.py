"""Few-shot examples: drawn from the benchmark's dev/train split, never from the evaluated questions."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from src.core.questions import Question, rng_for


def pick_fewshot(
    pool_for_subject: Callable[[str | None], Sequence[Question]],
    question: Question,
    *,
    k: int,
    seed: int,
    exclude: set[str],
) -> list[Question]:
    """`k` examples for `question`, from its own subject where the pool has one; the same for every question of a
    subject and seed (as lm-evaluation-harness does), so variants of a question differ only in their options."""
    if k <= 0:
        return []
    pool = [q for q in pool_for_subject(question.subject) if q.id not in exclude]
    if len(pool) <= k:
        return list(pool)
    return rng_for(seed, question.subject or "", "fewshot").sample(pool, k)
