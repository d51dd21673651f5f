# SPDX-License-Identifier: MIT
# limits.disk_bytes on a store whose filesystem keeps no project quotas
# (issue 41): an overlay workspace's writable layer is a loop-mounted ext4
# image of the limit's size, on every native tier and a session's exec.
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import KIS, kis

BACKENDS = ["landlock", "bubblewrap", "oci"]


def wait_no_loops(store, timeout=10):
    """The loop device detaches with the image's last mount, which a
    sandbox's mount namespace may hold for a moment after the run ended
    (the kernel tears a dead namespace down on its own time)."""
    deadline = time.monotonic() + timeout
    while loops_of(store) and time.monotonic() < deadline:
        time.sleep(0.05)
    return loops_of(store)


def loops_of(store):
    out = []
    for b in Path("/sys/block").glob("loop*"):
        try:
            f = (b / "loop" / "backing_file").read_text().strip()
        except OSError:
            continue
        if f.startswith(str(store)):
            out.append(f"{b.name}: {f}")
    return out


@pytest.fixture
def store(monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("disk images need root (loop devices, mounts)")
    top = Path(tempfile.mkdtemp(prefix="kis-disk-", dir="/tmp"))
    os.chmod(top, 0o711)  # the host tiers' user must reach the workspace
    root = top / "store"
    monkeypatch.setenv("KIS_SANDBOX_ROOT", str(root))
    try:
        yield root
    finally:
        for s in (root / "sessions").glob("s-*"):
            kis("session", "destroy", s.name)
        for w in json.loads(kis("workspace", "list", "--json").stdout or "[]"):
            kis("destroy", w["id"])
        kis("gc")
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def base(store, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("hello\n")
    p = kis("base", "import", str(src))
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def disk_how(backend):
    caps = {c["backend"]: c for c in json.loads(kis("backends", "--json").stdout)}
    c = caps.get(backend)
    if not c or not c["available"]:
        pytest.skip(f"{backend} is absent here")
    if "disk_bytes" not in c["limits"]:
        pytest.skip(f"{backend}: limits.disk_bytes does not bind on this store")
    return c


FILL = ["/bin/sh", "-c", "head -c 200M /dev/zero > big"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_disk_limit_stops_a_write_past_it(store, base, backend):
    disk_how(backend)
    p = kis("run", "--json", "--backend", backend, "--base", base, "--disk", "50M", "--",
            *FILL, timeout=180)
    r = json.loads(p.stdout)
    assert r["termination"]["reason"] == "disk_limit", r
    assert not wait_no_loops(store), "the run's disk image is still attached"
    assert not [l for l in open("/proc/self/mountinfo") if str(store) in l]


@pytest.mark.parametrize("backend", BACKENDS)
def test_disk_limit_stops_a_sessions_exec(store, base, backend):
    disk_how(backend)
    p = kis("create", "--backend", backend, "--base", base, "--disk", "50M", timeout=180)
    assert p.returncode == 0, p.stderr
    sid = p.stdout.strip()
    try:
        p = kis("exec", "--json", sid, "--", *FILL, timeout=180)
        r = json.loads(p.stdout)
        assert r["termination"]["reason"] == "disk_limit", r
        # what fits still fits
        p = kis("exec", sid, "--", "/bin/sh", "-c", "rm big && head -c 10M /dev/zero > ok")
        assert p.returncode == 0, p.stderr
    finally:
        kis("session", "destroy", sid)
    assert not wait_no_loops(store)


def test_default_disk_limit_binds_and_backends_says_so(store, base):
    """A limit of 0 is the 8 GiB default, never unlimited: each overlay
    clone of a run gets its image, and `backends` names how it binds."""
    c = disk_how("bubblewrap")
    assert "disk_bytes" in c["limits"]
    table = kis("backends").stdout
    line = next(l for l in table.splitlines() if l.startswith("bubblewrap"))
    assert " image " in line or " quota " in line, line
    p = kis("run", "--keep", "--json", "--backend", "bubblewrap", "--base", base, "--",
            "/bin/sh", "-c", "df -k . | tail -1")
    r = json.loads(p.stdout)
    ws = r["workspace"]
    img = store / "workspaces" / ws / "disk.img"
    if not img.exists():
        pytest.skip("this store binds by project quotas")
    assert img.stat().st_size >= 8 << 30
    assert img.stat().st_blocks * 512 < 16 << 20, "the image is not sparse"
    assert len(loops_of(store)) == 1
    p = kis("destroy", ws)
    assert p.returncode == 0, p.stderr
    assert not wait_no_loops(store), "destroy left the loop device"
    assert not img.exists()


def test_disk_limit_refused_by_name_on_a_copy_clone(store, base):
    disk_how("bubblewrap")
    ws = kis("clone", base, "--strategy", "copy").stdout.strip()
    if (store / "workspaces" / ws / "disk.img").exists():
        pytest.skip("unexpected")
    p = kis("run", "--backend", "bubblewrap", "--workspace", ws, "--disk", "50M", "--", "true")
    if p.returncode == 0:
        pytest.skip("this store binds by project quotas")
    assert "limits.disk_bytes" in p.stderr and "overlay" in p.stderr, p.stderr
    # the default binds where it can: the run goes on
    p = kis("run", "--backend", "bubblewrap", "--workspace", ws, "--", "true")
    assert p.returncode == 0, p.stderr


def start_paused(args, point, timeout=120):
    """`kis sandbox ARGS` stopped at the test pause point; the process."""
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
        _, err = p.communicate()
        pytest.fail(f"never reached {point}: {line}{err}")
    return p


def store_leftovers(store):
    left = {}
    loops = wait_no_loops(store)
    if loops:
        left["loop"] = loops
    m = [l for l in open("/proc/self/mountinfo") if str(store) in l]
    if m:
        left["mount"] = m
    ws = [w.name for w in (store / "workspaces").iterdir()]
    if ws:
        left["workspace"] = ws
    imgs = [str(p) for p in (store / "workspaces").rglob("*.img")]
    # a template's temporary, its maker killed in mke2fs
    imgs += [str(p) for p in (store / "disk-templates").glob(".tmp-*")]
    if imgs:
        left["image"] = imgs
    return left


# where a run with --disk can die: before its clone, in mke2fs making the
# size's template, with the loop device attached but not mounted, with the
# image mounted under the overlay, in its cgroup's setup, after the command
@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
def test_disk_run_killed_at_any_point_leaves_nothing_gc_cannot_sweep(store, base, backend):
    disk_how(backend)
    points = ["clone", "disk-template", "disk-attached", "cloned", "setup", "teardown"]
    for i, point in enumerate(points):
        # a size of its own per point: disk-template needs one not yet made
        size = f"{40 + i}M"
        cmd = ["true"] if point == "teardown" else ["sleep", "60"]
        p = start_paused(["run", "--backend", backend, "--base", base, "--disk", size,
                          "--", *cmd], point)
        p.kill()
        p.communicate()
        g = kis("gc", timeout=120)
        assert g.returncode == 0, (point, g.stdout, g.stderr)
        left = store_leftovers(store)
        assert not left, f"{backend} killed at {point} left {left} (gc said {g.stdout})"
    # and the store still serves a run with a limit
    p = kis("run", "--backend", backend, "--base", base, "--disk", "41M", "--", "true",
            timeout=120)
    assert p.returncode == 0, p.stderr


@pytest.fixture
def btrfs_store(monkeypatch, tmp_path):
    """A store on a loop-mounted btrfs of our own: reflinks, and no project
    quotas (btrfs has qgroups, not prjquota)."""
    if os.geteuid() != 0:
        pytest.skip("a loop-mounted btrfs needs root")
    if not shutil.which("mkfs.btrfs"):
        pytest.skip("mkfs.btrfs is missing (Debian: btrfs-progs)")
    top = Path(tempfile.mkdtemp(prefix="kis-disk-btrfs-", dir="/tmp"))
    os.chmod(top, 0o711)
    img, mnt = top / "fs.img", top / "mnt"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(1 << 30)
    mk = subprocess.run(["mkfs.btrfs", "-q", str(img)], capture_output=True, text=True)
    if mk.returncode != 0:
        shutil.rmtree(top)
        pytest.skip(f"mkfs.btrfs failed: {mk.stderr[-200:]}")
    m = subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], capture_output=True,
                       text=True)
    if m.returncode != 0:
        shutil.rmtree(top)
        pytest.skip(f"cannot mount a btrfs image here: {m.stderr[-200:]}")
    os.chmod(mnt, 0o711)
    root = mnt / "store"
    monkeypatch.setenv("KIS_SANDBOX_ROOT", str(root))
    try:
        yield root
    finally:
        for w in json.loads(kis("workspace", "list", "--json").stdout or "[]"):
            kis("destroy", w["id"])
        kis("gc")
        subprocess.run(["umount", str(mnt)])
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
def test_disk_limit_binds_on_a_reflink_store(btrfs_store, tmp_path, backend):
    """Regression: on a btrfs store a run's clone was a reflink, and --disk
    was refused on every native tier (a reflink cannot sit on an image).
    Where an image binds, a run's own clone is an overlay."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("hello\n")
    b = kis("base", "import", str(src)).stdout.strip()
    disk_how(backend)
    p = kis("run", "--json", "--backend", backend, "--base", b, "--disk", "50M", "--",
            *FILL, timeout=180)
    r = json.loads(p.stdout)
    assert r["termination"]["reason"] == "disk_limit", r
    # a plain clone still reflinks, and an explicit --disk on it is
    # refused saying why
    ws = kis("clone", b).stdout.strip()
    info = {w["id"]: w for w in json.loads(kis("workspace", "list", "--json").stdout)}
    assert info[ws]["strategy"] == "reflink", info
    p = kis("run", "--backend", backend, "--workspace", ws, "--disk", "50M", "--", "true")
    assert p.returncode != 0
    assert "reflink clone" in p.stderr and "--strategy overlay" in p.stderr, p.stderr
