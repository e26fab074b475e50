"""docs/metrics.md's definitions of the variant sets, checked on generated questions: what each CoRA list holds,
a shuffle never equal to what it shuffles, and generators that depend on the run's seed and the question id only."""

from __future__ import annotations

import pytest

from src.core.questions import Question
from src.core.variant import NOTA
from src.variants import make_variants

QUESTIONS = [
    Question(id=f"q{i}", question="Which one?", options=tuple(f"option {j}" for j in range(a)), answer=i % a)
    for a in (3, 4, 5, 7)
    for i in range(40)
]


def by_id(question: Question, seed: int = 0, name: str = "cora") -> dict[str, tuple[int, ...]]:
    return {v.variant_id: v.option_order for v in make_variants({"name": name}, question, seed=seed)}


@pytest.mark.promise(
    "docs/metrics.md", "CoRA: A-1 lists with one distractor replaced in place by NOTA, never the right one"
)
def test_each_nota_list_replaces_one_distractor_in_place():
    for q in QUESTIONS:
        orders = by_id(q)
        replaced = set()
        for j in range(q.n_options - 1):
            order = orders[f"nota_{j}"]
            (slot,) = [s for s, o in enumerate(order) if o == NOTA]
            assert slot != q.answer and [o for s, o in enumerate(order) if s != slot] == [
                o for o in range(q.n_options) if o != slot
            ]
            replaced.add(slot)
        assert replaced == set(range(q.n_options)) - {q.answer}


@pytest.mark.promise(
    "docs/metrics.md", "CoRA: decoupled pairs are the right option first and one distractor, NOTA last"
)
def test_each_decoupled_pair_is_the_right_option_then_one_distractor():
    for q in QUESTIONS:
        orders = by_id(q)
        distractors = [o for o in range(q.n_options) if o != q.answer]
        assert sorted(orders[f"decoupled_{j}"][1] for j in range(q.n_options - 1)) == distractors
        for j in range(q.n_options - 1):
            assert orders[f"decoupled_{j}"][0] == q.answer
            assert orders[f"decoupled_nota_{j}"] == (*orders[f"decoupled_{j}"], NOTA)


@pytest.mark.promise("docs/metrics.md", "a shuffle never equals the order it shuffles when A > 2")
def test_a_shuffle_never_equals_the_list_it_shuffles():
    for seed in (0, 1, 2):
        for q in QUESTIONS:
            orders = by_id(q, seed)
            assert orders["shuffled_0"] != orders["original"]
            for name, order in orders.items():
                if "_shuffled_" in name and len(order) > 2:
                    shuffled_from = orders[name.replace("_shuffled", "")]
                    assert sorted(order) == sorted(shuffled_from) and order != shuffled_from, (q.id, name)


@pytest.mark.parametrize("name", ["cora", "revas_reorder", "revas_nota", "revas_option_count", "perm_random2"])
@pytest.mark.promise("docs/metrics.md", "every generator is deterministic given the run's seed and the question id")
def test_the_generators_depend_on_the_seed_and_the_question_id_only(name):
    q = QUESTIONS[50]
    same = Question(id=q.id, question="Another text", options=q.options, answer=q.answer)
    assert by_id(q, 3, name) == by_id(q, 3, name) == by_id(same, 3, name)
