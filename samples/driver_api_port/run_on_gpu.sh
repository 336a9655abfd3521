#!/bin/sh
# Runs a program that links libcuda (the driver_api_port samples) for a GPU test:
#   run_on_gpu.sh PROGRAM [ARGS...]
# exits 77 (CTest's "skipped") when PROGRAM cannot start because this machine has no libcuda.so.1
# (no NVIDIA driver); otherwise runs it and exits with its status.
if ldd "$1" 2>/dev/null | grep -q 'libcuda\.so\.1 => not found'; then
  echo "SKIPPED: $(basename "$1") links libcuda.so.1, which this machine does not have (no NVIDIA driver)"
  exit 77
fi
exec "$@"
