#!/bin/sh
# SPDX-License-Identifier: MIT
# The wasm compiler's cold compile time on real programs, at both tiers
# (src/wasm/jit.h: opt, the -O1 pipeline a compiling run gets; fast, the
# first tier of tier-up), and what each tier's code then costs a run.
# The modules are bench/wasm-real.sh's (Lua 5.4, bzip2, SQLite's
# speedtest1, a WASI hello world: run it once first, it builds them into
# WORK). Each compile runs in this process (build/kis-jit-time, the plugin
# dlopen'ed as kis-helper does), the fastest of ROUNDS; the figure that
# load on shared cores disturbs least is the CPU time, printed beside the
# wall time. Then Lua's mixed.lua runs through the tier from the cache
# filled at each tier (user CPU of the run, the median of RUNS).
#
# Usage: bench/wasm-compile.sh [BUILD]   ROUNDS=1 RUNS=3 WORK=/var/tmp/kis-bench-wasm
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ROUNDS=${ROUNDS:-1}
RUNS=${RUNS:-3}
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
	echo "== tier $t (ROUNDS=$ROUNDS)"
	# shellcheck disable=SC2086
	ROUNDS=$ROUNDS "$BUILD/kis-jit-time" --tier $t $MODS
done

OUT=$(mktemp -d /tmp/kis-wasm-compile.XXXXXX)
export KIS_SANDBOX_ROOT="$OUT/store"
WS=""
cleanup() {
	[ -n "$WS" ] && "$KIS" sandbox destroy "$WS" >/dev/null 2>&1 || true
	rm -rf "$OUT"
}
trap cleanup EXIT INT TERM
mkdir -p "$OUT/base"
cp "$WORK/bin/lua.wasm" bench/wasm-real/mixed.lua "$OUT/base/"
BASE=$("$KIS" sandbox base import "$OUT/base")
WS=$("$KIS" sandbox clone "$BASE")
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run_ms() { # $1 engine: user+sys ms of the run, median of RUNS
	i=0
	while [ $i -lt "$RUNS" ]; do
		"$KIS" sandbox run --json --tier wasm --wasm-engine "$1" --workspace "$WS" -- \
			lua.wasm mixed.lua | python3 -c 'import json,sys; d=json.load(sys.stdin)
u=d["usage"]; print(u["user_ms"] + u["sys_ms"], d.get("wasm", {}).get("code", "-"))'
		i=$((i + 1))
	done | median
}
echo "== Lua mixed.lua through the tier, CPU ms (user + sys), median of $RUNS"
for t in opt fast; do
	rm -rf "$KIS_SANDBOX_ROOT/cache/wasm-code"
	PUT="$KIS_SANDBOX_ROOT" "$BUILD/kis-jit-time" --tier $t "$WORK/bin/lua.wasm" >/dev/null
	echo "compiled, cached at tier $t: $(run_ms compiler)"
done
echo "interpreter: $(run_ms interpreter)"
