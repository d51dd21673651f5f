# SPDX-License-Identifier: MIT
# kis-runtime at the microvm tier, SIGKILLed in the middle of a create: a
# lone container's create (base import, workspace clone, session with its
# VMM) and a pod sandbox's (the node's sandbox image kept as a base, its
# VMM and passt in the pod's network namespace). What an engine runs
# after a failed create, `delete --force ID`, must leave nothing of it:
# no base, workspace or session in the runtime's store (a kept sandbox
# image is the runtime's cache, not a leftover), no QEMU, no passt, no
# container process, no state (src/runtime/mvm.c, mvm_creating_undo).
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import qemu_pids
from test_runtime import (WHY, KRT, GUEST, krt, make_bundle, microvm_tier, mvm_guest,  # noqa: F401
                          mvm_left, roots, work)
from test_runtime_pod import _in_tree, _pids_naming, _tree, pod_bundle

pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")


def _store(kr, sub):
    d = Path(kr) / "kis-microvm" / ".store" / sub
    return sorted(p.name for p in d.glob("*")) if d.exists() else []


def _published(kr, sub):
    """An entry of the store published under its id (a temporary's name
    starts with '.')."""
    return [n for n in _store(kr, sub) if not n.startswith(".")]


def _passts_in(netns_pid):
    """passt processes in the network namespace of netns_pid (a pod's VM
    has its passt there: src/net/passt.c)."""
    want = os.readlink(f"/proc/{netns_pid}/ns/net")
    out = []
    for p in os.listdir("/proc"):
        try:
            if (p.isdigit() and Path(f"/proc/{p}/comm").read_text().startswith("passt")
                    and os.readlink(f"/proc/{p}/ns/net") == want):
                out.append(int(p))
        except OSError:
            pass
    return out


@pytest.fixture
def pod_netns():
    """A process in network, IPC and UTS namespaces of the test's own, the
    network one as CNI leaves a pod's: one interface up with an IPv4
    address and a default route (a veth pair made inside it, its peer
    with no address), so that a pod's VM has its passt there. Nothing of
    the host's is changed."""
    if not shutil.which("passt"):
        pytest.skip("passt is not installed (Debian package passt)")
    setup = ("ip link add eth0 type veth peer name eth1 && "
             "ip addr add 10.88.0.2/24 dev eth0 && ip link set eth1 up && "
             "ip link set eth0 up && ip route add default via 10.88.0.1 && exec sleep 600")
    p = subprocess.Popen(["unshare", "--net", "--ipc", "--uts", "sh", "-c", setup])
    end = time.monotonic() + 5
    while p.poll() is None and time.monotonic() < end:
        try:
            if Path(f"/proc/{p.pid}/comm").read_text().strip() == "sleep":
                break
        except OSError:
            pass
        time.sleep(0.02)
    if p.poll() is not None:
        pytest.skip("cannot make a veth pair in a network namespace of the test's")
    yield p.pid
    p.kill()
    p.wait()


def _create(kr, bundle, cid, err):
    with open(err, "wb") as e:
        return subprocess.Popen([str(KRT), "--root", str(kr), "--kis-guest-dir", str(GUEST),
                                 "create", "--bundle", str(bundle), cid],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=e)


def _kill_at(q, when, took, cid, err):
    """SIGKILL kis-runtime alone (never its group: what it started must
    be found by delete, not killed with it) at `when`: a fraction of a
    whole create's duration, or a predicate polled until it holds."""
    if callable(when):
        # a create may wait its turn for the guest snapshot's memory,
        # shared with every user of the guest directory (microvm/ram.c)
        end = time.monotonic() + 3 * took + 120
        while not when() and q.poll() is None and time.monotonic() < end:
            time.sleep(0.001)
        assert when(), (cid, when.__name__, "the create never got there", q.poll(),
                        err.read_text())
    else:
        time.sleep(took * when)
    q.send_signal(signal.SIGKILL)
    q.wait()


def _delete(kr, cid, tmp_path):
    """What an engine runs after a failed create, its log at info kept
    beside the test's files."""
    return krt(kr, "--log-level", "info", "delete", "--force", cid,
               log=tmp_path / f"{cid}.delete.log")


def _nothing_left(kr, cid, more=lambda: []):
    """After delete --force: no state, nothing of the store's but kept
    images, no QEMU, no process naming the id (its container process), and
    what `more` names. Processes get a moment to be reaped."""
    state_dir = Path(kr) / "kis-microvm" / cid
    assert not state_dir.exists(), (cid, "state left", sorted(p.name for p in state_dir.iterdir()))
    end = time.monotonic() + 5
    while (mvm_left(kr) or _pids_naming(cid) or more()) and time.monotonic() < end:
        time.sleep(0.05)
    assert not mvm_left(kr), (cid, mvm_left(kr))
    assert not _pids_naming(cid), (cid, "process left", _pids_naming(cid))
    assert not more(), (cid, more())


def _measure(kr, bundle, cid, tmp_path, more=lambda: [1]):
    """A whole create's duration; what it made (its VM, and what `more`
    names) seen where the test looks, then deleted."""
    err = tmp_path / f"{cid}.err"
    t = time.monotonic()
    q = _create(kr, bundle, cid, err)
    assert q.wait(timeout=180) == 0, err.read_text()
    took = time.monotonic() - t
    assert _published(kr, "sessions") and qemu_pids(kr), "the create made no VM"
    assert more(), "the create made nothing where the test looks"
    assert krt(kr, "delete", "--force", cid).returncode == 0
    return took


def test_lone_create_killed_anywhere_leaves_nothing_after_delete(work, roots, mvm_guest,
                                                                 tmp_path):
    """A lone kis-vm container's create killed as soon as its base is
    published, its workspace published, its VMM up, its session
    published, and at two fractions of a whole create: delete --force
    leaves no base, workspace, session, QEMU or container process."""
    kr, _ = roots
    loop = ["sleep", "100000"]
    b = make_bundle(work, loop, microvm_tier)
    took = _measure(kr, b, "krt-mk-m", tmp_path)
    _nothing_left(kr, "krt-mk-m")

    def base_published():
        return bool(_published(kr, "bases"))

    def workspace_published():
        return bool(_published(kr, "workspaces"))

    def vmm_up():
        return bool(qemu_pids(kr))

    def session_published():
        return bool(_published(kr, "sessions"))

    points = [base_published, workspace_published, vmm_up, session_published, 0.5, 0.9]
    for i, when in enumerate(points, 1):
        cid = f"krt-mk-{i}"
        err = tmp_path / f"{cid}.err"
        q = _create(kr, b, cid, err)
        _kill_at(q, when, took, cid, err)
        p = _delete(kr, cid, tmp_path)
        assert p.returncode == 0, (cid, when, p.stderr)
        _nothing_left(kr, cid)


def test_sandbox_create_killed_anywhere_leaves_nothing_after_delete(work, roots, mvm_guest,
                                                                    pod_netns, tmp_path):
    """A pod sandbox's create killed as soon as its image's base is
    published (imported, not yet kept), its workspace published, its VMM
    up, its passt up in the pod's namespace, its session published, and
    at half a create: delete --force leaves no base but the kept images,
    no workspace, session, QEMU, passt or container process. Each create
    has a tree of its own, so that each imports its image."""
    kr, _ = roots
    loop = ["sleep", "100000"]
    net = {"network": f"/proc/{pod_netns}/ns/net"}

    def bundle(n):
        return pod_bundle(work, loop, "sandbox", f"krt-sk-{n}", net, _in_tree(_tree(work, 40 + n)))

    def passts():
        return _passts_in(pod_netns)

    took = _measure(kr, bundle(0), "krt-sk-0", tmp_path, passts)
    _nothing_left(kr, "krt-sk-0", passts)

    before = set()

    def image_base_published():
        # this create's import published (its base kept or not yet: the
        # two are a clone apart, too close to poll between)
        return bool(set(_published(kr, "bases")) - before)

    def workspace_published():
        return bool(_published(kr, "workspaces"))

    def vmm_up():
        return bool(qemu_pids(kr))

    def passt_up():
        return bool(passts())

    def session_published():
        return bool(_published(kr, "sessions"))

    points = [image_base_published, workspace_published, vmm_up, passt_up, session_published,
              0.5]
    for i, when in enumerate(points, 1):
        cid = f"krt-sk-{i}"
        err = tmp_path / f"{cid}.err"
        before = set(_published(kr, "bases"))
        q = _create(kr, bundle(i), cid, err)
        _kill_at(q, when, took, cid, err)
        p = _delete(kr, cid, tmp_path)
        assert p.returncode == 0, (cid, when, p.stderr)
        _nothing_left(kr, cid, passts)


def test_lone_create_killed_after_its_fork_leaves_no_container_process(work, roots, mvm_guest,
                                                                       tmp_path):
    """kis-runtime SIGKILLed between the fork of the container process and
    the write of its state: that process, which would wait for a start
    that no state can ever give, ends by itself, and delete --force leaves
    nothing. The window is a millisecond: strace holds kis-runtime at the
    entry of the state's write (the open of .state.json.tmp, delayed a
    minute), where the kill lands; strace killed then, the open never runs
    (a tracee with SIGKILL pending dies at its syscall-entry stop)."""
    strace = shutil.which("strace")
    if not strace:
        pytest.skip("strace is not installed (Debian package strace)")
    kr, _ = roots
    b = make_bundle(work, ["sleep", "100000"], microvm_tier)
    cid = "krt-mf"
    err = tmp_path / f"{cid}.err"
    with open(err, "wb") as e:
        st = subprocess.Popen([strace, "-qq", "-o", "/dev/null", "-P", ".state.json.tmp",
                               "-e", "trace=openat", "-e", "inject=openat:delay_enter=60s",
                               str(KRT), "--root", str(kr), "--kis-guest-dir", str(GUEST),
                               "create", "--bundle", str(b), cid],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=e)
    try:
        end = time.monotonic() + 120
        krt_pid, child = None, None
        while st.poll() is None and child is None and time.monotonic() < end:
            krt_pid = krt_pid or next(iter(_children_of(st.pid)), None)
            # held at the state's write (a tracing stop that lasts), its
            # child the container process: a session leader of its own
            if krt_pid and _stat(krt_pid)[0] == "t":
                time.sleep(0.2)
                if _stat(krt_pid)[0] == "t":
                    child = next((c for c in _children_of(krt_pid) if _stat(c)[3] == c), None)
            time.sleep(0.01)
        assert child, ("no container process held before its state", st.poll(), krt_pid,
                       krt_pid and _stat(krt_pid),
                       {c: _stat(c) for c in _children_of(krt_pid or -1)}, err.read_text())
        assert not (Path(kr) / "kis-microvm" / cid / "state.json").exists()
        assert _running(child)
        os.kill(int(krt_pid), signal.SIGKILL)
    finally:
        st.kill()
        st.wait()
    assert not (Path(kr) / "kis-microvm" / cid / "state.json").exists()
    end = time.monotonic() + 5
    while time.monotonic() < end and _running(child):
        time.sleep(0.05)
    assert not _running(child), "the container process waits on"
    p = _delete(kr, cid, tmp_path)
    assert p.returncode == 0, p.stderr
    _nothing_left(kr, cid)


def _children_of(pid):
    """The processes whose parent is pid (from every thread of it)."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit() and _stat(p)[1] == pid:
            out.append(int(p))
    return out


def _stat(pid):
    """/proc/PID/stat's fields after the command: state, ppid, pgrp,
    session, ... (proc(5)); ["-"] when there is no such process."""
    try:
        f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return ["-", 0, 0, 0]
    return [f[0]] + [int(x) for x in f[1:4]]


def _running(pid):
    """pid exists and is not a zombie (an orphan's is reaped by init a
    moment later)."""
    return _stat(pid)[0] not in ("Z", "-")


def test_delete_takes_no_path_from_a_forged_creating_record(work, roots, tmp_path):
    """The record of a killed create lives in the container's directory: an
    id read back from it that is not an id of its kind (a path, '..', an
    id of another kind) undoes nothing, and no store it names is used."""
    kr, _ = roots
    victim = tmp_path / "victim"
    (victim / "workspaces" / "w-x").mkdir(parents=True)
    (victim / "bases" / "b-x").mkdir(parents=True)
    mdir = Path(kr) / "kis-microvm"
    (mdir / "forged").mkdir(parents=True)
    rec = {"store": str(victim), "session": f"../../{victim}", "workspace": "../../w-x",
           "base": str(victim / "bases" / "b-x"), "image_base": "w-x",
           "pod_session": "/tmp", "pod_sandbox": "../forged"}
    (mdir / "forged" / "creating.json").write_text(json.dumps(rec))
    p = krt(kr, "delete", "--force", "forged")
    assert p.returncode == 0, p.stderr
    assert not (mdir / "forged").exists()
    assert (victim / "workspaces" / "w-x").is_dir() and (victim / "bases" / "b-x").is_dir()
    assert not (victim / "sessions").exists() and not (victim / "owners").exists()


def test_delete_keeps_a_creating_record_it_cannot_undo(work, roots, mvm_guest, tmp_path):
    """What a killed create's record names and delete cannot undo (here a
    workspace a live session holds) is not forgotten: delete fails naming
    it, the record stays, and a delete once it can be undone succeeds."""
    kr, _ = roots
    b = make_bundle(work, ["sleep", "100000"], microvm_tier)
    p = krt(kr, "create", "--bundle", str(b), "krt-held")
    assert p.returncode == 0, p.stderr
    ws = _published(kr, "workspaces")
    assert len(ws) == 1
    mdir = Path(kr) / "kis-microvm"
    (mdir / "krt-left").mkdir()
    (mdir / "krt-left" / "creating.json").write_text(json.dumps({"workspace": ws[0]}))
    p = krt(kr, "delete", "--force", "krt-left")
    assert p.returncode != 0 and ws[0] in p.stderr and "delete it again" in p.stderr, p.stderr
    assert (mdir / "krt-left" / "creating.json").exists()
    assert _published(kr, "workspaces") == ws
    assert krt(kr, "delete", "--force", "krt-held").returncode == 0
    p = krt(kr, "delete", "--force", "krt-left")
    assert p.returncode == 0, p.stderr
    assert not (mdir / "krt-left").exists()
    _nothing_left(kr, "krt-held")
