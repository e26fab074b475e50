"""`benchmark=lm_eval` against lm-evaluation-harness itself (the opt-in lm_eval tier: `pip install -e ".[bench]" &&
python -m pytest -n 0 tests/test_lm_eval_tasks.py --run-lm-eval`; tests/conftest.py OPT_IN_TIERS).

- the committed test task (tests/data/lm_eval_task: a YAML, its JSONL, a Python doc_to_choice) gives the questions
  of its file, and every prompt and continuation `prompt=lm_eval` makes of them is the request lm-eval's task
  manager builds (zero-shot and with three solved examples); it runs with variants=cora, perm_cyclic and 5
  repetitions at temperature 0.7 (simulated model);
- four registry tasks (arc_easy, arc_challenge, commonsense_qa, hellaswag) read through their own YAML with the data
  overridden to the files in ../shared/data (a tmp include_path, written here) build lm-eval's requests exactly,
  and the same questions as the tool's own loaders of those files; hellaswag's options complete their context, so
  the validity contract refuses its NOTA sets and accepts the others;
- HellaSwag and WinoGrande rows (tests/test_benchmark_readings.py) read by lm-eval's own process_docs and
  winogrande functions as the tool reads them, from the Hub's rows and from the text file made of them;
- on the test task, SmolLM2-135M answered through `prompt=lm_eval scoring=cloze` takes every decision lm-eval's
  HFLM takes on the same float weights, each option's log-likelihood within LOGLIK_TOLERANCE;
- a suite (an MMLU slice, ARC-Challenge, HellaSwag and the described test task as one group) asked in one job under
  `prompt=lm_eval scoring=cloze` measures what lm-eval's simple_evaluate measures on the same group, the group's
  numbers included; the scorings and variant sets a task of it cannot take are refused naming the task.
"""

from __future__ import annotations

import functools
import json
import math
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from src.answer_formats import FORMATS
from src.backends.text import continuation_text
from src.benchmarks import lm_eval_contexts, load_benchmark, load_fewshot_pool
from src.benchmarks.lm_eval import load_task, load_tasks
from src.common.errors import UserError
from src.config.compose import compose_job
from src.core.prompts import PromptTemplate, labels_for, render
from src.variants import make_variants

from .conftest import DATA_DIR, REPO, mlflow_runs, needs_data

pytestmark = pytest.mark.lm_eval

TASK_DIR = REPO / "tests" / "data" / "lm_eval_task"
TEST_TASK = {"task": "mcq_test_task", "include_path": str(TASK_DIR)}
# float32 on both sides, the same weights and tokens: what is left is the order of float sums (our packed
# batches against HFLM's padded ones); measured max 1.3e-5 (2026-11-26, load average ~11 on 2 vCPUs)
LOGLIK_TOLERANCE = 1e-4


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    """The test task's data_files are relative to the repository root, where lm-eval resolves them (the cwd)."""
    pytest.importorskip("lm_eval", reason='lm-eval is not installed: pip install -e ".[bench]"')
    monkeypatch.chdir(REPO)


@functools.lru_cache(maxsize=1)
def lm_eval_prompt() -> PromptTemplate:
    return PromptTemplate.from_config(compose_job(["prompt=lm_eval"]).prompt)


def original(question):
    return make_variants({"name": "original"}, question, seed=0)[0]


def lm_eval_requests(task, doc, shots: int = 0) -> list[tuple[str, str]]:
    """(context, continuation) of each loglikelihood request lm-eval makes of `doc`, as its model scores them
    (`TemplateLM._encode_pair` moves the context's trailing whitespace into the continuation)."""
    context = task.fewshot_context(doc, shots)
    pairs = [tuple(r.arguments) for r in task.construct_requests(doc=doc, ctx=context, metadata=("t", 0, 1))]
    return [(ctx.rstrip(), ctx[len(ctx.rstrip()) :] + cont) for ctx, cont in pairs]


def our_requests(question, *, scoring: str, fewshot=()) -> list[tuple[str, str]]:
    """(prompt, continuation) of each option (cloze) or label (logprob) as `prompt=lm_eval` asks them."""
    template = lm_eval_prompt()
    if scoring == "cloze":  # the request the job sends (under prompt=lm_eval: lm-eval's own pair)
        r = FORMATS["mcq"].request(template, question, original(question), seed=0, fewshot=fewshot, scoring=scoring)
        return [(r.prompt, continuation_text(r.prompt, option, r.continuation_prefix)) for option in r.options]
    prompt = render(template, question, original(question), scoring=scoring, fewshot=fewshot)
    return [(prompt, " " + label) for label in labels_for(question.n_options, template.label_style)]


def test_the_test_task_gives_its_files_questions():
    questions = load_benchmark("lm_eval", path=None, data_dir=".", options=TEST_TASK)
    rows = [json.loads(line) for line in (TASK_DIR / "mcq_test_task.jsonl").read_text().splitlines()]
    kept = [r for r in rows if r["answer"] < len(r["options"])]
    assert len(kept) == len(rows) - 1 == 12
    assert [(q.question, list(q.options), q.answer) for q in questions] == [
        (r["question"], r["options"], r["answer"]) for r in kept
    ]
    assert {q.metadata["lm_eval_skipped"] for q in questions} == {1}
    assert {q.metadata["choices"] for q in questions} == {"standalone"}
    pool = load_fewshot_pool("lm_eval", data_dir=".", options=TEST_TASK)
    shots = [json.loads(line) for line in (TASK_DIR / "mcq_test_task_fewshot.jsonl").read_text().splitlines()]
    assert [(q.question, list(q.options), q.answer, q.split) for q in pool] == [
        (r["question"], r["options"], r["answer"], "fewshot") for r in shots
    ]


def test_the_test_tasks_questions_are_the_requests_lm_eval_builds():
    task = load_task("mcq_test_task", str(TASK_DIR))
    questions = {q.id: q for q in load_benchmark("lm_eval", path=None, data_dir=".", options=TEST_TASK)}
    docs = list(task.eval_docs)
    assert len(docs) == 13
    for i, doc in enumerate(docs):
        if f"mcq_test_task/{i}" not in questions:  # the document whose target lm-eval scores as gold -100
            assert task.doc_to_target(doc) >= len(task.doc_to_choice(doc))
            continue
        question = questions[f"mcq_test_task/{i}"]
        assert our_requests(question, scoring="cloze") == lm_eval_requests(task, doc)
        assert question.answer == task.doc_to_target(doc)


def test_the_data_identity_is_what_is_asked_not_the_yamls_text(tmp_path):
    """A comment in the task's YAML keeps every question's identity; a corrected few-shot file changes them all."""
    from src.core.questions import benchmark_identity

    def identity(folder):
        load_tasks.cache_clear()
        return benchmark_identity(load_benchmark("lm_eval", path=None, data_dir=".", options=folder))

    for name in ("mcq_test_task.yaml", "mcq_test_task_fns.py", "mcq_test_task_fewshot.jsonl"):
        text = (TASK_DIR / name).read_text()
        (tmp_path / name).write_text(
            text.replace("tests/data/lm_eval_task/mcq_test_task.jsonl", str(TASK_DIR / "mcq_test_task.jsonl")).replace(
                "tests/data/lm_eval_task/mcq_test_task_fewshot.jsonl", str(tmp_path / "mcq_test_task_fewshot.jsonl")
            )
        )
    options = {"task": "mcq_test_task", "include_path": str(tmp_path)}
    before = identity(options)
    (tmp_path / "mcq_test_task.yaml").write_text("# a comment\n" + (tmp_path / "mcq_test_task.yaml").read_text())
    assert identity(options) == before
    shots = tmp_path / "mcq_test_task_fewshot.jsonl"
    shots.write_text(shots.read_text().replace("Loud", "Freezing"))
    assert identity(options) != before
    load_tasks.cache_clear()


def test_a_yaml_that_does_not_parse_is_one_line_with_the_file_and_the_parsers_message(tmp_path):
    (tmp_path / "broken.yaml").write_text("task: broken\ndoc_to_text: [unclosed\n")
    with pytest.raises(UserError) as err:
        load_benchmark("lm_eval", path=None, data_dir=".", options={"task": "broken", "include_path": str(tmp_path)})
    line = str(err.value)
    assert "\n" not in line and f"{tmp_path / 'broken.yaml'}: " in line and "while parsing" in line, line


def test_the_described_task_sends_lm_evals_own_requests():
    """prompt=lm_eval with variants=original: every context and continuation is the one lm-eval's
    build_all_requests makes (description, fewshot_split, its sampler at seed 1234), zero-shot and 3-shot."""
    options = {"task": "mcq_test_task_described", "include_path": str(TASK_DIR)}
    for shots in (0, 3):
        questions = lm_eval_contexts(
            load_benchmark("lm_eval", path=None, data_dir=".", options=options), k=shots, options=options
        )
        task = load_task("mcq_test_task_described", str(TASK_DIR))
        task.set_fewshot_seed(1234)
        task.set_config("num_fewshot", shots)
        task.build_all_requests()
        theirs = {}
        for instance in task.instances:
            theirs.setdefault(instance.doc_id, []).append(tuple(instance.arguments))
        assert len(questions) == 12
        for q in questions:
            assert our_requests(q, scoring="cloze") == theirs[q.metadata["lm_eval_doc"]], (shots, q.id)
            assert theirs[q.metadata["lm_eval_doc"]][0][0].startswith("The following are general knowledge")
        task.set_config("num_fewshot", None)  # the cached task as lm-eval built it


@pytest.mark.parametrize("prompt", ["cora", "lm_eval"])
def test_a_test_split_only_task_never_shows_a_question_its_own_answer(prompt):
    """fewshot=3 from a task with only a test split: the pool is the evaluated split, and no prompt holds its own
    question. lm-eval 0.4.13's own fewshot_context does show it here (it leaves the document out only when
    fewshot_split names the test split): the tool does not follow it there."""
    from src.config.checks import job_spec
    from src.job.runner import build_items, job_questions

    cfg = compose_job(
        [
            "model=simulated",
            "benchmark=lm_eval",
            "benchmark.task=mcq_test_task_test_only",
            f"benchmark.include_path={TASK_DIR}",
            "fewshot=3",
            f"prompt={prompt}",
            "scoring=cloze",
        ]
    )
    spec = job_spec(cfg)
    questions = job_questions(spec)
    items = build_items(spec, questions, PromptTemplate.from_config(OmegaConf.to_container(cfg.prompt, resolve=True)))
    assert len(items) == len(questions) == 12
    for item in items:
        own = item.question.question
        assert item.request.prompt.count(own) == 1, item.question.id
        assert len(item.request.prompt) > 3 * len(own)  # three examples are there
    task = load_task("mcq_test_task_test_only", str(TASK_DIR))
    task.set_fewshot_seed(1234)
    shown = [task.fewshot_context(doc, 3).count(task.doc_to_text(doc)) for doc in task.eval_docs]
    assert max(shown) == 2  # lm-eval itself: some documents among their own examples


def test_a_job_runs_a_tasks_process_docs_once_per_use(run_job_in, monkeypatch):
    """lm-eval runs a task's process_docs over the whole split at each `eval_docs` or `fewshot_docs()` call
    (HellaSwag's: 10,042 documents, ~10 s on 2 cores); a job asks for the documents from several places (its
    questions, their shapes, lm-eval's contexts, the prompt identity, the few-shot pool) and gets them made once: here
    the evaluated split, and again as the few-shot pool (a test-only task's pool is that split, by lm-eval's
    fallback)."""
    load_tasks.cache_clear()
    task = load_task("mcq_test_task_test_only", str(TASK_DIR))  # the object the job's load_tasks returns
    calls = []
    process = task.config.process_docs
    monkeypatch.setattr(task.config, "process_docs", lambda docs: calls.append(len(docs)) or process(docs))
    result = run_job_in(
        "model=simulated",
        "benchmark=lm_eval",
        "benchmark.task=mcq_test_task_test_only",
        f"benchmark.include_path={TASK_DIR}",
        "fewshot=3",
        "prompt=lm_eval",
        "scoring=cloze",
        "variants=original",
    )
    assert result.metrics["mcqa"] >= 0
    assert calls == [13, 13], calls  # the test split's 13 documents: once evaluated, once as the pool
    load_tasks.cache_clear()


def test_three_solved_examples_are_joined_as_lm_eval_joins_them():
    task = load_task("mcq_test_task", str(TASK_DIR))
    pool = load_fewshot_pool("lm_eval", data_dir=".", options=TEST_TASK)
    question = load_benchmark("lm_eval", path=None, data_dir=".", options=TEST_TASK)[0]
    theirs = lm_eval_requests(task, task.eval_docs[0], shots=3)
    context = theirs[0][0]
    order = sorted(pool, key=lambda q: context.index(q.metadata["context"]))  # lm-eval draws its own order
    assert our_requests(question, scoring="cloze", fewshot=[(q, original(q)) for q in order]) == theirs


@pytest.mark.parametrize(
    "overrides, expected_trials",
    [
        (["variants=cora"], None),
        (["variants=perm_cyclic"], None),
        (["repetitions=5", "temperature=0.7"], 12 * 5),
    ],
)
def test_the_test_task_runs(run_job_in, overrides, expected_trials):
    result = run_job_in(
        "model=simulated",
        "benchmark=lm_eval",
        "benchmark.task=mcq_test_task",
        f"benchmark.include_path={TASK_DIR}",
        *overrides,
    )
    records = pd.read_parquet(result.out_dir / "artifacts" / "records.parquet")
    assert records.question_id.nunique() == 12
    if expected_trials is not None:  # one prompt per question, asked 5 times
        assert len(records) == expected_trials and "rws" in result.metrics
    elif overrides == ["variants=cora"]:  # 2 + 6(A-1) lists of an A-option question (A = 3, 4 or 5 here)
        sizes = [
            len(r["options"]) for r in map(json.loads, (TASK_DIR / "mcq_test_task.jsonl").read_text().splitlines())
        ]
        assert len(records) == sum(2 + 6 * (a - 1) for a in sizes[:12])
        assert {"cora", "ci", "mcqa_plus"} <= set(result.metrics)
    else:  # the A rotations of each question
        assert records.groupby("question_id").size().tolist() == [len(q) for q in _options_of_kept()]
        assert {"fr@cyclic", "wacc@cyclic"} <= set(result.metrics)
    _, (run,) = mlflow_runs(run_job_in.store_uri)
    tags = run.data.tags
    assert (tags["lm_eval_task"], tags["lm_eval_version"], tags["lm_eval_skipped"]) == ("mcq_test_task", "1.0", "1")
    assert len(tags["lm_eval_config_hash"]) == 12


def _options_of_kept() -> list[list[str]]:
    """The options of the test task's kept documents, in question-id order (mcq_test_task/0 .. /11 sort as text)."""
    rows = [json.loads(line) for line in (TASK_DIR / "mcq_test_task.jsonl").read_text().splitlines()][:12]
    return [r["options"] for _, r in sorted((f"mcq_test_task/{i}", r) for i, r in enumerate(rows))]


# -- registry tasks on ../shared/data ----------------------------------------------------------------------------

SHARED_DOCS = '''
"""Raw benchmark files of ../shared/data in the Hub layout lm-eval's registry YAMLs read (written by the test)."""
import bz2

import datasets


def ai2(dataset):
    def convert(doc):
        return {"id": doc["id"], "question": doc["question"]["stem"], "answerKey": doc["answerKey"],
                "question_concept": doc["question"].get("question_concept") or "",
                "choices": {"text": [c["text"] for c in doc["question"]["choices"]],
                            "label": [c["label"] for c in doc["question"]["choices"]]}}
    return dataset.map(convert, remove_columns=dataset.column_names)


def hellaswag(**kwargs):
    # the Hub's rows as the tool's file reader takes them back from the text file (ctx_b split off again)
    from src.benchmarks.commonsense import hellaswag_file_row

    lines = bz2.decompress(open(HELLASWAG, "rb").read()).decode("utf-8").split("\\n")
    rows = []
    for start in range(0, len(lines) - len(lines) % 6, 6):
        first, gold, *endings = lines[start:start + 6]
        rows.append(hellaswag_file_row(first, gold, endings))
    return datasets.DatasetDict({"validation": datasets.Dataset.from_list(rows)})


def mmlu(subject, **kwargs):
    import csv

    def rows(split):
        with open(f"{MMLU}/{split}/{subject}_{split}.csv", newline="") as f:
            return [{"question": r[0], "subject": subject, "choices": r[1:5], "answer": "ABCD".index(r[5])}
                    for r in csv.reader(f)]
    return datasets.DatasetDict({s: datasets.Dataset.from_list(rows(s)) for s in ("test", "dev")})


def truthfulqa(**kwargs):
    import json

    docs = json.load(open(TRUTHFULQA))
    rows = [{"question": d["question"], "mc1_targets": {"choices": list(d["mc1_targets"]),
             "labels": list(d["mc1_targets"].values())}} for d in docs]
    return datasets.DatasetDict({"validation": datasets.Dataset.from_list(rows)})
'''

MMLU_SLICE = ("abstract_algebra", "anatomy", "astronomy")  # a three-subject slice of lm-eval's mmlu group


@pytest.fixture(scope="module")
def shared_tasks(tmp_path_factory) -> Path:
    """A tmp include_path: the registry's own YAMLs of the four tasks (`include:`), their data pointed at
    ../shared/data; the raw AI2 records reshaped to the Hub layout by `process_docs` (as a task of one's own does)."""
    import lm_eval.tasks

    registry = Path(lm_eval.tasks.__file__).parent
    folder = tmp_path_factory.mktemp("lm_eval_shared_tasks")
    (folder / "shared_docs.py").write_text(
        f"HELLASWAG = {str(DATA_DIR / 'hellaswag' / 'hellaswag_val_full.txt.bz2')!r}\n"
        f"MMLU = {str(DATA_DIR / 'mmlu')!r}\nTRUTHFULQA = {str(DATA_DIR / 'truthfulqa' / 'mc_task.json')!r}\n"
        + SHARED_DOCS
    )

    def task(name, include, splits, extra=""):
        files = "".join(f"    {split}: {path}\n" for split, path in splits.items())
        (folder / f"{name}.yaml").write_text(
            textwrap.dedent(f"""\
            include: {registry / include}
            task: {name}
            dataset_path: json
            dataset_name: null
            dataset_kwargs:
              data_files:
            """)
            + files
            + extra
        )

    ai2 = "process_docs: !function shared_docs.ai2\n"
    # arc_easy and hellaswag: the shared files hold the evaluated split alone, so their examples come from it, named
    # as the few-shot split: lm-eval then leaves each document out of its own examples (as the tool always does)
    task(
        "arc_easy",
        "arc/arc_easy.yaml",
        {"test": DATA_DIR / "arc_easy/ARC-Easy-Test.jsonl"},
        "training_split: null\nvalidation_split: null\nfewshot_split: test\n" + ai2,
    )
    task(
        "arc_challenge",
        "arc/arc_challenge.yaml",
        {
            "test": DATA_DIR / "arc_challenge/ARC-Challenge-Test.jsonl",
            "train": DATA_DIR / "arc_challenge/ARC-Challenge-Train.jsonl",
        },
        "training_split: train\nvalidation_split: null\n" + ai2,
    )
    task(
        "commonsense_qa",
        "commonsense_qa/default.yaml",
        {"validation": DATA_DIR / "commonsenseqa/dev_rand_split.jsonl"},
        "training_split: null\n" + ai2,
    )
    (folder / "hellaswag.yaml").write_text(
        f"include: {registry / 'hellaswag/hellaswag.yaml'}\ntask: hellaswag\n"
        "custom_dataset: !function shared_docs.hellaswag\ntraining_split: null\n"
        "validation_split: null\ntest_split: validation\nfewshot_split: validation\n"
    )
    (folder / "truthfulqa_mc1.yaml").write_text(
        f"include: {registry / 'truthfulqa/truthfulqa_mc1.yaml'}\ntask: truthfulqa_mc1\n"
        "custom_dataset: !function shared_docs.truthfulqa\n"
    )
    for subject in MMLU_SLICE:
        (folder / f"mmlu_{subject}.yaml").write_text(
            f"include: {registry / 'mmlu/default' / f'mmlu_{subject}.yaml'}\ntask: mmlu_{subject}\n"
            f"custom_dataset: !function shared_docs.mmlu\ndataset_kwargs:\n  subject: {subject}\n"
        )
    (folder / "mcq_test_task_described.yaml").write_text(  # beside the others: one simple_evaluate asks all six
        f"include: {TASK_DIR / 'mcq_test_task_described.yaml'}\ntask: mcq_test_task_described\n"
    )
    (folder / "mmlu_slice.yaml").write_text(
        "group: mmlu_slice\ntask:\n"
        + "".join(f"  - mmlu_{s}\n" for s in MMLU_SLICE)
        + "aggregate_metric_list:\n  - metric: acc\n    weight_by_size: true\nmetadata:\n  version: 2\n"
    )
    (folder / f"{SUITE}.yaml").write_text(  # a suite as leaderboards run them: label and option-text tasks mixed
        f"group: {SUITE}\ntask:\n  - mmlu_slice\n  - arc_challenge\n  - hellaswag\n  - mcq_test_task_described\n"
        "aggregate_metric_list:\n  - metric: acc\n    weight_by_size: true\n  - metric: acc_norm\n"
        "    weight_by_size: true\nmetadata:\n  version: 1\n"
    )
    return folder


SUITE = "mixed_suite"  # an MMLU slice (a group of its own), ARC-Challenge, HellaSwag and the described test task

REGISTRY = {  # task -> (the tool's own benchmark of the same file, scoring that asks lm-eval's requests, documents)
    "arc_easy": ("arc_easy", "cloze", 2376),
    "arc_challenge": ("arc_challenge", "cloze", 1172),
    "commonsense_qa": ("commonsenseqa", "logprob", 1221),
    "hellaswag": ("hellaswag", "cloze", 10042),
}


@needs_data
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_registry_tasks_on_the_shared_files_build_lm_evals_requests(shared_tasks, name):
    ours, scoring, n_docs = REGISTRY[name]
    task = load_task(name, str(shared_tasks))
    questions = load_benchmark(
        "lm_eval", path=None, data_dir=".", options={"task": name, "include_path": str(shared_tasks)}
    )
    docs = list(task.eval_docs)
    assert len(docs) == len(questions) == n_docs
    for question, doc in zip(questions, docs):
        assert our_requests(question, scoring=scoring) == lm_eval_requests(task, doc), question.id
    builtin = load_benchmark(ours, path=None, data_dir=str(DATA_DIR))
    # hellaswag too: the tool's reader gives lm-eval's process_docs text (WikiHow's "[...]" dropped, ctx_b capitalised)
    assert [(q.options, q.answer) for q in questions] == [(q.options, q.answer) for q in builtin]
    prefix = "Question: " if name == "commonsense_qa" else ""  # its label task's question keeps lm-eval's frame
    assert [q.question for q in questions] == [prefix + q.question for q in builtin]
    expected = "continuation" if name == "hellaswag" else "standalone"
    assert {q.metadata["choices"] for q in questions} == {expected}


@needs_data
@pytest.mark.parametrize(
    "name, variants, refused",
    [
        ("hellaswag", "cora", True),
        ("hellaswag", "revas_nota", True),
        ("hellaswag", "perm_cyclic", False),
        ("arc_easy", "cora", False),
    ],
)
def test_the_contract_decides_the_continuation_task(run_job_in, shared_tasks, name, variants, refused):
    args = (
        "model=simulated",
        "benchmark=lm_eval",
        f"benchmark.task={name}",
        f"benchmark.include_path={shared_tasks}",
        f"variants={variants}",
        "limit=5",
    )
    if refused:
        with pytest.raises(
            UserError,
            match=rf"config keys benchmark=lm_eval benchmark.task={name} and "
            rf"variants={variants}: the options of .* complete their context",
        ):
            run_job_in(*args)
        return
    result = run_job_in(*args)
    assert result.metrics["mcqa"] >= 0


def test_a_hub_task_offline_without_a_cached_copy_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr("datasets.config.HF_DATASETS_CACHE", tmp_path / "empty-cache")
    load_tasks.cache_clear()
    with pytest.raises(UserError) as err:
        load_benchmark("lm_eval", path=None, data_dir=".", options={"task": "piqa"})
    line = str(err.value)
    assert "\n" not in line
    assert line.startswith(
        "lm_eval task piqa: its data baber/piqa is not in the datasets cache and cannot be "
        "downloaded (offline); fetch it on a machine with network"
    )


# -- agreement with lm-eval's own scoring ------------------------------------------------------------------------


@pytest.mark.slow
def test_smollm2_takes_lm_evals_decisions_on_the_test_task(run_job_in, lm_eval_side):
    """Every decision equal, every option's log-likelihood within LOGLIK_TOLERANCE of lm-eval's HFLM."""
    from lm_eval.api.instance import Instance

    result = run_job_in(
        "model=smollm2_135m",
        "benchmark=lm_eval",
        "benchmark.task=mcq_test_task",
        f"benchmark.include_path={TASK_DIR}",
        "prompt=lm_eval",
        "scoring=cloze",
        "variants=original",
    )
    records = pd.read_parquet(result.out_dir / "artifacts" / "records.parquet").set_index("question_id")
    lm = lm_eval_side.lm("smollm2")  # HFLM on the float copy of the GGUF that model=smollm2_135m loads
    task = load_task("mcq_test_task", str(TASK_DIR))
    gaps, decisions = [], 0
    for i, doc in enumerate(task.eval_docs):
        if f"mcq_test_task/{i}" not in records.index:
            continue
        requests = [Instance("loglikelihood", doc, args, k) for k, args in enumerate(lm_eval_requests(task, doc))]
        theirs = [ll for ll, _ in lm.loglikelihood(requests, disable_tqdm=True)]
        row = records.loc[f"mcq_test_task/{i}"]
        ours = [float(x) for x in row.option_loglik]
        assert list(row.option_order) == list(range(len(theirs)))  # the original order: slot k is option k
        assert int(row.chosen_option) == max(range(len(theirs)), key=theirs.__getitem__), f"document {i}"
        decisions += 1
        gaps += [abs(a - b) for a, b in zip(ours, theirs)]
    assert decisions == 12 and all(math.isfinite(g) for g in gaps)
    print(
        f"\nlm-eval agreement on mcq_test_task: {decisions} decisions equal, max |log-likelihood gap| {max(gaps):.2e}"
    )
    assert max(gaps) <= LOGLIK_TOLERANCE


# -- parity with lm-eval's own simple_evaluate ---------------------------------------------------------------------

PARITY = {  # task -> scoring that asks lm-eval's requests (mmlu's labels: see the test)
    "mcq_test_task_described": "cloze",
    "arc_easy": "cloze",
    "arc_challenge": "cloze",
    "hellaswag": "cloze",
    "truthfulqa_mc1": "cloze",
    "mmlu_slice": "cloze_shown",  # a group: PARITY_LIMIT documents of each of its 3 subjects; labels " A".." D"
}
PARITY_LIMIT = 3  # documents of each task, lm-eval's --limit and the tool's limit


@pytest.fixture(scope="module")
def parity_models(tmp_path_factory) -> dict[str, tuple[list[str], Path]]:
    """model name -> (the tool's model overrides, the folder lm-eval's `hf` model loads): the tests' tiny llama (its
    position limit raised, so that 5-shot contexts are not cut: RoPE has no weights of its own) and SmolLM2's float
    copy of the embedded GGUF."""
    from devtools.perf.meter import model_config
    from src.backends import load_backend
    from src.backends.hf import gguf_cache
    from tests.tiny_model import save_tiny_llama

    tiny = save_tiny_llama(tmp_path_factory.mktemp("tiny_llama"), seed=7)
    config = json.loads((tiny / "config.json").read_text())
    (tiny / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 8192}))
    gguf = load_backend(model_config(compose_job(["model=smollm2_135m"])), chat=False).gguf_path
    return {
        "tiny_llama": (["model=hf", f"model.path={tiny}", "model.dtype=float32"], tiny),  # as lm-eval's side
        "smollm2": (["model=smollm2_135m"], Path(gguf_cache.ensure_float_copy(gguf))),
    }


# lm-eval's side of every comparison below, computed once per module (`lm_eval_side`): each model's HFLM loaded once,
# and one simple_evaluate per (model, prompt.chat, shots) over every task a test compares on that setting. The suite
# is asked as its own group (its numbers are what the suite's test compares) beside the PARITY tasks it does not hold;
# a task's requests, samples and acc are its own whether it is asked alone or in a group (lm-eval builds each task
# from its own config, seeds its sampler per task, and a group only aggregates), so the per-task tests read their
# documents from the same evaluation.
SUITE_TASKS = ("mmlu_slice", "arc_challenge", "hellaswag", "mcq_test_task_described")  # the suite's own members
EVALUATED = {
    ("tiny_llama", False): list(PARITY),
    ("smollm2", False): [SUITE, *(t for t in PARITY if t not in SUITE_TASKS)],
    ("smollm2", True): [SUITE],
}


class LmEvalSide:
    """lm-eval's HFLM per model and its simple_evaluate per (model, shots, chat), each made on first use, once."""

    def __init__(self, folder: Path, models: dict[str, tuple[list[str], Path]]):
        self.folder, self.models = folder, models
        self._lms: dict[str, object] = {}
        self._results: dict[tuple[str, int, bool], dict] = {}
        self._manager = None

    def lm(self, model: str):
        from lm_eval.models.huggingface import HFLM

        if model not in self._lms:
            self._lms[model] = HFLM(pretrained=str(self.models[model][1]), device="cpu", dtype="float32", batch_size=4)
        return self._lms[model]

    def evaluation(self, model: str, shots: int, chat: bool) -> dict:
        """simple_evaluate's result on EVALUATED's tasks; `chat`: its apply_chat_template, with simple_evaluate's
        default fewshot_as_multiturn."""
        from lm_eval import simple_evaluate
        from lm_eval.tasks import TaskManager

        key = (model, shots, chat)
        if key not in self._results:
            if self._manager is None:
                self._manager = TaskManager(include_path=str(self.folder), include_defaults=False)
            load_tasks.cache_clear()  # lm-eval builds its own task objects; ours are built again after it
            self._results[key] = simple_evaluate(
                model=self.lm(model),
                tasks=EVALUATED[(model, chat)],
                task_manager=self._manager,
                num_fewshot=shots,
                limit=PARITY_LIMIT,
                log_samples=True,
                bootstrap_iters=0,
                apply_chat_template=chat,
            )
        return self._results[key]

    def documents(self, model: str, shots: int, chat: bool) -> tuple[dict, dict]:
        """{(task, document index): (per-option log-likelihoods, acc)} and {task: mean acc} of `evaluation` (the
        groups' subtasks are reported as tasks)."""
        result = self.evaluation(model, shots, chat)
        documents = {}
        for task, samples in result["samples"].items():
            for sample in samples:
                documents[(task, sample["doc_id"])] = ([ll for ll, _ in (r[0] for r in sample["resps"])], sample["acc"])
        accs = {task: values["acc,none"] for task, values in result["results"].items() if "acc,none" in values}
        return documents, accs


@pytest.fixture(scope="module")
def lm_eval_side(shared_tasks, parity_models) -> LmEvalSide:
    return LmEvalSide(shared_tasks, parity_models)


def _compare_with_lm_eval(run_job_in, shared_tasks, lm_eval_side, model: str, tasks: dict[str, str], chat: bool):
    """Both sides on `tasks` (name -> the tool's scoring), zero-shot and 5-shot: every document's decision and acc
    asserted equal; returns the largest per-option log-likelihood gap per (task, shots) and the documents compared."""
    overrides = lm_eval_side.models[model][0]
    gaps: dict[tuple[str, int], float] = {}
    decided = 0
    for shots in (0, 5):
        theirs, their_acc = lm_eval_side.documents(model, shots, chat)
        load_tasks.cache_clear()  # the tool's jobs of each setting build their tasks anew, as before any lm-eval call
        for name, scoring in tasks.items():
            result = run_job_in(
                *overrides,
                "benchmark=lm_eval",
                f"benchmark.task={name}",
                f"benchmark.include_path={shared_tasks}",
                "prompt=lm_eval",
                f"prompt.chat={str(chat).lower()}",
                f"scoring={scoring}",
                "variants=original",
                f"fewshot={shots}",
                f"limit={PARITY_LIMIT}",
            )
            records = pd.read_parquet(result.out_dir / "artifacts" / "records.parquet")
            ours_acc: dict[str, list[float]] = {}
            for row in records.itertuples():
                task, _, doc = row.question_id.rpartition("/")
                lls, acc = theirs[(task, int(doc))]
                assert list(row.option_order) == list(range(len(lls)))
                assert int(row.chosen_option) == max(range(len(lls)), key=lls.__getitem__), (name, shots, doc)
                gap = max(abs(float(a) - b) for a, b in zip(row.option_loglik, lls))
                gaps[(name, shots)] = max(gaps.get((name, shots), 0.0), gap)
                ours_acc.setdefault(task, []).append(float(bool(row.correct)))
                assert ours_acc[task][-1] == acc, (name, shots, row.question_id)
                decided += 1
            for task, accs in ours_acc.items():
                assert len(accs) == PARITY_LIMIT and sum(accs) / len(accs) == pytest.approx(their_acc[task], abs=1e-12)
    print(f"\nlm-eval parity ({model}, chat={chat}): {decided} documents, decisions and acc equal; max |gap|:")
    print("\n".join(f"  {name} {shots}-shot: {gap:.2e}" for (name, shots), gap in sorted(gaps.items())))
    return gaps, decided


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny_llama", "smollm2"])
def test_the_tool_measures_what_lm_eval_measures(run_job_in, shared_tasks, lm_eval_side, model):
    """lm-eval's own simple_evaluate (model hf) against the tool (prompt=lm_eval variants=original) on six tasks,
    zero-shot and 5-shot: every document's per-option log-likelihoods within LOGLIK_TOLERANCE, the same decision,
    the same acc. mmlu's requests score the labels " A".." D" after the listed options, as the tool's cloze_shown
    does on a label task under prompt=lm_eval. The tiny llama is asked in float32 on both sides (model=hf's
    dtype=auto is bfloat16 on a CPU with AMX, 0.1-0.4 nats off)."""
    gaps, decided = _compare_with_lm_eval(run_job_in, shared_tasks, lm_eval_side, model, PARITY, chat=False)
    assert max(gaps.values()) <= LOGLIK_TOLERANCE, gaps
    tasks = len(PARITY) - 1 + len(MMLU_SLICE)  # the group's subjects count as tasks
    assert decided == 2 * PARITY_LIMIT * tasks  # zero-shot and 5-shot


CHAT_PARITY = {  # a description (lm-eval's system turn), a text task, a label task
    "mcq_test_task_described": "cloze",
    "arc_challenge": "cloze",
    "mmlu_slice": "cloze_shown",
}


@pytest.mark.slow
def test_with_the_chat_template_the_tool_measures_what_lm_eval_measures(run_job_in, shared_tasks, lm_eval_side):
    """`prompt.chat=true` under prompt=lm_eval is lm-eval's --apply_chat_template (the description a system turn,
    the examples turns of their own, no delimiter after the generation prompt), on SmolLM2's own chat template."""
    gaps, decided = _compare_with_lm_eval(run_job_in, shared_tasks, lm_eval_side, "smollm2", CHAT_PARITY, chat=True)
    assert max(gaps.values()) <= LOGLIK_TOLERANCE, gaps
    assert decided == 2 * PARITY_LIMIT * (len(CHAT_PARITY) - 1 + len(MMLU_SLICE))


def _suite_parity(run_job_in, shared_tasks, lm_eval_side, model: str, chat: bool) -> dict[tuple[str, int], float]:
    """The suite in one job of the tool against lm-eval's simple_evaluate of the suite's group, zero-shot and 5-shot:
    every document's decision and acc equal, each task's acc and acc_norm and each group's equal; returns the largest
    per-option log-likelihood gap per (task, shots)."""
    overrides = lm_eval_side.models[model][0]
    suite_tasks = {f"mmlu_{s}" for s in MMLU_SLICE} | set(SUITE_TASKS) - {"mmlu_slice"}
    suite_names = suite_tasks | {"mmlu_slice", SUITE}  # what lm-eval reports of the suite: its tasks and groups
    gaps: dict[tuple[str, int], float] = {}
    for shots in (0, 5):
        theirs = lm_eval_side.evaluation(model, shots, chat)
        load_tasks.cache_clear()
        result = run_job_in(
            *overrides,
            "benchmark=lm_eval",
            f"benchmark.task={SUITE}",
            f"benchmark.include_path={shared_tasks}",
            "prompt=lm_eval",
            f"prompt.chat={str(chat).lower()}",
            "scoring=cloze",
            "variants=original",
            f"fewshot={shots}",
            f"limit={PARITY_LIMIT}",
        )
        samples = {(t, s["doc_id"]): s for t, docs in theirs["samples"].items() if t in suite_tasks for s in docs}
        records = pd.read_parquet(result.out_dir / "artifacts" / "records.parquet")
        assert len(records) == len(samples) == PARITY_LIMIT * (len(MMLU_SLICE) + 3)
        for row in records.itertuples():
            task, _, doc = row.question_id.rpartition("/")
            sample = samples[(task, int(doc))]
            lls = [ll for ll, _ in (r[0] for r in sample["resps"])]
            assert int(row.chosen_option) == max(range(len(lls)), key=lls.__getitem__), (task, shots, doc)
            assert float(bool(row.correct)) == sample["acc"], (task, shots, doc)
            gap = max(abs(float(a) - b) for a, b in zip(row.option_loglik, lls))
            gaps[(task, shots)] = max(gaps.get((task, shots), 0.0), gap)
        compared = set()
        for name, values in theirs["results"].items():
            if name not in suite_names:  # a PARITY task evaluated beside the suite (EVALUATED)
                continue
            for metric in ("acc", "acc_norm"):
                if f"{metric},none" not in values:
                    continue
                ours = result.metrics[f"lm_eval_{metric}" if name == SUITE else f"lm_eval_{metric}/{name}"]
                assert ours == pytest.approx(values[f"{metric},none"], abs=1e-12), (name, metric, shots)
                compared.add((name, metric))
        # acc of 6 tasks and 2 groups; acc_norm where lm-eval reports it (ARC, HellaSwag, the suite over them)
        tasks = [f"mmlu_{s}" for s in MMLU_SLICE] + ["arc_challenge", "hellaswag", "mcq_test_task_described"]
        normed = {(name, "acc_norm") for name in ("arc_challenge", "hellaswag", SUITE)}
        assert compared == {(name, "acc") for name in [*tasks, "mmlu_slice", SUITE]} | normed
        print(f"\n{SUITE} {shots}-shot (chat={chat}): acc {result.metrics['lm_eval_acc']:.4f} as lm-eval's")
    print(f"lm-eval parity of {SUITE} in one job ({model}, chat={chat}); max |gap|:")
    print("\n".join(f"  {name} {shots}-shot: {gap:.2e}" for (name, shots), gap in sorted(gaps.items())))
    return gaps


@needs_data
@pytest.mark.slow
@pytest.mark.parametrize("chat", [False, True])
def test_a_mixed_suite_in_one_job_measures_what_lm_eval_measures(run_job_in, shared_tasks, lm_eval_side, chat):
    """An MMLU slice (labels scored after listed options), ARC-Challenge and HellaSwag (option texts) and the
    described test task as one lm-eval group, asked in one job under scoring=cloze: per-document log-likelihoods
    within LOGLIK_TOLERANCE of lm-eval's simple_evaluate on the same group, every decision and acc equal, each
    task's acc and acc_norm (per character) and each group's (lm-eval's weight_by_size aggregation) equal."""
    gaps = _suite_parity(run_job_in, shared_tasks, lm_eval_side, "smollm2", chat=chat)
    assert max(gaps.values()) <= LOGLIK_TOLERANCE, gaps


@needs_data
@pytest.mark.parametrize(
    "overrides, refused",
    [
        (["scoring=cloze_shown"], r"config key scoring: lm_eval task arc_challenge's choices are option texts"),
        (["scoring=logprob"], r"config key scoring: lm_eval task arc_challenge's choices are option texts"),
        (["variants=cora"], rf"benchmark.task={SUITE} \(its task hellaswag\) and variants=cora: the options of"),
    ],
)
def test_a_suite_is_refused_in_one_line_naming_its_task(run_job_in, shared_tasks, overrides, refused):
    """A scoring that would list a text task's options, or a variant set a task's shape cannot take, is refused
    before any compute, naming the task of the suite it concerns."""
    with pytest.raises(UserError, match=refused) as err:
        run_job_in(
            "model=simulated",
            "benchmark=lm_eval",
            f"benchmark.task={SUITE}",
            f"benchmark.include_path={shared_tasks}",
            "prompt=lm_eval",
            "limit=2",
            *overrides,
        )
    assert "\n" not in str(err.value)


@needs_data
def test_a_suite_runs_in_one_job_with_lm_evals_numbers(run_job_in, shared_tasks):
    """scoring=cloze: lm-eval's numbers of every task and group logged beside the subjects table (a row each)."""
    result = run_job_in(
        "model=simulated",
        "benchmark=lm_eval",
        f"benchmark.task={SUITE}",
        f"benchmark.include_path={shared_tasks}",
        "prompt=lm_eval",
        "scoring=cloze",
        "variants=original",
        "limit=2",
    )
    subjects = pd.read_csv(result.out_dir / "artifacts" / "subjects.csv").set_index("subject")
    assert {"mmlu_slice", "arc_challenge", "hellaswag", "mmlu_anatomy"} <= set(subjects.index)
    assert 0 <= result.metrics["lm_eval_acc"] <= 1 and "lm_eval_acc_norm" in result.metrics
    assert "lm_eval_acc_norm/mmlu_anatomy" not in result.metrics  # MMLU reports acc alone, as in lm-eval's table


@needs_data
def test_a_label_suites_variants_list_the_options_again_as_lm_eval_would(shared_tasks):
    """variants=perm_cyclic and cora on the MMLU slice under prompt=lm_eval scoring=cloze: each four-option variant's
    request is the one lm-eval builds for the same document with its choices in the variant's order (the original's,
    lm-eval's own; "None of the above" as a choice), re-lettered; a variant of another size lists its options as
    lm-eval's lines, between the same question and `Answer:`."""
    options = {"task": "mmlu_slice", "include_path": str(shared_tasks)}
    questions = lm_eval_contexts(
        load_benchmark("lm_eval", path=None, data_dir=".", options=options, limit=2), k=0, options=options
    )
    tasks = load_tasks("mmlu_slice", str(shared_tasks))
    compared = 0
    for q in questions:
        task = tasks[q.metadata["lm_eval_task"]]
        doc = task.eval_docs[q.metadata["lm_eval_doc"]]
        for name in ("perm_cyclic", "cora"):
            for variant in make_variants({"name": name}, q, seed=0):
                shown = [doc["choices"][i] if i >= 0 else t for i, t in zip(variant.option_order, variant.option_texts)]
                r = FORMATS["mcq"].request(lm_eval_prompt(), q, variant, seed=0, scoring="cloze")
                ours = [(r.prompt, continuation_text(r.prompt, label, r.continuation_prefix)) for label in r.options]
                if len(shown) == 4:
                    assert ours == lm_eval_requests(task, {**doc, "choices": shown}), (q.id, variant.variant_id)
                    compared += 1
                    continue
                lines = "".join(f"\n{label}. {text}" for label, text in zip("ABCDE", shown))
                head = q.metadata["lm_eval_preamble"] + task.doc_to_text(doc).split("\nA. ")[0]
                assert r.prompt == head + lines + "\nAnswer:", (q.id, variant.variant_id)
    assert compared >= 6 * 4


@needs_data
def test_a_mixed_suites_order_sets_are_refused_naming_its_text_task(run_job_in, shared_tasks):
    """Under scoring=cloze a task of option texts shows no options: variants=perm_cyclic is refused for it before the
    model loads, naming it; the label tasks alone (the MMLU slice) run the same set."""
    args = ("model=simulated", "benchmark=lm_eval", f"benchmark.include_path={shared_tasks}", "prompt=lm_eval")
    refused = rf"^config keys benchmark.task={SUITE} \(its task (arc_challenge|hellaswag|mcq_test_task_described)\), "
    with pytest.raises(UserError, match=refused + "prompt=lm_eval and variants=perm_cyclic: lm-eval scores"):
        run_job_in(*args, f"benchmark.task={SUITE}", "scoring=cloze", "variants=perm_cyclic", "limit=2")
    result = run_job_in(*args, "benchmark.task=mmlu_slice", "scoring=cloze", "variants=perm_cyclic", "limit=2")
    assert 0 <= result.metrics["lm_eval_acc"] <= 1


@needs_data
def test_a_list_of_tasks_runs_as_simple_evaluate_runs_it(run_job_in, shared_tasks):
    """benchmark.task=[mmlu_slice,arc_challenge]: one job, a row of lm-eval's numbers per task and per named group."""
    result = run_job_in(
        "model=simulated",
        "benchmark=lm_eval",
        "benchmark.task=[mmlu_slice,arc_challenge]",
        f"benchmark.include_path={shared_tasks}",
        "prompt=lm_eval",
        "scoring=cloze",
        "variants=original",
        "limit=2",
    )
    subjects = pd.read_csv(result.out_dir / "artifacts" / "subjects.csv").set_index("subject")
    assert {"mmlu_slice", "arc_challenge", "mmlu_anatomy"} <= set(subjects.index)
    assert "lm_eval_acc" not in result.metrics and 0 <= result.metrics["lm_eval_acc/mmlu_slice"] <= 1


def test_lm_evals_own_functions_read_hellaswag_and_winogrande_rows_as_the_tool_does(tmp_path):
    """tests/test_benchmark_readings.py's expected readings, from lm-eval's own functions on its rows: its Hub rows
    and the text file made of them as the shared one was."""
    import datasets
    from lm_eval.tasks.hellaswag import utils as hellaswag_utils
    from lm_eval.tasks.winogrande import preprocess_winogrande as winogrande_utils

    from .test_benchmark_readings import (
        HELLASWAG_ROWS,
        LM_EVAL_HELLASWAG,
        LM_EVAL_WINOGRANDE,
        WINOGRANDE_ROWS,
        _hellaswag_file,
        _read,
    )

    docs = hellaswag_utils.process_docs(datasets.Dataset.from_list(HELLASWAG_ROWS))
    lm_eval = [(d["query"], tuple(c.strip() for c in d["choices"]), d["gold"]) for d in docs]
    assert lm_eval == LM_EVAL_HELLASWAG
    from_file = load_benchmark("hellaswag", path=str(_hellaswag_file(tmp_path, HELLASWAG_ROWS)), data_dir=".")
    assert _read(from_file) == lm_eval
    wino = [(winogrande_utils.doc_to_text(d), winogrande_utils.doc_to_choice(d)) for d in WINOGRANDE_ROWS]
    assert wino == LM_EVAL_WINOGRANDE
