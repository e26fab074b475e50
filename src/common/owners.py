"""Which process owns something, and whether it still lives: the one rule behind every "is this left over from a
dead process?" check (temporary files of a GGUF conversion or a data fetch, a RUNNING MLflow run of the same job).

A temporary file or folder is written beside its target as `.<name>.tmp-<host>-<pid>-<random>` and renamed into
place when whole; `clean_stale_temps` removes those whose owner is gone (`temp_prefix`, `TEMP_NAME`).

An owner is `<host>:<pid>`. On this host a process is alive while the kernel has it and it is not a zombie; a
process of another host cannot be asked, so whoever reads an owner of another host decides by a heartbeat time.

>>> owner = this_owner()
>>> parse_owner(owner) == (host(), os.getpid()) and is_alive(owner)
True
>>> parse_owner("not an owner") is None
True
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


def cache_root() -> Path:
    """The tool's cache folder, shared by its processes: $MCQ_CACHE_DIR, else ~/.cache/mcq-consistency."""
    base = os.environ.get("MCQ_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "mcq-consistency").expanduser()


def host() -> str:
    """This machine's name, reduced to characters safe in file names and tags."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"


def this_owner() -> str:
    return f"{host()}:{os.getpid()}"


def parse_owner(owner: str | None) -> tuple[str, int] | None:
    """(host, pid) of an owner string, or None when it is not one."""
    match = re.fullmatch(r"([A-Za-z0-9_.]+):(\d+)", owner or "")
    return (match[1], int(match[2])) if match else None


def pid_alive(pid: int) -> bool:
    """Whether process `pid` of this host still runs (a zombie, killed and not yet reaped, does not)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def is_alive(owner: str | None) -> bool | None:
    """True/False for an owner on this host; None when it cannot be told here (another host, or no owner)."""
    parsed = parse_owner(owner)
    if parsed is None or parsed[0] != host():
        return None
    return pid_alive(parsed[1])


# `.<name>.tmp-<host>-<pid>-<random>`; the old layout's `.<name>.tmp-<random>` has no owner (host and pid None)
TEMP_NAME = re.compile(r"^\.(?P<name>.+?)\.tmp-(?:(?P<host>[A-Za-z0-9_.]+)-(?P<pid>\d+)-)?[A-Za-z0-9_]+$")
FOREIGN_STALE_S = 24 * 3600  # a temp of another host, or of no known owner, is removed once this old


def temp_prefix(name: str) -> str:
    """`.<name>.tmp-<host>-<pid>-`: the start of the name of this process's temporary copy of `name` (a hidden
    name that no reader globbing for `name`'s pattern picks up), for `clean_stale_temps`."""
    return f".{name}.tmp-{host()}-{os.getpid()}-"


def clean_stale_temps(folders: list[Path], what: str = "an interrupted write", *, ownerless: bool = True) -> list[Path]:
    """Remove the temporary folders and files (named by `temp_prefix`) in `folders` whose process is gone: those of
    this host whose pid no longer runs, and those of another host once `FOREIGN_STALE_S` old; with `ownerless`,
    also the old `.<name>.tmp-<random>` names without an owner, once that old (only in folders that are all ours:
    elsewhere such a name may be someone else's file). Returns what it removed. A temp whose process is alive is
    left alone."""
    removed = []
    for folder in folders:
        try:
            entries = list(Path(folder).iterdir())
        except OSError:
            continue
        for entry in entries:
            match = TEMP_NAME.match(entry.name)
            if not match or not (ownerless or match["pid"]):
                continue
            if match["pid"] and match["host"] == host():
                stale = not pid_alive(int(match["pid"]))
            else:
                try:
                    stale = time.time() - entry.lstat().st_mtime > FOREIGN_STALE_S
                except OSError:
                    continue
            if not stale:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            if not entry.exists():
                log.info("removed %s, left by %s", entry, what)
                removed.append(entry)
    return removed


def write_whole(target: Path, write: Callable[[Path], object], what: str = "an interrupted write") -> None:
    """`write(temporary path)` beside `target`, then renamed onto it: the one rule behind every file the tool
    writes for others to read (a fetched data file, a converted model, a cache index, a store). A reader sees the
    old file or the new one, whole, never a half-written one; a write killed halfway leaves only a temporary named
    by `temp_prefix`, which `clean_stale_temps` removes once its process is gone (`what` says what left it)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps([target.parent], what, ownerless=False)  # the folder may hold the user's own files
    tmp = target.parent / f"{temp_prefix(target.name)}{os.urandom(4).hex()}"
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def replace_folder_whole(target: Path, write: Callable[[Path], T]) -> T:
    """`write(a fresh folder)` beside `target`, then swapped onto it by renames; returns what `write` returned. A
    reader sees the old folder or the new one, whole: a write that fails (or is interrupted) leaves the previous
    folder in place and removes the fresh one. The fresh folder is `.<name>.new-<random>`; the previous one is
    moved to `.<name>.old-<random>/` for the swap and removed after it. The caller decides whether `target` may
    be replaced at all."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh = Path(tempfile.mkdtemp(prefix=f".{target.name}.new-", dir=target.parent))
    old: Path | None = None
    try:
        made = write(fresh)
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent)) / "previous"
            os.replace(target, old)
        os.replace(fresh, target)
    except BaseException:
        if old is not None and old.exists() and not target.exists():
            os.replace(old, target)  # the previous folder back in its place
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    finally:
        if old is not None:  # the previous folder, once replaced
            shutil.rmtree(old.parent, ignore_errors=True)
    return made
