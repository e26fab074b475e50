"""No real backend is told the right answer: a request holds only what a model may be shown, and only an oracle
backend (the simulated one) is told the answer key, apart from the requests (src/backends/oracle.py). The simulated
backend still answers right at its `success_rate`, and the response cache keeps the keys it had (pinned below)."""

from __future__ import annotations

import hashlib
from dataclasses import fields

import pytest

from src.answer_formats import FORMATS, FormatRequest
from src.answering.cache import ResponseCache
from src.answering.items import Item, answer_key
from src.answering.trials import answer_items
from src.backends.base import Backend, Completion, LabelScores, OptionScores, Request, SamplingParams
from src.backends.oracle import KnownAnswer, OracleBackend
from src.backends.simulated import SimulatedBackend, SimulatedSettings
from src.core.prompts import PromptTemplate
from src.core.questions import Question
from src.variants import make_variants

TEMPLATE = PromptTemplate(name="plain", template="Question: {question}\n{choices}\nAnswer:")
VARIANT_SETS = ("original", "perm_cyclic", "revas_true_false", "revas_multi_select")

# every field of a request, and why a real model may see it
SHOWN = {
    "prompt": "the text the model reads",
    "labels": "the labels it is shown, in slot order",
    "options": "the option texts it is shown (cloze continuations, option-text parsing)",
    "seed": "the trial's sampling seed",
    "key": "the trial's name, question id and variant id (seeds, logs)",
    "data": "the question's content digest (part of the response cache key)",
    "continuation_prefix": "what is put before a cloze continuation",
    "fmt": "the answer format the prompt asks in",
}


class Recording(Backend):
    """A real backend: it answers from the request alone (always the first label), and keeps every request."""

    name = "recording"

    def __init__(self) -> None:
        self.asked: list[Request] = []

    @property
    def identity(self) -> str:
        return "recording"

    def generate(self, requests, params):
        self.asked.extend(requests)
        return [[Completion(r.labels[0], truncated=False)] * params.n for r in requests]

    def score_labels(self, requests, sampling=None):
        self.asked.extend(requests)
        flat = [tuple(1.0 / len(r.labels) for _ in r.labels) for r in requests]
        return [LabelScores(p, 1.0, answer_dist=None if sampling is None else (*p, 0.0)) for p in flat]

    def score_options(self, requests):
        self.asked.extend(requests)
        return [OptionScores((-1.0,) * len(r.options), (-0.5,) * len(r.options)) for r in requests]


def question(answer: int, i: int = 0) -> Question:
    return Question(
        id=f"q{i}", question=f"Which city is {i}?", options=("Lyon", "Paris", "Nice", "Metz"), answer=answer
    )


def items_of(questions: list[Question], variant_sets=VARIANT_SETS) -> list[Item]:
    return [
        Item(q, v, FORMATS[v.fmt].request(TEMPLATE, q, v, seed=i))
        for q in questions
        for name in variant_sets
        for i, v in enumerate(make_variants({"name": name}, q, seed=0))
    ]


def test_a_request_holds_only_what_a_model_may_be_shown():
    assert {f.name for f in fields(FormatRequest)} == set(SHOWN), "a new request field: may a real model see it?"
    assert {f.name for f in fields(Request)} == set(SHOWN) - {"fmt"}


@pytest.mark.promise(
    "docs/development.md", "a backend's requests hold no answer: a real one is asked the same whatever it is"
)
@pytest.mark.parametrize("scoring", ["generate", "logprob", "cloze"])
def test_a_real_backend_is_asked_the_same_whatever_the_right_answer(scoring):
    asked = {}
    for answer in (0, 2):
        backend = Recording()
        answer_items(backend, items_of([question(answer)]), scoring=scoring, params=SamplingParams(), progress=False)
        asked[answer] = backend.asked
    slots = {answer: [it.variant.correct_slot for it in items_of([question(answer)])] for answer in (0, 2)}
    assert slots[0] != slots[2], "the two questions' variants have different right answers"
    assert asked[0] == asked[2] and asked[0]


@pytest.mark.parametrize("scoring", ["generate", "logprob", "cloze"])
def test_the_simulated_backend_is_right_at_its_success_rate(scoring):
    items = items_of([question(i % 4, i) for i in range(1500)], variant_sets=("original",))
    backend = SimulatedBackend(SimulatedSettings(success_rate=0.7))
    answers = answer_items(backend, items, scoring=scoring, params=SamplingParams(), progress=False)
    right = sum(a[0].slot == it.variant.correct_slot for it, a in zip(items, answers)) / len(items)
    assert right == pytest.approx(0.7, abs=0.036)  # 3 binomial sds at n=1500


def test_the_answer_key_is_each_variants_right_slot_and_whether_it_names_a_set():
    items = items_of([question(2)])
    known = answer_key(items)
    assert set(known) == {it.request.key for it in items}
    for it in items:
        assert known[it.request.key] == KnownAnswer(
            it.variant.correct_slot, names_a_set=it.variant.fmt == "multi_select"
        )


def test_one_trial_with_two_right_answers_is_refused():
    one, other = items_of([question(0)], ("original",)) + items_of([question(2)], ("original",))
    with pytest.raises(ValueError, match="trial q0/original is asked with two right answers"):
        answer_key([one, other])


def test_only_the_simulated_backend_is_an_oracle():
    assert isinstance(SimulatedBackend(SimulatedSettings()), OracleBackend)
    assert not isinstance(Recording(), OracleBackend)


# The sha256 of the sorted response-cache keys of each (backend, scoring, temperature), as the tool wrote them when
# the requests still carried the answer: a cache written then answers now.
PINNED_KEYS = {
    ("recording", "generate", 0.0): "2d3230ae22127987b8e528fec2576aa23cd3788ee2297965f8f3ef85d8050552",
    ("recording", "generate", 0.7): "ca01ec7d2ca9351f26691bde5cb328693919dd496980af43ecf2a0883a1be094",
    ("recording", "logprob", 0.0): "c10edcae35bd4e750b74d70eb897a6c3866768cb19af7a2752f8cbd9c8d0de95",
    ("recording", "logprob", 0.7): "8ab076eb8f33d3d7f67ac2a92fa3873a44e50e9822322ecdeb61959763c1ca5b",
    ("recording", "cloze", 0.0): "f5e5a812064a82d9acbfbf466392dde5c99f9165d084774dd18844a45c645edb",
    ("simulated", "generate", 0.0): "cc9a963ac42d9e52284c42100a41b1e3e2afde313124c3187fa3ed1662f5b55c",
    ("simulated", "generate", 0.7): "34bf5e588fd5e3713c6ff748d2adb37be7ff89757f15fcfb8dacdaa29a939343",
    ("simulated", "logprob", 0.0): "a3645d262765b53c0e3948064cb40960f1a8445694a0eb3f91a8181cb0794cb8",
    ("simulated", "logprob", 0.7): "4f47b5899b0bfbb0aa3b11b55272d0ee3f6d20d52da6d201d45c146098fd3c89",
    ("simulated", "cloze", 0.0): "c59c555a11e414285ecf0e8d056824d9e4d619d4e07ad3feecf37e74dde51012",
}


def cache_keys(path, backend: Backend, scoring: str, temperature: float) -> list[str]:
    """The response-cache keys a small job of every format writes."""
    cache = ResponseCache(path)
    params = SamplingParams(n=2, temperature=temperature)
    items = items_of([question(1, i) for i in range(3)])
    answer_items(backend, items, scoring=scoring, params=params, cache=cache, progress=False)
    return [k for (k,) in cache.conn.execute("SELECT key FROM responses ORDER BY key")]


@pytest.mark.promise("docs/development.md", "the response cache keys are those pinned, for real and simulated backends")
@pytest.mark.parametrize(("backend_name", "scoring", "temperature"), sorted(PINNED_KEYS))
def test_response_cache_keys_are_unchanged(tmp_path, backend_name, scoring, temperature):
    backend = Recording() if backend_name == "recording" else SimulatedBackend(SimulatedSettings())
    keys = cache_keys(tmp_path / "cache.db", backend, scoring, temperature)
    digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()
    assert digest == PINNED_KEYS[backend_name, scoring, temperature]
