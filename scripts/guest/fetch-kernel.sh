#!/bin/sh
# SPDX-License-Identifier: MIT
# Fetch the microvm guest kernel into the engine's guest cache, never
# installing it on the host: `apt-get download` + `dpkg -x` of Debian's
# linux-image-cloud-amd64, then the modules the guest needs (with their
# dependencies, in load order) and a static busybox.
# Usage: fetch-kernel.sh [DIR]   (default: $KIS_MICROVM_GUEST_DIR, else
# ${KIS_SANDBOX_ROOT:-$XDG_STATE_HOME/kis/sandbox}/cache/guest). Idempotent.
#        fetch-kernel.sh --check DIR: exit 0 when DIR holds a complete guest
# (this script's module list), 1 otherwise; fetches nothing (make install
# asks before it fetches, to reuse a guest already fetched).
# KIS_PROGRESS=1 (what `kis sandbox guest fetch` sets when stderr is a
# terminal and --quiet was not given): say each step on stderr, and let
# apt-get draw its download progress there.
set -eu
CHECK=0
if [ "${1:-}" = --check ]; then CHECK=1; shift; fi
PROGRESS=${KIS_PROGRESS:-0}
say() { if [ "$PROGRESS" = 1 ]; then echo "guest: $*" >&2; fi; }
dl() { # apt-get download PKG, its progress on stderr when wanted
	if [ "$PROGRESS" = 1 ]; then
		size=$(apt-cache show --no-all-versions "$1" 2>/dev/null | sed -n 's/^Size: //p' | head -n1)
		say "downloading $1${size:+ ($((size / 1048576)) MiB)}"
		apt-get download "$1" >&2
	else
		apt-get download "$1" >/dev/null 2>&1
	fi
}
DIR=${1:-${KIS_MICROVM_GUEST_DIR:-}}
if [ -z "$DIR" ]; then
	if [ -n "${KIS_SANDBOX_ROOT:-}" ]; then ROOT=$KIS_SANDBOX_ROOT
	elif [ "$(id -u)" -eq 0 ]; then ROOT=/var/lib/kis/sandbox
	else ROOT=${XDG_STATE_HOME:-$HOME/.local/state}/kis/sandbox; fi
	DIR=$ROOT/cache/guest
fi
# The modules the guest needs that the cloud kernel builds as modules (the
# rest, checked in modules.builtin, is in the image): virtio_mmio for the
# microvm's devices, virtio_console for the channel, virtio_blk and ext4
# for the workspace disks, overlay to join them, virtio_net (with failover
# and net_failover) for egress's network device. A cache made for another
# list is made again.
WANT="virtio_mmio virtio_console virtio_blk ext4 overlay virtio_net"
[ -s "$DIR/vmlinuz" ] && [ -s "$DIR/modules/load" ] && [ -x "$DIR/busybox" ] &&
	[ "$(cat "$DIR/modules/wanted" 2>/dev/null)" = "$WANT" ] && exit 0
[ "$CHECK" = 1 ] && exit 1
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd) # the work below happens in a temporary directory
TMP=$(mktemp -d "$DIR/.fetch.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"
# The metapackage names the versioned image package in its Depends.
dl linux-image-cloud-amd64
META=$(ls linux-image-cloud-amd64_*.deb)
PKG=$(dpkg-deb -f "$META" Depends | sed 's/ *(.*//; s/,.*//')
dl "$PKG"
say "unpacking $PKG (dpkg -x: nothing is installed on this host)"
dpkg -x "$PKG"_*.deb x
REL=$(ls x/lib/modules)
MODDIR=x/lib/modules/$REL
mkdir -p out/modules
cp x/boot/vmlinuz-"$REL" out/vmlinuz
echo "$REL" > out/kernel.release
: > out/modules/load
add() { # add MODULE: its dependencies first (modinfo's depends field)
	f=$(find "$MODDIR/kernel" -name "$1.ko" -o -name "$1.ko.xz" | head -n1)
	if [ -z "$f" ]; then
		m=$(echo "$1" | tr - _)
		grep -q "/$m.ko\$\|/$(echo "$1" | tr _ -).ko\$" "$MODDIR/modules.builtin" && return 0
		echo "module $1 is neither built in nor in the package" >&2
		exit 1
	fi
	b=$(basename "$f")
	grep -qx "$b" out/modules/load && return 0
	# the depends= field of the module's .modinfo section (what modinfo
	# -F depends prints; read with objcopy: kmod may not be installed)
	deps=$(objcopy -O binary --only-section=.modinfo "$f" /dev/stdout |
		tr '\0' '\n' | sed -n 's/^depends=//p' | tr , ' ')
	for d in $deps; do add "$d"; done
	f=$(find "$MODDIR/kernel" -name "$1.ko" -o -name "$1.ko.xz" | head -n1)
	b=$(basename "$f")
	cp "$f" out/modules/
	echo "$b" >> out/modules/load
}
say "picking the modules the guest loads: $WANT"
for m in $WANT; do add $m; done
echo "$WANT" > out/modules/wanted
BB=$(command -v busybox || true)
[ -n "$BB" ] && file -L "$BB" 2>/dev/null | grep -q 'statically linked' || BB=/bin/busybox
cp "$BB" out/busybox
chmod 0755 out/busybox
for f in vmlinuz kernel.release busybox; do mv -f out/$f "$DIR/$f"; done
rm -rf "$DIR/modules"
mv out/modules "$DIR/modules"
say "done"
echo "guest kernel $REL in $DIR" >&2
