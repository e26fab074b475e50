"""Fluctuation permutation sets: counts, reference orders, METRICS.md's random.sample rule, perm_all sharing."""

import itertools
import math
import random

import pytest
from hypothesis import given, settings, strategies as st

from src.common.errors import UserError
from src.core.questions import Question
from src.variants import make_variants
from src.variants.permutations import PERM_SETS, nth_permutation, permutation_set, random_permutations

from .conftest import examples


def q(n=4, answer=1, qid="q1"):
    return Question(id=qid, question="Which?", options=tuple(f"option {i}" for i in range(n)), answer=answer)


EXPECTED_COUNTS = {
    "original": lambda n: 1,
    "oi": lambda n: 2,
    "cyclic": lambda n: n,
    "random2": lambda n: 2,
    "randomL": lambda n: n,
    "full": math.factorial,
}


@pytest.mark.parametrize("n", [2, 3, 4, 5])
@pytest.mark.parametrize("name", PERM_SETS)
def test_counts_and_memberships(name, n):
    question = q(n, answer=n - 1)
    vs = make_variants({"name": f"perm_{name}"}, question, seed=0)
    assert len(vs) == EXPECTED_COUNTS[name](n)
    assert len({v.option_order for v in vs}) == len(vs)  # permutations distinct
    assert [v.memberships for v in vs] == [((name, pos),) for pos in range(len(vs))]
    for v in vs:
        assert sorted(v.option_order) == list(range(n))  # labels stay A..; only the original options, reordered
        assert v.option_order[v.correct_slot] == question.answer
        assert v.option_texts == tuple(question.options[i] for i in v.option_order)
        assert v.kind == ("original" if v.option_order == tuple(range(n)) else "permutation")


def test_reference_orders_and_shapes():
    identity = (0, 1, 2, 3)
    assert permutation_set("original", 4) == [identity]
    assert permutation_set("oi", 4) == [identity, (3, 2, 1, 0)]
    assert permutation_set("cyclic", 4) == [(0, 1, 2, 3), (1, 2, 3, 0), (2, 3, 0, 1), (3, 0, 1, 2)]
    full = permutation_set("full", 4)
    assert full[0] == identity and full == list(itertools.permutations(range(4)))


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("size_of", [lambda n: 2, lambda n: n])
def test_random_sets_follow_metrics_md(n, size_of):
    every = list(itertools.permutations(range(n)))
    expected = random.Random(0).sample(every, min(size_of(n), len(every)))
    assert random_permutations(n, size_of(n), perm_seed=0) == expected
    assert random_permutations(n, size_of(n), perm_seed=3) == random.Random(3).sample(
        every, min(size_of(n), len(every))
    )


def test_random_sets_are_the_same_for_every_question_and_seed():
    a = make_variants({"name": "perm_randomL"}, q(5, qid="a"), seed=0)
    b = make_variants({"name": "perm_randomL"}, q(5, answer=3, qid="b"), seed=9)
    assert [v.option_order for v in a] == [v.option_order for v in b]


def test_nth_permutation_is_lexicographic():
    assert [nth_permutation(4, i) for i in range(24)] == list(itertools.permutations(range(4)))


def test_full_refuses_large_questions_in_one_line():
    with pytest.raises(UserError, match="variants.max_full_options") as err:
        make_variants({"name": "perm_full"}, q(8), seed=0)
    assert "\n" not in str(err.value)
    assert len(make_variants({"name": "perm_full", "max_full_options": 8}, q(3), seed=0)) == 6
    with pytest.raises(UserError, match="variants.max_full_options"):
        make_variants({"name": "perm_all", "max_full_options": 4}, q(5), seed=0)


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_perm_all_shares_orders(n):
    vs = make_variants({"name": "perm_all"}, q(n), seed=0)
    assert len(vs) == math.factorial(n)  # full holds every order, the others share them
    assert len({v.variant_id for v in vs}) == len(vs)
    by_set = {}
    for v in vs:
        for name, pos in v.memberships:
            by_set.setdefault(name, {})[pos] = v.option_order
    for name in PERM_SETS:
        assert [by_set[name][p] for p in sorted(by_set[name])] == permutation_set(name, n)
    identity = next(v for v in vs if v.option_order == tuple(range(n)))
    assert {"original", "oi", "cyclic", "full"} <= {name for name, _ in identity.memberships}


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(2, 6), st.sampled_from(PERM_SETS), st.data())
def test_every_set_is_a_set_of_permutations(n, name, data):
    answer = data.draw(st.integers(0, n - 1))
    vs = make_variants({"name": f"perm_{name}"}, q(n, answer=answer), seed=data.draw(st.integers(0, 99)))
    assert len({v.option_order for v in vs}) == len(vs) == len(permutation_set(name, n))
    assert all(v.option_order[v.correct_slot] == answer for v in vs)
