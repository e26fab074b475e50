"""REVAS variant sets: counts, invariants (the answer survives, orders distinct, labels map back), the
true/false and select-all formats, their parsers and the oracle's answers to them."""

from collections import Counter

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from src.answer_formats import MULTI_SELECT, TRUE_FALSE, FormatRequest
from src.answer_formats.multi_select import parse_label_set_with_rule
from src.answer_formats.true_false import parse_yes_no_with_rule
from src.backends.base import SamplingParams
from src.backends.oracle import KnownAnswer
from src.backends.simulated import SimulatedBackend, SimulatedSettings
from src.common.errors import UserError
from src.core.prompts import PromptTemplate
from src.core.questions import Question
from src.variants import FILLER, NOTA, NOTA_TEXT, TF_LABELS, VARIANT_SETS, make_variants
from src.variants.revas import FILLER_TEXTS, wrong_answers

from .conftest import examples
from .records_factory import records, trial


def q(n=4, answer=2, qid="q1", options=None):
    return Question(id=qid, question="Which?", options=options or tuple(f"option {i}" for i in range(n)), answer=answer)


def shown_text(question, value, text):
    """What a slot must show for its slot value."""
    if value == NOTA:
        return text == NOTA_TEXT
    if value == FILLER:
        return text in FILLER_TEXTS
    return text == question.options[value]


def check_mcq(question, variants):
    for v in variants:
        assert len(v.option_texts) == v.n_options
        assert all(shown_text(question, value, text) for value, text in zip(v.option_order, v.option_texts))
        originals = [i for i in v.option_order if i >= 0]
        assert len(originals) == len(set(originals))
        assert len(set(v.option_texts)) == v.n_options  # no option shown twice
        target = NOTA if v.kind == "nota_replaces_correct" else question.answer
        assert v.option_order[v.correct_slot] == target  # the correct answer survives and its label maps back
    assert len({v.variant_id for v in variants}) == len(variants)


def orders_of(variants, prefix):
    return [v for v in variants if v.variant_id.rsplit("_", 1)[0] == prefix]


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_reorder_k_distinct_orders_original_first(n):
    question = q(n, answer=n - 1)
    vs = make_variants({"name": "revas_reorder"}, question, seed=0)
    assert len(vs) == n and [v.variant_id for v in vs] == [f"reorder_{j}" for j in range(n)]
    assert vs[0].option_order == tuple(range(n)) and vs[0].kind == "original"
    assert {v.kind for v in vs[1:]} == {"reorder"}
    assert len({v.option_order for v in vs}) == n
    check_mcq(question, vs)
    assert len(make_variants({"name": "revas_reorder", "k": 6}, q(3), seed=0)) == 6  # all 3! orders
    with pytest.raises(UserError, match="variants.k"):
        make_variants({"name": "revas_reorder", "k": 7}, q(3), seed=0)


@pytest.mark.parametrize(
    "n, expected", [(4, 4 + 6 + 8 + 10 + 3 + 2), (5, 5 + 6 + 8 + 10 + 3 + 2), (2, 2 + 6 + 8 + 10 + 3)]
)
def test_option_count_levels(n, expected):
    question = q(n, answer=0)
    vs = make_variants({"name": "revas_option_count"}, question, seed=0)
    assert len(vs) == expected
    check_mcq(question, vs)
    by_level = {}
    for v in vs:
        assert v.level == v.n_options
        by_level.setdefault(v.level, []).append(v)
    for level, group in by_level.items():
        assert len(group) == level  # k = n orders at level n
        assert len({v.option_texts for v in group}) == level  # distinct displayed orders
        first = group[0]
        assert first.variant_id.endswith("_0")
        if level > n:
            assert first.kind == "more_options" and first.option_order[:n] == tuple(range(n))
            assert first.option_order[n:] == (FILLER,) * (level - n)
        elif level < n:
            assert first.kind == "fewer_options" and list(first.option_order) == sorted(first.option_order)
            assert question.answer in first.option_order
        else:
            assert first.kind == "original"
    base = make_variants({"name": "revas_reorder"}, question, seed=0)
    assert [v.option_order for v in by_level[n]] == [v.option_order for v in base]  # shared prompts with reorder


def test_fillers_never_repeat_an_option():
    question = q(options=("Vorplex", "Quindle", "x", "y"), answer=2)
    for v in make_variants({"name": "revas_option_count", "levels": [10]}, question, seed=0):
        assert len(set(v.option_texts)) == v.n_options


def test_option_count_refuses_a_level_below_two():
    with pytest.raises(UserError, match="variants.levels"):
        make_variants({"name": "revas_option_count", "levels": [1]}, q(), seed=0)


def test_nota_replaces_the_correct_option():
    question = q(4, answer=1)
    vs = make_variants({"name": "revas_nota"}, question, seed=0)
    assert len(vs) == 4 and {v.kind for v in vs} == {"nota_replaces_correct"}
    assert vs[0].option_order == (0, 2, 3, NOTA) and vs[0].correct_label == "D"
    for v in vs:
        assert question.answer not in v.option_order and v.option_texts[v.correct_slot] == NOTA_TEXT
    assert len({v.option_order for v in vs}) == 4
    check_mcq(question, vs)


def test_true_false_one_question_per_option():
    question = q(4, answer=2)
    vs = make_variants({"name": "revas_true_false"}, question, seed=0)
    assert Counter(v.fmt for v in vs) == {"mcq": 4, "true_false": 4}
    tf = [v for v in vs if v.fmt == "true_false"]
    assert [v.asked_option for v in tf] == [0, 1, 2, 3]
    assert [v.correct_label for v in tf] == ["No", "No", "Yes", "No"]
    assert all(
        v.option_order == (v.asked_option,) and v.option_texts == (question.options[v.asked_option],) for v in tf
    )
    assert len(make_variants({"name": "revas_true_false", "with_reorder": False}, question, seed=0)) == 4


def test_multi_select_and_misleading():
    question = q(4, answer=2)
    original, multi = make_variants({"name": "revas_multi_select"}, question, seed=0)
    assert original.kind == "original" and multi.fmt == "multi_select" and multi.correct_slots == (2,)
    (v,) = make_variants({"name": "revas_misleading", "source_run": "r", "source_answers": {"q1": 3}}, question, seed=0)
    assert v.option_order == (0, 1, 2, FILLER) and v.asked_option == 3 and v.option_texts[3] in FILLER_TEXTS
    assert v.correct_label == "C"
    assert (
        make_variants({"name": "revas_misleading", "source_run": "r", "source_answers": {"q9": 3}}, question, seed=0)
        == []
    )
    with pytest.raises(UserError, match="variants.source_run"):
        make_variants({"name": "revas_misleading", "source_run": None}, question, seed=0)


def test_wrong_answers_from_source_records():
    table = records(
        [
            trial("a", answer=1),
            trial("b", answer=0),
            trial("c", answer=None),
            trial("d", answer=2, kind="nota", variant_id="nota_1"),
        ]
    )
    assert wrong_answers(table) == {"a": 1}
    with pytest.raises(UserError, match="original order"):
        wrong_answers(table[table.variant_kind == "nota"])


# every REVAS set of the code that makes its variants from the question alone (the misleading second stage reads a
# finished run's answers: its own tests above)
REVAS_GENERATORS = sorted(name for name in VARIANT_SETS if name.startswith("revas_") and name != "revas_misleading")


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(2, 7), st.data(), st.integers(0, 10_000), st.sampled_from(REVAS_GENERATORS))
def test_generators_keep_the_answer_and_are_seeded(n, data, seed, name):
    question = q(n, answer=data.draw(st.integers(0, n - 1)), qid=f"q{seed}")
    vs = make_variants({"name": name}, question, seed=seed)
    assert vs == make_variants({"name": name}, question, seed=seed)
    check_mcq(question, [v for v in vs if v.fmt != "true_false"])
    for v in vs:
        if v.fmt == "true_false":
            assert (v.correct_label == "Yes") == (v.asked_option == question.answer)
    groups = {}
    for v in vs:
        if v.fmt == "mcq":
            groups.setdefault((v.kind if v.kind not in ("original", "reorder") else "base", v.level), []).append(
                v.option_texts
            )
    for orders in groups.values():
        assert len(set(orders)) == len(orders)  # orders of one list are distinct


# --- formats: prompts, parsers, oracle -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, slot",
    [
        ("Yes", 0),
        ("no", 1),
        ("**Yes**, because", 0),
        ("False.", 1),
        ("Incorrect", 1),
        ("I think yes.", 0),
        ("The answer is: No", 1),
        ("Yes or no", None),
        ("maybe", None),
        ("", None),
        ("yes no", 0),
    ],
)
def test_parse_yes_no(text, slot):
    assert parse_yes_no_with_rule(text)[0] == slot


@pytest.mark.parametrize(
    "text, slots",
    [
        ("A, C", (0, 2)),
        ("A and C", (0, 2)),
        ("AC", (0, 2)),
        ("C", (2,)),
        ("(B), (D)", (1, 3)),
        ("a, c", (0, 2)),
        ("Answer: B and D.", (1, 3)),
        ("The correct options are A and B", (0, 1)),
        ("I think A and D", (0, 3)),
        ("A, E", None),
        ("A or B", None),
        ("none", None),
        ("", None),
    ],
)
def test_parse_label_set(text, slots):
    assert parse_label_set_with_rule(text, ("A", "B", "C", "D"))[0] == slots


def test_numeric_label_sets():
    assert parse_label_set_with_rule("1, 3", ("1", "2", "3"))[0] == (0, 2)


def test_format_requests_and_prompts():
    question = q(4, answer=2)
    template = PromptTemplate(name="plain", template="Question: {question}\n{choices}\nAnswer:", label_style="(A)")
    tf = [v for v in make_variants({"name": "revas_true_false"}, question, seed=0) if v.fmt == "true_false"]
    requests = [TRUE_FALSE.request(template, question, v, seed=1) for v in tf]
    assert all(r.labels == TF_LABELS and r.fmt == "true_false" for r in requests)
    assert len({r.prompt for r in requests}) == 4 and "option 3" in requests[3].prompt
    assert [v.correct_slot for v in tf] == [1, 1, 0, 1]
    multi = make_variants({"name": "revas_multi_select"}, question, seed=0)[1]
    prompt = MULTI_SELECT.render(template, question, multi)
    assert "(A) option 0" in prompt and "select all correct options" in prompt


def test_oracle_answers_yes_no_and_label_sets():
    backend = SimulatedBackend(SimulatedSettings(success_rate=0.8))
    yes = [
        FormatRequest(prompt="p", labels=TF_LABELS, options=TF_LABELS, seed=i, key=f"q{i}/t", fmt="true_false")
        for i in range(400)
    ]
    labels = ("A", "B", "C", "D")
    multi = [
        FormatRequest(prompt="p", labels=labels, options=tuple("abcd"), seed=i, key=f"q{i}/m", fmt="multi_select")
        for i in range(400)
    ]
    # the answer key as the answering loop tells it (src/answering/items.py `answer_key`): Yes, and a set with B
    backend.know(
        {r.key: KnownAnswer(correct_slot=0) for r in yes}
        | {r.key: KnownAnswer(correct_slot=1, names_a_set=True) for r in multi}
    )
    outs = backend.generate(yes, SamplingParams())
    assert {o[0] for o in outs} == {"Yes", "No"}
    assert abs(sum(o[0] == "Yes" for o in outs) / 400 - 0.8) < 0.06  # 0.06: 3 binomial sds at n=400
    sets = [parse_label_set_with_rule(o[0], labels)[0] for o in backend.generate(multi, SamplingParams())]
    assert all(s is not None for s in sets)
    assert sum(1 in s for s in sets) / 400 > 0.9  # the correct label is usually named
    assert 0.1 < sum(len(s) > 1 for s in sets) / 400 < 0.9  # sometimes with others


def test_records_of_each_format():
    from src.answer_formats import FORMATS
    from src.answering.trials import Answer, Item, to_records

    question = q(4, answer=2)
    template = PromptTemplate(name="plain", template="Question: {question}\n{choices}\nAnswer:")
    tf_yes, tf_no = [v for v in make_variants({"name": "revas_true_false"}, question, seed=0) if v.fmt == "true_false"][
        2:4
    ]
    multi = make_variants({"name": "revas_multi_select"}, question, seed=0)[1]
    items = [Item(question, v, FORMATS[v.fmt].request(template, question, v, seed=0)) for v in (tf_yes, tf_no, multi)]
    answers = [[Answer("Yes", 0, label_probs=(0.7, 0.3))], [Answer("Yes", 0)], [Answer("A, C", None, slots=(0, 2))]]
    table = to_records(items, answers, run_info={"scoring": "logprob"})
    yes, no, sel = table.to_dict("records")
    assert (yes["fmt"], yes["correct_label"], yes["parsed_label"], yes["correct"], yes["chosen_option"]) == (
        "true_false",
        "Yes",
        "Yes",
        True,
        2,
    )
    assert (no["correct_label"], no["correct"], no["asked_option"], no["correct_option"]) == ("No", False, 3, 2)
    assert yes["label_probs"] == [0.7, 0.3] and yes["n_options"] == 1
    assert sel["parsed_labels"] == ["A", "C"] and sel["chosen_options"] == [0, 2] and sel["parsed_label"] == "A, C"
    assert not sel["correct"] and pd.isna(sel["chosen_option"]) and sel["scoring"] == "generate"
    assert all(r["perm_sets"] == [] for r in (yes, no, sel))
