#!/bin/sh
# SPDX-License-Identifier: MIT
# Clone and destroy time per strategy for bases of 1 MiB, 100 MiB and 1 GiB
# (10,000 files each), beside cp -a and cp --reflink=always of the same tree.
# One run, warm page cache. Usage: sh bench/clone.sh [SIZES_MIB...]
set -eu

REPO=$(cd "$(dirname "$0")/.." && pwd)
KIS="$REPO/build/kis"
PY=/usr/bin/python3
SIZES=${*:-"1 100 1024"}
FILES=10000
[ -x "$KIS" ] || { echo "bench/clone.sh: build/kis is missing; run make" >&2; exit 1; }

WORK=$(mktemp -d /tmp/kis-bench-clone-XXXXXX)
LOOPDEV=
cleanup() {
	set +e
	for root in "$WORK/ext4-store" "$WORK/btrfs/store"; do
		[ -d "$root/workspaces" ] || continue
		for w in $(ls "$root/workspaces"); do
			KIS_SANDBOX_ROOT=$root "$KIS" sandbox destroy "$w" >/dev/null 2>&1
		done
	done
	if mountpoint -q "$WORK/btrfs" 2>/dev/null; then umount "$WORK/btrfs"; fi
	[ -n "$LOOPDEV" ] && losetup -d "$LOOPDEV"
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

now() { date +%s.%N; }
# secs START END
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

ROWS="$WORK/rows"
: > "$ROWS"
row() { printf '%-9s %-28s %10s %10s\n' "$1" "$2" "$3" "$4" >> "$ROWS"; }

# A tree of FILES files in 100 directories, TOTAL MiB in all.
make_tree() { # DIR MIB
	$PY - "$1" "$2" "$FILES" <<'PYEOF'
import os, sys
d, mib, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
size = mib * 1024 * 1024 // n
chunk = os.urandom(max(size, 1))
for i in range(n):
    sub = os.path.join(d, f"d{i % 100:02d}")
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, f"f{i:05d}"), "wb") as f:
        f.write(chunk[:size])
PYEOF
}

# kis clone + destroy: STORE_ROOT BASE STRATEGY LABEL SIZE
bench_kis() {
	t0=$(now)
	if ! w=$(KIS_SANDBOX_ROOT=$1 "$KIS" sandbox clone "$2" --strategy "$3" 2>"$WORK/err"); then
		row "$5" "$4" "refused" "-"
		sed 's/^/    /' "$WORK/err" >> "$ROWS"
		return
	fi
	t1=$(now)
	KIS_SANDBOX_ROOT=$1 "$KIS" sandbox destroy "$w"
	t2=$(now)
	row "$5" "$4" "$(secs "$t0" "$t1")" "$(secs "$t1" "$t2")"
}

# cp + rm -rf: SRC DSTDIR LABEL SIZE CP_ARGS...
bench_cp() {
	cp_src=$1 cp_dst=$2 cp_label=$3 cp_size=$4
	shift 4
	t0=$(now)
	cp "$@" "$cp_src" "$cp_dst"
	t1=$(now)
	rm -rf "$cp_dst"
	t2=$(now)
	row "$cp_size" "$cp_label" "$(secs "$t0" "$t1")" "$(secs "$t1" "$t2")"
}

HAVE_BTRFS=no
if [ "$(id -u)" = 0 ] && command -v mkfs.btrfs >/dev/null && command -v losetup >/dev/null; then
	truncate -s 8G "$WORK/btrfs.img"
	mkfs.btrfs -q "$WORK/btrfs.img" >/dev/null 2>&1
	LOOPDEV=$(losetup --find --show "$WORK/btrfs.img")
	mkdir "$WORK/btrfs"
	mount "$LOOPDEV" "$WORK/btrfs"
	HAVE_BTRFS=yes
else
	echo "note: no btrfs loop image (needs root, mkfs.btrfs, losetup): reflink rows skipped" >&2
fi

for mib in $SIZES; do
	label="${mib}MiB"
	[ "$mib" -ge 1024 ] && label="$((mib / 1024))GiB"
	src="$WORK/src-$mib"
	mkdir "$src"
	echo "generating $label in $FILES files" >&2
	make_tree "$src" "$mib"

	ext4=$WORK/ext4-store
	t0=$(now)
	b=$(KIS_SANDBOX_ROOT=$ext4 "$KIS" sandbox base import "$src")
	t1=$(now)
	row "$label" "import (ext4)" "$(secs "$t0" "$t1")" "-"
	bench_kis "$ext4" "$b" copy "kis copy (ext4)" "$label"
	bench_kis "$ext4" "$b" overlay "kis overlay (ext4)" "$label"
	bench_cp "$src" "$WORK/cp-a" "cp -a (ext4)" "$label" -a
	KIS_SANDBOX_ROOT=$ext4 "$KIS" sandbox base remove "$b"

	if [ "$HAVE_BTRFS" = yes ]; then
		bt=$WORK/btrfs/store
		t0=$(now)
		b=$(KIS_SANDBOX_ROOT=$bt "$KIS" sandbox base import "$src")
		t1=$(now)
		row "$label" "import (btrfs)" "$(secs "$t0" "$t1")" "-"
		bench_kis "$bt" "$b" reflink "kis reflink (btrfs)" "$label"
		bench_kis "$bt" "$b" overlay "kis overlay (btrfs)" "$label"
		bench_kis "$bt" "$b" copy "kis copy (btrfs)" "$label"
		bench_cp "$bt/bases/$b/tree" "$WORK/btrfs/cp-reflink" "cp --reflink=always (btrfs)" \
			"$label" -a --reflink=always
		bench_cp "$bt/bases/$b/tree" "$WORK/btrfs/cp-a" "cp -a (btrfs)" "$label" -a \
			--reflink=never
		KIS_SANDBOX_ROOT=$bt "$KIS" sandbox base remove "$b"
	fi
	rm -rf "$src"
done

printf '%-9s %-28s %10s %10s\n' SIZE METHOD CLONE_S DESTROY_S
cat "$ROWS"
