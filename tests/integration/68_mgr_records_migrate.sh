#!/bin/sh
# records.db carries its schema version (PRAGMA user_version) and is
# brought forward by ordered migrations when sbx-manager opens it: a file
# of the first schema (before the file had a version) and a file of the
# last unversioned schema (every column already there) both open, keep
# their rows and end at the current version; a file of a newer build is
# refused rather than read wrongly.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
CURRENT=5
BASE="sandbox TEXT PRIMARY KEY, generation INTEGER NOT NULL, worker TEXT NOT NULL,
 substrate TEXT NOT NULL, activation INTEGER NOT NULL, resident TEXT NOT NULL,
 state TEXT NOT NULL, epoch INTEGER NOT NULL, slot INTEGER NOT NULL,
 uid_base INTEGER NOT NULL, template TEXT NOT NULL, memory_mb INTEGER NOT NULL,
 pids INTEGER NOT NULL, cpu_percent INTEGER NOT NULL,
 bridge_pid INTEGER NOT NULL, bridge_uid INTEGER NOT NULL,
 bridge_start INTEGER NOT NULL, exe_dev INTEGER NOT NULL, exe_ino INTEGER NOT NULL,
 exe_hash TEXT NOT NULL, run_dir TEXT NOT NULL, layer_dir TEXT NOT NULL"
ROW="'sbx_old', 3, 'WID', 'jail', 2, 'inc_x', 'retired', 7, 0, 200000, 'host', 512, 256, 100,
 0, 0, 0, 0, 0, '', '/nonexistent/run', '/nonexistent/layer'"
COLS="sandbox, generation, worker, substrate, activation, resident, state, epoch, slot,
 uid_base, template, memory_mb, pids, cpu_percent, bridge_pid, bridge_uid, bridge_start,
 exe_dev, exe_ino, exe_hash, run_dir, layer_dir"

# old ID SQL: worker ID's data directory with a records.db made by SQL
old() {
	mkdir -p "$T/$1"; chmod 711 "$T/$1"
	sqlite3 "$T/$1/records.db" "$2"
	register_worker "$1"
}
NP=$(free_port)

# the first schema: no version, none of the later columns
old w1 "CREATE TABLE meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
CREATE TABLE records ($BASE);
INSERT INTO records ($COLS) VALUES ($(echo "$ROW" | sed s/WID/w1/));
INSERT INTO meta VALUES ('assign_rev', 41);"
is "a file of the first schema has no version" "$(wsql w1 'pragma user_version')" 0
check "sbx-manager opens it (the control plane is away)" start_mgr 1 w1 "$NP"
is "... migrated to the current version" "$(wsql w1 'pragma user_version')" $CURRENT
is "... the row kept, the new columns at their defaults" \
    "$(wsql w1 "select generation, activation, state, epoch, disk_mb, snapshot, serve_pid, serve_start from records where sandbox='sbx_old'")" \
    "3|2|retired|7|1024||0|0"
is "... the assignment revision kept" "$(wsql w1 "select v from meta where k='assign_rev'")" 41
check "... the migrations are logged" grep -q "migrated records.db to version $CURRENT" "$T/mgr_w1.log"
stop M1
check "opened again: nothing to migrate" start_mgr 1 w1 "$NP"
is "... still the current version" "$(wsql w1 'pragma user_version')" $CURRENT
stop M1

# the last schema before versions: every column there, user_version 0
old w2 "CREATE TABLE meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
CREATE TABLE records ($BASE, disk_mb INTEGER NOT NULL DEFAULT 1024,
 snapshot TEXT NOT NULL DEFAULT '', serve_pid INTEGER NOT NULL DEFAULT 0,
 serve_start INTEGER NOT NULL DEFAULT 0);
INSERT INTO records ($COLS, disk_mb, snapshot) VALUES ($(echo "$ROW" | sed s/WID/w2/), 2048, 'abc');"
check "a file of the last unversioned schema opens" start_mgr 2 w2 "$(free_port)"
is "... migrated to the current version" "$(wsql w2 'pragma user_version')" $CURRENT
is "... its columns kept as they were" \
    "$(wsql w2 "select disk_mb, snapshot from records where sandbox='sbx_old'")" "2048|abc"
stop M2

# a newer build's file
old w3 "CREATE TABLE meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL); PRAGMA user_version = 99;"
start_mgr 3 w3 "$(free_port)" >/dev/null 2>&1
check "a file of a newer schema is refused: sbx-manager exits" gone "$M3" 10
check "... saying why" grep -q "schema version 99 is newer" "$T/mgr_w3.log"
is "... and the file is left as it was" "$(wsql w3 'pragma user_version')" 99
done_testing
