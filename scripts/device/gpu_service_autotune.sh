#!/usr/bin/env bash
# max-autotune on a GPU through the service, end to end (issue 19, part 1):
# kcached with GPU workers searches the SGEMM and row-sum templates of
# bench/autotune/ (exhaustive, then halving), all through the `kcache` CLI;
# the winners are checked, a resubmit and a restart must hit, and a node of
# another tuning class must benchmark again and compile nothing.
# gpu_service_autotune.py says what each step checks.
#
#   scripts/device/gpu_service_autotune.sh prepare   here: the cuda-only build (no LLVM) of
#                                                    kcached, kcache-worker and kcache, with
#                                                    their libraries -> .device/gpu_service
#   scripts/device/gpu_service_autotune.sh run [--templates sgemm,rowsum,wgmma,...] [--workers N]
#                                          [--search-timeout S] [--out DIR] [--no-gpu]
#                                                    on the GPU host (device tool: carry
#                                                    .device/gpu_service); the table and the
#                                                    tuning tables go to $OUT
#
# The GPU host has CUDA 13 in /usr/local/cuda (NVRTC and nvJitLink come from
# there, never carried: the toolchain fingerprint is of what compiles there),
# the driver, PyTorch and python3, but no RocksDB, hiredis, spdlog, fmt or
# Boost: those are carried. `run --no-gpu` checks the script on a host
# without a GPU (the searches compile; every benchmark fails).
set -euo pipefail
cd "$(dirname "$0")/../.."
pack=.device/gpu_service
build=build/cuda-only

. scripts/device/carry_libs.sh # cwd: the repository root

# The GPU host's CUDA libraries, before the carried ones' system fallbacks.
cuda_lib_path() {
  local dirs=() d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && dirs+=("$d")
  done
  (IFS=:; echo "${dirs[*]}")
}

# Every library of the carried binaries resolves with LD_LIBRARY_PATH $1.
check_libs() {
  local b missing=0
  for b in kcached kcache-worker kcache; do
    if LD_LIBRARY_PATH="$1" ldd "$pack/bin/$b" | grep -q "not found"; then
      echo "$pack/bin/$b: libraries not found:" >&2
      LD_LIBRARY_PATH="$1" ldd "$pack/bin/$b" | grep "not found" >&2
      missing=1
    fi
  done
  return "$missing"
}

case "${1:-}" in
  prepare)
    configure_log=$(mktemp)
    cmake --preset cuda-only >"$configure_log" 2>&1 || { cat "$configure_log"; exit 1; }
    rm -f "$configure_log"
    flock build/.build.lock cmake --build --preset cuda-only
    rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib"
    carry_with_libs "$build/service/kcached" kcached
    carry_with_libs "$build/compiler/kcache-worker" kcache-worker
    carry_with_libs "$build/client/kcache" kcache
    # NVRTC and nvJitLink are the GPU host's own (CUDA 13), as is the driver.
    rm -f "$pack"/lib/libnvrtc* "$pack"/lib/libnvJitLink* "$pack"/lib/libcuda.so*
    libs="$PWD/$pack/lib:$(cuda_lib_path)"
    check_libs "$libs"
    # The worker says honestly what it has: cuda and ptx, no LLVM backends.
    backends=$(LD_LIBRARY_PATH="$libs" "$pack/bin/kcache-worker" --toolchains |
      python3 -c 'import json, sys; print(",".join(sorted(json.load(sys.stdin))))')
    echo "kcache-worker --toolchains: $backends"
    [ "$backends" = "cuda,ptx" ] || { echo "expected the cuda and ptx backends only" >&2; exit 1; }
    if LD_LIBRARY_PATH="$libs" "$pack/bin/kcache-worker" --host-target >/dev/null 2>&1; then
      echo "kcache-worker --host-target answered: not the CUDA-only build?" >&2
      exit 1
    fi
    ls -l "$pack/bin" "$pack/lib"
    du -sh "$pack"
    size_mib=$(du -sm "$pack" | cut -f1)
    [ "$size_mib" -le 40 ] || { echo "$pack is $size_mib MiB: over the 40 MiB to carry" >&2; exit 1; }
    ;;
  run)
    shift
    [ -x "$pack/bin/kcached" ] || { echo "run 'prepare' first (on the build machine)" >&2; exit 2; }
    libs="$PWD/$pack/lib:$(cuda_lib_path)"
    check_libs "$libs" || { echo "is CUDA 13 in /usr/local/cuda?" >&2; exit 1; }
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader ||
      echo "(no nvidia-smi)"
    # Only kcache's processes get the carried libraries; PyTorch keeps its own.
    export KCACHE_GPU_SERVICE_LIBS="$libs"
    exec python3 scripts/device/gpu_service_autotune.py "$@"
    ;;
  *)
    echo "usage: $0 prepare | run [--templates sgemm,rowsum] [--repeat N] [--workers N] [--search-timeout S]" \
      "[--out DIR] [--no-gpu]" >&2
    exit 2
    ;;
esac
