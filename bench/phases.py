# SPDX-License-Identifier: MIT
"""Where the time of one kis run goes: phases of `kis sandbox run --backend
B -- /bin/true`, cut at marker system calls seen by strace, medians over
several runs.

  /usr/bin/python3 bench/phases.py KIS BACKEND [RUNS]

strace follows every process (-f) but stops only at the marker calls
(--seccomp-bpf with a short -e trace= list: no openat, no landlock_add_rule,
no mount, which a run makes by the hundred), so the untraced work between
markers runs at full speed and each marker costs one stop. The totals are
still longer than untraced runs (each stop, each fork followed): read the
shares and the differences, and the untraced totals of bench/host.sh and
bench/oci.sh for the absolute figures.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

MARKERS = ("execve,execveat,clone,clone3,vfork,wait4,waitid,mkdir,rmdir,flock,seccomp,"
           "landlock_create_ruleset,landlock_restrict_self,unshare,setns,pivot_root,"
           "memfd_create,socketpair,bind,listen,connect,accept4,pidfd_open,exit_group")

# Each phase ends at the first event (after the previous boundary) whose
# line matches the pattern. "ENGINE" is the first process, "LAST" its end.
PHASES = {
    "landlock": [
        ("kis starts: exec, loader, CLI, profile, selection", r"flock\("),
        ("store and owner record (locks, sweep)", r'mkdir\("/sys/fs/cgroup/'),
        ("cgroup: mkdir, limits", r'mkdir\("/tmp/kis-s-'),
        ("private /tmp, seccomp program, Landlock ruleset", r"clone3?\("),
        ("child: cgroup join, restrict_self, seccomp, exec", r'execve\("/bin/true"'),
        ("/bin/true runs", r"exit_group\("),
        ("teardown: events, cgroup rmdir, records", r"LAST"),
    ],
    "bubblewrap": [
        ("kis starts: exec, loader, CLI, profile, selection", r"flock\("),
        ("store and owner record (locks, sweep)", r'mkdir\("/sys/fs/cgroup/'),
        ("cgroup: mkdir, limits; seccomp memfd", r"memfd_create\("),
        ("user namespace: holder, maps", r"clone3?\(.*"),
        ("spawn: private mount ns, /run stage, agent, ids", r'execve\("/usr/bin/bwrap"'),
        ("bwrap: namespaces, mounts, pivot_root, seccomp", r'execve\("/.kis/agent"'),
        ("agent: handshake, exec request", r'execve\("/bin/true"'),
        ("/bin/true runs", r"exit_group\("),
        ("teardown: agent and bwrap end, cgroup rmdir", r"LAST"),
    ],
    "oci": [
        ("kis starts: exec, loader, CLI, profile, selection", r"flock\("),
        ("store, owner record, collect leftovers", r'mkdir\("/run/kis/oci/'),
        ("bundle: skeleton, config.json, agent staged", r"clone3?\("),
        ("crun starts (fork, hybrid mount ns, exec)", r'execve\("/usr/bin/crun"'),
        ("crun: cgroups, namespaces, mounts, seccomp", r'execve(at)?\(.*(/.kis/agent|AT_EMPTY_PATH)'),
        ("agent: handshake, exec request", r'execve\("/bin/true"'),
        ("/bin/true runs", r"exit_group\("),
        ("teardown: agent ends, crun deletes, bundle removed", r"LAST"),
    ],
}

LINE = re.compile(r"^(\d+)\s+(\d+\.\d+)\s+(.*)$")


def one(kis, backend, tmp):
    out = os.path.join(tmp, "t")
    cmd = ["strace", "-f", "--seccomp-bpf", "-ttt", "-qq", "-e", "trace=" + MARKERS, "-e",
           "signal=none", "-o", out, kis, "sandbox", "run", "--backend", backend, "--",
           "/bin/true"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    ev = []
    for line in open(out):
        m = LINE.match(line)
        if m and "resumed>" not in m.group(3):
            ev.append((int(m.group(1)), float(m.group(2)), m.group(3)))
    engine = ev[0][0]
    t0 = ev[0][1]
    last = [t for p, t, s in ev if p == engine][-1]
    bounds, i = [], 0
    for name, pat in PHASES[backend]:
        if pat == "LAST":
            bounds.append(last)
            continue
        r = re.compile(pat)
        while i < len(ev) and not r.search(ev[i][2]):
            i += 1
        if i == len(ev):
            raise RuntimeError("phase '%s': no event matches %s" % (name, pat))
        bounds.append(ev[i][1])
        i += 1
    durs, prev = [], t0
    for b in bounds:
        durs.append((b - prev) * 1000)
        prev = b
    return durs, (last - t0) * 1000


def main():
    kis, backend = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    subprocess.run([kis, "sandbox", "run", "--backend", backend, "--", "/bin/true"], check=True)
    rows, totals = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(runs):
            d, t = one(kis, backend, tmp)
            rows.append(d)
            totals.append(t)
    tot = statistics.median(totals)
    print("%s: phases of `kis sandbox run --backend %s -- /bin/true` under strace (markers only), "
          "median of %d runs, load %s" % (backend, backend, runs, os.getloadavg()))
    print("%-56s %9s %7s" % ("phase (ends at)", "ms", "share"))
    for k, (name, _) in enumerate(PHASES[backend]):
        m = statistics.median(r[k] for r in rows)
        print("%-56s %9.2f %6.0f%%" % (name, m, 100 * m / tot))
    print("%-56s %9.2f" % ("total (median of the totals)", tot))


if __name__ == "__main__":
    main()
