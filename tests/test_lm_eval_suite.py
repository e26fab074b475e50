"""lm-eval's own numbers of a suite, without lm-eval installed (the lm-eval tier compares them with lm-eval's
simple_evaluate on a real group: tests/test_lm_eval_tasks.py): each task's acc and per-character acc_norm from the
run's log-likelihoods, each group's by its aggregation, logged as `lm_eval_*` metrics."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from src.benchmarks import lm_eval
from src.job.lm_eval_suite import document_scores, lm_eval_suite_metrics


class ReportingTask:
    """A stand-in lm-eval task that reports the metrics of its `metric_list`."""

    def __init__(self, *metrics: str):
        self.metrics = metrics

    def aggregation(self):
        return dict.fromkeys(self.metrics)


class WeightedGroup:
    """A stand-in lm-eval group: lm-eval's `Group.aggregate` over its tasks, every metric weighted by size."""

    def __init__(self, *tasks: str):
        self.tasks = tasks

    def aggregate(self, reported):
        out = {}
        for key in ("acc,none", "acc_norm,none"):
            have = [t for t in self.tasks if key in reported[t]]
            if have:
                sizes = [reported[t]["sample_len"] for t in have]
                out[key] = sum(reported[t][key] * n for t, n in zip(have, sizes)) / sum(sizes)
        return out


@pytest.fixture
def suite(monkeypatch):
    tasks = {"mmlu_x": ReportingTask("acc"), "arc_x": ReportingTask("acc", "acc_norm")}
    monkeypatch.setattr(lm_eval, "load_tasks", lambda name, include_path=None: tasks)
    monkeypatch.setitem(lm_eval._GROUPS, ("suite", None), {"suite": WeightedGroup("mmlu_x", "arc_x")})


def test_acc_norm_divides_by_the_scored_texts_characters_not_bytes():
    """The option "é" is one character and two bytes: per character "ab" wins (-1.0 against -1.5), per byte it
    would lose (-1.0 against -0.75)."""
    assert document_scores([-1.5, -2.0], ["é", "ab"], gold=1) == {"acc": 0.0, "acc_norm": 1.0}
    assert document_scores([-1.0, -1.0], ["a", "b"], gold=0) == {"acc": 1.0, "acc_norm": 1.0}  # a tie: the first
    assert document_scores([-1.0, -1.0], ["a", "b"], gold=1) == {"acc": 0.0, "acc_norm": 0.0}


def test_a_task_keeps_the_metrics_it_reports_and_a_group_aggregates_them(suite):
    scores = lm_eval.suite_scores(
        "suite", None, {"mmlu_x": {"acc": 0.5, "acc_norm": 0.5, "n": 2}, "arc_x": {"acc": 0.0, "acc_norm": 1.0, "n": 6}}
    )
    assert scores == {
        "mmlu_x": {"acc": 0.5},
        "arc_x": {"acc": 0.0, "acc_norm": 1.0},
        "suite": {"acc": pytest.approx(1 / 8, abs=1e-12), "acc_norm": 1.0},
    }


def item(qid: str, task: str, variant: str, options: tuple[str, ...]):
    question = SimpleNamespace(id=qid, metadata={"lm_eval_task": task})
    return SimpleNamespace(
        question=question, variant=SimpleNamespace(variant_id=variant), request=SimpleNamespace(options=options)
    )


def row(qid, variant, order, loglik, correct_option, repetition=0, fmt="mcq"):
    return {
        "question_id": qid,
        "variant_id": variant,
        "option_order": order,
        "n_options": len(order),
        "option_loglik": loglik,
        "correct_option": correct_option,
        "repetition": repetition,
        "fmt": fmt,
    }


def config(scoring="cloze", prompt="lm_eval", benchmark="lm_eval", task="suite", include_path=None):
    """What the suite's numbers read of a job's spec (src/config/spec.py `JobSpec`)."""
    return SimpleNamespace(
        benchmark={"name": benchmark, "task": task, "include_path": include_path},
        lm_evals_own=benchmark == "lm_eval" and prompt == "lm_eval",
        scoring=scoring,
    )


def test_a_runs_numbers_come_from_each_questions_first_answer_in_its_original_order(suite):
    """A rotated order, a second repetition and a second variant of the same question count for nothing: lm-eval
    asks each document once, in its own order."""
    items = [
        item("mmlu_x/0", "mmlu_x", "original_0", ("A", "B")),
        item("arc_x/0", "arc_x", "original_0", ("a", "bbbb")),
        item("arc_x/0", "arc_x", "perm_1", ("bbbb", "a")),
        item("arc_x/1", "arc_x", "original_0", ("a", "bbbb")),
    ]
    records = pd.DataFrame(
        [
            row("mmlu_x/0", "original_0", [0, 1], [-1.0, -2.0], 0),
            row("arc_x/0", "perm_1", [1, 0], [-1.0, -9.0], 0),  # another order: left out
            row("arc_x/0", "original_0", [0, 1], [-3.0, -4.0], 1),  # acc 0, acc_norm 1
            row("arc_x/0", "original_0", [0, 1], [-9.0, -1.0], 1, repetition=1),  # a repetition: left out
            row("arc_x/1", "original_0", [0, 1], [-3.0, -4.0], 0),  # acc 1, acc_norm 0
        ]
    )
    metrics = lm_eval_suite_metrics(config(), items, records)
    assert metrics == {
        "lm_eval_acc/mmlu_x": 1.0,
        "lm_eval_acc/arc_x": 0.5,
        "lm_eval_acc_norm/arc_x": 0.5,
        "lm_eval_acc": pytest.approx(2 / 3, abs=1e-12),
        "lm_eval_acc_norm": 0.5,
    }
    for other in (config(scoring="logprob"), config(prompt="cora"), config(benchmark="mmlu")):
        assert lm_eval_suite_metrics(other, items, records) == {}


def test_only_a_questions_first_multiple_choice_answer_counts_whatever_its_rows_order(suite):
    """A true/false row of the question before its multiple-choice one, and a second variant in the original order
    (a reworded one) after it, count for nothing: lm-eval asks each document once, as multiple choice."""
    items = [
        item("mmlu_x/0", "mmlu_x", "original_0", ("A", "B")),
        item("mmlu_x/0", "mmlu_x", "reworded_1", ("A", "B")),
    ]
    records = pd.DataFrame(
        [
            row("mmlu_x/0", "original_0", [0, 1], [-5.0, -1.0], 0, fmt="true_false"),  # another format: left out
            row("mmlu_x/0", "original_0", [0, 1], [-1.0, -2.0], 0),  # acc 1
            row("mmlu_x/0", "reworded_1", [0, 1], [-9.0, -1.0], 0),  # the question again: left out
        ]
    )
    assert lm_eval_suite_metrics(config(task="mmlu_x"), items, records) == {"lm_eval_acc": 1.0}


def test_a_suite_from_a_task_folder_is_scored_with_that_folders_tasks(monkeypatch):
    """benchmark.include_path (a folder of the user's own task configs) is where the scoring reads the suite's
    tasks and groups too, not lm-eval's index alone."""
    asked = []

    def load_tasks(name, include_path=None):
        asked.append(include_path)
        return {"mmlu_x": ReportingTask("acc")}

    monkeypatch.setattr(lm_eval, "load_tasks", load_tasks)
    items = [item("mmlu_x/0", "mmlu_x", "original_0", ("A", "B"))]
    records = pd.DataFrame([row("mmlu_x/0", "original_0", [0, 1], [-1.0, -2.0], 0)])
    assert lm_eval_suite_metrics(config(task="mmlu_x", include_path="/my/tasks"), items, records) == {
        "lm_eval_acc": 1.0
    }
    assert asked and set(asked) == {"/my/tasks"}


class ShapedTask:
    """A stand-in lm-eval task of two documents in one shape (`context` a format of the document's number)."""

    OUTPUT_TYPE = "multiple_choice"
    VERSION = 1.0

    def __init__(self, context: str, choices: list[str]):
        self.context, self.choices = context, choices
        self.config = SimpleNamespace(test_split="test", validation_split=None, description="", target_delimiter=" ")
        self.eval_docs = [{"n": 0}, {"n": 1}]

    def test_docs(self):
        return self.eval_docs

    def doc_to_text(self, doc):
        return self.context.format(**doc)

    def doc_to_choice(self, doc):
        return self.choices

    def doc_to_target(self, doc):
        return 0


def test_each_task_of_a_suite_keeps_its_own_option_style(monkeypatch):
    """HellaSwag's endings complete their context, MMLU's listed options answer it: in one suite each keeps its own
    style, and the validity contract hears of the one that completes (`continuation_tasks` names it)."""
    from src.benchmarks import continuation_style, continuation_tasks, load_benchmark

    tasks = {
        "mmlu_x": ShapedTask("Q{n}?\nA. one\nB. two\nAnswer:", ["A", "B"]),
        "hella_x": ShapedTask("A man climbs {n} steps. He", ["falls.", "waits."]),
        "mmlu_y": ShapedTask("R{n}?\nA. one\nB. two\nAnswer:", ["A", "B"]),
    }
    monkeypatch.setattr(lm_eval, "load_tasks", lambda name, include_path=None: tasks)
    questions = load_benchmark("lm_eval", path=None, data_dir=".", options={"task": "suite"})
    styles = {q.id: q.metadata["choices"] for q in questions}
    assert styles == {
        "mmlu_x/0": "standalone",
        "mmlu_x/1": "standalone",
        "hella_x/0": "continuation",
        "hella_x/1": "continuation",
        "mmlu_y/0": "standalone",
        "mmlu_y/1": "standalone",
    }
    assert continuation_tasks(questions) == ["hella_x"] and continuation_style("lm_eval", questions)
    assert continuation_tasks(questions[:2]) == [] and not continuation_style("lm_eval", questions[:2])
    assert [q.subject for q in questions[:3]] == ["mmlu_x", "mmlu_x", "hella_x"]  # a suite's tasks are its subjects
    assert {len(q.metadata["lm_eval_config_hash"]) for q in questions} == {12}
    alone = {"mmlu_x": tasks["mmlu_x"]}
    monkeypatch.setattr(lm_eval, "load_tasks", lambda name, include_path=None: alone)
    single = load_benchmark("lm_eval", path=None, data_dir=".", options={"task": "mmlu_x"})
    assert [q.subject for q in single] == [None, None]  # one task: no subjects


@pytest.mark.parametrize("task", [None, "", [], ["arc_easy", 5], 5, {"a": 1}])
def test_a_suite_is_named_as_a_task_group_or_tag_or_a_list_of_them(monkeypatch, task):
    """benchmark.task names one task, group or tag, or a list of them; anything else is one line saying so."""
    from src.benchmarks import load_benchmark
    from src.common.errors import UserError

    monkeypatch.setattr(lm_eval, "load_tasks", lambda name, include_path=None: {})
    with pytest.raises(
        UserError, match=r"^config key benchmark.task: .* is not an lm-eval task name or a list of them"
    ):
        load_benchmark("lm_eval", path=None, data_dir=".", options={"task": task})


# -- variant sets per task: the rule of shown options, held for each task of a suite --------------------------------

MIXED = {
    "mmlu_x": ShapedTask("Q{n}?\nA. one\nB. two\nAnswer:", ["A", "B"]),
    "arc_x": ShapedTask("Question: What is {n}?\nAnswer:", ["one", "two"]),
}
LABELS_ONLY = {"mmlu_x": MIXED["mmlu_x"], "mmlu_y": ShapedTask("R{n}?\n(A) one\n(B) two\nAnswer:", ["A", "B"])}
RULE = "so every order or option set of a question is the same prompt and the set's consistency metrics would be"


def suite_questions(monkeypatch, tasks, name="suite"):
    from src.benchmarks import load_benchmark

    monkeypatch.setattr(lm_eval, "load_tasks", lambda name, include_path=None: tasks)
    return load_benchmark("lm_eval", path=None, data_dir=".", options={"task": name})


@pytest.mark.parametrize(
    ("tasks", "name", "variants", "scoring", "refusal"),
    [
        (LABELS_ONLY, "suite", "perm_cyclic", "cloze", None),  # listed options: every order is another prompt
        (LABELS_ONLY, "suite", "cora", "cloze", None),
        (LABELS_ONLY, "suite", "perm_cyclic", "generate", None),
        (MIXED, "suite", "original", "cloze", None),  # one list per question: valid for every task
        (MIXED, "suite", "perm_original", "cloze", None),
        (
            MIXED,
            "suite",
            "perm_cyclic",
            "cloze",
            "config keys benchmark.task=suite (its task arc_x), prompt=lm_eval and variants=perm_cyclic: lm-eval "
            f"scores arc_x's option texts after its own context, which lists no options, {RULE}",
        ),
        (
            {"arc_x": MIXED["arc_x"]},
            "arc_x",
            "cora",
            "cloze",
            "config keys benchmark.task=arc_x, prompt=lm_eval and variants=cora: lm-eval scores arc_x's option",
        ),
        (MIXED, "suite", "original", "cloze_shown", "config key scoring: lm_eval task arc_x's choices are option"),
    ],
)
def test_each_task_of_a_suite_is_held_to_the_rule_of_shown_options(
    monkeypatch, tasks, name, variants, scoring, refusal
):
    """Under prompt=lm_eval a label task lists its options again in each variant's order, a task of option texts
    shows none: a set that compares orders is refused for the latter alone, in one line naming it and what to use
    instead, with the words of the rule every run is held to (src/core/validity.py)."""
    from src.benchmarks import check_task_shapes
    from src.common.errors import UserError

    questions = suite_questions(monkeypatch, tasks, name)
    check = {"options": {"task": name}, "scoring": scoring, "variants": {"name": variants}}
    if refusal is None:
        check_task_shapes(questions, **check)
        return
    with pytest.raises(UserError) as refused:
        check_task_shapes(questions, **check)
    line = str(refused.value)
    assert line.startswith(refusal) and "\n" not in line
    assert ("use variants=original" in line) if "variants=" in refusal else line.endswith("use scoring=cloze")


def test_a_suites_shapes_are_read_from_the_documents_asked(monkeypatch):
    """A label task is one whose asked document lists its options, its choices their labels; a text task's choices
    are texts even when its numbers look like labels (ARC's 1-4 not listed in the context)."""
    tasks = {**MIXED, "numbers_x": ShapedTask("How many? {n}\nAnswer:", ["1", "2"])}
    questions = []
    for sub, task in tasks.items():
        asked, _ = lm_eval.task_questions(task, task.eval_docs, name=sub, split="test", ids=sub, subject=sub)
        questions += asked[1:]  # the second document of each: the shape is read from a document asked
    monkeypatch.setattr(lm_eval, "load_tasks", lambda name, include_path=None: tasks)
    assert lm_eval.task_shapes(questions, {"task": "suite"}) == {"mmlu_x": True, "arc_x": False, "numbers_x": False}


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        (["benchmark=lm_eval", "benchmark.task=suite", "prompt=lm_eval", "variants=perm_cyclic"], None),
        (["benchmark=lm_eval", "benchmark.task=[a,b]", "prompt=lm_eval", "variants=cora"], None),
        (["benchmark=lm_eval", "benchmark.task=suite", "prompt=cora", "variants=perm_cyclic"], "scoring=cloze and"),
        (["benchmark=arc_easy", "prompt=lm_eval", "variants=perm_cyclic"], "scoring=cloze and"),
        (["benchmark=lm_eval", "benchmark.task=5"], "benchmark.task: 5 is not an lm-eval task name or a list"),
        (["benchmark=lm_eval", "benchmark.task=[a,1]"], "benchmark.task: ['a', 1] is not an lm-eval task name"),
        (["benchmark=lm_eval", "benchmark.task=[]"], "benchmark.task: [] is not an lm-eval task name"),
        (["benchmark=lm_eval", "benchmark.task={a:1}"], "benchmark.task: {'a': 1} is not an lm-eval task name"),
    ],
)
def test_the_config_door_leaves_an_lm_eval_tasks_shapes_to_its_loading(overrides, refused):
    """Before a task loads its shape is unknown: under prompt=lm_eval scoring=cloze the rule of shown options waits
    for it (check_task_shapes), for any other prompt or benchmark it holds at once; benchmark.task is a name or a
    list of names, anything else one line at the config door."""
    from src.common.errors import UserError
    from src.config.checks import check_config
    from src.config.compose import compose_job

    config = compose_job([*overrides, "scoring=cloze"])
    if refused is None:
        check_config(config)
        return
    with pytest.raises(UserError, match="^config key") as error:
        check_config(config)
    assert refused in str(error.value) and "\n" not in str(error.value)


# -- a list of tasks, as simple_evaluate(tasks=[a, b]) ---------------------------------------------------------------


def test_a_list_of_tasks_loads_each_ones_tasks_and_groups_once(monkeypatch):
    t1, t2, t2_again, t3 = ReportingTask("acc"), ReportingTask("acc"), ReportingTask("acc"), ReportingTask("acc")
    loaded = {"a": {"t1": t1, "t2": t2}, "b": {"t2": t2_again, "t3": t3}}
    monkeypatch.setattr(lm_eval, "load_tasks", lambda name, include_path=None: loaded[name])
    monkeypatch.setitem(lm_eval._GROUPS, ("a", "dir"), {"a": "group a"})
    monkeypatch.setitem(lm_eval._GROUPS, ("b", "dir"), {"b_sub": "group b_sub"})
    tasks = lm_eval._tasks_of_list(("a", "b"), "dir")
    assert list(tasks) == ["t1", "t2", "t3"] and tasks["t2"] is t2  # a task named twice: once, as first loaded
    assert lm_eval._GROUPS[(("a", "b"), "dir")] == {"a": "group a", "b_sub": "group b_sub"}
    del lm_eval._GROUPS[(("a", "b"), "dir")]


def test_a_list_of_tasks_is_one_run_of_every_named_task_and_group(monkeypatch, suite):
    """`benchmark.task=[mmlu_x, arc_x]`: the questions of both, each its own subject, tagged with the list; the
    run's numbers a row per task and per group, none of them the run's own (no one name is the run)."""
    tasks = {"mmlu_x": MIXED["mmlu_x"], "arc_x": MIXED["arc_x"]}
    questions = suite_questions(monkeypatch, tasks, ["mmlu_x", "arc_x", "mmlu_x"])
    assert [q.id for q in questions] == ["mmlu_x/0", "mmlu_x/1", "arc_x/0", "arc_x/1"]
    assert {q.subject for q in questions} == {"mmlu_x", "arc_x"}
    assert {q.metadata["lm_eval_group"] for q in questions} == {"[mmlu_x,arc_x]"}
    monkeypatch.setattr(lm_eval, "load_tasks", lambda name, include_path=None: {**tasks, **REPORTING})
    monkeypatch.setitem(lm_eval._GROUPS, (("mmlu_x", "arc_x"), None), {"pair": WeightedGroup("mmlu_x", "arc_x")})
    items = [item("mmlu_x/0", "mmlu_x", "original_0", ("A", "B")), item("arc_x/0", "arc_x", "original_0", ("a", "bb"))]
    records = pd.DataFrame(
        [row("mmlu_x/0", "original_0", [0, 1], [-1.0, -2.0], 0), row("arc_x/0", "original_0", [0, 1], [-1.0, -4.0], 1)]
    )
    metrics = lm_eval_suite_metrics(config(task=["mmlu_x", "arc_x"]), items, records)
    assert metrics == {
        "lm_eval_acc/mmlu_x": 1.0,
        "lm_eval_acc/arc_x": 0.0,
        "lm_eval_acc_norm/arc_x": 0.0,
        "lm_eval_acc/pair": 0.5,
        "lm_eval_acc_norm/pair": 0.0,
    }


REPORTING = {"mmlu_x": ReportingTask("acc"), "arc_x": ReportingTask("acc", "acc_norm")}


class IndexTargets(ShapedTask):
    """Five documents whose target 3 lm-eval reads as the option index 3 (the text "4"), not the choice "3"."""

    def __init__(self):
        super().__init__("How many? {n}\nAnswer:", ["1", "2", "3", "4"])
        self.eval_docs = [{"n": n} for n in range(5)]

    def doc_to_target(self, doc):
        return 3


def test_the_index_target_warning_counts_every_document_and_names_the_first_three(monkeypatch, caplog):
    monkeypatch.setattr(lm_eval, "load_tasks", lambda name, include_path=None: {"idx": IndexTargets()})
    with caplog.at_level("WARNING", logger=lm_eval.__name__):
        lm_eval.load_lm_eval(path=None, data_dir=".", split=None, seed=0, options={"task": "idx"})
    [line] = [r.getMessage() for r in caplog.records if "reads as an option index" in r.getMessage()]
    assert line.startswith("lm_eval task idx: 5 of 5 documents") and line.endswith("; e.g. idx/0, idx/1, idx/2)")
