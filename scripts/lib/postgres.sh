# shellcheck shell=bash
# A private PostgreSQL server for the broker's log, as devstack starts one
# (devstack/src/postgres.rs): its own cluster directory, port and socket
# directory, initdb on first use, run as the unprivileged `postgres` user when
# we are root (initdb and postgres refuse root). Sourced by scripts/test,
# bench/run and scripts/bench-replay.
#
#   pg_start DIR PORT [SETTING...]   # cluster in DIR/data; each SETTING is passed as -c SETTING
#   pg_create_database PORT NAME     # unless it exists
#   pg_stop DIR                      # fast shutdown: clients disconnected, commits on disk
#   pg_url PORT [DATABASE]           # postgres://postgres@127.0.0.1:PORT[/DATABASE]

# The newest PostgreSQL programs: $SECKILL_POSTGRES_BIN, else Debian's
# /usr/lib/postgresql/N/bin, else the directory of initdb on PATH.
pg_bin_dir() {
  if [ -n "${SECKILL_POSTGRES_BIN:-}" ]; then
    echo "$SECKILL_POSTGRES_BIN"
    return
  fi
  local newest
  newest="$(find /usr/lib/postgresql -mindepth 3 -maxdepth 3 -path '*/bin/initdb' 2>/dev/null | sort -V | tail -1)"
  if [ -n "$newest" ]; then
    dirname "$newest"
  elif command -v initdb >/dev/null; then
    dirname "$(command -v initdb)"
  else
    echo "PostgreSQL is not installed (no initdb in /usr/lib/postgresql/*/bin or on PATH)" >&2
    return 1
  fi
}

# Runs a command as the server's account: `postgres` when we are root.
pg_as_server() {
  if [ "$(id -u)" = 0 ]; then
    setpriv --reuid postgres --regid postgres --clear-groups -- "$@"
  else
    "$@"
  fi
}

pg_url() { # port [database]
  echo "postgres://postgres@127.0.0.1:$1${2:+/$2}"
}

pg_psql() { # port sql
  "$(pg_bin_dir)/psql" --no-psqlrc --no-align --tuples-only --quiet --set ON_ERROR_STOP=1 \
    --dbname "$(pg_url "$1" postgres)" --command "$2"
}

pg_start() { # dir port [setting...]
  local dir="$1" port="$2" bin
  shift 2
  bin="$(pg_bin_dir)" || return 1
  mkdir -p "$dir"
  [ "$(id -u)" != 0 ] || chown postgres: "$dir"
  if [ ! -d "$dir/data" ]; then
    # Built under another name and renamed when complete: DIR/data is never half made.
    rm -rf "$dir/data.initdb"
    if ! pg_as_server "$bin/initdb" -D "$dir/data.initdb" --username postgres --auth trust --encoding UTF8 \
      --locale C ${PG_INITDB_NO_SYNC:+--no-sync} >"$dir/initdb.log" 2>&1; then
      echo "initdb failed: see $dir/initdb.log" >&2
      return 1
    fi
    mv "$dir/data.initdb" "$dir/data"
  fi
  # plan_cache_mode: see PgSettings::options in devstack/src/postgres.rs (the broker's header
  # fetch degrades to a scan of the whole partition under custom plans).
  local settings=(-c listen_addresses=127.0.0.1 -c unix_socket_permissions=0700
    -c plan_cache_mode=force_generic_plan) setting
  for setting in "$@"; do settings+=(-c "$setting"); done
  pg_as_server "$bin/postgres" -D "$dir/data" -p "$port" -k "$dir" "${settings[@]}" \
    >>"$dir/postgres.log" 2>&1 </dev/null &
  local _
  for _ in $(seq 600); do
    if pg_psql "$port" 'select 1' >/dev/null 2>&1; then
      # The postmaster's own pid (setpriv execs it; the first line of its lock file says so).
      head -1 "$dir/data/postmaster.pid" >"$dir/postgres.pid"
      return 0
    fi
    sleep 0.1
  done
  echo "PostgreSQL did not start on port $port: see $dir/postgres.log" >&2
  return 1
}

pg_create_database() { # port name
  if [ "$(pg_psql "$1" "select count(*) from pg_database where datname = '$2'")" = 0 ]; then
    pg_psql "$1" "create database $2"
  fi
}

pg_stop() { # dir
  local pid _
  pid="$(cat "$1/postgres.pid" 2>/dev/null)" || return 0
  kill -INT "$pid" 2>/dev/null || { rm -f "$1/postgres.pid"; return 0; }
  for _ in $(seq 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$1/postgres.pid"
}
