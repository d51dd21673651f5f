# SPDX-License-Identifier: MIT
# kis-runtime, the OCI runtime command line: its lifecycle checked state by
# state against crun's for the same bundle, its refusals, kis's defaults
# seen from inside, and the real engines (podman, a private containerd).
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, qemu_pids, read_pty

KRT = ROOT / "build" / "kis-runtime"
CRUN = shutil.which("crun")
BUSYBOX = shutil.which("busybox")
PODMAN = shutil.which("podman")
CONTAINERD = shutil.which("containerd")
CTR = shutil.which("ctr")
SHIM = shutil.which("containerd-shim-runc-v2")
HAVE_SYSTEMD = os.path.isdir("/run/systemd/system")
# A host directory a bundle may bind (read-only or refused in these
# tests): not /tmp, which holds the tests' state roots, refused as host
# paths that hold kis-runtime's own state (model.c).
HOST_DIR = "/var/tmp"
# the microvm tier's guest: the one test_microvm.py fetches and shares (its
# snapshots are made once per memory size and restored by every VM)
GUEST = Path(os.environ.get("KIS_MICROVM_GUEST_DIR", ROOT / "build" / "microvm-guest"))
QEMU = Path("/usr/bin/qemu-system-x86_64")
MVM_TIMEOUT = 240


def _why_skip():
    if os.geteuid() != 0:
        return "kis-runtime runs containers as root"
    if not CRUN:
        return "crun is not installed (Debian package crun)"
    if not BUSYBOX:
        return "busybox is not installed (Debian package busybox-static)"
    if not KRT.exists():
        return "build/kis-runtime is missing: run make"
    return None


WHY = _why_skip()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")


def cgroup_layout():
    import ctypes  # noqa: F401  (statfs through os is not exposed: read the mount table)
    with open("/proc/self/mountinfo") as f:
        rows = [l.split(" - ") for l in f]
    fs = {r[0].split()[4]: r[1].split()[0] for r in rows if len(r) == 2}
    if fs.get("/sys/fs/cgroup") == "cgroup2":
        return 2
    v1 = any(t == "cgroup" for m, t in fs.items() if m.startswith("/sys/fs/cgroup/"))
    return 3 if v1 and fs.get("/sys/fs/cgroup/unified") == "cgroup2" else (1 if v1 else 0)


LAYOUT = cgroup_layout()

# crun itself as the reference. On a hybrid cgroup host crun 1.8 refuses to
# run at all ("cgroups in hybrid mode not supported"); the reference is then
# crun in a mount namespace without the v2 mount, which is also what
# kis-runtime does before it becomes crun.
REF_HYBRID = ("umount -l /sys/fs/cgroup/unified 2>/dev/null; exec \"$0\" \"$@\"")


def _run(argv, timeout=60):
    """Run argv with stdout and stderr in files, not pipes: a container
    made by create or run --detach keeps them open for its whole life."""
    import tempfile
    with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=o, stderr=e,
                           timeout=timeout)
        o.seek(0)
        e.seek(0)
        return subprocess.CompletedProcess(argv, p.returncode, o.read().decode(),
                                           e.read().decode())


def crun_ref(root, *args):
    argv = [CRUN, "--root", str(root), *args]
    if LAYOUT == 3:
        argv = ["unshare", "--mount", "--propagation", "slave", "sh", "-c", REF_HYBRID, *argv]
    return _run(argv)


def krt(root, *args, log=None, timeout=MVM_TIMEOUT):
    g = ["--root", str(root), "--kis-guest-dir", str(GUEST)]
    if log:
        g += ["--log", str(log), "--log-format", "json"]
    return _run([str(KRT), *g, *args], timeout=timeout)


def mvm_left(root):
    """What of the microvm tier is left under a runtime root: sessions,
    workspaces, bases in its store, and VMs. A pod sandbox's image kept
    for the next pods (kis-microvm/.images lists it: src/runtime/mvm_image.c)
    is the tier's cache, not a leftover; a kept name with no base is."""
    mdir = Path(root) / "kis-microvm"
    store = mdir / ".store"
    kept = {p.name for p in (mdir / ".images").glob("*")}
    left = [str(p) for sub in ("sessions", "workspaces", "bases")
            for p in (store / sub).glob("*")
            if not p.name.startswith(".") and not (sub == "bases" and p.name in kept)] \
        if store.exists() else []
    left += [f"kept image without its base {k}" for k in kept if not (store / "bases" / k).is_dir()]
    return left + [f"qemu {p}" for p in qemu_pids(root)]


def our_mounts(tmp):
    with open("/proc/self/mountinfo") as f:
        return [l for l in f if str(tmp) in l]


def cgroup_dirs(name):
    import glob
    return [d for d in glob.glob(f"/sys/fs/cgroup/*/{name}") + [f"/sys/fs/cgroup/{name}"]
            if os.path.isdir(d)]


def remove_cgroup_tree(name, timeout=10):
    """rmdir (never rm: only empty groups go) name in every hierarchy,
    children first: the engines' parents (libpod_parent, containerd's
    /<namespace>) that the test's own containers made. Retried: conmon's
    cleanup of a --rm container ends a moment after podman does."""
    end = time.monotonic() + timeout
    while cgroup_dirs(name) and time.monotonic() < end:
        for top in cgroup_dirs(name):
            for d, _, _ in sorted(os.walk(top), key=lambda w: -len(w[0])):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
        if cgroup_dirs(name):
            time.sleep(0.2)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """One busybox rootfs for the module, the runtimes' state roots."""
    d = tmp_path_factory.mktemp("krt")
    rootfs = d / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    for sub in ("proc", "sys", "dev", "etc", "tmp", "root"):
        (rootfs / sub).mkdir()
    shutil.copy(BUSYBOX, rootfs / "bin" / "busybox")
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True).stdout.split()
    for a in applets:
        if a != "busybox":
            (rootfs / "bin" / a).symlink_to("busybox")
    (rootfs / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (rootfs / "etc" / "group").write_text("root:x:0:\n")
    yield d
    assert not our_mounts(d), our_mounts(d)


@pytest.fixture
def roots(work):
    """Private state roots for kis-runtime and the crun reference; every
    container in them is gone when the test ends, failed or not."""
    tag = uuid.uuid4().hex[:8]
    kr, cr = work / f"state-krt-{tag}", work / f"state-crun-{tag}"
    yield kr, cr
    for d in sorted((kr / "kis-host").glob("*")) if (kr / "kis-host").exists() else []:
        krt(kr, "delete", "--force", d.name)
    assert not list((kr / "kis-host").glob("*")) if (kr / "kis-host").exists() else True
    mdir = kr / "kis-microvm"
    for d in sorted(p for p in mdir.glob("*") if not p.name.startswith(".")) if mdir.exists() else []:
        krt(kr, "delete", "--force", d.name)
    left = mvm_left(kr)
    for pid in qemu_pids(kr):
        os.kill(pid, signal.SIGKILL)
    assert not left, f"microvm tier left: {left}"
    assert not [m for m in our_mounts(kr)], our_mounts(kr)
    for root, run in ((kr, lambda *a: krt(kr, *a)), (cr, lambda *a: crun_ref(cr, *a))):
        if root.exists():
            for c in json.loads(run("list", "--format", "json").stdout or "[]") or []:
                run("delete", "--force", c["id"])
            left = json.loads(run("list", "--format", "json").stdout or "[]") or []
            assert not left, f"containers left in {root}: {left}"


def make_bundle(work, args, edit=None, name=None):
    """A bundle from `crun spec`, its root the module's rootfs (read-only)."""
    b = work / (name or f"b-{uuid.uuid4().hex[:8]}")
    b.mkdir()
    subprocess.run([CRUN, "spec"], cwd=b, check=True)
    c = json.loads((b / "config.json").read_text())
    c["root"] = {"path": str(work / "rootfs"), "readonly": True}
    c["process"]["terminal"] = False
    c["process"]["args"] = args
    if edit:
        edit(c)
    (b / "config.json").write_text(json.dumps(c))
    return b


def host_tier(c):
    """A bundle bubblewrap can run: no sysfs or cgroup mount of its own
    (crun spec's defaults have both), and the annotation."""
    c["mounts"] = [m for m in c["mounts"] if m["type"] not in ("sysfs", "cgroup")]
    c.setdefault("annotations", {})["run.kis.tier"] = "host"


def microvm_tier(c):
    """A bundle the guest can run: a writable root (the guest's root is its
    workspace, a copy of the rootfs), and the annotation."""
    c["root"]["readonly"] = False
    c.setdefault("annotations", {})["run.kis.tier"] = "microvm"


def at_tier(tier, edit=None):
    def both(c):
        if tier == "host":
            host_tier(c)
        if tier == "microvm":
            microvm_tier(c)
        if edit:
            edit(c)
    return both


TIERS = ["container"] + (["host"] if shutil.which("bwrap") else [])
# the tiers of the lifecycle tests: the microvm's skip (by name) where no
# guest can be had
ALL_TIERS = TIERS + ["microvm"]


@pytest.fixture(scope="module")
def mvm_guest():
    """The microvm guest, fetched (idempotent) into the shared directory,
    and its default snapshot made by one first run."""
    if not QEMU.exists():
        pytest.skip("qemu-system-x86_64 is not installed (Debian: qemu-system-x86)")
    fetch = subprocess.run([str(ROOT / "scripts" / "guest" / "fetch-kernel.sh"), str(GUEST)],
                           capture_output=True, text=True, timeout=600)
    if fetch.returncode != 0:
        pytest.skip(f"cannot fetch the guest kernel: {fetch.stderr.strip()[-300:]}")
    return GUEST


@pytest.fixture
def tier_ready(request):
    """Parametrised tests ask for this: the microvm tier needs its guest."""
    tier = request.getfixturevalue("tier")
    if tier == "microvm":
        request.getfixturevalue("mvm_guest")
    return tier


def state(run, cid):
    p = run("state", cid)
    return (json.loads(p.stdout) if p.returncode == 0 else None), p


def wait_status(run, cid, want, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        s, _ = state(run, cid)
        if s and s["status"] == want:
            return s
        time.sleep(0.05)
    return state(run, cid)[0]


# ---------------------------------------------------------- conformance


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_every_state_transition_matches_crun(work, roots, tier, tier_ready):
    """runtime-spec runtime.md "Lifecycle" and "Operations", done with the
    same bundle by crun and by kis-runtime: each step's exit status (0 or
    not) and each `state` document compared field by field (id, pid and
    created are per container and only checked for shape)."""
    kr, cr = roots
    # crun ignores the annotation: the same bundle, the same lifecycle.
    # In a guest the process is not pid 1 of a pid namespace (the agent
    # is): the TERM it has no handler for would end it there; a shell that
    # ignores TERM stands for pid 1's protection under both runtimes.
    args = (["sh", "-c", "trap '' TERM; while :; do sleep 1; done"] if tier == "microvm"
            else ["sleep", "60"])
    b = make_bundle(work, args, at_tier(tier))
    runs = {"crun": lambda *a: crun_ref(cr, *a), "kis": lambda *a: krt(kr, *a)}
    seen, errs = {}, {}
    for who, run in runs.items():
        cid = f"krt-conf-{who}"
        steps = []

        def step(label, *args):
            p = run(*args)
            steps.append((label, p.returncode == 0))
            errs[(who, label)] = p.stderr
            return p

        step("state before create", "state", cid)
        step("create", "create", "--bundle", str(b), cid)
        steps.append(("state created", state(run, cid)[0]))
        step("create again (id in use)", "create", "--bundle", str(b), cid)
        step("start", "start", cid)
        steps.append(("state running", wait_status(run, cid, "running")))
        step("start again (not created)", "start", cid)
        step("delete running without force", "delete", cid)
        if tier == "microvm":
            # start returns as the guest's exec begins, before the shell
            # has set its trap: wait for its loop (under both runtimes)
            end = time.monotonic() + 30
            while run("exec", cid, "sh", "-c", "ps | grep -v grep | grep -q 'sleep 1'"
                      ).returncode != 0 and time.monotonic() < end:
                time.sleep(0.2)
        # the process is pid 1 of its namespace: a signal it has no handler
        # for is not delivered (pid_namespaces(7)), SIGKILL always is
        step("kill TERM (no handler)", "kill", cid, "TERM")
        time.sleep(0.3)
        steps.append(("state running after TERM", state(run, cid)[0]))
        step("kill KILL", "kill", cid, "KILL")
        steps.append(("state stopped", wait_status(run, cid, "stopped")))
        step("kill stopped", "kill", cid, "KILL")
        step("delete", "delete", cid)
        step("state after delete", "state", cid)
        # created -> stopped without start: a signal to the waiting
        # process (runtime.md "kill": created or running)
        # a created container: runc and crun delete it without --force
        c2 = cid + "-2"
        step("create a second", "create", "--bundle", str(b), c2)
        step("delete created without force", "delete", c2)
        step("state after deleting it created", "state", c2)
        step("create it again", "create", "--bundle", str(b), c2)
        step("kill KILL (created)", "kill", c2, "KILL")
        steps.append(("state stopped from created", wait_status(run, c2, "stopped")))
        step("start stopped", "start", c2)
        step("delete stopped", "delete", c2)
        step("state after the second delete", "state", c2)
        seen[who] = (cid, steps)
    (ccid, csteps), (kcid, ksteps) = seen["crun"], seen["kis"]
    assert [s[0] for s in csteps] == [s[0] for s in ksteps]
    for (label, c), (_, k) in zip(csteps, ksteps):
        if isinstance(c, bool):
            assert c == k, (f"{label}: crun {'succeeds' if c else 'fails'}, kis-runtime not: "
                            f"{errs.get(('crun', label))!r} / {errs.get(('kis', label))!r}")
            continue
        assert c and k, (f"{label}: crun {c}, kis-runtime {k}: "
                         f"{errs.get(('crun', 'create a second'))!r}")
        assert c["id"] in (ccid, ccid + "-2") and k["id"] in (kcid, kcid + "-2")
        for d in (c, k):
            assert isinstance(d["pid"], int) and (d["pid"] > 0 or d["status"] == "stopped")
            assert d["created"].endswith("Z")
        strip = lambda d: {f: v for f, v in d.items() if f not in ("id", "pid", "created")}
        assert strip(c) == strip(k), f"{label}: fields differ"
    assert [s[1]["status"] for s in csteps if isinstance(s[1], dict)] == [
        "created", "running", "running", "stopped", "stopped"]


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_run_passes_exit_status_and_streams(work, roots, tier, tier_ready):
    kr, _ = roots
    b = make_bundle(work, ["sh", "-c", "echo out; echo err >&2; exit 7"], at_tier(tier))
    p = krt(kr, "run", "--bundle", str(b), "krt-run")
    assert p.returncode == 7
    assert p.stdout == "out\n" and p.stderr == "err\n"


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_exec_with_args_and_process_file(work, roots, tier, tier_ready):
    kr, _ = roots
    b = make_bundle(work, ["sleep", "60"], at_tier(tier))
    assert krt(kr, "run", "--detach", "--bundle", str(b), "krt-exec").returncode == 0
    p = krt(kr, "exec", "krt-exec", "sh", "-c", "echo in; exit 3")
    assert (p.returncode, p.stdout) == (3, "in\n")
    proc = work / "proc.json"
    proc.write_text(json.dumps({"args": ["sh", "-c", "echo $K; exit 4"], "env": ["PATH=/bin", "K=v1"],
                                "cwd": "/", "user": {"uid": 0, "gid": 0}}))
    p = krt(kr, "exec", "--process", str(proc), "krt-exec")
    assert (p.returncode, p.stdout) == (4, "v1\n")
    for form in (["--format", "json"], ["-f", "json"], ["--format=json"]):
        # one parser on every tier: ps's -f is --format, never delete's --force
        ps = krt(kr, "ps", *form, "krt-exec")
        assert ps.returncode == 0 and len(json.loads(ps.stdout)) >= 1, (form, ps.stderr)
    if tier != "container":  # crun answers its own flags
        bad = krt(kr, "ps", "--no-such-flag", "krt-exec")
        assert bad.returncode != 0 and "unknown flag '--no-such-flag'" in bad.stderr
        bad = krt(kr, "ps", "--format", "yaml", "krt-exec")
        assert bad.returncode != 0 and "--format takes json or table" in bad.stderr
    assert krt(kr, "kill", "krt-exec", "KILL").returncode == 0
    wait_status(lambda *a: krt(kr, *a), "krt-exec", "stopped")
    assert krt(kr, "delete", "krt-exec").returncode == 0


@pytest.mark.parametrize("tier", TIERS)
def test_exec_detach_pid_file_lands_on_the_host(work, roots, tier):
    """exec --detach --pid-file (how conmon and the shim exec): the pid file
    is written at the engine's path, not inside the container's mount
    namespace, and names the exec'd process, in the container's pid
    namespace."""
    kr, _ = roots
    b = make_bundle(work, ["sleep", "60"], at_tier(tier))
    cid = f"krt-xpid-{tier}"
    assert krt(kr, "run", "--detach", "--bundle", str(b), cid).returncode == 0
    pidfile = work / f"exec-{tier}.pid"
    p = krt(kr, "exec", "--detach", "--pid-file", str(pidfile), cid, "sleep", "31")
    assert p.returncode == 0, p.stderr
    pid = int(pidfile.read_text())
    try:
        end = time.monotonic() + 30  # written at fork; the exec follows (a busy machine: seconds)
        while time.monotonic() < end:
            argv = open(f"/proc/{pid}/cmdline").read().split("\0")[:2]
            if argv == ["sleep", "31"]:
                break
            time.sleep(0.05)
        assert argv == ["sleep", "31"], (pid, argv, open(f"/proc/{pid}/status").read())
        assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
    finally:
        krt(kr, "delete", "--force", cid)


# ---------------------------------------------------------- kis's defaults


def test_bundle_without_seccomp_gets_kis_policy(work, roots):
    """A bundle with no linux.seccomp (ctr run's default) runs under kis's
    filter and no_new_privs: a user namespace, the first step of many
    break-outs, is refused inside; crun itself with the same bundle lets it
    through (the control)."""
    kr, cr = roots
    probe = ("grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status; "
             "unshare -U true && echo USERNS-MADE || echo USERNS-REFUSED")

    def no_seccomp(c):
        c["linux"].pop("seccomp", None)

    b = make_bundle(work, ["sh", "-c", probe], no_seccomp)
    k = krt(kr, "run", "--bundle", str(b), "krt-sc")
    c = crun_ref(cr, "run", "--bundle", str(b), "krt-sc-ref")
    assert "Seccomp:\t2" in k.stdout and "NoNewPrivs:\t1" in k.stdout, k.stdout + k.stderr
    assert "USERNS-REFUSED" in k.stdout
    assert "Seccomp:\t0" in c.stdout and "USERNS-MADE" in c.stdout, c.stdout + c.stderr


def _cgroup_file(pid, controller, name):
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctrls, path = line.rstrip("\n").split(":", 2)
            if LAYOUT == 2 and ctrls == "":
                return Path("/sys/fs/cgroup") / path.lstrip("/") / name
            if controller in ctrls.split(","):
                return Path("/sys/fs/cgroup") / controller / path.lstrip("/") / name
    return None


@pytest.mark.parametrize("tier", TIERS)
def test_unset_limits_take_kis_defaults_and_fork_bomb_stops(work, roots, tier):
    """No linux.resources: memory and pids get kis's defaults (1 GiB, 256),
    never unlimited; 400 background sleeps find forks refused."""
    kr, _ = roots

    def no_res(c):
        c["linux"].pop("resources", None)

    b = make_bundle(work, ["sh", "-c", "i=0; while [ $i -lt 400 ]; do sleep 30 & i=$((i+1)); "
                                       "done 2>/dev/null; echo started; sleep 60"],
                    at_tier(tier, no_res))
    assert krt(kr, "create", "--bundle", str(b), "krt-lim").returncode == 0
    s, _ = state(lambda *a: krt(kr, *a), "krt-lim")
    pids_max = _cgroup_file(s["pid"], "pids", "pids.max")
    mem = _cgroup_file(s["pid"], "memory",
                       "memory.max" if LAYOUT == 2 else "memory.limit_in_bytes")
    assert pids_max.read_text().strip() == "256"
    assert mem.read_text().strip() == str(1 << 30)
    events = _cgroup_file(s["pid"], "pids", "pids.events")
    assert krt(kr, "start", "krt-lim").returncode == 0
    end = time.monotonic() + 15
    refused = 0
    while time.monotonic() < end and not refused:
        refused = int(dict(l.split() for l in events.read_text().splitlines())["max"])
        time.sleep(0.1)
    assert refused >= 1, "no fork was refused at pids.max"
    krt(kr, "kill", "krt-lim", "KILL")
    wait_status(lambda *a: krt(kr, *a), "krt-lim", "stopped")
    krt(kr, "delete", "--force", "krt-lim")


def _cpu_bundle(work, cgpath, args=("sleep", "60")):
    """A host-tier bundle with a CPU quota (20% of a CPU), shares and a
    memory limit, its group at cgpath (None: kis's own place)."""
    def edit(c):
        c["linux"]["resources"] = {"memory": {"limit": 64 << 20},
                                   "cpu": {"quota": 20000, "period": 100000, "shares": 512}}
        if cgpath:
            c["linux"]["cgroupsPath"] = cgpath
        else:
            c["linux"].pop("cgroupsPath", None)
    return make_bundle(work, list(args), at_tier("host", edit))


@pytest.mark.skipif("host" not in TIERS, reason="bubblewrap is not installed")
def test_host_tier_cpu_quota_and_shares_bind_at_the_cgroups_path(work, roots):
    """linux.resources.cpu's quota, period and shares are the container's
    cpu group's, at linux.cgroupsPath as runc puts it: a busy loop is
    throttled to its quota; delete removes the group and leaves its
    parent, as runc leaves the pod's."""
    if LAYOUT == 2 and "cpu" not in Path("/sys/fs/cgroup/cgroup.controllers").read_text():
        pytest.skip("the cgroup v2 hierarchy has no cpu controller")
    kr, _ = roots
    top = f"kis-krt-cpu-{uuid.uuid4().hex[:8]}"
    try:
        b = _cpu_bundle(work, f"/{top}/c1", ("sh", "-c", "while :; do :; done"))
        assert krt(kr, "create", "--bundle", str(b), "krt-cpu").returncode == 0
        s, _ = state(lambda *a: krt(kr, *a), "krt-cpu")
        cg = Path(f"/proc/{s['pid']}/cgroup").read_text()
        assert f"/{top}/c1\n" in cg, cg
        if LAYOUT == 2:
            assert _cgroup_file(s["pid"], "cpu", "cpu.max").read_text().split() == \
                ["20000", "100000"]
            assert _cgroup_file(s["pid"], "cpu", "cpu.weight").read_text().strip() == "20"
        else:
            for f, want in (("cpu.cfs_quota_us", "20000"), ("cpu.cfs_period_us", "100000"),
                            ("cpu.shares", "512")):
                assert _cgroup_file(s["pid"], "cpu", f).read_text().strip() == want, f
        stat = _cgroup_file(s["pid"], "cpu", "cpu.stat")
        assert krt(kr, "start", "krt-cpu").returncode == 0
        # an exec joins the container's groups, its cpu and cpuacct ones too
        # (no cgroup namespace in this bundle: the host's paths show)
        p = krt(kr, "exec", "krt-cpu", "cat", "/proc/self/cgroup")
        assert p.returncode == 0, p.stderr
        xcg = p.stdout
        assert sorted(l.split(":", 2)[1:] for l in xcg.splitlines() if f"/{top}/" in l) == \
            sorted(l.split(":", 2)[1:] for l in cg.splitlines() if f"/{top}/" in l), (xcg, cg)
        assert LAYOUT == 2 or f":cpu:/{top}/c1\n" in xcg, xcg
        end = time.monotonic() + 10
        throttled = 0
        while time.monotonic() < end and throttled < 3:
            throttled = int(dict(l.split() for l in stat.read_text().splitlines())
                            ["nr_throttled"])
            time.sleep(0.1)
        assert throttled >= 3, "the busy loop was never throttled at its quota"
        krt(kr, "kill", "krt-cpu", "KILL")
        wait_status(lambda *a: krt(kr, *a), "krt-cpu", "stopped")
        assert krt(kr, "delete", "krt-cpu").returncode == 0
        assert not [d for d in cgroup_dirs(top) if (Path(d) / "c1").exists()], cgroup_dirs(top)
        assert cgroup_dirs(top), "delete removed the parent, which is not the runtime's"
    finally:
        remove_cgroup_tree(top)


def test_host_tier_cpu_quota_below_the_kernels_least_is_refused(work, roots):
    kr, _ = roots
    b = make_bundle(work, ["true"], at_tier("host", lambda c: c["linux"].__setitem__(
        "resources", {"cpu": {"quota": 500, "period": 100000}})))
    p = krt(kr, "run", "--bundle", str(b), "krt-q")
    assert p.returncode != 0 and "linux.resources.cpu.quota 500" in p.stderr, p.stderr


@pytest.mark.skipif("host" not in TIERS, reason="bubblewrap is not installed")
def test_log_level_from_the_flag_or_kis_log_goes_to_the_log_file(work, roots):
    """kis-runtime takes kis's level (--log-level, --debug, else $KIS_LOG,
    else warn) and writes kis's diagnostics to its --log file in the
    file's format, where the engine keeps it, not to stderr (the engine's
    channel for the error); a level it does not know is refused."""
    kr, _ = roots
    b = make_bundle(work, ["true"], at_tier("host"))

    def run(cid, log, fmt, *flags, env=None):
        p = subprocess.run([str(KRT), "--root", str(kr), "--log", str(log), "--log-format", fmt,
                            *flags, "run", "--bundle", str(b), cid], capture_output=True,
                           text=True, timeout=60,
                           env=dict({k: v for k, v in os.environ.items() if k != "KIS_LOG"},
                                    **(env or {})))
        return p, (log.read_text().splitlines() if log.exists() else [])

    p, lines = run("krt-log0", work / "log0.json", "json")
    assert p.returncode == 0 and not lines and not p.stderr, (p.stderr, lines)
    p, lines = run("krt-log1", work / "log1.json", "json", "--log-level", "debug")
    assert p.returncode == 0 and not p.stderr, p.stderr
    rows = [json.loads(l) for l in lines]
    assert rows and all(set(r) == {"level", "msg", "time"} for r in rows), lines
    assert any(r["level"] == "debug" and "cgroup" in r["msg"] and "made" in r["msg"]
               for r in rows), rows
    p, lines = run("krt-log2", work / "log2.txt", "text", env={"KIS_LOG": "debug"})
    assert p.returncode == 0 and not p.stderr, p.stderr
    assert any(" debug: cgroup " in l for l in lines), lines
    p, lines = run("krt-log3", work / "log3.json", "json", "--debug")
    assert p.returncode == 0 and any('"level":"debug"' in l for l in lines), lines
    p, lines = run("krt-log4", work / "log4.json", "json", "--log-level", "loud")
    assert p.returncode == 125, p.stderr
    assert "--log-level: expected error, warn, info or debug, not 'loud'" in p.stderr
    assert json.loads(lines[-1])["level"] == "error", lines


# A create's course: its groups are made early (before the fork), its state
# last; kill points spread over it, measured first, as test_killed_engine's
KILL_FRACTIONS = [k / 12 for k in range(1, 13)]


@pytest.mark.skipif("host" not in TIERS, reason="bubblewrap is not installed")
@pytest.mark.parametrize("where", ["cgroups_path", "kis_parent"])
def test_host_tier_create_killed_anywhere_leaves_no_cgroup_after_delete(work, roots, where):
    """kis-runtime SIGKILLed at points over a host-tier create (with a CPU
    quota: memory, pids, cpu and cpuacct groups): `delete --force` of the
    id, what an engine runs after a failed create, leaves no group, no
    process and no state of it."""
    if LAYOUT not in (1, 3):
        pytest.skip("the runtime is moved into a v1 group of the test's (this host has none)")
    kr, _ = roots
    top = f"kis-krt-kill-{uuid.uuid4().hex[:8]}"
    marker = f"kis-krt-kill-{uuid.uuid4().hex[:6]}"
    # the runtime runs in a group of the test's in each hierarchy kis uses,
    # so kis's own parent (next to it: top/rt/kis) holds only its leaves
    hier = [h for h in ("memory", "pids", "cpu", "cpuacct")
            if os.path.isdir(f"/sys/fs/cgroup/{h}")]
    enter = "".join(f"mkdir -p /sys/fs/cgroup/{h}/{top}/rt; "
                    f"echo $$ > /sys/fs/cgroup/{h}/{top}/rt/cgroup.procs; " for h in hier)

    def groups(i):
        if where == "cgroups_path":
            return [d for d in cgroup_dirs(top) if (Path(d) / f"c{i}").exists()]
        return [str(p) for d in cgroup_dirs(top) for p in Path(d, "rt", "kis").glob("krt-*")]

    def procs():
        out = []
        for p in os.listdir("/proc"):
            try:
                if marker.encode() in Path(f"/proc/{p}/cmdline").read_bytes():
                    out.append(int(p))
            except OSError:
                pass
        return out

    try:
        b = _cpu_bundle(work, f"/{top}/c0" if where == "cgroups_path" else None,
                        ("sh", "-c", f"exec sleep 60 # {marker}"))
        t = time.monotonic()
        p = _run(["sh", "-c", enter + 'exec "$@"', "sh", str(KRT), "--root", str(kr), "create",
                  "--bundle", str(b), "krt-k0"])
        took = time.monotonic() - t
        assert p.returncode == 0, p.stderr
        assert groups(0), "the measured create made no group where the test looks"
        assert krt(kr, "delete", "--force", "krt-k0").returncode == 0
        for i, frac in enumerate(KILL_FRACTIONS, 1):
            if where == "cgroups_path":
                c = json.loads((b / "config.json").read_text())
                c["linux"]["cgroupsPath"] = f"/{top}/c{i}"
                (b / "config.json").write_text(json.dumps(c))
            cid = f"krt-k{i}"
            p = subprocess.Popen(["sh", "-c", enter + 'exec "$@"', "sh", str(KRT), "--root",
                                  str(kr), "create", "--bundle", str(b), cid],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            time.sleep(took * frac)
            p.send_signal(signal.SIGKILL)
            p.wait()
            krt(kr, "delete", "--force", cid)
            assert not (kr / "kis-host" / cid).exists(), (frac, "state left")
            assert not groups(i), (frac, groups(i))
            end = time.monotonic() + 2
            while procs() and time.monotonic() < end:
                time.sleep(0.05)
            assert not procs(), (frac, procs())
    finally:
        remove_cgroup_tree(top)


# ---------------------------------------------------------- refusals


def _caps(c):
    for k in c["process"]["capabilities"]:
        c["process"]["capabilities"][k].append("CAP_SYS_ADMIN")


def _no_netns(c):
    c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]


def _host_netns_by_path(c):
    for n in c["linux"]["namespaces"]:
        if n["type"] == "network":
            n["path"] = f"/proc/{os.getpid()}/ns/net"


def _no_pidns(c):
    c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "pid"]


def _bind_root(c):
    c["mounts"].append({"destination": "/host", "type": "bind", "source": "/",
                        "options": ["rbind", "ro"]})


def _bind_proc_sub(c):
    c["mounts"].append({"destination": "/hostsys", "type": "bind", "source": "/sys/kernel/../",
                        "options": ["rbind", "ro"]})


def _ann(k, v):
    def edit(c):
        c.setdefault("annotations", {})[k] = v
    return edit


def _disk_device(c):
    c["linux"]["devices"] = [{"path": "/dev/xdisk", "type": "b", "major": 7, "minor": 0,
                              "fileMode": 0o600, "uid": 0, "gid": 0}]
    c["linux"].setdefault("resources", {})["devices"] = [
        {"allow": True, "type": "b", "major": 7, "minor": 0, "access": "rw"}]


def _all_devices_rule(c):
    c["linux"].setdefault("resources", {})["devices"] = [{"allow": True, "access": "rwm"}]


def _hugetlb(c):
    c["linux"].setdefault("resources", {})["hugepageLimits"] = [
        {"pageSize": "2MB", "limit": 2097152}]


REFUSALS = [
    ("cap_sys_admin", _caps, "profile_unsatisfiable", "CAP_SYS_ADMIN"),
    ("host_network", _no_netns, "escape_hatch_forbidden", "run.kis.allow-net-host"),
    ("host_network_by_path", _host_netns_by_path, "escape_hatch_forbidden", "network"),
    ("host_pid", _no_pidns, "profile_unsatisfiable", "'pid'"),
    ("bind_host_root", _bind_root, "profile_unsatisfiable", "mounts["),
    ("bind_host_sys", _bind_proc_sub, "invalid_profile", "'/sys/kernel/../'"),
    ("host_block_device", _disk_device, "profile_unsatisfiable", "/dev/xdisk"),
    ("all_devices_rule", _all_devices_rule, "profile_unsatisfiable", "linux.resources.devices"),
    ("tier_unknown", _ann("run.kis.tier", "gvisor"), "invalid_profile", "run.kis.tier"),
    ("unknown_kis_annotation", _ann("run.kis.bogus", "1"), "invalid_profile", "run.kis.bogus"),
]
if LAYOUT == 3:
    REFUSALS.append(("hugetlb_on_hybrid", _hugetlb, "profile_unsatisfiable", "hugetlb"))


def _refused(p, log, code, named):
    assert p.returncode == 125, (p.returncode, p.stdout, p.stderr)
    assert code in p.stderr and named in p.stderr, p.stderr
    last = json.loads(log.read_text().splitlines()[-1])
    assert last["level"] == "error" and code in last["msg"] and named in last["msg"]
    assert last["time"].endswith("Z")


@pytest.mark.parametrize("name,edit,code,named", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_refused_by_name_never_run_weaker(work, roots, name, edit, code, named):
    """Each bundle would run under crun; kis-runtime refuses it with the
    code and the field, on stderr and in the --log (json), and no container
    exists afterwards. The same bundle without the edit runs (control)."""
    kr, _ = roots
    marker = ["sh", "-c", "echo RAN"]
    log = work / f"log-{name}.json"
    p = krt(kr, "run", "--bundle", str(make_bundle(work, marker, edit)), f"krt-{name}", log=log)
    _refused(p, log, code, named)
    assert "RAN" not in p.stdout
    assert state(lambda *a: krt(kr, *a), f"krt-{name}")[0] is None
    ok = krt(kr, "run", "--bundle", str(make_bundle(work, marker)), f"krt-{name}-ctl")
    assert ok.returncode == 0 and ok.stdout == "RAN\n", ok.stderr


def test_flags_that_weaken_are_refused(work, roots):
    kr, _ = roots
    b = make_bundle(work, ["sleep", "60"])
    log = work / "log-flags.json"
    _refused(krt(kr, "run", "--no-pivot", "--bundle", str(b), "krt-np", log=log), log,
             "profile_unsatisfiable", "--no-pivot")
    if not HAVE_SYSTEMD:
        p = _run([str(KRT), "--root", str(kr), "--log", str(log), "--log-format",
                  "json", "--systemd-cgroup", "run", "--bundle", str(b), "krt-sd"])
        _refused(p, log, "profile_unsatisfiable", "--systemd-cgroup")
    assert krt(kr, "run", "--detach", "--bundle", str(b), "krt-cap").returncode == 0
    _refused(krt(kr, "exec", "--cap", "CAP_SYS_ADMIN", "krt-cap", "true", log=log), log,
             "profile_unsatisfiable", "CAP_SYS_ADMIN")
    proc = work / "proc-admin.json"
    proc.write_text(json.dumps({"args": ["true"], "cwd": "/", "user": {"uid": 0, "gid": 0},
                                "capabilities": {"bounding": ["CAP_SYS_ADMIN"]}}))
    _refused(krt(kr, "exec", "--process", str(proc), "krt-cap", log=log), log,
             "profile_unsatisfiable", "process.capabilities.bounding")
    _refused(krt(kr, "update", "krt-cap", log=log), log, "invalid_argument", "update")
    krt(kr, "delete", "--force", "krt-cap")


# ---- paths of the bundle that would lead bwrap out of the container ----
#
# An image's WORKDIR (process.cwd), its links and a mount's destination are
# walked by bwrap under the new root before pivot_root, where the host's
# root is one '..' or one absolute link away, and bwrap chdirs while it
# still holds an fd of the host's /proc (/proc/self/fd/3: the host's /proc,
# whose sys/kernel/core_pattern a root container could write). The probe
# is the container's command: it reports whether its working directory or
# a made file is the host's. Every case must be refused by name with
# nothing run; the control (cwd /tmp) runs.

PROBE = ["sh", "-c", "echo RAN; ls -d sys/kernel/core_pattern 2>/dev/null && echo ESCAPED; "
         "ls /oldroot 2>/dev/null | head -3"]


def _host_cwd(path):
    def edit(c):
        host_tier(c)
        c["process"]["cwd"] = path
    return edit


def _host_mount(m):
    def edit(c):
        host_tier(c)
        c["mounts"].append(m)
    return edit


HOST_PATHS = [
    ("cwd_proc_fd", _host_cwd("/proc/self/fd/3"), "profile_unsatisfiable", "mounts["),
    ("cwd_dev_fd", _host_cwd("/dev/fd/3"), "profile_unsatisfiable", "'/dev'"),
    ("cwd_dotdot", _host_cwd("/tmp/../proc/self/fd/3"), "invalid_profile", "not a normal"),
    ("cwd_image_link", _host_cwd("/krt-escape"), "profile_unsatisfiable", "symbolic link"),
    ("dest_dotdot", _host_mount({"destination": "/../oldroot/tmp/krt-made", "type": "tmpfs",
                                 "source": "tmpfs"}), "invalid_profile", "not a normal"),
    ("dest_image_link", _host_mount({"destination": "/krt-hostfile", "type": "bind",
                                     "source": HOST_DIR, "options": ["bind"]}),
     "profile_unsatisfiable", "symbolic link"),
    ("dest_dev_link", _host_mount({"destination": "/dev/fd/3/krt", "type": "tmpfs",
                                   "source": "tmpfs"}), "profile_unsatisfiable", "'/dev'"),
    # a bound directory (a volume another container shares) can change
    # between the check and bwrap's walk: nothing is walked inside one
    ("cwd_in_a_bind", lambda c: (_host_mount({"destination": "/krt-vol", "type": "bind",
                                              "source": HOST_DIR, "options": ["bind"]})(c),
                                 c["process"].__setitem__("cwd", "/krt-vol/sub")),
     "profile_unsatisfiable", "bound directory"),
]


@pytest.fixture
def escape_links(work):
    """Links an image could hold: one into bwrap's host /proc fd, one that
    climbs to the host's root before pivot_root."""
    links = {work / "rootfs" / "krt-escape": "/proc/self/fd/3",
             work / "rootfs" / "krt-hostfile": "../../oldroot/tmp/krt-made-by-bwrap"}
    for path, target in links.items():
        path.symlink_to(target)
    yield
    for path in links:
        path.unlink()
    made = [p for p in (Path("/tmp/krt-made-by-bwrap"), Path("/tmp/krt-made")) if p.exists()]
    for p in made:
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    assert not made, f"bwrap made {made} on the host"


@pytest.mark.skipif("host" not in TIERS, reason="bubblewrap is not installed")
@pytest.mark.parametrize("name,edit,code,named", HOST_PATHS, ids=[r[0] for r in HOST_PATHS])
def test_host_tier_paths_cannot_lead_out(work, roots, escape_links, name, edit, code, named):
    kr, _ = roots
    log = work / f"log-{name}.json"
    p = krt(kr, "run", "--bundle", str(make_bundle(work, PROBE, edit)), f"krt-{name}", log=log)
    assert "ESCAPED" not in p.stdout, p.stdout
    _refused(p, log, code, named)
    assert "RAN" not in p.stdout
    ok = krt(kr, "run", "--bundle", str(make_bundle(work, PROBE, _host_cwd("/tmp"))),
             f"krt-{name}-ctl")
    assert ok.returncode == 0 and ok.stdout.startswith("RAN\n") and "ESCAPED" not in ok.stdout, \
        (ok.stdout, ok.stderr)


@pytest.mark.skipif("host" not in TIERS, reason="bubblewrap is not installed")
def test_host_tier_exec_cwd_cannot_lead_out(work, roots, escape_links):
    """exec chdirs in the container's tree from a process of kis-runtime's:
    a working directory through a /proc magic link (directly, or by an
    image's link) is refused (exit 125, nothing run); a plain one works."""
    kr, _ = roots
    b = make_bundle(work, ["sleep", "60"], host_tier)
    assert krt(kr, "run", "--detach", "--bundle", str(b), "krt-xcwd").returncode == 0
    for cwd in ("/proc/self/fd/3", "/krt-escape", "/proc/1/cwd"):
        proc = work / "proc-cwd.json"
        proc.write_text(json.dumps({"args": PROBE, "cwd": cwd, "user": {"uid": 0, "gid": 0}}))
        p = krt(kr, "exec", "--process", str(proc), "krt-xcwd")
        assert "ESCAPED" not in p.stdout, (cwd, p.stdout)
        assert p.returncode == 125 and "process.cwd" in p.stderr and "RAN" not in p.stdout, \
            (cwd, p.returncode, p.stdout, p.stderr)
    proc.write_text(json.dumps({"args": ["sh", "-c", "pwd; ls /proc/self/fd"], "cwd": "/tmp",
                                "user": {"uid": 0, "gid": 0}}))
    p = krt(kr, "exec", "--process", str(proc), "krt-xcwd")
    assert p.returncode == 0 and p.stdout.split()[0] == "/tmp", (p.stdout, p.stderr)
    # the command holds nothing of kis-runtime's: its stdio and ls's own fd
    assert sorted(p.stdout.split()[1:]) == ["0", "1", "2", "3"], p.stdout
    krt(kr, "delete", "--force", "krt-xcwd")


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_a_bind_from_the_hosts_proc_is_refused(work, roots, tier, tier_ready):
    """/proc/PID/environ is a regular file: the microvm tier copies such a
    bind into the guest, the others bind it. Every tier refuses a source
    under /proc by name, before anything runs."""
    kr, _ = roots
    log = work / f"log-procbind-{tier}.json"

    def env_bind(c):
        c["mounts"].append({"destination": "/krt-env", "type": "bind",
                            "source": f"/proc/{os.getpid()}/environ", "options": ["bind", "ro"]})
    p = krt(kr, "run", "--bundle",
            str(make_bundle(work, ["sh", "-c", "echo RAN; cat /krt-env"], at_tier(tier, env_bind))),
            f"krt-procbind-{tier}", log=log)
    _refused(p, log, "profile_unsatisfiable", "/proc")
    assert "RAN" not in p.stdout


@pytest.mark.parametrize("tier", TIERS)
def test_a_second_proc_is_refused(work, roots, tier):
    """A proc mounted away from /proc would bypass the read-only /proc/sys
    (its sys/kernel/core_pattern writable by the container's root): refused
    on every tier, by name."""
    kr, _ = roots
    log = work / f"log-proc2-{tier}.json"

    def proc2(c):
        c["mounts"].append({"destination": "/proc2", "type": "proc", "source": "proc"})
    p = krt(kr, "run", "--bundle",
            str(make_bundle(work, ["sh", "-c", "echo RAN; ls -d /proc2/sys/kernel/core_pattern "
                                   "&& echo ESCAPED"], at_tier(tier, proc2))),
            f"krt-proc2-{tier}", log=log)
    assert "ESCAPED" not in p.stdout
    _refused(p, log, "profile_unsatisfiable", "a proc mount at '/proc2'")
    assert "RAN" not in p.stdout


@pytest.mark.skipif("host" not in TIERS, reason="bubblewrap is not installed")
def test_binary_name_pins_the_tier(work, roots):
    """kis-runtime-host (what make install links) runs an unannotated
    bundle at the host tier, and refuses one whose annotation asks for
    another tier: the operator's RuntimeClass, not the pod, picks it."""
    kr, _ = roots
    link = work / "kis-runtime-host"
    if not link.exists():
        link.symlink_to(KRT)
    probe = ["sh", "-c", "test -d /sys/kernel && echo HAS-SYSFS; echo ran"]

    def unannotated_host(c):
        host_tier(c)
        del c["annotations"]["run.kis.tier"]

    p = _run([str(link), "--root", str(kr), "run", "--bundle",
              str(make_bundle(work, probe, unannotated_host)), "krt-pin"])
    assert p.returncode == 0 and p.stdout == "ran\n", p.stdout + p.stderr
    assert not (kr / "kis-host" / "krt-pin").exists()  # run without --detach deletes
    log = work / "log-pin.json"
    p = _run([str(link), "--root", str(kr), "--log", str(log), "--log-format", "json", "run",
              "--bundle", str(make_bundle(work, probe, _ann("run.kis.tier", "container"))),
              "krt-pin2"])
    _refused(p, log, "profile_unsatisfiable", "pinned to the 'host' tier")


def test_features_is_the_policy(work):
    p = subprocess.run([str(KRT), "features"], capture_output=True, text=True)
    f = json.loads(p.stdout)
    assert f["ociVersionMax"].startswith("1.")
    caps = f["linux"]["capabilities"]
    assert "CAP_SYS_ADMIN" not in caps and "CAP_CHOWN" in caps
    assert f["annotations"]["run.kis.tier"].split(",") == ["container", "host", "microvm"]


def _console(path):
    """A --console-socket listener: returns a function giving the pty
    master fd the runtime sends (SCM_RIGHTS), as conmon receives it."""
    import socket
    import threading
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)
    got = {}

    def accept():
        c, _ = srv.accept()
        _, fds, _, _ = socket.recv_fds(c, 1024, 1)
        got["fd"] = fds[0]
        c.close()
    t = threading.Thread(target=accept, daemon=True)
    t.start()

    def master():
        t.join(10)
        srv.close()
        return got.get("fd")
    return master


@pytest.mark.parametrize("tier", ALL_TIERS)
def test_console_socket_gets_the_terminal(work, roots, tier, tier_ready):
    """process.terminal with --console-socket: the runtime sends the pty's
    master to the socket and the process has the slave as its terminal."""
    kr, _ = roots

    def tty(c):
        c["process"]["terminal"] = True

    b = make_bundle(work, ["sh", "-c", "test -t 0 && test -t 1 && echo IS-A-TTY; tty"],
                    at_tier(tier, tty))
    sock = work / f"console-{tier}.sock"
    master = _console(sock)
    cid = f"krt-tty-{tier}"
    p = krt(kr, "create", "--console-socket", str(sock), "--bundle", str(b), cid)
    assert p.returncode == 0, p.stderr
    fd = master()
    assert fd is not None, "no terminal was sent"
    try:
        assert krt(kr, "start", cid).returncode == 0
        out = read_pty(fd).decode()
    finally:
        os.close(fd)
    assert "IS-A-TTY" in out, out
    if tier == "container":  # crun opens the pty in the container's own devpts
        assert "/dev/pts/" in out, out
    wait_status(lambda *a: krt(kr, *a), cid, "stopped")
    krt(kr, "delete", "--force", cid)


@pytest.mark.parametrize("tier", TIERS)
def test_preserve_fds_passes_only_those(work, roots, tier):
    """--preserve-fds 1: fd 3 reaches the container with its number; fd 4,
    also open in the runtime, does not (crun closes it; bwrap would pass it
    on, so kis-runtime marks it close-on-exec first)."""
    kr, _ = roots
    b = make_bundle(work, ["sh", "-c", "echo via-3 >&3; test -e /proc/self/fd/4 && "
                                       "echo FD4-LEAKED; true"], at_tier(tier))
    out3 = work / f"fd3-{tier}.txt"
    with open(out3, "w") as f3, open("/dev/null") as f4:
        def fds():
            os.dup2(f3.fileno(), 3)
            os.dup2(f4.fileno(), 4)
        p = subprocess.run([str(KRT), "--root", str(kr), "run", "--preserve-fds", "1",
                            "--bundle", str(b), f"krt-fds-{tier}"], preexec_fn=fds,
                           capture_output=True, text=True, timeout=60, close_fds=False)
    assert p.returncode == 0, p.stderr
    assert out3.read_text() == "via-3\n"
    assert "FD4-LEAKED" not in p.stdout


HOST_PROBE = (
    "echo pid=$$; grep -E '^(Seccomp|NoNewPrivs|CapEff):' /proc/self/status; "
    "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; "
    # writing a sysctl back with its own value: harmless if it got through
    "v=$(cat /proc/sys/kernel/domainname); "
    "(echo \"$v\" > /proc/sys/kernel/domainname) 2>/dev/null && echo SYSCTL-WRITTEN; "
    "unshare -U true 2>/dev/null && echo USERNS-MADE; "
    "mount -t tmpfs x /tmp 2>/dev/null && echo MOUNTED; "
    "echo done")


@pytest.mark.skipif("host" not in TIERS, reason="bubblewrap is not installed")
def test_host_tier_is_bubblewrap_and_holds(work, roots):
    """run.kis.tier host: the process is pid 1 of its own pid namespace,
    with only lo, kis's seccomp filter, no_new_privs, the default
    capabilities; the break-out steps tried from inside all fail."""
    kr, _ = roots
    b = make_bundle(work, ["sh", "-c", HOST_PROBE], host_tier)
    p = krt(kr, "run", "--bundle", str(b), "krt-host-probe")
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert "pid=1" in out and "Seccomp:\t2" in out and "NoNewPrivs:\t1" in out, p.stdout
    caps = int([l for l in out if l.startswith("CapEff:")][0].split()[1], 16)
    assert not caps & (1 << 21), "CAP_SYS_ADMIN in the container"
    assert [l for l in out if l in ("lo", "eth0")] == ["lo"], p.stdout
    for bad in ("SYSCTL-WRITTEN", "USERNS-MADE", "MOUNTED"):
        assert bad not in out, p.stdout
    assert out[-1] == "done"


def _user1000(c):
    c["process"]["user"] = {"uid": 1000, "gid": 1000}


def _own_seccomp(c):
    c["linux"]["seccomp"] = {"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []}


def _with_sysfs(c):
    if any(m["type"] == "sysfs" for m in c["mounts"]):
        return  # crun spec's own (the container-tier control)
    c["mounts"].append({"destination": "/sys", "type": "sysfs", "source": "sysfs",
                        "options": ["nosuid", "noexec", "nodev", "ro"]})


def _noexec_bind(c):
    c["mounts"].append({"destination": "/mnt", "type": "bind", "source": HOST_DIR,
                        "options": ["rbind", "noexec"]})


def _cpu_limit(c):
    c["linux"].setdefault("resources", {})["cpu"] = {"quota": 50000, "period": 100000}


def _cpu_set(c):
    # a CPU quota binds at the host tier now (its cpu group); a CPU set
    # (cpuset, a controller kis makes no group in) is still refused
    c["linux"].setdefault("resources", {})["cpu"] = {"cpus": "0"}


HOST_REFUSALS = [
    ("host_user", _user1000, "process.user"),
    ("host_own_seccomp", _own_seccomp, "linux.seccomp"),
    ("host_noexec", _noexec_bind, "noexec"),
    ("host_cpuset", _cpu_set, "linux.resources.cpu.cpus"),
]


@pytest.mark.skipif("host" not in TIERS, reason="bubblewrap is not installed")
@pytest.mark.parametrize("name,edit,named", HOST_REFUSALS, ids=[r[0] for r in HOST_REFUSALS])
def test_host_tier_refuses_what_bubblewrap_cannot(work, roots, name, edit, named):
    """Each of these runs at the container tier (control) and is refused
    by name at the host tier, never run without it."""
    kr, _ = roots
    log = work / f"log-{name}.json"
    p = krt(kr, "run", "--bundle", str(make_bundle(work, ["echo", "RAN"], at_tier("host", edit))),
            f"krt-{name}", log=log)
    _refused(p, log, "profile_unsatisfiable", named)
    assert "run.kis.tier 'host'" in p.stderr
    ok = krt(kr, "run", "--bundle", str(make_bundle(work, ["echo", "RAN"], edit)),
             f"krt-{name}-ctl")
    assert ok.returncode == 0 and "RAN" in ok.stdout, ok.stderr


@pytest.mark.skipif("host" not in TIERS, reason="bubblewrap is not installed")
def test_host_tier_sysfs_is_an_empty_read_only_directory(work, roots):
    """The sysfs and cgroup mounts every CRI and ctr bundle has: bubblewrap
    mounts no sysfs, and the host's would show its devices and cgroup tree,
    so the host tier gives an empty read-only /sys holding an empty
    /sys/fs/cgroup; the container at the container tier sees a real one."""
    kr, _ = roots

    def cg(c):
        _with_sysfs(c)
        c["mounts"].append({"destination": "/sys/fs/cgroup", "type": "cgroup",
                            "source": "cgroup", "options": ["nosuid", "noexec", "ro"]})
    script = ("ls -A /sys; echo ---; ls -A /sys/fs/cgroup; echo ---; "
              "touch /sys/x 2>/dev/null || echo ro; echo RAN")
    p = krt(kr, "run", "--bundle", str(make_bundle(work, ["sh", "-c", script],
                                                   at_tier("host", cg))), "krt-sysfs")
    assert p.returncode == 0 and "RAN" in p.stdout, p.stderr
    assert p.stdout.split("---") == ["fs\n", "\n", "\nro\nRAN\n"], p.stdout


# ---------------------------------------------------------- microvm tier


def _mem(n):
    def edit(c):
        c["linux"].setdefault("resources", {})["memory"] = {"limit": n}
    return edit


def _bind_dir(c):
    c["mounts"].append({"destination": "/mnt", "type": "bind", "source": HOST_DIR,
                        "options": ["rbind", "ro"]})


def _readonly_root(c):
    c["root"]["readonly"] = True


def _hook(c):
    c["hooks"] = {"createRuntime": [{"path": "/bin/true"}]}


def _sysctl(c):
    c["linux"]["sysctl"] = {"net.ipv4.ip_forward": "1"}


def _rlimit_core(c):
    c["process"]["rlimits"].append({"type": "RLIMIT_CORE", "soft": 0, "hard": 0})


MVM_REFUSALS = [
    ("mvm_small_memory", _mem(32 << 20), "linux.resources.memory.limit"),
    ("mvm_user", _user1000, "process.user"),
    ("mvm_host_network", _no_netns, "network namespace"),
    ("mvm_netns_by_path", _host_netns_by_path, "/ns/net"),
    ("mvm_bind_dir", _bind_dir, f"'{HOST_DIR}' at '/mnt'"),
    ("mvm_readonly_root", _readonly_root, "root.readonly"),
    ("mvm_hooks", _hook, "hooks"),
    ("mvm_device", _disk_device, "/dev/xdisk"),
    ("mvm_sysctl", _sysctl, "net.ipv4.ip_forward"),
    ("mvm_cpu", _cpu_limit, "linux.resources.cpu.quota"),
    ("mvm_rlimit", _rlimit_core, "RLIMIT_CORE"),
]


# the host's own namespace by path and hooks without their hatch: named
# hatches, refused by the model (model.c) for every tier
MVM_BY_THE_MODEL = {"mvm_netns_by_path": "host's own 'network' namespace",
                    "mvm_hooks": "run.kis.allow-hooks"}


@pytest.mark.parametrize("name,edit,named", MVM_REFUSALS, ids=[r[0] for r in MVM_REFUSALS])
def test_microvm_tier_refuses_what_the_guest_cannot_give(work, roots, name, edit, named):
    """Checked before any VM starts: each is refused by name (code, field,
    "run.kis.tier 'microvm'") on stderr and in the json log; nothing is
    left (the roots fixture checks the store and VMs)."""
    kr, _ = roots
    log = work / f"log-{name}.json"
    b = make_bundle(work, ["echo", "RAN"], at_tier("microvm", edit))
    p = krt(kr, "run", "--bundle", str(b), f"krt-{name}", log=log)
    if name in MVM_BY_THE_MODEL:
        # refused by the model at every tier, before the guest's own rules
        _refused(p, log, "escape_hatch_forbidden", MVM_BY_THE_MODEL[name])
    else:
        _refused(p, log, "profile_unsatisfiable", named)
        assert "run.kis.tier 'microvm'" in p.stderr
    assert "RAN" not in p.stdout
    assert not (kr / "kis-microvm" / f"krt-{name}").exists()


def test_binary_name_pins_the_microvm_tier(work, roots, mvm_guest):
    """kis-runtime-microvm (make install's link) runs an unannotated bundle
    in a guest, and refuses one whose annotation asks for the container
    tier."""
    kr, _ = roots
    link = work / "kis-runtime-microvm"
    if not link.exists():
        link.symlink_to(KRT)

    def writable(c):
        c["root"]["readonly"] = False

    g = ["--root", str(kr), "--kis-guest-dir", str(GUEST)]
    p = _run([str(link), *g, "run", "--bundle", str(make_bundle(work, ["uname", "-r"], writable)),
              "krt-pin-m"], timeout=MVM_TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == (mvm_guest / "kernel.release").read_text().strip()
    log = work / "log-pin-m.json"
    p = _run([str(link), *g, "--log", str(log), "--log-format", "json", "run", "--bundle",
              str(make_bundle(work, ["true"], _ann("run.kis.tier", "container"))), "krt-pin-m2"])
    _refused(p, log, "profile_unsatisfiable", "pinned to the 'microvm' tier")


def test_microvm_tier_preserve_fds_is_refused(work, roots):
    kr, _ = roots
    log = work / "log-mvm-fds.json"
    b = make_bundle(work, ["true"], at_tier("microvm"))
    p = krt(kr, "run", "--preserve-fds", "1", "--bundle", str(b), "krt-mvm-fds", log=log)
    _refused(p, log, "profile_unsatisfiable", "--preserve-fds")


def test_microvm_tier_runs_in_its_own_kernel_and_reaches_nothing_of_the_host(
        work, roots, mvm_guest, tmp_path):
    """The bundle's process runs on the guest's kernel (uname -r is the
    guest's kernel.release), its root the bundle's rootfs (a marker there),
    env, cwd and the rlimit from config.json; a canary made on the host
    beside the rootfs is not reachable, and the guest's init is pid 1. The
    bare control: the same probe under crun sees the host's kernel."""
    kr, cr = roots
    canary = tmp_path / "canary"
    canary.write_text("HOST-SECRET\n")
    probe = ("uname -r; echo env=$K; pwd; ulimit -n; cat /proc/1/cmdline | tr '\\0' ' '; echo; "
             f"cat {canary} 2>/dev/null || echo canary-unreachable; "
             "cat /proc/self/status | grep -E '^CapEff:'; test -x /bin/busybox && echo rootfs-ok")

    def edit(c):
        c["process"]["env"].append("K=v-from-config")
        c["process"]["cwd"] = "/tmp"
        c["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": 321, "hard": 321}]

    b = make_bundle(work, ["sh", "-c", probe], at_tier("microvm", edit))
    p = krt(kr, "run", "--bundle", str(b), "krt-mvm-probe")
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    guest_release = (mvm_guest / "kernel.release").read_text().strip()
    assert out[0] == guest_release and out[0] != os.uname().release, out
    assert out[1:4] == ["env=v-from-config", "/tmp", "321"], out
    assert "canary-unreachable" in out and "HOST-SECRET" not in p.stdout, out
    assert "CapEff:\t0000000000000000" in out and "rootfs-ok" in out, out
    ref = crun_ref(cr, "run", "--bundle", str(make_bundle(work, ["uname", "-r"])), "krt-mvm-ref")
    assert ref.stdout.strip() == os.uname().release


# ---------------------------------------------------------- podman

PODMAN_CONF = """
[containers]
# rlimits this host's root may set (it holds no CAP_SYS_RESOURCE here)
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
# no bridge network: a test never changes the host's interfaces or firewall
netns = "none"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
"""


@pytest.fixture(scope="module")
def podman(work):
    """podman with storage, run root and tmp dir of its own, one image
    imported from the module's rootfs; everything removed at the end."""
    if not PODMAN:
        pytest.skip("podman is not installed (Debian package podman)")
    d = work / "podman"
    d.mkdir()
    conf = d / "containers.conf"
    conf.write_text(PODMAN_CONF)
    env = dict(os.environ, CONTAINERS_CONF=str(conf))
    # podman 4.3 keeps these at fixed paths whatever --root says (its blob
    # cache, its network state) and a cleanup it runs later calls the
    # runtime without --runtime-flag: what of them the test makes, it removes
    fixed = [p for p in ("/var/lib/containers", "/run/containers", "/run/kis-runtime")
             if not os.path.exists(p)]
    base = [PODMAN, "--root", str(d / "storage"), "--runroot", str(d / "run"), "--tmpdir",
            str(d / "tmp"), "--storage-driver", "overlay", "--runtime", str(KRT),
            # kis-runtime's state root too (else /run/kis-runtime), and the
            # microvm's guest (conmon passes the runtime no environment)
            "--runtime-flag", f"root={d / 'krt-state'}",
            "--runtime-flag", f"kis-guest-dir={GUEST}"]

    # cwd: conmon writes its "oom" file into its working directory here
    def pm(*args, timeout=120, **kw):
        return subprocess.run([*base, *args], capture_output=True, text=True, env=env,
                              timeout=timeout, cwd=d, **kw)

    tar = d / "rootfs.tar"
    subprocess.run(["tar", "-C", str(work / "rootfs"), "-cf", str(tar), "."], check=True)
    p = pm("import", str(tar), "localhost/kis-busybox:test")
    if p.returncode != 0:
        pytest.skip(f"podman cannot import an image here: {p.stderr.strip()}")
    pm.image = "localhost/kis-busybox:test"
    pm.state = d / "krt-state"
    parent_before = bool(cgroup_dirs("libpod_parent"))
    try:
        yield pm
    finally:
        pm("rm", "--all", "--force", "--time", "0")
        # podman's cleanup deletes without --runtime-flag, so under the
        # default root, where these containers are not: a microvm
        # container's VM ends with its process, and the host tier's cgroup
        # (kis/krt-* under conmon's group) and state are ended here
        for tier in ("kis-microvm", "kis-host"):
            tdir = pm.state / tier
            for c in (p for p in tdir.glob("*") if not p.name.startswith(".")) \
                    if tdir.exists() else []:
                krt(pm.state, "delete", "--force", c.name)
        mvm_leftovers = mvm_left(pm.state)
        for pid in qemu_pids(pm.state):
            os.kill(pid, signal.SIGKILL)
        pm("rmi", "--all", "--force")
        pm("system", "reset", "--force")
        # containers-storage binds its overlay directory onto itself
        for l in reversed(our_mounts(d)):
            subprocess.run(["umount", "-l", l.split()[4]])
        shutil.rmtree(d, ignore_errors=True)
        for p in fixed:
            if os.path.isdir(p) and not our_mounts(p):
                shutil.rmtree(p, ignore_errors=True)
        if not parent_before:  # podman's cgroupfs parent for its containers
            remove_cgroup_tree("libpod_parent")
            assert not cgroup_dirs("libpod_parent"), cgroup_dirs("libpod_parent")
        assert not mvm_leftovers, f"the microvm tier left: {mvm_leftovers}"


def test_podman_exit_codes_and_streams(podman):
    p = podman("run", "--rm", podman.image, "sh", "-c", "echo out; echo err >&2; exit 7")
    assert p.returncode == 7, p.stderr
    assert p.stdout == "out\n" and p.stderr.endswith("err\n")
    assert podman("run", "--rm", podman.image, "true").returncode == 0
    assert podman("run", "--rm", podman.image, "no-such-command").returncode == 127


def test_podman_terminal(podman):
    p = podman("run", "--rm", "-t", podman.image, "sh", "-c", "test -t 0 && test -t 1 && tty")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("/dev/pts/")


def test_podman_exec_kill_rm(podman):
    cid = podman("run", "-d", podman.image, "sleep", "300").stdout.strip()
    assert cid, "no container id"
    p = podman("exec", cid, "sh", "-c", "echo in-$((6*7)); exit 5")
    assert (p.returncode, p.stdout) == (5, "in-42\n")
    assert podman("exec", "-t", cid, "tty").stdout.startswith("/dev/pts/")
    assert podman("kill", cid).returncode == 0
    assert podman("wait", cid).stdout.strip() == "137"
    assert podman("rm", cid).returncode == 0
    assert cid not in podman("ps", "-aq", "--no-trunc").stdout


def test_podman_memory_limit_ends_in_oom_kill(podman):
    """--memory 32m: a string doubled without end is killed by the memory
    cgroup's OOM killer (SIGKILL, 137), as the cgroup's own counter shows;
    the rest of the container lives on to report it."""
    oom_file = "memory.events" if LAYOUT == 2 else "memory.oom_control"
    hog = ("(a=x; while :; do a=$a$a; done); echo hog=$?; "
           f"cat /sys/fs/cgroup/{'' if LAYOUT == 2 else 'memory/'}{oom_file} 2>/dev/null; "
           "sleep 30")
    cid = podman("run", "-d", "--memory", "32m", podman.image, "sh", "-c", hog).stdout.strip()
    try:
        pid = int(podman("inspect", "--format", "{{.State.Pid}}", cid).stdout)
        f = _cgroup_file(pid, "memory", oom_file)
        end = time.monotonic() + 30
        while time.monotonic() < end and "hog=" not in podman("logs", cid).stdout:
            time.sleep(0.2)
        assert "hog=137" in podman("logs", cid).stdout
        counters = dict(l.split() for l in f.read_text().splitlines())
        assert int(counters["oom_kill"]) >= 1
        limit = _cgroup_file(pid, "memory",
                             "memory.max" if LAYOUT == 2 else "memory.limit_in_bytes")
        assert int(limit.read_text()) == 32 << 20
    finally:
        podman("rm", "--force", "--time", "0", cid)
    # the whole container killed by the limit: exit 137
    p = podman("run", "--rm", "--memory", "32m", podman.image, "sh", "-c",
               "a=x; while :; do a=$a$a; done")
    assert p.returncode == 137


def test_podman_network_none(podman):
    p = podman("run", "--rm", "--network", "none", podman.image, "cat", "/proc/net/dev")
    ifaces = [l.split(":")[0].strip() for l in p.stdout.splitlines()[2:]]
    assert ifaces == ["lo"], p.stdout + p.stderr


def test_podman_refusals_reach_the_user(podman):
    for args, code, named in (
            (["--cap-add", "SYS_ADMIN"], "profile_unsatisfiable", "CAP_SYS_ADMIN"),
            (["--privileged"], "profile_unsatisfiable", "process.capabilities"),
            (["--network", "host"], "escape_hatch_forbidden", "run.kis.allow-net-host"),
            (["--device", "/dev/loop-control"], "profile_unsatisfiable", "/dev/loop-control"),
            # the guest's memory is its RAM: below what it boots with, refused
            (["--annotation", "run.kis.tier=microvm", "--memory", "32m"],
             "profile_unsatisfiable", "linux.resources.memory.limit"),
            # podman's bundle has its own seccomp, a sysfs and a cgroup mount
            (["--annotation", "run.kis.tier=host"], "profile_unsatisfiable",
             "run.kis.tier 'host'")):
        p = podman("run", "--rm", *args, podman.image, "echo", "RAN")
        assert p.returncode != 0 and "RAN" not in p.stdout, (args, p.stdout)
        assert code in p.stderr and named in p.stderr, (args, p.stderr)
    assert podman("ps", "-aq").stdout.strip() == ""


# podman's bundle at the host tier: podman always gives a seccomp filter,
# which the host tier refuses (by name, above). Without it (kis's own is
# then loaded) the bundle is one bubblewrap runs; its sysfs and cgroup
# mounts are the host tier's empty read-only /sys.
HOST = ["--annotation", "run.kis.tier=host", "--security-opt", "seccomp=unconfined"]


@pytest.mark.skipif("host" not in TIERS, reason="bubblewrap is not installed")
def test_podman_host_tier(podman):
    """podman at the host tier: exit codes, streams, kis's seccomp filter
    in place of the one podman was told to drop, pid 1 of its namespace,
    -t, exec (-t), kill and rm, --network none, --memory's OOM kill.
    (A terminal bwrap's /dev does not name: isatty, not ttyname.)"""
    p = podman("run", "--rm", *HOST, podman.image, "sh", "-c",
               "echo out; echo err >&2; echo pid=$$; grep Seccomp: /proc/self/status; exit 7")
    assert p.returncode == 7, p.stderr
    assert p.stdout == "out\npid=1\nSeccomp:\t2\n" and p.stderr.endswith("err\n"), p.stdout
    assert podman("run", "--rm", *HOST, podman.image, "no-such-command").returncode == 127
    p = podman("run", "--rm", "-t", *HOST, podman.image, "sh", "-c",
               "test -t 0 && test -t 1 && echo TTY")
    assert p.returncode == 0 and "TTY" in p.stdout, p.stdout + p.stderr
    p = podman("run", "--rm", "--network", "none", *HOST, podman.image, "cat", "/proc/net/dev")
    assert [l.split(":")[0].strip() for l in p.stdout.splitlines()[2:]] == ["lo"], p.stdout
    # --memory alone gives a swap limit of twice the memory, which the host
    # tier does not enforce (refused by name); swap equal to memory is none
    p = podman("run", "--rm", "--memory", "32m", *HOST, podman.image, "true")
    assert p.returncode != 0 and "linux.resources.memory.swap" in p.stderr, p.stderr
    p = podman("run", "--rm", "--memory", "32m", "--memory-swap", "32m", *HOST, podman.image,
               "sh", "-c", "(a=x; while :; do a=$a$a; done); echo hog=$?")
    assert "hog=137" in p.stdout, p.stdout + p.stderr
    cid = podman("run", "-d", *HOST, podman.image, "sleep", "300").stdout.strip()
    assert cid, "no container id"
    try:
        p = podman("exec", cid, "sh", "-c", "echo in-$((6*7)); exit 5")
        assert (p.returncode, p.stdout) == (5, "in-42\n"), p.stderr
        p = podman("exec", "-t", cid, "sh", "-c", "test -t 0 && test -t 1 && echo TTY")
        assert "TTY" in p.stdout, p.stdout + p.stderr
        assert podman("kill", cid).returncode == 0
        assert podman("wait", cid).stdout.strip() == "137"
        assert podman("rm", cid).returncode == 0
        assert cid not in podman("ps", "-aq", "--no-trunc").stdout
    finally:
        podman("rm", "--force", "--time", "0", cid)


MVM = ["--annotation", "run.kis.tier=microvm"]


def test_podman_microvm_exit_codes_streams_terminal_network(podman, mvm_guest):
    """podman run at the microvm tier: exit codes, stdout and stderr apart,
    -t, --network none (the guest's lo only), the guest's kernel."""
    p = podman("run", "--rm", *MVM, podman.image, "sh", "-c", "echo out; echo err >&2; exit 7",
               timeout=MVM_TIMEOUT)
    assert p.returncode == 7, p.stderr
    assert p.stdout == "out\n" and p.stderr.endswith("err\n")
    assert podman("run", "--rm", *MVM, podman.image, "no-such-command",
                  timeout=MVM_TIMEOUT).returncode == 127
    p = podman("run", "--rm", "-t", *MVM, podman.image, "sh", "-c",
               "test -t 0 && test -t 1 && tty", timeout=MVM_TIMEOUT)
    assert p.returncode == 0 and p.stdout.startswith("/dev/pts/"), p.stdout + p.stderr
    p = podman("run", "--rm", "--network", "none", *MVM, podman.image, "sh", "-c",
               "uname -r; cat /proc/net/dev; echo routes; tail -n +2 /proc/net/route; "
               "echo eth0=$(cat /sys/class/net/eth0/operstate 2>/dev/null)",
               timeout=MVM_TIMEOUT)
    lines = p.stdout.splitlines()
    assert lines[0] == (mvm_guest / "kernel.release").read_text().strip(), p.stdout + p.stderr
    # the guest's loopback, and the VM's network device (in every VM's
    # device set, its backend a hub port with nothing on it) down, with
    # no route through it
    ifs = [l.split(":")[0].strip() for l in lines[3:lines.index("routes")]]
    assert ifs in (["lo"], ["lo", "eth0"]), p.stdout
    assert lines[lines.index("routes") + 1].startswith("eth0="), p.stdout
    assert lines[-1] in ("eth0=", "eth0=down"), p.stdout


def test_podman_microvm_exec_kill_rm(podman, mvm_guest):
    cid = podman("run", "-d", *MVM, podman.image, "sleep", "300",
                 timeout=MVM_TIMEOUT).stdout.strip()
    assert cid, "no container id"
    try:
        p = podman("exec", cid, "sh", "-c", "echo in-$((6*7)); exit 5", timeout=MVM_TIMEOUT)
        assert (p.returncode, p.stdout) == (5, "in-42\n"), p.stderr
        assert podman("exec", "-t", cid, "tty").stdout.startswith("/dev/pts/")
        assert podman("kill", cid).returncode == 0
        assert podman("wait", cid).stdout.strip() == "137"
        # the VM ended with the container's process
        assert not qemu_pids(podman.state), "a VM outlived its stopped container"
        assert podman("rm", cid).returncode == 0
        assert cid not in podman("ps", "-aq", "--no-trunc").stdout
    finally:
        podman("rm", "--force", "--time", "0", cid)


def test_podman_microvm_memory_limit_ends_in_oom_kill(podman, mvm_guest):
    """--memory 256m is the guest's RAM: a string doubled without end is
    killed by the guest kernel's OOM killer (137) and the container lives
    on to say so; the guest sees about that much memory, not the host's."""
    hog = ("(a=x; while :; do a=$a$a; done); echo hog=$?; "
           "grep MemTotal /proc/meminfo")
    p = podman("run", "--rm", "--memory", "256m", *MVM, podman.image, "sh", "-c", hog,
               timeout=MVM_TIMEOUT)
    assert "hog=137" in p.stdout, p.stdout + p.stderr
    total_kib = int(p.stdout.split("MemTotal:")[1].split()[0])
    assert 128 << 10 < total_kib <= 256 << 10, total_kib
    p = podman("run", "--rm", "--memory", "256m", *MVM, podman.image, "sh", "-c",
               "a=x; while :; do a=$a$a; done", timeout=MVM_TIMEOUT)
    assert p.returncode == 137, p.stderr


# ---------------------------------------------------------- containerd


@pytest.fixture(scope="module")
def containerd(work):
    """A containerd of the test's own: root, state, sockets under the
    module's directory, no CRI plugin; its containers use the runc v2
    shim with BinaryName (ctr --runc-binary) set to kis-runtime."""
    if not (CONTAINERD and CTR and SHIM):
        pytest.skip("containerd, ctr or containerd-shim-runc-v2 missing (Debian containerd)")
    d = work / "containerd"
    d.mkdir()
    ns = f"kis-test-{uuid.uuid4().hex[:8]}"
    sock = d / "c.sock"
    (d / "config.toml").write_text(f"""version = 2
root = "{d}/root"
state = "{d}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{d}/c-ttrpc.sock"
[debug]
  address = ""
[metrics]
  address = ""
""")
    # the shim's runc root (/run/containerd/runc/<namespace>), its sockets
    # (s/) and ctr's fifos (fifo/) are there whatever the daemon's own state
    # dir: what of those the test makes, it removes (when empty)
    made_run = [p for p in ("/run/containerd", "/run/containerd/runc", "/run/containerd/s",
                            "/run/containerd/fifo") if not os.path.exists(p)]
    log = open(d / "containerd.log", "w")
    # the shim runs kis-runtime with the daemon's environment: the
    # microvm's guest is named there
    daemon = subprocess.Popen([CONTAINERD, "--config", str(d / "config.toml")], stdout=log,
                              stderr=subprocess.STDOUT,
                              env=dict(os.environ, KIS_MICROVM_GUEST_DIR=str(GUEST)))

    def ctr(*args, timeout=60):
        return subprocess.run([CTR, "--address", str(sock), "-n", ns, *args],
                              capture_output=True, text=True, timeout=timeout)

    ctr.rootfs = str(work / "rootfs")
    ctr.dir = d
    ctr.ns = ns
    # ctr run [flags] --rootfs DIR ID CMD...: --rootfs makes the first
    # positional a directory, not an image
    ctr.run = lambda cid, *rest: ctr("run", "--runc-binary", str(KRT), *rest[:-1], "--rootfs",
                                     ctr.rootfs, cid, *rest[-1])
    try:
        end = time.monotonic() + 20
        while ctr("version").returncode != 0:
            if time.monotonic() > end or daemon.poll() is not None:
                pytest.skip("the private containerd did not start: "
                            + (d / "containerd.log").read_text()[-500:])
            time.sleep(0.1)
        yield ctr
    finally:
        for t in ctr("task", "ls", "-q").stdout.split():
            ctr("task", "kill", "-s", "KILL", t)
            ctr("task", "delete", "--force", t)
        for c in ctr("container", "ls", "-q").stdout.split():
            ctr("container", "delete", c)
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        log.close()
        # the shim keeps its runc state under /run/containerd/runc/<namespace>
        # and ctr's containers' cgroups are /<namespace>/<id>
        shutil.rmtree(f"/run/containerd/runc/{ns}", ignore_errors=True)
        for p in reversed(made_run):
            try:
                os.rmdir(p)
            except OSError:
                pass
        remove_cgroup_tree(ns)
        assert not cgroup_dirs(ns), cgroup_dirs(ns)
        for l in reversed(our_mounts(d)):
            subprocess.run(["umount", "-l", l.split()[4]])
        shutil.rmtree(d, ignore_errors=True)


def test_containerd_run_exit_status_and_streams(containerd):
    p = containerd.run("krt-c1", "--rm", ["/bin/sh", "-c", "echo out; echo err >&2; "
                                                       "grep Seccomp: /proc/self/status; exit 5"])
    assert p.returncode == 5, p.stderr
    assert "out\n" in p.stdout and "err" in p.stdout + p.stderr
    # ctr gives no seccomp of its own: kis's is there
    assert "Seccomp:\t2" in p.stdout


def test_containerd_exec_kill_delete(containerd):
    p = containerd.run("krt-c2", "-d", ["/bin/sleep", "300"])
    assert p.returncode == 0, p.stderr
    p = containerd("task", "exec", "--exec-id", "e1", "krt-c2", "/bin/sh", "-c",
                   "echo in; exit 6")
    assert (p.returncode, p.stdout) == (6, "in\n")
    assert containerd("task", "kill", "-s", "KILL", "krt-c2").returncode == 0
    end = time.monotonic() + 10
    while "STOPPED" not in containerd("task", "ls").stdout and time.monotonic() < end:
        time.sleep(0.1)
    assert "STOPPED" in containerd("task", "ls").stdout
    assert containerd("task", "delete", "krt-c2").returncode == 0
    assert containerd("container", "delete", "krt-c2").returncode == 0
    assert "krt-c2" not in containerd("container", "ls", "-q").stdout


def test_containerd_refusal_is_the_task_error(containerd):
    p = containerd.run("krt-c3", "--rm", "--privileged", ["/bin/true"])
    assert p.returncode != 0
    assert "profile_unsatisfiable" in p.stderr and "process.capabilities" in p.stderr, p.stderr
    containerd("container", "delete", "krt-c3")


def test_containerd_microvm_run_exec_kill_delete(containerd, mvm_guest):
    """ctr run with the annotation: the task runs in a guest (its kernel),
    exit status and streams through the shim; exec into it, kill, delete;
    the VM ends with the task. The shim's runc root (/run/containerd/runc/
    <namespace>) is kis-runtime's --root."""
    ann = ["--annotation", "run.kis.tier=microvm"]
    p = containerd.run("krt-m1", "--rm", *ann, ["/bin/sh", "-c", "echo out; echo err >&2; "
                                                "uname -r; exit 5"])
    assert p.returncode == 5, p.stdout + p.stderr
    assert "out\n" in p.stdout and "err" in p.stdout + p.stderr
    assert (mvm_guest / "kernel.release").read_text().strip() in p.stdout
    p = containerd.run("krt-m2", "-d", *ann, ["/bin/sleep", "300"])
    assert p.returncode == 0, p.stderr
    root = Path(f"/run/containerd/runc/{containerd.ns}")
    try:
        assert (root / "kis-microvm" / "krt-m2").is_dir()  # the microvm tier's state
        assert qemu_pids(root), "no VM runs the task"
        p = containerd("task", "exec", "--exec-id", "e1", "krt-m2", "/bin/sh", "-c",
                       "echo in; exit 6", timeout=MVM_TIMEOUT)
        assert (p.returncode, p.stdout) == (6, "in\n"), p.stderr
        assert containerd("task", "kill", "-s", "KILL", "krt-m2").returncode == 0
        end = time.monotonic() + 20
        while "STOPPED" not in containerd("task", "ls").stdout and time.monotonic() < end:
            time.sleep(0.1)
        assert "STOPPED" in containerd("task", "ls").stdout
        assert containerd("task", "delete", "krt-m2").returncode == 0
        assert containerd("container", "delete", "krt-m2").returncode == 0
    finally:
        containerd("task", "delete", "--force", "krt-m2")
        containerd("container", "delete", "krt-m2")
    assert not mvm_left(root), mvm_left(root)


def test_containerd_host_tier_run_exec_kill_delete(containerd, work):
    """ctr's own spec (a sysfs and a cgroup tree among its mounts: the host
    tier's empty read-only /sys) runs at the host tier; so does a spec
    made for it (ctr run --config, the same path a CRI engine's spec
    takes): exit status, streams, exec, kill, delete under bubblewrap."""
    if not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed")
    p = containerd.run("krt-h0", "--rm", "--annotation", "run.kis.tier=host",
                       ["/bin/sh", "-c", "ls -A /sys; exit 4"])
    assert p.returncode == 4 and p.stdout == "fs\n", (p.returncode, p.stdout, p.stderr)

    def spec(args, name):
        b = make_bundle(work, args, host_tier, name=name)
        return str(b / "config.json")

    p = containerd("run", "--runc-binary", str(KRT), "--rm", "--config",
                   spec(["/bin/sh", "-c", "echo out; echo err >&2; echo pid=$$; exit 5"],
                        "ctr-host-1"), "krt-h1")
    assert p.returncode == 5, p.stdout + p.stderr
    assert "out\n" in p.stdout and "pid=1" in p.stdout and "err" in p.stdout + p.stderr
    p = containerd("run", "--runc-binary", str(KRT), "-d", "--config",
                   spec(["/bin/sleep", "300"], "ctr-host-2"), "krt-h2")
    assert p.returncode == 0, p.stderr
    try:
        # the host tier's state, and the task's pid is bubblewrap (the
        # container's process is its child, pid 1 of its namespace)
        root = Path(f"/run/containerd/runc/{containerd.ns}")
        assert (root / "kis-host" / "krt-h2").is_dir()
        pid = int(containerd("task", "ls").stdout.split("krt-h2")[1].split()[0])
        assert open(f"/proc/{pid}/cmdline").read().split("\0")[0].endswith("bwrap")
        p = containerd("task", "exec", "--exec-id", "e1", "krt-h2", "/bin/sh", "-c",
                       "echo in; exit 6")
        assert (p.returncode, p.stdout) == (6, "in\n"), p.stderr
        assert containerd("task", "kill", "-s", "KILL", "krt-h2").returncode == 0
        end = time.monotonic() + 10
        while "STOPPED" not in containerd("task", "ls").stdout and time.monotonic() < end:
            time.sleep(0.1)
        assert "STOPPED" in containerd("task", "ls").stdout
        assert containerd("task", "delete", "krt-h2").returncode == 0
        assert containerd("container", "delete", "krt-h2").returncode == 0
    finally:
        containerd("task", "delete", "--force", "krt-h2")
        containerd("container", "delete", "krt-h2")
