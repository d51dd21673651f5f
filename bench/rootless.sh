#!/bin/sh
# SPDX-License-Identifier: MIT
# Rootless against root (issue 17), in one run: clone time of a 1 MiB and a
# 100 MiB base (SIZES to change), and start-to-exit of /bin/true on each
# tier both can run (landlock, bubblewrap, oci, process, microvm), for root
# and for an ordinary user side by side.
#
# The ordinary user is made for the run (useradd) and removed at the end
# with its processes and files. Both sides start through setpriv(1) (root
# with --reuid=0) so the wrapper costs both the same; each side has a store
# of its own (root's owned by root, the user's by the user). Start-to-exit
# rows are interleaved by build/bench/startup (the first row of a table is
# its reference, root's); clones are timed by bench/clone-time in this
# script, alternating root and user, median of N.
#
# What each side's clone does (src/store/): root, on ext4 without reflinks,
# mounts an overlay on the workspace's merged/ in the host namespace; the
# user makes upper/ and work/ and starts a holder that mounts the overlay
# in a user and mount namespace of its own (src/store/view.c). Neither
# copies the base. Needs root (to make the user).
set -eu
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench/rootless.sh: run as root (it makes a test user)"; exit 2; }
mkdir -p build/bench
make -s build/bench/startup
N=${N:-50}
SIZES=${SIZES:-"1 100"}
KIS=$(pwd)/build/kis
name=kisbench$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
top=$(mktemp -d /tmp/kis-bench-rootless-XXXXXX)
cleanup() {
	if id "$name" >/dev/null 2>&1; then
		uid=$(id -u "$name")
		for p in $(ps -o pid= -u "$uid" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
		userdel "$name" 2>/dev/null || true
	fi
	for m in $(awk -v t="$top" 'index($5, t) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$top"
}
trap cleanup EXIT INT TERM
useradd --no-create-home --home-dir "$top/user" --shell /usr/sbin/nologin "$name"
uid=$(id -u "$name"); gid=$(id -g "$name")
chmod 755 "$top"
mkdir -p "$top/root" "$top/user/run"
chown "$uid:$gid" "$top/user" "$top/user/run"
chmod 700 "$top/user/run"
chmod 700 "$top/root"
ROOT_RUN="setpriv --reuid=0 --regid=0 --clear-groups -- env KIS_SANDBOX_ROOT=$top/root/store HOME=$top/root"
USER_RUN="setpriv --reuid=$uid --regid=$gid --clear-groups -- env KIS_SANDBOX_ROOT=$top/user/store HOME=$top/user XDG_RUNTIME_DIR=$top/user/run"

echo "load: $(uptime)"
echo "kernel $(uname -r); store filesystem $(stat -f -c %T "$top")"

# ---- clone: per side, a base of each size imported once, N clones timed
now_ms() { date +%s%N | awk '{printf "%.3f", $1 / 1e6}'; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
echo
echo "== clone (median of $N, ms; copy-on-write: flat in base size; target: user's 1 GiB within 2x of its 1 MiB)"
printf '%-8s %10s %10s %10s %10s\n' "base" "root" "user" "user/root" "strategy(user)"
for mib in $SIZES; do
	for side in root user; do
		d="$top/$side/base$mib"
		mkdir -p "$d"
		head -c "$((mib * 1048576))" /dev/urandom > "$d/blob"
		[ "$side" = user ] && chown -R "$uid:$gid" "$d"
	done
	rb=$($ROOT_RUN "$KIS" sandbox base import "$top/root/base$mib")
	ub=$($USER_RUN "$KIS" sandbox base import "$top/user/base$mib")
	: > "$top/r.t"; : > "$top/u.t"
	i=0
	while [ $i -lt "$N" ]; do
		t0=$(now_ms); w=$($ROOT_RUN "$KIS" sandbox clone "$rb"); t1=$(now_ms)
		echo "$t1 $t0" | awk '{print $1 - $2}' >> "$top/r.t"
		$ROOT_RUN "$KIS" sandbox destroy "$w"
		t0=$(now_ms); w=$($USER_RUN "$KIS" sandbox clone "$ub"); t1=$(now_ms)
		echo "$t1 $t0" | awk '{print $1 - $2}' >> "$top/u.t"
		strat=$($USER_RUN "$KIS" sandbox workspace list --json | /usr/bin/python3 -c \
			'import json,sys; print(json.load(sys.stdin)[0]["strategy"])')
		$USER_RUN "$KIS" sandbox destroy "$w"
		i=$((i + 1))
	done
	r=$(median < "$top/r.t"); u=$(median < "$top/u.t")
	printf '%-8s %10s %10s %10s %10s\n' "${mib}MiB" "$r" "$u" \
		"$(echo "$u $r" | awk '{printf "%.2fx", $1 / $2}')" "$strat"
done

# ---- start-to-exit, interleaved, root's row the reference of each table
for be in landlock bubblewrap oci; do
	echo
	echo "== $be: start-to-exit of /bin/true ($N runs each; target: user within 1.3x of root)"
	build/bench/startup "$N" \
		"root $be=$ROOT_RUN $KIS sandbox run --backend $be -- /bin/true" \
		"user $be=$USER_RUN $KIS sandbox run --backend $be -- /bin/true"
done
echo
echo "== process: start-to-exit of /bin/true ($N runs each)"
build/bench/startup "$N" \
	"root process=$ROOT_RUN $KIS sandbox run --tier process --allow-process-tier -- /bin/true" \
	"user process=$USER_RUN $KIS sandbox run --tier process --allow-process-tier -- /bin/true"
# ---- the microvm, each side with the guest from the system location (an
# install into $top/inst) and its snapshot in its own store; one run each
# first makes the snapshot, then MVM_N runs interleaved (TCG: seconds each)
MVM_N=${MVM_N:-5}
mkdir -p "$top/inst"
chmod 755 "$top/inst"
if make -s install DESTDIR="$top/inst" >/dev/null 2>&1 &&
	[ -e "$top/inst/usr/local/lib/kis/guest/vmlinuz" ]; then
	IKIS=$top/inst/usr/local/bin/kis
	$ROOT_RUN "$IKIS" sandbox run --tier microvm -- /bin/true >/dev/null
	$USER_RUN "$IKIS" sandbox run --tier microvm -- /bin/true >/dev/null
	echo
	echo "== microvm: start-to-exit of /bin/true ($MVM_N runs each, restored from a snapshot; target: user within 1.3x of root)"
	build/bench/startup "$MVM_N" \
		"root microvm=$ROOT_RUN $IKIS sandbox run --tier microvm -- /bin/true" \
		"user microvm=$USER_RUN $IKIS sandbox run --tier microvm -- /bin/true"
else
	echo
	echo "microvm: not run (make install could not place the guest)"
fi
