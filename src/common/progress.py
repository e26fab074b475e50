"""Progress of a job as the person watching it sees it: one bar in a terminal, plain lines in a log file.

`job_progress` counts a job's prompts. In a terminal (stderr is a TTY) it is one tqdm bar per job; a
`job_progress` opened while another is open (answer_items answering part of its items another way, the adaptive
rounds) adds to that bar instead of drawing its own. When stderr is not a terminal (a log file, a Slurm job, a
pipe) it draws no bar: it writes `progress: 120/400 prompts (30%) 12.3 s` at most every `LINE_EVERY_S` seconds
and once at the end.

`step_bar` is for work inside a job (a backend's batches, packs or requests): in a terminal a labelled bar that
is removed when it ends (`leave=False`), so a finished job leaves one line, not one per 64-prompt chunk; in a log
file nothing. `progress=False` (or TQDM_DISABLE=1 in the environment) switches both off.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TextIO

if TYPE_CHECKING:
    from tqdm.auto import tqdm as StepBar  # noqa: N812 - a class, named as one where it is a type

LINE_EVERY_S = 10.0  # the least time between two plain progress lines (stderr not a terminal)


def _stream() -> TextIO:
    return sys.stderr


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed, or a stream without isatty
        return False


def _disabled_by_env() -> bool:
    return os.environ.get("TQDM_DISABLE", "").strip().lower() in ("1", "true", "yes")


class _Lines:
    """The log-file form of a job's progress: a plain line at most every `every_s` seconds, and at the end."""

    def __init__(self, total: int, unit: str, stream: TextIO, every_s: float) -> None:
        self.total, self.unit, self.stream, self.every_s = total, unit, stream, every_s
        self.done, self.start = 0, time.monotonic()
        self.last = self.start

    def update(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= self.every_s and self.done < self.total:
            self._write(now)

    def close(self) -> None:
        self._write(time.monotonic())

    def _write(self, now: float) -> None:
        self.last = now
        share = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        print(
            f"progress: {self.done}/{self.total} {self.unit}s{share} {now - self.start:.1f} s",
            file=self.stream,
            flush=True,
        )


class _Progress(Protocol):
    """What a job's progress is to the code that counts: tqdm's bar, `_Lines` or `_Silent`."""

    def update(self, n: int) -> object: ...

    def close(self) -> None: ...


class _Silent:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


_OPEN: list[_Progress] = []  # the job progress open in this process (at most one counts; the others add to it)


@contextmanager
def job_progress(total: int, what: str, *, unit: str = "prompt", enabled: bool = True) -> Iterator[_Progress]:
    """The progress of a job's `total` prompts: an object with `update(n)`. See the module's docstring."""
    if _OPEN:  # part of a job whose progress is already shown: add to it
        yield _OPEN[-1]
        return
    stream = _stream()
    shown: _Progress
    if not enabled or _disabled_by_env():
        shown = _Silent()
    elif _is_terminal(stream):
        from tqdm.auto import tqdm

        shown = tqdm(total=total, unit=unit, desc=what, dynamic_ncols=True, file=stream)
    else:
        shown = _Lines(total, unit, stream, LINE_EVERY_S)
    _OPEN.append(shown)
    try:
        yield shown
    finally:
        _OPEN.remove(shown)
        shown.close()


def step_bar(total: int, what: str, *, unit: str = "prompt", enabled: bool = True) -> StepBar[NoReturn]:
    """A labelled bar for work inside a job, removed when it ends; nothing in a log file. Use as a context
    manager; `update(n)` as tqdm's."""
    from tqdm.auto import tqdm

    stream = _stream()
    # `disable` is passed only to switch the bar off, so that TQDM_DISABLE=1 in the environment still works.
    off: dict[str, Any] = {"disable": True} if not enabled or not total or not _is_terminal(stream) else {}
    return tqdm(total=total, unit=unit, desc=what, dynamic_ncols=True, leave=False, file=stream, **off)


@contextmanager
def library_bars() -> Iterator[None]:
    """Within it, transformers' and huggingface_hub's own bars (loading, converting, downloading) are off unless
    stderr is a terminal: in a log file they would only leave carriage returns and escape sequences."""
    if _is_terminal(_stream()) and not _disabled_by_env():
        yield
        return
    from huggingface_hub.utils.tqdm import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as transformers_logging

    hub_was_on, transformers_was_on = not are_progress_bars_disabled(), transformers_logging.is_progress_bar_enabled()
    disable_progress_bars()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if hub_was_on:
            enable_progress_bars()
        if transformers_was_on:
            transformers_logging.enable_progress_bar()


@contextmanager
def direct_library_bars() -> Iterator[None]:
    """Within it, a bar that a library draws with tqdm itself (transformers' GGUF conversion: "Converting and
    de-quantizing GGUF tensors", which no library switch turns off) goes nowhere unless stderr is a terminal: tqdm
    writes to the `sys.stderr` of the moment it starts, which is a sink here. Only for a step whose failures are
    exceptions, since anything else it prints to stderr goes too."""
    if _is_terminal(_stream()) and not _disabled_by_env():
        yield
        return
    import contextlib

    with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink):
        yield


# Loggers of libraries whose INFO lines are their own housekeeping, nothing the person running a job acts on: MLflow
# announcing that it creates or upgrades a new store's tables. Their warnings and errors still show.
HOUSEKEEPING_LOGGERS = ("mlflow.store.db.utils", "alembic.runtime.migration")
# MLflow's settings for every process of the tool: it runs offline by design, so MLflow's usage telemetry would only
# try (and fail) to reach the internet; and MLflow's "Downloading artifacts" bar for the small files a command reads
# back (a finished run's metrics, records) is noise on a job's stderr. A user's own setting of either wins. Set in
# the environment, so the processes a command starts (a launcher's jobs, `mlflow ui`) inherit them.
MLFLOW_DEFAULTS = {"MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}


def quiet_housekeeping() -> None:
    """A command's stderr is its progress and what it has to say: the libraries' housekeeping lines are raised to
    WARNING, and MLflow's telemetry and artifact bars are off unless the environment says otherwise
    (`MLFLOW_DEFAULTS`). Called once by each entry point (src/cli.py's `entry` and `main`, src/run.py) and by a
    sweep's job, which a launcher may run in a process no entry point of ours started (src/sweep/job.py); before
    MLflow is imported, which reads the telemetry setting once, at its import. Importing `src` sets nothing."""
    import logging

    for name, value in MLFLOW_DEFAULTS.items():
        os.environ.setdefault(name, value)
    for name in HOUSEKEEPING_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
