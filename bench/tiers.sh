#!/bin/sh
# SPDX-License-Identifier: MIT
# Start-to-exit of every available backend beside its raw mechanism doing
# what kis asks of it, all rows interleaved in one run; then each tier's
# ratio to its own reference, drawn as grouped bars (build/bench/tiers.png,
# gnuplot) where gnuplot is installed.
#
# The references (bench/host.sh and bench/oci.sh say more):
#   process, landlock  plain fork/exec of /bin/true (and the same with the
#                      cgroup kis gives every native run)
#   bubblewrap         raw bwrap with kis's own argv, seccomp program, id
#                      range and staged agent (bench/refs.py)
#   oci                raw crun run of the config.json kis generates
#   wasm               wabt's wasm-interp running the same module (a
#                      `_start` that returns: Debian's wabt has no WASI, so
#                      the module imports nothing)
set -eu
cd "$(dirname "$0")/.."
mkdir -p build/bench
make -s build/bench/startup
N=${N:-100}
KIS=build/kis
store=$(mktemp -d /tmp/kis-bench-tiers-XXXXXX)
WS=""
cleanup() {
	[ -n "$WS" ] && "$KIS" sandbox destroy "$WS" >/dev/null 2>&1
	for c in $(ls "$store/state" 2>/dev/null | grep '^kisref-'); do
		crun --root "$store/state" delete -f "$c" >/dev/null 2>&1
	done
	rm -rf "$store"
}
trap cleanup EXIT INT TERM
export KIS_SANDBOX_ROOT="$store/store"
have=$($KIS sandbox backends --json | /usr/bin/python3 -c '
import json, sys
print(" ".join(b["backend"] for b in json.load(sys.stdin) if b["available"]))')
has() { case " $have " in *" $1 "*) return 0 ;; esac; return 1; }
# pairs: "kis label|reference label"
pairs="process|fork/exec_+_cgroup"
set -- "fork/exec=/bin/true" "fork/exec + cgroup=@cgroup /bin/true" \
	"process=$KIS sandbox run --tier process --allow-process-tier -- /bin/true"
if has landlock; then
	set -- "$@" "landlock=$KIS sandbox run --backend landlock -- /bin/true"
	pairs="$pairs landlock|fork/exec"
fi
if has bubblewrap; then
	set -- "$@" "raw bwrap, kis argv=$(/usr/bin/python3 bench/refs.py bwrap "$KIS" -- /bin/true)" \
		"bubblewrap=$KIS sandbox run --backend bubblewrap -- /bin/true"
	pairs="$pairs bubblewrap|raw_bwrap,_kis_argv"
fi
if has oci && command -v crun >/dev/null; then
	"$KIS" sandbox run --backend oci -- /bin/true
	set -- "$@" "raw crun, kis config=$(/usr/bin/python3 bench/refs.py crun "$KIS" "$store" -- /bin/true)" \
		"oci=$KIS sandbox run --backend oci -- /bin/true"
	pairs="$pairs oci|raw_crun,_kis_config"
fi
if has wasm && command -v wat2wasm >/dev/null && command -v wasm-interp >/dev/null; then
	mkdir -p "$store/wasm"
	printf '(module (memory 1) (export "memory" (memory 0)) (func (export "_start")))\n' > "$store/nop.wat"
	wat2wasm "$store/nop.wat" -o "$store/wasm/nop.wasm"
	WS=$("$KIS" sandbox clone "$("$KIS" sandbox base import "$store/wasm")")
	set -- "$@" "wasm-interp=wasm-interp $store/wasm/nop.wasm --run-all-exports" \
		"wasm=$KIS sandbox run --tier wasm --workspace $WS -- nop.wasm"
	pairs="$pairs wasm|wasm-interp"
else
	echo "(wasm: wabt's wat2wasm and wasm-interp are needed for its reference: row left out)"
fi
echo "load: $(uptime)"
echo "== start-to-exit of /bin/true through each backend and its reference ($N runs each, interleaved)"
build/bench/startup "$N" "$@" | tee build/bench/tiers.txt
echo "load: $(uptime)"
# label (spaces as _) and median, then each tier against its reference
awk 'NR > 1 { n = NF; lab = $1; for (i = 2; i <= n - 6; i++) lab = lab "_" $i;
	print lab, $(n - 5), $(n - 1) }' build/bench/tiers.txt > build/bench/tiers.all
echo
echo "== each tier against its reference (median ms)"
printf '%-12s %10s %-24s %10s %8s\n' tier kis reference ref ratio
: > build/bench/tiers.dat
for p in $pairs; do
	k=${p%%|*}; r=${p#*|}
	awk -v k="$k" -v r="$r" '
		$1 == k { kv = $2; kc = $3 } $1 == r { rv = $2; rc = $3 }
		END { if (kv && rv) {
			printf "%-12s %10.2f %-24s %10.2f %7.2fx\n", k, kv, r, rv, kv / rv
			printf "%s %s %s\n", k, kv, rv >> "build/bench/tiers.dat" } }' build/bench/tiers.all
done
# The engine without the exec of its command line: kis_run() from a
# long-lived process, interleaved with fork/exec of /bin/true from it
echo
echo "== kis_run() from a long-lived process (bench/librun.c: no exec of the kis CLI), $N runs"
cc -std=gnu11 -O2 -Wall -Wextra -Werror -Iinclude -o build/bench/librun bench/librun.c \
	build/libkis-sandbox.a -ljansson -lseccomp
# the library finds the agent beside the program (no variable names it)
ln -sfn ../kis-agent build/bench/kis-agent
printf '%-34s %10s %10s %8s\n' command median_ms p90_ms ratio
for b in process landlock bubblewrap oci; do
	[ "$b" = process ] || has "$b" || continue
	build/bench/librun "$N" "$b" /bin/true
done
if command -v gnuplot >/dev/null 2>&1; then
	gnuplot <<'PLOT'
set terminal pngcairo size 900,440 noenhanced
set output 'build/bench/tiers.png'
set title 'kis sandbox: start-to-exit of /bin/true, each tier beside its raw mechanism (median, ms)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.7
set ylabel 'ms'
set yrange [0:*]
set grid ytics
plot 'build/bench/tiers.dat' using 3:xtic(1) title 'raw mechanism, same configuration', \
     '' using 2 title 'kis'
PLOT
	echo "plot: build/bench/tiers.png"
fi
