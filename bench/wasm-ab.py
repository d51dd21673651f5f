#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Builds of kis side by side on bench/wasm-real.sh's programs and inputs
# (its WORK must hold them: run that script once first), through the wasm
# tier with --wasm-engine compiler, each build with a store and code cache
# of its own (warmed before the rounds), beside the native binaries:
# interleaved rounds, the builds' order alternating from one round to the
# next, CPU time (user + system, the tier's child included) from wait4(2)
# at microsecond resolution. Prints medians, the spread, the ratio to
# native, and per round the ratio of each build to the first (paired).
# Usage: bench/wasm-ab.py ROUNDS DIR_A DIR_B [...]
#   each DIR holds a build's kis, kis-helper and libkis-jit.so (a copy of
#   build/ taken before a change, say); PROGS=lua,bzip2,sqlite,sqlite1,zlib
#   picks programs, SQSIZE speedtest1's --size (default 25: 0.5 s native),
#   WORK as for wasm-real.sh. Raw times go to /tmp/wasm-ab-last.json.
import atexit, json, math, os, shutil, statistics, subprocess, sys, tempfile

W = os.environ.get("WORK", "/var/tmp/kis-bench-wasm")
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wasm-real")
rounds = int(sys.argv[1])
dirs = sys.argv[2:]
progs = os.environ.get("PROGS", "lua,bzip2,sqlite,zlib").split(",")
SQSIZE = os.environ.get("SQSIZE", "25")
sq = [x for x in os.listdir(W + "/src") if x.startswith("sqlite3-") and os.path.isdir(W + "/src/" + x)][0]
tmp = tempfile.mkdtemp(prefix="kis-wasm-ab.")
ws = {}


def cleanup():
    # also when a run fails (sys.exit): each workspace destroyed by its
    # own build (its mounts go with it), then the stores' directory
    for d, (env, w) in ws.items():
        subprocess.call([d + "/kis", "sandbox", "destroy", w], env=env,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(tmp, ignore_errors=True)


atexit.register(cleanup)
base = tmp + "/base"
os.mkdir(base)
for f in os.listdir(W + "/bin"):
    if f.endswith(".wasm"):
        shutil.copy(W + "/bin/" + f, base)
shutil.copy(HERE + "/mixed.lua", base)
amal = open(W + "/src/" + sq + "/bld/sqlite3.c", "rb").read()
open(tmp + "/bz.in", "wb").write(amal[:4000000])
open(tmp + "/z.in", "wb").write(amal[:4194304])
P = {
    "lua": ("lua", ["mixed.lua"], None),
    "bzip2": ("bzip2", ["-9", "-c"], tmp + "/bz.in"),
    "sqlite": ("speedtest1", ["--memdb", "--size", SQSIZE], None),
    "sqlite1": ("speedtest1", ["--memdb", "--size", "1"], None),
    "zlib": ("zlib_bench", [], tmp + "/z.in"),
}

def run(cmd, stdin, env=None, cwd=None):
    fi = open(stdin, "rb") if stdin else subprocess.DEVNULL
    p = subprocess.Popen(cmd, stdin=fi, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    _, st, ru = os.wait4(p.pid, 0)
    if st != 0:
        print("failed:", cmd, st, file=sys.stderr)
        sys.exit(1)
    return ru.ru_utime + ru.ru_stime

for d in dirs:
    env = dict(os.environ, KIS_SANDBOX_ROOT=tmp + "/store-" + d.replace("/", "_"))
    kis = d + "/kis"
    b = subprocess.check_output([kis, "sandbox", "base", "import", base], env=env).decode().strip()
    w = subprocess.check_output([kis, "sandbox", "clone", b], env=env).decode().strip()
    ws[d] = (env, w)
    for p in progs:
        m, a, i = P[p]
        run([kis, "sandbox", "run", "--tier", "wasm", "--wasm-engine", "compiler", "--workspace", w, "--", m + ".wasm"] + a, i, env)

times = {}
for r in range(rounds):
    for p in progs:
        m, a, i = P[p]
        order = ["native"] + (dirs if r % 2 == 0 else dirs[::-1])
        for d in order:
            if d == "native":
                t = run([W + "/bin/" + m + ".native"] + a, i, cwd=base)
            else:
                env, w = ws[d]
                t = run([d + "/kis", "sandbox", "run", "--tier", "wasm", "--wasm-engine", "compiler", "--workspace", w, "--", m + ".wasm"] + a, i, env)
            times.setdefault((p, d), []).append(t)
    print("round", r + 1, "load", open("/proc/loadavg").read().split()[:3], file=sys.stderr)

print("CPU ms median [min..max] and ratio to native; rounds", rounds, "load", open("/proc/loadavg").read().split()[:3])
lg = {d: [] for d in dirs}
for p in progs:
    nat = statistics.median(times[(p, "native")])
    line = "%-8s native %7.1f" % (p, nat * 1000)
    for d in dirs:
        x = times[(p, d)]
        med = statistics.median(x)
        lg[d].append(math.log(med / nat))
        line += " | %s %7.1f [%5.0f..%5.0f] %.3fx" % (os.path.basename(d), med * 1000, min(x) * 1000, max(x) * 1000, med / nat)
    print(line)
print("geomean  " + " | ".join("%s %.3fx" % (os.path.basename(d), math.exp(sum(v) / len(v))) for d, v in lg.items()))
# paired: X/first per round, and the minima
json.dump({"%s|%s" % k: v for k, v in times.items()}, open("/tmp/wasm-ab-last.json", "w"))
for d in dirs[1:]:
    for p in progs:
        q = [b / a for a, b in zip(times[(p, dirs[0])], times[(p, d)])]
        print("%-8s %s/%s per round median %.3f [%.3f..%.3f]; min %.1f vs %.1f" % (p, os.path.basename(d), os.path.basename(dirs[0]), statistics.median(q), min(q), max(q), min(times[(p, d)]) * 1000, min(times[(p, dirs[0])]) * 1000))
