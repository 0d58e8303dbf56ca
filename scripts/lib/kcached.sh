# Sourced by scripts that need a throwaway kcached from build/release.
#   start_kcached WORK_DIR   starts it on a free port with its data in WORK_DIR;
#                            sets KCACHED_PID and exports KCACHE_URL
#   stop_kcached             SIGTERM, wait
start_kcached() {
  local work=$1
  rm -f "$work/port"
  build/release/service/kcached --listen 127.0.0.1:0 --port-file "$work/port" \
    --data-dir "$work/data" --log-level warn >>"$work/kcached.log" 2>&1 &
  KCACHED_PID=$!
  for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
  [ -s "$work/port" ] || { cat "$work/kcached.log"; return 1; }
  export KCACHE_URL="http://127.0.0.1:$(cat "$work/port")"
}

stop_kcached() {
  [ -n "${KCACHED_PID:-}" ] && kill "$KCACHED_PID" 2>/dev/null && wait "$KCACHED_PID" 2>/dev/null
  KCACHED_PID=""
}
