# A PostgreSQL of the test's own: a fresh cluster in a temporary directory
# (Debian's server), run as the unprivileged user postgres (or as the test's
# own user when that is not root), listening on a free loopback port and a
# Unix socket inside the directory, trust authentication for loopback only
# (nothing else listens). Sourced by tests/lib.sh when SPACE_TEST_STORE=pg,
# or by a test that needs PostgreSQL itself.
#   pg_start: initdb + start; sets PGT (its directory), PG_PORT and
#     PG_URL (a postgres:// URL of database "space"); false when it fails;
#     PG_SERVER_OPTS: the server's settings (default fsync off)
#   pg_stop_server / pg_start_server: stop (fast) and start it again
#   pg_cleanup: stop it and remove PGT (ctl_cleanup calls it)
#   pg_sql QUERY: psql, unaligned, tuples only; booleans printed 1/0 as
#     sqlite3 prints them, and the functions the tests' queries share with
#     SQLite (group_concat with or without a separator, json_extract,
#     strftime('%s','now')) from a
#     schema only this helper puts on its search path, never the daemon's
PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
PGT=
# the server's settings beyond the address: the tests need no durability
# across a power loss (bench/pg.sh asks for it, as SQLite's store has it)
PG_SERVER_OPTS=${PG_SERVER_OPTS:--c fsync=off -c full_page_writes=off}

_pg_as() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_start_server() {
	_pg_as "$PG_BIN/pg_ctl" -D "$PGT/data" -l "$PGT/server.log" -w -t 30 \
		-o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PGT/sock $PG_SERVER_OPTS" \
		start >/dev/null
}
pg_stop_server() { _pg_as "$PG_BIN/pg_ctl" -D "$PGT/data" -m fast -w stop >/dev/null; }

pg_start() {
	[ -x "$PG_BIN/initdb" ] || { echo "# no PostgreSQL server (initdb) installed" >&2; return 1; }
	PGT=$(mktemp -d)
	chmod 755 "$PGT"
	mkdir "$PGT/sock"
	[ "$(id -u)" = 0 ] && chown -R postgres "$PGT"
	# C collation: text sorts bytewise, as SQLite sorts it
	_pg_as "$PG_BIN/initdb" -D "$PGT/data" -U space -A trust --no-locale -E UTF8 -N \
		>"$PGT/initdb.log" 2>&1 || { cat "$PGT/initdb.log" >&2; return 1; }
	# trust for loopback only: no line of pg_hba.conf names another address
	grep -Ev '^[[:space:]]*host' "$PGT/data/pg_hba.conf" >"$PGT/hba" || true
	printf 'host all all 127.0.0.1/32 trust\n' >>"$PGT/hba"
	cat "$PGT/hba" >"$PGT/data/pg_hba.conf"
	# the port is chosen only now (initdb takes seconds), and chosen again
	# once if a test running beside took it meanwhile
	PG_PORT=$(free_port)
	if ! pg_start_server; then
		PG_PORT=$(free_port)
		pg_start_server || { cat "$PGT/server.log" >&2; return 1; }
	fi
	PG_URL="postgresql://space@127.0.0.1:$PG_PORT/space"
	psql -X -q -h 127.0.0.1 -p "$PG_PORT" -U space -d postgres -c 'CREATE DATABASE space' >/dev/null &&
	psql -X -q -h 127.0.0.1 -p "$PG_PORT" -U space -d space >/dev/null <<'SQL'
CREATE SCHEMA testsql;
CREATE FUNCTION testsql.gc_t(text, text) RETURNS text LANGUAGE sql IMMUTABLE
  AS 'SELECT CASE WHEN $1 IS NULL THEN $2 WHEN $2 IS NULL THEN $1 ELSE $1 || '','' || $2 END';
CREATE FUNCTION testsql.gc_i(text, bigint) RETURNS text LANGUAGE sql IMMUTABLE
  AS 'SELECT testsql.gc_t($1, $2::text)';
CREATE AGGREGATE testsql.group_concat(text) (sfunc = testsql.gc_t, stype = text);
CREATE AGGREGATE testsql.group_concat(bigint) (sfunc = testsql.gc_i, stype = text);
CREATE FUNCTION testsql.gc_sep(text, text, text) RETURNS text LANGUAGE sql IMMUTABLE
  AS 'SELECT CASE WHEN $1 IS NULL THEN $2 WHEN $2 IS NULL THEN $1 ELSE $1 || $3 || $2 END';
CREATE AGGREGATE testsql.group_concat(text, text) (sfunc = testsql.gc_sep, stype = text);
CREATE FUNCTION testsql.json_extract(text, text) RETURNS text LANGUAGE sql IMMUTABLE
  AS 'SELECT $1::jsonb #>> string_to_array(substr($2, 3), ''.'')';
CREATE FUNCTION testsql.strftime(text, text) RETURNS bigint LANGUAGE sql STABLE
  AS 'SELECT extract(epoch FROM now())::bigint';
SQL
}

pg_sql() {
	PGOPTIONS="-c search_path=public,testsql" psql -X -q -At -h 127.0.0.1 -p "$PG_PORT" -U space \
		-d space -c "$1" | sed -e ':a' -e 's/\(^\|[|]\)t\([|]\|$\)/\11\2/;ta' -e ':b' -e 's/\(^\|[|]\)f\([|]\|$\)/\10\2/;tb'
}

pg_cleanup() {
	[ -n "$PGT" ] || return 0
	pg_stop_server 2>/dev/null
	rm -rf "$PGT"
	PGT=
}
