"""The SQLite amalgamation (fetched once, or a local stand-in for smoke runs) and the sqlite_mix
workload built from it, instrumented with -finstrument-functions or not."""

import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tarfile
import time
from pathlib import Path

from .host import build_type, first_line, git_revision
from .build import WORKLOADS, check as _check, sha256, stale

# The package whose tarball carries the SQLite amalgamation (deps/sqlite3/sqlite3.c). Pinned, so
# that two runs build the same SQLite; --sqlite-package takes another.
SQLITE_PACKAGE = "better-sqlite3@12.11.1"
DRIVER = WORKLOADS / "sqlite_mix.c"
# What prof::instrument adds for each compiler (libprof/CMakeLists.txt), on a -O2 -g build;
# -fno-optimize-sibling-calls keeps every call of the source a call, as prof::instrument does.
CFLAGS = ["-O2", "-g"]
FI_FLAGS = {
    "gcc": ["-finstrument-functions", "-fno-optimize-sibling-calls",
            "-finstrument-functions-exclude-file-list=/usr/include"],
    "clang": ["-finstrument-functions-after-inlining", "-fno-optimize-sibling-calls"],
}
LIBS = ["-lpthread", "-ldl", "-lm"]

# A stand-in for the amalgamation where none can be fetched (the smoke test): the system's
# sqlite3.h, an empty sqlite3.c, and the system's libsqlite3 linked instead (STANDIN names it).
STANDIN = "STANDIN"
SYSTEM_HEADER = Path("/usr/include/sqlite3.h")


def log(msg):
    """Progress of fetching and building; the scripts replace it with their own logger."""
    print(f"report_speed: {msg}", file=sys.stderr, flush=True)


def check(cmd, cwd=None, env=None):
    return _check(cmd, "report_speed", cwd=cwd, env=env, tail=4000)


def fetch_sqlite(work, package, src):
    """The directory holding sqlite3.c and sqlite3.h: --sqlite-src, or the amalgamation from
    the package's tarball, downloaded once (npm pack) and extracted once."""
    if src:
        src = src.resolve()
        for f in ("sqlite3.c", "sqlite3.h"):
            if not (src / f).is_file():
                sys.exit(f"report_speed: {src / f} not found (--sqlite-src wants the amalgamation)")
        return src
    dest = work / "download" / re.sub(r"[^A-Za-z0-9._-]", "_", package)
    if (dest / "sqlite3.c").is_file() and (dest / "sqlite3.h").is_file():
        return dest
    dest.mkdir(parents=True, exist_ok=True)
    tgz = next(iter(sorted(dest.glob("*.tgz"))), None)
    if tgz is None:
        if shutil.which("npm") is None:
            sys.exit("report_speed: npm not found (apt-get install npm), or give --sqlite-src DIR")
        log(f"downloading {package} (npm pack) into {dest}")
        out = check(["npm", "pack", "--json", package], cwd=dest)
        tgz = dest / json.loads(out[out.index("["):])[0]["filename"]
    log(f"extracting the SQLite amalgamation from {tgz.name}")
    with tarfile.open(tgz) as tar:
        found = {}
        for m in tar.getmembers():
            base = m.name.rsplit("/", 1)[-1]
            if m.isfile() and "/deps/" in m.name and base in ("sqlite3.c", "sqlite3.h"):
                found[base] = m
        if len(found) == 2:
            for base, m in found.items():
                (dest / base).write_bytes(tar.extractfile(m).read())
        else:  # older releases kept the amalgamation as a tarball inside deps/
            inner = [m for m in tar.getmembers() if m.isfile() and "/deps/" in m.name
                     and re.search(r"\.tar(\.gz|\.xz|\.bz2)?$", m.name)]
            if not inner:
                sys.exit(f"report_speed: no deps/sqlite3.c (nor a tarball of it) in {tgz}")
            with tarfile.open(fileobj=tar.extractfile(inner[0])) as sub:
                for m in sub.getmembers():
                    base = m.name.rsplit("/", 1)[-1]
                    if m.isfile() and base in ("sqlite3.c", "sqlite3.h"):
                        (dest / base).write_bytes(sub.extractfile(m).read())
    if not (dest / "sqlite3.c").is_file():
        sys.exit(f"report_speed: no sqlite3.c in {tgz}")
    return dest


def sqlite_version(src):
    m = re.search(r'#define SQLITE_VERSION\s+"([^"]+)"', (src / "sqlite3.h").read_text(errors="replace"))
    return m.group(1) if m else "unknown"


def build_program(work, src, cc, build, instrument=True):
    """sqlite3.c and the driver compiled with -finstrument-functions, linked with libprof.so of
    the build directory (found at run time through the rpath). Rebuilt when an input or the
    flags change; sqlite3.o (a minute or more of compiling) is kept otherwise. With
    instrument=False: the same sources and CFLAGS without the instrumentation flags and without
    libprof, in plain-CC/ (the uninstrumented build true_time.py samples with perf)."""
    out = work / (f"build-{cc}" if instrument else f"plain-{cc}")
    out.mkdir(parents=True, exist_ok=True)
    libdir = build / "libprof"
    if instrument and not any(libdir.glob("libprof.so*")):
        sys.exit(f"report_speed: {libdir}/libprof.so not found (ninja -C {build} prof profreport)")
    fi_flags = FI_FLAGS[cc] if instrument else []
    flags = [*CFLAGS, *fi_flags, "-I", str(src)]
    stamp = out / "flags.txt"
    changed = not stamp.exists() or stamp.read_text() != shlex.join(flags)
    objs = []
    for source, obj in ((src / "sqlite3.c", out / "sqlite3.o"), (DRIVER, out / "sqlite_mix.o")):
        if changed or stale(obj, [source]):
            log(f"compiling {source.name} with {cc} {shlex.join(fi_flags) or '(uninstrumented)'}")
            t0 = time.monotonic()
            check([cc, *flags, "-c", source, "-o", obj])
            log(f"compiled {source.name} in {time.monotonic() - t0:.0f} s")
        objs.append(obj)
    stamp.write_text(shlex.join(flags))
    binary = out / "sqlite_mix"
    # Linked again when the link line changes too: another --build means another rpath.
    prof = [f"-L{libdir}", f"-Wl,-rpath,{libdir}", "-lprof"] if instrument else []
    link = [cc, "-o", binary, *objs, *prof, *link_libs(src)]
    link_stamp, link_line = out / "link.txt", shlex.join(map(str, link))
    if stale(binary, objs) or not link_stamp.exists() or link_stamp.read_text() != link_line:
        check(link)
        link_stamp.write_text(link_line)
    # What the traces are recorded from: the sources, the compiler and its flags (not the
    # binary's bytes, which change with the checkout's path in the debugging information).
    h = hashlib.sha256(shlex.join([cc, *CFLAGS, *fi_flags]).encode())
    for source in (src / "sqlite3.c", DRIVER):
        h.update(sha256(source).encode())
    return binary, h.hexdigest()


def link_libs(src):
    """The libraries sqlite_mix links with: LIBS, after the system's SQLite for a stand-in (whose
    sqlite3.o is empty)."""
    system = (src / STANDIN).read_text().split() if (src / STANDIN).is_file() else []
    return [*system, *LIBS]


def standin(work):
    """The stand-in directory for --sqlite-src, or None without the system's SQLite headers."""
    if not SYSTEM_HEADER.is_file():
        return None
    dest = work / "sqlite-standin"
    dest.mkdir(parents=True, exist_ok=True)
    files = {"sqlite3.h": SYSTEM_HEADER.read_text(),
             "sqlite3.c": "/* stand-in: the system's libsqlite3 is linked instead */\n",
             STANDIN: "-lsqlite3\n"}
    for name, text in files.items():  # written whole, then renamed: smoke runs share the directory
        if not (dest / name).is_file() or (dest / name).read_text() != text:
            tmp = dest / f".{name}.{os.getpid()}"
            tmp.write_text(text)
            os.replace(tmp, dest / name)
    return dest


def tools_line(repo, build, cc):
    rev = git_revision(repo, ["libprof", "tools/profreport"], "libprof/ or tools/profreport/")
    return (f"{first_line([cc, '--version'])}; profreport and libprof at {rev} "
            f"({build_type(build)} build in {build})")
