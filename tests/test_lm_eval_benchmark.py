"""`benchmark=lm_eval` without lm-evaluation-harness installed: how a task's documents become questions (on a
stand-in task object with lm-eval's interface), the refusals, the offline line, the `{context}` prompt field and the
continuation rule of the validity contract. The same code against lm-eval itself: tests/test_lm_eval_tasks.py
(opt-in, --run-lm-eval)."""

from __future__ import annotations

import sys

import pytest

from src.benchmarks import continuation_style, load_benchmark, task_tags
from src.benchmarks.lm_eval import is_label_choices, task_questions, unreachable_data_message
from src.common.errors import UserError
from src.config.checks import check_values
from src.config.compose import compose_job
from src.core.prompts import PromptTemplate, render
from src.core.validity import check_option_style
from src.variants import make_variants


class StandInTask:
    """What `task_questions` reads of an lm-eval ConfigurableTask, over plain dict documents."""

    def __init__(self, docs, *, output_type="multiple_choice", multiple_input=0, text=None):
        self.docs, self.OUTPUT_TYPE, self.multiple_input, self.VERSION = docs, output_type, multiple_input, 2.0
        self.text = text or (lambda doc: f"Question: {doc['q']}\nAnswer:")

    def doc_to_text(self, doc):
        return self.text(doc)

    def doc_to_choice(self, doc):
        return doc["choices"]

    def doc_to_target(self, doc):
        return doc["target"]

    def dump_config(self):
        return {"task": "stand_in", "doc_to_text": "Question: {{q}}\nAnswer:"}


DOCS = [
    {"q": "2+2?", "choices": ["3", "4", "5"], "target": 1},
    {"q": "Capital of Italy?", "choices": ["Rome", "Oslo"], "target": "Rome"},
    {"q": "Bad target?", "choices": ["a", "b"], "target": 2},
    {"q": "Unknown text target?", "choices": ["a", "b"], "target": "c"},
    {"q": "Unlabelled?", "choices": ["a", "b"], "target": -1},
]


def test_documents_become_questions_and_bad_targets_are_skipped_and_counted():
    questions, skipped = task_questions(StandInTask(DOCS), DOCS, name="stand_in", split="test", ids="stand_in")
    assert skipped == {
        2: "target index 2 is past its 2 choices",
        3: "target 'c' is not one of its choices",
        4: "unlabelled (target -1)",
    }
    assert [(q.id, q.question, q.options, q.answer) for q in questions] == [
        ("stand_in/0", "2+2?", ("3", "4", "5"), 1),
        ("stand_in/1", "Capital of Italy?", ("Rome", "Oslo"), 0),
    ]
    meta = questions[0].metadata
    assert meta["context"] == "Question: 2+2?\nAnswer:" and meta["choices"] == "standalone"
    assert (meta["lm_eval_task"], meta["lm_eval_version"], meta["lm_eval_doc"]) == ("stand_in", "2.0", 0)
    assert task_tags([]) == {}


def test_an_unlabelled_lm_eval_document_stops_the_run():
    """Bug class "an unlabelled lm-eval document stops the run": a document whose target is -1 (a
    dataset's unlabelled test row) is skipped and counted in one warning line, and the run goes on with the others;
    it neither raises nor becomes a question whose gold is the last option (Python's index -1)."""
    import logging

    from src.benchmarks import lm_eval

    docs = [DOCS[0], {"q": "Unlabelled?", "choices": ["a", "b"], "target": -1}, DOCS[1]]
    questions, skipped = task_questions(StandInTask(docs), docs, name="t", split="test", ids="t")
    assert [q.id for q in questions] == ["t/0", "t/2"] and skipped == {1: "unlabelled (target -1)"}
    line = lm_eval._skip_warning("t", {"t": skipped}, len(docs))
    assert line == "lm_eval task t: 1 of 3 documents skipped (1 unlabelled (target N)): t/1: unlabelled (target -1)"
    assert logging.getLogger(lm_eval.__name__).name == "src.benchmarks.lm_eval"


def test_several_targets_are_refused_in_one_line_naming_the_task():
    docs = [{"q": "Several targets?", "choices": ["a", "b"], "target": [0, 1]}]
    with pytest.raises(UserError, match=r"lm_eval task mc2 has several correct targets per document") as err:
        task_questions(StandInTask(docs), docs, name="mc2", split="test", ids="mc2")
    assert "\n" not in str(err.value) and "truthfulqa_mc1" in str(err.value)


def test_a_digit_target_is_read_as_lm_eval_reads_it_and_counted_where_the_text_says_otherwise():
    """lm-eval's doc_to_target makes a digit string an index: target "3" of choices 1..4 is option index 3 (the
    text "4"), not the choice "3"; the tool follows lm-eval and marks the document for the run's one warning."""
    docs = [{"q": "Which number?", "choices": ["1", "2", "3", "4"], "target": 3}, DOCS[0]]
    questions, _ = task_questions(StandInTask(docs), docs, name="t", split="test", ids="t")
    assert [q.answer for q in questions] == [3, 1]
    assert [q.metadata["lm_eval_index_target"] for q in questions] == [True, False]


def test_label_choices_take_their_options_from_the_listed_lines():
    docs = [{"q": "x", "choices": ["A", "B", "C"], "target": "B"}]
    context = "Question: Which is blue?\nA. grass\nB. the sky\nC. snow\nAnswer:"
    (question,), _ = task_questions(StandInTask(docs, text=lambda doc: context), docs, name="t", split="test", ids="t")
    assert (question.question, question.options, question.answer) == (
        "Question: Which is blue?",
        ("grass", "the sky", "snow"),
        1,
    )
    assert is_label_choices(["A", "B"]) and not is_label_choices(["B", "A"]) and not is_label_choices(["A"])


def test_numbers_that_the_context_does_not_list_are_option_texts():
    docs = [{"q": "How many legs does a bird have?", "choices": ["1", "2", "3", "4"], "target": 1}]
    (question,), _ = task_questions(StandInTask(docs), docs, name="t", split="test", ids="t")
    assert (question.question, question.options, question.answer) == (docs[0]["q"], ("1", "2", "3", "4"), 1)


def test_label_choices_with_no_listed_options_are_refused():
    docs = [{"q": "x", "choices": ["A", "B"], "target": 0}]
    with pytest.raises(UserError, match=r"lm_eval task t \(test document 0\): its choices are the labels A, B but"):
        task_questions(
            StandInTask(docs, text=lambda doc: "Question: which?\nAnswer:"), docs, name="t", split="test", ids="t"
        )


def test_contexts_that_ask_no_question_make_continuation_options():
    docs = [{"q": "A man sits on a roof. He", "choices": ["climbs down.", "eats a roof."], "target": 0}]
    (question,), _ = task_questions(StandInTask(docs, text=lambda doc: doc["q"]), docs, name="t", split="test", ids="t")
    assert question.metadata["choices"] == "continuation" and question.question == "A man sits on a roof. He"
    assert (
        continuation_style("lm_eval", [question])
        and continuation_style("hellaswag")
        and not continuation_style("arc_easy")
    )


@pytest.mark.parametrize(
    "task, problem",
    [
        (StandInTask(DOCS, output_type="generate_until"), "has output_type generate_until, not multiple_choice"),
        (
            StandInTask(DOCS, multiple_input=2),
            "scores each choice as a different context before one shared continuation",
        ),
    ],
)
def test_tasks_that_cannot_become_questions_are_refused_in_one_line(task, problem):
    with pytest.raises(UserError, match=problem) as err:
        task_questions(task, DOCS, name="t", split="test", ids="t")
    assert "\n" not in str(err.value) and str(err.value).startswith("config key benchmark.task: lm_eval task t ")


def test_no_lm_eval_installed_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "lm_eval", None)  # `import lm_eval...` now raises ImportError
    monkeypatch.setitem(sys.modules, "lm_eval.tasks", None)
    from src.benchmarks.lm_eval import load_tasks

    load_tasks.cache_clear()
    with pytest.raises(UserError) as err:
        load_benchmark("lm_eval", path=None, data_dir=".", options={"task": "arc_easy"})
    assert str(err.value) == (
        'benchmark=lm_eval reads lm-evaluation-harness tasks, which is not installed; run pip install -e ".[bench]"'
    )


def test_bad_lm_eval_keys_are_refused_before_loading():
    with pytest.raises(UserError, match=r"config key benchmark.task: None is not an lm-eval task name or a list"):
        load_benchmark("lm_eval", path=None, data_dir=".", options={})
    with pytest.raises(UserError, match=r"config key benchmark.path: an lm-eval task's YAML says where its data is"):
        load_benchmark("lm_eval", path="x.jsonl", data_dir=".", options={"task": "arc_easy"})
    with pytest.raises(
        UserError,
        match=r"config key benchmark.task: required by benchmark=lm_eval .* "
        r"benchmark.task=<an lm-eval task, e.g. arc_easy>",
    ):
        check_values(compose_job(["benchmark=lm_eval"]))


def test_the_offline_line_says_what_to_fetch():
    line = unreachable_data_message("arc_easy", "allenai/ai2_arc", "ARC-Easy", "no network: huggingface.co gaierror")
    assert "\n" not in line
    assert line.startswith("lm_eval task arc_easy: its data allenai/ai2_arc (ARC-Easy) is not in the datasets cache")
    assert "datasets.load_dataset('allenai/ai2_arc', 'ARC-Easy')" in line and "benchmark.include_path" in line


@pytest.mark.parametrize(
    "overrides, refused",
    [
        (["benchmark=hellaswag", "variants=cora"], True),
        (["benchmark=hellaswag", "variants=revas_nota"], True),
        (["benchmark=hellaswag", "variants=perm_cyclic"], False),
        (["benchmark=arc_easy", "variants=cora"], False),
        (
            [
                "benchmark=lm_eval",
                "benchmark.task=hellaswag",
                "benchmark.choices=continuation",
                "variants=cora_same_size",
            ],
            True,
        ),
        (
            [
                "benchmark=lm_eval",
                "benchmark.task=hellaswag",
                "benchmark.choices=continuation",
                "variants=revas_reorder",
            ],
            False,
        ),
    ],
)
def test_the_contract_refuses_nota_sets_for_continuation_options_at_the_config_door(overrides, refused):
    from src.config.checks import check_config

    cfg = compose_job(overrides)
    if not refused:
        check_config(cfg)
        return
    with pytest.raises(UserError, match=r"complete their context rather than answer a question") as err:
        check_config(cfg)
    shown = "lm_eval benchmark.task=hellaswag" if "benchmark=lm_eval" in overrides else "hellaswag"
    assert str(err.value).startswith(f"config keys benchmark={shown} and variants=")


def test_the_contract_rule_itself():
    check_option_style(variants={"name": "cora"}, benchmark="arc_easy", continuation=False)
    check_option_style(variants={"name": "perm_full"}, benchmark="hellaswag", continuation=True)
    with pytest.raises(UserError, match='adds "None of the above"'):
        check_option_style(variants={"name": "revas_nota"}, benchmark="t", continuation=True)


def test_the_context_field_puts_the_tasks_own_text_back():
    docs = [{"q": "2+2?", "choices": ["3", "4"], "target": 1}]
    (question,), _ = task_questions(StandInTask(docs), docs, name="t", split="test", ids="t")
    variant = make_variants({"name": "original"}, question, seed=0)[0]
    template = PromptTemplate.from_config(
        {
            "name": "x",
            "template": "{question}\n{choices}\nAnswer:",
            "cloze_template": "{fewshot}{context}",
            "cloze_fewshot_template": "{context} {answer}\n\n",
        }
    )
    assert render(template, question, variant, scoring="cloze") == "Question: 2+2?\nAnswer:"
    assert (
        render(template, question, variant, scoring="cloze", fewshot=[(question, variant)])
        == "Question: 2+2?\nAnswer: 4\n\nQuestion: 2+2?\nAnswer:"
    )
    assert render(template, question, variant, scoring="logprob") == "2+2?\nA. 3\nB. 4\nAnswer:"
    with pytest.raises(UserError, match=r"prompt.cloze_template must contain \{question\} or \{context\}"):
        PromptTemplate(name="x", template="{question}{choices}", cloze_template="Answer:")


def test_the_documented_lm_eval_commands_are_accepted():
    """The commands of docs/configuration.md's lm-eval section, as `python -m src.run` checks them before Hydra starts
    (tests/test_docs_commands.py pairs that page's fences wrongly: its ```text and ```python blocks shift them)."""
    import re
    import shlex
    from pathlib import Path

    from src.config.command_line import check_command_line

    page = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text()
    section = page.split("### An lm-evaluation-harness task", 1)[1].split("\n### ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    runs = [shlex.split(line)[3:] for line in block.splitlines() if line.startswith("python -m src.run ")]
    assert len(runs) == 3 and all("benchmark=lm_eval" in args for args in runs)
    for args in runs:
        check_command_line(args)
    with pytest.raises(UserError, match="complete their context"):
        check_command_line(
            ["benchmark=lm_eval", "benchmark.task=hellaswag", "benchmark.choices=continuation", "variants=cora"]
        )


@pytest.mark.slow
def test_a_run_without_lm_eval_stops_with_one_error_line_and_exit_2(tmp_path):
    """The whole command as a user meets it, lm-eval made unimportable (whether or not this environment has it)."""
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    args = [
        "model=simulated",
        "benchmark=lm_eval",
        "benchmark.task=arc_easy",
        f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
        f"hydra.run.dir={tmp_path}/out",
        f"cache.path={tmp_path}/c.db",
    ]
    code = (
        "import runpy, sys; sys.modules['lm_eval'] = sys.modules['lm_eval.tasks'] = None; "
        f"sys.argv = ['src.run', *{args!r}]; runpy.run_module('src.run', run_name='__main__')"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: benchmark=lm_eval reads lm-evaluation-harness tasks, "
        'which is not installed; run pip install -e ".[bench]"'
    )
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")  # stopped before any run was started
    experiment = client.get_experiment_by_name("mcq-consistency")
    assert experiment is None or not client.search_runs([experiment.experiment_id])
