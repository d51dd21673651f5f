#!/bin/sh
# SPDX-License-Identifier: MIT
# Does a run's cost grow with its base? (issue 41) `kis sandbox run --base B
# -- true` (clone + run + destroy) per backend, for bases of 10, 10,000 and
# 100,000 files of 4 KiB beside the empty base; the median of REPS runs and
# its ratio to the empty base's (target: at most 1.2x), and whether upper/
# stayed empty (a landlock run used to copy the whole base up).
# Usage: sh bench/base-size.sh [BACKENDS...]   (REPS=5 FILES="10 10000 100000")
set -eu

REPO=$(cd "$(dirname "$0")/.." && pwd)
KIS="$REPO/build/kis"
PY=/usr/bin/python3
BACKENDS=${*:-"process landlock bubblewrap oci"}
REPS=${REPS:-5}
FILES=${FILES:-"10 10000 100000"}
[ -x "$KIS" ] || { echo "bench/base-size.sh: build/kis is missing; run make" >&2; exit 1; }

# under /tmp, searchable by others: the host tiers run as an unprivileged user
WORK=$(mktemp -d /tmp/kis-bench-base-XXXXXX)
chmod 711 "$WORK"
export KIS_SANDBOX_ROOT="$WORK/store"
cleanup() {
	set +e
	for w in $(ls "$KIS_SANDBOX_ROOT/workspaces" 2>/dev/null); do
		"$KIS" sandbox destroy "$w" >/dev/null 2>&1
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

# median seconds of REPS runs: BACKEND BASE
median_run() {
	flags="--backend $1"
	[ "$1" = process ] && flags="$flags --allow-process-tier"
	i=0
	: > "$WORK/times"
	while [ $i -lt "$REPS" ]; do
		t0=$(date +%s.%N)
		# shellcheck disable=SC2086
		"$KIS" sandbox run $flags --base "$2" -- true >/dev/null 2>"$WORK/err" || {
			echo "refused"
			return
		}
		t1=$(date +%s.%N)
		awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", b - a }' >> "$WORK/times"
		i=$((i + 1))
	done
	sort -n "$WORK/times" | awk '{ v[NR] = $1 } END { printf "%.3f", v[int((NR + 1) / 2)] }'
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

printf '%-11s %8s %10s %8s  %s\n' BACKEND FILES MEDIAN_S RATIO "UPPER AFTER true"
for be in $BACKENDS; do
	ref=
	for pair in $BASES; do
		n=${pair%%:*} b=${pair#*:}
		t=$(median_run "$be" "$b")
		if [ "$t" = refused ]; then
			printf '%-11s %8s %10s %8s  %s\n' "$be" "$n" refused - "$(head -c 100 "$WORK/err")"
			continue
		fi
		[ -z "$ref" ] && ref=$t
		ratio=$(awk -v a="$t" -v r="$ref" 'BEGIN { printf "%.2fx", a / r }')
		printf '%-11s %8s %10s %8s  %s\n' "$be" "$n" "$t" "$ratio" "$(upper_after "$be" "$b")"
	done
done
