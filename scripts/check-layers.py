#!/usr/bin/env python3
"""Checks that every #include in the source tree points down the layers (docs/architecture.md).

Each folder below is a layer; a file may include its own layer and the layers listed before it, never
one listed after it. Quoted includes are resolved the way the build resolves them (relative to the
including file's folder first, then the folders the targets put on the include path), so a file
cannot reach a higher layer by spelling the path differently. Exit status 1 lists each violation as
"file:line: includes <header> (layer X) from layer Y".

Rules beyond the order:
  - packager/ (the CLI) never includes runtime/src: it reaches the cache through runtime/admin.
  - core/ includes nothing of runtime/ or packager/, except the dependency-free public headers in
    SHARED_PUBLIC (fatpack/policy.hpp: the policy enum the API and the selector share).
  - public headers (runtime/include, core/include) include no CUDA, Boost or LZ4 header.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Lowest first. A file in layer i may include layers 0..i.
LAYERS = [
    ("core/support", "core/src/support"),
    ("core/rules", "core/src/rules"),
    ("core/format", "core/src/format"),
    ("core/inputs", "core/src/inputs"),
    ("runtime/include", "runtime/include"),
    ("platform", "runtime/src/platform"),
    ("registry", "runtime/src/registry"),
    ("cache", "runtime/src/cache"),
    ("remote", "runtime/src/remote"),
    ("jit", "runtime/src/jit"),
    ("load", "runtime/src/load"),
    ("api", "runtime/src/api"),
    ("admin", "runtime/admin"),
    ("packager", "packager"),
]

# Where quoted includes are looked up, per source folder (the targets' include directories).
SEARCH = {
    "core/include": ["core/include", "runtime/include"],
    "runtime/include": ["runtime/include"],
    "core": ["core/include", "core/src", "runtime/include"],
    "runtime/src": ["runtime/src", "runtime/include", "core/include"],
    "runtime/admin": ["runtime/admin/include", "runtime/admin/src", "runtime/src", "runtime/include",
                      "core/include"],
    "packager": ["packager/src", "runtime/admin/include", "runtime/include", "core/include"],
}

# core/include/fatpack/core is the core's interface, one flat folder; each header belongs to the
# part that implements it.
CORE_HEADERS = {
    "error.hpp": "core/support",
    "hex.hpp": "core/support",
    "le_bytes.hpp": "core/support",
    "thread_pool.hpp": "core/support",
    "target.hpp": "core/rules",
    "arch_table.hpp": "core/rules",
    "select.hpp": "core/rules",
    "jit_options.hpp": "core/rules",
    "codec.hpp": "core/format",
    "package.hpp": "core/format",
    "package_writer.hpp": "core/format",
    "registry_record.hpp": "core/format",
    "input.hpp": "core/inputs",
    "kernel_names.hpp": "core/inputs",
    "ptx_split.hpp": "core/inputs",
}
# Public runtime headers below the runtime: dependency-free vocabulary that core shares with the API
# (core's include path has runtime/include for these alone; any other runtime header is layer
# runtime/include, above every core layer).
SHARED_PUBLIC = {
    "runtime/include/fatpack/export.h": "core/support",  # visibility macros only
    "runtime/include/fatpack/error.hpp": "core/support",  # the one error vocabulary
    "runtime/include/fatpack/policy.hpp": "core/rules",
    "runtime/include/fatpack/verdict.hpp": "core/rules",
}
FORBIDDEN_PUBLIC = re.compile(r"^(cuda|cuda_runtime|nvJitLink|nvrtc|lz4|zstd|xxhash)\b|^boost/")

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def layer_of(rel):
    if rel in SHARED_PUBLIC:
        return next(i for i, (name, _) in enumerate(LAYERS) if name == SHARED_PUBLIC[rel])
    if rel.startswith("core/include/fatpack/core/"):
        part = CORE_HEADERS.get(rel[len("core/include/fatpack/core/"):])
        return next((i for i, (name, _) in enumerate(LAYERS) if name == part), None)
    best = None
    for i, (name, folder) in enumerate(LAYERS):
        if rel == folder or rel.startswith(folder + "/"):
            if best is None or len(folder) > len(LAYERS[best][1]):
                best = i
    return best


def search_path(rel):
    for prefix, dirs in SEARCH.items():
        if rel.startswith(prefix + "/"):
            return dirs
    return []


def resolve(rel_file, header):
    here = os.path.dirname(rel_file)
    for d in [here] + search_path(rel_file):
        cand = os.path.normpath(os.path.join(d, header))
        if os.path.isfile(os.path.join(ROOT, cand)):
            return cand
    return None


def main():
    problems = []
    checked = 0
    for top in ("core", "runtime", "packager"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if not f.endswith((".cpp", ".hpp", ".h", ".c")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
                mine = layer_of(rel)
                if mine is None:
                    problems.append(f"{rel}: in no layer (add it to scripts/check-layers.py)")
                    continue
                public = rel.startswith(("runtime/include/", "core/include/"))
                with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        checked += 1
                        header = m.group(2)
                        if public and FORBIDDEN_PUBLIC.search(header):
                            problems.append(f"{rel}:{n}: a public header includes <{header}>")
                        if m.group(1) == "<":
                            continue
                        target = resolve(rel, header)
                        if target is None:
                            problems.append(f"{rel}:{n}: includes \"{header}\", found in no include folder")
                            continue
                        theirs = layer_of(target)
                        if theirs is None:
                            problems.append(f"{rel}:{n}: includes {target}, which is in no layer")
                        elif theirs > mine:
                            problems.append(f"{rel}:{n}: includes {target} (layer {LAYERS[theirs][0]}) "
                                            f"from layer {LAYERS[mine][0]}")
    for p in problems:
        print(p)
    print(f"check-layers: {checked} includes checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
