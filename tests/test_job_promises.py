"""What the job path promises a user, each promise with the failure or change that would break it, in-process on the
simulated backend and a tmp store: a run, a comparison run or a report that fails part-way ends FAILED (never
FINISHED, never left RUNNING); the job's stdout is its one JSON line whatever a library prints; the validity rules
refuse at every door (a job, an lm-eval suite's task, a sweep); what identifies a stored result follows the content
it depends on; `~`, relative and absolute paths mean the same; an lm-eval group's tasks are each identified."""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
from types import SimpleNamespace

import pytest

from tests.conftest import DATA_DIR, in_process_jobs, mlflow_runs, needs_data


class Boom(RuntimeError):
    """The failure a test injects at one stage."""


def fail(*args, **kwargs):
    raise Boom("injected failure")


def interrupt(*args, **kwargs):
    raise KeyboardInterrupt


# -- a job that fails part-way -----------------------------------------------------------------------------------------

# every stage after the job's run exists, in the order the job reaches them (src/job/runner.py run_job, log_job)
JOB_STAGES = [
    "src.job.runner.answer_and_measure",  # asking and measuring
    "src.metrics.compute_metrics",  # inside it: the metrics
    "src.job.runner.headline_metrics",  # the closing block's metrics, named in a tag
    "src.core.records.write_records",  # the records artifact
    "src.tracking.job_tracker.JobTracker.log",  # logging params, metrics and artifacts
    "src.tracking.store.log_artifacts",  # the last call of logging: the artifacts linked (or copied) into the store
]


@pytest.mark.promise(
    "docs/tracking.md", "a job that fails part-way leaves its run FAILED in MLflow, never FINISHED, none RUNNING"
)
@pytest.mark.parametrize("stage", JOB_STAGES)
def test_a_job_that_fails_at_any_stage_leaves_its_run_failed_never_finished_or_running(run_job_in, monkeypatch, stage):
    monkeypatch.setattr(stage, fail)
    with pytest.raises(Boom):
        run_job_in("model=simulated", "variants=cora", "limit=3")
    _, runs = mlflow_runs(run_job_in.store_uri)
    assert [r.info.status for r in runs] == ["FAILED"], stage


@pytest.mark.promise("docs/tracking.md", "a job stopped by Ctrl-C is marked KILLED in MLflow, never left RUNNING")
@pytest.mark.parametrize("stage", JOB_STAGES[::2])
def test_a_job_interrupted_at_any_stage_leaves_its_run_killed(run_job_in, monkeypatch, stage):
    monkeypatch.setattr(stage, interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_job_in("model=simulated", "variants=cora", "limit=3")
    _, runs = mlflow_runs(run_job_in.store_uri)
    assert [r.info.status for r in runs] == ["KILLED"], stage


@pytest.mark.promise("docs/validity.md", "a job refused or failing before any compute leaves no run at all")
@pytest.mark.parametrize("stage", ["src.job.runner.plan_job", "src.job.runner.job_questions_sized"])
def test_a_job_that_fails_before_its_run_exists_leaves_no_run(run_job_in, monkeypatch, stage):
    monkeypatch.setattr(stage, fail)
    with pytest.raises(Boom):
        run_job_in("model=simulated", "variants=cora", "limit=3")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=run_job_in.store_uri)
    experiments = client.search_experiments()
    assert not client.search_runs([e.experiment_id for e in experiments])


# -- a comparison (`python -m src.compare`) that fails part-way ------------------------------------------------------

# where `python -m src.compare` can fail: before the comparison run exists (reading, building, writing the report)
# and while it is logged (params, the report's snapshot, its artifacts)
GENERATED = re.compile(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC")  # the report's one time stamp
COMPARE_STAGES = [
    "src.compare.__main__.load_runs",
    "src.compare.__main__.build_sections",
    "src.compare.report._write_files",
    "mlflow.tracking.MlflowClient.log_param",
    "src.tracking.reads.shutil.copytree",
    "src.tracking.store.log_artifacts",
]


@pytest.fixture(scope="module")
def compared_store(tmp_path_factory, empty_mlflow_db):
    """Two simulated jobs' runs and a first report of them, whole, with its FINISHED comparison run: made once for
    the module, each test comparing again in a copy of the store's database (the runs' artifacts, only read, stay
    where the runs were logged)."""
    folder = tmp_path_factory.mktemp("two-runs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TQDM_DISABLE", "1")
        run = in_process_jobs(folder, empty_mlflow_db)
        run("model=simulated", "variants=cora", "limit=4")
        run("model=simulated", "model.success_rate=0.5", "variants=cora", "limit=4")
        assert compare_in_process(run.store_uri, folder / "report") == 0
    return folder


@pytest.fixture
def two_runs(compared_store, tmp_path):
    """A store of its own holding the two runs and the first comparison run; the first report in tmp_path/report."""
    shutil.copyfile(compared_store / "mlruns" / "mlflow.db", tmp_path / "mlflow.db")
    shutil.copytree(compared_store / "report", tmp_path / "report")
    store_uri = f"sqlite:///{tmp_path}/mlflow.db"
    # the report names the store it read: the copy's report is the first one, naming the copy
    first = tmp_path / "report" / "report.md"
    first.write_text(first.read_text().replace(f"sqlite:///{compared_store}/mlruns/mlflow.db", store_uri))
    return SimpleNamespace(store_uri=store_uri, report=tmp_path / "report")


def compare_in_process(store_uri: str, out) -> int:
    from src.compare.__main__ import main

    return main(["--experiment", "mcq-consistency", "--tracking-uri", store_uri, "--out", str(out), "--no-paired"])


@pytest.mark.promise(
    "docs/tracking.md", "a comparison that fails part-way leaves its run FAILED, never FINISHED or RUNNING"
)
@pytest.mark.parametrize(
    ("stage", "failure"),
    [(stage, fail) for stage in COMPARE_STAGES] + [(stage, interrupt) for stage in COMPARE_STAGES[3:]],
    ids=[f"{stage.rpartition('.')[2]}-error" for stage in COMPARE_STAGES]
    + [f"{stage.rpartition('.')[2]}-ctrl-c" for stage in COMPARE_STAGES[3:]],
)
def test_a_comparison_that_fails_at_any_stage_leaves_no_finished_or_running_comparison_run(
    two_runs, monkeypatch, stage, failure
):
    report = two_runs.report  # a first report, whole, and its FINISHED run
    first = (report / "report.md").read_text()
    monkeypatch.setattr(stage, failure)
    with pytest.raises((Boom, KeyboardInterrupt)):
        compare_in_process(two_runs.store_uri, report)
    monkeypatch.undo()
    _, comparisons = mlflow_runs(two_runs.store_uri, kind="comparison")
    statuses = sorted(r.info.status for r in comparisons)
    logged = stage.startswith(("mlflow", "src.tracking"))  # the run exists only once the report is written
    cut = "KILLED" if failure is interrupt else "FAILED"
    assert statuses == sorted(["FINISHED", *([cut] if logged else [])]), stage
    # a failure before the report is swapped in leaves the previous one whole, byte for byte (src/compare/report.py
    # `write`); one after it (logging the run) leaves the new one whole, which differs only in when it was generated
    now = (report / "report.md").read_text()
    if logged:
        now, first = (GENERATED.sub("generated (when)", text) for text in (now, first))
    assert now == first
    _, jobs = mlflow_runs(two_runs.store_uri)
    assert {r.info.status for r in jobs} == {"FINISHED"}  # the compared runs are only read


# -- stdout is the job's JSON line, whatever a library prints -----------------------------------------------------

NOISY_LIBRARY = """
import os, sys
print("noisy_lib: print at import")
os.write(1, b"noisy_lib: fd 1 at import\\n")
HELD = sys.__stdout__  # a stream taken at import, written to later


def chatter():
    print("noisy_lib: print while the job runs")
    HELD.write("noisy_lib: the held stream, unflushed\\n")
    os.write(1, b"noisy_lib: fd 1 while the job runs\\n")
"""


@pytest.fixture
def noisy_library(tmp_path, monkeypatch):
    """A library, imported while the job runs, that prints to stdout at import and when called, each of the three
    ways a library reaches stdout (print, a stream it held, fd 1); the job imports it where it asks its questions."""
    import importlib

    from src.job import runner

    (tmp_path / "noisy_lib.py").write_text(NOISY_LIBRARY)
    monkeypatch.syspath_prepend(str(tmp_path))
    asking = runner.answer_and_measure

    def answer_with_noise(*args, **kwargs):
        sys.modules.pop("noisy_lib", None)  # imported anew by each job
        importlib.import_module("noisy_lib").chatter()
        return asking(*args, **kwargs)

    monkeypatch.setattr(runner, "answer_and_measure", answer_with_noise)
    monkeypatch.delitem(sys.modules, "noisy_lib", raising=False)


def run_main(monkeypatch, argv: list[str]) -> int:
    """`python -m src.run ARGV` in this process: its exit code."""
    import signal

    from src import run

    monkeypatch.setattr(sys, "argv", [run.__file__, *argv])
    # Hydra finds conf/ next to the file of a task function run as a script (`python -m src.run`'s __main__)
    monkeypatch.setattr(run._hydra_main.__wrapped__, "__module__", "__main__")
    handler = signal.getsignal(signal.SIGTERM)
    # Hydra configures logging at job start, its console handlers bound to the sys.stderr of that moment: this
    # test's capture, closed when it ends. The loggers are put back as they were, so that a later test's log lines
    # do not meet a closed stream.
    loggers = [
        logging.getLogger(),
        *(lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)),
    ]
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate, lg.disabled) for lg in loggers]
    try:
        with pytest.raises(SystemExit) as done:
            run.main()
    finally:
        signal.signal(signal.SIGTERM, handler)
        for lg, handlers, level, propagate, disabled in saved:
            lg.handlers[:] = handlers
            lg.setLevel(level)
            lg.propagate, lg.disabled = propagate, disabled
    return int(done.value.code or 0)


@pytest.mark.promise("README.md", "a job prints one JSON line on stdout, and stdout holds nothing else")
@pytest.mark.parametrize("sweep", [False, True], ids=["job", "sweep"])
def test_stdout_holds_the_jobs_json_lines_alone_whatever_a_library_prints(
    run_job_in, noisy_library, monkeypatch, capfd, tmp_path, sweep
):
    jobs = ["-m", "variants=original,perm_cyclic"] if sweep else ["variants=original"]
    where = f"hydra.sweep.dir={tmp_path}/multirun" if sweep else f"hydra.run.dir={tmp_path}/single"
    store = [f"tracking.uri={run_job_in.store_uri}", f"cache.path={tmp_path}/cache.db", f"data_dir={DATA_DIR}"]
    code = run_main(monkeypatch, [*jobs, "model=simulated", "limit=3", *store, where])
    out, err = capfd.readouterr()
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == (2 if sweep else 1), out
    assert all(set(json.loads(line)) >= {"run_id", "mcqa"} for line in lines), out
    for said in ("print at import", "fd 1 at import", "print while the job runs", "the held stream", "fd 1 while"):
        assert f"noisy_lib: {said}" in err, f"the library's {said!r} went nowhere"


# -- every validity rule refuses at every door ------------------------------------------------------------------------

# each rule of docs/validity.md that the config alone decides: the overrides it holds in, the key whose second value
# breaks it (the first keeps to it), and the keys its one line names
CONFIG_RULES = {
    "cloze shows no options": (
        ["scoring=cloze"],
        "variants=original,perm_cyclic",
        "scoring=cloze and variants=perm_cyclic",
    ),
    "cloze does not sample": (["scoring=cloze_shown"], "temperature=0,0.5", "scoring=cloze_shown and temperature=0.5"),
    "greedy repetitions": (["temperature=0"], "repetitions=1,3", "repetitions=3 and temperature=0.0"),
    "NOTA on endings": (["benchmark=hellaswag"], "variants=perm_cyclic,cora", "benchmark=hellaswag and variants=cora"),
    "NOTA on declared endings": (
        ["benchmark=lm_eval", "benchmark.task=any_task", "benchmark.choices=continuation"],
        "variants=original,revas_nota",
        "benchmark=lm_eval benchmark.task=any_task and variants=revas_nota",
    ),
}


def breaking(rule: str) -> list[str]:
    """The overrides of one job that breaks `rule`."""
    held, axis, _ = CONFIG_RULES[rule]
    key, _, values = axis.partition("=")
    return ["model=simulated", "scoring=generate", "limit=3", *held, f"{key}={values.split(',')[1]}"]


def no_runs(store_uri: str) -> bool:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store_uri)
    return not client.search_runs([e.experiment_id for e in client.search_experiments()])


@pytest.mark.promise("docs/validity.md", "a configuration that breaks a validity rule is refused before any compute")
@pytest.mark.parametrize("rule", CONFIG_RULES)
def test_every_validity_rule_refuses_a_single_job_before_any_run(run_job_in, rule):
    from src.common.errors import UserError

    with pytest.raises(UserError, match=rf"^config keys {CONFIG_RULES[rule][2]}: ") as err:
        run_job_in(*breaking(rule))
    assert "\n" not in str(err.value)
    assert no_runs(run_job_in.store_uri)


@pytest.mark.promise("docs/validity.md", "a refused configuration is one error line naming its keys, exit 2")
@pytest.mark.parametrize("rule", CONFIG_RULES)
def test_every_validity_rule_refuses_the_command_line_in_one_line_and_exit_2(run_job_in, monkeypatch, capfd, rule):
    store = [f"tracking.uri={run_job_in.store_uri}", f"data_dir={DATA_DIR}"]
    code = run_main(monkeypatch, [*breaking(rule), *store])
    out, err = capfd.readouterr()
    assert code == 2 and out == ""
    assert err.startswith(f"error: config keys {CONFIG_RULES[rule][2]}: ") and err.count("\n") == 1, err
    assert no_runs(run_job_in.store_uri)


@pytest.mark.promise("docs/validity.md", "a sweep with a refused job prints one error line per such job and runs none")
@pytest.mark.parametrize("door", ["command line", "sweep pre-check"])
@pytest.mark.parametrize("rule", CONFIG_RULES)
def test_every_validity_rule_stops_a_sweep_before_its_first_job(run_job_in, monkeypatch, capfd, tmp_path, rule, door):
    from src.config import command_line

    held, axis, keys = CONFIG_RULES[rule]
    if door == "sweep pre-check":  # what a sweep file's own axes reach first (src/sweep/callback.py)
        monkeypatch.setattr(command_line, "check_command_line", lambda argv: None)
    store = [f"tracking.uri={run_job_in.store_uri}", f"data_dir={DATA_DIR}", f"hydra.sweep.dir={tmp_path}/sweep"]
    # the sweep's first job keeps to the rule and would run first; its second breaks it
    code = run_main(monkeypatch, ["-m", "model=simulated", "scoring=generate", "limit=3", *held, axis, *store])
    out, err = capfd.readouterr()
    assert code == 2 and out == "", err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    if door == "command line":
        assert errors == [err.rstrip("\n")] and errors[0].startswith(f"error: config keys {keys}: "), err
    else:
        assert errors[0].startswith("error: job ") and f": config keys {keys}: " in errors[0], err
        assert len(errors) == 2 and "refuses 1 job(s)" in errors[1], err
    assert no_runs(run_job_in.store_uri)
    assert not (tmp_path / "sweep" / "0").exists()  # the valid first job never started


# -- an lm-eval suite, through a stand-in of lm-eval's TaskManager (lm-eval itself is the opt-in lm-eval tier) ------


class StandInTask:
    """What the tool reads of an lm-eval ConfigurableTask: its documents, its Jinja-free doc_to_* and its few-shot
    pool; `shape` is MMLU's (`listed`: the context lists the options, the choices are labels), ARC's (`texts`) or
    HellaSwag's (`endings`: the context asks no question)."""

    OUTPUT_TYPE = "multiple_choice"
    VERSION = 1.0
    multiple_input = 0

    def __init__(self, shape: str, docs: list[dict], pool: list[dict] | None = None, description: str = ""):
        from types import SimpleNamespace

        self.shape, self.eval_docs, self.pool = shape, docs, pool or []
        self.config = SimpleNamespace(
            test_split="test",
            validation_split=None,
            training_split="train",
            description=description,
            target_delimiter=" ",
            fewshot_delimiter="\n\n",
            num_fewshot=None,
            gen_prefix=None,
        )
        self.fewshot_cfg = SimpleNamespace(split=None, sampler="default")

    def doc_to_text(self, doc):
        if self.shape == "listed":
            lines = "".join(f"\n{label}. {text}" for label, text in zip("ABCD", doc["options"]))
            return f"{doc['q']}{lines}\nAnswer:"
        return f"Question: {doc['q']}\nAnswer:" if self.shape == "texts" else doc["q"]

    def doc_to_choice(self, doc):
        return list("ABCD"[: len(doc["options"])]) if self.shape == "listed" else doc["options"]

    def doc_to_target(self, doc):
        return doc["answer"]

    def doc_to_prefix(self, doc):
        return ""

    def test_docs(self):
        return self.eval_docs

    def fewshot_docs(self):
        return self.pool

    def has_training_docs(self):
        return True

    def has_validation_docs(self):
        return False

    def set_fewshot_seed(self, seed):
        self.seed = seed

    def fewshot_context(self, doc, shots, gen_prefix=None, chat_template=None, **chat):
        examples = "".join(f"{self.doc_to_text(d)} {self.doc_to_choice(d)[d['answer']]}\n\n" for d in self.pool[:shots])
        head = f"{self.config.description}\n\n" if self.config.description else ""
        return head + examples + self.doc_to_text(doc)

    def aggregation(self):
        return {"acc": None, "acc_norm": None}


def docs_of(shape: str, n: int = 3) -> list[dict]:
    question = {"listed": "Which is {i}?", "texts": "Which is {i}?", "endings": "A cat sits on mat {i}. It"}[shape]
    return [
        {"q": question.format(i=i), "options": [f"w{i}", f"x{i}", f"y{i}", f"z{i}"], "answer": i % 4} for i in range(n)
    ]


class StandInGroup:
    """lm-eval's Group: its `aggregate` over its tasks, weighted by size."""

    def __init__(self, *tasks: str):
        self.tasks = tasks

    def aggregate(self, reported):
        have = [t for t in self.tasks if "acc,none" in reported.get(t, {})]
        sizes = [reported[t]["sample_len"] for t in have]
        return {"acc,none": sum(reported[t]["acc,none"] * n for t, n in zip(have, sizes)) / max(1, sum(sizes))}


class StandInManager:
    """lm-eval's TaskManager over `SUITE`: a task by its name, a group (`mixed_suite`) as its tasks and itself."""

    def __init__(self, include_path=None, include_defaults=True):
        from types import SimpleNamespace

        self.task_index = {name: SimpleNamespace(yaml_path=None) for name in [*SUITE.tasks, *SUITE.groups]}
        self.all_subtasks = list(self.task_index)

    def load(self, name):
        members = SUITE.groups.get(name)
        if members is None:
            return {"tasks": {name: SUITE.tasks[name]}, "groups": {}}
        return {"tasks": {m: SUITE.tasks[m] for m in members}, "groups": {name: StandInGroup(*members)}}


class Suite:
    tasks: dict[str, StandInTask] = {}
    groups: dict[str, tuple[str, ...]] = {}


SUITE = Suite()


@pytest.fixture
def stand_in_lm_eval(monkeypatch):
    """`benchmark=lm_eval` over stand-in tasks: `listed_x` (MMLU's shape), `texts_x` (ARC's), `endings_x`
    (HellaSwag's) and the group `mixed_suite` of all three; lm-eval's own caches emptied before and after."""
    from types import SimpleNamespace

    from src.benchmarks import lm_eval

    tasks = SimpleNamespace(TaskManager=StandInManager)
    monkeypatch.setitem(sys.modules, "lm_eval", SimpleNamespace(tasks=tasks))
    monkeypatch.setitem(sys.modules, "lm_eval.tasks", tasks)
    monkeypatch.setitem(sys.modules, "lm_eval.defaults", SimpleNamespace(DEFAULT_OTHER_SEED=1234))
    monkeypatch.setattr(
        SUITE,
        "tasks",
        {
            shape + "_x": StandInTask(shape, docs_of(shape), pool=docs_of(shape, 2))
            for shape in ("listed", "texts", "endings")
        },
    )
    monkeypatch.setattr(SUITE, "groups", {"mixed_suite": ("listed_x", "texts_x", "endings_x")})

    def forget():
        lm_eval.load_tasks.cache_clear()
        lm_eval._manager.cache_clear()
        lm_eval._GROUPS.clear()

    forget()
    yield SUITE
    forget()


LM_EVAL = ["model=simulated", "benchmark=lm_eval", "prompt=lm_eval", "limit=3"]


# each rule an lm-eval task's shape decides, once its documents load (before the model): the overrides, the line
SUITE_RULES = {
    "a group's text task shows no options": (
        ["benchmark.task=mixed_suite", "scoring=cloze", "variants=perm_cyclic"],
        "config keys benchmark.task=mixed_suite (its task texts_x), prompt=lm_eval and variants=perm_cyclic: "
        "lm-eval scores texts_x's option texts after its own context",
    ),
    "a list's text task shows no options": (
        ["benchmark.task=[listed_x,texts_x]", "scoring=cloze", "variants=revas_reorder"],
        "config keys benchmark.task=[listed_x,texts_x] (its task texts_x), prompt=lm_eval and variants=revas_reorder:",
    ),
    "a text task shows no options": (
        ["benchmark.task=texts_x", "scoring=cloze", "variants=perm_cyclic"],
        "config keys benchmark.task=texts_x, prompt=lm_eval and variants=perm_cyclic: ",
    ),
    "a group's endings take no NOTA": (
        ["benchmark.task=mixed_suite", "scoring=cloze", "variants=cora"],
        "config keys benchmark=lm_eval benchmark.task=mixed_suite (its task endings_x) and variants=cora: ",
    ),
    "a list's endings take no NOTA under another prompt": (
        ["benchmark.task=[listed_x,endings_x]", "prompt=cora", "scoring=generate", "variants=revas_nota"],
        "config keys benchmark=lm_eval benchmark.task=[listed_x,endings_x] (its task endings_x) and "
        "variants=revas_nota: ",
    ),
    "endings take no NOTA": (
        ["benchmark.task=endings_x", "scoring=cloze", "variants=cora"],
        "config keys benchmark=lm_eval benchmark.task=endings_x and variants=cora: ",
    ),
    "a list of one is its task": (
        ["benchmark.task=[endings_x]", "scoring=cloze", "variants=cora"],
        "config keys benchmark=lm_eval benchmark.task=endings_x and variants=cora: ",
    ),
    "a text task is asked as lm-eval asks it": (
        ["benchmark.task=[listed_x,texts_x]", "scoring=cloze_shown", "variants=original"],
        "config key scoring: lm_eval task texts_x's choices are option texts that lm-eval scores after its own context",
    ),
}


@pytest.mark.promise("docs/validity.md", "an lm-eval suite is held to the validity rules per task, naming the task")
@pytest.mark.parametrize("rule", SUITE_RULES)
def test_every_per_task_rule_refuses_an_lm_eval_job_naming_its_task_before_any_run(
    run_job_in, stand_in_lm_eval, monkeypatch, rule
):
    from src.common.errors import UserError
    from src.job import runner

    overrides, line = SUITE_RULES[rule]
    monkeypatch.setattr(runner, "answer_and_measure", fail)  # nothing is asked
    with pytest.raises(UserError) as err:
        run_job_in(*LM_EVAL, *overrides)
    assert str(err.value).startswith(line) and "\n" not in str(err.value), str(err.value)
    assert no_runs(run_job_in.store_uri)


@pytest.mark.promise("docs/validity.md", "a task that lists its options is asked in every order under every scoring")
@pytest.mark.parametrize("scoring", ["cloze", "cloze_shown", "logprob"])
def test_a_task_that_lists_its_options_runs_every_order_even_in_a_list(run_job_in, stand_in_lm_eval, scoring):
    result = run_job_in(*LM_EVAL, "benchmark.task=[listed_x]", f"scoring={scoring}", "variants=perm_cyclic")
    _, (run,) = mlflow_runs(run_job_in.store_uri)
    assert run.info.status == "FINISHED" and result.metrics["n_questions"] == 3


@pytest.mark.promise("docs/validity.md", "in a sweep, an lm-eval job refused per task is one error line, the rest run")
def test_a_sweep_refuses_the_lm_eval_job_whose_task_breaks_a_rule_and_runs_the_others(
    run_job_in, stand_in_lm_eval, monkeypatch, capfd, tmp_path
):
    store = [f"tracking.uri={run_job_in.store_uri}", f"data_dir={DATA_DIR}", f"hydra.sweep.dir={tmp_path}/sweep"]
    argv = ["-m", *LM_EVAL, "benchmark.task=listed_x,texts_x", "scoring=cloze", "variants=perm_cyclic", *store]
    code = run_main(monkeypatch, argv)
    out, err = capfd.readouterr()
    errors = [line for line in err.splitlines() if line.startswith("error: job #1 ")]
    assert code == 2 and len(out.splitlines()) == 1, err
    assert (
        len(errors) == 1 and "config keys benchmark.task=texts_x, prompt=lm_eval and variants=perm_cyclic" in errors[0]
    )
    _, runs = mlflow_runs(run_job_in.store_uri)
    assert [(r.data.tags["lm_eval_task"], r.info.status) for r in runs] == [("listed_x", "FINISHED")]


# -- what identifies a stored result follows every content it depends on -------------------------------------------


def one_char_changed(path, old: str, new: str) -> None:
    """`path` with its first `old` made `new`, of the same length: its size is unchanged."""
    text = path.read_text()
    assert len(old) == len(new) and old in text
    changed = text.replace(old, new, 1)
    path.write_text(changed)
    assert len(changed) == len(text)


@pytest.fixture
def own_mmlu(tmp_path):
    """A data folder holding one MMLU subject, its test and dev (few-shot) files, to be edited."""
    import shutil

    for split in ("test", "dev"):
        (tmp_path / "data" / "mmlu" / split).mkdir(parents=True)
        name = f"abstract_algebra_{split}.csv"
        shutil.copyfile(DATA_DIR / "mmlu" / split / name, tmp_path / "data" / "mmlu" / split / name)
    return tmp_path / "data"


@needs_data
@pytest.mark.promise(
    "docs/tracking.md", "a finished run is reused only with the same data, few-shot documents included"
)
def test_a_few_shot_document_changed_by_one_character_runs_the_job_again_uncached(run_job_in, own_mmlu, capsys):
    job = ["model=simulated", "benchmark=mmlu", "prompt=plain", f"data_dir={own_mmlu}", "fewshot=2", "limit=3"]
    first = run_job_in(*job)
    assert run_job_in(*job).skipped  # the same files: the finished run is the result
    one_char_changed(own_mmlu / "mmlu" / "dev" / "abstract_algebra_dev.csv", "Find all c", "Find all d")
    again = run_job_in(*job)
    assert not again.skipped and again.run_id != first.run_id
    assert again.metrics["cache_hit_rate"] == 0.0  # every prompt shows the corrected example: no old answer
    assert "benchmark data changed since run" in capsys.readouterr().err


@needs_data
@pytest.mark.promise("docs/tracking.md", "a corrected question never gets an old answer, whatever its length")
def test_a_benchmark_file_changed_by_one_character_is_other_data_and_other_cache_keys(run_job_in, own_mmlu):
    job = ["model=simulated", "benchmark=mmlu", f"data_dir={own_mmlu}", "limit=3"]
    first = run_job_in(*job)
    test_file = own_mmlu / "mmlu" / "test" / "abstract_algebra_test.csv"
    first_line = test_file.read_text().splitlines()[0]
    one_char_changed(test_file, first_line[:4], first_line[:3] + ("x" if first_line[3] != "x" else "y"))
    again = run_job_in(*job)
    assert not again.skipped and again.run_id != first.run_id
    # the two unchanged questions keep their answers; the corrected one is asked anew (each asked once, cora: 1+)
    assert 0 < again.metrics["cache_hit_rate"] < 1


# -- `~`, relative and absolute paths mean the same ----------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch, own_mmlu):
    """A home folder that is also the working folder, holding the MMLU subject as `data/`."""
    import shutil

    home = tmp_path / "home"
    shutil.copytree(own_mmlu, home / "data")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home)
    return home


def path_forms(home) -> dict[str, dict[str, str]]:
    """The same three places (the data folder, the store's folder, the response cache) written three ways (quoted:
    Hydra's grammar takes `~` in a quoted value)."""
    return {
        "absolute": {"data": f"{home}/data", "store": f"/{home}/store", "cache": f"{home}/cache/c.db"},
        "home": {"data": "'~/data'", "store": "'sqlite:///~/store", "cache": "'~/cache/c.db'"},
        "relative": {"data": "data", "store": "sqlite:///store", "cache": "cache/c.db"},
    }


@needs_data
@pytest.mark.promise(
    "docs/configuration.md", "a path with ~, relative or absolute is the same place: same run, same files"
)
def test_a_path_written_with_home_relative_or_absolute_is_the_same_store_cache_and_data(run_job_in, home):
    results = {}
    for resume, (form, where) in zip([True, True, False], path_forms(home).items()):
        store = f"sqlite://{where['store']}" if form == "absolute" else where["store"]
        quote = "'" if form == "home" else ""
        results[form] = run_job_in(
            "model=simulated",
            "benchmark=mmlu",
            "limit=3",
            f"data_dir={where['data']}",
            f"tracking.uri={store}/mlflow.db{quote}",
            f"cache.path={where['cache']}",
            f"resume={str(resume).lower()}",
        )
    assert results["home"].skipped and results["home"].run_id == results["absolute"].run_id  # the same store, run
    assert not results["relative"].skipped  # resume=false: asked again, every answer from the same cache
    assert results["relative"].metrics["cache_hit_rate"] == 1.0
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*.db")) == ["cache/c.db", "store/mlflow.db"]
    assert not (home / "~").exists()


# -- lm-eval task identity and groups -------------------------------------------------------------------------------


def loaded(name: str):
    """The questions of lm-eval task or group `name` as a job loads them, read anew (lm-eval's caches emptied)."""
    from src.benchmarks import lm_eval, load_benchmark

    lm_eval.load_tasks.cache_clear()
    lm_eval._manager.cache_clear()
    lm_eval._GROUPS.clear()
    return load_benchmark("lm_eval", path=None, data_dir=".", options={"task": name})


def identity(questions) -> tuple[str, str]:
    """(data identity, lm_eval_config_hash tag) of an lm-eval run's questions."""
    from src.benchmarks import task_tags
    from src.core.questions import benchmark_identity

    return benchmark_identity(questions), task_tags(questions)["lm_eval_config_hash"]


@pytest.mark.promise("docs/configuration.md", "a group's tasks are its subjects, each question named by its own task")
def test_each_task_of_a_group_is_identified_by_its_own_name(run_job_in, stand_in_lm_eval):
    from src.benchmarks import task_tags

    questions = loaded("mixed_suite")
    assert [q.metadata["lm_eval_task"] for q in questions] == ["listed_x"] * 3 + ["texts_x"] * 3 + ["endings_x"] * 3
    assert [q.subject for q in questions] == [q.metadata["lm_eval_task"] for q in questions]
    assert len({q.id for q in questions}) == 9 and all(q.id.startswith(f"{q.subject}/") for q in questions)
    assert task_tags(questions)["lm_eval_task"] == "mixed_suite"
    result = run_job_in(*LM_EVAL, "benchmark.task=mixed_suite", "scoring=cloze", "variants=original")
    for task in ("listed_x", "texts_x", "endings_x"):  # each task its own row, and the group its headline
        assert {f"mcqa/{task}", f"lm_eval_acc/{task}", f"lm_eval_acc_norm/{task}"} <= set(result.metrics)
    assert result.metrics["lm_eval_acc"] == pytest.approx(result.metrics["accuracy"], abs=1e-12)


# one change to a task, each of the same length as what it replaces: its identity must change with it
TASK_CHANGES = {
    "its name": lambda task: None,
    "a few-shot document": lambda task: task.pool[0].update(q=task.pool[0]["q"].replace("0", "9")),
    "its description": lambda task: setattr(task.config, "description", "Answe:."),
    "its target delimiter": lambda task: setattr(task.config, "target_delimiter", "\t"),
    "its few-shot delimiter": lambda task: setattr(task.config, "fewshot_delimiter", "\n\t"),
    "an evaluated document": lambda task: task.eval_docs[2].update(q=task.eval_docs[2]["q"].replace("2", "7")),
    "an option's text": lambda task: task.eval_docs[1]["options"].__setitem__(0, "v1"),
    "its answer key": lambda task: task.eval_docs[0].update(answer=1),
}


@pytest.mark.promise(
    "docs/configuration.md", "an lm-eval task's identity is what it asks: any change, even one character"
)
@pytest.mark.parametrize("change", TASK_CHANGES)
def test_two_different_tasks_never_share_an_identity(stand_in_lm_eval, change):
    import copy

    original = stand_in_lm_eval.tasks["texts_x"]
    original.config.description = "Answer:"
    twin = copy.deepcopy(original)
    name = "texts_y" if change == "its name" else "texts_x"
    before = identity(loaded("texts_x"))
    assert identity(loaded("texts_x")) == before  # read again, unchanged: the same identity
    TASK_CHANGES[change](twin)
    stand_in_lm_eval.tasks[name] = twin
    stand_in_lm_eval.groups["mixed_suite"] = ("listed_x", name, "endings_x")
    after = identity(loaded(name))
    assert after[0] != before[0] and after[1] != before[1], change
    if change == "its name":
        return
    # in a group, the changed task changes the group's identity too, and only that task's questions
    stand_in_lm_eval.tasks[name] = original
    group_before = loaded("mixed_suite")
    stand_in_lm_eval.tasks[name] = twin
    group_after = loaded("mixed_suite")
    assert identity(group_after) != identity(group_before)
    from src.core.questions import question_identity

    moved = {
        a.metadata["lm_eval_task"]
        for a, b in zip(group_before, group_after)
        if question_identity(a) != question_identity(b)
    }
    assert moved == {name}, change


@pytest.mark.promise("docs/configuration.md", "a corrected few-shot file of an lm-eval task reuses no stored answer")
def test_a_task_changed_by_one_character_runs_the_suite_again_and_keeps_the_other_tasks_answers(
    run_job_in, stand_in_lm_eval
):
    job = [*LM_EVAL, "benchmark.task=mixed_suite", "scoring=cloze", "variants=original"]
    first = run_job_in(*job)
    assert run_job_in(*job).skipped
    task = stand_in_lm_eval.tasks["texts_x"]
    task.pool[1].update(q=task.pool[1]["q"].replace("1", "8"))  # the pool lm-eval hands over, one character
    from src.benchmarks import lm_eval

    lm_eval.load_tasks.cache_clear()  # a new process reads the task anew
    again = run_job_in(*job)
    assert not again.skipped and again.run_id != first.run_id
    assert again.metrics["cache_hit_rate"] == pytest.approx(6 / 9, abs=1e-9)  # texts_x's 3 questions asked anew


@pytest.mark.promise(
    "docs/configuration.md", "another limit of an lm-eval group keeps every stored answer it asks again"
)
def test_a_smaller_limit_of_a_group_answers_from_the_cache(run_job_in, stand_in_lm_eval):
    job = ["model=simulated", "benchmark=lm_eval", "prompt=lm_eval", "benchmark.task=mixed_suite", "scoring=cloze"]
    run_job_in(*job, "limit=3")
    fewer = run_job_in(*job, "limit=2")
    assert not fewer.skipped and fewer.metrics["n_questions"] == 6 and fewer.metrics["cache_hit_rate"] == 1.0


@pytest.mark.promise("docs/tracking.md", "a prompt template changed by one character is other work: no stored answer")
def test_a_template_changed_by_one_character_runs_again_uncached(run_job_in):
    from src.config.compose import compose_job

    template = str(compose_job(["prompt=plain"]).prompt.template)
    assert "Answer:" in template
    changed = template.replace("Answer:", "Answex:", 1)
    override = f"prompt.template='{changed}'"  # real line breaks, as the shell's $'...' passes them
    assert str(compose_job(["prompt=plain", override]).prompt.template) == changed  # one character, same length
    job = ["model=simulated", "prompt=plain", "limit=3"]
    first = run_job_in(*job)
    again = run_job_in(*job, override)
    assert not again.skipped and again.run_id != first.run_id
    assert again.metrics["cache_hit_rate"] == 0.0
