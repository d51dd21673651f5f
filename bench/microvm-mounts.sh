#!/bin/sh
# SPDX-License-Identifier: MIT
# The microvm's mounts (issue 21): start-to-exit of /bin/true through
# `kis sandbox run --tier microvm` with no mount, with a base mounted
# read-only, and with a base and a workspace (read-write, copied back);
# beside the same run by a reference build without the mount slots
# (REF=path/to/kis built from the commit before them; optional), all
# interleaved so that a shared machine's load falls on each alike.
# Figures, not assertions.
set -eu
cd "$(dirname "$0")/.."
N=${N:-7}
SRC_GUEST=${KIS_MICROVM_GUEST_DIR:-$PWD/build/microvm-guest}
if ! command -v qemu-system-x86_64 >/dev/null || ! scripts/guest/fetch-kernel.sh "$SRC_GUEST" >/dev/null; then
	echo "microvm-mounts: skipped (no qemu-system-x86_64 or no guest kernel)"
	exit 0
fi
TOP=$(mktemp -d)
W=
# the workspace's merged view is an overlay mount of the store's: destroyed first
trap '[ -n "$W" ] && new destroy "$W" >/dev/null 2>&1; rm -rf "$TOP"' EXIT
# each build its own guest cache (the reference's snapshots have its
# device set) and store; the kernel files copied, no snapshot shared
guest() {
	mkdir -p "$1"
	for f in busybox kernel.release modules vmlinuz tsc_khz; do cp -a "$SRC_GUEST/$f" "$1/"; done
}
guest "$TOP/g-new"
KIS=build/kis
new() { KIS_SANDBOX_ROOT="$TOP/s-new" KIS_MICROVM_GUEST_DIR="$TOP/g-new" $KIS sandbox "$@"; }
ref() { KIS_SANDBOX_ROOT="$TOP/s-ref" KIS_MICROVM_GUEST_DIR="$TOP/g-ref" "$REF" sandbox "$@"; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }
med() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
mkdir -p "$TOP/data" "$TOP/cache"
head -c 1048576 /dev/urandom > "$TOP/data/blob"
echo old > "$TOP/cache/old.txt"
new run --tier microvm -- true >/dev/null # warm: initramfs, snapshot
D=$(new base import "$TOP/data")
W=$(new clone "$(new base import "$TOP/cache")")
new run --tier microvm --mount "$D:/data" -- true >/dev/null # the base's image, once
if [ -n "${REF:-}" ]; then
	guest "$TOP/g-ref"
	ref run --tier microvm -- true >/dev/null
fi
rows=$(for i in $(seq "$N"); do
	t=$(ms); new run --tier microvm -- /bin/true; a=$(( $(ms) - t ))
	t=$(ms); new run --tier microvm --mount "$D:/data" -- /bin/true; b=$(( $(ms) - t ))
	t=$(ms); new run --tier microvm --mount "$D:/data" --mount "$W:/cache" -- sh -c 'echo x > /cache/x'; c=$(( $(ms) - t ))
	r=0
	if [ -n "${REF:-}" ]; then t=$(ms); ref run --tier microvm -- /bin/true; r=$(( $(ms) - t )); fi
	echo "$a $b $c $r"
done)
col() { echo "$rows" | awk -v k="$1" '{print $k}' | med; }
a=$(col 1); b=$(col 2); c=$(col 3); r=$(col 4)
printf '%-52s %8s %8s\n' "microvm run of /bin/true (median of $N)" "ms" "ratio"
[ -n "${REF:-}" ] && printf '%-52s %8d %8s\n' "reference build, no mount slots" "$r" "1.00"
base=${REF:+$r}
base=${base:-$a}
printf '%-52s %8d %8.2f\n' "no mount (the 8 slots present, empty)" "$a" "$(echo "$a $base" | awk '{print $1/$2}')"
printf '%-52s %8d %8.2f\n' "a base mounted read-only (1 MiB, image cached)" "$b" "$(echo "$b $base" | awk '{print $1/$2}')"
printf '%-52s %8d %8.2f\n' "a base and a workspace (written, copied back)" "$c" "$(echo "$c $base" | awk '{print $1/$2}')"
