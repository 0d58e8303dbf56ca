#!/usr/bin/env bash
# torch.compile start-up through kcache against PyTorch's own Redis remote
# cache, on the GPU machine (bench/torch/compile_cache_bench.py says what
# each phase measures).
#
#   scripts/device/torch_compile_cache.sh prepare          here: kcached, libkcache,
#                                                          redis-server and the redis
#                                                          wheel -> .device/torch
#   scripts/device/torch_compile_cache.sh run models [--models resnet50,mlp] [--no-bundles] [--no-plain-fresh] [--no-prefetch-fresh]
#                                          [--pytorch-warm]
#                                          [--no-redis] [--repeat 3] [--profile-dir "$OUT/prof"]
#   scripts/device/torch_compile_cache.sh run ranks [--ranks 4] [--repeat 3] [--no-redis]
#
# The GPU machine has PyTorch, Triton, torchvision and transformers but no
# package registry: what else runs there is carried (device tool: carry .device).
set -euo pipefail
cd "$(dirname "$0")/../.."
pack=.device/torch

. scripts/device/carry_libs.sh # cwd: the repository root

case "${1:-}" in
  prepare)
    scripts/setup >/dev/null
    rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib" "$pack/whl"
    carry_with_libs build/release/service/kcached kcached
    carry_with_libs "$(command -v redis-server)" redis-server
    cp -L build/release/client/libkcache.so "$pack/lib/libkcache.so"
    strip "$pack/lib/libkcache.so"
    # PyTorch's Redis remote cache needs redis-py; the GPU machine has none.
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$pack/whl" "redis==5.2.1"
    du -sh "$pack"
    ;;
  run)
    shift
    [ -x "$pack/bin/kcached" ] || { echo "run 'prepare' first (on the build machine)"; exit 2; }
    work=$(mktemp -d)
    pids=()
    trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
    daemon_env=(env LD_LIBRARY_PATH="$PWD/$pack/lib")
    "${daemon_env[@]}" "$pack/bin/redis-server" --port 6379 --bind 127.0.0.1 --save "" \
      --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
    pids+=($!)
    "${daemon_env[@]}" "$pack/bin/kcached" --listen 127.0.0.1:0 --port-file "$work/port" \
      --data-dir "$work/kcached" --workers 0 --log-level warn >"$work/kcached.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
    [ -s "$work/port" ] || { cat "$work/kcached.log"; exit 1; }
    # Without the wheel (a pack for --no-redis runs) PyTorch's Redis phases cannot run.
    if compgen -G "$pack/whl/*.whl" >/dev/null; then
      python3 -m pip install -q --no-index --no-deps --target "$work/site" "$pack"/whl/*.whl
    fi
    export PYTHONPATH="$work/site:$PWD/client/python${PYTHONPATH:+:$PYTHONPATH}"
    # The GPU machine sets PYTHONDONTWRITEBYTECODE=1 and its torch ships no
    # .pyc files, so every process compiled ~550 modules from source (1.6-2.6 s
    # of the first step, in every phase alike, and its largest swing).
    # Installed images carry their .pyc files: here one bytecode cache serves
    # every phase, filled before the first one (else the first phase, or the
    # first storm's ranks, would pay for all the others).
    unset PYTHONDONTWRITEBYTECODE
    export PYTHONPYCACHEPREFIX="$work/pycache"
    # From a file, not stdin: compileall's worker pool starts its processes
    # with forkserver, which imports the main module again by its path.
    cat >"$work/fill_pycache.py" <<'PY'
import compileall, importlib.util, os, sys, time


def main():
    start = time.monotonic()
    # With a prefix Python reads no __pycache__ folder, the standard library's included.
    compileall.compile_dir(os.path.dirname(os.__file__), quiet=2, workers=0, maxlevels=2)
    for name in ["torch", "triton", "torchvision", "transformers", "tokenizers", "safetensors", "huggingface_hub",
                 "sympy", "mpmath", "jinja2", "markupsafe", "networkx", "numpy", "filelock", "fsspec",
                 "typing_extensions", "packaging", "yaml", "kcache", "redis"]:
        spec = importlib.util.find_spec(name)  # where it is, without importing it
        if spec is None:
            continue
        for folder in spec.submodule_search_locations or []:
            compileall.compile_dir(folder, quiet=2, workers=0)
        if not spec.submodule_search_locations and spec.origin and spec.origin.endswith(".py"):
            compileall.compile_file(spec.origin, quiet=2)
    print(f"bytecode cache filled in {time.monotonic() - start:.0f} s (prefix {sys.pycache_prefix})", flush=True)


if __name__ == "__main__":  # compileall's workers import this file again
    main()
PY
    python3 "$work/fill_pycache.py"
    export KCACHE_URL="http://127.0.0.1:$(cat "$work/port")" KCACHE_NAMESPACE=bench
    export KCACHE_LIBRARY="$PWD/$pack/lib/libkcache.so"
    export TORCHINDUCTOR_REDIS_HOST=127.0.0.1 TORCHINDUCTOR_REDIS_PORT=6379
    export TRITON_REDIS_HOST=127.0.0.1 TRITON_REDIS_PORT=6379
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
    mode="${1:?run models|ranks}"
    shift
    out="${OUT:-$work}"
    python3 bench/torch/compile_cache_bench.py "$mode" --json "$out/torch_$mode.json" "$@"
    "${daemon_env[@]}" "$pack/bin/kcached" --version 2>/dev/null || true
    ;;
  *)
    echo "usage: $0 prepare | run models|ranks [args]" >&2
    exit 2
    ;;
esac
