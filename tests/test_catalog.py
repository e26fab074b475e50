"""`python -m src.catalog` and docs/metrics.md: every choice in conf/ says what it is, and every metric the
families log is defined in docs/metrics.md (the catalog's metric lines are read from there)."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from src import catalog
from src.metrics import HEADLINE_METRICS, METRIC_FAMILIES, applicable_families, compute_metrics

from .golden_records import JOBS, REAL_MODEL_JOBS, stored
from .records_factory import records, trial
from .test_intervals import misleading_table, permutation_table

# What the job logs beside the families' metrics (src/job/runner.py): not found by running the families
RUN_COUNTS = ("n_excluded_option_refs", "seconds", "cache_hit_rate", "adaptive_skipped_share")


def exact_sampling_table() -> pd.DataFrame:
    """Repeated trials with an answer distribution (exact first-token sampling): the expected family's input."""
    return records(
        [
            trial(f"q{i}", answer=i % 2, repetition=r, answer_dist=[0.6, 0.3, 0.05, 0.04, 0.01], correct_label="A")
            for i in range(4)
            for r in range(3)
        ]
    )


def logged_by_the_families() -> set[str]:
    """Every metric name the families log (subjects aside), found by running `compute_metrics` on the simulated
    golden jobs' records (every variant set they cover), a full and a cyclic permutation set, the misleading second
    stage and an exact-sampling run: a metric added to a family is found here with no list to keep. Each family
    must log something on these tables (a new family needs a table here)."""
    tables = [pd.DataFrame(stored(name)["records"]) for name in sorted(set(JOBS) - REAL_MODEL_JOBS)]
    tables += [permutation_table(), misleading_table(), exact_sampling_table()]
    names: set[str] = set()
    for table in tables:
        names |= {name.split("/")[0] for name in compute_metrics(table)}
    unseen = set(METRIC_FAMILIES) - {family for table in tables for family in applicable_families(table)}
    assert not unseen, f"no table here has the inputs of the metric families {sorted(unseen)}: add one"
    return names


def documented_patterns() -> list[re.Pattern]:
    """The catalog's metric names as patterns: `<j>` stands for a number or word, `@n` for an option count,
    `bmca_0.5 … bmca_1.0` for every level, and a fluctuation name for itself at any permutation set."""
    patterns = []
    for names, _ in catalog.metric_entries():
        for name in names.split(", "):
            rx = re.escape(name).replace(re.escape("@n"), r"@\d+")
            rx = re.sub(r"<[^>]+>", r"\\w+", rx.replace(r"\<", "<").replace(r"\>", ">"))
            patterns.append(re.compile(rx + r"(@\w+)?"))
    patterns.append(re.compile(r"bmca_(0\.\d|1\.0)"))
    patterns.append(re.compile(r"expected_\w+"))
    return patterns


@pytest.mark.parametrize("section", catalog.GROUPS)
def test_every_config_choice_says_what_it_is(section):
    rows = catalog.entries(section)
    assert rows and all(len(text) > 20 for _, text in rows), [name for name, text in rows if len(text) <= 20]


def test_every_logged_metric_is_defined_in_the_docs():
    logged = logged_by_the_families() | set(RUN_COUNTS) | set(HEADLINE_METRICS)
    assert {
        "mcqa",
        "cora",
        "rws",
        "expected_st",
        "sc_mean",
        "tf_correct_yes",
        "recall_correct",
        "acc@6",
        "misleading_fix_rate",
        "full_fr",
        "pride_acc@cyclic",
        "sc_bin_5_of_5_share",
    } <= logged
    patterns = documented_patterns()
    undefined = sorted(n for n in logged if not any(p.fullmatch(n.split("/")[0]) for p in patterns))
    assert undefined == []


@pytest.mark.promise(
    "README.md", "python -m src.catalog lists every benchmark, variant set, model, prompt, scoring mode and metric"
)
def test_catalog_prints_every_section(capsys):
    assert catalog.main([]) == 0
    out = capsys.readouterr().out
    for title in ("benchmarks (benchmark=...)", "variants (variants=...)", "scoring (scoring=...)", "metrics ("):
        assert title in out
    assert re.search(r"^  cora +consistency-rebalanced accuracy", out, re.M)
    assert re.search(r"^  cloze +shows the question only", out, re.M)
    assert catalog.main(["scoring"]) == 0
    assert "metrics" not in capsys.readouterr().out


def test_run_help_names_real_commands_and_the_docs():
    """`python -m src.run --help` prints conf/config.yaml's hydra.help header: every command it shows exists."""
    import importlib.util

    from omegaconf import OmegaConf

    header = OmegaConf.load(catalog.CONF / "config.yaml").hydra.help.header
    modules = set(re.findall(r"python -m (src\.\w+)", header))
    assert modules >= {"src.run", "src.compare", "src.catalog"}
    assert all(importlib.util.find_spec(m) is not None for m in modules), modules
    for sweep in re.findall(r"-cd sweeps -cn (\w+)", header):
        assert (catalog.REPO / "sweeps" / f"{sweep}.yaml").is_file()
    for doc in re.findall(r"docs/\w+\.md", header):
        assert (catalog.REPO / doc).is_file()
