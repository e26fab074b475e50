"""The MLflow UI in a real browser (`python -m devtools.ui_check`): the review view lists the job runs with their
headline metrics, and a run page shows its description, `rws_st` and headline metrics. Needs Playwright (the
browser extra) and Chromium; asked for without either, the tier fails (tests/conftest.py turns the skip into a
failure)."""

from __future__ import annotations

import re

import pytest

from devtools import ui_check
from src.presentation import browser

# an opt-in tier (--run-browser, the fourth step of .ci/run): a real `mlflow ui` server (20 s to minutes to start)
# and three page loads in headless Chromium, driven by Playwright
pytestmark = [pytest.mark.browser, pytest.mark.slow]


def needs_browser() -> str:
    """The Chromium binary Playwright drives, or a skip saying what is missing (tests/conftest.py adds what to
    install): called in the test, not a fixture, so that the tier asked for reports the test FAILED, not an error
    at setup."""
    pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    found = browser.find_chromium()
    if found is None:
        pytest.skip(f"no Chromium on PATH ({', '.join(browser.CHROMIUM_NAMES)})")
    return found


@pytest.mark.promise(
    "docs/mlflow_ui.md",
    "devtools.ui_check: in Chromium the review view and a run page show what they must, screenshots written",
)
def test_the_mlflow_ui_shows_the_headline_metrics(tmp_path, monkeypatch):
    chromium = needs_browser()
    monkeypatch.setenv("TQDM_DISABLE", "1")
    failed = ui_check.check(tmp_path / "shots", work=tmp_path / "work", chromium=chromium)
    assert failed == []
    for name in ("mlflow_runs.png", "mlflow_run.png"):
        png = (tmp_path / "shots" / name).read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 20_000, name  # a rendered page, not a blank one


@pytest.mark.promise(
    "docs/mlflow_ui.md",
    "src.ui --screenshot: the job runs with model, temperature and result inside a 1,400 x 900 window",
)
def test_src_ui_prints_the_review_view_with_mcqa_in_a_laptop_window(tmp_path, monkeypatch):
    """`python -m src.ui --screenshot FILE` (the command docs/mlflow_ui.md gives): the printed address opens the
    review view, which lists the job runs with the keys that tell them apart (temperature included) and a rounded
    headline inside a 1,400 x 900 window, Assistant panel open."""
    import json
    import subprocess
    import sys

    needs_browser()
    monkeypatch.setenv("TQDM_DISABLE", "1")
    exp = ui_check.make_experiment(tmp_path)
    shot = tmp_path / "review.png"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.ui",
            "--experiment",
            ui_check.EXPERIMENT,
            "--tracking-uri",
            exp.uri,
            "--screenshot",
            str(shot),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = json.loads(proc.stdout.strip().splitlines()[-1])
    assert shown["url"].endswith(
        f"/#/experiments/{exp.experiment_id}/runs?viewStateShareKey=review&workflowType=machine_learning"
    )
    assert sorted(shown["runs_listed"]) == sorted(run.info.run_name for run in exp.runs.values())
    assert shown["failed"] == [] and shown["window"] == [1400, 900]
    assert "result" in shown["headline_columns"] and shown["key_columns"][:2] == ["model", "temperature"]
    cells = [run.data.tags["result"] for run in exp.runs.values()]  # each run's headline, rounded: `0.750 [0.531, ...`
    assert all(re.fullmatch(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\] (acc_mean|mcqa)", c) for c in cells), cells
    assert cells[1].endswith(" acc_mean")  # the repetition run: the mean over its draws
    assert shot.read_bytes().startswith(b"\x89PNG")


@pytest.mark.promise(
    "docs/mlflow_ui.md", "src.ui prints the review view's address, serves it, and Ctrl-C stops the server with it"
)
def test_src_ui_serves_until_interrupted_and_leaves_no_server(tmp_path, monkeypatch):
    """Without --screenshot: one line with the review view's address, the server answering it, and Ctrl-C (SIGINT)
    stops the server with the command."""
    import os
    import re
    import signal
    import subprocess
    import sys
    import urllib.request

    monkeypatch.setenv("TQDM_DISABLE", "1")
    exp = ui_check.make_experiment(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "src.ui", "--experiment", ui_check.EXPERIMENT, "--tracking-uri", exp.uri],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        line = proc.stdout.readline()
        address = re.fullmatch(r"review view: (http://127\.0\.0\.1:(\d+)/#/experiments/\d+/runs\?\S+)\n", line)
        assert address, line + proc.stderr.read()[-2000:] if proc.poll() is not None else line
        port = address.group(2)
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10).status == 200
        listed = [proc.stderr.readline()]  # the runs with what tells them apart (`runs_lines`), then the server's pid
        while listed[-1] and not re.search(r"\(pid \d+\)", listed[-1]):
            listed.append(proc.stderr.readline())
        assert listed[0].split()[:2] == ["run", "variants"] and len(listed) > len(exp.runs) + 1, listed
        server_pid = int(re.search(r"\(pid (\d+)\)", listed[-1]).group(1))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
        with pytest.raises(ProcessLookupError):
            os.kill(server_pid, 0)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# what a reader sees first of report.html: the bottom line's list and the summary table, their edges in the window
FIRST_SCREEN_SCRIPT = """(() => {
  const bottom = document.querySelector('ul.bottom');
  let table = document.getElementById('summary-which-model-to-pick-on-each-benchmark');
  while (table && table.tagName !== 'TABLE') table = table.nextElementSibling;
  if (!bottom || !table) return null;
  const b = bottom.getBoundingClientRect(), t = table.getBoundingClientRect();
  return JSON.stringify({width: window.innerWidth, height: window.innerHeight, bottom: [b.top, b.bottom],
    table: [t.top, t.bottom, t.right], cut: table.scrollWidth > table.clientWidth, text: bottom.innerText});
})()"""


def four_conditions_of_two_models(monkeypatch):
    """The README's five-command study as the report's runs: two models on a CoRA condition (T=0) and on three
    repetition conditions (T=0.3, 0.7, 1.0, scoring logprob, 10 repetitions), 20 questions of 100, INVALID shares
    above 0.10 and one model below chance: the longest bottom lines and condition labels a study of 4 x 2 makes."""
    import numpy as np

    from .test_paired import cora_records, repetition_records, runs_of

    rng = np.random.default_rng(1)
    frames, conditions = {}, []
    for t in (0.0, 0.3, 0.7, 1.0):
        for model, share in (("smollm2_135m", 0.25), ("gemma3_270m", 0.08)):
            first, later = rng.random(20) < share, rng.random(20) < share
            frames[f"{model} T={t}"] = cora_records(first, later) if t == 0 else repetition_records(first, later, 10)
            conditions.append((model, t))
    runs = runs_of(frames, monkeypatch, limit=20, benchmark_size=100, chance=0.26, invalid_rate=0.3)
    table = runs.table
    table["model"] = [m for m, _ in conditions]
    table["temperature"] = [t for _, t in conditions]
    repetition = table["temperature"] > 0
    table.loc[repetition, ["variants", "prompt", "scoring", "repetitions"]] = ["original", "repetition", "logprob", 10]
    return runs


def test_the_reports_first_screen_shows_the_bottom_line_and_the_decision_table(tmp_path, monkeypatch):
    """report.html of 4 conditions x 2 models in a 1,400 x 900 window (a laptop's): the bottom line (one line per
    condition) and the whole summary table are on the first screen, nothing of the table cut off at the right."""
    from src.compare import report
    from src.compare.sections import build_sections

    chromium = needs_browser()
    sections = build_sections(four_conditions_of_two_models(monkeypatch))
    assert len(sections[0].lines) == 4 and len(sections[1].tables[0].text) == 4
    report.write(sections, tmp_path / "r", header=["h"], title="Model comparison: t")
    size = (1400, 900)
    with browser.open_browser(chromium) as chrome:
        page = browser.load_page(
            chrome,
            (tmp_path / "r" / "report.html").as_uri(),
            size=size,
            ready="document.readyState === 'complete'",
            script=FIRST_SCREEN_SCRIPT,
            screenshot=tmp_path / "first_screen.png",
            settle_s=0.2,
        )
    found = page.found
    assert found is not None and (found["width"], found["height"]) == size
    assert found["text"].splitlines() == sections[0].lines  # every condition's bottom line, whole
    # the model below chance is named so, with its interval
    assert re.search(r"gemma3_270m [0-9.]+ \[[^]]*\] below chance", found["text"]), found["text"]
    assert 0 <= found["bottom"][0] < found["bottom"][1] <= size[1]
    assert 0 <= found["table"][0] < found["table"][1] <= size[1] and found["table"][2] <= size[0]
    assert not found["cut"]
