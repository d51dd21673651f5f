#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Render the matrix cells tests/integration/test_matrix.py wrote (JSON) as
# the markdown table of docs/matrix.md: one row per field, one column per
# backend and mode, each cell its verdict and how it was checked.
import json
import sys

MARK = {"enforced": "enforced", "refused": "refused", "structural": "n/a",
        "unchecked": "unchecked", "xfail": "**xfail**", "skipped": "skipped", "granted": "granted"}


def cell_text(c):
    how = c["how"].replace("|", "\\|").replace("\n", " ")
    if len(how) > 140:
        how = how[:137] + "..."
    return f"{MARK.get(c['verdict'], c['verdict'])}: {how}"


def main(path, out):
    cells = json.load(open(path))
    backends, fields = [], []
    table = {}
    for c in cells:
        if c["backend"] not in backends:
            backends.append(c["backend"])
        if c["field"] not in fields:
            fields.append(c["field"])
        table[(c["field"], c["backend"], c["mode"])] = c
    lines = [
        "# The matrix: every backend, every profile field, for run and exec",
        "",
        "Made by `make matrix` from `tests/integration/test_matrix.py` on this host "
        "(issue 15). Each cell says how it was checked: *enforced* (a violator, "
        "`tests/helpers/violate.c`, was seen blocked with the named reason), *refused* "
        "(the named refusal of a field the backend does not claim in `backends --json`), "
        "*granted* (host networking, given as asked with its hatch), *n/a* (the backend has no way to attempt it), *unchecked* (no violator for this "
        "backend yet: the test named is where it is checked), *xfail* (a known hole, "
        "with its issue), *skipped* (the reason). An exec runs with the limits of its "
        "session (`create`), which it may only tighten.",
        "",
    ]
    for mode in ("run", "exec"):
        lines += [f"## {mode}", "", "| field | " + " | ".join(backends) + " |",
                  "|---|" + "---|" * len(backends)]
        for f in fields:
            row = [cell_text(table[(f, b, mode)]) if (f, b, mode) in table else "-"
                   for b in backends]
            lines.append(f"| {f} | " + " | ".join(row) + " |")
        lines.append("")
    bad = [c for c in cells if "does not enforce" in c["how"]]
    if bad:
        sys.exit(f"cells that run but do not enforce: {bad}")
    text = "\n".join(lines)
    if out == "-":
        print(text)
    else:
        open(out, "w").write(text)
        print(text)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "-")
