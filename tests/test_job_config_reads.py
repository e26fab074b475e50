"""What the job reads from its config that no other fast test checked (the mutation check, docs/mutation.md).

- A benchmark's own keys (`benchmark.*` other than name, path and split) reach its few-shot pool in the job
  (src/job/runner.py `plan_items`): an lm-eval task's few-shot examples are drawn from that task's own few-shot
  split.
  No other fast test runs a job with few-shot examples from a benchmark with such keys (the lm-eval tier loads the
  pool directly).
- A misleading second stage (`variants=revas_misleading`) whose source run answered none of its questions is
  refused in one line naming `variants.source_run` (the slow tier's test_catalog_cli.py runs the stage itself).
- The level the closing block states for its intervals (src/config/spec.py `JobSpec.interval_level`): the
  config's `stats.level` where intervals are logged, none where they are not (`stats.bootstrap=0`)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest

from src.common.errors import UserError

from .conftest import needs_data


class StandInTask:
    """What the job reads of an lm-eval task (its evaluated and few-shot documents), without lm-eval: the main suite
    runs without the bench extra."""

    OUTPUT_TYPE, multiple_input, VERSION = "multiple_choice", 0, 1.0
    config = SimpleNamespace(test_split="test", validation_split=None, training_split=None)
    eval_docs = [{"q": f"Asked question {i}?", "choices": ["yes", "no", "maybe"], "target": i % 3} for i in range(3)]

    def test_docs(self):
        return self.eval_docs

    def fewshot_docs(self):
        return [{"q": f"Example question {i}?", "choices": ["red", "blue"], "target": i % 2} for i in range(4)]

    def doc_to_text(self, doc):
        return f"Question: {doc['q']}\nAnswer:"

    def doc_to_choice(self, doc):
        return doc["choices"]

    def doc_to_target(self, doc):
        return doc["target"]

    def dump_config(self):
        return {"task": "stand_in"}


def test_an_lm_eval_jobs_few_shot_examples_are_its_tasks_own(run_job_in, monkeypatch):
    from src.benchmarks import lm_eval

    def load_tasks(name, include_path=None):
        assert (name, include_path) == ("stand_in", "tasks/here"), "the job lost the benchmark's keys"
        return {name: StandInTask()}

    monkeypatch.setattr(lm_eval, "load_tasks", load_tasks)
    result = run_job_in(
        "model=simulated",
        "benchmark=lm_eval",
        "benchmark.task=stand_in",
        "benchmark.include_path=tasks/here",
        "prompt=plain",  # the tool draws the examples (prompt=lm_eval has lm-eval's own code build them: its tier)
        "variants=original",
        "fewshot=2",
    )
    prompts = pd.read_parquet(result.out_dir / "artifacts" / "prompts.parquet").prompt.tolist()
    assert len(prompts) == 3
    for prompt in prompts:  # two of the task's few-shot questions before each question
        assert prompt.count("Example question") == 2 and prompt.count("Asked question") == 1, prompt


def test_the_closing_blocks_level_is_the_configs_where_intervals_are_logged():
    from src.config.checks import job_spec
    from src.config.compose import compose_job

    assert job_spec(compose_job(["stats.level=0.9"])).interval_level == 0.9
    assert job_spec(compose_job(["stats.bootstrap=0"])).interval_level is None


@needs_data
def test_a_second_stage_whose_source_run_answered_none_of_its_questions_is_refused(run_job_in):
    source = run_job_in(
        "model=simulated", "benchmark=synthetic", "variants=revas_true_false", "scoring=generate", "limit=4"
    )
    with pytest.raises(UserError, match="variants.source_run: run .* answered none of these arc_challenge questions"):
        run_job_in(
            "model=simulated",
            "benchmark=arc_challenge",
            "variants=revas_misleading",
            f"variants.source_run={source.run_id}",
            "limit=4",
        )


def test_a_prompt_without_a_chat_key_asks_the_model_without_its_chat_template(monkeypatch):
    """`job_backend`: chat wrapping only where the prompt says `chat: true` (and the scoring is not cloze); a prompt
    config that names no `chat` is plain text (a mutant: a default of True wrapped every such prompt)."""
    from src.config.checks import job_spec
    from src.config.compose import compose_job
    from src.job import runner

    asked = []
    monkeypatch.setattr(runner, "reuse_backend", lambda model_cfg, *, chat: asked.append(chat))
    from omegaconf import open_dict

    cfg = compose_job(["model=simulated", "scoring=generate", "prompt=plain"])
    with open_dict(cfg):
        cfg.prompt.pop("chat", None)
    runner.job_backend(job_spec(cfg))
    with open_dict(cfg):
        cfg.prompt.chat = True
    runner.job_backend(job_spec(cfg))
    assert asked == [False, True]


def test_a_benchmark_key_given_as_an_interpolation_is_resolved(tmp_path, monkeypatch):
    """`job_questions` reads the benchmark's keys resolved: a path written `${oc.env:...}/file.jsonl` is the file
    (a mutant: unresolved, the loader was handed the interpolation's text)."""
    import json

    from src.config.checks import job_spec
    from src.config.compose import compose_job
    from src.job.runner import job_questions

    rows = [{"question": f"Q{i}?", "options": [f"a{i}", f"b{i}", f"c{i}"], "answer": i % 3} for i in range(3)]
    (tmp_path / "mine.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    monkeypatch.setenv("MCQ_TEST_BENCH_DIR", str(tmp_path))
    cfg = compose_job(["benchmark=generic", "benchmark.path=${oc.env:MCQ_TEST_BENCH_DIR}/mine.jsonl"])
    assert [q.question for q in job_questions(job_spec(cfg))] == ["Q0?", "Q1?", "Q2?"]


def test_a_jobs_seconds_are_the_time_its_answers_and_metrics_took():
    """`seconds` (logged with every run): the wall time from the first answer to the metrics, at least zero and
    within the time the call took (a mutant: a flipped sign logged the clock's reading, not a duration)."""
    import time

    from src.config.checks import job_spec
    from src.config.compose import compose_job
    from src.job import runner

    cfg = job_spec(compose_job(["model=simulated", "benchmark=synthetic", "limit=4", "stats.bootstrap=0"]))
    questions = runner.job_questions(cfg)
    _, items, left_out = runner.plan_job(cfg, questions)
    before = time.perf_counter()
    _, metrics = runner.answer_and_measure(cfg, runner.job_backend(cfg), items, left_out, None, "run")
    took = time.perf_counter() - before
    assert 0 < metrics["seconds"] <= took


def test_prompt_lm_eval_takes_lm_evals_contexts_for_an_lm_eval_task_and_the_tools_examples_elsewhere(monkeypatch):
    """`prompt=lm_eval`: an lm-eval task's questions get lm-eval's own description and solved examples (built by its
    `fewshot_context`, stood in for here: the main suite runs without lm-eval) and none of the tool's; another
    benchmark gets the tool's own examples, and lm-eval is not asked (a mutant: `bench_name != "lm_eval"`)."""
    from src.benchmarks import lm_eval
    from src.config.checks import job_spec
    from src.config.compose import compose_job
    from src.job import runner

    asked = []

    def contexts(questions, *, k, options, scoring, chat_template):
        asked.append(k)
        assert chat_template is None  # prompt.chat is off: lm-eval's plain-text context
        return [replace_metadata(q, lm_eval_preamble="lm-eval's own examples\n\n") for q in questions]

    monkeypatch.setattr(lm_eval, "load_tasks", lambda name, include_path=None: {name: StandInTask()})
    monkeypatch.setattr(runner, "lm_eval_contexts", contexts)
    task = compose_job(
        [
            "benchmark=lm_eval",
            "benchmark.task=stand_in",
            "prompt=lm_eval",
            "scoring=cloze",
            "variants=original",
            "fewshot=2",
        ]
    )
    task = job_spec(task)
    _, items, _ = runner.plan_job(task, runner.job_questions(task))
    assert asked == [2] and len(items) == 3
    for it in items:
        assert it.request.prompt.startswith("lm-eval's own examples\n\nQuestion: Asked question")
        assert "Example question" not in it.request.prompt
    other = job_spec(
        compose_job(["benchmark=synthetic", "limit=3", "prompt=lm_eval", "variants=original", "fewshot=2"])
    )
    _, items, _ = runner.plan_job(other, runner.job_questions(other))
    assert asked == [2] and len(items) == 3
    assert all(it.request.prompt.count("\nAnswer: ") == 2 for it in items)  # the tool's two solved examples


def replace_metadata(question, **metadata):
    from dataclasses import replace

    return replace(question, metadata={**question.metadata, **metadata})


@pytest.mark.promise("README.md", "in a sweep each model loads once: consecutive jobs of one model share it")
@pytest.mark.promise(
    "docs/launchers.md", "under the basic launcher a model stays loaded across consecutive jobs that use it"
)
def test_a_sweeps_jobs_share_the_loaded_model_until_its_weights_change(monkeypatch):
    """Jobs of one process with the same model config share the loaded backend while its identity (its weights by
    content) is the same; weights saved anew between two jobs get a backend of their own (a mutant:
    `reuse_backend`'s identity test)."""
    from src.job import runner

    closed = []

    def backend(weights):
        return SimpleNamespace(identity=weights, close=lambda: closed.append(weights), new_job=lambda: None)

    built = iter(backend(weights) for weights in ("w1", "w1", "w2", "w3"))
    monkeypatch.setattr(runner, "load_backend", lambda model_cfg, chat: next(built))
    monkeypatch.setattr(runner, "_LOADED", {})
    first = runner.reuse_backend({"name": "m"}, chat=False)
    assert runner.reuse_backend({"name": "m"}, chat=False) is first and closed == []
    changed = runner.reuse_backend({"name": "m"}, chat=False)
    assert changed is not first and changed.identity == "w2"
    assert closed == ["w1"], "the old weights' engine ends before the new one loads"
    other = runner.reuse_backend({"name": "other"}, chat=False)
    assert closed == ["w1", "w2"] and runner._LOADED and other.identity == "w3", "one model in memory"
    runner.release_backends()
    runner.release_backends()
    assert closed == ["w1", "w2", "w3"] and runner._LOADED == {}, "released once, at the command's end"


@pytest.mark.parametrize(
    ("overrides", "wrapped"),
    [
        (["prompt=cora", "scoring=logprob"], True),  # the tool's prompt: the backend's chat template around it
        (["prompt=cora", "scoring=cloze"], False),  # option texts scored as plain continuations
        (["prompt=lm_eval", "scoring=logprob"], True),  # lm-eval's prompt on another benchmark: as any prompt
        (["prompt=lm_eval", "benchmark=lm_eval", "benchmark.task=t", "scoring=logprob"], False),  # lm-eval's own turns
        (["prompt=cora", "benchmark=lm_eval", "benchmark.task=t", "scoring=logprob"], True),
    ],
)
def test_the_backend_wraps_prompts_in_its_chat_template_unless_lm_eval_built_the_turns(monkeypatch, overrides, wrapped):
    """`prompt.chat=true`: the backend applies the model's chat template, except around cloze continuations and
    where lm-eval's own code built the chat turns into the text (`prompt=lm_eval` on an lm-eval task)."""
    from src.config.checks import job_spec
    from src.config.compose import compose_job
    from src.job import runner

    asked = []
    monkeypatch.setattr(runner, "reuse_backend", lambda model_cfg, chat: asked.append(chat))
    runner.job_backend(job_spec(compose_job(["model=simulated", "prompt.chat=true", *overrides])))
    assert asked == [wrapped]
