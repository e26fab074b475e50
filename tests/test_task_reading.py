"""How `benchmark=lm_eval` reads a task (src/benchmarks/lm_eval.py), with lm-eval's task and task manager stood in
for (the main suite runs without the bench extra; the lm-eval tier runs lm-eval itself). The mutation check
(docs/mutation.md) found these untested in the fast tier:

- the split a task's questions are labelled with is the one lm-eval evaluates: `test_split`, else
  `validation_split`;
- a task of benchmark.include_path is found without indexing lm-eval's registry;
- a Hub-backed task that cannot be built offline is one line saying how to fetch its data; a task of local files is
  never held up by a probe of the Hub's network, and its build error is lm-eval's own, in one line."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from src.benchmarks import hub_access, lm_eval as lm_eval_reader, load_benchmark
from src.common.errors import UserError


class StandInTask:
    OUTPUT_TYPE, multiple_input, VERSION = "multiple_choice", 0, 1.0

    def __init__(self, test_split, validation_split):
        self.config = SimpleNamespace(test_split=test_split, validation_split=validation_split, training_split=None)
        self.eval_docs = [{"q": "2+2?", "choices": ["3", "4"], "target": 1}]

    def doc_to_text(self, doc):
        return f"Question: {doc['q']}\nAnswer:"

    def doc_to_choice(self, doc):
        return doc["choices"]

    def doc_to_target(self, doc):
        return doc["target"]

    def dump_config(self):
        return {"task": "stand_in"}


@pytest.mark.parametrize(("test_split", "validation_split", "label"), [("test", "dev", "test"), (None, "dev", "dev")])
def test_questions_carry_the_split_lm_eval_evaluates(monkeypatch, test_split, validation_split, label):
    task = StandInTask(test_split, validation_split)
    monkeypatch.setattr(lm_eval_reader, "load_tasks", lambda name, include_path=None: {name: task})
    (question,) = load_benchmark("lm_eval", path=None, data_dir=".", options={"task": "stand_in"})
    assert question.split == label


@pytest.fixture
def unbuildable(monkeypatch):
    """load_tasks with a task manager whose build fails, the task's YAML as `config`; the Hub probes counted."""
    probes = []
    monkeypatch.setattr(lm_eval_reader, "lm_eval_or_error", lambda: None)
    monkeypatch.setattr(
        hub_access, "hub_unreachable", lambda: probes.append(1) or "no network: huggingface.co gaierror"
    )
    monkeypatch.setattr(hub_access, "offline_libraries", lambda on: contextlib.nullcontext())

    def load(config):
        def fail(name):
            raise OSError("could not fetch the data")

        manager = SimpleNamespace(task_index={"t": SimpleNamespace()}, load=fail, all_subtasks=["t"])
        monkeypatch.setattr(lm_eval_reader, "task_manager", lambda include_path, name: manager)
        monkeypatch.setattr(lm_eval_reader, "_task_config", lambda manager, name: config)
        with pytest.raises(UserError) as err:
            lm_eval_reader.load_tasks.__wrapped__("t")
        return str(err.value)

    load.probes = probes
    return load


def test_a_hub_task_that_cannot_be_built_offline_says_how_to_fetch_its_data(unbuildable, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    said = unbuildable({"dataset_path": "allenai/ai2_arc", "dataset_name": "ARC-Easy"})
    assert said == lm_eval_reader.unreachable_data_message("t", "allenai/ai2_arc", "ARC-Easy", "offline")
    assert not unbuildable.probes  # offline: nothing to probe


def test_a_hub_task_without_network_names_why(unbuildable, monkeypatch):
    for var in hub_access.OFFLINE_ENVS:
        monkeypatch.delenv(var, raising=False)
    said = unbuildable({"dataset_path": "allenai/ai2_arc"})
    assert said == lm_eval_reader.unreachable_data_message(
        "t", "allenai/ai2_arc", None, "no network: huggingface.co gaierror"
    )


def test_a_task_of_local_files_is_not_held_up_by_a_hub_probe_and_its_error_is_lm_evals(unbuildable, monkeypatch):
    for var in hub_access.OFFLINE_ENVS:
        monkeypatch.delenv(var, raising=False)
    for config in ({"dataset_path": "json"}, {"custom_dataset": "x", "dataset_path": "org/data"}, {}):
        said = unbuildable(config)
        assert said.startswith("lm_eval task t: lm-eval could not build it (OSError: could not fetch the data)")
    assert not unbuildable.probes


def test_a_task_in_the_users_folder_is_found_without_indexing_lm_evals_registry(monkeypatch):
    """Indexing lm-eval's ~200 registry folders takes 5-15 s on 2 cores: a task of benchmark.include_path is looked
    up in that folder alone; a registry task in the registry with the folder."""

    class StandInManager:
        def __init__(self, include_path, include_defaults):
            self.include_defaults = include_defaults
            self.task_index = {"mine": include_path, **({"arc_easy": None} if include_defaults else {})}

    monkeypatch.setattr(lm_eval_reader, "lm_eval_or_error", lambda: SimpleNamespace(TaskManager=StandInManager))
    lm_eval_reader._manager.cache_clear()
    try:
        mine, registry = (lm_eval_reader.task_manager("tasks/here", name) for name in ("mine", "arc_easy"))
        assert (mine.include_defaults, mine.task_index) == (False, {"mine": "tasks/here"})
        assert registry.include_defaults and "arc_easy" in registry.task_index
        assert lm_eval_reader.task_manager(None, "arc_easy").include_defaults
    finally:
        lm_eval_reader._manager.cache_clear()  # no stand-in left for a later test


@pytest.mark.parametrize(("tasks", "subject"), [({"grp_only": None}, "grp_only"), ({"grp": None}, None)])
def test_a_group_of_one_task_names_its_subject_as_a_group_of_many_does(monkeypatch, tasks, subject):
    """A group (or tag) is read as one benchmark whose subtasks are its subjects, even when it holds one task; a task
    asked by its own name has none (a mutant: `load_lm_eval`'s grouped test)."""
    task = StandInTask("test", None)
    monkeypatch.setattr(lm_eval_reader, "load_tasks", lambda name, include_path=None: dict.fromkeys(tasks, task))
    (question,) = load_benchmark("lm_eval", path=None, data_dir=".", options={"task": "grp"})
    assert question.subject == subject
    assert question.id == f"{next(iter(tasks))}/0"
