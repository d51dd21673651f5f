# SPDX-License-Identifier: MIT
# Copy-on-write keeps holes (issue 41): a sparse file a command makes in a
# workspace stays sparse on its way back to the host. The native tiers write
# the workspace's own layer; the microvm's writes come back from its disk
# image (src/backends/microvm/disk.c), where debugfs's rdump used to fill
# every hole (8 GiB of zeros written, 2 min 40 s). Import and copy clones:
# test_store.py's test_sparse_file_stays_sparse_on_import_and_copy_clone.
import hashlib
import os
from pathlib import Path

from conftest import kis
from test_microvm import mvm, run_json  # noqa: F401 (the fixture)

GIB = 1 << 30
# a shell line for the guest's busybox: an 8 GiB file holding one byte at
# 5,000,000, a 3 MB file of data, deeper than the layer's top
WRITE = ("mkdir -p d/e && (truncate -s 8G d/e/sparse || "
         "dd if=/dev/zero of=d/e/sparse bs=1 count=0 seek=8589934592) && "
         "printf x | dd of=d/e/sparse bs=1 seek=5000000 conv=notrunc 2>/dev/null && "
         "head -c 3000000 /dev/urandom > d/e/data && echo small > d/small && "
         "md5sum d/e/data")


def test_sparse_file_written_in_a_microvm_stays_sparse_applied_back(mvm, tmp_path):
    src = tmp_path / "base"
    src.mkdir()
    (src / "f").write_text("base\n")
    b = kis("base", "import", str(src), env=mvm).stdout.strip()
    # --file-size: the default (RLIMIT_FSIZE) stops a file of 8 GiB, holes or not
    p, r = run_json(mvm, "--base", b, "--keep", "--file-size", "9G", "--", "sh", "-c", WRITE)
    assert r["termination"]["exit_code"] == 0, (r, p.stderr)
    ws = r["workspace"]
    try:
        path = Path(kis("workspace", "path", ws, env=mvm).stdout.strip())
        sparse = path / "d" / "e" / "sparse"
        st = sparse.stat()
        assert st.st_size == 8 * GIB, "the logical size was not kept"
        assert st.st_blocks * 512 < 1 << 20, \
            f"the holes were filled: {st.st_blocks * 512} bytes on disk"
        with open(sparse, "rb") as f:
            assert f.read(4096) == bytes(4096)
            f.seek(5000000)
            assert f.read(1) == b"x"
            f.seek(8 * GIB - 4096)
            assert f.read() == bytes(4096)
        # a file of data comes back byte for byte, a small one as before
        want = r["stdout"].split()[0]
        assert hashlib.md5((path / "d" / "e" / "data").read_bytes()).hexdigest() == want
        assert (path / "d" / "small").read_text() == "small\n"
        assert (path / "f").read_text() == "base\n"
        # the next VM sees it through the workspace's delta image (mke2fs -d
        # keeps holes), and a run that writes nothing leaves it as it was
        p, r = run_json(mvm, "--workspace", ws, "--", "sh", "-c",
                        "dd if=d/e/sparse bs=1 skip=5000000 count=1 2>/dev/null")
        assert r["stdout"] == "x", (r, p.stderr)
        assert sparse.stat().st_blocks * 512 < 1 << 20
    finally:
        kis("destroy", ws, env=mvm)
