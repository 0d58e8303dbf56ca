#!/usr/bin/env bash
# Long libFuzzer run of both targets on the 16-core device machine (issue 13
# asks for >= 10^7 executions per target; the 2-core host does ~24k/s on the
# HTTP target). Needs .fuzzcarry/fuzz.tar.gz made on the build host:
#   the fuzz preset's binaries (strip --strip-debug), their shared libraries
#   (ldd) in fzlib/, build/fuzz/corpus and tests/fuzz/http.dict.
#   scripts/device/long_fuzz.sh [SECONDS] [WORKERS_PER_TARGET]
set -uo pipefail
seconds=${1:-400}
workers=${2:-7}
work=/tmp/longfuzz
mkdir -p "$work" && cd "$work" || exit 1
tar -xzf "$OLDPWD/.fuzzcarry/fuzz.tar.gz" || exit 1
ldd --version | head -1
# glibc itself comes from the device (it must be >= the build host's 2.36);
# everything else from the carried folder.
mkdir -p glibc && mv fzlib/libc.so.6 fzlib/libm.so.6 fzlib/libpthread.so.0 fzlib/libresolv.so.2 \
  fzlib/ld-linux-x86-64.so.2 glibc/ 2>/dev/null
export LD_LIBRARY_PATH=$work/fzlib
for target in http_request_fuzzer parsers_fuzzer; do
  mkdir -p "logs/$target" "new/$target"
  (cd "logs/$target" && "$work/$target" -jobs="$workers" -workers="$workers" \
     -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 -dict="$work/http.dict" \
     "$work/new/$target" "$work/corpus/$target" >/dev/null 2>&1) &
done
wait
for target in http_request_fuzzer parsers_fuzzer; do
  runs=$(cat logs/$target/fuzz-*.log | awk '/stat::number_of_executed_units/{s+=$2} END{print s+0}')
  crashes=$(ls "logs/$target" | grep -c "^crash-\|^leak-\|^timeout-\|^oom-")
  errors=$(grep -l "ERROR: \|==ERROR\|SUMMARY:" logs/$target/fuzz-*.log 2>/dev/null | wc -l)
  echo "$target: $workers workers x ${seconds}s: $runs executions, $errors logs with errors, $crashes crash files"
  grep -h "ERROR\|SUMMARY" logs/$target/fuzz-*.log | head -5
  mkdir -p "$OUT" && tail -n 15 logs/$target/fuzz-0.log > "$OUT/$target.log0.txt"
done
