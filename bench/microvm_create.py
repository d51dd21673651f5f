#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# The microvm's session creation and one-shot run start, this tree's engine
# beside an earlier one (bench/microvm-create.sh builds both), interleaved
# round by round so that the load of a shared machine falls on both alike.
# Each build has its own store and guest cache (its agent names its own
# initramfs and snapshot). Figures, not assertions.
#
# Usage: microvm_create.py WORK GUEST_SRC name=path/to/kis ...
#   ROUNDS (default 7): rounds per scenario; UP (default 10): sessions of
#   each build kept up for the "Nth" scenario; LOADERS (default 2): CPU
#   burners for the loaded scenario (0: none); SETTLE (default 3): discarded
#   create rounds after the warm-up.
# Beside the wall-clock phases, the CPU each create cost (the engine's, with
# its waited children, and the session VMM's up to the guest's
# configuration) and the VMM's page faults: figures that the load of a
# shared machine stretches far less than wall time.
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time

PHASES = [  # trace labels (src/backends/microvm, debug events of KIS_LOG=debug), in order
    ("disks", "disks made"),
    ("snapshot+memfd", "snapshot and its memory found"),
    ("jail", "jail: vmm exec'd"),
    ("qemu start", "qmp: greeting and capabilities"),
    ("restore", "restore started"),
    ("to 1st reply", "guest answered"),
    ("guest config", "guest configured"),
]
TRACE = re.compile(r"^kis\S* debug: microvm: +(\d+) ms (.*)$")


def uptime():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Build:
    def __init__(self, name, kis, work, guest_src):
        self.name, self.kis = name, kis
        self.guest = os.path.join(work, "guest-" + name)
        self.store = os.path.join(work, "store-" + name)
        os.makedirs(self.store, exist_ok=True)
        os.makedirs(self.guest, exist_ok=True)
        for f in ("vmlinuz", "busybox", "kernel.release", "tsc_khz", "accel"):
            src = os.path.join(guest_src, f)
            if os.path.exists(src) and not os.path.exists(os.path.join(self.guest, f)):
                shutil.copy2(src, self.guest)
        if not os.path.exists(os.path.join(self.guest, "modules")):
            shutil.copytree(os.path.join(guest_src, "modules"), os.path.join(self.guest, "modules"))
        self.env = dict(os.environ, KIS_SANDBOX_ROOT=self.store, KIS_MICROVM_GUEST_DIR=self.guest)
        self.env.pop("KIS_LOG", None)
        self.up = []

    def run(self, args, trace=False):
        env = dict(self.env, KIS_LOG="debug") if trace else self.env
        t = time.monotonic()
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run([self.kis, "sandbox"] + args, env=env, capture_output=True, text=True)
        ms = (time.monotonic() - t) * 1000
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode != 0:
            raise RuntimeError("%s: %s: %s" % (self.name, " ".join(args), p.stderr.strip()[-300:]))
        marks = {"pings lost": 0}
        for line in p.stderr.splitlines():
            m = TRACE.match(line)
            if m:
                marks.setdefault(m.group(2), int(m.group(1)))
                if m.group(2).startswith("ctl: no pong"):
                    marks["pings lost"] += 1
        # the engine's CPU and that of the children it waited for (the
        # session's middle process, the RAM filler; not the VMM, init's)
        marks["eng cpu"] = ((ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)) * 1000
        return p.stdout.strip(), ms, marks

    def create(self):
        sid, ms, marks = self.run(["create", "--tier", "microvm"], trace=True)
        marks.update(vmm_cost(self.store, sid))
        return sid, ms, marks

    def destroy(self, sid):
        self.run(["session", "destroy", sid])

    def destroy_all(self):
        d = os.path.join(self.store, "sessions")
        for s in os.listdir(d) if os.path.isdir(d) else []:
            subprocess.run([self.kis, "sandbox", "session", "destroy", s], env=self.env,
                           capture_output=True)
        self.up = []


def vmm_cost(store, sid):
    """The session's VMM so far (its start, restore and the guest up to its
    configuration; an idle guest adds little): CPU ms over its live threads
    (schedstat, ns) and its minor page faults (a fault costs ~10-20 us on
    this virtualised host)."""
    try:
        with open(os.path.join(store, "sessions", sid, "session.json")) as f:
            pid = json.load(f)["agent_pid"]
        ns = 0
        for t in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                ns += int(f.read().split()[0])
        with open("/proc/%d/stat" % pid) as f:
            flt = int(f.read().rsplit(")", 1)[1].split()[7])
        return {"vmm cpu": ns / 1e6, "vmm faults": flt}
    except (OSError, ValueError, KeyError):
        return {}


def phases_of(marks):
    """Each phase's ms (from the previous mark that is there), or None."""
    out, prev = {}, marks.get("start", 0)
    for name, label in PHASES:
        if label in marks:
            out[name] = marks[label] - prev
            prev = marks[label]
        else:
            out[name] = None
    return out


def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def scenario(title, builds, rounds, what):
    """Rounds of `what(build)` -> (ms, marks), builds interleaved; a table."""
    res = {b.name: [] for b in builds}
    load = [uptime()]
    for r in range(rounds):
        order = builds if r % 2 == 0 else list(reversed(builds))
        for b in order:
            res[b.name].append(what(b))
    load.append(uptime())
    print("\n== %s (%d rounds, load average %s -> %s)" % (title, rounds, load[0], load[1]))
    hdr = ("%-8s %9s %9s" % ("build", "total", "to cfg") + "".join(" %9s" % p[0][:9] for p in PHASES)
           + " pings lost  eng cpu  vmm cpu vmm faults")
    print(hdr)
    base = None
    for b in builds:
        tot = med([x[0] for x in res[b.name]])
        cfg = med([x[1].get("guest configured") for x in res[b.name]])
        ph = [med([phases_of(x[1])[p[0]] for x in res[b.name]]) for p in PHASES]
        print("%-8s %6.0f ms %6s ms" % (b.name, tot, "%.0f" % cfg if cfg is not None else "-") +
              "".join(" %9s" % ("%.0f" % v if v is not None else "-") for v in ph) +
              " %5d" % sum(x[1].get("pings lost", 0) for x in res[b.name]) +
              "".join(" %5s ms" % ("%.0f" % v if v is not None else "-") for v in
                      (med([x[1].get(k) for x in res[b.name]]) for k in ("eng cpu", "vmm cpu"))) +
              " %10s" % ("%.0f" % v if (v := med([x[1].get("vmm faults") for x in res[b.name]]))
                         is not None else "-"))
        if base is None:
            base = tot
    if len(builds) > 1 and base:
        last = med([x[0] for x in res[builds[-1].name]])
        print("%s/%s: %.2f" % (builds[-1].name, builds[0].name, last / base))
    return res


def create_destroy(b):
    sid, ms, marks = b.create()
    b.destroy(sid)
    return ms, marks


def run_true(b):
    _, ms, marks = b.run(["run", "--tier", "microvm", "--", "true"], trace=True)
    return ms, marks


def main():
    work, guest_src = sys.argv[1], sys.argv[2]
    builds = [Build(*a.split("=", 1), work, guest_src) for a in sys.argv[3:]]
    rounds = int(os.environ.get("ROUNDS", "7"))
    up = int(os.environ.get("UP", "10"))
    loaders = int(os.environ.get("LOADERS", "2"))
    burners = []
    try:
        for b in builds:  # warm: initramfs, snapshot
            b.run(["run", "--tier", "microvm", "--", "true"])
        # Creations right after a snapshot was made (a cold boot) run up to
        # twice as slow for some 15 s here, for every guest cache alike (a
        # host-wide transient, measured with an older cache interleaved):
        # discarded rounds first, so that the first scenario does not pay it.
        for r in range(int(os.environ.get("SETTLE", "3"))):
            for b in builds:
                create_destroy(b)
        print("microvm session creation and run start; columns: ms, medians; 'to cfg' is the "
              "backend's start to the guest configured (its trace), the phases each from the "
              "one before ('-': not traced by that build)")
        scenario("session create, no VM of the build up (its guest RAM loaded anew)", builds,
                 rounds, create_destroy)
        scenario("one-shot run of /bin/true, no VM up: 'total' start to exit", builds, rounds,
                 run_true)
        for b in builds:
            for _ in range(up):
                b.up.append(b.create()[0])
        scenario("session create with %d sessions of the build up (the density case)" % up,
                 builds, rounds, create_destroy)
        for b in builds:
            b.destroy_all()
        if loaders:
            burners = [subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"],
                                        start_new_session=True) for _ in range(loaders)]
            time.sleep(1)
            scenario("session create under load: %d CPU burners on the 2 cores, no VM up"
                     % loaders, builds, rounds, create_destroy)
    finally:
        for p in burners:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for b in builds:
            b.destroy_all()


if __name__ == "__main__":
    main()
