"""A path from a config or the command line, as the shell would read it: `~` and `$VARIABLES` expanded.

One rule for every place that reads such a path (the response cache, a model's files, the config's checks), so
`cache.path=~/c` is the home's `c` wherever it is read, never `./~/c`.
"""

from __future__ import annotations

import os
from pathlib import Path


def expand_path(path: str | os.PathLike[str]) -> Path:
    """The path with `~` and `$VARIABLES` expanded.

    >>> os.environ["MCQ_DOC_ROOT"] = "/data"
    >>> str(expand_path("$MCQ_DOC_ROOT/c")), str(expand_path("~/c")) == os.path.expanduser("~/c")
    ('/data/c', True)
    """
    return Path(os.path.expandvars(os.path.expanduser(str(path))))
