"""Where a run's numbers were computed (src/tracking/provenance.py): the code's commit, read from the project's own
checkout wherever the tool is started, "unknown" where git cannot tell, and the provenance tags."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types
from importlib.metadata import version
from pathlib import Path

from src.tracking import provenance

REPO = Path(__file__).resolve().parents[1]


def test_the_commit_is_the_projects_own_wherever_the_tool_is_started(tmp_path, monkeypatch):
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
    monkeypatch.chdir(tmp_path)  # no repository here: the commit is read where the code lives
    assert provenance.git_commit() == (head or "unknown")


def test_the_commit_is_unknown_where_git_is_missing_fails_or_says_nothing(monkeypatch):
    def missing(*args, **kwargs):
        raise FileNotFoundError("git")

    def hangs(*args, **kwargs):
        raise subprocess.TimeoutExpired("git", 5)

    for run in (missing, hangs, lambda *a, **k: subprocess.CompletedProcess(a, 128, stdout="", stderr="not a repo")):
        monkeypatch.setattr(subprocess, "run", run)
        assert provenance.git_commit() == "unknown"


def test_a_git_that_hangs_is_abandoned_after_git_timeout_s(tmp_path, monkeypatch):
    fake = tmp_path / "git"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(provenance, "GIT_TIMEOUT_S", 0.5)
    started = time.monotonic()
    assert provenance.git_commit() == "unknown"
    assert time.monotonic() - started < 10  # bounded by the timeout, not the 30 s the git sleeps


def test_the_provenance_tags_are_the_versions_the_torch_kernels_and_the_kernel_variables_set(monkeypatch):
    fake_torch = types.SimpleNamespace(
        backends=types.SimpleNamespace(cpu=types.SimpleNamespace(get_cpu_capability=lambda: "AVX2"))
    )
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("MKL_ENABLE_INSTRUCTIONS", "")  # set but empty: not pinned, not a tag
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    tags = provenance.provenance_tags()
    expected = {
        "provenance.python": ".".join(map(str, sys.version_info[:3])),
        "provenance.numpy": version("numpy"),
        "provenance.transformers": version("transformers"),
        "provenance.torch": version("torch"),
        "provenance.cpu_capability": "AVX2",
        "provenance.ATEN_CPU_CAPABILITY": "avx2",
    }
    assert tags == expected


def test_no_torch_loaded_no_kernel_tag_and_a_package_not_installed_is_left_out(monkeypatch):
    from importlib import metadata

    monkeypatch.delitem(sys.modules, "torch", raising=False)
    real = metadata.version

    def version_without_transformers(name: str) -> str:
        if name == "transformers":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version_without_transformers)
    tags = provenance.provenance_tags()
    assert "provenance.cpu_capability" not in tags and "provenance.transformers" not in tags
    assert tags["provenance.numpy"] == real("numpy")
