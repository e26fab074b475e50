"""The typed schema of a job's config, and the one-line errors for configs that do not fit it.

`JobConfig` is registered in Hydra's ConfigStore as `job_schema`; `conf/config.yaml` names it first in its
defaults list, so the top level and its `cache` and `tracking` nodes are typed: `temperature=abc` fails to
merge. Hydra accepts a key added with `+` (`+temprature=0.5`) and states its own errors in several lines, so
`compose_job` composes the overrides itself and `check_keys` refuses any key the schema does not have; both
raise `UserError` with one line naming the key as the user wrote it and the nearest valid one.

The groups (`model`, `benchmark`, `variants`, `prompt`) differ in their keys by backend, loader and variant set;
each checks its own keys where it is built (e.g. `model.x is not a setting of backend hf`).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig

from src.backends.batch_tokens import check_max_batch_tokens
from src.benchmarks import CONTINUATION_BENCHMARKS
from src.benchmarks.lm_eval import task_label, task_spec
from src.common.errors import UserError
from src.common.paths import expand_path
from src.common.redact import redact_text
from src.config import plain_dict
from src.config.spec import JobSpec, spec_of
from src.config.sweep_compose import GroupCachingConfigLoader, split_sweep, without_hydra
from src.core.metric_choices import PRIDE_PROTOCOLS, SURE_RULES
from src.core.validity import check_option_style, check_validity
from src.tracking.names import DEFAULT_EXPERIMENT, DEFAULT_URI
from src.tracking.store import check_options
from src.variants.rules import POLICIES as OPTION_REFS  # the policies of src.variants.plan_variants

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
GROUPS = ("model", "benchmark", "variants", "prompt")


@dataclass
class CacheConfig:
    """The response cache: reruns and interrupted sweeps reuse every answer already computed."""

    enabled: bool = True
    path: str = ".cache/responses.db"
    # true: `path` is a folder of chunk files that jobs on many nodes share with no file lock (src/answering/cache.py)
    shared: bool = False


@dataclass
class TrackingConfig:
    uri: str = DEFAULT_URI
    experiment: str = DEFAULT_EXPERIMENT
    offline: bool = False  # true: log to offline_dir now, upload with `python -m src.sync` later
    offline_dir: str = "mlruns/offline"
    on_outage: str = "fail"  # a server that does not answer: fail (one line, exit 2) | offline (log to offline_dir)
    retry_budget_s: float = 20.0  # how long MLflow's client retries one call to a server before giving up


@dataclass
class MetricsConfig:
    """How the metrics are computed from the records (they never change what is asked)."""

    sure_rule: str = "answer"  # answer: SURE/right by the letter vote of section 3.2 | correctness: the paper's tables
    pride_protocol: str = "paper"  # paper: pride_acc leaves the calibration questions out | authors: scores them too


def check_metrics(cfg: DictConfig) -> None:
    """Refuse a `metrics.sure_rule` or `metrics.pride_protocol` that is not one of its choices (one line naming
    the key)."""
    from omegaconf import OmegaConf

    for key, noun, choices in (("sure_rule", "rule", SURE_RULES), ("pride_protocol", "protocol", PRIDE_PROTOCOLS)):
        value = OmegaConf.select(cfg, f"metrics.{key}", default=choices[0])
        if value not in choices:
            raise UserError(f"config key metrics.{key}: unknown {noun} {value!r}; choose one of {', '.join(choices)}")


@dataclass
class StatsConfig:
    """Intervals for the headline metrics (src/metrics/intervals.py): a cluster bootstrap over questions, seeded
    from the job's seed, and Wilson intervals for shares of questions. They never change what is asked."""

    bootstrap: int = 1000  # resamples of the questions; 0 = no intervals at all
    level: float = 0.95  # coverage of each interval, in (0, 1)


@dataclass
class JobConfig:
    """One job = one model x benchmark x variant set x temperature (conf/config.yaml picks the groups)."""

    model: Any = MISSING
    benchmark: Any = MISSING
    variants: Any = MISSING  # original: each question once; cora: the CoRA divergent set; ...
    prompt: Any = MISSING
    seed: int = 0  # seeds variant shuffles, few-shot picks and sampling
    limit: int | None = None  # first N questions in file order; null = all
    temperature: float = 0.0  # 0 = greedy decoding
    repetitions: int = 1  # samples of the same prompt (the repetition paper's R)
    # true: stop a prompt's repetitions once its SURE/UNSURE x right/wrong cell is settled (src/answering/adaptive.py)
    adaptive: bool = False
    scoring: str = "generate"  # generate | logprob | cloze | cloze_shown; conf/config.yaml takes model.scoring
    top_k: int | None = None
    top_p: float = 1.0
    max_new_tokens: int = 3  # the repetition paper's setting: the answer letter and a little slack
    cloze_normalise: bool = (
        False  # cloze picks the highest raw log-likelihood (lm-eval acc); true = per byte (acc_bytes)
    )
    fewshot: int = 0  # examples from the benchmark's dev/train split, never the evaluated questions
    option_refs: str = "keep_rules"  # options that refer to others ("all of the above"): keep_rules | exclude | ignore
    data_dir: str = "../shared/data"  # conf/config.yaml reads $MCQ_DATA_DIR first
    cache: CacheConfig = field(default_factory=CacheConfig)
    resume: bool = True  # skip a job whose identical config already has a FINISHED run in the experiment
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)  # metrics.sure_rule=correctness: the paper's tables
    stats: StatsConfig = field(default_factory=StatsConfig)  # stats.bootstrap=0: no intervals
    vars: dict[str, Any] = field(default_factory=dict)  # free values for interpolations in sweep files


ConfigStore.instance().store(name="job_schema", node=JobConfig)
NESTED: dict[str, Any] = {f.name: f.default_factory for f in fields(JobConfig) if is_dataclass(f.default_factory)}


# The keys that point a model at weights of the user's own: a model config that ships its weights (a packaged GGUF,
# the simulated model) has none, and the nearest spelling (`model.chat`) is not what the user wants.
OWN_WEIGHTS_KEYS = ("model.path", "model.gguf_file")


def unknown_key(key: str, known: Sequence[str]) -> UserError:
    """One line for a key that is not in its node: the nearest known key, or the list of them."""
    if key in OWN_WEIGHTS_KEYS and "path" not in known:
        return UserError(
            f"config key {key}: the chosen model ships its own weights and takes no {key.partition('.')[2]}; "
            "for weights of your own choose the hf model: model=hf model.path=DIR_OR_HUB_ID "
            "(a GGUF inside DIR: add model.gguf_file=NAME)"
        )
    last = key.rpartition(".")[2]
    close = difflib.get_close_matches(last, list(known), n=1, cutoff=0.5)
    hint = (
        f"did you mean {key.rpartition('.')[0] + '.' if '.' in key else ''}{close[0]}?"
        if close
        else f"the keys here are {', '.join(known)}"
    )
    return UserError(f"config key {key}: unknown; {hint}")


def _known_keys(path: str, overrides: Sequence[str]) -> list[str]:
    """The keys a node of the config has (the schema's, or a group's as its chosen config file gives them)."""
    top = [f.name for f in fields(JobConfig)]
    if not path:
        return top
    if path in NESTED:
        return [f.name for f in fields(NESTED[path])]
    if path in GROUPS:
        choices = [o for o in overrides if "=" in o and o.split("=", 1)[0] in GROUPS]
        try:
            return [str(k) for k in compose_job(choices)[path]]
        except UserError:
            return []
    return []


def check_keys(cfg: DictConfig) -> None:
    """Refuse a top-level, `cache.` or `tracking.` key the schema does not have (one added with `+`)."""
    for path in ("", *NESTED):
        node = cfg if not path else cfg.get(path) or {}
        known = _known_keys(path, ())
        for key in node:
            if key != "hydra" and key not in known:
                raise unknown_key(f"{path}.{str(key)}" if path else str(key), known)


_KEY_IN_MESSAGE = (
    re.compile(r"Key '([^']+)' (?:is )?not in"),
    re.compile(r"full_key: (\S+)"),
    re.compile(r"Could not override '([^']+)'"),
)


def one_line(err: Exception, overrides: Sequence[str]) -> UserError:
    """A Hydra or OmegaConf composition error as one line naming the key as the user wrote it."""
    text = " ".join(f"{err} {err.__cause__ or ''}".split())
    key = next((m.group(1) for pattern in _KEY_IN_MESSAGE for m in [pattern.search(text)] if m), None)
    if key is None:
        return UserError(f"config overrides {' '.join(overrides)}: {text.split(' full_key:')[0]}")

    def written_key(override: str) -> str:
        return override.lstrip("+~").split("=", 1)[0]

    written = next(
        (
            o
            for o in reversed(overrides)  # the last one wins, as in Hydra
            if written_key(o) == key or written_key(o).endswith("." + key)
        ),
        None,
    )
    full = written_key(written) if written else key
    if " not in " in text:
        return unknown_key(full, _known_keys(full.rpartition(".")[0], overrides))
    reason = (err.__cause__ and " ".join(str(err.__cause__).split()) or text).split(" full_key:")[0]
    return UserError(
        f"config key {full}: {reason.split(' object_type=')[0]} (from {written or full}); give a value "
        f"of the key's type"
    )


def check_group_choices(overrides: Sequence[str], conf_dir: Path = CONF_DIR) -> None:
    """Catch an unknown config-group choice (e.g. `benchmark=mmlux`) before Hydra prints a multi-line error."""
    for arg in overrides:
        key, sep, value = arg.partition("=")
        if not sep or key.startswith(("+", "~", "hydra")) or "." in key or "/" in key or not (conf_dir / key).is_dir():
            continue
        known = sorted(p.stem for p in (conf_dir / key).glob("*.yaml"))
        for choice in value.split(","):
            if choice and choice not in known and not choice.startswith(("choice(", "glob(", "range(")):
                close = difflib.get_close_matches(choice, known, n=1)
                hint = f"did you mean {key}={close[0]}? " if close else ""
                raise UserError(f"config key {key}: unknown choice {choice!r}; {hint}choose one of {', '.join(known)}")


@contextlib.contextmanager
def _own_hydra(conf_dir: Path) -> Iterator[None]:
    """Hydra initialised on `conf_dir` for composing inside; inside a Hydra app (the sweep callback), the app's
    instance is put back after."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    saved = GlobalHydra.instance().hydra  # None: not initialised (GlobalHydra.is_initialized)
    if saved is not None:
        GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            yield
    finally:
        if saved is not None:
            GlobalHydra.instance().clear()
            GlobalHydra.instance().initialize(saved)


def _checked(overrides: Sequence[str], conf_dir: Path, composed: Callable[[], DictConfig]) -> DictConfig:
    """`composed()`, the config of the job `overrides` names, with every config error as one line (UserError): an
    unknown group choice before composing, a Hydra/OmegaConf composition error (override grammar, types, unknown
    keys), then the keys and metrics the composed config names."""
    check_group_choices(overrides, conf_dir)
    try:
        cfg = composed()
    except UserError:
        raise
    except Exception as err:
        raise one_line(err, overrides) from err
    check_keys(cfg)  # the values, `metrics` included, are check_config's (`job_spec`), once per job
    return cfg


def compose_job(overrides: Sequence[str] = (), *, conf_dir: Path = CONF_DIR, config_name: str = "config") -> DictConfig:
    """The composed config of one job from command-line style overrides, with no Hydra runtime (for tests, the
    benchmark command and the pre-flight check of `python -m src.run`). Raises UserError in one line."""
    from hydra import compose

    def composed() -> DictConfig:
        with _own_hydra(conf_dir):
            return compose(config_name, overrides=list(overrides))

    return _checked(overrides, conf_dir, composed)


def compose_jobs(jobs: Sequence[Sequence[str]], *, conf_dir: Path = CONF_DIR) -> Iterator[DictConfig]:
    """`compose_job` of each job of a sweep, in order, composing once per choice of config groups: each other job
    of that choice is a copy with its plain `key=value` overrides applied by Hydra's own step
    (src/config/sweep_compose.py). The same configs, and the same one-line errors, at 0.1-0.15 s less a job."""
    if len(jobs) == 1:
        yield compose_job(jobs[0], conf_dir=conf_dir)
        return
    from hydra import compose
    from hydra.core.global_hydra import GlobalHydra

    with _own_hydra(conf_dir):
        master = compose("config", return_hydra_config=True)
        loader = GroupCachingConfigLoader.wrap(GlobalHydra.instance().config_loader())
    for job in jobs:
        # B023, a closure over a loop variable: called in _checked, before the next job
        yield _checked(job, conf_dir, lambda: without_hydra(loader.load_sweep_config(master, list(job))))  # noqa: B023


_REQUIRED_HINT = {
    "benchmark.path": "/path/to/questions.jsonl (jsonl, csv or parquet)",
    "benchmark.task": "<an lm-eval task, e.g. arc_easy>",
    "model.path": "<a local model folder or a hub id org/name>",
}
# key, null allowed, in range, the rule as the error states it
_RANGES: tuple[tuple[str, bool, Callable[[float], bool], str], ...] = (
    ("seed", False, lambda v: v >= 0, "must be an integer >= 0"),
    ("limit", True, lambda v: v >= 1, "must be a positive integer or null (all questions)"),
    ("temperature", False, lambda v: 0 <= v < float("inf"), "must be a finite number >= 0 (0 = greedy)"),
    ("repetitions", False, lambda v: v >= 1, "must be >= 1"),
    ("top_k", True, lambda v: v >= 1, "must be >= 1, or null (no top-k cut)"),
    ("top_p", False, lambda v: 0 < v <= 1, "must be in (0, 1] (1 = no nucleus cut)"),
    ("max_new_tokens", False, lambda v: v >= 1, "must be >= 1"),
    ("fewshot", False, lambda v: v >= 0, "must be >= 0 (0 = zero-shot)"),
)
_DB_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")  # MLflow's SQLAlchemy stores (`postgresql+psycopg2` too)


def check_values(cfg: DictConfig) -> None:
    """Every value of a composed job in its range: required keys given, numbers in range, choices known,
    `tracking.uri` and `cache.path` of a shape that can work. One `UserError` line naming the key, before any
    compute: `python -m src.run` calls it for every job of the command line before Hydra starts, and
    `check_config` calls it at every door (the command line, the sweep's pre-check, the job).
    Types were checked when the config was composed (the schema above)."""
    from omegaconf import OmegaConf

    for key in sorted(k for k in OmegaConf.missing_keys(cfg) if not k.startswith("hydra")):
        group = key.split(".", 1)[0]
        owner = f"{group}={OmegaConf.select(cfg, f'{group}.name')}" if group in GROUPS else "the config"
        raise UserError(
            f"config key {key}: required by {owner} (no default); give {key}={_REQUIRED_HINT.get(key, '<value>')}"
        )
    for key, nullable, in_range, rule in _RANGES:
        value = cfg.get(key)
        if not (value is None and nullable) and (value is None or not in_range(value)):
            shown = "null" if value is None else f"{value:g}" if isinstance(value, float) else value
            raise UserError(f"config key {key}: {shown} {rule}")
    if cfg.get("option_refs") not in OPTION_REFS:
        raise UserError(
            f"config key option_refs: unknown policy {cfg.get('option_refs')!r}; choose "
            f"{', '.join(OPTION_REFS[:-1])} or {OPTION_REFS[-1]}"
        )
    shared = bool(cfg.cache.get("shared", False))
    if cfg.cache.enabled and shared and (not cfg.cache.path or expand_path(cfg.cache.path).is_file()):
        problem = f"{cfg.cache.path!r} is a file" if cfg.cache.path else "empty"
        raise UserError(
            f"config key cache.path: {problem}; with cache.shared=true give the shared cache's folder, "
            f"e.g. cache.path=/shared/mcq-cache (or cache.shared=false for a database file)"
        )
    if cfg.cache.enabled and not shared and (not cfg.cache.path or expand_path(cfg.cache.path).is_dir()):
        problem = f"{cfg.cache.path!r} is a folder" if cfg.cache.path else "empty"
        raise UserError(
            f"config key cache.path: {problem}; give the cache's database file, e.g. "
            f"cache.path=.cache/responses.db (or cache.shared=true for a folder many nodes share, or "
            f"cache.enabled=false)"
        )
    check_tracking_uri(str(cfg.tracking.uri or ""))
    if OmegaConf.select(cfg, "model.backend") == "hf":
        check_max_batch_tokens(OmegaConf.select(cfg, "model.max_batch_tokens"))
    from src.answering.adaptive import (
        check_adaptive,
    )  # local: loads numpy, pandas (slow import); adaptive=true only where stopping early keeps the full run's verdicts

    check_adaptive(
        adaptive=bool(cfg.get("adaptive", False)),
        repetitions=int(cfg.repetitions),
        temperature=float(cfg.temperature),
        scoring=str(cfg.scoring),
        backend=OmegaConf.select(cfg, "model.backend"),
    )


def check_tracking_uri(uri: str, key: str = "tracking.uri") -> None:
    """The shapes of tracking URI that MLflow can log to: `sqlite:///file.db`, another SQLAlchemy database
    (`postgresql://...`) or a server (`http(s)://host[:port]`). A bare path or `file:` is MLflow's file store,
    which current MLflow refuses; reachability is checked later (src.tracking.store.check_tracking).

    >>> check_tracking_uri("sqlite:///mlruns/mlflow.db"), check_tracking_uri("http://127.0.0.1:5000")
    (None, None)
    >>> check_tracking_uri("mlruns")  # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    src.common.errors.UserError: config key tracking.uri: 'mlruns' is a file store, which current MLflow refuses;
    use ...
    """
    from urllib.parse import urlsplit

    shown = redact_text(uri)  # the error line goes to the terminal and logs: no password in it
    fix = f"use tracking.uri={DEFAULT_URI}"
    scheme, sep, rest = uri.partition("://")
    if not uri.strip():
        raise UserError(f"config key {key}: empty; {fix} or http://host:port for an MLflow server")
    if not sep or scheme == "file" or uri.startswith("file:"):
        raise UserError(f"config key {key}: {shown!r} is a file store, which current MLflow refuses; {fix}")
    if scheme == "sqlite":
        path = Path(rest[1:]).expanduser() if rest.startswith("/") else None
        if path is None or not rest[1:]:
            raise UserError(f"config key {key}: {shown!r} names no database file; {fix} (three slashes, then a path)")
        if path.is_dir():
            raise UserError(
                f"config key {key}: {shown!r} points at a folder; give the database file inside it, "
                f"e.g. {uri.rstrip('/')}/mlflow.db"
            )
    elif scheme in ("http", "https"):
        if not urlsplit(uri).hostname:
            raise UserError(f"config key {key}: {shown!r} names no host; give e.g. http://127.0.0.1:5000")
    elif scheme.split("+", 1)[0] not in _DB_SCHEMES and scheme not in ("databricks", "databricks-uc"):
        raise UserError(
            f"config key {key}: unknown scheme {scheme!r}; {fix}, http(s)://host:port for a server, "
            f"or a database URI (postgresql://, mysql://, mssql://)"
        )


HYDRA_FLAGS = {"-m", "--multirun"}  # flags that still let us compose the overrides ourselves


def check_config(cfg: DictConfig) -> None:
    """The one check of a composed job config, before any compute: every value in its range (`check_values`), the
    metrics it names (`check_metrics`), the interval settings, the tracking options, then the validity rules of
    scoring x variant set. The same function at all three doors: `python -m src.run`'s check before Hydra starts
    (`check_command_line`), the sweep callback's check of every job before a sweep starts, and the job itself
    (`src.job.runner.run_job`); so a config accepted at one door is never refused at another."""

    check_values(cfg)
    check_metrics(cfg)
    stats = cfg.get("stats")
    if stats is not None and not stats.bootstrap >= 0:
        raise UserError(f"config key stats.bootstrap: {stats.bootstrap} must be >= 0 (resamples; 0 = no intervals)")
    if stats is not None and not 0 < stats.level < 1:
        raise UserError(f"config key stats.level: {stats.level:g} must be between 0 and 1 (exclusive), e.g. 0.95")
    check_options(cfg.tracking)
    variants = plain_dict(cfg.variants)
    lm_evals_own = cfg.benchmark.name == "lm_eval" and cfg.prompt.get("name") == "lm_eval"
    if cfg.benchmark.name == "lm_eval":
        task_spec(plain_dict(cfg.benchmark).get("task"))  # a name or a list of names, else one line
    check_validity(
        scoring=cfg.scoring,
        variants=variants,
        temperature=float(cfg.temperature),
        repetitions=int(cfg.repetitions),
        per_task=lm_evals_own,  # each task shows its options or not by its shape: checked when it loads (run_job)
    )
    # an lm-eval task's option style is known here only when benchmark.choices says it; else when it loads (run_job)
    check_option_style(
        variants=variants,
        benchmark=benchmark_label(cfg.benchmark),
        continuation=cfg.benchmark.name in CONTINUATION_BENCHMARKS or cfg.benchmark.get("choices") == "continuation",
    )


def benchmark_label(benchmark: Mapping[str, Any]) -> str:
    """The benchmark as its keys name it (a config node or a spec's plain values): `hellaswag`, or
    `lm_eval benchmark.task=arc_easy`."""
    if benchmark["name"] == "lm_eval":
        task = plain_dict(benchmark).get("task") if isinstance(benchmark, DictConfig) else benchmark.get("task")
        return f"lm_eval benchmark.task={task_label(task_spec(task))}"
    return str(benchmark["name"])


_BUILT: OrderedDict[str, JobSpec] = OrderedDict()  # the latest specs this process built, by their resolved config
_KEPT = 1024  # the doors of one process (command line, sweep pre-check, its in-process jobs) share them


def job_spec(cfg: DictConfig) -> JobSpec:
    """The typed `JobSpec` of a composed job config, checked (`check_config`: one `UserError` line for a config it
    refuses). Each door builds it, and only it reads the config: a config this process has already checked (the
    command line's check, then the same job inside Hydra) gives the spec built then, so a job is checked once."""
    try:
        resolved = plain_dict(cfg)
    except Exception:  # an interpolation that does not resolve: the check names the missing key first
        check_config(cfg)
        raise
    resolved.pop("hydra", None)
    key = json.dumps(resolved, sort_keys=True, default=str)
    spec = _BUILT.get(key)
    if spec is None:
        check_config(cfg)
        spec = spec_of(_with_defaults(resolved), resolved)
        _BUILT[key] = spec
        while len(_BUILT) > _KEPT:
            _BUILT.popitem(last=False)
    else:
        _BUILT.move_to_end(key)
    return spec


def logged_spec(cfg: DictConfig) -> JobSpec:
    """The `JobSpec` of the config a finished run logged (its config.yaml), which was checked when the run was made;
    for reading what it asked (`python -m src.plan`), not for running it again (that is `job_spec`'s)."""
    resolved = plain_dict(cfg)
    return spec_of(_with_defaults(resolved), resolved)


@functools.cache
def _defaults() -> dict[str, Any]:
    from omegaconf import OmegaConf

    return plain_dict(OmegaConf.structured(JobConfig))


def _with_defaults(resolved: dict[str, Any]) -> dict[str, Any]:
    """`resolved` with the schema's default for each key it lacks: a config.yaml that an older run logged
    (`python -m src.recheck`) has every key of its day, not the ones added since."""
    defaults = _defaults()
    nested = {name: {**defaults[name], **(resolved.get(name) or {})} for name in NESTED}
    return {**defaults, **resolved, **nested}


# launcher configs (conf/hydra/launcher/) whose plugin is an extra, not a dependency: what it needs (its packages,
# the modules that say they are installed) and the extra that installs them
LAUNCHER_EXTRAS = {
    name: ("hydra-ray-launcher and Ray", ("hydra_plugins.hydra_ray_launcher", "ray"), "ray")
    for name in ("ray_cluster", "ray")
}  # `ray`: the plugin's own name, run by the project's launcher


def check_launcher(argv: Sequence[str]) -> None:
    """A launcher whose plugin is not installed is one line naming the extra that installs it (not Hydra's
    "Could not load 'hydra/launcher/ray'" block).

    >>> check_launcher(["-m", "hydra/launcher=joblib"])
    """
    import importlib.util
    import sys

    for arg in argv:
        key, _, choice = arg.partition("=")
        if key.lstrip("+") != "hydra/launcher" or choice not in LAUNCHER_EXTRAS:
            continue
        needs, modules, extra = LAUNCHER_EXTRAS[choice]
        for module in modules:
            try:
                found = (
                    sys.modules[module] is not None
                    if module in sys.modules
                    else importlib.util.find_spec(module) is not None
                )
            except (ImportError, ValueError):
                found = False
            if not found:
                raise UserError(f'hydra/launcher={choice} needs {needs}: pip install -e ".[{extra}]"')


def check_command_line(argv: Sequence[str]) -> None:
    """`python -m src.run`'s check before Hydra starts: compose every job the command line names (each job of a
    sweep) and raise the first config error in one line. Left to Hydra: its own options (--help, --cfg, ...) and
    `hydra.*` overrides."""
    check_launcher(argv)
    sweep_file = _sweep_file(argv)
    if sweep_file is not None:  # `-cd sweeps -cn NAME`: its keys and types, composed as Hydra will compose them
        argv = [a for a in argv if a not in ("-cd", "-cn", *sweep_file)]
    if any(a.startswith("-") and a not in HYDRA_FLAGS for a in argv):
        return
    overrides = [a for a in argv if not a.startswith("-") and not a.lstrip("+~").startswith(("hydra.", "hydra/"))]
    jobs = split_sweep(overrides) if HYDRA_FLAGS & set(argv) else [overrides]
    if sweep_file is not None:
        # The file's own axes (hydra.sweeper.params) are not expanded here: each job is checked whole by the
        # sweep's pre-check (src/sweep/callback.py), which runs the same check_config before the first job.
        chosen = sweep_file_choices(*sweep_file)  # first, so that an error line names the keys of the file's groups
        for job in jobs:
            check_group_choices(job)  # the groups live in conf/, the file only chooses among them
            check_metrics(
                compose_job([*chosen, *job], conf_dir=Path(sweep_file[0]).resolve(), config_name=sweep_file[1])
            )
        return
    for cfg in compose_jobs(jobs):
        job_spec(cfg)  # types were checked by composing; then the one check of every door: one line, exit 2


def sweep_file_choices(folder: str | Path, name: str) -> list[str]:
    """The group choices a sweep file makes (`- override model: simulated` -> `model=simulated`), as overrides.

    >>> sweep_file_choices(Path(__file__).parents[2] / "sweeps", "smoke")
    ['model=simulated', 'variants=cora']
    """
    import yaml

    defaults = yaml.safe_load((Path(folder) / f"{name}.yaml").read_text()).get("defaults", [])
    return [
        f"{key.removeprefix('override ')}={value}"
        for entry in defaults
        if isinstance(entry, dict)
        for key, value in entry.items()
        if key.startswith("override ")
    ]


def _sweep_file(argv: Sequence[str]) -> tuple[str, str] | None:
    """(folder, name) of a command's `-cd FOLDER -cn NAME` (a committed sweep file), when it names both."""
    try:
        folder, name = argv[list(argv).index("-cd") + 1], argv[list(argv).index("-cn") + 1]
    except (ValueError, IndexError):
        return None
    return (folder, name) if (Path(folder) / f"{name}.yaml").is_file() else None
