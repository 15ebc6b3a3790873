/* sqlite-query DB SQL: opens a database file and runs the statements of SQL, printing result
 * rows as the sqlite3 shell does (columns separated by '|'). The start-up of a command-line
 * query, `sqlite3 DB SQL`, for scripts/order-eval: the libsqlite3-sys crate ships no shell.c.
 * Exit codes: 0 success, 1 an SQL error (printed), 2 bad usage. */
#include <stdio.h>

#include "sqlite3.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s DB SQL\n", argv[0]);
    return 2;
  }
  sqlite3 *db;
  if (sqlite3_open(argv[1], &db) != SQLITE_OK) {
    fprintf(stderr, "sqlite-query: %s: %s\n", argv[1], sqlite3_errmsg(db));
    return 1;
  }
  const char *sql = argv[2];
  while (*sql) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, &sql) != SQLITE_OK) {
      fprintf(stderr, "sqlite-query: %s\n", sqlite3_errmsg(db));
      return 1;
    }
    if (st == NULL) /* whitespace or a comment */
      continue;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(st); i++) {
        const unsigned char *t = sqlite3_column_text(st, i);
        printf("%s%s", i ? "|" : "", t ? (const char *)t : "");
      }
      putchar('\n');
    }
    if (rc != SQLITE_DONE) {
      fprintf(stderr, "sqlite-query: %s\n", sqlite3_errmsg(db));
      return 1;
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return 0;
}
