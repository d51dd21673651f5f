#!/bin/sh
# SPDX-License-Identifier: MIT
# Benchmarks of kis sandbox, each printing our figures beside a reference in
# one run. Not assertions: the machines are shared and noisy.
set -eu
cd "$(dirname "$0")/.."
make -s build/bench/startup
N=${N:-200}
echo "== start-to-exit of /bin/true ($N runs each)"
echo "load: $(uptime)"
# the process tier is fork/exec plus the cgroup every native run gets: the
# second line is that reference (bench/startup.c @cgroup)
build/bench/startup "$N" \
	"plain fork/exec=/bin/true" \
	"fork/exec + cgroup=@cgroup /bin/true" \
	"kis process tier=build/kis sandbox run --tier process --allow-process-tier -- /bin/true"
for f in bench/*.sh; do
	[ "$f" = bench/run.sh ] && continue
	# quick forms of the long ones (their own defaults are the full runs)
	case "$f" in
	bench/throughput.sh) QUICK=1 sh "$f"; continue ;;
	bench/density.sh) echo; echo "== $f (quick)"; sh "$f" --host 200 --container 20; continue ;;
	esac
	echo
	echo "== $f"
	sh "$f"
done
