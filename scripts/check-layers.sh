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

# ---- processes ----
# Every fork, clone and spawn goes through src/exec (house rule 13), but
# for the places below, one line each: "<file> <how many> <why>". A new
# one fails here until it moves to src/exec or is listed with its reason.
# Most are a fork whose child runs on in our own code and never execs (a
# worker, a broker, a filler): src/exec starts programs.
spawn_exceptions="src/agent/agent.c 1 the agent's worker for one connection: a fork of the agent that serves it in the agent's code, no program
src/agent/guest.c 4 the microvm guest's PID 1 (issue 42's example): it forks the agent from itself and the console ports' servers, and runs busybox --install before anything of the guest is mounted
src/backends/microvm/bench_unjailed.c 1 the benchmark's reference VMM start, deliberately without the jail (bench/microvm.sh), never in a run
src/backends/microvm/jail.c 2 the VMM's jail: a raw clone whose child is pid 1 of new namespaces and is given its cgroup and uid by the parent before it execs (a handshake kis_spawn has not), and the middle process that detaches a session's VMM and watches its tether
src/backends/microvm/mux.c 3 a session's port broker and its relays: forks running our code, detached like QEMU
src/backends/microvm/ram.c 1 the snapshot's RAM filler: a fork that fills a memfd while QEMU starts, our code
src/cli/cmd_guest.c 1 the guest fetch script: the CLI is a client of the public API only (no src/exec)
src/confine/cgroup.c 1 the OOM relay's victim: a fork that lowers its own group's limit and touches pages until the memcg OOM killer ends it, our code, no program
src/confine/subid_remote.c 1 kis-helper from the static kis: confine is beside exec, not above it
src/confine/userns.c 1 a user namespace's holder: a clone sharing our memory that makes raw system calls only (no exec)
src/helper/main.c 1 kis-helper's compiler process under its own rlimits: helper does not use exec, and the child runs LLVM in our code
src/runtime/host.c 3 kis-runtime's container process as the OCI runtime's contract wants it (runc's shape): bwrap's start with the bundle's sync pipe, and exec's setns into the container then a second fork inside its pid namespace whose pid goes to --pid-file
src/runtime/mvm.c 2 kis-runtime's microvm create and exec, the same contract: a child that detaches and reports a pid, our code
src/wasm/jit_remote.c 1 kis-helper from the static kis: wasm uses core only"
spawn_re='\b(v?fork)[[:space:]]*\([[:space:]]*\)|\bclone3?\(|SYS_clone|\bposix_spawnp?[[:space:]]*\('
sbad=0
found=$(grep -rnE "$spawn_re" src --include='*.c' | grep -v '^src/exec/' |
	grep -vE '^[^:]+:[0-9]+:[[:space:]]*(\*|/\*|//)' | cut -d: -f1 | sort | uniq -c |
	awk '{print $2, $1}')
for line in $(printf '%s\n' "$found" | tr ' ' ':'); do
	f=${line%%:*}; n=${line##*:}
	want=$(printf '%s\n' "$spawn_exceptions" | awk -v f="$f" '$1 == f {print $2}')
	if [ -z "$want" ]; then
		echo "check-layers: $f forks, clones or spawns $n time(s) outside src/exec: start it through src/exec, or list it with why in scripts/check-layers.sh"
		sbad=1
	elif [ "$n" -gt "$want" ]; then
		echo "check-layers: $f forks, clones or spawns $n times, $want listed: start the new one through src/exec, or list it with why"
		sbad=1
	fi
done
[ "$sbad" = 0 ] && echo "check-layers: every process starts through src/exec but the $(printf '%s\n' "$spawn_exceptions" | wc -l) places listed with why"
bad=$((bad | sbad))

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

# ---- circles between files ----
# Inside a layer, a file that names a symbol of another file depends on
# it; two files that depend on each other (through any others) are one
# unit in two files (issue 42). Each strongly connected component of that
# graph (Tarjan's algorithm over the objects' symbols) is printed and
# fails, unless all of its files lie in one set excused here, one line
# each: "<set> <why>", where the set is the objects of the circle joined
# by commas, or a folder ("src/engine/": any of its objects). A circle
# that shrinks as it is broken stays excused; a file that joins one, or a
# new circle, fails; and a set of files, all still built, that is no
# circle any more fails too, until its line goes.
circle_exceptions=""
cbad=0
cout=$(awk -v objdir="$objdir/" -v exc="$circle_exceptions" '
function rel(f) { return substr(f, index(f, objdir) + length(objdir)) }
# the excused set that holds every file of comp[1..m], or 0
function excuse(comp, m,   x, i, d) {
	for (x = 1; x <= nx; x++) {
		for (i = 1; i <= m; i++) {
			d = comp[i]; sub(/[^\/]*$/, "", d)
			if (!((x, comp[i]) in inset) && !((x, d) in inset)) break
		}
		if (i > m) return x
	}
	return 0
}
function visit(v,   k, ws, i, w, comp, m, line) {
	num[v] = low[v] = ++ix; st[++sp] = v; on[v] = 1
	k = split(adj[v], ws, " ")
	for (i = 1; i <= k; i++) {
		w = ws[i]
		if (!(w in num)) { visit(w); if (low[w] < low[v]) low[v] = low[w] }
		else if (on[w] && num[w] < low[v]) low[v] = num[w]
	}
	if (low[v] != num[v]) return
	line = ""; m = 0
	do {
		w = st[sp--]; on[w] = 0; comp[++m] = w; line = line " " w
	} while (w != v)
	if (m < 2) return
	for (i = 1; i <= m; i++) looped[comp[i]] = 1
	if (!excuse(comp, m)) print "check-layers: a circle of files, one unit in " m ":" line
}
BEGIN {
	n = split(exc, e, "\n")
	for (i = 1; i <= n; i++) {
		split(e[i], w, " ")
		if (w[1] == "") continue
		nx++; set[nx] = w[1]
		k = split(w[1], fs, ",")
		for (j = 1; j <= k; j++) inset[nx, fs[j]] = 1
	}
}
{
	f = $1; sub(/:.*/, "", f); f = rel(f); t = $(NF - 1); s = $NF
	if (t == "U") { nu++; uf[nu] = f; us[nu] = s; next }
	if (t !~ /^[wv]$/) def[s] = f
	nodes[f] = 1
}
END {
	for (i = 1; i <= nu; i++) {
		if (!(us[i] in def) || def[us[i]] == uf[i]) continue
		if ((uf[i] SUBSEP def[us[i]]) in edge) continue
		edge[uf[i], def[us[i]]] = 1
		adj[uf[i]] = adj[uf[i]] " " def[us[i]]
		nodes[uf[i]] = nodes[def[us[i]]] = 1
	}
	for (v in nodes) if (!(v in num)) visit(v)
	# a set none of whose files is in a circle any more: its excuse is
	# stale (a folder, or a set some of whose files are not built here,
	# is not judged: the test trees of this script hold a few files only)
	for (x = 1; x <= nx; x++) {
		if (set[x] ~ /\/$/) continue
		k = split(set[x], fs, ","); stale = 1
		for (j = 1; j <= k; j++) if (!(fs[j] in nodes) || fs[j] in looped) stale = 0
		if (stale) print "check-layers: " set[x] " is no circle any more: remove its line from circle_exceptions"
	}
}' "$tmp") || { echo "check-layers: awk failed"; exit 1; }
if [ -n "$cout" ]; then
	echo "$cout" | sort
	cbad=1
else
	echo "check-layers: no circle of files but the $(printf '%s\n' "$circle_exceptions" | grep -c .) excused with why in scripts/check-layers.sh"
fi
[ "$bad" = 0 ] && [ "$lbad" = 0 ] && [ "$cbad" = 0 ]
