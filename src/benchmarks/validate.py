"""Checks every loaded question passes, with one-line `UserError`s that name the file and record.

Real benchmark files are read as they are: a few hold the same option text twice (9 MMLU test
rows, 7 MMLU-Redux rows, 24 CommonsenseQA and 21 MedMCQA questions), so for them a duplicate is
kept and marked `metadata["duplicate_options"] = True`; only the generic loader, whose files the
user controls, refuses duplicates.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ..errors import UserError
from ..questions import Question

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def where(path: Path | str, line: int | None = None, record: str | None = None, *, row: int | None = None) -> str:
    """The place of a record in a message: `/x/a.jsonl line 12 (record medqa/11)`."""
    text = str(path)
    if line is not None:
        text += f" line {line}"
    elif row is not None:
        text += f" row {row}"
    if record is not None:
        text += f" (record {record})"
    return text


def record_error(place: str, problem: str, fix: str = "fix the record or drop it") -> UserError:
    """`UserError` for one bad record; newlines are flattened so the message stays one line."""
    return UserError(" ".join(f"{place}: {problem}; {fix}".split()))


def checked_question(
    place: str,
    *,
    id: str,
    question: Any,
    options: Iterable[Any],
    answer: int | None,
    subject: str | None = None,
    split: str = "test",
    metadata: dict[str, Any] | None = None,
    allow_duplicate_options: bool = True,
) -> Question:
    """Build a `Question` after checking it; `place` is `where(...)` of its record.

    >>> checked_question("a.csv line 2", id="a/0", question="2+2?", options=["3", "4"], answer=1).answer
    1
    """
    metadata = dict(metadata or {})
    if not isinstance(question, str) or not question.strip():
        raise record_error(place, "the question text is empty", "write the question or drop the record")
    options = tuple(options)
    for i, option in enumerate(options):
        if not isinstance(option, str):
            raise record_error(place, f"option {i} is {option!r}, not text", "write the option as text")
        if not option.strip():
            raise record_error(place, f"option {i} is empty", "fill in the option or remove it")
    if len(options) < 2:
        raise record_error(place, f"only {len(options)} option(s); a multiple-choice question needs at least 2",
                           "add options or drop the record")
    stripped = [o.strip() for o in options]
    first_seen: dict[str, int] = {}
    for i, text in enumerate(stripped):
        if text in first_seen:
            if not allow_duplicate_options:
                short = text if len(text) <= 40 else text[:37] + "..."
                raise record_error(place, f"options {first_seen[text]} and {i} are the same text {short!r}",
                                   "make the options distinct or drop the record")
            metadata["duplicate_options"] = True
            break
        first_seen[text] = i
    if answer is None:
        raise record_error(place, "the record has no answer", "add the answer (0-based index or letter) or drop the record")
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise record_error(place, f"answer {answer!r} is not an option index", "use a 0-based index or a letter")
    if not 0 <= answer < len(options):
        raise record_error(place, f"answer index {answer} is outside the {len(options)} options")
    return Question(id=id, question=question, options=options, answer=answer, subject=subject,
                    split=split, metadata=metadata)


def check_unique_ids(questions: list[Question], source: Path | str) -> list[Question]:
    """Refuse two questions with one id: records, caches and comparisons key on it."""
    seen: dict[str, int] = {}
    for i, q in enumerate(questions):
        if q.id in seen:
            raise UserError(f"{source}: question id {q.id!r} is used by records {seen[q.id]} and {i} (0-based); "
                            "make the ids unique or leave the id out to number records by position")
        seen[q.id] = i
    return questions


def answer_from_label(raw: Any, labels: list[str], place: str) -> int:
    """Index of the answer label (`"C"` in `["A", "B", "C"]`); a missing or unknown label is an error."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        raise record_error(place, "the record has no answer", "add the answer label or drop the record")
    label = str(raw).strip()
    if label not in labels:
        raise record_error(place, f"answer {label!r} is not one of the option labels {', '.join(labels)}")
    return labels.index(label)


def choose_split(split: str | None, splits: tuple[str, ...], name: str) -> str:
    """`split`, or the first of `splits` when None; an unknown one names `benchmark.split`."""
    if split is None:
        return splits[0]
    if split not in splits:
        raise UserError(f"config key benchmark.split: {name} has no split {split!r}; choose one of {', '.join(splits)}")
    return split
