"""One job as a plain function of its composed config: `run_job(cfg, out_dir=...)`.

Wires config -> benchmark -> variants -> prompts -> backend -> records -> metrics -> MLflow. Each step is a
plain function in its own module; this file only connects them. It reads nothing from the Hydra runtime or the
process's arguments, so tests and other programs call it in-process with a config from
`src.config.compose.compose_job`; `python -m src.run` is the Hydra entry point around it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from src.answering.cache import GuardedCache, open_cache
from src.answering.items import Item, PlannedItems
from src.backends import load_backend
from src.backends.base import Backend, Request
from src.benchmarks import (
    check_task_shapes,
    continuation_style,
    continuation_tasks,
    describe_answer_slots,
    lm_eval_chat_template,
    lm_eval_contexts,
    load_benchmark_sized,
    load_fewshot_pool,
    task_tags,
)
from src.benchmarks.lm_eval import task_spec
from src.common.digests import text_sha256
from src.common.errors import UserError
from src.common.redact import redact, redact_text
from src.config.checks import benchmark_label, job_spec
from src.config.spec import JobSpec
from src.core.fewshot import pick_fewshot
from src.core.prompts import CLOZE_SCORINGS, PromptTemplate
from src.core.questions import Question, benchmark_identity, question_identity
from src.core.validity import check_option_style
from src.core.variant import Variant
from src.job.lm_eval_suite import lm_eval_suite_metrics
from src.presentation.closing import headline_metrics, job_block
from src.presentation.description import run_description
from src.tracking import review
from src.tracking.identity import (
    CONTENT_TAG,
    NO_OVERRIDES,
    OVERRIDES_TAG,
    config_hash,
    content_tag,
    identity_change,
    short_hash,
)
from src.tracking.job_tracker import JobTracker, artifacts_folder
from src.tracking.provenance import git_commit, provenance_tags
from src.variants import REASONS as EXCLUSION_REASONS, make_variants, plan_variants
from src.variants.revas import wrong_answers

if TYPE_CHECKING:  # the type only: pandas loads when a job measures its answers (slow import)
    import pandas as pd

log = logging.getLogger("src.job.runner")
SUMMARY_METRICS = ("mcqa", "mcqa_plus", "cora", "bmca_1.0", "invalid_rate")


@dataclass(frozen=True)
class JobResult:
    """What a job leaves: its MLflow run, its metrics and the folder of its artifacts."""

    run_id: str
    metrics: dict[str, float]
    out_dir: Path
    skipped: bool = False  # resume found a finished run of the same config; nothing was asked
    headline: tuple[str, ...] = ()  # the study's headline metrics, in the order the closing block shows them
    tracking_uri: str = ""  # the store the run is in (tracking.offline_dir's when the server was down)
    experiment: str = ""
    near_ties: tuple[int, int] | None = None  # (near-ties, ranked decisions), src/core/records.py; None: no ranking
    level: float | None = None  # the coverage of the logged intervals (stats.level); None: none logged

    def closing(self, *, level: float | None = None, commands: bool = True) -> str:
        """The block `python -m src.run` prints to stderr after the JSON line (src/presentation/closing.py); `level`:
        the intervals' coverage it states (the job's own is `self.level`)."""
        return job_block(self, level=level, commands=commands)

    def summary(self) -> str:
        """The one JSON line `python -m src.run` prints per job."""
        from src.metrics.chance import VERDICT_METRICS  # local: loads numpy, pandas (slow import)
        from src.metrics.slots import slot_flagged, slot_summary  # local: loads numpy, pandas (slow import)

        # the condition's headline first (acc_mean with repetitions, src.metrics.chance.HEADLINE_RULE), then the
        # CoRA family; a rerun that finds the run finished prints the same numbers, read from its metrics.json
        headline = next((k for k in VERDICT_METRICS if k in self.metrics), None)
        shown: dict[str, object] = {"skipped": "already finished"} if self.skipped else {}
        for k in dict.fromkeys([*([headline] if headline else []), *SUMMARY_METRICS]):
            if k in self.metrics:
                shown[k] = round(self.metrics[k], 4)
                if f"{k}_lo" in self.metrics and f"{k}_hi" in self.metrics:  # its interval (stats.level)
                    shown[f"{k}_ci"] = [round(self.metrics[f"{k}_lo"], 4), round(self.metrics[f"{k}_hi"], 4)]
        if slot_flagged(self.metrics):  # a letter habit: its accuracy and consistency describe the habit
            shown["slot_bias"] = slot_summary(self.metrics)
        return json.dumps({"run_id": self.run_id, **shown})


_LOADED: dict[str, Backend] = {}  # the last backend built in this process, by its config


def reuse_backend(model_cfg: dict[str, Any], *, chat: bool) -> Backend:
    """Jobs of a sweep that run in one process (the basic launcher) share a loaded model: with the model axis
    outermost, each model loads once per sweep. Only the latest is kept, so memory holds one model. A backend is
    built for every job (it loads nothing) and the kept one serves only while its identity is the same: weights
    saved anew to the model's folder between two jobs are loaded anew."""
    key = json.dumps([model_cfg, chat], sort_keys=True, default=str)
    fresh = load_backend(model_cfg, chat=chat)
    kept = _LOADED.get(key)
    if kept is not None and kept.identity == fresh.identity:
        kept.new_job()  # hf: the job's own token budget counts, from the ceiling learned so far
        return kept
    if kept is not None:  # the same config, other weights (or another model behind the server) since the last job
        print(
            f"warning: model {model_cfg.get('name')}: its weights changed since the previous job of this process "
            f"({short_hash(kept.identity)} -> {short_hash(fresh.identity)}); this job uses the new ones",
            file=sys.stderr,
        )
    release_backends()  # one model in memory: the previous one's engine ends before this one loads
    _LOADED[key] = fresh
    return fresh


def release_backends() -> None:
    """Close the backends this process kept (`reuse_backend`), ending what they started (vLLM's engine process).
    The entry point calls it when its command ends, however it ends; closing twice is harmless."""
    kept = list(_LOADED.values())
    _LOADED.clear()
    for backend in kept:
        backend.close()


def job_backend(spec: JobSpec) -> Backend:
    """The backend a job of `spec` answers with (`reuse_backend`); `python -m src.recheck` builds it to compare its
    identity with a logged run's."""
    # Cloze modes score option texts as plain continuations (as lm-eval does): no chat wrapping around them. With
    # prompt=lm_eval the chat turns are lm-eval's own, built into the text by its code (`plan_items`): none added.
    own_chat = not spec.lm_evals_own and spec.scoring not in CLOZE_SCORINGS
    return reuse_backend(spec.backend_config, chat=bool(spec.prompt.get("chat", False)) and own_chat)


def job_questions(spec: JobSpec) -> list[Question]:
    """The questions a job of `spec` asks, as loaded (cleaned, limited); `python -m src.recheck` compares their
    identity with a logged run's."""
    return job_questions_sized(spec)[0]


def job_questions_sized(spec: JobSpec) -> tuple[list[Question], int | None]:
    """(the questions a job of `spec` asks, the benchmark's size before `limit` or None): `load_benchmark_sized`."""
    return load_benchmark_sized(
        spec.benchmark["name"],
        path=spec.benchmark.get("path"),
        split=spec.benchmark.get("split"),
        data_dir=spec.data_dir,
        seed=spec.seed,
        limit=spec.limit,
        options=spec.benchmark_options,
    )


def data_identity(spec: JobSpec, questions: list[Question]) -> str:
    """What a job asks, by content (its `data_identity` tag, 16 hex digits): its questions (`benchmark_identity`)
    and, where the tool draws few-shot examples, the pool of each subject they are drawn from, so that a corrected
    example (another prompt for every question it is shown with) is other data, whatever its length. Zero-shot, and
    under `prompt=lm_eval` (whose examples each question's metadata names: src/benchmarks/lm_eval.py
    `prompt_identity`), the questions' alone."""
    own = benchmark_identity(questions)
    if spec.fewshot == 0 or spec.lm_evals_own:
        return own
    bench_name, data_dir, options = str(spec.benchmark["name"]), spec.data_dir, spec.benchmark_options
    pools = [
        benchmark_identity(load_fewshot_pool(bench_name, data_dir=data_dir, subject=subject, options=options))
        for subject in dict.fromkeys(q.subject for q in questions)  # as `plan_items` asks for them
    ]
    return text_sha256(own + "".join(pools), length=16)


def build_items(spec: JobSpec, questions: list[Question], template: PromptTemplate) -> list[Item]:
    """Every variant of every question, rendered into a backend request."""
    return list(plan_items(spec, questions, template)[0])


def misleading_sources(spec: JobSpec, evaluated: set[str]) -> dict[str, Any]:
    """The job's variant set config, its own copy; at the misleading set's second stage it gains the source run's
    wrong answers (`source_answers`): reading MLflow stays out of variants."""
    variant_cfg = dict(spec.variants)
    if variant_cfg["name"] == "revas_misleading" and variant_cfg.get("source_run"):
        from src.tracking.records import read_run_records  # local: loads pandas (slow import)

        source = read_run_records(str(variant_cfg["source_run"]), spec.tracking.uri, key="variants.source_run")
        if not evaluated & set(source["question_id"].astype(str)):
            raise UserError(
                f"config key variants.source_run: run {variant_cfg['source_run']} answered none of these "
                f"{spec.benchmark['name']} questions; give a run on the same benchmark and limit"
            )
        variant_cfg["source_answers"] = wrong_answers(source)
        log.info(
            "misleading replacement: %d of the source run's questions were answered wrong",
            len(variant_cfg["source_answers"]),
        )
    return variant_cfg


def plan_items(
    spec: JobSpec, questions: list[Question], template: PromptTemplate, backend: Backend | None = None
) -> tuple[PlannedItems, dict[str, list[str]]]:
    """(items, left_out): every variant of every question, each rendered into a backend request when first read
    (the answering pipeline renders them beside the backend's work), and per reason the ids of the questions that
    had variants left out under the `option_refs` policy (docs/metrics.md, validity rules). One item of each kind
    (answer format, option count, with or without shots) is rendered here, so that a prompt the template cannot make
    is refused before any compute. `backend`: the job's, whose tokenizer renders lm-eval's chat turns
    (`prompt=lm_eval prompt.chat=true`)."""
    from src.answer_formats import FORMATS  # local: loads pandas (slow import)
    from src.answering.trials import trial_seed  # local: loads pandas (slow import)

    seed, fewshot, scoring, option_refs = spec.seed, spec.fewshot, spec.scoring, spec.option_refs
    bench_name, data_dir, bench_options = str(spec.benchmark["name"]), spec.data_dir, spec.benchmark_options
    pool = lru_cache(maxsize=None)(
        lambda subject: tuple(load_fewshot_pool(bench_name, data_dir=data_dir, subject=subject, options=bench_options))
    )
    if bench_name == "lm_eval" and template.name == "lm_eval":  # lm-eval's own description and examples
        # each task's shape against the scoring and the variant set, before a chat template loads the model
        check_task_shapes(questions, options=bench_options, scoring=scoring, variants=dict(spec.variants))
        chat = lm_eval_chat_template(model_tokenizer(spec, backend), str(spec.model["name"])) if template.chat else None
        questions = lm_eval_contexts(questions, k=fewshot, options=bench_options, scoring=scoring, chat_template=chat)
        fewshot = 0
    evaluated = {q.id for q in questions}
    variant_cfg = misleading_sources(spec, evaluated)
    planned: list[tuple[Question, Variant]] = []
    shown_with: list[int] = []  # per item, its question's place in `contexts`
    contexts: list[tuple[Question, list[tuple[Question, Variant]]]] = []  # (question, its solved examples)
    contents: dict[int, str] = {}  # a question's content identity, made when its first prompt is
    left_out: dict[str, list[str]] = {}  # exclusion reason -> the ids of the questions it left out
    first_of_kind: dict[tuple[str, int, bool], int] = {}
    for q in questions:
        plan = plan_variants(variant_cfg, q, seed=seed, option_refs=option_refs)
        for reason, count in plan.excluded.items():
            if count:
                left_out.setdefault(reason, []).append(q.id)
        if not plan.variants:
            continue
        shots = pick_fewshot(pool, q, k=fewshot, seed=seed, exclude=evaluated)
        contexts.append((q, [(s, make_variants({"name": "original"}, s, seed=seed)[0]) for s in shots]))
        for v in plan.variants:
            first_of_kind.setdefault((v.fmt, v.n_options, bool(shots)), len(planned))
            planned.append((q, v))
            shown_with.append(len(contexts) - 1)

    def render(i: int) -> Request:
        q, v = planned[i]
        place = shown_with[i]
        shot_pairs = contexts[place][1]
        content = contents.get(place)
        if content is None:  # in the cache key: a corrected question gets no old answer
            content = contents[place] = question_identity(q)
        # true/false and select-all prompts are zero-shot: their formats ignore the shots
        return FORMATS[v.fmt].request(
            template,
            q,
            v,
            seed=trial_seed(seed, q.id, v.variant_id),
            fewshot=shot_pairs,
            scoring=scoring,
            data=content,
        )

    items = PlannedItems(planned, render)
    for i in first_of_kind.values():
        items[i]  # rendered now, so that a template error is refused before any compute
    return items, left_out


def model_tokenizer(spec: JobSpec, backend: Backend | None) -> Any:
    """The tokenizer of the job's model, loaded; one line where the backend has none (an API model, simulated)."""
    if backend is not None:
        backend.load()
    tokenizer = backend.tokenizer if backend is not None else None
    if tokenizer is None:
        raise UserError(
            f"config key prompt.chat: prompt=lm_eval builds lm-eval's chat turns with the model's tokenizer, and "
            f"model {spec.model['name']} has none here; set prompt.chat=false"
        )
    return tokenizer


def run_job(cfg: DictConfig, *, out_dir: str | Path, sweep: Mapping[str, str] | None = None) -> JobResult:
    """Run one job of a composed config: load, ask, record, compute, log to MLflow. `out_dir` receives the
    artifacts it logs; `sweep` holds the `sweep_id` and `parent_run_id` of the multirun it belongs to. Raises
    UserError for bad input or config, before any compute where it can."""
    spec = job_spec(cfg)  # checked and typed once: nothing below reads `cfg`
    resolved = spec.plain()  # the whole config as plain values, resolved once
    # health check of the store before any compute; parallel first use, retries and outages: src/tracking/
    tracker = JobTracker(spec.tracking, job_hash=config_hash(hashed_config(resolved)), sweep=sweep)
    questions, size = job_questions_sized(spec)
    backend = job_backend(spec)  # its identity names the weights by content; nothing is loaded yet
    # what the config points to, by content: a finished run of the same config with other weights or other
    # questions is no result of this job (the response cache's key holds both too)
    identities = {"model_identity": short_hash(backend.identity), "data_identity": data_identity(spec, questions)}
    done = finished_job(spec, tracker, backend, identities, resolved)
    if done is not None:
        return skipped_result(spec, tracker, done, out_dir)
    if spec.resume:
        tracker.mark_interrupted()
    template, items, left_out = plan_job(spec, questions, backend)
    guard = content_guard(backend)
    cache = open_cache(spec.cache.path, shared=spec.cache.shared) if spec.cache.enabled else None
    run_name = f"{spec.model['name']}-{spec.benchmark['name']}-{spec.variants['name']}-T{spec.temperature}"
    # the cache is closed when the job ends, however it ends: its connection, and SQLite's WAL files with it
    with (
        contextlib.closing(cache) if cache is not None else contextlib.nullcontext(),
        tracker.run(run_name) as run_id,
    ):
        records, metrics = answer_and_measure(
            spec, backend, items, left_out, GuardedCache(cache, guard) if cache is not None else None, run_id
        )
        guard()  # the files still those the answers came from, before anything is logged
        tags = {**identities, **content_tags(backend, resolved)}
        answered = AnsweredJob(
            spec=spec,
            backend=backend,
            questions=questions,
            size=size,
            template=template,
            items=items,
            records=records,
            metrics=metrics,
            identity_tags=tags,
            out_dir=out_dir,
            resolved=resolved,
        )
        ties = log_job(tracker, answered)
    return JobResult(
        run_id=run_id,
        metrics=metrics,
        out_dir=Path(out_dir),
        headline=headline_metrics(metrics),
        tracking_uri=tracker.uri,
        experiment=spec.tracking.experiment,
        near_ties=ties if ties[1] else None,
        level=spec.interval_level,
    )


# where the model's files are, not what they are: the work hash leaves them out (their content is in the identity)
MODEL_LOCATION_KEYS = ("path", "gguf_file")


def hashed_config(resolved: Mapping[str, Any]) -> dict[str, Any]:
    """The config a job's hash is taken of: `model.path` as a path means it (`DIR/` is `DIR`)."""
    model = dict(resolved.get("model") or {})
    if isinstance(model.get("path"), str) and model["path"].endswith("/"):
        model["path"] = model["path"].rstrip("/") or "/"
    return {**resolved, "model": model}


def work_hash(resolved: Mapping[str, Any]) -> str:
    """The job's config hash less where the model's files are: a moved or renamed model folder (whose content the
    model identity names) is the same work."""
    model = {k: v for k, v in (resolved.get("model") or {}).items() if k not in MODEL_LOCATION_KEYS}
    return config_hash({**resolved, "model": model})


def content_tags(backend: Backend, resolved: Mapping[str, Any]) -> dict[str, str]:
    """The model's content parts (`model_content`, so a rerun names what changed) and, for local files, the
    `work_hash` a moved folder's job finds this run by."""
    content = backend.content
    if content is None:
        return {}
    tags = {CONTENT_TAG: content_tag(content.short_parts())}
    if content.repo is None:
        tags["work_hash"] = work_hash(resolved)
    return tags


def finished_job(
    spec: JobSpec,
    tracker: JobTracker,
    backend: Backend,
    identities: Mapping[str, str],
    resolved: Mapping[str, Any],
) -> Any:  # an MLflow Run (src/tracking/store.py `Run`), or None
    """The finished run `resume` reuses for this job, or None (it runs). A finished run of this config made with
    other weights or data is said in one line naming what changed, and kept as it was; one made with the same
    files at another path (a renamed folder) is reused, in one line."""
    done = tracker.finished_run(identities)
    if done is None:
        older = tracker.finished_run()  # of this config, made with other weights or data: said, and kept as it was
        content = content_tags(backend, resolved)
        line = identity_change(older, identities, content.get(CONTENT_TAG)) if older is not None else None
        if line:
            print(line, file=sys.stderr)
        elif older is None and spec.resume and "work_hash" in content:
            done = tracker.finished_run(identities, work_hash=content["work_hash"])
            if done is not None:
                print(
                    f"model files unchanged since run {done.info.run_id}, made with them at "
                    f"{done.data.params.get('model.path', 'another path')}: reused (resume=false runs it again)",
                    file=sys.stderr,
                )
        if done is None:
            return None
    if not spec.resume:
        return None
    log.info(
        "already finished as run %s (config_hash %s); set resume=false to run again", done.info.run_id, tracker.job_hash
    )
    return done


def skipped_result(spec: JobSpec, tracker: JobTracker, done: Any, out_dir: str | Path) -> JobResult:
    """The result of a job that a finished run already answered: its metrics, and the closing block's headline and
    near-ties as the run showed them when it was new (its `headline` and `near_ties` tags)."""
    metrics = tracker.finished_metrics(done)
    tags = done.data.tags
    headline = tuple(tags["headline"].split(",")) if tags.get("headline") else headline_metrics(done.data.metrics)
    ties = (int(tags["near_ties"]), int(tags["ranked_decisions"])) if tags.get("ranked_decisions") else None
    return JobResult(
        run_id=done.info.run_id,
        metrics=metrics,
        out_dir=Path(out_dir),
        skipped=True,
        headline=headline,
        tracking_uri=tracker.uri,
        experiment=spec.tracking.experiment,
        near_ties=ties,
        level=spec.interval_level,
    )


def content_guard(backend: Backend) -> Callable[[], None]:
    """A check that the model's files are still those its identity names (src/backends/weights.py): a UserError,
    one line, when they changed since the job began, so that no answer is stored under an identity it did not
    come from."""
    content = backend.content

    def check() -> None:
        if content is None:
            return
        changed = content.changed()
        if changed:
            raise UserError(
                f"model {backend.name}: its {' and '.join(changed)} changed at {content.source} during this run: "
                f"stopped before storing the answers; run it again once the files are settled"
            )

    return check


def plan_job(
    spec: JobSpec, questions: list[Question], backend: Backend | None = None
) -> tuple[PromptTemplate, PlannedItems, dict[str, list[str]]]:
    """(template, items, left_out) of a job, with its log lines; an option style the variants cannot use is
    refused here, before any compute."""
    bench_name = str(spec.benchmark["name"])
    log.info("%s: %s", bench_name, describe_answer_slots(questions))
    if bench_name == "lm_eval":
        # an lm-eval task's option style is known once its documents are read: refused here, before any compute
        # (a built-in benchmark's is known from its name, and was checked with the config)
        label, continuing = benchmark_label(spec.benchmark), continuation_tasks(questions)
        # a suite (a group, a list of tasks): the validity rules hold per task; a list of one task is that task
        if continuing and continuing != [task_spec(spec.benchmark.get("task"))]:
            label += f" (its task {continuing[0]})"
        check_option_style(
            variants=spec.variants,
            benchmark=label,
            continuation=continuation_style(bench_name, questions),
        )
    template = PromptTemplate.from_config(dict(spec.prompt))
    items, left_out = plan_items(spec, questions, template, backend)
    log.info("%d questions x variants = %d prompts x %d repetitions", len(questions), len(items), spec.repetitions)
    for reason, ids in sorted(left_out.items()):
        log.info(
            "option_refs=%s: %d questions had variants of %s left out (%s), e.g. %s",
            spec.option_refs,
            len(ids),
            spec.variants["name"],
            reason,
            ", ".join(ids[:3]),
        )
    return template, items, left_out


def answer_and_measure(
    spec: JobSpec,
    backend: Backend,
    items: Sequence[Item],
    left_out: Mapping[str, list[str]],
    cache: GuardedCache | None,
    run_id: str,
) -> tuple[pd.DataFrame, dict[str, float]]:
    """(records, metrics): every item asked (through the response cache), recorded and measured."""
    from src.answering.trials import answer_items, to_records  # local: loads pandas (slow import)
    from src.metrics import compute_metrics  # local: loads numpy, pandas (slow import)
    from src.metrics.chance import chance_levels  # local: loads numpy, pandas (slow import)

    start = time.perf_counter()
    adaptive = spec.adaptive  # stop a prompt once its repetition cell is settled (adaptive.py)
    answers = answer_items(
        backend,
        items,
        scoring=spec.scoring,
        params=spec.sampling,
        cloze_normalise=spec.cloze_normalise,
        cache=cache,
        adaptive=adaptive,
    )
    run_info = {
        "run_id": run_id,
        "model": spec.model["name"],
        "benchmark": spec.benchmark["name"],
        "variant_set": spec.variants["name"],
        "temperature": spec.temperature,
        "seed": spec.seed,
        "scoring": spec.scoring,
    }
    records = to_records(items, answers, run_info=run_info, planned=spec.repetitions if adaptive else None)
    metrics = compute_metrics(  # intervals beside the headline metrics: src/metrics/intervals.py
        records,
        sure_rule=spec.sure_rule,
        pride_protocol=spec.pride_protocol,  # paper | authors
        intervals=spec.bootstrap,
        level=spec.level,
        interval_seed=spec.seed,
    )
    metrics.update(chance_levels(records))  # what the headline is judged against (src/metrics/chance.py)
    metrics.update(lm_eval_suite_metrics(spec, items, records))  # lm-eval's acc, acc_norm and group numbers
    # every reason logged, 0 included, so that runs of a variant set line up by metric name in MLflow
    metrics.update({f"n_excluded_{reason}": float(len(left_out.get(reason, ()))) for reason in EXCLUSION_REASONS})
    if adaptive:  # the share of the planned trials that were not asked
        metrics["adaptive_skipped_share"] = 1.0 - len(records) / max(1, len(items) * spec.repetitions)
    metrics["seconds"] = time.perf_counter() - start
    metrics["cache_hit_rate"] = float(records.cache_hit.mean()) if len(records) else 0.0
    return records, metrics


@dataclass(frozen=True, kw_only=True)
class AnsweredJob:
    """What a job asked and answered, for `log_job` to write and log."""

    spec: JobSpec
    backend: Backend
    questions: list[Question]
    size: int | None  # the benchmark's size before `limit`, None where unknown
    template: PromptTemplate
    items: Sequence[Item]
    records: pd.DataFrame
    metrics: dict[str, float]
    identity_tags: dict[str, str]  # the model's and the data's identities by content, and the model's content parts
    out_dir: str | Path
    resolved: dict[str, Any]  # the whole config as plain values, resolved once


def log_job(tracker: JobTracker, job: AnsweredJob) -> tuple[int, int]:
    """The artifacts written and the run logged (docs/mlflow_ui.md); the (near-ties, ranked decisions) count."""
    spec, backend, questions, size, template = job.spec, job.backend, job.questions, job.size, job.template
    items, records, metrics, identity_tags = job.items, job.records, job.metrics, job.identity_tags
    out_dir, resolved = job.out_dir, job.resolved
    from src.answering.trials import prompt_hash  # local: loads pandas (slow import)
    from src.core.records import near_ties, write_prompts, write_records  # local: loads pandas (slow import)
    from src.metrics import rws_st_string, slot_tag  # local: loads numpy, pandas (slow import)
    from src.metrics.chance import chance_tags  # local: loads numpy, pandas (slow import)
    from src.metrics.slots import prior_text  # local: loads numpy, pandas (slow import)

    artifacts = artifacts_folder(out_dir)  # exactly what MLflow receives (the same files, linked, locally)
    write_records(records, artifacts)
    write_prompts(
        {prompt_hash(it.request.prompt): (it.request.prompt, backend.model_input(it.request.prompt)) for it in items},
        artifacts,
    )
    (artifacts / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True))
    config = redact(resolved)
    (artifacts / "config.yaml").write_text(OmegaConf.to_yaml(config))
    # what MLflow shows (docs/mlflow_ui.md): the study's metrics, one value per param, a description in words
    shown_metrics = metrics
    tags = {
        "model": spec.model["name"],
        "benchmark": spec.benchmark["name"],
        "variants": spec.variants["name"],
        "temperature": str(spec.temperature),
        "scoring": spec.scoring,
        "git_commit": git_commit(),
        "prompt_hash": prompt_hash(template.texts_for(spec.scoring)[0]),
        "backend": backend.identity[:5000],
        "sure_rule": spec.sure_rule,
        # the closing block's metrics, so that the run shows the same block when a rerun finds it finished
        "headline": ",".join(headline_metrics(metrics)),
        **identity_tags,
        **provenance_tags(),
        **task_tags(questions),
        **override_tags(),
    }
    tags.update(chance_tags(metrics))  # the review view's chance column (src/metrics/chance.py)
    # the keys that tell runs apart, then the rounded headlines (`mcqa`: 0.230 [0.158, 0.322]): the review view
    # draws tag columns in logged order
    tags = review.review_tags(tags, shown_metrics)
    if "st" in metrics:  # the repetition paper's `RWS | S/T`
        tags["rws_st"] = rws_st_string(metrics)
    if slot_tag(metrics):  # position bias: the most chosen slot against its share of right answers
        tags[review.SLOT_TAG] = str(slot_tag(metrics))
    if prior_text(metrics):  # and PriDe's estimate of the same habit, where a cyclic set gave label probabilities
        tags[review.PRIOR_TAG] = str(prior_text(metrics))
    ties = near_ties(records)
    if ties[1]:  # decisions another CPU, dtype or batch size may flip (the report and the closing block count them)
        tags["near_ties"], tags["ranked_decisions"] = str(ties[0]), str(ties[1])
    tags[review.DESCRIPTION_TAG] = run_description(
        model=spec.model["name"],
        benchmark=spec.benchmark["name"],
        variants=spec.variants["name"],
        scoring=spec.scoring,
        temperature=spec.temperature,
        repetitions=spec.repetitions,
        n_questions=len(questions),
        limit=spec.limit,
        metrics=shown_metrics,
        level=spec.level,
        rws_st=tags.get("rws_st"),
    )
    tracker.log(
        params=review.review_params(
            review.flatten(config),
            n_questions=len(questions),
            # what caps the questions a study can ask (the report's and src.plan's questions-needed verdicts)
            **({"benchmark_size": size} if size is not None else {}),
            **backend.run_params(),
        ),  # hf: the token budget it used
        metrics=metrics,
        tags=redact(tags),
        artifacts_dir=artifacts,
        dataset=review.questions_dataset(questions, name=str(spec.benchmark["name"])),
    )
    return ties


def override_tags() -> dict[str, str]:
    """`overrides`: the keys this job's command line or sweep set (Hydra's task overrides, less where things go:
    tracking, cache, hydra), so that the report can say what decided a setting, a sweep override or a config's
    default (`src.compare.load.setting_causes`); none outside Hydra (a job run in-process by a test)."""
    from hydra.core.hydra_config import HydraConfig  # local: loads hydra (slow import)

    if not HydraConfig.initialized():
        return {}
    kept = [
        o for o in HydraConfig.get().overrides.task if not o.lstrip("+~").startswith(("tracking.", "cache.", "hydra"))
    ]
    # masked here too, not only where the tags are logged: a secret set on the command line never reaches the tag
    return {OVERRIDES_TAG: redact_text(" ".join(kept))[:5000] or NO_OVERRIDES}
