#!/usr/bin/env bash
# GPU check of the demo trainer's corpus: the 36 CUDA kernels that kcached's
# workers compiled for sm_90a (through the real service: kcached, its job
# queue, kcache-worker with NVRTC) are exported here, then loaded on a GPU host
# through the CUDA driver API, run, and compared with their CPU references.
#
#   scripts/device/trainer_gpu_check.sh prepare   here: kcached + trainer -> .device/trainer
#   scripts/device/trainer_gpu_check.sh run       on the GPU host
#
# The GPU host needs only g++ and the NVIDIA driver: the checker is built there
# from a handful of sources (the driver is dlopen'ed); .device/ travels along.
set -euo pipefail
cd "$(dirname "$0")/../.."

case "${1:-}" in
  prepare)
    scripts/setup >/dev/null
    source scripts/lib/kcached.sh
    work=$(mktemp -d)
    trap 'stop_kcached; rm -rf "$work"' EXIT
    start_kcached "$work"
    rm -rf .device/trainer && mkdir -p .device/trainer .device/include/tl
    build/release/examples/kcache_trainer --url "$KCACHE_URL" \
      --phase export --export .device/trainer/corpus
    cp /usr/include/tl/expected.hpp .device/include/tl/
    cp -r /usr/include/nlohmann .device/include/
    ;;
  run)
    [ -f .device/trainer/corpus/corpus.json ] || { echo "run 'prepare' first (on the build machine)"; exit 2; }
    bin=$(mktemp -d)/kcache_gpu_corpus_check
    g++ -std=c++20 -O2 -Wall -Wextra -Werror -Icompiler/include -Icachekey/include \
      -I.device/include -Iexamples/trainer \
      examples/trainer/gpu_corpus_check.cpp examples/trainer/checks.cpp \
      examples/trainer/corpus.cpp compiler/src/cubin.cpp compiler/src/cuda_driver.cpp \
      compiler/src/memory_object.cpp \
      -ldl -o "$bin"
    "$bin" .device/trainer/corpus
    ;;
  *)
    echo "usage: $0 prepare | run" >&2
    exit 2
    ;;
esac
