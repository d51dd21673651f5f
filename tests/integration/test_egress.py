# SPDX-License-Identifier: MIT
# network.mode egress (issue 14), offline. Each test module makes its own
# small internet and never reaches a real address:
#
#   engine netns E  (kis runs here; lo, veth 203.0.113.2/24, default via .1)
#        │ veth
#   world netns W   (203.0.113.1/24 and .10: TCP/UDP echo on 7, DNS on 53;
#                    a "private" 10.20.0.5 and the metadata 169.254.169.254
#                    with listeners of their own)
#
# Both namespaces are held by processes the fixture started and kills; the
# engine runs in E with a private mount namespace whose /etc/resolv.conf
# names the world's DNS server (pasta forwards the sandbox's DNS there).
# E itself also has listeners: on its loopback and on its veth address.
# Every probe runs inside a sandbox and says "reached" or why not; the
# world's log says what actually arrived.
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import KIS, ROOT, qemu_pids

HERE = Path(__file__).resolve().parent
WORLD = HERE / "egress_world.py"
PY = "/usr/bin/python3"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="egress needs root (netns, veth)")

PROBE = r"""
import json, socket, sys
out = {}
for t in json.loads(sys.argv[1]):
    kind, rest = t.split(":", 1)
    addr, port = rest.rsplit(":", 1)  # tcp6, udp6: an IPv6 address before the port
    try:
        if kind in ("tcp", "tcp6"):
            s = socket.create_connection((addr, int(port)), timeout=3)
            s.sendall(b"ping")
            out[t] = "reached" if s.recv(16) == b"ping" else "no echo"
        elif kind in ("udp", "udp6"):
            s = socket.socket(socket.AF_INET6 if kind == "udp6" else socket.AF_INET,
                              socket.SOCK_DGRAM)
            s.settimeout(2)
            s.sendto(b"ping", (addr, int(port)))
            out[t] = "reached" if s.recvfrom(16)[0] == b"ping" else "no echo"
        elif kind == "dns":
            out[t] = socket.getaddrinfo(addr, int(port), socket.AF_INET)[0][4][0]
    except OSError as e:
        out[t] = "blocked: %s %s" % (type(e).__name__, e)
print(json.dumps(out))
"""

# what lies outside the sandbox's reach, whatever it sends
FORBIDDEN = {
    "tcp:127.0.0.1:7007": "a listener on the engine namespace's loopback (reached through pasta "
                          "it would be the host)",
    "tcp:203.0.113.2:7008": "a listener on the engine namespace's own veth address",
    "tcp:10.20.0.5:7": "a private (10/8) host",
    "tcp:169.254.169.254:80": "the cloud metadata address",
    "udp:10.20.0.5:7": "a private host, by UDP",
    "udp:169.254.169.254:7": "the metadata address, by UDP",
}


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, capture_output=True, text=True, **kw)


def holder():
    """A process in a new network namespace of its own; the namespace lives
    while it does."""
    p = subprocess.Popen(["unshare", "--net", "sleep", "1000000"])
    for _ in range(100):
        try:
            if os.readlink(f"/proc/{p.pid}/ns/net") != os.readlink("/proc/self/ns/net"):
                return p
        except OSError:
            pass
        time.sleep(0.02)
    p.kill()
    raise RuntimeError("no network namespace")


def in_ns(pid, *cmd):
    return ["nsenter", f"--net=/proc/{pid}/ns/net", *cmd]


class Net:
    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []
        self.e = holder()
        self.procs.append(self.e)
        self.w = holder()
        self.procs.append(self.w)
        veth_e, veth_w = f"ke{os.getpid() % 100000}", f"kw{os.getpid() % 100000}"
        sh("ip", "link", "add", veth_e, "netns", str(self.e.pid), "type", "veth", "peer", "name",
           veth_w, "netns", str(self.w.pid))
        # IPv6 too, on documentation addresses (2001:db8::/32, RFC 3849;
        # nodad: usable at once): E reaches the world by IPv6, the sandbox
        # must not (egress is IPv4 only)
        for cmd in (f"ip link set lo up; ip link set {veth_e} up; "
                    f"ip addr add 203.0.113.2/24 dev {veth_e}; "
                    "ip route add default via 203.0.113.1; "
                    f"ip -6 addr add 2001:db8::2/64 dev {veth_e} nodad; "
                    "ip -6 route add default via 2001:db8::1",):
            sh(*in_ns(self.e.pid, "sh", "-ec", cmd))
        sh(*in_ns(self.w.pid, "sh", "-ec",
                  f"ip link set lo up; ip link set {veth_w} up; "
                  f"ip addr add 203.0.113.1/24 dev {veth_w}; ip addr add 203.0.113.10/32 dev {veth_w}; "
                  "ip addr add 10.20.0.5/32 dev lo; ip addr add 169.254.169.254/32 dev lo; "
                  "ip route add 10.0.2.0/24 via 203.0.113.2; "
                  f"ip -6 addr add 2001:db8::1/64 dev {veth_w} nodad; "
                  f"ip -6 addr add 2001:db8::10/128 dev {veth_w} nodad"))
        self.world_log = tmp / "world.log"
        self.engine_log = tmp / "engine-listeners.log"
        self.start_world(self.w.pid, self.world_log, [
            # UDP on each address: a reply from 0.0.0.0 would leave by the
            # route's source address, not the one asked
            "tcp:0.0.0.0:7", "udp:203.0.113.10:7", "udp:203.0.113.1:7", "udp:10.20.0.5:7",
            "udp:169.254.169.254:7", "dns:203.0.113.10:53", "tcp:203.0.113.10:9",
            "tcp:169.254.169.254:80", "tcp6:2001:db8::10:7", "udp6:2001:db8::10:7"])
        self.start_world(self.e.pid, self.engine_log, ["tcp:127.0.0.1:7007",
                                                        "tcp:203.0.113.2:7008", "tcp6:::1:7010",
                                                        "tcp6:2001:db8::2:7011"])
        self.resolv = tmp / "resolv.conf"
        self.resolv.write_text("nameserver 203.0.113.10\n")

    def start_world(self, pid, log, specs):
        log.touch()
        p = subprocess.Popen(in_ns(pid, PY, str(WORLD), str(log), *specs))
        self.procs.append(p)
        for _ in range(200):
            if "ready" in log.read_text():
                return
            time.sleep(0.02)
        raise RuntimeError("the world's servers did not start")

    def kis_argv(self, *args):
        """kis in E, in a private mount namespace whose resolv.conf names
        the world's DNS server (the host's file is not touched)."""
        script = f'mount --bind "$0" /etc/resolv.conf && exec "$@"'
        return in_ns(self.e.pid, "unshare", "-m", "--propagation", "private", "sh", "-c", script,
                     str(self.resolv), str(KIS), "sandbox", *args)

    def kis(self, *args, timeout=120, env=None):
        return subprocess.run(self.kis_argv(*args), capture_output=True, text=True,
                              timeout=timeout, env=dict(os.environ, **(env or {})))

    def probe(self, tier_args, targets, extra=()):
        p = self.kis("run", *tier_args, "--net", "egress", *extra, "--", PY, "-c", PROBE,
                     json.dumps(targets))
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout.strip().splitlines()[-1])

    def bare(self, target):
        """The same probe from E itself, unconfined: the control."""
        p = sh(*in_ns(self.e.pid, PY, "-c", PROBE, json.dumps([target])))
        return json.loads(p.stdout)[target]

    def close(self):
        for p in reversed(self.procs):
            p.kill()
            p.wait()


def egress_backends():
    p = subprocess.run([str(KIS), "sandbox", "backends", "--json"], capture_output=True,
                       text=True)
    doc = json.loads(p.stdout)
    rows = doc["backends"] if isinstance(doc, dict) else doc
    return {b["backend"]: b for b in rows}


TIERS = {
    "bubblewrap": ["--tier", "host", "--backend", "bubblewrap"],
    "oci": ["--tier", "container"],
}


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    for tool in ("ip", "nsenter", "unshare", "pasta", "nft"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed")
    n = Net(tmp_path_factory.mktemp("egress"))
    yield n
    n.close()


@pytest.fixture(params=sorted(TIERS))
def tier(request, net, store):
    b = egress_backends().get(request.param)
    if not b or "egress" not in b.get("network", ""):
        pytest.skip(f"{request.param} does not enforce egress here")
    return TIERS[request.param]


def _passt_family(flag):
    """pids of every passt-binary process (passt or passt.avx2) run with
    flag and pasta's address, as the engine starts them."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                comm = Path(f"/proc/{d}/comm").read_text().strip()
                cmd = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if comm.startswith("passt") and flag in cmd and b"10.0.2.15" in cmd:
                out.add(int(d))
    return out


def pastas():
    """pids of every pasta running (the sandbox's namespace: --netns)."""
    return _passt_family(b"--netns")


def parent_of(pid):
    """pid's parent, or None once pid is gone: a process listed a moment
    ago may have exited since (pasta and passt clone short-lived children
    of their own to enter a namespace, with their comm and cmdline)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def gone(pid, secs=5):
    for _ in range(int(secs * 50)):
        if not os.path.exists(f"/proc/{pid}"):
            return True
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.02)
    return False


# ---- what egress gives ----

def test_outbound_tcp_udp_and_dns_reach_the_world(net, tier):
    got = net.probe(tier, ["tcp:203.0.113.10:7", "udp:203.0.113.10:7", "dns:world.test:7"])
    assert got == {"tcp:203.0.113.10:7": "reached", "udp:203.0.113.10:7": "reached",
                   "dns:world.test:7": "203.0.113.10"}, got
    log = net.world_log.read_text()
    assert "dns world.test" in log


def test_first_packets_wait_for_pasta_instead_of_being_lost(net, tier):
    """The command starts once pasta has attached S's tap, before pasta's
    start is done: a name lookup and a connect made at once (bash, no
    interpreter to load first) wait in the tap's queue and succeed, where
    a lost DNS query would take the resolver's 5 s retry and a lost SYN
    the kernel's 1 s one."""
    script = ('exec 3<>/dev/tcp/world.test/7 || exit 3; echo ping >&3; '
              'read -t 5 x <&3; echo "got $x"')
    p = net.kis("run", *tier, "--net", "egress", "--", "/bin/bash", "-c", script)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "got ping", p.stdout


def test_resolv_conf_names_the_forwarder(net, tier):
    p = net.kis("run", *tier, "--net", "egress", "--", "/bin/cat", "/etc/resolv.conf")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["nameserver", "10.0.2.3"]


# ---- what stays out of reach ----

def test_host_private_and_metadata_are_unreachable(net, tier):
    for t in FORBIDDEN:  # the control: from the engine's namespace each one answers
        assert net.bare(t) == "reached", (t, FORBIDDEN[t])
    before = net.world_log.read_text(), net.engine_log.read_text()
    got = net.probe(tier, sorted(FORBIDDEN))
    escaped = {t: FORBIDDEN[t] for t, v in got.items() if v == "reached"}
    assert not escaped, f"escaped: {escaped}"
    assert all(v.startswith("blocked") for v in got.values()), got
    # and nothing arrived there
    assert net.world_log.read_text() == before[0]
    assert net.engine_log.read_text() == before[1]


# IPv6: egress carries none (docs/network.md, "IPv6"); the world, E's
# veth and E's loopback answer IPv6 from E itself (the control)
IPV6 = {
    "tcp6:2001:db8::10:7": "the world's echo server, by IPv6",
    "udp6:2001:db8::10:7": "the world's echo server, by IPv6 UDP",
    "tcp6:2001:db8::2:7011": "the engine namespace's own IPv6 address",
    "tcp6:::1:7010": "the engine namespace's IPv6 loopback",
}


def test_ipv6_reaches_nothing(net, tier):
    for t in IPV6:
        assert net.bare(t) == "reached", (t, IPV6[t])
    before = settled(net.world_log, net.engine_log)
    got = net.probe(tier, sorted(IPV6))
    escaped = {t: IPV6[t] for t, v in got.items() if v == "reached"}
    assert not escaped, f"escaped: {escaped}"
    assert all(v.startswith("blocked") for v in got.values()), got
    # a refused IPv6 connect fails at once too (the policy's reject), and
    # nothing arrived anywhere
    assert not [v for t, v in got.items() if t.startswith("tcp6") and "timed out" in v], got
    assert settled(net.world_log, net.engine_log) == before


def test_ipv6_is_off_on_the_sandboxs_link(net, tier):
    """The engine turns IPv6 off on S's eth0 before it exists (conf/default):
    no link-local address or route there, so a link-local destination (which
    would otherwise be the policy's alone to refuse, once DAD is done, about
    a second into the run) has no way out either; lo keeps ::1. Read after
    1.5 s: past DAD, had it run."""
    script = ("import socket, time; time.sleep(1.5)\n"
              "print(open('/proc/sys/net/ipv6/conf/eth0/disable_ipv6').read().strip())\n"
              "print(sorted(l.split()[5] for l in open('/proc/net/if_inet6')))\n"
              "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
              "try:\n s.sendto(b'ping', ('fe80::2%eth0', 7)); print('sent')\n"
              "except OSError as e: print('blocked', e.errno)\n")
    p = net.kis("run", *tier, "--net", "egress", "--", PY, "-c", script)
    assert p.returncode == 0, p.stderr
    off, devs, sent = p.stdout.strip().splitlines()
    assert off == "1" and devs == "['lo']", p.stdout
    assert sent.startswith("blocked"), p.stdout


def test_refused_tcp_connect_fails_at_once(net, tier):
    """A refused destination answers the connect with an error (the
    policy's reject), not silence: the probe's 3 s timeout is never what
    stops it. The control is the same probe from the engine's namespace."""
    targets = ["tcp:10.20.0.5:7", "tcp:169.254.169.254:80", "tcp:127.0.0.1:7007"]
    for t in targets:
        assert net.bare(t) == "reached", t
    got = net.probe(tier, targets)
    assert all(v.startswith("blocked") for v in got.values()), got
    assert not [v for v in got.values() if "timed out" in v or "Timeout" in v], got


def _rules(text):
    """nft's text, normalised: nft prints a /32 and icmpx's type without
    the word; blank lines and indentation do not matter."""
    out = []
    for line in text.splitlines():
        line = " ".join(line.split()).replace("icmpx type ", "icmpx ")
        line = re.sub(r"(\d+\.\d+\.\d+\.\d+)/32\b", r"\1", line)
        if line:
            out.append(line)
    return out


def test_loaded_policy_reads_back_as_the_plan(net, tier):
    """The engine loads the policy as a netlink batch of its own writing;
    nft, reading S's ruleset back while the command runs, must find
    exactly the rules --dry-run shows as text."""
    plan = json.loads(net.kis("run", *tier, "--dry-run", "--net", "egress", "--",
                              "/bin/true").stdout)
    p = subprocess.Popen(net.kis_argv("run", *tier, "--net", "egress", "--", "/bin/sleep", "5"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        cmd = None
        for _ in range(500):
            for q in descendants(p.pid):
                try:
                    if Path(f"/proc/{q}/cmdline").read_bytes() == b"/bin/sleep\x005\x00":
                        cmd = q
                except OSError:
                    pass
            if cmd:
                break
            time.sleep(0.02)
        assert cmd, "the command did not start"
        got = sh("nsenter", f"--net=/proc/{cmd}/ns/net", "nft", "list", "ruleset").stdout
    finally:
        # SIGTERM: the engine ends the run and removes what it made (a
        # SIGKILL here left the run's cgroups behind, with the record of
        # them in a store this fixture then deletes); gc for the rest
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        net.kis("gc")
    assert _rules(got) == _rules(plan["egress"]["nft_rules"]), got


def test_dns_forwarder_carries_only_dns(net, tier):
    got = net.probe(tier, ["tcp:10.0.2.3:53", "tcp:10.0.2.3:7", "udp:10.0.2.3:7",
                           "tcp:10.0.2.2:7"])
    assert all(v.startswith("blocked") for v in got.values()), got


def test_nothing_connects_in(net, tier):
    listen = (r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080)); s.listen(4); s.settimeout(6)
print("ready", flush=True)
try:
    c, a = s.accept(); print("escaped: connected from", a[0])
except socket.timeout:
    print("not escaped")
""")
    p = subprocess.Popen(net.kis_argv("run", *tier, "--net", "egress", "--", PY, "-c", listen),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        tries = {}
        for addr in ("203.0.113.2", "10.0.2.15"):
            r = sh(*in_ns(net.w.pid, PY, "-c",
                          f"import socket\ntry:\n socket.create_connection(('{addr}',8080),timeout=2)"
                          f"\n print('reached')\nexcept OSError as e: print('blocked', e)"))
            tries[addr] = r.stdout.strip()
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
        p.wait()
    assert out.strip() == "not escaped", (out, err, tries)
    assert all(v.startswith("blocked") for v in tries.values()), tries


# ---- network.allow ----

def test_allow_narrows_to_the_listed_destination(net, tier):
    got = net.probe(tier, ["tcp:203.0.113.10:7", "tcp:203.0.113.10:9", "tcp:203.0.113.1:7",
                           "udp:203.0.113.10:7"],
                    extra=["--net-allow", "203.0.113.10/32:7"])
    assert got["tcp:203.0.113.10:7"] == "reached", got
    assert got["udp:203.0.113.10:7"] == "reached", got  # the port is TCP's and UDP's
    assert got["tcp:203.0.113.10:9"].startswith("blocked"), got
    assert got["tcp:203.0.113.1:7"].startswith("blocked"), got


def test_allow_makes_a_listed_private_range_reachable(net, tier):
    got = net.probe(tier, ["tcp:10.20.0.5:7", "tcp:169.254.169.254:80", "tcp:203.0.113.10:7"],
                    extra=["--net-allow", "10.20.0.0/16"])
    assert got["tcp:10.20.0.5:7"] == "reached", got
    assert got["tcp:169.254.169.254:80"].startswith("blocked"), got
    assert got["tcp:203.0.113.10:7"].startswith("blocked"), got  # narrowed to the list


def test_allow_never_reaches_the_host_or_link_local(net, tier):
    got = net.probe(tier, ["tcp:203.0.113.2:7008", "tcp:169.254.169.254:80"],
                    extra=["--net-allow", "203.0.113.0/24", "--net-allow", "0.0.0.0/0"])
    assert all(v.startswith("blocked") for v in got.values()), got


@pytest.mark.parametrize("bad", ["10.0.0.1/8", "1.2.3.4:0", "1.2.3.4:70000", "1.2.3.4:9-3",
                                 "01.2.3.4", "1.2.3.4/33", "::1", "1.2.3.4; flush ruleset",
                                 "1.2.3.4 accept", "1.2.3.4\naccept", "example.com", ""])
def test_bad_allow_is_invalid_profile_naming_the_path(store, bad):
    p = subprocess.run([str(KIS), "sandbox", "run", "--tier", "host", "--net", "egress",
                        "--net-allow", bad, "--", "/bin/true"], capture_output=True, text=True)
    assert p.returncode == 125
    assert p.stderr.startswith("invalid_profile:") and "network.allow" in p.stderr, p.stderr
    assert p.stderr.count("\n") == 1


def test_bad_allow_in_a_profile_file_names_the_index(store, tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"network": {"mode": "egress",
                                         "allow": ["203.0.113.0/24", "203.0.113.0/24:1-x"]}}))
    p = subprocess.run([str(KIS), "sandbox", "run", "--profile", str(f), "--", "/bin/true"],
                       capture_output=True, text=True)
    assert p.returncode == 125
    assert "invalid_profile" in p.stderr and "network.allow[1]" in p.stderr, p.stderr


def test_allow_without_egress_is_refused(store):
    p = subprocess.run([str(KIS), "sandbox", "run", "--tier", "host", "--net-allow", "1.2.3.4",
                        "--", "/bin/true"], capture_output=True, text=True)
    assert p.returncode == 125
    assert p.stderr.startswith("invalid_profile:"), p.stderr
    assert "network.allow: only with network.mode 'egress'" in p.stderr, p.stderr


# ---- the other modes, and the tiers that refuse ----

def test_off_and_loopback_reach_nothing(net, tier):
    for mode in ("off", "loopback"):
        p = net.kis("run", *tier, "--net", mode, "--", PY, "-c", PROBE,
                    json.dumps(["tcp:203.0.113.10:7", "tcp:127.0.0.1:7007"]))
        assert p.returncode == 0, p.stderr
        got = json.loads(p.stdout)
        assert all(v.startswith("blocked") for v in got.values()), (mode, got)


@pytest.mark.parametrize("tier_args", [["--tier", "host", "--backend", "landlock"],
                                       ["--tier", "wasm"]])
def test_landlock_and_wasm_refuse_egress_by_name(store, tier_args):
    p = subprocess.run([str(KIS), "sandbox", "run", *tier_args, "--net", "egress", "--",
                        "/bin/true"], capture_output=True, text=True)
    assert p.returncode == 125
    assert p.stderr.startswith("profile_unsatisfiable") and "egress" in p.stderr, p.stderr


def test_backends_lists_egress_only_where_enforced():
    b = egress_backends()
    for name in ("landlock", "wasm", "process"):
        if name in b:
            assert "egress" not in b[name]["network"], b[name]
    assert any("egress" in v["network"] for v in b.values()), b


def test_no_route_out_is_refused_naming_what_is_missing(tier):
    """An engine whose network has no way out (a namespace of the test's
    with only loopback): the run is refused before the command, and the
    message is pasta's own reason and what to change, not its complaints
    about the system logger."""
    script = 'ip link set lo up && exec "$@"'
    p = subprocess.run(["unshare", "-n", "sh", "-c", script, "sh", str(KIS), "sandbox", "run",
                        *tier, "--net", "egress", "--", "/bin/echo", "ran"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 125, (p.returncode, p.stdout, p.stderr)
    assert "ran" not in p.stdout
    assert "pasta did not start" in p.stderr and "default route" in p.stderr, p.stderr
    assert "syslog" not in p.stderr, p.stderr


# ---- the helper's life ----

def test_helper_is_gone_after_a_run(net, tier):
    before = pastas()
    p = net.kis("run", *tier, "--net", "egress", "--", "/bin/true")
    assert p.returncode == 0, p.stderr
    left = pastas() - before
    assert all(gone(pid) for pid in left), left


def test_helper_dies_with_a_killed_engine(net, tier):
    before = pastas()
    p = subprocess.Popen(net.kis_argv("run", *tier, "--net", "egress", "--", "/bin/sleep", "60"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        mine = set()
        for _ in range(500):
            mine = {q for q in pastas() - before
                    if parent_of(q) == p.pid}
            if mine:
                break
            time.sleep(0.02)
        assert mine, "no pasta started by the engine"
        time.sleep(0.3)
        os.kill(p.pid, signal.SIGKILL)  # kis itself (nsenter, unshare and sh exec'd it)
        p.wait()
        assert all(gone(q) for q in mine), "pasta outlived the engine"
    finally:
        p.kill()
        p.wait()
    # what the killed run left (its container, cgroup, clone) is swept as always
    net.kis("gc")


def descendants(pid):
    """pid's descendants now, from /proc's parent links."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = set(), [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.add(k)
            todo.append(k)
    return out


def cgroups(pid):
    """{controller: path} of /proc/PID/cgroup."""
    out = {}
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, ctl, path = line.split(":", 2)
        out[ctl] = path
    return out


def v1_cpu_alone():
    """v1's cpu controller mounted on its own (not with cpuacct)."""
    c, a = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpuacct")
    return c.is_dir() and a.is_dir() and os.path.realpath(c) != os.path.realpath(a)


def assert_helper_beside(helper, member, tier, engine):
    """pasta (helper) is in every group of the sandbox's member but, on
    oci, a v1 cpu hierarchy of its own: there it keeps the engine's group
    (crun's has no limit, and in it pasta and the command would share one
    scheduling entity: src/backends/oci/oci.c)."""
    h, m = cgroups(helper), cgroups(member)
    if tier == TIERS["oci"] and v1_cpu_alone() and "cpu" in m:
        assert h.pop("cpu") == cgroups(engine)["cpu"] != m.pop("cpu"), (h, m)
    assert h == m, (h, m)


def test_helper_of_a_run_is_counted_in_the_sandboxs_cgroup(net, tier):
    """A one-shot run's pasta ends up in the cgroup of the command it
    carries (every hierarchy but oci's v1 cpu: assert_helper_beside), so
    the sandbox's pids and memory limits cover it. On oci crun makes that
    cgroup after pasta started."""
    p = subprocess.Popen(net.kis_argv("run", *tier, "--net", "egress", "--", "/bin/sleep", "6"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        seen = None
        for _ in range(500):
            mine = descendants(p.pid)
            pasta = [q for q in mine & pastas()
                     if parent_of(q) == p.pid]
            cmd = []
            for q in mine:
                try:
                    if Path(f"/proc/{q}/cmdline").read_bytes() == b"/bin/sleep\x006\x00":
                        cmd.append(q)
                except OSError:
                    pass
            if pasta and cmd:
                try:
                    assert_helper_beside(pasta[0], cmd[0], tier, p.pid)
                    seen = True
                    break
                except AssertionError as e:
                    seen = e  # pasta joins once its start is done: look again
                except OSError:
                    seen = None
            time.sleep(0.02)
        assert seen is not None, "no pasta and command of this run seen"
        assert seen is True, seen
    finally:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    assert p.returncode == 0, p.stderr.read()


def test_pids_limit_is_the_commands_own_with_pasta_in_the_group(net, tier):
    # pasta joins the sandbox's group once its start is done (the sleep
    # waits for that) and adds itself to pids.max: --pids 3 is the shell
    # and two children, and a third is refused
    two = "sleep 1; sleep 0 & sleep 0 & wait; echo two"
    p = net.kis("run", "--json", *tier, "--net", "egress", "--pids", "3", "--", "sh", "-c", two)
    r = json.loads(p.stdout)
    assert r["termination"]["reason"] == "exited" and r["stdout"] == "two\n", r
    p = net.kis("run", "--json", *tier, "--net", "egress", "--pids", "3", "--", "sh", "-c",
                "sleep 1; sleep 0 & sleep 0 & sleep 0 & wait")
    r = json.loads(p.stdout)
    assert r["termination"]["reason"] == "pids_limit", r


def test_session_keeps_its_network_and_destroy_ends_the_helper(net, tier, store):
    c = net.kis("create", *tier, "--net", "egress")
    assert c.returncode == 0, c.stderr
    sid = c.stdout.strip()
    try:
        saved = (store / "sessions" / sid / "egress").read_text().split()
        pid = int(saved[0])
        assert os.path.exists(f"/proc/{pid}")
        if "bubblewrap" in tier or "container" in tier:
            # pasta is counted in the sandbox's cgroup, beside its agent
            meta = json.loads((store / "sessions" / sid / "session.json").read_text())
            assert_helper_beside(pid, meta["agent_pid"], tier, os.getpid())
        for _ in range(2):  # twice: the network stays for the session's life
            e = net.kis("exec", sid, "--", PY, "-c", PROBE,
                        json.dumps(["tcp:203.0.113.10:7", "tcp:10.20.0.5:7"]))
            assert e.returncode == 0, e.stderr
            got = json.loads(e.stdout)
            assert got["tcp:203.0.113.10:7"] == "reached", got
            assert got["tcp:10.20.0.5:7"].startswith("blocked"), got
    finally:
        d = net.kis("session", "destroy", sid)
    assert d.returncode == 0, d.stderr
    assert gone(pid), "pasta outlived session destroy"


def test_helper_of_a_killed_create_is_swept(net, tier, store):
    """SIGKILL of `create` once the session is up but not yet published:
    no parent-death signal covers a session's pasta, the owner record does
    (`kis sandbox gc`)."""
    before = pastas()
    p = subprocess.Popen(net.kis_argv("create", *tier, "--net", "egress"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, KIS_TEST_PAUSE_AT="create-ready"))
    try:
        line = ""
        for _ in range(200):
            line = p.stderr.readline()
            if "test pause at" in line or not line:
                break
        assert "test pause at" in line, line
        # this create's pasta: the one its owner record names (another
        # engine on the machine may run a pasta of its own meanwhile)
        recorded = set()
        # an owner is its records file (engine/owner.h)
        for rec in [o for o in store.glob("owners/*") if o.is_file()]:
            for l in rec.read_text().splitlines():
                w = l.split()
                if len(w) >= 2 and w[0] == "pid" and w[1].isdigit():
                    recorded.add(int(w[1]))
        mine = (pastas() - before) & recorded
        assert mine, "no pasta for the session"
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    finally:
        p.kill()
        p.wait()
    g = net.kis("gc")
    assert g.returncode == 0, g.stderr
    assert all(gone(q) for q in mine), (mine, g.stdout)


# ---- the microvm: passt, the guest's virtio-net backend, inside S ----
#
# The guest has no Python: the probe is build/test-helpers/netprobe (static,
# the same targets and verdicts), in a base every run clones. TCG boots are
# slow, so the runs are few and share one snapshot (made by the fixture).

GUEST = Path(os.environ.get("KIS_MICROVM_GUEST_DIR", ROOT / "build" / "microvm-guest"))
NETPROBE = ROOT / "build" / "test-helpers" / "netprobe"
VM_TIMEOUT = 240


def passts():
    """pids of every passt serving a microvm (VM mode: --fd, pasta's address)."""
    return _passt_family(b"--fd")


def qemus(marker):
    """QEMU processes with a file open under marker (their disks)."""
    return set(qemu_pids(marker))


def ancestors(pid):
    out = []
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[1])
        except OSError:
            break
        out.append(pid)
    return out


@pytest.fixture(scope="module")
def vm(net, tmp_path_factory):
    """The microvm tier in the egress world: a store of its own, the shared
    guest cache, a base holding netprobe; every VM and helper gone after."""
    if not Path("/usr/bin/qemu-system-x86_64").exists():
        pytest.skip("qemu-system-x86_64 is not installed (Debian: qemu-system-x86)")
    if not NETPROBE.exists():
        pytest.skip(f"{NETPROBE} missing: run 'make check-integration'")
    fetch = subprocess.run([str(ROOT / "scripts" / "guest" / "fetch-kernel.sh"), str(GUEST)],
                           capture_output=True, text=True, timeout=600)
    if fetch.returncode != 0:
        pytest.skip(f"cannot fetch the guest kernel: {fetch.stderr.strip()[-300:]}")
    tmp = tmp_path_factory.mktemp("egress-vm")
    store = tmp / "store"
    env = {"KIS_SANDBOX_ROOT": str(store), "KIS_MICROVM_GUEST_DIR": str(GUEST)}
    b = subprocess.run([str(KIS), "sandbox", "backends", "--json"], capture_output=True,
                       text=True, env=dict(os.environ, **env))
    rows = {r["backend"]: r for r in json.loads(b.stdout)}
    if "egress" not in rows.get("microvm", {}).get("network", ""):
        pytest.skip("the microvm does not enforce egress here")
    src = tmp / "base"
    src.mkdir()
    shutil.copy2(NETPROBE, src / "netprobe")
    imp = subprocess.run([str(KIS), "sandbox", "base", "import", str(src)], capture_output=True,
                         text=True, env=dict(os.environ, **env))
    assert imp.returncode == 0, imp.stderr
    base = imp.stdout.strip()
    try:
        # the first run makes the initramfs and the snapshot (off: no world traffic)
        p = net.kis("run", "--tier", "microvm", "--base", base, "--", "true", env=env,
                    timeout=VM_TIMEOUT)
        assert p.returncode == 0, p.stderr
        yield env, base
    finally:
        sess = store / "sessions"
        for s in (sess.iterdir() if sess.exists() else ()):
            if not s.name.startswith("."):
                net.kis("session", "destroy", s.name, env=env, timeout=60)
        for pid in qemus(str(store)):
            os.kill(pid, signal.SIGKILL)
        net.kis("gc", env=env, timeout=60)
        assert not qemus(str(store)), "a VM outlived the tests"


def settled(*logs):
    """The logs' text once nothing more arrives for 300 ms: the world's
    servers log from their threads, so a bare control's own lines may land
    after it returned."""
    last = None
    while True:
        now = tuple(l.read_text() for l in logs)
        if now == last:
            return now
        last = now
        time.sleep(0.3)


def vm_probe(net, vm, targets, extra=(), mode="egress"):
    env, base = vm
    p = net.kis("run", "--tier", "microvm", "--base", base, "--net", mode, *extra, "--",
                "./netprobe", *targets, env=env, timeout=VM_TIMEOUT)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_microvm_egress_reaches_the_world_and_nothing_else(net, vm):
    """One VM: the world by TCP, UDP and DNS; none of the forbidden
    listeners (each answers the bare control), the forwarder only for DNS.
    The guest's root is not needed to break this: the policy is S's, on
    the host side of passt, whatever frames the guest's kernel sends."""
    for t in FORBIDDEN:
        assert net.bare(t) == "reached", (t, FORBIDDEN[t])
    before = settled(net.world_log, net.engine_log)
    world = ["tcp:203.0.113.10:7", "udp:203.0.113.10:7", "dns:world.test:7"]
    fwd = ["tcp:10.0.2.3:53", "tcp:10.0.2.3:7", "udp:10.0.2.3:7", "tcp:10.0.2.2:7"]
    got = vm_probe(net, vm, world + sorted(FORBIDDEN) + fwd)
    assert {t: got[t] for t in world} == {"tcp:203.0.113.10:7": "reached",
                                          "udp:203.0.113.10:7": "reached",
                                          "dns:world.test:7": "203.0.113.10"}, got
    escaped = {t: FORBIDDEN[t] for t in FORBIDDEN if got[t] == "reached"}
    assert not escaped, f"escaped: {escaped}"
    assert all(got[t].startswith("blocked") for t in list(FORBIDDEN) + fwd), got
    # what arrived in the world: the three allowed flows, nothing else (the
    # TCP echo listens on 0.0.0.0: one connection, the world's; UDP and DNS
    # may be asked again while the guest is slow)
    new = net.world_log.read_text()[len(before[0]):].splitlines()
    assert set(new) == {"tcp 0.0.0.0:7 from 203.0.113.2", "udp 203.0.113.10:7 from 203.0.113.2",
                        "dns world.test from 203.0.113.2"}, new
    assert new.count("tcp 0.0.0.0:7 from 203.0.113.2") == 1, new
    assert net.engine_log.read_text() == before[1]


def test_microvm_guest_root_reaches_nothing_more(net, vm):
    """A hostile guest: its root, every capability, no confinement (the
    agent's kis-test:guest-root hook, on only under KIS_MICROVM_TEST_HOOKS),
    puts itself on the private network and on the engine's own subnet and
    routes link-local straight out of eth0. What it sends still leaves as
    passt's sockets in S: the policy there decides, not the guest."""
    env, base = vm
    for t in FORBIDDEN:
        assert net.bare(t) == "reached", (t, FORBIDDEN[t])
    before = settled(net.world_log, net.engine_log)
    script = ("ip addr add 10.20.0.77/16 dev eth0 && ip addr add 203.0.113.77/24 dev eth0 && "
              "ip route add 169.254.0.0/16 dev eth0 && id -u && exec ./netprobe " +
              " ".join(sorted(FORBIDDEN) + ["tcp:203.0.113.10:7"]))
    p = net.kis("run", "--tier", "microvm", "--base", base, "--net", "egress", "--",
                "kis-test:guest-root", "sh", "-c", script,
                env=dict(env, KIS_MICROVM_TEST_HOOKS="1"), timeout=VM_TIMEOUT)
    assert p.returncode == 0, (p.stdout, p.stderr)
    uid, out = p.stdout.strip().splitlines()[-2:]
    assert uid == "0", p.stdout  # the guest's root indeed
    got = json.loads(out)
    assert got["tcp:203.0.113.10:7"] == "reached", got  # the control: the link works
    escaped = {t: FORBIDDEN[t] for t in FORBIDDEN if got[t] == "reached"}
    assert not escaped, f"escaped: {escaped}"
    assert all(got[t].startswith("blocked") for t in FORBIDDEN), got
    assert set(net.world_log.read_text()[len(before[0]):].splitlines()) <= {
        "tcp 0.0.0.0:7 from 203.0.113.2"}
    assert net.engine_log.read_text() == before[1]


def test_microvm_guest_root_gets_no_ipv6_out(net, vm):
    """IPv6 from a hostile guest: its root gives eth0 a global address in
    the world's prefix and an IPv6 default route, waits out DAD, and
    connects to the world's IPv6 echo (which answers E: the control).
    passt runs --ipv4-only with no NDP: the guest's neighbour solicitations
    reach it and get no answer, so no IPv6 flow becomes a socket of S
    (whose policy refuses IPv6 besides); the world hears nothing."""
    env, base = vm
    v6 = ["tcp6:2001:db8::10:7", "udp6:2001:db8::10:7"]
    for t in v6:
        assert net.bare(t) == "reached", t
    before = settled(net.world_log, net.engine_log)
    script = ("ip -6 addr add 2001:db8::77/64 dev eth0 && ip -6 route add default dev eth0 && "
              "sleep 2 && exec ./netprobe " + " ".join(v6 + ["tcp:203.0.113.10:7"]))
    p = net.kis("run", "--tier", "microvm", "--base", base, "--net", "egress", "--",
                "kis-test:guest-root", "sh", "-c", script,
                env=dict(env, KIS_MICROVM_TEST_HOOKS="1"), timeout=VM_TIMEOUT)
    assert p.returncode == 0, (p.stdout, p.stderr)
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["tcp:203.0.113.10:7"] == "reached", got  # the control: the link works
    assert all(got[t].startswith("blocked") for t in v6), got
    new = settled(net.world_log, net.engine_log)
    assert set(new[0][len(before[0]):].splitlines()) <= {"tcp 0.0.0.0:7 from 203.0.113.2"}, new
    assert new[1] == before[1]


def test_microvm_allow_narrows_and_opens_a_listed_private_range(net, vm):
    got = vm_probe(net, vm, ["tcp:10.20.0.5:7", "tcp:203.0.113.10:7", "tcp:203.0.113.10:9",
                             "udp:203.0.113.10:7", "tcp:169.254.169.254:80",
                             "tcp:203.0.113.2:7008", "dns:world.test:7"],
                   extra=["--net-allow", "10.20.0.0/16", "--net-allow", "203.0.113.10/32:7"])
    assert got["tcp:10.20.0.5:7"] == "reached", got
    assert got["tcp:203.0.113.10:7"] == "reached" and got["udp:203.0.113.10:7"] == "reached", got
    assert got["dns:world.test:7"] == "203.0.113.10", got  # DNS whatever the list says
    for t in ("tcp:203.0.113.10:9", "tcp:169.254.169.254:80", "tcp:203.0.113.2:7008"):
        assert got[t].startswith("blocked"), (t, got)


def test_microvm_off_and_loopback_reach_nothing(net, vm):
    for mode in ("off", "loopback"):
        got = vm_probe(net, vm, ["tcp:203.0.113.10:7", "udp:203.0.113.10:7"], mode=mode)
        assert all(v.startswith("blocked") for v in got.values()), (mode, got)


def test_microvm_nothing_connects_in(net, vm):
    env, base = vm
    p = subprocess.Popen(net.kis_argv("run", "--tier", "microvm", "--base", base, "--net",
                                      "egress", "--", "./netprobe", "listen", "8080"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **env))
    try:
        assert p.stdout.readline().strip() == "ready"
        tries = {}
        for addr in ("203.0.113.2", "10.0.2.15"):
            r = sh(*in_ns(net.w.pid, PY, "-c",
                          f"import socket\ntry:\n socket.create_connection(('{addr}',8080),timeout=2)"
                          f"\n print('reached')\nexcept OSError as e: print('blocked', e)"))
            tries[addr] = r.stdout.strip()
        out, err = p.communicate(timeout=VM_TIMEOUT)
    finally:
        p.kill()
        p.wait()
    assert out.strip() == "not escaped", (out, err, tries)
    assert all(v.startswith("blocked") for v in tries.values()), tries


def test_microvm_session_keeps_its_network_and_destroy_ends_the_helpers(net, vm):
    env, base = vm
    c = net.kis("create", "--tier", "microvm", "--base", base, "--net", "egress", env=env,
                timeout=VM_TIMEOUT)
    assert c.returncode == 0, c.stderr
    sid = c.stdout.strip()
    try:
        saved = (Path(env["KIS_SANDBOX_ROOT"]) / "sessions" / sid / "egress").read_text().split()
        helpers = {int(saved[0]), int(saved[2])}  # pasta's line, then passt's
        assert all(os.path.exists(f"/proc/{h}") for h in helpers), saved
        assert int(saved[2]) in passts()
        # passt, the guest's way out: the helper's id, no capability, its own
        # seccomp filter, S's network namespace (not the VMM's, not ours)
        st = dict(l.split(":\t", 1) for l in
                  Path(f"/proc/{saved[2]}/status").read_text().splitlines() if ":\t" in l)
        assert st["Uid"].split()[0] not in ("0", "65534"), st["Uid"]
        assert st["CapEff"] == st["CapPrm"] == "0000000000000000", st
        assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st
        vmm = qemus(env["KIS_SANDBOX_ROOT"])
        assert len(vmm) == 1, vmm
        vmm = vmm.pop()
        ns = lambda pid, n: os.readlink(f"/proc/{pid}/ns/{n}")
        assert ns(saved[2], "net") not in (ns(vmm, "net"), ns("self", "net")), "passt not in S"
        # both helpers are counted in the VM's cgroup, and die with it
        cg = lambda pid: Path(f"/proc/{pid}/cgroup").read_text()
        assert cg(saved[0]) == cg(saved[2]) == cg(vmm), (cg(saved[0]), cg(vmm))
        for _ in range(2):  # twice: the network stays for the session's life
            e = net.kis("exec", sid, "--", "./netprobe", "tcp:203.0.113.10:7", "tcp:10.20.0.5:7",
                        env=env, timeout=VM_TIMEOUT)
            assert e.returncode == 0, e.stderr
            got = json.loads(e.stdout)
            assert got["tcp:203.0.113.10:7"] == "reached", got
            assert got["tcp:10.20.0.5:7"].startswith("blocked"), got
    finally:
        d = net.kis("session", "destroy", sid, env=env, timeout=60)
    assert d.returncode == 0, d.stderr
    assert all(gone(h) for h in helpers), "a helper outlived session destroy"


def test_microvm_helpers_die_with_a_killed_engine(net, vm):
    env, base = vm
    before_pasta, before_passt = pastas(), passts()
    p = subprocess.Popen(net.kis_argv("run", "--tier", "microvm", "--base", base, "--net",
                                      "egress", "--", "sleep", "60"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, **env))
    try:
        mine = set()
        for _ in range(1500):
            kids = {q for q in (pastas() - before_pasta) | (passts() - before_passt)
                    if parent_of(q) == p.pid}
            if len(kids) == 2:  # pasta and passt, both the engine's children
                mine = kids
                break
            time.sleep(0.02)
        assert mine, "no pasta and passt started by the engine"
        # the helpers start before QEMU, on purpose: wait for the VM as well
        vms = set()
        for _ in range(1500):
            vms = {q for q in qemus("/kis-mvm.") if p.pid in ancestors(q)}
            if vms:
                break
            time.sleep(0.02)
        assert vms, "no VM of the engine's"
        time.sleep(0.5)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        assert all(gone(q) for q in mine), "a helper outlived the engine"
    finally:
        p.kill()
        p.wait()
    net.kis("gc", env=env, timeout=60)
    assert all(gone(q) for q in vms), "the VM outlived the engine"
