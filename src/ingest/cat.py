"""`--format cat`: the CoRA authors' expanded-evaluation tables (github IBM/cat, e.g.
`data/MedQA/MedQA_wOutputs_Mistral-7B-Instruct_0_merged.xlsx`), as .xlsx or .csv as released.

Each row is a question: `question`, `answer` (the right option's text), `options` (a dict of label -> text, as
JSON or a Python literal) and `expanded_evaluation`, a JSON object of answer lists (`standard_MC`,
`standard_MC_shuffled`, `standard_MC_wNOTA`, `decoupled_MC`, ...), each answer an object
`{correct_choice, choices, model_choice, output}`: the options shown (label -> text), the right label, the
label their parser read (the first alphanumeric character) and the raw text.

- `--set NAME[,NAME]` picks the lists (default `standard_MC`); `--first N` takes the first N answers of each.
- `--as repetitions` (default): the answers of a list are repetitions 0..N-1 of one variant (kind `original`
  for `standard_MC`, whose answers all show the original order; otherwise the CoRA kind of the list, e.g.
  `shuffled`, each answer keeping the order it showed). `--as variants`: answer i is variant `<kind>_<i>`
  (`original` for the first of `standard_MC`), repetition 0.
- Option identity comes from `choices`: each shown text is matched to the question's `options` (the original
  order, A = option 0); "None of the above" is NOTA (-1). The right option is the one whose text is `answer`,
  and `correct_choice` must show it.
- Answers are re-parsed from `output` with this tool's parser (`parse_rule` says which rule read each);
  `--labels-from source` takes `model_choice` instead (`parse_rule` `source_label`). The released outputs were
  cut at 3 new tokens, but the file does not say which were cut: `truncated` is left unknown.
- Question ids are `<benchmark>/<row number from 0>`, the ids this tool's MedQA loader gives the same questions
  (the released MedQA files keep the test file's order). The prompt is not in the file: `prompt_hash` is empty.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from src.answering.items import Item
from src.common.errors import UserError
from src.core.questions import Question

from ..backends.base import Request
from ..core.variant import NOTA, NOTA_TEXT, Variant
from .common import Ingested, Trial, answer_of, is_missing, json_cell, table_rows

SUFFIXES = (".xlsx", ".csv")
# The CoRA authors' list names -> this tool's CoRA variant kinds (src/variants/cora.py)
KINDS = {
    "standard_MC": "original",
    "standard_MC_shuffled": "shuffled",
    "standard_MC_wNOTA": "nota",
    "standard_MC_wNOTA_shuffled": "nota_shuffled",
    "decoupled_MC": "decoupled",
    "decoupled_MC_shuffled": "decoupled_shuffled",
    "decoupled_MC_wNOTA": "decoupled_nota",
    "decoupled_MC_wNOTA_shuffled": "decoupled_nota_shuffled",
}
MODES = ("repetitions", "variants")


def _norm(text: Any) -> str:
    return " ".join(str(text).split())


def _options(value: Any, place: str) -> tuple[list[str], list[str]]:
    """(labels, texts) of the question's `options` cell, in the file's order (the original order)."""
    options = json_cell(value, place, "options")
    if isinstance(options, dict) and options:
        return [str(k) for k in options], [str(v) for v in options.values()]
    if isinstance(options, list) and options:
        return [chr(ord("A") + i) for i in range(len(options))], [str(v) for v in options]
    raise UserError(f"{place}: column 'options' is not a dict of label -> text ({str(value)[:60]!r}); fix the cell")


def _identity(texts: Sequence[str], shown: Sequence[str], place: str) -> tuple[int, ...]:
    """The original option index behind each shown text (NOTA -1); duplicates are matched in order."""
    unused: dict[str, list[int]] = {}
    for i, text in enumerate(texts):
        unused.setdefault(_norm(text), []).append(i)
    order = []
    for text in shown:
        key = _norm(text)
        if unused.get(key):
            order.append(unused[key].pop(0))
        elif key.casefold() == NOTA_TEXT.casefold():
            order.append(NOTA)
        else:
            raise UserError(
                f"{place}: shown option {str(text)[:60]!r} is none of the question's options; "
                "the answer list does not belong to this question"
            )
    return tuple(order)


def _question_of(place: str, row: dict[str, Any], qid: str) -> tuple[Question, list[str]]:
    """The row's question and its option texts in the file's order, checked."""
    missing = [c for c in ("question", "answer", "options", "expanded_evaluation") if c not in row]
    if missing:
        raise UserError(
            f"{place}: no column {', '.join(repr(c) for c in missing)}; a CoRA expanded-evaluation "
            "table has question, answer, options and expanded_evaluation"
        )
    if any(is_missing(row[c]) for c in ("answer", "options", "expanded_evaluation")):
        raise UserError(f"{place}: empty answer, options or expanded_evaluation cell; fix the row or drop it")
    _, texts = _options(row["options"], place)
    answer = [i for i, text in enumerate(texts) if _norm(text) == _norm(row["answer"])]
    if not answer:
        raise UserError(f"{place}: the answer {str(row['answer'])[:60]!r} is none of the options; fix the row")
    question = Question(
        id=qid,
        question="" if is_missing(row["question"]) else str(row["question"]),
        options=tuple(texts),
        answer=answer[0],
    )
    return question, texts


def _answer_lists(place: str, row: dict[str, Any]) -> dict[str, Any]:
    """The row's expanded_evaluation: list name -> answers."""
    try:
        lists = (
            json.loads(row["expanded_evaluation"])
            if isinstance(row["expanded_evaluation"], str)
            else row["expanded_evaluation"]
        )
    except json.JSONDecodeError as err:
        raise UserError(
            f"{place}: expanded_evaluation is not valid JSON ({err.msg} at column {err.colno}); "
            "fix the cell (a cell cut at the spreadsheet's 32,767-character limit?)"
        ) from None
    if not isinstance(lists, dict):
        raise UserError(f"{place}: expanded_evaluation is not a JSON object of answer lists; fix the cell")
    return lists


def _answer_list(place: str, lists: dict[str, Any], name: str, first: int | None) -> list[Any]:
    """The answers of list `name` (its first `first`), checked."""
    if name not in lists or not isinstance(lists[name], list):
        raise UserError(
            f"{place}: expanded_evaluation has no list {name!r} (it has "
            f"{', '.join(sorted(lists)) or 'none'}); choose --set from those"
        )
    answers: list[Any] = lists[name]
    if first is not None and len(answers) < first:
        raise UserError(f"{place}: list {name} has {len(answers)} answers, --first asks for {first}; lower --first")
    return answers[:first] if first is not None else answers


def _entry_trial(
    where: str,
    entry: Any,
    *,
    name: str,
    i: int,
    mode: str,
    question: Question,
    texts: list[str],
    answer_text: str,
    labels_from: str,
) -> Trial:
    """The trial of answer `i` of list `name` (`entry`: its choices, correct choice and output or choice)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("choices"), dict) or "correct_choice" not in entry:
        raise UserError(f"{where}: an answer needs choices (label -> text) and correct_choice; fix it")
    if "output" not in entry and "model_choice" not in entry:
        raise UserError(f"{where}: the answer has neither output nor model_choice: no answer to ingest")
    labels = tuple(str(k) for k in entry["choices"])
    shown = tuple(str(v) for v in entry["choices"].values())
    order = _identity(texts, shown, where)
    correct = str(entry["correct_choice"]).strip()
    if correct not in labels:
        raise UserError(
            f"{where}: correct_choice {correct!r} is not one of the labels shown ({', '.join(labels)}); fix the answer"
        )
    slot = labels.index(correct)
    if order[slot] != question.answer:
        raise UserError(
            f"{where}: correct_choice {correct} shows {shown[slot][:60]!r}, not the answer "
            f"{answer_text[:60]!r}; fix the answer"
        )
    kind = KINDS.get(name, name)
    if kind == "original" and order != tuple(range(len(texts))):
        kind = "shuffled"  # a standard list whose order is not the file's: not the original order
    if mode == "repetitions":
        variant_id, repetition = kind, i
    else:
        variant_id = "original" if kind == "original" and i == 0 else f"{kind}_{i}"
        repetition = 0
    variant = Variant(
        question_id=question.id,
        kind=kind,
        variant_id=variant_id,
        option_order=order,
        option_texts=shown,
        correct_slot=slot,
    )
    request = Request(prompt="", labels=labels, options=shown, seed=0, key=f"{question.id}/{variant_id}")
    raw, label = entry.get("output"), entry.get("model_choice")
    ans = answer_of("mcq", labels, shown, raw=raw, label=label, labels_from=labels_from)
    return Trial(Item(question, variant, request), ans, repetition)


def _reading_differs(entry: dict[str, Any], trial: Trial) -> str:
    """'' when this tool's reading of the raw answer gives the file's model_choice, else the example to show."""
    labels, ans = trial.item.request.labels, trial.answer
    theirs = str(entry.get("model_choice") or "").strip()
    ours = labels[ans.slot] if ans.slot is not None else ""
    if ours == (theirs if theirs in labels else ""):
        return ""
    return f"{str(entry.get('output'))[:40]!r}: file {theirs or 'none'}, ours {ours or 'INVALID'} ({ans.parse_rule})"


def read_cat(
    file: Path,
    *,
    sets: Sequence[str],
    first: int | None,
    mode: str,
    model: str,
    benchmark: str,
    temperature: float,
    seed: int,
    labels_from: str,
) -> Ingested:
    if mode not in MODES:
        raise UserError(f"--as {mode}: choose one of {', '.join(MODES)}")
    if first is not None and first < 1:
        raise UserError(f"--first {first}: give a positive number of answers per list")
    trials: list[Trial] = []
    differ = parsed = 0
    example = ""
    for n, (row_place, row) in enumerate(table_rows(file, suffixes=SUFFIXES)):
        qid = f"{benchmark}/{n}"
        place = f"{row_place} (question {qid})"
        question, texts = _question_of(place, row, qid)
        lists = _answer_lists(place, row)
        for name in sets:
            for i, entry in enumerate(_answer_list(place, lists, name, first)):
                where, answer_text = f"{place} {name}[{i}]", str(row["answer"])
                trial = _entry_trial(
                    where,
                    entry,
                    name=name,
                    i=i,
                    mode=mode,
                    question=question,
                    texts=texts,
                    answer_text=answer_text,
                    labels_from=labels_from,
                )
                if labels_from == "raw" and entry.get("output") is not None:
                    parsed += 1
                    if difference := _reading_differs(entry, trial):
                        differ += 1
                        example = example or difference
                trials.append(trial)
    if not trials:
        raise UserError(f"{file}: no rows; a CoRA expanded-evaluation table has one row per question")
    notes = []
    if parsed:
        notes.append(
            f"re-parsed {parsed} raw answers with this tool's parser; {differ} read differently from the "
            f"file's model_choice" + (f", e.g. {example}" if example else "")
        )
    variant_set = "original" if list(sets) == ["standard_MC"] else "cat:" + ",".join(sets)
    return Ingested(
        trials=trials,
        run_info={
            "model": model,
            "benchmark": benchmark,
            "variant_set": variant_set,
            "temperature": float(temperature),
            "seed": int(seed),
            "scoring": "generate",
        },
        notes=notes,
    )
