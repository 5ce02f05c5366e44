# A throwaway PostgreSQL cluster for the benchmarks (issue 32), sourced by bench/scale.sh and
# bench/restart-state.sh; the shell twin of crates/coalloc-testkit/src/postgres.rs (same
# recipe: Debian's binaries, `initdb` with trust authentication for the role `coalloc`,
# `pg_ctl start` on a free loopback port with its socket in the cluster's folder, fsync on,
# default `synchronous_commit` (on); as root, the cluster runs as the `postgres` user).
#
#   . bench/pgcluster.sh
#   pg_start                    # sets PG_DIR, PG_BIN, PG_PORT, PG_URL (no database)
#   trap pg_stop EXIT           # the caller's trap: stop the cluster, remove its folder
#   pg_createdb NAME [TEMPLATE] # a database (a copy of TEMPLATE: the files, as `cp -a`)
#   pg_sql DB 'SELECT ...'      # what psql prints (unaligned, tuples only)
#
# The binaries: $COALLOC_PG_BIN, or the newest /usr/lib/postgresql/N/bin
# (`apt-get install -y postgresql`).

pg_start() {
  PG_BIN=${COALLOC_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
  [ -x "$PG_BIN/initdb" ] || { echo "no PostgreSQL binaries: apt-get install -y postgresql" >&2; return 1; }
  PG_DIR=$(mktemp -d /tmp/coalloc-pg-bench-XXXXXX)
  PG_RUN=()
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$PG_DIR"
    PG_RUN=(runuser -u postgres --)
  fi
  PG_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  (cd "$PG_DIR" && "${PG_RUN[@]}" "$PG_BIN/initdb" -D "$PG_DIR/data" -U coalloc --auth=trust \
    -E UTF8 --no-sync >/dev/null)
  (cd "$PG_DIR" && "${PG_RUN[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log" -w -t 60 \
    -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c fsync=on" start >/dev/null)
  PG_URL=postgres://coalloc@127.0.0.1:$PG_PORT
  echo "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') at $PG_URL ($PG_DIR)" >&2
}

pg_stop() {
  [ -n "${PG_DIR:-}" ] || return 0
  (cd "$PG_DIR" && "${PG_RUN[@]}" "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null) || true
  rm -rf "$PG_DIR"
  PG_DIR=
}

pg_createdb() {
  "$PG_BIN/createdb" -h 127.0.0.1 -p "$PG_PORT" -U coalloc ${2:+-T "$2"} "$1"
}

pg_sql() {
  "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U coalloc -d "$1" -AtX -v ON_ERROR_STOP=1 -c "$2"
}
