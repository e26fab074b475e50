"""CoRA divergent set: counts, kinds, label maps and determinism."""

from collections import Counter

import pytest
from hypothesis import given, strategies as st

from src.common.errors import UserError
from src.core.questions import Question
from src.variants import NOTA, NOTA_TEXT, make_variants
from src.variants.cora import CORA_KINDS


def q(n=4, answer=2, qid="q1"):
    return Question(id=qid, question="Which?", options=tuple(f"option {i}" for i in range(n)), answer=answer)


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_count_is_2_plus_6_times_a_minus_1(n):
    vs = make_variants({"name": "cora"}, q(n, answer=n - 1), seed=0)
    assert len(vs) == 2 + 6 * (n - 1)
    counts = Counter(v.kind for v in vs)
    assert counts["original"] == counts["shuffled"] == 1
    assert all(counts[k] == n - 1 for k in CORA_KINDS[2:])
    assert len({v.variant_id for v in vs}) == len(vs)


def test_kinds_follow_the_paper():
    vs = {v.variant_id: v for v in make_variants({"name": "cora"}, q(4, answer=2), seed=0)}
    assert vs["original"].option_order == (0, 1, 2, 3)
    assert vs["nota_0"].option_order == (NOTA, 1, 2, 3)  # first distractor replaced in place
    assert vs["nota_2"].option_order == (0, 1, 2, NOTA)
    assert vs["decoupled_1"].option_order == (2, 1)  # correct first
    assert vs["decoupled_nota_0"].option_order == (2, 0, NOTA)  # NOTA last
    assert vs["decoupled_shuffled_0"].option_order == (0, 2)  # two options: the shuffle is the swap
    for v in vs.values():
        if v.kind.endswith("shuffled"):
            unshuffled = vs[v.variant_id.replace("_shuffled", "")] if v.kind != "shuffled" else vs["original"]
            assert sorted(v.option_order) == sorted(unshuffled.option_order)
            assert v.option_order != unshuffled.option_order


def test_same_size_only_keeps_full_width_variants():
    vs = make_variants({"name": "cora_same_size"}, q(5, answer=0), seed=0)
    assert {v.n_options for v in vs} == {5}
    assert len(vs) == 2 + 2 * 4


def test_seeded_and_seed_sensitive():
    a = make_variants({"name": "cora"}, q(5), seed=0)
    b = make_variants({"name": "cora"}, q(5), seed=0)
    c = make_variants({"name": "cora"}, q(5), seed=1)
    assert a == b
    assert [v.option_order for v in a] != [v.option_order for v in c]


def test_unknown_set_and_option_are_user_errors():
    with pytest.raises(UserError, match="variants"):
        make_variants({"name": "nope"}, q(), seed=0)
    with pytest.raises(UserError, match="variants"):
        make_variants({"name": "cora", "bogus": 1}, q(), seed=0)


@given(n=st.integers(2, 8), answer=st.data(), seed=st.integers(0, 10_000))
def test_correct_answer_survives_and_labels_map_back(n, answer, seed):
    a = answer.draw(st.integers(0, n - 1))
    question = q(n, answer=a)
    for v in make_variants({"name": "cora"}, question, seed=seed):
        assert v.option_order[v.correct_slot] == a  # the right option is shown and is the answer
        for slot, orig in enumerate(v.option_order):
            assert v.option_texts[slot] == (NOTA_TEXT if orig == NOTA else question.options[orig])
        assert len(set(v.option_order)) == len(v.option_order)
