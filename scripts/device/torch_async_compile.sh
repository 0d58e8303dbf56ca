#!/usr/bin/env bash
# kcache.torch.compile(async_compile=True) on the GPU machine: time to the
# first step and total time of a job, eager / torch.compile cold / kcache
# async cold / kcache warm (bench/torch/async_compile_bench.py says what each
# phase measures).
#
#   scripts/device/torch_async_compile.sh prepare     here: kcached and libkcache
#                                                     (with their libraries) -> .device/torch_async
#   scripts/device/torch_async_compile.sh run [--models gpt2_train,resnet50] [--steps 200] [--repeat 1]
#   scripts/device/torch_async_compile.sh run recompiles   ResNet-50 with dynamic=False and four batch
#                                                     sizes: the run report names each recompile
#
# The GPU machine has PyTorch, Triton, torchvision and transformers; kcached
# and libkcache are carried (device tool: carry .device/torch_async), as in
# torch_compile_cache.sh (both use carry_libs.sh), without its Redis parts.
set -euo pipefail
cd "$(dirname "$0")/../.."
pack=.device/torch_async

. scripts/device/carry_libs.sh # cwd: the repository root

case "${1:-}" in
  prepare)
    [ -x build/release/service/kcached ] || { echo "build build/release first (scripts/setup)"; exit 2; }
    rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib"
    carry_with_libs build/release/service/kcached kcached
    cp -L build/release/client/libkcache.so "$pack/lib/libkcache.so"
    strip "$pack/lib/libkcache.so"
    du -sh "$pack"
    ;;
  run)
    shift
    [ -x "$pack/bin/kcached" ] || { echo "run 'prepare' first (on the build machine)"; exit 2; }
    work=$(mktemp -d)
    pids=()
    trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
    LD_LIBRARY_PATH="$PWD/$pack/lib" "$pack/bin/kcached" --listen 127.0.0.1:0 --port-file "$work/port" \
      --data-dir "$work/kcached" --workers 0 --log-level warn >"$work/kcached.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
    [ -s "$work/port" ] || { cat "$work/kcached.log"; exit 1; }
    export PYTHONPATH="$PWD/client/python${PYTHONPATH:+:$PYTHONPATH}"
    export KCACHE_URL="http://127.0.0.1:$(cat "$work/port")"
    export KCACHE_LIBRARY="$PWD/$pack/lib/libkcache.so"
    export KCACHE_TORCH_REPORT=0  # the jobs' timings, not their reports
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
    out="${OUT:-$work}"
    if [ "${1:-}" = recompiles ]; then # forced recompiles and the run report that names them
      python3 bench/torch/async_compile_bench.py recompiles --json "$out/recompiles.json"
    else
      python3 bench/torch/async_compile_bench.py jobs --json "$out/torch_async.json" "$@"
    fi
    ;;
  *)
    echo "usage: $0 prepare | run [args]" >&2
    exit 2
    ;;
esac
