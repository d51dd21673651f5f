# SPDX-License-Identifier: MIT
# Nothing left behind: an engine killed or interrupted at any point of `run` or
# `create` leaves no process, container, VM, mount, cgroup or file (issue 22).
#
# The engine stops at a named point when KIS_TEST_PAUSE_AT names it (a test
# hook, README "Test hooks") and says so on stderr with the run's owner id;
# the test then kills or signals it and looks for anything of that run.
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from conftest import KIS, kis

HOST_BACKENDS = ["process", "landlock", "bubblewrap", "oci"]


def caps():
    p = kis("backends", "--json", timeout=120)
    return {c["backend"]: c for c in json.loads(p.stdout)} if p.returncode == 0 else {}


CAPS = None


def require(backend):
    global CAPS
    if os.geteuid() != 0:
        pytest.skip("needs root (cgroups, overlay clones, crun)")
    if CAPS is None:
        CAPS = caps()
    c = CAPS.get(backend)
    if not c or not c.get("available"):
        pytest.skip(f"{backend} is absent here: {c and (c.get('why_absent') or c.get('status'))}")


def flags(backend):
    f = ["--backend", backend]
    if backend == "process":
        f.append("--allow-process-tier")
    return f


def memory(backend):
    """--memory 64M, where the backend takes it as root: the process tier
    refuses it (a root command can leave its cgroup), and its cgroup is
    made for the default limits all the same."""
    return [] if backend == "process" and os.geteuid() == 0 else ["--memory", "64M"]


@pytest.fixture
def store(monkeypatch):
    """A private store under a directory others may search: the host tiers
    run commands as an unprivileged user, who must reach the workspace."""
    top = Path(tempfile.mkdtemp(prefix="kis-leftovers-", dir="/tmp"))
    os.chmod(top, 0o711)
    root = top / "store"
    monkeypatch.setenv("KIS_SANDBOX_ROOT", str(root))
    try:
        yield root
    finally:
        for s in (root / "sessions").glob("s-*"):
            kis("session", "destroy", s.name)
        kis("gc")
        for w in json.loads(kis("workspace", "list", "--json").stdout or "[]"):
            kis("destroy", w["id"])
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def base(store, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("hello\n")
    p = kis("base", "import", str(src))
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().splitlines()[-1]


def state(store):
    """What a user checks: workspaces, sessions, bases with their refcounts."""
    ws = json.loads(kis("workspace", "list", "--json").stdout or "[]")
    ss = json.loads(kis("session", "list", "--json").stdout or "[]")
    bs = json.loads(kis("base", "list", "--json").stdout or "[]")
    return (sorted(w["id"] for w in ws), sorted(s["id"] for s in ss),
            sorted((b["id"], b["clones"], b["state"]) for b in bs))


def commands_with(argv0, marker):
    """Processes whose argv[0] is argv0 and whose command line names marker."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].rsplit(b"/", 1)[-1] == argv0.encode() and marker.encode() in cmd:
            out.append(int(d.name))
    return out


def procs_with(marker):
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if marker.encode() in (d / "cmdline").read_bytes():
                out.append(int(d.name))
        except OSError:
            pass
    return out


def kill_pids(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def cgroups_named(name):
    """Every directory called name in any cgroup hierarchy (v1 controllers
    and the v2 mount, /sys/fs/cgroup/unified on a hybrid)."""
    hits = []
    for top, dirs, _ in os.walk("/sys/fs/cgroup"):
        if name in dirs:
            hits.append(os.path.join(top, name))
    return hits


def loops_of(store):
    """Loop devices whose backing file is in the store (a workspace's disk
    image, issue 41)."""
    out = []
    for b in Path("/sys/block").glob("loop*"):
        try:
            f = (b / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if f.startswith(str(store)):
            out.append(f"{b.name}: {f}")
    return out


def leftovers(store, owner, marker):
    """Everything of the run `owner` still on the host, by kind."""
    left = {}
    p = procs_with(marker) if marker else []
    if p:
        left["process"] = p
    g = cgroups_named(owner)
    if g:
        left["cgroup"] = g
    if Path(f"/tmp/kis-{owner}").exists():
        left["tmp"] = f"/tmp/kis-{owner}"
    for d in (f"/run/crun/kis-{owner}", f"/run/kis/oci/kis-{owner}"):
        if Path(d).exists():
            left.setdefault("container", []).append(d)
    m = [l for l in open("/proc/self/mountinfo") if str(store) in l]
    if m:
        left["mount"] = m
    # the image's last mount may sit a moment in a dying sandbox's namespace
    wait_for(lambda: not loops_of(store), timeout=5)
    loops = loops_of(store)
    if loops:
        left["loop"] = loops
    if (Path(store) / "owners" / owner).exists():
        left["owner"] = owner
    if any(Path(store, "sessions").glob(f"*{owner}*")):
        left["session"] = [str(x) for x in Path(store, "sessions").glob(f"*{owner}*")]
    return left


def start_paused(args, point, timeout=60):
    """Start `kis sandbox ARGS` stopping at point; returns (proc, owner id)."""
    env = dict(os.environ, KIS_TEST_PAUSE_AT=point)
    p = subprocess.Popen([str(KIS), "sandbox", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if "test pause at" in line or not line:
            break
    if "test pause at" not in line:
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"never reached {point}: {line}{err}")
    owner = line.split("owner ")[1].split(",")[0]
    assert owner.startswith("s-"), line
    return p, owner


def signal_and_wait(p, sig):
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()  # never leave a stuck engine behind the test
        p.communicate()
        raise
    return p.returncode, out, err


def wait_for(pred, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


def command_for(point, marker):
    # teardown comes after the command: it must end for the run to get there
    return ["true"] if point == "teardown" else ["sleep", marker]


def points_for(backend):
    pts = ["clone", "cloned", "teardown"]
    if backend != "oci":
        pts.append("setup")  # a host tier's cgroup made
    else:
        pts.append("handshake")  # crun started, the agent's HELLO awaited
    return pts


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_run_killed_at_any_point_leaves_nothing(store, base, backend):
    require(backend)
    before = state(store)
    for point in points_for(backend):
        marker = f"3{uuid.uuid4().int % 10**6}.5"
        p, owner = start_paused(["run", *flags(backend), "--base", base, *memory(backend),
                                 "--", *command_for(point, marker)], point)
        p.kill()
        p.wait()
        # the next command sweeps: the owner's lock died with the engine
        after = state(store)
        left = leftovers(store, owner, marker)
        kill_pids(left.get("process", []))
        assert not left, f"{backend} killed at {point} left {left}"
        assert after == before, f"{backend} killed at {point}"


@pytest.mark.parametrize("backend", HOST_BACKENDS)
def test_run_killed_while_its_command_runs_leaves_nothing(store, base, backend):
    require(backend)
    before = state(store)
    marker = f"4{uuid.uuid4().int % 10**6}.5"
    p = subprocess.Popen([str(KIS), "sandbox", "run", *flags(backend), "--base", base,
                          *memory(backend), "--", "sleep", marker],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: procs_with(marker)), "the command never started"
    finally:
        p.kill()
        p.wait()
    # the command dies with its engine (PR_SET_PDEATHSIG, the container's
    # agent losing its channel) without waiting for a sweep
    gone = wait_for(lambda: not procs_with(marker), timeout=10)
    left_procs = procs_with(marker)
    kill_pids(left_procs)
    assert gone, f"{backend}: the command outlived its engine: {left_procs}"
    after = state(store)
    owner_dirs = list((Path(store) / "owners").iterdir())
    assert not owner_dirs, owner_dirs
    assert after == before
    assert not [l for l in open("/proc/self/mountinfo") if str(store) in l]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("backend", ["landlock", "oci"])
def test_signal_at_any_point_is_cancelled_with_128_plus_n(store, base, backend, sig):
    require(backend)
    before = state(store)
    for point in points_for(backend):
        p, owner = start_paused(["run", "--json", *flags(backend), "--base", base, "--",
                                 *command_for(point, "20")], point)
        t0 = time.monotonic()
        rc, out, err = signal_and_wait(p, sig)
        took = time.monotonic() - t0
        r = json.loads(out)
        assert r["termination"]["reason"] == "cancelled", (point, r, err)
        assert rc == 128 + sig == r["exit_status"], (point, rc, r)
        assert took < 10, f"{point}: the signal took {took:.1f}s to end the run"
        assert not leftovers(store, owner, None), point
    assert state(store) == before


def test_sigterm_during_a_running_command_is_cancelled_with_143(store, base):
    require("landlock")
    marker = f"6{uuid.uuid4().int % 10**6}.5"
    p = subprocess.Popen([str(KIS), "sandbox", "run", "--json", "--backend", "landlock",
                          "--base", base, "--", "sleep", marker], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # the command itself, not kis, whose own command line names the marker
    assert wait_for(lambda: commands_with("sleep", marker)), "the command never started"
    rc, out, err = signal_and_wait(p, signal.SIGTERM)
    r = json.loads(out)
    assert r["termination"]["reason"] == "cancelled"
    assert rc == 143 and r["exit_status"] == 143


@pytest.mark.parametrize("backend", ["landlock", "oci"])
@pytest.mark.parametrize("point", ["create-clone", "create-start", "create-ready"])
def test_create_killed_before_ready_leaves_nothing(store, base, backend, point):
    require(backend)
    before = state(store)
    p, owner = start_paused(["create", *flags(backend), "--base", base], point)
    p.kill()
    p.wait()
    after = state(store)  # session list: the next command sweeps
    left = leftovers(store, owner, None)
    assert not left, f"create on {backend} killed at {point} left {left}"
    assert after == before


def test_destroy_ends_a_session_whose_create_was_killed(store, base):
    require("oci")
    p, owner = start_paused(["create", "--backend", "oci", "--base", base], "create-ready")
    p.kill()
    p.wait()
    # The container was up; its guard removes it now, as the creator died
    # before publishing the session (issue 46, test_killed_engine.py).
    # Destroy by the id the creator would have printed, with nothing swept
    # first, works whether the guard is done or still at it.
    d = kis("session", "destroy", owner)
    assert d.returncode == 0, d.stderr
    assert not leftovers(store, owner, None)


def test_live_session_survives_its_client_killed_and_still_works(store, base):
    require("landlock")
    c = kis("create", "--backend", "landlock", "--base", base)
    assert c.returncode == 0, c.stderr
    sid = c.stdout.strip()
    try:
        marker = f"5{uuid.uuid4().int % 10**6}.5"
        p = subprocess.Popen([str(KIS), "sandbox", "exec", sid, "--", "sleep", marker],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_for(lambda: procs_with(marker))
        p.kill()
        p.wait()
        kis("gc")  # a sweep must not take a live session for a leftover
        e = kis("exec", sid, "--", "cat", "f")
        assert e.returncode == 0 and e.stdout == "hello\n", e.stderr
        ls = json.loads(kis("session", "list", "--json").stdout)
        assert [s["state"] for s in ls if s["id"] == sid] == ["running"]
    finally:
        assert kis("session", "destroy", sid).returncode == 0


def test_gc_lists_what_a_killed_run_left_and_dry_run_keeps_it(store, base):
    require("landlock")
    p, owner = start_paused(["run", "--backend", "landlock", "--base", base, "--memory", "64M",
                             "--", "true"], "setup")
    p.kill()
    p.wait()
    env = {"KIS_SANDBOX_ROOT": str(store)}
    # gc opens the store without its passing sweep: it reports what it takes
    dry = kis("gc", "--dry-run", "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    d = json.loads(dry.stdout)
    assert d["dry_run"] is True
    kinds = {i["kind"] for i in d["items"] if i.get("owner") == owner}
    # at setup the clone and the run's cgroup exist (the private /tmp comes later)
    assert {"workspace", "cgroup"} <= kinds, d
    assert all(i["state"] == "found" for i in d["items"])
    assert cgroups_named(owner), "a dry run removed the cgroup"
    real = kis("gc", "--json", env=env)
    r = json.loads(real.stdout)
    assert {i["kind"] for i in r["items"] if i["state"] == "removed"} >= kinds
    assert not leftovers(store, owner, None)
    assert kis("gc").stdout.strip() == "nothing left behind"


def test_import_refuses_the_store_and_a_tree_inside_it(store, tmp_path, base):
    p = kis("base", "import", str(store.parent))
    assert p.returncode != 0 and "contains the store" in p.stderr
    assert len(p.stderr) < 300
    p = kis("base", "import", str(store / "bases" / base))
    assert p.returncode != 0 and "inside the store" in p.stderr
    assert [b["id"] for b in json.loads(kis("base", "list", "--json").stdout)] == [base]


# ---- microvm: one kill (a TCG boot takes seconds) ----

GUEST = Path(os.environ.get("KIS_MICROVM_GUEST_DIR",
                            Path(__file__).resolve().parents[2] / "build" / "microvm-guest"))


def fd_links(pid):
    try:
        return [os.readlink(f) for f in Path(f"/proc/{pid}/fd").iterdir()]
    except OSError:
        return []


def cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _ppid(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("PPid:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def test_microvm_run_killed_at_its_handshake_leaves_no_vm_nor_disk(tmp_path):
    if not Path("/usr/bin/qemu-system-x86_64").exists() or not (GUEST / "vmlinuz").exists():
        pytest.skip("no QEMU or no guest kernel in build/microvm-guest "
                    "(scripts/guest/fetch-kernel.sh)")
    store = tmp_path / "store"
    env = dict(os.environ, KIS_SANDBOX_ROOT=str(store), KIS_MICROVM_GUEST_DIR=str(GUEST))
    before = set(Path("/tmp").glob("kis-mvm.*"))
    pe = dict(env, KIS_TEST_PAUSE_AT="handshake")
    p = subprocess.Popen([str(KIS), "sandbox", "run", "--tier", "microvm", "--", "true"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=pe)
    line = ""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if "test pause at" in line or not line:
            break
    # our VM: a QEMU with a file open in one of the run's new directories
    # (the jailed VMM names no host path on its command line: its disks
    # and log are descriptors)
    new = set(Path("/tmp").glob("kis-mvm.*")) - before
    # a one-shot run's VMM is its engine's own child (the jail is cloned
    # by the engine): another engine's VMs, started meanwhile, are not
    mine = [pid for pid in procs_with("qemu-system")
            if any(str(d) in link for d in new for link in fd_links(pid))
            and _ppid(pid) == p.pid]
    # only this run's directories: another engine on the machine may make
    # its own meanwhile
    new = {d for d in new if any(str(d) in link for pid in mine for link in fd_links(pid))}
    p.kill()
    p.wait()
    assert "test pause at" in line, line
    assert mine, "no QEMU of this run was found at its handshake"
    subprocess.run([str(KIS), "sandbox", "gc"], env=env, capture_output=True, timeout=60)
    alive = wait_for(lambda: not [pid for pid in mine if Path(f"/proc/{pid}").exists()], 10)
    left = [pid for pid in mine if Path(f"/proc/{pid}").exists()]
    kill_pids(left)
    assert alive, f"the VM outlived its engine: {left}"
    assert not [d for d in new if d.exists()], "the VM's directory stayed"
    # and its VMM's cgroup, named by the run (they stayed: the sweep knew
    # a run's cgroups by its id alone)
    owner = line.split("(owner ", 1)[1].split(",", 1)[0]
    engine = line.split(", pid ", 1)[1].split(")", 1)[0]
    stayed = [str(c) for pat in (f"{owner}-vmm*", f"mvm-{engine}-*")
              for c in Path("/sys/fs/cgroup").glob(f"**/kis/{pat}")]
    assert not stayed, f"the VMM's cgroup stayed: {stayed}"


def test_a_killed_probes_cgroup_is_removed_by_the_next_probe(tmp_path):
    """backends probes the cgroups with a leaf named by its pid, outside any
    run's record: an engine killed there left it (6 on this machine after a
    day of kill tests). The next probe beside it removes it; one whose
    engine lives (here: this test) stays."""
    own = [l.split(":", 2)[2] for l in Path("/proc/self/cgroup").read_text().splitlines()
           if l.split(":", 2)[1] == "pids"]
    if not own or not Path("/sys/fs/cgroup/pids").is_dir():
        pytest.skip("no cgroup v1 pids hierarchy here")
    parent = Path("/sys/fs/cgroup/pids") / own[0].lstrip("/") / "kis"
    gone = subprocess.Popen(["true"])
    gone.wait()
    made = []
    try:
        parent.mkdir(exist_ok=True)
        for pid in (gone.pid, os.getpid()):
            (parent / f"probe-{pid}").mkdir()
            made.append(parent / f"probe-{pid}")
        env = dict(os.environ, KIS_SANDBOX_ROOT=str(tmp_path / "store"))
        p = subprocess.run([str(KIS), "sandbox", "backends", "--json"], env=env,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert not (parent / f"probe-{gone.pid}").exists(), "a dead engine's probe stayed"
        assert (parent / f"probe-{os.getpid()}").exists(), "a live engine's probe was taken"
    finally:
        for d in made:
            if d.exists():
                d.rmdir()
