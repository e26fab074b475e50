"""Entry point: `python -m src.run [overrides]` or `python -m src.run -m key=a,b ...` for a sweep.

Wires config -> benchmark -> variants -> prompts -> backend -> records -> metrics -> MLflow. Each step is a
plain function in its own module; this file only connects them.
"""
from __future__ import annotations

import json
import logging
import sys
import time
from functools import lru_cache
from pathlib import Path

import hydra
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from .errors import UserError
from .sweep_callback import read_sweep_info

log = logging.getLogger("src.run")
CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def check_overrides(argv: list[str], conf_dir: Path = CONF_DIR) -> None:
    """Catch an unknown config-group choice (e.g. `benchmark=mmlux`) before Hydra prints a multi-line error."""
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key.startswith(("+", "~", "hydra")) or "." in key or "/" in key:
            continue
        group = conf_dir / key
        if group.is_dir():
            known = sorted(p.stem for p in group.glob("*.yaml"))
            for choice in value.split(","):
                if choice and choice not in known and not choice.startswith(("choice(", "glob(", "range(")):
                    raise UserError(f"config key {key}: unknown choice {choice!r}; choose one of {', '.join(known)}")


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
    from .backends.base import Request
    from .benchmarks import load_fewshot_pool
    from .fewshot import pick_fewshot
    from .formats import request_for
    from .prompts import labels_for, render
    from .trials import Item, trial_seed
    from .variants import make_variants, plan_variants

    bench = cfg.benchmark
    pool = lru_cache(maxsize=None)(lambda subject: tuple(load_fewshot_pool(
        bench.name, data_dir=cfg.data_dir, subject=subject)))
    evaluated = {q.id for q in questions}
    variant_cfg = OmegaConf.to_container(cfg.variants, resolve=True)
    if variant_cfg["name"] == "revas_misleading" and variant_cfg.get("source_run"):
        # second stage: the generator gets the source run's wrong answers; reading MLflow stays out of variants
        from .assess import read_run_records
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
        for v in plan.variants:
            if v.fmt != "mcq":  # true/false and select-all prompts: zero-shot, from src/formats.py
                items.append(Item(q, v, request_for(template, q, v, seed=trial_seed(cfg.seed, q.id, v.variant_id))))
                continue
            labels = labels_for(v.n_options, template.label_style)
            prompt = render(template, q, v, fewshot=shot_pairs, scoring=cfg.scoring)
            items.append(Item(q, v, Request(prompt=prompt, labels=labels, options=v.option_texts,
                                            seed=trial_seed(cfg.seed, q.id, v.variant_id), correct_slot=v.correct_slot,
                                            key=f"{q.id}/{v.variant_id}")))
    return items, left_out


def execute(cfg: DictConfig) -> dict:
    """Run one job; returns its metrics. Raises UserError for bad input or config."""
    import mlflow

    from . import tracking
    from .backends.base import SamplingParams
    from .benchmarks import describe_answer_slots, load_benchmark
    from .cache import ResponseCache
    from .metrics import compute_metrics
    from .prompts import PromptTemplate
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
            print(json.dumps({"run_id": done.info.run_id, "skipped": "already finished"}))
            return dict(done.data.metrics)
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

    hydra_cfg = hydra.core.hydra_config.HydraConfig.get()
    out_dir = Path(hydra_cfg.runtime.output_dir)
    sweep_tags = {"config_hash": job_hash, "kind": "job"}
    if cfg.tracking.offline:
        sweep_tags["offline_target"] = cfg.tracking.uri  # where `python -m src.sync` uploads it
    if hydra_cfg.mode == RunMode.MULTIRUN:
        info = read_sweep_info(hydra_cfg.sweep.dir)
        sweep_tags.update({k: v for k, v in (("sweep_id", info.get("sweep_id")),
                                             ("mlflow.parentRunId", info.get("parent_run_id"))) if v})
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
        artifacts = out_dir / "artifacts"  # exactly what MLflow receives
        artifacts.mkdir(parents=True, exist_ok=True)
        records.to_parquet(artifacts / "records.parquet", index=False)
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
    summary = {k: metrics[k] for k in ("mcqa", "mcqa_plus", "cora", "bmca_1.0", "invalid_rate") if k in metrics}
    print(json.dumps({"run_id": run.info.run_id, **{k: round(v, 4) for k, v in summary.items()}}))
    return metrics


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> None:
    try:
        execute(cfg)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)


def main() -> None:
    try:
        check_overrides(sys.argv[1:])
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(err.exit_code)
    _hydra_main()


if __name__ == "__main__":
    main()
