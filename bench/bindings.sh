#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs per second of `true` on the landlock backend, 8 at a time, through
# the C library (kis_run_capture), the Python binding, the Go binding and
# the `kis` CLI, in one run on one store (two rounds, the second in
# reverse order; the means are printed), with each
# figure's ratio to the C library's (issue 45). SECONDS per way (default
# 10; QUICK=1: 4). Needs root (the host tier's cgroups); the Go line is
# left out without go.
set -eu
cd "$(dirname "$0")/.."
SECS=${SECONDS_PER_WAY:-10}
[ "${QUICK:-0}" = 1 ] && SECS=4
PAR=${PAR:-8}
[ "$(id -u)" = 0 ] || { echo "bench/bindings.sh: needs root (the host tier's cgroups)"; exit 0; }
make -s all python-stage >/dev/null
top=$(mktemp -d /tmp/kis-bench-bindings-XXXXXX)
chmod 711 "$top"
store=$top/store
trap 'build/kis sandbox gc --store-root "$store" >/dev/null 2>&1; rm -rf "$top"' EXIT
cc -std=gnu11 -O2 -Wall -Wextra -Werror -Iinclude -o "$top/bindings-c" bench/bindings-c.c \
	-Lbuild -l:libkis-sandbox.so.0 -Wl,-rpath,"$(pwd)/build" -lpthread
gobin=""
if command -v go >/dev/null 2>&1; then
	(cd bindings/go && GOFLAGS=-mod=mod GOPROXY=off GOCACHE="$(pwd)/../../build/go-cache" \
		go build -o "$top/kis-bench-runs" ./cmd/kis-bench-runs) && gobin=$top/kis-bench-runs
fi
cat > "$top/py.py" <<'PY'
import sys, threading, time
import kis_sandbox as ks
n, secs, store, backend, argv = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
e = ks.Engine(store)
runs = failed = 0
lock = threading.Lock()
start = time.monotonic(); end = start + secs
def work():
    global runs, failed
    while time.monotonic() < end:
        try:
            ok = e.run(argv, {"backend": backend}).exit_code == 0
        except ks.KisError:
            ok = False
        with lock:
            if ok: runs += 1
            else: failed += 1
ts = [threading.Thread(target=work) for _ in range(n)]
[t.start() for t in ts]; [t.join() for t in ts]
el = time.monotonic() - start
print(f"{runs / el:.1f} {runs} {failed}")
PY
cat > "$top/cli.sh" <<'SH'
# PAR loops of the CLI for SECS seconds; each loop counts its runs
n=$1 secs=$2 store=$3 kis=$4 out=$5
end=$(( $(date +%s) + secs ))
i=0
while [ "$i" -lt "$n" ]; do
	( r=0 f=0; while [ "$(date +%s)" -lt "$end" ]; do
		if "$kis" sandbox run --store-root "$store" --backend landlock -- true; then r=$((r+1)); else f=$((f+1)); fi
	  done; echo "$r $f" > "$out.$i" ) &
	i=$((i+1))
done
wait
SH
cli() {
	start=$(date +%s.%N)
	sh "$top/cli.sh" "$PAR" "$SECS" "$store" build/kis "$top/cli-out"
	cat "$top"/cli-out.* | awk -v s="$start" -v e="$(date +%s.%N)" \
		'{r+=$1; f+=$2} END {printf "%.1f %d %d\n", r/(e-s), r, f}'
}
echo "== runs per second of 'true' on landlock, $PAR in parallel, ${SECS}s per way and round"
echo "load: $(uptime)"
build/kis sandbox run --store-root "$store" --backend landlock -- true  # the store, made once
way() {
	case $1 in
	c) "$top/bindings-c" "$PAR" "$SECS" "$store" landlock true ;;
	py) PYTHONPATH=build/python/src /usr/bin/python3 "$top/py.py" "$PAR" "$SECS" "$store" landlock true ;;
	go) "$gobin" "$PAR" "$SECS" "$store" landlock true ;;
	cli) cli ;;
	esac
}
ways="c py"
[ -n "$gobin" ] && ways="$ways go"
ways="$ways cli"
# two rounds, the second in reverse order, so that a load that drifts
# during the run weighs on every way alike; the figures are their means
rev=$(echo $ways | tr ' ' '\n' | tac | tr '\n' ' ')
for w in $ways $rev; do
	way "$w" >> "$top/res.$w"
done
mean() { awk '{r+=$1; n+=$2; f+=$3; k++} END {printf "%.1f %d %d\n", r/k, n, f}' "$top/res.$1"; }
ref=$(mean c | cut -d' ' -f1)
printf '%-28s %10s %8s %8s %10s\n' "way" "runs/s" "runs" "failed" "vs C lib"
row() { set -- "$1" $2; printf '%-28s %10s %8s %8s %10s\n' "$1" "$2" "$3" "$4" \
	"$(awk -v a="$2" -v b="$ref" 'BEGIN {printf "%.2f", a/b}')"; }
row "C library (kis_run_capture)" "$(mean c)"
row "Python (kis_sandbox)" "$(mean py)"
if [ -n "$gobin" ]; then row "Go (kis.sandbox/go)" "$(mean go)"; else echo "Go: skipped (no go toolchain)"; fi
row "CLI (kis sandbox run)" "$(mean cli)"
