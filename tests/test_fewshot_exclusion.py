"""Never the evaluated question among its own few-shot examples, in every built-in benchmark that draws examples
(src/core/fewshot.py): with its own few-shot pool, and with a pool that is the evaluated questions again under other
ids (a task with only a test split, or a few-shot file that is the test file). The lm-eval side of the same rule, on
a task with only a test split: tests/test_lm_eval_tasks.py."""

from __future__ import annotations

import dataclasses

import pytest

from src.benchmarks import BENCHMARKS, load_benchmark, load_fewshot_pool
from src.common.errors import UserError
from src.core.fewshot import pick_fewshot, same_question

from .conftest import DATA_DIR

DRAWING = sorted(name for name, b in BENCHMARKS.items() if b.fewshot is not None and name != "lm_eval")
FILES = {"mmlu": "mmlu", "mmlu_redux": "mmlu_redux", "arc_easy": "arc_easy", "arc_challenge": "arc_challenge"}


def _questions(name: str):
    if name in FILES and not (DATA_DIR / FILES[name]).is_dir():
        pytest.skip(f"benchmark files absent: {DATA_DIR / FILES[name]} (../shared/data) not found")
    return load_benchmark(name, path=None, data_dir=str(DATA_DIR), seed=1, limit=40)


def _shots_never_hold_their_question(questions, pool_for_subject, k: int) -> int:
    drawn = 0
    for q in questions:
        shots = pick_fewshot(pool_for_subject, q, k=k, seed=3, exclude={x.id for x in questions})
        assert not any(same_question(s, q) for s in shots), q.id
        drawn += len(shots)
    return drawn


def test_the_list_of_benchmarks_that_draw_examples_is_the_registrys():
    assert DRAWING == ["arc_challenge", "arc_easy", "mmlu", "mmlu_redux", "synthetic"]


@pytest.mark.parametrize("name", DRAWING)
def test_a_benchmarks_own_pool_never_gives_a_question_its_own_answer(name):
    questions = _questions(name)
    pool = lambda subject: load_fewshot_pool(name, data_dir=str(DATA_DIR), subject=subject)  # noqa: E731
    try:
        pool(questions[0].subject)
    except UserError as err:  # ../shared/data holds ARC-Easy's test file alone
        pytest.skip(f"benchmark files absent: {err}")
    assert _shots_never_hold_their_question(questions, pool, k=3) > len(questions)


@pytest.mark.parametrize("name", DRAWING)
def test_a_pool_that_is_the_evaluated_questions_under_other_ids_never_gives_a_question_itself(name):
    """A bug once here: the pool's ids (`TASK/fewshot/i`) are not the evaluated ids (`TASK/i`), so an exclusion
    by id never matched and 3 of 4 prompts held their own question with its answer."""
    questions = _questions(name)[:4]
    again = [dataclasses.replace(q, id=f"{q.id}/fewshot", split="fewshot") for q in questions]
    pool = lambda subject: [q for q in again if q.subject == subject]  # noqa: E731
    for q in questions:
        shots = pick_fewshot(pool, q, k=3, seed=3, exclude={x.id for x in questions})
        same_subject = sum(x.subject == q.subject for x in questions)
        assert not any(same_question(s, q) for s in shots) and len(shots) == min(3, same_subject - 1), q.id
