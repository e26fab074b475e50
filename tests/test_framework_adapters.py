"""Hydra's private API is named in one adapter module (src/config/hydra_adapter.py), which checks the installed
hydra-core against the range pyproject.toml pins; the config, tracking and metrics layers name no other private
name of Hydra, MLflow or another module."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from src.config import hydra_adapter

REPO = Path(__file__).resolve().parents[1]
ADAPTERS = {REPO / "src" / "config" / "hydra_adapter.py"}
PRIVATE = re.compile(r"_internal|(?<!self)(?<!cls)\._[a-z]")  # the issue's `grep -rn "_internal\|\._[a-z]" src`


def test_the_adapter_supports_the_range_pyproject_pins():
    requirements = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (hydra,) = [r for r in requirements if r.startswith("hydra-core")]
    assert hydra.replace(" ", "") == f"hydra-core{hydra_adapter.SUPPORTED}"


def test_a_hydra_outside_the_range_gets_one_line_naming_the_range_and_the_install():
    assert hydra_adapter.version_problem("1.3.2") is None and hydra_adapter.version_problem("1.3.9") is None
    for outside in ("1.2.0", "1.4.0", "2.0.0.dev1", "not-a-version"):
        line = hydra_adapter.version_problem(outside)
        assert line.startswith(f"warning: hydra-core {outside} is outside >=1.3.2,<1.4") and "\n" not in line
        assert line.endswith("pip install 'hydra-core>=1.3.2,<1.4'")
    # the installed hydra-core is inside: importing the adapter prints nothing
    proc = subprocess.run([sys.executable, "-c", "import src.config.hydra_adapter"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "warning: hydra-core" not in proc.stderr


def test_config_tracking_and_metrics_name_private_names_only_in_the_adapter():
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for folder in ("config", "tracking", "metrics") for path in sorted((REPO / "src" / folder).rglob("*.py"))
             if path not in ADAPTERS
             for number, line in enumerate(path.read_text().splitlines(), 1) if PRIVATE.search(line)]
    assert not found, "private names outside the adapter modules:\n" + "\n".join(found)
    assert PRIVATE.search("x = dataset._to_mlflow_entity()") and PRIVATE.search("import hydra._internal.hydra")
    assert not PRIVATE.search("self._apply_overrides_to_config(extra, cfg)")
