#!/usr/bin/env bash
# Checks core::write_fatbin's output with NVIDIA's own reader: cuobjdump must list the same ELF and
# PTX targets for our fatbin as for fatbinary's fatbin of the same inputs (same order), and extract
# cubins and PTX identical to the inputs.
#
#   cuobjdump_test.sh EXPORT_TOOL FATBINARY CUDA_BIN_DIR WORKDIR INPUT...
# INPUT names must follow MODULE.sm_XY[a|f].cubin / MODULE.compute_XY[a|f].ptx (they give fatbinary
# its --image3 arguments). Exit 77 (CTest: skipped) when no cuobjdump is found; the CUDA 13 pip
# package provides one: `pip install nvidia-cuda-cuobjdump` (bin/cuobjdump inside the installed
# `nvidia` Python package), or set FATPACK_CUOBJDUMP=/path/to/cuobjdump.
set -euo pipefail
tool=$1 fatbinary=$2 cuda_bin=$3 work=$4
shift 4
inputs=("$@")

find_cuobjdump() {
  if [[ -n "${FATPACK_CUOBJDUMP:-}" && -x "${FATPACK_CUOBJDUMP}" ]]; then echo "$FATPACK_CUOBJDUMP"; return; fi
  if [[ -x "$cuda_bin/cuobjdump" ]]; then echo "$cuda_bin/cuobjdump"; return; fi
  if command -v cuobjdump >/dev/null 2>&1; then command -v cuobjdump; return; fi
  local py
  for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    "$py" - <<'EOF' 2>/dev/null && return
import glob, os, sys
try:
    import nvidia
except ImportError:
    sys.exit(1)
for root in nvidia.__path__:
    for cand in sorted(glob.glob(os.path.join(root, "*", "bin", "cuobjdump"))) + [os.path.join(root, "bin", "cuobjdump")]:
        if os.access(cand, os.X_OK):
            print(cand)
            sys.exit(0)
sys.exit(1)
EOF
  done
  return 1
}

if ! cuobjdump=$(find_cuobjdump); then
  echo "SKIPPED: cuobjdump not found (pip install nvidia-cuda-cuobjdump, or set FATPACK_CUOBJDUMP)"
  exit 77
fi
echo "cuobjdump: $cuobjdump ($("$cuobjdump" --version | tail -1))"

rm -rf "$work"
mkdir -p "$work/ours" "$work/ref"
"$tool" "$work/ours.fatbin" "${inputs[@]}"

images=()
cubins=()
ptxs=()
for f in "${inputs[@]}"; do
  base=$(basename "$f")
  if [[ $base =~ \.sm_([0-9]+[af]?)\.cubin$ ]]; then
    images+=("--image3=kind=elf,sm=${BASH_REMATCH[1]},file=$f")
    cubins+=("$f")
  elif [[ $base =~ \.compute_([0-9]+[af]?)\.ptx$ ]]; then
    images+=("--image3=kind=ptx,sm=${BASH_REMATCH[1]},file=$f")
    ptxs+=("$f")
  else
    echo "cannot tell the target of $f from its name"
    exit 1
  fi
done
"$fatbinary" --create="$work/ref.fatbin" -compress=false "${images[@]}"

# 1. Same listing (file names differ only in the fatbin's stem).
"$cuobjdump" --list-elf --list-ptx "$work/ours.fatbin" | sed 's/ ours\./ X./' >"$work/ours.list"
"$cuobjdump" --list-elf --list-ptx "$work/ref.fatbin" | sed 's/ ref\./ X./' >"$work/ref.list"
echo "--- cuobjdump --list-elf --list-ptx (ours)"
cat "$work/ours.list"
if ! diff -u "$work/ref.list" "$work/ours.list"; then
  echo "FAIL: cuobjdump lists different targets for write_fatbin's fatbin than for fatbinary's"
  exit 1
fi
n_elf=$(grep -c '^ELF file' "$work/ours.list" || true)
n_ptx=$(grep -c '^PTX file' "$work/ours.list" || true)
if [[ $n_elf -ne ${#cubins[@]} || $n_ptx -ne ${#ptxs[@]} ]]; then
  echo "FAIL: cuobjdump lists $n_elf ELF / $n_ptx PTX files, expected ${#cubins[@]} / ${#ptxs[@]}"
  exit 1
fi

# 2. cuobjdump extracts exactly the input cubins and PTX texts.
(cd "$work/ours" && "$cuobjdump" -xelf all ../ours.fatbin >/dev/null && "$cuobjdump" -xptx all ../ours.fatbin >/dev/null)
for i in "${!cubins[@]}"; do
  got=$(ls "$work/ours"/ours.$((i + 1)).sm_*.cubin)
  cmp "$got" "${cubins[$i]}" || { echo "FAIL: extracted $got differs from ${cubins[$i]}"; exit 1; }
done
for i in "${!ptxs[@]}"; do
  got=$(ls "$work/ours"/ours.$((i + 1)).*.ptx)
  cmp "$got" "${ptxs[$i]}" || { echo "FAIL: extracted $got differs from ${ptxs[$i]}"; exit 1; }
done
echo "PASS: ${#cubins[@]} cubins and ${#ptxs[@]} PTX files listed and extracted identically"
