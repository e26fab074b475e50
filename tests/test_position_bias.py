"""A letter habit said wherever a run is read: the closing block and JSON line of its job, its `slot_bias` tag, the
review view's column and legend, `python -m src.ui`'s list and the report's position-bias table (docs/metrics.md,
docs/mlflow_ui.md, docs/review.md); and a repetition run's `mcqa` named as the one draw it is."""

from __future__ import annotations

import json

import pytest

from src.compare.__main__ import main as compare_main
from src.tracking import review

from .conftest import mlflow_runs

HABIT = ("model=simulated", "model.first_slot_rate=0.8", "model.name=habit", "limit=40", "stats.bootstrap=0")
FAIR = ("model=simulated", "model.name=fair", "limit=40", "stats.bootstrap=0")


@pytest.mark.promise("docs/metrics.md", "a run far above its right answers' share in a slot says so when it ends")
def test_a_letter_habit_is_named_in_the_closing_block_json_line_and_tag(run_job_in):
    habit = run_job_in(*HABIT)
    assert habit.metrics["slot_bias_flag"] == 1.0 and habit.metrics["slot_share_A"] > 0.8
    block = habit.closing()
    line = next(line for line in block.splitlines() if "position bias:" in line)
    assert f"A chosen {habit.metrics['slot_share_A']:.3f}" in line and "far above (a letter habit)" in line
    assert "far above" in json.loads(habit.summary())["slot_bias"]
    fair = run_job_in(*FAIR)
    assert fair.metrics["slot_bias_flag"] == 0.0
    assert "position bias" not in fair.closing() and "slot_bias" not in json.loads(fair.summary())
    _, runs = mlflow_runs(run_job_in.store_uri)
    tags = {r.data.tags["model"]: r.data.tags for r in runs}
    assert tags["habit"]["slot_bias"].startswith("A ") and tags["habit"]["slot_bias"].endswith(": far above")
    assert tags["fair"]["slot_bias"].endswith("not far above")


@pytest.mark.promise(
    "docs/mlflow_ui.md", "the review view names a repetition run's mcqa as one draw and explains its dashes"
)
def test_the_review_view_has_a_legend_and_names_a_repetition_runs_mcqa_one_draw(run_job_in):
    run_job_in(*FAIR, "variants=cora")
    drawn = run_job_in(*FAIR, "repetitions=3", "temperature=0.7")
    client, runs = mlflow_runs(run_job_in.store_uri)
    repeated = next(r for r in runs if r.data.tags["variants"] == "original")
    assert repeated.data.tags["mcqa"].endswith(" one draw")
    mcqa_line = next(line for line in drawn.closing().splitlines() if line.startswith("  mcqa "))
    assert "one sampled draw" in mcqa_line  # the closing block says it too
    described = repeated.data.tags[review.DESCRIPTION_TAG]  # and the run page's Description, beside acc_mean
    assert f"Headline: mcqa {repeated.data.tags['mcqa']}," in described and "acc_mean " in described
    cora = next(r for r in runs if r.data.tags["variants"] == "cora")
    assert "one draw" not in cora.data.tags["mcqa"]
    experiment = client.get_experiment(repeated.info.experiment_id)
    state = json.loads(experiment.tags[review.SHARED_VIEW_TAG + review.REVIEW_VIEW_KEY])
    legend = experiment.tags[review.LEGEND_TAG]
    shown = [c[len("tags.`") : -1] for c in state["selectedColumns"]]
    assert "slot_bias" in shown
    for column in shown:  # every column the view shows says what it is
        assert f"- `{column}`: " in legend, column
    assert "one draw" in legend and "**-** in a cell" in legend
    # a description someone wrote is kept: the legend only ever replaces its own
    client.set_experiment_tag(experiment.experiment_id, review.LEGEND_TAG, "my notes")
    run_job_in(*FAIR, "limit=5")
    assert client.get_experiment(experiment.experiment_id).tags[review.LEGEND_TAG] == "my notes"


@pytest.mark.promise("docs/mlflow_ui.md", "python -m src.ui's list names a letter habit and explains its dashes")
def test_src_ui_lists_a_letter_habit_and_says_what_a_dash_is():
    """Stand-in runs (no MLflow): one with a letter habit, one fair, one logged without a temperature tag or any
    headline (its cells are dashes, and a line under the list says what a dash is)."""
    from types import SimpleNamespace as N

    from src import ui

    def run(run_id, model, tags, **metrics):
        return N(info=N(run_id=run_id * 8), data=N(tags={"model": model, **tags}, metrics=metrics))

    runs = [
        run(
            "a",
            "habit",
            {"temperature": "0.7", "slot_bias": "A 0.850 vs 0.250 right: far above"},
            mcqa=0.3,
            chance=0.25,
            slot_share_A=0.85,
            slot_bias_flag=1.0,
        ),
        run(
            "b",
            "fair",
            {"temperature": "0.7", "slot_bias": "B 0.300 vs 0.250 right: not far above"},
            mcqa=0.8,
            chance=0.25,
            slot_share_B=0.3,
            slot_bias_flag=0.0,
        ),
        run("c", "older", {}),
    ]
    lines = ui.runs_lines(runs)
    habit, fair, older = (next(line for line in lines if line.startswith(c * 8)) for c in "abc")
    assert "letter habit: A 0.850 vs 0.250 right: far above" in habit and "letter habit" not in fair
    assert older.split()[1:] == ["older", "–", "–"]
    assert "–: the run has no such value" in lines[-1]
    assert not any("–: " in line for line in ui.runs_lines(runs[:2]))  # no dash, no legend


@pytest.mark.promise("docs/review.md", "the report's position-bias table marks a run far above its right answers")
def test_the_report_shows_each_runs_most_chosen_slot_against_the_right_answers(run_job_in, tmp_path):
    run_job_in(*HABIT, "tracking.experiment=slots")
    run_job_in(*FAIR, "tracking.experiment=slots")
    out = tmp_path / "report"
    args = ["--experiment", "slots", "--tracking-uri", run_job_in.store_uri, "--out", str(out), "--no-mlflow"]
    assert compare_main(args) == 0
    md = (out / "report.md").read_text()
    section = md.split("## Position bias")[1].split("\n## ")[0]
    habit = next(line for line in section.splitlines() if "| habit |" in line)
    fair = next(line for line in section.splitlines() if "| fair |" in line)
    assert "far above: a letter habit" in habit and "not far above" in fair
    runs = md.split("### runs compared")[1].split("\n### ")[0]
    assert "letter habit" in next(line for line in runs.splitlines() if "| habit |" in line)
    assert "letter habit" not in next(line for line in runs.splitlines() if "| fair |" in line)


@pytest.mark.promise(
    "docs/mlflow_ui.md", "PriDe's prior is a run's tag, a review-view column and a report column where the run has one"
)
def test_pride_prior_is_shown_in_the_runs_tag_the_review_view_and_the_report(run_job_in, tmp_path):
    """A letter habit scored with label probabilities on the cyclic orders: PriDe's prior is in the run's metrics,
    its `pride_prior` tag, the review view (a column after `slot_bias`, with its legend line) and the report's
    position-bias table; a run without a cyclic set has none, and an experiment without one has no such column."""
    from src.metrics.slots import prior_text

    run_job_in(*FAIR, "tracking.experiment=prior")
    client, runs = mlflow_runs(run_job_in.store_uri, "prior")
    experiment = client.get_experiment(runs[0].info.experiment_id)
    state = experiment.tags[review.SHARED_VIEW_TAG + review.REVIEW_VIEW_KEY]
    assert "tags.`pride_prior`" not in json.loads(state)["selectedColumns"]  # no run has one: no column of dashes
    cyclic = run_job_in(*HABIT, "variants=perm_cyclic", "scoring=logprob", "tracking.experiment=prior")
    prior = {k: v for k, v in cyclic.metrics.items() if k.startswith("pride_prior_")}
    assert list(prior)[:4] == ["pride_prior_A", "pride_prior_B", "pride_prior_C", "pride_prior_D"]
    assert sum(prior.values()) == pytest.approx(1.0, abs=1e-9)
    assert max(prior, key=prior.__getitem__) == "pride_prior_A"  # the habit it estimates
    client, runs = mlflow_runs(run_job_in.store_uri, "prior")
    tags = {r.data.tags["variants"]: r.data.tags for r in runs}
    assert tags["perm_cyclic"]["pride_prior"] == prior_text(cyclic.metrics)
    assert tags["perm_cyclic"]["pride_prior"].startswith(f"A {prior['pride_prior_A']:.2f} B ")
    assert "pride_prior" not in tags["original"]
    experiment = client.get_experiment(experiment.experiment_id)
    columns = json.loads(experiment.tags[review.SHARED_VIEW_TAG + review.REVIEW_VIEW_KEY])["selectedColumns"]
    assert columns[columns.index("tags.`slot_bias`") + 1] == "tags.`pride_prior`"
    legend = experiment.tags[review.LEGEND_TAG]
    assert "- `pride_prior`: PriDe's estimate" in legend and "(pride_prior: perm_cyclic" in legend
    out = tmp_path / "report"
    args = ["--experiment", "prior", "--tracking-uri", run_job_in.store_uri, "--out", str(out), "--no-mlflow"]
    assert compare_main(args) == 0
    section = (out / "report.md").read_text().split("## Position bias")[1].split("\n## ")[0]
    header = next(line for line in section.splitlines() if "most chosen slot" in line)
    names = [cell.strip() for cell in header.split("|")]
    variants, column = names.index("variants"), names.index("PriDe prior")
    rows = {
        cells[variants]: cells[column]
        for line in section.splitlines()
        if line.startswith("|") and (cells := [cell.strip() for cell in line.split("|")])[variants] in tags
    }
    assert rows == {"perm_cyclic": prior_text(cyclic.metrics), "original": "–"}


@pytest.mark.promise("docs/review.md", "a run the position-bias table has no row for is named under it, with why")
def test_a_run_without_slot_shares_is_named_under_the_position_bias_table(run_job_in, tmp_path):
    """A letter habit and a run whose every answer is unparsed (no answer names a slot): the table has the first's
    row and names the second under it, so that a missing row is not read as a fair one."""
    habit = run_job_in(*HABIT, "tracking.experiment=absent")
    unparsed = run_job_in(*FAIR, "model.invalid_rate=1.0", "tracking.experiment=absent")
    assert "slot_bias_flag" in habit.metrics and "slot_bias_flag" not in unparsed.metrics
    out = tmp_path / "report"
    args = ["--experiment", "absent", "--tracking-uri", run_job_in.store_uri, "--out", str(out), "--no-mlflow"]
    assert compare_main(args) == 0
    section = (out / "report.md").read_text().split("## Position bias")[1].split("\n## ")[0]
    assert "| habit |" in section and "| fair |" not in section
    assert (
        f"left out (no row): run {unparsed.run_id[:8]} (fair, original): no multiple-choice answer that names a slot"
    ) in section
    assert habit.run_id[:8] not in section.split("left out")[1]
