"""`--format lm_eval`: lm-evaluation-harness `--log_samples` files (`samples_<task>_<date>.jsonl`, one object
per document: `doc_id`, `doc`, `target`, `arguments`, `resps`, `filtered_resps`, metrics such as `acc`).

- Multiple-choice tasks (one loglikelihood request per option): the answer is the option with the highest
  log-likelihood, lm-eval's `acc`. When the continuations are the labels themselves (" A", " B", ... after a
  prompt that lists the options, as lm-eval's MMLU), the records are `scoring=logprob` (`label_probs` the
  softmax over the labels, `label_mass` their total probability); otherwise `scoring=cloze` (`option_loglik`,
  and per byte `option_loglik_norm`, as a native cloze run).
- Generation tasks (`generate_until`): each response in `resps` (several with lm-eval's `repeats`) is re-parsed
  with this tool's parser against the options in `doc` (`choices` as a list or as {text, label}, `options`, or
  `endings`); the target is an option index, a label or an option's text.

Every document is asked in its original order (variant `original`). Several files of one task (runs with
different seeds) are its repetitions, in the order given, after each file's own `repeats`: original-order
accuracy (`mcqa`) and, with more than one repetition, the repetition metrics. Question ids are
`<task>/<doc_id>`; a run over several tasks (MMLU's subjects) gives each its task as subject.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from src.answering.items import Answer, Item
from src.answering.trials import decision_margin
from src.common.errors import UserError
from src.core.questions import Question

from ..backends.base import Request
from ..benchmarks.files import iter_jsonl, read_text
from ..core.variant import LETTERS, Variant
from .common import Ingested, Trial, answer_of

_TASK = re.compile(r"^samples_(?P<task>.+?)_\d{4}-\d{2}-\d{2}T")


def task_of(file: Path) -> str:
    """The task a samples file holds, from lm-eval's file name (`samples_mmlu_anatomy_2024-...jsonl`)."""
    name = file.name.removesuffix(".gz").removesuffix(".jsonl")
    match = _TASK.match(name + "T") or _TASK.match(name)
    return match.group("task") if match else name.removeprefix("samples_")


def _arguments(sample: dict[str, Any]) -> list[list[Any]]:
    """The requests' arguments, from lm-eval's old list form or its newer {gen_args_i: {arg_j: ...}} form."""
    args = sample.get("arguments")
    if isinstance(args, dict):
        return [
            [value for _, value in sorted(a.items(), key=lambda kv: int(kv[0].rsplit("_", 1)[-1]))]
            for _, a in sorted(args.items(), key=lambda kv: int(kv[0].rsplit("_", 1)[-1]))
        ]
    return [list(a) if isinstance(a, (list, tuple)) else [a] for a in args or []]


def _float(value: Any) -> float:
    return float(value[0] if isinstance(value, (list, tuple)) else value)


def _doc_options(doc: Any) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(labels, texts) of the options a document lists, or None."""
    if not isinstance(doc, dict):
        return None
    for key in ("choices", "options", "endings"):
        value = doc.get(key)
        if isinstance(value, dict) and isinstance(value.get("text"), list):
            labels = value.get("label") or list(LETTERS[: len(value["text"])])
            return tuple(str(x) for x in labels), tuple(str(x) for x in value["text"])
        if isinstance(value, dict) and value:
            return tuple(str(k) for k in value), tuple(str(v) for v in value.values())
        if isinstance(value, list) and value:
            return tuple(LETTERS[: len(value)]), tuple(str(x) for x in value)
    return None


def _target_slot(target: Any, labels: Sequence[str], texts: Sequence[str], place: str) -> int:
    if isinstance(target, list) and len(target) == 1:
        target = target[0]
    if isinstance(target, (int, float)) and not isinstance(target, bool) and 0 <= int(target) < len(labels):
        return int(target)
    text = str(target).strip()
    if text.isdigit() and int(text) < len(labels):
        return int(text)
    bare = text.strip("()[]. ")
    if bare in labels:
        return list(labels).index(bare)
    for i, option in enumerate(texts):
        if " ".join(option.split()) == " ".join(text.split()):
            return i
    raise UserError(
        f"{place}: target {text[:40]!r} is no option index, label or option text of the document; "
        "this task's target cannot be matched to an option"
    )


def _scores_text(labels: Sequence[str], values: Sequence[float]) -> str:
    return " ".join(f"{lab}:{v:.4f}" for lab, v in zip(labels, values))


def _scored_sample(
    place: str, sample: dict[str, Any], args: list[list[Any]]
) -> tuple[tuple[str, ...], tuple[str, ...], int, list[Answer], str]:
    """(labels, option texts, correct slot, [the answer], scoring) of a log-likelihood sample: continuations that are
    labels are logprob scoring (the labels' renormalised probabilities), others cloze (the options' log-likelihoods)."""
    resps = sample.get("resps") or []
    conts = [str(a[1]) for a in args]
    scores = [_float(r) for r in (sample.get("filtered_resps") or [r[0] for r in resps])]
    if len(scores) != len(conts):
        raise UserError(f"{place}: {len(conts)} options but {len(scores)} log-likelihoods; the file is damaged")
    stripped = tuple(c.strip() for c in conts)
    as_labels = stripped == tuple(LETTERS[: len(conts)]) or all(s.isdigit() for s in stripped)
    labels = stripped if as_labels else tuple(LETTERS[: len(conts)])
    doc_options = _doc_options(sample.get("doc"))
    texts = doc_options[1] if as_labels and doc_options and len(doc_options[1]) == len(conts) else tuple(stripped)
    slot = _target_slot(sample["target"], labels, texts, place)
    best = max(range(len(scores)), key=scores.__getitem__)
    margin = decision_margin(scores, best)
    if as_labels:
        top = max(scores)
        weights = [math.exp(s - top) for s in scores]
        probs = tuple(w / sum(weights) for w in weights)
        mass = min(1.0, sum(math.exp(s) for s in scores))
        answer = Answer(
            _scores_text(labels, probs), best, probs, mass, parse_rule="logprob_argmax", decision_margin=margin
        )
        return labels, texts, slot, [answer], "logprob"
    norm = tuple(s / max(1, len(c.encode())) for s, c in zip(scores, conts))
    answer = Answer(
        _scores_text(labels, scores),
        best,
        option_loglik=tuple(scores),
        option_loglik_norm=norm,
        parse_rule="cloze_argmax",
        decision_margin=margin,
    )
    return labels, texts, slot, [answer], "cloze"


def _generated_sample(
    place: str, sample: dict[str, Any], labels_from: str
) -> tuple[tuple[str, ...], tuple[str, ...], int, list[Answer]]:
    """(labels, option texts, correct slot, one answer per response) of a generation sample, read as options."""
    found = _doc_options(sample.get("doc"))
    if found is None:
        raise UserError(
            f"{place}: a generation task's document lists no options (choices, options or "
            "endings), so its answers cannot be read as options; convert it to the generic "
            "format"
        )
    labels, texts = found
    slot = _target_slot(sample["target"], labels, texts, place)
    resps = sample.get("resps") or []
    raw = resps[0] if resps and isinstance(resps[0], list) else resps
    if not raw:
        raise UserError(f"{place}: no response in resps; the file is damaged")
    return labels, texts, slot, [answer_of("mcq", labels, texts, raw=text, labels_from=labels_from) for text in raw]


def _item_of(
    qid: str, subject: str | None, labels: Sequence[str], texts: Sequence[str], slot: int, prompt: str
) -> Item:
    """The sample's question asked in its original order."""
    question = Question(id=qid, question="", options=tuple(texts), answer=slot, subject=subject)
    variant = Variant(
        question_id=qid,
        kind="original",
        variant_id="original",
        option_order=tuple(range(len(labels))),
        option_texts=tuple(texts),
        correct_slot=slot,
    )
    request = Request(prompt=prompt, labels=tuple(labels), options=tuple(texts), seed=0, key=f"{qid}/original")
    return Item(question, variant, request)


def read_lm_eval(
    files: Sequence[Path], *, model: str, benchmark: str | None, temperature: float, seed: int, labels_from: str
) -> Ingested:
    tasks = [task_of(f) for f in files]
    if benchmark is None and len(set(tasks)) > 1:
        raise UserError(
            f"--benchmark: the files hold {len(set(tasks))} tasks ({', '.join(sorted(set(tasks))[:4])}); "
            "name the benchmark they make up"
        )
    benchmark = benchmark or tasks[0]
    repetition_base: dict[str, int] = {}
    trials: list[Trial] = []
    scorings: set[str] = set()
    subjects = len(set(tasks)) > 1
    for file, task in zip(files, tasks):
        base = repetition_base.get(task, 0)
        reps_here = 0
        for line, sample in iter_jsonl(file, read_text(file, strict=True)):
            doc_id = sample.get("doc_id")
            place = f"{file} line {line}" + (f" (doc {doc_id})" if doc_id is not None else "")
            if doc_id is None or "target" not in sample:
                raise UserError(f"{place}: no doc_id or target; is this an lm-eval --log_samples file?")
            args = _arguments(sample)
            if len(args) > 1 and all(len(a) >= 2 and isinstance(a[1], str) for a in args):  # log-likelihoods
                labels, texts, slot, answers, scoring = _scored_sample(place, sample, args)
                prompt = str(args[0][0])
            else:
                labels, texts, slot, answers = _generated_sample(place, sample, labels_from)
                scoring, prompt = "generate", str(args[0][0]) if args and args[0] else ""
            scorings.add(scoring)
            item = _item_of(f"{task}/{doc_id}", task if subjects else None, labels, texts, slot, prompt)
            trials.extend(Trial(item, answer, base + k) for k, answer in enumerate(answers))
            reps_here = max(reps_here, len(answers))
        repetition_base[task] = base + reps_here
    if not trials:
        raise UserError(f"{files[0]}: no samples; run lm-eval with --log_samples")
    if len(scorings) > 1:
        raise UserError(f"--path: the files mix {', '.join(sorted(scorings))} answers; ingest them as separate runs")
    repetitions = sorted(set(repetition_base.values()))
    return Ingested(
        trials=trials,
        run_info={
            "model": model,
            "benchmark": benchmark,
            "variant_set": "original",
            "temperature": float(temperature),
            "seed": int(seed),
            "scoring": scorings.pop(),
        },
        params={"repetitions": repetitions[-1], "prompt.name": "lm_eval"},
        notes=[f"{len(set(tasks))} task(s), {repetitions[-1]} repetition(s) per question"],
    )
