"""Check, in a real browser, what a reviewer sees of runs in the MLflow UI: `python -m src.ui_check [--out docs]`.

It makes a small experiment in a temporary SQLite store (a sweep parent run with two simulated jobs under it,
run in-process: the CoRA divergent set, and repeated sampling of the original order), starts `mlflow ui` on
127.0.0.1, and loads two pages in headless Chromium:

- the experiment's review view (`src.tracking.review.review_link`): job runs only, listed flat by name, with their
  headline metrics as columns;
- the repetition run's page: its description (headline metrics with intervals, chance), the `chance` and `rws_st`
  tags, the dataset and the metrics table, headline metrics first.

The rendered pages (Chromium's `--dump-dom`) must show the run names, the headline metric names and values and
not the sweep parent; the screenshots go to `--out` as `mlflow_runs.png` and `mlflow_run.png`. The server is
stopped by its process group. Exit 0 when every check holds, 1 naming the checks that failed, 2 when no Chromium
is installed (`apt-get install -y chromium`).
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
from dataclasses import dataclass
from pathlib import Path

from src.cli import entry
from src.tracking.names import SERVER_ENV
from src.tracking import review, store

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = "apt-get update && apt-get install -y chromium"
EXPERIMENT = "ui-check"
JOBS = {  # what each simulated job asks (overrides of the default config)
    "cora": ["variants=cora", "limit=20"],
    "repetition": ["variants=original", "repetitions=5", "temperature=0.7", "limit=20"],
}
SERVER_START_S = 300.0  # `mlflow ui` answers after ~20 s on a quiet machine, minutes on a loaded one
PAGE_BUDGET_MS = 30_000  # Chromium's virtual time for the page's scripts and requests
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


def chromium_args(chromium: str, profile: Path, size: tuple[int, int]) -> list[str]:
    args = [chromium, "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}", f"--virtual-time-budget={PAGE_BUDGET_MS}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium's sandbox refuses to run as root (containers, CI)
    return args


def render(chromium: str, url: str, *, profile: Path, size: tuple[int, int], screenshot: Path | None = None) -> str:
    """The page's DOM after its scripts ran (and a screenshot of it when `screenshot` is given)."""
    base = chromium_args(chromium, profile, size)
    dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=180).stdout
    if screenshot is not None:
        subprocess.run([*base, f"--screenshot={screenshot}", url], capture_output=True, timeout=180, check=True)
    return dom


# what `inspect_page` reads of a rendered runs table: each header's text, edges and whether it is visible (what
# the window shows at its centre, not scrolled away or covered by a panel), the window's width and the page's text
HEADERS_SCRIPT = """(() => {
  const cells = [...document.querySelectorAll('[role=columnheader]')];
  if (!cells.length) return null;
  return JSON.stringify({width: window.innerWidth, text: document.body.innerText,
    headers: cells.map(c => {
      const r = c.getBoundingClientRect(), x = (r.left + r.right) / 2, y = (r.top + r.bottom) / 2;
      const top = document.elementFromPoint(x, y);  // null or another element: off-screen, scrolled away or covered
      return {text: c.innerText.trim(), left: r.left, right: r.right, visible: !!top && c.contains(top)}; })});
})()"""


def inspect_page(chromium: str, url: str, *, profile: Path, size: tuple[int, int], script: str = HEADERS_SCRIPT,
                 screenshot: Path | None = None, timeout_s: float = 120.0, settle_s: float = 3.0):
    """Load `url` in headless Chromium at `size` and run `script` (JavaScript returning a JSON string, or null
    while the page is not ready) until it answers; returns its parsed value, after a PNG of the window to
    `screenshot` when given. Drives the browser through its DevTools protocol (aiohttp, which MLflow installs),
    since only a live page knows where its columns are laid out."""
    import asyncio

    args = [a for a in chromium_args(chromium, profile, size) if not a.startswith("--virtual-time-budget")]
    (profile / "DevToolsActivePort").unlink(missing_ok=True)
    proc = subprocess.Popen([*args, "--remote-debugging-port=0", "about:blank"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        return asyncio.run(_inspect(proc, url, profile, script, screenshot, timeout_s, settle_s))
    finally:
        stop_ui(proc)  # the browser and its helpers: its own process group


async def _inspect(proc, url: str, profile: Path, script: str, screenshot: Path | None, timeout_s: float,
                   settle_s: float):
    import asyncio
    import base64
    import itertools

    import aiohttp

    deadline = time.monotonic() + timeout_s
    port_file = profile / "DevToolsActivePort"
    while not port_file.is_file() or not port_file.read_text().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"Chromium did not open its DevTools port (exit {proc.poll()})")
        await asyncio.sleep(0.2)
    port = port_file.read_text().split()[0]
    ids = itertools.count(1)
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/json/list") as answer:
            page = next(t for t in await answer.json() if t["type"] == "page")
        async with session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            async def call(method: str, **params):
                number = next(ids)
                await ws.send_json({"id": number, "method": method, "params": params})
                async for message in ws:
                    data = message.json()
                    if data.get("id") == number:
                        return data.get("result", {})
                raise RuntimeError(f"Chromium closed the DevTools connection during {method}")

            await call("Page.navigate", url=url)
            found = None
            while found is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{url}: the page did not render within {timeout_s:.0f} s")
                await asyncio.sleep(1)
                found = (await call("Runtime.evaluate", expression=script, returnByValue=True))["result"].get("value")
            await asyncio.sleep(settle_s)  # the remaining requests (metrics, tags) fill the cells
            found = (await call("Runtime.evaluate", expression=script, returnByValue=True))["result"].get("value")
            if screenshot is not None:
                shot = await call("Page.captureScreenshot", format="png")
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
    return json.loads(found)


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
        profile = work / "chromium-profile"
        runs_url = review.review_link(exp.experiment_id, base)
        run_url = f"{base}/#/experiments/{exp.experiment_id}/runs/{exp.runs['repetition'].info.run_id}?" \
                  f"{review.ML_WORKFLOW}"
        out.mkdir(parents=True, exist_ok=True)
        runs_dom = render(chromium, runs_url, profile=profile, size=RUNS_WINDOW, screenshot=out / "mlflow_runs.png")
        run_dom = render(chromium, run_url, profile=profile, size=RUN_WINDOW, screenshot=out / "mlflow_run.png")
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
    chromium = find_chromium()
    if chromium is None:
        print(f"error: no Chromium on PATH ({', '.join(CHROMIUM_NAMES)}); install it: {INSTALL_HINT}", file=sys.stderr)
        return 2
    os.environ.setdefault("TQDM_DISABLE", "1")
    with tempfile.TemporaryDirectory(prefix="ui-check-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        failed = check(args.out, work=work.resolve(), chromium=chromium)
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    print(json.dumps({"checks_failed": len(failed), "screenshots": [str(args.out / "mlflow_runs.png"),
                                                                    str(args.out / "mlflow_run.png")]}))
    return 1 if failed else 0


if __name__ == "__main__":
    entry(main)
