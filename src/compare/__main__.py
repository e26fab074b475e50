"""`python -m src.compare --experiment NAME [--sweep-id ID] [filters] [--diff RUN_A RUN_B] [--out DIR]`.

Reads the finished job runs of an MLflow experiment and/or sweep, builds the papers' comparison tables and plots,
writes report.md, report.html (self-contained), tables/*.csv, tables/*.parquet (the per-question tables of
prompts and outputs) and plots/*.png to --out (default reports/<experiment>), and logs that folder as the
artifacts of a run tagged kind=comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from src.cli import add_tracking_flags, check_power_args, entry, user_error
from src.common.errors import UserError
from src.common.safe_names import folder_name
from src.core.metric_choices import SURE_RULES
from src.tracking import reads
from src.tracking.records import resolve_run_id

from .load import add_chance, as_list, load_runs
from .report import header_lines, log_comparison, write
from .sections import RUNS_TITLE, build_sections, diff_section
from .sure_rule import apply_sure_rule


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m src.compare", description=__doc__.splitlines()[0])
    add_tracking_flags(parser, experiment="MLflow experiment (a sweep's tracking.experiment, e.g. smoke)")
    parser.add_argument("--sweep-id", help="only the jobs of this multirun (tag sweep_id; printed in the parent run)")
    parser.add_argument("--benchmark", action="append", help="keep these benchmarks (repeat or comma-separate)")
    parser.add_argument("--model", action="append", help="keep these models (repeat or comma-separate)")
    parser.add_argument("--variants", action="append", help="keep these variant sets (repeat or comma-separate)")
    parser.add_argument(
        "--diff",
        nargs=2,
        metavar=("RUN_A", "RUN_B"),
        help="add the per-question disagreements between two runs (read from their records); "
        "a run id or its first 8 or more characters, as the report prints them",
    )
    parser.add_argument("--out", type=Path, help="report folder (default reports/<experiment>)")
    parser.add_argument("--no-mlflow", action="store_true", help="write the report only; log no comparison run")
    parser.add_argument(
        "--sure-rule",
        choices=SURE_RULES,
        help="recompute every run's SURE/UNSURE, RWS and S/T under this rule from its records "
        "(default: each run's own rule, tag sure_rule; runs under different rules get "
        "separate repetition tables)",
    )
    parser.add_argument(
        "--no-paired",
        action="store_true",
        help="leave out what reads every run's records: the paired differences and "
        "questions-needed tables, the papers' spreads and the questions the models answer "
        "differently (the chance levels still read each run's records once)",
    )
    parser.add_argument(
        "--fluctuation-spreads",
        action="store_true",
        help="add the answer-fluctuation paper's stability study (std over 100 random pairs and "
        "|L|-tuples of permutations) for runs that asked every order: 200 metric "
        "computations per run, minutes for a large run (default: a note says how)",
    )
    parser.add_argument(
        "--pair-intersection",
        action="store_true",
        help="pair runs that asked different questions on the questions they share (default: refuse)",
    )
    parser.add_argument(
        "--delta", type=float, default=0.02, help="difference the questions-needed table is for (default 0.02)"
    )
    parser.add_argument("--power", type=float, default=0.8, help="power of the questions-needed table (default 0.8)")
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="two-sided level of the tests and the questions-needed table (default 0.05)",
    )
    args = parser.parse_args(argv)
    if not (args.experiment or args.sweep_id or args.diff):
        parser.error("give --experiment and/or --sweep-id (or --diff RUN_A RUN_B)")
    return args


def default_out_dir(name: str) -> Path:
    """reports/<name> as a plain folder name: experiment names come from a shared store and are never a path."""
    return Path("reports") / folder_name(name)


def compare(args: argparse.Namespace) -> dict[str, Any]:
    filters = {
        "benchmark": ", ".join(as_list(args.benchmark)),
        "model": ", ".join(as_list(args.model)),
        "variants": ", ".join(as_list(args.variants)),
    }
    runs, sections = None, []
    if args.diff:
        args.diff = [resolve_run_id(run_id, args.tracking_uri, key="--diff") for run_id in args.diff]
    if args.experiment or args.sweep_id:
        runs = load_runs(
            tracking_uri=args.tracking_uri,
            experiment=args.experiment,
            sweep_id=args.sweep_id,
            benchmarks=args.benchmark,
            models=args.model,
            variants=args.variants,
        )
        rule_notes = []
        if getattr(args, "sure_rule", None):
            rule_notes = apply_sure_rule(runs, args.sure_rule)
        rule_notes += add_chance(runs)

        check_power_args(args.delta, args.alpha, args.power)
        sections = build_sections(
            runs,
            paired=not args.no_paired,
            fluctuation_spreads=args.fluctuation_spreads,
            paired_options={
                "intersect": args.pair_intersection,
                "delta": args.delta,
                "alpha": args.alpha,
                "power": args.power,
            },
        )
        next(s for s in sections if s.title == RUNS_TITLE).notes += rule_notes
    if args.diff:
        sections.append(diff_section(args.tracking_uri, *args.diff))
    name = args.experiment or (
        f"sweep-{args.sweep_id}" if args.sweep_id else f"diff-{args.diff[0][:8]}-{args.diff[1][:8]}"
    )
    out_dir = args.out or default_out_dir(name)
    title = f"Model comparison: {name}"
    written = write(sections, out_dir, header=header_lines(runs, filters=filters), title=title)
    result = {
        "out": str(out_dir),
        "files": len(written),
        "paired": [line for s in sections for line in s.paired_lines],
        "bottom_line": [line for s in sections for line in s.lines],
        "tables": sum(len(s.tables) for s in sections),
        "plots": sum(len(s.plots) for s in sections),
        "skipped": [n for s in sections for n in s.notes],
    }
    if not args.no_mlflow:
        if runs is not None:
            experiment_id = runs.table["experiment_id"].iloc[0]
        else:
            experiment_id = reads.run_experiment_id(args.tracking_uri, args.diff[0])
        tags = {"compared_experiment": args.experiment or "", "compared_sweep_id": args.sweep_id or ""}
        params = {
            **{f"filter.{k}": v for k, v in filters.items() if v},
            "n_runs": len(runs.table) if runs is not None else 0,
            "out": str(out_dir),
        }
        if args.diff:
            params["diff"] = " ".join(args.diff)
        if getattr(args, "sure_rule", None):
            params["sure_rule"] = args.sure_rule
        result["run_id"] = log_comparison(
            out_dir,
            tracking_uri=args.tracking_uri,
            experiment_id=experiment_id,
            name=f"comparison-{name}",
            tags={k: v for k, v in tags.items() if v},
            params=params,
        )
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = compare(args)
    except UserError as err:
        return user_error(err)
    print(json.dumps({k: v for k, v in result.items() if k not in ("skipped", "paired", "bottom_line")}))
    for line in result["bottom_line"]:  # what to pick, first: the report's first screen
        print(f"bottom line: {line}", file=sys.stderr)
    for line in result["paired"]:
        print(f"paired: {line}", file=sys.stderr)
    for note in result["skipped"]:
        print(f"note: {note}", file=sys.stderr)
    print(f"report: {Path(result['out']) / 'report.html'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    entry(main)
