#!/bin/sh
# SPDX-License-Identifier: MIT
# Does a run's cost grow with its base? (issue 41) `kis sandbox run --base B
# -- true` (clone + run + destroy) per backend, for bases of 10, 10,000 and
# 100,000 files of 4 KiB and one of 1 GiB of data (16 files of 64 MiB)
# beside the empty base; the median of REPS runs and its ratio to the empty
# base's (target: at most 1.2x), and whether upper/ stayed empty after a
# kept run of `true` (a landlock run used to copy the whole base up). The
# wasm tier is not in it: it runs a module, not `true`.
# Usage: [KIS=path/to/kis] sh bench/base-size.sh [BACKENDS...]
#   (REPS=5 MICROVM_REPS=3 FILES="10 10000 100000" DATA_MIB=1024; DATA_MIB=0
#   leaves the data base out)
set -eu

REPO=$(cd "$(dirname "$0")/.." && pwd)
KIS=${KIS:-"$REPO/build/kis"}
PY=/usr/bin/python3
BACKENDS=${*:-"process landlock bubblewrap oci microvm"}
REPS=${REPS:-5}
MICROVM_REPS=${MICROVM_REPS:-3}
FILES=${FILES:-"10 10000 100000"}
DATA_MIB=${DATA_MIB:-1024}
[ -x "$KIS" ] || { echo "bench/base-size.sh: build/kis is missing; run make" >&2; exit 1; }

# under /tmp, searchable by others: the host tiers run as an unprivileged user
WORK=$(mktemp -d /tmp/kis-bench-base-XXXXXX)
chmod 711 "$WORK"
# the microvm's guest assets live in the default store's cache: a private
# store is told where they are
if [ -z "${KIS_MICROVM_GUEST_DIR:-}" ] && [ -d /var/lib/kis/sandbox/cache/guest ]; then
	export KIS_MICROVM_GUEST_DIR=/var/lib/kis/sandbox/cache/guest
fi
export KIS_SANDBOX_ROOT="$WORK/store"
cleanup() {
	set +e
	for w in "$KIS_SANDBOX_ROOT"/workspaces/*; do
		[ -d "$w" ] && "$KIS" sandbox destroy "${w##*/}" >/dev/null 2>&1
	done
	"$KIS" sandbox gc >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

make_tree() { # DIR FILES
	$PY - "$1" "$2" <<'PYEOF'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
chunk = os.urandom(4096)
for i in range(n):
    sub = os.path.join(d, f"d{i % 100:02d}")
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, f"f{i:06d}"), "wb") as f:
        f.write(chunk)
PYEOF
}

make_data() { # DIR MIB: MIB of random data in files of 64 MiB
	$PY - "$1" "$2" <<'PYEOF'
import os, sys
d, mib = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
chunk = os.urandom(1 << 20)
for i in range((mib + 63) // 64):
    with open(os.path.join(d, f"data{i:02d}"), "wb") as f:
        for _ in range(min(64, mib - 64 * i)):
            f.write(chunk)
PYEOF
}

# seconds of one run: BACKEND BASE (refused: "refused")
one_run() {
	flags="--backend $1"
	[ "$1" = process ] && flags="$flags --allow-process-tier"
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	"$KIS" sandbox run $flags --base "$2" -- true >/dev/null 2>"$WORK/err" || {
		echo "refused"
		return
	}
	t1=$(date +%s.%N)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}

median_of() { # FILE
	sort -n "$1" | awk '{ v[NR] = $1 } END { printf "%.3f", v[int((NR + 1) / 2)] }'
}

# upper/ after a kept run of `true`: empty or how many entries
upper_after() { # BACKEND BASE
	flags="--backend $1"
	[ "$1" = process ] && flags="$flags --allow-process-tier"
	# shellcheck disable=SC2086
	w=$("$KIS" sandbox run --json --keep $flags --base "$2" -- true 2>/dev/null |
		$PY -c 'import json,sys; print(json.load(sys.stdin)["workspace"])') || { echo "-"; return; }
	d="$KIS_SANDBOX_ROOT/workspaces/$w"
	u="$d/upper"
	[ -e "$d/disk.img" ] && u="$d/disk/upper"
	if [ -d "$u" ]; then
		n=$(find "$u" -mindepth 1 | wc -l)
		[ "$n" = 0 ] && echo "empty" || echo "$n entries"
	else
		echo "(no overlay)"
	fi
	"$KIS" sandbox destroy "$w" >/dev/null 2>&1
}

mkdir "$WORK/src-0"
BASES="0:$("$KIS" sandbox base import "$WORK/src-0")"
for n in $FILES; do
	echo "generating and importing a base of $n files" >&2
	make_tree "$WORK/src-$n" "$n"
	BASES="$BASES $n:$("$KIS" sandbox base import "$WORK/src-$n")"
	rm -rf "$WORK/src-$n"
done
if [ "$DATA_MIB" -gt 0 ]; then
	echo "generating and importing a base of $DATA_MIB MiB of data" >&2
	make_data "$WORK/src-data" "$DATA_MIB"
	BASES="$BASES ${DATA_MIB}MiB:$("$KIS" sandbox base import "$WORK/src-data")"
	rm -rf "$WORK/src-data"
fi

# FIRST_S: the first run of a base on a backend, which makes what is made
# once (the store's disk template, the microvm's image of the base); the
# median and its ratio are of REPS runs after it, taken in rounds over the
# bases so that a change of the machine's load falls on all of them
printf '%-11s %8s %8s %10s %8s  %s\n' BACKEND BASE FIRST_S MEDIAN_S RATIO "UPPER AFTER true"
for be in $BACKENDS; do
	reps=$REPS
	[ "$be" = microvm ] && reps=$MICROVM_REPS
	ok=
	for pair in $BASES; do
		n=${pair%%:*} b=${pair#*:}
		first=$(one_run "$be" "$b")
		echo "$first" > "$WORK/first-$n"
		: > "$WORK/times-$n"
		if [ "$first" = refused ]; then
			head -c 100 "$WORK/err" > "$WORK/why-$n"
		else
			ok="$ok $pair"
		fi
	done
	i=0
	while [ $i -lt "$reps" ]; do
		for pair in $ok; do
			n=${pair%%:*} b=${pair#*:}
			t=$(one_run "$be" "$b")
			[ "$t" = refused ] || echo "$t" >> "$WORK/times-$n"
		done
		i=$((i + 1))
	done
	ref=
	for pair in $BASES; do
		n=${pair%%:*} b=${pair#*:}
		if [ ! -s "$WORK/times-$n" ]; then
			printf '%-11s %8s %8s %10s %8s  %s\n' "$be" "$n" - refused - \
				"$(cat "$WORK/why-$n" 2>/dev/null)"
			continue
		fi
		t=$(median_of "$WORK/times-$n")
		[ -z "$ref" ] && ref=$t
		ratio=$(awk -v a="$t" -v r="$ref" 'BEGIN { printf "%.2fx", a / r }')
		printf '%-11s %8s %8s %10s %8s  %s\n' "$be" "$n" "$(cat "$WORK/first-$n")" "$t" \
			"$ratio" "$(upper_after "$be" "$b")"
	done
done
