"""The requests `prompt=lm_eval` sends for an lm-eval task's questions, without lm-eval installed (the lm-eval tier
compares them with lm-eval's own: tests/test_lm_eval_tasks.py).

lm-eval scores each choice as `target_delimiter + choice` after the context, and its model moves the context's
trailing whitespace into the continuation (`TemplateLM._encode_pair`). A task whose choices are the labels of
options its context lists (MMLU) has its labels scored, " A" after "Answer:". Requests of every other benchmark and
prompt keep the tool's rule and their response-cache keys."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from src.answer_formats import FORMATS
from src.answering.cache import request_key
from src.backends.base import Request
from src.backends.text import continuation_text
from src.benchmarks.lm_eval import _target_delimiter, _with_lm_evals_text, option_listing
from src.common.errors import UserError
from src.config.compose import compose_job
from src.core.prompts import PromptTemplate
from src.core.questions import Question
from src.core.variant import NOTA, NOTA_TEXT, Variant
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
    context = "2+2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer:"
    q = Question(
        id="mmlu_x/0",
        question="2+2?",
        options=("3", "4", "5", "6"),
        answer=1,
        metadata={
            "lm_eval_target_delimiter": " ",
            "lm_eval_preamble": "",
            "lm_eval_listing": option_listing(context, "ABCD"),
        },
    )
    assert sent(q, "cloze_shown") == [lm_evals_pair(context, " ", label) for label in "ABCD"]
    prompt, _ = sent(q, "cloze_shown", variant_index=1)[0]
    assert prompt == "2+2?\nA. 4\nB. 5\nC. 6\nD. 3\nAnswer:"  # the options listed in the variant's order


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


@pytest.mark.parametrize("scoring", ["cloze", "cloze_shown"])
def test_a_label_task_has_its_labels_scored_under_either_cloze_mode(scoring):
    """A suite's MMLU-shaped task under scoring=cloze is asked as lm-eval asks it: its options listed, labels scored."""
    q = Question(id="t/0", question="2+2?", options=("3", "4"), answer=1, metadata={"lm_eval_task": "label_task"})
    full = "Intro\n\n2+2?\nA. 3\nB. 4\nAnswer:"
    shown = _with_lm_evals_text(q, LabelTask(), {}, full=full, scoring=scoring, chat=False)
    assert sent(shown, scoring) == [lm_evals_pair(full, " ", label) for label in "AB"]
    assert shown.metadata["lm_eval_listing"]["texts"] == ["3", "4"]
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


# -- a suite: every scoring on every shape of task is lm-eval's request or refused ---------------------------------


class ShapedTask:
    """A stand-in lm-eval task of one shape: one document, its context, choices and target delimiter."""

    OUTPUT_TYPE = "multiple_choice"
    VERSION = 1.0

    def __init__(self, context: str, choices: list[str], delimiter: str = " "):
        self.context, self.choices = context, choices
        self.config = SimpleNamespace(target_delimiter=delimiter, gen_prefix=None)

    def doc_to_text(self, doc):
        return self.context

    def doc_to_choice(self, doc):
        return self.choices

    def doc_to_target(self, doc):
        return 1


SHAPES = {  # task name -> a task of that shape, and whether its choices are the labels of listed options
    "mmlu_like": (ShapedTask("Find x.\nA. 3\nB. 4\nC. 5\nAnswer:", ["A", "B", "C"]), True),
    "arc_like": (ShapedTask("Question: What is red?\nAnswer:", ["blood", "grass", "sky"]), False),
    "hellaswag_like": (ShapedTask("A man sits on a roof. He", ["falls.", "sings.", "waits."]), False),
    "own_delimiter": (ShapedTask("Q: What is red?\nA:\n", ["blood", "grass"], delimiter="\n"), False),
}
SCORINGS = ("generate", "logprob", "cloze", "cloze_shown")


@pytest.mark.parametrize("scoring", SCORINGS)
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_scoring_asks_each_shape_as_lm_eval_does_or_is_refused(name, scoring):
    """What `prompt=lm_eval` sends for one task of a suite, read as `load_lm_eval` reads it: under a cloze mode each
    scored pair is the one lm-eval's model scores (labels after listed options, option texts after the context);
    under generate or logprob the prompt is lm-eval's context. Anything else is refused in one line naming the task:
    no scoring changes a task's prompt silently."""
    from src.benchmarks.lm_eval import task_questions

    task, labels = SHAPES[name]
    (question,), _ = task_questions(task, [{}], name=name, split="test", ids=name, subject=name)
    full = "Intro.\n\n" + task.context
    try:
        asked = _with_lm_evals_text(question, task, {}, full=full, scoring=scoring, chat=False)
    except UserError as err:
        assert "\n" not in str(err) and f"lm_eval task {name}'s" in str(err) and "use scoring=cloze" in str(err)
        assert not labels and scoring != "cloze"  # refused only where lm-eval's request cannot be sent
        return
    request = FORMATS["mcq"].request(LM_EVAL, asked, original(asked), seed=0, scoring=scoring)
    if scoring.startswith("cloze"):
        prefix = request.continuation_prefix
        pairs = [(request.prompt, continuation_text(request.prompt, o, prefix)) for o in request.options]
        delimiter = task.config.target_delimiter
        assert pairs == [lm_evals_pair(full, delimiter, choice) for choice in task.choices]
    else:
        assert request.prompt == full and labels


def original(question):
    return make_variants({"name": "original"}, question, seed=0)[0]


def test_a_label_tasks_variants_reletter_its_listed_options_and_a_text_tasks_reorder_its_texts():
    """perm_cyclic's second rotation under scoring=cloze: MMLU's shape lists the options in their new order under
    the same labels (the labels scored), a text task's option texts are scored in their new order."""
    for name, (task, labels) in SHAPES.items():
        (question,), _ = task_questions_of(task, name)
        asked = _with_lm_evals_text(question, task, {}, full=task.context, scoring="cloze", chat=False)
        variant = make_variants({"name": "perm_cyclic"}, asked, seed=0)[1]
        request = FORMATS["mcq"].request(LM_EVAL, asked, variant, seed=0, scoring="cloze")
        if labels:
            assert request.options == ("A", "B", "C") and request.prompt.startswith("Find x.\nA. 4\nB. 5\nC. 3\n")
        else:
            assert request.options == variant.option_texts != tuple(task.choices)
            assert request.prompt == task.context.rstrip()


def task_questions_of(task, name):
    from src.benchmarks.lm_eval import task_questions

    return task_questions(task, [{}], name=name, split="test", ids=name, subject=name)


class SeededTask:
    """A stand-in lm-eval task whose few-shot sampler, like lm-eval's, is seeded once and draws for every document
    in turn: what a document is shown depends on how many documents were drawn for before it."""

    OUTPUT_TYPE = "multiple_choice"
    VERSION = 1.0
    config = SimpleNamespace(target_delimiter=" ", gen_prefix=None, num_fewshot=None, test_split="test")
    fewshot_cfg = SimpleNamespace(split=None)
    POOL = [f"Example {i}? yes" for i in range(20)]

    def __init__(self):
        self.eval_docs = [{"q": f"Asked {i}?", "target": -1 if i == 1 else 0} for i in range(6)]

    def set_fewshot_seed(self, seed):
        import random

        self.rng = random.Random(seed)

    def has_training_docs(self):
        return True

    def test_docs(self):
        return self.eval_docs

    def doc_to_text(self, doc):
        return f"Question: {doc['q']}\nAnswer:"

    def doc_to_choice(self, doc):
        return ["yes", "no"]

    def doc_to_target(self, doc):
        return doc["target"]

    def doc_to_prefix(self, doc):
        return ""

    def fewshot_context(self, doc, shots, **kwargs):
        self.asked_with = kwargs
        return "".join(e + "\n\n" for e in self.rng.sample(self.POOL, shots)) + self.doc_to_text(doc)


def test_each_asked_document_gets_the_examples_of_a_run_over_the_whole_task(monkeypatch):
    """With `limit` or a document skipped as unlabelled (document 1 here), the sampler still draws for every document
    before the last one asked, as lm-eval's run over the whole task does: asking document 4 alone shows it what
    asking all six shows it."""
    import random
    import sys

    from src.benchmarks import lm_eval
    from src.benchmarks.lm_eval import lm_eval_contexts, task_questions

    task = SeededTask()
    monkeypatch.setitem(sys.modules, "lm_eval", SimpleNamespace())
    monkeypatch.setitem(sys.modules, "lm_eval.defaults", SimpleNamespace(DEFAULT_OTHER_SEED=1234))
    monkeypatch.setattr(lm_eval, "load_tasks", lambda name, include_path=None: {"seeded": task})
    questions, skipped = task_questions(task, task.eval_docs, name="seeded", split="test", ids="seeded")
    assert list(skipped) == [1] and len(questions) == 5
    for q in questions:
        q.metadata.update(lm_eval_task="seeded", lm_eval_doc=int(q.id.rpartition("/")[2]))
    rng = random.Random(1234)
    whole_run = [rng.sample(SeededTask.POOL, 2) for _ in task.eval_docs]  # lm-eval's draws, document by document
    alone = lm_eval_contexts([questions[-2]], k=2, options={"task": "seeded"})[0]
    assert questions[-2].id == "seeded/4"
    assert alone.metadata["lm_eval_preamble"] == "".join(e + "\n\n" for e in whole_run[4])
    every = {q.id: q.metadata["lm_eval_preamble"] for q in lm_eval_contexts(questions, k=2, options={"task": "seeded"})}
    assert every["seeded/4"] == alone.metadata["lm_eval_preamble"]
    assert every["seeded/2"] == "".join(e + "\n\n" for e in whole_run[2])  # after the unlabelled document's draw
    rng = random.Random(1234)
    one_shot = [rng.sample(SeededTask.POOL, 1) for _ in task.eval_docs]  # one example: the same rule at k=1
    alone = lm_eval_contexts([questions[-2]], k=1, options={"task": "seeded"})[0]
    assert alone.metadata["lm_eval_preamble"] == one_shot[4][0] + "\n\n"
    assert task.asked_with["chat_template"] is None and "apply_chat_template" not in task.asked_with
    lm_eval_contexts([questions[-2]], k=1, options={"task": "seeded"}, chat_template=len)  # lm-eval's chat turns
    assert task.asked_with == {"gen_prefix": "", "chat_template": len, **lm_eval.CHAT_ARGS}
    monkeypatch.setattr(task, "config", SimpleNamespace(**{**vars(task.config), "num_fewshot": 0}))
    zero = lm_eval_contexts(questions, k=2, options={"task": "seeded"})  # a task that sets 0 shots keeps them
    assert {q.metadata["lm_eval_preamble"] for q in zero} == {""}


# -- a label task's listed options, listed again in each variant's order as the task lists them ----------------------


def listed_question(context: str, choices: list[str], answer: int = 0) -> Question:
    """A label task's question as `prompt=lm_eval` asks it (`_with_lm_evals_text` on a one-document stand-in)."""
    task = ShapedTask(context, choices)
    (question,), _ = task_questions_of(task, "listed")
    question = replace(question, answer=answer)
    return _with_lm_evals_text(question, task, {}, full="Intro.\n\n" + context, scoring="cloze", chat=False)


def variant_of(question: Question, order: tuple[int, ...], texts: tuple[str, ...] | None = None) -> Variant:
    shown = texts or tuple(question.options[i] for i in order)
    return Variant(question.id, "perm", "perm_1", order, shown, order.index(question.answer))


def asked(question: Question, variant: Variant, scoring: str = "cloze") -> tuple[str, tuple[str, ...]]:
    request = FORMATS["mcq"].request(LM_EVAL, question, variant, seed=0, scoring=scoring)
    return request.prompt, request.options


@pytest.mark.parametrize(
    ("context", "reordered"),
    [
        (  # MMLU's form: `A. text` lines, `Answer:` last
            "Find x.\nA. 3\nB. 4\nC. 5\nAnswer:",
            "Find x.\nA. 5\nB. 3\nC. 4\nAnswer:",
        ),
        (  # another mark, blank lines between options, a text's own spaces kept where it moves
            "Find x.\n\n(A) 3 \n\n(B) 4\n\n(C) 5\n\nAnswer:",
            "Find x.\n\n(A) 5\n\n(B) 3 \n\n(C) 4\n\nAnswer:",
        ),
        (  # a last option over two lines moves whole; numbered labels stay numbers
            "Find x.\n1) 3\n2) 4\n3) five,\nor 5\nAnswer:",
            "Find x.\n1) five,\nor 5\n2) 3\n3) 4\nAnswer:",
        ),
        (  # no answer cue after the last option
            "Find x.\nA. 3\nB. 4\nC. 5",
            "Find x.\nA. 5\nB. 3\nC. 4",
        ),
    ],
)
def test_a_label_tasks_variant_lists_its_options_again_as_the_task_lists_them(context, reordered):
    """The original order is lm-eval's own context, letter for letter; a permuted variant is the same context with
    the options in their new places, re-lettered, everything around them as the task wrote it."""
    question = listed_question(context, ["1", "2", "3"] if "1)" in context else ["A", "B", "C"])
    labels = ("1", "2", "3") if "1)" in context else ("A", "B", "C")
    assert asked(question, variant_of(question, (0, 1, 2))) == ("Intro.\n\n" + context.rstrip(), labels)
    assert asked(question, variant_of(question, (2, 0, 1))) == ("Intro.\n\n" + reordered.rstrip(), labels)
    prompt, texts = asked(question, variant_of(question, (2, 0, 1)), scoring="generate")
    assert prompt == "Intro.\n\n" + reordered and texts == tuple(question.options[i] for i in (2, 0, 1))


def test_a_variant_that_adds_an_option_gets_the_next_label_in_the_tasks_form():
    """CoRA's "None of the above" in a fourth slot is `D. None of the above`, its label scored as lm-eval scores
    the others."""
    question = listed_question("Find x.\nA. 3\nB. 4\nC. 5\nAnswer:", ["A", "B", "C"])
    variant = variant_of(question, (1, 0, NOTA, 2), ("4", "3", NOTA_TEXT, "5"))
    assert asked(question, variant) == (
        "Intro.\n\nFind x.\nA. 4\nB. 3\nC. None of the above\nD. 5\nAnswer:",
        ("A", "B", "C", "D"),
    )


@pytest.mark.parametrize(
    ("context", "why"),
    [
        ("Find x.\nA. 3\n(B) 4\nC. 5\nAnswer:", "mark their labels in more than one way (A. , (B) , C. )"),
        ("Find x.\nA. 3\n\nB. 4\nC. 5\nAnswer:", "separated by line breaks of more than one length"),
    ],
)
def test_a_label_task_whose_listing_cannot_be_written_again_is_refused(context, why):
    """Never listed again in a form of the tool's own: one line naming the task and what to do."""
    with pytest.raises(UserError) as refused:
        listed_question(context, ["A", "B", "C"])
    line = str(refused.value)
    assert "\n" not in line and line.startswith("lm_eval task listed (document 0): its ")
    assert why in line and "cannot be listed again" in line and "prompt=cora" in line
