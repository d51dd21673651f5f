#!/bin/sh
# SPDX-License-Identifier: MIT
# The interpreter's dispatch, measured (issue 42): run() as built (threaded,
# a table of label addresses, gcc) against the same handlers as one switch
# (-DKIS_WASM_SWITCH, the form clang gets), on bench/wasm-real.sh's Lua and
# bzip2 modules through `kis sandbox run --tier wasm --wasm-engine
# interpreter`, interleaved rounds, CPU seconds (user + system: other load
# on shared cores disturbs it far less than wall time), the median, and the
# ratio switch / threaded. The figure is quoted in src/wasm/exec.c's head.
#
# Usage: bench/wasm-dispatch.sh [BUILD]   ROUNDS=7 WORK=/var/tmp/kis-bench-wasm
set -eu
cd "$(dirname "$0")/.."
REPO=$(pwd)
BUILD=${1:-build}
ROUNDS=${ROUNDS:-7}
WORK=${WORK:-/var/tmp/kis-bench-wasm}
[ -x "$BUILD/kis" ] || { echo "wasm-dispatch: skipped, $BUILD/kis not built (run make)"; exit 0; }
[ -f "$WORK/bin/lua.wasm" ] && [ -f "$WORK/bin/bzip2.wasm" ] ||
	{ echo "wasm-dispatch: skipped, no modules in $WORK/bin (run bench/wasm-real.sh once)"; exit 0; }
OUT=$(mktemp -d /tmp/kis-wasm-dispatch.XXXXXX)
export KIS_SANDBOX_ROOT="$OUT/store"
WS=""
cleanup() {
	[ -n "$WS" ] && "$REPO/$BUILD/kis" sandbox destroy "$WS" >/dev/null 2>&1 || true
	rm -rf "$OUT"
}
trap cleanup EXIT INT TERM
# the switch build: a copy of BUILD's objects with run() rebuilt
cp -a "$BUILD" "$OUT/sw"
rm -f "$OUT/sw/obj/src/wasm/exec.o"
make -s BUILD="$OUT/sw" CFLAGS="-O2 -g -DKIS_WASM_SWITCH" "$OUT/sw/kis" >/dev/null
mkdir -p "$OUT/base"
cp "$WORK/bin/lua.wasm" "$WORK/bin/bzip2.wasm" bench/wasm-real/mixed.lua "$OUT/base/"
SQ_SRC=$(ls -d "$WORK"/src/sqlite3-*/ | head -1)
head -c 4000000 "$SQ_SRC/bld/sqlite3.c" > "$OUT/bz.in"
BASE=$("$BUILD/kis" sandbox base import "$OUT/base")
WS=$("$BUILD/kis" sandbox clone "$BASE")
: > "$OUT/times"
for r in $(seq "$ROUNDS"); do
	for v in threaded switch; do
		k=$REPO/$BUILD/kis
		[ $v = switch ] && k=$OUT/sw/kis
		/usr/bin/time -f "%U %S" -o "$OUT/cpu" "$k" sandbox run --tier wasm \
			--wasm-engine interpreter --workspace "$WS" -- lua.wasm mixed.lua >/dev/null
		echo "lua $v $(cat "$OUT/cpu")" >> "$OUT/times"
		/usr/bin/time -f "%U %S" -o "$OUT/cpu" "$k" sandbox run --tier wasm \
			--wasm-engine interpreter --workspace "$WS" -- bzip2.wasm -9 -c < "$OUT/bz.in" >/dev/null
		echo "bzip2 $v $(cat "$OUT/cpu")" >> "$OUT/times"
	done
	echo "round $r of $ROUNDS done" >&2
done
echo "interpreter CPU seconds (user + system), median of $ROUNDS interleaved rounds:"
awk '{ t[$1 " " $2, ++n[$1 " " $2]] = $3 + $4; p[$1] = 1 }
	function median(k,   m, i, j, a, x) {
		m = n[k]; for (i = 1; i <= m; i++) a[i] = t[k, i]
		for (i = 2; i <= m; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
		return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
	}
	END {
		printf "%-8s %10s %10s %8s\n", "program", "threaded", "switch", "ratio"
		for (q in p) { a = median(q " threaded"); b = median(q " switch")
			printf "%-8s %10.2f %10.2f %7.2fx\n", q, a, b, b / a }
	}' "$OUT/times"
