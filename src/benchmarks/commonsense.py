"""Commonsense benchmarks: CommonsenseQA dev, HellaSwag val, WinoGrande dev.

- `commonsenseqa`: `{data_dir}/commonsenseqa/dev_rand_split.jsonl` (ARC-like records, 5 options
  A-E); ids are the record ids; `metadata["question_concept"]`; split "dev".
- `hellaswag`: `{data_dir}/hellaswag/hellaswag_val_full.txt.bz2` (or plain .txt), 6 lines per
  item: "activity_label: ctx", the gold index (0-3), the 4 endings. The question is the whole
  first line (the lm-eval query), the subject its activity label; ids `hellaswag/<item>`; split "val".
- `winogrande`: `{data_dir}/winogrande/dev.jsonl`; the question is the sentence with its "_" blank,
  the options option1/option2, answer "1"/"2"; ids are the qIDs; split "dev".
"""

from __future__ import annotations

from typing import Any

from src.core.questions import Question

from .arc import labelled_choice_questions
from .files import iter_jsonl, read_text, require_fields, resolve_path, text_lines
from .validate import checked_question, choose_split, record_error, where

HELLASWAG_LINES = 6  # context, gold index, 4 endings


def load_commonsenseqa(
    *, path: str | None, data_dir: str, split: str | None, seed: int, options: dict[str, Any]
) -> list[Question]:
    split = choose_split(split, ("dev",), "commonsenseqa")
    file = resolve_path(path, data_dir, "commonsenseqa/dev_rand_split.jsonl")
    return labelled_choice_questions(file, split=split, metadata_fields=("question_concept",))


def load_hellaswag(
    *, path: str | None, data_dir: str, split: str | None, seed: int, options: dict[str, Any]
) -> list[Question]:
    split = choose_split(split, ("val",), "hellaswag")
    file = resolve_path(path, data_dir, "hellaswag/hellaswag_val_full.txt.bz2")
    lines = text_lines(read_text(file))
    complete = len(lines) - len(lines) % HELLASWAG_LINES
    if complete < len(lines):
        raise record_error(
            where(file, complete + 1, f"hellaswag/{complete // HELLASWAG_LINES}"),
            f"the last item has {len(lines) - complete} of {HELLASWAG_LINES} lines (context, gold index, 4 endings)",
            "the file is truncated; fetch it again",
        )
    questions = []
    for item, start in enumerate(range(0, len(lines), HELLASWAG_LINES)):
        qid = f"hellaswag/{item}"
        context, gold, *endings = lines[start : start + HELLASWAG_LINES]
        if not gold.strip().isdigit():
            raise record_error(
                where(file, start + 2, qid),
                f"gold index {gold!r} is not a number 0-3",
                f"each item is {HELLASWAG_LINES} lines; check the lines around it",
            )
        label, sep, _ = context.partition(": ")
        questions.append(
            checked_question(
                where(file, start + 1, qid),
                id=qid,
                question=context,
                options=endings,
                answer=int(gold),
                subject=label if sep else None,
                split=split,
            )
        )
    return questions


def load_winogrande(
    *, path: str | None, data_dir: str, split: str | None, seed: int, options: dict[str, Any]
) -> list[Question]:
    split = choose_split(split, ("dev",), "winogrande")
    file = resolve_path(path, data_dir, "winogrande/dev.jsonl")
    questions = []
    for n, (line, record) in enumerate(iter_jsonl(file, read_text(file))):
        qid = str(record.get("qID", f"winogrande/{n}"))
        place = where(file, line, qid)
        require_fields(record, ("sentence", "option1", "option2"), place)
        raw = "" if record.get("answer") is None else str(record["answer"]).strip()
        if raw and raw not in ("1", "2"):
            raise record_error(place, f"answer {raw!r} is not 1 or 2")
        questions.append(
            checked_question(
                place,
                id=qid,
                question=record["sentence"],
                options=(record["option1"], record["option2"]),
                answer=int(raw) - 1 if raw else None,
                split=split,
            )
        )
    return questions
