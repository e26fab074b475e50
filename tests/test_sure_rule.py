"""The two SURE rules (METRICS.md, "What the paper's tables count"): `answer` (section 3.2, the default and
today's behaviour) and `correctness` (the paper's tables), in the metrics, the job config, a run's tag and the
report's repetition tables."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest

from src.common.errors import UserError
from src.metrics import compute_metrics, question_outcomes, repetition_metrics

from .records_factory import records, repeated

R = 10
# ten answers per question (correct option 0, INVALID None), named by their outcome under the correctness rule
ALL_RIGHT = [0] * 10  # c = 10: SURE right (answer rule: SURE right)
NONE_RIGHT_SPREAD = [1, 2, 3, 1, 2, 3, 1, 2, 3, None]  # c = 0: SURE wrong (answer rule: UNSURE wrong, no answer >= 9)
HALF_RIGHT = [0] * 5 + [1] * 5  # c = 5 >= R - c: UNSURE right
NINE_RIGHT = [0] * 9 + [1]  # c = 9: UNSURE right (answer rule: SURE right, 9 identical)
THREE_RIGHT = [0] * 3 + [1] * 7  # c = 3 < R - c: UNSURE wrong (answer rule: UNSURE wrong, 1 is the mode)
FOUR_RIGHT_MODAL = [0] * 4 + [1] * 3 + [2] * 3  # c = 4: UNSURE wrong (answer rule: UNSURE right, 0 is the mode)
ALL_INVALID = [None] * 10  # c = 0: SURE wrong (answer rule: SURE wrong, SURE of INVALID)


def outcome(pattern, rule):
    table = records(repeated("q", pattern))
    row = question_outcomes(table, sure_rule=rule).loc["q"]
    return ("SURE" if row["sure"] else "UNSURE") + (" right" if row["right"] else " wrong")


@pytest.mark.parametrize(
    "pattern, correctness, answer",
    [
        (ALL_RIGHT, "SURE right", "SURE right"),
        (NONE_RIGHT_SPREAD, "SURE wrong", "UNSURE wrong"),
        (HALF_RIGHT, "UNSURE right", "UNSURE right"),
        (NINE_RIGHT, "UNSURE right", "SURE right"),
        (THREE_RIGHT, "UNSURE wrong", "UNSURE wrong"),
        (FOUR_RIGHT_MODAL, "UNSURE wrong", "UNSURE right"),
        (ALL_INVALID, "SURE wrong", "SURE wrong"),
    ],
)
@pytest.mark.promise("docs/metrics.md", "sure_rule=answer and sure_rule=correctness classify each outcome as defined")
def test_each_outcome_under_both_rules(pattern, correctness, answer):
    assert outcome(pattern, "correctness") == correctness
    assert outcome(pattern, "answer") == answer


def metrics_md_correctness(right_counts: list[int], n: int) -> dict[str, float]:
    """METRICS.md's correctness rule, written out: c right trials of R per question."""
    shares = {"sure_right": 0, "unsure_right": 0, "unsure_wrong": 0, "sure_wrong": 0}
    for c in right_counts:
        if c == n:
            shares["sure_right"] += 1
        elif c == 0:
            shares["sure_wrong"] += 1
        elif c >= n - c:
            shares["unsure_right"] += 1
        else:
            shares["unsure_wrong"] += 1
    out = {k: v / len(right_counts) for k, v in shares.items()}
    sure = out["sure_right"] + out["sure_wrong"]
    out["st"] = sure
    out["rws"] = out["sure_right"] / sure if sure else math.nan
    return out


@pytest.mark.parametrize("n", [2, 5, 10, 11])
def test_correctness_rule_matches_its_definition_on_random_records(n):
    rng = random.Random(n)
    rows, counts = [], []
    for i in range(60):
        answers = [rng.choice([0, 0, 1, 2, 3, None]) for _ in range(n)]
        rows += repeated(f"q{i}", answers)
        counts.append(sum(a == 0 for a in answers))
    m = repetition_metrics(records(rows), sure_rule="correctness")
    expected = metrics_md_correctness(counts, n)
    for name, value in expected.items():
        assert m[name] == pytest.approx(value, nan_ok=True), name
    assert sum(m[k] for k in ("sure_right", "unsure_right", "unsure_wrong", "sure_wrong")) == pytest.approx(1.0)


@pytest.mark.promise("docs/metrics.md", "sure_rule=answer is the default")
def test_answer_is_the_default_and_accuracy_does_not_depend_on_the_rule():
    table = records(repeated("a", NINE_RIGHT) + repeated("b", NONE_RIGHT_SPREAD) + repeated("c", FOUR_RIGHT_MODAL))
    default, answer, correctness = (
        repetition_metrics(table),
        repetition_metrics(table, sure_rule="answer"),
        repetition_metrics(table, sure_rule="correctness"),
    )
    assert default == answer
    assert correctness != answer
    for name in ("acc_mean", "acc_std"):
        assert correctness[name] == answer[name]
    assert compute_metrics(table, sure_rule="correctness")["st"] == correctness["st"]
    assert compute_metrics(table)["st"] == answer["st"]


def test_corrupt_invalid_rows_are_still_wrong_under_correctness():
    table = records(repeated("q", [None] * 5 + [0] * 5))
    table.loc[table["parsed_label"].isna(), "correct"] = True  # INVALID must not count as right
    assert repetition_metrics(table, sure_rule="correctness")["unsure_right"] == 1.0


def test_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="sure_rule"):
        repetition_metrics(records(repeated("q", ALL_RIGHT)), sure_rule="vote")


def test_config_key_and_its_one_line_error():
    from src.config.checks import job_spec
    from src.config.compose import compose_job

    assert compose_job(["model=simulated"]).metrics.sure_rule == "answer"
    assert compose_job(["model=simulated", "metrics.sure_rule=correctness"]).metrics.sure_rule == "correctness"
    with pytest.raises(
        UserError,
        match=r"^config key metrics\.sure_rule: unknown rule 'vote'; choose one of "
        r"answer, correctness$",
    ):
        job_spec(compose_job(["model=simulated", "metrics.sure_rule=vote"]))


def test_repetition_sweep_uses_the_papers_rule():
    from omegaconf import OmegaConf

    from .conftest import REPO

    sweep = OmegaConf.load(REPO / "sweeps" / "repetition.yaml")
    assert sweep.metrics.sure_rule == "correctness"


@pytest.mark.promise("docs/metrics.md", "the run's tag sure_rule says which rule produced the numbers")
def test_a_run_logs_its_rule_as_a_tag_and_computes_with_it(run_job_in):
    from .conftest import mlflow_runs

    args = (
        "model=simulated",
        "model.success_rate=0.9",
        "benchmark=synthetic",
        "limit=30",
        "temperature=0.7",
        "repetitions=10",
    )
    answer = run_job_in(*args)
    correctness = run_job_in(*args, "metrics.sure_rule=correctness")
    _, runs = mlflow_runs(run_job_in.store_uri)
    tags = {r.info.run_id: r.data.tags["sure_rule"] for r in runs}
    assert tags == {answer.run_id: "answer", correctness.run_id: "correctness"}
    assert correctness.metrics["acc_mean"] == answer.metrics["acc_mean"]
    # right 9 times in 10: all 10 right (SURE under correctness) has chance 0.35, 9 or 10 right (SURE by vote) 0.74
    assert correctness.metrics["st"] < answer.metrics["st"]
    # `python -m src.compare --sure-rule correctness` recomputes the answer run from its records: the same answers
    # as the correctness run (same seed), so the same shares, RWS and S/T, and the same intervals
    from src.compare.__main__ import main as compare_main
    from src.compare.sure_rule import RULE_METRICS
    from src.metrics.intervals import interval_names

    out = run_job_in.tmp / "report"
    assert (
        compare_main(
            [
                "--experiment",
                "mcq-consistency",
                "--tracking-uri",
                run_job_in.store_uri,
                "--out",
                str(out),
                "--no-mlflow",
                "--no-paired",
                "--sure-rule",
                "correctness",
            ]
        )
        == 0
    )
    rows = pd.read_csv(out / "tables" / "runs.csv").set_index("run_id")
    assert rows.at[answer.run_id, "sure_rule"] == "correctness"
    names = [*RULE_METRICS, *(bound for name in ("rws", "st") for bound in interval_names(name))]
    for name in names:
        assert rows.at[answer.run_id, name] == pytest.approx(correctness.metrics[name], abs=1e-9), name
        assert rows.at[correctness.run_id, name] == pytest.approx(correctness.metrics[name], abs=1e-9), name


def test_report_tables_say_their_rule_and_keep_rules_apart():
    from src.compare.tables import repetition_tables

    base = {
        "benchmark": "medqa",
        "variants": "original",
        "temperature": 0.7,
        "fewshot": 0,
        "scoring": "generate",
        "prompt": "repetition",
        "repetitions": 10,
        "limit": None,
        "seed": 0,
        "acc_mean": 0.3,
        "acc_std": 0.01,
        "sure_right": 0.1,
        "unsure_right": 0.2,
        "unsure_wrong": 0.3,
        "sure_wrong": 0.4,
        "rws": 0.2,
        "st": 0.5,
    }
    runs = pd.DataFrame(
        [
            {**base, "run_id": "a", "start_time": 1, "model": "m1", "sure_rule": "answer"},
            {**base, "run_id": "b", "start_time": 2, "model": "m2", "sure_rule": "correctness"},
            {**base, "run_id": "c", "start_time": 3, "model": "m3"},
        ]
    )  # no tag: an older run, section 3.2
    runs.loc[2, "sure_rule"] = None
    built = repetition_tables(runs)
    captions = {t.title: t.caption for t in built.tables}
    assert set(captions) == {"medqa (sure_rule=answer)", "medqa (sure_rule=correctness)"}
    assert captions["medqa (sure_rule=answer)"].endswith("right when it is the correct one)")
    assert "SURE rule: correctness (the paper's tables" in captions["medqa (sure_rule=correctness)"]
    assert sorted(built.tables[0].text.index) == ["m1", "m3"]
    assert any("--sure-rule" in note for note in built.notes)
    one = repetition_tables(runs.iloc[:1])
    assert [t.title for t in one.tables] == ["medqa"] and "SURE rule: answer" in one.tables[0].caption


# ---------------------------------------------------------------- `python -m src.compare --sure-rule RULE`


def test_compare_sure_rule_recomputes_other_rules_runs_under_the_requested_rule(monkeypatch):
    """apply_sure_rule on a run table: a run logged under `answer` gets the correctness rule's shares, RWS and
    S/T from its records; a run already under the requested rule is left as logged; a run whose records cannot
    be read keeps its own rule, with a note."""
    from src.compare.load import Runs
    from src.compare.sure_rule import RULE_METRICS, apply_sure_rule

    table = records(
        repeated("a", NINE_RIGHT)
        + repeated("b", NONE_RIGHT_SPREAD)
        + repeated("c", FOUR_RIGHT_MODAL)
        + repeated("d", HALF_RIGHT)
    )
    answer, correctness = (repetition_metrics(table, sure_rule=rule) for rule in ("answer", "correctness"))
    assert all(answer[k] != correctness[k] for k in ("sure_right", "sure_wrong", "rws"))  # the rules disagree
    logged = {"sure_right": 0.9, "unsure_right": 0.0, "unsure_wrong": 0.0, "sure_wrong": 0.1, "rws": 0.9, "st": 1.0}
    base = {"benchmark": "b", "temperature": 0.7, "acc_mean": 0.5}
    runs = Runs(
        table=pd.DataFrame(
            [
                {**base, "run_id": "answer-run", "model": "m1", "sure_rule": "answer", **answer},
                {**base, "run_id": "native-run", "model": "m2", "sure_rule": "correctness", **logged},
                {**base, "run_id": "lost-run", "model": "m3", "sure_rule": "answer", **answer},
            ]
        ),
        tracking_uri="http://stand-in:5000",
        experiments={},
    )

    def read(run_id, uri, key="--run"):
        if run_id == "lost-run":
            raise UserError(f"config key {key}: run {run_id} has no records.parquet")
        return table

    monkeypatch.setattr("src.tracking.records.read_run_records", read)
    notes = apply_sure_rule(runs, "correctness")
    rows = runs.table.set_index("run_id")
    for name in RULE_METRICS:
        assert rows.at["answer-run", name] == pytest.approx(correctness[name], nan_ok=True), name
        assert rows.at["native-run", name] == logged[name], name  # its own rule already: not recomputed
        assert rows.at["lost-run", name] == pytest.approx(answer[name], nan_ok=True), name
    assert rows["sure_rule"].to_dict() == {
        "answer-run": "correctness",
        "native-run": "correctness",
        "lost-run": "answer",
    }
    assert len(notes) == 2 and "run answer-r (m1, T=0.7) was logged under answer" in notes[0]
    assert notes[1].startswith("--sure-rule correctness: run lost-run keeps its rule answer (")
    with pytest.raises(UserError, match="--sure-rule: unknown rule 'vote'"):
        apply_sure_rule(runs, "vote")
