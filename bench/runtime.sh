#!/bin/sh
# SPDX-License-Identifier: MIT
# kis-runtime under podman: `podman run --rm IMAGE /bin/true` with
# --runtime crun, runc and kis-runtime (at the container tier, and at the
# microvm tier by the annotation run.kis.tier=microvm when a guest is
# there), interleaved run by run in one session (the same load on each),
# medians and ratios to crun.
# The reference is crun given the same bundle; kis-runtime checks it, fills
# in its defaults (seccomp where the bundle has none, limits) and becomes
# crun, so the difference is its checks plus the work of those defaults.
# Usage: sh bench/runtime.sh [N]
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
KRT="$REPO/build/kis-runtime"
N=${1:-${N:-15}}
for t in podman crun busybox; do
	command -v "$t" >/dev/null 2>&1 || { echo "bench/runtime.sh: $t is missing: skipped"; exit 0; }
done
if [ "$(id -u)" != 0 ]; then echo "bench/runtime.sh: kis-runtime needs root: skipped"; exit 0; fi
[ -x "$KRT" ] || { echo "bench/runtime.sh: build/kis-runtime is missing; run make" >&2; exit 1; }

WORK=$(mktemp -d /tmp/kis-bench-runtime-XXXXXX)
P="podman --root $WORK/storage --runroot $WORK/run --tmpdir $WORK/tmp --storage-driver overlay"
PARENT_BEFORE=$(ls -d /sys/fs/cgroup/*/libpod_parent /sys/fs/cgroup/libpod_parent 2>/dev/null | head -1)
# podman 4.3 and the runtimes keep these at fixed paths whatever --root
# says (blob cache, network state, the runtimes' default state roots):
# removed afterwards when this run made them
FIXED=""
for p in /var/lib/containers /run/containers /run/kis-runtime /run/runc; do
	[ -e "$p" ] || FIXED="$FIXED $p"
done
cleanup() {
	set +e
	$P rm -af -t 0 >/dev/null 2>&1
	$P system reset --force >/dev/null 2>&1
	grep -o " $WORK[^ ]*" /proc/self/mountinfo | sort -r | while read -r m; do umount -l "$m"; done
	rm -rf "$WORK"
	for p in $FIXED; do rm -rf "$p"; done
	# podman's cgroupfs parent, when this run made it (rmdir: empty groups only)
	# (conmon's cleanup of a --rm container ends a moment after podman: retry)
	[ -n "$PARENT_BEFORE" ] || for i in 1 2 3 4 5 6 7 8 9 10; do
		left=""
		for d in /sys/fs/cgroup/*/libpod_parent /sys/fs/cgroup/libpod_parent; do
			[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
			[ -d "$d" ] && left=1
		done
		[ -z "$left" ] && break
		sleep 0.5
	done
}
trap cleanup EXIT INT TERM
cat > "$WORK/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
netns = "none"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
export CONTAINERS_CONF="$WORK/containers.conf"
cd "$WORK" # conmon writes files into its working directory
mkdir -p "$WORK/rootfs/bin" "$WORK/rootfs/proc" "$WORK/rootfs/sys" "$WORK/rootfs/dev" "$WORK/rootfs/etc"
cp "$(command -v busybox)" "$WORK/rootfs/bin/busybox"
ln -s busybox "$WORK/rootfs/bin/true"
ln -s busybox "$WORK/rootfs/bin/sh"
tar -C "$WORK/rootfs" -cf "$WORK/rootfs.tar" .
$P import "$WORK/rootfs.tar" localhost/kis-bench:1 >/dev/null 2>&1

# crun 1.8 refuses a hybrid cgroup layout outright; there the reference is
# crun in a mount namespace without the v2 mount, entered the way
# kis-runtime does it before it becomes crun: in-process, by a small C
# program (bench/crun-hybrid.c) that then execs crun, no unshare(1), no sh.
CRUN=$(command -v crun)
if grep -q " /sys/fs/cgroup/unified .* cgroup2 " /proc/self/mountinfo && \
   ! grep -q " /sys/fs/cgroup .* - cgroup2 " /proc/self/mountinfo; then
	cc -std=gnu11 -O2 -Wall -Wextra -Werror -DCRUN_PATH="\"$CRUN\"" -o "$WORK/crun-hybrid" \
		"$REPO/bench/crun-hybrid.c"
	CRUN="$WORK/crun-hybrid"
	echo "hybrid cgroups: crun is run through $CRUN (bench/crun-hybrid.c: unshare and umount in-process, then exec)"
fi
echo "load: $(uptime)"
# each runtime's state root under $WORK (a runtime flag podman passes)
RUNTIMES="crun=$CRUN"
command -v runc >/dev/null 2>&1 && RUNTIMES="$RUNTIMES runc=$(command -v runc)"
RUNTIMES="$RUNTIMES kis-runtime=$KRT"
# the microvm tier: the guest test_microvm.py and test_runtime.py share
GUEST=${KIS_MICROVM_GUEST_DIR:-$REPO/build/microvm-guest}
MVM=""
if [ -x /usr/bin/qemu-system-x86_64 ] && [ -s "$GUEST/vmlinuz" ] && [ -x "$GUEST/busybox" ]; then
	MVM=1
	RUNTIMES="$RUNTIMES kis-runtime-microvm=$KRT"
else
	echo "microvm tier: no guest in $GUEST (scripts/guest/fetch-kernel.sh) or no qemu: not measured"
fi

/usr/bin/python3 - "$N" "$P" "$WORK" "$GUEST" $RUNTIMES <<'PY'
import shlex, statistics, subprocess, sys, time
n, podman, work, guest = int(sys.argv[1]), shlex.split(sys.argv[2]), sys.argv[3], sys.argv[4]
rts = [a.split("=", 1) for a in sys.argv[5:]]
times = {name: [] for name, _ in rts}


def argv(name, path):
    a = podman + ["--runtime", path, "--runtime-flag", f"root={work}/st-{name}"]
    if name.endswith("-microvm"):
        a += ["--runtime-flag", f"kis-guest-dir={guest}"]
    a += ["run", "--rm"]
    if name.endswith("-microvm"):
        a += ["--annotation", "run.kis.tier=microvm"]
    return a + ["localhost/kis-bench:1", "/bin/true"]


for name, path in rts:  # one warm-up each, not counted (the microvm's makes its snapshot)
    subprocess.run(argv(name, path), check=True, capture_output=True)
for i in range(n):
    for name, path in (rts if i % 2 == 0 else rts[::-1]):
        t = time.monotonic()
        subprocess.run(argv(name, path), check=True, capture_output=True)
        times[name].append((time.monotonic() - t) * 1000)
ref = statistics.median(times["crun"])
print(f"podman run --rm IMAGE /bin/true, {n} runs each, interleaved")
print(f"{'runtime':<22}{'median ms':>10}{'mean ms':>10}{'min ms':>10}{'vs crun':>9}")
for name, _ in rts:
    t = times[name]
    print(f"{name:<22}{statistics.median(t):>10.0f}{statistics.mean(t):>10.0f}{min(t):>10.0f}"
          f"{statistics.median(t) / ref:>8.2f}x")
print("(kis-runtime-microvm: a guest per container, booted from a snapshot under "
      f"{'KVM' if __import__('os').access('/dev/kvm', 6) else 'TCG, no KVM here'}; "
      "target 1.2x is the container tier's)")
PY

# The runtimes alone, no engine: `run` of one bundle (crun spec's, /bin/true,
# read-only busybox root) by crun, by kis-runtime at the container tier and
# at the host tier (the same bundle without sysfs and cgroup mounts, which
# bwrap cannot make), interleaved. Each in a state root of its own.
mkdir -p "$WORK/bundle" "$WORK/hbundle" "$WORK/mbundle"
(cd "$WORK/bundle" && crun spec)
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
c = json.load(open(f"{w}/bundle/config.json"))
c["root"] = {"path": f"{w}/rootfs", "readonly": True}
c["process"].update(terminal=False, args=["/bin/true"])
json.dump(c, open(f"{w}/bundle/config.json", "w"))
c["mounts"] = [m for m in c["mounts"] if m["type"] not in ("sysfs", "cgroup")]
c["annotations"] = {"run.kis.tier": "host"}
json.dump(c, open(f"{w}/hbundle/config.json", "w"))
c = json.load(open(f"{w}/bundle/config.json"))
c["root"]["readonly"] = False  # the guest's root is its writable workspace
c["annotations"] = {"run.kis.tier": "microvm"}
json.dump(c, open(f"{w}/mbundle/config.json", "w"))
PY
TIERS="crun=$CRUN --root $WORK/st-crun run --bundle $WORK/bundle"
TIERS="$TIERS|kis-runtime (container)=$KRT --root $WORK/st-krt run --bundle $WORK/bundle"
command -v bwrap >/dev/null 2>&1 && \
	TIERS="$TIERS|kis-runtime (host, bwrap)=$KRT --root $WORK/st-krt run --bundle $WORK/hbundle"
[ -n "$MVM" ] && \
	TIERS="$TIERS|kis-runtime (microvm)=$KRT --root $WORK/st-krt --kis-guest-dir $GUEST run --bundle $WORK/mbundle"
/usr/bin/python3 - "$((N * 4))" "$TIERS" <<'PY'
import shlex, statistics, subprocess, sys, time
n = int(sys.argv[1])
rts = [a.split("=", 1) for a in sys.argv[2].split("|")]
times = {name: [] for name, _ in rts}
for i in range(n + 1):
    for name, cmd in (rts if i % 2 == 0 else rts[::-1]):
        if "microvm" in name and i % 4:
            continue  # a boot each: one round in four
        t = time.monotonic()
        subprocess.run(shlex.split(cmd) + [f"bench-{i}"], check=True, capture_output=True)
        if i:  # the first round warms up
            times[name].append((time.monotonic() - t) * 1000)
ref = statistics.median(times["crun"])
print()
print(f"runtime run of one bundle, /bin/true, {n} runs each, interleaved")
print(f"{'runtime':<26}{'median ms':>10}{'mean ms':>10}{'min ms':>10}{'vs crun':>9}")
for name, _ in rts:
    t = times[name]
    print(f"{name:<26}{statistics.median(t):>10.1f}{statistics.mean(t):>10.1f}{min(t):>10.1f}"
          f"{statistics.median(t) / ref:>8.2f}x")
print("(the host tier's line is bwrap and the microvm's a guest, other mechanisms: their "
      "ratios to crun are not like-for-like; the microvm runs one round in four)")
PY
echo "load: $(uptime)"
