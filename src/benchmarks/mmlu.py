"""MMLU (header-less CSVs, one per subject) and MMLU-Redux (annotated CSVs with quirks).

MMLU: `{data_dir}/mmlu/{split}/<subject>_<split>.csv`, columns question, A, B, C, D, answer
letter; ids `mmlu/<subject>/<split>/<row>` (0-based row within the file).

MMLU-Redux: `{data_dir}/mmlu_redux/mmlu_<subject>.csv` with a header whose column order and
delimiter (`,` or `;`) differ by file; `choices` is a Python list literal, `answer` 0-based;
ids `mmlu_redux/<subject>/<row>`. `metadata["error_type"]` is the annotation normalised to
lowercase_with_underscores ("Wrong Groundtruth" -> "wrong_groundtruth", "OK " -> "ok"), the
raw value in `error_type_raw`; option `only_ok: true` keeps only error_type "ok".

Both take option `subjects` (a list, or a comma-separated string) to keep some subjects.
Files are read in name order, rows in file order.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from src.common.errors import UserError
from src.core.questions import Question

from .files import iter_csv, read_text, resolve_path, sniff_delimiter
from .validate import LETTERS, checked_question, choose_split, record_error, where

MMLU_SPLITS = ("test", "dev", "val")


def wanted_subjects(options: Mapping[str, Any], known: list[str], name: str, root: Path | str) -> list[str]:
    """The subjects named by option `subjects` (all when unset), in `known` order; `root` is where they were
    looked for (a folder, or a Hub repository), named in the error."""
    raw = options.get("subjects")
    if raw is None:
        return known
    asked = [s.strip() for s in raw.split(",")] if isinstance(raw, str) else [str(s).strip() for s in raw]
    unknown = [s for s in asked if s not in known]
    if unknown:
        raise UserError(
            f"config key benchmark.subjects: {name} has no subject {unknown[0]!r} in {root}; "
            f"choose from {', '.join(known)}"
        )
    return [s for s in known if s in asked]


def csv_files(root: Path) -> list[Path]:
    """`root` itself if it is a file, else the CSV files in it by name."""
    if root.is_file():
        return [root]
    files = sorted(root.glob("*.csv"))
    if not files:
        raise UserError(
            f"{root}: no .csv files in this folder; set benchmark.path or data_dir to the folder holding them"
        )
    return files


def _mmlu_subject(file: Path) -> str:
    for suffix in ("_test", "_dev", "_val"):
        if file.stem.endswith(suffix):
            return file.stem[: -len(suffix)]
    return file.stem


def mmlu_question(row: Mapping[str, Any], *, qid: str, place: str, subject: str, split: str) -> Question:
    """One MMLU row in the Hub's form (`question`, `choices`: the 4 texts, `answer`: 0-3); the file loader's rule
    and the Hub converter's. `place` names the record in errors."""
    return checked_question(
        place,
        id=qid,
        question=row.get("question"),
        options=list(row.get("choices") or ()),
        answer=row.get("answer"),
        subject=subject,
        split=split,
    )


def load_mmlu(
    *, path: str | None, data_dir: str, split: str | None, seed: int, options: dict[str, Any]
) -> list[Question]:
    split = choose_split(split, MMLU_SPLITS, "mmlu")
    root = resolve_path(path, data_dir, f"mmlu/{split}", kind="file or folder")
    by_subject = {_mmlu_subject(f): f for f in csv_files(root)}
    questions = []
    for subject in wanted_subjects(options, list(by_subject), "mmlu", root):
        file = by_subject[subject]
        for row, (line, cells) in enumerate(iter_csv(file, read_text(file))):
            qid = f"mmlu/{subject}/{split}/{row}"
            place = where(file, line, qid)
            if len(cells) != 6:
                raise record_error(place, f"{len(cells)} columns, expected 6 (question, A, B, C, D, answer letter)")
            letter = cells[5].strip()
            if not letter:
                raise record_error(place, "the record has no answer", "add the answer letter or drop the record")
            if letter not in LETTERS[:4]:
                raise record_error(place, f"answer {letter!r} is not one of A, B, C, D")
            record = {"question": cells[0], "choices": cells[1:5], "answer": LETTERS.index(letter)}
            questions.append(mmlu_question(record, qid=qid, place=place, subject=subject, split=split))
    return questions


def normalise_error_type(raw: str) -> str:
    """'Wrong Groundtruth' / 'wrong_groundtruth ' -> 'wrong_groundtruth'.

    >>> normalise_error_type(" Bad Question Clarity")
    'bad_question_clarity'
    """
    return "_".join(raw.strip().lower().replace("_", " ").split())


def redux_question(row: Mapping[str, Any], *, qid: str, place: str, subject: str) -> Question:
    """One MMLU-Redux row in the Hub's form (`question`, `choices` list, `answer` 0-based (a number, or its
    digits as the CSVs hold it), `error_type`, `source`, `correct_answer`, `potential_reason`); the file loader's
    rule and the Hub converter's. `place` names the record in errors."""
    answer = row.get("answer")
    if isinstance(answer, str):
        text = answer.strip()
        if text and not text.isdigit():
            raise record_error(place, f"answer {text!r} is not a 0-based option index")
        answer = int(text) if text else None
    raw_type = str(row.get("error_type") or "")
    metadata = {
        "error_type": normalise_error_type(raw_type) or None,
        "error_type_raw": raw_type,
        **{k: str(row[k]) for k in ("source", "correct_answer", "potential_reason") if row.get(k)},
    }
    return checked_question(
        place,
        id=qid,
        question=row.get("question"),
        options=list(row.get("choices") or ()),
        answer=answer,
        subject=subject,
        metadata=metadata,
    )


def _redux_questions(file: Path, subject: str) -> list[Question]:
    text = read_text(file)
    rows = iter_csv(file, text, delimiter=sniff_delimiter(text.split("\n", 1)[0]))
    header_line, header = next(rows, (1, []))
    header = [h.strip() for h in header]
    missing = [c for c in ("question", "choices", "answer") if c not in header]
    if missing:
        raise UserError(
            f"{file} line {header_line}: the header has no {', '.join(missing)} column; "
            "the first row must name the columns (question, choices, answer, ...)"
        )
    questions = []
    for n, (line, cells) in enumerate(rows):
        qid = f"mmlu_redux/{subject}/{n}"
        place = where(file, line, qid)
        if len(cells) != len(header):
            raise record_error(place, f"{len(cells)} columns, expected {len(header)} as in the header")
        record = {name: cell for name, cell in zip(header, cells) if name}
        try:
            choices = ast.literal_eval(record["choices"].strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise record_error(place, "choices is not a Python list literal like \"['a', 'b']\"") from None
        if not isinstance(choices, (list, tuple)):
            raise record_error(place, f"choices is a {type(choices).__name__}, not a list")
        questions.append(redux_question({**record, "choices": choices}, qid=qid, place=place, subject=subject))
    return questions


def load_mmlu_redux(
    *, path: str | None, data_dir: str, split: str | None, seed: int, options: dict[str, Any]
) -> list[Question]:
    choose_split(split, ("test",), "mmlu_redux")
    root = resolve_path(path, data_dir, "mmlu_redux", kind="file or folder")
    by_subject = {f.stem.removeprefix("mmlu_"): f for f in csv_files(root)}
    questions = []
    for subject in wanted_subjects(options, list(by_subject), "mmlu_redux", root):
        questions += _redux_questions(by_subject[subject], subject)
    if options.get("only_ok"):
        questions = [q for q in questions if q.metadata["error_type"] == "ok"]
    return questions


def mmlu_fewshot(*, path: str | None, data_dir: str, subject: str | None) -> list[Question]:
    """MMLU dev (5 per subject), also the pool for MMLU-Redux, whose subjects are MMLU's."""
    options = {} if subject is None else {"subjects": [subject]}
    return load_mmlu(path=path, data_dir=data_dir, split="dev", seed=0, options=options)
