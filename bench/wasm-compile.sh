#!/bin/sh
# SPDX-License-Identifier: MIT
# The wasm compiler's cold compile time on real programs, at both tiers
# (src/wasm/jit.h: opt, the optimising tier a compiling run gets; fast, the
# first tier of tier-up), and what each tier's code then costs a run.
# The modules are bench/wasm-real.sh's (Lua 5.4, bzip2, SQLite's
# speedtest1, a WASI hello world: run it once first, it builds them into
# WORK). Each compile runs in this process (build/kis-jit-time, the plugin
# dlopen'ed as kis-helper does, on THREADS threads), the fastest of ROUNDS;
# the figure that load on shared cores disturbs least is the CPU time,
# printed beside the wall time. Then the three programs run through the
# tier from a cache filled at each tier (one store per tier), the tiers
# interleaved in each of RUNS rounds: CPU of the run (user + sys, the
# tier's child included, from --json), the median, and fast / opt.
# The mixed tier (jit.h: what ran hot at opt, the rest at fast) needs the
# interpreter's profile of a run: its store is filled the way tier-up
# fills it, by one interpreted run of each program under the default
# engine, whose background compile writes mixed code when the run ended
# (the seconds from the run's end until then are printed: the cold
# compile as a user waits for it, niced, on this machine's load); its code
# then runs beside the others', and native beside all (GNU time).
# PROFS=lua,bzip2,sqlite count files (one count per defined function a
# line) also time the mixed compile alone in this process.
#
# Usage: bench/wasm-compile.sh [BUILD]   ROUNDS=1 RUNS=5 THREADS=1 WORK=/var/tmp/kis-bench-wasm PROFS=
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ROUNDS=${ROUNDS:-1}
RUNS=${RUNS:-5}
THREADS=${THREADS:-1}
WORK=${WORK:-/var/tmp/kis-bench-wasm}
KIS=$(pwd)/$BUILD/kis
[ -x "$KIS" ] && [ -f "$BUILD/libkis-jit.so" ] ||
	{ echo "wasm-compile: skipped, $BUILD/kis or its compiler plugin not built (run make)"; exit 0; }
[ -f "$WORK/bin/lua.wasm" ] ||
	{ echo "wasm-compile: skipped, no modules in $WORK/bin (run bench/wasm-real.sh once)"; exit 0; }
# the timer, beside the plugin (jit_load.c looks beside the program)
cc -std=gnu11 -D_GNU_SOURCE -O2 -Iinclude -Isrc -o "$BUILD/kis-jit-time" bench/wasm/jit_time.c \
	"$BUILD/libkis-sandbox.a" -ljansson -lseccomp -ldl -lm -lpthread
MODS=""
for m in hello lua bzip2 speedtest1; do
	[ -f "$WORK/bin/$m.wasm" ] && MODS="$MODS $WORK/bin/$m.wasm"
done
for t in opt fast; do
	echo "== tier $t (ROUNDS=$ROUNDS THREADS=$THREADS, load average $(cut -d' ' -f1 /proc/loadavg))"
	# shellcheck disable=SC2086
	ROUNDS=$ROUNDS THREADS=$THREADS "$BUILD/kis-jit-time" --tier $t $MODS
done
if [ -n "${PROFS:-}" ]; then
	echo "== tier mixed, profiles $PROFS (ROUNDS=$ROUNDS THREADS=$THREADS, load average $(cut -d' ' -f1 /proc/loadavg))"
	PROF=$PROFS ROUNDS=$ROUNDS THREADS=$THREADS "$BUILD/kis-jit-time" --tier mixed \
		"$WORK/bin/lua.wasm" "$WORK/bin/bzip2.wasm" "$WORK/bin/speedtest1.wasm"
fi
TIERS="opt fast mixed"

OUT=$(mktemp -d /tmp/kis-wasm-compile.XXXXXX)
cleanup() {
	for t in opt fast mixed; do
		[ -s "$OUT/ws-$t" ] || continue
		KIS_SANDBOX_ROOT="$OUT/store-$t" "$KIS" sandbox destroy "$(cat "$OUT/ws-$t")" >/dev/null 2>&1 || true
	done
	rm -rf "$OUT"
}
trap cleanup EXIT INT TERM
mkdir -p "$OUT/base"
cp "$WORK/bin/lua.wasm" "$WORK/bin/bzip2.wasm" "$WORK/bin/speedtest1.wasm" bench/wasm-real/mixed.lua "$OUT/base/"
# bzip2's input, as bench/wasm-real.sh's: the first 4 MB of SQLite's amalgamation
SQ=$(ls "$WORK"/src/sqlite3-*/bld/sqlite3.c 2>/dev/null | head -1)
[ -n "$SQ" ] || { echo "wasm-compile: no SQLite amalgamation in $WORK/src (run bench/wasm-real.sh once)"; exit 0; }
head -c 4000000 "$SQ" > "$OUT/bz.in"
# one store per tier, its cache filled at that tier only
for t in opt fast mixed; do
	export KIS_SANDBOX_ROOT="$OUT/store-$t"
	base=$("$KIS" sandbox base import "$OUT/base")
	"$KIS" sandbox clone "$base" > "$OUT/ws-$t"
	[ $t = mixed ] && continue
	PUT="$KIS_SANDBOX_ROOT" THREADS=$THREADS "$BUILD/kis-jit-time" --tier $t "$WORK/bin/lua.wasm" \
		"$WORK/bin/bzip2.wasm" "$WORK/bin/speedtest1.wasm" >/dev/null
done
# the mixed store: a first run under auto each, then its tier-up
echo "== tier-up to the mixed tier: the first run (interpreted), then the wait for the cache"
printf '%-8s %12s %14s %6s\n' program run_wall_ms ready_after_ms tier
for p in lua bzip2 sqlite; do
	export KIS_SANDBOX_ROOT="$OUT/store-mixed"
	case $p in
	lua) set -- lua.wasm mixed.lua; in=/dev/null ;;
	bzip2) set -- bzip2.wasm -9 -c; in=$OUT/bz.in ;;
	sqlite) set -- speedtest1.wasm --memdb --size 8; in=/dev/null ;;
	esac
	w=$("$KIS" sandbox run --json --tier wasm --workspace "$(cat "$OUT/ws-mixed")" -- "$@" < "$in" |
		python3 -c 'import re,sys
s = sys.stdin.buffer.read().decode("latin-1")
print(re.search(r"\"wall_ms\":(\d+)", s).group(1))')
	t0=$(date +%s%N)
	# the claim (<hash>.pending) goes when the background compile ends
	while ls "$KIS_SANDBOX_ROOT"/cache/wasm-code/*.pending >/dev/null 2>&1; do sleep 0.05; done
	t1=$(date +%s%N)
	# "KISJIT2\n", then the tier as a u32 (jit_cache.c): the newest file
	f=$(ls -t "$KIS_SANDBOX_ROOT"/cache/wasm-code/*.o | head -1)
	printf '%-8s %12s %14s %6s\n' $p "$w" $(((t1 - t0) / 1000000)) "$(od -A n -t u4 -j 8 -N 4 "$f" | tr -d ' ')"
done
run_cpu() { # $1 tier, $2 program: "cpu_ms code" of one run from that tier's store
	export KIS_SANDBOX_ROOT="$OUT/store-$1"
	ws=$(cat "$OUT/ws-$1")
	case $2 in
	lua) set -- lua.wasm mixed.lua; in=/dev/null ;;
	bzip2) set -- bzip2.wasm -9 -c; in=$OUT/bz.in ;;
	sqlite) set -- speedtest1.wasm --memdb --size 8; in=/dev/null ;;
	esac
	"$KIS" sandbox run --json --tier wasm --wasm-engine compiler --workspace "$ws" -- "$@" \
		< "$in" | python3 -c 'import re,sys
s = sys.stdin.buffer.read().decode("latin-1")  # bzip2 -c writes binary into the JSON
g = lambda k: re.search(k, s).group(1)
print(int(g(r"\"user_ms\":(\d+)")) + int(g(r"\"sys_ms\":(\d+)")), g(r"\"code\":\"?(\w+)"),
      g(r"\"exit_status\":(\w+)"))'
}
: > "$OUT/times"
echo "== through the tier from the cache, CPU ms (user + sys), median of $RUNS interleaved rounds"
echo "   (load average $(cut -d' ' -f1 /proc/loadavg) at the start)"
r=0
while [ $r -lt "$RUNS" ]; do
	for p in lua bzip2 sqlite; do
		(cd "$OUT/base" && case $p in
		lua) /usr/bin/time -f "%U %S" -o "$OUT/nt" "$WORK/bin/lua.native" mixed.lua ;;
		bzip2) /usr/bin/time -f "%U %S" -o "$OUT/nt" "$WORK/bin/bzip2.native" -9 -c < "$OUT/bz.in" ;;
		sqlite) /usr/bin/time -f "%U %S" -o "$OUT/nt" "$WORK/bin/speedtest1.native" --memdb --size 8 ;;
		esac >/dev/null)
		echo "$p native $(awk '{ printf "%d", ($1 + $2) * 1000 }' "$OUT/nt")" >> "$OUT/times"
		for t in $TIERS; do
			# shellcheck disable=SC2046
			set -- $(run_cpu $t $p)
			[ "$2" = cached ] && [ "$3" = 0 ] ||
				{ echo "wasm-compile: $p at tier $t: code $2, exit $3 (expected cached, 0)" >&2; exit 1; }
			echo "$p $t $1" >> "$OUT/times"
		done
	done
	r=$((r + 1))
done
printf '%-8s %9s %8s %8s %8s %9s %9s %10s %10s\n' program native_ms opt_ms fast_ms mixed_ms \
	fast/opt mixed/opt opt/native mixed/nat
awk '{ v[$1 " " $2] = v[$1 " " $2] " " $3 }
END {
	split("lua bzip2 sqlite", ps, " ")
	for (i = 1; i <= 3; i++) {
		n = med(v[ps[i] " native"]); o = med(v[ps[i] " opt"]); f = med(v[ps[i] " fast"])
		x = med(v[ps[i] " mixed"])
		printf "%-8s %9d %8d %8d %8d %8.2fx %8.2fx %9.2fx %9.2fx\n", ps[i], n, o, f, x, f / o, x / o, \
			o / n, x / n
	}
}
function med(s,   a, n, j, k, t) {
	n = split(s, a, " ")
	for (j = 1; j <= n; j++) for (k = j + 1; k <= n; k++) if (a[k] < a[j]) { t = a[j]; a[j] = a[k]; a[k] = t }
	return a[int((n + 1) / 2)]
}' "$OUT/times"
echo "   (load average $(cut -d' ' -f1 /proc/loadavg) at the end)"
