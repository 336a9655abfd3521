#!/usr/bin/env bash
# Installs what fatpack needs to build and test that is not installed yet (Debian packages; the
# CUDA toolkit itself must already be installed with nvcc on PATH). Safe to run repeatedly.
set -euo pipefail

packages=(cmake ninja-build pkg-config g++ python3 python3-pip
          libboost-dev liblz4-dev libzstd-dev doctest-dev libxxhash-dev libcli11-dev nlohmann-json3-dev
          # the fleet cache (docs/cache.md §12): client headers to build (the libraries are dlopen-ed),
          # and the real servers its tests start on loopback
          libcurl4-openssl-dev libhiredis-dev nginx-light redis-server openssl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v nvcc >/dev/null; then
  echo "install-deps: nvcc is not on PATH: install the CUDA Toolkit 13.0 and add its bin/ to PATH" >&2
  exit 1
fi

# cuobjdump (tests cross-check exported fatbins with it) is not part of every toolkit install; the
# PyPI package nvidia-cuda-cuobjdump carries it. Optional: the test that needs it says when it skips.
if ! command -v cuobjdump >/dev/null && [ -z "$(python3 -c "import glob,site; print(*[p for d in site.getsitepackages() for p in glob.glob(d+'/nvidia/*/bin/cuobjdump')])" 2>/dev/null)" ]; then
  python3 -m pip install -q nvidia-cuda-cuobjdump 2>/dev/null ||
    python3 -m pip install -q --break-system-packages nvidia-cuda-cuobjdump 2>/dev/null ||
    echo "install-deps: could not install cuobjdump from PyPI; its test will be skipped" >&2
fi
