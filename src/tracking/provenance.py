"""Where a run's numbers were computed: the code's git commit, the package versions and the CPU kernels torch used,
as a job run's `git_commit` and `provenance.*` tags (what `python -m src.recheck` compares)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GIT_TIMEOUT_S = 5.0  # a git that hangs (a stale lock on a network file system) costs a job this much, then "unknown"


def git_commit() -> str:
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                timeout=GIT_TIMEOUT_S,
                cwd=Path(__file__).parent,
            ).stdout.strip()
            or "unknown"
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# packages whose versions change a model's numbers, and the variables that pin torch's, MKL's and oneDNN's CPU
# kernels to an instruction set (docs/reproducibility.md): what `python -m src.recheck` compares besides the code
PROVENANCE_PACKAGES = ("torch", "transformers", "numpy")
KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")


def provenance_tags() -> dict[str, str]:
    """Where a run's numbers were computed, as `provenance.*` tags: package versions, the instruction set torch's
    kernels use (when torch is loaded: a model ran) and the kernel variables that were set."""
    from importlib.metadata import PackageNotFoundError, version

    tags = {"provenance.python": sys.version.split()[0]}
    for package in PROVENANCE_PACKAGES:
        try:
            tags[f"provenance.{package}"] = version(package)
        except PackageNotFoundError:
            pass
    torch = sys.modules.get("torch")  # not imported for it: a simulated run stays quick to start
    if torch is not None:
        tags["provenance.cpu_capability"] = str(torch.backends.cpu.get_cpu_capability())
    tags.update({f"provenance.{name}": os.environ[name] for name in KERNEL_VARIABLES if os.environ.get(name)})
    return tags
