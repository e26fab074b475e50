"""ARC-Challenge and ARC-Easy (original AI2 JSONL), and the shared "labelled choices" JSONL format.

`{data_dir}/arc_challenge/ARC-Challenge-{Test,Dev,Train}.jsonl` (splits test/dev/train) and
`{data_dir}/arc_easy/ARC-Easy-Test.jsonl`. Labels are A-E, or 1-4 for some questions; the
answerKey is looked up in the record's own label list, and the labels are kept in
`metadata["labels"]`. Ids are the ARC ids (`Mercury_7175875`); no subject. The few-shot pool
is Train (else Dev) when the folder has it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from src.common.errors import UserError
from src.core.questions import Question

from .files import FEWSHOT_KEY, iter_jsonl, read_text, require_fields, resolve_path
from .validate import answer_from_label, checked_question, choose_split, record_error, where

ARC_SPLITS = ("test", "dev", "train")
ARC_PREFIX = {"arc_challenge": "ARC-Challenge", "arc_easy": "ARC-Easy"}


def labelled_question(
    row: Mapping[str, Any], *, place: str, split: str, metadata_fields: tuple[str, ...] = ()
) -> Question:
    """One row in the Hub's form of ARC / CommonsenseQA (`id`, `question`: the stem, `choices`: {`text`, `label`}
    lists, `answerKey`, and `metadata_fields` such as CommonsenseQA's `question_concept`); the file loaders' rule
    and the Hub converter's. `place` names the record in errors."""
    choices = row.get("choices")
    if not isinstance(choices, Mapping):
        raise record_error(place, "'choices' is not an object with 'text' and 'label' lists")
    labels = [str(label) for label in choices.get("label") or ()]
    answer = answer_from_label(row.get("answerKey"), labels, place)
    metadata: dict[str, Any] = {"labels": tuple(labels)}
    metadata.update({k: row[k] for k in metadata_fields if k in row})
    return checked_question(
        place,
        id=str(row.get("id")),
        question=row.get("question"),
        options=list(choices.get("text") or ()),
        answer=answer,
        split=split,
        metadata=metadata,
    )


def labelled_choice_questions(file: Path, *, split: str, metadata_fields: tuple[str, ...] = ()) -> list[Question]:
    """Records `{"id", "question": {"stem", "choices": [{"label", "text"}]}, "answerKey"}` (ARC, CommonsenseQA),
    each turned into the Hub's row for `labelled_question`."""
    questions = []
    for line, record in iter_jsonl(file, read_text(file)):
        require_fields(record, ("id", "question"), where(file, line))
        qid = str(record["id"])
        place = where(file, line, qid)
        body = record["question"]
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
            raise record_error(place, "'question' is not an object with a 'choices' list")
        try:
            labels = [str(c["label"]) for c in body["choices"]]
            texts = [c["text"] for c in body["choices"]]
        except (KeyError, TypeError):
            raise record_error(place, "a choice lacks its 'label' or 'text'") from None
        row = {
            "id": qid,
            "question": body.get("stem"),
            "choices": {"text": texts, "label": labels},
            "answerKey": record.get("answerKey"),
            **{k: body[k] for k in metadata_fields if k in body},
        }
        questions.append(labelled_question(row, place=place, split=split, metadata_fields=metadata_fields))
    return questions


def arc_loader(name: str) -> Callable[..., list[Question]]:
    """The loader for `arc_challenge` or `arc_easy`."""
    prefix = ARC_PREFIX[name]

    def load(
        *, path: str | None, data_dir: str, split: str | None, seed: int, options: dict[str, Any]
    ) -> list[Question]:
        split = choose_split(split, ARC_SPLITS, name)
        file = resolve_path(path, data_dir, f"{name}/{prefix}-{split.capitalize()}.jsonl")
        return labelled_choice_questions(file, split=split)

    load.__name__ = f"load_{name}"
    return load


def arc_fewshot_loader(name: str) -> Callable[..., list[Question]]:
    """Few-shot pool: the Train file, else Dev; an error when the data has neither."""
    prefix = ARC_PREFIX[name]

    def fewshot(*, path: str | None, data_dir: str, subject: str | None) -> list[Question]:
        if path is not None:
            return labelled_choice_questions(resolve_path(path, data_dir, None, key=FEWSHOT_KEY), split="train")
        for split in ("train", "dev"):
            file = Path(data_dir) / name / f"{prefix}-{split.capitalize()}.jsonl"
            if file.is_file():
                return labelled_choice_questions(file, split=split)
        raise UserError(
            f"{Path(data_dir) / name}: {name} has no {prefix}-Train.jsonl or {prefix}-Dev.jsonl "
            "for few-shot examples; add one, pass a few-shot file, or use zero-shot prompts"
        )

    return fewshot
