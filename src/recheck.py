"""`python -m src.recheck --run RUN_ID [--tracking-uri URI] [--go-on]`: is a logged result the model's or the machine's?

It re-runs a finished run of `python -m src.run` on this machine from what the run logged (its `config.yaml`, the
model's identity: weights file hash and dtype, the code's git commit), into a temporary store with the response
cache off (the user's experiment gets no second run), and compares the two records tables trial by trial:

- `same` (exit 0): every decision is the same and every float (label probabilities, log-likelihoods, margins)
  within SCORE_TOLERANCE of the logged one;
- otherwise the decisions that differ, each marked near-tie (its logged `decision_margin` below NEAR_TIE_MARGIN:
  another CPU's rounding may flip it) or not, and the max |difference| of the floats; exit 1 when a decision that
  was not a near-tie changed or a float moved by more than SCORE_TOLERANCE, else 0.

Before any compute it refuses in one line (exit 2) when the provenance does not match: other weights (file or
folder hash, hub commit), other questions (the benchmark file changed: its `data_identity`),
another dtype (`model.dtype=auto` resolves per machine), another model or backend setting, or other code (git
commit); `--go-on` re-runs anyway and says what differed. Package versions and the CPU's instruction set are
printed beside the result, not refused: their effect is what the comparison measures.
"""

from __future__ import annotations

import argparse
import math
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd

from src.cli import add_tracking_flags, entry, user_error
from src.common.errors import UserError
from src.core.records import NEAR_TIE_MARGIN, SCORE_TOLERANCE
from src.tracking import store
from src.tracking.identity import identity_fields
from src.tracking.names import DEFAULT_URI
from src.tracking.provenance import KERNEL_VARIABLES, git_commit, provenance_tags
from src.tracking.records import download_artifact, read_run_records, resolve_run_id, run_tags

TRIAL_KEY = ("question_id", "variant_id", "repetition")  # one row of a records table
DECISION_COLUMNS = ("parsed_label", "parsed_labels")
FLOAT_COLUMNS = ("label_probs", "label_mass", "option_loglik", "option_loglik_norm", "answer_dist", "decision_margin")
IDENTITY_NAMES = {
    "gguf": "weights",
    "weights": "weights",
    "commit": "hub commit",
    "served": "served model",
    "dtype": "dtype",
    "revision": "revision",
    "chat": "chat wrapping",
    "backend": "model",
}  # the fields of a backend identity, as the refusal names them


@dataclass
class Comparison:
    """The logged records against the re-run's, trial by trial."""

    decisions: int = 0
    changed: list[str] = field(default_factory=list)  # one line per changed decision
    not_near_tie: int = 0  # changed decisions that were not near-ties
    max_delta: float = 0.0
    worst: str = ""  # the column of max_delta
    text_changed: int = 0  # raw outputs that differ (generated text, or a rendering of scores)

    @property
    def exit_code(self) -> int:
        return 1 if self.not_near_tie or self.max_delta > SCORE_TOLERANCE else 0

    def lines(self) -> list[str]:
        within = "within" if self.max_delta <= SCORE_TOLERANCE else "OUTSIDE"
        floats = (
            f"max |Δ| of the floats {self.max_delta:.2g}{f' ({self.worst})' if self.worst else ''}, "
            f"{within} the tolerance {SCORE_TOLERANCE:g}"
        )
        texts = f"; {self.text_changed} raw outputs differ" if self.text_changed else ""
        if not self.changed and self.exit_code == 0:
            return [f"same: all {self.decisions} decisions; {floats}{texts}"]
        near = len(self.changed) - self.not_near_tie
        return [
            f"{len(self.changed)} of {self.decisions} decisions differ ({near} near-ties, "
            f"{self.not_near_tie} not); {floats}{texts}",
            *self.changed,
        ]


def _values(value: Any) -> list[float]:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return []
    return [float(v) for v in value] if hasattr(value, "__len__") else [float(value)]


def _same(a: Any, b: Any) -> bool:
    missing = [x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)) for x in (a, b)]
    if any(missing):
        return all(missing)
    return list(a) == list(b) if hasattr(a, "__len__") and not isinstance(a, str) else a == b


def compare_records(logged: pd.DataFrame, rerun: pd.DataFrame) -> Comparison:
    """Decisions and floats of two records tables of one config (the logged run's and a re-run's), by trial."""
    keys = list(TRIAL_KEY)
    joined = logged.merge(rerun, on=keys, how="outer", suffixes=("", "_new"), indicator=True)
    if not (joined["_merge"] == "both").all():
        raise UserError(
            f"--run: the re-run asked {int((joined['_merge'] != 'both').sum())} trials the run did not "
            f"(or the other way round): the data or the variants changed; check data_dir and the config"
        )
    out = Comparison(decisions=len(joined))
    for row in joined.to_dict("records"):
        for column in FLOAT_COLUMNS:
            if column not in row or f"{column}_new" not in row:
                continue  # a run from before the column
            old, new = _values(row[column]), _values(row[f"{column}_new"])
            if len(old) != len(new):
                old, new = [math.inf], [0.0]  # one side has scores, the other none
            for x, y in zip(old, new):
                delta = 0.0 if x == y else abs(x - y)  # equal infinities move by nothing
                if delta > out.max_delta:
                    out.max_delta, out.worst = delta, column
        out.text_changed += row["raw_output"] != row["raw_output_new"]
        if all(_same(row[c], row[f"{c}_new"]) for c in DECISION_COLUMNS if c in row):
            continue
        # the logged run's margin (the re-run's for a run logged before the column: the merge kept that one)
        margin = next(iter(_values(row.get("decision_margin"))), None)
        near = margin is not None and margin < NEAR_TIE_MARGIN
        out.not_near_tie += not near
        where = "/".join(str(row[k]) for k in keys)
        why = ("near-tie" if near else "not a near-tie") + (f" (margin {margin:.2g})" if margin is not None else "")
        out.changed.append(f"  {where}: {row['parsed_label']} -> {row['parsed_label_new']}  {why}")
    return out


def provenance_differences(tags: Mapping[str, str], identity: str, commit: str, data: str | None = None) -> list[str]:
    """What differs between where the run was made and here, as refusal reasons: the backend identity's fields
    (weights hash, dtype, ...), the questions' content identity (`data`, the run's `data_identity` tag) and the
    code's git commit (not checked where either is unknown)."""
    logged = identity_fields(tags.get("backend", ""))
    here = identity_fields(identity[:5000])
    reasons = [
        f"other {IDENTITY_NAMES.get(k, k)} (run {logged.get(k, 'none')}, here {here.get(k, 'none')})"
        for k in dict.fromkeys([*logged, *here])
        if logged.get(k) != here.get(k)
    ]
    if data is not None and tags.get("data_identity") not in (None, data):
        reasons.append(f"other benchmark data (run {tags['data_identity']}, here {data})")
    run_commit = tags.get("git_commit", "unknown")
    if "unknown" not in (run_commit, commit) and run_commit != commit:
        reasons.append(f"other code (run git commit {run_commit[:12]}, here {commit[:12]})")
    return reasons


def environment_notes(tags: Mapping[str, str], here: Mapping[str, str]) -> list[str]:
    """Package versions, instruction set and kernel variables that differ from the run's `provenance.*` tags."""
    logged = {k: v for k, v in tags.items() if k.startswith("provenance.")}
    if not logged:
        return ["the run logged no package versions or instruction set (made before they were logged)"]
    names = [*dict.fromkeys([*logged, *here])]
    kernels = {f"provenance.{v}" for v in KERNEL_VARIABLES}
    return [
        f"{name.removeprefix('provenance.')}: run {logged.get(name, 'default' if name in kernels else '?')}, "
        f"here {here.get(name, 'default' if name in kernels else '?')}"
        for name in names
        if logged.get(name) != here.get(name)
    ]


def recheck(run: str, *, tracking_uri: str = DEFAULT_URI, go_on: bool = False) -> tuple[list[str], int]:
    """(lines to print, exit code) of re-running `run` here; UserError (exit 2) for a refused or unknown run."""
    from omegaconf import DictConfig, OmegaConf

    from src.config.checks import job_spec  # local: loads hydra (slow import)
    from src.job.runner import (  # local: loads hydra, the backends (slow import)
        data_identity,
        job_backend,
        job_questions,
        run_job,
    )

    store.check_tracking(tracking_uri)
    run_id = resolve_run_id(run, tracking_uri, key="--run")
    tags = run_tags(run_id, tracking_uri)
    if tags.get("source") == "ingest" or tags.get("kind", "job") != "job":
        raise UserError(
            f"--run: run {run_id} is not a job of python -m src.run (answers made elsewhere, a sweep or "
            f"a report): nothing to re-run; give a job's run"
        )
    logged = read_run_records(run_id, tracking_uri, key="--run")
    with tempfile.TemporaryDirectory() as tmp:
        config = download_artifact(
            run_id,
            "config.yaml",
            Path(tmp),
            tracking_uri,
            missing=f"--run: run {run_id} has no config.yaml artifact; give a run of src.run",
        )
        cfg = cast(DictConfig, OmegaConf.load(config))  # a job's config.yaml: a mapping
        # here, not in the user's store or response cache: the answers must be computed again
        cfg.tracking.uri, cfg.tracking.experiment = f"sqlite:///{tmp}/recheck.db", "recheck"
        cfg.cache.enabled, cfg.resume = False, False
        spec = job_spec(cfg)  # checked once: `run_job` below finds it built
        identity = job_backend(spec).identity
        reasons = provenance_differences(tags, identity, git_commit(), data_identity(spec, job_questions(spec)))
        if reasons and not go_on:
            raise UserError(
                f"--run: run {run_id[:8]} was made with {'; '.join(reasons)}: its result cannot be "
                f"rechecked here as it was made; add --go-on to re-run it anyway"
            )
        result = run_job(cfg, out_dir=Path(tmp) / "out")
        rerun = pd.read_parquet(result.out_dir / "artifacts" / "records.parquet")
    comparison = compare_records(logged, rerun)
    here = provenance_tags()
    notes = [f"re-run with {'; '.join(reasons)} (--go-on)"] if reasons else []
    notes += environment_notes(tags, here)
    return [*comparison.lines(), *(f"note: {n}" for n in notes)], comparison.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.recheck", description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, metavar="RUN_ID", help="a finished run (its id or first 8+ characters)")
    add_tracking_flags(parser)
    parser.add_argument(
        "--go-on",
        action="store_true",
        help="re-run even when the weights, dtype or code differ from the run's (said in the output)",
    )
    args = parser.parse_args(argv)
    try:
        lines, code = recheck(args.run, tracking_uri=args.tracking_uri, go_on=args.go_on)
    except UserError as err:
        return user_error(err)
    print("\n".join(lines))
    return code


if __name__ == "__main__":
    entry(main)
