# SPDX-License-Identifier: MIT
# A private containerd 1.6 with its CRI plugin, as a kubelet's node runs it,
# for the CRI tests (tests/integration/test_cri.py) and bench/cri.py.
#
# Theory of operation. The daemon runs in a network and a mount namespace of
# its own, made by unshare(1) for it: its pods' bridge and veths live there
# (no host interface, route or sysctl changes), and in its mount namespace a
# tmpfs covers /run (the shim's sockets under /run/containerd/s and the runc
# root /run/containerd/runc/k8s.io are therefore this daemon's alone: another
# containerd, the host's or test_runtime.py's, cannot meet them) and an
# overlay covers /var/lib (the CNI library caches results in /var/lib/cni and
# has no setting for it in containerd 1.6). Its config, root, state, socket,
# CNI config and IPAM state are under one directory of the test's. The shims
# and the containers inherit both namespaces, so what a pod leaves is seen
# through /proc/<daemon>/root and /proc/<daemon>/mountinfo and goes with the
# namespaces. Pod cgroups are under a parent named for the run, removed at
# the end. The runtime handlers' section of the config is read from the
# README, so what an operator is told to write is what runs here.
import base64
import ctypes
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KRT = ROOT / "build" / "kis-runtime"
README = ROOT / "README.md"
PROTO = Path(__file__).resolve().parent / "cri.proto"
CONTAINERD = shutil.which("containerd")
CTR = shutil.which("ctr")
SHIM = shutil.which("containerd-shim-runc-v2")
BUSYBOX = shutil.which("busybox")
CNI_BIN = Path("/usr/lib/cni")
GUEST = Path(os.environ.get("KIS_MICROVM_GUEST_DIR", ROOT / "build" / "microvm-guest"))
# the control: runc where installed (crun 1.8 refuses hybrid cgroup hosts)
CONTROL = shutil.which("runc") or shutil.which("crun")
IMAGE = "localhost/kis-cri-busybox:1"
# two app images of other trees (busybox-static and a marker file each), for
# the pods whose app containers are not of the pause image (every real pod)
APP_IMAGES = {"localhost/kis-cri-app-a:1": "kis-app-marker",
              "localhost/kis-cri-app-b:1": "kis-app-b-marker"}
STREAM_PORT = 10010
# where the README's block begins (an HTML comment, not shown)
CONFIG_MARK = "<!-- cri-config"
CLASS_MARK = "<!-- cri-runtimeclass"
# the handlers as the README names them, and the tier each pins
KIS_HANDLERS = {"kis": "container", "kis-host": "host", "kis-vm": "microvm"}


def why_skip():
    """Why the CRI harness cannot run here, or None."""
    if os.geteuid() != 0:
        return "the CRI plugin runs pods as root"
    for what, have in (("containerd, ctr, containerd-shim-runc-v2 (Debian containerd)",
                        CONTAINERD and CTR and SHIM),
                       ("runc or crun (the control)", CONTROL),
                       ("busybox (Debian busybox-static)", BUSYBOX),
                       ("unshare (util-linux)", shutil.which("unshare")),
                       ("ip (iproute2)", shutil.which("ip"))):
        if not have:
            return f"{what} is not installed"
    for p in ("bridge", "host-local", "loopback"):
        if not (CNI_BIN / p).exists():
            return f"{CNI_BIN}/{p} is missing (Debian containernetworking-plugins)"
    try:
        import grpc  # noqa: F401  (present: that is the check)
        import grpc_tools  # noqa: F401
    except ImportError as e:
        return f"python3-grpcio and python3-grpc-tools are needed ({e})"
    if not KRT.exists():
        return "build/kis-runtime is missing: run make"
    return None


# ------------------------------------------------------------ the README's blocks


def readme_block(mark):
    """The indented code block that follows the comment `mark` in the
    README, dedented by its four spaces."""
    lines = README.read_text().splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith(mark))
    out, started = [], False
    for l in lines[at + 1:]:
        if l.startswith("    "):
            out.append(l[4:])
            started = True
        elif not l.strip():
            if started:
                out.append("")
        elif started:
            break
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out) + "\n"


def runtime_classes():
    """The RuntimeClass documents of the README: {name: handler}."""
    out = {}
    for doc in readme_block(CLASS_MARK).split("\n---\n"):
        name = re.search(r"^\s+name:\s*(\S+)", doc, re.M)
        handler = re.search(r"^handler:\s*(\S+)", doc, re.M)
        assert re.search(r"^kind:\s*RuntimeClass$", doc, re.M) and name and handler, doc
        out[name.group(1)] = handler.group(1)
    return out


def config_handlers(text):
    """The runtime handlers a containerd config names: {name: BinaryName}."""
    names = re.findall(r'^\s*\[plugins\."io\.containerd\.grpc\.v1\.cri"\.containerd\.runtimes'
                       r'\.([\w-]+)\]\s*$', text, re.M)
    out = {}
    for n in names:
        m = re.search(r'runtimes\.' + re.escape(n) + r'\.options\]\s*\n\s*BinaryName\s*=\s*"([^"]+)"',
                      text)
        out[n] = m.group(1) if m else None
    return out


def cri_config(d, bindir):
    """The daemon's config: paths under d (the test's), the CRI plugin with
    the sandbox image, the streaming server on the daemon's own loopback,
    CNI from Debian's plugins, the control handler, and the README's kis
    handlers with /usr/local/bin/ replaced by bindir (links to the build).
    restrict_oom_score_adj: the CRI plugin gives a sandbox oom_score_adj
    -998, and lowering it needs CAP_SYS_RESOURCE (proc(5)), which a node
    run from this shell has not: with it set, no score goes below the
    daemon's own (runc and crun both fail the write otherwise)."""
    kis = readme_block(CONFIG_MARK).replace("/usr/local/bin/", f"{bindir}/")
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{d}/containerd.sock"
[ttrpc]
  address = "{d}/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"
[{cri}]
  sandbox_image = "{IMAGE}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "{STREAM_PORT}"
  disable_apparmor = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [{cri}.cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{d}/net.d"
  [{cri}.containerd]
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        BinaryName = "{CONTROL}"
""" + "".join("    " + l + "\n" if l else "\n" for l in kis.splitlines())


def cni_conflist(d):
    """A bridge in the daemon's network namespace, addresses from
    host-local with its state under d; containerd adds loopback itself."""
    return json.dumps({
        "cniVersion": "1.0.0",
        "name": "kis-cri",
        "plugins": [{
            "type": "bridge", "bridge": "kiscri0", "isGateway": True, "ipMasq": False,
            "ipam": {"type": "host-local", "dataDir": f"{d}/ipam",
                     "ranges": [[{"subnet": "10.88.7.0/24"}]]},
        }],
    }, indent=1)


# ------------------------------------------------------------ the image


def image_archive(path, entry=("/bin/sleep", "2147483647"), tag=IMAGE, marker="kis-pause-marker"):
    """A docker-archive (what `ctr images import` reads) of one layer:
    busybox-static and its applets, /etc/passwd, the usual directories and
    the file /<marker> that tells the image's tree apart. Its entrypoint
    sleeps: it serves as the sandbox (pause) image too."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as t:
        def add_dir(name):
            ti = tarfile.TarInfo(name)
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            t.addfile(ti)

        def add_file(name, data, mode=0o644):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode = len(data), mode
            t.addfile(ti, io.BytesIO(data))

        for sub in ("bin", "proc", "sys", "dev", "etc", "tmp", "root", "run", "var"):
            add_dir(sub)
        add_file("bin/busybox", Path(BUSYBOX).read_bytes(), 0o755)
        applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True).stdout.split()
        for a in applets:
            if a != "busybox":
                ti = tarfile.TarInfo(f"bin/{a}")
                ti.type, ti.linkname = tarfile.SYMTYPE, "busybox"
                t.addfile(ti)
        add_file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
        add_file("etc/group", b"root:x:0:\n")
        add_file(marker, f"{tag}\n".encode())
    blob = layer.getvalue()
    diff = hashlib.sha256(blob).hexdigest()
    cfg = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": list(entry), "Env": ["PATH=/bin"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff}"]},
        "history": [{"created_by": "kis tests/cri/harness.py"}],
    }).encode()
    cdig = hashlib.sha256(cfg).hexdigest()
    manifest = json.dumps([{"Config": f"{cdig}.json", "RepoTags": [tag],
                            "Layers": [f"{diff}/layer.tar"]}]).encode()
    with tarfile.open(path, "w") as t:
        for name, data in ((f"{diff}/layer.tar", blob), (f"{cdig}.json", cfg),
                           ("manifest.json", manifest)):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))


# ------------------------------------------------------------ the CRI client


def load_stubs(outdir):
    """Compile cri.proto into outdir with grpc_tools.protoc (at test time,
    nothing generated is kept in the tree) and import the modules."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    p = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO.parent}",
                        f"--python_out={outdir}", f"--grpc_python_out={outdir}", PROTO.name],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"protoc: {p.stderr}")
    sys.path.insert(0, str(outdir))
    try:
        import importlib
        pb = importlib.import_module("cri_pb2")
        rpc = importlib.import_module("cri_pb2_grpc")
    finally:
        sys.path.remove(str(outdir))
    return pb, rpc


class CRI:
    """The kubelet's side, as far as the tests need it: each method is one
    CRI call (the names are the CRI's), plus pod and container builders."""

    def __init__(self, sock, stubs_dir):
        import grpc
        self.grpc = grpc
        self.pb, rpc = load_stubs(stubs_dir)
        self.channel = grpc.insecure_channel(f"unix://{sock}")
        self.rt = rpc.RuntimeServiceStub(self.channel)
        self.img = rpc.ImageServiceStub(self.channel)

    def close(self):
        self.channel.close()

    def call(self, name, deadline=180, **kw):
        """One call, kw the request's fields; deadline in seconds (the
        request's own `timeout` field, as ExecSync's, is a field)."""
        req = getattr(self.pb, f"{name}Request")(**kw)
        stub = self.img if name in ("ListImages",) else self.rt
        return getattr(stub, name)(req, timeout=deadline)

    def pod_config(self, name, log_dir, cgroup_parent, uid=None):
        pb = self.pb
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid or uuid.uuid4().hex,
                                           namespace="kis-cri-test", attempt=0),
            hostname=name, log_directory=str(log_dir),
            labels={"kis-cri-test": "1"},
            linux=pb.LinuxPodSandboxConfig(
                cgroup_parent=cgroup_parent,
                security_context=pb.LinuxSandboxSecurityContext(
                    namespace_options=pb.NamespaceOption(network=pb.POD, pid=pb.CONTAINER,
                                                         ipc=pb.POD))))

    def container_config(self, name, args, log_path=None, tty=False, stdin=False,
                         memory=0, cpu_quota=0, cpu_period=0, cpu_shares=0, env=None,
                         image=IMAGE):
        pb = self.pb
        res = pb.LinuxContainerResources(memory_limit_in_bytes=memory, cpu_quota=cpu_quota,
                                          cpu_period=cpu_period, cpu_shares=cpu_shares)
        return pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=0),
            image=pb.ImageSpec(image=image), command=list(args), working_dir="/",
            envs=[pb.KeyValue(key=k, value=v) for k, v in (env or {}).items()],
            log_path=log_path or f"{name}/0.log", tty=tty, stdin=stdin,
            linux=pb.LinuxContainerConfig(
                resources=res,
                # what the kubelet asks for a v1.Pod's container: the pod's
                # network and IPC, a pid namespace of its own
                security_context=pb.LinuxContainerSecurityContext(
                    namespace_options=pb.NamespaceOption(network=pb.POD, pid=pb.CONTAINER,
                                                         ipc=pb.POD))))


# ------------------------------------------------------------ streaming


_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def connect_in_netns(pid, host, port, timeout=30):
    """A TCP connection made from the network namespace of pid: a
    namespace is per thread (setns(2) on CLONE_NEWNET changes the calling
    thread's only), so a short thread joins it, connects and ends; the
    socket keeps its namespace."""
    out = {}

    def run():
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns")
            finally:
                os.close(fd)
            out["sock"] = socket.create_connection((host, port), timeout=timeout)
        except OSError as e:
            out["err"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "err" in out:
        raise out["err"]
    return out["sock"]


class WebSocket:
    """The client half of RFC 6455, enough for the streaming server's
    channel protocol (v4.channel.k8s.io: each binary message's first byte
    names the stream: 0 stdin, 1 stdout, 2 stderr, 3 the error/status
    document, 4 a terminal resize)."""

    def __init__(self, sock, url):
        m = re.match(r"http://([^/]+)(/.*)", url)
        host, path = m.group(1), m.group(2)
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                      "Sec-WebSocket-Version: 13\r\n"
                      "Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n").encode())
        self.sock, self.buf = sock, b""
        while b"\r\n\r\n" not in self.buf:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError(f"no upgrade: {self.buf!r}")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(f"no upgrade: {head!r}")
        want = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        assert want in head, head

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        """(opcode, payload) of the next frame; a fragmented message is
        returned frame by frame (the server sends whole ones)."""
        b0, b1 = self._need(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack(">H", self._need(2))[0]
        elif n == 127:
            n = struct.unpack(">Q", self._need(8))[0]
        mask = self._need(4) if b1 & 0x80 else None
        data = self._need(n)
        if mask:
            data = bytes(c ^ mask[i % 4] for i, c in enumerate(data))
        return b0 & 0x0F, data

    def send(self, data, opcode=0x2):
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        self.sock.sendall(head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(data)))


def stream(pid, url, stdin=b"", until=None, timeout=60):
    """Connect to a streaming URL (Exec or Attach) from the daemon's
    network namespace, send stdin (channel 0) once the streams are up, read
    until the server closes or `until` is in stdout. Returns (stdout,
    stderr, status document or None)."""
    m = re.match(r"http://([^:/]+):(\d+)/", url)
    sock = connect_in_netns(pid, m.group(1), int(m.group(2)), timeout=timeout)
    sock.settimeout(timeout)
    out = {1: b"", 2: b""}
    status = None
    try:
        ws = WebSocket(sock, url)
        ws.send(b"\x04" + json.dumps({"Width": 80, "Height": 24}).encode())
        if stdin:
            ws.send(b"\x00" + stdin)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                op, data = ws.recv()
            except (EOFError, ConnectionError):
                break
            if op == 0x8:
                break
            if op == 0x9:
                ws.send(data, 0xA)
                continue
            if op not in (0x1, 0x2) or not data:
                continue
            ch, body = data[0], data[1:]
            if ch in out:
                out[ch] += body
            elif ch == 3 and body:
                status = json.loads(body)
            if until and until in out[1]:
                break
    finally:
        sock.close()
    return out[1], out[2], status


def stream_exit_code(status):
    """The exit code a v4 status document says (kubectl's reading)."""
    if status is None or status.get("status") == "Success":
        return 0
    for c in status.get("details", {}).get("causes", []):
        if c.get("reason") == "ExitCode":
            return int(c["message"])
    return None


# ------------------------------------------------------------ the node


def _mnt_ns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


class Node:
    """The private containerd, its CRI client and what a test inspects."""

    def __init__(self, d):
        self.d = Path(d)
        self.tag = uuid.uuid4().hex[:8]
        # every pod's cgroup parent is below this one, made by the runtimes
        self.cgroup_top = f"kis-cri-{self.tag}"
        self.daemon = None
        self.cri = None
        self.log = None

    # -- start, stop

    def start(self):
        d = self.d
        for sub in ("net.d", "ipam", "bin", "pods", "opt", "varlib/up", "varlib/work"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        # the README's /usr/local/bin/kis-runtime-<tier>: links to the build,
        # the tier pinned by the name the shim executes
        for b in set(config_handlers(readme_block(CONFIG_MARK)).values()):
            link = d / "bin" / os.path.basename(b)
            if not link.exists():
                link.symlink_to(KRT)
        (d / "config.toml").write_text(cri_config(d, d / "bin"))
        (d / "net.d" / "10-kis-cri.conflist").write_text(cni_conflist(d))
        image_archive(d / "image.tar")
        for i, (tag, marker) in enumerate(APP_IMAGES.items()):
            image_archive(d / f"app{i}.tar", tag=tag, marker=marker)
        # /run's tmpfs holds the runtimes' roots (containerd's default
        # /run/containerd/runc/k8s.io), and with them the kis-vm tier's
        # store: each sandbox's rootfs copy and its guest disks, the rw
        # one's ext4 metadata included (pages only as written)
        setup = ("set -e; ip link set lo up; "
                 "mount -t tmpfs -o mode=0755,size=1g kis-cri-run /run; "
                 # as on a node whose containerd state is /run/containerd
                 # (the default: 0711); the state here is the test's, and
                 # the shims would make it 0600, which no process without
                 # CAP_DAC_OVERRIDE (kis's confined disk tools) traverses
                 "mkdir -m 0711 /run/containerd; "
                 f"mount -t overlay -o lowerdir=/var/lib,upperdir={d}/varlib/up,"
                 f"workdir={d}/varlib/work kis-cri-varlib /var/lib; "
                 f'exec "{CONTAINERD}" --config "{d}/config.toml"')
        self.log = open(d / "containerd.log", "w")
        # the shims run kis-runtime with the daemon's environment: the
        # microvm tier's guest is named there
        self.daemon = subprocess.Popen(
            ["unshare", "--net", "--mount", "--propagation", "slave", "sh", "-c", setup],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=dict(os.environ, KIS_MICROVM_GUEST_DIR=str(GUEST)))
        self.pid = self.daemon.pid
        sock = d / "containerd.sock"
        end = time.monotonic() + 30
        while not sock.exists():
            if self.daemon.poll() is not None or time.monotonic() > end:
                raise RuntimeError("containerd did not start: " + self.logtail())
            time.sleep(0.05)
        self.cri = CRI(sock, d / "stubs")
        while True:
            try:
                self.cri.call("Version", deadline=5)
                break
            except self.cri.grpc.RpcError:
                if self.daemon.poll() is not None or time.monotonic() > end:
                    raise RuntimeError("the CRI plugin did not answer: " + self.logtail())
                time.sleep(0.1)
        for tar in ["image.tar"] + [f"app{i}.tar" for i in range(len(APP_IMAGES))]:
            p = self.ctr("images", "import", str(d / tar))
            if p.returncode != 0:
                raise RuntimeError(f"ctr images import: {p.stderr}")
        # the CRI plugin learns of the image from containerd's events, and
        # its network is ready once it has read the CNI config
        while True:
            imgs = [t for i in self.cri.call("ListImages").images for t in i.repo_tags]
            st = {c.type: c.status for c in self.cri.call("Status").status.conditions}
            if IMAGE in imgs and set(APP_IMAGES) <= set(imgs) and st.get("NetworkReady"):
                break
            if time.monotonic() > end:
                raise RuntimeError(f"not ready: images {imgs}, conditions {st}")
            time.sleep(0.1)
        return self

    def logtail(self, n=1500):
        try:
            return (self.d / "containerd.log").read_text()[-n:]
        except OSError:
            return ""

    def ctr(self, *args, timeout=60):
        return subprocess.run([CTR, "--address", str(self.d / "containerd.sock"), "-n", "k8s.io",
                               *args], capture_output=True, text=True, timeout=timeout)

    def our_pids(self):
        """Processes of this node other than the daemon: those in its mount
        namespace (shims, runtimes) and those in its pods' cgroups
        (containers, which have mount namespaces of their own)."""
        ns = _mnt_ns(self.pid)
        out = set()
        for p in os.listdir("/proc"):
            if p.isdigit() and int(p) != self.pid and ns and _mnt_ns(p) == ns:
                out.add(int(p))
        for top in cgroup_dirs(self.cgroup_top):
            for d, _, files in os.walk(top):
                if "cgroup.procs" in files:
                    try:
                        out |= {int(x) for x in Path(d, "cgroup.procs").read_text().split()}
                    except OSError:
                        pass
        return sorted(out)

    def stop(self):
        """Remove every pod, stop the daemon, end what is left of the node
        (only its own processes: see our_pids), remove the pods' cgroups and
        the directory. Returns (pods that were left, processes that were
        left once they were removed)."""
        left = []
        if self.cri and self.daemon.poll() is None:
            try:
                for s in self.cri.call("ListPodSandbox").items:
                    left.append(s.id)
                    self.teardown_pod(s.id)
            except self.cri.grpc.RpcError:
                pass
        if self.cri:
            self.cri.close()
        time.sleep(0.3)  # a shim exits as its last task is deleted
        stray = self.our_pids() if self.daemon.poll() is None else []
        if self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        for pid in stray:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.log:
            self.log.close()
        remove_cgroup_tree(self.cgroup_top)
        shutil.rmtree(self.d, ignore_errors=True)
        return left, stray

    # -- pods

    def run_pod(self, handler, name=None, uid=None):
        """RunPodSandbox at handler; returns (id, config)."""
        name = name or f"p-{uuid.uuid4().hex[:6]}"
        uid = uid or uuid.uuid4().hex
        logs = self.d / "pods" / f"kis-cri-test_{name}_{uid}"
        logs.mkdir(parents=True)
        cfg = self.cri.pod_config(name, logs, f"/{self.cgroup_top}/pod{uid[:12]}", uid=uid)
        r = self.cri.call("RunPodSandbox", config=cfg, runtime_handler=handler)
        return r.pod_sandbox_id, cfg

    def start_container(self, pod, cfg, name, args, **kw):
        c = self.cri.container_config(name, args, **kw)
        cid = self.cri.call("CreateContainer", pod_sandbox_id=pod, config=c,
                            sandbox_config=cfg).container_id
        self.cri.call("StartContainer", container_id=cid)
        return cid

    def teardown_pod(self, pod):
        """What the kubelet does: stop and remove each container, then the
        sandbox (stop, remove)."""
        for c in self.cri.call("ListContainers", filter=self.cri.pb.ContainerFilter(
                pod_sandbox_id=pod)).containers:
            self.cri.call("StopContainer", container_id=c.id, timeout=0)
            self.cri.call("RemoveContainer", container_id=c.id)
        self.cri.call("StopPodSandbox", pod_sandbox_id=pod)
        self.cri.call("RemovePodSandbox", pod_sandbox_id=pod)

    def status(self, cid):
        r = self.cri.call("ContainerStatus", container_id=cid, verbose=True)
        info = json.loads(r.info.get("info", "{}"))
        return r.status, info

    def pod_info(self, pod):
        r = self.cri.call("PodSandboxStatus", pod_sandbox_id=pod, verbose=True)
        return r.status, json.loads(r.info.get("info", "{}"))

    def exec_sync(self, cid, cmd, timeout=30):
        r = self.cri.call("ExecSync", container_id=cid, cmd=list(cmd), timeout=timeout,
                          deadline=timeout + 60)
        return r.stdout.decode(), r.stderr.decode(), r.exit_code

    # -- what is left

    def inside(self, path):
        """A path as the daemon's mount namespace sees it."""
        return Path(f"/proc/{self.pid}/root{path}")

    def mounts(self):
        return (Path(f"/proc/{self.pid}/mountinfo")).read_text().splitlines()

    def traces(self, ids, pids=()):
        """What of these sandbox or container ids is still there: processes,
        mounts, cgroups, network namespaces (the CRI's netns files), runtime
        state (the shims' runc roots and bundles), CNI attachments."""
        left = []
        for pid in pids:
            if Path(f"/proc/{pid}").exists():
                try:
                    st = Path(f"/proc/{pid}/stat").read_text()
                    if st.rsplit(")", 1)[1].split()[0] != "Z":
                        left.append(f"process {pid}")
                except OSError:
                    pass
        for line in self.mounts():
            if any(i in line for i in ids):
                left.append(f"mount {line.split()[4]}")
        for i in ids:
            for top in cgroup_dirs(self.cgroup_top):
                for dirpath, dirs, _ in os.walk(top):
                    left += [f"cgroup {dirpath}/{x}" for x in dirs if x == i]
            for root in self.inside("/run/containerd/runc").glob("*"):
                if (root / i).exists():
                    left.append(f"runtime state {root / i}")
                for tier in ("kis-host", "kis-microvm"):
                    if (root / tier / i).exists():
                        left.append(f"runtime state {root / tier / i}")
            for sub in ("io.containerd.runtime.v2.task/k8s.io",
                        "io.containerd.grpc.v1.cri/sandboxes",
                        "io.containerd.grpc.v1.cri/containers"):
                if (self.d / "state" / sub / i).exists():
                    left.append(f"state {sub}/{i}")
            for f in (self.d / "varlib" / "up" / "cni" / "results").glob(f"*{i}*"):
                left.append(f"cni result {f.name}")
        return left

    def links(self):
        """The network devices in the daemon's network namespace."""
        p = subprocess.run(["nsenter", f"--net=/proc/{self.pid}/ns/net", "ip", "-o", "link"],
                           capture_output=True, text=True)
        return [l.split(":")[1].strip().split("@")[0] for l in p.stdout.splitlines()]


def cgroup_dirs(name):
    import glob
    return [d for d in glob.glob(f"/sys/fs/cgroup/*/{name}") + [f"/sys/fs/cgroup/{name}"]
            if os.path.isdir(d)]


def remove_cgroup_tree(name, timeout=10):
    """rmdir (never rm: only empty groups go) name in every hierarchy,
    children first; retried while the last processes leave."""
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
