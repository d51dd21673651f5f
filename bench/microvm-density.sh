#!/bin/sh
# SPDX-License-Identifier: MIT
# The microvm tier at density: N idle 1 GiB-guest sessions (N = 1, 10, 50,
# 100), host memory per VM (QEMU's PSS, and the drop in MemAvailable),
# creation time per session, exec latency into the first and the Nth, the
# idle CPU of the N VMs (QEMU and each session's broker, over IDLE_S
# seconds), and restore to first reply jailed against unjailed: the same
# engine, build/bench/kis-unjailed (mk/bench.mk; its unjailed mode exists
# in no other build), paired run by run, beside a bare QEMU restoring the
# same snapshot. Run beside an earlier engine (BEFORE=<commit>, default the
# branch point of issue 13; BEFORE= to skip), in the same run. Stops adding
# sessions when the host's memory in use passes 60%, and removes every
# session it made. Figures, not assertions.
set -eu
cd "$(dirname "$0")/.."
NS=${NS:-"1 10 50 100"}
# the engine before idles at ~8% of a core per VM (periodic guest ticks):
# 100 of them would starve this 2-core machine's other users
NS_BEFORE=${NS_BEFORE:-"1 10 50"}
REPS=${REPS:-7}
IDLE_S=${IDLE_S:-10}
BEFORE=${BEFORE-1096274}
GUEST=${KIS_MICROVM_GUEST_DIR:-$PWD/build/microvm-guest}
if ! command -v qemu-system-x86_64 >/dev/null || ! scripts/guest/fetch-kernel.sh "$GUEST" >/dev/null; then
	echo "microvm-density: skipped (no qemu-system-x86_64 or no guest kernel)"
	exit 0
fi
WORK=$(mktemp -d)
STORES=""
cleanup() {
	for st in $STORES; do
		for s in $(ls "$st/sessions" 2>/dev/null); do
			KIS_SANDBOX_ROOT=$st "$WORK/bin-$(basename "$st")/kis" sandbox session destroy "$s" >/dev/null 2>&1 || true
		done
	done
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
ms() { echo $(( $(date +%s%N) / 1000000 )); }
med() { sort -n | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print 0}'; }
memavail() { awk '/^MemAvailable:/ {print int($2/1024)}' /proc/meminfo; }
memtotal() { awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo; }

# the engines: this tree's, and the one before the change built from git
mkdir -p "$WORK/bin-after" "$WORK/bin-before"
make -s build/bench/kis-unjailed >/dev/null
# beside the same agent: one stamp, one snapshot for both
cp build/kis build/kis-agent build/bench/kis-unjailed "$WORK/bin-after/"
BUILDS="after"
if [ -n "$BEFORE" ] && git cat-file -e "$BEFORE^{commit}" 2>/dev/null; then
	mkdir -p "$WORK/src-before"
	git archive "$BEFORE" | tar -x -C "$WORK/src-before"
	if make -C "$WORK/src-before" -j2 build/kis build/kis-agent >/dev/null 2>&1; then
		cp "$WORK/src-before/build/kis" "$WORK/src-before/build/kis-agent" "$WORK/bin-before/"
		# its own guest cache: its initramfs and snapshots have other stamps
		mkdir -p "$WORK/guest-before"
		cp -r "$GUEST/vmlinuz" "$GUEST/modules" "$GUEST/busybox" "$GUEST/kernel.release" \
			"$WORK/guest-before/"
		for f in accel tsc_khz; do [ -f "$GUEST/$f" ] && cp "$GUEST/$f" "$WORK/guest-before/"; done
		BUILDS="before after"
	fi
fi
guest_of() { if [ "$1" = before ]; then echo "$WORK/guest-before"; else echo "$GUEST"; fi; }

pids_of() { # the QEMU pids of a store's sessions
	KIS_SANDBOX_ROOT=$1 "$2" sandbox session list --json | sed -n 's/.*"agent_pid": *\([0-9]*\).*/\1/p'
}
brokers_of() { # each session's port broker (microvm/mux.c): its fd 4 is the session's directory
	for f in /proc/[0-9]*/fd/4; do
		case $(readlink "$f" 2>/dev/null) in "$1"/sessions/*) p=${f#/proc/}; echo "${p%%/*}" ;; esac
	done
}
ticks() { # CPU ticks of the pids on stdin
	while read -r p; do awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null; done | awk '{s+=$1} END {print s+0}'
}
pss_sum() { # MiB of PSS over the pids on stdin
	t=0; while read -r p; do
		v=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
		t=$((t + ${v:-0})); done; echo $((t / 1024))
}
restore_ms() { # engine: from the disks made to the guest's first reply
	out=$(KIS_MICROVM_GUEST_DIR=$2 KIS_SANDBOX_ROOT=$3 KIS_LOG=debug ${4:-} "$1" sandbox run --tier microvm -- true 2>&1 >/dev/null)
	s=$(echo "$out" | sed -n 's/^.* debug: microvm: *\([0-9]*\) ms disks made/\1/p')
	a=$(echo "$out" | sed -n 's/^.* debug: microvm: *\([0-9]*\) ms guest answered/\1/p')
	echo $((a - s))
}

jail_ms() { # engine: the jail's own steps, from its cgroup to QEMU's exec
	out=$(KIS_MICROVM_GUEST_DIR=$2 KIS_SANDBOX_ROOT=$3 KIS_LOG=debug "$1" sandbox run --tier microvm -- true 2>&1 >/dev/null)
	s=$(echo "$out" | sed -n 's/^.* debug: microvm: *\([0-9]*\) ms disks made/\1/p')
	j0=$(echo "$out" | sed -n 's/^.* debug: microvm: *\([0-9]*\) ms jail: start/\1/p')
	j1=$(echo "$out" | sed -n "s/^.* debug: microvm: *\\([0-9]*\\) ms jail: vmm exec'd/\\1/p")
	a=$(echo "$out" | sed -n 's/^.* debug: microvm: *\([0-9]*\) ms guest answered/\1/p')
	[ -n "$j0" ] && [ -n "$j1" ] && echo "$((j1 - j0)) $((a - s))"
}

TOTAL=$(memtotal)
LIMIT=$((TOTAL * 60 / 100))
printf 'microvm density (%s, 1 GiB guests, 2 cores shared; memory stop at 60%% of %d MiB)\n' \
	"$(cat "$GUEST/accel" 2>/dev/null || echo tcg)" "$TOTAL"
echo "(MemAvail/VM includes the shared snapshot RAM, ~140 MiB, spread over N; CPU idle: all N VMs with their brokers over ${IDLE_S} s, % of one core, and per VM)"
printf '%-7s %5s %10s %12s %11s %10s %10s %9s %8s\n' build N "PSS/VM" "MemAvail/VM" "create/s" \
	"exec 1st" "exec Nth" "CPU idle" "per VM"
ROWS=""
for b in $BUILDS; do
	K="$WORK/bin-$b/kis"
	G=$(guest_of "$b")
	ST="$WORK/$b"
	mkdir -p "$ST"
	STORES="$STORES $ST"
	export KIS_MICROVM_GUEST_DIR="$G" KIS_SANDBOX_ROOT="$ST"
	$K sandbox run --tier microvm -- true >/dev/null # warm: initramfs, snapshot
	sync; sleep 1
	base=$(memavail)
	have=0; made_ms=0; stopped=""
	ns=$NS; [ "$b" = before ] && ns=$NS_BEFORE
	for n in $ns; do
		t_batch=0; k_batch=0
		while [ "$have" -lt "$n" ]; do
			used=$((TOTAL - $(memavail)))
			if [ "$used" -ge "$LIMIT" ]; then stopped="stopped at $have: memory in use ${used} MiB"; break; fi
			t=$(ms); sid=$($K sandbox create --tier microvm); dt=$(( $(ms) - t ))
			[ "$have" -eq 0 ] && first=$sid
			last=$sid; have=$((have + 1)); t_batch=$((t_batch + dt)); k_batch=$((k_batch + 1))
		done
		[ "$k_batch" -gt 0 ] || break
		sleep 2 # idle: let the guests settle
		e1=$(for i in $(seq 3); do t=$(ms); $K sandbox exec "$first" -- true; echo $(( $(ms) - t )); done | med)
		eN=$(for i in $(seq 3); do t=$(ms); $K sandbox exec "$last" -- true; echo $(( $(ms) - t )); done | med)
		pss=$(pids_of "$ST" "$K" | pss_sum)
		drop=$((base - $(memavail)))
		# CPU of the idle VMs and their brokers over IDLE_S s, % of one core
		sleep 3 # the execs' own aftermath
		vp=$( (pids_of "$ST" "$K"; brokers_of "$ST") | sort -u)
		c0=$(echo "$vp" | ticks)
		sleep "$IDLE_S"
		c1=$(echo "$vp" | ticks)
		cpu=$(echo "$c1 $c0 $(getconf CLK_TCK) $IDLE_S $have" | awk '{printf "%.1f %.2f", ($1-$2)*100/$3/$4, ($1-$2)*100/$3/$4/$5}')
		row=$(printf '%-7s %5d %7d MiB %8d MiB %9.2f s %7d ms %7d ms %8s%% %7s%%' "$b" "$have" \
			$((pss / have)) $((drop / have)) "$(echo "$t_batch $k_batch" | awk '{print $1/$2/1000}')" \
			"$e1" "$eN" ${cpu% *} ${cpu#* })
		echo "$row"
		ROWS="$ROWS$row
"
		[ -z "$stopped" ] || { echo "        ($b: $stopped)"; break; }
	done
	# restore to first reply with one session of this build left up (the
	# engine finds a live VM's guest RAM, as it does at density), the
	# others gone so that idle VMs do not load the machine
	for s in $(ls "$ST/sessions" 2>/dev/null); do
		[ "$s" = "$first" ] || $K sandbox session destroy "$s" >/dev/null 2>&1 || true
	done
	sleep 1
	r=$(for i in $(seq "$REPS"); do restore_ms "$K" "$G" "$ST"; done | med)
	eval "restore_$b=$r"
	# the jail's cost: the same engine jailed (kis) and unjailed
	# (kis-unjailed with its switch), and a bare QEMU restoring the same
	# snapshot, interleaved run by run (after only: before had no jail)
	if [ "$b" = after ]; then
		U="$WORK/bin-after/kis-unjailed"
		pairs=$(for i in $(seq "$REPS"); do
			j=$(restore_ms "$K" "$G" "$ST")
			n=$(restore_ms "$U" "$G" "$ST" "env KIS_MICROVM_BENCH_UNJAILED=1")
			u=$(/usr/bin/python3 bench/microvm_bare_restore.py "$G" 1024 1)
			echo "$j $n $u"; done)
		jailed=$(echo "$pairs" | awk '{print $1}' | med)
		unjailed=$(echo "$pairs" | awk '{print $2}' | med)
		# the median of the per-pair ratios: each pair ran back to back
		ratio=$(echo "$pairs" | awk '$2 > 0 {print $1 / $2}' | sort -n |
			awk '{v[NR]=$1} END {if (NR) printf "%.3f", v[int((NR+1)/2)]; else print "-"}')
		bare=$(echo "$pairs" | awk '{print $3}' | med)
		# the jail's own steps inside the engine's restore, same runs' kind
		jsteps=$(for i in $(seq "$REPS"); do jail_ms "$K" "$G" "$ST"; done)
		jail_own=$(echo "$jsteps" | awk '{print $1}' | med)
		jail_of=$(echo "$jsteps" | awk '{print $2}' | med)
	fi
	for s in $(ls "$ST/sessions" 2>/dev/null); do $K sandbox session destroy "$s" >/dev/null 2>&1 || true; done
done
echo
printf '%-52s %6s\n' "restore to first reply (median of $REPS)" ms
[ -n "${restore_before:-}" ] && printf '%-52s %6d\n' "before ($BEFORE; 1096274: unjailed, RAM from the stream)" "$restore_before"
printf '%-52s %6d\n' "after (jailed, copy-on-write RAM)" "$restore_after"
printf '%-52s %6d\n' "jailed engine restore (kis), paired" "$jailed"
printf '%-52s %6d   (jailed/unjailed, median of the pairs: %s; target <= 1.10)\n' \
	"the same engine unjailed (kis-unjailed, bench only)" "$unjailed" "$ratio"
printf '%-52s %6d   (jail + engine: %+d%%)\n' "bare QEMU restore, no jail, same snapshot" "$bare" \
	$(( bare > 0 ? (jailed - bare) * 100 / bare : 0 ))
[ -n "${jail_own:-}" ] && printf '%-52s %6d   (%d%% of a %d ms restore; the rest of the gap is the engine: disks, sockets, QMP)\n' \
	"the jail's own steps (cgroup, seccomp, clone, mounts, pivot_root, uid, exec)" "$jail_own" \
	$(( jail_of > 0 ? jail_own * 100 / jail_of : 0 )) "$jail_of"
