#!/usr/bin/env bash
# GPU max-autotune check: the GEMM templates of bench/autotune/ are searched
# for M=N=K=4096 (gemm_search.json: fp32 SGEMM on CUDA cores; gemm_tc_search.json:
# bf16 on tensor cores with mma.sync; gemm_wgmma_search.json: bf16 with wgmma).
# Their variants are compiled here by kcached's
# workers (NVRTC compile jobs, cached), then benchmarked on the GPU host by
# gpu_autotune with the same search code kcached runs (exhaustive and
# successive halving); every variant is checked against the reference
# variant and against cuBLAS, and the winner is compared with cuBLAS on
# 4096^3 and on the extra shapes (searched exhaustively there too).
#
#   scripts/device/gpu_autotune.sh prepare [SEARCH.json...]   here: kcached compiles
#                                                             -> .device/autotune/NAME/
#   scripts/device/gpu_autotune.sh run [NAME...]              on the GPU host
#
# prepare defaults to the three searches; run to every prepared one. Extra shapes:
# GPU_AUTOTUNE_SHAPES (MxNxK,...; default 8192x1024x8192,1024x1024x1024, "" for none);
# GPU_AUTOTUNE_DIR: where run looks (default .device/autotune).
set -euo pipefail
cd "$(dirname "$0")/../.."

case "${1:-}" in
  prepare)
    shift
    searches=("$@")
    [ ${#searches[@]} -gt 0 ] ||
      searches=(bench/autotune/gemm_search.json bench/autotune/gemm_tc_search.json
        bench/autotune/gemm_wgmma_search.json)
    scripts/setup --no-build >/dev/null
    [ -f build/release/build.ninja ] ||
      cmake --preset release -DCUDAToolkit_ROOT=/usr/local/cuda >build/release.configure.log
    flock build/.build.lock cmake --build build/release -j2 --target kcached kcache-worker \
      gpu_autotune_export
    source scripts/lib/kcached.sh
    work=$(mktemp -d)
    trap 'stop_kcached; rm -rf "$work"' EXIT
    start_kcached "$work"
    rm -rf .device/autotune && mkdir -p .device/include/tl
    for search in "${searches[@]}"; do
      name=$(basename "$search" .json)
      build/release/bench/gpu_autotune_export "$search" ".device/autotune/${name%_search}" \
        --url "$KCACHE_URL"
    done
    cp /usr/include/tl/expected.hpp .device/include/tl/
    cp -r /usr/include/nlohmann .device/include/
    ;;
  run)
    shift
    root=${GPU_AUTOTUNE_DIR:-.device/autotune}
    ls "$root"/*/manifest.json >/dev/null 2>&1 ||
      { echo "run 'prepare' first (on the build machine)"; exit 2; }
    # Compiled here, the sources in parallel: the GPU host has cores to spare.
    tmp=$(mktemp -d)
    pids=()
    for src in bench/gpu_autotune.cpp compiler/src/{gpu_bench,bench_inputs,bench_protocol}.cpp \
      compiler/src/{autotune_spec,autotune_run,expression,cuda_driver}.cpp \
      cachekey/src/cuda_api.cpp protocol/src/{wire,did_you_mean,json_text}.cpp; do
      g++ -std=c++20 -O2 -Wall -Wextra -Werror -Icompiler/include -Icachekey/include \
        -Iprotocol/include -I.device/include -c "$src" -o "$tmp/$(basename "$src" .cpp).o" &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
    bin=$tmp/gpu_autotune
    g++ "$tmp"/*.o -ldl -o "$bin"
    names=("$@")
    if [ ${#names[@]} -eq 0 ]; then
      for m in "$root"/*/manifest.json; do names+=("$(basename "$(dirname "$m")")"); done
    fi
    status=0
    for name in "${names[@]}"; do
      "$bin" "$root/$name" \
        --shapes "${GPU_AUTOTUNE_SHAPES-8192x1024x8192,1024x1024x1024}" || status=1
    done
    exit $status
    ;;
  *)
    echo "usage: $0 prepare [SEARCH.json...] | run [NAME...]" >&2
    exit 2
    ;;
esac
