# SPDX-License-Identifier: MIT
# What ships is what users run (house rule 17, issue 42): the released
# binaries and library read no test seam. A seam is a KIS_TEST_GETENV("NAME")
# in src/ (src/core/test_hook.h) or a getenv under #ifdef KIS_TEST_BUILD;
# its name is in the test build (build/test/kis) and nowhere in what
# `make install` copies.
import re
import subprocess

import pytest

from conftest import KIS, ROOT

SHIPPED = ["kis", "kis-agent", "kis-runtime", "kis-helper", "libkis-sandbox.so.0",
           "libkis-sandbox.a", "libkis-jit.so"]


def seam_names():
    """Every variable name src/ reads only in the test build."""
    names = set()
    for f in (ROOT / "src").rglob("*.c"):
        text = f.read_text()
        names |= set(re.findall(r'KIS_TEST_GETENV\("([A-Z0-9_]+)"\)', text))
        for block in re.findall(r"#ifdef KIS_TEST_BUILD\n(.*?)#endif", text, re.S):
            names |= set(re.findall(r'getenv\("([A-Z0-9_]+)"\)', block))
    return names


def strings(path):
    return subprocess.run(["strings", "-a", str(path)], capture_output=True, text=True,
                          check=True).stdout


def test_seams_are_found_and_the_most_dangerous_among_them():
    # the list is read from the source: it must hold the hooks issue 42
    # named, or this file would check nothing
    names = seam_names()
    for must in ("KIS_MICROVM_VMM", "KIS_MICROVM_VMM_NO_SECCOMP", "KIS_MICROVM_TEST_HOOKS",
                 "KIS_TEST_PAUSE_AT", "KIS_TEST_CLONE_PAUSE_MS", "KIS_TEST_OVERLAY_LEGACY",
                 "KIS_TEST_PROGRESS_AT_ONCE", "KIS_AGENT", "KIS_CRUN", "KIS_BWRAP"):
        assert must in names, must


@pytest.mark.parametrize("binary", SHIPPED)
def test_released_binary_names_no_test_seam(binary):
    path = ROOT / "build" / binary
    if not path.exists():
        pytest.skip(f"build/{binary} is not built (run make)")
    text = strings(path)
    found = sorted(n for n in seam_names() if re.search(rf"\b{n}\b", text))
    assert found == [], f"build/{binary} carries test seams: {found}"
    assert text.count("NO_SECCOMP") == 0


def test_the_test_build_has_the_seams():
    # the other side: the names are in the binary the tests drive, so the
    # check above looks for strings that a build does carry
    if not KIS.exists():
        pytest.skip(f"{KIS} is not built (run make test-build)")
    text = strings(KIS)
    missing = sorted(n for n in seam_names() if n not in text)
    assert missing == [], f"{KIS} lacks {missing}"


def test_released_kis_ignores_the_stand_in_crun(tmp_path):
    # behaviour, not only strings: the test build's KIS_CRUN=/nonexistent
    # hides the container tier; the released kis does not read it
    rel = ROOT / "build" / "kis"
    if not rel.exists() or not KIS.exists():
        pytest.skip("build/kis or the test build is not built")
    env = {"KIS_CRUN": "/nonexistent/crun", "KIS_SANDBOX_ROOT": str(tmp_path / "store"),
           "PATH": "/usr/bin:/bin"}
    test = subprocess.run([str(KIS), "sandbox", "backends"], env=env, capture_output=True,
                          text=True, timeout=60)
    shipped = subprocess.run([str(rel), "sandbox", "backends"], env=env, capture_output=True,
                             text=True, timeout=60)
    def oci(out):
        return next((l for l in out.splitlines() if l.split()[:1] == ["oci"]), "")
    if not oci(shipped.stdout).endswith("available"):
        pytest.skip("the oci backend is not available here: nothing to hide")
    assert "crun is not installed" in oci(test.stdout), test.stdout
