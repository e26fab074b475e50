"""Commonsense benchmarks: CommonsenseQA dev, HellaSwag val, WinoGrande dev.

Each has one row converter that both readers use: the file loader here turns each record of the raw file
into a row of the benchmark's Hub dataset (src/benchmarks/hub.py), and the Hub reader (hub_rows.py) passes the
Hub's rows as they are, so a question is the same whichever way the benchmark arrives.

- `commonsenseqa`: `{data_dir}/commonsenseqa/dev_rand_split.jsonl` (ARC-like records, 5 options
  A-E); ids are the record ids; `metadata["question_concept"]`; split "dev".
- `hellaswag`: `{data_dir}/hellaswag/hellaswag_val_full.txt.bz2` (or plain .txt), 6 lines per
  item: "activity_label: ctx", the gold index (0-3), the 4 endings. The question and options are lm-eval's
  (`hellaswag_question`); the subject is the activity label; ids `hellaswag/<item>`; split "val".
- `winogrande`: `{data_dir}/winogrande/dev.jsonl`; the question is the sentence with its "_" blank,
  the options option1/option2, answer "1"/"2"; ids `winogrande/<record>` (the Hub's copy has no qIDs, so the
  file's are not used: either way a question has one id); split "dev".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from src.core.questions import Question

from .arc import labelled_choice_questions
from .files import iter_jsonl, read_text, require_fields, resolve_path, text_lines
from .validate import checked_question, choose_split, record_error, where

HELLASWAG_LINES = 6  # context, gold index, 4 endings
# The end of a sentence inside a HellaSwag context: where an ActivityNet item's ctx_a ends and its ctx_b begins.
_SENTENCE_END = re.compile(r"[.!?][\"']?\s+")
_ENDS_A_SENTENCE = re.compile(r"[.!?][\"']?\s*$")


def hellaswag_clean(text: str) -> str:
    """HellaSwag text as lm-eval cleans it (`preprocess` in lm_eval/tasks/hellaswag/utils.py): stripped,
    " [title]" -> ". ", other [markers] removed, double spaces single.

    >>> hellaswag_clean("Hello [header] world [title]Next  step")
    'Hello world. Next step'
    """
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def hellaswag_question(row: Mapping[str, Any], *, qid: str, place: str, split: str) -> Question:
    """One HellaSwag row in the Hub's form (`activity_label`, `ctx_a`, `ctx_b`, `endings`, `label`) as lm-eval reads
    it (`process_docs` in lm_eval/tasks/hellaswag/utils.py): the question `activity_label: ctx_a Ctx_b` (ctx_b
    capitalised, as str.capitalize does), question and endings cleaned by `hellaswag_clean`; the file loader's rule
    and the Hub converter's."""
    label = str(row.get("activity_label") or "")
    gold = str(row.get("label", "")).strip()
    if not gold.isdigit():
        raise record_error(place, f"label {gold!r} is not a number 0-3")
    ctx = f"{row.get('ctx_a') or ''} {str(row.get('ctx_b') or '').capitalize()}"
    return checked_question(
        place,
        id=qid,
        question=hellaswag_clean(f"{label}: {ctx}" if label else ctx),
        options=[hellaswag_clean(e) if isinstance(e, str) else e for e in row.get("endings") or ()],
        answer=int(gold),
        subject=label or None,
        split=split,
        metadata={"ind": row["ind"]} if row.get("ind") is not None else None,
    )


def hellaswag_file_row(context: str, gold: str, endings: list[str]) -> dict[str, Any]:
    """A HellaSwag item of the text file as the Hub's row. The file (klosax/hellaswag_text_data, made from
    rowanz/hellaswag's hellaswag_val.jsonl) joins `ctx_a ctx_b` into one `ctx`, so ctx_b is taken back as
    what follows the context's last sentence end when the context does not end a sentence: an ActivityNet
    item's ctx_b is the lower-case start of its next sentence ("... on a roof. he"), a WikiHow item's ctx_b is
    empty and its context ends with a full stop. In the shipped file that finds a ctx_b in 3,236 of the 10,042
    items, each starting lower-case with no capital after its first letter, so capitalising it changes the first
    letter alone.

    >>> hellaswag_file_row("Roof shingle removal: A man is sitting on a roof. he", "3", ["a", "b", "c", "d"])["ctx_b"]
    'he'
    """
    label, sep, ctx = context.partition(": ")
    if not sep:
        label, ctx = "", context
    ctx_a, ctx_b = ctx, ""
    ends = list(_SENTENCE_END.finditer(ctx))
    if ends and not _ENDS_A_SENTENCE.search(ctx):
        ctx_a, ctx_b = ctx[: ends[-1].start() + len(ends[-1].group().rstrip())], ctx[ends[-1].end() :]
    return {"activity_label": label, "ctx_a": ctx_a, "ctx_b": ctx_b, "endings": endings, "label": gold}


def winogrande_question(row: Mapping[str, Any], *, qid: str, place: str, split: str) -> Question:
    """One WinoGrande row (`sentence`, `option1`, `option2`, `answer` "1"/"2") as lm-eval reads it
    (lm_eval/tasks/winogrande/preprocess_winogrande.py: answer "1" -> option 0, "2" -> option 1); the file loader's
    rule and the Hub converter's. No answer ("" or absent, as in an unlabelled split) is the 'no answer' error."""
    raw = "" if row.get("answer") is None else str(row["answer"]).strip()
    if raw and raw not in ("1", "2"):
        raise record_error(place, f"answer {raw!r} is not 1 or 2")
    return checked_question(
        place,
        id=qid,
        question=row.get("sentence"),
        options=(row.get("option1"), row.get("option2")),
        answer=int(raw) - 1 if raw else None,
        split=split,
    )


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
        row = hellaswag_file_row(context, gold, endings)
        questions.append(hellaswag_question(row, qid=qid, place=where(file, start + 1, qid), split=split))
    return questions


def load_winogrande(
    *, path: str | None, data_dir: str, split: str | None, seed: int, options: dict[str, Any]
) -> list[Question]:
    split = choose_split(split, ("dev",), "winogrande")
    file = resolve_path(path, data_dir, "winogrande/dev.jsonl")
    questions = []
    for n, (line, record) in enumerate(iter_jsonl(file, read_text(file))):
        qid = f"winogrande/{n}"
        place = where(file, line, qid)
        require_fields(record, ("sentence", "option1", "option2"), place)
        questions.append(winogrande_question(record, qid=qid, place=place, split=split))
    return questions
