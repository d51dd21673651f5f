#!/bin/sh
# SPDX-License-Identifier: MIT
# The microvm tier: cold boot vs snapshot restore to the guest's first
# reply, start-to-exit of /bin/true through `kis sandbox run --tier microvm`,
# the host memory one VM costs, beside a bare QEMU microvm boot of the same
# kernel to init and the process tier. Figures, not assertions.
set -eu
cd "$(dirname "$0")/.."
N=${N:-5}
GUEST=${KIS_MICROVM_GUEST_DIR:-$PWD/build/microvm-guest}
if ! command -v qemu-system-x86_64 >/dev/null || ! scripts/guest/fetch-kernel.sh "$GUEST"; then
	echo "microvm: skipped (no qemu-system-x86_64 or no guest kernel)"
	exit 0
fi
export KIS_MICROVM_GUEST_DIR="$GUEST"
STORE=$(mktemp -d)
export KIS_SANDBOX_ROOT="$STORE"
trap 'for s in $(ls "$STORE/sessions" 2>/dev/null); do build/kis sandbox session destroy "$s" >/dev/null 2>&1 || true; done; rm -rf "$STORE" "$BARE"' EXIT
BARE=$(mktemp -d)
ms() { echo $(( $(date +%s%N) / 1000000 )); }
KIS=build/kis
# warm: initramfs, accelerator verdict, snapshot
$KIS sandbox run --tier microvm -- true
# phase times from the backend's trace: "qemu started" to "guest answered"
phase() { # phase NOSNAP -> ms from QEMU's start to the guest's first reply
	out=$(env ${1:+KIS_MICROVM_NO_SNAPSHOT=1} KIS_LOG=debug $KIS sandbox run --tier microvm -- true 2>&1 >/dev/null)
	s=$(echo "$out" | sed -n 's/^.* debug: microvm: *\([0-9]*\) ms qemu started.*/\1/p')
	a=$(echo "$out" | sed -n 's/^.* debug: microvm: *\([0-9]*\) ms guest answered/\1/p')
	echo $((a - s))
}
med() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
warm=$(for i in $(seq "$N"); do phase ""; done | med)
runs=$(for i in $(seq "$N"); do t=$(ms); $KIS sandbox run --tier microvm -- /bin/true; echo $(( $(ms) - t )); done | med)
proc=$(for i in $(seq "$N"); do t=$(ms); $KIS sandbox run --tier process --allow-process-tier -- /bin/true; echo $(( $(ms) - t )); done | med)
# bare QEMU: the same kernel, an initramfs whose init powers off at once
mkdir -p "$BARE/r/bin"
cp "$GUEST/busybox" "$BARE/r/bin/busybox"
printf '#!/bin/busybox sh\n/bin/busybox poweroff -f\n' > "$BARE/r/init"
chmod 0755 "$BARE/r/init"
(cd "$BARE/r" && find . | cpio -o -H newc --quiet > "$BARE/init.cpio")
ACCEL=$(cat "$GUEST/accel" 2>/dev/null || echo tcg)
TSC=$(cat "$GUEST/tsc_khz" 2>/dev/null || echo 1000000)
bare_boot() {
	t=$(ms); qemu-system-x86_64 -M microvm,rtc=on -accel "$ACCEL" \
	-m 1024M -nodefaults -no-user-config -display none -serial none -no-reboot \
	-kernel "$GUEST/vmlinuz" -initrd "$BARE/init.cpio" -append "quiet panic=-1 tsc_early_khz=$TSC" \
	</dev/null >/dev/null 2>&1; echo $(( $(ms) - t ))
}
# cold boots through the engine and bare boots interleaved, so that the
# load of a shared machine falls on both alike; the overhead is the median
# of the pairs' ratios
pairs=$(for i in $(seq "$N"); do c=$(phase 1); b=$(bare_boot); echo "$c $b"; done)
cold=$(echo "$pairs" | awk '{print $1}' | med)
bare=$(echo "$pairs" | awk '{print $2}' | med)
ratio=$(echo "$pairs" | awk '{printf "%.4f\n", $1 / $2}' | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
# copy-on-write: start-to-exit with a workspace cloned from bases of three
# sizes; the base's image is made by the first run of each (shown apart)
# and shared by every later workspace of that base
cow_rows=""
for mib in 1 100 1024; do
	mkdir -p "$BARE/base$mib"
	head -c $((mib * 1048576)) /dev/urandom > "$BARE/base$mib/data"
	b=$($KIS sandbox base import "$BARE/base$mib")
	t=$(ms); $KIS sandbox run --tier microvm --base "$b" -- /bin/true; first=$(( $(ms) - t ))
	m=$(for i in $(seq "$N"); do t=$(ms); $KIS sandbox run --tier microvm --base "$b" -- /bin/true; echo $(( $(ms) - t )); done | med)
	cow_rows="$cow_rows$(printf '%-46s %8d   (first run, making the base image: %d)' "kis run --base (${mib} MiB base) -- /bin/true" "$m" "$first")
"
	rm -rf "$BARE/base$mib"
done
# host memory of one VM: QEMU's resident set in a session after one exec
sid=$($KIS sandbox create --tier microvm)
$KIS sandbox exec "$sid" -- true
pid=$($KIS sandbox session list --json | sed -n 's/.*"agent_pid": *\([0-9]*\).*/\1/p' | head -n1)
rss=$(awk '/^VmRSS/ {print int($2/1024)}' "/proc/$pid/status")
$KIS sandbox session destroy "$sid"
printf '%-46s %8s\n' "microvm ($ACCEL, 1 GiB guest, median of $N)" "ms"
printf '%-46s %8d\n' "cold boot to first reply" "$cold"
printf '%-46s %8d   (%d%% of a cold boot)\n' "snapshot restore to first reply" "$warm" $((100 * warm / (cold > 0 ? cold : 1)))
printf '%-46s %8d   (engine overhead on a cold boot: %+.0f%%, median of paired ratios)\n' "bare qemu microvm boot to init (poweroff)" "$bare" "$(echo "$ratio" | awk '{print ($1 - 1) * 100}')"
printf '%-46s %8d   (%.2fx bare qemu boot)\n' "kis run --tier microvm -- /bin/true" "$runs" "$(echo "$runs $bare" | awk '{print $1/$2}')"
printf '%s' "$cow_rows"
printf '%-46s %8d\n' "kis run --tier process -- /bin/true" "$proc"
printf '%-46s %8d MiB\n' "host memory of one VM (QEMU RSS)" "$rss"
