"""Check, in a real browser, what a reviewer sees of runs in the MLflow UI: `python -m devtools.ui_check [--out docs]`.

It makes a small experiment in a temporary SQLite store (a sweep parent run with two simulated jobs under it,
run in-process: the CoRA divergent set, and repeated sampling of the original order), starts `mlflow ui` on
127.0.0.1, and loads two pages in headless Chromium:

- the experiment's review view (`src.tracking.review.review_link`): job runs only, listed flat by name, with their
  headline metrics as columns;
- the repetition run's page: its description (headline metrics with intervals, chance), the `chance` and `rws_st`
  tags, the dataset and the metrics table, headline metrics first.

The browser is the system's Chromium (`src.presentation.browser`) driven by Playwright's sync API (the `browser` extra:
`pip install -e ".[browser]"`; its wheel brings its driver, no browser download): one browser for the command,
closed on leaving; each page in a fresh context with the window's size, read once it is drawn and its requests
have had `SETTLE_S`. The rendered pages (`page.content()`) must show the run names, the headline metric names and
values and not the sweep parent; the screenshots go to `--out` as `mlflow_runs.png` and `mlflow_run.png`. The
server is stopped by its process group. Exit 0 when every check holds, 1 naming the checks that failed, 2 when
Playwright or Chromium is missing (one line naming what to install: `pip install -e ".[browser]"`,
`apt-get install -y chromium`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from src.cli import entry
from src.presentation import browser
from src.presentation.description import headline_text
from src.tracking import review, store

EXPERIMENT = "ui-check"
JOBS = {  # what each simulated job asks (overrides of the default config)
    "cora": ["variants=cora", "limit=20"],
    "repetition": ["variants=original", "repetitions=5", "temperature=0.7", "limit=20"],
}
RUNS_WINDOW = (2600, 520)
RUN_WINDOW = (1500, 1750)


@dataclass
class Experiment:
    """The store, the experiment and its runs (name -> MLflow Run) that the pages are checked against."""

    uri: str
    experiment_id: str
    parent_name: str
    runs: dict


def make_experiment(root: Path) -> Experiment:
    """A sweep parent run and the JOBS under it, in a fresh SQLite store under `root`."""
    from mlflow.tracking import MlflowClient

    from src.config.compose import compose_job  # local: loads hydra, omegaconf (slow import)
    from src.job.runner import run_job  # local: loads hydra, omegaconf (slow import)

    uri = f"sqlite:///{root}/mlflow.db"
    store.open_store(uri)
    client = MlflowClient(tracking_uri=uri)
    experiment_id = store.experiment_id(client, EXPERIMENT, uri)
    parent_name = f"sweep-{EXPERIMENT}-0001"
    parent = client.create_run(experiment_id, run_name=parent_name, tags={"kind": "sweep", "sweep_id": "0001"})
    sweep = {"sweep_id": "0001", "parent_run_id": parent.info.run_id}
    runs = {}
    for name, overrides in JOBS.items():
        cfg = compose_job(
            [
                "model=simulated",
                f"tracking.uri={uri}",
                f"tracking.experiment={EXPERIMENT}",
                f"cache.path={root}/cache.db",
                *overrides,
            ]
        )
        result = run_job(cfg, out_dir=root / name, sweep=sweep)
        runs[name] = client.get_run(result.run_id)
    client.set_terminated(parent.info.run_id, "FINISHED")
    return Experiment(uri=uri, experiment_id=experiment_id, parent_name=parent_name, runs=runs)


RUN_READY = "document.body.innerText.includes('Headline:')"  # the run page's description is drawn


def shown(value: float) -> str:
    """A metric value as the runs table prints it (JavaScript's shortest form: 0.35, 1, 0.1875)."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def runs_page_checks(dom: str, exp: Experiment) -> list[str]:
    """What the review view must show: every job run, not the sweep parent, the headline columns, the rounded
    `mcqa` tag (value [lo, hi] at three decimals)."""
    failed = [
        f"runs page: run {run.info.run_name} is not listed" for run in exp.runs.values() if run.info.run_name not in dom
    ]
    if exp.parent_name in dom:
        failed.append(f"runs page: the sweep parent {exp.parent_name} is listed (the view shows job runs only)")
    cora, repeated = exp.runs["cora"], exp.runs["repetition"]
    for name, run in (("cora", cora), ("mcqa", cora), ("acc_mean", repeated), ("rws", repeated), ("st", repeated)):
        if f">{name}<" not in dom:
            failed.append(f"runs page: no column {name}")
        rounded = run.data.tags[name]  # review.rounded_tags: `0.750 [0.531, 0.888]`
        if rounded not in dom:
            failed.append(f"runs page: the rounded {name} tag {rounded!r} is not shown")
        value = run.data.metrics[name]
        if shown(value) != shown(round(value, 3)) and shown(value) in dom:
            failed.append(f"runs page: the unrounded value {shown(value)} of {name} is shown")
    for key in review.RUN_KEYS:
        if f">{key}<" not in dom:
            failed.append(f"runs page: no column {key}")
    return failed


def run_page_checks(dom: str, exp: Experiment) -> list[str]:
    """What the repetition run's page must show: its description with the headline, the `chance` and `rws_st`
    tags, rws and st."""
    run = exp.runs["repetition"]
    failed = []
    headline = headline_text(dict(run.data.metrics))
    if f"Headline: {headline}" not in dom:
        failed.append(f"run page: the description's headline {headline!r} is not shown")
    if run.data.tags["chance"] not in dom:
        failed.append(f"run page: the chance tag {run.data.tags['chance']!r} is not shown")
    if run.data.tags["rws_st"] not in dom:
        failed.append(f"run page: the rws_st tag {run.data.tags['rws_st']!r} is not shown")
    for name in ("rws", "st"):
        if f">{name}<" not in dom:
            failed.append(f"run page: the metric {name} is not listed")
    if "synthetic" not in dom:
        failed.append("run page: the dataset is not shown")
    return failed


def check(out: Path, *, work: Path, chromium: str) -> list[str]:
    """Make the experiment, serve it, render both pages into `out`; the failed checks (none: all hold)."""
    work.mkdir(parents=True, exist_ok=True)
    exp = make_experiment(work)
    port = browser.free_port()
    server = browser.start_ui(exp.uri, port, work / "mlflow-ui.log")
    try:
        base = f"http://127.0.0.1:{port}"
        runs_url = review.review_link(exp.experiment_id, base)
        run_url = (
            f"{base}/#/experiments/{exp.experiment_id}/runs/{exp.runs['repetition'].info.run_id}?{review.ML_WORKFLOW}"
        )
        out.mkdir(parents=True, exist_ok=True)
        with browser.open_browser(chromium) as chrome:
            runs_dom = browser.load_page(
                chrome, runs_url, size=RUNS_WINDOW, ready=browser.RUNS_READY, screenshot=out / "mlflow_runs.png"
            ).dom
            run_dom = browser.load_page(
                chrome, run_url, size=RUN_WINDOW, ready=RUN_READY, screenshot=out / "mlflow_run.png"
            ).dom
    finally:
        browser.stop_ui(server)
    (work / "runs.html").write_text(runs_dom)
    (work / "run.html").write_text(run_dom)
    return runs_page_checks(runs_dom, exp) + run_page_checks(run_dom, exp)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.ui_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder of the screenshots (default docs)")
    parser.add_argument("--keep", type=Path, help="keep the store, the server log and the rendered DOMs here")
    args = parser.parse_args(argv)
    missing = browser.browser_missing("python -m devtools.ui_check")
    if missing:
        print(missing, file=sys.stderr)
        return 2
    os.environ.setdefault("TQDM_DISABLE", "1")
    with tempfile.TemporaryDirectory(prefix="ui-check-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        failed = check(args.out, work=work.resolve(), chromium=browser.find_chromium())
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    print(
        json.dumps(
            {
                "checks_failed": len(failed),
                "screenshots": [str(args.out / "mlflow_runs.png"), str(args.out / "mlflow_run.png")],
            }
        )
    )
    return 1 if failed else 0


if __name__ == "__main__":
    entry(main)
