"""Exact first-token sampling: the tempered full-vocabulary distribution, seeded draws from it, INVALID as its own
category, and the expected SURE/RWS shares computed exactly from it."""

from __future__ import annotations

import itertools
import math
import random

import pandas as pd
import pytest

from src.answering.cache import ResponseCache
from src.answering.trials import Item, answer_items, draw_answers, to_records
from src.backends.base import Request, SamplingParams
from src.backends.simulated import SimulatedBackend, SimulatedSettings
from src.core.questions import Question
from src.core.variant import Variant
from src.metrics import compute_metrics
from src.metrics.expected import outcome_probs
from src.metrics.guessing import T, p_star

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from .test_hf_backend import requests as hf_requests, tiny, tiny_model_dir  # noqa: E402,F401  (fixture)


def manual_dist(backend, request: Request, temperature: float, top_k=None, top_p=1.0) -> list[float]:
    """Labels + INVALID from one unpadded forward pass, filtered by hand (no code shared with the backend)."""
    ids = backend.tokenizer(backend._prompt_text(request.prompt))["input_ids"]
    with torch.no_grad():
        logits = backend.model(torch.tensor([ids])).logits[0, -1].double()
    if temperature == 0:
        probs = torch.zeros_like(logits)
        probs[int(logits.argmax())] = 1.0
    else:
        logits = logits / temperature
        if top_k is not None:
            logits[logits < torch.sort(logits, descending=True).values[top_k - 1]] = -math.inf
        if top_p < 1.0:
            ranked = torch.sort(logits, descending=True)
            cumulative, keep = 0.0, torch.zeros_like(logits, dtype=torch.bool)
            for value, index in zip(torch.softmax(ranked.values, -1).tolist(), ranked.indices.tolist()):
                if cumulative >= top_p:
                    break
                keep[index] = True
                cumulative += value
            logits[~keep] = -math.inf
        probs = torch.softmax(logits, -1)
    label_ids = [
        {backend.tokenizer(s, add_special_tokens=False)["input_ids"][0] for s in (lab, " " + lab)}
        for lab in request.labels
    ]
    shared = set.intersection(*label_ids) if len(label_ids) > 1 else set()
    per_label = [float(sum(probs[i] for i in ids - shared)) for ids in label_ids]
    return per_label + [1.0 - sum(per_label)]


@pytest.mark.parametrize(
    "temperature,top_k,top_p", [(0.7, None, 1.0), (1.3, 20, 1.0), (0.5, None, 0.9), (0.0, None, 1.0)]
)
@pytest.mark.promise("docs/speed.md", "exact sampling applies temperature, top_k and top_p to the whole vocabulary")
def test_answer_dist_is_the_tempered_full_vocabulary_distribution(tiny_model_dir, temperature, top_k, top_p):
    backend = tiny(tiny_model_dir, batch_size=3)
    reqs = hf_requests()
    plain = backend.score_labels(reqs)
    tempered = backend.score_labels(reqs, SamplingParams(temperature=temperature, top_k=top_k, top_p=top_p))
    for request, a, b in zip(reqs, plain, tempered):
        assert a.answer_dist is None
        assert b.probs == pytest.approx(a.probs, abs=1e-9) and b.mass == pytest.approx(a.mass, abs=1e-9)
        assert len(b.answer_dist) == len(request.labels) + 1 and sum(b.answer_dist) == pytest.approx(1.0, abs=1e-9)
        assert b.answer_dist == pytest.approx(manual_dist(backend, request, temperature, top_k, top_p), abs=1e-5)
    # a random model puts most of its mass outside the label tokens: INVALID is a real category
    assert max(b.answer_dist[-1] for b in tempered) > 0.5 or temperature == 0


@pytest.mark.promise("docs/speed.md", "exact sampling draws R answers with the trial's seed, one stream per repetition")
def test_draws_are_seeded_per_repetition_and_follow_the_distribution():
    dist = [0.5, 0.2, 0.1, 0.2]
    draws = draw_answers(dist, seed=7, n=20)
    assert draws == draw_answers(dist, seed=7, n=20)
    assert draws[:5] == draw_answers(dist, seed=7, n=5), "repetition r has its own stream"
    assert draws != draw_answers(dist, seed=8, n=20)
    many = [draw_answers(dist, seed=s, n=1)[0] for s in range(4000)]
    for slot, p in zip([0, 1, 2, None], dist):
        assert many.count(slot) / len(many) == pytest.approx(p, abs=0.03)


def _items(n_questions: int = 6) -> list[Item]:
    items = []
    for q in range(n_questions):
        question = Question(id=f"q{q}", question=f"What is {q}?", options=("w", "x", "y", "z"), answer=q % 4)
        variant = Variant(f"q{q}", "original", "original", (0, 1, 2, 3), ("w", "x", "y", "z"), q % 4)
        request = Request(
            prompt=f"What is {q}?\nA. w\nB. x\nC. y\nD. z\nAnswer:",
            labels=tuple("ABCD"),
            options=variant.option_texts,
            seed=100 + q,
            key=f"q{q}/original",
        )
        items.append(Item(question, variant, request))
    return items


@pytest.mark.promise(
    "docs/speed.md", "logprob repetitions draw from answer_dist (labels, then INVALID) and the cache keeps it"
)
def test_logprob_repetitions_draw_from_answer_dist_with_invalid_and_cache(tiny_model_dir, tmp_path):
    backend = tiny(tiny_model_dir, batch_size=4)
    items = _items()
    params = SamplingParams(n=12, temperature=0.8)
    cache = ResponseCache(tmp_path / "cache.db")
    first = answer_items(backend, items, scoring="logprob", params=params, cache=cache, progress=False)
    again = answer_items(backend, items, scoring="logprob", params=params, cache=cache, progress=False)
    assert [[a.slot for a in row] for row in first] == [[a.slot for a in row] for row in again]
    assert not any(a.cache_hit for row in first for a in row) and all(a.cache_hit for row in again for a in row)
    for it, row in zip(items, first):
        dist = row[0].answer_dist
        assert [a.slot for a in row] == draw_answers(dist, seed=it.request.seed, n=12)
    assert any(a.slot is None for row in first for a in row), "INVALID is drawn when the mass sits elsewhere"
    hotter = answer_items(
        backend, items, scoring="logprob", params=SamplingParams(n=12, temperature=1.5), cache=cache, progress=False
    )
    assert not any(a.cache_hit for row in hotter for a in row), "the tempered part is keyed by the sampling settings"
    greedy = answer_items(backend, items, scoring="logprob", params=SamplingParams(n=1), cache=cache, progress=False)
    assert all(a.cache_hit for row in greedy for a in row), "temperature-1 scores are shared with greedy runs"

    records = to_records(items, first, run_info={"temperature": 0.8, "scoring": "logprob"})
    assert records["answer_dist"].map(len).eq(5).all()
    assert records["parsed_label"].isna().sum() == sum(a.slot is None for row in first for a in row)
    metrics = compute_metrics(records)
    for name in ("expected_st", "expected_rws", "expected_sure_right", "expected_acc", "expected_invalid_rate"):
        assert name in metrics
    p_invalid = records.groupby("question_id")["answer_dist"].first().map(lambda d: d[-1]).mean()
    assert metrics["expected_invalid_rate"] == pytest.approx(p_invalid)


def test_simulated_backend_gives_an_answer_dist_and_expected_metrics():
    items = _items(30)
    backend = SimulatedBackend(SimulatedSettings(success_rate=0.7, invalid_rate=0.1))
    answers = answer_items(
        backend, items, scoring="logprob", params=SamplingParams(n=10, temperature=0.7), progress=False
    )
    records = to_records(items, answers, run_info={})
    metrics = compute_metrics(records)
    assert metrics["expected_invalid_rate"] == pytest.approx(0.1)
    assert 0 <= metrics["expected_st"] <= 1 and metrics["expected_st"] == pytest.approx(
        metrics["expected_sure_right"] + metrics["expected_sure_wrong"]
    )
    assert sum(
        metrics[f"expected_{k}"] for k in ("sure_right", "sure_wrong", "unsure_right", "unsure_wrong")
    ) == pytest.approx(1.0)


def brute_force(dist, correct, R, threshold):
    out = dict.fromkeys(("sure_right", "sure_wrong", "unsure_right", "unsure_wrong"), 0.0)
    for draws in itertools.product(range(len(dist)), repeat=R):
        prob = math.prod(dist[d] for d in draws)
        counts = [draws.count(c) for c in range(len(dist))]
        sure = max(counts) >= threshold
        right = correct is not None and counts[correct] > 0 and counts[correct] == max(counts)
        out[f"{'sure' if sure else 'unsure'}_{'right' if right else 'wrong'}"] += prob
    return out


@pytest.mark.promise("docs/speed.md", "the repetition metrics in expectation are exact multinomial sums")
@pytest.mark.parametrize("case", range(8))
def test_outcome_probs_match_brute_force_enumeration(case):
    rng = random.Random(case)
    k = rng.randint(2, 4)
    dist = [rng.random() ** 2 for _ in range(k)]
    dist = [d / sum(dist) for d in dist]
    R = rng.randint(1, 7)
    threshold = rng.randint(1, R)
    correct = rng.choice([None, *range(k - 1)])  # the last category is INVALID, never correct
    got = outcome_probs(dist, correct=correct, R=R, threshold=threshold)
    want = brute_force(dist, correct, R, threshold)
    assert got == pytest.approx(want, abs=1e-12)
    assert sum(got.values()) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("p,R", [(0.9, 10), (0.6, 10), (0.97, 20), (0.3, 15)])
def test_outcome_probs_match_the_binomial_formula_for_two_categories(p, R):
    threshold = p_star(R=R)  # above R / 2: at most one category can reach it
    assert threshold > R / 2
    got = outcome_probs([p, 1 - p], correct=0, R=R, threshold=threshold)
    assert got["sure_right"] == pytest.approx(T(threshold, M=R, r=p), abs=1e-12)
    assert got["sure_wrong"] == pytest.approx(T(threshold, M=R, r=1 - p), abs=1e-12)
    # right when the correct category is drawn at least as often as the other: X >= R / 2, X > 0
    right = sum(math.comb(R, x) * p**x * (1 - p) ** (R - x) for x in range(max(1, math.ceil(R / 2)), R + 1))
    assert got["sure_right"] + got["unsure_right"] == pytest.approx(right, abs=1e-12)


@pytest.mark.promise("docs/speed.md", "expected_st and expected_rws read the SURE threshold p*")
def test_expected_metrics_read_the_original_variant_and_the_sure_threshold():
    R = 10
    rows = []
    for q, dist in enumerate([[0.95, 0.03, 0.01, 0.01, 0.0], [0.1, 0.8, 0.05, 0.05, 0.0], [0.3, 0.3, 0.2, 0.1, 0.1]]):
        for r in range(R):
            rows.append(
                {
                    "question_id": f"q{q}",
                    "variant_kind": "original",
                    "variant_id": "original",
                    "repetition": r,
                    "n_options": 4,
                    "option_order": [2, 0, 1, 3],
                    "correct_option": 2,
                    "correct_label": "A",
                    "answer_dist": dist,
                    "parsed_label": "A",
                    "chosen_option": 2,
                    "correct": True,
                }
            )
    metrics = compute_metrics(pd.DataFrame(rows), families=["expected"], by_subjects=False)
    threshold = p_star(R=R, k=4)
    assert metrics["expected_sure_right"] == pytest.approx(
        (
            outcome_probs([0.95, 0.03, 0.01, 0.01, 0.0], correct=0, R=R, threshold=threshold)["sure_right"]
            + outcome_probs([0.1, 0.8, 0.05, 0.05, 0.0], correct=0, R=R, threshold=threshold)["sure_right"]
            + outcome_probs([0.3, 0.3, 0.2, 0.1, 0.1], correct=0, R=R, threshold=threshold)["sure_right"]
        )
        / 3
    )
    assert metrics["expected_acc"] == pytest.approx((0.95 + 0.1 + 0.3) / 3)
    assert metrics["expected_invalid_rate"] == pytest.approx(0.1 / 3)
