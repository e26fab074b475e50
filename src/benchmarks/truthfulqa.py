"""TruthfulQA multiple choice (mc_task.json): `truthfulqa_mc1` and `truthfulqa_mc2`.

Option `version`: "v1" (default; `{data_dir}/truthfulqa/v1`, 817 questions, the set in HF
`truthful_qa` and lm-eval) or "2025" (`{data_dir}/truthfulqa`, 790). `benchmark.path` may name
an mc_task.json or the folder holding it.

- mc1: the mc1_targets, exactly one marked 1; `answer` is its index.
- mc2: a `Question` has one answer index, but mc2 has several true answers. Here options are
  all mc2_targets in file order, `answer` is the first true one, and `metadata["correct_set"]`
  holds every true index (the mc2 score needs the set; accuracy on `answer` alone is mc1-like).

The 2025 file holds empty answer strings ("" from a trailing ";" in TruthfulQA.csv: 17 mc1 and
22 mc2 questions, 5 of them marked true in mc2); they are dropped, counted in
`metadata["empty_options_dropped"]`. v1 has none.

In the files the true answers always come first (mc1: answer is always option 0), so by default
(option `shuffle`, default true) the options are permuted per question, seeded by (the run's
seed, question id) (`position.seeded_shuffle`), keeping `metadata["original_order"]` (new
position -> file position): with v1 mc1 and seed 0 the answer is in slot A for 20.7% of the
questions, near the 22.3% a uniformly random order gives (the mean of 1/n_options). `shuffle:
false` keeps the file order (then `load_benchmark` warns that the answer position is fixed).
Ids: `truthfulqa_mc1/v1/<index>`. Subject: the Category from TruthfulQA.csv beside the JSON,
matched by question text (None when that file is absent); `metadata["type"]` is its Type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from src.common.errors import UserError
from src.core.questions import Question

from .files import iter_csv, load_json, read_text, resolve_path
from .position import seeded_shuffle
from .validate import checked_question, choose_split, record_error, where

VERSIONS = {"v1": "truthfulqa/v1", "2025": "truthfulqa"}


def _categories(csv_file: Path) -> dict[str, tuple[str, str]]:
    """Stripped question text -> (Category, Type) from TruthfulQA.csv, when present."""
    if not csv_file.is_file():
        return {}
    rows = iter_csv(csv_file, read_text(csv_file))
    _, header = next(rows, (1, []))
    if not {"Question", "Category", "Type"} <= set(header):
        return {}
    col = {name: header.index(name) for name in ("Question", "Category", "Type")}
    return {
        cells[col["Question"]].strip(): (cells[col["Category"]], cells[col["Type"]])
        for _, cells in rows
        if len(cells) == len(header)
    }


shuffled = seeded_shuffle  # the name this module used before the rule moved to position.py


def shuffle_option(options: Mapping[str, Any]) -> bool:
    """Option `shuffle` (default true), or the one-line error for a value that is not true or false."""
    shuffle = options.get("shuffle", True)
    if not isinstance(shuffle, bool):
        raise UserError(
            f"config key benchmark.shuffle: {shuffle!r} is not true or false; true (the default) "
            "shuffles the options with the run's seed, false keeps the file order"
        )
    return shuffle


def truthfulqa_question(
    row: Mapping[str, Any],
    *,
    task: str,
    qid: str,
    place: str,
    version: str,
    seed: int,
    shuffle: bool,
    subject: str | None = None,
    kind: str | None = None,
) -> Question:
    """One TruthfulQA row in the Hub's form (`question`, `<task>_targets`: {`choices`, `labels`} lists) as a
    Question, shuffled with `seed` when `shuffle`; the file loader's rule and the Hub converter's. `subject` and
    `kind` (the Category and Type) only the files have."""
    targets = row.get(f"{task}_targets")
    if not isinstance(targets, Mapping):
        raise record_error(place, f"the record has no {task}_targets object")
    choices, labels = list(targets.get("choices") or ()), list(targets.get("labels") or ())
    pairs = [(text, mark) for text, mark in zip(choices, labels) if str(text).strip()]
    true = [i for i, (_, mark) in enumerate(pairs) if mark == 1]
    if task == "mc1" and len(true) > 1:
        raise record_error(place, f"mc1_targets marks {len(true)} answers true; mc1 needs exactly one")
    metadata: dict[str, Any] = {"version": version}
    if len(pairs) < len(choices):
        metadata["empty_options_dropped"] = len(choices) - len(pairs)
    if kind is not None:
        metadata["type"] = kind
    if task == "mc2":
        metadata["correct_set"] = tuple(true)
    question = checked_question(
        place,
        id=qid,
        question=row.get("question"),
        options=[text for text, _ in pairs],
        answer=true[0] if true else None,
        subject=subject,
        metadata=metadata,
    )
    return seeded_shuffle(question, seed) if shuffle else question


def truthfulqa_loader(task: str) -> Callable[..., list[Question]]:
    """The loader for `truthfulqa_mc1` (task "mc1") or `truthfulqa_mc2` (task "mc2")."""
    name = f"truthfulqa_{task}"

    def load(
        *, path: str | None, data_dir: str, split: str | None, seed: int, options: dict[str, Any]
    ) -> list[Question]:
        choose_split(split, ("test",), name)
        version = str(options.get("version", "v1"))
        shuffle = shuffle_option(options)
        if version not in VERSIONS:
            raise UserError(
                f"config key benchmark.version: {name} has no version {version!r}; choose one of {', '.join(VERSIONS)}"
            )
        file = resolve_path(path, data_dir, f"{VERSIONS[version]}/mc_task.json", kind="file or folder")
        if file.is_dir():
            file = resolve_path(file / "mc_task.json", data_dir, None)
        records = load_json(file, read_text(file))
        if not isinstance(records, list):
            raise UserError(
                f"{file}: expected a JSON list of questions, got {type(records).__name__}; "
                "point benchmark.path at TruthfulQA's mc_task.json"
            )
        categories = _categories(file.parent / "TruthfulQA.csv")
        questions = []
        for index, record in enumerate(records):
            qid = f"{name}/{version}/{index}"
            place = where(file, record=qid)
            targets = record.get(f"{task}_targets") if isinstance(record, dict) else None
            if not isinstance(targets, dict):
                raise record_error(place, f"the record has no {task}_targets object")
            category, kind = categories.get(str(record.get("question", "")).strip(), (None, None))
            row = {
                "question": record.get("question"),
                f"{task}_targets": {"choices": list(targets), "labels": list(targets.values())},
            }
            questions.append(
                truthfulqa_question(
                    row,
                    task=task,
                    qid=qid,
                    place=place,
                    version=version,
                    seed=seed,
                    shuffle=shuffle,
                    subject=category,
                    kind=kind,
                )
            )
        return questions

    load.__name__ = f"load_{name}"
    return load
