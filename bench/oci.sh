#!/bin/sh
# SPDX-License-Identifier: MIT
# Container tier: start-to-exit of /bin/true through `kis sandbox run --tier
# container` beside raw `crun run` of an equivalent bundle (same namespaces,
# mounts, rlimits, resources and seccomp, /bin/true as the container process),
# and the clone-plus-run totals, as ratios. Usage: sh bench/oci.sh [N]
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
KIS="$REPO/build/kis"
N=${1:-${N:-50}}
if ! command -v crun >/dev/null 2>&1; then echo "bench/oci.sh: crun is missing: skipped"; exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "bench/oci.sh: the oci backend needs root: skipped"; exit 0; fi
[ -x "$KIS" ] || { echo "bench/oci.sh: build/kis is missing; run make" >&2; exit 1; }
mkdir -p "$REPO/build/bench"
cc -std=gnu11 -O2 -Wall -Wextra -Werror -o "$REPO/build/bench/startup" "$REPO/bench/startup.c"

WORK=$(mktemp -d /tmp/kis-bench-oci-XXXXXX)
export KIS_SANDBOX_ROOT="$WORK/store"
cleanup() {
	set +e
	crun delete -f kis-bench-raw >/dev/null 2>&1
	for b in $("$KIS" sandbox base list --json 2>/dev/null | /usr/bin/python3 -c \
		'import json,sys; [print(b["id"]) for b in json.load(sys.stdin)]' 2>/dev/null); do
		"$KIS" sandbox base remove "$b" >/dev/null 2>&1
	done
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# The hand-written bundle: root:host as kis lays it out (a read-only
# skeleton with the host's system dirs bound read-only), the same
# namespaces, masked paths, rlimits, cgroup limits and seccomp policy (taken
# from kis's plan so the filter is the same size), /bin/true as the process.
mkdir -p "$WORK/raw/rootfs"
cd "$WORK/raw/rootfs"
mkdir -p proc dev sys tmp workspace usr etc
for d in bin sbin lib lib32 lib64 libx32; do
	if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$d"; elif [ -d "/$d" ]; then mkdir "$d"; fi
done
cd "$REPO"
"$KIS" sandbox run --dry-run --tier container -- /bin/true > "$WORK/plan.json"
/usr/bin/python3 - "$WORK/plan.json" "$WORK/raw/config.json" "$WORK/raw/rootfs" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
seccomp = plan["config"]["linux"]["seccomp"]
def m(dst, typ, src, opts):
    return {"destination": dst, "type": typ, "source": src, "options": opts}
mounts = [
    m("/proc", "proc", "proc", ["nosuid", "noexec", "nodev"]),
    m("/dev", "tmpfs", "tmpfs", ["nosuid", "strictatime", "mode=755", "size=65536k"]),
    m("/dev/pts", "devpts", "devpts", ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]),
    m("/dev/shm", "tmpfs", "shm", ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]),
    m("/dev/mqueue", "mqueue", "mqueue", ["nosuid", "noexec", "nodev"]),
    m("/sys", "sysfs", "sysfs", ["nosuid", "noexec", "nodev", "ro"]),
    m("/tmp", "tmpfs", "tmpfs", ["nosuid", "nodev", "mode=1777"]),
]
import os
for d in ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"]:
    if os.path.isdir(d) and not os.path.islink(d):
        mounts.append(m(d, "bind", d, ["bind", "ro", "nosuid", "nodev"]))
cfg = {
  "ociVersion": "1.0.2",
  "process": {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": ["/bin/true"],
              "env": ["PATH=/usr/bin:/bin"], "cwd": "/",
              "capabilities": {k: [] for k in ["bounding", "effective", "inheritable", "permitted", "ambient"]},
              "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024},
                          {"type": "RLIMIT_CORE", "hard": 0, "soft": 0}],
              "noNewPrivileges": True},
  "root": {"path": sys.argv[3], "readonly": True},
  "hostname": "bench",
  "mounts": mounts,
  "linux": {
    "namespaces": [{"type": t} for t in ["pid", "mount", "ipc", "uts", "cgroup", "network"]],
    "resources": {"devices": [{"allow": False, "access": "rwm"}],
                  "memory": {"limit": 1 << 30, "swap": 1 << 30}, "pids": {"limit": 256}},
    "cgroupsPath": "/kis-bench-raw",
    "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list", "/sys/firmware"],
    "readonlyPaths": ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"],
    "seccomp": seccomp,
  },
}
json.dump(cfg, open(sys.argv[2], "w"), indent=1)
PY
# crun 1.8 refuses hybrid cgroups: the reference gets the same private mount
# namespace without the v2 mount that kis gives it (DESIGN.md).
cat > "$WORK/raw.sh" <<SH
#!/bin/sh
if [ -d /sys/fs/cgroup/unified ] && mountpoint -q /sys/fs/cgroup/unified; then
	exec unshare -m --propagation slave sh -c 'umount -l /sys/fs/cgroup/unified && exec crun run --bundle "$WORK/raw" kis-bench-raw'
fi
exec crun run --bundle "$WORK/raw" kis-bench-raw
SH
chmod +x "$WORK/raw.sh"

"$REPO/scripts/make-os-image.sh" "$WORK/os" >/dev/null
echo hello > "$WORK/tiny.txt"
mkdir -p "$WORK/tiny" && mv "$WORK/tiny.txt" "$WORK/tiny/"
os=$("$KIS" sandbox base import "$WORK/os")
tiny=$("$KIS" sandbox base import "$WORK/tiny")

echo "start-to-exit of /bin/true, $N runs each (reference: raw crun run of the hand-written bundle)"
"$REPO/build/bench/startup" "$N" \
	"raw crun run=$WORK/raw.sh" \
	"kis run --tier container=$KIS sandbox run --tier container -- /bin/true" \
	"kis clone+run (root:host)=$KIS sandbox run --tier container --base $tiny -- /bin/true" \
	"kis clone+run (root:ws)=$KIS sandbox run --tier container --root workspace --base $os -- /bin/true"

# The machines are shared: load that changes between the rows above moves
# the ratios. The same pair again, interleaved run by run, so both see the
# same load.
echo
echo "interleaved, $N pairs: raw crun run, then kis run --tier container"
/usr/bin/python3 - "$N" "$WORK/raw.sh" "$KIS" <<'PY'
import statistics, subprocess, sys, time
n, raw, kis = int(sys.argv[1]), sys.argv[2], sys.argv[3]
cmds = {"raw crun run": [raw],
        "kis run --tier container": [kis, "sandbox", "run", "--tier", "container", "--", "/bin/true"]}
t = {k: [] for k in cmds}
for _ in range(n):
    for k, c in cmds.items():
        t0 = time.perf_counter()
        subprocess.run(c, stdout=subprocess.DEVNULL, check=True)
        t[k].append((time.perf_counter() - t0) * 1000)
ref = statistics.median(t["raw crun run"])
print("%-28s %10s %10s %8s" % ("command", "median_ms", "p90_ms", "ratio"))
for k, v in t.items():
    v.sort()
    print("%-28s %10.3f %10.3f %7.2fx" % (k, statistics.median(v), v[len(v) * 9 // 10],
                                           statistics.median(v) / ref))
PY
