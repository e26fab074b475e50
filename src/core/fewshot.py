"""Few-shot examples: drawn from the benchmark's dev/train split, never the evaluated question itself."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from src.core.questions import Question, rng_for


def same_question(a: Question, b: Question) -> bool:
    """Whether two questions ask the same thing: the same text and the same options, whatever their ids (a task
    whose few-shot pool is its evaluated split holds each evaluated question again, under a pool id).

    >>> same_question(Question("t/0", "2+2?", ("3", "4"), 1), Question("t/fewshot/0", " 2+2? ", ("3", "4"), 1))
    True
    """
    if " ".join(a.question.split()) != " ".join(b.question.split()):
        return False
    return tuple(" ".join(o.split()) for o in a.options) == tuple(" ".join(o.split()) for o in b.options)


def pick_fewshot(
    pool_for_subject: Callable[[str | None], Sequence[Question]],
    question: Question,
    *,
    k: int,
    seed: int,
    exclude: set[str],
) -> list[Question]:
    """`k` examples for `question`, from its own subject where the pool has one; the same for every question of a
    subject and seed (as lm-evaluation-harness does), so variants of a question differ only in their options. Never
    the question itself: by id (`exclude`), nor by its text and options under another id (a pool that is the
    evaluated split again); lm-eval leaves the evaluated document out of its own examples too."""
    if k <= 0:
        return []
    pool = [q for q in pool_for_subject(question.subject) if q.id not in exclude and not same_question(q, question)]
    if len(pool) <= k:
        return list(pool)
    return rng_for(seed, question.subject or "", "fewshot").sample(pool, k)
