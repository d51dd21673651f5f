# SPDX-License-Identifier: MIT
# The JSON contract's checker: every document `kis --json` prints is one
# compact line, validated against its schema in docs/schema (draft 2020-12)
# with Debian's python3-jsonschema. conftest.kis() calls check_output() on
# every --json run of every test, so any test that prints JSON checks it.
import json
from pathlib import Path

try:
    from jsonschema import Draft202012Validator
except ImportError:  # python3-jsonschema (scripts/install-deps.sh)
    Draft202012Validator = None

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schema"
_validators = {}

# (verb, subcommand) -> the schema of what it prints under --json; None as
# the subcommand: the verb takes none.
VERB_SCHEMA = {
    ("run", None): "result", ("exec", None): "result", ("shell", None): "result",
    ("create", None): "create", ("backends", None): "backends", ("clone", None): "clone",
    ("destroy", None): "destroy", ("gc", None): "gc",
    ("session", "list"): "session-list", ("session", "destroy"): "destroy",
    ("session", "create"): "create", ("session", "exec"): "result",
    ("session", "shell"): "result",
    ("base", "import"): "base-import", ("base", "list"): "base-list",
    ("base", "remove"): "base-remove",
    ("workspace", "list"): "workspace-list", ("workspace", "path"): "workspace-path",
    ("guest", "status"): "guest-status", ("guest", "path"): "guest-path",
    ("guest", "fetch"): "guest-path",
}


def available():
    return Draft202012Validator is not None


def validator(name):
    if name not in _validators:
        schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
        Draft202012Validator.check_schema(schema)
        _validators[name] = Draft202012Validator(schema)
    return _validators[name]


def check(doc, name):
    """Validate one parsed document against docs/schema/NAME.schema.json;
    an error document ({"error": ...}) against error.schema.json."""
    if not available():
        return doc
    if isinstance(doc, dict) and set(doc) == {"error"}:
        name = "error"
    errs = sorted(validator(name).iter_errors(doc), key=lambda e: list(e.path))
    assert not errs, f"{name}.schema.json: " + "; ".join(
        f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errs[:5])
    return doc


def check_line(line, name):
    """One line of stdout: compact (no newline inside, no indentation)."""
    assert line and line == line.strip() and "\n" not in line, repr(line[:200])
    return check(json.loads(line), name)


def schema_for(args):
    """The schema of what `kis sandbox ARGS` prints under --json, or None
    when it prints no JSON document (no --json, --help, --json=pretty)."""
    before = list(args)[:list(args).index("--")] if "--" in args else list(args)
    if "--json" not in before or "--help" in before or "-h" in before or not before:
        return None
    verb = before[0]
    sub = before[1] if len(before) > 1 and not before[1].startswith("-") else None
    if "--dry-run" in before and verb in ("run", "create", "session"):
        return "plan"
    return VERB_SCHEMA.get((verb, sub)) or VERB_SCHEMA.get((verb, None))


def check_output(args, stdout, returncode):
    """Every line of a --json run's stdout against its schema (the error
    document on a failure). A run killed by a signal may have been cut
    mid-line: not checked."""
    name = schema_for(args)
    if name is None or not available() or returncode is None or returncode < 0:
        return
    if isinstance(stdout, bytes):
        stdout = stdout.decode(errors="replace")
    if not stdout:
        return
    assert stdout.endswith("\n"), f"--json output without its final newline: {stdout[-80:]!r}"
    for line in stdout[:-1].split("\n"):
        check_line(line, name)
