#!/bin/sh
# SPDX-License-Identifier: MIT
# Real C programs on the wasm tier: Lua 5.4 running a mixed script, bzip2
# compressing 4 MB of C source, SQLite's own speedtest1 on an in-memory
# database, and zlib deflating and inflating 4 MiB of C source (a driver
# of ours, bench/wasm-real/zlib_bench.c), from Debian's source packages (apt-get source, with an apt state
# of the benchmark's own: the host's apt configuration is not touched),
# built with gcc -O2 natively and with Debian's clang -O2 and wasi-libc to
# wasm32-wasi. The same .wasm files run in our interpreter through
# `kis sandbox run --tier wasm` (the interpreter; and the compiler, first
# run with its compile and cached, where this build accepts
# `--wasm-engine compiler`, else "n/a"; and the default engine, auto, on a
# module a run has seen: tier-up's second run), in Node.js 20 (node:wasi,
# V8), and in WAMR's AOT (wamrc -O3, iwasm) where WAMR is installed or
# WAMR_DIR names a build of it: Debian 12 packages no WAMR, and only
# Debian's and npm's registries are reachable from this project's machines,
# so elsewhere its column says n/a and why (npm has no package of WAMR
# either). CoreMark is not in the table for the same reason (no Debian or
# npm package carries its sources).
# Rounds are interleaved (each round runs every program in every engine),
# the figure is the median, the ratio is to native; then the start-up of a
# WASI hello world through the tier beside the native binary. A gnuplot
# plot of the ratios goes to BUILD/bench/wasm-real.png.
#
# Usage: bench/wasm-real.sh [BUILD]   ROUNDS=5 STARTUP_N=30 WORK=/var/tmp/kis-bench-wasm JIT_FIRST=1
# Each figure twice: wall time, and CPU time (user + system, the tier's
# child included), which other load on shared cores disturbs much less.
# WORK caches the fetched sources and the builds between runs, outside the
# repository (REBUILD=1 starts over); nothing fetched is ever committed.
set -eu
cd "$(dirname "$0")/.."
REPO=$(pwd)
BUILD=${1:-build}
KIS=$REPO/$BUILD/kis
ROUNDS=${ROUNDS:-5}
STARTUP_N=${STARTUP_N:-30}
WORK=${WORK:-/var/tmp/kis-bench-wasm}
NODE_RUN=$REPO/tests/wasm/wasi/node_run.mjs
HERE=$REPO/bench/wasm-real

[ -x "$KIS" ] || { echo "wasm-real: skipped, $KIS not built (run make)"; exit 0; }
case $(realpath -m "$WORK")/ in
"$REPO"/*) echo "wasm-real: WORK=$WORK is inside the repository: fetched sources stay out of it" >&2
	exit 1 ;;
esac
[ "${REBUILD:-0}" = 1 ] && rm -rf "$WORK"
mkdir -p "$WORK/bin" "$WORK/src"

# ---- tools: what the build needs, installed on demand (Debian 12 names) ----
need=""
command -v gcc >/dev/null || need="$need build-essential"
command -v clang >/dev/null || need="$need clang"
command -v wasm-ld >/dev/null || need="$need lld"
[ -f /usr/lib/wasm32-wasi/libc.a ] || need="$need wasi-libc"
ls /usr/lib/llvm-*/lib/clang/*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1 ||
	need="$need libclang-rt-14-dev-wasm32"
command -v dpkg-source >/dev/null || need="$need dpkg-dev"
command -v tclsh >/dev/null || need="$need tcl" # SQLite makes its amalgamation with it
command -v gnuplot >/dev/null || need="$need gnuplot-nox"
[ -x /usr/bin/time ] || need="$need time" # GNU time: each run's CPU time
if [ -n "$need" ]; then
	[ "$(id -u)" = 0 ] || { echo "wasm-real: skipped, needs:$need (run as root to install)"; exit 0; }
	echo "wasm-real: installing$need" >&2
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends $need >&2
fi
HAVE_NODE=0
command -v node >/dev/null && HAVE_NODE=1
# Node.js 20's WASI; the flag is the one its docs name for preview 1 (a
# no-op where WASI needs none), --no-warnings keeps its notice off stderr.
NODE="node --experimental-wasi-unstable-preview1 --no-warnings"

# ---- sources: apt-get source with a private state directory ----
# The host's Debian entries, as deb-src, in an apt configuration of our own
# (lists and archives under WORK): nothing of the host's apt changes.
APTD=$WORK/apt
APT="-o Dir::Etc::SourceList=$APTD/sources.list -o Dir::Etc::SourceParts=$APTD/parts
     -o Dir::State::Lists=$APTD/lists -o Dir::Cache=$APTD/cache -o Debug::NoLocking=1
     -o APT::Sandbox::User=root"
if [ ! -f "$WORK/src/.fetched" ]; then
	mkdir -p "$APTD/lists/partial" "$APTD/cache/archives/partial" "$APTD/parts"
	: > "$APTD/sources.list"
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] && grep -h '^deb .*debian-archive-keyring' "$f" |
			sed 's/^deb /deb-src /' >> "$APTD/sources.list"
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && grep -q 'debian-archive-keyring' "$f" &&
			sed 's/^Types:.*/Types: deb-src/' "$f" > "$APTD/parts/$(basename "$f")"
	done
	echo "wasm-real: fetching lua5.4, bzip2 and sqlite3 with apt-get source" >&2
	# shellcheck disable=SC2086
	apt-get $APT update -qq
	# shellcheck disable=SC2086
	(cd "$WORK/src" && apt-get $APT source --download-only -qq lua5.4 bzip2 sqlite3)
	# apt checked every file against the signed Sources index; dpkg-source
	# unpacks and applies Debian's patches.
	for dsc in "$WORK"/src/*.dsc; do
		(cd "$WORK/src" && dpkg-source --no-check -x "$(basename "$dsc")" >/dev/null)
	done
	touch "$WORK/src/.fetched"
fi
# zlib came later: a marker of its own, so a WORK fetched before it is kept.
# Debian 12's newest zlib source may sit in the security archive's pool
# where its files are not served; then the newest version that downloads.
if [ ! -f "$WORK/src/.fetched-zlib" ]; then
	echo "wasm-real: fetching zlib with apt-get source" >&2
	# shellcheck disable=SC2086
	apt-get $APT update -qq
	got=0
	# shellcheck disable=SC2086
	for v in "" $(apt-cache $APT showsrc zlib 2>/dev/null | sed -n 's/^Version: //p' | sort -r -V); do
		# shellcheck disable=SC2086
		(cd "$WORK/src" && apt-get $APT source --download-only -qq "zlib${v:+=$v}" >/dev/null 2>&1) &&
			{ got=1; break; }
	done
	[ $got = 1 ] || { echo "wasm-real: apt-get source zlib failed" >&2; exit 1; }
	for dsc in "$WORK"/src/zlib_*.dsc; do
		(cd "$WORK/src" && dpkg-source --no-check -x "$(basename "$dsc")" >/dev/null)
	done
	touch "$WORK/src/.fetched-zlib"
fi
LUA_SRC=$(ls -d "$WORK"/src/lua5.4-*/ | head -1)
BZ_SRC=$(ls -d "$WORK"/src/bzip2-*/ | head -1)
SQ_SRC=$(ls -d "$WORK"/src/sqlite3-*/ | head -1)
Z_SRC=$(ls -d "$WORK"/src/zlib-*/ | head -1)

# ---- builds: the same sources and defines natively and to wasm32-wasi ----
WASI_CC="clang --target=wasm32-wasi -O2"
NATIVE_CC="gcc -O2"
# wasi-libc has no setjmp/longjmp (wasm exceptions are a later proposal):
# Lua raises an error by abort(), which mixed.lua never does. Both builds
# take the same defines, so they run the same interpreter.
mkdir -p "$WORK/stub"
: > "$WORK/stub/setjmp.h"
# Debian's build writes this header (debian/rules); it names the C module
# path only, which these runs never search.
echo '#define DEB_HOST_MULTIARCH "none"' > "$WORK/stub/lua5.4-deb-multiarch.h"
LUA_DEFS='-DLUAI_THROW(L,c)=abort() -DLUAI_TRY(L,c,a)={a} -Dluai_jmpbuf=int
	-DLUA_TMPNAMBUFSIZE=32 -Dlua_tmpnam(b,e)={e=1;}'
WASI_EMU="-D_WASI_EMULATED_SIGNAL -D_WASI_EMULATED_PROCESS_CLOCKS"
WASI_EMU_LIBS="-lwasi-emulated-signal -lwasi-emulated-process-clocks"
SQ_DEFS="-DSQLITE_OS_OTHER=1 -DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION
	-DSQLITE_TEMP_STORE=3 -DSQLITE_OMIT_WAL"

build_lua() { # $1 = compiler command, $2 = output, $3 = extra
	srcs=$(ls "$LUA_SRC"/src/*.c | grep -v '/luac\.c$')
	# shellcheck disable=SC2086
	$1 -I"$WORK/stub" $LUA_DEFS -o "$2" $srcs $3
}
if [ ! -f "$WORK/bin/lua.wasm" ]; then
	echo "wasm-real: building Lua $(basename "$LUA_SRC")" >&2
	build_lua "$NATIVE_CC" "$WORK/bin/lua.native" "-lm"
	build_lua "$WASI_CC $WASI_EMU" "$WORK/bin/lua.wasm" "$HERE/wasi_stubs.c $WASI_EMU_LIBS"
fi
BZ_FILES="blocksort.c huffman.c crctable.c randtable.c compress.c decompress.c bzlib.c bzip2.c"
if [ ! -f "$WORK/bin/bzip2.wasm" ]; then
	echo "wasm-real: building $(basename "$BZ_SRC")" >&2
	# shellcheck disable=SC2086
	(cd "$BZ_SRC" && $NATIVE_CC -D_FILE_OFFSET_BITS=64 -o "$WORK/bin/bzip2.native" $BZ_FILES &&
	 $WASI_CC $WASI_EMU -Wno-implicit-function-declaration -o "$WORK/bin/bzip2.wasm" $BZ_FILES \
		"$HERE/wasi_stubs.c" $WASI_EMU_LIBS)
fi
if [ ! -f "$WORK/bin/speedtest1.wasm" ]; then
	echo "wasm-real: building SQLite's amalgamation and speedtest1 ($(basename "$SQ_SRC"))" >&2
	mkdir -p "$SQ_SRC/bld"
	(cd "$SQ_SRC/bld" && [ -f sqlite3.c ] ||
		{ ../configure --disable-tcl >/dev/null && make sqlite3.c >/dev/null; })
	# shellcheck disable=SC2086
	(cd "$SQ_SRC" &&
	 $NATIVE_CC $SQ_DEFS -Ibld -o "$WORK/bin/speedtest1.native" test/speedtest1.c bld/sqlite3.c \
		"$HERE/memvfs.c" &&
	 $WASI_CC $SQ_DEFS -D_WASI_EMULATED_PROCESS_CLOCKS -Ibld -o "$WORK/bin/speedtest1.wasm" \
		test/speedtest1.c bld/sqlite3.c "$HERE/memvfs.c" -lwasi-emulated-process-clocks)
fi
Z_FILES="adler32.c compress.c crc32.c deflate.c inflate.c infback.c inftrees.c inffast.c trees.c uncompr.c zutil.c"
if [ ! -f "$WORK/bin/zlib_bench.wasm" ]; then
	echo "wasm-real: building $(basename "$Z_SRC") and our driver" >&2
	# shellcheck disable=SC2086
	(cd "$Z_SRC" && $NATIVE_CC -I. -o "$WORK/bin/zlib_bench.native" "$HERE/zlib_bench.c" $Z_FILES &&
	 $WASI_CC -I. -o "$WORK/bin/zlib_bench.wasm" "$HERE/zlib_bench.c" $Z_FILES)
fi
printf '#include <stdio.h>\nint main(void){puts("hello");return 0;}\n' > "$WORK/hello.c"
[ -f "$WORK/bin/hello.wasm" ] || $WASI_CC -o "$WORK/bin/hello.wasm" "$WORK/hello.c"
[ -f "$WORK/bin/hello.native" ] || $NATIVE_CC -o "$WORK/bin/hello.native" "$WORK/hello.c"

# ---- the workspace the modules run in ----
OUT=$(mktemp -d /tmp/kis-wasm-real.XXXXXX)
export KIS_SANDBOX_ROOT="$OUT/store"
WS=""
cleanup() {
	[ -n "$WS" ] && "$KIS" sandbox destroy "$WS" >/dev/null 2>&1 || true
	rm -rf "$OUT"
}
trap cleanup EXIT INT TERM
mkdir -p "$OUT/base"
cp "$WORK"/bin/*.wasm "$HERE/mixed.lua" "$OUT/base/"
# bzip2's input: the first 4 MB of SQLite's amalgamation (real C text)
head -c 4000000 "$SQ_SRC/bld/sqlite3.c" > "$OUT/bz.in"
# zlib's: the first 4 MiB of the amalgamation (Node.js 20 segfaults at
# exit, after the right output, once this driver's memory holds 8 MiB of
# input; the issue's 16 MiB would leave Node's column empty)
head -c 4194304 "$SQ_SRC/bld/sqlite3.c" > "$OUT/z.in"
BASE=$("$KIS" sandbox base import "$OUT/base")
WS=$("$KIS" sandbox clone "$BASE")
W=$("$KIS" sandbox workspace path "$WS")

# name|args|stdin ("-": none)
PROGS="lua|mixed.lua|-
bzip2|-9 -c|$OUT/bz.in
sqlite|--memdb --size 8|-
zlib||$OUT/z.in"
# Our compiler, where this build accepts --wasm-engine compiler: a cached
# run (the module compiled once before the rounds) and a first run (a copy
# of the module made unique by a custom section, so its hash, which the
# compile cache is keyed by, is new: the compile is in the time).
HAVE_JIT=0
JIT_WHY=$("$KIS" sandbox run --tier wasm --wasm-engine compiler --workspace "$WS" -- hello.wasm \
	2>&1 >/dev/null) && HAVE_JIT=1
fresh_module() { # $1 module, $2 tag: prints the name of a unique copy in the workspace
	u=$(date +%s%N)
	tag="$2-$u-$$"
	name="kis-bench-nonce"
	# a custom section (id 0): size, name length, name, payload (WebAssembly
	# core spec 5.5.3: custom sections may follow any section); one-byte LEB
	# sizes, as both stay under 128
	size=$((1 + ${#name} + ${#tag}))
	{ cat "$W/$1.wasm"; printf "\\000\\$(printf %03o $size)\\$(printf %03o ${#name})%s%s" \
		"$name" "$tag"; } > "$W/$1.first-$u.wasm" || return 1
	echo "$1.first-$u.wasm"
}
ENGINES="native kis"
# JIT_FIRST=0 leaves the first-run column out (its compile is most of a
# round's time on a loaded machine)
if [ $HAVE_JIT = 1 ]; then
	[ "${JIT_FIRST:-1}" = 1 ] && ENGINES="$ENGINES jit1"
	ENGINES="$ENGINES jit auto"
fi
[ $HAVE_NODE = 1 ] && ENGINES="$ENGINES node"
# WAMR's AOT: iwasm and wamrc on PATH, or in WAMR_DIR (a build's bin/)
WAMR_WHY="no WAMR: Debian 12 packages none, npm has no package of it or its sources, and nothing else can be fetched here (WAMR_DIR=a build with iwasm and wamrc)"
IWASM=""
WAMRC=""
for d in ${WAMR_DIR:+"$WAMR_DIR" "$WAMR_DIR/bin"} $(echo "$PATH" | tr : ' '); do
	[ -z "$IWASM" ] && [ -x "$d/iwasm" ] && IWASM=$d/iwasm
	[ -z "$WAMRC" ] && [ -x "$d/wamrc" ] && WAMRC=$d/wamrc
done
if [ -n "$IWASM" ] && [ -n "$WAMRC" ]; then
	for m in lua bzip2 speedtest1 zlib_bench; do
		[ -f "$W/$m.aot" ] || "$WAMRC" --opt-level=3 -o "$W/$m.aot" "$W/$m.wasm" >/dev/null ||
			{ echo "wasm-real: wamrc failed on $m.wasm" >&2; exit 1; }
	done
	ENGINES="$ENGINES wamr"
	WAMR_WHY=""
fi

# speedtest1 prints its own timings, right-aligned (a total past 10 s is
# one column wider): compare the rest
normalize() {
	case $1 in
	sqlite) sed 's/[ 0-9.]*s$//' ;;
	*) cat ;;
	esac
}

run_one() { # $1 prog, $2 engine, $3 args, $4 stdin: appends "prog engine seconds" to times
	p=$1
	case $p in lua) m=lua ;; bzip2) m=bzip2 ;; sqlite) m=speedtest1 ;; zlib) m=zlib_bench ;; esac
	in=/dev/null
	[ "$4" = - ] || in=$4
	t0=$(date +%s%N)
	# shellcheck disable=SC2086
	case $2 in
	native) (cd "$W" && timed "$WORK/bin/$m.native" $3) < "$in" > "$OUT/out" 2>/dev/null ;;
	kis) timed "$KIS" sandbox run --tier wasm --wasm-engine interpreter --workspace "$WS" -- "$m.wasm" $3 < "$in" \
		> "$OUT/out" 2>/dev/null ;;
	node) timed $NODE "$NODE_RUN" "$W" "$m.wasm" $3 < "$in" > "$OUT/out" 2>/dev/null ;;
	jit1) # a module no run has seen: its compile is in the time
		first=$(fresh_module "$m" "$p") &&
		timed "$KIS" sandbox run --tier wasm --wasm-engine compiler --workspace "$WS" -- \
			"$first" $3 < "$in" > "$OUT/out" 2>/dev/null && rm -f "$W/$first" ;;
	jit) timed "$KIS" sandbox run --tier wasm --wasm-engine compiler --workspace "$WS" -- \
		"$m.wasm" $3 < "$in" > "$OUT/out" 2>/dev/null ;;
	auto) # the default engine on a module runs have seen: its cached code
		timed "$KIS" sandbox run --tier wasm --workspace "$WS" -- \
		"$m.wasm" $3 < "$in" > "$OUT/out" 2>/dev/null ;;
	wamr) (cd "$W" && timed "$IWASM" --dir=. "$m.aot" $3) < "$in" > "$OUT/out" 2>/dev/null ;;
	esac || { echo "wasm-real: $p failed under $2" >&2; exit 1; }
	t1=$(date +%s%N)
	cpu=$(awk '{ print $1 + $2 }' "$OUT/cpu")
	sum=$(normalize "$p" < "$OUT/out" | sha256sum | cut -c1-16)
	ref="$OUT/ref.$p"
	if [ "$2" = native ]; then
		echo "$sum" > "$ref"
	elif [ "$sum" != "$(cat "$ref")" ]; then
		echo "wasm-real: $p under $2 printed something else than native" >&2
		exit 1
	fi
	echo "$p $2 $t0 $t1 $cpu" | awk '{printf "%s %s %.4f %.4f\n", $1, $2, ($4 - $3) / 1e9, $5}' \
		>> "$OUT/times"
}
# The CPU time (user + system) of a run and of the processes it waited for
# (the tier's child: getrusage(2) RUSAGE_CHILDREN): on shared cores wall
# time counts the other load too, CPU time much less.
timed() {
	/usr/bin/time -f "%U %S" -o "$OUT/cpu" "$@"
}

echo "wasm-real: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo "engines: native = gcc -O2; kis = our interpreter via kis sandbox run --tier wasm;"
if [ $HAVE_JIT = 1 ]; then
	echo "         jit1 = our compiler, first run (compile included; JIT_FIRST=0: left out); jit = our compiler, cached"
	# each program's workload once, untimed: what the cached column finds
	while IFS='|' read -r p args in; do
		case $p in lua) m=lua ;; bzip2) m=bzip2 ;; sqlite) m=speedtest1 ;; zlib) m=zlib_bench ;; esac
		[ "$in" = - ] && in=/dev/null
		# shellcheck disable=SC2086
		"$KIS" sandbox run --tier wasm --wasm-engine compiler --workspace "$WS" -- "$m.wasm" \
			$args < "$in" > /dev/null 2>&1 || { echo "wasm-real: $p failed under jit" >&2; exit 1; }
	done <<EOF
$PROGS
EOF
else
	echo "         jit1, jit = our compiler: n/a ($(echo "$JIT_WHY" | head -1))"
fi
[ $HAVE_JIT = 1 ] && echo "         auto = the default engine (no --wasm-engine) on a module runs have seen (tier-up's later runs)"
[ $HAVE_NODE = 1 ] && echo "         node = Node.js $(node --version) node:wasi (V8) on the same .wasm"
if [ -n "$WAMR_WHY" ]; then
	echo "         wamr = WAMR AOT (wamrc -O3, iwasm): n/a ($WAMR_WHY)"
else
	echo "         wamr = WAMR AOT: $WAMRC --opt-level=3, then $IWASM"
fi
echo "         CoreMark: n/a (neither a Debian package nor an npm package carries its sources; only those two registries are reachable)"
"$KIS" sandbox backends | grep '^wasm engines\|^wasm compiler memory' || true
: > "$OUT/times"
for r in $(seq "$ROUNDS"); do
	while IFS='|' read -r p args in; do
		for e in $ENGINES; do
			run_one "$p" "$e" "$args" "$in"
		done
	done <<EOF
$PROGS
EOF
	echo "round $r of $ROUNDS done" >&2
done

mkdir -p "$BUILD/bench"
DAT=$BUILD/bench/wasm-real.dat
ALL_ENGINES="native kis jit1 jit auto node wamr" # an engine absent here prints n/a
summary() { # $1 = column of times (3 wall, 4 CPU), $2 = data file for the plot or ""
awk -v engines="$ALL_ENGINES" -v dat="${2:-/dev/null}" -v col="$1" '
	{ t[$1 " " $2, ++n[$1 " " $2]] = $col; if (!($1 in seen)) { seen[$1] = 1; order[++np] = $1 } }
	function median(k,   m, i, j, a, x) {
		m = n[k]; for (i = 1; i <= m; i++) a[i] = t[k, i]
		for (i = 2; i <= m; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
		return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
	}
	END {
		ne = split(engines, e, " ")
		printf "%-8s", "program"; for (i = 1; i <= ne; i++) printf " %16s", e[i]; printf "\n"
		printf "# program" > dat; for (i = 2; i <= ne; i++) printf " %s", e[i] > dat; printf "\n" > dat
		for (q = 1; q <= np; q++) {
			p = order[q]; base = median(p " native")
			printf "%-8s", p; printf "%-8s", p > dat
			for (i = 1; i <= ne; i++) {
				if (!n[p " " e[i]]) { printf " %16s", "n/a"; if (i > 1) printf " -" > dat; continue }
				m = median(p " " e[i]); r = m / base
				printf " %8.3f %6.2fx", m, r
				if (i > 1) { printf " %.3f", r > dat; lg[i] += log(r); got[i]++ }
			}
			printf "\n"; printf "\n" > dat
		}
		printf "%-8s", "geomean"; printf " %16s", "1.00x"
		for (i = 2; i <= ne; i++)
			if (got[i]) printf " %15.2fx", exp(lg[i] / got[i]); else printf " %16s", "n/a"
		printf "\n"
	}' "$OUT/times"
}
echo
echo "median of $ROUNDS interleaved rounds, wall seconds (ratio to native):"
summary 3 "$DAT"
echo
echo "the same rounds, CPU seconds, user + system, the tier's child included (ratio to native):"
summary 4 ""
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"

if command -v gnuplot >/dev/null; then
	# columns of $DAT: 2 interpreter, 3 compiler first run, 4 cached,
	# 5 auto, 6 node, 7 WAMR AOT
	plot="'$DAT' using 2:xtic(1) title 'kis interpreter'"
	[ $HAVE_JIT = 1 ] && plot="$plot, '' using 3 title 'kis compiler, first run', '' using 4 title 'kis compiler, cached', '' using 5 title 'kis auto, later runs'"
	[ $HAVE_NODE = 1 ] && plot="$plot, '' using 6 title 'Node.js 20 (V8)'"
	[ -z "$WAMR_WHY" ] && plot="$plot, '' using 7 title 'WAMR AOT (wamrc -O3)'"
	gnuplot <<EOF
set terminal pngcairo size 800,480 noenhanced
set output '$BUILD/bench/wasm-real.png'
set title 'Real C programs as wasm32-wasi: time relative to gcc -O2 native (median of $ROUNDS)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y 2
set yrange [0.5:*]
set datafile missing '-'
set ylabel 'x native (log scale)'
set grid ytics
set key top left
plot $plot
EOF
	echo "plot: $BUILD/bench/wasm-real.png"
fi

echo
echo "start to exit of a WASI hello world ($STARTUP_N interleaved runs; ratio to native;"
echo "the process tier running the native one is the engine's own floor):"
make -s BUILD="$BUILD" "$BUILD/bench/startup"
set -- "native hello=$WORK/bin/hello.native" \
	"kis --tier wasm, interpreter=$KIS sandbox run --tier wasm --wasm-engine interpreter --workspace $WS -- hello.wasm" \
	"kis --tier process=$KIS sandbox run --tier process --allow-process-tier --workspace $WS -- $WORK/bin/hello.native"
[ $HAVE_JIT = 1 ] && set -- "$@" \
	"kis --tier wasm, compiler=$KIS sandbox run --tier wasm --wasm-engine compiler --workspace $WS -- hello.wasm" \
	"kis --tier wasm, auto=$KIS sandbox run --tier wasm --workspace $WS -- hello.wasm"
[ $HAVE_NODE = 1 ] && set -- "$@" "node:wasi=$NODE $NODE_RUN $W hello.wasm"
"$BUILD/bench/startup" "$STARTUP_N" "$@" | tee "$OUT/hello.table"
if [ $HAVE_JIT = 1 ]; then
	sh "$REPO/bench/hello-target.sh" "kis --tier wasm, compiler" < "$OUT/hello.table"
fi
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) after the start-up rows"
