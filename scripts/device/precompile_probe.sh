#!/usr/bin/env bash
# Does PyTorch itself package each workload for caching precompile on this
# machine? For each model: one process compiles in empty cache dirs and saves
# the Mega-Cache bundle, a second loads it in other empty dirs and compiles
# again (bench/torch/precompile_probe.py prints what each saw).
#
#   scripts/device/precompile_probe.sh [--kcache hooks|hooks-no-triton|bundles] [--warm-fx] [MODEL...]
#                                           default models: mlp resnet50 gpt2
#
# Without --kcache nothing is carried (torch, torchvision and transformers
# are the machine's). With it, kcache.torch's hooks are in too, against a
# kcached from the pack of `scripts/device/torch_compile_cache.sh prepare`
# (device tool: carry .device/torch). `bundles` runs kcache's own bundle flow
# after a plain kcache run of the model (bench/torch/precompile_probe.py).
# --warm-fx (no kcache): a run without caching precompile first fills the
# save phase's own cache dirs, so `save` finds its FX graphs there.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=off
if [ "${1:-}" = --kcache ]; then
  mode="$2"
  shift 2
fi
warm_fx=0
if [ "${1:-}" = --warm-fx ]; then
  warm_fx=1
  shift
fi
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(mlp resnet50 gpt2)
out=${OUT:-$(mktemp -d)}
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
if [ "$mode" != off ]; then
  pack=.device/torch
  [ -x "$pack/bin/kcached" ] || { echo "carry $pack (scripts/device/torch_compile_cache.sh prepare)"; exit 2; }
  LD_LIBRARY_PATH="$PWD/$pack/lib" "$pack/bin/kcached" --listen 127.0.0.1:0 \
    --port-file "$work/port" --data-dir "$work/kcached" --workers 0 --log-level warn \
    >"$out/kcached.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
  [ -s "$work/port" ] || { cat "$out/kcached.log"; exit 1; }
  export KCACHE_URL="http://127.0.0.1:$(cat "$work/port")" KCACHE_NAMESPACE=probe
  export KCACHE_LIBRARY="$PWD/$pack/lib/libkcache.so"
  export PYTHONPATH="$PWD/client/python${PYTHONPATH:+:$PYTHONPATH}"
fi
for model in "${models[@]}"; do
  phases=(save load)
  [ "$mode" != bundles ] && [ $warm_fx = 0 ] || phases=(plain save load)
  for phase in "${phases[@]}"; do
    dir="$work/$model-$phase"
    [ $warm_fx = 0 ] || [ "$phase" != plain ] || dir="$work/$model-save"
    mkdir -p "$dir/inductor" "$dir/triton"
    echo "== $model: $phase (kcache: $mode)"
    # One run id for a model's bundle runs (the bundle's key), another for its plain run.
    run_id="probe-$model-$([ "$phase" = plain ] && echo plain || echo bundles)"
    KCACHE_RUN_ID="$run_id" TORCHINDUCTOR_CACHE_DIR="$dir/inductor" TRITON_CACHE_DIR="$dir/triton" \
      python3 bench/torch/precompile_probe.py "$phase" "$model" "$work/$model.bundle" \
      --kcache "$mode" 2>"$out/$model-$phase.stderr" | tee -a "$out/precompile_probe.jsonl" ||
      { echo "$model $phase failed:"; tail -20 "$out/$model-$phase.stderr"; }
  done
done
