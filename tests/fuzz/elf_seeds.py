# SPDX-License-Identifier: MIT
"""Seeds for fuzz-wasm-elf: the object code in each file of a wasm code
cache directory (<store>/cache/wasm-code, in src/wasm/jit_cache.c's layout:
"KISJIT2\\n", the tier as a u32, the compiler's id after its u32 length, the module after its
u64 length, the object after its u64 length), one object a file in the
corpus.

  python3 tests/fuzz/elf_seeds.py CACHE_DIR CORPUS_DIR
"""
import hashlib
import struct
import sys
from pathlib import Path


def objects(cache):
    for f in sorted(Path(cache).glob("*.o")):
        b = f.read_bytes()
        if b[:8] != b"KISJIT2\n":
            continue
        at = 12  # magic, tier
        (idn,) = struct.unpack_from("<I", b, at)
        at += 4 + idn
        (mn,) = struct.unpack_from("<Q", b, at)
        at += 8 + mn
        (on,) = struct.unpack_from("<Q", b, at)
        at += 8
        obj = b[at:at + on]
        if len(obj) == on and obj[:4] == b"\x7fELF":
            yield obj


def main():
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for obj in objects(sys.argv[1]):
        (out / hashlib.sha1(obj).hexdigest()).write_bytes(obj)
        n += 1
    print(f"fuzz-wasm-elf: {n} objects from {sys.argv[1]}")


if __name__ == "__main__":
    main()
