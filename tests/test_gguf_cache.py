"""Temporary files of an interrupted GGUF conversion: named after their host and process, removed by the next start
once that process is gone; a conversion killed with SIGKILL leaves no temporary weights after a rerun."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from src.backends.hf import gguf_cache
from src.common import owners

from .conftest import REPO

PARTIAL = b"half-written weights " * 64  # what the killed conversion had written when it died


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def temps(root):
    return sorted(
        p.name
        for folder in (root, root / "gguf")
        if folder.is_dir()
        for p in folder.iterdir()
        if gguf_cache._TEMP.match(p.name)
    )


def test_only_temps_of_gone_processes_are_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("MCQ_CACHE_DIR", str(tmp_path))
    root = gguf_cache.models_root()
    (root / "gguf").mkdir(parents=True)
    host, dead = owners.host(), dead_pid()
    made = {
        "dead": root / f".0123456789abcdef.tmp-{host}-{dead}-abc123",
        "dead_file": root / f".sha256.json.tmp-{host}-{dead}-x1y2",
        "dead_gguf": root / "gguf" / f".model.gguf.tmp-{host}-{dead}-q9",
        "live": root / f".fedcba9876543210.tmp-{host}-{os.getpid()}-def456",
        "live_parent": root / f".1111111111111111.tmp-{host}-{os.getppid()}-g7",
        "other_host_new": root / f".2222222222222222.tmp-otherhost-{dead}-h8",
        "other_host_old": root / f".3333333333333333.tmp-otherhost-{dead}-i9",
        "no_owner_old": root / ".4444444444444444.tmp-j0k1l2m3",  # the layout before owners were named
    }
    for name, path in made.items():
        if "file" in name:
            path.write_text("{")
        else:
            path.mkdir()
            (path / "model.safetensors").write_bytes(PARTIAL)
    day_and_more = time.time() - gguf_cache.FOREIGN_STALE_S - 60
    for name in ("other_host_old", "no_owner_old"):
        os.utime(made[name], (day_and_more, day_and_more))
    whole = root / "0123456789abcdef"  # a finished copy and the hash index are never temporaries
    whole.mkdir()
    (root / "sha256.json").write_text("{}")

    removed = gguf_cache.clean_stale_temps()

    gone = {"dead", "dead_file", "dead_gguf", "other_host_old", "no_owner_old"}
    assert sorted(removed) == sorted(made[n] for n in gone)
    assert {n for n, p in made.items() if p.exists()} == set(made) - gone
    assert whole.is_dir() and (root / "sha256.json").is_file()
    assert owners.temp_prefix("x") == f".x.tmp-{host}-{os.getpid()}-"


CONVERT_THEN_HANG = textwrap.dedent("""
    import importlib.util, sys, time
    spec = importlib.util.spec_from_file_location("gguf_cache", sys.argv[1])  # no torch: only this module
    gguf_cache = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gguf_cache)

    def convert(gguf_path, out_dir):  # the conversion, killed halfway through writing its weights
        (out_dir / "model.safetensors").write_bytes(bytes.fromhex(sys.argv[3]))
        print(out_dir, flush=True)
        time.sleep(120)

    gguf_cache._convert = convert
    gguf_cache.ensure_float_copy(sys.argv[2])
""")


@pytest.mark.slow  # a subprocess killed with SIGKILL (under a second)
def test_killed_conversion_leaves_no_temporary_weights_after_a_rerun(tmp_path, monkeypatch):
    monkeypatch.setenv("MCQ_CACHE_DIR", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF fake quantised weights")
    proc = subprocess.Popen(
        [sys.executable, "-c", CONVERT_THEN_HANG, gguf_cache.__file__, str(gguf), PARTIAL.hex()],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
        cwd=REPO,
    )
    try:
        tmp = proc.stdout.readline().strip()  # the conversion is writing into its temporary folder
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    root = gguf_cache.models_root()
    assert tmp and os.path.basename(tmp) in temps(root), "the killed conversion left its temporary folder"
    assert f"-{proc.pid}-" in tmp and not gguf_cache.float_copy_dir(gguf).exists(), "nothing half-written was trusted"

    def convert(gguf_path, out_dir):
        (out_dir / "model.safetensors").write_bytes(b"whole weights")

    monkeypatch.setattr(gguf_cache, "_convert", convert)
    folder = gguf_cache.ensure_float_copy(gguf)  # the rerun

    assert (folder / "model.safetensors").read_bytes() == b"whole weights" and (folder / gguf_cache._MARKER).exists()
    assert temps(root) == []
    left = [p for p in tmp_path.rglob("*") if p.is_file() and PARTIAL in p.read_bytes()]
    assert left == [], "no temporary weights remain on disk"


def test_a_package_assembled_gguf_appears_whole_or_not_at_all(tmp_path, monkeypatch):
    """A package that assembles its GGUF from chunks (gemma3_270m) writes under a temporary name that is renamed
    into place when whole: a failed assembly leaves no file that a later start would trust."""
    from src.backends.hf.loading import _package_weights
    from src.common.errors import UserError

    monkeypatch.setenv("MCQ_CACHE_DIR", str(tmp_path / "cache"))
    package = tmp_path / "pkgs" / "fake_gguf_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        textwrap.dedent("""
        import os
        from pathlib import Path
        def assemble(path):
            Path(path).write_bytes(b"half")
            if os.environ.get("FAKE_ASSEMBLY_FAILS"):
                raise ValueError("Assembled file sha256 did not match expected value")
            Path(path).write_bytes(b"whole gguf")
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    target = gguf_cache.models_root() / "gguf" / "m.gguf"

    monkeypatch.setenv("FAKE_ASSEMBLY_FAILS", "1")
    with pytest.raises(UserError, match=r"^model fake needs its weights \(Assembled file sha256"):
        _package_weights("fake", "fake_gguf_pkg", "m.gguf", None, True)
    assert not target.exists() and temps(gguf_cache.models_root()) == []

    monkeypatch.delenv("FAKE_ASSEMBLY_FAILS")
    assert _package_weights("fake", "fake_gguf_pkg", "m.gguf", None, True) == ("pkg:fake_gguf_pkg", target)
    assert target.read_bytes() == b"whole gguf" and temps(gguf_cache.models_root()) == []


@pytest.mark.promise("README.md", "the GGUF's float copy is cached; an incomplete one is converted again")
def test_a_float_copy_without_its_marker_is_converted_again(tmp_path, monkeypatch):
    """A cache folder that lacks the marker written last (an older layout, or a hand-made folder) is never trusted."""
    monkeypatch.setenv("MCQ_CACHE_DIR", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF fake quantised weights")
    half = gguf_cache.float_copy_dir(gguf)
    half.mkdir(parents=True)
    (half / "config.json").write_text("{")

    def convert(gguf_path, out_dir):
        (out_dir / "model.safetensors").write_bytes(b"whole weights")

    monkeypatch.setattr(gguf_cache, "_convert", convert)
    assert gguf_cache.ensure_float_copy(gguf) == half
    assert sorted(p.name for p in half.iterdir()) == sorted([gguf_cache._MARKER, "model.safetensors"])
