#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds kcache's hardware fingerprint from
# source (it needs only g++ and libdl: the CUDA driver is dlopen'ed at run
# time), prints it, and checks every field against PyTorch's view of the same
# devices. Exit status 0 only if they agree.
#
#   scripts/device/gpu_fingerprint.sh prepare   here: header-only deps into .device/
#   scripts/device/gpu_fingerprint.sh [run]     on the GPU host (writes hwinfo.json to $OUT if set)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-run}" = prepare ]; then
  # The GPU host has no apt: tl::expected (header-only) travels in .device/.
  mkdir -p .device/include/tl && cp /usr/include/tl/expected.hpp .device/include/tl/
  exit 0
fi
out=${OUT:-$(mktemp -d)}
bin=$(mktemp -d)/kcache_hwinfo

g++ -std=c++20 -O2 -Wall -Wextra -Werror -Icachekey/include -I.device/include \
  cachekey/src/cpu_info.cpp cachekey/src/cuda_api.cpp cachekey/src/gpu_info.cpp examples/kcache_hwinfo.cpp -ldl -o "$bin"
"$bin"
"$bin" --json >"$out/hwinfo.json"

python3 - "$out/hwinfo.json" <<'PY'
import json, sys
import torch

ours = json.load(open(sys.argv[1]))["gpus"]
n = torch.cuda.device_count()
print(f"kcache sees {len(ours)} GPU(s), torch sees {n}")
assert len(ours) == n, "device count differs"
for g in ours:
    p = torch.cuda.get_device_properties(g["ordinal"])
    checks = {
        "name": (g["name"], p.name),
        "compute capability": ((g["cc_major"], g["cc_minor"]), (p.major, p.minor)),
        "SM count": (g["sm_count"], p.multi_processor_count),
        "memory bytes": (g["memory_bytes"], p.total_memory),
    }
    for what, (a, b) in checks.items():
        status = "ok" if a == b else "MISMATCH"
        print(f"  gpu{g['ordinal']} {what:18} kcache={a!r:32} torch={b!r:32} {status}")
        assert a == b, f"{what} differs"
    arch = f"sm_{p.major}{p.minor}" + ("a" if p.major >= 9 else "")
    assert g["binary_class"] == f"cuda:{arch}", g["binary_class"]
    print(f"  gpu{g['ordinal']} binary class {g['binary_class']}, tuning class {g['tuning_class']}")
print("GPU fingerprint matches PyTorch")
PY
