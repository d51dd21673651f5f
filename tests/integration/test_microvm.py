# SPDX-License-Identifier: MIT
# The microvm tier: commands run in a QEMU microvm with its own kernel; the
# workspace comes back to the host; sessions are the VM; terminals over the
# wire. One guest cache (kernel, initramfs, snapshot) serves every test.
import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from conftest import KIS, ROOT, kis

GUEST = Path(os.environ.get("KIS_MICROVM_GUEST_DIR", ROOT / "build" / "microvm-guest"))
TIMEOUT = 180


def _qemu_pids(marker):
    """QEMU processes whose command line names our guest cache."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"qemu-system-x86_64") and any(marker.encode() in a for a in cmd):
            pids.append(int(d.name))
    return pids


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
        for pid in _qemu_pids(str(store)):  # sessions: their disk is in the store
            os.kill(pid, signal.SIGKILL)
        assert not _qemu_pids(str(store)), "a VM outlived the tests"
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
    assert "pids" not in m["limits"]  # refused, not pretended


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


def test_network_modes_beyond_loopback_are_refused(mvm):
    p = kis("run", "--tier", "microvm", "--net", "egress", "--", "true", env=mvm, timeout=60)
    assert p.returncode == 125 and "network.mode" in p.stderr
    p, r = run_json(mvm, "--net", "loopback", "--", "sh", "-c", "cat /sys/class/net/lo/operstate; "
                    "cat /sys/class/net/lo/flags; ls /sys/class/net")
    assert r["stdout"].split()[-1] == "lo"  # no other interface at all


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
        assert not _qemu_pids(mvm["KIS_SANDBOX_ROOT"])
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
