#!/usr/bin/env bash
# gateway-vs-nginx.sh — `resil gateway` beside a real proxy, in one run.
#
# Starts nginx on loopback as the upstream (201 from memory) and as a plain
# proxy_pass peer to it, a `resil gateway` in front of the same upstream
# (on SQLite, then on PostgreSQL, both durable), and drives each with wrk:
#
#   nginx proxy_pass       POST, no key
#   gateway pass-through   POST, no key (forwarded as it is)
#   gateway keyed, new     POST, a new Idempotency-Key each: begin + complete
#   gateway replays        POST, one of 1000 completed keys: one read
#   keyed during a purge   as "keyed, new", for PURGE_SECONDS (4) while the
#                          gateway purges PURGE_KEYS expired records at
#                          start-up, with the share of them purged meanwhile
#   keyed, soak            SOAK_REQUESTS keyed requests, new keys; the
#                          gateway's resident memory before and after
#
# and prints one Markdown table (requests/s, p50, p99, non-2xx answers).
# The machine's load average is printed first and last: other work on the
# machine moves every figure.
#
# Needs nginx-light, wrk and sqlite3 (scripts/deps.sh --bench installs
# them) and a Release build of resil: `make bench-gateway` does all three.
#
# Environment: BUILD (build-bench), DURATION (8s), CONNECTIONS (32),
# THREADS (2), BACKENDS ("sqlite postgres"), PURGE_KEYS (1000000),
# SOAK_REQUESTS (1000000; 0 skips the soak), SOAK_BACKENDS (sqlite: the
# soak takes minutes at PostgreSQL's rate), GATEWAY_ARGS (extra flags,
# e.g. "--batch-window 1ms"), BASELINE (another resil binary, e.g. one
# built from an earlier commit: its pass-through and keyed runs are made
# too, in the same run, as "baseline" rows beside the gateway's), PATHS
# (which gateway rows to run: "pass keyed replay" by default; e.g. PATHS=
# "pass replay" with PURGE_KEYS=0 SOAK_REQUESTS=0 for the issue's ratios alone).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$here/build-bench}
DURATION=${DURATION:-8s}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
BACKENDS=${BACKENDS:-sqlite postgres}
PURGE_KEYS=${PURGE_KEYS:-1000000}
SOAK_REQUESTS=${SOAK_REQUESTS:-1000000}
SOAK_BACKENDS=${SOAK_BACKENDS:-sqlite}
GATEWAY_ARGS=${GATEWAY_ARGS:-}
BASELINE=${BASELINE:-}
PATHS=${PATHS:-pass keyed replay}
resil=$BUILD/resil

for tool in nginx wrk sqlite3 "$resil"; do
  command -v "$tool" >/dev/null || { echo "gateway-vs-nginx: $tool is missing (make bench-gateway installs and builds what it needs)" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/resil-bench.XXXXXX")
chmod 755 "$work"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n "${pgdata:-}" ]] && runuser -u postgres -- "$pgbin/pg_ctl" -D "$pgdata" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# A port nothing listens on, below Linux's ephemeral range (32768 and up):
# a port there may be taken by a client connection's end (wrk's, the
# gateway's, anyone's) between the check and the bind.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 12000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

wait_port() {
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "gateway-vs-nginx: nothing listens on port $1" >&2
  exit 1
}

# ---- nginx: the upstream and the plain proxy ------------------------------------
up_port=$(free_port)
proxy_port=$(free_port)
mkdir -p "$work/nginx/logs"
cat >"$work/nginx/nginx.conf" <<EOF
worker_processes auto;
pid $work/nginx/nginx.pid;
error_log $work/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  server {
    listen 127.0.0.1:$up_port;
    location / { return 201 '{"order":"created"}\n'; }
  }
  upstream upstream { server 127.0.0.1:$up_port; keepalive 128; }
  server {
    listen 127.0.0.1:$proxy_port;
    location / {
      proxy_pass http://upstream;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
nginx -p "$work/nginx" -c "$work/nginx/nginx.conf" -g 'daemon off;' &
pids+=($!)
wait_port "$up_port"
wait_port "$proxy_port"

# ---- wrk scripts ------------------------------------------------------------------
body='{"item":"book","qty":1}'
cat >"$work/plain.lua" <<EOF
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
EOF
# A new key per request: the run, the thread and a counter.
cat >"$work/new.lua" <<EOF
local threads = 0
function setup(thread) threads = threads + 1; thread:set("id", threads) end
function init(args) prefix = (args[1] or "run") .. "-" .. id .. "-"; n = 0 end
function request()
  n = n + 1
  return wrk.format("POST", "/orders", {["Idempotency-Key"] = prefix .. n,
                    ["Content-Type"] = "application/json"}, '$body')
end
EOF
# Cycling through 1000 keys: after a warm-up, every answer is a replay.
cat >"$work/replay.lua" <<EOF
local threads = 0
function setup(thread) threads = threads + 1; thread:set("id", threads) end
function init(args) n = id * 97 end
function request()
  n = n + 1
  return wrk.format("POST", "/orders", {["Idempotency-Key"] = "replay-" .. (n % 1000),
                    ["Content-Type"] = "application/json"}, '$body')
end
EOF

# "| name | requests/s | p50 | p99 | non-2xx |" from one wrk run.
run_wrk() {
  local name=$1 url=$2 script=$3 duration=$4
  shift 4
  local out="$work/wrk.out"
  if ! wrk -t"$THREADS" -c"$CONNECTIONS" -d"$duration" --latency -s "$script" "$url" -- "$@" >"$out" 2>&1; then
    echo "gateway-vs-nginx: wrk failed on \"$name\":" >&2
    cat "$out" "${gw_log:-/dev/null}" >&2
    exit 1
  fi
  local rps p50 p99 bad total
  rps=$(awk '/^Requests\/sec/ {printf "%d", $2}' "$out")
  p50=$(awk '$1 == "50%" {print $2}' "$out")
  p99=$(awk '$1 == "99%" {print $2}' "$out")
  bad=$(awk '/Non-2xx/ {print $5}' "$out")
  total=$(awk '/requests in/ {print $1}' "$out")
  printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$rps" "$p50" "$p99" "${bad:-0}" "$total"
}

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# ---- PostgreSQL, durable (fsync on), on loopback ---------------------------------
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
start_postgres() {
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
  pgdata=$work/pgdata
  pg_port=$(free_port)
  mkdir -p "$pgdata" && chown postgres "$pgdata" "$work"
  runuser -u postgres -- "$pgbin/initdb" -D "$pgdata" -U postgres -A trust -E UTF8 --locale=C >/dev/null
  runuser -u postgres -- "$pgbin/pg_ctl" -D "$pgdata" -l "$work/pg.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $work -c max_connections=200" start >/dev/null
  pg_url="postgres://postgres@127.0.0.1:$pg_port/postgres"
}

# Fill the table with n records created long ago (at 1000 ms), or with
# "live" n records created now, which no purge deletes. Then settle what the
# load left behind (PostgreSQL's vacuum and statistics of a million new
# rows, SQLite's WAL), so that the rows after it measure the gateway, not
# the seeding's aftermath.
seed_expired() {
  local backend=$1 n=$2 at=1000 sql
  if [[ ${3:-} == live ]]; then
    at=$(( $(date +%s) * 1000 ))
  fi
  sql="CREATE TABLE IF NOT EXISTS resil_idempotency (tenant TEXT NOT NULL, operation TEXT NOT NULL,
        idempotency_key TEXT NOT NULL, request_hash BLOB NOT NULL, status INTEGER, headers BLOB,
        body BLOB, created_at INTEGER NOT NULL, lease_expires_at INTEGER NOT NULL,
        lease INTEGER NOT NULL, PRIMARY KEY (tenant, operation, idempotency_key));
       CREATE INDEX IF NOT EXISTS resil_idempotency_created_at ON resil_idempotency (created_at);"
  if [[ $backend == sqlite ]]; then
    sqlite3 "$db" "PRAGMA journal_mode=WAL; $sql
      WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < $n)
      INSERT INTO resil_idempotency SELECT '', 'http', 'old-' || x, zeroblob(32), 201, '', 'old',
        $at, $at, 1 FROM i; PRAGMA wal_checkpoint(TRUNCATE);" >/dev/null
  else
    psql -q "$pg_url" -c "$(echo "$sql" | sed 's/BLOB/BYTEA/g; s/INTEGER NOT NULL/BIGINT NOT NULL/g')" \
      -c "INSERT INTO resil_idempotency SELECT '', 'http', 'old-' || x, '\\x00'::bytea, 201, '', 'old',
            $at, $at, 1 FROM generate_series(1, $n) x" \
      -c "VACUUM ANALYZE resil_idempotency" -c "CHECKPOINT" >/dev/null
  fi
}

# Start from an empty table.
drop_table() {
  [[ $1 == sqlite ]] && rm -f "$db" "$db"-*
  [[ $1 == postgres ]] && psql -q "$pg_url" -c "DROP TABLE IF EXISTS resil_idempotency" >/dev/null
  return 0
}

start_gateway() {
  local store=$1 binary=${2:-$resil}
  gw_log="$work/gateway.log"
  # Emptied here, not by the background job's redirection, which may run
  # after the wait below has read the previous gateway's port.
  : >"$gw_log"
  # shellcheck disable=SC2086
  "$binary" gateway --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$up_port" \
    --store "$store" --quiet $GATEWAY_ARGS 2>"$gw_log" &
  gw_pid=$!
  pids+=("$gw_pid")
  for _ in $(seq 1 200); do
    gw_port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$gw_log")
    [[ -n "$gw_port" ]] && return 0
    sleep 0.05
  done
  echo "gateway-vs-nginx: the gateway did not start:" >&2
  cat "$gw_log" >&2
  exit 1
}

stop_gateway() {
  kill "$gw_pid" && wait "$gw_pid" || true
  sed -n "s/^resil gateway: the store \(committed\|read\) /$1: the store \1 /p" "$gw_log" >>"$work/batches"
}

# How many of the seeded records are left (they were all created at 1000).
seeded_left() {
  if [[ $1 == sqlite ]]; then
    sqlite3 "$db" "SELECT count(*) FROM resil_idempotency WHERE created_at = 1000"
  else
    psql -tAq "$pg_url" -c "SELECT count(*) FROM resil_idempotency WHERE created_at = 1000"
  fi
}

# The p99 of keyed requests while the start-up purge deletes PURGE_KEYS
# records. wrk runs PURGE_SECONDS (4): a purge that keeps to its share of
# the time under requests lasts longer than that (minutes on PostgreSQL),
# so the window is measured inside it, and the row says how much of the
# purge the window saw: the records gone by its end (counted once, then:
# a count of a million rows while wrk runs would load the cores it
# measures), the duration that pace projects for all of them, and when the
# purge really ended (the rest at full speed, with the requests gone). A
# purge that ended inside the window is said so: the p99 then covers time
# without it. A row before it runs as long beside as many records that are
# not expired (no purge): what a table of that size costs the requests
# without a purge, the row to hold the purge's against.
purge_run() {
  local backend=$1 store=$2 window=${PURGE_SECONDS:-4}
  drop_table "$backend"
  seed_expired "$backend" "$PURGE_KEYS" live
  start_gateway "$store"
  run_wrk "$backend: keyed, new keys, beside as many live records, no purge" \
    "http://127.0.0.1:$gw_port/orders" "$work/new.lua" "${window}s" "live-$RANDOM"
  stop_gateway "$backend, beside the live records"
  drop_table "$backend"
  seed_expired "$backend" "$PURGE_KEYS"
  start_gateway "$store"
  local t0 left
  t0=$(date +%s.%N)
  run_wrk "$backend: keyed, new keys, during the purge" "http://127.0.0.1:$gw_port/orders" \
    "$work/new.lua" "${window}s" "purge-$RANDOM"
  left=$(seeded_left "$backend")
  while [[ "$(seeded_left "$backend")" != 0 ]]; do sleep 0.2; done
  local all gone=$((PURGE_KEYS - left))
  all=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN {printf "%.1f", a - b}')
  if [[ $left == 0 ]]; then
    printf '| %s: the purge of %s records ended inside the %s s window (all gone after %s s): the p99 covers time without it | | | | | |\n' \
      "$backend" "$PURGE_KEYS" "$window" "$all"
  else
    printf '| %s: in the %s s window the purge deleted %s of %s records (%s %%): all in %s s at that pace; all gone after %s s (the rest without requests) | | | | | |\n' \
      "$backend" "$window" "$gone" "$PURGE_KEYS" "$((gone * 100 / PURGE_KEYS))" \
      "$(awk -v w="$window" -v n="$PURGE_KEYS" -v g="$gone" 'BEGIN {printf "%.0f", (g > 0 ? w * n / g : 0)}')" "$all"
  fi
  stop_gateway "$backend, during the purge"
}

want() { [[ " $PATHS " == *" $1 "* ]]; }

# Replays of 1000 keys. Warm-up: every key's first request; then a second
# for the last ones in flight to be saved, so that the measured run sees
# only replays.
replays() {
  wrk -t"$THREADS" -c"$CONNECTIONS" -d2s -s "$work/replay.lua" "$2" >/dev/null 2>&1
  sleep 1
  run_wrk "$1" "$2" "$work/replay.lua" "$DURATION"
}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; wrk -t$THREADS -c$CONNECTIONS -d$DURATION"
echo
echo "| path | requests/s | p50 | p99 | non-2xx | requests |"
echo "|---|---|---|---|---|---|"
run_wrk "nginx proxy_pass" "http://127.0.0.1:$proxy_port/orders" "$work/plain.lua" "$DURATION"

for backend in $BACKENDS; do
  if [[ $backend == sqlite ]]; then
    db=$work/gateway.db
    store="sqlite:$db"
  else
    [[ -n "${pg_url:-}" ]] || start_postgres
    store=$pg_url
  fi
  if [[ -n "$BASELINE" ]]; then
    start_gateway "$store" "$BASELINE"
    url="http://127.0.0.1:$gw_port/orders"
    want pass && run_wrk "$backend: baseline pass-through" "$url" "$work/plain.lua" "$DURATION"
    want keyed && run_wrk "$backend: baseline keyed, new keys" "$url" "$work/new.lua" "$DURATION" "base-$RANDOM"
    want replay && replays "$backend: baseline replays" "$url"
    stop_gateway "$backend, baseline"
  fi
  start_gateway "$store"
  url="http://127.0.0.1:$gw_port/orders"
  want pass && run_wrk "$backend: gateway pass-through" "$url" "$work/plain.lua" "$DURATION"
  keyed_rps=0
  if want keyed; then
    run_wrk "$backend: gateway keyed, new keys" "$url" "$work/new.lua" "$DURATION" "new-$RANDOM"
    keyed_rps=$(awk '/^Requests\/sec/ {printf "%d", $2}' "$work/wrk.out")
  fi
  want replay && replays "$backend: gateway replays" "$url"
  if [[ $SOAK_REQUESTS -gt 0 && " $SOAK_BACKENDS " == *" $backend "* ]]; then
    before=$(rss_kb "$gw_pid")
    # As long as SOAK_REQUESTS take at the keyed rate measured above.
    run_wrk "$backend: keyed, new keys, soak" "$url" "$work/new.lua" \
      "$(( SOAK_REQUESTS * 5 / 4 / (keyed_rps > 100 ? keyed_rps : 100) + 1 ))s" "soak-$RANDOM"
    printf '| %s: gateway memory before / after the soak | %s MB | %s MB | | | |\n' "$backend" \
      "$((before / 1024))" "$(( $(rss_kb "$gw_pid") / 1024 ))"
  fi
  stop_gateway "$backend"
  if [[ $PURGE_KEYS -gt 0 ]]; then
    purge_run "$backend" "$store"
  fi
done
echo
cat "$work/batches" 2>/dev/null || true
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
