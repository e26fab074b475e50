"""The project's sweeper and launchers are Hydra plugins found by being installed: `hydra_plugins/` is a
namespace package the project installs beside hydra-submitit-launcher's, and no import of the tool edits `sys.path`
or `PYTHONPATH` to find it. Each check runs Hydra's own discovery in a fresh interpreter whose working directory is
outside the clone, so the clone's root is not on its `sys.path` unless the check puts it there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SWEEPER = "hydra_plugins.mcq_consistency_sweeper.PrecheckedSweeper"
LAUNCHERS = {
    "hydra_plugins.mcq_slurm_launcher.TrackedSlurmLauncher",
    "hydra_plugins.mcq_ray_launcher.TrackedRayLauncher",
}

# What Hydra discovers (the scan `python -m src.run` does before it picks the sweeper and launcher), where `src` and
# the plugins come from, and whether importing the entry point changed sys.path or PYTHONPATH.
PROBE = r"""
import json, os, sys
from importlib import metadata

try:  # where the installed distribution was installed from (pip's direct_url.json: a clone's folder)
    origin = json.loads(metadata.distribution("mcq-consistency").read_text("direct_url.json") or "{}").get("url")
except metadata.PackageNotFoundError:
    origin = None
try:
    import src
except ImportError:
    print(json.dumps({"origin": origin, "src": None}))
    sys.exit(0)
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper

path, pythonpath = list(sys.path), os.environ.get("PYTHONPATH")
import src.run  # the entry point's module, as a Slurm job or a Ray worker unpickling its task imports it
edited = sys.path != path or os.environ.get("PYTHONPATH") != pythonpath
plugins = Plugins.instance()
found = {kind.__name__: {f"{c.__module__}.{c.__qualname__}": sys.modules[c.__module__].__file__
                         for c in plugins.discover(kind)} for kind in (Sweeper, Launcher)}
print(json.dumps({"origin": origin, "src": src.__file__, "edited": edited, **found}))
"""


def discovered(cwd: Path, pythonpath: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_the_project_plugins(found: dict) -> None:
    assert not found["edited"], "importing src.run changed sys.path or PYTHONPATH"
    assert SWEEPER in found["Sweeper"], f"Hydra does not discover the project's sweeper: {sorted(found['Sweeper'])}"
    assert LAUNCHERS <= set(found["Launcher"]), f"Hydra's launchers: {sorted(found['Launcher'])}"
    # beside the plugins the project extends, in the same namespace
    assert "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher" in found["Launcher"]


def test_hydra_discovers_the_plugins_of_the_installed_project(tmp_path):
    """`pip install -e .` (or `pip install .`) of this clone: from any directory, Hydra finds the sweeper and the
    launchers, as a Slurm job or a Ray worker running the same environment does. Fails where this environment's
    mcq-consistency was installed from another folder (another clone or worktree) or is not installed."""
    found = discovered(tmp_path, None)
    assert found["origin"] == REPO.as_uri() and found["src"] is not None, (
        f"this environment's mcq-consistency is not installed from this clone ({found['origin']}): the test would "
        f"check another tree's plugins; pip install -e {REPO}"
    )
    missing = {SWEEPER} - set(found["Sweeper"]) or LAUNCHERS - set(found["Launcher"])
    assert not missing, (
        f"Hydra does not discover {sorted(missing)} from the installed project: an install made "
        f"before hydra_plugins/ was a package of it? pip install -e {REPO}"
    )
    assert_the_project_plugins(found)
    for name in (SWEEPER, *LAUNCHERS):
        where = {**found["Sweeper"], **found["Launcher"]}[name]
        assert Path(where).resolve().parent.name == "hydra_plugins", where


def test_hydra_discovers_the_plugins_of_the_clone_on_sys_path(tmp_path):
    """The clone's root on sys.path (what `python -m src.run` from the root has, and what a path-based editable
    install adds): the plugins are this clone's, and the namespace still holds the installed launcher plugins."""
    found = discovered(tmp_path, str(REPO))
    assert Path(found["src"]).resolve() == REPO / "src" / "__init__.py"
    assert_the_project_plugins(found)
    for name in (SWEEPER, *LAUNCHERS):
        where = {**found["Sweeper"], **found["Launcher"]}[name]
        assert Path(where).resolve().parent == REPO / "hydra_plugins", where
