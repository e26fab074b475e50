"""`python -m devtools.perf --only overhead`: the framework's own CPU cost per trial, with no model to wait for.

A simulated model (`model=simulated`, no network, no weights) answers MMLU in two studies, the CoRA divergent set
and 10 repetitions at a temperature, each at two sizes (`--overhead-limits`, default 500 and 2,000 questions), in
this process, each job into a new SQLite store and response cache. Every job's CPU seconds (`time.process_time`)
are split into its phases, each timed around the function that does it (`PHASES`): planning and rendering the
prompts, the answer loop (request hashing, the response cache, the simulated answers, parsing), the records table,
the metrics with their intervals, the logging (artifacts and the MLflow run), and the rest (questions loaded, the
run opened). A phase's cost per trial at the margin is the slope between the two sizes, in µs per trial: what one
more trial costs, without the fixed cost of a job.

The fixed cost is timed apart, from fresh processes: `python -m src.run model=simulated limit=1` into a new store
(CPU seconds, the process and what it waits for), and what of it is the imports (`import src.run` alone), so that
the rest is Hydra's composition, the MLflow client and store, and the one trial.

Beside them: the bytes one CoRA run leaves (devtools/perf/sizes.py, `--only report_size`'s figures, run here too
when that part is not asked for) and the wall of a job's answering with a backend of 0.5 ms per prompt over the
backend's alone (`backend_overlap`).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from devtools.perf import overlap, sizes as report_sizes
from devtools.perf.meter import Meter, child_cpu_s, fresh_process

# the two studies, as a user types them (the store, the response cache and the job folder are added per job)
STUDIES = {
    "cora": ["model=simulated", "benchmark=mmlu", "variants=cora"],
    "r10": ["model=simulated", "benchmark=mmlu", "variants=original", "repetitions=10", "temperature=0.7"],
}
# phase -> the (module, function) whose calls it times: looked up when a job calls them, so wrapping the module's
# attribute times every call (src/job/runner.py calls them by module attribute or imports them when it runs)
PHASES = {
    "plan": (("src.job.runner", "plan_job"),),
    "answer": (("src.answering.trials", "answer_items"),),
    "records": (("src.answering.trials", "to_records"),),
    "metrics": (("src.metrics", "compute_metrics"), ("src.metrics.chance", "chance_levels")),
    "logging": (("src.job.runner", "log_job"),),
}
OTHER = "other"  # the job's CPU outside the phases: questions loaded, the store's health check, the run opened


@contextmanager
def timed_phases() -> Iterator[dict[str, float]]:
    """While open, every call of a phase's functions adds its process CPU seconds to `spent[phase]`."""
    import importlib

    spent = dict.fromkeys(PHASES, 0.0)
    saved: list[tuple[Any, str, Callable[..., Any]]] = []

    def wrapped(phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[phase] += time.process_time() - start

        return call

    for phase, targets in PHASES.items():
        for module_name, name in targets:
            module = importlib.import_module(module_name)
            saved.append((module, name, getattr(module, name)))
            setattr(module, name, wrapped(phase, getattr(module, name)))
    try:
        yield spent
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)


def job_cpu(overrides: list[str], root: Path) -> tuple[int, dict[str, float]]:
    """(trials, CPU seconds per phase and `total`) of one in-process job of `overrides` into a new store under
    `root`."""
    import pandas as pd

    from src.config.compose import compose_job  # local: loads hydra, omegaconf (slow import)
    from src.job.runner import run_job  # local: loads hydra, omegaconf (slow import)

    root.mkdir(parents=True, exist_ok=True)
    cfg = compose_job(
        [
            *overrides,
            f"tracking.uri=sqlite:///{root}/mlflow.db",
            f"cache.path={root}/responses.db",
            "tracking.experiment=overhead",
        ]
    )
    with timed_phases() as spent:
        start = time.process_time()
        result = run_job(cfg, out_dir=root / "run")
        total = time.process_time() - start
    trials = len(pd.read_parquet(result.out_dir / "artifacts" / "records.parquet", columns=["question_id"]))
    return trials, {**spent, OTHER: total - sum(spent.values()), "total": total}


def warm_up() -> None:
    """One small job of each study first, untimed: the imports and first calls of a process (MLflow's client, the
    benchmark's file) belong to the fixed cost, not to the first size's phases."""
    for overrides in STUDIES.values():
        with tempfile.TemporaryDirectory(prefix="overhead-warm-") as tmp:
            job_cpu([*overrides, "limit=5"], Path(tmp))


def marginal_us(small: tuple[int, dict[str, float]], large: tuple[int, dict[str, float]]) -> dict[str, float]:
    """µs of CPU per trial at the margin, per phase: the slope between two sizes of one study.

    >>> marginal_us((10, {"plan": 1.0}), (110, {"plan": 1.5}))
    {'plan': 5000.0}
    """
    (n1, cpu1), (n2, cpu2) = small, large
    return {phase: 1e6 * (cpu2[phase] - cpu1[phase]) / (n2 - n1) for phase in cpu1}


def part_overhead(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """µs per trial per phase at the margin (CoRA and R=10, two sizes each), the fixed cost of a job into a new
    store (fresh processes), the report's bytes per run and the backend overlap."""
    import gc
    import os

    small, large = sorted(args.overhead_limits)
    print(f"overhead: simulated MMLU jobs of {small} and {large} questions, load {os.getloadavg()[0]:.1f}", flush=True)
    warm_up()
    for study, overrides in STUDIES.items():
        sizes = []
        for limit in (small, large):
            gc.collect()
            with tempfile.TemporaryDirectory(prefix="overhead-") as tmp:
                with meter.phase(f"overhead_{study}_{limit}"):
                    trials, cpu = job_cpu([*overrides, f"limit={limit}"], Path(tmp))
            sizes.append((trials, cpu))
            print(f"  {study} limit={limit}: {trials:,} trials, {cpu['total']:.2f} s CPU " + phase_words(cpu))
            ratios[f"overhead_{study}_{limit}_trials"] = float(trials)
            ratios[f"overhead_{study}_{limit}_cpu_s"] = cpu["total"]
        slope = marginal_us(*sizes)
        print(f"  {study} marginal: {slope['total']:.1f} µs/trial " + phase_words(slope, unit="µs"), flush=True)
        for phase, value in slope.items():
            ratios[f"overhead_{study}_us_per_trial_{phase}"] = value
    ratios.update(fixed_cost(meter))
    if "report_size" not in (args.only or []):
        report_sizes.part_report_size(meter, args, ratios, shared)
    ratios.update(backend_overlap(large))


def phase_words(values: dict[str, float], *, unit: str = "s") -> str:
    return "(" + ", ".join(f"{p} {values[p]:.2f}" + ("" if unit == "s" else "") for p in [*PHASES, OTHER]) + ")"


def fixed_cost(meter: Meter) -> dict[str, float]:
    """The CPU seconds of `python -m src.run model=simulated limit=1` into a new store, and of `import src.run`
    alone, each from a fresh process (median of three)."""
    import statistics

    runs, imports = [], []
    for k in range(3):
        with tempfile.TemporaryDirectory(prefix="overhead-fixed-") as tmp:
            command = [
                sys.executable,
                "-m",
                "src.run",
                "model=simulated",
                "limit=1",
                f"tracking.uri=sqlite:///{tmp}/mlflow.db",
                f"cache.path={tmp}/responses.db",
                f"hydra.run.dir={tmp}/run",
            ]
            cpu = child_cpu_s()
            fresh_process(meter, f"overhead_fixed_run_{k + 1}", command)
            runs.append(child_cpu_s() - cpu)
        cpu = child_cpu_s()
        fresh_process(meter, f"overhead_fixed_import_{k + 1}", [sys.executable, "-c", "import src.run"])
        imports.append(child_cpu_s() - cpu)
    run_s, import_s = statistics.median(runs), statistics.median(imports)
    print(f"  fixed: a job into a new store {run_s:.2f} s CPU, of which `import src.run` {import_s:.2f} s", flush=True)
    return {"overhead_fixed_job_cpu_s": run_s, "overhead_fixed_import_cpu_s": import_s}


def backend_overlap(limit: int) -> dict[str, float]:
    """The wall of a simulated CoRA job's answering with a backend of 0.5 ms per prompt, over the backend's time
    alone (devtools/perf/overlap.py): how much the framework's own work (planning, hashing, cache writes, parsing)
    adds when it overlaps the backend's."""
    measured = overlap.measure_overlap(limit, latency_ms=0.5)
    print(
        f"  backend overlap at 0.5 ms/prompt: {measured['prompts_asked']:,} prompts, wall "
        f"{measured['wall_over_backend']:.3f}x the backend alone ({measured['answer_wall_over_backend']:.3f}x "
        f"without the {measured['plan_s']:.2f} s of planning before the first chunk)",
        flush=True,
    )
    return {f"overhead_overlap_{k}": float(v) for k, v in measured.items()}


def main(argv: list[str] | None = None) -> int:
    """`python -m devtools.perf.overhead [LIMIT ...]`: the in-process phase split only, printed as JSON (no
    results file): the edit loop of the part."""
    import os

    os.environ.setdefault("TQDM_DISABLE", "1")
    limits = [int(a) for a in (argv if argv is not None else sys.argv[1:])] or [500, 2000]
    out: dict[str, Any] = {}
    warm_up()
    for study, overrides in STUDIES.items():
        sizes = []
        for limit in limits:
            with tempfile.TemporaryDirectory(prefix="overhead-") as tmp:
                sizes.append(job_cpu([*overrides, f"limit={limit}"], Path(tmp)))
            print(study, limit, sizes[-1][0], {k: round(v, 2) for k, v in sizes[-1][1].items()}, flush=True)
        if len(sizes) > 1:
            out[study] = {k: round(v, 1) for k, v in marginal_us(sizes[0], sizes[-1]).items()}
            print(study, "marginal µs/trial", out[study], flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
