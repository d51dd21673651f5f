# SPDX-License-Identifier: MIT
# kis-runtime at the microvm tier: one VM per pod (src/runtime/mvm_pod.c).
# Bundles written by hand as containerd's CRI plugin writes a pod's: a
# sandbox container (annotated "sandbox", its own id) boots the pod's VM;
# an app container (annotated "container" and its sandbox's id) joins the
# sandbox container process's network, IPC and UTS namespaces by path and
# runs in that VM. A bundle that names another pod, a foreign
# /proc/<pid>/ns path or a malformed annotation is refused by name.
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from cpu_probe import busy_probe, busy_share
from test_runtime import (WHY, KRT, GUEST, LAYOUT, cgroup_dirs, crun_ref, krt, make_bundle,  # noqa: F401
                          microvm_tier, mvm_guest, remove_cgroup_tree, roots, state,
                          wait_status, work)

pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

T = "io.kubernetes.cri.container-type"
S = "io.kubernetes.cri.sandbox-id"


def pod_bundle(work, args, role, sandbox, ns=None, edit=None):
    """A bundle as the CRI plugin writes it for role ("sandbox" or
    "container") of pod `sandbox`; ns: {type: path} joined by path."""
    def e(c):
        microvm_tier(c)
        c["annotations"].update({T: role, S: sandbox})
        if role == "sandbox":
            c["root"]["readonly"] = True  # the CRI plugin's, always
            c["hostname"] = "pod-host"
        have = {n["type"] for n in c["linux"]["namespaces"]}
        for t in ("ipc", "uts"):
            if t not in have:
                c["linux"]["namespaces"].append({"type": t})
        for n in c["linux"]["namespaces"]:
            if ns and n["type"] in ns:
                n["path"] = ns[n["type"]]
        if edit:
            edit(c)
    return make_bundle(work, args, e)


def pod_ns(pid):
    return {"network": f"/proc/{pid}/ns/net", "ipc": f"/proc/{pid}/ns/ipc",
            "uts": f"/proc/{pid}/ns/uts"}


def _ns_holder():
    p = subprocess.Popen(["unshare", "--net", "--ipc", "--uts", "sleep", "600"])
    time.sleep(0.2)
    return p


@pytest.fixture
def foreign():
    """Another such process: a pod that is not the one under test."""
    p = _ns_holder()
    yield p.pid
    p.kill()
    p.wait()


@pytest.fixture
def other_netns():
    """A process in network, IPC and UTS namespaces the test made (not
    the host's: the model refuses those before the pod check)."""
    p = _ns_holder()
    yield p.pid
    p.kill()
    p.wait()


def _refused(p, named):
    assert p.returncode != 0, p.stdout
    assert "profile_unsatisfiable" in p.stderr, p.stderr
    assert named in p.stderr, p.stderr


@pytest.mark.parametrize("name,role,sandbox,named", [
    ("no-sandbox-id", "container", None, f"{T} without {S}"),
    ("bad-type", "pause", "x", f"{T} 'pause'"),
    ("bad-id", "container", "../etc", f"{S} '../etc' is not a container id"),
    ("sandbox-not-self", "sandbox", "someone-else", "is not its own id"),
    ("app-is-self", "container", "SELF", "of an app container is its own id"),
])
def test_malformed_pod_annotations_are_refused(work, roots, name, role, sandbox, named):
    kr, _ = roots
    cid = f"krt-pod-{name}"

    def e(c):
        microvm_tier(c)
        c["annotations"][T] = role
        if sandbox is not None:
            c["annotations"][S] = cid if sandbox == "SELF" else sandbox
    p = krt(kr, "create", "--bundle", str(make_bundle(work, ["true"], e)), cid)
    _refused(p, named)
    assert not (kr / "kis-microvm" / cid).exists()


def test_app_naming_a_pod_this_root_has_not_is_refused(work, roots, other_netns):
    """No sandbox of that id under this root: refused before anything is
    made, whatever namespace files the bundle names."""
    kr, _ = roots
    b = pod_bundle(work, ["true"], "container", "no-such-pod", pod_ns(other_netns))
    p = krt(kr, "create", "--bundle", str(b), "krt-pod-orphan")
    _refused(p, "'no-such-pod' is not a kis-vm pod sandbox of this runtime root")


def test_sandbox_refuses_joining_more_than_the_pods_network(work, roots, other_netns):
    kr, _ = roots
    b = pod_bundle(work, ["true"], "sandbox", "krt-pod-sbx-ipc",
                   {"ipc": f"/proc/{other_netns}/ns/ipc"})
    _refused(krt(kr, "create", "--bundle", str(b), "krt-pod-sbx-ipc"),
             "joining the ipc namespace at")


@contextlib.contextmanager
def running_pod(kr, work, sb, netns):
    """A kis-vm pod's sandbox sb (sleeping) created and started in the
    network namespace of pid netns; yields its container process's pid and
    a list the test appends its apps' ids to. At the end, also when the
    test fails: those apps killed and deleted, then the sandbox."""
    b = pod_bundle(work, ["sleep", "100000"], "sandbox", sb,
                   {"network": f"/proc/{netns}/ns/net"})
    assert krt(kr, "create", "--bundle", str(b), sb).returncode == 0
    apps = []
    try:
        assert krt(kr, "start", sb).returncode == 0
        yield wait_status(lambda *a: krt(kr, *a), sb, "running")["pid"], apps
    finally:
        for cid in apps:
            krt(kr, "kill", cid, "KILL")
            krt(kr, "delete", "--force", cid)
        krt(kr, "kill", sb, "KILL")
        krt(kr, "delete", "--force", sb)


HOG = ["/bin/sh", "-c", "a=x; while :; do a=$a$a; done"]


def test_app_memory_limit_is_its_own_group_in_the_guest(work, roots, mvm_guest, other_netns,
                                                        tmp_path):
    """An app container's linux.resources.memory.limit is memory.max of a
    cgroup of its own in the pod's guest (src/agent/pod.c): its init
    growing past 32 MiB is OOM-killed (137) while an app of the same pod
    without a limit keeps running; an exec into a limited app counts in
    that app's group (137) and its init lives on."""
    kr, _ = roots
    sb = "krt-mem-sbx"

    def mem(c):
        c["linux"]["resources"] = {"memory": {"limit": 32 << 20}}
    with running_pod(kr, work, sb, other_netns) as (spid, apps):
        ns = pod_ns(spid)
        loop = ["sh", "-c", "while :; do sleep 0.2; done"]
        for cid, edit in (("krt-mem-free", None), ("krt-mem-lim", mem)):
            rc, _, err = _app_create(kr, pod_bundle(work, loop, "container", sb, ns, edit), cid,
                                     tmp_path)
            assert rc == 0, err.read_text()
            apps.append(cid)
            assert krt(kr, "start", cid).returncode == 0
            wait_status(lambda *a: krt(kr, *a), cid, "running")
        # the init itself past its limit: 128+SIGKILL
        apps.append("krt-mem-hog")
        p = krt(kr, "run", "--bundle", str(pod_bundle(work, HOG, "container", sb, ns, mem)),
                "krt-mem-hog")
        assert p.returncode == 137, (p.returncode, p.stderr)
        # an exec in the limited app: in its group, killed there alone
        p = krt(kr, "exec", "krt-mem-lim", *HOG)
        assert p.returncode == 137, (p.returncode, p.stderr)
        for cid in ("krt-mem-free", "krt-mem-lim"):
            assert json.loads(krt(kr, "state", cid).stdout)["status"] == "running", cid
        # the same hog without a limit is not ended at 32 MiB: it grows
        # until the VM's RAM stops it (not waited for here); a short one
        # in the free app reaches 32 MiB
        p = krt(kr, "exec", "krt-mem-free", "sh", "-c",
                "a=x; i=0; while [ $i -lt 25 ]; do a=$a$a; i=$((i+1)); done; echo ${#a}")
        assert (p.returncode, p.stdout.strip()) == (0, str(1 << 25)), (p.returncode, p.stderr)


def test_app_cpu_quota_is_its_own_groups_cpu_max_in_the_guest(work, roots, mvm_guest,
                                                              other_netns, tmp_path):
    """An app container's linux.resources.cpu.quota and period are cpu.max
    of a cgroup of its own in the pod's guest (src/agent/pod.c), made for
    the quota alone: the container sees its group at /sys/fs/cgroup (its
    cgroup namespace's root), cannot write it, and a busy loop there has
    about quota/period of a CPU, throttled; an app of the same pod with a
    memory limit only (a group of its own, no quota) has a whole CPU and
    is never throttled."""
    kr, _ = roots
    sb = "krt-cpu-sbx"

    def quota(c):
        c["linux"]["resources"] = {"cpu": {"quota": 20000, "period": 100000, "shares": 512}}

    def mem_only(c):
        c["linux"]["resources"] = {"memory": {"limit": 256 << 20}}
    with running_pod(kr, work, sb, other_netns) as (spid, apps):
        ns = pod_ns(spid)
        for cid, edit in (("krt-cpu-lim", quota), ("krt-cpu-free", mem_only)):
            rc, _, err = _app_create(kr, pod_bundle(work, ["sleep", "100000"], "container", sb,
                                                    ns, edit), cid, tmp_path)
            assert rc == 0, err.read_text()
            apps.append(cid)
            assert krt(kr, "start", cid).returncode == 0
            wait_status(lambda *a: krt(kr, *a), cid, "running")
        p = krt(kr, "exec", "krt-cpu-lim", "cat", "/sys/fs/cgroup/cpu.max")
        assert (p.returncode, p.stdout) == (0, "20000 100000\n"), (p.returncode, p.stderr)
        # its cgroup namespace's root is its group: the limit is there,
        # not to be raised from inside (a read-only mount; the group's
        # files are the guest root's; nsdelegate)
        p = krt(kr, "exec", "krt-cpu-lim", "sh", "-c",
                "echo max > /sys/fs/cgroup/cpu.max; "
                "cat /proc/self/cgroup /sys/fs/cgroup/cpu.max")
        assert p.stdout.split("\n")[-3:] == ["0::/", "20000 100000", ""], (p.stdout, p.stderr)
        p = krt(kr, "exec", "krt-cpu-free", "cat", "/sys/fs/cgroup/cpu.max")
        assert (p.returncode, p.stdout.split()[0]) == (0, "max"), (p.stdout, p.stderr)
        p = krt(kr, "exec", "krt-cpu-lim", *busy_probe(3))
        assert p.returncode == 0, p.stderr
        share, throttled = busy_share(p.stdout)
        assert 0.1 <= share <= 0.32 and throttled > 0, (share, throttled, p.stdout)
        p = krt(kr, "exec", "krt-cpu-free", *busy_probe(2))
        assert p.returncode == 0, p.stderr
        share, throttled = busy_share(p.stdout)
        assert share >= 0.6 and throttled == 0, (share, throttled, p.stdout)


def _cpu(**kw):
    def e(c):
        c["linux"]["resources"] = {"cpu": kw}
    return e


@pytest.mark.parametrize("role,cpu,named", [
    ("container", {"quota": 999, "period": 100000},
     "linux.resources.cpu.quota 999 is outside the kernel's 1000..17592186044415 us"),
    ("container", {"quota": 1 << 44}, "linux.resources.cpu.quota 17592186044416 is outside"),
    ("container", {"quota": 50000, "period": 999},
     "linux.resources.cpu.period 999 is outside the kernel's 1000..1000000 us"),
    ("container", {"quota": 50000, "period": 1000001}, "linux.resources.cpu.period 1000001"),
    ("container", {"period": 5}, "linux.resources.cpu.period 5"),
    ("container", {"quota": 50000, "cpus": "0"}, "linux.resources.cpu.cpus: not enforced"),
    ("container", {"realtimeRuntime": 1000}, "linux.resources.cpu.realtimeRuntime: not"),
    ("sandbox", {"quota": 50000, "period": 100000},
     "a kis-vm pod's sandbox (pause) container is the pod's VM"),
])
def test_cpu_limits_the_guest_cannot_bind_are_refused_by_name(work, roots, other_netns, role,
                                                               cpu, named):
    """A hostile bundle's CPU values are checked before anything is made:
    outside the kernel's cpu.max bounds (sched-bwc.rst), a CPU set or a
    realtime budget, or a quota for the pod's sandbox, which is its VM."""
    kr, _ = roots
    cid = f"krt-cpu-bad-{uuid.uuid4().hex[:6]}"
    ns = pod_ns(other_netns) if role == "container" else \
        {"network": f"/proc/{other_netns}/ns/net"}
    b = pod_bundle(work, ["true"], role, "krt-cpu-pod" if role == "container" else cid, ns,
                   _cpu(**cpu))
    p = krt(kr, "create", "--bundle", str(b), cid)
    assert p.returncode != 0, p.stdout
    assert named in p.stderr, p.stderr
    assert not (kr / "kis-microvm" / cid).exists()


def _memory_cgroup(pid):
    """pid's group in the memory controller's hierarchy (v1), or its v2 group."""
    rows = [l.split(":", 2) for l in Path(f"/proc/{pid}/cgroup").read_text().splitlines()]
    mem = [r[2] for r in rows if "memory" in r[1].split(",")]
    return mem[0] if mem else [r[2] for r in rows if r[0] == "0"][0]


def _memory_dir(path):
    return Path("/sys/fs/cgroup/memory" if LAYOUT in (1, 3) else "/sys/fs/cgroup") / \
        path.lstrip("/")


def _app_cgroup(top, cid):
    def e(c):
        c["linux"]["resources"] = {"memory": {"limit": 32 << 20}}
        c["linux"]["cgroupsPath"] = f"/{top}/pod0/{cid}"
    return e


@pytest.mark.skipif(LAYOUT == 0, reason="no cgroup hierarchy on this host")
def test_app_proxy_relays_the_guests_oom_in_a_leaf_of_its_own(work, roots, mvm_guest,
                                                              other_netns, tmp_path):
    """An app with a memory limit: its container process on the host (the
    proxy, the init pid an engine's shim sees) is alone in a new memory
    group at linux.cgroupsPath, where runc puts its init, with the
    container's limit; its other groups are the runtime's. When the guest
    OOM-kills the app at its limit, the proxy makes an OOM kill happen in
    that group, which the shim watches for (v1: an eventfd on
    memory.oom_control through cgroup.event_control, as containerd's runc
    shim registers it; v2: memory.events' oom_kill). delete removes the
    group and only it (the pod's parent is the engine's); a cgroupsPath
    naming a group that exists is refused, that group left as it was."""
    kr, _ = roots
    top = f"kis-krt-oom-{uuid.uuid4().hex[:8]}"
    sb, cid = "krt-oom-sbx", "krt-oom-hog"
    efd = -1
    try:
        with running_pod(kr, work, sb, other_netns) as (spid, apps):
            apps.append(cid)  # its delete --force, after the test's own
            # the sandbox's proxy is where it was: no limit, no group of its own
            assert _memory_cgroup(spid) == _memory_cgroup(os.getpid())
            # a cgroupsPath naming a group that exists (here the pod's parent,
            # the engine's) is refused, and the group is left as it was: the
            # runtime writes in a new leaf of its own only
            pod0 = _memory_dir(f"/{top}/pod0")
            pod0.mkdir(parents=True)
            limit = "memory.limit_in_bytes" if LAYOUT in (1, 3) else "memory.max"
            was = (pod0 / limit).read_text()

            def at_parent(c):
                _app_cgroup(top, cid)(c)
                c["linux"]["cgroupsPath"] = f"/{top}/pod0"
            rc, _, err = _app_create(kr, pod_bundle(work, HOG, "container", sb, pod_ns(spid),
                                                    at_parent), "krt-oom-taken", tmp_path)
            assert rc != 0 and f"cgroup '{pod0}' already exists" in err.read_text(), \
                err.read_text()
            assert (pod0 / limit).read_text() == was
            assert not (kr / "kis-microvm" / "krt-oom-taken").exists()
            rc, _, err = _app_create(kr, pod_bundle(work, HOG, "container", sb, pod_ns(spid),
                                                    _app_cgroup(top, cid)), cid, tmp_path)
            assert rc == 0, err.read_text()
            pid = json.loads(krt(kr, "state", cid).stdout)["pid"]
            leaf = _memory_dir(f"/{top}/pod0/{cid}")
            assert _memory_cgroup(pid) == f"/{top}/pod0/{cid}"
            assert (leaf / "cgroup.procs").read_text().split() == [str(pid)]
            assert (leaf / limit).read_text().strip() == str(32 << 20)
            if LAYOUT in (1, 3):
                # v1: the memory group alone; its pids group is the runtime's
                rows = Path(f"/proc/{pid}/cgroup").read_text()
                assert f"pids:/{top}" not in rows, rows
                # the shim's watch (cgroup-v1/memory.rst 9, "OOM Control")
                efd = os.eventfd(0, os.EFD_CLOEXEC)
                ofd = os.open(leaf / "memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    (leaf / "cgroup.event_control").write_text(f"{efd} {ofd}")
                finally:
                    os.close(ofd)
            assert krt(kr, "start", cid).returncode == 0
            wait_status(lambda *a: krt(kr, *a), cid, "stopped", timeout=120)
            if LAYOUT in (1, 3):
                import select
                assert select.select([efd], [], [], 10)[0], "no OOM event on the proxy's group"
                text = (leaf / "memory.oom_control").read_text()
            else:
                text = (leaf / "memory.events").read_text()
            kills = int(re.search(r"^oom_kill (\d+)", text, re.M).group(1))
            assert kills >= 1, text
            # the relay's own process was the victim, not the proxy: the proxy
            # put the container's limit back, for whoever reads it, and said
            # nothing went wrong
            assert (leaf / limit).read_text().strip() == str(32 << 20)
            assert "not relayed" not in err.read_text(), err.read_text()
            assert krt(kr, "delete", cid).returncode == 0
            assert not leaf.exists()
            assert leaf.parent.exists(), "delete removed the pod's parent, not the runtime's"
    finally:
        if efd >= 0:
            os.close(efd)
        remove_cgroup_tree(top)


def test_one_vm_per_pod(work, roots, mvm_guest, other_netns, foreign, tmp_path):
    """One VM boot: the sandbox boots it (read-only root as the CRI
    writes it, the pod's network namespace joined by path); an app naming
    its namespaces runs in that VM (the guest's kernel, the file the
    sandbox's process wrote there); a foreign /proc/<pid>/ns path, another
    pod's id, another runtime root are each refused by name."""
    kr, _ = roots
    pod_net = other_netns  # stands for CNI's netns
    sb = "krt-pod-sbx"
    b = pod_bundle(work, ["sh", "-c", "echo sandbox-was-here > /tmp/mark; exec sleep 100000"],
                   "sandbox", sb, {"network": f"/proc/{pod_net}/ns/net"})
    p = krt(kr, "create", "--bundle", str(b), sb)
    assert p.returncode == 0, p.stderr
    try:
        assert krt(kr, "start", sb).returncode == 0
        s = wait_status(lambda *a: krt(kr, *a), sb, "running")
        spid = s["pid"]
        # the sandbox's container process holds the pod's host namespaces
        assert os.readlink(f"/proc/{spid}/ns/net") == os.readlink(f"/proc/{pod_net}/ns/net")
        for k in ("ipc", "uts"):
            assert os.readlink(f"/proc/{spid}/ns/{k}") != os.readlink(f"/proc/self/ns/{k}")
        ns = pod_ns(spid)

        # refused: a foreign path (another process's namespaces) under the
        # right sandbox id; the right paths under a foreign id; this pod
        # seen from another runtime root
        cases = [
            ("krt-pod-foreign-net", sb, dict(ns, network=f"/proc/{foreign}/ns/net"), kr,
             f"the network namespace joined by path is not the one of pod sandbox '{sb}'"),
            ("krt-pod-foreign-uts", sb, dict(ns, uts=f"/proc/{foreign}/ns/uts"), kr,
             f"the uts namespace joined by path is not the one of pod sandbox '{sb}'"),
            ("krt-pod-wrongid", "krt-pod-other", ns, kr,
             "'krt-pod-other' is not a kis-vm pod sandbox of this runtime root"),
            ("krt-pod-otherroot", sb, ns, kr.parent / f"other-{uuid.uuid4().hex[:6]}",
             f"'{sb}' is not a kis-vm pod sandbox of this runtime root"),
        ]
        for cid, sid, paths, root, named in cases:
            bb = pod_bundle(work, ["true"], "container", sid, paths)
            _refused(krt(root, "create", "--bundle", str(bb), cid), named)
            assert not (root / "kis-microvm" / cid).exists()

        # accepted: the app runs in the pod's VM
        app = "krt-pod-app"
        bb = pod_bundle(work, ["sh", "-c", "cat /tmp/mark 2>/dev/null || echo own-root; uname -r; "
                                          "hostname; echo app-pid-$$; echo app-ran; "
                                          "trap 'exit 5' TERM; while :; do sleep 0.2; done"],
                        "container", sb, ns)
        # its streams are files: the container process keeps them open
        out, err = tmp_path / "app.out", tmp_path / "app.err"
        with open(out, "wb") as o, open(err, "wb") as e:
            p = subprocess.run([str(KRT), "--root", str(kr), "--kis-guest-dir", str(GUEST),
                                "create", "--bundle", str(bb), app], stdout=o, stderr=e,
                               stdin=subprocess.DEVNULL, timeout=120)
        assert p.returncode == 0, err.read_text()
        apid = json.loads(krt(kr, "state", app).stdout)["pid"]
        for k in ("net", "ipc", "uts"):
            assert os.readlink(f"/proc/{apid}/ns/{k}") == os.readlink(f"/proc/{spid}/ns/{k}")
        assert krt(kr, "start", app).returncode == 0
        end = time.monotonic() + 60
        while "app-ran" not in out.read_text() and time.monotonic() < end:
            time.sleep(0.2)
        assert "app-ran" in out.read_text(), (out.read_text(), err.read_text())
        # refused: an app naming a running app container of the pod as
        # its sandbox, with the very namespaces it holds
        bb = pod_bundle(work, ["true"], "container", app, pod_ns(apid))
        _refused(krt(kr, "create", "--bundle", str(bb), "krt-pod-app2"),
                 f"'{app}' names a container that is not a pod sandbox")
        assert krt(kr, "kill", app, "TERM").returncode == 0
        wait_status(lambda *a: krt(kr, *a), app, "stopped", timeout=60)
        text = out.read_text()
        # its own root (not the pod guest's, where the sandbox wrote), pid 1
        # of its own pid namespace, the pod's hostname
        assert "own-root" in text and "sandbox-was-here" not in text, (text, err.read_text())
        assert "app-pid-1\n" in text, text
        assert "pod-host\n" in text, text
        assert (mvm_guest / "kernel.release").read_text().strip() in text, text
        assert krt(kr, "delete", app).returncode == 0
        # the pod's VM outlives its app
        assert json.loads(krt(kr, "state", sb).stdout)["status"] == "running"
    finally:
        krt(kr, "kill", sb, "KILL")
        krt(kr, "delete", "--force", sb)


def _tree(work, n):
    """The module's rootfs with a marker file of its own: a distinct tree."""
    import shutil
    t = work / f"rootfs-tree{n}"
    if not t.exists():
        shutil.copytree(work / "rootfs", t, symlinks=True)
        (t / f"marker-{n}").write_text(f"tree {n}\n")
    return t


def _in_tree(t):
    def e(c):
        c["root"]["path"] = str(t)
    return e


def _app_create(kr, bundle, cid, tmp_path):
    out, err = tmp_path / f"{cid}.out", tmp_path / f"{cid}.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        p = subprocess.run([str(KRT), "--root", str(kr), "--kis-guest-dir", str(GUEST),
                            "create", "--bundle", str(bundle), cid], stdout=o, stderr=e,
                           stdin=subprocess.DEVNULL, timeout=180)
    return p.returncode, out, err


def test_pod_apps_have_their_own_trees_and_slots(work, roots, mvm_guest, other_netns, tmp_path):
    """Each app container of a kis-vm pod runs in its own tree (a mount
    slot of the pod's VM) and its own pid namespace: an exec into app A
    sees A's marker and processes only, not B's nor the sandbox's; the
    VM has 4 slots, so a fifth distinct tree is refused by name while an
    app of a tree already there shares its slot; a deleted app's slot is
    free again, and the next tree swapped into it is what the app sees
    (not the previous tree's cached superblock)."""
    kr, _ = roots
    sb = "krt-slots-sbx"
    with running_pod(kr, work, sb, other_netns) as (spid, apps):
        ns = pod_ns(spid)
        loop = ["sh", "-c", "while :; do sleep 0.2; done"]
        for n in (1, 2, 3, 4):
            cid = f"krt-slots-app{n}"
            rc, _, err = _app_create(kr, pod_bundle(work, loop, "container", sb, ns,
                                                    _in_tree(_tree(work, n))), cid, tmp_path)
            assert rc == 0, err.read_text()
            apps.append(cid)
        # app 3 too: its slot's disk is mounted in the guest when it is
        # deleted below, and the tree swapped in next must not be read
        # through that mount's cached superblock
        for cid in apps[:3]:
            assert krt(kr, "start", cid).returncode == 0
            wait_status(lambda *a: krt(kr, *a), cid, "running")
        # a fifth distinct tree: refused by name, nothing of it left
        rc, _, err = _app_create(kr, pod_bundle(work, loop, "container", sb, ns,
                                                _in_tree(_tree(work, 5))), "krt-slots-app5",
                                 tmp_path)
        assert rc != 0
        assert "4 distinct root trees" in err.read_text(), err.read_text()
        assert not (kr / "kis-microvm" / "krt-slots-app5").exists()
        # a tree already in a slot: shares it
        rc, _, err = _app_create(kr, pod_bundle(work, loop, "container", sb, ns,
                                                _in_tree(_tree(work, 1))), "krt-slots-app1b",
                                 tmp_path)
        assert rc == 0, err.read_text()
        apps.append("krt-slots-app1b")
        # app 1's exec: its files, its processes (pid 1 its own sh), the
        # pod's hostname
        p = krt(kr, "exec", "krt-slots-app1", "sh", "-c",
                "ls /; echo ==; ps -o pid,args; echo ==; hostname")
        assert p.returncode == 0, p.stderr
        files, procs, host = p.stdout.split("==\n")
        assert "marker-1" in files and "marker-2" not in files, p.stdout
        assert "sleep 100000" not in procs, procs  # the sandbox's, another pid ns
        assert any(line.split()[:1] == ["1"] and "sh -c" in line
                   for line in procs.splitlines()), procs
        assert host.strip() == "pod-host", p.stdout
        p = krt(kr, "exec", "krt-slots-app2", "ls", "/")
        assert "marker-2" in p.stdout and "marker-1" not in p.stdout, p.stdout
        # a deleted app's slot is free: the fifth tree takes it, and its
        # app sees that tree
        p = krt(kr, "exec", "krt-slots-app3", "ls", "/")
        assert "marker-3" in p.stdout, p.stdout
        assert krt(kr, "delete", "--force", "krt-slots-app3").returncode == 0
        apps.remove("krt-slots-app3")
        rc, _, err = _app_create(kr, pod_bundle(work, loop, "container", sb, ns,
                                                _in_tree(_tree(work, 5))), "krt-slots-app5",
                                 tmp_path)
        assert rc == 0, err.read_text()
        apps.append("krt-slots-app5")
        assert krt(kr, "start", "krt-slots-app5").returncode == 0
        wait_status(lambda *a: krt(kr, *a), "krt-slots-app5", "running")
        p = krt(kr, "exec", "krt-slots-app5", "ls", "/")
        assert "marker-5" in p.stdout and "marker-3" not in p.stdout, p.stdout


def _pids_naming(cid):
    out = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and cid.encode() + b"\0" in Path(f"/proc/{p}/cmdline").read_bytes():
                out.append(int(p))
        except OSError:
            pass
    return out


def _both(*edits):
    def e(c):
        for f in edits:
            f(c)
    return e


def _vm_dir(kr):
    """The one pod VM's session directory (its QMP socket and slot files)."""
    socks = [p.parent for p in kr.rglob("qmp.sock")]
    assert len(socks) == 1, socks
    return socks[0]


def _qmp(sock, cmd, fd=None):
    """One QMP command on an open connection, with fd by SCM_RIGHTS."""
    data = json.dumps(cmd).encode() + b"\n"
    if fd is None:
        sock.sendall(data)
    else:
        socket.send_fds(sock, [data], [fd])
    buf = b""
    while True:
        chunk = sock.recv(65536)
        assert chunk, "QMP closed"
        buf += chunk
        for line in buf.split(b"\n"):
            if line.strip():
                m = json.loads(line)
                if "return" in m or "error" in m:
                    return m


def _leave_a_killed_swap(vm, slot, tree, reopen):
    """What a swap SIGKILLed after its blockdev-add (reopen=False) or its
    blockdev-reopen (reopen=True), before it wrote slot<i>.gen, leaves in
    the VM (src/backends/microvm/slot.c): a set and a node of the next
    number, the slot maybe reopened onto it. Made with the engine's own
    image of another tree."""
    gf = vm / f"slot{slot}.gen"
    gen = (int(gf.read_text()) if gf.exists() else 0) + 1
    img = tree.parent / f"{tree.name}.img"
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(tree), str(img), "8M"], check=True)
    s = socket.socket(socket.AF_UNIX)
    fd = os.open(img, os.O_RDONLY)
    d = os.open(vm, os.O_PATH | os.O_DIRECTORY)
    try:
        # the directory's path is longer than a socket address may be
        s.connect(f"/proc/self/fd/{d}/qmp.sock")
        s.settimeout(10)
        _qmp(s, {"execute": "qmp_capabilities"})
        fset = 1000 + slot * 100000 + gen
        assert "return" in _qmp(s, {"execute": "add-fd", "arguments": {"fdset-id": fset}}, fd)
        r = _qmp(s, {"execute": "blockdev-add", "arguments": {
            "driver": "file", "node-name": f"kis-m{slot}g{gen}",
            "filename": f"/dev/fdset/{fset}", "read-only": True}})
        assert "return" in r, r
        if reopen:
            r = _qmp(s, {"execute": "blockdev-reopen", "arguments": {"options": [{
                "node-name": f"m{slot}lf", "driver": "raw", "file": f"kis-m{slot}g{gen}",
                "read-only": True}]}})
            assert "return" in r, r
    finally:
        os.close(fd)
        os.close(d)
        s.close()


def test_app_create_killed_anywhere_leaves_nothing_after_delete(work, roots, mvm_guest,
                                                                other_netns, tmp_path):
    """kis-runtime SIGKILLed at points over an app container's create (its
    slot taken, its tree imported, its image swapped into the pod's VM,
    its proxy's memory group made at linux.cgroupsPath and the proxy in
    it): `delete --force` of the id, what an engine runs after a failed
    create, leaves no state, no slot held, no base and no group of it;
    the pod then takes four distinct trees again."""
    kr, _ = roots
    sb = "krt-kill-sbx"
    top = f"kis-krt-kill-{uuid.uuid4().hex[:8]}"
    bases = kr / "kis-microvm" / ".store" / "bases"

    def nbases():
        return len([p for p in bases.glob("*") if not p.name.startswith(".")])

    def slot_users():
        f = kr / "kis-microvm" / sb / "slots.json"
        j = json.loads(f.read_text()) if f.exists() else {}
        return sorted(u for e in j.values() for u in e["users"])

    def leaf(cid):
        return _memory_dir(f"/{top}/pod0/{cid}")

    def noted(cid):
        f = kr / "kis-microvm" / cid / "cgroups.noted"
        try:
            return "made /sys/fs/cgroup/" in f.read_text()
        except OSError:
            return False

    def proxy_in(cid):
        try:
            return bool((leaf(cid) / "cgroup.procs").read_text().split())
        except OSError:
            return False

    try:
        with running_pod(kr, work, sb, other_netns) as (spid, apps):
            ns = pod_ns(spid)
            loop = ["sleep", "100000"]
            before = nbases()
            # the whole create measured once, then killed at fractions of it,
            # as soon as its base is published, as soon as its group is noted,
            # and as soon as its proxy is in it
            t = time.monotonic()
            rc, _, err = _app_create(kr, pod_bundle(work, loop, "container", sb, ns,
                                                    _both(_in_tree(_tree(work, 11)),
                                                          _app_cgroup(top, "krt-kill-m"))),
                                     "krt-kill-m", tmp_path)
            took = time.monotonic() - t
            assert rc == 0, err.read_text()
            assert proxy_in("krt-kill-m"), "the measured create made no group where the test looks"
            assert krt(kr, "delete", "--force", "krt-kill-m").returncode == 0
            assert not leaf("krt-kill-m").exists()
            assert slot_users() == [] and nbases() == before
            def published(cid):
                # the app's base in the store (its import's rename done): a
                # record written only after the import would miss it here
                return nbases() > before

            points = [published, noted, proxy_in, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9]
            for i, when in enumerate(points, 1):
                cid = f"krt-kill-{i}"
                bb = pod_bundle(work, loop, "container", sb, ns,
                                _both(_in_tree(_tree(work, 11 + i)), _app_cgroup(top, cid)))
                qerr = tmp_path / f"{cid}.err"
                with open(qerr, "wb") as e:
                    q = subprocess.Popen([str(KRT), "--root", str(kr), "--kis-guest-dir",
                                          str(GUEST), "create", "--bundle", str(bb), cid],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=e, start_new_session=True)
                if callable(when):
                    end = time.monotonic() + 3 * took + 30
                    while not when(cid) and q.poll() is None and time.monotonic() < end:
                        time.sleep(0.001)
                    assert when(cid), (cid, when.__name__, "the create never got there",
                                       q.poll(), qerr.read_text())
                else:
                    time.sleep(took * when)
                try:
                    os.killpg(q.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                q.wait()
                # a container process forked before the kill, waiting for its
                # start: the engine's delete below ends it through its state,
                # or its group, when there is one; else it is the test's to end
                krt(kr, "delete", "--force", cid)
                for pid in _pids_naming(cid):
                    os.kill(pid, signal.SIGKILL)
                state_dir = kr / "kis-microvm" / cid
                assert not state_dir.exists(), (cid, when, "state left",
                                                sorted(p.name for p in state_dir.iterdir()))
                assert slot_users() == [], (cid, when, slot_users())
                assert nbases() == before, (cid, when, "base left")
                assert not leaf(cid).exists(), (cid, when, "group left")
            # a swap killed before it recorded its number, left exactly (the
            # kill points above hit it only now and then): slot 0 reopened onto
            # a node of the next number, slot 1 with a node of the next number
            # that no one uses; the next swaps of both still take their trees
            vm = _vm_dir(kr)
            _leave_a_killed_swap(vm, 0, _tree(work, 31), reopen=True)
            _leave_a_killed_swap(vm, 1, _tree(work, 32), reopen=False)
            # all four slots are free: four distinct trees take them
            for n in (21, 22, 23, 24):
                cid = f"krt-kill-after{n}"
                rc, _, err = _app_create(kr, pod_bundle(work, loop, "container", sb, ns,
                                                        _in_tree(_tree(work, n))), cid, tmp_path)
                assert rc == 0, err.read_text()
                apps.append(cid)
                assert krt(kr, "start", cid).returncode == 0
                wait_status(lambda *a: krt(kr, *a), cid, "running")
                p = krt(kr, "exec", cid, "ls", "/")
                assert p.returncode == 0, p.stderr
                marks = [w for w in p.stdout.split() if w.startswith("marker-")]
                assert marks == [f"marker-{n}"], (cid, p.stdout)
    finally:
        remove_cgroup_tree(top)
