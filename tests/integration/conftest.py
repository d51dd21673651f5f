# SPDX-License-Identifier: MIT
# Shared fixtures for the behaviour tests: they drive the built `kis` binary.
import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest

import kis_schema

ROOT = Path(__file__).resolve().parents[2]
# The test build (make test-build): build/kis with the test seams of
# src/core/test_hook.h (a stand-in VMM, a pause at a point, ...), which the
# released build/kis does not read (test_shipped.py checks that).
KIS = Path(os.environ.get("KIS", ROOT / "build" / "test" / "kis"))
# What ships, for the tests of what ships
KIS_RELEASE = ROOT / "build" / "kis"

PROC = ["--tier", "process", "--allow-process-tier"]


def kis(*args, input=None, env=None, timeout=60, check=None):
    """Run `kis sandbox ARGS...`; returns CompletedProcess with text output."""
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run([str(KIS), "sandbox", *args], input=input, capture_output=True,
                       text=True, env=e, timeout=timeout)
    # the JSON contract: every --json document any test makes is checked
    # against its schema in docs/schema (kis_schema.py)
    kis_schema.check_output(args, p.stdout, p.returncode)
    return p


def kis_json(*args, **kw):
    """Run with --json and parse the result document."""
    p = kis("run", "--json", *args, **kw)
    assert p.stdout.strip(), f"no JSON on stdout; stderr={p.stderr!r}"
    return p, json.loads(p.stdout)


@pytest.fixture(autouse=True, scope="session")
def _built():
    if not KIS.exists():
        pytest.exit(f"{KIS} is missing: run 'make all test-build' first", returncode=2)


V1_CTRLS = ("memory", "pids", "cpuacct", "cpu")


def _own_v1_groups():
    """{controller: this process's group path} in the v1 hierarchies kis
    uses (a controller mounted with others, cpu,cpuacct, counts once)."""
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        for c in V1_CTRLS:
            if c in ctrls.split(",") and (Path("/sys/fs/cgroup") / c).is_dir():
                own[c] = path
    return own


def _kis_cgroups():
    """The leaves kis made under its parent cgroups (s-<run>, p-<probe>),
    in the v1 hierarchies it uses, as seen from this process's groups."""
    found = set()
    for c, path in _own_v1_groups().items():
        base = Path("/sys/fs/cgroup") / c / path.lstrip("/") / "kis"
        try:
            found |= {str(d) for d in base.iterdir()
                      if d.is_dir() and d.name.startswith(("s-", "p-"))}
        except OSError:
            pass
    return found


def _enter_suite_groups():
    """Move this process into a group of its own under its group in each
    v1 hierarchy kis uses: kis puts a run's groups under `<its own
    group>/kis`, so the suite's runs (children of this process) make theirs
    under the suite's group, and the leftover check sees only them, not
    another kis user's on the same machine (issue 40). Returns what to undo:
    [(controller, old path, suite dir)]; [] where it cannot (not root, no
    v1), and the check then falls back to counting the shared parent."""
    if os.geteuid() != 0:
        return []
    made = []
    for c, path in _own_v1_groups().items():
        top = Path("/sys/fs/cgroup") / c
        old = top / path.lstrip("/")
        suite = old / f"kis-suite-{os.getpid()}"
        try:
            suite.mkdir(exist_ok=True)
            (suite / "cgroup.procs").write_text(str(os.getpid()))
            made.append((c, old, suite))
        except OSError:
            try:
                suite.rmdir()
            except OSError:
                pass
    return made


def _suite_pids(suite):
    pids = set()
    for d in [suite, *(p for p in suite.rglob("*") if p.is_dir())]:
        try:
            pids |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
        except (OSError, ValueError):
            pass
    return pids - {os.getpid()}


def _leave_suite_groups(made):
    """Back to the groups the suite came from, and the suite's groups
    removed. A process of the suite's that outlived it (a detached wasm
    tier-up compile, a daemon a failed test did not stop) keeps its group
    busy: it is the suite's own, so it is ended, and the groups go with it
    (before, each such suite left an empty group at the hierarchies'
    root, one more per run)."""
    for c, old, suite in made:
        try:
            (old / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            continue  # still a member: the group cannot go
    for c, old, suite in made:
        end = time.monotonic() + 5
        while (left := _suite_pids(suite)) and time.monotonic() < end:
            for pid in left:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            time.sleep(0.05)
        if not suite.is_dir():
            continue  # cpu and cpuacct: one hierarchy, two names
        for d in sorted((p for p in suite.rglob("*") if p.is_dir()),
                        key=lambda p: len(p.parts), reverse=True):
            try:
                d.rmdir()
            except OSError:
                pass
        try:
            suite.rmdir()
        except OSError:
            pass


@pytest.fixture(autouse=True, scope="session")
def _no_cgroup_left():
    """Every test cleans up after itself, also a test that kills the
    engine: no run's cgroup may outlive the suite (one that did, a SIGKILL
    without a gc, left a set per run of the suite). Only the suite's own
    runs count: they make their groups under the suite's group."""
    made = _enter_suite_groups()
    before = _kis_cgroups()
    try:
        yield
        time.sleep(0.5)  # a run's teardown that is still under way
        left = sorted(_kis_cgroups() - before)
        assert not left, f"cgroups left by the tests: {left}"
    finally:
        _leave_suite_groups(made)


@pytest.fixture(autouse=True)
def _no_system_guest(monkeypatch):
    """A guest installed on this machine (`make install`: the system
    location, issue 19) would make auto pick the microvm for every test
    that pins no tier: unless a test names its guest, there is none."""
    if "KIS_MICROVM_GUEST_DIR" not in os.environ:
        monkeypatch.setenv("KIS_MICROVM_GUEST_DIR", "/nonexistent/kis-no-guest")


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A private store root for tests that make bases and workspaces."""
    root = tmp_path / "store"
    monkeypatch.setenv("KIS_SANDBOX_ROOT", str(root))
    return root


_MAXRSS_WRAPPER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
sys.stderr.write("%d %d\\n" % (os.waitstatus_to_exitcode(status), ru.ru_maxrss))
"""


def kis_maxrss(args, env=None, timeout=120):
    """Run `kis sandbox ARGS...` with stdout to a file; returns (rc, stdout
    bytes, the peak resident size of kis in bytes). Measured by wait4(2) in
    a fresh small parent: a process's ru_maxrss survives exec and starts at
    its parent's size at fork, so kis forked from this test would carry
    the test's own size."""
    import sys
    import tempfile
    e = dict(os.environ)
    if env:
        e.update(env)
    with tempfile.TemporaryFile() as out:
        p = subprocess.run([sys.executable, "-c", _MAXRSS_WRAPPER, str(KIS), "sandbox", *args],
                           stdout=out, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           env=e, timeout=timeout, text=True)
        out.seek(0)
        rc, kib = (int(x) for x in p.stderr.split()[-2:])
        return rc, out.read(), kib * 1024


# A command run as nobody, with no supplementary groups (util-linux setpriv)
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


def userns_off():
    """Why an ordinary user cannot make a user namespace here, or None."""
    for f, what in (("/proc/sys/user/max_user_namespaces", "user.max_user_namespaces"),
                    ("/proc/sys/kernel/unprivileged_userns_clone",
                     "kernel.unprivileged_userns_clone")):
        try:
            if int(Path(f).read_text()) == 0:
                return f"unprivileged user namespaces are off ({what} = 0)"
        except FileNotFoundError:
            pass
    return None


def children_of(ppid):
    """The pids whose parent is ppid (/proc/PID/stat's fourth field; a
    process that ends meanwhile is left out)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            st = Path(f"/proc/{pid}/stat").read_text()
            if int(st.rsplit(")", 1)[1].split()[1]) == ppid:
                out.append(int(pid))
        except (OSError, ValueError, IndexError):
            continue
    return out


def qemu_pids(marker):
    """QEMU processes with a file open under marker (the jailed VMM names no
    host path on its command line: its disks and log are fds)."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
            if not cmd or not cmd[0].endswith(b"qemu-system-x86_64"):
                continue
            links = [os.readlink(f) for f in (d / "fd").iterdir()]
        except OSError:
            continue
        if any(str(marker) in l for l in links):
            pids.append(int(d.name))
    return pids


def read_pty(fd, timeout=10, idle=False):
    """What a pseudo-terminal's master (or any fd) gives until its last
    writer closes it (EOF, or EIO on a pty) or timeout seconds pass (with
    idle, timeout seconds with nothing read: a download's progress may go
    on for longer)."""
    out, end = b"", time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0:
        r, _, _ = select.select([fd], [], [], min(left, 0.2))
        if not r:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the last writer closed
            break
        if not chunk:
            break
        out += chunk
        if idle:
            end = time.monotonic() + timeout
    return out


def stderr_on_pty(args, env, timeout=120):
    """Run kis with stderr on a pseudo-terminal (stdout a pipe); returns
    (rc, stdout, what the terminal received)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([str(KIS), "sandbox", *args], stdout=subprocess.PIPE,
                         stderr=slave, stdin=subprocess.DEVNULL, env=dict(os.environ, **env))
    os.close(slave)
    seen = read_pty(master, timeout, idle=True)
    out = p.stdout.read().decode()
    rc = p.wait(timeout=timeout)
    os.close(master)
    return rc, out, seen.decode(errors="replace")


# In the sandbox: print the terminal's size, wait (up to 15 s) until it is
# no longer that one, then print it again. The test resizes once the first
# size is out, so neither side leans on a sleep that a busy machine outlasts.
WAIT_RESIZE = ('first=$(stty size); echo "$first"; i=0; '
               'while [ "$(stty size)" = "$first" ] && [ $i -lt 150 ]; '
               'do sleep 0.1; i=$((i+1)); done; stty size')
