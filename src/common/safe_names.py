"""Names that become folder names: experiment, sweep and run names come from a shared tracking store, so none of
them may climb out of the folder it is joined onto or name a device. The one rule for a name that becomes a path:
`src.compare`'s default report folder (`reports/<experiment>`) and its table and plot files. Every other path
is either a fixed file name under a folder the user chose (`--out`, `--to`, `--offline-dir`, `cache.path`, Hydra's
output folders) or an MLflow id (tests/test_safe_names.py drives each entry point with hostile names).

>>> folder_name("cora")
'cora'
>>> folder_name("../../etc"), folder_name("/abs/path"), folder_name("~"), folder_name("a\\x00b")
('etc-74ccf3c5', 'abs_path-6d80187b', 'unnamed-7ace431c', 'a_b-59b271ae')
>>> len(folder_name("x" * 500)) <= MAX_LENGTH
True
"""

from __future__ import annotations

import hashlib
import re

MAX_LENGTH = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def folder_name(name: str) -> str:
    """`name` itself when it is a plain folder name (letters, digits, `.`, `_`, `-`, no leading dot, not too
    long); otherwise a readable plain form with a short hash of the original, so two names never share a folder."""
    plain = _UNSAFE.sub("_", name).strip("._-")
    if plain == name and name and len(name) <= MAX_LENGTH:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{(plain or 'unnamed')[: MAX_LENGTH - 9]}-{digest}"
