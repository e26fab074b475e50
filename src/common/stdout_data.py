"""stdout is data: a job's one JSON line and nothing else (`python -m src.run ... | jq`, README.md).

A library the job imports or calls may print to stdout: Python's `print`, a reference to `sys.stdout` it took at
import, or file descriptor 1 itself (C extensions, a subprocess it starts). `to_stderr` sends all three to stderr
while the job runs; the entry point prints the JSON line after it, on the real stdout.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


def is_stdout(stream: Any) -> bool:
    """Whether a stream writes to stdout: the interpreter's, or anything on file descriptor 1."""
    if stream is sys.stdout or stream is sys.__stdout__:
        return True
    try:
        return bool(stream.fileno() == 1)
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor is not stdout
        return False


@contextlib.contextmanager
def to_stderr() -> Iterator[None]:
    """Inside, whatever is written to stdout reaches stderr, at the Python level and at the file descriptor."""
    before = sys.stdout
    before.flush()  # what was printed before the job stays on stdout
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            try:
                yield
            finally:
                # a library's buffered writes to the stream it held (sys.__stdout__ is fd 1) leave while fd 1 is
                # still stderr
                for stream in {id(s): s for s in (before, sys.__stdout__, sys.stderr) if s is not None}.values():
                    with contextlib.suppress(OSError, ValueError):  # a closed or detached stream holds nothing
                        stream.flush()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
