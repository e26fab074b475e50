"""`python -m devtools.perf` parts timed in fresh processes: startup, generation and the review at scale."""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from devtools.perf.meter import REPO, Meter, build, child_cpu_s, fresh_process, hf_backend, model_config
from src.tracking import store


def part_startup(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """The fixed cost of a job, from fresh processes on a temporary SQLite store: `python -m src.run
    model=simulated limit=1` (its store made by a first, untimed run), the entry point's import alone, and the
    committed smoke sweep (24 simulated jobs) under the joblib launcher against the `seconds` its jobs logged.
    The CPU seconds beside the wall seconds do not grow with other processes' load as wall seconds do."""
    import statistics

    from mlflow.tracking import MlflowClient

    repeats = max(1, args.startup_repeats)
    print(
        f"startup: fresh processes, no model ({repeats} repeats, median), load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        run = [
            sys.executable,
            "-m",
            "src.run",
            "model=simulated",
            "limit=1",
            f"tracking.uri={uri}",
            f"cache.path={tmp}/responses.db",
            "resume=false",
        ]
        fresh_process(meter, "startup_first_run (new store)", [*run, f"hydra.run.dir={tmp}/run0"])
        walls, cpus, imports = [], [], []
        for k in range(repeats):
            cpu = child_cpu_s()
            fresh_process(meter, f"startup_run_{k + 1}", [*run, f"hydra.run.dir={tmp}/run{k + 1}"])
            walls.append(meter.results[f"startup_run_{k + 1}"]["seconds"])
            cpus.append(child_cpu_s() - cpu)
            fresh_process(meter, f"startup_import_{k + 1} (src.run)", [sys.executable, "-c", "import src.run"])
            imports.append(meter.results[f"startup_import_{k + 1} (src.run)"]["seconds"])
        cpu = child_cpu_s()
        fresh_process(
            meter,
            "startup_sweep (smoke, joblib)",
            [
                sys.executable,
                "-m",
                "src.run",
                "-m",
                "-cd",
                "sweeps",
                "-cn",
                "smoke",
                "hydra/launcher=joblib",
                f"tracking.uri={uri}",
                f"hydra.sweep.dir={tmp}/sweep",
                f"cache.path={tmp}/sweep-responses.db",
            ],
        )
        sweep_cpu = child_cpu_s() - cpu  # the sweep's main process and the workers it waited for
        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name("smoke")
        jobs = store.search_all(client, [experiment.experiment_id], "tags.kind = 'job'")
        compute = sum(r.data.metrics.get("seconds", 0.0) for r in jobs)
    sweep = meter.results["startup_sweep (smoke, joblib)"]["seconds"]
    print(
        f"  run: median {statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU; import of "
        f"src.run {statistics.median(imports):.2f} s; sweep: {len(jobs)} jobs, {sweep:.1f} s wall, "
        f"{sweep_cpu:.1f} s CPU, their compute {compute:.1f} s; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    ratios["startup_run_wall_s"] = statistics.median(walls)
    ratios["startup_run_cpu_s"] = statistics.median(cpus)
    ratios["startup_import_s"] = statistics.median(imports)
    ratios["startup_sweep_jobs"] = float(len(jobs))
    ratios["startup_sweep_compute_s"] = compute
    ratios["startup_sweep_vs_compute"] = sweep / compute if compute else math.nan


# --only review_scale: the axes of the 128-job sweep, given on the command line of the smoke sweep's file (ARC-Easy
# in HellaSwag's place since the validity contract refuses cora's NOTA for HellaSwag's endings: docs/validity.md)
SCALE_AXES = {
    "model.success_rate": "0.3,0.38,0.46,0.54,0.62,0.7,0.78,0.86",
    "benchmark": "arc_challenge,commonsenseqa,mmlu,arc_easy",
    "temperature": "0.3,0.7",
    "variants": "original,cora",
}


def scale_commands(root: Path, limit: int, axes: dict[str, str] = SCALE_AXES) -> tuple[list[str], list[str]]:
    """(the sweep, the comparison): the commands `part_review_scale` times, on a store under `root`."""
    uri = f"sqlite:///{root}/mlflow.db"
    sweep = [
        sys.executable,
        "-m",
        "src.run",
        "-m",
        "-cd",
        "sweeps",
        "-cn",
        "smoke",
        *[f"{key}={value}" for key, value in axes.items()],
        f"limit={limit}",
        "repetitions=1",
        "tracking.experiment=review_scale",
        f"tracking.uri={uri}",
        f"cache.path={root}/responses.db",
        f"hydra.sweep.dir={root}/sweep",
    ]
    compare = [
        sys.executable,
        "-m",
        "src.compare",
        "--experiment",
        "review_scale",
        "--tracking-uri",
        uri,
        "--out",
        str(root / "report"),
        "--no-mlflow",
    ]
    return sweep, compare


def part_review_scale(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """The 128-job simulated sweep into one store, then `python -m src.compare` on it from a fresh process: wall
    and CPU seconds (CPU: what the wall would be on a quiet machine; the wall grows with other processes' load)
    and the size of report.html."""
    root = Path(args.scale_dir) if args.scale_dir else Path(tempfile.mkdtemp(prefix="review-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    sweep, compare = scale_commands(root.resolve(), args.scale_limit)
    print(
        f"review_scale: 128 jobs of {args.scale_limit} questions into {root}, load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    if not (root / "mlflow.db").is_file():  # --scale-dir keeps the store for the next measurement
        fresh_process(meter, "review_scale_sweep (128 jobs)", sweep)
    cpu = child_cpu_s()
    fresh_process(meter, "review_scale_compare", compare)
    compare_cpu = child_cpu_s() - cpu
    html_mb = (root / "report" / "report.html").stat().st_size / 1e6
    wall = meter.results["review_scale_compare"]["seconds"]
    print(
        f"  compare: {wall:.1f} s wall, {compare_cpu:.1f} s CPU; report.html {html_mb:.2f} MB; load average "
        f"{os.getloadavg()[0]:.1f}",
        flush=True,
    )
    ratios["review_scale_compare_wall_s"] = wall
    ratios["review_scale_compare_cpu_s"] = compare_cpu
    ratios["review_scale_html_mb"] = html_mb
    # the whole folder, its per-question tables (parquet) included
    ratios["review_scale_report_mb"] = sum(p.stat().st_size for p in (root / "report").rglob("*") if p.is_file()) / 1e6


# --only generation: one fresh process per phase (name -> share_prefix, sampling settings; None: label scoring)
GENERATION_PHASES = {
    "labels": (True, None),
    "greedy": (True, {"n": 1}),
    "r10": (True, {"n": 10, "temperature": 0.7}),
    "greedy_padded": (False, {"n": 1}),
    "r10_padded": (False, {"n": 10, "temperature": 0.7}),
}


def generation_phase(args) -> int:
    """A child of `part_generation`: load the model, warm up (first passes, the packing check), time one phase of
    GENERATION_PHASES on the CoRA prompts, and write its numbers and samples to --out."""
    from src.backends.base import SamplingParams  # local: the part that times it imports it

    share, sampling = GENERATION_PHASES[args.generation_phase]
    cfg, items = build(["variants=cora", "scoring=generate"], args.limit)
    backend = hf_backend(model_config(cfg), share_prefix=share)
    requests = [it.request for it in items]
    backend.score_labels(requests[:2])
    backend.generate(requests[:2], SamplingParams(max_new_tokens=1))
    meter, cpu = Meter(), time.process_time()
    with meter.phase(args.generation_phase, prompts=len(requests), tokens=lambda: backend.forward_tokens):
        if sampling is None:
            backend.score_labels(requests)
            samples = []
        else:
            params = SamplingParams(**sampling, max_new_tokens=cfg.max_new_tokens)
            samples = [[str(c) for c in row] for row in backend.generate(requests, params)]
    meter.results[args.generation_phase]["cpu_s"] = time.process_time() - cpu  # less swayed by other processes' load
    Path(args.out).write_text(json.dumps({"phase": meter.results[args.generation_phase], "samples": samples}))
    return 0


def part_generation(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """Label scoring vs generation at R=1 and R=10 on the same CoRA prompts, prefix-shared and padded, each phase
    in a fresh process (RSS peaks never come down within one), started from the same model load."""
    import subprocess

    print(f"generation: CoRA prompts of {args.limit} ARC-Challenge questions, one fresh process per phase", flush=True)
    samples = {}
    for phase in GENERATION_PHASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "phase.json"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "devtools.perf",
                    "--generation-phase",
                    phase,
                    "--limit",
                    str(args.limit),
                    "--out",
                    str(out),
                ],
                cwd=REPO,
                check=True,
            )
            result = json.loads(out.read_text())
        meter.results[f"generation_{phase}"] = result["phase"]
        samples[phase] = result["samples"]
    r = {phase: meter.results[f"generation_{phase}"] for phase in GENERATION_PHASES}
    ratios["gen_greedy_vs_labels"] = r["greedy"]["seconds"] / r["labels"]["seconds"]
    ratios["gen_r10_vs_labels"] = r["r10"]["seconds"] / r["labels"]["seconds"]
    ratios["gen_greedy_vs_labels_cpu"] = r["greedy"]["cpu_s"] / r["labels"]["cpu_s"]
    ratios["gen_r10_vs_labels_cpu"] = r["r10"]["cpu_s"] / r["labels"]["cpu_s"]
    ratios["gen_r10_vs_r1_peak_rss"] = r["r10"]["peak_rss_mib"] / r["greedy"]["peak_rss_mib"]
    ratios["gen_r10_vs_r1_padded_peak_rss"] = r["r10_padded"]["peak_rss_mib"] / r["greedy_padded"]["peak_rss_mib"]
    ratios["gen_padded_vs_shared_r10_wall"] = r["r10_padded"]["seconds"] / r["r10"]["seconds"]
    ratios["gen_padded_vs_shared_r10_tokens"] = r["r10_padded"]["forward_tokens"] / r["r10"]["forward_tokens"]
    ratios["gen_shared_same_samples"] = float(
        samples["greedy"] == samples["greedy_padded"] and samples["r10"] == samples["r10_padded"]
    )


MAIN_JOB = ("src.run", "variants=cora")  # the README's main job, as a user types it


def part_main_job(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """The README's main job whole, `python -m src.run variants=cora`, from a fresh process on a new store and
    response cache (its tables made first, as a used store has them) with the models cache warm; with
    --main-job-cold also on an empty models cache (the first run: the GGUF converted to float weights first).
    The wall time depends on the CPU's instruction sets and cores: the machine of each record says which, and
    `ATEN_CPU_CAPABILITY` (torch's kernel choice, e.g. avx2 on an AVX-512 CPU) is recorded with it when set."""
    from mlflow.tracking import MlflowClient

    from src.backends.hf import HFBackend, gguf_cache  # local: loads torch, transformers (slow import)

    backend = HFBackend.from_config(shared["model_cfg"], chat=True, progress=False)
    if backend.gguf_path is not None:
        gguf_cache.ensure_float_copy(backend.gguf_path)
    del backend
    capability = os.environ.get("ATEN_CPU_CAPABILITY", "default")
    print(
        f"main_job: `python -m {' '.join(MAIN_JOB)}` in fresh processes, ATEN_CPU_CAPABILITY={capability}, "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        phases = [("main_job (models cache warm)", {})]
        if args.main_job_cold:
            phases.append(("main_job (models cache empty)", {"MCQ_CACHE_DIR": f"{tmp}/empty-cache"}))
        for i, (name, env) in enumerate(phases):
            uri = f"sqlite:///{tmp}/mlflow{i}.db"
            MlflowClient(tracking_uri=uri).search_experiments()
            command = [sys.executable, "-m", *MAIN_JOB, f"tracking.uri={uri}", f"cache.path={tmp}/responses{i}.db"]
            cpu = child_cpu_s()
            fresh_process(meter, name, [*command, f"hydra.run.dir={tmp}/out{i}"], **env)
            meter.results[name]["cpu_s"] = child_cpu_s() - cpu  # less swayed by other processes' load than the wall
            if i == 0:  # kept at once: a bench stopped during the first run still records it
                ratios["main_job_s"] = meter.results[name]["seconds"]
    warm = meter.results["main_job (models cache warm)"]
    print(f"  warm: {warm['seconds']:.1f} s wall, {warm['cpu_s']:.1f} s CPU", flush=True)
    if args.main_job_cold:
        ratios["main_job_first_run_extra_s"] = (
            meter.results["main_job (models cache empty)"]["seconds"] - warm["seconds"]
        )
