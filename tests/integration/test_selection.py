# SPDX-License-Identifier: MIT
# tier auto: the most restrictive tier available here that can enforce the
# whole profile; a tier whose backend refuses a field is passed over, and
# only when none can is the profile refused, naming what blocked each.
import json
import os
from pathlib import Path

import pytest

from conftest import KIS, ROOT, kis

GUEST = Path(os.environ.get("KIS_MICROVM_GUEST_DIR", ROOT / "build" / "microvm-guest"))


def rows(env):
    p = kis("backends", "--json", env=env)
    return {b["backend"]: b for b in json.loads(p.stdout)}


def dry(env, *flags):
    p = kis("run", "--dry-run", *flags, "--", "true", env=env)
    return p, (json.loads(p.stdout) if p.returncode == 0 else None)


@pytest.fixture
def env(store):
    e = {"KIS_SANDBOX_ROOT": str(store)}
    if (GUEST / "kernel.release").exists():
        e["KIS_MICROVM_GUEST_DIR"] = str(GUEST)
    return e


@pytest.mark.parametrize("flags", [("--memory", "64M"), ("--net", "host", "--allow-net-host")])
def test_auto_passes_over_a_tier_that_refuses_a_field(env, flags):
    b = rows(env)
    if not b.get("microvm", {}).get("available"):
        pytest.skip("the microvm tier is absent here: nothing stronger to pass over")
    p = kis("run", "--dry-run", "--tier", "microvm", *flags, "--", "true", env=env)
    if p.returncode == 0:
        pytest.skip(f"the microvm tier enforces {flags} here: nothing to pass over")
    assert p.stderr.startswith("profile_unsatisfiable:"), p.stderr
    p, plan = dry(env, *flags)
    assert p.returncode == 0, p.stderr
    assert plan["backend"] != "microvm", plan["backend"]


def test_auto_refuses_only_when_no_tier_can_naming_each(env):
    # a field no tier here can enforce: egress where no backend carries it
    # (issue 14), else a disk quota where the store has none
    flags = ["--net", "egress"]
    if any("egress" in r["network"] for r in rows(env).values()):
        flags = ["--disk", "1G"]
    p, _ = dry(env, *flags)
    if p.returncode == 0:
        pytest.skip(f"a tier enforces {flags} here: find another field no tier can")
    assert p.returncode == 125, p.stderr
    assert p.stderr.startswith("profile_unsatisfiable: no tier available here"), p.stderr
    for name, row in rows(env).items():
        if row["available"] and row["native"] and "process" not in row["tiers"]:
            assert f"{name}: " in p.stderr, (name, p.stderr)


def test_auto_still_refuses_what_is_no_tier_matter(env):
    # a hatch is the caller's to give: no tier is tried instead
    p, _ = dry(env, "--net", "host")
    assert p.stderr.startswith("escape_hatch_forbidden:"), p.stderr
