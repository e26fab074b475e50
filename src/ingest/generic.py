"""`--format generic`: a long table of trials answered anywhere, one row per question x variant x repetition.
`python -m src.export` writes this format (without the answers); the answers come back as columns of the same
rows, or as an OpenAI-style batch output file (`--answers`) joined on `custom_id`.

CSV (lists and objects as JSON text, e.g. `[2, 0, 1, 3]`), JSONL, JSON (a list of objects) or parquet.

| column | required | meaning |
|---|---|---|
| `question_id` | yes | the question |
| `variant_id` | yes | the displayed option list, unique within the question (`original` for the file's order) |
| `option_order` | yes | original option index shown in each slot (-1 "None of the above", -2 a filler) |
| `correct_label` | yes | the label of the right answer as shown |
| `raw_output` / `parsed_label` | one of them | the model's text (re-parsed here) / a label read elsewhere (as given) |
| `repetition` | no (0) | 0..R-1 for the same prompt asked R times |
| `labels` | no (A, B, ...) | the labels shown, in slot order (Yes/No for `fmt` true_false) |
| `options` | no | the option texts shown, in slot order (to read answers that restate an option) |
| `variant_kind` | no | e.g. `shuffled`; default `original` for the order 0..n-1, else `shuffled` |
| `correct_option` | no | original index of the right answer (default: the option at `correct_label`) |
| `fmt`, `variant_level`, `perm_sets`, `asked_option`, `subject`, `question` | no | as in `src/core/records.py` |
| `prompt` / `prompt_hash` | no | the exact prompt (its hash is recorded) / the hash alone |
| `truncated` | no | the answer was cut by a token limit |
| `custom_id` | with `--answers` | the batch request the row's answer comes from |
| `model`, `benchmark`, `variant_set` | no | the run's, one value in the file; the command-line flags override them |
| `temperature`, `seed`, `scoring` | no | as the row above |
| `template_hash` | no | the prompt template's hash (logged as the run's `prompt_hash` tag, as a native run) |

A row with both `raw_output` and `parsed_label` is read from its text; `--labels-from source` takes the label.

A batch output file (OpenAI Batch API, `vllm run-batch`) holds one JSON object per request: `custom_id`,
`response.body.choices[i]` with `message.content` (chat) or `text` (completions) and `finish_reason`
("length" = truncated), or `error`. The rows of one `custom_id` take its choices in repetition order; one
choice for several rows (a greedy answer asked once) is copied to each, as a native run copies its greedy
answer to every repetition.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from src.answering.items import Answer, Item
from src.common.errors import UserError
from src.core.questions import Question

from ..answer_formats import FORMATS
from ..benchmarks.files import iter_jsonl, plain, read_text
from ..core.variant import LETTERS, TF_LABELS, Variant
from .common import Ingested, Trial, answer_of, is_missing, json_cell, table_rows

SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")
REQUIRED = ("question_id", "variant_id", "option_order", "correct_label")
RUN_COLUMNS = ("model", "benchmark", "variant_set", "temperature", "seed", "scoring")


def _int_or_none(value: Any, place: str, column: str) -> int | None:
    if is_missing(value):
        return None
    try:
        return int(float(value))
    except (TypeError, ValueError):
        raise UserError(f"{place}: column {column!r} is not an integer ({value!r}); fix the cell") from None


def _bool_or_none(value: Any) -> bool | None:
    if is_missing(value):
        return None
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _list(value: Any, place: str, column: str) -> list[Any] | None:
    if is_missing(value):
        return None
    value = json_cell(value, place, column)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, str):  # "0 1 2" or "0,1,2"
        return [part for part in value.replace(",", " ").split()]
    raise UserError(f"{place}: column {column!r} is not a list ({str(value)[:60]!r}); write it as a JSON list")


def read_batch_output(file: Path) -> dict[str, list[tuple[str, bool | None]]]:
    """custom_id -> [(text, truncated), ...] (one per choice) of an OpenAI-style batch output file."""
    out: dict[str, list[tuple[str, bool | None]]] = {}
    for line, record in iter_jsonl(file, read_text(file, strict=True)):
        place = f"{file} line {line}"
        custom_id = record.get("custom_id")
        if is_missing(custom_id):
            raise UserError(f"{place}: no custom_id; a batch output line names the request it answers")
        if record.get("error"):
            raise UserError(
                f"{place} (request {custom_id}): the request failed ({str(record['error'])[:100]}); "
                "ask it again and merge the answer, or drop its rows"
            )
        body = (record.get("response") or {}).get("body") or {}
        status = (record.get("response") or {}).get("status_code", 200)
        choices = body.get("choices")
        if status != 200 or not isinstance(choices, list) or not choices:
            raise UserError(f"{place} (request {custom_id}): no answer (status {status}, no choices); ask it again")
        texts = []
        for choice in sorted(choices, key=lambda c: c.get("index", 0)):
            message = choice.get("message") or {}
            text = message.get("content") if "message" in choice else choice.get("text")
            reason = choice.get("finish_reason")
            texts.append(
                (
                    "" if text is None else str(text),
                    True if reason == "length" else False if reason in ("stop", "eos", "end_turn") else None,
                )
            )
        if str(custom_id) in out:
            raise UserError(f"{place}: request {custom_id} is answered twice; keep one answer per custom_id")
        out[str(custom_id)] = texts
    return out


def _run_settings(file: Path, rows: list[tuple[str, dict[str, Any]]], overrides: dict[str, Any]) -> dict[str, Any]:
    """The run's model, benchmark, variant set, temperature, seed and scoring: one value per file (RUN_COLUMNS),
    unless the command line gives it; a default where neither does (model and benchmark have none)."""
    run: dict[str, Any] = {}
    for column in RUN_COLUMNS:  # one value per file, unless the command line gives it
        if overrides.get(column) is not None:
            run[column] = overrides[column]
            continue
        values = {str(r[column]) for _, r in rows if column in r and not is_missing(r[column])}
        if len(values) > 1:
            raise UserError(
                f"{file}: column {column!r} takes {len(values)} values ({', '.join(sorted(values)[:3])}); "
                f"one run holds one {column}: split the file or give --{column.replace('_', '-')}"
            )
        run[column] = values.pop() if values else None
    defaults = {
        "model": None,
        "benchmark": None,
        "variant_set": "original",
        "temperature": 0.0,
        "seed": 0,
        "scoring": "generate",
    }
    for column in ("model", "benchmark"):
        if run[column] is None:
            raise UserError(f"{file}: no {column} column; give --{column} NAME")
    run = {k: (defaults[k] if v is None else v) for k, v in run.items()}
    run["temperature"], run["seed"] = float(run["temperature"]), int(float(run["seed"]))
    return run


def _shown(place: str, row: dict[str, Any], fmt: str) -> tuple[tuple[int, ...], tuple[str, ...], tuple[str, ...]]:
    """(option_order, labels, option texts) of the row's displayed list, checked against each other."""
    order = tuple(
        _int_or_none(v, place, "option_order") for v in _list(row.get("option_order"), place, "option_order") or []
    )
    if not order or any(v is None for v in order):
        raise UserError(f"{place}: option_order is empty; give the original option index shown in each slot")
    given = _list(row.get("labels"), place, "labels")
    labels = (
        tuple(str(x) for x in given) if given else (TF_LABELS if fmt == "true_false" else tuple(LETTERS[: len(order)]))
    )
    options = _list(row.get("options"), place, "options")
    texts = tuple(str(x) for x in options) if options else ("",) * len(order)
    if fmt != "true_false" and (len(labels) != len(order) or len(texts) != len(order)):
        raise UserError(
            f"{place}: {len(order)} slots in option_order but {len(labels)} labels and {len(texts)} "
            "options; give one label and one text per shown option"
        )
    return order, labels, texts  # type: ignore[return-value]  # order: no None left (checked above)


def _item_of(place: str, row: dict[str, Any]) -> tuple[Item, str]:
    """The row's question, variant and request, and its place named with its question and variant (for errors)."""
    qid, vid = str(row.get("question_id", "")).strip(), str(row.get("variant_id", "")).strip()
    if not qid or not vid or qid == "nan" or vid == "nan":
        raise UserError(f"{place}: empty question_id or variant_id; every row names its question and variant")
    place = f"{place} (question {qid}, variant {vid})"
    fmt = "mcq" if is_missing(row.get("fmt")) else str(row["fmt"]).strip()
    if fmt not in FORMATS:
        raise UserError(f"{place}: fmt {fmt!r} is not an answer format; use one of {', '.join(FORMATS)}")
    order, labels, texts = _shown(place, row, fmt)
    correct_label = str(row.get("correct_label", "")).strip()
    if correct_label not in labels:
        raise UserError(
            f"{place}: correct_label {correct_label!r} is not one of the labels {', '.join(labels)}; fix the row"
        )
    slot = labels.index(correct_label)
    correct_option = _int_or_none(row.get("correct_option"), place, "correct_option")
    if correct_option is None:
        if fmt == "true_false":
            raise UserError(f"{place}: a true_false row needs correct_option (the question's right option)")
        correct_option = order[slot]
    kind = row.get("variant_kind")
    kind = ("original" if order == tuple(range(len(order))) else "shuffled") if is_missing(kind) else str(kind)
    memberships = tuple(
        (name, int(pos))
        for name, _, pos in (str(m).rpartition(":") for m in (_list(row.get("perm_sets"), place, "perm_sets") or []))
    )
    variant = Variant(
        question_id=qid,
        kind=kind,
        variant_id=vid,
        option_order=order,
        option_texts=texts,
        correct_slot=slot,
        fmt=fmt,
        level=_int_or_none(row.get("variant_level"), place, "variant_level"),
        memberships=memberships,
        asked_option=_int_or_none(row.get("asked_option"), place, "asked_option"),
    )
    question = Question(
        id=qid,
        question="" if is_missing(row.get("question")) else str(row["question"]),
        options=(),
        answer=correct_option,
        subject=None if is_missing(row.get("subject")) else str(row["subject"]),
    )
    fields = dict(
        prompt="" if is_missing(row.get("prompt")) else str(row["prompt"]),
        labels=labels,
        options=FORMATS[fmt].options(variant),
        seed=_int_or_none(row.get("trial_seed"), place, "trial_seed") or 0,
        key=f"{qid}/{vid}",
    )
    request = FORMATS[fmt].request_of(**fields)  # as a native run makes it (mcq: a plain Request)
    return Item(question, variant, request), place


def _row_answer(place: str, row: dict[str, Any], item: Item, labels_from: str) -> Answer:
    """The answer a row gives: its raw text (parsed) or its label; an empty raw_output is INVALID."""
    raw = row.get("raw_output")
    if is_missing(raw) and is_missing(row.get("parsed_label")):
        if "raw_output" not in row:
            raise UserError(
                f"{place}: neither raw_output nor parsed_label; every row needs the model's answer "
                "(or give the batch output file with --answers)"
            )
        raw = ""  # an empty answer: INVALID (invalid_empty)
    elif is_missing(raw):
        raw = None  # an empty CSV cell beside a label: the label is the answer
    return answer_of(
        item.variant.fmt,
        item.request.labels,
        item.request.options,
        raw=raw,
        label=row.get("parsed_label"),
        truncated=_bool_or_none(row.get("truncated")),
        labels_from=labels_from,
    )


def _join_batch(
    trials: list[Trial],
    by_id: dict[str, list[tuple[int, dict[str, Any]]]],
    batch: dict[str, list[tuple[str, bool | None]]],
    answers: Path,
) -> None:
    """Each trial waiting for a batch answer (`by_id`: custom_id -> [(trial index, row)]) gets it, in place: the
    choices of a custom_id in repetition order, or its one choice copied to each."""
    for custom_id, members in by_id.items():
        if custom_id not in batch:
            raise UserError(
                f"{answers}: no answer to request {custom_id} ({len(by_id) - len(set(by_id) & set(batch))} "
                f"of {len(by_id)} requests unanswered); run the missing requests and add their lines"
            )
        texts = batch[custom_id]
        members = sorted(members, key=lambda m: trials[m[0]].repetition)
        if len(texts) not in (1, len(members)):
            raise UserError(
                f"{answers}: request {custom_id} has {len(texts)} choices for {len(members)} rows; "
                "give one choice per repetition (or one for all)"
            )
        for k, (index, _) in enumerate(members):
            text, truncated = texts[k if len(texts) > 1 else 0]
            t = trials[index]
            request = t.item.request
            answer = answer_of(
                t.item.variant.fmt, request.labels, request.options, raw=text, truncated=truncated, labels_from="raw"
            )
            trials[index] = Trial(t.item, answer, t.repetition, t.prompt_hash)


def _params_and_tags(rows: list[tuple[str, dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, str]]:
    """The run's params (prompt name, few-shot, repetitions, limit) and its prompt_hash tag, where the file holds
    one value of each."""
    tags = {}
    hashes = {str(r["template_hash"]) for _, r in rows if not is_missing(r.get("template_hash"))}
    if len(hashes) == 1:
        tags["prompt_hash"] = hashes.pop()
    params = {}
    for column, key in (
        ("prompt_name", "prompt.name"),
        ("fewshot", "fewshot"),
        ("repetitions", "repetitions"),
        ("limit", "limit"),
    ):
        values = {json.dumps(plain(r[column])) for _, r in rows if column in r and not is_missing(r[column])}
        if len(values) == 1:
            params[key] = json.loads(values.pop())
    return params, tags


def read_generic(file: Path, *, answers: Path | None, overrides: dict[str, Any], labels_from: str) -> Ingested:
    rows = list(table_rows(file, suffixes=SUFFIXES))
    if not rows:
        raise UserError(f"{file}: no rows; the generic format has one row per trial")
    missing = [c for c in REQUIRED if c not in rows[0][1]]
    if missing:
        raise UserError(
            f"{rows[0][0]}: no column {', '.join(repr(c) for c in missing)}; the generic format needs "
            f"{', '.join(REQUIRED)} and raw_output or parsed_label (src/ingest/generic.py)"
        )
    batch = read_batch_output(answers) if answers is not None else None
    run = _run_settings(file, rows, overrides)
    by_id: dict[str, list[tuple[int, dict[str, Any]]]] = {}  # custom_id -> [(row index, row)], for the batch join
    trials: list[Trial] = []
    for row_place, row in rows:
        item, place = _item_of(row_place, row)
        repetition = _int_or_none(row.get("repetition"), place, "repetition") or 0
        given_hash = None if item.request.prompt or is_missing(row.get("prompt_hash")) else str(row["prompt_hash"])
        if answers is not None:
            custom_id = row.get("custom_id")
            if is_missing(custom_id):
                raise UserError(f"{place}: no custom_id, so no answer in {answers.name} can be joined to this row")
            by_id.setdefault(str(custom_id), []).append((len(trials), row))
            waiting = answer_of(item.variant.fmt, item.request.labels, item.request.options, label=None)
            trials.append(Trial(item, waiting, repetition, given_hash))
            continue
        trials.append(Trial(item, _row_answer(place, row, item, labels_from), repetition, given_hash))
    if batch is not None and answers is not None:
        _join_batch(trials, by_id, batch, answers)
    params, tags = _params_and_tags(rows)
    return Ingested(trials=trials, run_info={k: run[k] for k in RUN_COLUMNS}, params=params, tags=tags)
