"""The comparison report answers the reviewer's question: only the studies that
were run, each accuracy-like number defined once, chance level on every table and plot, INVALID apart from wrong,
distinguishable lines, short run ids, the questions the models answer differently with what they saw and said,
and each paper's own spread beside the intervals.

Simulated runs made in-process (`run_job_in`), one small store per experiment.
"""

from __future__ import annotations

import re
from unittest import mock

import pandas as pd
import pytest

from src.common.errors import UserError
from src.compare import plots
from src.compare.__main__ import main
from src.metrics.chance import chance_levels, trial_chance
from src.tracking.records import resolve_run_id

MODELS = ("0.6", "0.9")


def _jobs(run_job_in, experiment: str, *overrides: str) -> dict[str, str]:
    """One run per simulated model (success rates MODELS, 10% INVALID answers) on 8 synthetic questions;
    model name -> run id."""
    return {
        f"simulated_{rate}": run_job_in(
            "model=simulated",
            f"model.success_rate={rate}",
            f"model.name=simulated_{rate}",
            "model.invalid_rate=0.1",
            "benchmark=synthetic",
            "limit=8",
            "scoring=generate",
            "temperature=0.7",
            f"tracking.experiment={experiment}",
            "stats.bootstrap=0",
            *overrides,
        ).run_id
        for rate in MODELS
    }


def _report(run_job_in, experiment: str, out, *extra: str) -> str:
    assert (
        main(
            [
                "--experiment",
                experiment,
                "--tracking-uri",
                run_job_in.store_uri,
                "--out",
                str(out),
                "--no-mlflow",
                *extra,
            ]
        )
        == 0
    )
    return (out / "report.md").read_text()


def _tables(md: str) -> list[list[str]]:
    """Each Markdown table of the report as its lines, then the caption under it."""
    blocks, current = [], []
    for line in md.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current and line.strip():
            blocks.append(current + ([line] if line.startswith("*") else []))
            current = []
    return blocks + ([current] if current else [])


def _assert_chance_everywhere(md: str) -> None:
    """Every table (its cells or caption) and every plot's caption names the chance level."""
    for table in _tables(md):
        if "definition" not in table[0]:
            assert "chance" in " ".join(table), f"no chance level in {table[0]}"
    lines = md.splitlines()
    figures = [i for i, line in enumerate(lines) if line.startswith("![")]
    assert figures
    for i in figures:
        assert "chance" in lines[i + 2], f"no chance line on {lines[i]}"


def test_chance_rule():
    assert trial_chance(4) == 0.25 and trial_chance(1, "true_false") == 0.5 and trial_chance(2, "multi_select") == 1 / 3
    records = pd.DataFrame(
        {
            "question_id": ["a", "a", "a", "b"],
            "variant_kind": ["original", "original", "nota", "original"],
            "variant_id": ["original", "original", "nota_1", "original"],
            "repetition": [0, 1, 0, 0],
            "n_options": [4, 4, 2, 5],
        }
    )
    levels = chance_levels(records)  # repetitions ask a trial again: weighted once; questions weigh equally
    assert levels["chance"] == pytest.approx((1 / 4 + 1 / 5) / 2)
    assert levels["chance_variants"] == pytest.approx(((1 / 4 + 1 / 2) / 2 + 1 / 5) / 2)


@pytest.mark.slow
def test_repetition_only_experiment(run_job_in, tmp_path):
    """No CoRA section (its one-variant CoRA family has CI = 1 by definition), every table shows the chance level,
    INVALID has its own column, each number shown is defined, the paper's acc stdev stands beside the interval, and
    the disagreements show the prompt, the outputs and the parses."""
    ids = _jobs(run_job_in, "rep", "variants=original", "repetitions=4")
    md = _report(run_job_in, "rep", tmp_path / "rep")
    headings = re.findall(r"^## (.+)$", md, flags=re.M)
    assert "CoRA ranking" not in headings and "Rank changes between MCQA and CoRA" not in headings
    assert not any("REVAS" in h or "fluctuation" in h.lower() for h in headings)
    # the decision first (the bottom line, the summary, the contents, the paired differences, the questions
    # needed), then the runs and the studies, then the detail, and what the report was made from last
    decision = [
        "Bottom line",
        "Summary: which model to pick on each benchmark",
        "Contents",
        "Paired differences between models",
        "How many questions are enough",  # absent with too few questions for an estimate
        "Runs",
    ]
    shown = [h for h in decision if h in headings]
    assert headings[: len(shown)] == shown and len(shown) >= 5
    assert headings.index("Repetition trials") < headings.index("Questions the models answer differently")
    assert headings[-1] == "About this report"
    contents = md.split("## Contents")[1].split("## Paired")[0]
    assert re.findall(r"^- \[(.+)\]\(#", contents, flags=re.M) == headings[:2] + headings[3:-1]
    bottom = md.split("## Bottom line")[1].split("## Summary")[0]
    assert re.search(r"^- \*\*synthetic: (pick |no model is better)", bottom, flags=re.M), bottom
    assert re.findall(r"^### (.+)$", md, flags=re.M)[0] == "the first two models per benchmark"
    assert "not in these runs (no section): CoRA ranking" in md
    assert not list((tmp_path / "rep" / "plots").glob("bmca_*.png"))
    _assert_chance_everywhere(md)
    # the synthetic questions have 3 to 5 options: chance is the mean of 1/k over the questions asked
    runs = pd.read_csv(tmp_path / "rep" / "tables" / "runs.csv")
    assert runs["chance"].between(0.2, 0.34).all() and runs["chance"].nunique() == 1
    repetition = pd.read_csv(next((tmp_path / "rep" / "tables").glob("repetition_*.csv")))
    assert (repetition["invalid_rate"] > 0).all() and "chance" in repetition.columns
    assert re.search(
        r"\| SURE right \| UNSURE right \| UNSURE wrong \| SURE wrong \| acc mean \| acc std \| "
        r"RWS \\\| S/T \| INVALID \| chance \|",
        md,
    )
    definitions = md.split("### What each number is")[1].split("### runs compared")[0]
    for term in ("acc mean", "acc std", "chance", "INVALID"):  # mcqa, one draw here, is in no table
        assert f"| {term}" in definitions or f"/ {term}" in definitions, term
    assert "CoRA" not in definitions and "MCQA+" not in definitions  # only what the page shows
    assert "acc stdev (repetition paper)" in md
    shown = pd.read_parquet(next((tmp_path / "rep" / "tables").glob("disagreements_*.parquet")))
    assert set(shown["model"]) == set(ids) and shown["prompt"].str.contains("A. ").all()
    assert set(shown.columns) >= {"question_id", "prompt", "raw_output", "parsed_label", "parse_rule", "correct"}
    per_question = shown.groupby("question_id")["parsed_label"].nunique()
    assert (per_question > 1).all()  # only questions answered differently


@pytest.mark.slow
def test_cora_experiment_with_short_ids(run_job_in, tmp_path, capsys):
    """A CoRA study keeps its section (chance column, INVALID row, the paper's bootstrap std beside the interval);
    --diff takes the 8-character ids the report prints; an unknown or too short prefix is one line, exit 2."""
    ids = _jobs(run_job_in, "cora", "variants=cora", "repetitions=1")
    a, b = ids["simulated_0.6"], ids["simulated_0.9"]
    md = _report(run_job_in, "cora", tmp_path / "cora", "--diff", a[:8], b[:8])
    assert "## CoRA ranking" in md and "## Repetition trials" not in md
    _assert_chance_everywhere(md)
    cora = next(t for t in _tables(md) if t[0].startswith("| metric"))
    assert cora[0].rstrip(" |").endswith("chance")
    mcqa = next(line for line in cora if line.startswith("| MCQA |"))
    assert re.search(r"\| 0\.\d{3} \|$", mcqa)  # the chance of MCQA: the mean of 1/k
    assert any(line.startswith("| INVALID |") and "%" in line for line in cora)
    assert "MCQA+ std x10³ (CoRA paper)" in md
    assert f"## Disagreements: {a[:8]} vs {b[:8]}" in md and a in md  # resolved to the full id
    diff = pd.read_parquet(tmp_path / "cora" / "tables" / "diff_questions_shown.parquet")
    assert set(diff["run_id"]) == {a, b}
    # the variants of one model that pick different options: every variant of such a question, as shown
    variants = pd.read_parquet(
        next((tmp_path / "cora" / "tables").glob("variant_disagreements_*_simulated_0.6_*.parquet"))
    )
    assert variants.groupby("question_id")["variant_id"].nunique().min() > 2
    assert variants["prompt"].str.contains("A. ").all() and variants["prompt"].nunique() > 1
    assert resolve_run_id(a[:10], run_job_in.store_uri) == a
    from src.plan import plan

    with pytest.raises(UserError, match=rf"^--run: no headline metric of {a} "):  # resolved: 8 questions are too few
        plan([a[:8]], tracking_uri=run_job_in.store_uri)
    with pytest.raises(UserError, match=r"^--run: no MLflow run 'abc' .* first 8 or more characters"):
        resolve_run_id("abc", run_job_in.store_uri)
    capsys.readouterr()
    assert (
        main(
            [
                "--diff",
                "0" * 8,
                b[:8],
                "--tracking-uri",
                run_job_in.store_uri,
                "--no-mlflow",
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: --diff: no MLflow run '00000000'")


def test_ambiguous_prefix_is_refused(empty_mlflow_db, tmp_path):
    """Two runs whose ids start alike: the prefix names neither, in one line that names the flag."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    (tmp_path / "mlflow.db").write_bytes(empty_mlflow_db.read_bytes())
    client = MlflowClient(tracking_uri=uri)
    runs = [client.create_run("0") for _ in range(2)]
    with mock.patch.object(MlflowClient, "search_runs", return_value=runs):
        with pytest.raises(UserError, match=r"^--diff: 'abcdef12' is the start of several run ids"):
            resolve_run_id("abcdef12", uri, key="--diff")
    assert resolve_run_id(runs[0].info.run_id[:8], uri) == runs[0].info.run_id  # unique: found without the mock


def test_plot_styles_tell_models_apart():
    styles = [plots.series_style(i) for i in range(20)]
    assert len({(s["color"], s["marker"], s["ls"]) for s in styles}) == 20
    assert len({(s["marker"], s["ls"]) for s in styles}) == 20  # apart without colour too


def test_fluctuation_spreads_are_opt_in(run_job_in, tmp_path):
    """The fluctuation paper's stability study (200 metric computations per run) is added by
    --fluctuation-spreads; without it a note says how to get it."""
    import functools

    from src.compare import spreads

    _jobs(run_job_in, "perm", "variants=perm_full", "scoring=logprob", "temperature=0")
    md = _report(run_job_in, "perm", tmp_path / "default")
    page = (tmp_path / "default" / "report.html").read_text()  # the spreads section is absent: said in its list
    assert "--fluctuation-spreads" in page.split("<details")[1] and "Answer fluctuation: simulated" not in md
    few = functools.partial(spreads.fluctuation_spreads, n_draws=3)  # the same study, fewer draws: a fast test
    with mock.patch.object(spreads, "fluctuation_spreads", few):
        md = _report(run_job_in, "perm", tmp_path / "asked", "--fluctuation-spreads")
    assert "std over random pairs (fluctuation paper)" in md and "Answer fluctuation: simulated" in md


def test_a_plain_accuracy_comparison_gives_each_model_its_interval_and_says_chance(run_job_in, tmp_path):
    """Two `variants=original` runs (the most common review: which model is more accurate?): each model's accuracy
    with its interval in the runs table and the summary, the model at chance marked † with the sentence on what
    that means, the one above chance not; the absent studies in one line."""
    for rate in ("0.26", "0.9"):
        run_job_in(
            "model=simulated",
            f"model.success_rate={rate}",
            f"model.name=sim_{rate}",
            "limit=40",
            "tracking.experiment=plain",
        )
    md = _report(run_job_in, "plain", tmp_path / "plain")
    runs = pd.read_csv(tmp_path / "plain" / "tables" / "runs.csv").set_index("model")
    for model, row in runs.iterrows():
        shown = f"mcqa {row['mcqa']:.3f} [{row['mcqa_lo']:.3f}, {row['mcqa_hi']:.3f}]"
        at_chance = row["mcqa_lo"] <= row["chance"] <= row["mcqa_hi"]
        assert at_chance == (model == "sim_0.26")
        runs_table = md.split("### runs compared")[1]
        line = next(line for line in runs_table.splitlines() if line.startswith("| ") and f"| {model} |" in line)
        assert shown + (" †" if at_chance else "") in line, line
        assert ("indistinguishable from chance" if at_chance else "above chance") in line
    assert "1 of them is indistinguishable from chance (†" in md and "describe how a guesser's answers agree" in md
    summary = pd.read_csv(tmp_path / "plain" / "tables" / "summary.csv").iloc[0]
    assert (summary["leader"], summary["second"]) == ("sim_0.9", "sim_0.26") and not summary["tie"]
    assert re.search(
        r"\| sim_0\.9 0\.\d{3} \[0\.\d{3}, [01]\.\d{3}\] \| "
        r"sim_0\.26 0\.\d{3} \[0\.\d{3}, 0\.\d{3}\] † \| "
        r"\+0\.\d{3} \[\+0\.\d{3}, \+0\.\d{3}\] \| <?0\.\d{3} \| pick sim_0\.9 \(p < 0\.05\) \|",
        md,
    )
    assert md.index("## Summary: which model to pick on each benchmark") < md.index("## Runs")
    assert re.search(r"^- \*\*synthetic: pick sim_0\.9 \(its lead on mcqa over sim_0\.26 is \+0\.\d{3} \[", md, re.M)
    assert sum(line.startswith("> Note: not in these runs") for line in md.splitlines()) == 1
