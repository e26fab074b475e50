"""A job as one frozen, typed value: `JobSpec`, built and checked once from a composed config
(src/config/checks.py `job_spec`).

Every door of a job (`python -m src.run`'s check before Hydra starts, the sweep's pre-check, the job itself) builds
its `JobSpec` with `job_spec`, and every layer after reads that spec, never the raw config: the values are
converted once here and defaulted once, by the schema.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from src.backends.base import SamplingParams
from src.tracking.store import TrackingOptions

# the benchmark keys every loader takes as arguments; the others are the loader's own options
BENCHMARK_ARGUMENTS = ("name", "path", "split")


@dataclass(frozen=True, kw_only=True)
class CacheSpec:
    """The response cache (src/answering/cache.py): where it is and whether jobs on many nodes share it."""

    enabled: bool
    path: str
    shared: bool  # `path` is a folder of chunk files shared with no file lock


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """One job's settings as the schema (src/config/schema.py `JobConfig`) defines them, checked. The four groups
    keep their own keys, which differ by backend, loader and variant set and are checked where each is built;
    they are read-only mappings of plain values."""

    model: MappingProxyType[str, Any]
    benchmark: MappingProxyType[str, Any]
    variants: MappingProxyType[str, Any]
    prompt: MappingProxyType[str, Any]
    seed: int
    limit: int | None
    sampling: SamplingParams  # repetitions (n), temperature, top_k, top_p, max_new_tokens
    adaptive: bool
    scoring: str
    cloze_normalise: bool
    fewshot: int
    option_refs: str
    data_dir: str
    cache: CacheSpec
    resume: bool
    tracking: TrackingOptions
    sure_rule: str  # metrics.sure_rule
    pride_protocol: str  # metrics.pride_protocol
    bootstrap: int  # stats.bootstrap: resamples of the intervals, 0 = none
    level: float  # stats.level: their coverage
    resolved: MappingProxyType[str, Any]  # the whole config as plain values, resolved: its hash, params, config.yaml

    @property
    def temperature(self) -> float:
        return self.sampling.temperature

    @property
    def repetitions(self) -> int:
        return self.sampling.n

    @property
    def backend_config(self) -> dict[str, Any]:
        """The model group as its backend takes it (`scoring` is the job's, not the backend's)."""
        return {k: v for k, v in self.model.items() if k != "scoring"}

    @property
    def benchmark_options(self) -> dict[str, Any]:
        """The benchmark's own keys, beside its name, path and split."""
        return {k: v for k, v in self.benchmark.items() if k not in BENCHMARK_ARGUMENTS}

    @property
    def lm_evals_own(self) -> bool:
        """An lm-eval task asked with lm-eval's own prompt (`prompt=lm_eval`): its code builds the contexts."""
        return self.benchmark["name"] == "lm_eval" and self.prompt.get("name") == "lm_eval"

    @property
    def interval_level(self) -> float | None:
        """The coverage of the logged intervals, None when none are logged (stats.bootstrap=0)."""
        return self.level if self.bootstrap > 0 else None

    def plain(self) -> dict[str, Any]:
        """The whole resolved config as a new plain dict (for writing or hashing it)."""
        return copy.deepcopy(dict(self.resolved))


def spec_of(values: dict[str, Any]) -> JobSpec:
    """The spec of a checked config, `values` its resolved plain values (every key of the schema there, as composing
    with the schema gives them), which the spec keeps as `resolved` (what the job hashes and logs)."""
    cache, metrics, stats = values["cache"], values["metrics"], values["stats"]
    return JobSpec(
        model=MappingProxyType(values["model"]),
        benchmark=MappingProxyType(values["benchmark"]),
        variants=MappingProxyType(values["variants"]),
        prompt=MappingProxyType(values["prompt"]),
        seed=int(values["seed"]),
        limit=None if values["limit"] is None else int(values["limit"]),
        sampling=SamplingParams(
            n=int(values["repetitions"]),
            temperature=float(values["temperature"]),
            top_k=None if values["top_k"] is None else int(values["top_k"]),
            top_p=float(values["top_p"]),
            max_new_tokens=int(values["max_new_tokens"]),
        ),
        adaptive=bool(values["adaptive"]),
        scoring=str(values["scoring"]),
        cloze_normalise=bool(values["cloze_normalise"]),
        fewshot=int(values["fewshot"]),
        option_refs=str(values["option_refs"]),
        data_dir=str(values["data_dir"]),
        cache=CacheSpec(enabled=bool(cache["enabled"]), path=str(cache["path"]), shared=bool(cache["shared"])),
        resume=bool(values["resume"]),
        tracking=TrackingOptions.of(values["tracking"]),
        sure_rule=str(metrics["sure_rule"]),
        pride_protocol=str(metrics["pride_protocol"]),
        bootstrap=int(stats["bootstrap"]),
        level=float(stats["level"]),
        resolved=MappingProxyType(values),
    )
