"""`python -m src.ingest --format cat|lm_eval|generic --path FILE --model NAME ...`: answers produced elsewhere
as one MLflow run laid out as a native job's (see `src/ingest/__init__.py`).

    python -m src.ingest --format cat --path MedQA_wOutputs_Mistral-7B-Instruct_0_merged.xlsx \\
        --model Mistral-7B-Instruct --benchmark medqa --temperature 0.7 --set standard_MC --first 10 \\
        --sure-rule correctness --tracking-uri sqlite:///mlruns/mlflow.db --experiment repetition-paper

Prints the run id and headline metrics as one JSON line, then, for repetition runs, the repetition table as
`python -m src.compare` shows it. Bad input is one `error:` line naming the file and record, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from src.cli import add_tracking_flags, entry, user_error
from src.common.digests import file_sha256, text_sha256
from src.common.errors import UserError
from src.core.metric_choices import SURE_RULES

from .cat import read_cat
from .common import Ingested, check_repetitions, checked_path
from .generic import read_generic
from .lm_eval import read_lm_eval
from .run_log import IngestResult, log_ingested

FORMATS = ("cat", "lm_eval", "generic")
SUMMARY = (
    "mcqa",
    "accuracy",
    "invalid_rate",
    "sure_right",
    "unsure_right",
    "unsure_wrong",
    "sure_wrong",
    "acc_mean",
    "acc_std",
    "rws",
    "st",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m src.ingest", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--format",
        required=True,
        choices=FORMATS,
        help="cat: the CoRA authors' expanded-evaluation tables (.xlsx/.csv); lm_eval: "
        "lm-evaluation-harness --log_samples JSONL; generic: the long table of src.export",
    )
    parser.add_argument(
        "--path",
        required=True,
        action="append",
        help="the file to ingest (lm_eval: repeat for runs with other seeds: their repetitions)",
    )
    parser.add_argument("--answers", help="generic: an OpenAI-style batch output JSONL joined to the rows on custom_id")
    parser.add_argument("--model", help="the model that answered (required for cat and lm_eval)")
    parser.add_argument("--benchmark", help="the benchmark the questions come from (cat: required; e.g. medqa)")
    parser.add_argument("--temperature", type=float, help="the sampling temperature of the answers (cat: required)")
    parser.add_argument("--seed", type=int, help="the records' seed (default: the file's, else 0)")
    parser.add_argument(
        "--set",
        default="standard_MC",
        help="cat: the answer list(s) of expanded_evaluation, comma-separated (default standard_MC)",
    )
    parser.add_argument("--first", type=int, help="cat: the first N answers of each list (default all)")
    parser.add_argument(
        "--as",
        dest="mode",
        default="repetitions",
        choices=("repetitions", "variants"),
        help="cat: a list's answers as repetitions of one variant (default) or as variants",
    )
    parser.add_argument(
        "--labels-from",
        default="raw",
        choices=("raw", "source"),
        help="raw (default): re-parse the raw text with this tool's parser where the file has it; "
        "source: take the label the file gives (cat: model_choice)",
    )
    parser.add_argument(
        "--sure-rule",
        default=SURE_RULES[0],
        choices=SURE_RULES,
        help="SURE/UNSURE rule of the repetition metrics: answer (section 3.2, default) or "
        "correctness (the paper's tables)",
    )
    parser.add_argument(
        "--prompt",
        help="the prompt config the answers were asked with, logged as prompt.name "
        "(default: the file's, else external)",
    )
    parser.add_argument(
        "--fewshot", type=int, help="solved examples in the prompt, logged as fewshot (default: the file's; cat 0)"
    )
    add_tracking_flags(parser, experiment="MLflow experiment", default="ingest")
    parser.add_argument("--out", type=Path, help="also keep the run's artifacts in this folder")
    parser.add_argument("--run-name", help="MLflow run name (default model-benchmark-variants-T-ingest)")
    return parser.parse_args(argv)


def _read(args: argparse.Namespace, files: list[Path]) -> Ingested:
    if args.format == "cat":
        for flag, value in (
            ("--model", args.model),
            ("--benchmark", args.benchmark),
            ("--temperature", args.temperature),
        ):
            if value is None:
                raise UserError(
                    f"{flag}: the CoRA tables do not say it; give {flag} (e.g. --model Mistral-7B-Instruct "
                    "--benchmark medqa --temperature 0.7)"
                )
        if len(files) > 1:
            raise UserError("--path: give one CoRA table per run")
        sets = [s.strip() for s in args.set.split(",") if s.strip()]
        return read_cat(
            files[0],
            sets=sets,
            first=args.first,
            mode=args.mode,
            model=args.model,
            benchmark=args.benchmark,
            temperature=args.temperature,
            seed=args.seed or 0,
            labels_from=args.labels_from,
        )
    if args.format == "lm_eval":
        if args.model is None:
            raise UserError("--model: lm-eval's samples files do not name the model; give --model NAME")
        return read_lm_eval(
            files,
            model=args.model,
            benchmark=args.benchmark,
            temperature=args.temperature or 0.0,
            seed=args.seed or 0,
            labels_from=args.labels_from,
        )

    if len(files) > 1:
        raise UserError("--path: give one generic file per run (concatenate the rows of one run)")
    answers = checked_path(args.answers, "--answers") if args.answers else None
    return read_generic(
        files[0],
        answers=answers,
        labels_from=args.labels_from,
        overrides={
            "model": args.model,
            "benchmark": args.benchmark,
            "temperature": args.temperature,
            "seed": args.seed,
        },
    )


def ingest(args: argparse.Namespace) -> tuple[IngestResult, Ingested, dict[str, Any]]:
    """Read, check and log; returns (IngestResult, Ingested, the params logged)."""
    files = [checked_path(p) for p in args.path]
    ingested = _read(args, files)
    check_repetitions(ingested.trials, str(files[0]))
    digests = [file_sha256(f) for f in files]
    digest = digests[0] if len(digests) == 1 else text_sha256("".join(digests))
    info = ingested.run_info
    repetitions = max(t.repetition for t in ingested.trials) + 1
    fewshot = (
        args.fewshot
        if args.fewshot is not None
        else ingested.params.get("fewshot", 0 if args.format == "cat" else None)
    )
    params = {
        "model.name": info["model"],
        "benchmark.name": info["benchmark"],
        "variants.name": info["variant_set"],
        "prompt.name": args.prompt or ingested.params.get("prompt.name") or "external",
        "seed": info["seed"],
        "limit": ingested.params.get("limit"),
        "temperature": info["temperature"],
        "repetitions": ingested.params.get("repetitions", repetitions),
        "scoring": info["scoring"],
        "fewshot": fewshot,
        "metrics.sure_rule": args.sure_rule,
        "ingest.format": args.format,
        "ingest.path": ", ".join(str(f.resolve()) for f in files),
        "ingest.sha256": digest,
        "ingest.labels_from": args.labels_from,
    }
    if args.format == "cat":
        params.update({"ingest.set": args.set, "ingest.first": args.first, "ingest.as": args.mode})
    if args.answers:
        params["ingest.answers"] = str(Path(args.answers).resolve())
        params["ingest.answers_sha256"] = file_sha256(Path(args.answers))
    tags = {
        "source_format": args.format,
        "source_file": ", ".join(f.name for f in files)[:5000],
        "source_sha256": digest,
        "backend": f"ingest:{args.format}:{files[0].name}"[:5000],
    }
    result = log_ingested(
        ingested,
        tracking_uri=args.tracking_uri,
        experiment=args.experiment,
        sure_rule=args.sure_rule,
        params=params,
        tags=tags,
        out_dir=args.out,
        run_name=args.run_name,
    )
    return result, ingested, params


def repetition_table(result: IngestResult, params: dict[str, Any]) -> str:
    """The repetition table of one run as `python -m src.compare` renders it (Markdown and its caption), or ""."""
    from ..compare.render import markdown_table  # local: loads numpy (slow import)
    from ..compare.tables import repetition_tables  # local: loads numpy (slow import)

    metrics = result.metrics
    if "st" not in metrics:
        return ""
    row = {
        "run_id": result.run_id,
        "start_time": 0,
        "model": params["model.name"],
        "benchmark": params["benchmark.name"],
        "variants": params["variants.name"],
        "temperature": params["temperature"],
        "scoring": params["scoring"],
        "prompt": params["prompt.name"],
        "fewshot": params["fewshot"],
        "repetitions": params["repetitions"],
        "limit": params["limit"],
        "seed": params["seed"],
        "sure_rule": params["metrics.sure_rule"],
        **metrics,
    }
    built = repetition_tables(pd.DataFrame([row]))
    if not built.tables:
        return ""
    table = built.tables[0]
    return f"{markdown_table(table.text)}\n\n{table.caption}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result, ingested, params = ingest(args)
    except UserError as err:
        return user_error(err)
    shown = {
        k: round(result.metrics[k], 4)
        for k in SUMMARY
        if k in result.metrics and result.metrics[k] == result.metrics[k]
    }
    print(
        json.dumps(
            {
                "run_id": result.run_id,
                "n_questions": int(result.metrics["n_questions"]),
                "n_trials": int(result.metrics["n_trials"]),
                **shown,
            }
        )
    )
    table = repetition_table(result, params)
    if table:
        print(table)
    for note in ingested.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    entry(main)
