# SPDX-License-Identifier: MIT
# Egress (issue 14): per tier, in one run, connect latency and TCP
# throughput to the test world's server from inside the sandbox beside the
# same from the engine's own namespace, and start-to-exit of /bin/true with
# --net egress beside --net off. Uses the offline world of
# tests/integration/test_egress.py (never a real address). Prints ratios.
# The microvm (when a guest with its network driver is there: make
# check-integration fetches it to build/microvm-guest) runs the same client
# as build/test-helpers/netprobe bench (its guest has no Python), and fewer
# start-to-exit runs (TCG).
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from test_egress import Net, PY, TIERS, in_ns  # noqa: E402

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20
CONNECTS = 200
MIB = 256
ROUNDS = 3

CLIENT = r"""
import json, socket, statistics, sys, time
n, mib = int(sys.argv[1]), int(sys.argv[2])
lat = []
for _ in range(n):
    t = time.perf_counter()
    s = socket.create_connection(("203.0.113.10", 7))
    lat.append((time.perf_counter() - t) * 1000)
    s.close()
s = socket.create_connection(("203.0.113.10", 7))
buf = b"sink" + b"x" * ((1 << 20) - 4)
t = time.perf_counter()
for _ in range(mib):
    s.sendall(buf)
s.shutdown(socket.SHUT_WR)
while s.recv(1 << 16):
    pass
dt = time.perf_counter() - t
print(json.dumps({"connect_ms": statistics.median(lat), "mib_s": mib / dt}))
"""


def main():
    if os.geteuid() != 0:
        print("bench/egress.sh: needs root: skipped")
        return
    with tempfile.TemporaryDirectory(prefix="kis-bench-egress-") as tmp:
        os.environ["KIS_SANDBOX_ROOT"] = str(Path(tmp) / "store")
        net = Net(Path(tmp))
        try:
            run(net)
        finally:
            net.close()


def once(net, tier, mode, true="/bin/true", env=None):
    t = time.perf_counter()
    p = net.kis("run", *tier, "--net", mode, "--", true, timeout=600, env=env)
    if p.returncode != 0:
        raise SystemExit(f"kis failed: {p.stderr}")
    return (time.perf_counter() - t) * 1000


def start_to_exit(net, tier, n=N, true="/bin/true", env=None):
    """Medians of egress and off, interleaved (egress, off, egress, ...):
    this host's load drifts over a run, and both see the same drift."""
    eg, off = [], []
    for _ in range(n):
        eg.append(once(net, tier, "egress", true, env))
        off.append(once(net, tier, "off", true, env))
    return statistics.median(eg), statistics.median(off)


def client(net, tier):
    if tier is None:  # the direct path: the same client in the engine's namespace
        argv = in_ns(net.e.pid, PY, "-c", CLIENT, str(CONNECTS), str(MIB))
        return json.loads(subprocess.run(argv, capture_output=True, text=True,
                                         check=True).stdout)
    p = net.kis("run", *tier, "--net", "egress", "--", PY, "-c", CLIENT, str(CONNECTS),
                str(MIB), timeout=600)
    if p.returncode != 0:
        print(f"{' '.join(tier)}: failed: {p.stderr.strip()}")
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def median_of(runs):
    return {k: statistics.median(r[k] for r in runs) for k in ("connect_ms", "mib_s")}


def run(net):
    # throughput and connects: ROUNDS rounds, each the direct path then
    # every tier, so each ratio compares runs made side by side
    names = sorted(TIERS)
    got = {n: [] for n in names + ["direct"]}
    for _ in range(ROUNDS):
        got["direct"].append(client(net, None))
        for name in names:
            r = client(net, TIERS[name])
            if r:
                got[name].append(r)
    direct = median_of(got["direct"])
    print(f"egress, {CONNECTS} connects and {MIB} MiB per tier (median of {ROUNDS} interleaved "
          f"rounds), start-to-exit median of {N} interleaved pairs")
    print(f"{'tier':12} {'connect ms':>11} {'direct':>8} {'added':>7}  {'MiB/s':>8} {'direct':>8} "
          f"{'ratio':>6}  {'egress ms':>9} {'off ms':>7} {'ratio':>6}")
    for name in names:
        if not got[name]:
            print(f"{name:12} failed")
            continue
        eg, off = start_to_exit(net, TIERS[name])
        row(name, median_of(got[name]), direct, eg, off)
    print("per round, MiB/s: " + "; ".join(
        f"{n} " + " ".join(f"{r['mib_s']:.0f}" for r in got[n]) for n in ["direct"] + names))
    microvm(net, direct)
    print("targets: throughput ratio >= 0.5, connect added <= 1 ms, start-to-exit ratio <= 1.3")


def row(name, got, direct, eg, off):
    print(f"{name:12} {got['connect_ms']:11.3f} {direct['connect_ms']:8.3f} "
          f"{got['connect_ms'] - direct['connect_ms']:7.3f}  {got['mib_s']:8.0f} "
          f"{direct['mib_s']:8.0f} {got['mib_s'] / direct['mib_s']:6.2f}  {eg:9.1f} {off:7.1f} "
          f"{eg / off:6.2f}")


def microvm(net, direct):
    guest = Path(os.environ.get("KIS_MICROVM_GUEST_DIR", REPO / "build" / "microvm-guest"))
    probe = REPO / "build" / "test-helpers" / "netprobe"
    env = {"KIS_MICROVM_GUEST_DIR": str(guest)}
    b = subprocess.run([str(REPO / "build" / "kis"), "sandbox", "backends", "--json"],
                       capture_output=True, text=True, env=dict(os.environ, **env))
    rows = {r["backend"]: r for r in json.loads(b.stdout)} if b.returncode == 0 else {}
    if not probe.exists() or "egress" not in rows.get("microvm", {}).get("network", ""):
        print(f"{'microvm':12} skipped: no guest with its network driver, or no {probe.name}")
        return
    with tempfile.TemporaryDirectory(prefix="kis-bench-egress-vm-") as src:
        shutil.copy2(probe, Path(src) / "netprobe")
        base = net.kis("base", "import", src).stdout.strip()
    tier = ["--tier", "microvm"]
    net.kis("run", *tier, "--", "true", env=env, timeout=600)  # the snapshot, once
    p = net.kis("run", *tier, "--base", base, "--net", "egress", "--", "./netprobe", "bench",
                str(CONNECTS), str(MIB), env=env, timeout=600)
    if p.returncode != 0:
        print(f"{'microvm':12} failed: {p.stderr.strip()}")
        return
    got = json.loads(p.stdout.strip().splitlines()[-1])
    eg, off = start_to_exit(net, tier, min(N, 5), "true", env)
    row("microvm", got, direct, eg, off)


main()
