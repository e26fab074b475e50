"""The one small batched interface every backend implements: a list of requests in, a list of results out.

Backends never see Hydra or MLflow; `src.backends.load_backend` builds one from its config node.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from src.common.errors import UserError

if TYPE_CHECKING:  # the type only: the interface loads nothing of a backend's
    from src.backends.weights import ModelContent


@dataclass(frozen=True)
class Request:
    """One prompt to answer, with what scoring needs to know about the displayed options: only what a model may be
    shown, never the right answer (an oracle backend is told the answer key apart: src/backends/oracle.py)."""

    prompt: str  # fully rendered prompt (chat template not yet applied)
    labels: tuple[str, ...]  # displayed labels in slot order, e.g. ("A", "B", "C", "D")
    options: tuple[str, ...]  # displayed option texts in slot order (cloze scoring, option-text parsing)
    seed: int  # per (question, variant) seed; repetition r samples with a stream derived from (seed, r)
    key: str = ""  # stable trial identity "question_id/variant_id": an oracle's seed and answer key, and logs
    data: str = ""  # content identity of the question asked (src/core/questions.py): part of the response cache key
    # cloze: None puts " " before each option unless the prompt ends in whitespace (the tool's rule); a text is put
    # before each option as it is (an lm-eval task's target_delimiter after its context's trailing whitespace, which
    # lm-eval moves into the continuation: src/core/prompts.py `lm_eval_request`)
    continuation_prefix: str | None = None


class Completion(str):
    """A generated text that says whether generation stopped at `max_new_tokens` rather than at an end token.

    It is the plain `str` for every other purpose; `truncated` is None where the backend cannot tell.

    >>> c = Completion("B. Paris is", truncated=True)
    >>> c == "B. Paris is", c.truncated, Completion("B").truncated
    (True, True, None)
    """

    truncated: bool | None

    def __new__(cls, text: str, truncated: bool | None = None) -> Completion:
        self = super().__new__(cls, text)
        self.truncated = truncated
        return self

    def __reduce__(self) -> tuple[type[Completion], tuple[str, bool | None]]:  # pickles (joblib workers) keep the flag
        return (Completion, (str(self), self.truncated))


def truncated_of(text: str) -> bool | None:
    """The `truncated` flag of a generated text: a Completion's, None (unknown) for a plain str."""
    return getattr(text, "truncated", None)


def refuse_unknown_keys(cfg: Mapping[str, Any], keys: Collection[str], backend: str) -> None:
    """A `model` config node's first key that is not one of backend `backend`'s settings, refused in one line that
    lists the keys (the rule of every backend whose settings are a dataclass)."""
    unknown = sorted(set(cfg) - set(keys))
    if unknown:
        listed = ", ".join(sorted(keys))
        raise UserError(f"model.{unknown[0]} is not a setting of backend {backend}; the keys are {listed}")


@dataclass(frozen=True)
class LabelScores:
    """Next-token probabilities of each displayed label, renormalised over the labels."""

    probs: tuple[float, ...]  # one per displayed label, sums to 1
    mass: float  # total probability the label tokens held before renormalising, in [0, 1]
    # Exact first-token sampling: the next-token distribution under the sampling settings given to
    # `score_labels` (its temperature, top-k, top-p over the FULL vocabulary), read as the probability of each
    # label's tokens, then of anything else (INVALID) last; sums to 1. None unless a temperature was given.
    answer_dist: tuple[float, ...] | None = None


@dataclass(frozen=True)
class OptionScores:
    """Log-likelihood of each displayed option text as the continuation of the prompt (cloze / acc, acc_bytes)."""

    loglik: tuple[float, ...]  # sum of token log-probs, one per displayed option
    loglik_norm: tuple[float, ...]  # loglik divided by the option's length in bytes (lm-eval's acc_bytes)


@dataclass(frozen=True)
class SamplingParams:
    n: int = 1  # samples per prompt (repetitions)
    temperature: float = 0.0  # 0 = greedy: every sample is the greedy answer
    top_k: int | None = None
    top_p: float = 1.0
    max_new_tokens: int = 3
    # the samples are repetitions first_repetition .. first_repetition + n - 1, each drawn from its own stream of
    # (trial seed, repetition): a round of adaptive repetitions (src/answering/adaptive.py) goes on from where the
    # rounds before it stopped, with the draws a full run would have made; not part of any cache key (the
    # repetition is)
    first_repetition: int = 0


class Backend(ABC):
    """What every backend does: the three batched methods and its `identity`, with what the runner asks of any
    backend beside them. The defaults suit a backend that loads nothing and has no tokenizer (an API model, the
    simulation); the local backends override what they hold."""

    name: str  # the model's name in the config (`model.name`), in lines that speak of it
    tokenizer: Any = None  # the model's tokenizer once `load()` has run; None where there is none
    content: ModelContent | None = None  # the model's files by content (src/backends/weights.py); None: no files

    @property
    @abstractmethod
    def identity(self) -> str:
        """Everything that changes outputs: path/revision/file hash; part of the response cache key."""

    @abstractmethod
    def generate(self, requests: Sequence[Request], params: SamplingParams) -> list[list[str]]:
        """`params.n` raw completions per request, in repetition order; each a `Completion` where the backend
        knows whether generation stopped at `max_new_tokens` (truncated) rather than at an end token."""

    @abstractmethod
    def score_labels(self, requests: Sequence[Request], sampling: SamplingParams | None = None) -> list[LabelScores]:
        """One forward pass per prompt; probabilities of the displayed labels as the next token (`probs`, `mass`
        at temperature 1). With `sampling` (its temperature 0 = greedy), also `answer_dist`: the first sampled
        token's distribution over labels + INVALID under its temperature, top-k and top-p (exact first-token
        sampling); its `n` and `max_new_tokens` play no part."""

    @abstractmethod
    def score_options(self, requests: Sequence[Request]) -> list[OptionScores]:
        """Log-likelihood of each displayed option text as the continuation."""

    def load(self) -> None:
        """Load the model and its tokenizer now (the scoring methods do it on first use); nothing to load here."""
        return None

    def model_input(self, prompt: str) -> str | None:
        """The text the model is given for `prompt` (its chat template applied), or None where the backend does not
        wrap prompts or has not loaded its tokenizer yet (src/core/records.py `write_prompts`)."""
        return None

    def run_params(self) -> dict[str, int]:
        """What the job logs as params beside its config (the hf backend's token budget); none here."""
        return {}

    def new_job(self) -> None:
        """The next job of a sweep on this loaded backend (`src.job.runner.reuse_backend`); nothing to reset here."""
        return None

    def prompts_per_chunk(self, default: int) -> int:
        """Prompts per chunk of the answering loop (src/answering/trials.py): `default` unless the backend knows
        better (the hf backend on a GPU, from its token budget)."""
        return default

    def close(self) -> None:
        """End what the backend started (vLLM's engine process); idempotent. The runner calls it when a command's
        jobs are done, however they ended (`src.job.runner.release_backends`). Nothing to end here: what runs, runs
        in this process, and each call's threads end with the call."""
        return None
