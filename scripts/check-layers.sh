#!/bin/sh
# SPDX-License-Identifier: MIT
# The layers of the source (docs/layers.md): a file may include the headers
# of its own layer and of the layers its line below names, never of a layer
# above it. Run by `make check`; prints each offending include and fails.
# An argument names another tree to check (the test of this script).
set -eu
cd "${1:-$(dirname "$0")/..}"

# layer: the layers it may use (itself included)
allowed() {
	case "$1" in
	core)     echo "core" ;;
	exec)     echo "core exec" ;;
	confine)  echo "core confine" ;;
	net)      echo "core exec confine net" ;;
	store)    echo "core exec confine store" ;;  # rootless clones: a holder (view.c)
	wasm)     echo "core wasm" ;;
	agent)    echo "core exec confine agent" ;;
	backends) echo "core exec confine net store wasm agent backends" ;;
	engine)   echo "core exec confine net store wasm agent backends engine" ;;
	cli)      echo "core store wasm backends cli public" ;;  # the public API only (below)
	runtime)  echo "core exec confine net store backends engine runtime public" ;;
	helper)   echo "core confine wasm helper public" ;;  # kis-helper: the dynamic half of the static CLI
	*)        echo "" ;;
	esac
}

# The layer a header belongs to: src/<layer>/..., or a public header by
# what implements it.
header_layer() {
	case "$1" in
	kis/error.h|kis/id.h|kis/result.h|kis/limits.h|kis/profile.h|kis/io.h) echo core ;;
	kis/store.h) echo store ;;
	kis/wasm.h) echo wasm ;;
	kis/backend.h) echo backends ;;
	kis/sandbox.h|kis/session.h|kis/ffi.h) echo public ;;
	*/*) echo "${1%%/*}" ;;
	*) echo local ;;   # "cli.h" beside the file
	esac
}

bad=0
for f in $(find src -name '*.[ch]' | sort); do
	layer=$(echo "$f" | cut -d/ -f2)
	case "$layer" in *.h|*.c) layer=core ;; esac
	ok=$(allowed "$layer")
	if [ -z "$ok" ]; then
		echo "check-layers: $f: directory src/$layer is in no layer (scripts/check-layers.sh)"
		bad=1
		continue
	fi
	for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
		hl=$(header_layer "$h")
		[ "$hl" = local ] && continue
		# the CLI is a client of the library: public headers only
		if [ "$layer" = cli ]; then
			case "$h" in
			kis/*) continue ;;
			*) echo "check-layers: $f includes \"$h\": the CLI uses only the public headers (include/kis)"
			   bad=1; continue ;;
			esac
		fi
		# the engine implements the public API; everything at its level or
		# above may include it
		if [ "$hl" = public ]; then
			case " $ok " in *" engine "*|*" public "*) continue ;; esac
		fi
		case " $ok " in
		*" $hl "*) ;;
		*) echo "check-layers: $f includes \"$h\" (layer $hl), above or beside its layer $layer"
		   bad=1 ;;
		esac
	done
done
[ "$bad" = 0 ] && echo "check-layers: every include goes down the layers"
exit "$bad"
