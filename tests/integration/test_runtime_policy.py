# SPDX-License-Identifier: MIT
# kis-runtime against hand-written config.json files (issue 38): each way
# past the old list of refusals, tried as an attacker would, and judged by
# its effect on the host (a file not read, nothing written, the host's
# network namespace not joined, a device node's mode unchanged, a
# directory still there), not by the message alone. The model (src/runtime/
# model.c) translates config.json; these bundles must never reach crun,
# bubblewrap or the guest as written.
import json
import os
import socket
import stat
import subprocess
import uuid
from pathlib import Path

import pytest

from test_runtime import (  # noqa: F401  (work and roots are fixtures)
    BUSYBOX, KRT, TIERS, at_tier, krt, make_bundle, roots, work)

RAN = "KRT-RAN"


def _refused(p, code, named):
    assert p.returncode == 125, (p.returncode, p.stdout, p.stderr)
    assert code in p.stderr and named in p.stderr, p.stderr
    assert RAN not in p.stdout, "the container ran"


def _run(work, kr, tier, args, edit, name=None):
    b = make_bundle(work, args, at_tier(tier, edit))
    return krt(kr, "run", "--bundle", str(b), name or f"krt-p-{uuid.uuid4().hex[:8]}",
               timeout=60)


def _secret_dir(work):
    """A directory of the test's own standing in for root's files: what a
    refused bundle must not read."""
    d = work / f"secret-{uuid.uuid4().hex[:6]}"
    d.mkdir()
    (d / "f").write_text("KRT-SECRET\n")
    return d


# ------------------------------------------------- 1. non-bind mounts


@pytest.mark.parametrize("tier", TIERS)
def test_overlay_mount_is_refused_and_reads_nothing(work, roots, tier):
    kr, _ = roots
    low = _secret_dir(work)
    up, wk = work / f"up-{uuid.uuid4().hex[:6]}", work / f"wk-{uuid.uuid4().hex[:6]}"
    up.mkdir()
    wk.mkdir()

    def edit(c):
        c["mounts"].append({"destination": "/h", "type": "overlay", "source": "overlay",
                            "options": [f"lowerdir={low}", f"upperdir={up}",
                                        f"workdir={wk}"]})
    p = _run(work, kr, tier, ["sh", "-c", f"cat /h/f; touch /h/written; echo {RAN}"], edit)
    _refused(p, "profile_unsatisfiable", "type 'overlay'")
    assert "KRT-SECRET" not in p.stdout
    assert not list(up.iterdir()), "the overlay's upper directory was written"


@pytest.mark.parametrize("tier", TIERS)
def test_block_device_mount_is_refused(work, roots, tier):
    kr, _ = roots

    def edit(c):
        c["mounts"].append({"destination": "/mnt", "type": "ext4", "source": "/dev/vda",
                            "options": ["ro"]})
    _refused(_run(work, kr, tier, ["echo", RAN], edit), "profile_unsatisfiable", "type 'ext4'")


# --------------------------------------------------------- 2. root.path


def test_host_root_as_root_path_is_refused_at_the_host_tier(work, roots):
    if "host" not in TIERS:
        pytest.skip("bubblewrap is not installed")
    kr, _ = roots

    def edit(c):
        c["root"] = {"path": "/", "readonly": True}
    p = _run(work, kr, "host", ["sh", "-c", f"cat /etc/shadow; echo {RAN}"], edit)
    _refused(p, "profile_unsatisfiable", "root.path '/'")
    assert "root:" not in p.stdout, "the host's /etc/shadow was read"


@pytest.mark.parametrize("tier", TIERS)
def test_host_usr_as_writable_root_path_is_refused(work, roots, tier):
    kr, _ = roots
    made = [d for d in ("/usr/dev", "/usr/proc", "/usr/sys") if not os.path.exists(d)]
    try:
        def edit(c):
            c["root"] = {"path": "/usr", "readonly": False}
        p = _run(work, kr, tier, ["sh", "-c", f"echo x > /krt-written; echo {RAN}"], edit)
        _refused(p, "profile_unsatisfiable", "root.path '/usr'")
        assert not os.path.exists("/usr/krt-written")
        assert not [d for d in made if os.path.exists(d)], "the runtime made dirs in /usr"
    finally:
        for d in made:
            if os.path.isdir(d):
                os.rmdir(d)
        if os.path.exists("/usr/krt-written"):
            os.unlink("/usr/krt-written")


# ------------------------------------------------------------- 3. hooks


def test_hooks_run_only_with_the_named_hatch(work, roots):
    kr, _ = roots
    marker = work / f"hook-ran-{uuid.uuid4().hex[:6]}"

    def hook(c):
        c["hooks"] = {"createRuntime": [{"path": "/bin/sh",
                                         "args": ["sh", "-c", f"touch {marker}"]}]}
    p = _run(work, kr, "container", ["echo", RAN], hook)
    _refused(p, "escape_hatch_forbidden", "run.kis.allow-hooks")
    assert not marker.exists(), "a hook ran on the host without the hatch"

    def hatch(c):
        hook(c)
        c.setdefault("annotations", {})["run.kis.allow-hooks"] = "true"
    p = _run(work, kr, "container", ["echo", RAN], hatch)
    assert p.returncode == 0 and RAN in p.stdout, p.stderr
    assert marker.exists(), "the named hatch did not let the hook run"


# ------------------------------------------------- 4. namespaces


def _listener():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    s.settimeout(0.5)
    return s


@pytest.mark.parametrize("kind", ["network", "ipc", "uts"])
def test_duplicate_namespace_entries_are_refused(work, roots, kind):
    """[{type, path: the host's}, {type}]: the old check kept the last
    entry, crun joined the first. The host's listener must see nothing."""
    kr, _ = roots
    proc = {"network": "net"}.get(kind, kind)
    lst = _listener()
    port = lst.getsockname()[1]

    def edit(c):
        c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != kind]
        c["linux"]["namespaces"] += [{"type": kind, "path": f"/proc/self/ns/{proc}"},
                                     {"type": kind}]
    try:
        p = _run(work, kr, "container",
                 ["sh", "-c", f"echo hi | nc -w 1 127.0.0.1 {port}; echo {RAN}"], edit)
        _refused(p, "invalid_profile", f"a second '{kind}' entry")
        with pytest.raises(socket.timeout):
            lst.accept()
    finally:
        lst.close()


@pytest.mark.parametrize("tier", TIERS)
def test_a_namespace_joined_by_path_is_held_and_checked(work, roots, tier):
    """A pod's containers join the sandbox's network, IPC and UTS
    namespaces by path: ones the test made are joined (the same inodes
    inside); the host's own, or a file that is no namespace, is refused by
    name."""
    kr, _ = roots
    holder = subprocess.Popen(["unshare", "--net", "--ipc", "--uts", "--pid", "--fork", "--kill-child",
                               "sleep", "60"])
    try:
        import time
        path = f"/proc/{holder.pid}/ns/net"
        for _ in range(50):
            if all(os.readlink(f"/proc/{holder.pid}/ns/{k}") != os.readlink(f"/proc/self/ns/{k}")
                   for k in ("net", "ipc", "uts")):
                break
            time.sleep(0.05)
        want = [str(os.stat(f"/proc/{holder.pid}/ns/{k}").st_ino) for k in ("net", "ipc", "uts")]
        ppath = {"network": path, "ipc": f"/proc/{holder.pid}/ns/ipc",
                 "uts": f"/proc/{holder.pid}/ns/uts"}

        def join(c):
            c.pop("hostname", None)  # the joined uts namespace's name is not ours
            for n in c["linux"]["namespaces"]:
                if n["type"] in ppath:
                    n["path"] = ppath[n["type"]]
        p = _run(work, kr, tier, ["sh", "-c", "for k in net ipc uts; do stat -L -c %i "
                                  f"/proc/self/ns/$k; done; echo {RAN}"], join)
        assert p.returncode == 0 and RAN in p.stdout, p.stderr
        assert p.stdout.split()[:3] == want, (p.stdout, want)

        def host(c):
            for n in c["linux"]["namespaces"]:
                if n["type"] == "network":
                    n["path"] = f"/proc/{os.getpid()}/ns/net"  # the host's
        _refused(_run(work, kr, tier, ["echo", RAN], host), "escape_hatch_forbidden",
                 "host's own 'network' namespace")

        def host_ipc(c):
            for n in c["linux"]["namespaces"]:
                if n["type"] == "ipc":
                    n["path"] = f"/proc/{os.getpid()}/ns/ipc"  # the host's
        _refused(_run(work, kr, tier, ["echo", RAN], host_ipc), "profile_unsatisfiable",
                 "host's own 'ipc' namespace")

        def notns(c):
            for n in c["linux"]["namespaces"]:
                if n["type"] == "network":
                    n["path"] = str(KRT)
        _refused(_run(work, kr, tier, ["echo", RAN], notns), "invalid_profile",
                 "is not a 'network' namespace")

        def mnt(c):
            for n in c["linux"]["namespaces"]:
                if n["type"] == "mount":
                    n["path"] = f"/proc/{holder.pid}/ns/mnt"
        _refused(_run(work, kr, tier, ["echo", RAN], mnt), "profile_unsatisfiable",
                 "never joined by path")
        if tier == "host":
            # bubblewrap makes the pid namespace for its child: the pid the
            # engine knows (bwrap's) is never in a joined one
            def pid(c):
                for n in c["linux"]["namespaces"]:
                    if n["type"] == "pid":
                        n["path"] = f"/proc/{holder.pid}/ns/pid_for_children"
            _refused(_run(work, kr, tier, ["echo", RAN], pid), "profile_unsatisfiable",
                     "joins only a network, ipc or uts namespace by path")

            # a hostname in a joined uts namespace would rename the pod's
            def named(c):
                join(c)
                c["hostname"] = "renamed"
            _refused(_run(work, kr, tier, ["echo", RAN], named), "profile_unsatisfiable",
                     "hostname 'renamed'")
    finally:
        holder.kill()
        holder.wait()


# --------------------------------------------- 5. host paths of binds


def _bind(src, dst="/mnt", opts=("rbind", "rw")):
    def edit(c):
        c["mounts"].append({"destination": dst, "type": "bind", "source": src,
                            "options": list(opts)})
    return edit


def _host_paths(kr):
    paths = ["/etc/shadow", "/root", "/usr/bin", "/run", "/var", "/home", "/boot", "/",
             "/proc/1", "/sys/kernel", "/dev"]
    if os.path.isdir("/var/lib/kis"):
        paths.append("/var/lib/kis")
    return paths


@pytest.mark.parametrize("tier", TIERS + ["microvm"])
def test_binds_of_system_paths_are_refused(work, roots, tier):
    """Is, lies under or holds a system path: refused at every tier (the
    microvm copies small files in, so /etc/shadow would reach the guest).
    The model refuses before any tier starts, so no guest is needed."""
    kr, _ = roots
    kr.mkdir(parents=True, exist_ok=True)
    for src in _host_paths(kr) + [str(kr), str(kr.parent)]:
        p = _run(work, kr, tier, ["sh", "-c", f"cat /mnt 2>/dev/null; ls /mnt; echo {RAN}"],
                 _bind(src))
        _refused(p, "profile_unsatisfiable", f"mounts[")
        assert "root:" not in p.stdout, f"{src}: the host's shadow file was read"


@pytest.mark.parametrize("tier", TIERS)
def test_a_bind_elsewhere_runs_and_sees_the_host_dir(work, roots, tier):
    """The control: a directory of the test's own binds and is seen."""
    kr, _ = roots
    d = _secret_dir(work)
    p = _run(work, kr, tier, ["sh", "-c", f"cat /mnt/f; echo {RAN}"], _bind(str(d), opts=("rbind", "ro")))
    assert p.returncode == 0 and "KRT-SECRET" in p.stdout and RAN in p.stdout, p.stderr


# ---------------------------------------- 6. relative sources, symlinks


@pytest.mark.parametrize("tier", TIERS)
def test_relative_bind_source_is_the_bundles_and_follows_no_link(work, roots, tier):
    """A relative source is the bundle's, whatever kis-runtime's working
    directory; a link on the way (bundle/hostroot-link -> a host
    directory) is refused, not followed."""
    kr, _ = roots
    target = _secret_dir(work)
    b = make_bundle(work, ["sh", "-c", f"cat /mnt/f; echo {RAN}"],
                    at_tier(tier, _bind("data", opts=("rbind", "ro"))))
    (b / "data").mkdir()
    (b / "data" / "f").write_text("KRT-BUNDLE-DATA\n")
    p = subprocess.run([str(KRT), "--root", str(kr), "run", "--bundle", str(b),
                        f"krt-rel-{uuid.uuid4().hex[:6]}"], cwd="/tmp", capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and "KRT-BUNDLE-DATA" in p.stdout, p.stderr
    b2 = make_bundle(work, ["sh", "-c", f"cat /mnt/f; echo {RAN}"],
                     at_tier(tier, _bind("hostroot-link", opts=("rbind", "ro"))))
    (b2 / "hostroot-link").symlink_to(target)
    p = subprocess.run([str(KRT), "--root", str(kr), "run", "--bundle", str(b2),
                        f"krt-rel-{uuid.uuid4().hex[:6]}"], cwd=str(target.parent),
                       capture_output=True, text=True, timeout=60)
    _refused(p, "profile_unsatisfiable", "symbolic link")
    assert "KRT-SECRET" not in p.stdout


# --------------------------------------- 7. the host tier's device nodes


def test_host_tier_cannot_chmod_the_hosts_device_nodes(work, roots):
    if "host" not in TIERS:
        pytest.skip("bubblewrap is not installed")
    kr, _ = roots
    before = {d: stat.S_IMODE(os.stat(d).st_mode) for d in ("/dev/full", "/dev/null")}
    try:
        p = _run(work, kr, "host",
                 ["sh", "-c", f"chmod 600 /dev/full /dev/null; echo x > /dev/null && echo {RAN}"],
                 None)
        assert p.returncode == 0 and RAN in p.stdout, p.stderr
        after = {d: stat.S_IMODE(os.stat(d).st_mode) for d in before}
        assert after == before, f"the host's device nodes changed: {before} -> {after}"
    finally:
        for d, m in before.items():
            if stat.S_IMODE(os.stat(d).st_mode) != m:
                os.chmod(d, m)


# ------------------------------------------------------------- 8. ids


@pytest.mark.parametrize("verb", [["delete", "-f"], ["state"], ["kill"], ["start"]])
def test_an_id_that_is_a_path_is_refused_at_every_verb(work, roots, verb):
    kr, _ = roots
    kr.mkdir(parents=True, exist_ok=True)
    victim = kr.parent / f"victim-{uuid.uuid4().hex[:6]}"
    victim.mkdir()
    (victim / "keep").write_text("x")
    p = krt(kr, *verb, f"../{victim.name}")
    assert p.returncode == 125 and "invalid_id" in p.stderr, (p.returncode, p.stderr)
    assert (victim / "keep").exists(), "a directory beside the state root was deleted"


# ------------------------------------------ fields the model lacks


@pytest.mark.parametrize("where,value", [
    (("linux", "intelRdt"), {"closID": "x"}),
    (("process", "scheduler"), {"policy": "SCHED_FIFO", "priority": 99}),
    (("linux", "seccomp", "listenerPath"), "/run/krt-nope.sock"),
    (("linux", "netDevices"), {"eth9": {}}),
    (("vm",), {"hypervisor": {"path": "/bin/sh"}}),
])
def test_a_field_kis_does_not_model_is_refused_by_name(work, roots, where, value):
    kr, _ = roots

    def edit(c):
        o = c
        for k in where[:-1]:
            o = o.setdefault(k, {})
        o[where[-1]] = value
    _refused(_run(work, kr, "container", ["echo", RAN], edit), "profile_unsatisfiable",
             ".".join(where) + ": kis-runtime does not model this field")


def test_a_cgroups_path_that_climbs_is_refused(work, roots):
    kr, _ = roots

    def edit(c):
        c["linux"]["cgroupsPath"] = "/../../../krt-escape"
    _refused(_run(work, kr, "container", ["echo", RAN], edit), "invalid_profile",
             "linux.cgroupsPath")
    assert not any(Path(f"/sys/fs/cgroup/{h}/krt-escape").exists()
                   for h in ("memory", "pids", "cpu", "unified"))
