"""A multiple-choice task of lm-evaluation-harness, or a group or tag of them, as a benchmark:
`benchmark=lm_eval benchmark.task=NAME`.

The task is read through lm-eval's own `TaskManager` (the `bench` extra; `benchmark.include_path=DIR` adds a
folder of the user's own task YAMLs, whose tasks win over registry tasks of the same name; a YAML there that does
not parse is one line with the parser's message). Its documents come from the split lm-eval would evaluate
(`test_split`, else `validation_split`; `benchmark.split` names another of the task's splits), each turned into a
`Question` by the task's own `doc_to_text`, `doc_to_choice` and `doc_to_target` (Jinja templates and Python
functions alike, after its `process_docs`); `limit` keeps N documents of each task (lm-eval's --limit). A group
or tag is one benchmark whose tasks are the subjects, each read with its own config.

Two shapes of task become questions:

- choices that are texts (ARC, PIQA, SciQ, HellaSwag): the options are the choices; the question is the
  task's context with lm-eval's `Question: ...\\nAnswer:` frame removed, and the context itself is kept as
  `metadata["context"]` (the `{context}` field of `prompt=lm_eval`, which puts lm-eval's text back);
- choices that are labels (`['A', 'B', ...]`, MMLU, CommonsenseQA) with the options listed in the context as
  `A. text` lines: the options are those lines' texts, the question the context before the first of them.

Targets are read as lm-eval's `process_results` reads them (`gold_index`); one warning counts the documents where
that index reading is not the choice with the target's text. Unlabelled documents (target -1) and targets past
the choices are skipped and counted in one warning line; several targets per document (`truthfulqa_mc2`) are
refused. With `prompt=lm_eval`, `lm_eval_contexts` puts the description and solved examples lm-eval's own
`fewshot_context` builds before each question (`{preamble}`), and `scoring_refusal` stops a scoring that would ask a
task of a suite otherwise than lm-eval does; `suite_scores` gives lm-eval's own acc, acc_norm and group numbers.

Texts that complete the context rather than answer it (HellaSwag endings: the context does not end in a
question or an answer cue) make the task's options `continuation`-style (`benchmark.choices` overrides the
detection); the validity contract (`src/core/validity.py`) decides which variant sets that allows. Refused,
in one line before any compute: a task whose `output_type` is not `multiple_choice` (in a group: naming those
tasks), one whose choices are contexts (Winogrande's partial scoring), and no lm-eval installed.

lm-eval and `datasets` are imported inside the functions: collecting the tests or scanning Hydra's plugins
must not need the extra.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from functools import lru_cache, partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from src.common.digests import json_sha256
from src.common.errors import UserError
from src.core.questions import Question, question_identity
from src.core.validity import check_shown_options

from . import hub_access, lm_eval_adapter
from .validate import checked_question

log = logging.getLogger(__name__)

INSTALL = 'pip install -e ".[bench]"'
STYLES = ("standalone", "continuation")  # benchmark.choices; null = detected from the contexts
LOCAL_BUILDERS = frozenset({"json", "csv", "parquet", "text", "arrow", "pandas"})  # datasets' builders for local files
ANSWER_CUES = ("?", ":")  # a context ending in one of these asks for an answer; else its choices complete it
_FRAME = re.compile(r"^(?:Question:\s*)?(?P<question>.*?)\s*\n\s*Answer:\s*$", re.S)
_LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
# lm-eval's --apply_chat_template as simple_evaluate asks it by default: the solved examples as turns of their own
CHAT_ARGS = {"apply_chat_template": True, "fewshot_as_multiturn": True}


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


def yaml_error(folder: str | None) -> str | None:
    """`FILE: the parser's message` for the first task YAML of the user's folder that does not parse, else None
    (lm-eval's TaskManager skips such a file with a log line, and then knows no task of that name)."""
    if folder is None:
        return None
    for path in sorted(Path(folder).expanduser().rglob("*.yaml")):
        try:
            lm_eval_adapter.task_yaml(path)
        except Exception as err:  # noqa: BLE001 - yaml's and lm-eval's loaders raise several kinds
            return f"{path}: " + " ".join(f"{type(err).__name__}: {err}".split())[:300]
    return None


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
        broken = yaml_error(include_path)  # lm-eval skips a YAML it cannot parse, and would then know no such task
        if broken is not None:
            raise UserError(f"config key benchmark.include_path: a task YAML does not parse: {broken}; correct it")
    return _manager(include_path, True)


def task_spec(value: Any) -> str | tuple[str, ...]:
    """`benchmark.task` as lm-eval's `simple_evaluate(tasks=...)` takes it: one task, group or tag name, or a list
    of them (a tuple here, one cache key; a list of one is that name); one line for anything else.

    >>> task_spec("arc_easy"), task_spec(["arc_easy", "hellaswag"]), task_spec(["mmlu"])
    ('arc_easy', ('arc_easy', 'hellaswag'), 'mmlu')
    """
    names = [value] if isinstance(value, str) else list(value) if isinstance(value, Sequence) else [value]
    if not names or not all(isinstance(n, str) and n for n in names):
        raise UserError(
            f"config key benchmark.task: {value!r} is not an lm-eval task name or a list of them; give "
            "benchmark.task=NAME (e.g. arc_easy), a group or tag, or a list benchmark.task=[arc_easy,hellaswag]"
        )
    unique = tuple(dict.fromkeys(names))
    return unique[0] if len(unique) == 1 else unique


def task_label(spec: str | tuple[str, ...]) -> str:
    """A task spec as a command line writes it: `arc_easy`, `[arc_easy,hellaswag]`."""
    return spec if isinstance(spec, str) else f"[{','.join(spec)}]"


# lm-eval's groups of each `load_tasks` call
_GROUPS: dict[tuple[str | tuple[str, ...], str | None], dict[str, Any]] = {}


@lru_cache(maxsize=8)
def load_tasks(name: str | tuple[str, ...], include_path: str | None = None) -> dict[str, Any]:
    """lm-eval's task objects for `name`, one task or every task of a group or tag ({task name: task}, in lm-eval's
    order), built once per process: the run's questions, its few-shot pools and lm-eval's contexts. A tuple of
    names is each one's tasks in turn and their groups (`_tasks_of_list`), as `simple_evaluate` loads a list."""
    if isinstance(name, tuple):
        return _tasks_of_list(name, include_path)
    lm_eval_or_error()  # one line naming the extra, before anything else
    if include_path is not None and not Path(include_path).expanduser().is_dir():
        raise UserError(
            f"config key benchmark.include_path: {include_path} is not a folder; give the folder that "
            "holds your task YAMLs, or leave it null for lm-eval's registry"
        )
    folder = str(Path(include_path).expanduser()) if include_path else None
    manager = task_manager(folder, name)
    entry = manager.task_index.get(name)
    if entry is None:
        near = difflib.get_close_matches(name, manager.all_subtasks, n=3)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise UserError(
            f"config key benchmark.task: lm-eval knows no task {name!r}{hint}; list them with "
            f"lm-eval ls tasks, or add your task's folder as benchmark.include_path"
        )
    config = _task_config(manager, name)
    dataset_path = config.get("dataset_path")
    hub_backed = dataset_path is not None and dataset_path not in LOCAL_BUILDERS and "custom_dataset" not in config
    unreachable = None if hub_access.offline() or not hub_backed else hub_access.hub_unreachable()
    is_offline = hub_access.offline() or unreachable is not None
    try:
        with hub_access.offline_libraries(is_offline):
            loaded = manager.load(name)
            built = loaded["tasks"]
            _GROUPS[(name, include_path)] = dict(loaded.get("groups") or {})
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - lm-eval, datasets and fsspec raise many kinds; one line each
        if hub_backed and is_offline:
            raise UserError(
                unreachable_data_message(
                    name,
                    dataset_path,
                    config.get("dataset_name"),
                    "offline" if hub_access.offline() else str(unreachable),
                )
            ) from None
        detail = " ".join(f"{type(err).__name__}: {err}".split())[:300]
        raise UserError(
            f"lm_eval task {name}: lm-eval could not build it ({detail}); check the task's YAML and its data files"
        ) from None
    return dict(built)


def _tasks_of_list(names: tuple[str, ...], include_path: str | None) -> dict[str, Any]:
    """Each name's tasks in turn (a task named twice, or in two named groups, once), and the groups of them all."""
    merged: dict[str, Any] = {}
    groups: dict[str, Any] = {}
    for one in names:
        for sub, task in load_tasks(one, include_path).items():
            merged.setdefault(sub, task)
        groups.update(_GROUPS.get((one, include_path), {}))
    _GROUPS[(names, include_path)] = groups
    return merged


def load_task(name: str, include_path: str | None = None) -> Any:
    """lm-eval's task object for the one task `name` (a task of a group by its own name)."""
    return load_tasks(name, include_path)[name]


def gold_index(target: Any, choices: list[str]) -> int | str:
    """The option lm-eval scores as gold (its `process_results`: an int is an index, a digit string was made an
    index by `doc_to_target`, another string is looked up among the choices), else why the document is skipped.

    >>> gold_index(2, ["1", "2", "3"]), gold_index("Rome", ["Oslo", "Rome"]), gold_index(-1, ["a", "b"])
    (2, 1, 'unlabelled (target -1)')
    """
    if isinstance(target, bool) or not isinstance(target, (int, str)):
        return f"its target {target!r} is not an option index or text"
    if isinstance(target, int) and target < 0:
        return f"unlabelled (target {target})"
    if isinstance(target, int):
        return target if target < len(choices) else f"target index {target} is past its {len(choices)} choices"
    return choices.index(target) if target in choices else f"target {target!r} is not one of its choices"


def reads_other_than_text(target: Any, gold: int, choices: list[str]) -> bool:
    """Whether lm-eval's index reading of a target picks another option than the choice with the target's text
    (digit choices `1..4` with a target `"3"`: lm-eval scores option index 3, the text `3` is option index 2).

    >>> reads_other_than_text(3, 3, ["1", "2", "3", "4"]), reads_other_than_text(1, 1, ["a", "b"])
    (True, False)
    """
    return isinstance(target, int) and str(target) in choices and choices.index(str(target)) != gold


def is_label_choices(choices: Sequence[str]) -> bool:
    """Choices that are labels `A, B, C, ...` or `1, 2, 3, ...` in order (the options are then in the context).

    >>> is_label_choices(["A", "B", "C"]), is_label_choices(["1", "2"]), is_label_choices(["Paris", "Rome"])
    (True, True, False)
    """
    shown = [str(c).strip() for c in choices]
    return len(shown) >= 2 and (
        shown == list(_LABELS[: len(shown)]) or shown == [str(i) for i in range(1, len(shown) + 1)]
    )


def _listed_lines(context: str, labels: Sequence[str]) -> list[re.Match[str]] | None:
    """The `A. ` (or `A) `, `(A) `) mark that starts each label's line, one per label in order; None when one is
    missing."""
    starts = []
    position = 0
    for label in labels:
        mark = re.compile(rf"(?:^|\n)(?P<open>\(?){re.escape(label.strip())}(?P<close>[.)]\s)")
        match = mark.search(context, position)
        if match is None:
            return None
        starts.append(match)
        position = match.end()
    return starts


def _option_ends(context: str, starts: Sequence[re.Match[str]]) -> list[int]:
    """Where each listed option's text ends: at the next option's line, and the last one before the line breaks
    that lead to the context's last line (its answer cue, MMLU's `Answer:`), so that a last option running over
    several lines is kept whole; at the context's end (less its trailing whitespace) when the last option is on its
    last line."""
    body = context.rstrip()
    last = len(body)
    if "\n" in body[starts[-1].end() :]:  # lines after the last option's first: the context's last is its cue
        last = len(body[: body.rfind("\n")].rstrip("\n"))
    return [following.start() for following in starts[1:]] + [last]


def split_listed_options(context: str, labels: Sequence[str]) -> tuple[str, list[str], str] | None:
    """(question, option texts, the text after the last option) of a context that lists its options as
    `A. text` (or `A) text`, `(A) text`) lines, one per label in order; None when it does not.

    >>> split_listed_options("Question: 2+2?\\nA. 3\\nB. 4\\nAnswer:", ["A", "B"])
    ('Question: 2+2?', ['3', '4'], '\\nAnswer:')
    >>> split_listed_options("Which?\\nA. 3\\nB. one line\\nand the next\\nAnswer:", ["A", "B"])[1]
    ['3', 'one line\\nand the next']
    >>> split_listed_options("A. 3\\nB. 4", ["A", "B"])  # no question before the options, no cue after them
    ('', ['3', '4'], '')
    """
    starts = _listed_lines(context, labels)
    if starts is None:
        return None
    ends = _option_ends(context, starts)
    texts = [context[match.end() : end].strip() for match, end in zip(starts, ends)]
    return context[: starts[0].start()].rstrip("\n"), texts, context[ends[-1] :]


def option_listing(context: str, labels: Sequence[str]) -> dict[str, Any] | str:
    """How a context lists its options (`A. text` lines), to list them again in another order
    (src/core/prompts.py `relisted` gives the context back from it): the text before the first option line, the
    marks around each label, what separates two options, each option's text as lm-eval rendered it, the text after
    the last option; else why they cannot be listed again (marked or separated in more than one way).

    >>> option_listing("2+2?\\nA. 3\\nB. 4\\nAnswer:", ["A", "B"])["texts"]
    ['3', '4']
    >>> option_listing("2+2?\\nA. 3\\n(B) 4\\nAnswer:", ["A", "B"])
    'its option lines mark their labels in more than one way (A. , (B) )'
    """
    starts = _listed_lines(context, labels)
    if starts is None:
        return "its context lists no option line per label"
    ends = _option_ends(context, starts)
    raw = [context[match.end() : following.start("open")] for match, following in zip(starts, starts[1:])]
    texts = [text.rstrip("\n") for text in raw] + [context[starts[-1].end() : ends[-1]]]
    marks = {(m["open"], m["close"]) for m in starts}
    if len(marks) > 1:
        shown = dict.fromkeys(f"{m['open']}{label.strip()}{m['close']}" for m, label in zip(starts, labels))
        return f"its option lines mark their labels in more than one way ({', '.join(shown)})"
    separators = {text[len(kept) :] for text, kept in zip(raw, texts)}  # two labels at least: one separator or more
    if len(separators) > 1:
        return "its options are separated by line breaks of more than one length"
    ((opened, closed),), (separator,) = marks, separators
    return {
        "head": context[: starts[0].start("open")],
        "open": opened,
        "close": closed,
        "separator": separator,
        "style": "A." if labels[0].strip() == "A" else "1.",
        "texts": texts,
        "tail": context[ends[-1] :],
    }


def listed_options(context: str, choices: Sequence[str]) -> tuple[str, list[str], str] | None:
    """`split_listed_options` of a task whose choices are labels (MMLU's "A".."D"); None for choices that are texts,
    or labels whose context lists no options (then they are read as texts, as ARC's numbers)."""
    return split_listed_options(context, choices) if is_label_choices(choices) else None


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


def _digest(value: Any) -> str:
    return json_sha256(value, ascii=False)


def prompt_identity(task: Any) -> str:
    """What a task puts around its documents, by content (12 hex digits): its description, delimiters, few-shot
    sampler and few-shot documents as lm-eval hands them over. In every question's metadata, so in the data identity
    and the response cache's key: a corrected few-shot file changes it, a comment in the YAML does not."""
    config = task.config
    pool = task_docs(task, "fewshot") if hasattr(task, "fewshot_docs") else None
    fewshot_cfg = getattr(task, "fewshot_cfg", None)
    return _digest(
        [
            str(getattr(config, "description", "") or ""),
            getattr(config, "target_delimiter", " "),
            getattr(config, "fewshot_delimiter", "\n\n"),
            str(getattr(fewshot_cfg, "sampler", "default")),
            [dict(doc) for doc in pool] if pool is not None else None,
        ]
    )[:12]


def task_questions(
    task: Any, docs: Sequence[Any], *, name: str, split: str, ids: str, subject: str | None = None
) -> tuple[list[Question], dict[int, str]]:
    """The questions of `docs` as lm-eval builds them, and the documents skipped ({index: why}: unlabelled, a target
    past the choices). `ids` prefixes the question ids (`<ids>/<document index>`); `subject` is the task's name in
    a group. A target lm-eval reads as an index other than the choice with its text is counted in
    `metadata["lm_eval_index_targets"]` (one warning per run, `load_lm_eval`)."""
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
    questions, skipped = [], {}
    for i, doc in enumerate(docs):
        context = task.doc_to_text(doc)
        choices = [str(c) for c in task.doc_to_choice(doc)]
        target = task.doc_to_target(doc)
        if isinstance(target, (list, tuple)):
            raise UserError(
                f"config key benchmark.task: lm_eval task {name} has several correct targets per document "
                f"(document {i}: {list(target)!r}, lm-eval's multiple_target, as truthfulqa_mc2); the tool scores "
                "one correct option per question: choose a task with one target (e.g. truthfulqa_mc1), or "
                "benchmark=truthfulqa_mc2 (the tool's own reading, which keeps every true option)"
            )
        answer = gold_index(target, choices)
        if isinstance(answer, str) or not isinstance(context, str):
            skipped[i] = answer if isinstance(answer, str) else "its context is not one text"
            continue
        qid, place = f"{ids}/{i}", f"lm_eval task {name} ({split} document {i})"
        metadata = {
            "context": context,
            "lm_eval_task": name,
            "lm_eval_doc": i,
            "lm_eval_version": version,
            "lm_eval_index_target": reads_other_than_text(target, answer, choices),
        }
        listed = listed_options(context, choices)
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
                subject=subject,
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


def task_docs(task: Any, kind: str) -> Any:
    """lm-eval's documents of `task`: "eval", its `eval_docs`, or "test", "validation", "training", "fewshot", its
    `{kind}_docs()`, made once per task object. lm-eval runs the task's `process_docs` over the whole split at every
    call (HellaSwag's: 10,042 documents through `datasets.map`, ~10 s on 2 cores), and one job asks for them several
    times (its questions, their shapes, lm-eval's contexts, the prompt identity)."""
    made: dict[str, Any] = vars(task).setdefault("_mcq_docs", {})
    if kind not in made:
        made[kind] = task.eval_docs if kind == "eval" else getattr(task, f"{kind}_docs")()
    return made[kind]


def _eval_docs(task: Any, split: str | None, name: str) -> tuple[str, Sequence[Any]]:
    """(split name, documents) lm-eval would evaluate, or those of the split asked for."""
    config = task.config
    splits = {s: getattr(config, f"{s}_split", None) for s in ("test", "validation", "training")}
    evaluated = config.test_split or config.validation_split or "test"  # the split of lm-eval's `eval_docs`
    if split is None:
        return evaluated, task_docs(task, "eval")
    named = {value: kind for kind, value in splits.items() if value}
    if split not in named:
        raise UserError(
            f"config key benchmark.split: lm_eval task {name} has no split {split!r}; choose one of "
            f"{', '.join(named)} or null for the one lm-eval evaluates"
        )
    return split, task_docs(task, "eval" if split == evaluated else named[split])


def _subtasks(name: str | tuple[str, ...], tasks: Mapping[str, Any]) -> None:
    """A group or tag is one benchmark when all its tasks are multiple choice; else one line naming the others."""
    other = [n for n, t in tasks.items() if getattr(t, "OUTPUT_TYPE", None) != "multiple_choice"]
    if other and (len(tasks) > 1 or name not in tasks):
        raise UserError(
            f"config key benchmark.task: lm-eval group {task_label(name)} holds tasks that are not multiple choice "
            f"({', '.join(other)}); name a group of multiple_choice tasks, or one of its tasks"
        )


def _skip_warning(name: str, skipped: Mapping[str, dict[int, str]], total: int) -> str:
    """One line: how many documents were skipped, and why (the reasons counted), with the first few named."""
    reasons: dict[str, int] = {}
    named = []
    for task, docs in skipped.items():
        for i, why in docs.items():
            kind = re.sub(r"'[^']*'|-?\d+", "N", why)
            reasons[kind] = reasons.get(kind, 0) + 1
            named.append(f"{task}/{i}: {why}")
    n = sum(reasons.values())
    counted = ", ".join(f"{count} {kind}" for kind, count in sorted(reasons.items()))
    shown = "; ".join(named[:3]) + ("; ..." if len(named) > 3 else "")
    return f"lm_eval task {name}: {n} of {total} documents skipped ({counted}): {shown}"


def load_lm_eval(
    *,
    path: str | None,
    data_dir: str,
    split: str | None,
    seed: int,
    options: Mapping[str, Any],
    limit: int | None = None,
) -> list[Question]:
    """The questions of `options["task"]`, a task or every task of a group or tag (see the module docstring);
    `limit` documents of each task, as lm-eval's --limit."""
    name = task_spec(options.get("task"))
    if path is not None:
        raise UserError(
            "config key benchmark.path: an lm-eval task's YAML says where its data is; remove "
            "benchmark.path and set the data in the task (dataset_path, dataset_kwargs.data_files)"
        )
    tasks = load_tasks(name, options.get("include_path"))
    _subtasks(name, tasks)
    grouped = len(tasks) > 1 or name not in tasks
    questions, skipped, total = [], {}, 0
    for sub, task in tasks.items():
        split_name, docs = _eval_docs(task, split, sub)
        docs = [docs[i] for i in range(len(docs) if limit is None else min(limit, len(docs)))]
        asked, skipped[sub] = task_questions(
            task, docs, name=sub, split=split_name, ids=sub, subject=sub if grouped else None
        )
        around = prompt_identity(task)
        style = _style(asked, options.get("choices"))  # each task its own: a suite mixes MMLU and HellaSwag
        for q in asked:
            q.metadata["lm_eval_prompt"] = around
            q.metadata["choices"] = style
        questions += asked
        total += len(docs)
    n_skipped = sum(map(len, skipped.values()))
    tag = _digest([name, [(q.id, question_identity(q)) for q in questions]])[:12]
    for q in questions:
        q.metadata["lm_eval_skipped"] = n_skipped
        q.metadata["lm_eval_group"] = task_label(name)
        q.metadata["lm_eval_config_hash"] = tag
    if n_skipped:
        log.warning("%s", _skip_warning(task_label(name), skipped, total))
    by_index = [q.id for q in questions if q.metadata.pop("lm_eval_index_target")]
    if by_index:
        log.warning(
            "lm_eval task %s: %d of %d documents have a target that lm-eval reads as an option index, not as the "
            "choice with the same text (as lm-eval scores them; e.g. %s)",
            task_label(name),
            len(by_index),
            len(questions),
            ", ".join(by_index[:3]),
        )
    return questions


def lm_eval_fewshot(
    *, path: str | None, data_dir: str, subject: str | None, options: Mapping[str, Any]
) -> list[Question]:
    """The few-shot documents of the question's task (the subject, in a group) as questions: lm-eval's
    `fewshot_docs` (its fewshot_split, else training, else validation, else the evaluated split itself), labelled
    split "fewshot"."""
    name = task_spec(options.get("task"))
    tasks = load_tasks(name, options.get("include_path"))
    sub = str(subject if subject in tasks else name)
    docs = task_docs(tasks[sub], "fewshot")
    if docs is None:
        raise UserError(f"lm_eval task {sub} has no few-shot documents; use fewshot=0")
    asked = task_questions(tasks[sub], list(docs), name=sub, split="fewshot", ids=f"{sub}/fewshot", subject=subject)
    return asked[0]


@contextmanager
def _own_document_left_out(task: Any, evaluated_split: str) -> Iterator[None]:
    """lm-eval 0.4.13 leaves the evaluated document out of its examples only when `fewshot_split` names the test
    split; a task whose pool is its evaluated split by lm-eval's fallback (no training or validation split) would
    show a question among its own examples. Here lm-eval's own exclusion is switched on for it."""
    fewshot_cfg = task.fewshot_cfg
    split = fewshot_cfg.split
    fallback = None if task.has_training_docs() else ("validation" if task.has_validation_docs() else "test")
    pool_split = split or (getattr(task.config, f"{fallback}_split", None) if fallback else None)
    same = pool_split == evaluated_split and split != task.config.test_split
    if same:
        fewshot_cfg.split = task.config.test_split
    try:
        yield
    finally:
        fewshot_cfg.split = split


def lm_eval_chat_template(tokenizer: Any, model: str) -> Callable[..., str]:
    """lm-eval's own chat rendering over `tokenizer` (`HFLM.apply_chat_template`: the tokenizer's template, ending
    where the answer starts; the system turn dropped where the template refuses one), for `prompt.chat=true`."""
    from lm_eval.models.huggingface import HFLM  # local: an optional extra, and it loads torch

    if not getattr(tokenizer, "chat_template", None):
        raise UserError(
            f"config key prompt.chat: model {model}'s tokenizer has no chat template, so lm-eval's chat turns "
            "cannot be built; set prompt.chat=false"
        )
    return partial(HFLM.apply_chat_template, SimpleNamespace(tokenizer=tokenizer, chat_template_args={}))


def lm_eval_contexts(
    questions: Sequence[Question],
    *,
    k: int,
    options: Mapping[str, Any],
    scoring: str = "cloze",
    chat_template: Callable[..., str] | None = None,
) -> list[Question]:
    """The questions with lm-eval's own text around them, for `prompt=lm_eval`: `metadata["lm_eval_preamble"]` (the
    task's description and `k` solved examples, as its `fewshot_context` builds them with its sampler seeded by
    lm-eval's default `fewshot_random_seed`, documents visited in lm-eval's order), `lm_eval_target_delimiter` (what
    lm-eval puts before each choice it scores: src/core/prompts.py `lm_eval_request`) and, where the choices
    are the labels of listed options (MMLU), `lm_eval_label_choices` (the labels are scored, not the texts). With a
    `chat_template` (`lm_eval_chat_template`) the context is lm-eval's `--apply_chat_template` one (the description a
    system turn, the examples turns of their own as simple_evaluate's default `fewshot_as_multiturn`), and the
    template's text after the question is `lm_eval_postamble`."""
    from lm_eval.defaults import DEFAULT_OTHER_SEED  # local: an optional extra

    tasks = load_tasks(task_spec(options.get("task")), options.get("include_path"))
    wanted: dict[str, dict[int, Question]] = {}
    for q in questions:
        wanted.setdefault(q.metadata["lm_eval_task"], {})[q.metadata["lm_eval_doc"]] = q
    built: dict[str, Question] = {}
    for sub, by_doc in wanted.items():
        task = tasks[sub]
        split = next(iter(by_doc.values())).split
        _, docs = _eval_docs(task, split, sub)
        shots = 0 if task.config.num_fewshot == 0 else k  # a task that sets 0 itself ignores the asked k, as in lm-eval
        task.set_fewshot_seed(seed=DEFAULT_OTHER_SEED)
        with _own_document_left_out(task, split):
            for i in range(max(by_doc) + 1):  # every document up to the last asked: the sampler's draws in order
                doc = docs[i]
                if i not in by_doc and shots == 0:
                    continue
                full = task.fewshot_context(
                    doc,
                    shots,
                    gen_prefix=task.doc_to_prefix(doc),
                    **({} if chat_template is None else CHAT_ARGS),
                    chat_template=chat_template,
                )
                if i in by_doc:
                    q = by_doc[i]
                    built[q.id] = _with_lm_evals_text(
                        q, task, doc, full=full, scoring=scoring, chat=bool(chat_template)
                    )
    return [built[q.id] for q in questions]


def _with_lm_evals_text(question: Question, task: Any, doc: Any, *, full: str, scoring: str, chat: bool) -> Question:
    """`question` with what `prompt=lm_eval` asks around it (`lm_eval_contexts`); `full` is lm-eval's whole context
    of the document, which holds the document's own text (last, but for a chat template's closing text)."""
    own, choices = task.doc_to_text(doc), [str(c) for c in task.doc_to_choice(doc)]
    at = full.rfind(own)
    if at < 0:
        raise UserError(
            f"config key prompt.chat: the model's chat template changes lm_eval task "
            f"{question.metadata['lm_eval_task']}'s question text (e.g. strips it), so its options cannot be "
            "placed in lm-eval's context; set prompt.chat=false"
        )
    name = str(question.metadata["lm_eval_task"])
    labels = listed_options(own, choices) is not None
    refusal = scoring_refusal(name, labels=labels, scoring=scoring)
    if refusal is not None:
        raise UserError(refusal)
    extra: dict[str, Any] = {
        "lm_eval_preamble": full[:at],
        "lm_eval_target_delimiter": _target_delimiter(task, chat=chat),
        **({"lm_eval_postamble": full[at + len(own) :]} if chat else {}),
    }
    if labels:  # each variant lists the options again, in its order, as the task lists them (prompts.relisted)
        listing = option_listing(own, choices)
        if isinstance(listing, str):
            raise UserError(
                f"lm_eval task {name} (document {question.metadata['lm_eval_doc']}): {listing}, so its options "
                "cannot be listed again as lm-eval's context lists them; write them in doc_to_text as one "
                "`A. text` line each, or use another prompt (prompt=cora), which lists them in its own form"
            )
        extra["lm_eval_listing"] = listing
    return replace(question, metadata={**question.metadata, **extra})


LISTING_SCORINGS = ("cloze_shown", "logprob", "generate")  # their prompt lists the options as labelled lines


def scoring_refusal(task: str, *, labels: bool, scoring: str) -> str | None:
    """Why `scoring` under `prompt=lm_eval` would ask lm_eval task `task` otherwise than lm-eval does, else None.

    A task whose choices are the labels of options its context lists (MMLU) is asked in its own context under every
    scoring (the cloze modes score the labels after it, as lm-eval does); a task whose choices are option texts
    (ARC, HellaSwag) is lm-eval's request only under scoring=cloze: the other scorings list its options as
    labelled lines that lm-eval's prompt does not have.

    >>> scoring_refusal("mmlu_anatomy", labels=True, scoring="cloze") is None
    True
    >>> scoring_refusal("arc_easy", labels=False, scoring="cloze_shown")  # doctest: +ELLIPSIS
    "config key scoring: lm_eval task arc_easy's choices are option texts...; use scoring=cloze"
    """
    if labels or scoring not in LISTING_SCORINGS:
        return None
    return (
        f"config key scoring: lm_eval task {task}'s choices are option texts that lm-eval scores after its own "
        f"context, and scoring={scoring} would list them as labelled lines under prompt=lm_eval, which is not "
        "lm-eval's prompt; use scoring=cloze"
    )


def task_shapes(questions: Sequence[Question], options: Mapping[str, Any]) -> dict[str, bool]:
    """{task: whether its context lists its options, its choices their labels (MMLU)} of the lm-eval tasks the
    questions come from, in order, each read from its first asked document as `lm_eval_contexts` reads it."""
    tasks = load_tasks(task_spec(options.get("task")), options.get("include_path"))
    first: dict[str, Question] = {}
    for q in questions:
        first.setdefault(str(q.metadata["lm_eval_task"]), q)
    shapes = {}
    for sub, q in first.items():
        task = tasks[sub]
        doc = _eval_docs(task, q.split, sub)[1][int(q.metadata["lm_eval_doc"])]
        shapes[sub] = listed_options(task.doc_to_text(doc), [str(c) for c in task.doc_to_choice(doc)]) is not None
    return shapes


def check_task_shapes(
    questions: Sequence[Question], *, options: Mapping[str, Any], scoring: str, variants: Mapping[str, Any]
) -> None:
    """Under `prompt=lm_eval`, before any compute: each task of the run asked as lm-eval asks it under `scoring`
    (`scoring_refusal`), and the validity rule of shown options (src/core/validity.py `check_shown_options`) held
    per task: a label task lists its options again in each variant's order, a task of option texts shows none (they
    are scored after lm-eval's own context), so a set that compares orders or option sets is refused for it, naming
    the task."""
    spec = task_spec(options.get("task"))
    named = task_label(spec)
    for task, lists in task_shapes(questions, options).items():
        refusal = scoring_refusal(task, labels=lists, scoring=scoring)
        if refusal is not None:
            raise UserError(refusal)
        check_shown_options(
            shows=lists,
            variants=variants,
            keys=f"benchmark.task={named}{'' if task == spec else f' (its task {task})'}, prompt=lm_eval and "
            f"variants={variants.get('name')}",
            why=f"lm-eval scores {task}'s option texts after its own context, which lists no options",
            instead="variants=original (or another set of one list per question: perm_original, "
            "revas_multi_select), tasks whose context lists their options (MMLU's shape), or another prompt "
            "(prompt=cora) with scoring=cloze_shown, logprob or generate, which list the options",
        )


def _target_delimiter(task: Any, *, chat: bool) -> str:
    """What lm-eval puts between the context and each choice (`construct_requests`): the task's `target_delimiter`;
    after a chat template's generation prompt none, unless the task's `gen_prefix` ends in no whitespace."""
    delimiter, prefix = str(task.config.target_delimiter), getattr(task.config, "gen_prefix", None)
    if not chat or (prefix and not prefix[-1].isspace()):
        return delimiter
    return ""


def task_tags(questions: Sequence[Question]) -> dict[str, str]:
    """What a run logs about the lm-eval task its questions came from ({} for other benchmarks)."""
    if not questions or "lm_eval_task" not in questions[0].metadata:
        return {}
    meta = questions[0].metadata
    return {
        "lm_eval_task": str(meta.get("lm_eval_group", meta["lm_eval_task"])),
        "lm_eval_version": str(meta["lm_eval_version"]),
        "lm_eval_config_hash": str(meta["lm_eval_config_hash"]),
        "lm_eval_choices": str(meta["choices"]),
        "lm_eval_skipped": str(meta.get("lm_eval_skipped", 0)),
    }


LM_EVAL_METRICS = ("acc", "acc_norm")  # what a multiple-choice task of lm-eval reports that the tool reproduces


def suite_scores(
    name: str | tuple[str, ...], include_path: str | None, per_task: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    """lm-eval's numbers of `name` (a task, group or tag, or a tuple of them: `task_spec`) ({task or group: {metric:
    value}}) from each task's per-document means
    (`per_task`: {task: {"acc": .., "acc_norm": .., "n": documents}}): a task keeps the metrics its own config
    reports, a group's are lm-eval's own `Group.aggregate` over its tasks (its `aggregate_metric_list`,
    `weight_by_size`); a group without that list reports none, as in lm-eval's table."""
    tasks = load_tasks(name, include_path)
    reported: dict[str, dict[str, Any]] = {}
    for task, values in per_task.items():
        kept = [m for m in LM_EVAL_METRICS if m in tasks[task].aggregation() and m in values]
        reported[task] = {**{f"{m},none": values[m] for m in kept}, "sample_len": int(values["n"])}
    scores = {task: {m.partition(",")[0]: v for m, v in r.items() if "," in m} for task, r in reported.items()}
    for group_name, group in _GROUPS.get((name, include_path), {}).items():
        aggregated = group.aggregate(reported)
        values = {m: float(aggregated[f"{m},none"]) for m in LM_EVAL_METRICS if f"{m},none" in aggregated}
        if values:
            scores[str(group_name)] = values
    return scores
