# SPDX-License-Identifier: MIT
# The microvm tier: commands run in a QEMU microvm with its own kernel; the
# workspace comes back to the host; sessions are the VM; terminals over the
# wire. One guest cache (kernel, initramfs, snapshot) serves every test.
import fcntl
import json
import os
import shutil
import socket
import pty
import re
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from conftest import AS_NOBODY, KIS, ROOT, kis, qemu_pids, stderr_on_pty, userns_off

GUEST = Path(os.environ.get("KIS_MICROVM_GUEST_DIR", ROOT / "build" / "microvm-guest"))
TIMEOUT = 180


@pytest.fixture(scope="module")
def mvm(tmp_path_factory):
    """A private store and the shared guest cache; every VM gone afterwards."""
    if not Path("/usr/bin/qemu-system-x86_64").exists():
        pytest.skip("qemu-system-x86_64 is not installed (Debian: qemu-system-x86)")
    fetch = subprocess.run([str(ROOT / "scripts" / "guest" / "fetch-kernel.sh"), str(GUEST)],
                           capture_output=True, text=True, timeout=600)
    if fetch.returncode != 0:
        pytest.skip(f"cannot fetch the guest kernel: {fetch.stderr.strip()[-300:]}")
    store = tmp_path_factory.mktemp("mvm") / "store"
    env = {"KIS_SANDBOX_ROOT": str(store), "KIS_MICROVM_GUEST_DIR": str(GUEST)}
    try:
        # the first run makes the initramfs, the accelerator verdict and the snapshot
        p = kis("run", "--tier", "microvm", "--", "true", env=env, timeout=TIMEOUT)
        assert p.returncode == 0, p.stderr
        yield env
    finally:
        sess = store / "sessions"
        if sess.exists():
            for s in sess.iterdir():
                if not s.name.startswith("."):
                    kis("session", "destroy", s.name, env=env, timeout=60)
        for pid in qemu_pids(str(store)):  # sessions: their disk is in the store
            os.kill(pid, signal.SIGKILL)
        assert not qemu_pids(str(store)), "a VM outlived the tests"
        # every workspace a test kept or cloned goes too, with its overlay mount
        lst = kis("workspace", "list", "--json", env=env, timeout=60)
        for w in (json.loads(lst.stdout) if lst.returncode == 0 and lst.stdout.strip() else []):
            kis("destroy", w["id"], env=env, timeout=60)
        mounts = [l for l in open("/proc/self/mountinfo") if str(store) in l]
        assert not mounts, f"mounts left under the test store: {mounts}"


def run_json(env, *args, timeout=TIMEOUT):
    p = kis("run", "--json", "--tier", "microvm", *args, env=env, timeout=timeout)
    assert p.stdout.strip(), p.stderr
    return p, json.loads(p.stdout)


def test_backends_show_microvm_with_accel_and_snapshot(mvm):
    p = kis("backends", "--json", env=mvm, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    m = [r for r in json.loads(p.stdout) if r["backend"] == "microvm"][0]
    assert m["available"] and m["snapshot"] and m["tty"]
    assert m["accel"] in ("kvm", "tcg")
    assert "pids" in m["limits"]  # a cgroup inside the guest


def test_run_exit_code_streams_usage_and_own_kernel(mvm):
    p, r = run_json(mvm, "--", "sh", "-c", "uname -r; echo oops >&2; exit 3")
    assert r["termination"]["reason"] == "exited"
    assert r["termination"]["exit_code"] == 3 and p.returncode == 3
    assert r["stderr"] == "oops\n"
    guest_kernel = r["stdout"].strip()
    assert guest_kernel and guest_kernel != os.uname().release
    assert r["usage"]["wall_ms"] >= 0 and r["backend"] == "microvm"


def test_host_canary_is_absent_in_the_guest(mvm, tmp_path):
    canary = tmp_path / "canary-secret"
    canary.write_text("host secret\n")
    p, r = run_json(mvm, "--", "cat", str(canary))
    assert r["termination"]["exit_code"] != 0
    assert "host secret" not in r["stdout"]


def test_host_network_is_refused_and_loopback_leaves_the_link_down(mvm):
    # egress is tested in its own small internet (test_egress.py)
    p = kis("run", "--tier", "microvm", "--net", "host", "--allow-net-host", "--", "true",
            env=mvm, timeout=60)
    assert p.returncode == 125 and "network.mode" in p.stderr
    # the network device is in every VM (one snapshot for every mode), its
    # backend a hub port alone on its hub: down, no address, nothing behind
    p, r = run_json(mvm, "--net", "loopback", "--", "sh", "-c", "cat /sys/class/net/lo/flags; "
                    "ls /sys/class/net; cat /sys/class/net/eth0/flags; ip -4 addr show eth0")
    out = r["stdout"].split()
    assert out[1:3] == ["eth0", "lo"], out
    assert int(out[3], 16) & 1 == 0, out  # IFF_UP clear
    assert "inet" not in r["stdout"], r["stdout"]


def test_guest_writes_reach_the_host_workspace_and_base_stays(mvm, tmp_path):
    src = tmp_path / "base"
    (src / "d").mkdir(parents=True)
    (src / "f.txt").write_text("base\n")
    (src / "d" / "gone.txt").write_text("x\n")
    b = kis("base", "import", str(src), env=mvm).stdout.strip()
    p, r = run_json(mvm, "--base", b, "--keep", "--", "sh", "-c",
                    "echo more >> f.txt && echo new > new.txt && rm d/gone.txt && mkdir -p e")
    assert r["termination"]["exit_code"] == 0, r
    ws = r["workspace"]
    path = Path(kis("workspace", "path", ws, env=mvm).stdout.strip())
    assert (path / "f.txt").read_text() == "base\nmore\n"
    assert (path / "new.txt").read_text() == "new\n"
    assert not (path / "d" / "gone.txt").exists() and (path / "e").is_dir()
    assert (src / "f.txt").read_text() == "base\n"  # the base is unchanged
    # the workspace moves between runs: the next VM sees what the last one left
    p, r = run_json(mvm, "--workspace", ws, "--", "cat", "new.txt")
    assert r["stdout"] == "new\n"
    kis("destroy", ws, env=mvm)


def test_disk_fill_stops_at_disk_bytes(mvm, tmp_path):
    # issue 23: the writable layer was 16 GiB whatever the profile said;
    # now it is limits.disk_bytes large, so a fill ends with ENOSPC there
    m = [r for r in json.loads(kis("backends", "--json", env=mvm).stdout)
         if r["backend"] == "microvm"][0]
    assert "disk_bytes" in m["limits"]
    src = tmp_path / "base"
    src.mkdir()
    (src / "f").write_text("x\n")
    b = kis("base", "import", str(src), env=mvm).stdout.strip()
    p, r = run_json(mvm, "--base", b, "--keep", "--disk", "32M", "--", "sh", "-c",
                    "dd if=/dev/zero of=big bs=1M count=96 2>&1; r=$?; sync; exit $r")
    ws = r["workspace"]
    try:
        assert r["termination"]["exit_code"] != 0, r
        assert "No space left" in r["stdout"], r["stdout"]
        path = Path(kis("workspace", "path", ws, env=mvm).stdout.strip())
        assert (path / "big").stat().st_size < 32 << 20
    finally:
        kis("destroy", ws, env=mvm)


def _set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def test_session_shell_state_tty_resize_and_reattach(mvm, tmp_path):
    src = tmp_path / "base"
    src.mkdir()
    (src / "hello").write_text("hi\n")
    b = kis("base", "import", str(src), env=mvm).stdout.strip()
    ws = kis("clone", b, env=mvm).stdout.strip()
    c = kis("create", "--tier", "microvm", "--workspace", ws, env=mvm, timeout=TIMEOUT)
    if c.returncode != 0:
        kis("destroy", ws, env=mvm)
    assert c.returncode == 0, c.stderr
    sid = c.stdout.strip()
    try:
        # the durable shell carries cwd and env from line to line; /tmp persists
        sh = kis("shell", sid, input="mkdir -p sub && cd sub\nexport K=v1\necho t > /tmp/x\n"
                 "pwd; echo $K; cat /tmp/x\n", env=mvm, timeout=60)
        assert sh.returncode == 0, sh.stderr
        assert sh.stdout.split()[-3:] == ["/workspace/sub", "v1", "t"]
        # several execs at once: each gets its own agent port
        slow = subprocess.Popen([str(KIS), "sandbox", "exec", sid, "--", "sh", "-c", "sleep 4; echo slow"],
                                env={**os.environ, **mvm}, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        t = time.monotonic()
        q = kis("exec", sid, "--", "echo", "quick", env=mvm, timeout=60)
        assert q.stdout == "quick\n" and time.monotonic() - t < 3.5, q.stderr
        assert slow.communicate(timeout=60)[0] == "slow\n"
        # a client killed mid-exec: the session goes on and answers the next one
        e = subprocess.Popen([str(KIS), "sandbox", "exec", sid, "--", "sleep", "30"],
                             env={**os.environ, **mvm}, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.5)
        e.kill()
        e.wait()
        x = kis("exec", sid, "--", "cat", "/workspace/hello", env=mvm, timeout=60)
        assert x.returncode == 0 and x.stdout == "hi\n", x.stderr
        x = kis("exec", sid, "--", "sh", "-c", "echo kept > /workspace/out.txt", env=mvm, timeout=60)
        assert x.returncode == 0
        # a terminal: its size goes with the request, a resize follows
        pid, fd = pty.fork()
        if pid == 0:
            os.environ.update(mvm)
            os.execv(str(KIS), [str(KIS), "sandbox", "exec", sid, "--tty", "--", "sh", "-c",
                                "stty size; sleep 3; stty size"])
        _set_size(fd, 24, 80)
        out = b""
        deadline = time.time() + 60
        resized = False
        while time.time() < deadline:
            try:
                chunk = os.read(fd, 1024)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
            if not resized and b"80" in out:
                _set_size(fd, 30, 100)
                os.kill(pid, signal.SIGWINCH)
                resized = True
        os.waitpid(pid, 0)
        text = out.decode(errors="replace")
        assert "24 80" in text and "30 100" in text, text
    finally:
        kis("session", "destroy", sid, env=mvm, timeout=60)
    try:
        # the session's writes are in its workspace once it ended, and its VM is gone
        path = Path(kis("workspace", "path", ws, env=mvm).stdout.strip())
        assert (path / "out.txt").read_text() == "kept\n"
        assert not qemu_pids(mvm["KIS_SANDBOX_ROOT"])
    finally:
        kis("destroy", ws, env=mvm)


def test_root_workspace_makes_the_workspace_the_guests_root(mvm, tmp_path):
    src = tmp_path / "rootfs"
    for d in ("bin", "proc", "dev", "tmp"):
        (src / d).mkdir(parents=True)
    (src / "bin" / "busybox").write_bytes((GUEST / "busybox").read_bytes())
    (src / "bin" / "busybox").chmod(0o755)
    for applet in ("sh", "cat"):
        (src / "bin" / applet).symlink_to("busybox")
    (src / "marker").write_text("my root\n")
    b = kis("base", "import", str(src), env=mvm).stdout.strip()
    p, r = run_json(mvm, "--base", b, "--root", "workspace", "--keep", "--", "sh", "-c",
                    "cat /marker; echo w > /written")
    assert r["stdout"] == "my root\n", r
    path = Path(kis("workspace", "path", r["workspace"], env=mvm).stdout.strip())
    assert (path / "written").read_text() == "w\n"
    kis("destroy", r["workspace"], env=mvm)


def test_the_result_names_the_accelerator_and_a_required_one_is_had_or_refused(mvm):
    caps = [r for r in json.loads(kis("backends", "--json", env=mvm, timeout=TIMEOUT).stdout)
            if r["backend"] == "microvm"][0]
    p, d = run_json(mvm, "--", "true")
    assert d["accel"] == caps["accel"], d
    other = "kvm" if caps["accel"] == "tcg" else None
    if other:
        # KVM required where it cannot run the guest: refused, never a TCG run
        p = kis("run", "--tier", "microvm", "--accel", "kvm", "--", "true", env=mvm,
                timeout=TIMEOUT)
        assert p.returncode == 125
        assert p.stderr.startswith("profile_unsatisfiable: microvm.accel"), p.stderr
    p, d = run_json(mvm, "--accel", caps["accel"], "--", "true")
    assert d["termination"]["exit_code"] == 0 and d["accel"] == caps["accel"]


# ---- copy-on-write workspace inside the guest ----

def _base_image(mvm, base):
    return Path(mvm["KIS_SANDBOX_ROOT"]) / "bases" / base / "cache" / "microvm-base-v1.img"


def test_the_base_image_is_made_once_and_shared_by_every_workspace(mvm, tmp_path):
    src = tmp_path / "base"
    src.mkdir()
    (src / "big.bin").write_bytes(os.urandom(1 << 20) * 8)  # 8 MiB of content
    (src / "f").write_text("f\n")
    b = kis("base", "import", str(src), env=mvm).stdout.strip()
    p, r = run_json(mvm, "--base", b, "--", "sh", "-c", "md5sum big.bin | cut -c1-32")
    assert r["termination"]["exit_code"] == 0, r
    img = _base_image(mvm, b)
    assert img.exists()
    st = img.stat()
    assert r["stdout"].strip() == subprocess.run(["md5sum", str(src / "big.bin")],
                                                 capture_output=True, text=True).stdout[:32]
    # a second clone of the same base: the same image, not made again
    p, r = run_json(mvm, "--base", b, "--", "cat", "f")
    assert r["stdout"] == "f\n"
    st2 = img.stat()
    assert (st2.st_ino, st2.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
    # the image goes with the base
    assert kis("base", "remove", b, env=mvm).returncode == 0
    assert not img.exists()


def test_deletions_replaced_dirs_and_host_changes_cross_both_ways(mvm, tmp_path):
    src = tmp_path / "base"
    (src / "keep").mkdir(parents=True)
    (src / "keep" / "a").write_text("a\n")
    (src / "redo").mkdir()
    (src / "redo" / "old1").write_text("1\n")
    (src / "redo" / "old2").write_text("2\n")
    (src / "gone").write_text("g\n")
    (src / "hostgone").write_text("h\n")
    b = kis("base", "import", str(src), env=mvm).stdout.strip()
    ws = kis("clone", b, env=mvm).stdout.strip()
    path = Path(kis("workspace", "path", ws, env=mvm).stdout.strip())
    try:
        # changes made on the host first: the guest must see them (the delta layer)
        (path / "hostnew").write_text("from host\n")
        (path / "hostgone").unlink()
        p, r = run_json(mvm, "--workspace", ws, "--", "sh", "-c",
                        "cat hostnew; test -e hostgone && echo HOSTGONE-VISIBLE; "
                        "rm gone; rm -r redo; mkdir redo; echo n > redo/new; "
                        "echo b > keep/b; ln -s /etc/passwd keep/l; ls -a")
        assert r["termination"]["exit_code"] == 0, r
        assert "from host" in r["stdout"] and "HOSTGONE-VISIBLE" not in r["stdout"]
        assert "lost+found" not in r["stdout"]  # no filesystem furniture in the workspace
        assert not (path / "gone").exists() and not (path / "hostgone").exists()
        assert sorted(os.listdir(path / "redo")) == ["new"]  # replaced, old entries gone
        assert (path / "keep" / "a").read_text() == "a\n"
        assert (path / "keep" / "b").read_text() == "b\n"
        assert os.readlink(path / "keep" / "l") == "/etc/passwd"
        assert (path / "hostnew").read_text() == "from host\n"
        # the base is untouched by either side
        assert sorted(os.listdir(src / "redo")) == ["old1", "old2"] and (src / "gone").exists()
        # and the workspace moves on to another tier as the guest left it
        caps = json.loads(kis("backends", "--json", env=mvm, timeout=TIMEOUT).stdout)
        if any("host" in c["tiers"] and c["available"] for c in caps):
            p = kis("run", "--tier", "host", "--workspace", ws, "--", "sh", "-c",
                    "cat keep/b redo/new; ls redo", env=mvm, timeout=TIMEOUT)
            assert p.stdout == "b\nn\nnew\n", p.stdout + p.stderr
    finally:
        kis("destroy", ws, env=mvm)


def test_guest_changes_are_applied_without_following_host_links(mvm, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    src = tmp_path / "base"
    src.mkdir()
    (src / "esc").symlink_to(victim)  # a link out of the workspace, on the host
    b = kis("base", "import", str(src), env=mvm).stdout.strip()
    p, r = run_json(mvm, "--base", b, "--keep", "--", "sh", "-c",
                    "rm esc; mkdir esc; echo pwned > esc/f")
    assert r["termination"]["exit_code"] == 0, r
    path = Path(kis("workspace", "path", r["workspace"], env=mvm).stdout.strip())
    try:
        assert not (victim / "f").exists() and os.listdir(victim) == []
        assert (path / "esc").is_dir() and not (path / "esc").is_symlink()
        assert (path / "esc" / "f").read_text() == "pwned\n"
    finally:
        kis("destroy", r["workspace"], env=mvm)


# ---- a hostile guest ----

PROBES_STATIC = ROOT / "build" / "probes-static"
PORTFLOOD = ROOT / "build" / "test-helpers" / "portflood"
VIOLATE = ROOT / "build" / "test-helpers" / "violate"


@pytest.mark.parametrize("kind", ["huge", "type", "random"])
def test_malformed_frames_from_the_guest_are_refused_by_name(mvm, kind):
    # A hostile guest: the command cannot reach the channel any more (see
    # test_the_command_is_confined_in_its_guest), so the agent's own side
    # writes the garbage, as a compromised guest kernel or agent could
    # (the kis-test:flood hook, on only under KIS_MICROVM_TEST_HOOKS)
    env = dict(mvm, KIS_MICROVM_TEST_HOOKS="1")
    p = kis("run", "--tier", "microvm", "--", "kis-test:flood", kind, env=env, timeout=TIMEOUT)
    assert p.returncode == 125, (p.returncode, p.stdout, p.stderr)  # no crash: our own code
    assert p.stderr.startswith("protocol: the microvm's agent sent a bad frame"), p.stderr
    assert not qemu_pids(mvm["KIS_SANDBOX_ROOT"])
    # and the next VM is fine
    p, r = run_json(mvm, "--", "echo", "ok")
    assert r["stdout"] == "ok\n"


def test_the_command_is_confined_in_its_guest(mvm, tmp_path):
    """In the guest the agent is root with every capability; the command
    is the sandbox user with none, no_new_privs, seccomp, hard rlimits and
    a cgroup namespace at the agent's pids group (issue 15 item 3). One
    session, three execs: one VM."""
    for f in (PORTFLOOD, VIOLATE, PROBES_STATIC / "proc1_mem"):
        if not f.exists():
            pytest.skip(f"{f} missing: run 'make check-integration'")
    src = tmp_path / "base"
    src.mkdir()
    for f in (PORTFLOOD, VIOLATE, PROBES_STATIC / "proc1_mem"):
        shutil.copy2(f, src / f.name)
    b = kis("base", "import", str(src), env=mvm).stdout.strip()
    # the plan says so before anything runs
    p = kis("run", "--tier", "microvm", "--dry-run", "--", "true", env=mvm, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)["command"]
    assert plan["user"] == {"uid": 65536, "gid": 65536}, plan
    assert plan["seccomp"] == "default, AF_UNIX only", plan
    c = kis("create", "--tier", "microvm", "--base", b, "--pids", "32", "--file-size", "1M",
            "--open-files", "64", env=mvm, timeout=TIMEOUT)
    assert c.returncode == 0, c.stderr
    sid = c.stdout.strip()
    try:
        p = kis("exec", sid, "--json", "--", "sh", "-c",
                "grep -E '^(Cap...|NoNewPrivs|Seccomp):' /proc/self/status; "
                "cat /proc/self/cgroup; id -u; ls -ln portflood | cut -c1-40; "
                "grep -E '^Max (file size|open files)' /proc/self/limits; "
                "./violate raise; ./violate leave; "
                "echo $$ > /sys/fs/cgroup/kis/cgroup.procs || echo cgroup-write-refused; "
                "./portflood huge; echo portflood=$?; "
                "grep -q 'cgroup2 .*nsdelegate' /proc/mounts && echo nsdelegate",
                env=mvm, timeout=TIMEOUT)
        r = json.loads(p.stdout)
        out, err = r["stdout"], r["stderr"]
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert f"{cap}:\t0000000000000000" in out, out
        assert "NoNewPrivs:\t1" in out and "Seccomp:\t2" in out, out
        assert "0::/\n" in out, out  # its cgroup namespace's root
        lines = out.split("\n")
        uid = lines[lines.index("0::/") + 1]
        assert uid == "65536", out  # the sandbox user, not the guest's root
        # the workspace is its own: root's files there are shown as its
        assert " 65536 " in lines[lines.index("0::/") + 2], out
        limits = {l[:14]: l[14:].split() for l in lines if l.startswith("Max ")}
        assert limits["Max file size "][:2] == ["1048576", "1048576"], out  # soft = hard
        assert limits["Max open files"][:2] == ["64", "64"], out
        assert "violate: raise refused" in err and "violate: leave refused" in err, err
        assert "cgroup-write-refused" in out, out
        # and were it writable: the namespace is a delegation boundary
        assert "\nnsdelegate\n" in out, out
        # the relays' ports are root's: not found, not taken, nothing sent
        assert "portflood=3" in out and "into /dev/vport" not in out, out
        assert r["termination"]["reason"] == "exited", r["termination"]
        # the agent that reports on it: its memory is closed to the command
        p = kis("exec", sid, "--", "./proc1_mem", env=mvm, timeout=TIMEOUT)
        assert p.returncode == 0 and "proc1_mem: stopped" in p.stdout, (p.stdout, p.stderr)
        # each exec has a cgroup leaf of its own: a burner beside it is not
        # its CPU (the group's total made it cpu_limit), and the leaves of
        # ended execs are gone
        burner = subprocess.Popen([str(KIS), "sandbox", "exec", sid, "--", "./violate", "burn",
                                   "1", "4"], env=mvm, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            time.sleep(1.5)
            p = kis("exec", sid, "--json", "--cpu-time", "1s", "--", "sh", "-c",
                    "sleep 2; ls -d /sys/fs/cgroup/kis/exec-* | wc -l", env=mvm,
                    timeout=TIMEOUT)
            r = json.loads(p.stdout)
            assert r["termination"]["reason"] == "exited", r["termination"]
            assert r["stdout"].strip() == "2", r["stdout"]  # its own leaf and the burner's
        finally:
            burner.wait(timeout=TIMEOUT)
        p = kis("exec", sid, "--", "sh", "-c", "ls -d /sys/fs/cgroup/kis/exec-* | wc -l",
                env=mvm, timeout=TIMEOUT)
        assert p.stdout.strip() == "1", p.stdout
        # a working directory the agent (root) may enter and the command's
        # user may not: the command's setup failure naming it, as on every
        # tier (it was 'internal')
        p = kis("exec", sid, "--", "sh", "-c", "mkdir shut && chmod 0 shut", env=mvm,
                timeout=TIMEOUT)
        assert p.returncode == 0, p.stderr
        p = kis("exec", sid, "--json", "--cwd", "/workspace/shut", "--", "true", env=mvm,
                timeout=TIMEOUT)
        assert p.stdout.strip(), p.stderr
        t = json.loads(p.stdout)["termination"]
        assert t["reason"] == "setup_failed" and t["exit_code"] == 126, t
        assert "/workspace/shut" in t["detail"] and "Permission denied" in t["detail"], t
        # the test hook is off unless the engine was asked: an unknown command
        p = kis("exec", sid, "--json", "--", "kis-test:flood", "huge", env=mvm, timeout=TIMEOUT)
        t = json.loads(p.stdout)["termination"]
        assert t["reason"] == "setup_failed" and t["exit_code"] == 127, t
    finally:
        kis("session", "destroy", sid, env=mvm, timeout=60)


@pytest.fixture
def outside(tmp_path):
    """Host things a probe in the guest aims at: a canary file, a directory,
    a sibling process and a TCP listener on every host address."""
    out = tmp_path / "outside"
    out.mkdir()
    (out / "canary").write_text("canary-secret\n")
    sib = subprocess.Popen(["sleep", "300"])
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.bind(("0.0.0.0", 0))
    lst.listen(4)
    lst.setblocking(False)
    try:
        yield {"dir": out, "pid": sib.pid, "port": lst.getsockname()[1], "listener": lst}
    finally:
        sib.kill()
        sib.wait()
        lst.close()


def _host_addresses():
    p = subprocess.run(["hostname", "-I"], capture_output=True, text=True)
    return ["127.0.0.1", "10.0.2.2"] + p.stdout.split()


def test_host_break_out_probes_run_in_the_guest_and_reach_nothing_of_the_host(
        mvm, tmp_path, outside):
    if not PROBES_STATIC.exists():
        pytest.skip("build/probes-static missing: run 'make check-integration'")
    src = tmp_path / "base"
    src.mkdir()
    for p in PROBES_STATIC.iterdir():
        shutil.copy2(p, src / p.name)
    (src / "link").symlink_to(outside["dir"] / "canary")
    b = kis("base", "import", str(src), env=mvm).stdout.strip()
    # and with mounts present (issue 21): the probes' base read-only at
    # /data, a workspace read-write at /rw, each holding the outward link
    mw = kis("clone", b, env=mvm).stdout.strip()
    out, pid, port = outside["dir"], outside["pid"], outside["port"]
    tries = " ; ".join([
        "./symlink_escape /data/link", "./symlink_escape /rw/link", "./mount_tmpfs /data",
        f"./write_outside /data/new", "./write_outside /rw/link",
        f"./read_outside {out}/canary", "./symlink_escape link", f"./cwd_outside {out}",
        f"./write_outside {out}/new", f"./ptrace_attach {pid}", f"./kill_outside {pid}",
        "./mount_tmpfs mnt", "./module_load", "./net_inet", "./net_udp_send",
        "./process_vm_read", "./unshare_user", "./setns_net", "./tty_stdin",
        # and what would undo the guest's own confinement of the command
        "./caps_left", "./sysctl_write", "./kill_outside 1", "./chroot_dir", "./clone_newns",
        "./fsopen_mount", "./keyctl_keyring", "./bpf_map", "./perf_event", "./userfaultfd",
        "./io_uring_setup", "./personality_change",
    ] + [f"echo hi | nc -w 2 {a} {port}; echo nc-rc=$?" for a in _host_addresses()]
      + ["echo PROBES-DONE"])
    # in a clone of the probes' base: without one the probes were not there
    p, r = run_json(mvm, "--base", b, "--mount", f"{b}:/data", "--mount", f"{mw}:/rw", "--",
                    "sh", "-c", tries)
    kis("destroy", mw, env=mvm)
    # every probe ran in the guest and was stopped there (the command is
    # not the guest's root: src/agent/confine.c); the host saw none of it
    assert "PROBES-DONE" in r["stdout"], r
    assert "ESCAPED" not in r["stdout"], r["stdout"]
    assert "caps_left: stopped" in r["stdout"] and "sysctl_write: stopped" in r["stdout"]
    assert "tty_stdin: stopped" in r["stdout"], r["stdout"]  # a pipe, not our terminal
    # the connection attempts ran and failed (no network device in the guest)
    assert r["stdout"].count("nc-rc=1") == len(_host_addresses()), r["stdout"]
    assert "canary-secret" not in r["stdout"] + r["stderr"]
    assert not (out / "new").exists() and sorted(os.listdir(out)) == ["canary"]
    status = Path(f"/proc/{pid}/status").read_text()
    assert "TracerPid:\t0" in status  # not traced
    assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # not killed
    try:
        conn, _ = outside["listener"].accept()
        conn.close()
        pytest.fail("a guest program connected to a host listener")
    except BlockingIOError:
        pass


def test_a_cold_boot_and_a_restored_snapshot_both_answer(mvm):
    for env_extra, how in (({"KIS_MICROVM_NO_SNAPSHOT": "1"}, "cold boot"), ({}, "restore")):
        env = dict(mvm, KIS_LOG="debug", **env_extra)
        p = kis("run", "--json", "--tier", "microvm", "--", "echo", "up", env=env,
                timeout=TIMEOUT)
        assert f"qemu started ({how})" in p.stderr, p.stderr
        assert json.loads(p.stdout)["stdout"] == "up\n"


def test_pids_limit_in_the_guest_stops_a_fork_loop_and_is_named(mvm):
    # 40 background sleeps cannot all start
    p, r = run_json(mvm, "--pids", "20", "--", "sh", "-c",
                    "for i in $(seq 1 40); do sleep 5 & done; wait")
    assert r["termination"]["reason"] == "pids_limit", r
    assert "limits.pids (20)" in r["termination"]["detail"]
    # the limit is the command's: the guest agent and its worker are added,
    # so 3 is the shell and two children
    p, r = run_json(mvm, "--pids", "3", "--", "sh", "-c", "sleep 0 & sleep 0 & wait; echo two")
    assert r["termination"]["reason"] == "exited" and r["stdout"] == "two\n", r


def test_a_flooding_guest_is_cut_at_the_output_limit(mvm):
    p, r = run_json(mvm, "--output-limit", "1000", "--", "sh", "-c", "yes")
    assert r["termination"]["reason"] == "output_limit", r["termination"]
    assert len(r["stdout"]) == 1000
    assert not qemu_pids(mvm["KIS_SANDBOX_ROOT"])


def test_vms_restored_from_one_snapshot_do_not_share_random_numbers(mvm):
    outs = set()
    for _ in range(2):
        p, r = run_json(mvm, "--", "sh", "-c",
                        "head -c 16 /dev/urandom | od -An -tx1; "
                        "cat /proc/sys/kernel/random/entropy_avail")
        lines = r["stdout"].split("\n")
        # the RNG is ready before the command starts: since Linux 5.18 the
        # CRNG is ready exactly when the input pool's credit reaches 256
        # bits (random.c POOL_READY_BITS), which entropy_avail shows (the
        # command may not read dmesg: it is not the guest's root)
        assert lines[1] == "256", r["stdout"]
        outs.add(lines[0])
    assert len(outs) == 2


def test_guest_memory_and_vcpus_come_from_the_profile(mvm):
    p, r = run_json(mvm, "--memory", "256M", "--vcpus", "2", "--", "sh", "-c",
                    "nproc; awk '/MemTotal/ {print $2}' /proc/meminfo")
    assert r["termination"]["exit_code"] == 0, r
    cpus, mem_kib = r["stdout"].split()
    assert cpus == "2"
    assert 150 * 1024 < int(mem_kib) <= 256 * 1024  # the guest kernel keeps some
    p = kis("run", "--tier", "microvm", "--vcpus", "0", "--", "true", env=mvm, timeout=60)
    assert p.returncode == 125 and "microvm.vcpus" in p.stderr


# ---- the VMM's jail (src/backends/microvm/jail.c) ----

PROBES_STATIC = ROOT / "build" / "probes-static"
UID_BASE = 1600000000


def _session_pid(env, sid):
    lst = json.loads(kis("session", "list", "--json", env=env).stdout)
    return [s for s in lst if s["id"] == sid][0]["agent_pid"]


def _status(pid):
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out


@pytest.fixture(scope="module")
def two_sessions(mvm):
    """Two idle sessions restored from the one snapshot, shared by the jail
    and memory tests (TCG restores are cheap, but not free)."""
    sids = []
    try:
        for _ in range(2):
            c = kis("create", "--tier", "microvm", env=mvm, timeout=TIMEOUT)
            assert c.returncode == 0, c.stderr
            sids.append(c.stdout.strip())
        for sid in sids:  # each guest runs something: its RAM is in use
            e = kis("exec", sid, "--", "sh", "-c", "echo up", env=mvm, timeout=TIMEOUT)
            assert e.stdout == "up\n", e.stderr
        yield [(sid, _session_pid(mvm, sid)) for sid in sids]
    finally:
        for sid in sids:
            kis("session", "destroy", sid, env=mvm, timeout=60)


def test_the_vmm_runs_unprivileged_without_capabilities_under_seccomp(mvm, two_sessions):
    for _, pid in two_sessions:
        st = _status(pid)
        uids = [int(x) for x in st["Uid"].split()]
        gids = [int(x) for x in st["Gid"].split()]
        assert all(u >= UID_BASE for u in uids + gids), st["Uid"]
        assert uids[0] == UID_BASE + pid  # one uid per VM
        assert st["Groups"] == ""
        for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(st[cap], 16) == 0, (cap, st[cap])
        assert st["Seccomp"] == "2" and st["NoNewPrivs"] == "1"
        # QEMU's own -sandbox filter on top of the project's
        assert int(st.get("Seccomp_filters", "2")) >= 2
    (_, a), (_, b) = two_sessions
    assert _status(a)["Uid"] != _status(b)["Uid"]


def test_the_vmm_has_its_own_namespaces_and_an_empty_network(mvm, two_sessions):
    _, pid = two_sessions[0]
    for ns in ("mnt", "pid", "net", "ipc", "uts"):
        assert os.readlink(f"/proc/{pid}/ns/{ns}") != os.readlink(f"/proc/self/ns/{ns}"), ns
    devs = [l.split(":")[0].strip() for l in Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]]
    assert devs == ["lo"]
    # pid 1 of its own namespace: it sees no host process
    assert _status(pid)["NSpid"].split()[-1] == "1"


def test_the_vmm_root_holds_only_the_jails_files(mvm, two_sessions):
    _, pid = two_sessions[0]
    mounts = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        f = line.split()
        mounts[f[4]] = (f[5], line.split(" - ")[1].split()[0])
    assert mounts["/"][1] == "tmpfs" and mounts["/"][0].startswith("ro")
    fixed = {"/", "/usr", "/vm/vmlinuz", "/vm/initrd", "/dev/null", "/dev/zero", "/dev/urandom",
             "/dev/random", "/proc", "/usr/bin/qemu-system-x86_64", "/usr/share/qemu",
             "/usr/lib/x86_64-linux-gnu/qemu", "/usr/lib64/ld-linux-x86-64.so.2"}
    libs = {m for m in mounts if m.startswith("/usr/lib/x86_64-linux-gnu/lib") and ".so" in m}
    assert set(mounts) - libs <= fixed, set(mounts) - libs - fixed
    # not the host's /usr: a tmpfs of the jail's own holding QEMU's files
    assert mounts["/usr"][1] == "tmpfs" and "/etc" not in mounts
    for m in mounts:
        if m.startswith(("/usr", "/vm")):
            assert mounts[m][0].startswith("ro"), (m, mounts[m])
    assert "/dev/kvm" not in mounts  # TCG here: no KVM node at all
    # its root, seen through the kernel: nothing else at the top, and of
    # the host's programs only QEMU
    top = sorted(os.listdir(f"/proc/{pid}/root"))
    assert set(top) <= {"usr", "lib", "lib64", "bin", "vm", "dev", "proc"}, top
    assert os.listdir(f"/proc/{pid}/root/usr/bin") == ["qemu-system-x86_64"]
    assert not os.path.exists(f"/proc/{pid}/root/usr/bin/sh")
    # a fixed, minimal environment: nothing of the engine's or the profile's
    assert Path(f"/proc/{pid}/environ").read_bytes() == b"PATH=/usr/bin\0"


def test_the_vmm_holds_only_its_own_fds(mvm, two_sessions):
    sid, pid = two_sessions[0]
    store = mvm["KIS_SANDBOX_ROOT"]
    for fd in os.listdir(f"/proc/{pid}/fd"):
        t = os.readlink(f"/proc/{pid}/fd/{fd}")
        ok = (t.startswith(("socket:", "anon_inode:", "/memfd:kis-guest-ram"))
              or t in ("/null",)
              or t.endswith(".img")  # its disks (the guest's base, delta, rw)
              or t == f"{store}/sessions/{sid}/qemu.log")
        assert ok, (fd, t)


def test_the_vmm_is_in_a_cgroup_with_memory_and_pids_limits(mvm, two_sessions):
    _, pid = two_sessions[0]
    groups = dict(l.split(":", 2)[1:] for l in Path(f"/proc/{pid}/cgroup").read_text().splitlines())
    if "memory" in groups:  # v1 (this machine) or the unified hierarchy
        mem = Path("/sys/fs/cgroup/memory") / groups["memory"].lstrip("/")
        pids = Path("/sys/fs/cgroup/pids") / groups["pids"].lstrip("/")
        # its own leaf, named by the session (engine/owner.c sweeps it by that)
        vmm = re.compile(r"/kis/s-[0-9a-z]+-vmm[0-9]+$")
        assert vmm.search(groups["memory"]) and vmm.search(groups["pids"]), groups
        limit = int((mem / "memory.limit_in_bytes").read_text())
        assert (1 << 30) < limit <= (1 << 30) + (512 << 20)  # guest RAM + VMM overhead
        assert int((pids / "pids.max").read_text()) <= 256
    else:
        d = Path("/sys/fs/cgroup") / groups[""].lstrip("/")
        assert "max" not in (d / "memory.max").read_text()
    lim = {l.split("  ")[0]: l for l in Path(f"/proc/{pid}/limits").read_text().splitlines()}
    assert lim["Max core file size"].split()[4:6] == ["0", "0"]
    assert lim["Max processes"].split()[2] == "256"
    assert lim["Max open files"].split()[3] == "1024"


def _ram_vma(pid):
    """The smaps fields of the guest-RAM mapping (the sealed memfd)."""
    cur, out = None, {}
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        if "-" in line.split()[0] and not line.split()[0].endswith(":"):
            cur = "/memfd:kis-guest-ram" in line
            continue
        if cur:
            k, v = line.split(":", 1)
            if v.strip().endswith("kB"):
                out[k] = out.get(k, 0) + int(v.split()[0])
    return out


def test_two_vms_restored_from_one_snapshot_share_its_pages(mvm, two_sessions):
    (_, a), (_, b) = two_sessions
    ino = []
    for pid in (a, b):
        fds = [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
        ram = [f for f in fds if os.readlink(f).startswith("/memfd:kis-guest-ram")]
        assert ram, "the guest RAM is no memfd: not restored copy-on-write"
        ino.append(os.stat(ram[0]).st_ino)
    assert ino[0] == ino[1]  # one image under both VMs
    for pid in (a, b):
        v = _ram_vma(pid)
        shared = v.get("Shared_Clean", 0) + v.get("Shared_Dirty", 0)
        # the guest kernel's pages, mapped by both (about 20 MiB when idle)
        assert shared >= 4096, v
        roll = {l.split(":")[0]: int(l.split()[1]) for l in
                Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]}
        assert roll["Pss"] < roll["Rss"]
        assert roll["Pss"] < 160 * 1024, roll  # was ~1.1 GiB per idle VM before


def test_the_snapshot_memory_refuses_writes_from_the_vmm(mvm, two_sessions):
    """A hostile VMM with the memfd it was given cannot change the RAM of
    the next VM: the seals refuse writes, growth and shrinking even through
    a read-write reopen."""
    _, pid = two_sessions[0]
    ram = [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")
           if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:kis-guest-ram")][0]
    fd = os.open(ram, os.O_RDWR)
    try:
        with pytest.raises(PermissionError):
            os.pwrite(fd, b"x", 0)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 4096)
        seals = fcntl.fcntl(fd, 1034)  # F_GET_SEALS
        assert seals & 0xF == 0xF  # SEAL, SHRINK, GROW, WRITE
    finally:
        os.close(fd)


# (probe, argument, stopped by the jail's other layers even without seccomp)
STAND_IN_PROBES = [
    ("read_outside", "{canary}", True), ("write_outside", "{dir}/written", True),
    ("unix_path_connect", "{sock}", True), ("net_udp_send", "", True),
    ("ptrace_attach", "{pid}", True), ("kill_outside", "{pid}", True),
    ("mount_tmpfs", "/vm", True), ("caps_left", "", True), ("chroot_dir", "", True),
    # an AF_INET socket in the empty network namespace and a new user
    # namespace are the filter's to refuse
    ("net_inet", "", False), ("unshare_user", "", False), ("bpf_map", "", False),
    ("io_uring_setup", "", False), ("keyctl_keyring", "", False),
]


@pytest.fixture
def outside_vmm(tmp_path):
    if not PROBES_STATIC.is_dir():
        pytest.skip("build/probes-static missing: run 'make check-integration'")
    canary = tmp_path / "canary"
    canary.write_text("host secret\n")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(tmp_path / "host.sock"))
    srv.listen(1)
    try:
        yield {"canary": str(canary), "dir": str(tmp_path), "sock": str(tmp_path / "host.sock"),
               "pid": str(os.getpid())}
    finally:
        srv.close()


def _stand_in(mvm, probe, arg, seccomp):
    env = dict(mvm, KIS_MICROVM_VMM=f"{PROBES_STATIC / probe} {arg}".strip(),
               KIS_MICROVM_NO_SNAPSHOT="1")
    if not seccomp:
        env["KIS_MICROVM_VMM_NO_SECCOMP"] = "1"
    p = kis("run", "--tier", "microvm", "--", "true", env=env, timeout=TIMEOUT)
    assert p.returncode != 0  # no guest ever answers a stand-in
    return p.stderr


STAND_IN_CASES = [(p, a, True) for p, a, _ in STAND_IN_PROBES] + \
    [(p, a, False) for p, a, bare in STAND_IN_PROBES if bare]


@pytest.mark.parametrize("probe,arg,seccomp", STAND_IN_CASES,
                         ids=[f"{p}-{'jail' if s else 'jail-without-seccomp'}"
                              for p, _, s in STAND_IN_CASES])
def test_stand_in_vmm_break_out_probes_are_stopped_by_the_jail(mvm, outside_vmm, probe, arg,
                                                               seccomp):
    """From the VMM's position (its uid, namespaces, root, rlimits, cgroup,
    the project's filter): each probe stopped; most even with no filter."""
    err = _stand_in(mvm, probe, arg.format(**outside_vmm), seccomp=seccomp)
    assert f"{probe}: " in err, err
    assert "ESCAPED" not in err and "setup failed" not in err, err
    assert not Path(outside_vmm["dir"], "written").exists()


def test_stand_in_vmm_control_the_read_probe_escapes_bare(outside_vmm):
    """The same read probe outside any jail reads the canary: the test can fail."""
    p = subprocess.run([str(PROBES_STATIC / "read_outside"), outside_vmm["canary"]],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "ESCAPED" in p.stdout



def test_an_ordinary_engine_jails_the_vmm_in_a_user_namespace_or_has_no_tier(mvm, tmp_path):
    """An engine that is not root builds the VMM's jail in a user namespace
    of its own (issue 17) and `backends` says what confines the VMM; where
    the host allows no unprivileged user namespace it has no jail, so no
    microvm tier, and says why: never QEMU unjailed. (A run and a session
    as an ordinary user: test_rootless.py.)"""
    store = tmp_path / "store"
    store.mkdir()
    os.chown(store, 65534, 65534)
    tmp_path.chmod(0o755)
    env = dict(os.environ, KIS_SANDBOX_ROOT=str(store), KIS_MICROVM_GUEST_DIR=str(GUEST))
    nobody = AS_NOBODY
    p = subprocess.run(nobody + [str(KIS), "sandbox", "backends", "--json"], env=env,
                       capture_output=True, text=True, timeout=60)
    m = [r for r in json.loads(p.stdout) if r["backend"] == "microvm"][0]
    if userns_off():
        assert not m["available"] and "jail" in m["why_absent"], m
        r = subprocess.run(nobody + [str(KIS), "sandbox", "run", "--tier", "microvm", "--",
                                     "true"], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and "tier_unavailable" in r.stderr and "jail" in r.stderr, \
            r.stderr
        assert not qemu_pids(str(store))
    else:
        assert m["available"], m
        assert "user namespace" in m["vmm_jail"] and "no cgroup" in m["vmm_jail"], m
    # as root: the jail with its per-VM uid and cgroup, said too
    p = subprocess.run([str(KIS), "sandbox", "backends", "--json"], env=mvm,
                       capture_output=True, text=True, timeout=60)
    m = [r for r in json.loads(p.stdout) if r["backend"] == "microvm"][0]
    if m["available"]:
        assert "per-VM uid" in m["vmm_jail"] and "cgroup" in m["vmm_jail"], m



def test_the_benchmarks_unjailed_switch_is_refused_outside_its_build(mvm):
    """KIS_MICROVM_BENCH_UNJAILED runs the VMM unjailed only in the
    benchmark's own binary (build/bench/kis-unjailed, never installed):
    `kis` refuses it by name, for a run and for a session, before any QEMU
    starts, and the code is not in the binary at all."""
    env = dict(mvm, KIS_MICROVM_BENCH_UNJAILED="1")
    before = set(qemu_pids(mvm["KIS_SANDBOX_ROOT"]))  # other tests' sessions
    for verb in (["run", "--tier", "microvm", "--", "true"], ["create", "--tier", "microvm"]):
        p = kis(*verb, env=env, timeout=TIMEOUT)
        assert p.returncode != 0, p.stdout
        assert "profile_unsatisfiable" in p.stderr and "never runs without its jail" in p.stderr, \
            p.stderr
    assert set(qemu_pids(mvm["KIS_SANDBOX_ROOT"])) <= before
    assert b"microvm bench: cannot execute" not in Path(KIS).read_bytes()


# ---- progress of the slow steps (issue 19) ----


def test_a_new_base_says_its_disk_image_is_made_on_a_terminal_only(mvm, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("x")
    bases = []
    try:
        for on_pty in (True, False):
            base = kis("base", "import", str(src), env=mvm).stdout.strip()
            bases.append(base)
            args = ["run", "--tier", "microvm", "--base", base, "--", "cat", "f"]
            if on_pty:
                rc, _, err = stderr_on_pty(args, mvm, timeout=TIMEOUT)
                assert rc == 0, err
                assert "kis: making the base's disk image for the microvm" in err, err
            else:
                p = kis(*args, env=mvm, timeout=TIMEOUT)
                assert p.returncode == 0 and p.stdout == "x", p.stderr
                assert "kis: making" not in p.stderr, p.stderr
    finally:
        for b in bases:
            kis("base", "remove", b, env=mvm, timeout=60)


# ---- mounts by engine id (issue 21): read-only disk slots in the guest ----

def _mount_sources(mvm, tmp_path, outside=None):
    """A data base (a file, a subdirectory, links that point out of it at a
    host canary) and a workspace cloned from a small base."""
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "data.txt").write_text("dataset\n")
    canary = tmp_path / "canary-secret"
    canary.write_text("host secret\n")
    (data / "out").symlink_to(canary)
    (data / "dirout").symlink_to(tmp_path)
    (data / "up").symlink_to("../../../../../../../..")
    d = kis("base", "import", str(data), env=mvm).stdout.strip()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "old.txt").write_text("old\n")
    cb = kis("base", "import", str(cache), env=mvm).stdout.strip()
    w = kis("clone", cb, env=mvm).stdout.strip()
    assert d and w
    return d, w, canary


def test_microvm_mounts_base_read_only_workspace_written_links_stay_inside(mvm, tmp_path):
    d, w, canary = _mount_sources(mvm, tmp_path)
    # a link in the mounted workspace on the host, pointing at a host
    # directory: the guest replaces it by a directory holding a file, and
    # the copy back must not write through the old link
    victim = tmp_path / "victim"
    victim.mkdir()
    path = Path(kis("workspace", "path", w, env=mvm).stdout.strip())
    (path / "hostlink").symlink_to(victim)
    p, r = run_json(mvm, "--mount", f"{d}:/data", "--mount", f"{w}:/cache", "--mount",
                    f"{w}:/ro:ro", "--", "sh", "-c",
                    "cat /data/data.txt; echo x > /data/new || echo base-write-refused; "
                    "echo y > /ro/new || echo ro-write-refused; "
                    f"cat /data/out /data/dirout/canary-secret /data/up{canary} 2>/dev/null; "
                    "echo new > /cache/new.txt && rm /cache/old.txt && echo cache-written; "
                    "rm /cache/hostlink && mkdir /cache/hostlink && echo pwn > /cache/hostlink/f; "
                    "mount | grep -E ' /(data|cache|ro) '")
    assert r["termination"]["exit_code"] == 0, r
    out = r["stdout"]
    assert "dataset\n" in out and "base-write-refused" in out and "ro-write-refused" in out
    assert "Read-only file system" in r["stderr"], r["stderr"]
    # the links resolve in the guest's own filesystem: nothing of the host
    assert "host secret" not in out + r["stderr"]
    assert "cache-written" in out
    assert "/dev/vd" in out and " /data type ext4 (ro," in out, out
    assert " /ro type overlay (ro," in out, out
    # the read-write mount's writes reach that workspace; the base is as it was
    assert (path / "new.txt").read_text() == "new\n" and not (path / "old.txt").exists()
    assert not (victim / "f").exists() and os.listdir(victim) == []
    assert (path / "hostlink").is_dir() and not (path / "hostlink").is_symlink()
    assert (path / "hostlink" / "f").read_text() == "pwn\n"
    tree = Path(mvm["KIS_SANDBOX_ROOT"]) / "bases" / d / "tree"
    assert not (tree / "new").exists() and (tree / "data.txt").read_text() == "dataset\n"
    # --dry-run shows them resolved
    plan = json.loads(kis("run", "--dry-run", "--tier", "microvm", "--mount", f"{d}:/data",
                          "--", "true", env=mvm).stdout)
    assert plan["mounts"][0]["kind"] == "base" and "mount_disks" in plan
    kis("destroy", w, env=mvm)


def test_microvm_mount_targets_over_the_guest_system_are_refused(mvm, tmp_path):
    d = kis("base", "import", str(tmp_path), env=mvm).stdout.strip()
    for t in ("/sbin", "/etc/x", "/mnt/ws", "/mnt/.layers/rw", "/lib/modules", "/usr"):
        p = kis("run", "--tier", "microvm", "--mount", f"{d}:{t}", "--", "true", env=mvm)
        assert p.returncode == 125 and p.stderr.startswith("profile_unsatisfiable:"), (t, p.stderr)
        assert "mounts[0].target" in p.stderr, p.stderr
    p = kis("run", "--tier", "microvm", "--root", "workspace", "--base", d, "--mount",
            f"{d}:/data", "--", "true", env=mvm)
    assert p.returncode == 125 and "mounts" in p.stderr and "root" in p.stderr, p.stderr
    many = [a for i in range(5) for a in ("--mount", f"{d}:/m{i}")]
    p = kis("run", "--tier", "microvm", *many, "--", "true", env=mvm)
    assert p.returncode == 125 and "at most 4" in p.stderr, p.stderr


def _qemu_fd_modes(pid, name):
    """The access modes QEMU holds files named name open with."""
    modes = []
    for f in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(f).endswith(name):
                flags = int([l for l in (Path(f"/proc/{pid}/fdinfo") / f.name).read_text()
                             .splitlines() if l.startswith("flags:")][0].split()[1], 8)
                modes.append(flags & 3)
        except OSError:
            continue
    return modes


def test_microvm_session_mounts_survive_execs_hold_and_copy_back(mvm, tmp_path):
    d, w, _ = _mount_sources(mvm, tmp_path)
    c = kis("create", "--tier", "microvm", "--mount", f"{d}:/data", "--mount", f"{w}:/cache",
            env=mvm, timeout=TIMEOUT)
    assert c.returncode == 0, c.stderr
    sid = c.stdout.strip()
    try:
        e = kis("exec", sid, "--", "sh", "-c", "echo one > /cache/s.txt", env=mvm, timeout=TIMEOUT)
        assert e.returncode == 0, e.stderr
        e = kis("exec", sid, "--", "sh", "-c", "cat /cache/s.txt /data/data.txt", env=mvm,
                timeout=TIMEOUT)
        assert e.stdout == "one\ndataset\n", e.stdout + e.stderr
        # the guest's / is root's (the rootfs tmpfs is 1777 by default): the
        # command cannot make /sbin and plant the kernel's modprobe there;
        # the control, /tmp, is writable
        e = kis("exec", sid, "--", "sh", "-c", "mkdir /sbin && echo ESCAPED; "
                "mkdir /tmp/x && echo tmp-ok", env=mvm, timeout=TIMEOUT)
        assert "ESCAPED" not in e.stdout and "tmp-ok" in e.stdout, e.stdout + e.stderr
        assert "Permission denied" in e.stderr, e.stderr
        # the base's image reaches QEMU read-only only: a hostile guest
        # kernel cannot write it through its disk
        pid = _session_pid(mvm, sid)
        modes = _qemu_fd_modes(pid, "microvm-base-v1.img")
        assert modes and all(m == os.O_RDONLY for m in modes), modes
        # a mounted workspace: destroy is busy, naming the session; so is a
        # second writer; a mounted base is marked removed and still read
        p = kis("destroy", w, env=mvm)
        assert p.returncode != 0 and p.stderr.startswith("busy:") and sid in p.stderr, p.stderr
        p = kis("run", "--tier", "microvm", "--mount", f"{w}:/x", "--", "true", env=mvm)
        assert p.returncode != 0 and p.stderr.startswith("busy:"), p.stderr
        p = kis("base", "remove", d, env=mvm)
        assert p.returncode == 0, p.stderr
        e = kis("exec", sid, "--", "cat", "/data/data.txt", env=mvm, timeout=TIMEOUT)
        assert e.stdout == "dataset\n", e.stderr
    finally:
        kis("session", "destroy", sid, env=mvm, timeout=60)
    # destroy copied the session's writes back and released the holds
    path = Path(kis("workspace", "path", w, env=mvm).stdout.strip())
    assert (path / "s.txt").read_text() == "one\n"
    assert kis("destroy", w, env=mvm).returncode == 0
    assert not (Path(mvm["KIS_SANDBOX_ROOT"]) / "bases" / d).exists(), "the removed base stayed"
