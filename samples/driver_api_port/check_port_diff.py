#!/usr/bin/env python3
"""Checks that a one-line port differs from its original only where it says it does.

    check_port_diff.py ORIGINAL PORT

Passes when PORT is ORIGINAL with exactly
  - one line added: `#include <fatpack/fatpack.h>`, and
  - one line changed: the line calling `cuModuleLoadData(`, with that name replaced by
    `fatpackModuleLoadData` and nothing else changed on it;
every other line is identical. Prints the difference either way. Before checking the files, it checks
itself: variants of ORIGINAL with other changes (another line changed, a line added or removed, the
load line changed in another way, the include missing) must be refused.
"""
import difflib
import sys

INCLUDE = "#include <fatpack/fatpack.h>"
DRIVER_CALL = "cuModuleLoadData("
PORT_CALL = "fatpackModuleLoadData("


def problems(original, port):
    """What is wrong with `port` as a port of `original` (lists of lines); [] when nothing."""
    out = []
    matcher = difflib.SequenceMatcher(a=original, b=port, autojunk=False)
    added, changed = [], []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            continue
        if op == "insert":
            added += port[b0:b1]
        elif op == "replace" and a1 - a0 == 1 and b1 - b0 == 1:
            changed.append((original[a0], port[b0]))
        else:
            out.append("lines %d-%d of the original became lines %d-%d of the port (%s)" % (a0 + 1, a1, b0 + 1, b1, op))
    if [line.strip() for line in added] != [INCLUDE]:
        out.append("added lines %r; expected exactly one: %r" % (added, INCLUDE))
    if len(changed) != 1:
        out.append("%d changed lines; expected exactly one (the load)" % len(changed))
    for before, after in changed:
        if before.count(DRIVER_CALL) != 1 or before.replace(DRIVER_CALL, PORT_CALL) != after:
            out.append("changed line %r -> %r is not the load with %s replaced by %s" % (before, after, DRIVER_CALL,
                                                                                         PORT_CALL))
    return out


def port_of(original):
    """The port as the rules describe it, made from the original (for the self-check)."""
    port = []
    for line in original:
        port.append(line.replace(DRIVER_CALL, PORT_CALL))
        if line.strip() == "#include <cuda.h>":
            port.append(INCLUDE + "\n")
    return port


def self_check(original):
    good = port_of(original)
    if problems(original, good):
        return ["the self-check's own port is refused: %s" % problems(original, good)]
    load = next(i for i, line in enumerate(good) if PORT_CALL in line)
    other = next(i for i, line in enumerate(good) if line.strip() and i != load and INCLUDE not in line)
    variants = {
        "another line changed": good[:other] + [good[other].rstrip("\n") + " // changed\n"] + good[other + 1:],
        "a line added": good[:load] + ["  int extra = 0;\n"] + good[load:],
        "a line removed": good[:other] + good[other + 1:],
        "the load line changed otherwise": good[:load] + [good[load].replace("(&", "( &")] + good[load + 1:],
        "no include": [line for line in good if INCLUDE not in line],
        "no change at all": list(original),
    }
    return ["the check accepts a port with %s" % what for what, port in variants.items() if not problems(original, port)]


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    with open(sys.argv[1]) as f:
        original = f.readlines()
    with open(sys.argv[2]) as f:
        port = f.readlines()
    broken = self_check(original)
    if broken:
        print("FAIL (self-check): " + "; ".join(broken))
        return 1
    sys.stdout.writelines(difflib.unified_diff(original, port, sys.argv[1], sys.argv[2], n=0))
    found = problems(original, port)
    if found:
        print("FAIL: the port differs in more than the load call and the include:")
        for p in found:
            print("  " + p)
        return 1
    print("ok: the port differs from the original in the include and the load call only")
    return 0


if __name__ == "__main__":
    sys.exit(main())
