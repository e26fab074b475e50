"""`python -m devtools.perf`: speed, memory and agreement numbers on the real default model (SmolLM2-135M, CPU), not a
test.

Not to be confused with `src/benchmarks/`, the question sets.

On the same model (one float copy of the GGUF, shared with lm-evaluation-harness) and the same ARC-Challenge
questions, in one process, it times and prints wall time, prompts/s, forward tokens and peak memory (RSS,
sampled), and the cost per token fed (ms/token, padding included) for:

- load        whole commands from fresh processes: the first model load into an empty models cache (hash +
              de-quantise the GGUF + save + load) vs a second process reading that cache
- mainjob     the README's main job (synthetic, CoRA set, the model's cloze_shown scoring): its answering phase,
              and option texts packed after their prompts vs padded batches on the same prompts; batches
              sized by tokens (the CPU default budget) vs the fixed batches before them (one pack per pass, 16
              padded prompts) and vs 2x and 4x the budget, alternated over four rounds; the answering's model
              FLOP/s over a float matmul's rate in the same process, and that share's ceiling: the FLOPs over
              the seconds spent in the matrix products and attention's SDPA kernel alone
- cora        the CoRA divergent set with logprob scoring: the optimised path (prefix-tree packing, response
              cache cold, then warm: the answering phase of a rerun) vs padded batches of 16 (the primary
              baseline: what batched harnesses do) and the naive path (one call per trial, batch size 1, no
              cache, no sharing); padded and naive on the first --compare-limit questions
- dtype       what `model.dtype=auto` resolves to here, and bfloat16 against float32 on the same CoRA label
              scoring (--compare-limit questions) and main-job option scoring: time, decisions that agree out
              of N and max |difference| of the log-probabilities
- rerun       whole commands from fresh processes: `python -m src.run variants=cora limit=--rerun-limit` on a
              fresh store and response cache (models cache warm), the same command again (resume finds the
              finished run) and again with resume=false (every answer from the response cache)
- repetition  10 repetitions at T=0.7 with exact first-token sampling vs one greedy pass (and vs generating
              the 10 samples, the path it replaces)
- lmeval      lm-evaluation-harness 0.4.x (`HFLM.loglikelihood` on `Instance`s) on the same CoRA prompts
              (--compare-limit questions) vs this project, both cold
- agreement   label log-probabilities of this project vs lm-eval on the original prompt of every question
              (--limit): max |difference| and the option ranking per question
- adaptive    10 generated repetitions at T=0.7 (repetition prompt, --limit questions, response cache off), all
              of them vs adaptive repetitions (src/answering/adaptive.py): the share of samples saved, the wall-time
              ratio, and whether every question's SURE/UNSURE x right/wrong cell (both SURE rules) is the same;
              `--only adaptive` runs it alone
- generation  label scoring vs generate R=1 greedy vs generate R=10 at T=0.7 (max_new_tokens of the config) on
              the same CoRA prompts of --limit ARC-Challenge questions, prefix-shared and padded
              (model.share_prefix=false): wall, tokens fed and peak RSS of each, every phase in a fresh process
              that loads the model and warms up the same way, so that the RSS peaks compare; `--only generation`
- intervals   the headline metrics' intervals (src/metrics/intervals.py) on a full MMLU x CoRA records table of
              the simulated model (no model load; building the table takes 4-7 minutes, --intervals-records
              keeps it for the next run): --resamples cluster
              resamples, vectorised, against the naive path (the family functions on explicitly resampled
              records, timed on --naive-resamples and extrapolated); `--only intervals` runs it alone
- startup     whole commands from fresh processes, no model: `python -m src.run model=simulated limit=1` on a
              temporary SQLite store (median of --startup-repeats), the import of the entry point, and the
              24-job smoke sweep under the joblib launcher against the summed `seconds` (compute) of its jobs;
              `--only startup` runs it alone (about a minute on 2 quiet cores)
- review_scale the review at the scale of a real sweep (docs/review_at_scale.md): 8 simulated models (success
              rates 0.30 to 0.86) x 4 benchmarks x 2 temperatures x 2 variant sets (original, CoRA) = 128 jobs of
              --scale-limit questions into one SQLite store (the smoke sweep's file, its axes replaced on the
              command line), then `python -m src.compare` on all of it from a fresh process: its wall and CPU
              seconds and the size of report.html; `--only review_scale` runs it alone (~6 minutes on 2 cores)
- report_size the bytes one CoRA run leaves (devtools/perf/sizes.py): a simulated job of --sizes-limit MMLU
              questions and `python -m src.compare` on it, from fresh processes on a new SQLite store: the report
              folder and its per-question disagreements table (and that table's size as CSV), a full-MMLU report
              extrapolated, the store's bytes per job run and per comparison run, and the copies on disk of the
              job's artifacts and of the report; `--only report_size` runs it alone (~1 minute on 2 cores);
              `python -m devtools.perf.tables --write` makes docs/speed.md's table of them
- vllm        the main job's prompts (--vllm-limit questions x CoRA) answered by `model=vllm` and by `model=hf`
              on the same float32 weights, each scoring, in one process: the engine's start apart, the time
              ratio, decisions compared, one call against the answering loop's chunks, prefix caching off
              (devtools/perf/vllm.py); needs vLLM (docs/serving.md); `--only gpu` runs it too on a GPU
- main_job    the README's main job whole as a user types it, `python -m src.run variants=cora`, in a fresh process
              (new store and response cache, models cache warm; --main-job-cold: also on an empty models cache);
              `--only main_job` runs it alone; under `ATEN_CPU_CAPABILITY=avx2` the machine records say so


lm-eval is optional (`pip install .[bench]`); without it the lmeval and agreement parts say so and are skipped.
Ratios and targets go to --out (JSON); every phase's measures and every ratio are also appended, with the machine,
date, load, command and commit, to the results file (devtools/perf/results.py). A full run takes about 15-20
minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from devtools.perf import gpu, intervals, lm_eval, overhead, processes, results, sizes, study, vllm
from devtools.perf.meter import MODEL_PARTS, PARTS, REPO, TARGETS, Meter, hf_backend, model_config
from src.cli import entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.perf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=50, help="ARC-Challenge questions (default 50)")
    parser.add_argument(
        "--compare-limit",
        type=int,
        default=5,
        help="questions for the naive-path and lm-eval comparisons (default 5: 100 CoRA prompts)",
    )
    parser.add_argument("--only", action="append", choices=PARTS, help="run only this part (repeatable)")
    parser.add_argument(
        "--rerun-limit",
        type=int,
        default=10,
        help="rerun: synthetic questions of the timed `python -m src.run variants=cora` (default 10)",
    )
    parser.add_argument("--resamples", type=int, default=1000, help="intervals: bootstrap resamples (default 1000)")
    parser.add_argument(
        "--naive-resamples",
        type=int,
        default=3,
        help="intervals: resamples the naive path is timed on, then extrapolated (default 3)",
    )
    parser.add_argument(
        "--intervals-records",
        metavar="PATH",
        help="intervals: time on this records.parquet (a run's artifact); when absent, the simulated "
        "MMLU x CoRA table is built and written there for the next run",
    )
    parser.add_argument(
        "--startup-repeats",
        type=int,
        default=3,
        help="startup: fresh `python -m src.run model=simulated limit=1` processes timed (default 3)",
    )
    parser.add_argument(
        "--scale-limit",
        type=int,
        default=100,
        help="review_scale: questions per job of the 128-job sweep (default 100)",
    )
    parser.add_argument(
        "--scale-dir",
        metavar="DIR",
        help="review_scale: the store and report folder; a store already there is compared again "
        "without rerunning the sweep (default: a new temporary folder, kept)",
    )
    parser.add_argument(
        "--sizes-limit",
        type=int,
        default=2000,
        help="report_size: MMLU questions of the simulated CoRA job (default 2000)",
    )
    parser.add_argument(
        "--overhead-limits",
        type=int,
        nargs=2,
        default=[500, 2000],
        metavar=("SMALL", "LARGE"),
        help="overhead: MMLU questions of the two sizes whose slope is the cost per trial (default 500 2000)",
    )
    parser.add_argument("--sizes-dir", metavar="DIR", help="report_size: a new or empty folder (store, report)")
    parser.add_argument(
        "--gpu-questions",
        type=int,
        default=100,
        help="gpu: MedQA questions timed (default 100, x 26 CoRA variants; 4 at the tiny shape)",
    )
    parser.add_argument(
        "--vllm-limit",
        type=int,
        default=4,
        help="vllm: synthetic questions (x CoRA variants) answered by model=vllm and model=hf (default 4)",
    )
    parser.add_argument(
        "--main-job-cold",
        action="store_true",
        help="main_job: also time the first run, on an empty models cache (the GGUF converted first)",
    )
    parser.add_argument("--tiny", action="store_true", help="gpu: the tiny shape on the CPU even where a GPU is")
    parser.add_argument(
        "--tokenizer",
        metavar="DIR",
        help="gpu: a folder with the tokenizer files (default: the embedded SmolLM2's, from the models "
        "cache; a machine without the model package gets them copied from there)",
    )
    parser.add_argument(
        "--generation-phase", choices=sorted(processes.GENERATION_PHASES), help=argparse.SUPPRESS
    )  # a child
    parser.add_argument("--out", default="bench.json", help="JSON file for the numbers (default bench.json)")
    parser.add_argument(
        "--results",
        metavar="PATH",
        help=f"JSON Lines file every figure is appended to (default: ${results.PATH_ENV}, else "
        "devtools/perf/results.jsonl)",
    )
    args = parser.parse_args(argv)
    if args.generation_phase:
        return processes.generation_phase(args)
    parts = args.only or list(PARTS)
    os.environ.setdefault("MCQ_DATA_DIR", str(REPO.parent / "shared" / "data"))
    os.environ.setdefault("TQDM_DISABLE", "1")

    import logging

    from src.config.compose import compose_job  # local: loads hydra, omegaconf (slow import)

    logging.basicConfig(level=logging.WARNING)
    meter = Meter()
    measured_commit = results.commit()  # before the parts run: the code they measure
    ratios: dict[str, float] = {}
    cfg = compose_job([])
    model_cfg = model_config(cfg)
    shared: dict[str, Any] = {"model_cfg": model_cfg}
    threads = os.cpu_count()
    if set(parts) & set(MODEL_PARTS):
        with meter.phase("import torch+transformers+project"):
            import torch

            from src.backends import hf  # noqa: F401 - local: loads torch, transformers (slow import)
        threads = torch.get_num_threads()
        print(
            f"model {model_cfg['name']}, torch {torch.__version__}, {threads} threads, "
            f"load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        with meter.phase("model_load (ours)"):
            shared["backend"] = hf_backend(model_cfg)
        shared["our_setup_s"] = meter.results["model_load (ours)"]["seconds"]
    else:
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
    try:
        run_parts(parts, meter, args, ratios, shared)
    finally:  # what was measured is kept, also when a part stops the bench
        targets = {key: bool(TARGETS[key][1](value)) for key, value in ratios.items() if key in TARGETS}
        figures = results.records(argv_of(argv), meter.results, meter.taken, ratios, targets, measured_commit)
        path = results.results_path(args.results)
        print(f"\nappended {results.append(path, figures)} figures to {path}")

    print("\nratios and targets:")
    for key, value in ratios.items():
        line = f"  {key:30s} {value:10.4g}"
        if key in targets:
            line += f"   {'MET' if targets[key] else 'NOT MET'}: {TARGETS[key][0]}"
        print(line)
    report = {
        "model": model_cfg["name"],
        "limit": args.limit,
        "compare_limit": args.compare_limit,
        "parts": parts,
        "threads": threads,
        "load_average": os.getloadavg()[0],
        "phases": meter.results,
        "ratios": ratios,
        "targets_met": targets,
    }
    Path(args.out).write_text(json.dumps(report, indent=2, sort_keys=True))
    print(f"\nwrote {args.out}")
    return 0


def argv_of(argv: list[str] | None) -> list[str]:
    """The command's arguments as given: `argv`, or the process's own when called as `python -m devtools.perf`."""
    return list(sys.argv[1:] if argv is None else argv)


def run_parts(parts: list[str], meter: Meter, args: argparse.Namespace, ratios: dict[str, float], shared) -> None:
    for name, fn in (
        ("load", study.part_load),
        ("mainjob", study.part_mainjob),
        ("cora", study.part_cora),
        ("repetition", study.part_repetition),
        ("lmeval", lm_eval.part_lmeval),
        ("agreement", lm_eval.part_agreement),
        ("lmeval_task", lm_eval.part_lmeval_task),
        ("adaptive", study.part_adaptive),
        ("dtype", lm_eval.part_dtype),
        ("rerun", study.part_rerun),
        ("intervals", intervals.part_intervals),
        ("startup", processes.part_startup),
        ("generation", processes.part_generation),
        ("review_scale", processes.part_review_scale),
        ("report_size", sizes.part_report_size),
        ("gpu", gpu.part_gpu),
        ("vllm", vllm.part_vllm),
        ("main_job", processes.part_main_job),
        ("overhead", overhead.part_overhead),
    ):
        if name in parts:
            fn(meter, args, ratios, shared)


if __name__ == "__main__":
    entry(main)
