#!/bin/sh
# SPDX-License-Identifier: MIT
# Density: sessions per tier in steps (up to --host landlock sessions,
# --bubblewrap, --container oci sessions), with per-session PSS and
# MemAvailable, create time, exec latency into the first and the Nth
# session, and destroy time (bench/density.py says how each is measured).
# Stops at 60% of memory (and at 75% of kernel.pid_max: the machine is
# shared), and always destroys what it made (a trap, and the driver's own).
# Usage: sh bench/density.sh [--host N] [--bubblewrap N] [--container N] [--creators P]
# The defaults (--host 100 --container 10) take about a minute; the issue's
# figures are --host 10000 --container 1000.
set -eu
cd "$(dirname "$0")/.."
KIS=$(pwd)/build/kis
[ -x "$KIS" ] || { echo "bench/density.sh: build/kis is missing; run make" >&2; exit 1; }
STORE=$(mktemp -d /tmp/kis-bench-density-XXXXXX)
export KIS_SANDBOX_ROOT="$STORE"
cleanup() {
	set +e
	for s in $("$KIS" sandbox session list --json 2>/dev/null | /usr/bin/python3 -c \
		'import json,sys; [print(s["id"]) for s in json.load(sys.stdin)]' 2>/dev/null); do
		"$KIS" sandbox session destroy "$s" >/dev/null 2>&1
	done
	"$KIS" sandbox gc >/dev/null 2>&1
	rm -rf "$STORE"
}
trap cleanup EXIT INT TERM HUP
mkdir -p build/bench
echo "load: $(uptime)"
/usr/bin/python3 bench/density.py --kis "$KIS" --dat build/bench/density.dat "$@"
echo "load: $(uptime)"
if command -v gnuplot >/dev/null 2>&1 && [ -s build/bench/density.dat ]; then
	gnuplot <<'PLOT'
set terminal pngcairo size 1000,420 noenhanced
set output 'build/bench/density.png'
set multiplot layout 1,2 title 'kis sandbox: density of sessions'
set xlabel 'live sessions'; set logscale x; set grid; set key left top
set ylabel 'ms'
set title 'create (median), exec into the newest'; set yrange [0:*]
plot for [t in "host_landlock host_bubblewrap container_oci"] 'build/bench/density.dat' \
	using (strcol(1) eq t ? $2 : 1/0):3 with linespoints title t.' create', \
     for [t in "host_landlock host_bubblewrap container_oci"] '' \
	using (strcol(1) eq t ? $2 : 1/0):9 with linespoints dt 2 title t.' exec N'
set ylabel 'KiB per session'
set title 'PSS and memory cgroup charge per session'; set yrange [0:*]
plot for [t in "host_landlock host_bubblewrap container_oci"] 'build/bench/density.dat' \
	using (strcol(1) eq t ? $2 : 1/0):5 with linespoints title t.' PSS', \
     for [t in "host_landlock host_bubblewrap container_oci"] '' \
	using (strcol(1) eq t ? $2 : 1/0):6 with linespoints dt 2 title t.' memcg'
unset multiplot
PLOT
	echo "plot: build/bench/density.png"
fi
