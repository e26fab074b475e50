"""`mcq <command> [args]`: every command of the project behind one console script, and what the commands share.

    mcq run model=simulated limit=1        # = python -m src.run model=simulated limit=1
    mcq compare --experiment smoke         # = python -m src.compare --experiment smoke
    mcq --help                             # the commands

Each `mcq X` calls the same `main(argv)` as `python -m src.X` (installed by `pip install -e .`, pyproject's
[project.scripts]). The shared pieces: the `--tracking-uri` / `--experiment` flags, the check of the power flags
(`--delta`, `--alpha`, `--power` of `plan` and `compare`), the exit codes, one `error:` line for bad input, and the
garbage-collection tuning of a batch process, which the entry point sets (never an import of the package). The
commands import this module and no other command (tests/test_layers.py).
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import runpy
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from src.common import gc_tuning, progress
from src.common.errors import UserError
from src.tracking.names import DEFAULT_URI

A = TypeVar("A")

EXIT_OK = 0
EXIT_FAILED = 1  # a job or check failed (its own message says which)
EXIT_USER_ERROR = 2  # bad input: one `error:` line naming what and what to do

# mcq's command -> the module `python -m` runs; `run` is Hydra's application (its argv is Hydra's). The developer
# tools (`python -m devtools.perf`, `python -m devtools.ui_check`) are no commands of the installed tool: they run
# from a clone (devtools/).
COMMANDS = {
    "run": "src.run",
    "compare": "src.compare.__main__",
    "ingest": "src.ingest.__main__",
    "export": "src.export",
    "data": "src.data",
    "catalog": "src.catalog",
    "plan": "src.plan",
    "assess": "src.assess",
    "sync": "src.sync",
    "recheck": "src.recheck",
    "ui": "src.ui",
}


def add_tracking_flags(
    parser: argparse.ArgumentParser,
    *,
    experiment: str | None = None,
    required: bool = False,
    default: str | None = None,
) -> None:
    """`--tracking-uri` (default: the config's, sqlite:///mlruns/mlflow.db) and, when `experiment` says what it is
    for, `--experiment`: the same flags for every command that reads or writes runs."""
    parser.add_argument("--tracking-uri", default=DEFAULT_URI, help=f"MLflow tracking URI (default {DEFAULT_URI})")
    if experiment is not None:
        shown = f" (default {default})" if default is not None else ""
        parser.add_argument("--experiment", required=required, default=default, help=experiment + shown)


def user_error(err: UserError) -> int:
    """The one line bad input gets, and its exit code (EXIT_USER_ERROR unless the error says otherwise)."""
    print(f"error: {err}", file=sys.stderr)
    return err.exit_code


def check_power_args(delta: float, alpha: float, power: float) -> None:
    """One-line errors for a delta, alpha or power out of range."""
    if not (delta > 0 and math.isfinite(delta)):
        raise UserError(f"--delta: {delta:g} must be > 0 (the difference to detect, e.g. 0.02)")
    if not 0 < alpha < 1:
        raise UserError(f"--alpha: {alpha:g} must be between 0 and 1 (exclusive), e.g. 0.05")
    if not 0 < power < 1:
        raise UserError(f"--power: {power:g} must be between 0 and 1 (exclusive), e.g. 0.8")


def entry(main: Callable[[None], int]) -> None:  # main(None): its arguments from sys.argv
    """A command's `if __name__ == "__main__":` body: the batch process's GC tuning, then `main`, its exit code."""
    gc_tuning.tune_for_batch()
    progress.quiet_housekeeping()
    sys.exit(ended_by_reader(main, None))


EXIT_READER_GONE = 128 + signal.SIGPIPE  # what a shell reports for a writer whose reader left (`yes | head`)


def ended_by_reader(command: Callable[[A], int], argv: A) -> int:
    """`command(argv)`, or EXIT_READER_GONE and no traceback when stdout's reader left before the end
    (`python -m src.plan ... | head`): Python's documented handling of SIGPIPE (the library's `signal` page), with
    stdout pointed at /dev/null so that the flush at exit does not raise again."""
    try:
        code = command(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_READER_GONE
    return code


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        lines = [f"  mcq {name:9s} = python -m {module.removesuffix('.__main__')}" for name, module in COMMANDS.items()]
        print(
            "usage: mcq <command> [args]   (mcq <command> --help for its own)\n" + "\n".join(lines),
            file=sys.stdout if argv and argv[0] in ("-h", "--help") else sys.stderr,
        )
        if argv and argv[0] not in ("-h", "--help"):
            print(f"error: unknown command {argv[0]!r}; choose one of {', '.join(COMMANDS)}", file=sys.stderr)
        return EXIT_OK if argv and argv[0] in ("-h", "--help") else EXIT_USER_ERROR
    name, rest = argv[0], argv[1:]
    gc_tuning.tune_for_batch()
    progress.quiet_housekeeping()
    if name == "run":  # Hydra reads sys.argv and the entry module: run it as `python -m src.run` does
        sys.argv = [f"mcq {name}", *rest]
        try:
            runpy.run_module(COMMANDS[name], run_name="__main__", alter_sys=False)
        except SystemExit as done:
            return done.code if isinstance(done.code, int) else (EXIT_OK if done.code is None else EXIT_FAILED)
        return EXIT_OK
    command: Callable[[list[str]], int] = importlib.import_module(COMMANDS[name]).main
    return ended_by_reader(command, rest)


if __name__ == "__main__":
    sys.exit(main())
