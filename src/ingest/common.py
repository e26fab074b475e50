"""What every ingest format shares: reading a table file with one-line errors, turning an answer produced
elsewhere into this tool's `Answer` (re-parsed with our parser when the raw text is there), and building the
records table with `src.answering.trials.to_records`, the function a native run builds its records with.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from src.answering.items import Answer, Item
from src.answering.trials import to_records
from src.common.errors import UserError
from src.core.records import COLUMNS

from ..answer_formats import FORMATS
from ..benchmarks.files import iter_table_records, plain

SOURCE_LABEL = "source_label"  # parse_rule of an answer whose label the file gave (--labels-from source)
INVALID_SOURCE_LABEL = "invalid_source_label"  # the file's label is empty or not one of the labels shown


@dataclass(frozen=True)
class Trial:
    """One ingested trial: the item it answers (question, variant, request), its answer and its repetition."""

    item: Item
    answer: Answer
    repetition: int
    prompt_hash: str | None = None  # the source's hash of a prompt it does not hold; None: hash item's prompt, if any


@dataclass
class Ingested:
    """What a format reader returns: the trials and what the run should say about them."""

    trials: list[Trial]
    run_info: dict[str, Any]  # model, benchmark, variant_set, temperature, seed, scoring of every record
    params: dict[str, Any] = field(default_factory=dict)  # logged beside the ingest options (e.g. prompt.name)
    notes: list[str] = field(default_factory=list)  # printed after the run (e.g. how many answers were re-parsed)
    tags: dict[str, str] = field(default_factory=dict)  # run tags the source knows (e.g. the export's prompt_hash)


def is_missing(value: Any) -> bool:
    """None, NaN, pandas NA or an empty string."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def checked_path(path: str | Path, flag: str = "--path") -> Path:
    file = Path(path).expanduser()
    if not file.is_file():
        raise UserError(f"{flag} {path}: no such file; give the file of answers to ingest")
    return file


def table_rows(file: Path, *, suffixes: Sequence[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(place, row) for every row of a CSV, JSONL, JSON list, parquet or xlsx file (src/benchmarks/files.py)."""
    return iter_table_records(file, suffixes=tuple(suffixes))


def json_cell(value: Any, place: str, column: str) -> Any:
    """A cell that holds a JSON value (a list or object written as text in CSV/xlsx), or the value as it is."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[{":
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                import ast

                try:
                    return ast.literal_eval(text)  # a Python literal, as pandas writes dicts into CSV/xlsx
                except (ValueError, SyntaxError):
                    raise UserError(
                        f"{place}: column {column!r} is not valid JSON ({text[:60]!r}); fix the cell"
                    ) from None
    return plain(value)


def answer_of(
    fmt: str,
    labels: Sequence[str],
    options: Sequence[str],
    *,
    raw: Any = None,
    label: Any = None,
    truncated: bool | None = None,
    labels_from: str = "raw",
) -> Answer:
    """The `Answer` of one trial answered elsewhere.

    With raw text (and `labels_from="raw"`), the text is parsed by the format's parser, as a native run parses
    a generated answer, so `parse_rule` says which rule read it. Otherwise the file's label is taken as given:
    `parse_rule` `source_label`, or `invalid_source_label` (INVALID) when it is empty or not one of `labels`.

    >>> (answer_of("mcq", ("A", "B"), ("Paris", "Rome"), raw="B. Rome").slot,
    ...  answer_of("mcq", ("A", "B"), ("x", "y"), label="C").parse_rule)
    (1, 'invalid_source_label')
    """
    form = FORMATS[fmt]
    has_raw = (
        raw is not None and not (isinstance(raw, float) and math.isnan(raw)) and raw is not pd.NA
    )  # "" is an answer
    if has_raw and (labels_from == "raw" or is_missing(label)):
        parse = form.parse(str(raw), labels, options, truncated=bool(truncated))
        return Answer(str(raw), parse.slot, slots=parse.slots, parse_rule=parse.rule, truncated=truncated)
    text = "" if is_missing(label) else str(label).strip()
    if fmt == "multi_select":  # a set of labels, "A, C": read as a label list
        parse = form.parse(text, labels, options)
        rule = SOURCE_LABEL if parse.slots is not None else INVALID_SOURCE_LABEL
        return Answer(
            str(raw) if has_raw else text, parse.slot, slots=parse.slots, parse_rule=rule, truncated=truncated
        )
    slot = list(labels).index(text) if text in labels else None
    return Answer(
        str(raw) if has_raw else text,
        slot,
        parse_rule=SOURCE_LABEL if slot is not None else INVALID_SOURCE_LABEL,
        truncated=truncated,
    )


def build_records(ingested: Ingested, *, run_id: str) -> pd.DataFrame:
    """The records table of the ingested trials: `src.answering.trials.to_records` row for row (the columns and types of
    a native run), trials grouped by (question, variant) in first-seen order and by repetition within, as a native
    run writes them; `cache_hit` false; `prompt_hash` the source's, or empty when it holds no prompt."""
    first: dict[tuple[str, str], int] = {}
    for t in ingested.trials:
        first.setdefault((t.item.question.id, t.item.variant.variant_id), len(first))
    trials = sorted(
        ingested.trials, key=lambda t: (first[(t.item.question.id, t.item.variant.variant_id)], t.repetition)
    )
    records = to_records(
        [t.item for t in trials],
        [[replace(t.answer, cache_hit=False)] for t in trials],
        run_info={"run_id": run_id, **ingested.run_info},
    )
    records["repetition"] = pd.Series([t.repetition for t in trials], dtype="int64")
    # a source without prompts (the CoRA tables) leaves prompt_hash empty, or gives the hash it knows
    records["prompt_hash"] = [
        t.prompt_hash if t.prompt_hash is not None else (h if t.item.request.prompt else None)
        for t, h in zip(trials, records["prompt_hash"])
    ]
    return records[list(COLUMNS)]


def check_repetitions(trials: Sequence[Trial], place: str) -> None:
    """Each (question, variant) has repetitions 0..n-1 once each; else a one-line error naming the first bad one."""
    seen: dict[tuple[str, str], list[int]] = {}
    for t in trials:
        seen.setdefault((t.item.question.id, t.item.variant.variant_id), []).append(t.repetition)
    for (qid, vid), reps in seen.items():
        if sorted(reps) != list(range(len(reps))):
            raise UserError(
                f"{place} (question {qid}, variant {vid}): repetitions {sorted(reps)[:12]} are not 0..{len(reps) - 1} "
                "each once; number each trial's repetition from 0 without gaps or duplicates"
            )
