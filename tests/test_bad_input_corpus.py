"""Hostile input through a whole job and property tests for the parser: one-line errors or INVALID, never a crash."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from src.answering.trials import prompt_hash
from src.benchmarks import load_benchmark
from src.common.errors import UserError
from src.config.checks import check_config
from src.config.compose import compose_job
from src.core.parsing import parse_with_rule
from src.core.prompts import PromptTemplate, render
from src.core.variant import LETTERS
from src.tracking.records import read_run_records
from src.variants import make_variants

from .conftest import REPO, examples, mlflow_runs


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


# Every config value, checked by type (the schema, as the config is composed) or by range, shape and presence
# (config_schema.check_values, through job.check_config) before any compute: (override, key named, message part).
# {tmp} is a folder that exists.
COMPOSED_CASES = [  # a wrong type or a group choice: refused as the config is composed
    ("limit=abc", "limit", "Value 'abc' of type 'str' could not be converted to Integer (from limit=abc)"),
    ("temperature=abc", "temperature", "Value 'abc' of type 'str' could not be converted to Float"),
    ("seed=abc", "seed", "Value 'abc' of type 'str' could not be converted to Integer"),
    ("repetitions=2.5", "repetitions", "Value '2.5' of type 'float' could not be converted to Integer"),
    ("top_p=abc", "top_p", "Value 'abc'"),
    ("cloze_normalise=maybe", "cloze_normalise", "'maybe' is not a valid bool"),
    ("benchmark=generic", "benchmark.path", "required by benchmark=generic (no default); give benchmark.path="),
    ("model=hf", "model.path", "required by model=hf"),
]
RANGE_CASES = [  # a value of the right type out of its range: set on a copy of one composed config (Hydra is slow)
    ("limit=0", "limit", "0 must be a positive integer or null"),
    ("temperature=-0.5", "temperature", "-0.5 must be a finite number >= 0"),
    ("temperature=nan", "temperature", "nan must be a finite number >= 0"),
    ("seed=-1", "seed", "-1 must be an integer >= 0"),
    ("repetitions=0", "repetitions", "0 must be >= 1"),
    ("top_p=5", "top_p", "5 must be in (0, 1]"),
    ("top_p=0", "top_p", "0 must be in (0, 1]"),
    ("top_k=-1", "top_k", "-1 must be >= 1, or null"),
    ("top_k=0", "top_k", "0 must be >= 1, or null"),
    ("max_new_tokens=0", "max_new_tokens", "0 must be >= 1"),
    ("fewshot=-1", "fewshot", "-1 must be >= 0"),
    ("option_refs=drop", "option_refs", "unknown policy 'drop'; choose keep_rules, exclude or ignore"),
    ("scoring=vibes", "scoring", "'vibes' is not one of"),
    ("tracking.uri=sqlite:///{tmp}", "tracking.uri", "points at a folder; give the database file inside it"),
    ("tracking.uri={tmp}", "tracking.uri", "is a file store"),
    ("tracking.uri=", "tracking.uri", "empty"),
    ("tracking.uri=sqlite://", "tracking.uri", "names no database file"),
    ("tracking.uri=http://", "tracking.uri", "names no host"),
    ("tracking.uri=ftp://host/x", "tracking.uri", "unknown scheme 'ftp'"),
    ("tracking.uri=http://user:pw-123@", "tracking.uri", "'http://***@' names no host"),  # no password echoed
    ("cache.path={tmp}", "cache.path", "is a folder"),
]
COMPOSED: list = []


@pytest.mark.parametrize(
    "override, key, part", COMPOSED_CASES + RANGE_CASES, ids=[case[0] for case in COMPOSED_CASES + RANGE_CASES]
)
def test_every_bad_config_value_is_one_line_naming_its_key(override, key, part, tmp_path):
    from omegaconf import OmegaConf

    override = override.format(tmp=tmp_path)
    with pytest.raises(UserError) as err:
        if (override, key, part) in COMPOSED_CASES:
            check_config(compose_job(["model=simulated", override]))
        else:
            COMPOSED[:] = COMPOSED or [compose_job(["model=simulated"])]
            cfg = COMPOSED[0].copy()
            OmegaConf.update(cfg, *override.split("=", 1), merge=False)
            check_config(cfg)
    message = str(err.value)
    assert message.startswith(f"config key {key}: ") and part in message and "\n" not in message, message
    assert "pw-123" not in message


@pytest.mark.parametrize(
    "argv, line",
    [
        (["top_p=5"], "error: config key top_p: 5 must be in (0, 1] (1 = no nucleus cut)"),
        (["-m", "top_p=0.5,5"], "error: config key top_p: 5 must be in (0, 1]"),
        (["-m", "fewshot=0,-1"], "error: config key fewshot: -1 must be >= 0"),
        (["benchmark=generic"], "error: config key benchmark.path: required by benchmark=generic"),
        (["-m", "benchmark=synthetic,generic"], "error: config key benchmark.path: required by benchmark=generic"),
        (["-m", "repetitions=1,2.5"], "error: config key repetitions: Value '2.5' of type 'float'"),
    ],
)
def test_bad_values_stop_the_command_line_before_hydra(monkeypatch, capsys, argv, line):
    """`python -m src.run` checks every job of the command line, a sweep's too, before Hydra makes any folder."""
    from src import run

    monkeypatch.setattr("sys.argv", ["src.run", "model=simulated", *argv])
    monkeypatch.setattr(run, "_hydra_main", lambda: pytest.fail("Hydra was reached"))
    with pytest.raises(SystemExit) as exit_:
        run.main()
    assert exit_.value.code == 2
    (shown,) = capsys.readouterr().err.strip().splitlines()
    assert shown.startswith(line), shown


@pytest.mark.slow
def test_bad_value_in_a_sweep_through_the_real_command_line(run_cli):
    proc = run_cli("model=simulated", "max_new_tokens=3,0", multirun=True, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert line == "error: config key max_new_tokens: 0 must be >= 1", line
    assert not (run_cli.tmp / "multirun").exists(), "no job folder, no .hydra/"


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
