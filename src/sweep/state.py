"""This command's multirun as its entry point holds it: the active sweep callback and the sweep's exit code.

`python -m src.run` (and `mcq run`) opens one `SweepState` for the command (`opened`); the sweep callback registers
in it when the multirun starts and leaves its exit code there when it finishes; the sweeper plugin reads the
callback's composed jobs and config loader from it. Importing the package makes no state, and none outlives the
command.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any, NoReturn


@dataclass
class SweepState:
    callback: Any = None  # the MlflowSweepCallback of the running multirun (None: no multirun yet)
    exit_code: int = 0  # set by the sweep's summary: 0, 2 when a job failed in one line, 1 when one crashed, 130


_OPEN: SweepState | None = None  # the entry point's, while its command runs


@contextlib.contextmanager
def opened() -> Iterator[SweepState]:
    """The state of one command, for as long as it runs."""
    global _OPEN
    outer, _OPEN = _OPEN, SweepState()
    try:
        yield _OPEN
    finally:
        _OPEN = outer


def current() -> SweepState:
    """The running command's state; outside one (a test driving the callback), a fresh one that nobody reads."""
    return _OPEN if _OPEN is not None else SweepState()


def interrupt_on_sigterm(signum: int, frame: FrameType | None) -> NoReturn:
    """SIGTERM (Slurm's scancel or preemption, kill) ends a job as Ctrl-C does: its run is marked KILLED and its
    outcome written. `python -m src.run` and the Slurm launcher's job install it."""
    raise KeyboardInterrupt
