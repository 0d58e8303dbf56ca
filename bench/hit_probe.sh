#!/bin/bash
# What one hit costs kcached, from outside (docs/HIT_PATH.md): runs
# build/release/bench/hit_bench at SIZE x 16 clients and, while it runs,
#   cpu SIZE    samples kcached's utime+stime and its HTTP / RESP request
#               counters every 0.25 s: CPU per answer over the intervals where
#               only one protocol was served (the bench's phases do not overlap)
#   sends SIZE  traces kcached's send and receive calls (strace): answers
#               (sends starting with "HTTP/1.1" or "$") and all sends
#   perf SIZE   perf record --call-graph dwarf on kcached for 2 s of the HTTP
#               phase and 2 s of the RESP phase: OUTDIR/http.data, resp.data
#               (read with perf report --children)
# KCACHE_KCACHED_BINARY picks another kcached (a "before" build).
# usage: bench/hit_probe.sh cpu|sends|perf SIZE [OUTDIR]
set -u
cd "$(dirname "$0")/.."
mode=$1 size=$2 out=${3:-$(mktemp -d)}
mkdir -p "$out"
seconds=3
[ "$mode" = perf ] && seconds=4 # room for 2 s of recording inside each phase
build/release/bench/hit_bench --seconds $seconds --sizes "$size" --clients 16 >"$out/bench" 2>&1 &
bench=$!
for _ in $(seq 100); do
  kcached=$(pgrep -P $bench -x kcached) && break
  sleep 0.1
done
sleep 1
if [ "$mode" = sends ]; then
  strace -f -s 6 -e trace=sendmsg,sendto,write,writev,recvmsg,recvfrom -p "$kcached" \
    -o "$out/strace" 2>/dev/null &
  tracer=$!
  wait $bench
  sleep 0.3
  kill -INT $tracer 2>/dev/null
  wait $tracer
  grep KiB "$out/bench"
  sends=$(grep -cE 'send(msg|to)\(' "$out/strace")
  http=$(grep -E 'send(msg|to)\(' "$out/strace" | grep -c '"HTTP/')
  resp=$(grep -E 'send(msg|to)\(' "$out/strace" | grep -c '"\$')
  echo "sends: $sends, HTTP answers: $http, RESP answers: $resp," \
    "continuations: $((sends - http - resp))," \
    "recvmsg (HTTP reads): $(grep -c 'recvmsg(' "$out/strace")," \
    "recvfrom (RESP reads): $(grep -c 'recvfrom(' "$out/strace")"
  exit 0
fi
port=
for p in $(ss -ltnpH | grep "pid=$kcached," | awk '{print $4}' | sed 's/.*://'); do
  curl -s -m 1 "http://127.0.0.1:$p/metrics" 2>/dev/null | grep -q kcache_http && port=$p
done
if [ "$mode" = perf ]; then
  count() { curl -s -m 1 "http://127.0.0.1:$port/metrics" | grep "^$1" | awk '{s+=$NF} END {print s+0}'; }
  for phase in http resp; do
    metric=kcache_http_requests_total
    [ $phase = resp ] && metric=kcache_resp_commands_total
    prev=$(count $metric) # wait until this protocol's phase is under way
    while kill -0 "$kcached" 2>/dev/null; do
      sleep 0.2
      now=$(count $metric)
      [ $((now - prev)) -gt 500 ] && break
      prev=$now
    done
    sleep 0.5
    perf record -F 2000 --call-graph dwarf,16384 -p "$kcached" -o "$out/$phase.data" -- sleep 2 \
      >/dev/null 2>&1
  done
  wait $bench
  grep KiB "$out/bench"
  echo "perf report -i $out/http.data --children --stdio (and resp.data)"
  exit 0
fi
while kill -0 "$kcached" 2>/dev/null; do
  metrics=$(curl -s -m 1 "http://127.0.0.1:$port/metrics")
  http=$(echo "$metrics" | grep '^kcache_http_requests_total' | awk '{s+=$NF} END {print s+0}')
  resp=$(echo "$metrics" | grep '^kcache_resp_commands_total' | awk '{s+=$NF} END {print s+0}')
  cpu=$(awk '{print $14+$15}' "/proc/$kcached/stat" 2>/dev/null) || break
  echo "$cpu $http $resp"
  sleep 0.25
done >"$out/samples"
wait $bench
awk -v tck="$(getconf CLK_TCK)" 'NR>1 { dc=$1-c; dh=$2-h; dr=$3-r;
    if (dh>50 && dr==0) {hc+=dc; hn+=dh} else if (dr>50 && dh<=2) {rc+=dc; rn+=dr} }
  {c=$1; h=$2; r=$3}
  END { printf "HTTP: %.1f us CPU/answer (%d)  RESP: %.1f us CPU/answer (%d)\n",
        hc/tck*1e6/hn, hn, rc/tck*1e6/rn, rn }' "$out/samples"
grep KiB "$out/bench"
