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


def config(scoring="cloze", prompt="lm_eval", benchmark="lm_eval", task="suite"):
    keys = {"task": task}
    return SimpleNamespace(
        benchmark=SimpleNamespace(name=benchmark, task=task, get=lambda key, default=None: keys.get(key, default)),
        prompt={"name": prompt},
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


class ShapedTask:
    """A stand-in lm-eval task of two documents in one shape (`context` a format of the document's number)."""

    OUTPUT_TYPE = "multiple_choice"
    VERSION = 1.0

    def __init__(self, context: str, choices: list[str]):
        self.context, self.choices = context, choices
        self.config = SimpleNamespace(test_split="test", validation_split=None, description="", target_delimiter=" ")
        self.eval_docs = [{"n": 0}, {"n": 1}]

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
