"""Which process owns something, and whether it still lives: the one rule behind every "is this left over from a
dead process?" check (temporary files of a GGUF conversion, a RUNNING MLflow run of the same job).

An owner is `<host>:<pid>`. On this host a process is alive while the kernel has it and it is not a zombie; a
process of another host cannot be asked, so whoever reads an owner of another host decides by a heartbeat time.

>>> owner = this_owner()
>>> parse_owner(owner) == (host(), os.getpid()) and is_alive(owner)
True
>>> parse_owner("not an owner") is None
True
"""
from __future__ import annotations

import os
import re
import socket
from pathlib import Path


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
