"""Checks every loaded question passes, with one-line `UserError`s that name the file and record.

Every loader builds its questions with `checked_question`, which also cleans the question and
option texts (`clean_text`): surrounding whitespace and quote debris left at the edges by the
files' exports are removed, inner text is never changed (but for one level of CSV quote escaping
around a field that was quoted twice). In the shipped data (test splits): MMLU 979 question
texts and 152 option texts (963 / 133 of them stray whitespace, the rest quote debris in
professional_psychology and a few others), MMLU-Redux 237 / 48; MedQA (both files, from the
upstream jind11 export) 72 questions, 67 of them ending with a closing quote that has no opening
one (`...symptoms?"`, 2 with doubled inner quotes), and 63 / 47 options (5- / 4-option file),
52 / 38 of them ending with a line break and a quote (`Propranolol\\n"`), one question's options
in tripled CSV quotes. ARC, TruthfulQA, MedMCQA, CommonsenseQA, HellaSwag and WinoGrande are clean.
A question records which of its texts were cleaned in `metadata["cleaned"]` (e.g.
`("question", "option 4")`).

Real benchmark files are read as they are otherwise: a few hold the same option text twice
(`src.core.questions.duplicate_option_groups`: the same text after strip, case kept), so for them a duplicate is
kept and marked `metadata["duplicate_options"] = True` (`load_benchmark` names them in one
warning per load); only the generic loader, whose files the user controls, refuses options that
are the same text after stripping.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from src.common.errors import UserError
from src.core.questions import Question, duplicate_option_groups

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DOUBLE_QUOTES = '"\u201c\u201d'  # straight and curly double quotes (MMLU mixes them: \u201ca penny saved ...")
_CLOSING_AFTER = "?.!:"  # a stray closing quote follows the end of a sentence...


def _odd_quotes(text: str) -> bool:
    return sum(text.count(q) for q in DOUBLE_QUOTES) % 2 == 1


def _doubled_only(text: str) -> bool:
    """Every straight double quote in `text` is one of a `""` pair (CSV escaping), and there is one."""
    return '""' in text and '"' not in text.replace('""', "")


def clean_text(text: str) -> str:
    """`text` without surrounding whitespace and the quote debris files leave at its edges.

    Debris, removed:
    - a closing `"` that leaves the text's double quotes unpaired, right after a line break or
      the end of a sentence (MedQA `'Propranolol\\n"'`, `'...symptoms?"'`: a CSV-quoted field
      that lost its opening quote);
    - one level of CSV quoting around a field that was quoted twice: the text is wrapped in `"`
      and its inner quotes are doubled, or it lost its opening quote as above and its quotes are
      doubled (`'"Hi ""Bob""."'` -> `'Hi "Bob".'`; `'""Hi.""'` tripled -> `'"Hi."'`).
    Quotes that pair up, quotes inside the text and a lone opening quote (HellaSwag endings
    continue a quote their context opened) are kept; nothing else inside the text changes.

    >>> clean_text('  Propranolol\\n"'), clean_text('Which is most likely?"'), clean_text(3 * '"' + 'Hi.' + 3 * '"')
    ('Propranolol', 'Which is most likely?', '"Hi."')
    >>> clean_text('"Hi ""Bob""."'), clean_text('He says, ""No."" Why?"')
    ('Hi "Bob".', 'He says, "No." Why?')
    >>> clean_text('He said "why?"'), clean_text('" you can also see'), clean_text('at 6 "'), clean_text('"A" or "B"')
    ('He said "why?"', '" you can also see', 'at 6 "', '"A" or "B"')
    """
    cleaned = text.strip()
    if len(cleaned) >= 2 and cleaned[0] == cleaned[-1] == '"' and _doubled_only(cleaned[1:-1]):
        return cleaned[1:-1].replace('""', '"').strip()
    lost_opening = False
    while (
        len(cleaned) >= 2
        and cleaned.endswith('"')
        and _odd_quotes(cleaned)
        and (cleaned[-2] in _CLOSING_AFTER or cleaned[-2] in "\r\n")
    ):
        cleaned, lost_opening = cleaned[:-1].strip(), True
    if lost_opening and _doubled_only(cleaned):
        cleaned = cleaned.replace('""', '"')
    return cleaned


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
    """Build a `Question` after checking it and cleaning its texts (`clean_text`); `place` is `where(...)` of its
    record.

    >>> q = checked_question("a.csv line 2", id="a/0", question=" 2+2?", options=["3", '4\\n"'], answer=1)
    >>> q.question, q.options, q.answer, q.metadata
    ('2+2?', ('3', '4'), 1, {'cleaned': ('question', 'option 1')})
    """
    metadata = dict(metadata or {})
    if not isinstance(question, str) or not question.strip():
        raise record_error(place, "the question text is empty", "write the question or drop the record")
    raw = (question, *options)
    for i, option in enumerate(raw[1:]):
        if not isinstance(option, str):
            raise record_error(place, f"option {i} is {option!r}, not text", "write the option as text")
    clean = [clean_text(text) for text in raw]
    for i, option in enumerate(clean[1:]):
        if not option:
            raise record_error(place, f"option {i} is empty", "fill in the option or remove it")
    if len(clean) < 3:
        raise record_error(
            place,
            f"only {len(clean) - 1} option(s); a multiple-choice question needs at least 2",
            "add options or drop the record",
        )
    changed = tuple("question" if i == 0 else f"option {i - 1}" for i, text in enumerate(raw) if clean[i] != text)
    if changed:
        metadata["cleaned"] = changed
    question, options = clean[0], tuple(clean[1:])
    groups = duplicate_option_groups(options)
    if groups:
        if not allow_duplicate_options:
            first, second = groups[0][:2]
            text = options[first]
            short = text if len(text) <= 40 else text[:37] + "..."
            raise record_error(
                place,
                f"options {first} and {second} are the same text {short!r}",
                "make the options distinct or drop the record",
            )
        metadata["duplicate_options"] = True
    if answer is None:
        raise record_error(
            place, "the record has no answer", "add the answer (0-based index or letter) or drop the record"
        )
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise record_error(place, f"answer {answer!r} is not an option index", "use a 0-based index or a letter")
    if not 0 <= answer < len(options):
        raise record_error(place, f"answer index {answer} is outside the {len(options)} options")
    return Question(
        id=id, question=question, options=options, answer=answer, subject=subject, split=split, metadata=metadata
    )


def check_unique_ids(questions: list[Question], source: Path | str) -> list[Question]:
    """Refuse two questions with one id: records, caches and comparisons key on it."""
    seen: dict[str, int] = {}
    for i, q in enumerate(questions):
        if q.id in seen:
            raise UserError(
                f"{source}: question id {q.id!r} is used by records {seen[q.id]} and {i} (0-based); "
                "make the ids unique or leave the id out to number records by position"
            )
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
