"""`python -m src.ui [--experiment NAME] [--tracking-uri URI] [--port N] [--screenshot FILE]`: the runs in the
MLflow UI, opened where they are.

Starts `mlflow ui` for the store on 127.0.0.1 (a free port unless `--port`; without MLflow's GenAI job runner,
`src.tracking.names.SERVER_ENV`), waits until it answers, prints the address of the experiment's review view
(job runs only, by name, headline columns first: MCQA or accuracy with its bounds and chance, acc mean, then CoRA,
RWS and S/T, the fluctuation rate as the studies have them; `src.tracking.review.review_metric_names`) and serves
until Ctrl-C.

`--screenshot FILE` is for headless use: it loads that address in headless Chromium (the system's, driven by
Playwright: `pip install -e ".[browser]"`) in a 1,400 x 900 window, writes the PNG, prints one JSON line (the
address, the run names, the headline and key columns in the window) and stops the server; exit 1 when the window
shows no job run (also when the experiment has none) or not the columns model, temperature and result (each run's
headline, rounded). Bad input (no store at the URI, an unknown experiment, no Playwright or no Chromium for
`--screenshot`): one line `error: ...`, exit 2.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from src.cli import add_tracking_flags, entry, user_error
from src.common.errors import UserError
from src.presentation import browser
from src.tracking import review, store
from src.tracking.names import DEFAULT_EXPERIMENT

WINDOW = (1400, 900)  # a laptop's browser window: the review view's first columns must fit in it


def review_address(uri: str, experiment: str, base_url: str) -> tuple[str, list[str], str | None]:
    """(the experiment's review-view address at `base_url`, the names of its job runs, a note when the accuracy
    column sorts too far right to be seen in a 1,400-px window, else None); UserError for a missing store or
    experiment."""
    db = store.sqlite_path(uri)
    if db is not None and not db.is_file():
        raise UserError(
            f"--tracking-uri {uri}: no MLflow store at {db}; run a job first (python -m src.run) or give "
            "the store's URI"
        )
    client = store.client(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        names = sorted(e.name for e in client.search_experiments())
        raise UserError(f"--experiment {experiment}: not in {uri}; its experiments: {', '.join(names) or 'none'}")
    runs = client.search_runs([found.experiment_id], filter_string=review.JOB_RUNS_FILTER, max_results=1000)
    state = found.tags.get(review.SHARED_VIEW_TAG + review.REVIEW_VIEW_KEY)
    accuracy, before = review.columns_before_accuracy(state)
    note = None
    if len(before) > review.WINDOW_COLUMNS_BEFORE_ACCURACY:
        note = (
            f"note: {accuracy} is metric column {len(before) + 1} of the review view ({', '.join(before)} sort "
            f"before it, as the UI orders metrics by name): in a 1,400-px window close the Assistant panel or "
            f"scroll right to see it"
        )
    return review.review_link(found.experiment_id, base_url), [r.info.run_name for r in runs], note


def review_runs(uri: str, experiment: str) -> list[store.Run]:
    """The experiment's job runs (`review_address` has checked the store and the experiment)."""
    client = store.client(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:  # no such experiment: no runs to list
        return []
    return client.search_runs([found.experiment_id], filter_string=review.JOB_RUNS_FILTER, max_results=1000)


REVIEW_KEYS = ("model", "benchmark", "variants", "temperature", "scoring")  # tags that tell job runs apart


def runs_lines(runs: Sequence[store.Run]) -> list[str]:
    """The review view in the terminal: one line per job run (MLflow `Run`s) with the keys that vary among them
    (REVIEW_KEYS, the others said once), its headline with its interval rounded and its verdict
    (`src.metrics.chance.chance_verdict`: acc mean in a run with repetitions, else MCQA, else accuracy), a high
    INVALID share, a letter habit (`slot_bias_flag`); a legend for the dash of a value a run lacks; what
    "indistinguishable from chance" means is said once, under the lines."""
    from src.metrics.chance import AT_CHANCE, AT_CHANCE_MEANING, chance_verdict, invalid_flag  # local: loads numpy
    from src.metrics.slots import slot_flagged  # local: loads numpy, pandas (slow import)

    if not runs:
        return []
    tags = [r.data.tags for r in runs]
    varying = [k for k in REVIEW_KEYS if len({t.get(k) for t in tags}) > 1] or ["model"]
    fixed = [f"{k} {tags[0].get(k)}" for k in REVIEW_KEYS if k not in varying and tags[0].get(k) is not None]
    rows, at_chance = [], False
    for run, tag in sorted(zip(runs, tags), key=lambda pair: [str(pair[1].get(k)) for k in varying]):
        metrics = run.data.metrics
        verdict = chance_verdict(metrics)
        headline = "–"
        if verdict is not None:
            bounds = f" [{verdict.lo:.3f}, {verdict.hi:.3f}]" if verdict.lo is not None else ""
            headline = f"{verdict.metric} {verdict.value:.3f}{bounds} {verdict.short()}".rstrip()
            at_chance |= bool(verdict.at_chance)
        flag = f"  INVALID {metrics['invalid_rate']:.2f} (high)" if invalid_flag(metrics) else ""
        if slot_flagged(metrics):  # a letter habit (src/metrics/slots.py): its tag names the slot and both shares
            flag += f"  letter habit: {tag.get(review.SLOT_TAG, 'slot_bias_flag 1')}"
        rows.append([run.info.run_id[:8], *(str(tag.get(k, "–")) for k in varying), headline + flag])
    widths = [max(len(r[i]) for r in [["run", *varying, "headline"], *rows]) for i in range(len(varying) + 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(["run", *varying], widths)) + "  headline [95%], vs chance"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in rows]
    if fixed:
        lines.append("every run: " + ", ".join(fixed))
    if any("–" in cell for row in rows for cell in row):
        lines.append("–: the run has no such value (a key it did not log, or no headline its variant set measures)")
    if at_chance:
        lines.append(f"{AT_CHANCE}: {AT_CHANCE_MEANING}")
    return lines


def window_check(page: dict[str, Any], run_names: list[str]) -> dict[str, Any]:
    """What the window shows of the review view (`screenshot`'s answer): the job runs listed, the headline columns
    whose header lies inside the window, and the failed checks (none: all hold)."""
    width = page["width"]
    inside = list(dict.fromkeys(h["text"] for h in page["headers"] if h["text"] and h["visible"]))
    listed = [name for name in run_names if name in page["text"]]
    headlines = [
        name
        for name in inside
        if name in (*review.REVIEW_HEADLINES, review.REVIEW_FALLBACK, review.RESULT_TAG, "chance")
        or name.endswith(("_lo", "_hi"))
    ]
    keys = [name for name in inside if name in review.RUN_KEYS]
    failed = [] if page.get("drawn", True) else [f"the page was not drawn within {browser.PAGE_TIMEOUT_S:.0f} s"]
    if not run_names:  # nothing to review: a screenshot of an empty table is no proof the view works
        failed.append("no job run is listed: the experiment has none (run a job first)")
    elif not listed:
        failed.append("no job run is listed")
    needed = ["model", "temperature", review.RESULT_TAG]  # what tells the runs apart, and each one's headline
    if not set(needed) <= set(inside):
        failed.append(f"not every column of {', '.join(needed)} inside the {width}-px window: {inside}")
    return {"runs_listed": listed, "headline_columns": headlines, "key_columns": keys, "failed": failed}


def screenshot(url: str, png: Path, *, has_runs: bool) -> dict[str, Any]:
    """The review view at `url` in headless Chromium (Playwright, one browser closed on return) in a WINDOW-sized
    window, once its table is drawn (with a run's row when the experiment has job runs): a PNG of the window to
    `png`, and `browser.HEADERS_SCRIPT`'s answer (no headers when the page did not draw them in time)."""
    chromium = browser.find_chromium()
    assert chromium is not None  # main() refused --screenshot without one (browser_missing)
    with browser.open_browser(chromium) as chrome:
        page = browser.load_page(
            chrome,
            url,
            size=WINDOW,
            script=browser.HEADERS_SCRIPT,
            screenshot=png,
            ready=browser.RUNS_READY if has_runs else browser.HEADERS_READY,
        )
    return {**(page.found or {"width": WINDOW[0], "text": "", "headers": []}), "drawn": page.ready}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(  # the whole docstring, as written: what it starts, prints and refuses
        prog="python -m src.ui", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_tracking_flags(parser, experiment="MLflow experiment (tracking.experiment)", default=DEFAULT_EXPERIMENT)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    parser.add_argument(
        "--screenshot",
        type=Path,
        metavar="FILE",
        help=f"headless: write a PNG of the review view in a {WINDOW[0]} x {WINDOW[1]} window, "
        "print what it shows and stop",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.tracking_uri.startswith(("http://", "https://")):
        print(
            f"error: --tracking-uri {args.tracking_uri}: a tracking server serves its own UI; open it in a browser",
            file=sys.stderr,
        )
        return 2
    missing = browser.browser_missing("--screenshot") if args.screenshot else None
    if missing:
        print(missing, file=sys.stderr)
        return 2
    port = args.port or browser.free_port()
    try:
        url, run_names, note = review_address(args.tracking_uri, args.experiment, f"http://127.0.0.1:{port}")
    except UserError as err:
        return user_error(err)
    with tempfile.TemporaryDirectory(prefix="mcq-ui-") as tmp:
        try:
            server = browser.start_ui(args.tracking_uri, port, Path(tmp) / "mlflow-ui.log")
        except RuntimeError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        try:
            if args.screenshot:
                shown = window_check(screenshot(url, args.screenshot, has_runs=bool(run_names)), run_names)
                print(json.dumps({"url": url, "screenshot": str(args.screenshot), "window": list(WINDOW), **shown}))
                return 1 if shown["failed"] else 0
            # Ctrl-C stops it, as it says, also when it was started from a script's background job: such a process
            # inherits SIGINT ignored, and Python then installs no KeyboardInterrupt of its own (it would serve on)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            print(f"review view: {url}", flush=True)
            for line in runs_lines(review_runs(args.tracking_uri, args.experiment)):  # what tells the runs apart
                print(line, file=sys.stderr, flush=True)
            if note:
                print(note, file=sys.stderr, flush=True)
            print(
                f"mlflow ui (pid {server.pid}) serves {args.tracking_uri} on 127.0.0.1:{port}; Ctrl-C stops it",
                file=sys.stderr,
                flush=True,
            )
            return server.wait()
        except KeyboardInterrupt:
            return 0
        finally:
            browser.stop_ui(server)


if __name__ == "__main__":
    entry(main)
