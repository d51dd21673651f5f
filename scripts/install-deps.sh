#!/bin/sh
# SPDX-License-Identifier: MIT
# Install the Debian packages kis sandbox builds, tests and runs with.
# Idempotent: installs only what is missing; needs root (or sudo).
# libclang-rt-14-dev: the libFuzzer and sanitizer runtimes (check-fuzz).
# tcl and dpkg-dev: bench/wasm-real.sh (SQLite makes its amalgamation with tclsh;
# dpkg-source unpacks what apt-get source fetched).
# python3-grpcio, python3-grpc-tools, containernetworking-plugins, runc: the CRI
# tests (tests/integration/test_cri.py: our CRI client, pod networks, the control).
# golang-go: the Go binding (bindings/go, make check-go; skipped without it).
# python3-pip, -setuptools, -wheel: make python (the wheel of bindings/python, offline).
# python3-jsonschema: the tests validate every --json document against docs/schema.
set -eu
PKGS="build-essential pkg-config libjansson-dev libseccomp-dev libcmocka-dev libsubid-dev
python3 python3-pytest bubblewrap crun passt nftables wabt busybox-static e2fsprogs btrfs-progs
xfsprogs iproute2 podman containerd uidmap hyperfine gnuplot-nox clang libclang-rt-14-dev lld wasi-libc libclang-rt-14-dev-wasm32 llvm-14-dev nodejs qemu-system-x86 cpio help2man man-db zsh
tcl dpkg-dev python3-grpcio python3-grpc-tools containernetworking-plugins runc
golang-go python3-pip python3-setuptools python3-wheel python3-jsonschema"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
echo "installing:$missing" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
