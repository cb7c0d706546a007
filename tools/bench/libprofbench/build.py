"""Building for the benchmarks: the one helper that compiles a workload with the flags a
benchmark compares (instrumented or not, frame pointers or not), and the programs CMake builds
with PROF_BUILD_BENCH=ON."""

import hashlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent   # tools/bench
REPO = HERE.parent.parent
WORKLOADS = HERE / "workloads"
HOOKS = HERE / "hooks"

CXX = os.environ.get("CXX", "g++")
COMMON_FLAGS = ["-std=c++20", "-O2", "-g", "-fno-omit-frame-pointer",
                "-fno-optimize-sibling-calls", "-pthread"]
# What prof::instrument uses with GCC: without the exclude list every inlined standard-library
# helper gets its own hooks.
FI_FLAGS = ["-finstrument-functions", "-finstrument-functions-exclude-file-list=/usr/include"]

# The hook libraries tools/bench/CMakeLists.txt builds (PROF_BUILD_BENCH=ON), by the name the
# benchmarks give them: lib<name>.so in <build>/tools/bench.
HOOK_LIBRARIES = ("floor", "floor_noclock", "empty", "count",
                  "memfloor_count", "memfloor_event", "memfloor_stack")


def check(cmd, tool="bench", cwd=None, env=None, tail=None):
    """Runs a build step; on failure shows its output (its last `tail` characters) and stops."""
    r = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, cwd=cwd, env=env)
    if r.returncode != 0:
        out = r.stdout[-tail:] if tail else r.stdout
        sys.exit(f"{tool}: command failed ({r.returncode}): {shlex.join(map(str, cmd))}\n{out}")
    return r.stdout


def stale(out, inputs):
    """Whether `out` is missing or older than one of `inputs`."""
    return not out.exists() or any(out.stat().st_mtime < Path(i).stat().st_mtime for i in inputs)


def compile_if_stale(out, inputs, cmd, tool="bench"):
    """Runs the compile command `cmd` when `out` is stale against `inputs`; returns `out`."""
    if stale(out, inputs):
        check(cmd, tool)
    return out


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def bench_dir(build):
    """Where a libprof build directory keeps the programs of tools/bench."""
    return Path(build) / "tools" / "bench"


def built(build, name):
    """A program or library of tools/bench/CMakeLists.txt in the build directory, or None when
    that build was configured without PROF_BUILD_BENCH=ON (or has not built it yet)."""
    path = bench_dir(build) / name
    return path if path.exists() else None


def has_hooks(build):
    """Whether the build holds every hook library (PROF_BUILD_BENCH=ON, built)."""
    return all(built(build, f"lib{n}.so") for n in HOOK_LIBRARIES)
