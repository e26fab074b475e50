"""The screenshot checks' decisions without a browser: what `python -m src.ui --screenshot` (`src.ui.window_check`,
its exit code and JSON line) and `python -m devtools.ui_check` (`runs_page_checks`, `run_page_checks`) make of a
page, given the page as the browser would have read it. The browser tier (tests/test_mlflow_ui.py) checks that a
real MLflow UI in Chromium gives pages these decisions pass; these tests check the decisions themselves, so a check
that passes a page it must fail is caught in the fast tier."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest

from devtools import ui_check
from src import ui
from src.presentation import browser
from src.presentation.description import headline_text
from src.tracking import review

RUNS = ["smollm2-synthetic-original-0.7", "gemma-synthetic-original-1.0"]


def header(text: str, *, visible: bool = True) -> dict:
    return {"text": text, "left": 0.0, "right": 100.0, "visible": visible}


def review_page(*, columns=("model", "temperature", "result", "variants"), hidden=(), text=None, drawn=True) -> dict:
    """A review view as `browser.HEADERS_SCRIPT` reads it: MLflow's own columns, then `columns`; those in `hidden`
    lie outside the window (scrolled away or under the Assistant panel)."""
    names = ["Run Name", "Created", "Duration", *columns]
    return {
        "width": ui.WINDOW[0],
        "text": "\n".join(RUNS) if text is None else text,
        "headers": [header(n, visible=n not in hidden) for n in names],
        "drawn": drawn,
    }


@pytest.mark.promise(
    "docs/mlflow_ui.md", "--screenshot passes a window that lists the job runs with model, temperature and result"
)
def test_a_window_with_the_runs_and_the_three_first_columns_passes():
    shown = ui.window_check(review_page(), RUNS)
    assert shown["failed"] == []
    assert shown["runs_listed"] == RUNS
    assert shown["key_columns"] == ["model", "temperature", "variants"] and shown["headline_columns"] == ["result"]


@pytest.mark.promise("docs/mlflow_ui.md", "--screenshot fails a window that shows none of the experiment's job runs")
def test_a_window_that_lists_no_job_run_fails():
    shown = ui.window_check(review_page(text="No runs logged"), RUNS)
    assert shown["runs_listed"] == [] and any("no job run" in f for f in shown["failed"]), shown


@pytest.mark.promise("docs/mlflow_ui.md", "--screenshot fails on an experiment without job runs: the window shows none")
def test_an_experiment_without_job_runs_fails_the_check():
    shown = ui.window_check(review_page(text="No runs logged"), [])
    assert any("no job run" in f for f in shown["failed"]), shown


@pytest.mark.parametrize("column", ["model", "temperature", "result"])
@pytest.mark.promise(
    "docs/mlflow_ui.md", "--screenshot fails when model, temperature or result is missing from the window"
)
def test_a_window_without_one_of_the_three_columns_fails(column):
    absent = ui.window_check(review_page(columns=[c for c in ("model", "temperature", "result") if c != column]), RUNS)
    covered = ui.window_check(review_page(hidden=(column,)), RUNS)  # drawn, but outside the window or under a panel
    for shown in (absent, covered):
        assert len(shown["failed"]) == 1 and column in shown["failed"][0], shown
        assert column not in shown["key_columns"] + shown["headline_columns"]


@pytest.mark.promise("docs/mlflow_ui.md", "--screenshot fails a page that was not drawn in time, saying so")
def test_a_page_not_drawn_in_time_fails_naming_the_wait():
    shown = ui.window_check(review_page(drawn=False), RUNS)
    assert shown["failed"][0] == f"the page was not drawn within {browser.PAGE_TIMEOUT_S:.0f} s"


def test_a_header_listed_twice_is_reported_once():
    page = review_page(columns=("model", "temperature", "result", "result"))
    assert ui.window_check(page, RUNS)["headline_columns"] == ["result"]


@pytest.fixture
def ui_store(tmp_path, empty_mlflow_db):
    """A store with the experiment `ui-check` and two job runs named RUNS, a sweep parent beside them."""
    from mlflow.tracking import MlflowClient

    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("ui-check")
    client.create_run(experiment, run_name="sweep-ui-check-0001", tags={"kind": "sweep"})
    for name in RUNS:
        client.create_run(experiment, run_name=name, tags={"kind": "job"})
    return uri, experiment


def screenshot_main(monkeypatch, uri: str, page: dict, tmp_path) -> int:
    """`python -m src.ui --screenshot` in-process, with the server and the browser replaced by `page`."""
    started = []
    monkeypatch.setattr(browser, "browser_missing", lambda what: None)
    monkeypatch.setattr(browser, "start_ui", lambda uri, port, log: started.append(port) or SimpleNamespace(pid=1))
    monkeypatch.setattr(browser, "stop_ui", lambda server: started.remove(started[0]))
    monkeypatch.setattr(ui, "screenshot", lambda url, png, has_runs: page)
    code = ui.main(["--experiment", "ui-check", "--tracking-uri", uri, "--screenshot", str(tmp_path / "r.png")])
    assert started == [], "the server was left running"
    return code


@pytest.mark.promise(
    "docs/mlflow_ui.md", "--screenshot prints one JSON line of what the window shows and exits 0 when it holds"
)
def test_screenshot_prints_one_json_line_and_exits_0_when_every_check_holds(ui_store, monkeypatch, tmp_path, capsys):
    uri, experiment = ui_store
    assert screenshot_main(monkeypatch, uri, review_page(), tmp_path) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    shown = json.loads(out[0])
    assert shown["url"].endswith(f"/#/experiments/{experiment}/runs?viewStateShareKey=review&{review.ML_WORKFLOW}")
    assert sorted(shown["runs_listed"]) == sorted(RUNS) and shown["window"] == [1400, 900] and shown["failed"] == []


@pytest.mark.promise(
    "docs/mlflow_ui.md", "--screenshot exits 1 when the window misses a run or a column, and stops the server"
)
def test_screenshot_exits_1_naming_what_the_window_misses(ui_store, monkeypatch, tmp_path, capsys):
    uri, _ = ui_store
    assert screenshot_main(monkeypatch, uri, review_page(hidden=("result",)), tmp_path) == 1
    assert "result" in json.loads(capsys.readouterr().out)["failed"][0]
    assert screenshot_main(monkeypatch, uri, review_page(text=""), tmp_path) == 1


# devtools/ui_check.py: what the rendered review view and run page must show


def fake_run(name: str, metrics: dict[str, float]) -> SimpleNamespace:
    tags = review.review_tags({"model": "simulated", "temperature": "0.7", "variants": "x"}, metrics)
    tags |= {"chance": "0.223: mcqa above chance", "rws_st": "1.00 | 35%"}
    return SimpleNamespace(info=SimpleNamespace(run_name=name), data=SimpleNamespace(tags=tags, metrics=metrics))


def bounded(name: str, value: float, lo: float, hi: float) -> dict[str, float]:
    return {name: value, f"{name}_lo": lo, f"{name}_hi": hi}


@pytest.fixture
def experiment() -> ui_check.Experiment:
    cora = fake_run(
        "simulated-synthetic-cora-0", bounded("mcqa", 0.7504, 0.5312, 0.8881) | bounded("cora", 0.6, 0.4, 0.8)
    )
    repeated = fake_run(
        "simulated-synthetic-original-0.7",
        bounded("mcqa", 0.8, 0.6, 0.9)
        | bounded("acc_mean", 0.78, 0.68, 0.86)
        | bounded("rws", 1.0, 0.646, 1.0)
        | bounded("st", 0.35, 0.181, 0.567),
    )
    return ui_check.Experiment("sqlite://", "1", "sweep-ui-check-0001", {"cora": cora, "repetition": repeated})


def runs_dom(exp: ui_check.Experiment, *, leave_out: str = "", add: str = "") -> str:
    """A review view's DOM as the UI renders it: a header cell per column, a row per job run with its tags."""
    columns = ["model", "temperature", "result", "variants", "mcqa", "acc_mean", "cora", "rws", "st"]
    cells = [f'<div role="columnheader">{c}</div>' for c in columns]
    for run in exp.runs.values():
        cells.append(f"<a>{run.info.run_name}</a>")
        cells += [f"<span>{run.data.tags[c]}</span>" for c in columns if c in run.data.tags]
    dom = "<html>" + "".join(cells) + add + "</html>"
    return dom.replace(leave_out, "") if leave_out else dom


def run_dom(exp: ui_check.Experiment, *, leave_out: str = "") -> str:
    run = exp.runs["repetition"]
    dom = (
        f"<p>Headline: {headline_text(dict(run.data.metrics))}</p><span>{run.data.tags['chance']}</span>"
        f"<span>{run.data.tags['rws_st']}</span><td>rws</td><td>st</td><td>synthetic</td>"
    )
    return dom.replace(leave_out, "") if leave_out else dom


@pytest.mark.promise(
    "docs/mlflow_ui.md", "devtools.ui_check passes a review view listing both job runs with rounded headlines"
)
def test_ui_check_passes_pages_that_show_what_they_must(experiment):
    assert ui_check.runs_page_checks(runs_dom(experiment), experiment) == []
    assert ui_check.run_page_checks(run_dom(experiment), experiment) == []


@pytest.mark.promise(
    "docs/mlflow_ui.md", "devtools.ui_check fails a review view missing a job run or listing the sweep parent"
)
def test_ui_check_fails_a_review_view_without_a_run_or_with_the_parent(experiment):
    missing = ui_check.runs_page_checks(runs_dom(experiment, leave_out="simulated-synthetic-cora-0"), experiment)
    assert missing == ["runs page: run simulated-synthetic-cora-0 is not listed"]
    parent = ui_check.runs_page_checks(runs_dom(experiment, add="<a>sweep-ui-check-0001</a>"), experiment)
    assert len(parent) == 1 and "sweep parent" in parent[0]


@pytest.mark.parametrize("column", ["mcqa", "rws", "model", "temperature", "variants"])
@pytest.mark.promise("docs/mlflow_ui.md", "devtools.ui_check fails a review view without a headline or key column")
def test_ui_check_fails_a_review_view_without_a_column(experiment, column):
    failed = ui_check.runs_page_checks(runs_dom(experiment, leave_out=f">{column}<"), experiment)
    assert f"runs page: no column {column}" in failed


@pytest.mark.promise("docs/mlflow_ui.md", "devtools.ui_check fails a review view that shows a headline unrounded")
def test_ui_check_fails_a_review_view_that_shows_an_unrounded_value(experiment):
    rounded = experiment.runs["cora"].data.tags["mcqa"]
    assert rounded == "0.750 [0.531, 0.888]"
    failed = ui_check.runs_page_checks(runs_dom(experiment, add="<span>0.7504</span>"), experiment)
    assert failed == ["runs page: the unrounded value 0.7504 of mcqa is shown"]
    untagged = ui_check.runs_page_checks(runs_dom(experiment, leave_out=rounded), experiment)
    assert untagged == ["runs page: the rounded mcqa tag '0.750 [0.531, 0.888]' is not shown"]


@pytest.mark.parametrize("what", ["Headline:", "0.223: mcqa above chance", "1.00 | 35%", ">rws<", "synthetic"])
@pytest.mark.promise(
    "docs/mlflow_ui.md", "devtools.ui_check fails a run page without its headline, chance, rws_st or dataset"
)
def test_ui_check_fails_a_run_page_missing_what_it_must_show(experiment, what):
    assert len(ui_check.run_page_checks(run_dom(experiment, leave_out=what), experiment)) == 1


@pytest.mark.parametrize(
    ("value", "text"), [(0.35, "0.35"), (1.0, "1"), (0.1875, "0.1875"), (0.16000000000000003, "0.16000000000000003")]
)
def test_a_metric_is_matched_in_the_form_the_runs_table_prints_it(value, text):
    assert ui_check.shown(value) == text


@pytest.mark.promise(
    "docs/mlflow_ui.md", "src.ui starts mlflow ui on 127.0.0.1 with one worker and without the GenAI job runner"
)
def test_the_ui_server_listens_on_localhost_with_one_worker_and_no_job_runner(tmp_path, monkeypatch):
    import subprocess
    import urllib.request

    started = {}

    class Server:
        pid, returncode = 1, None

        def poll(self):
            return None

    def popen(cmd, **kwargs):
        started.update(cmd=cmd, **kwargs)
        return Server()

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: SimpleNamespace(read=lambda: b"OK"))
    browser.start_ui("sqlite:///x.db", 5123, tmp_path / "log")
    cmd = started["cmd"]
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--port") + 1] == "5123"
    assert cmd[cmd.index("--workers") + 1] == "1" and cmd[cmd.index("--backend-store-uri") + 1] == "sqlite:///x.db"
    assert started["env"]["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert started["start_new_session"]  # its own process group: stop_ui ends its workers with it


@pytest.mark.promise("docs/mlflow_ui.md", "src.ui serves on a free port of 127.0.0.1, or the one --port names")
def test_the_ui_takes_a_free_port_or_the_one_given(ui_store, monkeypatch, tmp_path, capsys):
    ports = []
    monkeypatch.setattr(browser, "browser_missing", lambda what: None)
    monkeypatch.setattr(browser, "start_ui", lambda uri, port, log: ports.append(port) or SimpleNamespace(pid=1))
    monkeypatch.setattr(browser, "stop_ui", lambda server: None)
    monkeypatch.setattr(ui, "screenshot", lambda url, png, has_runs: review_page())
    uri, _ = ui_store
    shot = ["--experiment", "ui-check", "--tracking-uri", uri, "--screenshot", str(tmp_path / "r.png")]
    assert ui.main([*shot, "--port", "5123"]) == 0
    assert json.loads(capsys.readouterr().out)["url"].startswith("http://127.0.0.1:5123/#/experiments/")
    assert ui.main(shot) == 0
    assert ports[0] == 5123 and 0 < ports[1] < 65536 and ports[1] != 5123


@pytest.mark.promise(
    "docs/mlflow_ui.md", "a job run is named model-benchmark-variants-T, the name the review view sorts by"
)
def test_a_job_run_is_named_by_model_benchmark_variants_and_temperature(run_job_in):
    from .conftest import mlflow_runs

    run_job_in("model=simulated", "limit=2", "variants=cora", "temperature=0.7")
    _, (run,) = mlflow_runs(run_job_in.store_uri)
    assert run.info.run_name == "simulated-synthetic-cora-T0.7"
    assert run.data.tags["kind"] == "job"  # what the view's filter (review.JOB_RUNS_FILTER) lists
    assert review.JOB_RUNS_ORDER == "tags.`mlflow.runName`"
