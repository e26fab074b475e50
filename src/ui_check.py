"""Check, in a real browser, what a reviewer sees of runs in the MLflow UI: `python -m src.ui_check [--out docs]`.

It makes a small experiment in a temporary SQLite store (a sweep parent run with two simulated jobs under it,
run in-process: the CoRA divergent set, and repeated sampling of the original order), starts `mlflow ui` on
127.0.0.1, and loads two pages in headless Chromium:

- the experiment's review view (`src.tracking.review.review_link`): job runs only, listed flat by name, with their
  headline metrics as columns;
- the repetition run's page: its description (headline metrics with intervals, chance), the `chance` and `rws_st`
  tags, the dataset and the metrics table, headline metrics first.

The browser is the system's Chromium (`find_chromium`) driven by Playwright's sync API (the `browser` extra:
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
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from src.cli import entry
from src.tracking.names import SERVER_ENV
from src.tracking import review, store

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = "apt-get update && apt-get install -y chromium"
PLAYWRIGHT_HINT = 'pip install -e ".[browser]"'  # Playwright's wheel brings its driver; the browser is the system's
EXPERIMENT = "ui-check"
JOBS = {  # what each simulated job asks (overrides of the default config)
    "cora": ["variants=cora", "limit=20"],
    "repetition": ["variants=original", "repetitions=5", "temperature=0.7", "limit=20"],
}
SERVER_START_S = 300.0  # `mlflow ui` answers after ~20 s on a quiet machine, minutes on a loaded one
PAGE_TIMEOUT_S = 120.0  # a page's load and drawing (seconds on a quiet machine)
SETTLE_S = 3.0  # then its remaining requests (metrics, tags) fill the cells
RUNS_WINDOW = (2600, 520)
RUN_WINDOW = (1500, 1750)


@dataclass
class Experiment:
    """The store, the experiment and its runs (name -> MLflow Run) that the pages are checked against."""

    uri: str
    experiment_id: str
    parent_name: str
    runs: dict


def find_chromium() -> str | None:
    """The Chromium (or Chrome) binary on PATH, or None."""
    return next((path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)


def make_experiment(root: Path) -> Experiment:
    """A sweep parent run and the JOBS under it, in a fresh SQLite store under `root`."""
    from mlflow.tracking import MlflowClient

    from src.config.schema import compose_job  # local: loads hydra, omegaconf (slow import)
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
        cfg = compose_job(["model=simulated", f"tracking.uri={uri}", f"tracking.experiment={EXPERIMENT}",
                           f"cache.path={root}/cache.db", *overrides])
        result = run_job(cfg, out_dir=root / name, sweep=sweep)
        runs[name] = client.get_run(result.run_id)
    client.set_terminated(parent.info.run_id, "FINISHED")
    return Experiment(uri=uri, experiment_id=experiment_id, parent_name=parent_name, runs=runs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_ui(uri: str, port: int, log: Path) -> subprocess.Popen:
    """`mlflow ui` on 127.0.0.1:`port` in a process group of its own; returns once /health answers."""
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", "127.0.0.1",
                                 "--port", str(port), "--workers", "1"], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, **SERVER_ENV})
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mlflow ui exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).read()
            return proc
        except OSError:
            time.sleep(1)
    stop_ui(proc)
    raise RuntimeError(f"mlflow ui did not answer on port {port} within {SERVER_START_S:.0f} s: {log.read_text()[-2000:]}")


def stop_ui(proc: subprocess.Popen) -> None:
    """Stop the server and its workers: its own process group, by the id of the process started here."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


def chromium_args() -> list[str]:
    """Chromium's flags beyond Playwright's own headless set: `--no-sandbox` as root only."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return ["--no-sandbox"]  # Chromium's sandbox refuses to run as root (containers, CI)
    return []


def browser_missing(what: str) -> str | None:
    """The one `error:` line when `what` (the command or flag that needs a browser) cannot drive one here: no
    Playwright (the `browser` extra) or no Chromium on PATH; None when both are there."""
    try:
        import playwright.sync_api  # noqa: F401 - the `browser` extra; only the browser commands need it
    except ImportError:
        return f"error: {what} needs Playwright: {PLAYWRIGHT_HINT}"
    if find_chromium() is None:
        return f"error: {what} needs Chromium on PATH ({', '.join(CHROMIUM_NAMES)}); install it: {INSTALL_HINT}"
    return None


@contextmanager
def open_browser(chromium: str) -> Iterator:
    """Headless Chromium (the system's binary at `chromium`, not a Playwright download) driven by Playwright's sync
    API; the browser and Playwright's driver are closed on leaving, whatever happened inside."""
    from playwright.sync_api import sync_playwright  # the `browser` extra: only the browser commands need it

    with sync_playwright() as playwright:
        # chromium_sandbox=True: Playwright would add --no-sandbox for every user; chromium_args() adds it as root
        browser = playwright.chromium.launch(executable_path=chromium, args=chromium_args(), chromium_sandbox=True,
                                             timeout=PAGE_TIMEOUT_S * 1000)
        try:
            yield browser
        finally:
            browser.close()


# what `load_page` reads of a rendered runs table: each header's text, edges and whether it is visible (what the
# window shows at its centre, not scrolled away or covered by a panel), the window's width and the page's text
HEADERS_SCRIPT = """(() => {
  const cells = [...document.querySelectorAll('[role=columnheader]')];
  if (!cells.length) return null;
  return JSON.stringify({width: window.innerWidth, text: document.body.innerText,
    headers: cells.map(c => {
      const r = c.getBoundingClientRect(), x = (r.left + r.right) / 2, y = (r.top + r.bottom) / 2;
      const top = document.elementFromPoint(x, y);  // null or another element: off-screen, scrolled away or covered
      return {text: c.innerText.trim(), left: r.left, right: r.right, visible: !!top && c.contains(top)}; })});
})()"""
HEADERS_READY = "document.querySelector('[role=columnheader]') !== null"  # the runs table's header is drawn
RUNS_READY = HEADERS_READY + " && document.querySelector('[role=gridcell]') !== null"  # and its first run's row
RUN_READY = "document.body.innerText.includes('Headline:')"  # the run page's description is drawn


@dataclass
class Page:
    """What `load_page` read of a page: its DOM, `script`'s parsed answer (None without a script or when it answers
    null) and whether the page got ready in time."""

    dom: str
    found: object = None
    ready: bool = True


def load_page(browser, url: str, *, size: tuple[int, int], ready: str, script: str | None = None,
              screenshot: Path | None = None, timeout_s: float = PAGE_TIMEOUT_S, settle_s: float = SETTLE_S) -> Page:
    """Load `url` in a fresh page of `browser` (a new browser context: a new profile, nothing kept from the last
    page) with a `size` viewport, wait until the JavaScript expression `ready` holds (the load and the wait
    together at most `timeout_s`), give the page's remaining requests `settle_s`, then read its DOM and run
    `script` (JavaScript returning a JSON string, or null); a PNG of the viewport goes to `screenshot` when given.
    A page that is not ready in time is read as it is (`ready` False): the checks then say what is missing."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout  # the `browser` extra

    deadline = time.monotonic() + timeout_s
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    try:
        page = context.new_page()
        try:
            page.goto(url, timeout=timeout_s * 1000)
            page.wait_for_function(ready, polling=250, timeout=max(1.0, deadline - time.monotonic()) * 1000)
            is_ready = True
        except PlaywrightTimeout:
            is_ready = False
        if is_ready:
            # not "networkidle": Playwright counts the request for MLflow's telemetry worker script as never finished
            page.wait_for_timeout(settle_s * 1000)
        answer = page.evaluate(script) if script is not None else None
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=screenshot)
        return Page(dom=page.content(), found=json.loads(answer) if answer else None, ready=is_ready)
    finally:
        context.close()


def shown(value: float) -> str:
    """A metric value as the runs table prints it (JavaScript's shortest form: 0.35, 1, 0.1875)."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def runs_page_checks(dom: str, exp: Experiment) -> list[str]:
    """What the review view must show: every job run, not the sweep parent, the headline columns."""
    failed = [f"runs page: run {run.info.run_name} is not listed" for run in exp.runs.values()
              if run.info.run_name not in dom]
    if exp.parent_name in dom:
        failed.append(f"runs page: the sweep parent {exp.parent_name} is listed (the view shows job runs only)")
    cora, repeated = exp.runs["cora"].data.metrics, exp.runs["repetition"].data.metrics
    for name, value in (("cora", cora["cora"]), ("mcqa", cora["mcqa"]), ("rws", repeated["rws"]),
                        ("st", repeated["st"])):
        if f">{name}<" not in dom:
            failed.append(f"runs page: no column {name}")
        if shown(value) not in dom:
            failed.append(f"runs page: the value {shown(value)} of {name} is not shown")
    return failed


def run_page_checks(dom: str, exp: Experiment) -> list[str]:
    """What the repetition run's page must show: its description with the headline, the `chance` and `rws_st`
    tags, rws and st."""
    run = exp.runs["repetition"]
    failed = []
    headline = review.headline_text(dict(run.data.metrics))
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
    port = free_port()
    server = start_ui(exp.uri, port, work / "mlflow-ui.log")
    try:
        base = f"http://127.0.0.1:{port}"
        runs_url = review.review_link(exp.experiment_id, base)
        run_url = f"{base}/#/experiments/{exp.experiment_id}/runs/{exp.runs['repetition'].info.run_id}?" \
                  f"{review.ML_WORKFLOW}"
        out.mkdir(parents=True, exist_ok=True)
        with open_browser(chromium) as browser:
            runs_dom = load_page(browser, runs_url, size=RUNS_WINDOW, ready=RUNS_READY,
                                 screenshot=out / "mlflow_runs.png").dom
            run_dom = load_page(browser, run_url, size=RUN_WINDOW, ready=RUN_READY,
                                screenshot=out / "mlflow_run.png").dom
    finally:
        stop_ui(server)
    (work / "runs.html").write_text(runs_dom)
    (work / "run.html").write_text(run_dom)
    return runs_page_checks(runs_dom, exp) + run_page_checks(run_dom, exp)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.ui_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs"), help="folder of the screenshots (default docs)")
    parser.add_argument("--keep", type=Path, help="keep the store, the server log and the rendered DOMs here")
    args = parser.parse_args(argv)
    missing = browser_missing("python -m src.ui_check")
    if missing:
        print(missing, file=sys.stderr)
        return 2
    os.environ.setdefault("TQDM_DISABLE", "1")
    with tempfile.TemporaryDirectory(prefix="ui-check-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        failed = check(args.out, work=work.resolve(), chromium=find_chromium())
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    print(json.dumps({"checks_failed": len(failed), "screenshots": [str(args.out / "mlflow_runs.png"),
                                                                    str(args.out / "mlflow_run.png")]}))
    return 1 if failed else 0


if __name__ == "__main__":
    entry(main)
