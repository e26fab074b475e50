"""The validity contract: every (scoring, variant set) a run accepts asks distinct prompts for distinct orders;
the others are refused before any compute, in one line, in single runs and in sweeps."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from src.common.errors import UserError
from src.core.validity import SCORING_MODES, SHOWS_OPTIONS, check_validity, needs_shown_options

from .conftest import DATA_DIR, REPO, mlflow_runs, needs_data
from .test_cli_errors import assert_one_line_error

VARIANT_SETS = sorted(p.stem for p in (REPO / "conf" / "variants").glob("*.yaml"))


def compose_job(*overrides: str):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def items_for(*overrides: str):
    from omegaconf import OmegaConf

    from src.benchmarks import load_benchmark
    from src.config.checks import job_spec
    from src.core.prompts import PromptTemplate
    from src.job.runner import build_items

    cfg = compose_job("model=simulated", "limit=6", *overrides)
    spec = job_spec(cfg)
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
    return build_items(spec, questions, PromptTemplate.from_config(OmegaConf.to_container(cfg.prompt, resolve=True)))


@pytest.mark.parametrize("scoring", SCORING_MODES)
def test_perm_cyclic_renders_distinct_prompts_per_order_or_is_refused(scoring):
    if not SHOWS_OPTIONS[scoring]:
        with pytest.raises(UserError, match="scoring=cloze and variants=perm_cyclic"):
            items_for(f"scoring={scoring}", "variants=perm_cyclic")
        return
    items = items_for(f"scoring={scoring}", "variants=perm_cyclic")
    by_question: dict[str, list] = {}
    for it in items:
        by_question.setdefault(it.question.id, []).append(it)
    for group in by_question.values():
        orders = {it.variant.option_order for it in group}
        assert len(orders) == len(group) > 1
        assert len({it.request.prompt for it in group}) == len(orders), "each order is its own prompt"


@pytest.mark.parametrize("name", VARIANT_SETS)
def test_every_variant_set_is_valid_under_cloze_only_when_it_asks_one_list_per_question(name):
    """Checked on the rendered prompts, not on the declaration: where cloze is accepted, no question is asked
    through two different option lists that would become one cloze prompt."""
    variants = {"name": name}
    try:
        check_validity(scoring="cloze", variants=variants, temperature=0.0, repetitions=1)
    except UserError:
        assert needs_shown_options(variants)
        return
    if name == "revas_misleading":
        pytest.skip("needs a source run")
    items = items_for("scoring=cloze", f"variants={name}")
    seen: dict[tuple[str, str], set] = {}
    for it in items:
        if it.variant.fmt == "mcq":
            seen.setdefault((it.question.id, it.request.prompt), set()).add(it.variant.option_order)
    assert all(len(orders) == 1 for orders in seen.values()), name


def test_sampling_rules():
    with pytest.raises(UserError, match="temperature would change nothing"):
        check_validity(scoring="cloze_shown", variants={"name": "cora"}, temperature=0.7, repetitions=1)
    with pytest.raises(UserError, match="SURE by construction"):
        check_validity(scoring="generate", variants={"name": "original"}, temperature=0.0, repetitions=10)
    with pytest.raises(UserError, match="SURE by construction"):  # two greedy repetitions: already one copied
        check_validity(scoring="generate", variants={"name": "original"}, temperature=0.0, repetitions=2)
    check_validity(scoring="logprob", variants={"name": "cora"}, temperature=0.7, repetitions=10)
    check_validity(scoring="cloze_shown", variants={"name": "cora"}, temperature=0.0, repetitions=1)
    check_validity(
        scoring="cloze", variants={"name": "revas_true_false", "with_reorder": False}, temperature=0.0, repetitions=1
    )


@pytest.mark.promise(
    "README.md", "a scoring mode that would make a variant set measure nothing is refused before any compute"
)
@pytest.mark.slow
def test_refused_single_run_and_sweep_say_so_in_one_line_before_any_compute(run_cli):
    proc = run_cli("model=simulated", "scoring=cloze", "variants=perm_cyclic", check=False)
    assert_one_line_error(proc, "scoring=cloze", "variants=perm_cyclic", "cloze_shown")
    sweep = run_cli(
        "model=simulated", "scoring=cloze,generate", "variants=original,cora", "limit=2", multirun=True, check=False
    )
    assert sweep.returncode == 2
    # refused by the command line's check before Hydra starts (the same check_config the sweep and the job run)
    lines = [ln for ln in sweep.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "scoring=cloze" in lines[0] and "variants=cora" in lines[0], sweep.stderr
    assert not (run_cli.tmp / "multirun" / "0").exists(), "no job ran"


@needs_data
@pytest.mark.slow
def test_mmlu_cora_run_logs_questions_left_out_and_keeps_references(run_job_in, caplog):
    """The valid-measurements run, on the simulated model: the variants asked keep "... of
    the above" last, add no second NOTA and keep letter references, and the run logs what it left out."""
    import pandas as pd

    from src.benchmarks import load_benchmark
    from src.variants import NOTA, option_refs

    subjects = "benchmark.subjects=[moral_disputes,conceptual_physics]"
    caplog.set_level("INFO", logger="src.job.runner")
    run_job_in("model=simulated", "benchmark=mmlu", subjects, "variants=cora")
    client, (run,) = mlflow_runs(run_job_in.store_uri)
    metrics = run.data.metrics
    assert metrics["n_excluded_option_refs"] > 0 and metrics["n_excluded_has_nota"] > 0
    assert metrics["n_excluded_refs_excluded"] == 0
    assert "had variants of cora left out (option_refs)" in caplog.text
    records = pd.read_parquet(client.download_artifacts(run.info.run_id, "records.parquet"))
    questions = {
        q.id: q
        for q in load_benchmark(
            "mmlu",
            path=None,
            data_dir=str(DATA_DIR),
            seed=0,
            limit=None,
            options={"subjects": ["moral_disputes", "conceptual_physics"]},
        )
    }
    checked = 0
    for qid, order in zip(records.question_id, records.option_order):
        q, order = questions[qid], list(order)
        refs = option_refs(q)
        if not any(r.kind or r.none_like for r in refs):
            continue
        checked += 1
        if any(r.none_like for r in refs):
            assert NOTA not in order, (qid, order)  # no second none-like option
        for i, ref in enumerate(refs):
            if i not in order:
                continue
            if ref.kind == "above":  # "... of the above/these" keeps its distance from the end (last stays last)
                assert len(order) - order.index(i) == q.n_options - i, (qid, order)
            if ref.kind == "letters":  # the options it names are shown, under the labels they had
                assert all(order.index(j) == j for j in ref.refs), (qid, order)
    assert checked > 100
