"""One parser of `perf script -F comm,pid,tid,period,ip,sym,dso` output."""

import re
import subprocess
from collections import namedtuple

# `perf script -F` fields every benchmark asks for.
SCRIPT_FIELDS = "comm,pid,tid,period,ip,sym,dso"
END_OF_CHAIN = 0xFFFFFFFFFFFFFFFF
KERNEL_START = 0xFFFF800000000000

FRAME = re.compile(r"^\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)$")
PID_TID = re.compile(r"\s(\d+)/\d+\s")

# comm: the header's first word; pid: from its `PID/TID` (None without one); period: its last
# word (1.0 when that is no number); frames: [(ip, sym, dso)] from the leaf.
Sample = namedtuple("Sample", "comm pid period frames")


def parse(lines, pid=None):
    """Samples of perf script output: a header line per sample, then its frames one a line from
    the leaf (`ip sym (dso)`; an inlined function's entry has the address of its physical
    frame), then a blank line. With `pid`, the samples of that process only."""
    out, head, frames = [], None, []

    def finish():
        if head is None:
            return
        m = PID_TID.search(" " + head + " ")
        sample_pid = int(m.group(1)) if m else None
        if pid is not None and sample_pid != pid:
            return
        words = head.split()
        try:
            period = float(words[-1])
        except (IndexError, ValueError):
            period = 1.0
        out.append(Sample(words[0] if words else "", sample_pid, period, frames))

    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            finish()
            head, frames = None, []
        elif line[0] not in " \t":
            finish()
            head, frames = line, []
        else:
            m = FRAME.match(line)
            if m:
                frames.append((int(m.group(1), 16), m.group(2), m.group(3)))
    finish()
    return out


def read(path, pid=None):
    """parse() of a file of perf script output."""
    with open(path, errors="replace") as f:
        return parse(f, pid)


def is_kernel(frame):
    return frame[0] >= KERNEL_START and frame[0] != END_OF_CHAIN


def script(data, out, *options):
    """Runs `perf script -i DATA OPTIONS -F SCRIPT_FIELDS` into the file `out`; returns the
    CompletedProcess (its stderr as text) for the caller's checks."""
    with open(out, "w") as f:
        return subprocess.run(["perf", "script", "-i", str(data), *options, "-F", SCRIPT_FIELDS],
                              stdout=f, stderr=subprocess.PIPE, text=True)
