"""The MLflow UI served on 127.0.0.1 and read in headless Chromium: what `python -m src.ui` (its `--screenshot`)
and `python -m devtools.ui_check` share, below both commands.

`mlflow ui` runs in a process group of its own (`start_ui`, `stop_ui`). The browser is the system's Chromium
(`find_chromium`) driven by Playwright's sync API (the `browser` extra: `pip install -e ".[browser]"`; its wheel
brings its driver, no browser download), imported inside the functions that need it so that importing this module
needs no extra; `browser_missing` is the one `error:` line when either is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from src.tracking.names import SERVER_ENV

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = "apt-get update && apt-get install -y chromium"
PLAYWRIGHT_HINT = 'pip install -e ".[browser]"'  # Playwright's wheel brings its driver; the browser is the system's
SERVER_START_S = 300.0  # `mlflow ui` answers after ~20 s on a quiet machine, minutes on a loaded one
PAGE_TIMEOUT_S = 120.0  # a page's load and drawing (seconds on a quiet machine)
SETTLE_S = 3.0  # then its remaining requests (metrics, tags) fill the cells


def find_chromium() -> str | None:
    """The Chromium (or Chrome) binary on PATH, or None."""
    return next((path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_ui(uri: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """`mlflow ui` on 127.0.0.1:`port` in a process group of its own; returns once /health answers."""
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlflow",
                "ui",
                "--backend-store-uri",
                uri,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **SERVER_ENV},
        )
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
    raise RuntimeError(
        f"mlflow ui did not answer on port {port} within {SERVER_START_S:.0f} s: {log.read_text()[-2000:]}"
    )


def stop_ui(proc: subprocess.Popen[bytes]) -> None:
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
def open_browser(chromium: str) -> Iterator[Any]:
    """Headless Chromium (the system's binary at `chromium`, not a Playwright download) driven by Playwright's sync
    API; the browser and Playwright's driver are closed on leaving, whatever happened inside."""
    from playwright.sync_api import sync_playwright  # the `browser` extra: only the browser commands need it

    with sync_playwright() as playwright:
        # chromium_sandbox=True: Playwright would add --no-sandbox for every user; chromium_args() adds it as root
        browser = playwright.chromium.launch(
            executable_path=chromium, args=chromium_args(), chromium_sandbox=True, timeout=PAGE_TIMEOUT_S * 1000
        )
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


@dataclass
class Page:
    """What `load_page` read of a page: its DOM, `script`'s parsed answer (None without a script or when it answers
    null) and whether the page got ready in time."""

    dom: str
    found: Any = None  # parsed JSON
    ready: bool = True


def load_page(
    browser: Any,  # Playwright's Browser (the `browser` extra)
    url: str,
    *,
    size: tuple[int, int],
    ready: str,
    script: str | None = None,
    screenshot: Path | None = None,
    timeout_s: float = PAGE_TIMEOUT_S,
    settle_s: float = SETTLE_S,
) -> Page:
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
