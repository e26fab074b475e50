"""What README.md promises a user, checked on the simulated model in-process: each variant set of its table logs
the metrics the table names, the main job's defaults, the chance verdict of a model that knows the answers."""

from __future__ import annotations

import json

import pytest

from .conftest import mlflow_runs

PERM = {"fr", "aacc", "sacc", "wacc", "bacc", "sensg"}
TABLE = [  # README's table: (the variants= overrides, metrics it names)
    (["variants=original"], {"mcqa", "slot_share_A", "slot_correct_A", "slot_bias_max", "slot_bias_flag"}),
    (["variants=cora"], {"mcqa", "mcqa_plus", "mv", *(f"bmca_{c / 10:.1f}" for c in range(5, 11)), "ci", "cora"}),
    (["variants=cora_same_size"], {"mcqa", "mcqa_plus", "mv", "bmca_0.5", "bmca_1.0", "ci", "cora"}),
    (["variants=revas_reorder"], {"sc_mean", "acc_h", "sc_bin_4_of_4_share"}),
    (
        ["variants=revas_option_count"],
        {f"{m}@{n}" for m in ("acc", "sc_mean", "acc_h") for n in (2, 3, 6, 8, 10)},
    ),
    (["variants=revas_nota"], {"nota_acc", "nota_acc_h"}),
    (["variants=revas_true_false"], {"tf_correct_yes", "tf_distractor_no"}),
    (
        ["variants=revas_true_false", "scoring=logprob"],
        {"tf_correct_yes", "tf_distractor_no", "conf_correct", "conf_distractor", "conf_ratio"},
    ),
    (["variants=revas_multi_select"], {"multi_rate", "recall_correct", "recall_misleading"}),
    (["variants=perm_cyclic"], {f"{m}@cyclic" for m in PERM}),
    (
        ["variants=perm_cyclic", "scoring=logprob"],
        {f"{m}@cyclic" for m in (*PERM, "prob_mass", "one_minus_brier", "one_minus_entropy", "pride_acc")},
    ),
    (["variants=perm_all"], {"full_fr", *(f"{m}@{s}" for m in PERM for s in ("original", "oi", "cyclic", "full"))}),
    (
        ["variants=original", "repetitions=3", "temperature=0.7"],
        {"sure_right", "sure_wrong", "unsure_right", "unsure_wrong", "rws", "st", "acc_mean", "acc_std"},
    ),
]


def logged(result) -> dict[str, float]:
    return json.loads((result.out_dir / "artifacts" / "metrics.json").read_text())


@pytest.mark.slow  # a job per row of the table: the slow tier's, out of the edit loop
@pytest.mark.parametrize("overrides,names", TABLE, ids=[" ".join(o) for o, _ in TABLE])
@pytest.mark.promise("README.md", "each variant set of the table logs the metrics the table names for it")
def test_each_variant_set_logs_the_metrics_the_readme_table_names(run_job_in, overrides, names):
    metrics = logged(run_job_in("model=simulated", "model.success_rate=0.6", "limit=6", *overrides))
    assert names <= set(metrics), sorted(names - set(metrics))


@pytest.mark.promise("README.md", "the true/false confidence metrics come with scoring=logprob only")
def test_the_true_false_confidences_need_logprob(run_job_in):
    assert not {"conf_correct", "conf_ratio"} & set(
        logged(run_job_in("model=simulated", "limit=3", "variants=revas_true_false"))
    )


@pytest.mark.promise("README.md", "revas_misleading is the second stage of a finished run: misleading_fix_rate")
def test_revas_misleading_reads_a_finished_run_and_logs_its_fix_rate(run_job_in):
    first = run_job_in("model=simulated", "model.success_rate=0.3", "limit=8")
    second = run_job_in(
        "model=simulated",
        "model.success_rate=0.3",
        "limit=8",
        "variants=revas_misleading",
        f"variants.source_run={first.run_id}",
    )
    assert "misleading_fix_rate" in logged(second)


@pytest.mark.promise("README.md", "a repetition run gets the rws_st tag in the paper's form, '0.81 | 53%'")
def test_a_repetition_run_is_tagged_rws_st_in_the_papers_form(run_job_in):
    import re

    run_job_in("model=simulated", "limit=6", "repetitions=4", "temperature=0.7")
    _, (run,) = mlflow_runs(run_job_in.store_uri)
    assert re.fullmatch(r"\d\.\d\d \| \d{1,3}%", run.data.tags["rws_st"]), run.data.tags["rws_st"]


@pytest.mark.promise("README.md", "by default a synthetic question is asked once, scored by option text (cloze_shown)")
def test_the_main_jobs_default_is_one_question_once_scored_cloze_shown():
    from src.config.compose import compose_job

    cfg = compose_job([])
    assert (cfg.variants.name, cfg.scoring, cfg.benchmark.name) == ("original", "cloze_shown", "synthetic")
    assert cfg.model.name == "smollm2_135m"


@pytest.mark.promise("README.md", "a simulated model at success rate 0.8 is reported above chance")
def test_a_simulated_model_that_knows_the_answers_is_above_chance(run_job_in):
    result = run_job_in("model=simulated", "model.success_rate=0.8", "limit=40")
    _, (run,) = mlflow_runs(run_job_in.store_uri)
    assert run.data.tags["chance"].endswith("mcqa above chance"), run.data.tags["chance"]
    assert "indistinguishable from chance" not in result.closing()
