"""The machine, its load and the tools' versions, as the benchmark reports print them."""

import os
import platform
import re
import subprocess
from pathlib import Path


def machine_line():
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), Linux {platform.release()}"


def loadavg():
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def first_line(cmd):
    """The first line a command prints (a --version), or "not found"."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "not found"


def git_revision(repo, paths, what):
    """The short HEAD of the checkout, with a note when `paths` have uncommitted changes."""
    rev = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "--no-optional-locks", "-C", str(repo), "status", "--porcelain",
                            "--", *paths], capture_output=True, text=True).stdout.strip()
    return rev + (f" with uncommitted changes under {what}" if dirty else "")


def build_type(build):
    """CMAKE_BUILD_TYPE of a build directory ("?" without a cache, "none" when empty)."""
    cache = Path(build) / "CMakeCache.txt"
    if not cache.exists():
        return "?"
    m = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", cache.read_text(errors="replace"), re.M)
    return m.group(1) if m and m.group(1) else "none"
