#!/usr/bin/env bash
# GPU max-autotune check: the tiled SGEMM template of bench/autotune/ is
# searched for one shape (M=N=K=4096). Its variants are compiled here by
# kcached's workers (NVRTC compile jobs, cached), then benchmarked on the GPU
# host by gpu_autotune with the same search code kcached runs (exhaustive and
# successive halving), and the winner is compared with cuBLAS SGEMM.
#
#   scripts/device/gpu_autotune.sh prepare   here: kcached compiles -> .device/autotune
#   scripts/device/gpu_autotune.sh run       on the GPU host
set -euo pipefail
cd "$(dirname "$0")/../.."

case "${1:-}" in
  prepare)
    scripts/setup >/dev/null
    source scripts/lib/kcached.sh
    work=$(mktemp -d)
    trap 'stop_kcached; rm -rf "$work"' EXIT
    start_kcached "$work"
    rm -rf .device/autotune && mkdir -p .device/include/tl
    build/release/bench/gpu_autotune_export bench/autotune/gemm_search.json .device/autotune \
      --url "$KCACHE_URL"
    cp /usr/include/tl/expected.hpp .device/include/tl/
    cp -r /usr/include/nlohmann .device/include/
    ;;
  run)
    [ -f .device/autotune/manifest.json ] || { echo "run 'prepare' first (on the build machine)"; exit 2; }
    bin=$(mktemp -d)/gpu_autotune
    g++ -std=c++20 -O2 -Wall -Wextra -Werror -Icompiler/include -Icachekey/include -I.device/include \
      bench/gpu_autotune.cpp compiler/src/gpu_bench.cpp compiler/src/bench_inputs.cpp \
      compiler/src/bench_protocol.cpp compiler/src/autotune_spec.cpp compiler/src/autotune_run.cpp \
      compiler/src/expression.cpp compiler/src/cuda_driver.cpp cachekey/src/wire.cpp \
      -ldl -o "$bin"
    "$bin" .device/autotune
    ;;
  *)
    echo "usage: $0 prepare | run" >&2
    exit 2
    ;;
esac
