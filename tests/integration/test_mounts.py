# SPDX-License-Identifier: MIT
# Mounts by engine id (issue 21): a base (read-only) or a workspace placed
# at a target inside the sandbox, never a host path. On each backend that
# honours them (bubblewrap, oci) a base mount reads and does not write, a
# workspace mount's writes persist, a symlink inside a source leads nowhere
# outside, a session keeps its mounts across execs and holds their
# sources; the others refuse them by name. Every probe runs inside a
# sandbox and is judged by its effect on the host.
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import KIS, ROOT

PROBES = ROOT / "build" / "probes"
TIERS = ["bubblewrap", "oci"]
ESCAPED = 1


def _rows(env):
    p = subprocess.run([str(KIS), "sandbox", "backends", "--json"], capture_output=True,
                       text=True, env=env)
    return {b["backend"]: b for b in json.loads(p.stdout or "[]")}


@pytest.fixture(scope="module")
def env():
    """A store of its own with a data base (a file, a subdirectory, and
    symlinks that point out of it at a host canary), a base holding the
    probes, and a victim directory outside the store."""
    if os.geteuid() != 0:
        pytest.skip("mounts are placed by the engine as root (bubblewrap's id range, crun)")
    top = Path(tempfile.mkdtemp(prefix="kis-mnt-", dir="/tmp"))
    os.chmod(top, 0o711)
    e = dict(os.environ, KIS_SANDBOX_ROOT=str(top / "store"),
             KIS_MICROVM_GUEST_DIR=os.environ.get("KIS_MICROVM_GUEST_DIR",
                                                  "/nonexistent/kis-no-guest"))
    try:
        victim = top / "victim"
        victim.mkdir()
        os.chmod(victim, 0o777)
        (victim / "canary").write_text("host-canary\n")
        data = top / "data"
        (data / "sub").mkdir(parents=True)
        (data / "data.txt").write_text("dataset\n")
        (data / "out").symlink_to(victim / "canary")
        (data / "dirout").symlink_to(victim)
        (data / "up").symlink_to("../../../../../../../..")
        probes = top / "probes"
        probes.mkdir()
        if PROBES.exists():
            for p in PROBES.iterdir():
                if p.is_file() and os.access(p, os.X_OK):
                    shutil.copy2(p, probes / p.name)

        def imp(src):
            p = subprocess.run([str(KIS), "sandbox", "base", "import", str(src)],
                               capture_output=True, text=True, env=e)
            assert p.returncode == 0, p.stderr
            return p.stdout.strip()

        yield {"env": e, "top": top, "victim": victim, "data": imp(data),
               "probes": imp(probes), "rows": _rows(e)}
    finally:
        subprocess.run([str(KIS), "sandbox", "gc"], capture_output=True, env=e)
        for ws in (top / "store" / "workspaces").glob("*/*"):
            if os.path.ismount(ws):
                subprocess.run(["umount", "-l", str(ws)], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


def kis(env, *args, timeout=120, stdin=subprocess.DEVNULL):
    return subprocess.run([str(KIS), "sandbox", *args], capture_output=True, text=True,
                          env=env["env"], timeout=timeout, stdin=stdin)


def require(env, backend):
    r = env["rows"].get(backend)
    if not r:
        pytest.skip(f"{backend} is not in this build")
    if not r["available"]:
        pytest.skip(f"{backend} is absent here: {r.get('why_absent')}")


@pytest.fixture
def ws(env):
    """A fresh workspace cloned from the data base, destroyed after."""
    made = []

    def make():
        p = kis(env, "clone", env["data"])
        assert p.returncode == 0, p.stderr
        made.append(p.stdout.strip())
        return made[-1]
    yield make
    for w in made:
        kis(env, "destroy", w)


def ws_path(env, w):
    return Path(kis(env, "workspace", "path", w).stdout.strip())


# ---- what a mount gives ----


@pytest.mark.parametrize("backend", TIERS)
def test_base_mount_is_readable_and_not_writable(env, backend):
    require(env, backend)
    p = kis(env, "run", "--backend", backend, "--mount", f"{env['data']}:/data", "--", "sh",
            "-c", "cat /data/data.txt; echo x > /data/new; echo rc=$?; "
                  "mkdir /data/sub/d; rm /data/data.txt; mount -o remount,rw /data; "
                  "echo y > /data/new2; cat /data/data.txt")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("dataset") == 2 and "rc=0" not in p.stdout, p.stdout
    assert "Read-only file system" in p.stderr or "Permission denied" in p.stderr, p.stderr
    tree = env["top"] / "store" / "bases" / env["data"] / "tree"
    assert not (tree / "new").exists() and not (tree / "new2").exists()
    assert (tree / "data.txt").read_text() == "dataset\n" and not (tree / "sub" / "d").exists()


@pytest.mark.parametrize("backend", TIERS)
def test_workspace_mount_writes_persist_in_that_workspace(env, backend, ws):
    require(env, backend)
    w = ws()
    p = kis(env, "run", "--backend", backend, "--mount", f"{w}:/mnt/w", "--", "sh", "-c",
            "stat -c %u:%g /mnt/w; cat /mnt/w/data.txt; echo hi > /mnt/w/made; "
            "mkdir /mnt/w/dir; stat -c %u /mnt/w/made")
    assert p.returncode == 0, p.stderr
    # owned by the sandbox's root as the main workspace is (bubblewrap:
    # through its id map), and root's again on the host
    assert p.stdout.split() == ["0:0", "dataset", "0"], p.stdout
    path = ws_path(env, w)
    assert (path / "made").read_text() == "hi\n" and (path / "made").stat().st_uid == 0
    assert (path / "dir").is_dir()
    # the base it was cloned from is untouched
    assert not (env["top"] / "store" / "bases" / env["data"] / "tree" / "made").exists()


@pytest.mark.parametrize("backend", TIERS)
def test_workspace_mount_read_only_is_not_writable(env, backend, ws):
    require(env, backend)
    w = ws()
    p = kis(env, "run", "--backend", backend, "--mount", f"{w}:/mnt/w:ro", "--", "sh", "-c",
            "cat /mnt/w/data.txt; echo x > /mnt/w/new; echo rc=$?")
    assert p.returncode == 0, p.stderr
    assert "dataset" in p.stdout and "rc=0" not in p.stdout, p.stdout
    assert not (ws_path(env, w) / "new").exists()


def test_mounts_from_a_profile_file_and_beside_the_workspace(env, ws, tmp_path):
    require(env, "bubblewrap")
    w = ws()
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps({"mounts": [{"source": env["data"], "target": "/opt-data/"},
                                           {"source": w, "target": "//cache//x",
                                            "read_only": False}]}))
    p = kis(env, "run", "--backend", "bubblewrap", "--profile", str(prof), "--base",
            env["data"], "--", "sh", "-c",
            "cat /opt-data/data.txt; echo c > /cache/x/c; ls /workspace")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("dataset\n") and "data.txt" in p.stdout
    assert (ws_path(env, w) / "c").read_text() == "c\n"


# ---- what the profile refuses, by name ----


@pytest.mark.parametrize("target,words", [
    ("/", "root"), ("/proc", "system directory"), ("/proc/1/root", "system directory"),
    ("/sys/fs", "system directory"), ("/dev", "system directory"),
    ("/dev/shm", "system directory"), ("/workspace", "workspace's own mount point"),
    ("/workspace/x", "workspace's own mount point"), ("/.kis", "agent"),
    ("/a/../b", "'..'"), ("/a/./b", "'.'"), ("rel/path", "absolute"),
    ("/a b", "letters"), ("/a,ro", "letters"), ("/x\\ny", "letters"),
])
def test_refused_targets_are_refused_by_name(env, target, words):
    p = kis(env, "run", "--dry-run", "--backend", "bubblewrap", "--mount",
            f"{env['data']}:{target}", "--", "true")
    assert p.returncode == 125 and p.stderr.startswith("invalid_profile:"), p.stderr
    assert "mounts[0].target" in p.stderr and words in p.stderr, p.stderr


@pytest.mark.parametrize("backend", TIERS)
def test_a_target_in_the_hosts_system_view_is_refused(env, backend):
    require(env, backend)
    for t in ("/usr/local/x", "/etc", "/opt/y"):
        p = kis(env, "run", "--backend", backend, "--mount", f"{env['data']}:{t}", "--", "true")
        assert p.returncode == 125 and "mounts[0].target" in p.stderr, p.stderr
        assert "system view" in p.stderr, p.stderr


def test_duplicate_and_nested_targets_are_refused(env, ws):
    d = env["data"]
    for a, b in (("/x", "/x"), ("/x", "/x/y"), ("/x/y", "/x"), ("/x", "/x/")):
        p = kis(env, "run", "--dry-run", "--backend", "bubblewrap", "--mount", f"{d}:{a}",
                "--mount", f"{d}:{b}", "--", "true")
        assert p.returncode == 125 and "mounts[1].target" in p.stderr, (a, b, p.stderr)
    # apart is fine, and a prefix that is not a parent is apart
    p = kis(env, "run", "--dry-run", "--backend", "bubblewrap", "--mount", f"{d}:/x",
            "--mount", f"{d}:/xy", "--", "true")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("source", ["/etc", "../store", "B-UPPER", "-x", "a/b", ""])
def test_a_source_that_is_not_an_id_is_refused_naming_the_field(env, source):
    p = kis(env, "run", "--dry-run", "--backend", "bubblewrap", "--mount", f"{source}:/x",
            "--", "true")
    assert p.returncode == 125 and p.stderr.startswith("invalid_profile:"), p.stderr
    assert "mounts" in p.stderr, p.stderr


def test_a_host_path_in_a_profile_is_refused_naming_its_index(env, tmp_path):
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps({"mounts": [{"source": env["data"], "target": "/d"},
                                           {"source": "/etc", "target": "/e"}]}))
    p = kis(env, "run", "--dry-run", "--profile", str(prof), "--", "true")
    assert p.returncode == 125 and "invalid_profile" in p.stderr, p.stderr
    assert "mounts[1].source" in p.stderr and "never a host path" in p.stderr, p.stderr
    prof.write_text(json.dumps({"mounts": [{"source": env["data"], "target": "/d",
                                            "path": "/etc"}]}))
    p = kis(env, "run", "--dry-run", "--profile", str(prof), "--", "true")
    assert p.returncode == 125 and "mounts[0].path: unknown field" in p.stderr, p.stderr


def test_an_id_that_names_nothing_is_not_found_naming_it(env):
    p = kis(env, "run", "--dry-run", "--backend", "bubblewrap", "--mount",
            f"{env['data']}:/a", "--mount", "w-doesnotexist:/b", "--", "true")
    assert p.returncode != 0 and p.stderr.startswith("not_found:"), p.stderr
    assert "mounts[1].source" in p.stderr and "w-doesnotexist" in p.stderr, p.stderr


def test_the_runs_own_workspace_is_not_mounted_again(env, ws):
    w = ws()
    p = kis(env, "run", "--backend", "bubblewrap", "--workspace", w, "--mount", f"{w}:/x",
            "--", "true")
    assert p.returncode == 125 and "mounts[0].source" in p.stderr, p.stderr


@pytest.mark.parametrize("backend", ["landlock", "process"])
def test_backends_without_mounts_refuse_them_by_name(env, backend):
    require(env, backend)
    extra = ["--allow-process-tier"] if backend == "process" else []
    p = kis(env, "run", "--backend", backend, *extra, "--base", env["data"], "--mount",
            f"{env['data']}:/data", "--", "true")
    assert p.returncode == 125 and p.stderr.startswith("profile_unsatisfiable:"), p.stderr
    assert "mounts" in p.stderr, p.stderr
    assert env["rows"][backend]["mounts"] is False


@pytest.mark.parametrize("backend", TIERS)
def test_mounts_with_root_workspace_are_refused_by_name(env, backend):
    """root: workspace makes the sandbox's root the tree it writes: a mount
    point there would be made in the workspace itself (the microvm's
    refusal is tested in test_microvm.py)."""
    require(env, backend)
    p = kis(env, "run", "--dry-run", "--backend", backend, "--root", "workspace", "--base",
            env["data"], "--mount", f"{env['data']}:/data", "--", "true")
    assert p.returncode == 125 and p.stderr.startswith("profile_unsatisfiable:"), p.stderr
    assert "mounts" in p.stderr and "root" in p.stderr, p.stderr


def test_backends_shows_the_mounts_column(env):
    p = kis(env, "backends")
    header = p.stdout.splitlines()[0].split()
    assert "MOUNTS" in header
    for b in TIERS + ["wasm"]:
        if b in env["rows"] and env["rows"][b]["available"]:
            assert env["rows"][b]["mounts"] is True
            row = [l for l in p.stdout.splitlines() if l.startswith(b)][0].split()
            assert row[header.index("MOUNTS")] == "yes", row


@pytest.mark.parametrize("backend", TIERS)
def test_dry_run_shows_the_resolved_mounts(env, backend, ws):
    require(env, backend)
    w = ws()
    p = kis(env, "run", "--dry-run", "--backend", backend, "--mount", f"{env['data']}:/data",
            "--mount", f"{w}:/w:ro", "--", "true")
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    m = plan["mounts"]
    assert [x["kind"] for x in m] == ["base", "workspace"]
    assert [x["target"] for x in m] == ["/data", "/w"]
    assert [x["read_only"] for x in m] == [True, True]
    assert m[0]["path"].endswith(f"/bases/{env['data']}/tree")
    if backend == "bubblewrap":
        argv = plan["bwrap_argv"]
        i = argv.index("/data")
        assert argv[i - 2] == "--ro-bind" and argv[i - 1].startswith("/run/kis-mount-")
    else:
        dests = {x["destination"]: x for x in plan["config"]["mounts"]}
        assert "ro" in dests["/data"]["options"] and "ro" in dests["/w"]["options"]
    # nothing was held by a dry run: destroy works at once
    assert kis(env, "destroy", w).returncode == 0


# ---- symlinks in a source, and a source path with a link planted ----


@pytest.mark.parametrize("backend", TIERS)
def test_a_symlink_inside_a_source_does_not_lead_out(env, backend):
    require(env, backend)
    victim = env["victim"]
    marker = victim / "pwned"
    if marker.exists():
        marker.unlink()
    ups = "/".join([".."] * 10)
    p = kis(env, "run", "--backend", backend, "--mount", f"{env['data']}:/data", "--", "sh",
            "-c", f"cat /data/out /data/dirout/canary /data/up{victim}/canary "
                  f"/data/{ups}{victim}/canary 2>/dev/null; "
                  f"echo x > /data/dirout/pwned 2>/dev/null; "
                  f"echo x > /data/up{victim}/pwned 2>/dev/null; true")
    assert p.returncode == 0, p.stderr
    assert "host-canary" not in p.stdout, f"{backend}: a link in the source read the canary"
    assert not marker.exists(), f"{backend}: a link in the source wrote the host"


@pytest.mark.parametrize("backend", TIERS)
def test_a_link_planted_on_the_stores_own_path_is_not_followed(env, backend):
    """The bind is of the store's tree, resolved with no symlink on the way
    (openat2 RESOLVE_NO_SYMLINKS, then cloned by fd): a tree replaced by a
    link to a host directory is refused, never bound."""
    require(env, backend)
    src = env["top"] / "planted-src"
    src.mkdir(exist_ok=True)
    (src / "f").write_text("x\n")
    b = kis(env, "base", "import", str(src)).stdout.strip()
    tree = env["top"] / "store" / "bases" / b / "tree"
    try:
        os.rename(tree, tree.with_name("tree.real"))
        tree.symlink_to(env["victim"])
        p = kis(env, "run", "--backend", backend, "--mount", f"{b}:/data", "--", "sh", "-c",
                "cat /data/canary")
        assert "host-canary" not in p.stdout, f"{backend} bound through the planted link"
        assert p.returncode != 0, p.stdout
    finally:
        if tree.is_symlink():
            tree.unlink()
            os.rename(tree.with_name("tree.real"), tree)
        kis(env, "base", "remove", b)


# ---- sessions: mounts across execs, and the holds on their sources ----


def create(env, backend, *flags):
    p = kis(env, "create", "--backend", backend, *flags)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.mark.parametrize("backend", TIERS)
def test_a_mount_survives_across_execs_of_a_session(env, backend, ws):
    require(env, backend)
    w = ws()
    s = create(env, backend, "--mount", f"{env['data']}:/data", "--mount", f"{w}:/mnt/w")
    try:
        p = kis(env, "exec", s, "--", "sh", "-c", "echo one > /mnt/w/s.txt")
        assert p.returncode == 0, p.stderr
        p = kis(env, "exec", s, "--", "sh", "-c", "cat /mnt/w/s.txt /data/data.txt")
        assert p.returncode == 0 and p.stdout == "one\ndataset\n", p.stdout + p.stderr
        p = kis(env, "exec", s, "--", "sh", "-c", "echo x > /data/n")
        assert p.returncode != 0
    finally:
        kis(env, "session", "destroy", s)
    assert (ws_path(env, w) / "s.txt").read_text() == "one\n"


@pytest.mark.parametrize("backend", TIERS)
def test_destroy_and_remove_while_mounted(env, backend, ws, tmp_path):
    require(env, backend)
    src = tmp_path / "ds"
    src.mkdir()
    (src / "f").write_text("kept\n")
    b = kis(env, "base", "import", str(src)).stdout.strip()
    w = ws()
    s = create(env, backend, "--mount", f"{b}:/ds", "--mount", f"{w}:/mnt/w")
    try:
        # a mounted workspace: destroy is busy, naming the session
        p = kis(env, "destroy", w)
        assert p.returncode != 0 and p.stderr.startswith("busy:") and s in p.stderr, p.stderr
        # a mounted base: remove marks it removed, as for a clone's base;
        # the session still reads it, no one may mount or clone it anew
        p = kis(env, "base", "remove", b)
        assert p.returncode == 0, p.stderr
        assert "removed" in [l for l in kis(env, "base", "list").stdout.splitlines()
                             if l.startswith(b)][0]
        p = kis(env, "exec", s, "--", "cat", "/ds/f")
        assert p.stdout == "kept\n", p.stdout + p.stderr
        p = kis(env, "run", "--backend", backend, "--mount", f"{b}:/ds", "--", "true")
        assert p.returncode != 0 and "mounts[0].source" in p.stderr, p.stderr
        # a second writer of the mounted workspace is busy; a reader is not
        p = kis(env, "run", "--backend", backend, "--mount", f"{w}:/x", "--", "true")
        assert p.returncode != 0 and p.stderr.startswith("busy:"), p.stderr
        p = kis(env, "run", "--backend", backend, "--workspace", w, "--", "true")
        assert p.returncode != 0 and p.stderr.startswith("busy:"), p.stderr
        p = kis(env, "run", "--backend", backend, "--mount", f"{w}:/x:ro", "--", "cat",
                "/x/data.txt")
        assert p.returncode == 0 and p.stdout == "dataset\n", p.stderr
    finally:
        kis(env, "session", "destroy", s)
    # the session gone: both work
    assert kis(env, "destroy", w).returncode == 0
    assert not (env["top"] / "store" / "workspaces" / w).exists()
    assert not (env["top"] / "store" / "bases" / b).exists(), "the removed base stayed"


def test_a_killed_runs_holds_are_dropped(env, ws):
    require(env, "bubblewrap")
    w = ws()
    p = subprocess.Popen([str(KIS), "sandbox", "run", "--backend", "bubblewrap", "--mount",
                          f"{w}:/x", "--", "sh", "-c", "echo up; sleep 60"],
                         stdout=subprocess.PIPE, text=True, env=env["env"],
                         stdin=subprocess.DEVNULL)
    try:
        assert p.stdout.readline() == "up\n"
        assert kis(env, "destroy", w).stderr.startswith("busy:")
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        # its owner's lock died with it: the hold is seen dead
        deadline = time.monotonic() + 20
        while True:
            r = kis(env, "destroy", w)
            if r.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert r.returncode == 0, r.stderr
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_a_one_shot_runs_own_workspace_is_held_while_it_runs(env, ws):
    """A second writer mounting a workspace that a live one-shot run uses
    as its own --workspace is busy, as for a session's; a reader is not;
    destroy waits for the run; other runs on it go on as before."""
    require(env, "bubblewrap")
    w = ws()
    p = subprocess.Popen([str(KIS), "sandbox", "run", "--backend", "bubblewrap", "--workspace",
                          w, "--", "sh", "-c", "echo up; sleep 60"],
                         stdout=subprocess.PIPE, text=True, env=env["env"],
                         stdin=subprocess.DEVNULL)
    try:
        assert p.stdout.readline() == "up\n"
        r = kis(env, "run", "--backend", "bubblewrap", "--mount", f"{w}:/x", "--", "true")
        assert r.returncode == 125 and r.stderr.startswith("busy:"), r.stderr
        assert "its own workspace" in r.stderr, r.stderr
        r = kis(env, "run", "--backend", "bubblewrap", "--mount", f"{w}:/x:ro", "--", "cat",
                "/x/data.txt")
        assert r.returncode == 0 and r.stdout == "dataset\n", r.stderr
        r = kis(env, "destroy", w)
        assert r.returncode != 0 and r.stderr.startswith("busy:") and "in use by run" in \
            r.stderr, r.stderr
        # not a new refusal for a second run on it (no mount): as before
        r = kis(env, "run", "--backend", "bubblewrap", "--workspace", w, "--", "true")
        assert r.returncode == 0, r.stderr
    finally:
        p.kill()
        p.wait()
    # the run gone (killed: its owner's lock with it), the hold is seen dead
    deadline = time.monotonic() + 20
    while True:
        r = kis(env, "run", "--backend", "bubblewrap", "--mount", f"{w}:/x", "--", "true")
        if r.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert r.returncode == 0, r.stderr


# ---- break-out probes with a mount present ----


@pytest.mark.parametrize("backend", TIERS)
@pytest.mark.parametrize("probe,arg,write", [
    ("read_outside", "VICTIM/canary", False),
    ("write_outside", "VICTIM/new", True),
    ("symlink_escape", "/data/out", False),
    ("mount_tmpfs", "/data/sub", False),
    ("fsopen_mount", None, False),
    ("chroot_dir", None, False),
    ("clone_newns", None, False),
])
def test_break_out_probes_with_a_mount_present(env, backend, probe, arg, write):
    require(env, backend)
    if not PROBES.exists():
        pytest.skip("build/probes missing: run 'make probes'")
    victim = env["victim"]
    args = [arg.replace("VICTIM", str(victim))] if arg else []
    target = victim / "new"
    if target.exists():
        target.unlink()
    p = kis(env, "run", "--backend", backend, "--base", env["probes"], "--mount",
            f"{env['data']}:/data", "--", f"./{probe}", *args)
    assert "ESCAPED" not in p.stdout and p.returncode != ESCAPED, p.stdout + p.stderr
    assert "host-canary" not in p.stdout
    if write:
        assert not target.exists(), f"{probe} wrote the host"
    # the mount is still read-only after the probe's attempts
    tree = env["top"] / "store" / "bases" / env["data"] / "tree"
    assert sorted(x.name for x in tree.iterdir()) == ["data.txt", "dirout", "out", "sub", "up"]


# ---- wasm: one more WASI preopen per mount, named by its target ----

WASI_LIBC = Path("/usr/lib/wasm32-wasi/libc.a")
NOTCAPABLE = 76


@pytest.fixture(scope="module")
def wasm_base(env):
    require(env, "wasm")
    if not shutil.which("clang") or not shutil.which("wasm-ld") or not WASI_LIBC.exists() or \
            not any(Path("/usr/lib").glob("llvm-*/lib/clang/*/lib/wasi/"
                                          "libclang_rt.builtins-wasm32.a")):
        pytest.skip("clang --target=wasm32-wasi needs lld, wasi-libc and "
                    "libclang-rt-14-dev-wasm32 (scripts/install-deps.sh)")
    d = env["top"] / "wasm-src"
    d.mkdir(exist_ok=True)
    subprocess.run(["clang", "--target=wasm32-wasi", "-O2", "-o", str(d / "wm.wasm"),
                    str(ROOT / "tests" / "wasm" / "wasi" / "mounts.c")], check=True,
                   capture_output=True)
    p = kis(env, "base", "import", str(d))
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_wasm_mounts_are_preopens_read_only_or_written(env, wasm_base, ws):
    w = ws()
    victim = env["victim"]
    p = kis(env, "run", "--tier", "wasm", "--base", wasm_base, "--mount",
            f"{env['data']}:/data", "--mount", f"{w}:/mnt/w", "--mount", f"{w}:/mnt/r:ro",
            "--", "wm.wasm", "cat:/data/data.txt", "write:/data/x", "mkdir:/data/d",
            "rm:/data/data.txt", "cat:/data/out", "cat:/data/dirout/canary",
            f"cat:/data/up{victim}/canary", "write:/mnt/w/made", "write:/mnt/r/no",
            "rm:/mnt/r/data.txt", "cat:/mnt/r/data.txt")
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert "dataset" in out and "cat /data/data.txt ok" in out, p.stdout
    for a in ("write /data/x", "mkdir /data/d", "rm /data/data.txt", "write /mnt/r/no",
              "rm /mnt/r/data.txt"):
        assert f"{a} errno {NOTCAPABLE}" in out, (a, p.stdout)
    # the links in the source lead nowhere outside its preopen
    assert "host-canary" not in p.stdout
    assert "write /mnt/w/made ok" in out and "cat /mnt/r/data.txt ok" in out
    assert (ws_path(env, w) / "made").read_text() == "w\n"
    tree = env["top"] / "store" / "bases" / env["data"] / "tree"
    assert not (tree / "x").exists() and (tree / "data.txt").exists()
    plan = json.loads(kis(env, "run", "--dry-run", "--tier", "wasm", "--base", wasm_base,
                          "--mount", f"{env['data']}:/data", "--", "wm.wasm").stdout)
    assert plan["mount_preopens"] == [{"fd": 4, "name": "/data", "read_only": True}]


def test_wasm_session_mounts_survive_execs_and_are_held(env, wasm_base, ws):
    """A wasm session runs each exec anew with its profile: every exec gets
    the mounts as preopens again, and the session holds their sources
    until destroy, as on the other tiers."""
    w = ws()
    c = kis(env, "create", "--tier", "wasm", "--base", wasm_base, "--mount",
            f"{env['data']}:/data", "--mount", f"{w}:/mnt/w")
    assert c.returncode == 0, c.stderr
    s = c.stdout.strip()
    try:
        p = kis(env, "exec", s, "--", "wm.wasm", "write:/mnt/w/one", "write:/data/x")
        assert "write /mnt/w/one ok" in p.stdout.splitlines(), p.stdout + p.stderr
        assert f"write /data/x errno {NOTCAPABLE}" in p.stdout.splitlines(), p.stdout
        p = kis(env, "exec", s, "--", "wm.wasm", "cat:/mnt/w/one", "cat:/data/data.txt")
        assert "cat /mnt/w/one ok" in p.stdout.splitlines(), p.stdout + p.stderr
        assert "dataset" in p.stdout.splitlines(), p.stdout
        # held by the session between its execs: destroy and a second
        # writer are busy, a reader is not
        p = kis(env, "destroy", w)
        assert p.returncode != 0 and p.stderr.startswith("busy:") and s in p.stderr, p.stderr
        p = kis(env, "run", "--tier", "wasm", "--base", wasm_base, "--mount", f"{w}:/x", "--",
                "wm.wasm")
        assert p.returncode != 0 and p.stderr.startswith("busy:"), p.stderr
    finally:
        kis(env, "session", "destroy", s)
    assert (ws_path(env, w) / "one").read_text() == "w\n"
    assert kis(env, "destroy", w).returncode == 0
