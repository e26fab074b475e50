"""Every variant set of conf/variants/ against docs/validity.md's table "What each variant set measures": a run of
each set, with one trial per question and with repetitions, computes, logs, prints, tags and plans the metrics of
the families the table names for it and no other (a `variants=original` run no CoRA metric)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from src.config.checks import job_spec
from src.config.compose import compose_job
from src.job import runner
from src.metrics import METRIC_FAMILIES, applicable_families, base_metric, compute_metrics
from src.metrics.families import family_input
from src.metrics.intervals import decompose
from src.presentation.closing import headline_metrics
from src.tracking import review

from .conftest import DATA_DIR
from .test_catalog import documented_patterns

REPO = Path(__file__).resolve().parents[1]
VARIANT_SETS = sorted(p.stem for p in (REPO / "conf" / "variants").glob("*.yaml"))
# what compute_metrics adds to every run beside the families (src/metrics/__init__.py)
RUN_COUNTS = {"n_questions", "n_trials", "invalid_rate", "accuracy"}
REPETITIONS = 2

pytestmark = pytest.mark.promise(
    "docs/validity.md", "a run computes, logs, prints and plans only the metrics its variant set measures"
)


def documented_families() -> dict[str, list[str]]:
    """docs/validity.md's table: variant set -> the families it measures with one trial per question."""
    text = (REPO / "docs" / "validity.md").read_text(encoding="utf-8")
    table = text.split("**What each variant set measures.**")[1].split("\n\n")[1]
    out: dict[str, list[str]] = {}
    for line in table.splitlines()[2:]:
        sets, families = (cell.strip() for cell in line.strip().strip("|").split("|"))
        for name in re.findall(r"`([^`]+)`", sets):
            out[name] = [family.strip() for family in families.split(",")]
    return out


def set_records(name: str, run_job_in=None) -> pd.DataFrame:
    """The records of a small simulated run of `name` with REPETITIONS repetitions (repetition 0 alone is the
    single-trial run: the same items, asked once). revas_misleading is a second stage: it runs after a source run,
    through MLflow; the others in-process, without a store."""
    over = ["model=simulated", "model.invalid_rate=0.1", "limit=3", "stats.bootstrap=0", f"data_dir={DATA_DIR}"]
    over += ["cache.enabled=false", f"repetitions={REPETITIONS}", "temperature=0.7"]
    if name == "revas_misleading":
        source = run_job_in("model=simulated", "model.success_rate=0.3", "limit=8").run_id
        result = run_job_in(*over, f"variants={name}", f"variants.source_run={source}")
        return pd.read_parquet(result.out_dir / "artifacts" / "records.parquet")
    spec = job_spec(compose_job([*over, f"variants={name}"]))
    questions, backend = runner.job_questions(spec), runner.job_backend(spec)
    _, items, left_out = runner.plan_job(spec, questions, backend)
    records, _ = runner.answer_and_measure(spec, backend, items, left_out, None, "run")
    return records


def allowed_names(records: pd.DataFrame, families: list[str]) -> set[str]:
    """The metric names the documented families give on these records, and the run counts."""
    names = set(RUN_COUNTS)
    for family in families:
        names |= set(METRIC_FAMILIES[family](family_input(family, records)))
    return names


def test_the_table_names_every_variant_set_and_only_known_families():
    table = documented_families()
    assert sorted(table) == VARIANT_SETS
    assert {family for families in table.values() for family in families} <= set(METRIC_FAMILIES)


def check_set(name: str, repeated: pd.DataFrame) -> None:
    """The table's families for `name`, with one trial per question (repetition 0) and with repetitions, and no
    other metric computed, logged, printed, tagged or planned."""
    documented = documented_families()[name]
    patterns = documented_patterns()
    for records, families in (
        (repeated[repeated["repetition"] == 0], documented),
        (repeated, [*documented, "repetition"]),
    ):
        assert sorted(applicable_families(records)) == sorted(families), (name, families)
        allowed = allowed_names(records, families)
        computed = compute_metrics(records)
        stray = sorted({base_metric(n) for n in computed} - allowed)
        assert stray == [], (name, stray)
        assert all(any(p.fullmatch(base_metric(n)) for p in patterns) for n in computed)  # each in the catalog
        planned = decompose(records, by_subjects=False).names  # what src.plan plans a row for
        assert set(planned) <= allowed, (name, sorted(set(planned) - allowed))
        assert set(headline_metrics(computed)) <= allowed  # the closing block and the run's `headline` tag
        assert set(review.rounded_tags(computed)) <= allowed  # the review view's tags
        if "cora" not in families:
            assert not [n for n in computed if n.startswith(("mcqa_plus", "mv", "ci", "cora", "bmca_"))], name


@pytest.mark.parametrize("name", [n for n in VARIANT_SETS if n != "revas_misleading"])
def test_a_variant_set_measures_what_the_table_says_and_nothing_else(name):
    check_set(name, set_records(name))


def test_the_misleading_second_stage_measures_what_the_table_says_and_nothing_else(run_job_in):
    check_set("revas_misleading", set_records("revas_misleading", run_job_in))
