"""Stored records of fixed jobs, so that a refactoring can prove it changed no answer.

`JOBS` names each job by its overrides. `python -m tests.golden_records --write` runs each through the command
line (`python -m src.run`) and stores its records and metrics under tests/data/golden/; the test
`tests/test_records_unchanged.py` runs the same jobs in-process and compares (`--check` compares through the command
line). Write the files anew only when a change is meant to alter answers, and say so in the commit.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from src.core.records import SCORE_TOLERANCE

GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "golden"
# columns that differ between two runs of one config by design
VOLATILE_COLUMNS = ("run_id", "cache_hit")
VOLATILE_METRICS = ("seconds", "cache_hit_rate")


def stable_metrics(metrics: dict) -> dict:
    """The metrics a structural change must keep: not timings, not the intervals (`*_lo`/`*_hi`, added after
    these records were stored and tested in tests/test_intervals.py) and not the chance levels (added after them,
    computed from the records these tests compare, tested in tests/test_report_review.py), nor the later ADDED ones."""
    from src.metrics import is_interval_name
    from src.metrics.chance import CHANCE_NAMES

    return {
        k: v
        for k, v in metrics.items()
        if k not in VOLATILE_METRICS and k not in CHANCE_NAMES and not is_interval_name(k) and not k.startswith(ADDED)
    }


# metrics added after the goldens were stored, computed from the records these tests compare: the position-bias
# family (tests/test_metrics_slots.py) and PriDe's prior (tests/test_metrics_fluctuation.py)
ADDED = ("slot_", "n_slot_choices", "pride_prior_")


SIMULATED = ["model=simulated", "model.invalid_rate=0.1"]
JOBS: dict[str, list[str]] = {
    "sim_cora_t07": [*SIMULATED, "variants=cora", "limit=6", "temperature=0.7", "repetitions=2"],
    "sim_revas_reorder": [*SIMULATED, "variants=revas_reorder", "limit=5"],
    "sim_revas_true_false_logprob": [*SIMULATED, "variants=revas_true_false", "limit=4", "scoring=logprob"],
    "sim_revas_multi_select": [*SIMULATED, "variants=revas_multi_select", "limit=4"],
    "sim_revas_option_count": [*SIMULATED, "variants=revas_option_count", "limit=4"],
    "sim_revas_nota": [*SIMULATED, "variants=revas_nota", "limit=4"],
    "sim_perm_cyclic_logprob": [*SIMULATED, "variants=perm_cyclic", "limit=5", "scoring=logprob"],
    "smollm2_cora_cloze_shown": ["variants=cora", "limit=2"],
    "smollm2_perm_cyclic_generate": ["variants=perm_cyclic", "limit=3", "scoring=generate"],
    "smollm2_original_logprob": ["variants=original", "limit=5", "scoring=logprob"],
}
REAL_MODEL_JOBS = frozenset(name for name in JOBS if name.startswith("smollm2"))
# Real-model scores differ in the last digits between CPU kernels (docs/reproducibility.md): src/core/records.py
FLOAT_TOLERANCE = SCORE_TOLERANCE
# `raw_output` of a ranking scoring renders each score to four decimals (src/answering/trials.py `_scores_text`): two
# renderings of scores that differ by FLOAT_TOLERANCE differ by at most that plus one unit in the last place.
RENDERED_TOLERANCE = FLOAT_TOLERANCE + 1e-4
# the parse rules of scorings that rank options by a score (logprob, cloze, cloze_shown): their decision can flip
# where two options are within NEAR_TIE_MARGIN, and their raw_output is a rendering of the scores
RANKING_RULES = ("cloze_argmax", "logprob_argmax")
# what a decision is: a near-tie may change these on another machine, nothing else may change them
DECISION_FIELDS = ("parsed_label", "chosen_option", "correct", "parsed_labels", "chosen_options")
# columns added to the records after the goldens were written: the goldens stay the reference, so an added column
# is checked against what the golden record implies (`added_column_differences`), not stored anew
ADDED_COLUMNS = ("decision_margin",)


def canonical(records: pd.DataFrame) -> list[dict[str, Any]]:
    """The records as plain JSON values, volatile columns left out."""
    return json.loads(records.drop(columns=list(VOLATILE_COLUMNS)).to_json(orient="records", double_precision=15))


def golden_path(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.json"


def stored(name: str) -> dict[str, Any]:
    return json.loads(golden_path(name).read_text())


def differences(expected: Any, actual: Any, where: str = "", tol: float = 0.0) -> list[str]:
    """Where two JSON values differ (floats within `tol`, relative or absolute), as readable paths."""
    if isinstance(expected, float) or isinstance(actual, float):
        if (
            isinstance(expected, (int, float))
            and isinstance(actual, (int, float))
            and math.isclose(expected, actual, rel_tol=tol, abs_tol=tol)
        ):
            return []
        return [f"{where}: {expected!r} != {actual!r}"]
    if isinstance(expected, dict) and isinstance(actual, dict):
        if set(expected) != set(actual):
            return [f"{where}: keys {sorted(set(expected) ^ set(actual))} differ"]
        return [d for k in expected for d in differences(expected[k], actual[k], f"{where}.{k}", tol)]
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{where}: {len(expected)} != {len(actual)} items"]
        return [d for i, (e, a) in enumerate(zip(expected, actual)) for d in differences(e, a, f"{where}[{i}]", tol)]
    return [] if expected == actual else [f"{where}: {expected!r} != {actual!r}"]


def rendered_scores(raw_output: str) -> list[tuple[str, float]]:
    """The (label, score) pairs of a ranking scoring's raw_output ("A:-11.3418 B:-10.4367")."""
    return [(label, float(value)) for label, value in (item.rsplit(":", 1) for item in raw_output.split())]


def decision_gap(record: dict[str, Any]) -> float | None:
    """The gap between the best and second-best option's decision score of a ranking record, in log units (cloze:
    the rendered log-likelihoods; logprob: the log of the label probabilities); None for other scorings."""
    if record.get("parse_rule") == "cloze_argmax":
        scores = [v for _, v in rendered_scores(record["raw_output"])]
    elif record.get("parse_rule") == "logprob_argmax" and record.get("label_probs"):
        scores = [math.log(p) if p > 0 else -math.inf for p in record["label_probs"]]
    else:
        return None
    if len(scores) < 2:
        return None
    best, second = sorted(scores, reverse=True)[:2]
    return best - second


def record_differences(
    expected: list[dict], actual: list[dict], where: str = "", tol: float = 0.0
) -> tuple[list[str], list[str]]:
    """(differences, near-tie flips) between two record lists. Floats compare within `tol`; a ranking record's
    raw_output compares label by label, its scores within the rendering's tolerance; decisions compare exactly,
    except where the expected record is a near-tie (its two best options within NEAR_TIE_MARGIN): a changed
    decision there is a flip that another machine may show, listed apart."""
    from src.core.records import NEAR_TIE_MARGIN

    if len(expected) != len(actual):
        return [f"{where}: {len(expected)} != {len(actual)} items"], []
    diffs: list[str] = []
    flips: list[str] = []
    for i, (e, a) in enumerate(zip(expected, actual)):
        at = f"{where}[{i}]"
        if not (isinstance(e, dict) and isinstance(a, dict)):
            diffs += differences(e, a, at, tol)
            continue
        added = [k for k in ADDED_COLUMNS if k in a and k not in e]
        if added:
            diffs += added_column_differences(e, a, at, tol)
            a = {k: v for k, v in a.items() if k not in added}
        if set(e) != set(a):
            diffs.append(f"{at}: keys {sorted(set(e) ^ set(a))} differ")
            continue
        ranking = e.get("parse_rule") in RANKING_RULES and a.get("parse_rule") == e.get("parse_rule")
        gap = decision_gap(e) if ranking else None
        near_tie = gap is not None and gap < NEAR_TIE_MARGIN
        decided = [k for k in DECISION_FIELDS if k in e and e[k] != a[k]]
        if decided and near_tie:
            flips.append(f"{at}: {', '.join(f'{k} {e[k]!r} -> {a[k]!r}' for k in decided)} (gap {gap:.2g})")
        for k in e:
            if k in DECISION_FIELDS and near_tie:
                continue
            if k == "raw_output" and ranking:
                want, got = rendered_scores(e[k]), rendered_scores(a[k])
                if [lab for lab, _ in want] != [lab for lab, _ in got] or any(
                    abs(x - y) > (RENDERED_TOLERANCE if tol else 0.0) for (_, x), (_, y) in zip(want, got)
                ):
                    diffs.append(f"{at}.{k}: {e[k]!r} != {a[k]!r}")
                continue
            diffs += differences(e[k], a[k], f"{at}.{k}", tol)
    return diffs, flips


def added_column_differences(expected: dict[str, Any], actual: dict[str, Any], where: str, tol: float) -> list[str]:
    """Where the columns of ADDED_COLUMNS in `actual` disagree with the golden record `expected` that lacks them:
    `decision_margin` is the golden's decision gap (`decision_gap`) on a ranking record, within two renderings'
    tolerance where the gap is read from a rendered raw_output (cloze), within 2 x `tol` otherwise; None elsewhere."""
    margin = actual.get("decision_margin")
    gap = decision_gap(expected) if expected.get("parse_rule") in RANKING_RULES else None
    if gap is None or margin is None:
        return [] if gap is None and margin is None else [f"{where}.decision_margin: {margin!r}, golden gap {gap!r}"]
    allowed = 2 * RENDERED_TOLERANCE if expected["parse_rule"] == "cloze_argmax" else 2 * tol + 1e-9
    return [] if abs(margin - gap) <= allowed else [f"{where}.decision_margin: {margin!r} != golden gap {gap!r}"]


def job_differences(
    expected: dict[str, Any], records: list[dict], metrics: dict, where: str, tol: float
) -> tuple[list[str], list[str]]:
    """(differences, near-tie flips) of a job's records and metrics against its stored golden. Metrics follow
    the decisions, so they are compared only when no near-tie flipped (a flip is reported, not hidden)."""
    diffs, flips = record_differences(expected["records"], records, f"{where}.records", tol)
    if not flips:
        diffs += differences(expected["metrics"], metrics, f"{where}.metrics", tol)
    return diffs, flips


def _cli_job(name: str, kernels: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one golden job through `python -m src.run` (with the environment variables `kernels` set); its overrides,
    metrics and canonical records."""
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "src.run",
            *JOBS[name],
            f"tracking.uri=sqlite:///{tmp}/mlflow.db",
            "cache.enabled=false",
            f"hydra.run.dir={tmp}/out",
        ]
        subprocess.run(cmd, cwd=repo, check=True, env={**os.environ, **(kernels or {}), "TQDM_DISABLE": "1"})
        artifacts = Path(tmp) / "out" / "artifacts"
        records = pd.read_parquet(artifacts / "records.parquet")
        metrics = json.loads((artifacts / "metrics.json").read_text())
    metrics = stable_metrics(metrics)
    return {"overrides": JOBS[name], "metrics": metrics, "records": canonical(records)}


def _write(names: list[str]) -> None:
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    for name in names:
        job = _cli_job(name)
        golden_path(name).write_text(json.dumps(job, indent=0, sort_keys=True) + "\n")
        print(f"wrote {golden_path(name)} ({len(job['records'])} records)")


def _check(names: list[str]) -> int:
    failed = 0
    for name in names:
        tol = FLOAT_TOLERANCE if name in REAL_MODEL_JOBS else 0.0
        job = _cli_job(name)
        diff, flips = job_differences(stored(name), job["records"], job["metrics"], name, tol)
        failed += bool(diff)
        print(
            f"{name}: {'same' if not diff else f'{len(diff)} differences, e.g. ' + '; '.join(diff[:5])}"
            + (f"; {len(flips)} near-tie flips: " + "; ".join(flips[:5]) if flips else "")
        )
    return 1 if failed else 0


# what `--kernels` compares with this machine's default kernels: each variable that can pin torch's, MKL's or
# oneDNN's CPU kernels to a lower instruction set, and the pair that changed the numbers (docs/reproducibility.md)
KERNEL_SETTINGS = {
    "ATEN_CPU_CAPABILITY=avx2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "ATEN_CPU_CAPABILITY=default": {"ATEN_CPU_CAPABILITY": "default"},
    "MKL_ENABLE_INSTRUCTIONS=AVX2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "ONEDNN_MAX_CPU_ISA=AVX2": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
    "ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    },
}


def _kernels(names: list[str]) -> int:
    """The real-model jobs under this machine's default kernels, then the stored golden and each KERNEL_SETTINGS
    entry against them, as `python -m src.recheck` compares two runs: decisions changed (near-tie or not), max |Δ|
    of the floats, raw outputs (renderings) that differ; and the near-ties of the default run."""
    from src.core.records import near_ties
    from src.recheck import compare_records

    names = names or sorted(REAL_MODEL_JOBS)
    here = {name: pd.DataFrame(_cli_job(name)["records"]) for name in names}
    for name in names:
        print(f"{name}, default kernels: near-ties {'{} of {}'.format(*near_ties(here[name]))}")
    for label, kernels in [("stored golden", None), *KERNEL_SETTINGS.items()]:
        for name in names:
            other = stored(name) if kernels is None else _cli_job(name, kernels)
            print(
                f"{name}, {label}: {compare_records(pd.DataFrame(other['records']), here[name]).lines()[0]}", flush=True
            )
    return 0


if __name__ == "__main__":
    modes = {"--write": _write, "--check": _check, "--kernels": _kernels}
    if sys.argv[1:2] not in [[mode] for mode in modes]:
        sys.exit("usage: python -m tests.golden_records --write|--check|--kernels [NAME ...]")
    if sys.argv[1] == "--write":
        _write(sys.argv[2:] or list(JOBS))
    else:
        sys.exit(modes[sys.argv[1]](sys.argv[2:] or ([] if sys.argv[1] == "--kernels" else list(JOBS))))
