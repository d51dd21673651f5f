#!/bin/sh
# SPDX-License-Identifier: MIT
# Throughput: one-shot runs of /bin/true per second, per tier, at 1, 2, 4
# and 8 parallel clients (each client runs the command back to back), kis
# against its raw mechanism doing what kis asks of it; ratios at each
# client count, a plot in build/bench/throughput.png (gnuplot).
# Usage: sh bench/throughput.sh [SECONDS_PER_POINT]   (QUICK=1: 1 s, one round)
# BEFORE=DIR/kis (a kis with its kis-agent beside it, e.g. a copy of an
# earlier build) adds a "before" line per tier, measured in the same rounds.
#
# The references (bench/startup.c's recipes, bench/refs.py):
#   landlock    fork/exec of /bin/true (no confinement at all: the target
#               of the landlock tier is a ratio to it)
#   bubblewrap  raw bwrap with kis's argv, seccomp program, id range and
#               staged agent
#   container   raw crun run of the config.json kis generates, in the
#               sandbox's user namespace made as kis makes it
#   wasm        wabt's wasm-interp running the same module (imports nothing:
#               Debian's wabt has no WASI)
# Every point of every command is measured in slices interleaved with the
# others (ROUNDS rounds, order alternating), so a change of load on this
# shared machine falls on all of them alike; the load is printed before
# and after.
set -eu
cd "$(dirname "$0")/.."
REPO=$(pwd)
# the timer, and the price of one more process image (mk/bench.mk)
make -s bench-tools
SECS=${1:-${SECS:-4}}
ROUNDS=${ROUNDS:-2}
if [ -n "${QUICK:-}" ]; then SECS=1; ROUNDS=1; fi
CLIENTS=${CLIENTS:-1,2,4,8}
KIS=$REPO/build/kis
[ -x "$KIS" ] || { echo "bench/throughput.sh: build/kis is missing; run make" >&2; exit 1; }
WORK=$(mktemp -d /tmp/kis-bench-tput-XXXXXX)
WS=""
cleanup() {
	set +e
	[ -n "$WS" ] && "$KIS" sandbox destroy "$WS" >/dev/null 2>&1
	for c in $(ls "$WORK/state" 2>/dev/null | grep '^kisref-'); do
		crun --root "$WORK/state" delete -f "$c" >/dev/null 2>&1
	done
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
export KIS_SANDBOX_ROOT="$WORK/store"
have=$($KIS sandbox backends --json | /usr/bin/python3 -c '
import json, sys
print(" ".join(b["backend"] for b in json.load(sys.stdin) if b["available"]))')
has() { case " $have " in *" $1 "*) return 0 ;; esac; return 1; }
set --
tiers=""
if has landlock; then
	set -- "$@" "landlock: fork/exec=/bin/true" "landlock: kis=$KIS sandbox run --backend landlock -- /bin/true"
	[ -n "${BEFORE:-}" ] && set -- "$@" "landlock: before=$BEFORE sandbox run --backend landlock -- /bin/true"
	tiers="$tiers landlock"
fi
if has bubblewrap; then
	set -- "$@" "bubblewrap: raw bwrap=$(/usr/bin/python3 bench/refs.py bwrap "$KIS" -- /bin/true)" \
		"bubblewrap: kis=$KIS sandbox run --backend bubblewrap -- /bin/true"
	[ -n "${BEFORE:-}" ] && set -- "$@" "bubblewrap: before=$BEFORE sandbox run --backend bubblewrap -- /bin/true"
	tiers="$tiers bubblewrap"
fi
if has oci && command -v crun >/dev/null; then
	"$KIS" sandbox run --backend oci -- /bin/true
	set -- "$@" "container: raw crun=$(/usr/bin/python3 bench/refs.py crun "$KIS" "$WORK" -- /bin/true)" \
		"container: kis=$KIS sandbox run --backend oci -- /bin/true"
	[ -n "${BEFORE:-}" ] && set -- "$@" "container: before=$BEFORE sandbox run --backend oci -- /bin/true"
	tiers="$tiers container"
fi
if has wasm && command -v wat2wasm >/dev/null && command -v wasm-interp >/dev/null; then
	mkdir -p "$WORK/wasm"
	printf '(module (memory 1) (export "memory" (memory 0)) (func (export "_start")))\n' > "$WORK/nop.wat"
	wat2wasm "$WORK/nop.wat" -o "$WORK/wasm/nop.wasm"
	WS=$("$KIS" sandbox clone "$("$KIS" sandbox base import "$WORK/wasm")")
	set -- "$@" "wasm: wasm-interp=wasm-interp $WORK/wasm/nop.wasm --run-all-exports" \
		"wasm: kis=$KIS sandbox run --tier wasm --workspace $WS -- nop.wasm"
	tiers="$tiers wasm"
else
	echo "(wasm: wabt's wat2wasm and wasm-interp are needed for the reference: tier left out)"
fi
# the floor: at full load a run's price is its CPU, so the most runs per
# second kis can make is the reference's with K more images in each run
# (kis; inside bwrap and crun the agent too), priced by this row
set -- "$@" "image: an empty static glibc program=build/bench/empty-glibc"
echo "load: $(uptime)"
echo "== runs per second of /bin/true, $SECS s per point in $ROUNDS interleaved rounds, clients $CLIENTS"
build/bench/startup -c "$CLIENTS" -t "$SECS" -r "$ROUNDS" -o build/bench/throughput.raw "$@" \
	> "$WORK/table"
cat "$WORK/table"
echo "load: $(uptime)"
# kis against its own reference at each client count
printf '%-11s %7s %12s %12s %8s %8s %13s %8s\n' tier clients "kis runs/s" "raw runs/s" ratio \
	floor "before runs/s" ratio
: > build/bench/throughput.dat
for t in $tiers; do
	case $t in landlock) k=1 ;; bubblewrap | container) k=2 ;; *) k=0 ;; esac
	awk -v t="$t" -v k="$k" -v busy="$(( $(nproc) * 2 ))" -F'"' '
		$2 ~ "^image: " { split($3, f, " "); img[f[1]] = f[2] }
		$2 ~ "^" t ": " { split($3, f, " "); c = f[1]; v = f[2]
			if ($2 ~ ": kis$") kis[c] = v; else if ($2 ~ ": before$") bef[c] = v
			else raw[c] = v; cs[c] = 1 }
		END { for (c in cs) if (kis[c] && raw[c]) {
			printf "%-11s %7d %12.1f %12.1f %7.2fx", t, c, kis[c], raw[c], kis[c] / raw[c]
			# floor: 1 / (1/raw + k/image), as a ratio to raw, where
			# the clients keep every CPU busy (then a run costs its CPU)
			if (k && img[c] && c >= busy) printf " %7.2fx", 1 / (1 + k * raw[c] / img[c])
			else printf " %8s", "-"
			if (bef[c]) printf " %13.1f %7.2fx", bef[c], bef[c] / raw[c]
			printf "\n" } }' \
		build/bench/throughput.raw | sort -k2,2n | tee -a build/bench/throughput.dat
done
echo "floor: the reference's rate with K empty glibc images more per run (landlock 1: kis;"
echo "bubblewrap and container 2: kis and the agent), each priced by the image row at that load;"
echo "shown where the clients keep every CPU busy (at least twice the CPUs), where a run costs its CPU"
if command -v gnuplot >/dev/null 2>&1 && [ -n "$tiers" ]; then
	{
		echo "set terminal pngcairo size 1000,720 noenhanced"
		echo "set output 'build/bench/throughput.png'"
		echo "set multiplot layout 2,2 title 'kis sandbox: runs of /bin/true per second, kis and its raw mechanism ($(uptime | sed 's/.*load/load/'))'"
		echo "set xlabel 'parallel clients'; set ylabel 'runs/s'; set logscale x 2; set xtics (1,2,4,8)"
		echo "set xrange [0.8:10]; set yrange [0:*]; set grid; set key right bottom"
		for t in $tiers; do
			echo "set title '$t'"
			echo "plot 'build/bench/throughput.dat' using (strcol(1) eq '$t' ? \$2 : 1/0):4 with linespoints lw 2 title 'raw mechanism', \\"
			if [ "$t" = wasm ]; then
				echo "     '' using (strcol(1) eq '$t' ? \$2 : 1/0):3 with linespoints lw 2 title 'kis'"
			else
				echo "     '' using (strcol(1) eq '$t' ? \$2 : 1/0):3 with linespoints lw 2 title 'kis', \\"
				echo "     '' using (strcol(1) eq '$t' ? \$2 : 1/0):(strcol(6) eq '-' ? 1/0 : \$4 * real(substr(strcol(6), 1, strlen(strcol(6)) - 1))) with lines dt 2 lw 2 title 'floor: raw + the images kis adds'"
			fi
		done
		echo "unset multiplot"
	} | gnuplot
	echo "plot: build/bench/throughput.png"
fi
