#!/bin/sh
# SPDX-License-Identifier: MIT
# Container tier: start-to-exit of /bin/true through `kis sandbox run --tier
# container` beside raw `crun run` of the config.json kis generates, and
# the clone-plus-run totals, as ratios, every row interleaved run by run.
# Usage: sh bench/oci.sh [N]
# BEFORE=DIR/kis (a kis with its kis-agent beside it, e.g. a copy of an
# earlier build) adds its line, measured in the same run.
#
# The references, and what each does:
#   raw crun, kis config   crun run of the config.json `kis sandbox run
#                          --dry-run --backend oci` shows (the function that
#                          writes the one a run uses: same mounts, masks,
#                          namespaces, rlimits, devices, memory and pids
#                          limits, seccomp), with /bin/true as process.args
#                          in place of the agent, on kis's rootfs skeleton,
#                          started the way kis starts crun (own process
#                          group, stdio on /dev/null, and on a hybrid cgroup
#                          host a private mount namespace without the v2
#                          mount: the @crunns recipe of bench/startup.c, no
#                          unshare(1), no shell); as root the container
#                          joins the sandbox's user namespace (0..65535 onto
#                          its own host block), made by the harness as kis
#                          makes it and named by a path into a descriptor
#                          table as kis names its own (@userns=FIRST,fd=N)
#                          (kis's config hands crun the compiled seccomp
#                          program as run.oci.seccomp_bpf_data, its only
#                          seccomp: crun loads it as given)
#   crun spec (old reference, labelled): `crun spec`'s default bundle on the
#                          same rootfs skeleton with the system directories
#                          bound read-only: fewer mounts and masks, no
#                          seccomp, no limits: less than kis asks of crun
set -eu
REPO=$(cd "$(dirname "$0")/.." && pwd)
KIS="$REPO/build/kis"
N=${1:-${N:-50}}
if ! command -v crun >/dev/null 2>&1; then echo "bench/oci.sh: crun is missing: skipped"; exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "bench/oci.sh: the oci backend needs root: skipped"; exit 0; fi
[ -x "$KIS" ] || { echo "bench/oci.sh: build/kis is missing; run make" >&2; exit 1; }
# the timer, and the price of one more process image (mk/bench.mk)
make -s -C "$REPO" bench-tools
IMG="an empty static glibc program"

WORK=$(mktemp -d /tmp/kis-bench-oci-XXXXXX)
export KIS_SANDBOX_ROOT="$WORK/store"
cleanup() {
	set +e
	for st in "$WORK/state" "$WORK/spec/state"; do
		for c in $(ls "$st" 2>/dev/null | grep '^kisref-'); do
			crun --root "$st" delete -f "$c" >/dev/null 2>&1
		done
	done
	for b in $("$KIS" sandbox base list --json 2>/dev/null | /usr/bin/python3 -c \
		'import json,sys; [print(b["id"]) for b in json.load(sys.stdin)]' 2>/dev/null); do
		"$KIS" sandbox base remove "$b" >/dev/null 2>&1
	done
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

"$KIS" sandbox run --tier container -- /bin/true # stages the agent the reference binds
raw=$(/usr/bin/python3 "$REPO/bench/refs.py" crun "$KIS" "$WORK" -- /bin/true)

# crun spec's default, on the same skeleton (the old kind of reference)
mkdir -p "$WORK/spec/bundle"
(cd "$WORK/spec/bundle" && crun spec)
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
c = json.load(open(f"{w}/spec/bundle/config.json"))
c["root"] = {"path": f"{w}/bundle/rootfs", "readonly": True}
c["process"].update(terminal=False, args=["/bin/true"])
c["linux"].pop("cgroupsPath", None)
# the system directories kis binds, read-only, so that /bin/true is there
kis = json.load(open(f"{w}/bundle/config.json"))
c["mounts"] += [m for m in kis["mounts"] if m["type"] == "bind" and m["destination"].count("/") == 1
                and m["destination"] != "/workspace"]
json.dump(c, open(f"{w}/spec/bundle/config.json", "w"))
PY
spec="@crunns crun --root $WORK/spec/state run --bundle $WORK/spec/bundle kisref-{}"

"$REPO/scripts/make-os-image.sh" "$WORK/os" >/dev/null
mkdir -p "$WORK/tiny" && echo hello > "$WORK/tiny/tiny.txt"
os=$("$KIS" sandbox base import "$WORK/os")
tiny=$("$KIS" sandbox base import "$WORK/tiny")

echo "load: $(uptime)"
echo "start-to-exit of /bin/true, $N runs each, interleaved (reference: raw crun on kis's config; target 1.2x)"
"$REPO/build/bench/startup" "$N" \
	"raw crun, kis config=$raw" \
	"kis run --tier container=$KIS sandbox run --tier container -- /bin/true" \
	"kis clone+run (root:host)=$KIS sandbox run --tier container --base $tiny -- /bin/true" \
	"kis clone+run (root:ws)=$KIS sandbox run --tier container --root workspace --base $os -- /bin/true" \
	"old ref: crun spec default=$spec" \
	"$IMG=$REPO/build/bench/empty-glibc" \
	${BEFORE:+"before: kis run --tier container=$BEFORE sandbox run --tier container -- /bin/true"} |
	sh "$REPO/bench/floor.sh" "raw crun, kis config" "kis run --tier container" "$IMG" 2 1.2
echo "load: $(uptime)"
