"""Oracle backends for tests and plumbing: no weights, deterministic, and with a known ground truth."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from src.backends.base import Completion, LabelScores, OptionScores, Request, SamplingParams
from src.backends.oracle import KnownAnswer, OracleBackend
from src.common.errors import UserError


def _rng(seed: int, key: str, repetition: int) -> random.Random:
    return random.Random(f"sim|{seed}|{key}|{repetition}")


@dataclass(frozen=True)
class SimulatedSettings:
    """A `model` config node with backend=simulated, less `backend`: its keys are these fields."""

    success_rate: float = 0.8
    invalid_rate: float = 0.0
    first_slot_rate: float = 0.0  # share of trials that answer the first slot whatever the question: a letter habit
    # milliseconds per prompt, the whole call asleep (as a GPU's kernels, it leaves the GIL to the framework's
    # threads): a backend of known speed for the answering pipeline's overlap, and an observable progress bar
    latency_ms: float = 0.0
    name: str = "simulated"

    def __post_init__(self) -> None:
        if not 0.0 <= self.success_rate <= 1.0:
            raise ValueError("success_rate must be in [0, 1]")
        if not self.latency_ms >= 0.0:
            raise ValueError("latency_ms must be >= 0")
        if not 0.0 <= self.first_slot_rate <= 1.0:
            raise ValueError("first_slot_rate must be in [0, 1]")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> SimulatedSettings:
        """The settings of a config node; one line naming a key that is not one, or a rate out of range."""
        try:
            return cls(**{k: v for k, v in cfg.items() if k != "backend"})
        except (TypeError, ValueError) as err:
            raise UserError(f"model config for backend simulated: {err}; check the keys under model") from None


class SimulatedBackend(OracleBackend):
    """Each trial is right with probability `success_rate`, otherwise a uniformly random wrong label,
    and with probability `invalid_rate` an unparseable answer; with probability `first_slot_rate` (default 0) it
    answers the first slot whatever the question (a letter habit, docs/metrics.md "Position bias"). Seeded per
    (question, variant, repetition).

    Temperature 0 means greedy, so every repetition repeats repetition 0's answer.

    Answer formats (a request's format, see src/answer_formats/): a true/false request's labels are ("Yes", "No"),
    so it says the right one with probability `success_rate`; a trial whose answer names a set (`names_a_set`:
    multi_select) gets a set of labels: the single answer above, plus the correct label with probability
    `success_rate`, plus each other label with probability (1 - success_rate) / 2.

    The right slot and the set flag come from the answer key it is told (`know`, src/backends/oracle.py), by the
    request's trial key; a trial it was not told has no right answer: a uniformly random label.
    """

    def __init__(self, settings: SimulatedSettings) -> None:
        self.settings = settings
        self.name = settings.name
        self.answers: dict[str, KnownAnswer] = {}

    def know(self, answers: Mapping[str, KnownAnswer]) -> None:
        self.answers = dict(answers)

    @property
    def identity(self) -> str:
        habit = f",first_slot_rate={self.settings.first_slot_rate}" if self.settings.first_slot_rate else ""
        return f"simulated(success_rate={self.settings.success_rate},invalid_rate={self.settings.invalid_rate}{habit})"

    def _answer(self, req: Request, repetition: int) -> int | None:
        rng = _rng(req.seed, req.key, repetition)
        if rng.random() < self.settings.invalid_rate:
            return None
        n = len(req.labels)
        # drawn only when set, so that a model without the habit answers as it always has
        if self.settings.first_slot_rate and rng.random() < self.settings.first_slot_rate:
            return 0
        known = self.answers.get(req.key)
        if known is None or rng.random() < self.settings.success_rate:
            return known.correct_slot if known is not None else rng.randrange(n)
        return rng.choice([s for s in range(n) if s != known.correct_slot])

    def _selection(self, req: Request, repetition: int) -> list[int] | None:
        """A multi-select answer: the slots named, or None (INVALID)."""
        first = self._answer(req, repetition)
        if first is None:
            return None
        rng = _rng(req.seed, req.key + "/select", repetition)
        chosen = {first}
        correct = self.answers[req.key].correct_slot  # a set is asked only of a trial it was told
        for slot in range(len(req.labels)):
            p = self.settings.success_rate if slot == correct else (1.0 - self.settings.success_rate) / 2
            if rng.random() < p:
                chosen.add(slot)
        return sorted(chosen)

    def _taking(self, requests: Sequence[Request]) -> _Latency:
        """The call's `latency_ms` per prompt, slept at its end less what computing its answers took."""
        return _Latency(len(requests) * self.settings.latency_ms / 1000.0)

    def generate(self, requests: Sequence[Request], params: SamplingParams) -> list[list[str]]:
        """Rendered answers; never truncated (an answer is a label, a list of labels or one short sentence)."""
        with self._taking(requests):
            return self._generate(requests, params)

    def _generate(self, requests: Sequence[Request], params: SamplingParams) -> list[list[str]]:
        out: list[list[str]] = []
        for req in requests:
            first = params.first_repetition
            reps = [0] * params.n if params.temperature == 0 else range(first, first + params.n)
            known = self.answers.get(req.key)
            if known is not None and known.names_a_set:
                texts = [self._render_set(req, self._selection(req, r)) for r in reps]
            else:
                texts = [self._render(req, self._answer(req, r)) for r in reps]
            out.append([Completion(t, truncated=False) for t in texts])
        return out

    @staticmethod
    def _render_set(req: Request, slots: list[int] | None) -> str:
        return "I cannot tell." if slots is None else ", ".join(req.labels[s] for s in slots)

    @staticmethod
    def _render(req: Request, slot: int | None) -> str:
        return "I cannot tell." if slot is None else req.labels[slot]

    def _peaked(self, req: Request, n: int) -> list[float]:
        """A distribution whose argmax is the simulated greedy answer (uniform when it is INVALID)."""
        slot = self._answer(req, 0)
        if slot is None:
            return [1.0 / n] * n
        rest = 0.4 / (n - 1)
        return [0.6 if s == slot else rest for s in range(n)]

    def score_labels(self, requests: Sequence[Request], sampling: SamplingParams | None = None) -> list[LabelScores]:
        """With a temperature, `answer_dist` is the peaked distribution tempered (one-hot on its argmax at 0),
        scaled by 1 - invalid_rate, with invalid_rate as INVALID; top-k/top-p are not simulated."""
        with self._taking(requests):
            return self._score_labels(requests, sampling)

    def _score_labels(self, requests: Sequence[Request], sampling: SamplingParams | None) -> list[LabelScores]:
        out = []
        for r in requests:
            probs = self._peaked(r, len(r.labels))
            dist = None
            if sampling is not None:
                temperature = sampling.temperature
                if temperature <= 0:
                    best = max(range(len(probs)), key=probs.__getitem__)
                    tempered = [float(s == best) for s in range(len(probs))]
                else:
                    weights = [p ** (1.0 / temperature) for p in probs]
                    tempered = [w / sum(weights) for w in weights]
                dist = tuple(p * (1.0 - self.settings.invalid_rate) for p in tempered) + (self.settings.invalid_rate,)
            out.append(LabelScores(tuple(probs), 0.9, answer_dist=dist))
        return out

    def score_options(self, requests: Sequence[Request]) -> list[OptionScores]:
        with self._taking(requests):
            return self._score_options(requests)

    def _score_options(self, requests: Sequence[Request]) -> list[OptionScores]:
        out = []
        for r in requests:
            ll = tuple(math.log(p) for p in self._peaked(r, len(r.options)))
            out.append(OptionScores(ll, tuple(x / max(1, len(o.encode())) for x, o in zip(ll, r.options))))
        return out


class _Latency:
    """A backend call that takes `seconds` in all: what is left of them when its body ends is slept (`time.sleep`
    releases the GIL), so the call's time is the latency set, not the latency plus the simulation's own work."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = 0.0

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        left = self.seconds - (time.perf_counter() - self.start)
        if left > 0 and exc[0] is None:
            time.sleep(left)
