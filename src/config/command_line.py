"""`python -m src.run`'s command line checked before Hydra starts: a launcher whose plugin is not installed, then
every job the command line names (each job of a sweep, the group choices of a committed sweep file) composed and
checked, the first error in one line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from src.common.errors import UserError
from src.config.checks import check_metrics, job_spec
from src.config.compose import check_group_choices, compose_job
from src.config.sweep_compose import split_sweep

HYDRA_FLAGS = {"-m", "--multirun"}  # flags that still let us compose the overrides ourselves


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
    for job in jobs:
        # types were checked by composing; then the one check of every door: one line, exit 2
        job_spec(compose_job(job))


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
