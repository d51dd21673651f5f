#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# The shared library's ABI (issue 45): the symbols declared KIS_API in
# include/kis/*.h, the version script src/libkis-sandbox.map and what
# build/libkis-sandbox.so.0 exports must be one list. A function added to
# a header but not to the map would be hidden by the map's `local: *`;
# one left in the map after leaving the headers would keep a stale ABI.
# --write rewrites the map's list from the headers (a new version node is
# then the maintainer's to add by hand when a symbol leaves).
import glob
import re
import subprocess
import sys

MAP = "src/libkis-sandbox.map"


def header_symbols():
    names = set()
    for f in sorted(glob.glob("include/kis/*.h")):
        s = re.sub(r"/\*.*?\*/", "", open(f).read(), flags=re.S)
        s = "\n".join(l for l in s.splitlines() if not l.lstrip().startswith("#"))
        for m in re.finditer(r"\bKIS_API\b[^;{]*?\b([A-Za-z_]\w*)\s*[(\[]", s):
            names.add(m.group(1))
    return names


def map_symbols():
    body = open(MAP).read()
    body = re.sub(r"#.*", "", body)
    g = re.search(r"global:(.*?)local:", body, flags=re.S)
    return set(re.findall(r"([A-Za-z_]\w*)\s*;", g.group(1))) if g else set()


def so_symbols(lib):
    out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                         capture_output=True, text=True).stdout
    return {l.split()[-1].split("@")[0] for l in out.splitlines() if l.split()[-1:] and
            not l.split()[-1].startswith("KIS_")}


def main():
    lib = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "--write" else "build/libkis-sandbox.so.0"
    hdr = header_symbols()
    if "--write" in sys.argv:
        with open(MAP, "w") as f:
            f.write("# SPDX-License-Identifier: MIT\n"
                    "# The exported symbols of libkis-sandbox.so.0: exactly the KIS_API\n"
                    "# declarations of include/kis/*.h (scripts/check-abi.py checks it).\n"
                    "# A symbol is only ever added; removing or changing one needs a new\n"
                    "# soname (Makefile: SHARED_LIB).\n"
                    "KIS_0 {\nglobal:\n")
            for n in sorted(hdr):
                f.write(f"\t{n};\n")
            f.write("local:\n\t*;\n};\n")
        return 0
    bad = 0
    mp = map_symbols()
    for n in sorted(hdr - mp):
        print(f"check-abi: {n} is declared KIS_API but missing from {MAP}")
        bad = 1
    for n in sorted(mp - hdr):
        print(f"check-abi: {n} is in {MAP} but declared in no public header")
        bad = 1
    so = so_symbols(lib)
    for n in sorted(mp - so):
        print(f"check-abi: {lib} does not export {n}")
        bad = 1
    for n in sorted(so - mp):
        print(f"check-abi: {lib} exports {n}, which the map does not list")
        bad = 1
    if not bad:
        print(f"check-abi: {len(so)} symbols, headers, map and {lib} agree")
    return bad


if __name__ == "__main__":
    sys.exit(main())
