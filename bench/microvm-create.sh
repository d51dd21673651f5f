#!/bin/sh
# SPDX-License-Identifier: MIT
# The microvm's session creation and one-shot run start (issue 13's target:
# at most 0.5 s per session on this 2-core TCG machine), this tree's engine
# beside an earlier one, interleaved round by round in one run
# (bench/microvm_create.py): with no VM up, with UP sessions up, and under
# LOADERS CPU burners; per phase from the backend's trace.
# BEFORE=DIR/kis: an earlier engine with its kis-agent beside it (e.g. main
# built into /tmp/kis-before); unset: main's tip is built here; empty: this
# tree alone. Removes every session it made. Figures, not assertions.
set -eu
cd "$(dirname "$0")/.."
GUEST=${KIS_MICROVM_GUEST_DIR:-$PWD/build/microvm-guest}
if ! command -v qemu-system-x86_64 >/dev/null || ! scripts/guest/fetch-kernel.sh "$GUEST" >/dev/null; then
	echo "microvm-create: skipped (no qemu-system-x86_64 or no guest kernel)"
	exit 0
fi
make -s build/kis build/kis-agent >/dev/null
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT INT TERM
mkdir -p "$WORK/after"
cp build/kis build/kis-agent "$WORK/after/"
set -- "after=$WORK/after/kis"
if [ -z "${BEFORE+x}" ]; then
	mkdir -p "$WORK/src-before" "$WORK/before"
	git archive main | tar -x -C "$WORK/src-before"
	if make -C "$WORK/src-before" -j2 build/kis build/kis-agent >/dev/null 2>&1; then
		cp "$WORK/src-before/build/kis" "$WORK/src-before/build/kis-agent" "$WORK/before/"
		BEFORE=$WORK/before/kis
	else
		echo "microvm-create: main did not build; this tree alone"
		BEFORE=
	fi
fi
if [ -n "$BEFORE" ]; then
	mkdir -p "$WORK/before-bin"
	cp "$BEFORE" "$(dirname "$BEFORE")/kis-agent" "$WORK/before-bin/"
	set -- "before=$WORK/before-bin/kis" "$@"
fi
echo "microvm-create: $(git rev-parse --short HEAD) against ${BEFORE:-nothing}; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 bench/microvm_create.py "$WORK" "$GUEST" "$@"
