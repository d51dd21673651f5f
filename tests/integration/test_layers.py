# SPDX-License-Identifier: MIT
# The layer check (scripts/check-layers.sh, docs/layers.md) passes on the
# tree and fails on an include that goes up a layer.
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check-layers.sh"


def check(tree):
    return subprocess.run(["sh", str(SCRIPT), str(tree)], capture_output=True, text=True)


def test_the_tree_keeps_its_layers():
    p = check(ROOT)
    assert p.returncode == 0, p.stdout + p.stderr


def write(tree, path, text):
    f = tree / path
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text)


def test_an_include_going_up_fails(tmp_path):
    write(tmp_path, "src/core/ok.c", '#include "core/util.h"\n#include "kis/error.h"\n')
    assert check(tmp_path).returncode == 0
    write(tmp_path, "src/agent/bad.c", '#include "engine/owner.h"\n')
    p = check(tmp_path)
    assert p.returncode == 1 and 'src/agent/bad.c includes "engine/owner.h"' in p.stdout, p.stdout


def test_the_cli_uses_only_public_headers(tmp_path):
    write(tmp_path, "src/cli/cmd.c", '#include "kis/sandbox.h"\n#include "cli.h"\n')
    assert check(tmp_path).returncode == 0
    write(tmp_path, "src/cli/cmd2.c", '#include "store/store_internal.h"\n')
    p = check(tmp_path)
    assert p.returncode == 1 and "only the public headers" in p.stdout, p.stdout


def test_a_directory_in_no_layer_fails(tmp_path):
    write(tmp_path, "src/newthing/x.c", "int x;\n")
    p = check(tmp_path)
    assert p.returncode == 1 and "in no layer" in p.stdout, p.stdout
