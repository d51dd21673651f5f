#!/bin/sh
# SPDX-License-Identifier: MIT
# The layers of the source (docs/layers.md): a file may include the headers
# of its own layer and of the layers its line below names, never of a layer
# above it; and at link time (house rule 16) an object names no symbol that
# only a layer above or beside it defines (nm(1): each object's undefined
# symbols against the global definitions of every src/ folder's objects).
# Run by `make check`; prints each offending include or symbol and fails.
# A first argument names another tree to check (the test of this script), a
# second its objects (default: TREE/build/obj; when that default is missing
# the link check is skipped and says so; a named directory must exist).
set -eu
cd "${1:-$(dirname "$0")/..}"
objdir=${2:-build/obj}

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
	kis/error.h|kis/id.h|kis/result.h|kis/limits.h|kis/profile.h|kis/io.h|kis/log.h) echo core ;;
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

# ---- link time ----
# Exceptions, one line each: "<object's layer> <symbol> <why>". There are
# none; a line here must say why the edge cannot go.
link_exceptions=""

if [ ! -d "$objdir/src" ]; then
	if [ -n "${2:-}" ]; then
		echo "check-layers: no objects in '$objdir/src'"
		exit 1
	fi
	echo "check-layers: no objects under $objdir/src: link edges not checked (run make first)"
	exit "$bad"
fi
# every layer with the layers its objects may name: the include rule's
# list, where the CLI (a client of the public API, which every layer of
# the library implements a part of) may name any of the library's layers
lbad=0
objs=$(find "$objdir/src" -name '*.o' | sort)
rules=$(for l in core exec confine net store wasm agent backends engine cli runtime helper; do
	ok=$(allowed "$l")
	case " $ok " in *" public "*) ok="$ok engine" ;; esac
	[ "$l" = cli ] && ok="core exec confine net store wasm agent backends engine cli"
	echo "$l $ok"
done)
# nm -A: "FILE:VALUE TYPE NAME" (defined) or "FILE:   U NAME"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
nm -A -g $objs > "$tmp" || { echo "check-layers: nm failed"; exit 1; }
out=$(awk -v objdir="$objdir/src/" -v rules="$rules" \
	-v exc="$link_exceptions" '
function layer_of(f,   p) {
	p = substr(f, index(f, objdir) + length(objdir))
	sub(/\/.*/, "", p)
	return p ~ /\.o$/ ? "core" : p
}
BEGIN {
	n = split(rules, r, "\n")
	for (i = 1; i <= n; i++) {
		k = split(r[i], w, " ")
		for (j = 2; j <= k; j++) may[w[1] " " w[j]] = 1
	}
	n = split(exc, e, "\n")
	for (i = 1; i <= n; i++) { split(e[i], w, " "); if (w[2] != "") excused[w[1] " " w[2]] = 1 }
}
{
	f = $1; sub(/:.*/, "", f); t = $(NF - 1); s = $NF
	if (t == "U") { use[++nu] = f " " s; next }
	if (t !~ /^[wv]$/) {
		l = layer_of(f)
		if (!((l, s) in seen)) { seen[l, s] = 1; defs[s] = defs[s] " " l }
		where[s " " l] = f
	}
}
END {
	for (i = 1; i <= nu; i++) {
		split(use[i], u, " ")
		l = layer_of(u[1]); s = u[2]
		if (!(s in defs)) continue          # libc, jansson, ...
		k = split(defs[s], d, " "); ok = 0
		for (j = 1; j <= k; j++) if (d[j] == l || (l " " d[j]) in may) ok = 1
		if (ok && l == "engine" && k == 1) {
			# the engine names no backend and speaks no agent protocol
			# (issue 42): of the folder of a backend it names only the
			# table (kis_backend_<name>, its registry), of the agent
			# nothing; the rest goes through struct kis_backend
			wf = where[s " " d[1]]
			if (d[1] == "agent" || (wf ~ /\/backends\/[a-z_]+\// && s !~ /^kis_backend_[a-z]+$/)) {
				if ((l " " s) in excused) continue
				print "check-layers: " u[1] " names " s ", defined in " wf \
					": the engine names no backend (struct kis_backend)"
			}
			continue
		}
		if (ok || (l " " s) in excused) continue
		print "check-layers: " u[1] " names " s ", defined in " where[s " " d[1]] \
			" (layer " d[1] "), above or beside its layer " l
	}
}' "$tmp") || { echo "check-layers: awk failed"; exit 1; }
out=$(printf '%s\n' "$out" | sed '/^$/d' | sort -u)
if [ -n "$out" ]; then
	echo "$out" | sed "s|$objdir/||g"
	lbad=1
else
	echo "check-layers: every symbol an object names is defined at or below its layer"
fi
[ "$bad" = 0 ] && [ "$lbad" = 0 ]
