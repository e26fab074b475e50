"""`python -m devtools.perf`'s measuring tools: the meter, the parts' names and targets, the model."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


PARTS = (
    "load",
    "mainjob",
    "cora",
    "repetition",
    "lmeval",
    "agreement",
    "lmeval_task",
    "adaptive",
    "dtype",
    "rerun",
    "intervals",
    "startup",
    "generation",
    "review_scale",
    "report_size",
    "gpu",
    "vllm",
    "main_job",
    "overhead",
)


# the parts that use the model loaded in this process; the others load their own or start fresh processes
MODEL_PARTS = ("mainjob", "cora", "repetition", "lmeval", "agreement", "lmeval_task", "adaptive", "dtype")


TARGETS = {  # what each figure must reach, checked on the printed numbers
    "overhead_cora_us_per_trial_total": (
        "the framework's CPU per CoRA trial at the margin (simulated MMLU) <= 100 µs",
        lambda r: r <= 100.0,
    ),
    "overhead_r10_us_per_trial_total": (
        "the framework's CPU per trial of 10 repetitions at the margin (simulated MMLU) <= 100 µs",
        lambda r: r <= 100.0,
    ),
    "overhead_fixed_job_cpu_s": ("a job into a new store <= 3 s of CPU", lambda r: r <= 3.0),
    "overhead_overlap_wall_over_backend": (
        "a CoRA job's answering with a backend of 0.5 ms per prompt <= 1.1x the backend alone",
        lambda r: r <= 1.1,
    ),
    "cora_vs_padded": (
        "CoRA label scoring: >= 3x faster than padded batches of 16 on the same prompts",
        lambda r: r >= 3.0,
    ),
    "cora_vs_lmeval_scoring": ("CoRA logprob: faster than lm-eval scoring the same prompts", lambda r: r > 1.0),
    "exact10_vs_greedy": ("10 repetitions, exact first-token sampling: <= 1.3x one greedy pass", lambda r: r <= 1.3),
    "agreement_max_abs": ("label log-probs equal lm-eval's within 1e-4", lambda r: r <= 1e-4),
    "agreement_ranking": ("same option ranking on every question", lambda r: r == 1.0),
    "load_cold_vs_warm": ("fresh process: first model load >= 3x a load from the models cache", lambda r: r >= 3.0),
    "rerun_vs_first": (
        "fresh process: rerun of a finished `python -m src.run` < 10% of its first time",
        lambda r: r < 0.1,
    ),
    "bf16_same_decisions": (
        "bfloat16: the same decision as float32 on every prompt (what dtype=auto as the "
        "default model's setting would need)",
        lambda r: r == 1.0,
    ),
    "adaptive_same_verdicts": (
        "adaptive repetitions: every SURE/UNSURE x right/wrong cell as the full run's",
        lambda r: r == 1.0,
    ),
    "startup_run_wall_s": (
        "fresh process: `python -m src.run model=simulated limit=1` <= 3 s wall",
        lambda r: r <= 3.0,
    ),
    "startup_sweep_vs_compute": (
        "24-job simulated sweep under joblib: < 2x the summed compute of its jobs",
        lambda r: r < 2.0,
    ),
    "gen_greedy_vs_labels": (
        "generate R=1 greedy: <= 1.5x the wall of label scoring on the same prompts",
        lambda r: r <= 1.5,
    ),
    "gen_r10_vs_labels": (
        "generate R=10 at T=0.7: <= 2.5x the wall of label scoring on the same prompts",
        lambda r: r <= 2.5,
    ),
    "gen_r10_vs_r1_peak_rss": ("generate: peak RSS at R=10 <= 1.2x R=1 on the same prompts", lambda r: r <= 1.2),
    "gen_shared_same_samples": ("generate: prefix-shared samples identical to padded batches'", lambda r: r == 1.0),
    "review_scale_compare_cpu_s": (
        "review at scale: `python -m src.compare` on 128 runs < 60 s of CPU (its wall on "
        "a quiet machine; wall under load is printed beside it)",
        lambda r: r < 60.0,
    ),
    "review_scale_html_mb": ("review at scale: report.html of 128 runs < 5 MB", lambda r: r < 5.0),
    "report_size_full_mmlu_est_mb": (
        "a full-MMLU CoRA run's report folder <= 10 MB (extrapolated from the measured run)",
        lambda r: r <= 10.0,
    ),
    "report_size_job_copies": ("a job's artifacts on disk once (job folder and local store)", lambda r: r <= 1.0),
    "gpu_medqa_cora_8b_h100_s": (
        "device check: MedQA CoRA (1,273 x 26) with Llama-3-8B's shape in < 2 minutes on one "
        "H100 (extrapolated from the timed slice)",
        lambda r: r < 120.0,
    ),
    "mainjob_token_vs_fixed_batches": (
        "CPU: the main job with token batching (the default budget) no slower than "
        "today's fixed batches (one 1,024-token pack per pass)",
        lambda r: r <= 1.02,
    ),
    "cora_optimised_vs_padded_ms_per_token": (
        "CoRA: a packed token costs <= 1.2x a padded one (the packed path on the fused attention kernels)",
        lambda r: r <= 1.2,
    ),
    "mainjob_share_of_matmul_rate": (
        "main job's answering: model FLOP/s >= 0.8 of a float matmul's rate measured in the same process",
        lambda r: r >= 0.8,
    ),
    "intervals_bootstrap_seconds": (
        "intervals: 1000 resamples (--resamples) of a full MMLU CoRA records table < 30 s",
        lambda r: r < 30.0,
    ),
}


class Meter:
    """Wall time, forward tokens and peak RSS of one phase (psutil sampling when installed, else ru_maxrss)."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, float]] = {}
        self.taken: dict[str, tuple[float, float]] = {}  # each phase's end: epoch seconds, load average then
        try:
            import psutil

            self._process = psutil.Process()
        except ImportError:
            self._process = None

    def _rss(self) -> float:
        if self._process is not None:
            return self._process.memory_info().rss / 2**20
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # peak so far, KiB on Linux

    @contextmanager
    def phase(self, name: str, *, prompts: int = 0, tokens=lambda: 0) -> Iterator[dict[str, float]]:
        start_rss, peak, stop = self._rss(), [self._rss()], threading.Event()

        def sample() -> None:
            while not stop.wait(0.02):
                peak[0] = max(peak[0], self._rss())

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        tokens_before = tokens()
        out: dict[str, float] = {}
        start = time.perf_counter()
        try:
            yield out
        finally:
            seconds = time.perf_counter() - start
            stop.set()
            thread.join()
            peak[0] = max(peak[0], self._rss())
            fed = tokens() - tokens_before
            out.update(
                seconds=seconds,
                prompts=prompts,
                prompts_per_s=prompts / seconds if seconds > 0 else math.nan,
                forward_tokens=fed,
                ms_per_token=1000 * seconds / fed if fed else math.nan,
                peak_rss_mib=peak[0],
                peak_rss_growth_mib=peak[0] - start_rss,
            )
            self.results[name] = out
            self.taken[name] = (time.time(), os.getloadavg()[0])
            per_token = f"{out['ms_per_token']:6.2f} ms/token" if fed else " " * 15
            print(
                f"  {name:28s} {seconds:8.2f} s  {out['prompts_per_s']:8.2f} prompts/s  {per_token}  "
                f"{fed:>9,} tokens  peak {peak[0]:7.0f} MiB (+{peak[0] - start_rss:.0f})",
                flush=True,
            )


def build(overrides: list[str], limit: int | None, benchmark: str = "arc_challenge"):
    """(config, items) for ARC-Challenge (or `benchmark`) with the given overrides, as `python -m src.run` builds
    them."""
    from omegaconf import OmegaConf

    from src.benchmarks import load_benchmark  # local: the part that times it imports it
    from src.config.checks import job_spec  # local: loads hydra, omegaconf (slow import)
    from src.config.compose import compose_job  # local: loads hydra, omegaconf (slow import)
    from src.core.prompts import PromptTemplate  # local: the part that times it imports it
    from src.job.runner import build_items  # local: loads hydra, omegaconf (slow import)

    cfg = compose_job([f"benchmark={benchmark}", f"limit={'null' if limit is None else limit}", *overrides])
    bench = OmegaConf.to_container(cfg.benchmark, resolve=True)
    questions = load_benchmark(
        bench.pop("name"),
        path=bench.pop("path", None),
        split=bench.pop("split", None),
        data_dir=cfg.data_dir,
        seed=cfg.seed,
        limit=cfg.limit,
        options=bench,
    )
    template = PromptTemplate.from_config(OmegaConf.to_container(cfg.prompt, resolve=True))
    return cfg, build_items(job_spec(cfg), questions, template)


def model_config(cfg) -> dict[str, Any]:
    from omegaconf import OmegaConf

    return {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items() if k != "scoring"}


def hf_backend(model_cfg: dict[str, Any], *, chat: bool = True, **overrides: Any):
    from src.backends.hf import HFBackend  # local: loads torch, transformers (slow import)

    backend = HFBackend.from_config({**model_cfg, **overrides}, chat=chat, progress=False)
    backend.load()
    return backend


LOAD_CHILD = """
import json, time
from src.config.compose import compose_job
from devtools.perf.meter import hf_backend, model_config
import src.backends.hf
start = time.perf_counter()
hf_backend(model_config(compose_job([])))
print(json.dumps({"load_s": time.perf_counter() - start}))
"""  # a fresh process: imports, then the default model built and loaded; its own load time is its last line


def fresh_process(meter: Meter, name: str, command: list[str], **env: str) -> str:
    """Run `command` from the repository in a new process, timed whole as phase `name`; its stdout. With psutil
    installed, the peak RSS of the process and its children (sampled) is kept as `process_peak_rss_mib` and printed:
    the phase's own RSS columns are this process's."""
    import subprocess

    peak, stop = [0.0], threading.Event()
    with meter.phase(name) as out:
        proc = subprocess.Popen(
            command,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "TQDM_DISABLE": "1", **env},
        )
        watcher = threading.Thread(target=_watch_rss, args=(proc.pid, peak, stop), daemon=True)
        watcher.start()
        stdout, stderr = proc.communicate()
        stop.set()
        watcher.join()
    if peak[0]:
        out["process_peak_rss_mib"] = peak[0]
        print(f"  {'':28s} process peak RSS {peak[0]:.0f} MiB", flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"perf: {name} exited {proc.returncode}: {stderr.strip()[-2000:]}")
    return stdout


def _watch_rss(pid: int, peak: list[float], stop: threading.Event) -> None:
    """Sample the RSS of process `pid` and its children into peak[0] (MiB) until `stop` (nothing without psutil)."""
    try:
        import psutil

        process = psutil.Process(pid)
    except (ImportError, OSError):
        return
    while not stop.wait(0.05):
        try:
            family = [process, *process.children(recursive=True)]
        except psutil.Error:  # the process has ended
            return
        rss = 0
        for member in family:
            try:
                rss += member.memory_info().rss
            except psutil.Error:  # a child that ended meanwhile
                pass
        peak[0] = max(peak[0], rss / 2**20)


def child_cpu_s() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
