"""The contract every backend keeps, as checks any backend can be put through, in the spirit of scikit-learn's common
estimator checks: tests/test_backend_contract.py runs them on each backend against a fake engine or server, and the
opt-in tiers run them on the real ones (tests/test_vllm_engine.py on vLLM's engine, tests/test_model_server.py
behind `transformers serve`).

- the same requests get answers of the same shapes from every backend (`check_answer_shapes`);
- a request's seed decides its samples: the same seed, the same samples, whatever else shares the batch
  (`check_seeded_samples`), and the sampling settings reach the engine as given (`check_sampling_reaches_engine`,
  where a test can see what the engine got);
- a misspelled setting is refused in one line naming it (`check_bad_setting_is_one_line`);
- nothing reaches stdout, which is data (`check_stdout_clean`);
- `close()` ends what the backend started, and no thread of its calls outlives them (`check_close_ends_children`).

`run_contract` runs them all.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import pytest

from src.backends import load_backend
from src.backends.base import Backend, Request, SamplingParams, truncated_of
from src.common.errors import UserError

REPO = Path(__file__).resolve().parents[1]
SCORINGS = ("generate", "logprob", "cloze")
TOLERANCE = 1e-6  # probabilities summed from float32 logits
END_BOUND_S = 30  # how long an engine's processes may take to end after `close()` (vLLM's shutdown waits 5 s)

# what the checks ask: two to four labels, a prompt that ends in whitespace, seeds and keys of their own
REQUESTS = (
    Request(prompt="Q: 2+2?\nA. 3\nB. 4\nAnswer:", labels=("A", "B"), options=("3", "4"), seed=11, key="q0/v0"),
    Request(
        prompt="Question: What colour is the sky?\nA. green\nB. blue\nC. red\nD. black\nAnswer:",
        labels=("A", "B", "C", "D"),
        options=("green", "blue", "red", "black"),
        seed=12,
        key="q1/v0",
    ),
    Request(
        prompt="Pick one:\nA. x\nB. y\nC. z\nAnswer: ",
        labels=("A", "B", "C"),
        options=("x", "y", "z"),
        seed=13,
        key="q2/v0",
    ),
)
SAMPLED = SamplingParams(n=2, temperature=0.9, top_p=0.95, max_new_tokens=3)

# What the engine got for each request (or sample row) since it was last asked: dicts with `temperature`, `top_p`,
# `top_k` and `seed` where the engine gets them. None: a real engine, which the test cannot look into.
Seen = Callable[[], list[Mapping[str, Any]]]


def check_answer_shapes(backend: Backend, scorings: Collection[str] = SCORINGS) -> None:
    """Each scoring answers every request, in order, in the shapes of `Backend`'s methods."""
    reqs = list(REQUESTS)
    assert isinstance(backend.identity, str) and backend.identity and backend.identity == backend.identity
    if "generate" in scorings:
        assert backend.generate([], SAMPLED) == []
        for params in (SAMPLED, SamplingParams(n=3, temperature=0.0, max_new_tokens=3)):
            out = backend.generate(reqs, params)
            assert len(out) == len(reqs), params
            for samples in out:
                assert len(samples) == params.n and all(isinstance(t, str) for t in samples), samples
                assert all(truncated_of(t) in (True, False, None) for t in samples)
            if params.temperature == 0:
                assert all(len(set(samples)) == 1 for samples in out), "greedy: every repetition the same answer"
    if "logprob" in scorings:
        for sampling in (None, SamplingParams(temperature=0.7), SamplingParams(temperature=0.0)):
            scores = backend.score_labels(reqs, sampling)
            assert len(scores) == len(reqs)
            for r, s in zip(reqs, scores):
                assert len(s.probs) == len(r.labels) and all(0.0 <= p <= 1.0 + TOLERANCE for p in s.probs)
                assert sum(s.probs) == pytest.approx(1.0, abs=TOLERANCE) and -TOLERANCE <= s.mass <= 1.0 + TOLERANCE
                if sampling is None:
                    assert s.answer_dist is None
                    continue
                assert s.answer_dist is not None and len(s.answer_dist) == len(r.labels) + 1, "labels, then INVALID"
                assert sum(s.answer_dist) == pytest.approx(1.0, abs=TOLERANCE)
                if sampling.temperature == 0:
                    assert max(s.answer_dist) == pytest.approx(1.0, abs=TOLERANCE), "greedy: one answer"
    if "cloze" in scorings:
        options = backend.score_options(reqs)
        assert len(options) == len(reqs)
        for r, o in zip(reqs, options):
            assert len(o.loglik) == len(o.loglik_norm) == len(r.options)
            assert all(x <= TOLERANCE for x in o.loglik), "a log-likelihood"
            for x, norm, option in zip(o.loglik, o.loglik_norm, r.options):
                assert norm == pytest.approx(x / max(1, len(option.encode())), abs=1e-9), "divided by its bytes"


def check_seeded_samples(backend: Backend) -> None:
    """The same seeds give the same samples, and a request's samples do not depend on what shares its batch."""
    first = backend.generate(list(REQUESTS), SAMPLED)
    assert backend.generate(list(REQUESTS), SAMPLED) == first, "the same seeds, the same samples"
    assert backend.generate([REQUESTS[1]], SAMPLED) == [first[1]], "alone as in a batch"


def check_sampling_reaches_engine(backend: Backend, seen: Seen) -> None:
    """temperature, top_p, top_k and each request's seed reach the engine as given."""
    seen()
    params = SamplingParams(n=2, temperature=0.7, top_k=5, top_p=0.9, max_new_tokens=2)
    backend.generate(list(REQUESTS), params)
    got = seen()
    assert got, "the engine was asked"
    for entry in got:
        assert entry["temperature"] == pytest.approx(0.7) and entry["top_p"] == pytest.approx(0.9), entry
        assert entry["top_k"] == 5, entry
    assert {r.seed for r in REQUESTS} <= {entry["seed"] for entry in got}, "every request's own seed"


def check_bad_setting_is_one_line(node: Mapping[str, Any]) -> None:
    """A misspelled key in the `model` config node is refused in one line that names it."""
    with pytest.raises(UserError) as refused:
        load_backend({**node, "temperatur": 0.7}, chat=False)
    message = str(refused.value)
    assert "temperatur" in message and "\n" not in message, message


def check_stdout_clean(backend: Backend, capfd: pytest.CaptureFixture[str], scorings: Collection[str]) -> None:
    """Nothing a backend or its engine does (its own processes included: they share this file descriptor) reaches
    stdout, which holds the jobs' JSON lines."""
    capfd.readouterr()
    check_answer_shapes(backend, scorings)
    out, _ = capfd.readouterr()
    assert out == "", f"stdout is data: {out[:500]!r}"


def check_close_ends_children(
    backend: Backend, scorings: Collection[str], before: tuple[set[Any], set[threading.Thread]] | None = None
) -> None:
    """`close()` ends the processes the backend started (vLLM's engine core), twice is harmless, and no thread of a
    call outlives it (the openai backend's request pool). `before`: the processes and threads there were before the
    backend first loaded (`running_now()`), where it has loaded already."""
    processes, threads = before or running_now()
    check_answer_shapes(backend, [s for s in scorings if s == "generate"] or scorings)
    backend.close()
    backend.close()
    deadline = time.monotonic() + END_BOUND_S
    while (left := set(multiprocessing.active_children()) - processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"outlived close(): {left}"
    lingering = [t for t in set(threading.enumerate()) - threads if not t.daemon and t.is_alive()]
    assert not lingering, f"threads outlived their call: {lingering}"


def running_now() -> tuple[set[Any], set[threading.Thread]]:
    """This process's child processes (multiprocessing's: vLLM starts its engine core so) and threads now."""
    return set(multiprocessing.active_children()), set(threading.enumerate())


def run_contract(
    backend: Backend,
    capfd: pytest.CaptureFixture[str],
    *,
    node: Mapping[str, Any],
    scorings: Collection[str] = SCORINGS,
    seen: Seen | None = None,
) -> None:
    """Every check on one backend that has not loaded yet, `node` its config node; `close()` last."""
    before = running_now()
    check_bad_setting_is_one_line(node)
    check_stdout_clean(backend, capfd, scorings)
    if "generate" in scorings:
        check_seeded_samples(backend)
        if seen is not None:
            check_sampling_reaches_engine(backend, seen)
    check_close_ends_children(backend, scorings, before)
