"""Options that refer to other options, NOTA beside a none-like option and duplicate texts (METRICS.md,
"Validity rules"): the detector, the option_refs policies in every variant set, and the variants of
ordinary questions unchanged from before the rules existed."""

import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from src.common.errors import UserError
from src.core.questions import Question
from src.variants import (
    FILLER,
    NOTA,
    VARIANT_SETS,
    VariantPlan,
    duplicate_option_groups,
    has_option_refs,
    make_variants,
    option_refs,
    plan_variants,
)
from src.variants.revas import FILLER_TEXTS, fillers_for

from .conftest import DATA_DIR, REPO, examples, needs_data


def q(options, answer=0, qid="q1", question="Which?"):
    return Question(id=qid, question=question, options=tuple(options), answer=answer)


ALL_SETS = sorted(set(VARIANT_SETS) - {"revas_misleading"})


def cfg(name):
    out = {"name": name}
    if name == "perm_all":
        out["sets"] = ("original", "oi", "cyclic", "random2", "randomL", "full")
    return out


def honours(question, variant):
    """Why `variant` breaks a validity rule for `question`, or None (`original` is the benchmark's own)."""
    refs = option_refs(question)
    a = question.n_options
    if variant.kind == "original":
        return None
    if variant.fmt == "true_false":
        return "alone" if refs[variant.asked_option].kind else None
    order = variant.option_order
    if any(r.none_like for r in refs) and NOTA in order:
        return "second none-like option"
    for slot, i in enumerate(order):
        if i < 0:
            continue
        r = refs[i]
        if r.kind == "above":
            if slot != len(order) - (a - i):
                return f"{question.options[i]!r} moved to slot {slot}"
            if not r.refs <= set(order):
                return f"{question.options[i]!r} lost an option it covers"
        if r.kind == "letters":
            if slot != len(order) - (a - i) and i not in r.refs:
                return f"{question.options[i]!r} moved to slot {slot}"
            if any(j not in order or order.index(j) != j for j in r.refs):
                return f"{question.options[i]!r} names another option now"
    for group in duplicate_option_groups(question):
        if sum(i in group for i in order) > 1:
            return "duplicate text shown twice"
    return None


# --- the detector ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, quantifier, none_like",
    [
        ("All of the above", "all", False),
        ("all of the above.", "all", False),
        ("NONE OF THE ABOVE", "none", True),
        ("None of these", "none", True),
        ("None of these answers", "none", True),
        ("All the above", "all", False),
        ("Both of the above", "both", False),
        ("Neither of these.", "neither", True),
        ("All of these options.", "all", False),
        ("none of above", "none", True),
        ("Any of the above", "any", False),
        ("All of the above are correct.", "all", False),
        ("All of them", "all", False),
        ("Both of them", "both", False),
        ("None of the options given is correct", "none", True),
        ("Both", "both", False),
        ("Neither", "neither", True),
        ("d)\tnone of the above", "none", True),
        # the sentence goes on (MMLU nutrition, conceptual_physics, security_studies, high_school_physics)
        ("All of the above were among the causes.", "all", False),
        ("None of these for the moon does not rotate", "none", True),
        ("All of these options. To make non-compliance too costly ...", "all", False),
        ("Any 2 of the above values", "any", False),
        ("None of the above - HIV/AIDS is a traditional issue.", "none", True),
        ("Neither of the above, because x", "neither", True),
    ],
)
def test_block_references(text, quantifier, none_like):
    question = q(["red", "green", text] if quantifier in ("both", "neither") else ["red", "green", "blue", text])
    ref = option_refs(question)[-1]
    assert (ref.kind, ref.quantifier, ref.none_like) == ("above", quantifier, none_like)
    assert ref.refs == frozenset(range(question.n_options - 1))


@pytest.mark.parametrize(
    "text, named, quantifier",
    [
        ("A and B", {0, 1}, "and"),
        ("both A and B", {0, 1}, "and"),
        ("Both A and C.", {0, 2}, "and"),
        ("neither A nor B", {0, 1}, "neither"),
        ("A, B and C", {0, 1, 2}, "and"),
        ("A, B, and C", {0, 1, 2}, "and"),
        ("A & B", {0, 1}, "and"),
        ("A or B", {0, 1}, "or"),
        ("either A or B", {0, 1}, "or"),
        ("only A", {0}, "only"),
        ("A and B only", {0, 1}, "and"),
        ("1 and 2", {0, 1}, "and"),
        ("both 1 and 3", {0, 2}, "and"),
        ("(1) and (2)", {0, 1}, "and"),
        ("(a) and (b)", {0, 1}, "and"),
        ("Both (a) and (b)", {0, 1}, "and"),
        ("Neither (a) nor (b).", {0, 1}, "neither"),
        ("(A), (B), and (C)", {0, 1, 2}, "and"),
        ("Options A and B", {0, 1}, "and"),
        ("Both A & C", {0, 2}, "and"),
        ("Both option 2 and 3", {1, 2}, "and"),
        ("a. and c. above", {0, 2}, "and"),
        ("Both A and C are correct", {0, 2}, "and"),
        ("(A) and (B) both in the same way.", {0, 1}, "and"),
        ("(A), (B), and (C) are part of the theory", {0, 1, 2}, "and"),
        ("neither A nor B, since x", {0, 1}, "neither"),
        ("1 and 3 only", {0, 2}, "and"),
        ("All of (a) to (c) are disadvantages.", {0, 1, 2}, "and"),
        ("all of 1-3", {0, 1, 2}, "and"),
        ("Any of A-C", {0, 1, 2}, "or"),
    ],
)
def test_letter_references(text, named, quantifier):
    question = q(["Mercaptan", "Silicone", "Reversible hydrocolloid", text, "Agar"])
    ref = option_refs(question)[3]
    assert (ref.kind, set(ref.refs), ref.quantifier) == ("letters", named, quantifier)
    assert ref.none_like == (quantifier == "neither")


def test_all_except_speaks_of_every_other_option():
    ref = option_refs(q(["x", "y", "z", "all except C"]))[3]
    assert ref.kind == "letters" and ref.quantifier == "except" and ref.refs == {0, 1, 2}


@pytest.mark.parametrize(
    "options",
    [
        ["A. Lincoln", "G. Washington", "T. Jefferson", "J. Adams"],
        ["Vitamin A and B12", "Vitamin C", "Vitamin D", "Iron"],
        ["A and C", "B6 and B12", "B6 and D", "B12 and E"],  # vitamins (MMLU human_aging 14)
        ["1 and 2", "1 and 0.5", "2 and -0.5", "1 and -3"],  # roots (MMLU econometrics 19)
        ["1 only", "2 only", "0 and 1 only", "0, 1, and 2 only"],  # dimensions
        [
            "A and B only.",
            "A and C only.",
            "B and C only.",
            "A B and C.",
        ],  # every option a label list: the stem's items
        ["I only", "II only", "I and III", "I, II, and III"],  # Roman numerals: the stem's statements
        ["ab", "cd", "bd", "ac"],
        ["a,c,d,b", "b,c,a,d", "d,a,c,b", "c,a,b,d"],  # sequences of the stem's items
        ["E and F", "x", "y", "z"],  # names options that do not exist
        ["AML", "ALL", "CML", "CLL"],  # leukaemias, not "all"
        ["All the King's Men", "above average", "None of the offspring will be affected", "Both plans are random"],
        ["guilty of both larceny and conspiracy", "neither the burden of production nor of persuasion", "x", "y"],
        # near-misses with trailing words: the question's subject, articles, content that looks like labels
        ["none of them are successful.", "some, but not all of them are successful.", "all are successful.", "x"],
        ["Only a single virus", "Having 5 genera", "Only three viruses", "x"],
        ["a molten core", "fast rotation", "an atmosphere", "both a molten core and fast rotation"],
        ["all a part of one body.", "all a part of God.", "x", "y"],
        ["Both are concerned with the law in action.", "Both are anti-formalist.", "x", "y"],
        [
            "Only the maker of the car and the retailer.",
            "Only the maker of the car.",
            "Only the retailer.",
            "All three defendants.",
        ],
        ["1,2-dichlorobenzene", "1,3-dichlorobenzene", "2,4-dichlorobenzene", "1,4-dichlorobenzene"],
        ["(1, 6)", "(-1, 4)", "(3, 2)", "(-4, 3)"],
    ],
)
def test_not_references(options):
    assert not has_option_refs(q(options))


def test_letters_the_question_uses_as_names_are_not_references():
    stem = "Two events A and B each have a nonzero probability. If A and B are independent, which is true?"
    options = [
        "P(A and B) = P(A) P(B)",
        "A and B may or may not be mutually exclusive.",
        "A and B must be mutually exclusive.",
        "x",
    ]
    assert not has_option_refs(q(options, question=stem))
    assert option_refs(q(options, question="Which is true?"))[1].kind == "letters"


def test_counted_reference_only_beside_single_options():
    structures = ["the neural tube.", "ectomesenchymal cells.", "dental enamel.", "all three structures."]
    assert option_refs(q(structures))[3].kind == "above"
    assert not has_option_refs(q(["x", "y", "z", "All three steps are endothermic."]))  # more words: a statement
    assert not has_option_refs(q(["x", "y", "z", "all three structures."], question="Name the three structures"))


def test_labels_enumerated_in_the_question_are_its_statements():
    stem = "Which are indications? a) Rheumatic fever b) Nephritis c) Carrier state"
    assert not has_option_refs(q(["a and b", "b and c", "a and c", "Quinsy"], question=stem))
    assert option_refs(q(["Quinsy", "Sepsis", "a and b", "Abscess"]))[2].kind == "letters"


def test_none_like_and_bare_none():
    refs = option_refs(q(["1", "2", "3", "None"]))
    assert refs[3].none_like and refs[3].kind is None  # a value, free to move
    block = option_refs(q(["Thumb sucking", "Tongue thrusting", "Both", "None"]))
    assert [(r.kind, r.none_like) for r in block] == [(None, False), (None, False), ("above", False), ("above", True)]


def test_duplicate_groups():
    assert duplicate_option_groups(q(["Paris", "Rome", " Paris ", "Oslo", "Rome"])) == [(0, 2), (1, 4)]
    assert duplicate_option_groups(q(["Bb", "bb", "BB"])) == []  # case counts: genotypes are different options
    assert duplicate_option_groups(q(["a", "b"])) == []


@pytest.mark.slow
@needs_data
def test_detector_counts_on_the_shipped_data():
    """METRICS.md: 644 of 14,042 MMLU test questions, ~5-6% of MMLU-Redux and MedMCQA."""
    from src.benchmarks import load_benchmark

    shares = {}
    for name in ("mmlu", "mmlu_redux", "medmcqa"):
        questions = load_benchmark(name, path=None, data_dir=str(DATA_DIR))
        shares[name] = (sum(map(has_option_refs, questions)), len(questions))
    # measured 691 (671 before references followed by more words were read)
    assert shares["mmlu"][1] == 14042 and 640 <= shares["mmlu"][0] <= 720
    assert 0.05 <= shares["mmlu_redux"][0] / shares["mmlu_redux"][1] <= 0.062  # measured 337 / 5700 (326 before)
    assert 0.055 <= shares["medmcqa"][0] / shares["medmcqa"][1] <= 0.07  # measured 273 / 4183


# --- keep_rules in every variant set ----------------------------------------------------------------------

NOTA_LAST = q(["red", "green", "blue", "None of the above"], answer=1, qid="nota_last")
ALL_LAST = q(["red", "green", "blue", "All of the above"], answer=3, qid="all_last")
ALL_WRONG = q(["red", "green", "blue", "All of these"], answer=0, qid="all_wrong")
BOTH = q(["ejecta", "raised rims", "central peaks", "Both A and B"], answer=2, qid="both")
BOTH_RIGHT = q(["ejecta", "raised rims", "central peaks", "A and C only", "none"], answer=3, qid="both_right")
PAIR = q(["the animal.", "the wider effects.", "both A and B", "neither A nor B"], answer=0, qid="pair")
DUP = q(["Paris", "Rome", "Paris ", "Oslo"], answer=1, qid="dup")
HAND_MADE = [NOTA_LAST, ALL_LAST, ALL_WRONG, BOTH, BOTH_RIGHT, PAIR, DUP]


@pytest.mark.parametrize("name", ALL_SETS)
@pytest.mark.parametrize("question", HAND_MADE, ids=lambda x: x.id)
def test_every_set_honours_the_rules(name, question):
    plan = plan_variants(cfg(name), question, seed=0)
    assert isinstance(plan, VariantPlan)
    for v in plan.variants:
        assert honours(question, v) is None, (v.variant_id, v.option_order, honours(question, v))
        if v.fmt != "true_false":
            target = NOTA if v.kind == "nota_replaces_correct" else question.answer
            assert v.option_order[v.correct_slot] == target
    assert len({v.variant_id for v in plan.variants}) == len(plan.variants)
    every = make_variants(cfg(name), question, seed=0)
    if not name.startswith("perm"):
        assert {v.variant_id for v in plan.variants} <= {v.variant_id for v in every}  # ids as without the rules
    assert len(plan.variants) + sum(plan.excluded.values()) == len(every)  # every variant left out is counted
    assert any(v.kind == "original" for v in plan.variants) or name in ("revas_nota", "perm_random2", "perm_randomL")


def test_of_the_above_stays_last_and_shuffles_move_free_options():
    plan = plan_variants({"name": "cora"}, ALL_WRONG, seed=0)
    shuffled = next(v for v in plan.variants if v.kind == "shuffled")
    assert shuffled.option_order[-1] == 3 and shuffled.option_order != (0, 1, 2, 3)
    assert plan.excluded == {"option_refs": 8}  # NOTA for red/green/blue (2 each) and the pair with "All of these"
    ids = {v.variant_id for v in plan.variants}
    assert "nota_2" in ids and "decoupled_0" in ids and "decoupled_2" not in ids
    assert next(v for v in plan.variants if v.variant_id == "nota_2").option_order == (0, 1, 2, NOTA)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("perm_cyclic", [(0, 1, 2, 3), (1, 2, 0, 3), (2, 0, 1, 3)]),
        ("perm_oi", [(0, 1, 2, 3), (2, 1, 0, 3)]),
        ("perm_full", [(0, 1, 2, 3), (0, 2, 1, 3), (1, 0, 2, 3), (1, 2, 0, 3), (2, 0, 1, 3), (2, 1, 0, 3)]),
    ],
)
def test_permutation_sets_over_the_free_options(name, expected):
    plan = plan_variants({"name": name}, NOTA_LAST, seed=0)
    assert [v.option_order for v in plan.variants] == expected
    assert [v.memberships[0][1] for v in plan.variants] == list(range(len(expected)))
    full = {"perm_cyclic": 4, "perm_oi": 2, "perm_full": 24}[name]
    assert plan.excluded == ({"option_refs": full - len(expected)} if full > len(expected) else {})


def test_random_sets_sample_the_free_options():
    from src.variants.permutations import random_permutations

    plan = plan_variants({"name": "perm_randomL"}, NOTA_LAST, seed=0)
    assert [v.option_order[:3] for v in plan.variants] == random_permutations(3, 3)
    assert {v.option_order[3] for v in plan.variants} == {3} and plan.excluded == {"option_refs": 1}


@pytest.mark.parametrize("block", ["All of the above", "None of the above"])
def test_of_the_above_before_an_ordinary_option_freezes_every_order(block):
    """ "... of the above" in the second-to-last slot with an ordinary option after it: the last option is not
    "above" it in the original, and no other order keeps what it says, so every permutation set is the
    original order alone and the rest is counted; at the end of the list the options above it shuffle."""
    options = ["green", "blue", "red", block, "teal"]
    before_last = q(options, answer=4, qid="before_last")
    for name, total in (("perm_cyclic", 5), ("perm_random2", 2), ("perm_randomL", 5), ("perm_full", 120)):
        plan = plan_variants({"name": name}, before_last, seed=0)
        assert [v.option_order for v in plan.variants] == [(0, 1, 2, 3, 4)], name
        assert plan.excluded == {"option_refs": total - 1}, name
    last = q(["green", "blue", "red", "teal", block], answer=0, qid="last")
    cyclic = plan_variants({"name": "perm_cyclic"}, last, seed=0)
    assert len(cyclic.variants) == 4 and all(v.option_order[-1] == 4 for v in cyclic.variants)


def test_a_positional_reference_keeps_what_it_covers_above_it_and_no_nota_joins_a_block():
    # "None of the above" covers "green" only while green is above it: (1, 0) says nothing of green
    none_right = q(["green", "None of the above", "All of the above"], answer=1, qid="none_right")
    plan = plan_variants({"name": "cora"}, none_right, seed=0)
    assert [v.option_order for v in plan.variants] == [(0, 1, 2)]
    assert plan.excluded == {"option_refs": 5, "has_nota": 8}
    # "All of these" (the answer) beside NOTA would call NOTA right too: only the lists without NOTA are shown
    all_right = q(["pink", "All of the above", "All of these"], answer=2, qid="all_right")
    plan = plan_variants({"name": "cora"}, all_right, seed=0)
    assert [v.option_order for v in plan.variants] == [(0, 1, 2), (0, 2)] and plan.excluded == {"option_refs": 12}


@pytest.mark.parametrize("name", ALL_SETS)
def test_a_reference_in_the_first_slot_is_honoured(name):
    """Option A ("Neither A nor B", the answer) names itself and B: every list that shows it keeps both labels."""
    first = q(["Neither A nor B", "pink", "blue"], answer=0, qid="first")
    for v in plan_variants(cfg(name), first, seed=0).variants:
        assert honours(first, v) is None, (v.variant_id, v.option_order, honours(first, v))
    assert (0, 2) not in [v.option_order for v in plan_variants({"name": "cora"}, first, seed=0).variants]


def test_letter_references_keep_their_labels():
    # "Both A and B" stays in slot D and names A and B: C alone is free, so the original order is the only one
    plan = plan_variants({"name": "revas_reorder"}, BOTH, seed=0)
    assert [v.option_order for v in plan.variants] == [(0, 1, 2, 3)]
    assert plan.excluded == {"option_refs": 3}
    shuffles = plan_variants({"name": "cora"}, BOTH_RIGHT, seed=0)  # "A and C only" in D, "none" in E: B, E free
    assert {v.option_order[3] for v in shuffles.variants if len(v.option_order) == 5} == {3}
    # two free options (C, E): they trade places, A, B and "Both A and B" stay; NOTA may replace C, E or the reference
    five = q(["ejecta", "raised rims", "central peaks", "Both A and B", "rays"], answer=2, qid="both5")
    plan = plan_variants({"name": "revas_reorder"}, five, seed=0)
    assert [v.option_order for v in plan.variants] == [(0, 1, 2, 3, 4), (0, 1, 4, 3, 2)]
    cora = {v.variant_id: v.option_order for v in plan_variants({"name": "cora"}, five, seed=0).variants}
    assert cora["shuffled_0"] == (0, 1, 4, 3, 2) and cora["nota_3"] == (0, 1, 2, 3, NOTA)
    assert cora["nota_shuffled_3"] == (0, 1, NOTA, 3, 2) and "nota_0" not in cora
    cora = plan_variants({"name": "cora"}, BOTH, seed=0)
    ids = {v.variant_id for v in cora.variants}
    # distractors 0, 1, 3: NOTA replacing A or B breaks "Both A and B", replacing it does not
    assert {"nota_0", "nota_1"}.isdisjoint(ids) and "nota_2" in ids
    # decoupled pairs (C, A), (C, B), (C, "Both A and B"): only the first two show no reference
    assert {"decoupled_0", "decoupled_1"} <= ids and "decoupled_2" not in ids
    fewer = plan_variants({"name": "revas_option_count", "levels": [3, 2]}, BOTH, seed=0)
    for v in fewer.variants:
        if 3 in v.option_order:
            assert v.option_order.index(0) == 0 and v.option_order.index(1) == 1


def test_no_second_nota():
    for name in ("cora", "revas_nota"):
        plan = plan_variants({"name": name}, NOTA_LAST, seed=0)
        assert all(NOTA not in v.option_order for v in plan.variants)
        assert plan.excluded.get("has_nota", 0) == {"cora": 12, "revas_nota": 4}[name]
    pair = plan_variants({"name": "cora"}, PAIR, seed=0)  # "neither A nor B" already says none
    assert all(NOTA not in v.option_order for v in pair.variants) and pair.excluded["has_nota"] == 12


def test_reference_as_the_answer():
    nota = plan_variants({"name": "revas_nota"}, ALL_LAST, seed=0)
    assert nota.variants == [] and nota.excluded == {"option_refs": 4}  # red, green, blue are right too
    tf = plan_variants({"name": "revas_true_false", "with_reorder": False}, BOTH_RIGHT, seed=0)
    assert [v.asked_option for v in tf.variants] == [1, 4]  # A, C are named by the answer, D is the answer
    multi = plan_variants({"name": "revas_multi_select"}, ALL_LAST, seed=0)
    assert [v.kind for v in multi.variants] == ["original"] and multi.excluded == {"option_refs": 1}
    cora = plan_variants({"name": "cora"}, ALL_LAST, seed=0)
    assert {v.kind for v in cora.variants} == {"original", "shuffled"}  # every reduced set drops a referent


def test_fillers_before_the_block_and_only_when_its_truth_holds():
    wrong_all = plan_variants({"name": "revas_option_count", "levels": [6]}, ALL_WRONG, seed=0)
    padded = [v for v in wrong_all.variants if v.level == 6]
    assert len(padded) == 6 and all(v.option_order[-1] == 3 for v in padded)
    assert padded[0].option_order == (0, 1, 2, FILLER, FILLER, 3)
    right_all = plan_variants({"name": "revas_option_count", "levels": [6]}, ALL_LAST, seed=0)
    assert not [v for v in right_all.variants if v.level == 6] and right_all.excluded == {"option_refs": 6}
    none_last = plan_variants({"name": "revas_option_count", "levels": [8]}, NOTA_LAST, seed=0)
    assert all(v.option_order[-1] == 3 for v in none_last.variants if v.level == 8)
    both = q(["x", "y", "Both of these", "Neither of these"], answer=0)
    assert not [
        v for v in plan_variants({"name": "revas_option_count", "levels": [6]}, both, seed=0).variants if v.level == 6
    ]


def test_misleading_replacement_keeps_references():
    answers = {"all_wrong": 1}
    plan = plan_variants({"name": "revas_misleading", "source_run": "r", "source_answers": answers}, ALL_WRONG, seed=0)
    assert plan.variants == [] and plan.excluded == {"option_refs": 1}  # "All of these" would cover a filler
    chose_block = plan_variants(
        {"name": "revas_misleading", "source_run": "r", "source_answers": {"all_wrong": 3}}, ALL_WRONG, seed=0
    )
    assert [v.option_order for v in chose_block.variants] == [(0, 1, 2, FILLER)]


def test_duplicates_only_original_shows_both_copies():
    for name in ALL_SETS:
        plan = plan_variants(cfg(name), DUP, seed=0, option_refs="ignore")
        for v in plan.variants:
            if v.kind != "original" and v.fmt != "true_false":
                assert not {0, 2} <= set(v.option_order), (name, v.variant_id)
        shown_twice = [
            v for v in make_variants(cfg(name), DUP, seed=0) if v.kind != "original" and {0, 2} <= set(v.option_order)
        ]
        assert plan.excluded.get("duplicate_options", 0) == len(shown_twice), name
    cora = plan_variants({"name": "cora"}, DUP, seed=0)
    ids = {v.variant_id for v in cora.variants}  # distractors 0, 2, 3: NOTA must replace a copy
    assert ids >= {"original", "nota_0", "nota_1", "decoupled_0"} and "nota_2" not in ids


def test_policies():
    assert plan_variants({"name": "cora"}, BOTH, seed=0, option_refs="exclude") == VariantPlan(
        [], {"refs_excluded": 20}
    )
    assert plan_variants({"name": "original"}, BOTH, seed=0, option_refs="exclude").excluded == {"refs_excluded": 1}
    ignored = plan_variants({"name": "cora"}, BOTH, seed=0, option_refs="ignore")
    assert ignored == VariantPlan(make_variants({"name": "cora"}, BOTH, seed=0), {})
    plain = q(["a", "b", "c", "d"], answer=2)
    for policy in ("keep_rules", "exclude", "ignore"):
        assert plan_variants({"name": "cora"}, plain, seed=0, option_refs=policy) == VariantPlan(
            make_variants({"name": "cora"}, plain, seed=0), {}
        )
    with pytest.raises(UserError, match=r"config key option_refs: .*; choose keep_rules, exclude or ignore"):
        plan_variants({"name": "cora"}, plain, seed=0, option_refs="drop")
    with pytest.raises(UserError, match="variants"):
        plan_variants({"name": "cora", "bogus": 1}, plain, seed=0)


# --- fillers --------------------------------------------------------------------------------------------


def test_fillers_are_pseudo_words_that_appear_nowhere_in_the_question():
    assert len(FILLER_TEXTS) >= 12 and len(set(FILLER_TEXTS)) == len(FILLER_TEXTS)
    question = q(["Vorplex", "a quindle", "x"], question="Is a brastik bigger?")
    available = fillers_for(question)
    assert not {"Vorplex", "Quindle", "Brastik"} & set(available) and len(available) >= 8
    for v in make_variants({"name": "revas_option_count", "levels": [10]}, question, seed=0):
        assert all(t in available for value, t in zip(v.option_order, v.option_texts) if value == FILLER)


@needs_data
def test_fillers_appear_in_no_benchmark_question():
    from src.benchmarks import load_benchmark

    for name in ("mmlu", "arc_challenge", "medmcqa"):
        for question in load_benchmark(name, path=None, data_dir=str(DATA_DIR)):
            assert len(fillers_for(question)) == len(FILLER_TEXTS), question.id


# --- ordinary questions: the variants of before ---------------------------------------------------------

BEFORE = "8a9684a3def937a94abba1e32905080a182a992a"  # the last commit before the validity rules


def _ordinary_questions():
    import random

    rng = random.Random(7)
    out = []
    for i in range(24):
        n = 2 + i % 5
        out.append(
            Question(
                id=f"s{i}",
                question=f"Pick {i}?",
                options=tuple(f"opt {i}-{j} {rng.random():.3f}" for j in range(n)),
                answer=rng.randrange(n),
            )
        )
    if DATA_DIR.is_dir():
        from src.benchmarks import load_benchmark

        arc = load_benchmark("arc_challenge", path=None, data_dir=str(DATA_DIR), limit=40)
        mmlu = load_benchmark("mmlu", path=None, data_dir=str(DATA_DIR), limit=200)
        out += arc + [x for x in mmlu if not has_option_refs(x) and not duplicate_option_groups(x)][:40]
    return out


DUMP = """
import json, sys
sys.path.insert(0, sys.argv[1])
from src.questions import Question  # old layout: the archived commit's
from src.variants import make_variants
qs = [Question(id=d["id"], question=d["question"], options=tuple(d["options"]), answer=d["answer"])
      for d in json.load(sys.stdin)]
sets = json.loads(sys.argv[2])
out = {}
for name in sets:
    cfg = {"name": name}
    if name == "revas_misleading":
        cfg.update(source_run="r", source_answers={x.id: (x.answer + 1) % x.n_options for x in qs})
    out[name] = [[(v.variant_id, v.kind, list(v.option_order), list(v.option_texts), v.correct_slot, v.fmt, v.level,
                   [list(m) for m in v.memberships], v.asked_option) for v in make_variants(cfg, x, seed=3)]
                 for x in qs]
print(json.dumps(out))
"""


def test_ordinary_questions_get_the_variants_of_before(tmp_path):
    """Questions with no referring option and no duplicate text: plan_variants (every policy) gives exactly what
    make_variants gave at the commit before the rules, filler texts aside (replaced since)."""
    old_layout = ["src/__init__.py", "src/errors.py", "src/questions.py", "src/variants"]  # old layout: BEFORE's paths
    archive = subprocess.run(["git", "-C", str(REPO), "archive", BEFORE, *old_layout], capture_output=True)
    if archive.returncode != 0:
        pytest.skip(f"commit {BEFORE[:8]} not in this checkout's history")
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    questions = _ordinary_questions()
    sets = sorted(set(VARIANT_SETS) - {"perm_all"}) + ["perm_all"]
    payload = json.dumps(
        [{"id": x.id, "question": x.question, "options": list(x.options), "answer": x.answer} for x in questions]
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", DUMP, str(tmp_path), json.dumps(sets)],
        input=payload,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        check=True,
    )
    before = json.loads(proc.stdout)
    counts = Counter()
    for name in sets:
        config = {"name": name}
        if name == "revas_misleading":
            config.update(source_run="r", source_answers={x.id: (x.answer + 1) % x.n_options for x in questions})
        for question, old in zip(questions, before[name]):
            for policy in ("keep_rules", "ignore"):
                plan = plan_variants(config, question, seed=3, option_refs=policy)
                assert plan.excluded == {}
                now = [
                    (
                        v.variant_id,
                        v.kind,
                        list(v.option_order),
                        list(v.option_texts),
                        v.correct_slot,
                        v.fmt,
                        v.level,
                        [list(m) for m in v.memberships],
                        v.asked_option,
                    )
                    for v in plan.variants
                ]
                assert len(now) == len(old), (name, question.id)
                for new_row, old_row in zip(now, old):
                    old_row = list(old_row)
                    texts = [t if value != FILLER else "<filler>" for value, t in zip(new_row[2], new_row[3])]
                    old_texts = [t if value != FILLER else "<filler>" for value, t in zip(old_row[2], old_row[3])]
                    assert (*new_row[:3], texts, *new_row[4:]) == (*old_row[:3], old_texts, *old_row[4:]), (
                        name,
                        question.id,
                    )
                counts[name] += len(now)
    assert all(counts[name] > 0 for name in sets if name != "revas_misleading")


# --- real data ------------------------------------------------------------------------------------------


@needs_data
def test_mmlu_cora_keeps_references():
    from src.benchmarks import load_benchmark

    questions = load_benchmark(
        "mmlu", path=None, data_dir=str(DATA_DIR), options={"subjects": ["moral_disputes", "conceptual_physics"]}
    )
    assert len(questions) == 346 + 235
    left_out: Counter = Counter()
    with_refs = 0
    for question in questions:
        plan = plan_variants({"name": "cora"}, question, seed=0)
        with_refs += has_option_refs(question)
        for v in plan.variants:
            assert honours(question, v) is None, (question.id, v.variant_id, honours(question, v))
        for reason in plan.excluded:
            left_out[reason] += 1
        assert len(plan.variants) + sum(plan.excluded.values()) == 2 + 6 * (question.n_options - 1)
    # the counts the run logs as n_excluded_<reason> (questions with at least one variant left out)
    assert with_refs > 40 and left_out["option_refs"] == with_refs
    assert 0 < left_out["has_nota"] < with_refs
    assert set(left_out) <= {"option_refs", "has_nota", "duplicate_options"}
    print(dict(left_out), with_refs)


POOL = [
    "red",
    "green",
    "blue",
    "teal",
    "pink",
    "All of the above",
    "None of the above",
    "Both A and B",
    "Neither A nor B",
    "A and C",
    "None",
    "All of these",
    "only B",
    "Red",
]


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(POOL), min_size=2, max_size=6, unique=True),
    st.data(),
    st.sampled_from([s for s in ALL_SETS if s not in ("perm_full", "perm_all")] + ["revas_misleading"]),
)
def test_rules_hold_on_any_mix_of_options(options, data, name):
    question = q(options, answer=data.draw(st.integers(0, len(options) - 1)), qid=f"h{len(options)}")
    config = cfg(name)
    if name == "revas_misleading":
        config.update(source_run="r", source_answers={question.id: data.draw(st.integers(0, len(options) - 1))})
    for policy in ("keep_rules", "exclude", "ignore"):
        plan = plan_variants(config, question, seed=data.draw(st.integers(0, 99)), option_refs=policy)
        every = make_variants(config, question, seed=0)
        assert len(plan.variants) + sum(plan.excluded.values()) == len(every)
        assert set(plan.excluded) <= {"option_refs", "has_nota", "duplicate_options", "refs_excluded"}
        for v in plan.variants:
            if policy != "ignore":
                assert honours(question, v) is None, (v.variant_id, v.option_order, honours(question, v))
            if v.fmt != "true_false":
                target = NOTA if v.kind == "nota_replaces_correct" else question.answer
                assert v.option_order[v.correct_slot] == target
                if policy != "ignore":  # no text twice: no second NOTA, no duplicate, no filler equal to an option
                    assert len({" ".join(t.split()) for t in v.option_texts}) == v.n_options or v.kind == "original"


# --- references followed by more words, on the real files ------------------------------------------------

SAMPLE = REPO / "tests" / "data" / "self_reference_sample.jsonl"


@needs_data
def test_hand_checked_sample_agrees_with_the_detector():
    """tests/data/self_reference_sample.jsonl: options of MMLU test, MMLU-Redux and MedMCQA (identifiers only, the
    texts are read from ../shared/data), each judged by hand: a reference to other options or not. Drawn with
    seed 31: every detection with words after the phrase, 30 whole-option block and 25 letter references at
    random; as near-misses every option that opens with a quantifier ("none of them ...", "all ...", "both ...",
    "only ...") or a label-like list ("1,2-dichlorobenzene", "A and B must be ...") the detector leaves alone,
    sampled, plus the cases the rule was decided on."""
    from src.benchmarks import load_benchmark

    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    assert sum(r["self_reference"] for r in rows) >= 80 and sum(not r["self_reference"] for r in rows) >= 80
    questions = {}
    for name in sorted({r["id"].split("/")[0] for r in rows}):
        questions.update((x.id, x) for x in load_benchmark(name, path=None, data_dir=str(DATA_DIR)))
    wrong = []
    for r in rows:
        assert (DATA_DIR / r["file"]).is_file(), r["file"]
        question = questions[r["id"]]
        if (option_refs(question)[r["option"]].kind is not None) != r["self_reference"]:
            wrong.append((r["id"], r["option"], r["pattern"], question.options[r["option"]][:60]))
    assert not wrong


# Option-initial phrases the issue names, found without the detector: a block phrase ("all of the above",
# "none of these" ...) or "both/neither <label> and/nor <label>", each with or without more words.
BLOCK_PHRASE = re.compile(r"^\W*(all|none|both|neither|any|either)(\s+of)?(\s+the)?\s+(above|these)\b", re.I)
PAIR_PHRASE = re.compile(r"^\W*(both|neither)\s+(\(?[a-e]\)?)\s+(and|nor)\s+(\(?[a-e]\)?)(?!\w)", re.I)


@needs_data
def test_mmlu_cora_keeps_option_initial_references_in_every_subject():
    """On the whole MMLU test file with variants=cora: no "all of the above"/"none of these"-style or "both A
    and C"/"neither A nor B" option moves from its slot (its distance from the end of the list), none that says
    "none" is doubled by an added NOTA, and the options a "both A and C" option names keep their labels."""
    from src.benchmarks import load_benchmark

    questions = load_benchmark("mmlu", path=None, data_dir=str(DATA_DIR))
    assert len(questions) == 14042
    seen = Counter()
    for question in questions:
        n = question.n_options
        block = [i for i, o in enumerate(question.options) if BLOCK_PHRASE.match(o)]
        pairs = {i: m for i, o in enumerate(question.options) if (m := PAIR_PHRASE.match(o))}
        if not block and not pairs:
            continue
        seen[question.id.split("/")[1]] += 1
        for v in plan_variants({"name": "cora"}, question, seed=0).variants:
            order = v.option_order
            for i in block:
                if i in order:
                    assert order.index(i) == len(order) - (n - i), (question.id, v.variant_id, question.options[i])
                    none_like = re.match(r"^\W*(none|neither)", question.options[i], re.I)
                    assert not (none_like and NOTA in order), (question.id, v.variant_id, "NOTA beside it")
            for i, m in pairs.items():
                if i in order:
                    assert order.index(i) == len(order) - (n - i), (question.id, v.variant_id, question.options[i])
                    for label in (m.group(2), m.group(4)):
                        j = ord(label.strip("()").casefold()) - ord("a")
                        assert j in order and order.index(j) == j, (question.id, v.variant_id, question.options[i])
                    if m.group(1).casefold() == "neither":
                        assert NOTA not in order, (question.id, v.variant_id, "NOTA beside it")
    assert (sum(seen.values()), len(seen)) == (618, 40)  # questions with such an option, subjects: all checked
