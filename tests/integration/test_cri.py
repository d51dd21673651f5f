# SPDX-License-Identifier: MIT
# Kubernetes pods through containerd's CRI plugin, driven as a kubelet
# drives them (tests/cri/: our CRI client, the private node), at the control
# handler (runc) and at each kis handler of the README's config, cell by cell.
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cri"))
import harness as H  # noqa: E402
from cpu_probe import busy_probe, busy_share  # noqa: E402

WHY = H.why_skip()
pytestmark = pytest.mark.skipif(WHY is not None, reason=WHY or "")

HANDLERS = ["runc", "kis", "kis-host", "kis-vm"]
QEMU = Path("/usr/bin/qemu-system-x86_64")

# What kis-runtime refuses today of what the CRI plugin asks for a pod, per
# handler: a pattern of the refusal. A pod refused so is skipped
# with the runtime's own message, which names the field; any other failure
# fails. When the runtime learns to run pods at a tier, its cells run.
KNOWN_REFUSALS = {
    # one VM per pod (src/runtime/mvm_pod.c): what an app container of the
    # pod's VM cannot have of its own is refused by name
    "kis-vm": r"profile_unsatisfiable: linux\.resources\.(memory\.limit|pids)[^:]*: an app "
              r"container of a kis-vm pod.* \(run\.kis\.tier 'microvm'\)",
}


def refused(handler, call, err):
    """A pod call failed: skip with the runtime's message when it is a
    refusal this handler is known to make, fail otherwise."""
    msg = err.details() if hasattr(err, "details") else str(err)
    pat = KNOWN_REFUSALS.get(handler)
    if pat and re.search(pat, msg):
        m = re.search(r"profile_unsatisfiable: .*?(?=: unknown$|$)", msg)
        pytest.skip(f"{handler}: kis-runtime refuses the pod's {call}: "
                    f"{m.group(0) if m else msg}")
    pytest.fail(f"{handler}: {call} failed: {msg}")


# host paths containerd, its shims and the CNI library use whatever the
# config says: the node's namespaces keep them its own (harness.py)
HOST_PATHS = ("/run/containerd", "/var/lib/cni", "/var/lib/containerd", "/opt/containerd",
              "/var/run/netns")


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """The private node; the README's config must start it (a failure to
    start is a failure, not a skip: the environment is checked above)."""
    d = tmp_path_factory.mktemp("cri")
    before = {p for p in HOST_PATHS if os.path.lexists(p)}
    n = H.Node(d)
    try:
        n.start()
    except Exception as e:  # noqa: BLE001 - shown in the failure
        n.stop()
        pytest.fail(f"the private containerd with CRI did not start: {e}")
    yield n
    pods = [s.id for s in n.cri.call("ListPodSandbox").items]
    left, stray = n.stop()
    assert not pods, f"pods left by the tests: {pods}"
    assert not stray, f"processes left by the node: {stray}"
    assert not H.cgroup_dirs(n.cgroup_top), H.cgroup_dirs(n.cgroup_top)
    made = {p for p in HOST_PATHS if os.path.lexists(p)} - before
    assert not made, f"the node reached the host's {made}"


def need_guest(handler):
    """kis-vm runs each container in a guest: fetch it (idempotent, the
    cache test_microvm.py and test_runtime.py share)."""
    if handler != "kis-vm" or (H.GUEST / "vmlinuz").exists():
        return
    if not QEMU.exists():
        pytest.skip("qemu-system-x86_64 is not installed (Debian: qemu-system-x86)")
    p = subprocess.run([str(H.ROOT / "scripts" / "guest" / "fetch-kernel.sh"), str(H.GUEST)],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        pytest.skip(f"cannot fetch the guest kernel: {p.stderr.strip()[-300:]}")


class Pod:
    def __init__(self, node, handler):
        self.node, self.handler = node, handler
        self.id, self.cfg = None, None
        self.c = {}

    def run(self):
        try:
            self.id, self.cfg = self.node.run_pod(self.handler)
        except self.node.cri.grpc.RpcError as e:
            refused(self.handler, "RunPodSandbox", e)
        return self

    def start(self, name, args, **kw):
        try:
            self.c[name] = self.node.start_container(self.id, self.cfg, name, args, **kw)
        except self.node.cri.grpc.RpcError as e:
            refused(self.handler, f"CreateContainer/StartContainer ({name})", e)
        return self.c[name]

    @property
    def log_dir(self):
        return Path(self.cfg.log_directory)


WEB = ("echo out-line; echo err-line >&2; "
       "printf '#!/bin/sh\\necho hello-from-web\\n' > /tmp/h; chmod +x /tmp/h; "
       "exec nc -ll -p 8080 -e /tmp/h")


@pytest.fixture(scope="module", params=HANDLERS)
def pod(request, node):
    """One pod per handler for the cells that share it: two app
    containers, `web` (writes a line to each stream, then serves on port
    8080) and `app` (sleeps)."""
    need_guest(request.param)
    p = Pod(node, request.param)
    try:
        p.run()
        p.start("web", ["/bin/sh", "-c", WEB])
        p.start("app", ["/bin/sleep", "100000"])
        yield p
    finally:
        if p.id:
            node.teardown_pod(p.id)


def wait_state(node, cid, state, timeout=30):
    end = time.monotonic() + timeout
    while True:
        st, info = node.status(cid)
        if st.state == state or time.monotonic() > end:
            return st, info
        time.sleep(0.1)


def _ns(pid, kind):
    return os.readlink(f"/proc/{pid}/ns/{kind}")


def _process(handler, pid):
    """The container's process for the pid the CRI reports. At kis-host
    that pid is bubblewrap's, which kis-runtime put in the pod's network,
    IPC and UTS namespaces (so the pod's containers join them by its
    /proc/PID/ns), while the pid namespace bwrap makes holds only its one
    child, the container's process."""
    if handler != "kis-host":
        return pid
    kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(kids) == 1, (pid, kids)
    return int(kids[0])


# ------------------------------------------------------------ the cells


def test_readme_runtimeclasses_name_the_configs_handlers():
    """The README's RuntimeClasses and its containerd config name the same
    handlers, each pinned binary a name kis-runtime knows: the node runs
    that config, so a cluster applying those classes reaches these pods."""
    classes = H.runtime_classes()
    handlers = H.config_handlers(H.readme_block(H.CONFIG_MARK))
    assert set(classes.values()) == set(handlers) == set(H.KIS_HANDLERS)
    for h, binary in handlers.items():
        assert binary == f"/usr/local/bin/kis-runtime-{H.KIS_HANDLERS[h]}"


def test_run_pod_sandbox_is_ready(pod, node):
    st, info = node.pod_info(pod.id)
    assert st.state == node.cri.pb.SANDBOX_READY
    assert st.runtime_handler == pod.handler
    assert st.network.ip.startswith("10.88.7."), st.network
    want = H.CONTROL if pod.handler == "runc" else \
        f"kis-runtime-{H.KIS_HANDLERS[pod.handler]}"
    assert info["runtimeOptions"]["binary_name"].endswith(want), info["runtimeOptions"]
    assert Path(f"/proc/{info['pid']}").exists()


def test_app_containers_run_in_the_pods_namespaces(pod, node):
    """Both containers run; they share the sandbox's network, IPC and UTS
    namespaces (joined by path, as the CRI plugin writes them) and each has
    its pid namespace (the kubelet's default for a v1 pod)."""
    _, sinfo = node.pod_info(pod.id)
    pids = {}
    for name in ("web", "app"):
        st, info = wait_state(node, pod.c[name], node.cri.pb.CONTAINER_RUNNING)
        assert st.state == node.cri.pb.CONTAINER_RUNNING, (name, st)
        assert st.started_at > 0
        pids[name] = info["pid"]
    for kind in ("net", "ipc", "uts"):
        assert _ns(pids["web"], kind) == _ns(pids["app"], kind) == _ns(sinfo["pid"], kind), kind
        # the process itself too, not only the pid the CRI reports
        assert _ns(_process(pod.handler, pids["web"]), kind) == _ns(sinfo["pid"], kind), kind
    if pod.handler == "kis-vm":
        # the host processes the CRI reports hold the pod's namespaces
        # (above); the containers themselves run in the pod's guest, each
        # in a pid namespace of its own there: seen from inside
        out, _, rc = node.exec_sync(pod.c["app"], ["ps", "-o", "args"])
        assert rc == 0 and "sleep 100000" in out and "nc -ll" not in out, out
        out, _, rc = node.exec_sync(pod.c["app"], ["hostname"])
        assert (out, rc) == (f"{pod.cfg.hostname}\n", 0)
        return
    procs = {n: _process(pod.handler, p) for n, p in pids.items()}
    sandbox = _process(pod.handler, sinfo["pid"])
    assert len({_ns(procs["web"], "pid"), _ns(procs["app"], "pid"), _ns(sandbox, "pid"),
                _ns(os.getpid(), "pid")}) == 4
    # none of the pod's namespaces is the host's (the node's are its own)
    for kind in ("ipc", "uts"):
        assert _ns(sinfo["pid"], kind) != _ns(os.getpid(), kind), kind
    out, _, rc = node.exec_sync(pod.c["app"], ["hostname"])
    assert (out, rc) == (f"{pod.cfg.hostname}\n", 0)


@pytest.mark.parametrize("handler", HANDLERS)
def test_app_images_are_their_own_roots(handler, node):
    """A real pod: the sandbox runs the pause image, each app container an
    image of its own. Each app sees its image's tree (its marker, not the
    pause image's nor the other app's), its own processes only (a pid
    namespace of its own), and the pod's hostname."""
    need_guest(handler)
    p = Pod(node, handler)
    (a_img, a_mark), (b_img, b_mark) = H.APP_IMAGES.items()
    try:
        p.run()
        p.start("a", ["/bin/sleep", "100001"], image=a_img)
        p.start("b", ["/bin/sleep", "100002"], image=b_img)
        for name in ("a", "b"):
            st, _ = wait_state(node, p.c[name], node.cri.pb.CONTAINER_RUNNING)
            assert st.state == node.cri.pb.CONTAINER_RUNNING, (name, st)
        out, err, rc = node.exec_sync(p.c["a"], ["ls", "/"])
        assert rc == 0, err
        assert a_mark in out.split() and b_mark not in out.split(), out
        assert "kis-pause-marker" not in out.split(), out
        out, err, rc = node.exec_sync(p.c["b"], ["ls", "/"])
        assert rc == 0, err
        assert b_mark in out.split() and a_mark not in out.split(), out
        out, _, rc = node.exec_sync(p.c["a"], ["hostname"])
        assert (out, rc) == (f"{p.cfg.hostname}\n", 0)
        out, _, rc = node.exec_sync(p.c["a"], ["ps", "-o", "args"])
        assert rc == 0 and "sleep 100001" in out and "sleep 100002" not in out, out
        # what one app writes stays in its own root
        node.exec_sync(p.c["a"], ["sh", "-c", "echo x > /written-by-a"])
        out, _, _ = node.exec_sync(p.c["b"], ["ls", "/"])
        assert "written-by-a" not in out.split(), out
    finally:
        if p.id:
            node.teardown_pod(p.id)


def test_exec_sync_returns_streams_and_exit_code(pod, node):
    out, err, rc = node.exec_sync(pod.c["app"], ["/bin/sh", "-c",
                                                 "echo to-out; echo to-err >&2; exit 7"])
    assert (out, err, rc) == ("to-out\n", "to-err\n", 7)
    assert node.exec_sync(pod.c["app"], ["/bin/true"]) == ("", "", 0)


def test_exec_streams_with_a_tty(pod, node):
    """Exec with a TTY through containerd's streaming server (the URL the
    CRI returns; the WebSocket channel protocol kubectl speaks): the shell
    reads what is typed, its terminal is a pty, the exit code comes back in
    the status document."""
    url = node.cri.call("Exec", container_id=pod.c["app"], cmd=["/bin/sh"], tty=True,
                        stdin=True, stdout=True, stderr=False).url
    out, err, status = H.stream(node.pid, url,
                                stdin=b"test -t 0 && echo is-a-$((6*7))-tty; exit 3\n")
    text = out.decode(errors="replace")
    assert "is-a-42-tty" in text, (text, status)
    assert H.stream_exit_code(status) == 3, status


def test_attach_streams_a_tty_container(pod, node):
    """Attach to a container made with tty and stdin: what is typed reaches
    its shell, its output comes back."""
    cid = pod.start("tty", ["/bin/sh"], tty=True, stdin=True)
    wait_state(node, cid, node.cri.pb.CONTAINER_RUNNING)
    url = node.cri.call("Attach", container_id=cid, stdin=True, tty=True, stdout=True,
                        stderr=False).url
    out, _, _ = H.stream(node.pid, url, stdin=b"echo attached-$((5*5))\n",
                         until=b"attached-25", timeout=20)
    assert b"attached-25" in out, out


def test_containers_share_the_pods_localhost(pod, node):
    """`web` listens on port 8080 in the pod's network namespace; `app`
    reaches it on 127.0.0.1."""
    end = time.monotonic() + 20
    while True:
        out, err, rc = node.exec_sync(pod.c["app"], ["nc", "127.0.0.1", "8080"], timeout=10)
        if "hello-from-web" in out or time.monotonic() > end:
            break
        time.sleep(0.2)
    assert "hello-from-web" in out, (out, err, rc)


LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)) "
                      r"(stdout|stderr) ([PF]) (.*)$")


def test_log_file_is_in_the_cri_format(pod, node):
    """LogDirectory/LogPath receive stdout and stderr, one line per record:
    an RFC 3339 time, the stream, F (full) or P (partial), the text."""
    st, _ = node.status(pod.c["web"])
    path = pod.log_dir / "web" / "0.log"
    assert st.log_path == str(path)
    end = time.monotonic() + 10
    while not (path.exists() and "err-line" in path.read_text()) and time.monotonic() < end:
        time.sleep(0.1)
    rows = [LOG_LINE.match(l) for l in path.read_text().splitlines()]
    assert all(rows), path.read_text()
    got = {(m.group(4), m.group(5), m.group(6)) for m in rows}
    assert ("stdout", "F", "out-line") in got and ("stderr", "F", "err-line") in got, got


def test_container_status_exit_code_and_oom(pod, node):
    """ContainerStatus reports a container's exit code (reason Error) and
    an OOM kill by its memory limit (137, reason OOMKilled)."""
    pb = node.cri.pb
    cid = pod.start("exit7", ["/bin/sh", "-c", "exit 7"])
    st, _ = wait_state(node, cid, pb.CONTAINER_EXITED)
    assert (st.state, st.exit_code, st.reason) == (pb.CONTAINER_EXITED, 7, "Error"), st
    # both stamped (containerd stamps the start once the task has started,
    # so a container this short may finish before it: no order between them)
    assert st.started_at > 0 and st.finished_at > 0
    cid = pod.start("hog", ["/bin/sh", "-c", "a=x; while :; do a=$a$a; done"],
                    memory=32 << 20)
    st, _ = wait_state(node, cid, pb.CONTAINER_EXITED, timeout=60)
    # kis-vm: the limit binds in the pod's guest (src/agent/pod.c); the
    # container process the shim watches relays the OOM kill to its host
    # memory group (src/runtime/mvm.c, relay_leaf)
    assert (st.state, st.exit_code, st.reason) == (pb.CONTAINER_EXITED, 137, "OOMKilled"), st


def _cgroup_file(pid, controller, name):
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctrls, path = line.split(":", 2)
        if controller in ctrls.split(","):
            mount = "cpu,cpuacct" if controller == "cpu" and \
                Path("/sys/fs/cgroup/cpu,cpuacct").exists() else controller
            return (Path("/sys/fs/cgroup") / mount / path.lstrip("/") / name).read_text().strip()
        if ctrls == "" and Path(f"/sys/fs/cgroup/cgroup.controllers").exists():
            return (Path("/sys/fs/cgroup") / path.lstrip("/") / name).read_text().strip()
    raise AssertionError(f"no {controller} cgroup for {pid}")


def test_pod_resources_apply_to_the_cgroup(pod, node):
    """CPU and memory limits of the container's spec are its cgroup's
    (cgroup v1 here: memory.limit_in_bytes, cpu.cfs_quota_us/period, shares),
    at the cgroup parent the pod's config names (kis-host too: its group is
    made at linux.cgroupsPath, as runc makes it). At kis-vm the container
    runs in the pod's guest and the host pid is a proxy: judged there, in
    its own group (cgroup v2, src/agent/pod.c), by what the container sees
    and by the effect, against a container of the same pod without a
    quota."""
    cid = pod.start("limited", ["/bin/sleep", "100000"], memory=96 << 20, cpu_quota=50000,
                    cpu_period=100000, cpu_shares=512)
    _, info = wait_state(node, cid, node.cri.pb.CONTAINER_RUNNING)
    if pod.handler == "kis-vm":
        _judge_in_the_guest(pod, node, cid)
        return
    pid = info["pid"]
    assert _cgroup_file(pid, "memory", "memory.limit_in_bytes") == str(96 << 20)
    assert _cgroup_file(pid, "cpu", "cpu.cfs_quota_us") == "50000"
    assert _cgroup_file(pid, "cpu", "cpu.cfs_period_us") == "100000"
    assert _cgroup_file(pid, "cpu", "cpu.shares") == "512"
    assert f"/{node.cgroup_top}/" in Path(f"/proc/{pid}/cgroup").read_text()


def _judge_in_the_guest(pod, node, cid):
    """kis-vm: the container's cgroup namespace is rooted at its group,
    which it sees at /sys/fs/cgroup: cpu.max "$QUOTA $PERIOD" and
    memory.max as asked (shares are a weight among the host's groups, not
    applied in the guest). A busy loop there has about quota/period (half)
    of a CPU and is throttled; in a control container of the same pod with
    a memory limit only (a group of its own, cpu.max "max") it has a whole
    CPU and is never throttled."""
    out, err, rc = node.exec_sync(cid, ["cat", "/sys/fs/cgroup/cpu.max",
                                        "/sys/fs/cgroup/memory.max"])
    assert (out, rc) == (f"50000 100000\n{96 << 20}\n", 0), (out, err, rc)
    ctl = pod.start("unthrottled", ["/bin/sleep", "100000"], memory=96 << 20)
    wait_state(node, ctl, node.cri.pb.CONTAINER_RUNNING)
    out, err, rc = node.exec_sync(ctl, ["cat", "/sys/fs/cgroup/cpu.max"])
    assert (rc, out.split()[:1]) == (0, ["max"]), (out, err, rc)
    out, err, rc = node.exec_sync(cid, busy_probe(3), timeout=60)
    assert rc == 0, err
    share, throttled = busy_share(out)
    assert 0.35 <= share <= 0.65 and throttled > 0, (share, throttled, out)
    out, err, rc = node.exec_sync(ctl, busy_probe(2), timeout=60)
    assert rc == 0, err
    share, throttled = busy_share(out)
    assert share >= 0.75 and throttled == 0, (share, throttled, out)


def _shim_pids(pod_id):
    out = []
    for p in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"containerd-shim-runc-v2") and pod_id.encode() in cmd:
            out.append(int(p))
    return out


@pytest.mark.parametrize("handler", HANDLERS)
def test_stop_and_remove_leave_nothing(handler, node):
    """StopContainer honours the grace period (a container that handles
    TERM exits with its own code; one that ignores it is killed when the
    period ends), stopping twice is no error; RemoveContainer,
    StopPodSandbox (twice), RemovePodSandbox leave no process, mount,
    cgroup, network namespace, veth, CNI record or runtime state."""
    need_guest(handler)
    pb = node.cri.pb
    p = Pod(node, handler).run()
    try:
        term = p.start("term", ["/bin/sh", "-c",
                                "trap 'exit 3' TERM; echo trap-set; while :; do sleep 0.2; done"])
        stubborn = p.start("stubborn", ["/bin/sleep", "100000"])
        _, sinfo = node.pod_info(p.id)
        netns = sinfo["runtimeSpec"]["linux"]["namespaces"]
        netns = [n["path"] for n in netns if n["type"] == "network"][0]
        pids = [sinfo["pid"]]
        for c in (term, stubborn):
            pids.append(wait_state(node, c, pb.CONTAINER_RUNNING)[1]["pid"])
        shims = _shim_pids(p.id)
        veths = [l for l in node.links() if l.startswith("veth")]

        # its shell has set its trap (a guest's shell starts in a moment
        # more than the host's: under TCG, a TERM before that is its end)
        log = p.log_dir / "term" / "0.log"
        end = time.monotonic() + 20
        while not (log.exists() and "trap-set" in log.read_text()) and time.monotonic() < end:
            time.sleep(0.1)
        t = time.monotonic()
        node.cri.call("StopContainer", container_id=term, timeout=10)
        took = time.monotonic() - t
        st, _ = node.status(term)
        assert (st.state, st.exit_code) == (pb.CONTAINER_EXITED, 3), st
        assert took < 8, f"a container that handles TERM took {took:.1f}s to stop"
        t = time.monotonic()
        node.cri.call("StopContainer", container_id=stubborn, timeout=2)
        took = time.monotonic() - t
        st, _ = node.status(stubborn)
        # pid 1 of its pid namespace at every handler (at kis-vm, in the
        # pod's guest): a TERM it has no handler for does not end it
        assert (st.state, st.exit_code) == (pb.CONTAINER_EXITED, 137), st
        assert took >= 1.9, f"killed after {took:.1f}s, before its grace period of 2s"
        node.cri.call("StopContainer", container_id=stubborn, timeout=2)  # twice: no error
        for c in (term, stubborn):
            node.cri.call("RemoveContainer", container_id=c)
        node.cri.call("StopPodSandbox", pod_sandbox_id=p.id)
        node.cri.call("StopPodSandbox", pod_sandbox_id=p.id)  # twice: no error
        node.cri.call("RemovePodSandbox", pod_sandbox_id=p.id)
        node.cri.call("RemovePodSandbox", pod_sandbox_id=p.id)  # gone: no error
        removed, p.id = p.id, None
        time.sleep(0.3)  # the shims exit as their last task is deleted
        left = node.traces([removed, term, stubborn], pids + shims)
        assert not left, left
        assert not Path(f"/proc/{node.pid}/root{netns}").exists() and \
            not Path(netns).exists(), netns
        # the pod's end of its veth went with its namespace, the node's with it
        assert len([l for l in node.links() if l.startswith("veth")]) == len(veths) - 1, \
            node.links()
    finally:
        if p.id:
            node.teardown_pod(p.id)


def test_kis_vm_pods_keep_one_base_of_the_sandbox_image(node):
    """Every pod's sandbox brings the node's sandbox image: kis-vm imports
    it once and keeps that base (with the guest disk image made of it) for
    the next pods, rather than importing and imaging it per pod
    (src/runtime/mvm_image.c). Two pods one after the other leave one kept
    base, the store's only one, its disk image made; the pods' own
    workspaces and sessions are gone."""
    need_guest("kis-vm")
    mvm = node.inside("/run/containerd/runc/k8s.io/kis-microvm")
    for _ in range(2):
        p = Pod(node, "kis-vm").run()
        try:
            cid = p.start("app", ["/bin/sleep", "100000"])
            assert node.exec_sync(cid, ["/bin/echo", "ready"]) == ("ready\n", "", 0)
        finally:
            node.teardown_pod(p.id)
    kept = sorted(x.name for x in (mvm / ".images").iterdir())
    assert len(kept) == 1, f"kept bases of one image after two pods: {kept}"
    store = mvm / ".store"
    bases = sorted(x.name for x in (store / "bases").iterdir() if not x.name.startswith("."))
    # other cells' kis-vm pods may still run: theirs are clones of it too
    assert bases == kept, bases
    assert (store / "bases" / kept[0] / "cache" / "microvm-base-v1.img").exists()


def _from_another_pod(pod, node, cmd):
    """cmd (with {ip}, the pod's IP) run in a client container of a second
    pod of the same handler, until web's line comes back or 20 s pass."""
    ip = node.pod_info(pod.id)[0].network.ip
    other = Pod(node, pod.handler).run()
    try:
        cid = other.start("client", ["/bin/sleep", "100000"])
        end = time.monotonic() + 20
        while True:
            out, err, rc = node.exec_sync(cid, ["sh", "-c", cmd.format(ip=ip)], timeout=20)
            if "hello-from-web" in out or time.monotonic() > end:
                return ip, out, err, rc
            time.sleep(0.2)
    finally:
        node.teardown_pod(other.id)


def test_pod_ip_reaches_from_another_pod(pod, node):
    """A second pod on the node reaches the first one's IP (the CNI
    bridge): web's port 8080 answers. At kis-vm both ends are guests: the
    pod's network reaches each through passt in the pod's namespace
    (docs/network.md, "A kis-vm pod's network"). The client speaks first
    (a line, as an HTTP client does) and stops after 8 s: that the bytes
    come back is this cell; how the connection ends is the next one's."""
    ip, out, err, rc = _from_another_pod(pod, node, "echo | timeout 8 nc {ip} 8080")
    assert "hello-from-web" in out, (ip, out, err, rc)


def test_pod_ip_connection_is_whole_from_another_pod(pod, node):
    """The same connection, whole: web's one line, once, then its close
    ends the client (nc exits 0 by itself)."""
    if pod.handler == "kis-vm":
        # seen here: the line arrives, but several times, and the close
        # never reaches the client (docs/network.md, "A kis-vm pod's network")
        pytest.skip("kis-vm: Debian 12's passt (2023-03-09) does not ACK the guest's "
                    "SYN-ACK on a connection it forwards in (ACK_IF_NEEDED after the "
                    "handshake, fixed upstream since): the guest retransmits, the server's "
                    "bytes reach the client repeated and its close does not reach it")
    ip, out, err, rc = _from_another_pod(pod, node, "echo | nc {ip} 8080")
    assert (out, rc) == ("hello-from-web\n", 0), (ip, out, err, rc)


# A pod's security context beyond the default: each runs at the control;
# at the kis handlers it is refused by name (no named hatch is configured:
# the README's handlers have none), the container tier naming the field.
# A host-network pod has no hostname of its own (the kubelet sends none, and
# containerd gives it the host's UTS namespace with the network).
SECURITY = {
    "privileged": ("process\\.capabilities\\.bounding names 'CAP_\\w+'", "ffffff"),
    "cap-add-sys-admin": ("process\\.capabilities\\.bounding names 'CAP_SYS_ADMIN'", "a82425fb"),
    "host-network": ("linux\\.namespaces: the container shares the host's '(uts|network)' "
                     "namespace|escape_hatch_forbidden", None),
    "host-pid": ("linux\\.namespaces: the container shares the host's 'pid' namespace", None),
    # containerd binds the host's /dev/shm into a host-IPC pod's sandbox
    "host-ipc": ("linux\\.namespaces: the container shares the host's 'ipc' namespace|"
                 "mounts\\[\\d+\\]\\.source '/dev/shm': the host's /dev", None),
}


@pytest.mark.parametrize("case", list(SECURITY))
@pytest.mark.parametrize("handler", HANDLERS)
def test_security_context_beyond_the_default_is_refused_by_name(handler, case, node):
    pb = node.cri.pb
    named, capeff = SECURITY[case]
    uid = uuid.uuid4().hex
    logs = node.d / "pods" / f"kis-cri-test_{case}_{uid}"
    logs.mkdir(parents=True)
    cfg = node.cri.pod_config(case, logs, f"/{node.cgroup_top}/pod{uid[:12]}", uid=uid)
    sc = cfg.linux.security_context
    ns = sc.namespace_options
    if case == "host-network":
        ns.network, cfg.hostname = pb.NODE, ""
    ns.pid = pb.NODE if case == "host-pid" else ns.pid
    ns.ipc = pb.NODE if case == "host-ipc" else ns.ipc
    sc.privileged = case == "privileged"
    c = node.cri.container_config("c", ["/bin/sleep", "100000"])
    c.linux.security_context.namespace_options.CopyFrom(ns)
    c.linux.security_context.privileged = case == "privileged"
    if case == "cap-add-sys-admin":
        c.linux.security_context.capabilities.add_capabilities.append("SYS_ADMIN")
    pod, step = None, "RunPodSandbox"
    try:
        pod = node.cri.call("RunPodSandbox", config=cfg, runtime_handler=handler).pod_sandbox_id
        step = "CreateContainer/StartContainer"
        cid = node.cri.call("CreateContainer", pod_sandbox_id=pod, config=c,
                            sandbox_config=cfg).container_id
        node.cri.call("StartContainer", container_id=cid)
        got = None
        out = node.exec_sync(cid, ["/bin/sh", "-c", "grep CapEff /proc/self/status"])
    except node.cri.grpc.RpcError as e:
        got = e.details()
    finally:
        if pod:
            node.teardown_pod(pod)
    if handler == "runc":
        assert got is None, f"the control refused {case} at {step}: {got}"
        if capeff:
            assert capeff in out[0], out
        return
    assert got is not None, f"{handler} ran a pod with {case}"
    pat = KNOWN_REFUSALS.get(handler)
    if pat and re.search(pat, got):
        pytest.skip(f"{handler} refuses every pod today (above); {case} not told apart")
    assert re.search(r"(profile_unsatisfiable|escape_hatch_forbidden): ", got), got
    if handler in ("kis", "kis-host"):
        assert re.search(named, got), got


@pytest.mark.parametrize("handler", [h for h in HANDLERS if h != "runc"])
def test_a_pod_cannot_hand_itself_a_named_hatch(handler, node):
    """The named hatches are kis's annotations (run.kis.allow-net-host,
    run.kis.allow-hooks): a pod that writes them in its own annotations
    does not reach the runtime with them (the README's handlers pass no
    pod annotation: no pod_annotations), so only the operator's handler
    configuration could give one."""
    need_guest(handler)
    hatches = {"run.kis.allow-net-host": "true", "run.kis.allow-hooks": "true"}
    uid = uuid.uuid4().hex
    logs = node.d / "pods" / f"kis-cri-test_hatch_{uid}"
    logs.mkdir(parents=True)
    cfg = node.cri.pod_config("hatch", logs, f"/{node.cgroup_top}/pod{uid[:12]}", uid=uid)
    for k, v in hatches.items():
        cfg.annotations[k] = v
    pod = None
    try:
        try:
            pod = node.cri.call("RunPodSandbox", config=cfg,
                                runtime_handler=handler).pod_sandbox_id
        except node.cri.grpc.RpcError as e:
            refused(handler, "RunPodSandbox", e)
        c = node.cri.container_config("c", ["/bin/sleep", "100000"])
        for k, v in hatches.items():
            c.annotations[k] = v
        try:
            cid = node.cri.call("CreateContainer", pod_sandbox_id=pod, config=c,
                                sandbox_config=cfg).container_id
        except node.cri.grpc.RpcError as e:
            refused(handler, "CreateContainer", e)
        _, sinfo = node.pod_info(pod)
        _, cinfo = node.status(cid)
        for what, info in (("sandbox", sinfo), ("container", cinfo)):
            ann = info["runtimeSpec"].get("annotations", {})
            # the CRI plugin's own annotations are there: this is the spec
            assert any(k.startswith("io.kubernetes.cri.") for k in ann), (what, ann)
            assert not [k for k in ann if k.startswith("run.kis.")], (what, ann)
    finally:
        if pod:
            node.teardown_pod(pod)
