"""The content digests the tool keys things by: SHA-256 of a value's sorted JSON, of a text, of a file's bytes.

One rule for each, so that two places that key the same content get the same key. A digest that is stored (a
question's identity, a cache key, a run's tag) keeps the exact bytes it was made from: `ascii` chooses between
JSON's escaped (`\\u00e9`) and literal non-ASCII text, which differ for non-ASCII content, and each caller keeps
the form its stored keys were made with.

>>> json_sha256({"b": 1, "a": [2, 3]}) == json_sha256({"a": [2, 3], "b": 1})
True
>>> len(json_sha256("x", length=16)), text_sha256("abc")[:8]
(16, 'ba7816bf')
>>> json_sha256("é") == json_sha256("é", ascii=False)
False
>>> seed_of(7, "q1", "v0", bits=31) == int.from_bytes(hashlib.sha256(b"7|q1|v0").digest()[:4], "little") & 0x7FFFFFFF
True
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def sorted_json(value: Any, *, ascii: bool = True) -> str:
    """`value` as JSON with its keys sorted, values JSON cannot hold written as their str()."""
    return json.dumps(value, sort_keys=True, default=str, ensure_ascii=ascii)


def text_sha256(text: str, *, length: int | None = None) -> str:
    """The hex SHA-256 of `text`'s UTF-8 bytes, its first `length` digits when given."""
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def json_sha256(value: Any, *, ascii: bool = True, length: int | None = None) -> str:
    """The hex SHA-256 of `value`'s sorted JSON (`sorted_json`), its first `length` digits when given."""
    return text_sha256(sorted_json(value, ascii=ascii), length=length)


def file_sha256(path: str | Path) -> str:
    """The hex SHA-256 of a file's bytes, read in blocks (hashlib.file_digest): a large file is never whole in
    memory."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def seed_of(*parts: object, bits: int) -> int:
    """A `bits`-bit seed from `parts` joined by `|`: the low bits of their SHA-256 (little-endian), the same on every
    process and machine, where Python's `hash` differs from one process to the next."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[: (bits + 7) // 8], "little") & ((1 << bits) - 1)
