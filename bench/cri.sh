#!/bin/sh
# SPDX-License-Identifier: MIT
# Pods through containerd's CRI plugin: start (RunPodSandbox to the first
# ExecSync) and teardown at the runc handler and the kis handlers,
# interleaved, medians and ratios to runc. The work is bench/cri.py's.
# Usage: sh bench/cri.sh [N [HANDLER...]]  (e.g. 9 kis-vm: runc and kis-vm only)
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
exec /usr/bin/python3 "$REPO/bench/cri.py" "$@"
