"""Your own benchmark file: `benchmark=generic benchmark.path=/x/questions.jsonl`.

Formats by file suffix: `.jsonl` (one object per line), `.json` (a list of objects), `.csv`
(header row; option `delimiter`, default ","), `.parquet` (needs pyarrow). Each record has:

- `question`: the question text (non-empty);
- the options, either `options`: a list (in CSV a JSON list or Python list literal, e.g.
  `["3", "4"]`), or one column per option: `option_0`, `option_1`, ... or `A`, `B`, ...
  (empty trailing cells are dropped, so questions may have different numbers of options);
- `answer`: a 0-based index (`1`, `"1"`) or a letter (`"B"`);
- optional `id` (default `<file stem>/<record number from 0>`) and `subject`.

At least 2 options, all distinct after stripping whitespace; ids unique; the file UTF-8. Texts are
cleaned as in every loader (`validate.clean_text`: surrounding whitespace, quote debris).
Other fields go to `metadata`. Options `question_column`, `options_column`, `option_columns`
(a list), `answer_column`, `id_column`, `subject_column` rename the columns. `split` is only
a label here (default "test").
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from src.common.errors import UserError
from src.core.questions import Question

from .files import iter_table_records, resolve_path
from .validate import LETTERS, checked_question, record_error

SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def _is_missing(value: Any) -> bool:
    return (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or (isinstance(value, str) and not value.strip())
    )


def _records(file: Path, options: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(place, record) for each record in the file."""
    return iter_table_records(file, suffixes=SUFFIXES, delimiter=str(options.get("delimiter", ",")), noun="questions")


def _option_columns(record: dict[str, Any], options: dict[str, Any]) -> list[str] | None:
    """Per-option column names: option `option_columns`, else option_0.., else A.. (None: use a list column)."""
    if options.get("option_columns") is not None:
        return [str(c) for c in options["option_columns"]]
    if options.get("options_column", "options") in record:
        return None
    for names in ([f"option_{i}" for i in range(len(LETTERS))], list(LETTERS)):
        if names[0] in record:
            count = next((i for i, name in enumerate(names) if name not in record), len(names))
            return names[:count]
    return None


def _options(record: dict[str, Any], columns: list[str] | None, column: str, place: str) -> list[Any]:
    if columns is None:
        if column not in record:
            raise record_error(
                place,
                f"no {column!r} field and no option_0.. or A.. columns",
                "give the options as a list field or one column per option",
            )
        value = record[column]
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                try:
                    value = ast.literal_eval(value.strip())
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    raise record_error(place, f'{column!r} is not a list like ["3", "4"]') from None
        if not isinstance(value, (list, tuple)):
            raise record_error(place, f"{column!r} is a {type(value).__name__}, not a list")
        values = list(value)
    else:
        missing = [c for c in columns if c not in record]
        if missing:
            raise record_error(place, f"no option column {missing[0]!r}")
        values = [record[c] for c in columns]
        while values and _is_missing(values[-1]):
            values.pop()
    return [str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v for v in values]


def _answer(raw: Any, place: str) -> int | None:
    if _is_missing(raw):
        return None
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    text = str(raw).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    if len(text) == 1 and text.upper() in LETTERS:
        return LETTERS.index(text.upper())
    raise record_error(place, f"answer {raw!r} is neither a 0-based index nor a letter")


def load_generic(
    *, path: str | None, data_dir: str, split: str | None, seed: int, options: dict[str, Any]
) -> list[Question]:
    if path is None:
        raise UserError(
            "config key benchmark.path: the generic benchmark reads your own file; "
            f"set benchmark.path to a {', '.join(SUFFIXES)} file"
        )
    file = resolve_path(path, data_dir, None)
    names = {key: str(options.get(f"{key}_column", key)) for key in ("question", "options", "answer", "id", "subject")}
    questions = []
    columns: list[str] | None = None
    for n, (place, record) in enumerate(_records(file, options)):
        if n == 0:
            columns = _option_columns(record, options)
        raw_id = record.get(names["id"])
        qid = f"{file.stem}/{n}" if _is_missing(raw_id) else str(raw_id)
        place = f"{place} (record {qid})"
        if names["question"] not in record:
            raise record_error(
                place, f"no {names['question']!r} field", "add the question text or set benchmark.question_column"
            )
        used = set(names.values()) | set(columns or ())
        subject = record.get(names["subject"])
        questions.append(
            checked_question(
                place,
                id=qid,
                question=record[names["question"]],
                options=_options(record, columns, names["options"], place),
                answer=_answer(record.get(names["answer"]), place),
                subject=None if _is_missing(subject) else str(subject),
                split=split or "test",
                metadata={k: v for k, v in record.items() if k not in used},
                allow_duplicate_options=False,
            )
        )
    return questions
