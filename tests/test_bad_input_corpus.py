"""Hostile input through the CLI and property tests for the parser: one-line errors or INVALID, never a crash."""
from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from src.parsing import parse_answer
from src.variants.base import LETTERS

from .test_cli_errors import assert_one_line_error


def test_ten_megabyte_garbage_line_is_named_not_echoed(run_cli, tmp_path):
    path = tmp_path / "huge.jsonl"
    good = json.dumps({"question": "2+2?", "options": ["3", "4"], "answer": 1})
    path.write_text(good + "\n" + "{" + "x" * 10_000_000 + "\n")
    proc = run_cli("model=simulated", "benchmark=generic", f"benchmark.path={path}", check=False)
    assert_one_line_error(proc, str(path), "2")
    assert max(len(line) for line in proc.stderr.splitlines()) < 2000  # the line is named, not printed


def test_ten_megabyte_valid_question_is_kept_whole(run_cli, tmp_path):
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"question": "Which? " + "word " * 2_000_000, "options": ["a", "b"], "answer": 0}) + "\n")
    run_cli("model=simulated", "benchmark=generic", f"benchmark.path={path}", "scoring=generate")


def test_unknown_label_style_and_template_without_question(run_cli):
    assert_one_line_error(run_cli("model=simulated", "prompt.label_style=[A]", "limit=2", check=False),
                          "prompt.label_style")
    assert_one_line_error(run_cli("model=simulated", "prompt.template='Pick one: {choices}'", "limit=2", check=False),
                          "prompt.template", "{question}")


labels_strategy = st.integers(2, 10).map(lambda n: tuple(LETTERS[:n]))


@given(labels=labels_strategy, data=st.data())
def test_parser_reads_every_shown_label_in_common_forms(labels, data):
    slot = data.draw(st.integers(0, len(labels) - 1))
    form = data.draw(st.sampled_from(["{}", "{}.", "({})", "**{}**", "Answer: {}", " {}\nBecause ...", "{}) text"]))
    assert parse_answer(form.format(labels[slot]), labels) == slot


@settings(max_examples=300)
@given(raw=st.text(max_size=200), labels=labels_strategy)
def test_parser_never_crashes_and_answers_only_shown_labels(raw, labels):
    slot = parse_answer(raw, labels, [f"option {i}" for i in range(len(labels))])
    assert slot is None or 0 <= slot < len(labels)
