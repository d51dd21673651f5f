#!/bin/sh
# SPDX-License-Identifier: MIT
# Host tier start-to-exit: /bin/true through the landlock and bubblewrap
# backends, each beside the raw mechanism doing what kis asks of it
# (ratios printed by build/bench/startup against the first line of each
# table, all rows of a table interleaved run by run).
#
# The references, and what each does:
#   plain fork/exec        fork, exec /bin/true, wait: landlock's target is
#                          1.5x this
#   fork/exec + cgroup     the same plus the cgroup kis gives every native
#                          run (memory 1 GiB, pids 256, cpuacct: mkdir,
#                          limits, join through tasks, rmdir)
#   raw bwrap, kis argv    bwrap with the argv of `kis sandbox run --dry-run
#                          --backend bubblewrap` (every mount, namespace and
#                          cover), kis's compiled seccomp program as a sealed
#                          memfd, the user namespace of the sandbox's id
#                          range made as kis makes it, the agent staged on a
#                          /run tmpfs in a private mount namespace, bwrap
#                          started as the range's first id; /bin/true in
#                          place of the agent (bench/refs.py, the @recipes
#                          of bench/startup.c)
#   raw bwrap, kis argv + cgroup   the same with kis's per-run cgroup
#   bwrap --unshare-all (old reference, labelled): namespaces and the system
#                          directories only, no seccomp, no covers, no id
#                          range: less work than kis asks of bwrap
# BEFORE=DIR/kis (a kis with its kis-agent beside it, e.g. a copy of an
# earlier build) adds its lines, measured in the same run.
set -eu
cd "$(dirname "$0")/.."
# the timer, and the price of one more process image (mk/bench.mk)
make -s bench-tools
IMG="an empty static glibc program"
N=${N:-200}
KIS=build/kis
avail() { $KIS sandbox backends --json | /usr/bin/python3 -c "
import json, sys
print(any(b['backend'] == '$1' and b['available'] for b in json.load(sys.stdin)))"; }
store=$(mktemp -d /tmp/kis-bench-host-XXXXXX)
trap 'rm -rf "$store"' EXIT
export KIS_SANDBOX_ROOT="$store"
echo "load: $(uptime)"
B=${BEFORE:-}
if [ "$(avail landlock)" = True ]; then
	echo
	echo "== landlock: start-to-exit of /bin/true ($N runs each; target: within 1.5x plain fork/exec)"
	set -- "plain fork/exec=/bin/true" "fork/exec + cgroup=@cgroup /bin/true" \
		"kis process tier=$KIS sandbox run --tier process --allow-process-tier -- /bin/true" \
		"kis landlock=$KIS sandbox run --backend landlock -- /bin/true" \
		"$IMG=build/bench/empty-glibc" "the same without libc=build/bench/empty-nolibc"
	[ -n "$B" ] && set -- "$@" \
		"before: landlock=$B sandbox run --backend landlock -- /bin/true"
	build/bench/startup "$N" "$@" |
		sh bench/floor.sh "plain fork/exec" "kis landlock" "$IMG" 1 1.5
fi
if [ "$(avail bubblewrap)" = True ]; then
	raw=$(/usr/bin/python3 bench/refs.py bwrap "$KIS" -- /bin/true)
	old="bwrap --unshare-all --die-with-parent --cap-drop ALL --new-session --clearenv"
	for d in /usr /bin /sbin /lib /lib64 /etc; do
		if [ -L "$d" ]; then old="$old --symlink $(readlink $d) $d"
		elif [ -d "$d" ]; then old="$old --ro-bind $d $d"; fi
	done
	old="$old --proc /proc --dev /dev --tmpfs /tmp --chdir / -- /bin/true"
	echo
	echo "== bubblewrap: start-to-exit of /bin/true ($N runs each; target: within 1.2x raw bwrap, kis argv)"
	set -- "raw bwrap, kis argv=$raw" "raw bwrap, kis argv + cgroup=@cgroup $raw" \
		"kis bubblewrap=$KIS sandbox run --backend bubblewrap -- /bin/true" \
		"old ref: bwrap --unshare-all=$old" "$IMG=build/bench/empty-glibc"
	[ -n "$B" ] && set -- "$@" "before: bubblewrap=$B sandbox run --backend bubblewrap -- /bin/true"
	build/bench/startup "$N" "$@" |
		sh bench/floor.sh "raw bwrap, kis argv" "kis bubblewrap" "$IMG" 2 1.2
fi
echo "load: $(uptime)"
