#!/bin/sh
# SPDX-License-Identifier: MIT
# Host tier start-to-exit: /bin/true through the landlock and bubblewrap
# backends, beside plain fork/exec and beside raw bwrap with the same
# namespaces (ratios printed by build/bench/startup against the first line).
# BEFORE=DIR/kis (a kis with its kis-agent beside it, e.g. a copy of an
# earlier build) adds its lines to the pairs, measured in the same run.
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
B=${BEFORE:-}
if [ "$(avail landlock)" = True ]; then
	echo
	echo "== landlock beside the unconfined engine path (target: within 1.5x)"
	set -- "kis process tier=$KIS sandbox run --tier process --allow-process-tier -- /bin/true" \
		"kis landlock=$KIS sandbox run --backend landlock -- /bin/true"
	[ -n "$B" ] && set -- "$@" \
		"before: process tier=$B sandbox run --tier process --allow-process-tier -- /bin/true" \
		"before: landlock=$B sandbox run --backend landlock -- /bin/true"
	build/bench/startup "$N" "$@"
fi
if [ "$(avail bubblewrap)" = True ]; then
	# the reference with the system view kis gives (sysview.c: masked
	# secrets in /etc, /proc's writable and leaky entries covered): where
	# bwrap's own work ends and the engine's begins
	full=$($KIS sandbox run --dry-run --backend bubblewrap -- /bin/true | /usr/bin/python3 -c '
import json, sys
a = json.load(sys.stdin).get("bwrap_argv") or []
out, skip = [], 0
for i, w in enumerate(a[1:]):
    if skip:
        skip -= 1
        continue
    if w in ("--userns", "--seccomp", "--channel-fd", "--info-fd", "--listen-fd"):
        skip = 1
        continue
    if w == "--":
        break
    if w == "--as-pid-1":
        continue
    if w == "--ro-bind" and a[i + 2:i + 3] == ["/run/kis-agent"]:
        skip = 2  # the agent, staged in the engine mount namespace
        continue
    if w == "--uid" or w == "--gid":
        skip = 1
        continue
    out.append(w)
print(" ".join(out))' 2>/dev/null || true)
	echo
	echo "== bubblewrap beside raw bwrap (target: within 1.3x)"
	set -- "raw bwrap=$raw"
	[ -n "$full" ] && set -- "$@" "raw bwrap, same view=bwrap --unshare-user $full -- /bin/true"
	set -- "$@" "kis bubblewrap=$KIS sandbox run --backend bubblewrap -- /bin/true"
	[ -n "$B" ] && set -- "$@" "before: bubblewrap=$B sandbox run --backend bubblewrap -- /bin/true"
	build/bench/startup "$N" "$@"
fi
