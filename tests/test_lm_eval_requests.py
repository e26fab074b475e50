"""The requests `prompt=lm_eval` sends for an lm-eval task's questions, without lm-eval installed (the lm-eval tier
compares them with lm-eval's own: tests/test_lm_eval_tasks.py).

lm-eval scores each choice as `target_delimiter + choice` after the context, and its model moves the context's
trailing whitespace into the continuation (`TemplateLM._encode_pair`). A task whose choices are the labels of
options its context lists (MMLU) has its labels scored, " A" after "Answer:". Requests of every other benchmark and
prompt keep the tool's rule and their response-cache keys."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest

from src.answer_formats import FORMATS
from src.answering.cache import request_key
from src.backends.base import Request
from src.backends.text import continuation_text
from src.benchmarks.lm_eval import _target_delimiter, _with_lm_evals_text
from src.common.errors import UserError
from src.config.schema import compose_job
from src.core.prompts import PromptTemplate
from src.core.questions import Question
from src.variants import make_variants

LM_EVAL = PromptTemplate.from_config(compose_job(["prompt=lm_eval"]).prompt)


def lm_evals_pair(context: str, delimiter: str, choice: str) -> tuple[str, str]:
    """What lm-eval's model scores: (context less its trailing whitespace, that whitespace + delimiter + choice)."""
    kept = context.rstrip()
    return kept, context[len(kept) :] + delimiter + choice


def sent(question: Question, scoring: str, variant_index: int = 0) -> list[tuple[str, str]]:
    """(prompt, continuation) of each scored option of the request the job sends."""
    variant = make_variants({"name": "original" if not variant_index else "perm_cyclic"}, question, seed=0)
    r = FORMATS["mcq"].request(LM_EVAL, question, variant[variant_index], seed=0, scoring=scoring)
    return [(r.prompt, continuation_text(r.prompt, option, r.continuation_prefix)) for option in r.options]


@pytest.mark.parametrize(
    ("context", "delimiter"),
    [
        ("Question: What is red?\nAnswer:", " "),  # the usual task: " Paris" after "Answer:"
        ("Question: What is red?\nAnswer:\n", " "),  # a context ending in a line break: "\n Paris" after "Answer:"
        ("Question: What is red?\nAnswer: ", ""),  # no delimiter, the space kept in the context by the task
        ("Q: What is red?\nA:", "\n"),  # another delimiter
    ],
)
def test_a_cloze_request_is_the_pair_lm_evals_model_scores(context, delimiter):
    q = Question(
        id="t/0",
        question="What is red?",
        options=("blood", "grass", "sky"),
        answer=0,
        metadata={"context": context, "lm_eval_target_delimiter": delimiter, "lm_eval_preamble": "Solve.\n\n"},
    )
    assert sent(q, "cloze") == [lm_evals_pair("Solve.\n\n" + context, delimiter, o) for o in q.options]


def test_a_label_task_has_its_labels_scored_after_its_listed_options():
    """MMLU's choices are "A".."D" after the options listed as `A. text` lines: lm-eval scores " A" after "Answer:";
    under a permuted variant the labels name the options in their new places."""
    q = Question(
        id="mmlu_x/0",
        question="2+2?",
        options=("3", "4", "5", "6"),
        answer=1,
        metadata={"lm_eval_target_delimiter": " ", "lm_eval_preamble": "", "lm_eval_label_choices": True},
    )
    context = "2+2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:"
    assert sent(q, "cloze_shown") == [lm_evals_pair(context, " ", label) for label in "ABCD"]
    prompt, _ = sent(q, "cloze_shown", variant_index=1)[0]
    assert prompt.endswith("Answer:") and prompt != context  # the options listed in the variant's order


def test_other_requests_keep_the_tools_rule_and_their_cache_keys():
    """Without lm-eval's delimiter (any other benchmark, any other prompt) a request has no continuation prefix: " "
    before each option unless the prompt ends in whitespace, and its cache key is the one stored before the prefix
    existed (the same fields, hashed the same way), so no cached answer is lost."""
    q = Question(id="q", question="What is red?", options=("blood", "grass"), answer=0)
    pairs = sent(q, "cloze")
    assert all(cont == " " + o for (_, cont), o in zip(pairs, q.options))
    r = Request("Q: What is red?\nA:", (), ("blood",), 0, data="d")
    old = [".", "d", "cloze", r.prompt, (), ("blood",), None, [], None]
    assert (
        request_key(".", "cloze", r, {}, None, seeded=False)
        == hashlib.sha256(json.dumps(old, ensure_ascii=False).encode()).hexdigest()
    )
    with_prefix = Request(r.prompt, (), ("blood",), 0, data="d", continuation_prefix=" ")
    assert request_key(".", "cloze", with_prefix, {}, None, seeded=False) != request_key(
        ".", "cloze", r, {}, None, seeded=False
    )


class LabelTask:
    """A stand-in lm-eval task whose choices are the labels of listed options (MMLU's shape)."""

    config = SimpleNamespace(target_delimiter=" ", gen_prefix=None)

    def doc_to_text(self, doc):
        return "2+2?\nA. 3\nB. 4\nAnswer:"

    def doc_to_choice(self, doc):
        return ["A", "B"]


def test_cloze_without_the_options_is_refused_for_a_label_task():
    q = Question(id="t/0", question="2+2?", options=("3", "4"), answer=1, metadata={"lm_eval_task": "label_task"})
    with pytest.raises(UserError, match="label_task.*scoring=cloze_shown scores each label"):
        _with_lm_evals_text(q, LabelTask(), {}, full="2+2?\nA. 3\nB. 4\nAnswer:", scoring="cloze", chat=False)
    full = "Intro\n\n2+2?\nA. 3\nB. 4\nAnswer:"
    shown = _with_lm_evals_text(q, LabelTask(), {}, full=full, scoring="cloze_shown", chat=False)
    assert shown.metadata["lm_eval_label_choices"] is True
    assert shown.metadata["lm_eval_preamble"] == "Intro\n\n"
    assert shown.metadata["lm_eval_target_delimiter"] == " "
    assert "lm_eval_postamble" not in shown.metadata


def test_with_a_chat_template_the_question_sits_in_lm_evals_turns():
    """lm-eval's --apply_chat_template context: the question inside the user turn, the generation prompt after it,
    and no delimiter before the scored label; the whole request is that text, its trailing line break moved."""
    q = Question(id="t/0", question="2+2?", options=("3", "4"), answer=1, metadata={"lm_eval_task": "label_task"})
    full = "<s>system\nIntro</s>\n<s>user\n2+2?\nA. 3\nB. 4\nAnswer:</s>\n<s>assistant\n"
    chat = _with_lm_evals_text(q, LabelTask(), {}, full=full, scoring="cloze_shown", chat=True)
    assert chat.metadata["lm_eval_preamble"] == "<s>system\nIntro</s>\n<s>user\n"
    assert chat.metadata["lm_eval_postamble"] == "</s>\n<s>assistant\n"
    assert chat.metadata["lm_eval_target_delimiter"] == ""
    assert sent(chat, "cloze_shown") == [lm_evals_pair(full, "", label) for label in "AB"]


def test_a_chat_template_that_changes_the_question_is_refused():
    q = Question(id="t/0", question="2+2?", options=("3", "4"), answer=1, metadata={"lm_eval_task": "label_task"})
    stripped = "<s>user\n2+2? A. 3 B. 4 Answer:</s>"
    with pytest.raises(UserError, match="chat template changes lm_eval task label_task's question text"):
        _with_lm_evals_text(q, LabelTask(), {}, full=stripped, scoring="cloze_shown", chat=True)


@pytest.mark.parametrize(
    ("gen_prefix", "chat", "delimiter"),
    [
        (None, False, " "),  # plain text: the task's own delimiter
        (None, True, ""),  # after a chat template's generation prompt: none
        ("Answer:", True, " "),  # after a gen_prefix that ends in no whitespace: the task's own again
        ("Answer: ", True, ""),
    ],
)
def test_the_delimiter_before_each_choice_is_lm_evals(gen_prefix, chat, delimiter):
    """As lm-eval's `construct_requests` sets it under --apply_chat_template (and without it)."""
    task = SimpleNamespace(config=SimpleNamespace(target_delimiter=" ", gen_prefix=gen_prefix))
    assert _target_delimiter(task, chat=chat) == delimiter
