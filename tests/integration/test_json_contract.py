# SPDX-License-Identifier: MIT
# The command line's JSON as a contract (issue 43): every verb prints a
# document under --json, compact and one a line, valid against its schema
# in docs/schema; and every error path the README's table names gives the
# code, status and words the table states.
import json
import os
import re
import shlex
import subprocess

import pytest

import kis_schema
from conftest import KIS, PROC, ROOT, kis

pytestmark = pytest.mark.skipif(not kis_schema.available(),
                                reason="python3-jsonschema missing (scripts/install-deps.sh)")


@pytest.fixture
def store(tmp_path, monkeypatch):
    root = tmp_path / "store"
    monkeypatch.setenv("KIS_SANDBOX_ROOT", str(root))
    yield root
    for s in json.loads(kis("session", "list", "--json").stdout or "[]"):
        kis("session", "destroy", s["id"])
    for w in json.loads(kis("workspace", "list", "--json").stdout or "[]"):
        kis("destroy", w["id"])
    kis("gc")


def one(args, schema, *, input=None, ok=True):
    """Run `kis sandbox ARGS` (which holds --json), check its stdout is one
    compact line valid against SCHEMA, and return the document."""
    p = kis(*args, input=input)
    if ok:
        assert p.returncode == 0, (args, p.stderr)
    assert p.stdout.endswith("\n") and p.stdout.count("\n") == 1, (args, p.stdout[:300])
    return kis_schema.check_line(p.stdout[:-1], schema)


def test_every_verb_prints_a_valid_compact_document(store, tmp_path):
    """Walk every verb and subcommand with --json: each prints one line
    that its schema accepts (issue 43: destroy, session destroy and base
    remove printed nothing; three formats; names that disagreed)."""
    one(["backends", "--json"], "backends")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f").write_text("x\n")
    base = one(["base", "import", str(tree), "--json"], "base-import")["id"]
    ws = one(["clone", base, "--json"], "clone")
    assert ws["base"] == base and ws["id"].startswith("w-")
    lst = one(["base", "list", "--json"], "base-list")
    assert {"id": base, "clones": 1, "state": "ready"} in lst
    assert one(["workspace", "list", "--json"], "workspace-list")[0]["id"] == ws["id"]
    assert one(["workspace", "path", ws["id"], "--json"], "workspace-path")["path"] == ws["path"]

    res = one(["run", "--json", *PROC, "--workspace", ws["id"], "--", "cat", "f"], "result")
    assert res["stdout"] == "x\n" and res["id"] == res["sandbox"]
    assert res["workspace"] == ws["id"] and res["workspace_kept"] is True
    one(["run", "--json", "--dry-run", *PROC, "--", "true"], "plan")
    one(["create", "--json", "--dry-run", *PROC], "plan")

    sid = one(["create", "--json", *PROC], "create")["id"]
    sessions = one(["session", "list", "--json"], "session-list")
    assert [s["id"] for s in sessions] == [sid]
    one(["exec", sid, "--json", "--", "true"], "result")
    one(["session", "exec", sid, "--json", "--", "true"], "result")
    # shell: one compact result a line, each with its line
    p = kis("shell", sid, "--json", input="echo a\nfalse\n")
    lines = p.stdout.splitlines()
    assert len(lines) == 2 and p.stdout.endswith("\n"), p.stdout
    docs = [kis_schema.check_line(ln, "result") for ln in lines]
    assert [d["line"] for d in docs] == ["echo a", "false"]
    assert one(["session", "destroy", sid, "--json"], "destroy") == {"id": sid, "destroyed": True}

    assert one(["destroy", ws["id"], "--json"], "destroy") == {"id": ws["id"], "destroyed": True}
    # idempotent, and still a document
    assert one(["destroy", ws["id"], "--json"], "destroy")["destroyed"] is True
    rm = one(["base", "remove", base, "--json"], "base-remove")
    assert rm == {"id": base, "state": "freed", "clones": 0}
    one(["gc", "--json"], "gc")
    one(["gc", "--dry-run", "--json"], "gc")
    one(["guest", "status", "--json"], "guest-status")
    # guest path: the path, or tier_unavailable as an error document
    p = kis("guest", "path", "--json")
    kis_schema.check_line(p.stdout.rstrip("\n"), "guest-path")
    for argv in (["--version", "--json"], ["sandbox", "--version", "--json"]):
        v = subprocess.run([str(KIS), *argv], capture_output=True, text=True, timeout=30)
        assert v.returncode == 0 and v.stdout.count("\n") == 1, v
        kis_schema.check_line(v.stdout[:-1], "version")


def test_base_remove_of_a_held_base_says_removed_with_its_clones(store, tmp_path):
    (tmp_path / "t").mkdir()
    base = kis("base", "import", str(tmp_path / "t")).stdout.strip()
    ws = kis("clone", base).stdout.strip()
    rm = one(["base", "remove", base, "--json"], "base-remove")
    assert rm == {"id": base, "state": "removed", "clones": 1}
    assert one(["base", "list", "--json"], "base-list") == [
        {"id": base, "clones": 1, "state": "removed"}]
    kis("destroy", ws)


def test_backends_network_is_an_array_and_absent_is_null(store):
    rows = one(["backends", "--json"], "backends")
    for r in rows:
        assert isinstance(r["network"], list), r
        for k, v in r.items():
            assert v not in ("", "-"), (r["backend"], k)
        assert (r["why_absent"] is None) == r["available"], r


def test_json_pretty_is_the_same_document_indented(store):
    compact = kis("backends", "--json")
    pretty = kis("backends", "--json=pretty")
    assert pretty.returncode == 0 and pretty.stdout.count("\n") > 5
    assert json.loads(pretty.stdout) == json.loads(compact.stdout)
    kis_schema.check(json.loads(pretty.stdout), "backends")
    # a run result too, and an error
    r = kis("run", "--json=pretty", *PROC, "--", "echo", "hi")
    assert r.returncode == 0 and "\n  \"id\": " in r.stdout
    kis_schema.check(json.loads(r.stdout), "result")
    e = kis("run", "--json=pretty", "--tier", "contianer", "--", "true")
    assert e.returncode == 125
    kis_schema.check(json.loads(e.stdout), "error")


def test_every_schema_is_draft_2020_12():
    files = sorted((ROOT / "docs" / "schema").glob("*.schema.json"))
    names = {f.name.split(".")[0] for f in files}
    assert set(kis_schema.VERB_SCHEMA.values()) | {"error", "plan", "profile",
                                                    "progress", "version"} <= names
    for f in files:
        s = json.loads(f.read_text())
        assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema", f
        kis_schema.validator(f.name.split(".")[0])


def test_the_profile_schema_takes_what_the_engine_writes_and_refuses_a_typo(store):
    """The record a session keeps is kis_profile_to_json's text: the schema
    takes it; a mistyped field is refused by both."""
    doc = {"tier": "process", "network": {"mode": "off"}, "limits": {"wall_ms": 2000},
           "env": {"A": "1"}, "escape_hatch": {"allow_process_tier": True},
           "mounts": [], "wasm": {"engine": "auto", "preopen": "workspace"}}
    kis_schema.check(doc, "profile")
    with pytest.raises(AssertionError):
        kis_schema.check({"teir": "process"}, "profile")


def test_base_import_progress_events_are_compact_lines(store, tmp_path):
    (tmp_path / "t").mkdir()
    for i in range(3):
        (tmp_path / "t" / str(i)).write_text("x" * 100)
    # progress is drawn only on a terminal: run under one for stderr
    import pty
    m, s = pty.openpty()
    try:
        p = subprocess.run([str(KIS), "sandbox", "base", "import", str(tmp_path / "t"), "--json"],
                           stdout=subprocess.PIPE, stderr=s, text=True, timeout=60,
                           env=dict(os.environ, KIS_TEST_PROGRESS_AT_ONCE="1"))
        os.close(s)
        s = -1
        err = b""
        while True:
            try:
                chunk = os.read(m, 65536)
            except OSError:
                break
            if not chunk:
                break
            err += chunk
    finally:
        if s >= 0:
            os.close(s)
        os.close(m)
    assert p.returncode == 0, err
    kis_schema.check_line(p.stdout.rstrip("\n"), "base-import")
    events = [ln for ln in err.decode().replace("\r", "").split("\n") if ln]
    assert events, err
    for ln in events:
        kis_schema.check_line(ln, "progress")


def _error_table():
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- errors-table:.*?-->\n(.*?)<!-- end errors-table -->", text, re.S)
    assert m, "README: the errors table is missing"
    rows = []
    for ln in m.group(1).splitlines()[2:]:
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        cmd, code, status, says = (c.strip("`") for c in cells[1:5])
        rows.append((cells[0], cmd, code, int(status), says))
    return rows


@pytest.mark.parametrize("mistake,cmd,code,status,says", _error_table(),
                         ids=[r[0] for r in _error_table()])
def test_error_paths_give_the_code_and_status_the_readme_states(store, mistake, cmd, code,
                                                                  status, says):
    argv = shlex.split(cmd)
    assert argv[0] == "kis"
    p = subprocess.run([str(KIS), *argv[1:]], capture_output=True, text=True, timeout=60)
    assert p.returncode == status, (cmd, p.returncode, p.stderr)
    assert says in p.stderr, (cmd, p.stderr)
    if code == "none":
        return
    first = p.stderr.splitlines()[0]
    assert first.startswith(code + ": "), (cmd, p.stderr)
    # no errno words after a sentence that says what happened
    assert not first.endswith(": No such file or directory") or code != "not_found", first
    # the same under --json: the error document, with its hint
    j = argv[1:]
    j.insert(j.index("--") if "--" in j else len(j), "--json")
    q = subprocess.run([str(KIS), *j], capture_output=True, text=True, timeout=60)
    assert q.returncode == status, (j, q.stderr)
    # the error document is the last line (gc prints what it did first)
    doc = kis_schema.check_line(q.stdout.rstrip("\n").split("\n")[-1], "error")
    assert doc["error"]["code"] == code
    if says.startswith("Did you mean"):
        assert says in doc["error"]["hint"], doc


def test_clone_of_a_missing_base_has_no_errno_words(store):
    p = kis("clone", "b-nope")
    assert p.returncode == 125
    assert p.stderr.startswith("not_found: ") and "No such file" not in p.stderr, p.stderr


def test_help_texts_say_what_json_prints_and_list_quiet(store):
    c = kis("create", "--help").stdout
    assert re.search(r'--json\s+print \{"id"\}', c), c
    assert "streams captured" not in c
    for verb in ("run", "create", "exec", "shell"):
        h = kis(verb, "--help").stdout
        assert "--quiet" in h, verb
        assert "$XDG_STATE_HOME" in h, verb
