"""The typed schema of a job's config: `JobConfig` and its nested nodes, registered in Hydra's ConfigStore.

`JobConfig` is registered as `job_schema`; `conf/config.yaml` names it first in its defaults list, so the top level
and its `cache`, `tracking`, `metrics` and `stats` nodes are typed: `temperature=abc` fails to merge. Hydra accepts a
key added with `+` (`+temprature=0.5`), so composing (src/config/compose.py) refuses any key the schema does not have.

The groups (`model`, `benchmark`, `variants`, `prompt`) differ in their keys by backend, loader and variant set;
each checks its own keys where it is built (e.g. `model.x is not a setting of backend hf`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from src.tracking.names import DEFAULT_EXPERIMENT, DEFAULT_URI

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
GROUPS = ("model", "benchmark", "variants", "prompt")


@dataclass
class CacheConfig:
    """The response cache: reruns and interrupted sweeps reuse every answer already computed."""

    enabled: bool = True
    path: str = ".cache/responses.db"
    # true: `path` is a folder of chunk files that jobs on many nodes share with no file lock (src/answering/cache.py)
    shared: bool = False


@dataclass
class TrackingConfig:
    uri: str = DEFAULT_URI
    experiment: str = DEFAULT_EXPERIMENT
    offline: bool = False  # true: log to offline_dir now, upload with `python -m src.sync` later
    offline_dir: str = "mlruns/offline"
    on_outage: str = "fail"  # a server that does not answer: fail (one line, exit 2) | offline (log to offline_dir)
    retry_budget_s: float = 20.0  # how long MLflow's client retries one call to a server before giving up


@dataclass
class MetricsConfig:
    """How the metrics are computed from the records (they never change what is asked)."""

    sure_rule: str = "answer"  # answer: SURE/right by the letter vote of section 3.2 | correctness: the paper's tables
    pride_protocol: str = "paper"  # paper: pride_acc leaves the calibration questions out | authors: scores them too


@dataclass
class StatsConfig:
    """Intervals for the headline metrics (src/metrics/intervals.py): a cluster bootstrap over questions, seeded
    from the job's seed, and Wilson intervals for shares of questions. They never change what is asked."""

    bootstrap: int = 1000  # resamples of the questions; 0 = no intervals at all
    level: float = 0.95  # coverage of each interval, in (0, 1)


@dataclass
class JobConfig:
    """One job = one model x benchmark x variant set x temperature (conf/config.yaml picks the groups)."""

    model: Any = MISSING
    benchmark: Any = MISSING
    variants: Any = MISSING  # original: each question once; cora: the CoRA divergent set; ...
    prompt: Any = MISSING
    seed: int = 0  # seeds variant shuffles, few-shot picks and sampling
    limit: int | None = None  # first N questions in file order; null = all
    temperature: float = 0.0  # 0 = greedy decoding
    repetitions: int = 1  # samples of the same prompt (the repetition paper's R)
    # true: stop a prompt's repetitions once its SURE/UNSURE x right/wrong cell is settled (src/answering/adaptive.py)
    adaptive: bool = False
    scoring: str = "generate"  # generate | logprob | cloze | cloze_shown; conf/config.yaml takes model.scoring
    top_k: int | None = None
    top_p: float = 1.0
    max_new_tokens: int = 3  # the repetition paper's setting: the answer letter and a little slack
    cloze_normalise: bool = (
        False  # cloze picks the highest raw log-likelihood (lm-eval acc); true = per byte (acc_bytes)
    )
    fewshot: int = 0  # examples from the benchmark's dev/train split, never the evaluated questions
    option_refs: str = "keep_rules"  # options that refer to others ("all of the above"): keep_rules | exclude | ignore
    data_dir: str = "../shared/data"  # conf/config.yaml reads $MCQ_DATA_DIR first
    cache: CacheConfig = field(default_factory=CacheConfig)
    resume: bool = True  # skip a job whose identical config already has a FINISHED run in the experiment
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)  # metrics.sure_rule=correctness: the paper's tables
    stats: StatsConfig = field(default_factory=StatsConfig)  # stats.bootstrap=0: no intervals
    vars: dict[str, Any] = field(default_factory=dict)  # free values for interpolations in sweep files


ConfigStore.instance().store(name="job_schema", node=JobConfig)
NESTED: dict[str, Any] = {f.name: f.default_factory for f in fields(JobConfig) if is_dataclass(f.default_factory)}
