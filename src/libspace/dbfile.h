/* The files of an SQLite database that holds credentials or records are
 * the owner's alone. */
#ifndef SPACE_DBFILE_H
#define SPACE_DBFILE_H

/* Call before sqlite3_open_v2(path): path exists with mode 0600 (created
 * so when missing, narrowed and logged when wider), and so do path-wal and
 * path-shm when they exist. SQLite gives the -wal and -shm files it
 * creates the mode of the database file, so they follow. 0 or -errno. */
int db_file_private(const char *path);
#endif
