# SPDX-License-Identifier: MIT
# Issue 43: what the engine does, shown on request (--log-level, KIS_LOG) and
# silent by default; the shell completion's values for every enum flag; the
# named escape hatches in `backends`; the quiet build.
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import KIS, ROOT, kis

# kis[ID] LEVEL: ... inside a run, "kis: LEVEL: ..." outside one
EVENT = re.compile(r"^kis(\[(?P<id>[a-z]-[0-9a-z]+)\]|:) (?P<level>error|warn|info|debug): (?P<msg>.*)$")


def _host_backend():
    p = kis("backends", "--json")
    doc = json.loads(p.stdout)
    for b in doc:
        if b["backend"] == "bubblewrap" and b["available"]:
            return "bubblewrap"
    pytest.skip("the bubblewrap backend is not available here: " +
                "; ".join(f'{b["backend"]}: {b.get("why_absent")}' for b in doc
                          if b["backend"] == "bubblewrap"))


def _run_id(doc):
    return doc.get("id") or doc["sandbox"]


def _events(stderr):
    return [m for m in (EVENT.match(l) for l in stderr.splitlines()) if m]


def _debug_run(*pre, env=None):
    _host_backend()
    p = subprocess.run([str(KIS), *pre, "sandbox", "run", "--json", "--tier", "host",
                        "--memory", "64M", "--", "true"],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **(env or {})))
    assert p.returncode == 0, p.stderr
    return p, json.loads(p.stdout)


def _assert_run_shown(p, doc):
    sid = _run_id(doc)
    ev = _events(p.stderr)
    # every line of stderr is an event, and every event of the run names it
    assert len(ev) == len(p.stderr.splitlines()), p.stderr
    mine = [m["msg"] for m in ev if m["id"] == sid]
    assert mine, p.stderr
    assert {m["level"] for m in ev} == {"info", "debug"}, p.stderr
    text = "\n".join(mine)
    assert re.search(r"^backend bubblewrap chosen: the first present of the pinned host tier",
                     text, re.M), text
    # a helper started, with its argv
    assert re.search(r"started, pid \d+: \S*bwrap .*--unshare-pid", text), text
    # the memory limit written to the run's own group
    assert re.search(rf"^limit written: \S*/{sid}/memory\.(limit_in_bytes|max) = 67108864$",
                     text, re.M), text
    assert re.search(r"^teardown: bubblewrap ended \(exited\)", text, re.M), text
    assert text.rstrip().endswith("teardown done"), text


def test_log_level_debug_shows_backend_argv_limit_and_teardown():
    p, doc = _debug_run("--log-level", "debug")
    _assert_run_shown(p, doc)


def test_KIS_LOG_debug_shows_the_same_events():
    p, doc = _debug_run(env={"KIS_LOG": "debug"})
    _assert_run_shown(p, doc)


def test_default_level_prints_nothing_extra():
    p, doc = _debug_run(env={"KIS_LOG": ""})
    assert p.stderr == "", p.stderr
    assert doc["stdout"] == "" and doc["exit_status"] == 0


def test_the_flag_wins_over_KIS_LOG():
    p, _ = _debug_run("--log-level=warn", env={"KIS_LOG": "debug"})
    assert p.stderr == "", p.stderr


@pytest.mark.parametrize("how", ["flag", "env", "missing"])
def test_a_bad_log_level_is_refused_by_name(how):
    args = {"flag": ["--log-level", "loud"], "env": [], "missing": ["--log-level"]}[how]
    env = dict(os.environ, KIS_LOG="loud") if how == "env" else dict(os.environ)
    p = subprocess.run([str(KIS), "sandbox", "backends", "--json", *args], capture_output=True,
                       text=True, env=env, timeout=60)
    assert p.returncode == 125, p
    named = {"flag": "--log-level", "env": "KIS_LOG", "missing": "--log-level"}[how]
    bad = {"flag": "loud", "env": "loud", "missing": ""}[how]
    assert p.stderr.startswith(f"invalid_argument: {named}: expected error, warn, info or debug, "
                               f"not '{bad}'"), p.stderr
    assert json.loads(p.stdout.splitlines()[0])["error"]["code"] == "invalid_argument"


def test_events_outside_a_run_have_the_plain_prefix_and_info_is_quieter():
    # backends probes (a cgroup, a helper) in no run: "kis: debug: ..."
    p = kis("--log-level", "debug", "backends")
    assert p.returncode == 0
    ev = _events(p.stderr)
    assert ev and len(ev) == len(p.stderr.splitlines()), p.stderr
    assert all(m["id"] is None and m["level"] == "debug" for m in ev), p.stderr
    assert any(re.match(r"helper \S+ started, pid \d+: ", m["msg"]) for m in ev), p.stderr
    # info: the backend chosen and how the run ended, no more
    p, doc = _debug_run("--log-level", "info")
    msgs = [m["msg"] for m in _events(p.stderr)]
    assert len(msgs) == len(p.stderr.splitlines()) == 2, p.stderr
    assert msgs[0].startswith("backend bubblewrap chosen") and msgs[1].startswith("teardown:")


# ---- completion ----

COMPLETE = r'''
source "$1"
comp() { # the line, a trailing space meaning a new word
	read -ra COMP_WORDS <<<"$1"
	[[ $1 == *" " ]] && COMP_WORDS+=("")
	COMP_WORDS[0]=$KIS
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	_kis
	echo "$1=${COMPREPLY[*]}"
}
while IFS= read -r line; do comp "$line"; done
'''


def _complete(lines, tmp_path, env=None):
    script = tmp_path / "c.sh"
    script.write_text(COMPLETE)
    p = subprocess.run(["bash", "--norc", str(script), str(ROOT / "scripts/completion/kis.bash")],
                       input="".join(l + "\n" for l in lines), capture_output=True, text=True,
                       env=dict(os.environ, KIS=str(KIS), **(env or {})), timeout=120)
    assert p.returncode == 0, p.stderr
    out = {}
    for l in p.stdout.splitlines():
        k, _, v = l.partition("=")
        out[k] = v.split()
    return out


def test_completion_offers_every_enum_flags_values(tmp_path):
    # the enum flags of run's help: every "--flag a|b|c" (or "--flag X  a|b|c:")
    helptext = kis("run", "--help").stdout
    enums = {}
    for l in helptext.splitlines():
        w = l.split()
        if w and w[0].startswith("--"):
            for cand in w[1:3]:
                if "|" in cand:
                    enums[w[0]] = cand.rstrip(":").split("|")
                    break
    for flag in ("--tier", "--net", "--backend", "--root", "--accel", "--wasm-engine",
                 "--preopen"):
        assert flag in enums, (flag, helptext)
    lines = [f"kis sandbox run {f} " for f in enums] + [
        "kis sandbox create --wasm-engine c", "kis sandbox clone b --strategy ",
        "kis sandbox run --log-level ", "kis sandbox run --log-l"]
    got = _complete(lines, tmp_path)
    for f, values in enums.items():
        assert got[f"kis sandbox run {f} "] == values, f
    assert "microvm" in got["kis sandbox run --tier "]
    assert got["kis sandbox create --wasm-engine c"] == ["compiler"]
    assert got["kis sandbox clone b --strategy "] == ["auto", "reflink", "overlay", "copy"]
    assert got["kis sandbox run --log-level "] == ["error", "warn", "info", "debug"]
    assert got["kis sandbox run --log-l"] == ["--log-level"]


@pytest.fixture
def own_store(tmp_path, monkeypatch):
    """A private store (conftest's `store`, here too under --noconftest)."""
    monkeypatch.setenv("KIS_SANDBOX_ROOT", str(tmp_path / "store"))
    return tmp_path / "store"


def test_completion_offers_mount_ids(own_store, tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "f").write_text("x")
    base = kis("base", "import", str(tmp_path / "t")).stdout.strip()
    ws = kis("clone", base).stdout.strip()
    assert base.startswith("b-") and ws.startswith("w-")
    try:
        got = _complete(["kis sandbox run --mount ", "kis sandbox run --mount b-",
                         f"kis sandbox run --mount {base}:"], tmp_path)
    finally:
        kis("destroy", ws)  # an overlay clone is a mount: the store's to remove
    assert sorted(got["kis sandbox run --mount "]) == sorted([f"{base}:", f"{ws}:"])
    assert got["kis sandbox run --mount b-"] == [f"{base}:"]
    assert got[f"kis sandbox run --mount {base}:"] == []


# ---- escape hatches ----

def test_backends_lists_the_named_escape_hatches():
    p = kis("backends")
    assert p.returncode == 0, p.stderr
    text = p.stdout[p.stdout.index("escape hatches"):]
    assert re.search(r"--allow-process-tier +escape_hatch\.allow_process_tier +the process "
                     r"tier runs unconfined; concerns: process\n", text), text
    assert re.search(r"--allow-net-host +escape_hatch\.allow_net_host +host networking removes "
                     r"network confinement; concerns: ", text), text
    doc = json.loads(kis("backends", "--json").stdout)
    by = {b["backend"]: b for b in doc}
    assert [h["flag"] for h in by["process"]["escape_hatches"]][0] == "--allow-process-tier"
    for b in doc:
        names = {h["name"] for h in b["escape_hatches"]}
        assert ("allow_net_host" in names) == ("host" in (b["network"] if isinstance(
            b["network"], list) else b["network"].split(","))), b
    # the same table refuses a run that does not name the hatch
    for args, field in ((["--tier", "process"], "escape_hatch.allow_process_tier"),
                        (["--net", "host"], "escape_hatch.allow_net_host")):
        r = kis("run", *args, "--", "true")
        assert r.returncode == 125 and r.stderr.startswith("escape_hatch_forbidden: ")
        assert r.stderr.rstrip().endswith(f"requires {field}"), r.stderr


# ---- the quiet build ----

def test_quiet_build_prints_no_full_ar_or_link_lines():
    # every recipe line that archives, links or hard-links is silenced by
    # $(Q) (V=1 shows it) and announced by a short "  AR/LD/LN  target"
    # line; the fuzz targets' clang lines are developer commands, left out
    bad = []
    for f in [ROOT / "Makefile", *sorted((ROOT / "mk").glob("*.mk"))]:
        lines = f.read_text().splitlines()
        for i, l in enumerate(lines):
            m = re.match(r"\t(\$\(Q\)|@)?(\$\(CC\)|\$\(BENCH_CC\)|rm -f \$@ && ar |ar |ln -f )", l)
            if not m:
                continue
            # silenced, and announced by the line before it
            if not m.group(1) or not re.match(r'\t@echo "  [A-Z]', lines[i - 1]):
                bad.append(f"{f.name}:{i + 1}: {l[1:70]}")
    assert not bad, bad
    # and with V=1 make shows the full command (a dry run: nothing is built)
    p = subprocess.run(["make", "-n", "-B", "V=1", "build/libkis-sandbox.a"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert re.search(r"^rm -f build/libkis-sandbox\.a && ar rcs ", p.stdout, re.M), p.stdout[-500:]
    p = subprocess.run(["make", "-n", "-B", "V=0", "build/libkis-sandbox.a"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert re.search(r'^echo "  AR      build/libkis-sandbox\.a"', p.stdout, re.M), p.stdout[-500:]


def test_debug_shows_each_mount_of_a_run(own_store, tmp_path):
    _host_backend()
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "f").write_text("x")
    base = kis("base", "import", str(tmp_path / "t")).stdout.strip()
    p = subprocess.run([str(KIS), "sandbox", "run", "--log-level", "debug", "--json", "--tier",
                        "host", "--mount", f"{base}:/data", "--", "cat", "/data/f"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["stdout"] == "x"
    msgs = [m["msg"] for m in _events(p.stderr) if m["id"] == _run_id(doc)]
    assert any(re.match(rf"mount base {base} at /data, read-only: \S+", m) for m in msgs), msgs
