# SPDX-License-Identifier: MIT
# Where a kis-vm pod's start and teardown go, through containerd's CRI, for
# one or more builds of kis-runtime compared pod by pod in one private node
# (tests/cri/harness.py). Each build is a handler of its own (kis-vm-<dir
# name>), its kis-runtime-microvm a wrapper that keeps every call's --log
# file at debug (KIS_LOG=debug: the microvm's traced phases) and its start
# and end; per pod: RunPodSandbox, the app's CreateContainer+StartContainer,
# the first ExecSync, the teardown's two halves, and the sandbox create's
# phases (ms from RunPodSandbox's call). Rounds alternate the builds'
# order; round 0 is discarded; medians of each phase's own durations.
#
# A build is a directory holding kis-runtime, kis-helper and kis-agent.
# Compare builds with ONE agent file (a link to it in each directory): the
# guest cache names its initramfs and snapshots after the agent's size and
# mtime, and two agents would make every other pod wait for a new snapshot.
# For the same reason give the run a guest cache of its own
# (KIS_MICROVM_GUEST_DIR): another build using the same cache drops ours.
# Usage: python3 bench/cri_phases.py N DIR [DIR...]   (default DIR: build)
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cri"))
import harness as H  # noqa: E402

CRI = 'plugins."io.containerd.grpc.v1.cri".containerd.runtimes'
# (name, the trace line that ends it, the one it starts from)
TRACED = [("to the VM's start", "start", None),
          ("disks", "disks made", "start"),
          ("RAM, jail to QEMU's exec", "jail: vmm exec'd", "disks made"),
          ("QEMU to QMP", "qmp: greeting and capabilities", "jail: vmm exec'd"),
          ("restore to 1st reply", "guest answered", "qmp: greeting and capabilities"),
          ("guest setup", "guest configured", "guest answered")]


def wrapper(d, name, krt, logs):
    """A directory with kis-runtime-microvm for build `name`: keeps each
    call's log (its --log replaced) and times; the real binary is reached
    through a link of the same name (the name pins the tier)."""
    wd = Path(d) / f"w-{name}"
    (wd / "real").mkdir(parents=True)
    os.symlink(krt, wd / "real" / "kis-runtime-microvm")
    w = wd / "kis-runtime-microvm"
    w.write_text(f"""#!/bin/bash
echo "$(date +%s.%N) $$ begin {name} $*" >> {logs}/calls.log
a=(); skip=0
for x in "$@"; do
  if [ $skip = 1 ]; then skip=0; a+=("{logs}/rt-$$.log"); continue; fi
  [ "$x" = --log ] && skip=1
  a+=("$x")
done
KIS_LOG=debug {wd}/real/kis-runtime-microvm "${{a[@]}}"
rc=$?
echo "$(date +%s.%N) $$ end $rc" >> {logs}/calls.log
exit $rc
""")
    w.chmod(0o755)
    return (f"    [{CRI}.kis-vm-{name}]\n      runtime_type = \"io.containerd.runc.v2\"\n"
            f"      [{CRI}.kis-vm-{name}.options]\n        BinaryName = \"{w}\"\n")


def stamp(s):
    return datetime.datetime.strptime(s[:26], "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def traced(logs, name, t0):
    """The sandbox create's phases (trace line -> ms from t0) of build
    name's first create begun after t0."""
    for line in open(logs / "calls.log"):
        f = line.split()
        if f[2] == "begin" and f[3] == name and float(f[0]) >= t0 and "create" in f:
            out = {}
            for l in open(logs / f"rt-{f[1]}.log"):
                m = json.loads(l)
                if m["msg"].startswith("microvm:"):
                    out.setdefault(m["msg"].split(" ms ", 1)[1], 1000 * (stamp(m["time"]) - t0))
            return out
    return {}


def one_pod(node, handler, logs, name):
    t = [time.time()]
    pod, cfg = node.run_pod(handler)
    t.append(time.time())
    cid = node.start_container(pod, cfg, "app", ["/bin/sleep", "100000"])
    t.append(time.time())
    out = node.exec_sync(cid, ["/bin/echo", "ready"])
    assert out == ("ready\n", "", 0), out
    t.append(time.time())
    node.cri.call("StopContainer", container_id=cid, timeout=0)
    node.cri.call("RemoveContainer", container_id=cid)
    t.append(time.time())
    node.cri.call("StopPodSandbox", pod_sandbox_id=pod)
    node.cri.call("RemovePodSandbox", pod_sandbox_id=pod)
    t.append(time.time())
    ph = traced(logs, name, t[0])
    row = {}
    for label, end, start in TRACED:
        if end in ph and (start is None or start in ph):
            row[label] = ph[end] - (ph[start] if start else 0)
    last = ph.get("guest configured", 0)
    row["to RunPodSandbox's answer"] = 1000 * (t[1] - t[0]) - last
    row["app create+start"] = 1000 * (t[2] - t[1])
    row["1st ExecSync"] = 1000 * (t[3] - t[2])
    row["START"] = 1000 * (t[3] - t[0])
    row["stop+remove app"] = 1000 * (t[4] - t[3])
    row["stop+remove pod"] = 1000 * (t[5] - t[4])
    row["TEARDOWN"] = 1000 * (t[5] - t[3])
    return row


def main():
    if len(sys.argv) < 2:
        print(__doc__ or "usage: python3 bench/cri_phases.py N DIR [DIR...]", file=sys.stderr)
        return 2
    n = int(sys.argv[1])
    dirs = [Path(x).resolve() for x in sys.argv[2:]] or [H.ROOT / "build"]
    why = H.why_skip()
    if why:
        print(f"bench/cri_phases.py: {why}: skipped")
        return 0
    d = tempfile.mkdtemp(prefix="kis-bench-cri-phases-")
    logs = Path(d) / "logs"
    logs.mkdir()
    names = [x.name for x in dirs]
    if len(set(names)) != len(names):
        print("bench/cri_phases.py: the builds' directories need distinct names", file=sys.stderr)
        return 2
    extra = "".join(wrapper(d, x.name, x / "kis-runtime", logs) for x in dirs)
    config = H.cri_config
    H.cri_config = lambda dd, b: config(dd, b) + extra
    node = H.Node(d)
    rows = {x: [] for x in names}
    try:
        node.start()
        load0 = os.getloadavg()
        for r in range(n + 1):
            for name in (names if r % 2 == 0 else names[::-1]):
                row = one_pod(node, f"kis-vm-{name}", logs, name)
                print(f"round {r} {name}: " + ", ".join(f"{k} {v:.0f}" for k, v in row.items()),
                      flush=True)
                if r:
                    rows[name].append(row)
        load1 = os.getloadavg()
    finally:
        node.stop()
    print(f"\n{n} pods a build, interleaved (round 0 discarded), medians in ms; load average"
          f" (1 min) {load0[0]:.2f} at the start, {load1[0]:.2f} at the end")
    keys = list(rows[names[0]][0])
    print(f"{'phase':<28}" + "".join(f"{x:>14}" for x in names))
    for k in keys:
        print(f"{k:<28}" + "".join(
            f"{statistics.median([row[k] for row in rows[x] if k in row] or [0]):>14.0f}"
            for x in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
