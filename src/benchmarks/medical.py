"""Medical QA: MedQA USMLE test with 5 options (`medqa`) or 4 (`medqa_4`), and MedMCQA dev (`medmcqa`).

MedQA: `{data_dir}/medqa/test.jsonl` and `{data_dir}/medqa/4_options/phrases_no_exclude_test.jsonl`,
records `{"question", "options": {"A": ...}, "answer_idx": "C", "answer", "meta_info"}`.
Ids `medqa/<n>` / `medqa_4/<n>`, n = 0-based record number (line number - 1). Subject is
meta_info ("step1" or "step2&3"; the one typo "stfep2&3" in the 4-option file is read as
"step2&3", the raw value is in `metadata["meta_info"]`). Both files carry quote debris from the
upstream export (a stray closing quote ending 67 questions, `\\n"` ending an option of 52 / 38
questions, one question's options in tripled CSV quotes): `checked_question` cleans it, and
`metadata["answer_text"]` the same way (it always equals the right option's text).

MedMCQA: `{data_dir}/medmcqa/validation.jsonl`, records `{"question", "choices": ["A. ...", ...],
"answer": 0}`; the "A. " prefixes are removed (only a prefix whose letter matches the position).
Ids `medmcqa/<n>`, no subject (this reduced export has none).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from src.core.questions import Question

from .files import iter_jsonl, read_text, require_fields, resolve_path
from .validate import LETTERS, answer_from_label, checked_question, choose_split, clean_text, record_error, where

MEDQA_FILES = {"medqa": "medqa/test.jsonl", "medqa_4": "medqa/4_options/phrases_no_exclude_test.jsonl"}
META_INFO_TYPOS = {"stfep2&3": "step2&3"}
_PREFIX = re.compile(r"([A-Z])\.\s*")


def medqa_question(record: dict[str, Any], *, qid: str, place: str, split: str) -> Question:
    """One MedQA record (`{"question", "options": {"A": ...}, "answer_idx", "answer", "meta_info"}`) as a Question:
    the file loaders' rule and the Hub converter's (src/benchmarks/hub_rows.py). `place` names the record in errors."""
    require_fields(record, ("question", "options"), place)
    if not isinstance(record["options"], dict):
        raise record_error(place, '\'options\' is not an object like {"A": "..."}')
    labels = [str(label) for label in record["options"]]
    answer = answer_from_label(record.get("answer_idx"), labels, place)
    meta_info: Any = record.get("meta_info")  # as the file has it: a str, or absent
    answer_text = record.get("answer")  # cleaned as the options are (it repeats the right one's debris)
    metadata = {
        "labels": tuple(labels),
        "meta_info": meta_info,
        "answer_text": clean_text(answer_text) if isinstance(answer_text, str) else answer_text,
    }
    return checked_question(
        place,
        id=qid,
        question=record["question"],
        options=record["options"].values(),
        answer=answer,
        subject=META_INFO_TYPOS.get(meta_info, meta_info),
        split=split,
        metadata=metadata,
    )


def medqa_loader(name: str) -> Callable[..., list[Question]]:
    """The loader for `medqa` (5 options) or `medqa_4`."""

    def load(
        *, path: str | None, data_dir: str, split: str | None, seed: int, options: dict[str, Any]
    ) -> list[Question]:
        split = choose_split(split, ("test",), name)
        file = resolve_path(path, data_dir, MEDQA_FILES[name])
        return [
            medqa_question(record, qid=f"{name}/{n}", place=where(file, line, f"{name}/{n}"), split=split)
            for n, (line, record) in enumerate(iter_jsonl(file, read_text(file)))
        ]

    load.__name__ = f"load_{name}"
    return load


def strip_label_prefix(text: str, position: int) -> str:
    """'B. Glucose' at position 1 -> 'Glucose'; a prefix with another letter is left alone.

    >>> strip_label_prefix("A. Impulse", 0), strip_label_prefix("A. Impulse", 1)
    ('Impulse', 'A. Impulse')
    """
    match = _PREFIX.match(text) if isinstance(text, str) else None
    if match and position < len(LETTERS) and match.group(1) == LETTERS[position]:
        return text[match.end() :]
    return text


MEDMCQA_OPTIONS = ("opa", "opb", "opc", "opd")  # the Hub's option columns, in order


def medmcqa_question(row: Mapping[str, Any], *, qid: str, place: str, split: str) -> Question:
    """One MedMCQA row in the Hub's form (`question`, `opa`..`opd`, `cop`: 0-3, and `subject_name`, `id`,
    `topic_name`, `choice_type` where the source has them); the file loader's rule and the Hub converter's."""
    answer = row.get("cop")
    if isinstance(answer, str) and answer.strip().isdigit():
        answer = int(answer)
    return checked_question(
        place,
        id=qid,
        question=row.get("question"),
        options=[row.get(k) for k in MEDMCQA_OPTIONS if k in row],
        answer=answer,
        subject=row.get("subject_name"),
        split=split,
        metadata={k: row[k] for k in ("id", "topic_name", "choice_type") if row.get(k) is not None},
    )


def load_medmcqa(
    *, path: str | None, data_dir: str, split: str | None, seed: int, options: dict[str, Any]
) -> list[Question]:
    split = choose_split(split, ("validation",), "medmcqa")
    file = resolve_path(path, data_dir, "medmcqa/validation.jsonl")
    questions = []
    for n, (line, record) in enumerate(iter_jsonl(file, read_text(file))):
        qid = f"medmcqa/{n}"
        place = where(file, line, qid)
        require_fields(record, ("question", "choices"), place)
        if not isinstance(record["choices"], list):
            raise record_error(place, "'choices' is not a list")
        if len(record["choices"]) > len(MEDMCQA_OPTIONS):
            raise record_error(place, f"{len(record['choices'])} choices; MedMCQA has at most 4 (opa..opd)")
        row = {
            "question": record["question"],
            "cop": record.get("answer"),
            **{k: strip_label_prefix(c, i) for i, (k, c) in enumerate(zip(MEDMCQA_OPTIONS, record["choices"]))},
        }
        questions.append(medmcqa_question(row, qid=qid, place=place, split=split))
    return questions
