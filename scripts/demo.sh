#!/bin/sh
# SPDX-License-Identifier: MIT
# `make run`: the main job on an embedded default. Import a small base (made
# here from busybox), clone it, and run a command on the strongest tier this
# host offers, printing the result. Uses a store under build/ for its base
# and workspace and removes what it made; the microvm's guest kernel goes
# where every later run finds it.
set -eu
cd "$(dirname "$0")/.."
KIS=build/kis
# The microvm tier needs a guest kernel: Debian's cloud kernel, downloaded
# and unpacked, never installed on the host. It is fetched into the user's
# own store (what a later `kis sandbox run --tier microvm` reads) unless a
# system location (`make install`) or $KIS_MICROVM_GUEST_DIR already has it;
# the demo then uses that same guest, so the two agree. Without it (no QEMU,
# no network to the archive) the demo uses the next tier.
guest_source() { $KIS sandbox guest status --json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["source"] if d["found"] else "none", d["path"])'; }
if command -v qemu-system-x86_64 >/dev/null 2>&1; then
	# shellcheck disable=SC2046 # two words: the source and the path
	set -- $(guest_source)
	if [ "$1" = none ]; then
		echo "== fetching the microvm's guest kernel into $2 (once; Debian's linux-image-cloud-amd64)"
		$KIS sandbox guest fetch >/dev/null || echo "   (not fetched: the microvm tier stays unavailable)"
		# shellcheck disable=SC2046
		set -- $(guest_source)
	fi
	case $1 in
	store) export KIS_MICROVM_GUEST_DIR="$2" ;; # with its snapshots, for the next run too
	esac
fi
export KIS_SANDBOX_ROOT="$PWD/build/demo-store"

echo "== what this host can enforce"
$KIS sandbox backends
echo

# The strongest available tier that runs native commands (DESIGN.md order).
tier=$($KIS sandbox backends --json | /usr/bin/python3 -c '
import json, sys
order = ["microvm", "container", "host"]
caps = [b for b in json.load(sys.stdin) if b["available"] and b["native"]]
tiers = {t for b in caps for t in b["tiers"]}
print(next((t for t in order if t in tiers), "process"))')

args=""
if $KIS sandbox --help | grep -q '^  base '; then
	base_dir=build/demo-base
	rm -rf "$base_dir" && mkdir -p "$base_dir/bin"
	echo "hello from a cloned workspace" > "$base_dir/hello.txt"
	base=$($KIS sandbox base import "$base_dir")
	echo "== imported base $base"
	args="--base $base"
fi
if [ "$tier" = process ]; then
	echo "== no confining tier is available here: using the process tier through its escape hatch"
	args="$args --tier process --allow-process-tier"
else
	echo "== running on the strongest tier available: $tier"
	args="$args --tier $tier"
fi
if [ "$tier" = microvm ]; then
	echo "== the first microvm run builds the guest's initramfs and boots it once to save a"
	echo "   snapshot (about 30 s under TCG, once per machine size); later runs restore it"
fi
echo "\$ kis sandbox run --json $args -- sh -c 'cat hello.txt 2>/dev/null; uname -sr; id -u'"
# shellcheck disable=SC2086
$KIS sandbox run --json $args -- sh -c 'cat hello.txt 2>/dev/null; uname -sr; id -u' |
	/usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)
print(json.dumps(r, indent=2))
t = r["termination"]
print("\n%s tier (%s backend): %s, exit %s, %d ms wall" % (
    r["tier"], r["backend"], t["reason"], t["exit_code"], r["usage"]["wall_ms"]))'
if [ -n "${base:-}" ]; then
	$KIS sandbox base remove "$base" >/dev/null
fi
