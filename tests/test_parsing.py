"""parse_with_rule on completions that real models emit: the CoRA first-token rule, its fallbacks, and INVALID."""

from __future__ import annotations

import pytest

from src.core.parsing import Parse, parse_with_rule

ABCD = ("A", "B", "C", "D")
NUM = ("1", "2", "3", "4")
NINE = tuple("ABCDEFGHI")
CAPITALS = ("Lyon", "Paris", "Marseille", "Nice")

CASES = [
    # (raw completion, labels, options, expected slot or None = INVALID)
    # -- the CoRA rule: first token of the first line, punctuation stripped
    ("B", ABCD, None, 1),
    ("B.", ABCD, None, 1),
    ("(B)", ABCD, None, 1),
    ("**B**", ABCD, None, 1),
    ("'C' (without quotes)", ABCD, None, 2),
    ('"D"\n\nStep 1: the question asks ...', ABCD, None, 3),
    ("B) Paris", ABCD, CAPITALS, 1),
    ("B)Paris", ABCD, CAPITALS, 1),
    ("A. Lyon is in France but it is not the capital.", ABCD, CAPITALS, 0),
    ("\n\n  C\nExplanation: Marseille is a port.", ABCD, CAPITALS, 2),
    ('  "A"', ABCD, None, 0),
    ("[D]", ABCD, None, 3),
    ("C: Marseille", ABCD, CAPITALS, 2),
    ("b", ABCD, None, 1),
    ("b) Paris", ABCD, CAPITALS, 1),
    ("B\n\nOption A is wrong because Lyon is not the capital.", ABCD, CAPITALS, 1),
    ("** B**", ABCD, None, 1),
    # -- numeric labels
    ("2", NUM, None, 1),
    ("(3)", NUM, None, 2),
    ("4. Nice", NUM, CAPITALS, 3),
    ("Answer: 1", NUM, None, 0),
    # -- fallbacks when the model ignores the format
    ("Answer: B", ABCD, None, 1),
    ("**Answer:** (C)", ABCD, None, 2),
    ("The answer is B", ABCD, None, 1),
    ("The correct answer is D) Nice.", ABCD, CAPITALS, 3),
    ("Sure! The answer is: A", ABCD, None, 0),
    ("Final answer:\n\nC", ABCD, None, 2),
    ("I think the answer is B.", NINE, None, 1),
    ("Option C is correct because Marseille ...", ABCD, CAPITALS, 2),
    ("I would choose (A).", ABCD, None, 0),
    ("Answer: b.", ABCD, None, 1),
    # -- a strong phrase ("Final answer", JSON) outranks a plain one before it (not at the start of the text)
    ("Let me think. The answer is B? Let me check again. Final answer: D", ABCD, CAPITALS, 3),
    ("The answer is B? Let me check again. Final answer: D", ABCD, CAPITALS, 3),  # the later, final answer wins
    (
        "A. Lyon\nB. Paris\nC. Marseille\nD. Nice\nThe answer is B? Let me check again. Final answer: D",
        ABCD,
        CAPITALS,
        3,
    ),  # after a restated option list: the phrases of both tiers weighed together
    ('Hmm. Answer: A ... no.\n{"answer": "C"}', ABCD, None, 2),
    ("I'd go with B, but the final answer is (C).", ABCD, None, 2),
    # -- the option text instead of a letter
    ("Paris", ABCD, CAPITALS, 1),
    ("paris.", ABCD, CAPITALS, 1),
    ("The answer is Paris", ABCD, CAPITALS, 1),
    ("5", ABCD, ("3", "4", "5", "6"), 2),
    # -- INVALID
    ("", ABCD, None, None),
    ("   \n\n", ABCD, None, None),
    ("E", ABCD, None, None),
    ("(E) none of these", ABCD, None, None),
    ("The answer is E.", ABCD, None, None),
    ("5", NUM, None, None),
    ("A or B", ABCD, None, None),
    ("**A** or **B**", ABCD, None, None),
    ("A, C", ABCD, None, None),
    ("A/B", ABCD, None, None),
    ("The answer is A or B.", ABCD, None, None),
    ("Either A or C could be right.", ABCD, None, None),
    ("I'm sorry, but I can't help with that.", ABCD, None, None),
    ("I cannot answer this question.", NINE, None, None),
    ("As an AI language model, I do not have opinions.", ABCD, None, None),
    ("the", ABCD, CAPITALS, None),
    ("a cat sat on the mat", ABCD, None, None),
    ("Rome", ABCD, CAPITALS, None),
    ("Paris", ABCD, ("Paris", "Paris", "Lyon", "Nice"), None),  # two slots show the text
]


@pytest.mark.parametrize(("raw", "labels", "options", "expected"), CASES, ids=[repr(c[0])[:40] for c in CASES])
def test_parse_answer(raw, labels, options, expected):
    assert parse_with_rule(raw, labels, options).slot == expected


def test_result_is_a_shown_slot_or_none():
    for raw, labels, options, _ in CASES:
        got = parse_with_rule(raw, labels, options).slot
        assert got is None or 0 <= got < len(labels)


def test_a_dangling_connective_after_a_phrase_means_cut_only_in_a_cut_text():
    """ "... the answer is B," ends a complete answer (B); cut by max_new_tokens it may have gone on "B, C"."""
    assert parse_with_rule("I think the answer is B,", ABCD, None).slot == 1
    assert parse_with_rule("I think the answer is B or", ABCD, None).slot == 1
    for raw in ("I think the answer is B,", "I think the answer is B or"):
        assert parse_with_rule(raw, ABCD, None, truncated=True) == Parse(None, "truncated")
    # a complete phrase before the cut one does not decide: the cut one may have gone on "C or D" (a hedge)
    for raw in ("I think the answer is B. So the answer is C or", "I think the answer is B. So the answer is B or"):
        assert parse_with_rule(raw, ABCD, None, truncated=True) == Parse(None, "truncated")
    # not cut: B, and B then C is a conflict
    assert parse_with_rule("I think the answer is B. So the answer is B or", ABCD, None).slot == 1
    assert parse_with_rule("I think the answer is B. So the answer is C or", ABCD, None).rule == "invalid_conflict"


@pytest.mark.parametrize(
    ("raw", "truncated", "expected"),
    [
        ("The answer is B. Wait, actually it's C.", False, (2, "self_correction")),
        ("<think>hmm</think>B. On second thought, D.", False, (3, "reasoning_stripped+self_correction")),
        ("Answer: B\nCorrection: the answer is C.", False, (2, "self_correction")),
        ("The answer is B, or maybe C.", False, (None, "invalid_hedge")),  # never committed to C
        ("B. Wait, maybe C?", False, (None, "invalid_hedge")),
        ("The answer is B. Wait, actually it's", True, (None, "truncated")),  # the revised answer was cut
        ("B. Actually, Paris has been the capital since 987.", False, (1, "first_token")),  # revises nothing
        ("The answer is B. Wait, yes, it's B.", False, (1, "answer_phrase")),  # the same answer: no revision
        ("No, it's C", False, (2, "answer_phrase")),  # nothing before it to revise
    ],
)
def test_self_correction_last_committed_answer_wins(raw, truncated, expected):
    got = parse_with_rule(raw, ABCD, CAPITALS, truncated=truncated)
    assert (got.slot, got.rule) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("The answer is A.\nFinal answer: B", 1),  # a strong cue beats the first line's plain phrase
        ("Answer: A. Final answer: B", 1),
        ("I think the answer is A. Final answer: B", 1),
        ("Final answer: B. Wait, actually it's C.", 2),  # a revision after the strong cue still wins
    ],
)
def test_phrase_tiers_hold_beside_revisions(raw, expected):
    assert parse_with_rule(raw, ABCD, CAPITALS).slot == expected


@pytest.mark.parametrize(
    ("raw", "truncated", "expected"),
    [
        ("   \n", True, Parse(None, "truncated")),  # nothing but the cut: cut, not an empty answer
        ("I think the answer is b.", False, Parse(1, "answer_phrase")),  # a lowercase label as "b." counts
        ("I think the answer is E.", False, Parse(None, "invalid_out_of_range")),
        ("I think the answer is A or B.", False, Parse(None, "invalid_hedge")),
    ],
)
def test_answer_phrases_say_why_they_are_invalid(raw, truncated, expected):
    assert parse_with_rule(raw, ABCD, None, truncated=truncated) == expected
