#!/bin/sh
# SPDX-License-Identifier: MIT
# Egress: connect latency, TCP throughput (sandbox vs the engine's own
# namespace) and start-to-exit (egress vs off) per tier, in the offline
# world of the egress tests. Usage: sh bench/egress.sh [N]
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$REPO/build/kis" ] || { echo "bench/egress.sh: build/kis is missing; run make" >&2; exit 1; }
for t in pasta nsenter; do
	command -v "$t" >/dev/null 2>&1 || { echo "bench/egress.sh: $t is missing: skipped"; exit 0; }
done
exec /usr/bin/python3 "$REPO/bench/egress.py" "${1:-20}"
