#!/usr/bin/env bash
# GPU check of kcache's compiled kernels: CUBINs compiled on this (CPU) machine
# by NVRTC, nvJitLink and LLVM's NVPTX backend are loaded on a GPU host through
# the CUDA driver API, run, and compared with CPU references.
#
#   scripts/device/cubin_check.sh prepare [TARGET]   here: compile into .device/
#   scripts/device/cubin_check.sh run                 on the GPU host
#
# The GPU host needs only g++ and the NVIDIA driver: gpu_check is built there
# from source (the driver is dlopen'ed), and .device/ travels with the tree.
set -euo pipefail
cd "$(dirname "$0")/../.."

case "${1:-}" in
  prepare)
    target=${2:-sm_90a}
    scripts/setup >/dev/null
    rm -rf .device/corpus && mkdir -p .device/include/tl
    build/release/compiler/kcache_cubin_corpus .device/corpus "$target"
    cp /usr/include/tl/expected.hpp .device/include/tl/
    ;;
  run)
    [ -f .device/corpus/manifest.txt ] || { echo "run 'prepare' first (on the build machine)"; exit 2; }
    bin=$(mktemp -d)/gpu_check
    g++ -std=c++20 -O2 -Wall -Wextra -Werror -Icachekey/include -Icompiler/include -I.device/include \
      cachekey/src/cuda_api.cpp compiler/src/cuda_driver.cpp compiler/tools/gpu_check.cpp -ldl -o "$bin"
    "$bin" .device/corpus
    ;;
  *)
    echo "usage: $0 prepare [TARGET] | run" >&2
    exit 2
    ;;
esac
