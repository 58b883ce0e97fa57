# The harness the serve tests share (tests/test_serve*.sh source it after
# setting CLI): checks and their count, a work folder removed at exit with
# every server started, a server on a free loopback port, its clean stop.

pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1"; }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }
# the summary line; the status of the whole test
serve_done() { echo "$pass passed, $fail failed"; [ "$fail" = 0 ]; }

# serve_needs: leave with SKIP (status 0) when curl or the serve command is missing
serve_needs() {
  command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 0; }
  "$CLI" serve --help >/dev/null 2>&1 || { echo "SKIP: staticlm was built without serve (libmicrohttpd/cJSON)"; exit 0; }
}

# serve_tmp NAME: TMP, a fresh folder; at exit every server in PIDS is killed and TMP removed
serve_tmp() {
  TMP=$(mktemp -d "/tmp/slm_$1.XXXXXX")
  PIDS=()
  trap serve_cleanup EXIT
}
serve_cleanup() {
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$TMP"
}

# serve_start LOG ARGS...: `staticlm serve ARGS` on a free port of 127.0.0.1,
# under timeout (SERVE_TIMEOUT seconds, default 300) so that it ends even if
# the test is killed; stderr to LOG. Sets PORT, U (its base URL), WPID (the
# timeout wrapper, in PIDS) and SPID (the server itself, for signals: timeout
# would forward them to its whole group). Leaves the test when it does not start.
serve_start() {
  local log=$1
  shift
  timeout -k 20 -s TERM "${SERVE_TIMEOUT:-300}" "$CLI" serve --host 127.0.0.1 --port 0 "$@" 2>"$log" &
  WPID=$!
  PIDS+=("$WPID")
  PORT=
  for _ in $(seq 1 300); do
    PORT=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" 2>/dev/null | head -1 | sed 's/.*://')
    [ -n "$PORT" ] && break
    kill -0 "$WPID" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$PORT" ] || { echo "FAIL: the server did not start ($log)"; cat "$log"; exit 1; }
  U=http://127.0.0.1:$PORT
  SPID=$(cat "/proc/$WPID/task/$WPID/children" 2>/dev/null | awk '{print $1}')
  [ -n "$SPID" ] || SPID=$WPID
  for _ in $(seq 1 100); do curl -sf "$U/health" >/dev/null && break; sleep 0.1; done
}

# serve_stop LOG SPID WPID: SIGTERM to the server; 0 when it exits 0 and LOG
# holds no sanitizer report
serve_stop() {
  kill -TERM "$2" 2>/dev/null
  local rc=0
  wait "$3" || rc=$?
  [ "$rc" = 0 ] && ! grep -q "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error:\|WARNING: ThreadSanitizer" "$1"
}
