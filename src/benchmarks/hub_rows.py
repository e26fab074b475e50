"""The converters of the Hub's rows (dicts as `datasets` yields them) into `Question`s, one per benchmark.

Each question is built with the raw loaders' `checked_question` (the same cleaning and checks), with the same ids
where the Hub keeps what they are made of, and the same options (`subjects`, `only_ok`, `shuffle`); the ids and
the differences from the raw files are listed in `hub.py`. Questions come in the Hub's row order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from src.common.errors import UserError
from src.core.questions import Question

from .medical import medqa_question
from .mmlu import normalise_error_type, wanted_subjects
from .position import seeded_shuffle
from .validate import answer_from_label, checked_question, record_error

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
        questions.append(
            checked_question(
                f"{place} row {n} (record {qid})",
                id=qid,
                question=row.get("question"),
                options=list(row.get("choices") or ()),
                answer=row.get("answer"),
                subject=subject,
                split=split,
            )
        )
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
        raw_type = str(row.get("error_type") or "")
        metadata = {
            "error_type": normalise_error_type(raw_type) or None,
            "error_type_raw": raw_type,
            **{k: str(row[k]) for k in ("source", "correct_answer", "potential_reason") if row.get(k)},
        }
        answer = row.get("answer")
        if isinstance(answer, str) and answer.strip().isdigit():
            answer = int(answer)
        questions.append(
            checked_question(
                f"{place} row {n} (record {qid})",
                id=qid,
                question=row.get("question"),
                options=list(row.get("choices") or ()),
                answer=answer,
                subject=subject,
                metadata=metadata,
            )
        )
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
    questions = []
    for n, row in enumerate(rows):
        qid = str(row.get("id"))
        where = f"{place} row {n} (record {qid})"
        choices = row.get("choices")
        if not isinstance(choices, dict):
            raise record_error(where, "'choices' is not an object with 'text' and 'label' lists")
        labels = [str(label) for label in choices.get("label") or ()]
        answer = answer_from_label(row.get("answerKey"), labels, where)
        metadata: dict[str, Any] = {"labels": tuple(labels)}
        metadata.update({k: row[k] for k in metadata_fields if k in row})
        questions.append(
            checked_question(
                where,
                id=qid,
                question=row.get("question"),
                options=list(choices.get("text") or ()),
                answer=answer,
                split=split,
                metadata=metadata,
            )
        )
    return questions


def truthfulqa_rows(task: str) -> Converter:
    def convert(
        rows: Iterable[dict[str, Any]], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
    ) -> list[Question]:
        shuffle = options.get("shuffle", True)
        if not isinstance(shuffle, bool):
            raise UserError(
                f"config key benchmark.shuffle: {shuffle!r} is not true or false; true (the default) "
                "shuffles the options with the run's seed, false keeps the file order"
            )
        questions = []
        for n, row in enumerate(rows):
            qid = f"{name}/v1/{n}"
            where = f"{place} row {n} (record {qid})"
            targets = row.get(f"{task}_targets")
            if not isinstance(targets, dict):
                raise record_error(where, f"the record has no {task}_targets object")
            pairs = [
                (t, m) for t, m in zip(targets.get("choices") or (), targets.get("labels") or ()) if str(t).strip()
            ]
            true = [i for i, (_, mark) in enumerate(pairs) if mark == 1]
            if task == "mc1" and len(true) > 1:
                raise record_error(where, f"mc1_targets marks {len(true)} answers true; mc1 needs exactly one")
            metadata: dict[str, Any] = {"version": "v1"}
            if task == "mc2":
                metadata["correct_set"] = tuple(true)
            question = checked_question(
                where,
                id=qid,
                question=row.get("question"),
                options=[t for t, _ in pairs],
                answer=true[0] if true else None,
                metadata=metadata,
            )
            questions.append(seeded_shuffle(question, seed) if shuffle else question)
        return questions

    return convert


def medqa_4_rows(
    rows: Iterable[dict[str, Any]], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    return [
        medqa_question(row, qid=f"{name}/{n}", place=f"{place} row {n} (record {name}/{n})", split=split)
        for n, row in enumerate(rows)
    ]


def medmcqa_rows(
    rows: Iterable[dict[str, Any]], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    questions = []
    for n, row in enumerate(rows):
        qid = f"medmcqa/{n}"
        metadata = {k: row[k] for k in ("id", "topic_name", "choice_type") if row.get(k) is not None}
        questions.append(
            checked_question(
                f"{place} row {n} (record {qid})",
                id=qid,
                question=row.get("question"),
                options=[row.get(k) for k in ("opa", "opb", "opc", "opd")],
                answer=row.get("cop"),
                subject=row.get("subject_name"),
                split=split,
                metadata=metadata,
            )
        )
    return questions


def lm_eval_clean(text: str) -> str:
    """HellaSwag text as lm-eval cleans it: " [title]" -> ". ", other [markers] removed, double spaces single.

    >>> lm_eval_clean("Hello [header] world [title]Next  step")
    'Hello world. Next step'
    """
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def hellaswag_rows(
    rows: Iterable[dict[str, Any]], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    questions = []
    for n, row in enumerate(rows):
        qid = f"hellaswag/{n}"
        label = str(row.get("activity_label") or "")
        ctx = f"{row.get('ctx_a') or ''} {str(row.get('ctx_b') or '').capitalize()}"
        gold = str(row.get("label", "")).strip()
        where = f"{place} row {n} (record {qid})"
        if not gold.isdigit():
            raise record_error(where, f"label {gold!r} is not a number 0-3")
        questions.append(
            checked_question(
                where,
                id=qid,
                question=lm_eval_clean(f"{label}: {ctx}"),
                options=[lm_eval_clean(e) for e in row.get("endings") or ()],
                answer=int(gold),
                subject=label or None,
                split=split,
                metadata={"ind": row.get("ind")} if row.get("ind") is not None else None,
            )
        )
    return questions


def winogrande_rows(
    rows: Iterable[dict[str, Any]], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    questions = []
    for n, row in enumerate(rows):
        qid = f"winogrande/{n}"
        where = f"{place} row {n} (record {qid})"
        raw = str(row.get("answer") or "").strip()
        if raw not in ("1", "2"):
            raise record_error(where, f"answer {raw!r} is not 1 or 2")
        questions.append(
            checked_question(
                where,
                id=qid,
                question=row.get("sentence"),
                options=(row.get("option1"), row.get("option2")),
                answer=int(raw) - 1,
                split=split,
            )
        )
    return questions
