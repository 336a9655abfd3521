#!/usr/bin/env python3
"""Runs the shell commands of the documentation, so that the docs cannot rot (test docs_commands).

Every fenced block whose info string starts with `sh` is run, in file order, each block as one
`bash -e -o pipefail` script starting in a scratch directory of its document. Words after `sh` are
markers that skip the block, visibly (the run ends with the list of what was skipped and why):

  ```sh gpu             needs an NVIDIA GPU and driver
  ```sh cache-cli       needs `fatpack cache` / `fatpack warm`; run as soon as the tool has them
  ```sh fatpack-build   configures/builds fatpack itself: what scripts/test.sh and CI run

An unknown marker is an error, and so is a ```bash or ```shell block (write ```sh so it is run).
Blocks of other languages (text, console, cmake, cpp, ...) are not commands.

The environment the commands see, so that they mean what they say to a reader:
  - the scratch directory holds `build` (a link to the fatpack build tree under test), `samples` and
    `scripts` (links into the source tree) and `kernels.cu` (a small kernel file, for the commands
    that say "kernels.cu");
  - HOME is a fresh directory shared by all documents (getting-started.md installs fatpack into
    ~/.local; later documents use that install); PATH starts with ~/.local/bin, then the build's
    packager/ (so `fatpack` is found either way);
  - programs run against the fake driver (tests/fakecuda: FATPACK_LIBCUDA, one CC 9.0 device), so
    loads really happen; kernels cannot run.

usage: run_doc_commands.py --source SRC --build BUILD --fakecuda LIBFAKECUDA --work DIR FILE.md...
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

MARKERS = {
    "gpu": "needs an NVIDIA GPU and driver",
    "cache-cli": "needs `fatpack cache`/`fatpack warm`, which this build's tool does not have",
    "fatpack-build": "configures/builds fatpack itself (what scripts/test.sh and CI run)",
}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*(.*?)\s*$")


def blocks(path):
    """(line, info words, text) of every fenced block."""
    out, open_fence, start, info, body = [], None, 0, [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line)
            if open_fence is None:
                if m:
                    open_fence, start, info, body = m.group(2), n, m.group(3).split(), []
            elif m and m.group(2).startswith(open_fence[0]) and len(m.group(2)) >= len(open_fence) and not m.group(3):
                out.append((start, info, "".join(body)))
                open_fence = None
            else:
                body.append(line)
    if open_fence is not None:
        raise SystemExit(f"{path}:{start}: unterminated code fence")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--fakecuda", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    src, build = os.path.abspath(a.source), os.path.abspath(a.build)

    # A previous run may have left read-only directories (deployment.md makes its prebuilt cache so).
    for root, dirs, _ in os.walk(a.work):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    shutil.rmtree(a.work, ignore_errors=True)
    home = os.path.join(a.work, "home")
    os.makedirs(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FATPACK_", "FAKECUDA_", "CUDA_CACHE"))}
    env.update({
        "HOME": home,
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "PATH": os.pathsep.join([os.path.join(home, ".local", "bin"), os.path.join(build, "packager"), env.get("PATH", "")]),
        "FATPACK_LIBCUDA": os.path.abspath(a.fakecuda),
        "FAKECUDA_DEVICES": "90",
        "CMAKE_BUILD_PARALLEL_LEVEL": "2",
    })
    tool = os.path.join(build, "packager", "fatpack")
    has_cache_cli = all(
        subprocess.run([tool, cmd, "--help"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
        for cmd in ("cache", "warm"))

    ran, skipped, failed = 0, [], []
    for doc in a.files:
        rel = os.path.relpath(doc, src)
        scratch = os.path.join(a.work, re.sub(r"[^A-Za-z0-9]+", "_", rel))
        os.makedirs(scratch)
        os.symlink(build, os.path.join(scratch, "build"))
        for d in ("samples", "scripts"):
            os.symlink(os.path.join(src, d), os.path.join(scratch, d))
        shutil.copy(os.path.join(src, "tests", "kernels", "vadd.cu"), os.path.join(scratch, "kernels.cu"))
        for line, info, text in blocks(doc):
            where = f"{rel}:{line}"
            if not info or info[0] not in ("sh", "bash", "shell"):
                continue
            if info[0] != "sh":
                failed.append(f"{where}: a ```{info[0]} block: write ```sh so that the doc test runs it")
                continue
            unknown = [m for m in info[1:] if m not in MARKERS]
            if unknown:
                failed.append(f"{where}: unknown marker(s) {unknown}; known: {sorted(MARKERS)}")
                continue
            first = next((l.strip() for l in text.splitlines() if l.strip()), "")
            skip = [m for m in info[1:] if not (m == "cache-cli" and has_cache_cli)]
            if skip:
                skipped.append(f"{where}: {', '.join(MARKERS[m] for m in skip)}: {first}")
                continue
            t0 = time.monotonic()
            r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=scratch, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
            status = "ok" if r.returncode == 0 else f"FAILED (exit {r.returncode})"
            print(f"=== {where} {status} ({time.monotonic() - t0:.1f} s)")
            print(text.rstrip())
            print("--- output:")
            print(r.stdout.rstrip())
            ran += 1
            if r.returncode != 0:
                failed.append(f"{where}: exit {r.returncode}: {first}")

    print(f"\n{ran} blocks ran, {len(skipped)} skipped, {len(failed)} failed")
    for s in skipped:
        print(f"skipped {s}")
    for f in failed:
        print(f"FAILED  {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
