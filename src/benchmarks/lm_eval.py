"""A multiple-choice task of lm-evaluation-harness as a benchmark: `benchmark=lm_eval benchmark.task=NAME`.

The task is read through lm-eval's own `TaskManager` (the `bench` extra; `benchmark.include_path=DIR` adds a
folder of the user's own task YAMLs, whose tasks win over registry tasks of the same name). Its documents come
from the split lm-eval would evaluate (`test_split`, else `validation_split`; `benchmark.split` names another
of the task's splits), each turned into a `Question` by the task's own `doc_to_text`, `doc_to_choice` and
`doc_to_target` (Jinja templates and Python functions alike, after its `process_docs`); `fewshot=k` draws from
its few-shot documents (`fewshot_split`, else its training or validation split).

Two shapes of task become questions:

- choices that are texts (ARC, PIQA, SciQ, HellaSwag): the options are the choices; the question is the
  task's context with lm-eval's `Question: ...\\nAnswer:` frame removed, and the context itself is kept as
  `metadata["context"]` (the `{context}` field of `prompt=lm_eval`, which puts lm-eval's text back);
- choices that are labels (`['A', 'B', ...]`, MMLU, CommonsenseQA) with the options listed in the context as
  `A. text` lines: the options are those lines' texts, the question the context before the first of them.

Texts that complete the context rather than answer it (HellaSwag endings: the context does not end in a
question or an answer cue) make the task's options `continuation`-style (`benchmark.choices` overrides the
detection); the validity contract (`src/core/validity.py`) decides which variant sets that allows. Refused,
in one line before any compute: a task whose `output_type` is not `multiple_choice`, one whose choices are
contexts (Winogrande's partial scoring), a group of tasks, and no lm-eval installed. A document whose target
is not one of its choices is skipped and counted (a warning, and `metadata["lm_eval_skipped"]`).

lm-eval and `datasets` are imported inside the functions: collecting the tests or scanning Hydra's plugins
must not need the extra.
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from src.common.errors import UserError
from src.core.questions import Question

from . import hub, lm_eval_adapter
from .validate import checked_question

log = logging.getLogger(__name__)

INSTALL = 'pip install -e ".[bench]"'
STYLES = ("standalone", "continuation")  # benchmark.choices; null = detected from the contexts
LOCAL_BUILDERS = frozenset({"json", "csv", "parquet", "text", "arrow", "pandas"})  # datasets' builders for local files
ANSWER_CUES = ("?", ":")  # a context ending in one of these asks for an answer; else its choices complete it
_FRAME = re.compile(r"^(?:Question:\s*)?(?P<question>.*?)\s*\n\s*Answer:\s*$", re.S)
_LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class LoadedTask:
    """One task as lm-eval built it, with what the run logs about it."""

    name: str
    task: Any  # lm_eval.api.task.ConfigurableTask
    version: str
    config_hash: str
    docs: Sequence[Any] = field(repr=False)
    split: str = "test"


def lm_eval_or_error() -> Any:
    """The `lm_eval.tasks` module, or one line naming the extra that installs it."""
    try:
        import lm_eval.tasks as tasks  # local: an optional extra, and slow to import
    except ImportError:
        raise UserError(
            f"benchmark=lm_eval reads lm-evaluation-harness tasks, which is not installed; run {INSTALL}"
        ) from None
    return tasks


def unreachable_data_message(task: str, dataset_path: str | None, dataset_name: str | None, reason: str) -> str:
    """The one line for a Hub-backed task whose data is neither cached nor downloadable.

    >>> print(unreachable_data_message("arc_easy", "allenai/ai2_arc", "ARC-Easy",
    ...                                "offline"))  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    lm_eval task arc_easy: its data allenai/ai2_arc (ARC-Easy) is not in the datasets cache and cannot be
    downloaded (offline); fetch it on a machine with network:
    python -c "import datasets; datasets.load_dataset('allenai/ai2_arc', 'ARC-Easy')" and copy ...
    """
    call = f"'{dataset_path}'" + (f", '{dataset_name}'" if dataset_name else "")
    shown = f"{dataset_path} ({dataset_name})" if dataset_name else str(dataset_path)
    return (
        f"lm_eval task {task}: its data {shown} is not in the datasets cache and cannot be downloaded "
        f'({reason}); fetch it on a machine with network: python -c "import datasets; '
        f'datasets.load_dataset({call})" and copy the cache (HF_HOME) here, or point the task at local files '
        f"(dataset_path: json with dataset_kwargs.data_files) in a folder given as benchmark.include_path"
    )


def _task_config(manager: Any, name: str) -> dict[str, Any]:
    """The task's YAML as lm-eval reads it (includes merged), without building the task; {} when it has none."""
    entry = manager.task_index.get(name)
    yaml_path = getattr(entry, "yaml_path", None)
    if yaml_path is None:
        return {}
    try:
        return lm_eval_adapter.task_yaml(yaml_path)
    except Exception:  # noqa: BLE001 - only used to word an error better; the build says what is wrong
        return {}


@lru_cache(maxsize=4)
def _manager(include_path: str | None, defaults: bool) -> Any:
    return lm_eval_or_error().TaskManager(include_path=include_path, include_defaults=defaults)


def task_manager(include_path: str | None, name: str) -> Any:
    """lm-eval's TaskManager that knows `name`, built once per folder: the user's folder alone when it holds the
    task (indexing lm-eval's ~200 registry folders takes 5-15 s on 2 cores), else the registry with the folder."""
    if include_path is not None:
        own = _manager(include_path, False)
        if own.task_index.get(name) is not None:
            return own
    return _manager(include_path, True)


@lru_cache(maxsize=8)
def load_task(name: str, include_path: str | None = None) -> Any:
    """lm-eval's task object for `name` (built once per process: the run's questions and its few-shot pool)."""
    lm_eval_or_error()  # one line naming the extra, before anything else
    if include_path is not None and not Path(include_path).expanduser().is_dir():
        raise UserError(
            f"config key benchmark.include_path: {include_path} is not a folder; give the folder that "
            "holds your task YAMLs, or leave it null for lm-eval's registry"
        )
    manager = task_manager(str(Path(include_path).expanduser()) if include_path else None, name)
    entry = manager.task_index.get(name)
    if entry is None:
        near = difflib.get_close_matches(name, manager.all_subtasks, n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise UserError(
            f"config key benchmark.task: lm-eval knows no task {name!r}{hint}; list them with "
            f"lm-eval ls tasks, or add your task's folder as benchmark.include_path"
        )
    kind = getattr(getattr(entry, "kind", None), "name", "TASK")
    if kind in ("GROUP", "TAG"):
        raise UserError(
            f"config key benchmark.task: {name} is a {kind.lower()} of lm-eval tasks, not one task; "
            f"name one of its tasks (one run per task, e.g. a sweep over benchmark.task)"
        )
    config = _task_config(manager, name)
    dataset_path = config.get("dataset_path")
    hub_backed = dataset_path is not None and dataset_path not in LOCAL_BUILDERS and "custom_dataset" not in config
    unreachable = None if hub.offline() or not hub_backed else hub.hub_unreachable()
    is_offline = hub.offline() or unreachable is not None
    try:
        with hub.offline_libraries(is_offline):
            built = manager.load(name)["tasks"]
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - lm-eval, datasets and fsspec raise many kinds; one line each
        if hub_backed and is_offline:
            raise UserError(
                unreachable_data_message(
                    name, dataset_path, config.get("dataset_name"), "offline" if hub.offline() else str(unreachable)
                )
            ) from None
        detail = " ".join(f"{type(err).__name__}: {err}".split())[:300]
        raise UserError(
            f"lm_eval task {name}: lm-eval could not build it ({detail}); check the task's YAML and its data files"
        ) from None
    return next(iter(built.values()))


def _target_index(target: Any, choices: list[str]) -> int | None:
    """The index lm-eval scores as gold (an int in range, or a string among the choices), else None."""
    if isinstance(target, bool):
        return None
    if isinstance(target, int):
        return target if 0 <= target < len(choices) else None
    if isinstance(target, str):
        if target in choices:
            return choices.index(target)
        return int(target) if target.strip().isdigit() and int(target) < len(choices) else None
    return None  # a list (several targets) or anything else


def is_label_choices(choices: Sequence[str]) -> bool:
    """Choices that are labels `A, B, C, ...` or `1, 2, 3, ...` in order (the options are then in the context).

    >>> is_label_choices(["A", "B", "C"]), is_label_choices(["1", "2"]), is_label_choices(["Paris", "Rome"])
    (True, True, False)
    """
    shown = [str(c).strip() for c in choices]
    return len(shown) >= 2 and (
        shown == list(_LABELS[: len(shown)]) or shown == [str(i) for i in range(1, len(shown) + 1)]
    )


def split_listed_options(context: str, labels: Sequence[str]) -> tuple[str, list[str], str] | None:
    """(question, option texts, the text after the last option) of a context that lists its options as
    `A. text` (or `A) text`, `(A) text`) lines, one per label in order; None when it does not.

    >>> split_listed_options("Question: 2+2?\\nA. 3\\nB. 4\\nAnswer:", ["A", "B"])
    ('Question: 2+2?', ['3', '4'], '\\nAnswer:')
    """
    starts = []
    position = 0
    for label in labels:
        match = re.compile(rf"(?:^|\n)\(?{re.escape(label.strip())}[.)]\s").search(context, position)
        if match is None:
            return None
        starts.append(match)
        position = match.end()
    texts = []
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else context.find("\n", match.end())
        end = len(context) if end < 0 else end
        texts.append(context[match.end() : end].strip())
    tail_start = context.find("\n", starts[-1].end())
    tail = "" if tail_start < 0 else context[tail_start:]
    return context[: starts[0].start()].rstrip("\n"), texts, tail


def question_text(context: str) -> str:
    """The question inside lm-eval's `Question: ...\\nAnswer:` frame (the context as it is when it has none).

    >>> question_text("Question: Which gas do plants take in?\\nAnswer:"), question_text("A man sits on a roof. He")
    ('Which gas do plants take in?', 'A man sits on a roof. He')
    """
    match = _FRAME.match(context)
    return match.group("question") if match else context


def asks_for_answer(context: str) -> bool:
    """Whether a context ends in a question or an answer cue (`?`, `Answer:`, a line break): its choices then
    stand alone as answers; otherwise they complete its last sentence (HellaSwag)."""
    return context.endswith("\n") or context.rstrip().endswith(ANSWER_CUES)


def _stable(value: Any) -> str:
    """A config value as text that is the same in every process: a function by its source (so that editing it
    changes the hash), not its `repr`, which holds a memory address."""
    if callable(value):
        try:
            return inspect.getsource(value)
        except (OSError, TypeError):
            return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__name__)}"
    return str(value)


def dumped_config(task: Any) -> str:
    """The task's whole config as lm-eval dumps it (templates, splits, data files, functions), as stable JSON."""
    return json.dumps(task.dump_config(), sort_keys=True, default=_stable)


def config_hash(task: Any) -> str:
    """A short hash of `dumped_config`: the run's `lm_eval_config_hash` tag."""
    return hashlib.sha256(dumped_config(task).encode()).hexdigest()[:12]


def task_questions(
    task: Any, docs: Sequence[Any], *, name: str, split: str, ids: str
) -> tuple[list[Question], list[int]]:
    """The questions of `docs` as lm-eval builds them, and the indices of the documents skipped because their
    target is not one of their choices. `ids` prefixes the question ids (`<ids>/<document index>`)."""
    if getattr(task, "OUTPUT_TYPE", None) != "multiple_choice":
        raise UserError(
            f"config key benchmark.task: lm_eval task {name} has output_type "
            f"{getattr(task, 'OUTPUT_TYPE', None)}, not multiple_choice; the tool asks multiple-choice "
            "questions only: choose a multiple_choice task"
        )
    if getattr(task, "multiple_input", 0):
        raise UserError(
            f"config key benchmark.task: lm_eval task {name} scores each choice as a different context "
            "before one shared continuation (partial scoring, Winogrande-style), not options of one "
            "question; use benchmark=winogrande for WinoGrande, or a task with one context per document"
        )
    version = str(getattr(task, "VERSION", None))
    digest = config_hash(task)
    questions, skipped = [], []
    for i, doc in enumerate(docs):
        context = task.doc_to_text(doc)
        choices = [str(c) for c in task.doc_to_choice(doc)]
        answer = _target_index(task.doc_to_target(doc), choices)
        if answer is None or not isinstance(context, str):
            skipped.append(i)
            continue
        qid, place = f"{ids}/{i}", f"lm_eval task {name} ({split} document {i})"
        metadata = {"context": context, "lm_eval_task": name, "lm_eval_version": version, "lm_eval_config_hash": digest}
        listed = split_listed_options(context, choices) if is_label_choices(choices) else None
        if listed is None and is_label_choices(choices) and choices[0].strip() == "A":
            raise UserError(
                f"{place}: its choices are the labels {', '.join(choices)} but its context lists "
                f"no '{choices[0].strip()}. ' line per label, so the options' texts are unknown; "
                "write the options as `A. text` lines in doc_to_text, or make doc_to_choice the texts"
            )
        if listed is not None:  # numbers that the context does not list are texts (ARC: "How many ...?" 1, 2, 3, 4)
            question, options, _ = listed
            metadata["choices"] = "standalone"
        else:
            question, options = question_text(context), choices
            metadata["choices"] = "standalone" if asks_for_answer(context) else "continuation"
        questions.append(
            checked_question(
                place,
                id=qid,
                question=question,
                options=options,
                answer=answer,
                subject=None,
                split=split,
                metadata=metadata,
            )
        )
    return questions, skipped


def _style(questions: list[Question], override: str | None) -> str:
    """The task's option style: the override, else the majority of its documents' contexts."""
    if override is not None:
        if override not in STYLES:
            raise UserError(
                f"config key benchmark.choices: {override!r} is not one of {', '.join(STYLES)}; "
                "or null to detect it from the task's contexts"
            )
        return override
    continuation = sum(q.metadata.get("choices") == "continuation" for q in questions)
    return "continuation" if 2 * continuation > len(questions) else "standalone"


def _eval_docs(task: Any, split: str | None, name: str) -> tuple[str, Sequence[Any]]:
    """(split name, documents) lm-eval would evaluate, or those of the split asked for."""
    config = task.config
    splits = {s: getattr(config, f"{s}_split", None) for s in ("test", "validation", "training")}
    if split is None:
        return (config.test_split or config.validation_split or "test"), task.eval_docs
    named = {value: kind for kind, value in splits.items() if value}
    if split not in named:
        raise UserError(
            f"config key benchmark.split: lm_eval task {name} has no split {split!r}; choose one of "
            f"{', '.join(named)} or null for the one lm-eval evaluates"
        )
    return split, getattr(task, f"{named[split]}_docs")()


def load_lm_eval(
    *, path: str | None, data_dir: str, split: str | None, seed: int, options: Mapping[str, Any]
) -> list[Question]:
    """The questions of `options["task"]` (see the module docstring)."""
    name = options.get("task")
    if not name or not isinstance(name, str):
        raise UserError(
            "config key benchmark.task: benchmark=lm_eval reads one lm-evaluation-harness task; give "
            "benchmark.task=NAME (e.g. arc_easy)"
        )
    if path is not None:
        raise UserError(
            "config key benchmark.path: an lm-eval task's YAML says where its data is; remove "
            "benchmark.path and set the data in the task (dataset_path, dataset_kwargs.data_files)"
        )
    task = load_task(name, options.get("include_path"))
    split_name, docs = _eval_docs(task, split, name)
    questions, skipped = task_questions(task, docs, name=name, split=split_name, ids=name)
    style = _style(questions, options.get("choices"))
    for q in questions:
        q.metadata["choices"] = style
        q.metadata["lm_eval_skipped"] = len(skipped)
    if skipped:
        log.warning(
            "lm_eval task %s: %d of %d documents skipped, their target is not one of their choices (documents %s)",
            name,
            len(skipped),
            len(docs),
            ", ".join(map(str, skipped[:5])) + (", ..." if len(skipped) > 5 else ""),
        )
    return questions


def lm_eval_fewshot(
    *, path: str | None, data_dir: str, subject: str | None, options: Mapping[str, Any]
) -> list[Question]:
    """The task's few-shot documents as questions (lm-eval's `fewshot_docs`: its fewshot_split, else training,
    else validation), labelled split "fewshot"."""
    name = options.get("task")
    task = load_task(name, options.get("include_path"))
    docs = task.fewshot_docs()
    if docs is None:
        raise UserError(f"lm_eval task {name} has no few-shot documents; use fewshot=0")
    return task_questions(task, list(docs), name=name, split="fewshot", ids=f"{name}/fewshot")[0]


def task_tags(questions: Sequence[Question]) -> dict[str, str]:
    """What a run logs about the lm-eval task its questions came from ({} for other benchmarks)."""
    if not questions or "lm_eval_task" not in questions[0].metadata:
        return {}
    meta = questions[0].metadata
    return {
        "lm_eval_task": str(meta["lm_eval_task"]),
        "lm_eval_version": str(meta["lm_eval_version"]),
        "lm_eval_config_hash": str(meta["lm_eval_config_hash"]),
        "lm_eval_choices": str(meta["choices"]),
        "lm_eval_skipped": str(meta.get("lm_eval_skipped", 0)),
    }
