#!/usr/bin/env bash
# hit_bench --tls (issue 14: TLS / plain throughput) on the device machine,
# which has neither RocksDB nor hiredis: release binaries and the shared
# libraries they need travel in a folder git ignores (.git/info/exclude).
#
#   scripts/device/tls_bench.sh pack NAME          here: build/release's hit_bench,
#                                                  kcached, kcache-worker -> devbench/NAME/,
#                                                  their libraries and openssl -> devbench/lib/
#   scripts/device/tls_bench.sh run RUNS SECONDS NAME... [-- HIT_BENCH_ARGS...]
#                                                  on the device (carry devbench):
#                                                  RUNS rounds, each NAME once per round
#                                                  (interleaved, so drift hits all alike);
#                                                  every run printed, then the medians.
#                                                  After `--`: more hit_bench flags, e.g.
#                                                  `--daemon-cpus 4` (kcacheds on 4 cores,
#                                                  clients on the others)
#
# Each run's output is also written to $OUT (when set) as NAME-ROUND.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=devbench

case "${1:-}" in
  pack)
    name=${2:?name}
    mkdir -p "$dir/$name" "$dir/lib"
    for b in bench/hit_bench service/kcached compiler/kcache-worker; do
      cp "build/release/$b" "$dir/$name/"
    done
    openssl=$(command -v openssl)
    cp "$openssl" "$dir/lib/"
    # libc, libm, libgcc_s and the loader stay the device's own (a newer glibc).
    ldd "$dir/$name/hit_bench" "$dir/$name/kcached" "$openssl" | awk '/=> \//{print $3}' | sort -u |
      grep -v -E '/(libc|libm|libpthread|libdl|librt|libgcc_s)\.so' | xargs -I{} cp -L {} "$dir/lib/"
    du -sh "$dir"
    ;;
  run)
    runs=${2:?runs}
    seconds=${3:?seconds}
    shift 3
    names=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do
      names+=("$1")
      shift
    done
    [ $# -gt 0 ] && shift # the "--"
    [ ${#names[@]} -gt 0 ] || { echo "run: name at least one packed build" >&2; exit 2; }
    export LD_LIBRARY_PATH=$PWD/$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} PATH=$PWD/$dir/lib:$PATH
    echo "$(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo)"
    echo "cpu flags: $(grep -m1 -o -w -E 'aes|avx2|avx512f|vaes|vpclmulqdq|sha_ni' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    openssl version
    openssl speed -seconds 1 -bytes 16384 -evp aes-128-gcm 2>/dev/null | tail -1
    lsmod 2>/dev/null | grep -w tls || echo "kernel tls module: not loaded"
    results=$(mktemp -d)
    for round in $(seq 1 "$runs"); do
      for name in "${names[@]}"; do
        echo "== $name, run $round"
        KCACHE_KCACHED_BINARY=$PWD/$dir/$name/kcached KCACHE_WORKER_BINARY=$PWD/$dir/$name/kcache-worker \
          "$dir/$name/hit_bench" --tls --seconds "$seconds" "$@" | tee "$results/$name-$round.txt"
        if [ -n "${OUT:-}" ]; then cp "$results/$name-$round.txt" "$OUT/"; fi
      done
    done
    # Rows: size unit clients plain req/s p50 p99 tls req/s p50 p99 ratio p99-ratio.
    for name in "${names[@]}"; do
      echo "== $name: TLS/plain req/s, median of $runs runs (every run: ratio plain-req/s tls-req/s)"
      cat "$results/$name"-*.txt | awk '$4 == "plain" && $8 == "tls" {
          key = $1 " " $2 " x" $3; r = $12; sub(/x$/, "", r)
          v[key] = v[key] " " r; w[key] = w[key] sprintf("  %s %d %d", r, $5, $9)
          if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
        END { for (i = 1; i <= n; i++) {
          k = order[i]; m = split(v[k], a, " ")
          for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (a[y] + 0 < a[x] + 0) { t = a[x]; a[x] = a[y]; a[y] = t }
          printf "%-14s median %.2fx |%s\n", k, a[int((m + 1) / 2)], w[k] } }'
      echo "== $name: server capacity TLS/plain (each kcached's CPU per request), median of $runs runs"
      cat "$results/$name"-*.txt | awk '$4 == "server" && $5 == "cpu" {
          key = $1 " " $2 " x" $3; r = $NF; sub(/x$/, "", r)
          v[key] = v[key] " " r; w[key] = w[key] sprintf("  %s", r)
          if (!(key in seen)) { seen[key] = 1; order[++n] = key } }
        END { for (i = 1; i <= n; i++) {
          k = order[i]; m = split(v[k], a, " ")
          for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (a[y] + 0 < a[x] + 0) { t = a[x]; a[x] = a[y]; a[y] = t }
          printf "%-14s median %.2fx |%s\n", k, a[int((m + 1) / 2)], w[k] } }'
    done
    ;;
  *)
    echo "usage: $0 pack NAME | run RUNS SECONDS NAME..." >&2
    exit 2
    ;;
esac
