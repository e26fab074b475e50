"""The Hub's rows (dicts as `datasets` yields them) as `Question`s: per benchmark, the row numbering and the
options of the Hub's copy, around the ONE row converter the benchmark's file loader uses too (mmlu.py, arc.py,
truthfulqa.py, medical.py, commonsense.py: each file loader turns its records into the Hub's rows for it), so a
question has the same id, text, options and answer whichever way the benchmark arrives. What the Hub's copy holds
that a file lacks, or the reverse, is listed in `hub.py`. Questions come in the Hub's row order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from src.core.questions import Question

from .arc import labelled_question
from .commonsense import hellaswag_question, winogrande_question
from .medical import medmcqa_question, medqa_question
from .mmlu import mmlu_question, redux_question, wanted_subjects
from .truthfulqa import shuffle_option, truthfulqa_question

# MMLU's 57 subjects: mmlu-redux-2.0's configs, and what option `subjects` may name of cais/mmlu
MMLU_SUBJECTS = (
    "abstract_algebra anatomy astronomy business_ethics clinical_knowledge college_biology college_chemistry "
    "college_computer_science college_mathematics college_medicine college_physics computer_security "
    "conceptual_physics econometrics electrical_engineering elementary_mathematics formal_logic global_facts "
    "high_school_biology high_school_chemistry high_school_computer_science high_school_european_history "
    "high_school_geography high_school_government_and_politics high_school_macroeconomics high_school_mathematics "
    "high_school_microeconomics high_school_physics high_school_psychology high_school_statistics "
    "high_school_us_history high_school_world_history human_aging human_sexuality international_law jurisprudence "
    "logical_fallacies machine_learning management marketing medical_genetics miscellaneous moral_disputes "
    "moral_scenarios nutrition philosophy prehistory professional_accounting professional_law professional_medicine "
    "professional_psychology public_relations security_studies sociology us_foreign_policy virology world_religions"
).split()

Converter = Callable[..., list[Question]]  # (rows, *, name, split, seed, options, place) -> questions


def _where(place: str, n: int, qid: str) -> str:
    return f"{place} row {n} (record {qid})"


def wanted_mmlu_subjects(options: Mapping[str, Any]) -> set[str] | None:
    """The MMLU subjects option `subjects` names (mmlu.wanted_subjects), or None when it names none (all)."""
    if options.get("subjects") is None:
        return None
    return set(wanted_subjects(options, list(MMLU_SUBJECTS), "mmlu", "the Hub dataset cais/mmlu"))


def mmlu_rows(
    rows: Iterable[dict[str, Any]], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    wanted = wanted_mmlu_subjects(options)
    counters: dict[str, int] = {}
    questions = []
    for n, row in enumerate(rows):
        subject = str(row.get("subject") or "")
        index = counters.get(subject, 0)
        counters[subject] = index + 1
        if wanted is not None and subject not in wanted:
            continue
        qid = f"mmlu/{subject}/{split}/{index}"
        questions.append(mmlu_question(row, qid=qid, place=_where(place, n, qid), subject=subject, split=split))
    return questions


def mmlu_redux_rows(
    rows: Iterable[dict[str, Any]],
    *,
    name: str,
    split: str,
    seed: int,
    options: Mapping[str, Any],
    place: str,
    subject: str,
) -> list[Question]:
    questions = []
    for n, row in enumerate(rows):
        qid = f"mmlu_redux/{subject}/{n}"
        questions.append(redux_question(row, qid=qid, place=_where(place, n, qid), subject=subject))
    if options.get("only_ok"):
        questions = [q for q in questions if q.metadata["error_type"] == "ok"]
    return questions


def labelled_rows(
    rows: Iterable[dict[str, Any]],
    *,
    name: str,
    split: str,
    seed: int,
    options: Mapping[str, Any],
    place: str,
    metadata_fields: tuple[str, ...] = (),
) -> list[Question]:
    """ARC / CommonsenseQA rows: id, question (the stem), choices {text, label}, answerKey."""
    return [
        labelled_question(row, place=_where(place, n, str(row.get("id"))), split=split, metadata_fields=metadata_fields)
        for n, row in enumerate(rows)
    ]


def truthfulqa_rows(task: str) -> Converter:
    def convert(
        rows: Iterable[dict[str, Any]], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
    ) -> list[Question]:
        shuffle = shuffle_option(options)
        questions = []
        for n, row in enumerate(rows):
            qid = f"{name}/v1/{n}"
            questions.append(
                truthfulqa_question(
                    row, task=task, qid=qid, place=_where(place, n, qid), version="v1", seed=seed, shuffle=shuffle
                )
            )
        return questions

    return convert


def medqa_4_rows(
    rows: Iterable[dict[str, Any]], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    return [
        medqa_question(row, qid=f"{name}/{n}", place=_where(place, n, f"{name}/{n}"), split=split)
        for n, row in enumerate(rows)
    ]


def medmcqa_rows(
    rows: Iterable[dict[str, Any]], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    return [
        medmcqa_question(row, qid=f"medmcqa/{n}", place=_where(place, n, f"medmcqa/{n}"), split=split)
        for n, row in enumerate(rows)
    ]


def hellaswag_rows(
    rows: Iterable[dict[str, Any]], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    return [
        hellaswag_question(row, qid=f"hellaswag/{n}", place=_where(place, n, f"hellaswag/{n}"), split=split)
        for n, row in enumerate(rows)
    ]


def winogrande_rows(
    rows: Iterable[dict[str, Any]], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    return [
        winogrande_question(row, qid=f"winogrande/{n}", place=_where(place, n, f"winogrande/{n}"), split=split)
        for n, row in enumerate(rows)
    ]
