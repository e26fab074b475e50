"""One job as a plain function of its composed config: `run_job(cfg, out_dir=...)`.

Wires config -> benchmark -> variants -> prompts -> backend -> records -> metrics -> MLflow. Each step is a
plain function in its own module; this file only connects them. It reads nothing from the Hydra runtime or the
process's arguments, so tests and other programs call it in-process with a config from
`src.config_schema.compose_job`; `python -m src.run` is the Hydra entry point around it.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Mapping

from omegaconf import DictConfig, OmegaConf

from .errors import UserError

log = logging.getLogger("src.job")
SUMMARY_METRICS = ("mcqa", "mcqa_plus", "cora", "bmca_1.0", "invalid_rate")


@dataclass(frozen=True)
class JobResult:
    """What a job leaves: its MLflow run, its metrics and the folder of its artifacts."""

    run_id: str
    metrics: dict[str, float]
    out_dir: Path
    skipped: bool = False  # resume found a finished run of the same config; nothing was asked

    def summary(self) -> str:
        """The one JSON line `python -m src.run` prints per job."""
        if self.skipped:
            return json.dumps({"run_id": self.run_id, "skipped": "already finished"})
        shown = {k: round(self.metrics[k], 4) for k in SUMMARY_METRICS if k in self.metrics}
        return json.dumps({"run_id": self.run_id, **shown})


def check_config(cfg: DictConfig) -> None:
    from .validity import check_validity

    if cfg.temperature < 0:
        raise UserError(f"config key temperature: {cfg.temperature} must be >= 0 (0 = greedy)")
    if cfg.repetitions < 1:
        raise UserError(f"config key repetitions: {cfg.repetitions} must be >= 1")
    if cfg.limit is not None and cfg.limit < 1:
        raise UserError(f"config key limit: {cfg.limit} must be a positive integer or null (all questions)")
    check_validity(scoring=cfg.scoring, variants=OmegaConf.to_container(cfg.variants, resolve=True),
                   temperature=float(cfg.temperature), repetitions=int(cfg.repetitions))


_LOADED: dict[str, object] = {}  # the last backend built in this process, by its config


def reuse_backend(model_cfg: dict, *, chat: bool):
    """Jobs of a sweep that run in one process (the basic launcher) share a loaded model: with the model axis
    outermost, each model loads once per sweep. Only the latest is kept, so memory holds one model."""
    from .backends import load_backend

    key = json.dumps([model_cfg, chat], sort_keys=True, default=str)
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = load_backend(model_cfg, chat=chat)
    return _LOADED[key]


def build_items(cfg: DictConfig, questions, template):
    """Every variant of every question, rendered into a backend request."""
    return plan_items(cfg, questions, template)[0]


def plan_items(cfg: DictConfig, questions, template):
    """(items, left_out): every variant of every question rendered into a backend request, and per reason the ids
    of the questions that had variants left out under the `option_refs` policy (METRICS.md, validity rules)."""
    from .answer_formats import FORMATS
    from .benchmarks import load_fewshot_pool
    from .fewshot import pick_fewshot
    from .trials import Item, trial_seed
    from .variants import make_variants, plan_variants

    bench = cfg.benchmark
    pool = lru_cache(maxsize=None)(lambda subject: tuple(load_fewshot_pool(
        bench.name, data_dir=cfg.data_dir, subject=subject)))
    evaluated = {q.id for q in questions}
    variant_cfg = OmegaConf.to_container(cfg.variants, resolve=True)
    if variant_cfg["name"] == "revas_misleading" and variant_cfg.get("source_run"):
        # second stage: the generator gets the source run's wrong answers; reading MLflow stays out of variants
        from .records import read_run_records
        from .variants.revas import wrong_answers

        source = read_run_records(str(variant_cfg["source_run"]), cfg.tracking.uri, key="variants.source_run")
        if not evaluated & set(source["question_id"].astype(str)):
            raise UserError(f"config key variants.source_run: run {variant_cfg['source_run']} answered none of these "
                            f"{cfg.benchmark.name} questions; give a run on the same benchmark and limit")
        variant_cfg["source_answers"] = wrong_answers(source)
        log.info("misleading replacement: %d of the source run's questions were answered wrong",
                 len(variant_cfg["source_answers"]))
    items, left_out = [], {}
    for q in questions:
        plan = plan_variants(variant_cfg, q, seed=cfg.seed, option_refs=cfg.option_refs)
        for reason, count in plan.excluded.items():
            if count:
                left_out.setdefault(reason, []).append(q.id)
        if not plan.variants:
            continue
        shots = pick_fewshot(pool, q, k=cfg.fewshot, seed=cfg.seed, exclude=evaluated)
        shot_pairs = [(s, make_variants({"name": "original"}, s, seed=cfg.seed)[0]) for s in shots]
        for v in plan.variants:  # true/false and select-all prompts are zero-shot: their formats ignore the shots
            seed = trial_seed(cfg.seed, q.id, v.variant_id)
            items.append(Item(q, v, FORMATS[v.fmt].request(template, q, v, seed=seed, fewshot=shot_pairs,
                                                           scoring=cfg.scoring)))
    return items, left_out


def run_job(cfg: DictConfig, *, out_dir: str | Path, sweep: Mapping[str, str] | None = None) -> JobResult:
    """Run one job of a composed config: load, ask, record, compute, log to MLflow. `out_dir` receives the
    artifacts it logs; `sweep` holds the `sweep_id` and `parent_run_id` of the multirun it belongs to. Raises
    UserError for bad input or config, before any compute where it can."""
    import mlflow

    from . import tracking
    from .backends.base import SamplingParams
    from .benchmarks import describe_answer_slots, load_benchmark
    from .cache import ResponseCache
    from .metrics import compute_metrics
    from .prompts import PromptTemplate
    from .records import write_records
    from .trials import CLOZE_MODES, answer_items, prompt_hash, to_records
    from .variants import REASONS as EXCLUSION_REASONS

    check_config(cfg)
    uri = tracking.job_tracking_uri(cfg.tracking)
    tracking.check_tracking(uri)  # fail before any compute when the store is unreachable
    mlflow.set_tracking_uri(uri)
    exp_id = tracking.with_retries(lambda: tracking.experiment_id(mlflow, cfg.tracking.experiment, uri))
    job_hash = tracking.config_hash(OmegaConf.to_container(cfg, resolve=True))
    if cfg.resume:
        done = tracking.with_retries(lambda: tracking.finished_run(mlflow, exp_id, job_hash))
        if done is not None:  # a rerun of an interrupted sweep skips the jobs that finished
            log.info("already finished as run %s (config_hash %s); set resume=false to run again", done.info.run_id, job_hash)
            return JobResult(run_id=done.info.run_id, metrics=dict(done.data.metrics), out_dir=Path(out_dir),
                             skipped=True)
        tracking.with_retries(lambda: tracking.mark_interrupted(mlflow, exp_id, job_hash))
    bench = OmegaConf.to_container(cfg.benchmark, resolve=True)
    questions = load_benchmark(bench.pop("name"), path=bench.pop("path", None), split=bench.pop("split", None),
                               data_dir=cfg.data_dir, seed=cfg.seed, limit=cfg.limit, options=bench)
    log.info("%s: %s", cfg.benchmark.name, describe_answer_slots(questions))
    template = PromptTemplate.from_config(OmegaConf.to_container(cfg.prompt, resolve=True))
    items, left_out = plan_items(cfg, questions, template)
    log.info("%d questions x variants = %d prompts x %d repetitions", len(questions), len(items), cfg.repetitions)
    for reason, ids in sorted(left_out.items()):
        log.info("option_refs=%s: %d questions had variants of %s left out (%s), e.g. %s", cfg.option_refs, len(ids),
                 cfg.variants.name, reason, ", ".join(ids[:3]))

    model_cfg = {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items() if k != "scoring"}
    # Cloze modes score option texts as plain continuations (as lm-eval does): no chat wrapping around them.
    backend = reuse_backend(model_cfg, chat=bool(cfg.prompt.get("chat", False)) and cfg.scoring not in CLOZE_MODES)
    cache = ResponseCache(cfg.cache.path) if cfg.cache.enabled else None

    sweep_tags = {"config_hash": job_hash, "kind": "job"}
    if cfg.tracking.offline:
        sweep_tags["offline_target"] = cfg.tracking.uri  # where `python -m src.sync` uploads it
    if sweep:
        sweep_tags.update({k: v for k, v in (("sweep_id", sweep.get("sweep_id")),
                                             ("mlflow.parentRunId", sweep.get("parent_run_id"))) if v})
    with mlflow.start_run(experiment_id=exp_id, tags=sweep_tags, run_name=f"{cfg.model.name}-{cfg.benchmark.name}-{cfg.variants.name}-T{float(cfg.temperature)}") as run:
        start = time.perf_counter()
        params = SamplingParams(n=cfg.repetitions, temperature=cfg.temperature, top_k=cfg.top_k, top_p=cfg.top_p,
                                max_new_tokens=cfg.max_new_tokens)
        answers = answer_items(backend, items, scoring=cfg.scoring, params=params,
                               cloze_normalise=bool(cfg.cloze_normalise), cache=cache)
        records = to_records(items, answers, run_info={
            "run_id": run.info.run_id, "model": cfg.model.name, "benchmark": cfg.benchmark.name,
            "variant_set": cfg.variants.name, "temperature": float(cfg.temperature), "seed": int(cfg.seed),
            "scoring": cfg.scoring})
        metrics = compute_metrics(records)
        # every reason logged, 0 included, so that runs of a variant set line up by metric name in MLflow
        metrics.update({f"n_excluded_{reason}": float(len(left_out.get(reason, ()))) for reason in EXCLUSION_REASONS})
        metrics["seconds"] = time.perf_counter() - start
        metrics["cache_hit_rate"] = float(records.cache_hit.mean()) if len(records) else 0.0
        artifacts = Path(out_dir) / "artifacts"  # exactly what MLflow receives
        artifacts.mkdir(parents=True, exist_ok=True)
        write_records(records, artifacts)
        (artifacts / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True))
        (artifacts / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
        tracking.log_run(
            mlflow,
            params=tracking.flatten(OmegaConf.to_container(cfg, resolve=True)),
            metrics=metrics,
            tags={"model": cfg.model.name, "benchmark": cfg.benchmark.name, "variants": cfg.variants.name,
                  "temperature": str(float(cfg.temperature)), "scoring": cfg.scoring, "git_commit": tracking.git_commit(),
                  "prompt_hash": prompt_hash(template.texts_for(cfg.scoring)[0]), "backend": backend.identity[:5000]},
            artifacts_dir=artifacts)
    return JobResult(run_id=run.info.run_id, metrics=metrics, out_dir=Path(out_dir))


