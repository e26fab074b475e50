"""What a run logs for its review (src/tracking/review.py), piece by piece: the per-subject table, the review link,
the saved view state as MLflow's UI reads it, its legend, the result tag, the flattened params and the questions
as the run's dataset."""

from __future__ import annotations

import json
import re
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from src.core.questions import Question
from src.metrics.slots import FAR_MARGIN
from src.tracking import review

UI_BUNDLE = Path(mlflow.__file__).parent / "server" / "js" / "build" / "static" / "js"


def test_a_subject_whose_name_holds_a_slash_keeps_its_whole_name():
    logged, table = review.review_view(
        {"mcqa": 0.5, "mcqa/high_school/physics": 1.0, "mcqa_lo/high_school/physics": 0.4}
    )
    assert logged == {"mcqa": 0.5}
    assert table.to_dict("records") == [{"subject": "high_school/physics", "mcqa": 1.0, "mcqa_lo": 0.4}]


@pytest.mark.parametrize("base", ["http://LAB-BOX/", "http://LAB-BOX", "http://127.0.0.1:5000//"])
def test_the_review_link_joins_a_base_url_with_or_without_its_trailing_slash(base):
    assert review.review_link("7", base) == (
        "http://" + base.split("//")[1].rstrip("/") + "/#/experiments/7/runs?viewStateShareKey=review&"
        "workflowType=machine_learning"
    )


def test_a_view_state_without_columns_or_not_json_shows_no_headline():
    for state in ('{"searchFilter": "tags.kind = \'job\'"}', "not json", "[1, 2]", None):
        assert review.view_headlines(state) == []
        assert review.columns_before_accuracy(state) == (None, [])


def test_an_older_view_names_its_metric_columns_then_its_rounded_tags_as_headlines():
    older = json.dumps({"selectedColumns": ["metrics.`cora`", "tags.`model`", "tags.`mcqa`", "metrics.`rws_lo`"]})
    assert review.view_headlines(older) == ["cora", "rws_lo", "mcqa"]
    kept = json.loads(review.review_view_state(["st"], older))["selectedColumns"]
    assert kept[:4] == ["tags.`result`", "tags.`mcqa`", "tags.`cora`", "tags.`st`"]  # the older study's stay


def test_the_prior_column_once_shown_stays_when_a_later_study_logs_no_prior():
    with_prior = review.review_view_state(["mcqa", review.PRIOR_METRIC])
    later = json.loads(review.review_view_state(["rws"], with_prior))["selectedColumns"]
    slot = later.index(f"tags.`{review.SLOT_TAG}`")
    assert later[slot + 1] == f"tags.`{review.PRIOR_TAG}`"
    assert f"tags.`{review.PRIOR_TAG}`" not in json.loads(review.review_view_state(["rws"]))["selectedColumns"]


def ui_defaults() -> dict[str, str]:
    """MLflow's UI's own default view state, key -> value as its bundle writes it: the search facets
    (`{searchFilter:"",...}`) and the runs table's UI state (`{selectedColumns:...,groupBy:null,...}`)."""
    bundle = "".join(path.read_text(errors="replace") for path in UI_BUNDLE.glob("*.js"))
    defaults: dict[str, str] = {}
    for start in ('({searchFilter:"",', "({selectedColumns:"):
        at = bundle.index(start)
        body = bundle[at + 2 : bundle.index("})", at)]
        defaults.update(re.findall(r"(?:^|,)(\w+):(\{\}|\[\]|null|!0|!1|\"[^\"]*\"|[\w.$()]+)", body))
    return defaults


def test_the_saved_view_is_keys_mlflows_ui_reads_job_runs_by_name_a_to_z_flat():
    defaults = ui_defaults()
    state = json.loads(review.review_view_state(["mcqa"]))
    assert set(state) <= set(defaults), set(state) - set(defaults)
    assert state["searchFilter"] == review.JOB_RUNS_FILTER
    assert (state["orderByKey"], state["orderByAsc"]) == (review.JOB_RUNS_ORDER, True)  # by run name, A to Z
    # no run folded open, no grouping: as the UI starts (its own defaults), so the job runs are listed flat
    assert (json.dumps(state["runsExpanded"]), defaults["runsExpanded"]) == ("{}", "{}")
    assert (state["groupBy"], defaults["groupBy"]) == (None, "null")


def test_the_legend_states_the_margin_slot_bias_is_judged_by():
    legend = review.review_legend(review.review_view_state(["mcqa"]))
    (line,) = [line for line in legend.splitlines() if line.startswith(f"- `{review.SLOT_TAG}`")]
    assert f"by more than {FAR_MARGIN:g} " in line and "{margin}" not in line


def test_a_run_with_no_finite_verdict_metric_gets_no_result_tag():
    tags = {"model": "m", "temperature": "0.0", "scoring": "generate"}
    for metrics in ({}, {"n_trials": 4.0}, {"mcqa": float("nan")}):
        assert review.review_tags(tags, metrics) == tags
    assert review.review_tags(tags, {"mcqa": 0.25})[review.RESULT_TAG] == "0.250 mcqa"


def test_the_subjects_table_is_written_without_its_index_and_only_when_there_are_subjects(tmp_path):
    _, table = review.review_view({"mcqa": 0.5, "mcqa/law": 1.0, "mcqa/art": 0.0})
    review.write_subjects(table, tmp_path)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / review.SUBJECTS_FILE), table)
    (tmp_path / review.SUBJECTS_FILE).unlink()
    review.write_subjects(review.review_view({"mcqa": 0.5})[1], tmp_path)
    assert not (tmp_path / review.SUBJECTS_FILE).exists()


def test_a_nested_config_flattens_to_dotted_keys_with_lists_as_json():
    config = {"model": {"name": "m", "engine": {"dtype": "auto", "stop": ["\n", "Q:"]}}, "seeds": (1, 2), "limit": None}
    assert review.flatten(config) == {
        "model.name": "m",
        "model.engine.dtype": "auto",
        "model.engine.stop": json.dumps(["\n", "Q:"]),
        "seeds": "[1, 2]",
        "limit": None,
    }


def test_the_questions_dataset_has_a_row_per_question_with_the_right_options_text_as_target():
    questions = [
        Question(id="q1", question="2+2?", options=("3", "4"), answer=1, subject="math"),
        Question(id="q2", question="Sky?", options=("blue", "green", "red"), answer=0),
    ]
    dataset = review.questions_dataset(questions, name="tiny")
    assert dataset.name == "tiny" and dataset.targets == "answer"
    assert dataset.df.to_dict("records") == [
        {"id": "q1", "subject": "math", "question": "2+2?", "options": '["3", "4"]', "answer": "4"},
        {"id": "q2", "subject": "", "question": "Sky?", "options": '["blue", "green", "red"]', "answer": "blue"},
    ]
    assert dataset.source.to_dict()["tags"]  # MLflow's own source: the code that ran, with its context tags
    other = review.questions_dataset(questions[:1], name="tiny")
    assert other.digest != dataset.digest
