#!/bin/sh
# SPDX-License-Identifier: MIT
# Host tier start-to-exit: /bin/true through the landlock and bubblewrap
# backends, beside plain fork/exec and beside raw bwrap with the same
# namespaces (ratios printed by build/bench/startup against the first line).
set -eu
cd "$(dirname "$0")/.."
mkdir -p build/bench
[ -x build/bench/startup ] || cc -std=gnu11 -O2 -Wall -Wextra -Werror -o build/bench/startup bench/startup.c
N=${N:-200}
KIS=build/kis
avail() { $KIS sandbox backends --json | /usr/bin/python3 -c "
import json, sys
print(any(b['backend'] == '$1' and b['available'] for b in json.load(sys.stdin)))"; }
store=$(mktemp -d /tmp/kis-bench-host-XXXXXX)
trap 'rm -rf "$store"' EXIT
export KIS_SANDBOX_ROOT="$store"
set -- "plain fork/exec=/bin/true" \
	"kis process tier=$KIS sandbox run --tier process --allow-process-tier -- /bin/true"
[ "$(avail landlock)" = True ] && set -- "$@" \
	"kis landlock=$KIS sandbox run --backend landlock -- /bin/true"
if [ "$(avail bubblewrap)" = True ]; then
	# the same namespaces, capabilities and mounts kis gives (seccomp aside)
	raw="bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try"
	raw="$raw --unshare-net --die-with-parent --cap-drop ALL --new-session --clearenv"
	for d in /usr /bin /sbin /lib /lib64 /etc; do
		if [ -L "$d" ]; then raw="$raw --symlink $(readlink $d) $d"
		elif [ -d "$d" ]; then raw="$raw --ro-bind $d $d"; fi
	done
	raw="$raw --proc /proc --dev /dev --tmpfs /tmp --chdir / -- /bin/true"
	set -- "$@" "raw bwrap=$raw" "kis bubblewrap=$KIS sandbox run --backend bubblewrap -- /bin/true"
fi
echo "== start-to-exit of /bin/true, host tier ($N runs each; ratio to plain fork/exec)"
build/bench/startup "$N" "$@"
# the pairs the targets name, each measured back to back (the machine is
# shared: a pair run together sees the same load)
if [ "$(avail landlock)" = True ]; then
	echo
	echo "== landlock beside the unconfined engine path (what confinement adds)"
	build/bench/startup "$N" \
		"kis process tier=$KIS sandbox run --tier process --allow-process-tier -- /bin/true" \
		"kis landlock=$KIS sandbox run --backend landlock -- /bin/true"
fi
if [ "$(avail bubblewrap)" = True ]; then
	echo
	echo "== bubblewrap beside raw bwrap (target: within 1.3x)"
	build/bench/startup "$N" "raw bwrap=$raw" \
		"kis bubblewrap=$KIS sandbox run --backend bubblewrap -- /bin/true"
fi
