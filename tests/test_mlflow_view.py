"""What a job run shows in MLflow (docs/mlflow_ui.md): the study's metrics with the headline first, per-subject
values as a table artifact, one value per param, the documented tags, a description and the questions as a
dataset input, and the experiment's review view."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from src.metrics import headline_order, rws_st_string
from src.presentation.description import headline_text
from src.tracking import review

from .conftest import mlflow_runs

REPEATED = ("model=simulated", "variants=original", "repetitions=4", "temperature=0.7", "limit=12")


@pytest.fixture
def repeated_run(run_job_in):
    """A one-variant repetition run on the synthetic benchmark (15 subjects): its result, MLflow run and client."""
    result = run_job_in(*REPEATED)
    client, (run,) = mlflow_runs(run_job_in.store_uri)
    return result, run, client


@pytest.mark.promise("README.md", "benchmarks with subjects get per-subject headline metrics, subjects.csv in MLflow")
@pytest.mark.promise("docs/mlflow_ui.md", "per-subject values are one subjects.csv artifact per run, not metric keys")
def test_a_repetition_run_logs_its_study_and_per_subject_values_as_a_table(repeated_run):
    result, run, client = repeated_run
    logged = run.data.metrics
    full = json.loads((result.out_dir / "artifacts" / "metrics.json").read_text())
    assert {"rws", "st", "acc_mean", "mcqa", "st_lo", "st_hi"} <= set(logged)
    # the original order alone measures no consistency: the CoRA family is neither computed nor logged
    cora_family = ("mcqa_plus", "mv", "ci", "cora", "bmca_")
    assert not [name for name in [*logged, *full] if name.startswith(cora_family)]
    assert not [name for name in logged if "/" in name]  # per subject: subjects.csv
    unsliced = [name for name in logged if not name.startswith(("slot_", "n_slot"))]  # four numbers per slot
    assert len(unsliced) < 40 < len(full)
    # per-subject values are a table artifact
    local = Path(client.download_artifacts(run.info.run_id, review.SUBJECTS_FILE))
    table = pd.read_csv(local).set_index("subject")
    records = pd.read_parquet(result.out_dir / "artifacts" / "records.parquet")
    assert set(table.index) == set(records["subject"])
    assert list(table.columns[:3]) == ["mcqa", "mcqa_lo", "mcqa_hi"]  # each metric followed by its bounds
    for subject, row in table.iterrows():
        assert row["st"] == pytest.approx(full[f"st/{subject}"])
        assert row["mcqa_hi"] == pytest.approx(full[f"mcqa_hi/{subject}"])
    assert "cora" not in table.columns  # constant by construction, per subject too


@pytest.mark.promise(
    "docs/mlflow_ui.md", "a run page has its description, dataset, chance and rws_st tags and one value per param"
)
def test_params_tags_description_and_dataset(repeated_run):
    result, run, _ = repeated_run
    params = run.data.params  # one value each: the effective scoring, the questions asked
    assert params["scoring"] == "generate" and "model.scoring" not in params
    assert params["n_questions"] == "12" and params["limit"] == "12" and "benchmark.n_questions" not in params
    tags = run.data.tags
    assert tags["rws_st"] == rws_st_string(result.metrics)
    assert {
        "model",
        "benchmark",
        "variants",
        "temperature",
        "scoring",
        "git_commit",
        "prompt_hash",
        "backend",
        "config_hash",
        "kind",
        "sure_rule",
    } <= set(tags)  # every tag the README documents
    note = tags[review.DESCRIPTION_TAG]
    assert "**simulated** on **synthetic**: 12 questions" in note and "4 repetitions" in note
    assert f"Headline: {headline_text(run.data.metrics)}" in note
    st_lo, st_hi = result.metrics["st_lo"], result.metrics["st_hi"]
    assert f"st {result.metrics['st']:.3f} [{st_lo:.3f}, {st_hi:.3f}]" in note
    (asked,) = run.inputs.dataset_inputs
    assert asked.dataset.name == "synthetic" and json.loads(asked.dataset.profile)["num_rows"] == 12
    assert [t.value for t in asked.tags if t.key == "mlflow.data.context"] == ["eval"]


@pytest.mark.promise(
    "docs/mlflow_ui.md", "the review view lists job runs only, sorted by run name, with every study's headline"
)
def test_a_cora_run_keeps_its_family_and_the_review_view_gathers_every_study(repeated_run, run_job_in):
    run_job_in("model=simulated", "variants=cora", "limit=4")
    client, runs = mlflow_runs(run_job_in.store_uri)
    cora = next(r for r in runs if r.data.tags["variants"] == "cora")
    assert {"mcqa", "mcqa_plus", "mv", "ci", "cora", "bmca_1.0", "mcqa_lo"} <= set(cora.data.metrics)
    assert "rws_st" not in cora.data.tags
    experiment = client.get_experiment(cora.info.experiment_id)
    state = json.loads(experiment.tags[review.SHARED_VIEW_TAG + review.REVIEW_VIEW_KEY])
    assert state["searchFilter"] == "tags.kind = 'job'" and state["orderByKey"] == review.JOB_RUNS_ORDER
    columns = state["selectedColumns"]
    # each headline's rounded tag (its bounds inside, lo before hi), then the keys that tell runs apart and the
    # chance level as the tag that judges the accuracy (src/metrics/chance.py); no metric column (unrounded values,
    # drawn before every tag) and no param column, which pushed the keys out of a 1,400-px window
    assert columns[:6] == [f"tags.`{name}`" for name in ("result", "mcqa", "acc_mean", "cora", "rws", "st")]
    assert "tags.`ci`" not in columns and not [c for c in columns if not c.startswith("tags.")]
    assert columns[6:] == [
        f"tags.`{k}`" for k in ("model", "temperature", "variants", "chance", "slot_bias", "benchmark", "scoring")
    ]
    assert cora.data.tags["chance"] == f"{cora.data.metrics['chance']:.3f}: mcqa above chance"
    mcqa, lo, hi = (cora.data.metrics[name] for name in ("mcqa", "mcqa_lo", "mcqa_hi"))
    assert cora.data.tags["mcqa"] == f"{mcqa:.3f} [{lo:.3f}, {hi:.3f}]" and lo <= mcqa <= hi


@pytest.mark.promise(
    "docs/mlflow_ui.md", "the review view shows model, temperature, result first, headlines as rounded tags lo then hi"
)
def test_the_review_view_rounds_each_headline_in_a_tag_bounds_lo_then_hi():
    """A tag per review headline (acc_mean included) at three decimals, lo before hi, listed before the metric
    columns in the view's selection; metrics without a review headline get none, and the metrics are untouched."""
    metrics = {"mcqa": 0.23, "mcqa_lo": 0.158123, "mcqa_hi": 0.32219, "acc_mean": 0.6149, "acc_mean_lo": 0.55001}
    metrics |= {"acc_mean_hi": 0.66049, "rws": float("nan"), "sc_mean": 0.4, "n_trials": 8.0}
    before = dict(metrics)
    tags = review.rounded_tags(metrics)
    # beside acc_mean (a repetition run) mcqa is repetition 0's sampled answers, and its tag says so
    assert tags == {"mcqa": "0.230 [0.158, 0.322] one draw", "acc_mean": "0.615 [0.550, 0.660]"}
    assert metrics.keys() == before.keys() and all(metrics[k] == before[k] for k in before if k != "rws")
    columns = json.loads(review.review_view_state(list(review.finite_metrics(metrics))))["selectedColumns"]
    assert columns[:4] == ["tags.`result`", "tags.`mcqa`", "tags.`acc_mean`", "tags.`model`"]
    assert "tags.`temperature`" in columns
    assert not any(c.startswith("metrics.") or c.endswith(("_lo`", "_hi`")) for c in columns)
    assert "tags.`sc_mean`" not in columns
    # a run logs model and temperature first, then its condition's headline rounded (`result`): the UI draws tag
    # columns in logged order, so these three stand inside a 1,400-px window
    tags = review.review_tags({"benchmark": "b", "variants": "v", "temperature": "0.3", "model": "m"}, metrics)
    assert list(tags) == ["model", "temperature", "result", "variants", "mcqa", "acc_mean", "benchmark"]
    assert tags["result"] == "0.615 [0.550, 0.660] acc_mean"  # the condition's headline, never one draw's mcqa
    assert review.rounded_tags({"accuracy": 0.5, "accuracy_lo": 0.25, "accuracy_hi": 0.75}) == {
        "accuracy": "0.500 [0.250, 0.750]"
    }


@pytest.mark.promise("docs/mlflow_ui.md", "a run page lists the headline metrics first, each followed by its bounds")
def test_the_run_page_lists_the_headline_metrics_first():
    metrics = {
        "n_questions": 3.0,
        "accuracy": 0.5,
        "sure_right": 0.2,
        "st": 0.4,
        "st_lo": 0.1,
        "st_hi": 0.7,
        "rws": 0.9,
        "mcqa": 0.5,
        "wacc@cyclic": 0.3,
        "mcqa/law": 1.0,
        "cora": 0.5,
    }
    logged, _ = review.review_view(metrics)
    assert list(logged)[:7] == ["mcqa", "cora", "rws", "st", "st_lo", "st_hi", "wacc_at_cyclic"]
    assert "mcqa/law" not in logged and "accuracy" in logged
    assert headline_order(list(metrics)) == ["mcqa", "cora", "rws", "st", "wacc@cyclic"]


@pytest.mark.promise("docs/validity.md", "a run of the original order alone logs, tags and prints no CoRA metric")
def test_a_single_trial_original_run_logs_no_cora_family(run_job_in, capsys):
    result = run_job_in("model=simulated", "variants=original", "limit=6")
    _, (run,) = mlflow_runs(run_job_in.store_uri)
    cora_family = ("mcqa_plus", "mv", "ci", "cora", "bmca_")
    assert "mcqa" in run.data.metrics and not [n for n in run.data.metrics if n.startswith(cora_family)]
    assert not [k for k in run.data.tags if k.startswith(cora_family)]
    assert "cora" not in run.data.tags["headline"].split(",") and "rws_st" not in run.data.tags
    printed = result.closing() + result.summary()
    assert "mcqa" in printed and not re.findall(r"\b(mcqa_plus|mv|ci|cora|bmca_[\d.]+)\b", printed), printed


@pytest.mark.promise(
    "docs/mlflow_ui.md", "a missing store, an unknown experiment or a tracking server's URI is one error line, exit 2"
)
def test_src_ui_refuses_a_missing_store_or_experiment_in_one_line(tmp_path, run_job_in, capsys):
    """`python -m src.ui` names what is wrong and what to do, exit 2, before starting any server."""
    from src import ui

    assert ui.main(["--tracking-uri", f"sqlite:///{tmp_path}/none/mlflow.db"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: --tracking-uri") and "run a job first" in err
    run_job_in("model=simulated", "limit=2")
    assert ui.main(["--tracking-uri", run_job_in.store_uri, "--experiment", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: --experiment nope: not in {run_job_in.store_uri}; its experiments: Default, mcq-consistency"
    assert ui.main(["--tracking-uri", "http://127.0.0.1:9/"]) == 2
    assert "serves its own UI" in capsys.readouterr().err


@pytest.mark.promise(
    "docs/mlflow_ui.md", "without Playwright or Chromium the browser commands say what to install in one line, exit 2"
)
def test_the_browser_commands_name_what_to_install_in_one_line(tmp_path, monkeypatch, capsys):
    """Without Playwright (the browser extra; hidden here), `python -m devtools.ui_check` and `python -m src.ui
    --screenshot` print one line naming `pip install -e ".[browser]"`, exit 2, before reading a store or starting a
    server; with Playwright but no Chromium on PATH, the line names the apt-get install."""
    import sys
    import types

    from devtools import ui_check
    from src import ui
    from src.presentation import browser

    def started(*args, **kwargs):
        raise AssertionError("a server or an experiment was made before the browser check")

    monkeypatch.setattr(browser, "start_ui", started)  # both commands start `mlflow ui` through it
    monkeypatch.setattr(ui_check, "make_experiment", started)
    missing_store = ["--tracking-uri", f"sqlite:///{tmp_path}/none/mlflow.db"]
    for name in ("playwright", "playwright.sync_api"):
        monkeypatch.setitem(sys.modules, name, None)  # `import playwright.sync_api` raises ImportError
    assert ui_check.main(["--out", str(tmp_path)]) == 2
    needs = 'error: python -m devtools.ui_check needs Playwright: pip install -e ".[browser]"\n'
    assert capsys.readouterr().err == needs
    assert ui.main([*missing_store, "--screenshot", str(tmp_path / "x.png")]) == 2
    assert capsys.readouterr().err == 'error: --screenshot needs Playwright: pip install -e ".[browser]"\n'
    assert ui.main(missing_store) == 2  # without --screenshot no browser is needed: the store's own error
    assert "no MLflow store" in capsys.readouterr().err

    for name in ("playwright", "playwright.sync_api"):  # Playwright there, no Chromium
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setattr(browser, "find_chromium", lambda: None)
    assert ui_check.main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: python -m devtools.ui_check needs Chromium on PATH")
    assert err.endswith(f"install it: {browser.INSTALL_HINT}\n")
    assert ui.main([*missing_store, "--screenshot", str(tmp_path / "x.png")]) == 2
    assert capsys.readouterr().err.startswith("error: --screenshot needs Chromium on PATH")


@pytest.mark.promise(
    "docs/mlflow_ui.md", "no study's headline pushes the accuracy out of a 1,400-px window; an older view is named"
)
def test_no_study_pushes_the_accuracy_out_of_a_laptop_window_and_an_older_view_is_named(run_job_in):
    """Three studies whose headlines sort before MCQA (REVAS acc_h, CoRA cora, the fluctuation study's full_fr) no
    longer push it out of a 1,400-px window: the view shows headlines as tags, drawn in logged order, and no metric
    column; a view written when it showed metric columns (sorted by name) is still named by `python -m src.ui`."""
    from mlflow.tracking import MlflowClient

    from src import ui

    for variants in ("cora", "revas_reorder", "perm_all"):
        run_job_in("model=simulated", f"variants={variants}", "limit=4")
    url, runs, note = ui.review_address(run_job_in.store_uri, "mcq-consistency", "http://127.0.0.1:9")
    assert url.startswith("http://127.0.0.1:9/#/experiments/") and len(runs) == 3 and note is None
    client = MlflowClient(tracking_uri=run_job_in.store_uri)
    experiment = client.get_experiment_by_name("mcq-consistency")
    key = review.SHARED_VIEW_TAG + review.REVIEW_VIEW_KEY
    columns = json.loads(experiment.tags[key])["selectedColumns"]
    assert {"tags.`mcqa`", "tags.`cora`", "tags.`acc_h`", "tags.`full_fr`"} <= set(columns)
    assert [c for c in columns if not c.startswith("tags.")] == []
    older = [f"metrics.`{name}`" for name in ("mcqa", "cora", "acc_h", "full_fr")]
    client.set_experiment_tag(experiment.experiment_id, key, json.dumps({"selectedColumns": older}))
    note = ui.review_address(run_job_in.store_uri, "mcq-consistency", "http://127.0.0.1:9")[2]
    assert note.startswith("note: mcqa is metric column 4 of the review view (acc_h, cora, full_fr sort before it")


@pytest.mark.promise(
    "docs/mlflow_ui.md",
    "src.ui lists the job runs with the keys that vary, each headline rounded with its chance verdict",
)
def test_src_ui_lists_what_tells_the_runs_apart_with_each_headline_rounded():
    """`python -m src.ui`'s lines under the address (stand-in runs, no MLflow): the keys that vary are columns
    (model, temperature), the rest said once; a run with repetitions shows acc_mean with its interval at three
    decimals, never repetition 0's mcqa; a high INVALID share is marked; what 'at chance' means is said once."""
    from types import SimpleNamespace as N

    from src import ui
    from src.metrics.chance import AT_CHANCE, AT_CHANCE_MEANING

    def run(run_id, model, temperature, **metrics):
        tags = {"model": model, "benchmark": "synthetic", "variants": "original", "temperature": temperature}
        return N(info=N(run_id=run_id * 8), data=N(tags=tags, metrics={"chance": 0.25, **metrics}))

    runs = [
        run("b", "smollm2", "1.0", mcqa=0.4, acc_mean=0.26, acc_mean_lo=0.2104, acc_mean_hi=0.31000001),
        run("a", "gemma", "0.7", mcqa=0.3, acc_mean=0.61, acc_mean_lo=0.55, acc_mean_hi=0.6604, invalid_rate=0.33),
    ]
    header, gemma, smollm2, *rest = ui.runs_lines(runs)
    assert header.split()[:3] == ["run", "model", "temperature"]
    assert gemma.split()[:3] == ["aaaaaaaa", "gemma", "0.7"]
    assert "acc_mean 0.610 [0.550, 0.660] above chance  INVALID 0.33 (high)" in gemma
    assert f"acc_mean 0.260 [0.210, 0.310] {AT_CHANCE}" in smollm2 and "mcqa" not in smollm2 + gemma
    assert rest == ["every run: benchmark synthetic, variants original", f"{AT_CHANCE}: {AT_CHANCE_MEANING}"]
