# SPDX-License-Identifier: MIT
# kis-runtime's verbs on a container whose state directory was forged: what
# delete, kill and state read back (state.json's ids, store, pid; info.json's
# child; a host tier's cgroup records) is checked before it is acted on
# (src/runtime/state_check.c). Each state is written by hand, as a forger
# would, so no container boots; each test is judged by its effect on things
# outside the runtime's store (a directory still there, a process alive, a
# cgroup not emptied), then the forged directory is removed by the test.
import json
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from test_runtime import LAYOUT, krt, roots, work  # noqa: F401  (fixtures)


def _starttime(pid):
    """Field 22 of /proc/PID/stat (proc(5)): what kis-runtime checks a
    recorded pid against."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _alive(p):
    return p.poll() is None


@pytest.fixture
def victim():
    """A process of the test's own, standing in for a host process the
    forged state names; killed (if still alive) at the end."""
    p = subprocess.Popen(["sleep", "1000"])
    yield p
    p.kill()
    p.wait()


def _forge(kr, tier, cid, state, files=None):
    d = Path(kr) / tier / cid
    d.mkdir(parents=True)
    (d / "state.json").write_text(json.dumps(state))
    for name, text in (files or {}).items():
        (d / name).write_text(text)
    return d


def _dead_pid():
    """A pid that names no process now (one of ours, reaped)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _victim_store(tmp_path):
    """A store elsewhere, laid out as the runtime's (workspaces, bases):
    what a forged "store" points delete at."""
    s = tmp_path / f"victim-store-{uuid.uuid4().hex[:6]}"
    for sub in ("workspaces/w-x", "bases/b-x", "sessions/s-x"):
        (s / sub).mkdir(parents=True)
    return s


def _untouched(store):
    return all((store / sub).is_dir() for sub in ("workspaces/w-x", "bases/b-x", "sessions/s-x"))


# ---------------------------------------------------------------- kis-vm


def test_mvm_delete_ignores_a_store_path_in_state(work, roots, tmp_path):
    """A state.json naming a store elsewhere (as kis-runtime once wrote
    one) with ids of their kinds: delete undoes in the runtime's own store
    only, and the other store's workspace, base and session stay."""
    kr, _ = roots
    store = _victim_store(tmp_path)
    d = _forge(kr, "kis-microvm", "forged", {
        "id": "forged", "pid": _dead_pid(), "starttime": 0, "store": str(store),
        "session": "s-x", "workspace": "w-x", "base": "b-x"})
    p = krt(kr, "delete", "--force", "forged")
    assert p.returncode == 0, p.stderr
    assert not d.exists()
    assert _untouched(store), list(store.rglob("*"))


@pytest.mark.parametrize("field,value", [
    ("workspace", "../../{store}/workspaces/w-x"),   # a path out of the store
    ("base", "{store}/bases/b-x"),                    # an absolute path
    ("session", "w-x"),                               # an id of another kind
    ("pod_sandbox", "../forged"),                     # a container id that is a path
    ("id", "another"),                                # another container's state
], ids=["traversal", "absolute", "wrong-kind", "sandbox-path", "other-id"])
def test_mvm_delete_refuses_a_forged_id_and_removes_nothing(work, roots, tmp_path, field, value):
    kr, _ = roots
    store = _victim_store(tmp_path)
    st = {"id": "forged", "pid": _dead_pid(), "starttime": 0, "store": str(store),
          "session": "s-x", "workspace": "w-x", "base": "b-x", "pod": "container",
          "pod_session": "s-x", "pod_sandbox": "krt-sb"}
    st[field] = value.format(store=store)
    d = _forge(kr, "kis-microvm", "forged", st)
    try:
        for verb in (["delete", "--force"], ["kill", "forged", "KILL"], ["state"]):
            args = verb if verb[0] == "kill" else verb + ["forged"]
            p = krt(kr, *args)
            assert p.returncode != 0, (verb, p.stdout)
            assert "invalid_id" in p.stderr and f"'{field}'" in p.stderr, p.stderr
        assert d.is_dir() and _untouched(store)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# -------------------------------------------------------------- both tiers


@pytest.mark.parametrize("tier", ["kis-host", "kis-microvm"])
def test_kill_refuses_a_pid_that_wraps_to_another_process(work, roots, victim, tier):
    """A pid past pid_t's range whose low 32 bits are a host process's,
    its start time that process's: once cast it named the victim, whose
    start time matched, and kill signalled it. It is refused by name."""
    kr, _ = roots
    d = _forge(kr, tier, "forged", {"id": "forged", "pid": (1 << 32) + victim.pid,
                                     "starttime": _starttime(victim.pid)},
               {"started": ""})
    try:
        k = krt(kr, "kill", "forged", "KILL")
        dl = krt(kr, "delete", "--force", "forged")
        try:
            victim.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
        assert _alive(victim), "the forged pid's process was killed"
        for p in (k, dl):
            assert p.returncode != 0 and "'pid'" in p.stderr, (p.returncode, p.stderr)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------- kis-host


def test_host_kill_takes_no_child_pid_that_is_not_bwraps_child(work, roots, victim):
    """info.json's child-pid (bwrap's --info-fd) is the container's
    process only while it is the child of the recorded, start-time-checked
    pid: a forged one naming another process is not signalled."""
    kr, _ = roots
    own = subprocess.Popen(["sleep", "1000"])  # stands in for bwrap: the state's pid
    try:
        d = _forge(kr, "kis-host", "forged",
                   {"id": "forged", "pid": own.pid, "starttime": _starttime(own.pid),
                    "net": 0},
                   {"started": "", "info.json": json.dumps({"child-pid": victim.pid})})
        # the child named is not bwrap's: the container is taken as
        # stopped (its process gone), or its own pid is signalled
        krt(kr, "kill", "forged", "TERM")
        assert _alive(victim), "kill signalled the process info.json named"
        p = krt(kr, "delete", "--force", "forged")
        assert p.returncode == 0, p.stderr
        assert not d.exists() and _alive(victim)
    finally:
        own.kill()
        own.wait()


def test_host_exec_refuses_a_forged_net_mode(work, roots):
    kr, _ = roots
    d = _forge(kr, "kis-host", "forged",
               {"id": "forged", "pid": _dead_pid(), "starttime": 0, "net": 7})
    try:
        p = krt(kr, "delete", "--force", "forged")
        assert p.returncode != 0 and "'net'" in p.stderr, p.stderr
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _cgroup_base():
    return {2: "/sys/fs/cgroup", 1: "/sys/fs/cgroup/pids", 3: "/sys/fs/cgroup/pids"}.get(LAYOUT)


@pytest.fixture
def victim_cgroup(victim):
    """A group of the test's own holding the victim, with an empty child
    x: "<group>/x/.." names the group (a trailing ".." passed the old
    check, which looked for "/../" only)."""
    base = _cgroup_base()
    if not base or not os.access(base, os.W_OK):
        pytest.skip("no writable cgroup hierarchy (pids on v1, the unified one on v2)")
    g = Path(base) / f"kis-victim-{uuid.uuid4().hex[:8]}"
    (g / "x").mkdir(parents=True)
    try:
        (g / "cgroup.procs").write_text(f"{victim.pid}\n")
        yield g
    finally:
        victim.kill()
        victim.wait()
        for d in (g / "x", g):
            try:
                d.rmdir()
            except OSError:
                pass


@pytest.mark.parametrize("record", ["cgroups.noted", "host-cgroup"])
def test_host_delete_destroys_no_cgroup_a_record_names_by_dotdot(work, roots, victim,
                                                                 victim_cgroup, record):
    kr, _ = roots
    path = f"{victim_cgroup}/x/.."
    if record == "cgroups.noted":
        text = f"made {path}\ncgroup {path}\n"
    else:
        # confine/cgroup.c's record: the mode, then each slot's leaf and parent
        text = f"{2 if LAYOUT == 2 else 1}\n{path}\n-\n" + "-\n" * 64
    d = _forge(kr, "kis-host", "forged",
               {"id": "forged", "pid": _dead_pid(), "starttime": 0, "net": 0}, {record: text})
    p = krt(kr, "delete", "--force", "forged")
    assert p.returncode == 0, p.stderr
    assert not d.exists()
    assert _alive(victim), "the group a record named by '..' was destroyed"
    assert victim_cgroup.is_dir()
    assert str(victim.pid) in (victim_cgroup / "cgroup.procs").read_text()


def test_host_delete_removes_an_absent_noted_leaf_only_when_empty(work, roots, victim,
                                                                  victim_cgroup):
    """A create killed during a leaf's mkdir (a v1 memory group's takes
    milliseconds) notes "absent" and "cgroup" but never "made": delete
    removes such a leaf when it is empty, and never kills what another's
    group at a noted path holds (rmdir(2) refuses it, nothing is killed)."""
    kr, _ = roots
    fresh = victim_cgroup / "x"  # empty, as a leaf just made
    text = (f"absent {fresh}\ncgroup {fresh}\n"
            f"absent {victim_cgroup}\ncgroup {victim_cgroup}\n")
    d = _forge(kr, "kis-host", "forged",
               {"id": "forged", "pid": _dead_pid(), "starttime": 0, "net": 0},
               {"cgroups.noted": text})
    p = krt(kr, "delete", "--force", "forged")
    assert p.returncode == 0, p.stderr
    assert not d.exists()
    assert not fresh.exists(), "an empty leaf noted absent before its mkdir was left"
    assert _alive(victim), "a group noted with no 'made' line had its process killed"
    assert str(victim.pid) in (victim_cgroup / "cgroup.procs").read_text()


def test_host_delete_leaves_a_noted_leaf_with_neither_absent_nor_made(work, roots, victim_cgroup):
    """The control: a "cgroup" line alone (the path was there before the
    create, another's) is not touched, empty or not."""
    kr, _ = roots
    other = victim_cgroup / "x"
    d = _forge(kr, "kis-host", "forged",
               {"id": "forged", "pid": _dead_pid(), "starttime": 0, "net": 0},
               {"cgroups.noted": f"cgroup {other}\n"})
    p = krt(kr, "delete", "--force", "forged")
    assert p.returncode == 0, p.stderr
    assert not d.exists()
    assert other.is_dir(), "a group noted neither absent nor made was removed"
