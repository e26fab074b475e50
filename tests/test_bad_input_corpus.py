"""Hostile input through a whole job and property tests for the parser: one-line errors or INVALID, never a crash."""
from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from src.benchmarks import load_benchmark
from src.errors import UserError
from src.parsing import parse_with_rule
from src.prompts import PromptTemplate, render
from src.records import read_run_records
from src.trials import prompt_hash
from src.variants import make_variants
from src.variants.base import LETTERS

from .conftest import REPO, mlflow_runs, examples


def test_ten_megabyte_garbage_line_is_named_not_echoed(run_job_in, tmp_path):
    path = tmp_path / "huge.jsonl"
    good = json.dumps({"question": "2+2?", "options": ["3", "4"], "answer": 1})
    path.write_text(good + "\n" + "{" + "x" * 10_000_000 + "\n")
    with pytest.raises(UserError) as err:
        run_job_in("model=simulated", "benchmark=generic", f"benchmark.path={path}")
    message = str(err.value)
    assert str(path) in message and "2" in message.replace(str(path), "") and "\n" not in message
    assert len(message) < 2000  # the line is named, not printed


def test_ten_megabyte_valid_question_is_kept_whole(run_job_in, tmp_path):
    path = tmp_path / "long.jsonl"
    text = "Which? " + "word " * 2_000_000
    path.write_text(json.dumps({"question": text, "options": ["a", "b"], "answer": 0}) + "\n")
    (question,) = load_benchmark("generic", path=str(path), split=None, data_dir=str(tmp_path), seed=0, limit=None)
    assert question.question == text.strip()  # cleaned of the trailing space, not cut
    run_job_in("model=simulated", "benchmark=generic", f"benchmark.path={path}", "scoring=generate")
    _, (run,) = mlflow_runs(run_job_in.store_uri)
    (record,) = read_run_records(run.info.run_id, run_job_in.store_uri).itertuples()
    template = PromptTemplate.from_config(yaml.safe_load((REPO / "conf" / "prompt" / "cora.yaml").read_text()))
    (original,) = make_variants({"name": "original"}, question, seed=0)
    assert record.prompt_hash == prompt_hash(render(template, question, original, scoring="generate"))


def test_unknown_label_style_and_template_without_question(run_job_in):
    with pytest.raises(UserError, match="prompt.label_style"):
        run_job_in("model=simulated", "prompt.label_style=[A]", "limit=2")
    with pytest.raises(UserError, match=r"prompt.template.*\{question\}"):
        run_job_in("model=simulated", "prompt.template='Pick one: {choices}'", "limit=2")


labels_strategy = st.integers(2, 10).map(lambda n: tuple(LETTERS[:n]))


@given(labels=labels_strategy, data=st.data())
def test_parser_reads_every_shown_label_in_common_forms(labels, data):
    slot = data.draw(st.integers(0, len(labels) - 1))
    form = data.draw(st.sampled_from(["{}", "{}.", "({})", "**{}**", "Answer: {}", " {}\nBecause ...", "{}) text"]))
    assert parse_with_rule(form.format(labels[slot]), labels).slot == slot


@settings(max_examples=examples(300))
@given(raw=st.text(max_size=200), labels=labels_strategy)
def test_parser_never_crashes_and_answers_only_shown_labels(raw, labels):
    slot = parse_with_rule(raw, labels, [f"option {i}" for i in range(len(labels))]).slot
    assert slot is None or 0 <= slot < len(labels)
