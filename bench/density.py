# SPDX-License-Identifier: MIT
"""Density: how many sessions a tier holds, and what each costs.

Driven by bench/density.sh (which gives it a store of its own and removes
it). Per tier, sessions are created in steps up to a maximum; at each step:
create time (median, p90, with CREATORS creators at once), PSS per session
(the sessions' processes, /proc/PID/smaps_rollup, summed and divided),
the mean charge of a session's memory cgroup (memory.usage_in_bytes or
memory.current: its pages and the kernel objects charged to it),
MemAvailable given up per session since the start (kernel memory included:
namespaces, cgroups, mounts; other users of the machine move it too), exec
latency (`kis sandbox exec ID -- /bin/true`, median of 3) into the first
and the Nth (newest) session. Then every session is destroyed and the
destroy time reported. It stops early when used memory reaches 60% of the
total, or when the host's processes reach 75% of kernel.pid_max (the
machine is shared; pid_max is host-global and not ours to raise), or when
a create fails (the error is printed). Every session it made is destroyed,
also on an interrupt.
"""
import argparse
import concurrent.futures as cf
import json
import os
import signal
import statistics
import subprocess
import sys
import time

KIS = None
made = []  # ids of live sessions, in creation order


def meminfo():
    m = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            m[k] = int(v.split()[0])
    return m


def used_fraction():
    m = meminfo()
    return 1 - m["MemAvailable"] / m["MemTotal"]


def pid_fraction():
    n = sum(1 for d in os.listdir("/proc") if d.isdigit())
    with open("/proc/sys/kernel/pid_max") as f:
        return n / int(f.read())


def create(args):
    t = time.monotonic()
    p = subprocess.run([KIS, "sandbox", "create"] + args, capture_output=True, text=True)
    ms = (time.monotonic() - t) * 1000
    if p.returncode != 0:
        return None, ms, p.stderr.strip()
    return p.stdout.strip(), ms, ""


def destroy(sid):
    t = time.monotonic()
    subprocess.run([KIS, "sandbox", "session", "destroy", sid], capture_output=True)
    return (time.monotonic() - t) * 1000


def exec_ms(sid, n=3):
    v = []
    for _ in range(n):
        t = time.monotonic()
        p = subprocess.run([KIS, "sandbox", "exec", sid, "--", "/bin/true"], capture_output=True)
        v.append((time.monotonic() - t) * 1000)
        if p.returncode != 0:
            return float("nan")
    return statistics.median(v)


def session_pids():
    out = subprocess.run([KIS, "sandbox", "session", "list", "--json"], capture_output=True,
                         text=True, check=True).stdout
    return {s["id"]: s.get("agent_pid") for s in json.loads(out)}


def children_map():
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
            ppid = int(st[st.rindex(")") + 2:].split()[1])
            kids.setdefault(ppid, []).append(int(d))
        except (OSError, ValueError):
            pass
    return kids


def pss_kib(pid):
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def total_pss():
    """PSS of every session's processes: its agent and all it runs."""
    pids = [p for p in session_pids().values() if p]
    kids = children_map()
    total, seen = 0, set()
    stack = list(pids)
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        total += pss_kib(p)
        stack.extend(kids.get(p, []))
    return total, len(pids)


def memcg_kib(pid):
    """What the session's memory cgroup is charged (user pages and the
    kernel objects charged to it: page tables, task structs, slab)."""
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            p = "/sys/fs/cgroup/memory%s/memory.usage_in_bytes" % path
            break
        if ctrls == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            p = "/sys/fs/cgroup%s/memory.current" % path
    else:
        p = locals().get("p")
    try:
        with open(p) as f:
            return int(f.read()) // 1024
    except (OSError, TypeError, ValueError):
        return None


def mean_memcg():
    v = [memcg_kib(p) for p in session_pids().values() if p]
    v = [x for x in v if x is not None]
    return statistics.mean(v) if v else float("nan")


def steps_to(maximum):
    s = sorted({max(1, maximum // 8), max(1, maximum // 4), max(1, maximum // 2), maximum})
    return [x for x in s if x > 0]


def tier(name, args, maximum, creators):
    print("\n== %s: sessions up to %d (%d creators at once; load: %s)" % (
        name, maximum, creators, os.getloadavg()))
    print("%8s %9s %9s %10s %10s %12s %9s %9s %6s" % (
        "sessions", "create_ms", "p90_ms", "pss_KiB/s", "memcg_KiB", "avail_KiB/s", "exec1_ms",
        "execN_ms", "mem%"))
    avail0 = meminfo()["MemAvailable"]
    stop = None
    rows = []
    for target in steps_to(maximum):
        times = []
        with cf.ThreadPoolExecutor(creators) as ex:
            while len(made) < target and not stop:
                if used_fraction() >= 0.60:
                    stop = "used memory reached 60%"
                    break
                if pid_fraction() >= 0.75:
                    stop = "processes reached 75% of kernel.pid_max"
                    break
                n = min(creators * 8, target - len(made))
                for sid, ms, why in ex.map(lambda _: create(args), range(n)):
                    if sid:
                        made.append(sid)
                        times.append(ms)
                    else:
                        stop = "create failed: %s" % why
        if not made:
            break
        pss, n = total_pss()
        avail = meminfo()["MemAvailable"]
        e1, en = exec_ms(made[0]), exec_ms(made[-1])
        times.sort()
        med = statistics.median(times) if times else float("nan")
        p90 = times[len(times) * 9 // 10] if times else float("nan")
        row = (len(made), med, p90, pss / max(n, 1), mean_memcg(), (avail0 - avail) / len(made),
               e1, en, used_fraction() * 100)
        rows.append(row)
        print("%8d %9.1f %9.1f %10.0f %10.0f %12.0f %9.1f %9.1f %5.1f%%" % row, flush=True)
        if stop:
            break
    if stop:
        print("stopped at %d sessions: %s" % (len(made), stop))
    # destroy every session, timing each
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(creators) as ex:
        d = sorted(ex.map(destroy, list(made)))
    total = time.monotonic() - t0
    if d:
        print("destroy: %d sessions, median %.1f ms, p90 %.1f ms, %.1f s in all (%d at once)" % (
            len(d), statistics.median(d), d[len(d) * 9 // 10], total, creators))
    made.clear()
    return rows


def cleanup(*_):
    for sid in list(made):
        destroy(sid)
    made.clear()
    sys.exit(130)


def main():
    global KIS
    ap = argparse.ArgumentParser()
    ap.add_argument("--kis", required=True)
    ap.add_argument("--host", type=int, default=100, help="landlock sessions at most")
    ap.add_argument("--bubblewrap", type=int, default=0, help="bubblewrap sessions at most")
    ap.add_argument("--container", type=int, default=10, help="container sessions at most")
    ap.add_argument("--creators", type=int, default=2)
    ap.add_argument("--dat", default=None)
    a = ap.parse_args()
    KIS = a.kis
    signal.signal(signal.SIGINT, cleanup)
    signal.signal(signal.SIGTERM, cleanup)
    signal.signal(signal.SIGHUP, cleanup)
    m = meminfo()
    print("machine: %d MiB, %d cores, kernel.pid_max %s" % (
        m["MemTotal"] // 1024, os.cpu_count(), open("/proc/sys/kernel/pid_max").read().strip()))
    out = []
    try:
        for name, args, mx in [("host (landlock)", ["--backend", "landlock"], a.host),
                               ("host (bubblewrap)", ["--backend", "bubblewrap"], a.bubblewrap),
                               ("container (oci)", ["--backend", "oci"], a.container)]:
            if mx > 0:
                for r in tier(name, args, mx, a.creators):
                    out.append((name.split()[0] + "_" + args[1],) + r)
    finally:
        for sid in list(made):
            destroy(sid)
    if a.dat:
        with open(a.dat, "w") as f:
            for r in out:
                f.write(" ".join(str(x) for x in r) + "\n")


if __name__ == "__main__":
    main()
