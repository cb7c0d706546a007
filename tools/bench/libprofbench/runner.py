"""The one way the benchmarks run a program: fork/exec/wait4 with wall time, CPU time (user +
sys of every thread and waited-for child, from wait4's rusage) and, on request, peak memory."""

import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path


class RunError(RuntimeError):
    """A program exited with a status other than 0."""


class Result:
    """One run: wall and CPU seconds, ru_maxrss (KiB; it counts the forked Python before exec
    too) and, for a run with sample=NAME, the peaks of VmHWM, RssAnon and RssFile in MiB; with
    capture=True the standard output and error as text."""

    def __init__(self, wall, cpu, maxrss_kib=0, hwm=0.0, anon=0.0, filed=0.0):
        self.wall, self.cpu, self.maxrss_kib = wall, cpu, maxrss_kib
        self.hwm, self.anon, self.filed = hwm, anon, filed
        self.out = self.err = ""

    def as_dict(self):
        return {"wall": self.wall, "cpu": self.cpu, "vmhwm_mib": self.hwm,
                "rss_anon_mib": self.anon, "rss_file_mib": self.filed}


def run(argv, stdout=os.devnull, cwd=None, env=None, err_log=os.devnull, sample=None,
        capture=False):
    """Runs argv (fork, exec, wait4) with its standard output into the file `stdout` and its
    standard error into `err_log`; raises RunError, with the tail of err_log, when it fails.
    With sample=NAME, /proc/PID/status is read every 2 ms once the child runs NAME (after
    taskset's exec) for the peaks of VmHWM, RssAnon and RssFile; VmHWM is the process's own
    high-water mark, which ru_maxrss is not. With capture=True both outputs are kept in the
    Result (out, err) instead."""
    argv = [str(a) for a in argv]
    err_log = err_log or os.devnull
    tmp = None
    if capture:
        tmp = tempfile.TemporaryDirectory(prefix="libprofbench-")
        stdout, err_log = os.path.join(tmp.name, "out"), os.path.join(tmp.name, "err")
    try:
        out_fd = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err_fd = os.open(err_log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # child
            try:
                if cwd:
                    os.chdir(cwd)
                os.dup2(out_fd, 1)
                os.dup2(err_fd, 2)
                os.execvpe(argv[0], argv, env if env is not None else os.environ)
            finally:
                os._exit(127)
        os.close(out_fd)
        os.close(err_fd)
        peak = {"VmHWM": 0, "RssAnon": 0, "RssFile": 0}
        if sample is None:
            _, status, ru = os.wait4(pid, 0)
        else:
            name = sample[:15]  # the kernel keeps 15 characters of a command's name
            while True:
                wpid, status, ru = os.wait4(pid, os.WNOHANG)
                if wpid:
                    break
                try:
                    with open(f"/proc/{pid}/status") as f:
                        fields = dict(line.split(":", 1) for line in f if ":" in line)
                    if fields.get("Name", "").strip() == name:
                        for key in peak:
                            if key in fields:
                                peak[key] = max(peak[key], int(fields[key].split()[0]))
                except (OSError, ValueError):
                    pass
                time.sleep(0.002)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        err_text = (Path(err_log).read_text(errors="replace")
                    if err_log != os.devnull and (capture or code != 0) else "")
        if code != 0:
            raise RunError(f"exit {code}: {shlex.join(argv)}\n{err_text[-2000:]}")
        r = Result(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss,
                   peak["VmHWM"] / 1024, peak["RssAnon"] / 1024, peak["RssFile"] / 1024)
        if capture:
            r.out, r.err = Path(stdout).read_text(errors="replace"), err_text
        return r
    finally:
        if tmp:
            tmp.cleanup()


def pinned(argv, cpus="0"):
    """argv run on `cpus` only (taskset), so a reader's speed is its speed on those cores; argv
    itself where taskset is missing."""
    return ["taskset", "-c", cpus, *argv] if shutil.which("taskset") else list(argv)


def clean_env():
    """The environment without the profiler's own variables (a PROF_OUT of the caller's)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PROF_") and k != "LD_PRELOAD"}


def base_env():
    """clean_env() without the hook libraries' variables either."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith("PROF_")
            and k not in ("FLOOR_OUT", "COUNT_OUT", "MEMFLOOR_OUT", "LD_PRELOAD")}


def remove(path):
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def path_bytes(path):
    """Bytes of a file, or of every file under a directory; 0 when missing."""
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size if path.exists() else 0


def event_logger(tool):
    """log(event, key=value, ...): one `TOOL: event=... key=value ...` line on standard error,
    values quoted where they hold spaces, quotes or '='."""
    def text(v):
        if isinstance(v, float):
            v = f"{v:.3f}"
        v = str(v)
        return json.dumps(v) if not v or re.search(r'[\s"=]', v) else v

    def log_event(event, **fields):
        parts = [f"event={event}"] + [f"{k}={text(v)}" for k, v in fields.items()]
        print(f"{tool}: " + " ".join(parts), file=sys.stderr, flush=True)
    return log_event
