"""Reading benchmark files: paths with config-key errors, text decoding, JSON/JSONL/CSV with line numbers."""

from __future__ import annotations

import bz2
import csv
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from src.common.errors import UserError

from .validate import where

log = logging.getLogger(__name__)

FEWSHOT_KEY = "the few-shot path"  # the config key is the caller's; loaders only know a path was given


def resolve_path(
    path: str | Path | None,
    data_dir: str | Path,
    default: str | None,
    *,
    kind: str = "file",
    key: str = "benchmark.path",
) -> Path:
    """`path` if given, else `data_dir/default`; a missing one names the config key to change.

    `kind` is "file", "folder" or "file or folder" (what the loader accepts); `key` is the
    config key that set `path`.
    """
    if path is not None or default is None:
        resolved = Path(path or "").expanduser()
        fix = f"set {key} to an existing {kind}"
        if default is not None:
            fix += f", or leave it unset to read {Path(data_dir) / default}"
    else:
        resolved = Path(data_dir).expanduser() / default
        fix = f"set data_dir (now {data_dir}) to the folder that holds {default}, or benchmark.path to the {kind}"
    if not resolved.exists():
        raise UserError(f"{resolved} does not exist; {fix}")
    if kind == "file" and not resolved.is_file():
        raise UserError(f"{resolved} is not a file; {fix}")
    if kind == "folder" and not resolved.is_dir():
        raise UserError(f"{resolved} is not a folder; {fix}")
    return resolved


def read_bytes(path: Path) -> bytes:
    """The file's bytes, decompressed when it ends in `.bz2`."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise UserError(f"{path}: cannot read ({err.strerror}); check the file's permissions") from None
    if path.suffix == ".bz2":
        try:
            raw = bz2.decompress(raw)
        except (OSError, EOFError, ValueError) as err:
            raise UserError(f"{path}: not a complete bz2 file ({err}); fetch the file again") from None
    return raw


def read_text(path: Path, *, strict: bool = False) -> str:
    """UTF-8 text (a BOM is dropped). Non-UTF-8 bytes are an error when `strict`, else U+FFFD with a warning.

    Real benchmark files are read leniently (mmlu_redux/mmlu_moral_scenarios.csv holds one
    Mac-Roman apostrophe, 0xD5); user files (generic loader) strictly.
    """
    raw = read_bytes(path)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        if strict:
            raise UserError(
                f"{path} line {line}: byte 0x{raw[err.start]:02X} (offset {err.start}) is not UTF-8; "
                "re-save the file as UTF-8"
            ) from None
        log.warning(
            "%s line %d: non-UTF-8 byte 0x%02X at offset %d read as U+FFFD", path, line, raw[err.start], err.start
        )
        return raw.decode("utf-8-sig", errors="replace")


def text_lines(text: str) -> list[str]:
    """Lines split on `\\n` only (JSON strings may hold U+2028, which `splitlines` would split on)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def iter_jsonl(path: Path, text: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line number, object) for each non-blank line; a bad line is a `UserError`."""
    for number, line in enumerate(text_lines(text), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise UserError(
                f"{path} line {number}: invalid JSON ({err.msg} at column {err.colno}); "
                "fix or remove the line (a truncated file?)"
            ) from None
        if not isinstance(record, dict):
            raise UserError(
                f"{path} line {number}: expected a JSON object, got {type(record).__name__}; write one object per line"
            )
        yield number, record


def load_json(path: Path, text: str) -> Any:
    """A whole-file JSON document; a syntax error names its line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(
            f"{path} line {err.lineno}: invalid JSON ({err.msg} at column {err.colno}); "
            "fix the file (a truncated download?)"
        ) from None


def iter_csv(path: Path, text: str, *, delimiter: str = ",") -> Iterator[tuple[int, list[str]]]:
    """(1-based line where the row starts, cells) for each non-empty CSV row (quoted cells may span lines)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise UserError(f"{path} line {start}: malformed CSV ({err}); fix the quoting of that row") from None
        if row:
            yield start, row
        start = reader.line_num + 1


def sniff_delimiter(header: str) -> str:
    """`;` or `,`, whichever the header line uses more (MMLU-Redux mixes both across files)."""
    return ";" if header.count(";") > header.count(",") else ","


def require_fields(record: dict[str, Any], fields: tuple[str, ...], place: str) -> None:
    """Every field in `fields` is present in the JSON record, else a one-line `UserError`."""
    missing = [f for f in fields if f not in record]
    if missing:
        raise UserError(
            f"{place}: the record has no {', '.join(repr(f) for f in missing)} field; fix the record or drop it"
        )


def plain(value: Any) -> Any:
    """numpy scalars and arrays (parquet, pandas) as Python values."""
    return value.tolist() if hasattr(value, "tolist") else value


def read_table(file: Path, reader: str) -> Any:
    """A parquet or xlsx file as a pandas DataFrame, or one line naming the file and what to do."""
    try:
        import pandas as pd

        if reader == "xlsx":
            import openpyxl  # noqa: F401 - pandas' xlsx engine, checked here for a one-line hint

            return pd.read_excel(file, dtype=object)
        return pd.read_parquet(file)
    except ImportError as err:
        hint = "pip install openpyxl" if reader == "xlsx" else "pip install pyarrow"
        raise UserError(f"{file}: reading .{reader} needs {err.name}; {hint}") from None
    except Exception as err:  # noqa: BLE001 - pyarrow and openpyxl raise several types for a damaged file
        raise UserError(
            f"{file}: not a readable .{reader} file ({type(err).__name__}: {err}); check the file"
        ) from None


def iter_table_records(
    file: Path, *, suffixes: tuple[str, ...], delimiter: str = ",", noun: str = "rows"
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(place, record) for every record of a JSONL, JSON list, CSV (with a header), parquet or xlsx file, for the
    suffixes a reader accepts; `place` names the file and the line (JSONL, CSV) or row (JSON, parquet; xlsx: the
    spreadsheet's row number, header = row 1). Bad input is one line naming the file and line or row."""
    suffix = file.suffix.lower()
    if suffix not in suffixes:
        raise UserError(f"{file}: unknown file type {file.suffix!r}; use one of {', '.join(suffixes)}")
    if suffix == ".jsonl":
        for line, record in iter_jsonl(file, read_text(file, strict=True)):
            yield where(file, line), record
    elif suffix == ".json":
        records = load_json(file, read_text(file, strict=True))
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise UserError(f"{file}: expected a JSON list of objects; write the {noun} as [{{...}}, ...] or as JSONL")
        for n, record in enumerate(records):
            yield where(file, row=n), record
    elif suffix == ".csv":
        rows = iter_csv(file, read_text(file, strict=True), delimiter=delimiter)
        header_line, header = next(rows, (1, []))
        for line, cells in rows:
            if len(cells) != len(header):
                raise UserError(
                    f"{file} line {line}: {len(cells)} columns, expected {len(header)} as in the header "
                    f"(line {header_line}); fix the row (quote cells that hold the delimiter)"
                )
            yield where(file, line), dict(zip(header, cells))
    else:
        frame = read_table(file, suffix.lstrip("."))
        first = 2 if suffix == ".xlsx" else 0
        for n, record in enumerate(frame.to_dict("records")):
            yield where(file, row=n + first), {k: plain(v) for k, v in record.items()}
