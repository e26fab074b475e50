"""`python -m src.catalog` and docs/metrics.md: every choice in conf/ says what it is, and every metric the
families log is defined in docs/metrics.md (the catalog's metric lines are read from there)."""
from __future__ import annotations

import re

import pytest

from src import catalog
from src.metrics import HEADLINE_METRICS

from .test_catalog_cli import PERM_METRICS, REVAS_SETS

REPETITION = ("sure_right", "unsure_right", "unsure_wrong", "sure_wrong", "rws", "st", "acc_mean", "acc_std")
CORA = ("mcqa", "mcqa_plus", "mv", "bmca_0.5", "bmca_0.7", "bmca_1.0", "ci", "cora")
EXPECTED = ("expected_sure_right", "expected_st", "expected_rws", "expected_acc")
COUNTS = ("n_questions", "n_trials", "invalid_rate", "accuracy", "n_excluded_option_refs", "seconds",
          "cache_hit_rate", "adaptive_skipped_share")


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
    logged = {*CORA, *REPETITION, *EXPECTED, *COUNTS, *HEADLINE_METRICS,
              *(n for names in REVAS_SETS.values() for n in names), *(n for ns in PERM_METRICS.values() for n in ns),
              "pride_acc@cyclic", "sc_bin_3_of_4_share"}
    patterns = documented_patterns()
    undefined = sorted(n for n in logged if not any(p.fullmatch(n.split("/")[0]) for p in patterns))
    assert undefined == []


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
