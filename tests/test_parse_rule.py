"""Which rule decided each answer (`parse_rule`) and whether a generation was cut by max_new_tokens (`truncated`):
in the records, through the response cache, and as each backend reports it."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace as Fake  # a stand-in object with just the attributes a test gives it

import pandas as pd
import pytest

from src.answer_formats import FORMATS
from src.answer_formats.multi_select import MULTI_SELECT_MIN_NEW_TOKENS
from src.answering.cache import ResponseCache
from src.answering.trials import Item, answer_items, to_records
from src.backends.base import Backend, Completion, Request, SamplingParams
from src.backends.openai_backend import _texts
from src.backends.simulated import SimulatedBackend, SimulatedSettings
from src.backends.vllm_backend import _completion
from src.core.prompts import PromptTemplate, labels_for
from src.core.questions import Question
from src.variants import make_variants

try:  # the HF test reuses test_hf_backend's tiny random llama (a session fixture) and helpers
    import torch

    from .test_hf_backend import requests as hf_requests, tiny, tiny_model_dir  # noqa: F401
except (ImportError, pytest.skip.Exception):
    torch = None

TEMPLATE = PromptTemplate(name="plain", template="Question: {question}\n{choices}\nAnswer:")
QUESTIONS = [
    Question(id=f"q{i}", question=f"Which {i}?", options=("Lyon", "Paris", "Marseille", "Nice"), answer=1)
    for i in range(6)
]


class ScriptedBackend(Backend):
    """Answers from `script(request, repetition)`, raw text or a `Completion` (to say whether it was cut); it only
    generates."""

    def __init__(self, script, identity: str):
        self.script, self._identity, self.name = script, identity, "scripted"

    @property
    def identity(self) -> str:
        return self._identity

    def generate(self, requests, params: SamplingParams) -> list[list]:
        return [[self.script(r, k) for k in range(params.n)] for r in requests]

    def score_labels(self, requests, sampling=None):
        raise AssertionError("a scripted backend only generates")

    def score_options(self, requests):
        raise AssertionError("a scripted backend only generates")


def items(variant_set: str = "original", questions=QUESTIONS) -> list[Item]:
    out = []
    for q in questions:
        for v in make_variants({"name": variant_set}, q, seed=0):
            if v.fmt != "mcq":  # mcq requests get a short prompt of their own below
                out.append(Item(q, v, FORMATS[v.fmt].request(TEMPLATE, q, v, seed=7)))
                continue
            out.append(
                Item(
                    q,
                    v,
                    Request(
                        prompt=f"{q.question} {v.variant_id}",
                        labels=labels_for(v.n_options, "A."),
                        options=v.option_texts,
                        seed=7,
                        key=f"{q.id}/{v.variant_id}",
                    ),
                )
            )
    return out


def records(backend, its, scoring: str, params: SamplingParams = SamplingParams(), cache=None) -> pd.DataFrame:
    answers = answer_items(backend, its, scoring=scoring, params=params, cache=cache, progress=False)
    return to_records(its, answers, run_info={"scoring": scoring})


def test_simulated_runs_record_the_rule_of_every_scoring_mode():
    sim = SimulatedBackend(SimulatedSettings(success_rate=0.7, invalid_rate=0.3))
    generated = records(sim, items(), "generate")
    assert set(generated["parse_rule"]) == {"first_token", "invalid_no_label"}  # "B" / "I cannot tell."
    assert (generated["parse_rule"] == "invalid_no_label").equals(generated["parsed_label"].isna())
    assert generated["truncated"].dtype == "boolean" and not generated["truncated"].any()
    scored = records(sim, items(), "logprob")
    assert set(scored["parse_rule"]) == {"logprob_argmax"} and scored["truncated"].isna().all()
    sampled = records(sim, items(), "logprob", SamplingParams(n=2, temperature=1.0))
    assert set(sampled["parse_rule"]) == {"exact_sample"}
    assert set(records(sim, items(), "cloze")["parse_rule"]) == {"cloze_argmax"}


def test_formats_record_their_rules_and_select_all_is_generated_with_room():
    asked = []

    class Recording(SimulatedBackend):
        def generate(self, requests, params):
            asked.append((getattr(requests[0], "fmt", "mcq"), params.max_new_tokens))
            return super().generate(requests, params)

    table = records(
        Recording(SimulatedSettings(success_rate=0.8)),
        items("revas_multi_select") + items("revas_true_false", QUESTIONS[:1]),
        "generate",
    )
    by_fmt = table.groupby("fmt")["parse_rule"].agg(set).to_dict()
    assert by_fmt["multi_select"] <= {"label_list"} and by_fmt["true_false"] == {"first_word"}
    assert by_fmt["mcq"] == {"first_token"}
    assert ("multi_select", MULTI_SELECT_MIN_NEW_TOKENS) in asked and ("mcq", 3) in asked
    assert all(tokens == MULTI_SELECT_MIN_NEW_TOKENS for fmt, tokens in asked if fmt == "multi_select")


def test_truncated_answers_through_the_pipeline_and_the_cache(tmp_path):
    script = {
        0: Completion("B. Paris is", truncated=True),  # the label is complete: still B
        1: Completion("The capital of France is", truncated=True),  # cut before any answer
        2: Completion("Paris", truncated=True),  # a cut option text: might have been "Paris, Texas"
        3: Completion("Paris", truncated=False),
        4: "C",  # a backend that cannot tell
        5: Completion("<think>A or C? Lyon is", truncated=True),
    }
    backend = ScriptedBackend(lambda r, k: script[int(r.key[1])], identity="scripted-truncation")
    its = items()
    cache = ResponseCache(tmp_path / "cache.db")
    first = records(backend, its, "generate", cache=cache)
    assert first["parsed_label"].fillna("INVALID").tolist() == ["B", "INVALID", "INVALID", "B", "C", "INVALID"]
    assert first["parse_rule"].tolist() == [
        "first_token",
        "truncated",
        "truncated",
        "option_text",
        "first_token",
        "truncated",
    ]
    assert first["truncated"].tolist() == [True, True, True, False, pd.NA, True]
    again = records(
        ScriptedBackend(lambda r, k: pytest.fail("answered from the cache"), identity="scripted-truncation"),
        its,
        "generate",
        cache=cache,
    )
    assert again["cache_hit"].all()
    pd.testing.assert_frame_equal(again.drop(columns="cache_hit"), first.drop(columns="cache_hit"))


def test_old_cache_entries_are_read_as_unknown_truncation(tmp_path):
    cache = ResponseCache(tmp_path / "cache.db")
    backend = ScriptedBackend(lambda r, k: Completion("B", truncated=False), identity="scripted-old")
    its = items(questions=QUESTIONS[:1])
    records(backend, its, "generate", cache=cache)
    key = cache.conn.execute("SELECT key FROM responses").fetchone()[0]
    cache.conn.execute("UPDATE responses SET value = ? WHERE key = ?", ('"B"', key))  # as written before truncation
    old = records(backend, its, "generate", cache=cache)
    assert old["cache_hit"].all() and old["parsed_label"].tolist() == ["B"] and old["truncated"].isna().all()


def test_served_backends_read_finish_reason_length_as_truncated():
    assert _completion(Fake(text="B. Paris is", finish_reason="length")).truncated is True
    assert _completion(Fake(text="B", finish_reason="stop")).truncated is False
    assert _completion(Fake(text="B")).truncated is None
    reply = {
        "choices": [
            {"index": 0, "message": {"content": "B. Paris"}, "finish_reason": "length"},
            {"index": 1, "text": "C", "finish_reason": "stop"},
            {"index": 2, "text": "D"},
        ]
    }
    assert [(t, t.truncated) for t in _texts(reply)] == [("B. Paris", True), ("C", False), ("D", None)]


@pytest.mark.skipif(torch is None, reason="torch and transformers are not installed")
def test_hf_generate_marks_rows_without_an_end_token_truncated(tiny_model_dir, monkeypatch):
    from src.backends.hf import generation

    backend = tiny(tiny_model_dir, batch_size=4)
    decode, rows = generation.decode, []
    monkeypatch.setattr(generation, "decode", lambda tok, eos, ids: rows.append(ids) or decode(tok, eos, ids))
    params = SamplingParams(n=1, temperature=0.0, max_new_tokens=4)
    cut = [backend.generate([r], params)[0] for r in hf_requests()]  # one call each: rows[i] is request i's
    monkeypatch.setattr(generation, "decode", decode)
    eos = backend.lm.eos_ids.tolist()
    assert all(not set(row) & set(eos) for row in rows), "a random tiny model does not stop by itself"
    assert all(isinstance(s[0], Completion) and s[0].truncated for s in cut)
    # Make request 0's second greedy token an end token: request 0 now stops early (not truncated); each other
    # request stops where that token first appears in its own greedy row, or runs to max_new_tokens (truncated).
    stop = rows[0][1]
    backend.lm.eos_ids = torch.tensor([*eos, stop], device=backend.lm.device)
    ended = backend.generate(hf_requests(), params)
    for row, before, after in zip(rows, cut, ended):
        assert after[0].truncated == (stop not in row)
        if stop in row:
            assert after[0] == backend.tokenizer.decode(row[: row.index(stop)], skip_special_tokens=True)
        else:
            assert after[0] == before[0]
    assert ended[0][0].truncated is False
    sampled = backend.generate(hf_requests()[:2], replace(params, n=3, temperature=1.0))
    assert all(isinstance(t, Completion) and t.truncated is not None for s in sampled for t in s)
