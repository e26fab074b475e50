"""`python -m src.data slots BENCHMARK [--data-dir DIR] [--limit N] [--seed S]`: where the right answers sit.

(Also `--split` and `--path`, as `benchmark.split` / `benchmark.path`: `slots generic --path FILE`.)

Loads the benchmark as a run would (its loader's defaults, e.g. TruthfulQA shuffled with the
seed), prints per answer slot the count, the share and the share a uniformly random order would
give (the mean of 1/n_options over the questions that have the slot), then the one-line summary
runs log, and a `warning:` line when one slot holds more than half of the answers among at least
20 questions, beyond chance (the rule in `src/benchmarks/position.py`). Bad input: one line `error: ...`, exit code 2.
"""
from __future__ import annotations

import argparse
import os
import sys

from .benchmarks import load_benchmark
from .benchmarks.position import (answer_slot_counts, answer_slot_warning, describe_answer_slots,
                                  expected_slot_shares, slot_name)
from .errors import UserError

DEFAULT_DATA_DIR = os.environ.get("MCQ_DATA_DIR", "../shared/data")  # as conf/config.yaml's data_dir


def slots_report(name: str, *, data_dir: str, limit: int | None = None, seed: int = 0, split: str | None = None,
                 path: str | None = None) -> str:
    """The `slots` command's output: a table of answer slots, the summary line and any warning."""
    questions = load_benchmark(name, path=path, data_dir=data_dir, split=split, seed=seed, limit=limit)
    counts = answer_slot_counts(questions)
    expected = expected_slot_shares(questions)
    n = len(questions)
    lines = [f"{name}: {n} questions, seed {seed}",
             f"{'slot':<5} {'count':>6} {'share':>7} {'random':>7}"]
    lines += [f"{slot_name(slot):<5} {count:>6} {count / n:>7.1%} {expected[slot]:>7.1%}" for slot, count in counts.items()]
    lines.append(describe_answer_slots(questions))
    warning = answer_slot_warning(questions, name)
    if warning is not None:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.data", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    slots = commands.add_parser("slots", help="the distribution of the right answer's slot in a benchmark")
    slots.add_argument("benchmark", help="a benchmark name as in conf/benchmark (mmlu, truthfulqa_mc1, ...)")
    slots.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"folder of the benchmark files (default {DEFAULT_DATA_DIR})")
    slots.add_argument("--limit", type=int, default=None, help="only the first N questions")
    slots.add_argument("--seed", type=int, default=0, help="the run seed (TruthfulQA's option shuffle uses it)")
    slots.add_argument("--split", default=None, help="the split (default: the benchmark's evaluation split)")
    slots.add_argument("--path", default=None, help="the benchmark file or folder (default: the one under --data-dir)")
    args = parser.parse_args(argv)
    try:
        print(slots_report(args.benchmark, data_dir=args.data_dir, limit=args.limit, seed=args.seed, split=args.split,
                           path=args.path))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
