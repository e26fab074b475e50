"""Two rules of `benchmark=lm_eval` (src/benchmarks/lm_eval.py) that the mutation check (docs/mutation.md) found no fast
test checking, with lm-eval's task manager and task stood in for (the main suite runs without the bench extra):

- `benchmark.include_path` must be a folder (`~` expanded): anything else is one line before lm-eval is asked;
- a task whose few-shot pool is its evaluated split by lm-eval's fallback (no training, no validation documents)
  never shows a question among its own examples: lm-eval 0.4.13 leaves the evaluated document out only when
  `fewshot_split` is the test split, so the reader sets it so while the contexts are built, and puts it back."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from src.benchmarks import hub_access, lm_eval as lm_eval_reader
from src.common.errors import UserError


@pytest.fixture
def load_from(monkeypatch):
    """`load_from(include_path)`: load_tasks (uncached) of the task `mine`, with a stand-in task manager that
    builds it from local files; the folders the manager was asked for are in `load_from.folders`."""
    folders = []
    monkeypatch.setattr(lm_eval_reader, "lm_eval_or_error", lambda: None)
    monkeypatch.setattr(hub_access, "offline_libraries", lambda on: contextlib.nullcontext())
    monkeypatch.setattr(lm_eval_reader, "_task_config", lambda manager, name: {"dataset_path": "json"})

    def task_manager(include_path, name):
        folders.append(include_path)
        return SimpleNamespace(task_index={name: SimpleNamespace()}, load=lambda n: {"tasks": {n: "the task"}})

    monkeypatch.setattr(lm_eval_reader, "task_manager", task_manager)

    def load(include_path):
        return lm_eval_reader.load_tasks.__wrapped__("mine", include_path)

    load.folders = folders
    return load


def test_a_task_folder_is_read_with_its_home_expanded(load_from, tmp_path, monkeypatch):
    (tmp_path / "tasks").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path))
    assert load_from(str(tmp_path / "tasks")) == {"mine": "the task"}
    assert load_from("~/tasks") == {"mine": "the task"}
    assert load_from(None) == {"mine": "the task"}  # lm-eval's registry alone
    assert load_from.folders == [str(tmp_path / "tasks"), str(tmp_path / "tasks"), None]


@pytest.mark.parametrize("given", ["missing", "a_file.yaml"])
def test_an_include_path_that_is_no_folder_is_one_line_before_lm_eval_is_asked(load_from, tmp_path, given):
    (tmp_path / "a_file.yaml").write_text("task: mine\n", encoding="utf-8")
    with pytest.raises(UserError) as err:
        load_from(str(tmp_path / given))
    assert str(err.value) == (
        f"config key benchmark.include_path: {tmp_path / given} is not a folder; give the folder that holds your "
        "task YAMLs, or leave it null for lm-eval's registry"
    )
    assert load_from.folders == []


class PoolTask:
    """What the exclusion reads of an lm-eval task, and lm-eval 0.4.13's own rule (api/task.py `fewshot_context`):
    the sampler leaves the evaluated document out only when `fewshot_cfg.split` is the test split."""

    def __init__(self, *, fewshot_split=None, training=False, validation=False):
        self.fewshot_cfg = SimpleNamespace(split=fewshot_split)
        self.config = SimpleNamespace(test_split="test", validation_split="validation", training_split="train")
        self.training, self.validation = training, validation
        self.pool = ["Q0", "Q1", "Q2"]  # the fallback's pool: here the evaluated documents themselves

    def has_training_docs(self):
        return self.training

    def has_validation_docs(self):
        return self.validation

    def examples(self, doc):
        left_out = doc if self.fewshot_cfg.split == self.config.test_split else None
        return [d for d in self.pool if d != left_out]


def test_a_task_of_one_split_never_shows_a_question_among_its_own_examples():
    task = PoolTask()  # no training or validation documents: lm-eval falls back on the test split for examples
    assert "Q1" in task.examples("Q1")  # lm-eval alone
    with lm_eval_reader._own_document_left_out(task, "test"):
        assert [task.examples(q) for q in task.pool] == [["Q1", "Q2"], ["Q0", "Q2"], ["Q0", "Q1"]]
    assert task.fewshot_cfg.split is None  # put back: the task's config is lm-eval's, reused by later jobs


@pytest.mark.parametrize(
    "task",
    [PoolTask(training=True), PoolTask(validation=True), PoolTask(fewshot_split="train")],
    ids=["training-pool", "validation-pool", "named-pool"],
)
def test_a_task_whose_examples_come_from_another_split_keeps_its_pool(task):
    split = task.fewshot_cfg.split
    with lm_eval_reader._own_document_left_out(task, "test"):
        assert task.fewshot_cfg.split == split
    assert task.fewshot_cfg.split == split
