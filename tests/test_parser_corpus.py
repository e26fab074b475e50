"""The answer parsers measured on a corpus of judged completions: tests/data/parser_corpus.jsonl.

Each line is one completion with the verdict a careful human reader gives it (`expected`: a displayed slot,
null for INVALID, or for multi_select the list of slots named) and, on some lines, the rule that must read it
(`rule`: the `parse_rule` a record gets, e.g. `invalid_hedge` for "C. Or maybe B?"). Two sources:

- "smollm2_135m": real completions of the embedded SmolLM2-135M-Instruct under `scoring=generate`
  (max_new_tokens=24; arc_challenge, mmlu, commonsenseqa, synthetic; prompts cora and repetition; the CoRA
  divergent set; REVAS true/false and multi-select), judged by hand. `truncated` there means the completion
  used all 24 new tokens (no end token within them).
- "styled": spellings in the style of public chat and reasoning models ("**Answer:** (C)", `<think>` blocks,
  `\\boxed{B}`, JSON, hedges, refusals, numbered labels up to 10, ...), written and judged by hand.

Run with `-s` to see the per-category table (it is also attached to the test report as `parser_table`):
precision is the share of non-INVALID verdicts that are right, INVALID recall the share of expected-INVALID
completions the parser calls INVALID.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from src.answer_formats import FORMATS as PARSERS

CORPUS = Path(__file__).resolve().parent / "data" / "parser_corpus.jsonl"
FORMATS = ("mcq", "multi_select", "true_false")


def load() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def verdict(row: dict) -> tuple[int | list[int] | None, str]:
    """The parser's verdict in the corpus's terms (slot, None, or a list of slots) and the rule behind it."""
    truncated = bool(row.get("truncated", False))
    parse = PARSERS[row["fmt"]].parse(row["raw"], row["labels"], row["options"], truncated=truncated)
    if row["fmt"] == "multi_select":
        return (None if parse.slots is None else list(parse.slots)), parse.rule
    return parse.slot, parse.rule


def scores(rows: list[dict]) -> dict[str, float | int | None]:
    got = [verdict(row)[0] for row in rows]
    answered = [(g, r["expected"]) for g, r in zip(got, rows) if g is not None]
    invalid = [g for g, r in zip(got, rows) if r["expected"] is None]
    return {
        "n": len(rows),
        "agree": sum(g == r["expected"] for g, r in zip(got, rows)) / len(rows),
        "precision": sum(g == e for g, e in answered) / len(answered) if answered else None,
        "invalid_recall": sum(g is None for g in invalid) / len(invalid) if invalid else None,
        "n_invalid": len(invalid),
    }


def table(rows: list[dict]) -> str:
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[f"{row['source']}/{row['category']}"].append(row)
    groups["ALL smollm2_135m"] = [r for r in rows if r["source"] == "smollm2_135m"]
    groups["ALL styled"] = [r for r in rows if r["source"] == "styled"]
    groups["ALL"] = rows

    def fmt(x):
        return "   -" if x is None else f"{x:.3f}"

    lines = [f"{'source/category':34} {'n':>4} {'agree':>6} {'prec':>6} {'inv_rec':>7} {'n_inv':>5}"]
    for name, group in sorted(groups.items(), key=lambda kv: (kv[0].startswith("ALL"), kv[0])):
        s = scores(group)
        lines.append(
            f"{name:34} {s['n']:>4} {fmt(s['agree']):>6} {fmt(s['precision']):>6} {fmt(s['invalid_recall']):>7} "
            f"{s['n_invalid']:>5}"
        )
    return "\n".join(lines)


def test_corpus_is_large_real_and_well_formed():
    rows = load()
    assert len(rows) >= 300
    assert sum(r["source"] == "smollm2_135m" for r in rows) >= 100
    assert len({r["id"] for r in rows}) == len(rows)
    per_category: dict[str, int] = defaultdict(int)
    for r in rows:
        per_category[r["category"]] += 1
        assert r["source"] in ("smollm2_135m", "styled") and r["fmt"] in FORMATS and isinstance(r["raw"], str)
        n = len(r["labels"])
        expected = r["expected"]
        if r["fmt"] == "multi_select":
            assert expected is None or (expected == sorted(set(expected)) and all(0 <= s < n for s in expected))
        else:
            assert expected is None or 0 <= expected < n
        assert r["options"] is None or len(r["options"]) == n
        if "rule" in r:  # the rule says INVALID exactly when the verdict is
            assert isinstance(r["rule"], str) and r["rule"].startswith("invalid_") == (expected is None)
    assert min(per_category.values()) >= 5, dict(per_category)


def test_parser_agrees_with_the_judged_corpus(record_property):
    rows = load()
    report = table(rows)
    print("\n" + report)
    record_property("parser_table", report)
    wrong = [(r["id"], r["raw"][:60], r["expected"], *verdict(r)) for r in rows if verdict(r)[0] != r["expected"]]
    overall = 1 - len(wrong) / len(rows)
    assert overall >= 0.99, f"agreement {overall:.3f}; disagreements:\n" + "\n".join(map(repr, wrong)) + "\n" + report


@pytest.mark.parametrize("fmt", FORMATS)
def test_verdicts_are_shown_slots_and_rules_say_invalid_exactly_when_invalid(fmt):
    for row in (r for r in load() if r["fmt"] == fmt):
        got, rule = verdict(row)
        assert (got is None) == (rule.startswith("invalid_") or rule == "truncated"), (row["id"], got, rule)
        slots = got if isinstance(got, list) else [] if got is None else [got]
        assert all(0 <= s < len(row["labels"]) for s in slots)


def test_lines_that_name_their_rule_are_read_by_it():
    """A hedge that names another label after the answer, in the next sentence, in parentheses or in a "though"
    clause, is read as "C, or maybe B" is (INVALID, invalid_hedge); what only mentions another label ("C (not
    B)") is still the answer."""
    ruled = [r for r in load() if "rule" in r]
    assert {
        "C, or maybe B",
        "C. Or maybe B?",
        "Answer: C. Hmm, or maybe B?",
        "C (or possibly B)",
        "The answer is C, though it could be B.",
    } <= {r["raw"] for r in ruled if r["rule"] == "invalid_hedge"}
    assert any(r["expected"] is not None for r in ruled)
    got = {r["id"]: verdict(r) for r in ruled}
    assert {r["id"]: (r["expected"], r["rule"]) for r in ruled} == got
