#!/bin/sh
# SPDX-License-Identifier: MIT
# Start-to-exit of /bin/true through every available backend, in one run,
# beside plain fork/exec; the table is also drawn as a bar chart
# (build/bench/tiers.png, gnuplot) where gnuplot is installed.
set -eu
cd "$(dirname "$0")/.."
mkdir -p build/bench
[ -x build/bench/startup ] || cc -std=gnu11 -O2 -Wall -Wextra -Werror -o build/bench/startup bench/startup.c
N=${N:-100}
KIS=build/kis
store=$(mktemp -d /tmp/kis-bench-tiers-XXXXXX)
trap 'rm -rf "$store"' EXIT
export KIS_SANDBOX_ROOT="$store"
set -- "plain fork/exec=/bin/true" \
	"process=$KIS sandbox run --tier process --allow-process-tier -- /bin/true"
for b in $($KIS sandbox backends --json | /usr/bin/python3 -c '
import json, sys
for b in json.load(sys.stdin):
    if b["available"] and b["native"] and b["backend"] != "process":
        print(b["backend"])'); do
	set -- "$@" "$b=$KIS sandbox run --backend $b -- /bin/true"
done
echo "== start-to-exit of /bin/true through each backend ($N runs each; ratio to plain fork/exec)"
build/bench/startup "$N" "$@" | tee build/bench/tiers.txt
if command -v gnuplot >/dev/null 2>&1; then
	# label and median (the command column may hold spaces: take the
	# last four fields as the figures)
	awk 'NR > 1 { n = NF; lab = $1; for (i = 2; i <= n - 4; i++) lab = lab "_" $i;
		print lab, $(n - 3) }' build/bench/tiers.txt > build/bench/tiers.dat
	gnuplot <<'PLOT'
set terminal pngcairo size 800,420 noenhanced
set output 'build/bench/tiers.png'
set title 'kis sandbox: start-to-exit of /bin/true (median, ms)'
set style fill solid 0.7
set boxwidth 0.6
set ylabel 'ms'
set yrange [0:*]
set grid ytics
plot 'build/bench/tiers.dat' using 0:2:xtic(1) with boxes notitle, \
     '' using 0:2:(sprintf('%.1f', $2)) with labels offset 0,1 notitle
PLOT
	echo "plot: build/bench/tiers.png"
fi
