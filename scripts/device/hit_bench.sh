#!/usr/bin/env bash
# hit_bench (issue 21: kcached's hit path vs redis-server GET, same payloads,
# same run) on the device machine, which has neither redis-server, RocksDB nor
# hiredis: release binaries, redis-server and the shared libraries they need
# travel in devbench/ (git ignores it), as scripts/device/tls_bench.sh does.
#
#   scripts/device/hit_bench.sh pack NAME      here: build/release's hit_bench, kcached,
#                                              kcache-worker -> devbench/NAME/; redis-server
#                                              and every library -> devbench/lib/
#   scripts/device/hit_bench.sh run RUNS SECONDS SIZES CLIENTS NAME...
#                                              on the device (carry devbench): RUNS rounds,
#                                              each NAME once per round (interleaved, so drift
#                                              hits all alike); every run printed, then medians
#
# Each run's output is also written to $OUT (when set) as NAME-ROUND.txt.
# HIT_BENCH_ARGS (e.g. "--pipeline 8") goes to every hit_bench run.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=devbench

case "${1:-}" in
  pack)
    name=${2:?name}
    mkdir -p "$dir/$name" "$dir/lib"
    for b in bench/hit_bench service/kcached; do
      cp "build/release/$b" "$dir/$name/"
    done
    # The hit path compiles nothing, and the real worker needs LLVM's libraries
    # (hundreds of MiB): a stand-in that answers kcached's start-up questions.
    printf '%s\n' '#!/bin/sh' \
      'case "$1" in --toolchains) echo '"'"'{"cpp":{"clang":"none"}}'"'"' ;; --sandbox) echo none ;; esac' \
      >"$dir/$name/kcache-worker"
    chmod +x "$dir/$name/kcache-worker"
    redis=$(command -v redis-server)
    cp "$redis" "$dir/lib/"
    # libc, libm, libgcc_s and the loader stay the device's own (a newer glibc).
    ldd "$dir/$name/hit_bench" "$dir/$name/kcached" "$redis" | awk '/=> \//{print $3}' | sort -u |
      grep -v -E '/(libc|libm|libpthread|libdl|librt|libgcc_s)\.so' | xargs -I{} cp -L {} "$dir/lib/"
    du -sh "$dir"
    ;;
  run)
    runs=${2:?runs}
    seconds=${3:?seconds}
    sizes=${4:?sizes}
    clients=${5:?clients}
    shift 5
    export LD_LIBRARY_PATH=$PWD/$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} KCACHE_REDIS_SERVER=$PWD/$dir/lib/redis-server
    echo "$(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo)"
    results=$(mktemp -d)
    for round in $(seq 1 "$runs"); do
      for name in "$@"; do
        echo "== $name, run $round"
        KCACHE_KCACHED_BINARY=$PWD/$dir/$name/kcached KCACHE_WORKER_BINARY=$PWD/$dir/$name/kcache-worker \
          "$dir/$name/hit_bench" --seconds "$seconds" --sizes "$sizes" --clients "$clients" \
          ${HIT_BENCH_ARGS:-} |
          tee "$results/$name-$round.txt"
        if [ -n "${OUT:-}" ]; then cp "$results/$name-$round.txt" "$OUT/"; fi
      done
    done
    # Rows: size unit clients redis req/s p50 p99 NAME req/s p50 p99 ratio p99-ratio.
    for name in "$@"; do
      echo "== $name: median of $runs runs (every run: ratio redis-req/s server-req/s server-p99-us)"
      cat "$results/$name"-*.txt | awk '$4 == "redis" && ($8 == "kcached" || $8 == "kc-resp") {
          key = $1 " " $2 " x" $3 " " $8; r = $12; sub(/x$/, "", r)
          v[key] = v[key] " " r; p[key] = p[key] " " $11
          w[key] = w[key] sprintf("  %s %d %d %d", r, $5, $9, $11)
          if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
        function median(s,   a, m, x, y, t) { m = split(s, a, " ")
          for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (a[y] + 0 < a[x] + 0) { t = a[x]; a[x] = a[y]; a[y] = t }
          return a[int((m + 1) / 2)] }
        END { for (i = 1; i <= n; i++) { k = order[i]
          printf "%-24s median %.2fx p99 %d us |%s\n", k, median(v[k]), median(p[k]), w[k] } }'
    done
    ;;
  *)
    echo "usage: $0 pack NAME | run RUNS SECONDS SIZES CLIENTS NAME..." >&2
    exit 2
    ;;
esac
