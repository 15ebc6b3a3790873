/* A deterministic SQLite workload for profgen's A/B runs, linked with the amalgamation from the
 * libsqlite3-sys crate: an in-memory database, bulk inserts through prepared statements,
 * indexes, joins, aggregates, LIKE scans, ORDER BY, correlated subqueries, updates, deletes and
 * a full-text search. usage: sqlite-bench [SIZE]; the work grows linearly with SIZE. Prints a
 * checksum of every query result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite3.h"

static sqlite3 *db;
static unsigned long long checksum;
static unsigned rng = 12345;

static unsigned next_rand(void) {
  rng = rng * 1103515245u + 12345u;
  return (rng >> 8) & 0xffffff;
}

static void fail(const char *what) {
  fprintf(stderr, "sqlite-bench: %s: %s\n", what, sqlite3_errmsg(db));
  exit(1);
}

static void exec(const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "sqlite-bench: %s: %s\n", sql, err);
    exit(1);
  }
}

/* Runs a query and folds every column of every row into the checksum. */
static void query(const char *sql) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) fail(sql);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    for (int i = 0; i < sqlite3_column_count(st); i++) {
      const unsigned char *t = sqlite3_column_text(st, i);
      for (; t && *t; t++) checksum = checksum * 31 + *t;
    }
  }
  if (rc != SQLITE_DONE) fail(sql);
  sqlite3_finalize(st);
}

static const char *words[] = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
                              "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"};

static void fill(int rows) {
  sqlite3_stmt *c, *o, *d;
  if (sqlite3_prepare_v2(db, "INSERT INTO customer VALUES (?1, ?2, ?3, ?4)", -1, &c, NULL)) fail("prepare");
  if (sqlite3_prepare_v2(db, "INSERT INTO orders VALUES (?1, ?2, ?3, ?4, ?5)", -1, &o, NULL)) fail("prepare");
  if (sqlite3_prepare_v2(db, "INSERT INTO doc VALUES (?1, ?2)", -1, &d, NULL)) fail("prepare");
  exec("BEGIN");
  char buf[256];
  int customers = rows / 8 + 1;
  for (int i = 0; i < customers; i++) {
    snprintf(buf, sizeof buf, "%s %s %u", words[next_rand() % 16], words[next_rand() % 16], next_rand() % 1000);
    sqlite3_bind_int(c, 1, i);
    sqlite3_bind_text(c, 2, buf, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(c, 3, words[next_rand() % 16], -1, SQLITE_STATIC);
    sqlite3_bind_int(c, 4, (int)(next_rand() % 100));
    if (sqlite3_step(c) != SQLITE_DONE) fail("insert customer");
    sqlite3_reset(c);
  }
  for (int i = 0; i < rows; i++) {
    sqlite3_bind_int(o, 1, i);
    sqlite3_bind_int(o, 2, (int)(next_rand() % customers));
    sqlite3_bind_double(o, 3, (next_rand() % 100000) / 100.0);
    sqlite3_bind_int(o, 4, (int)(next_rand() % 365));
    sqlite3_bind_text(o, 5, words[next_rand() % 16], -1, SQLITE_STATIC);
    if (sqlite3_step(o) != SQLITE_DONE) fail("insert order");
    sqlite3_reset(o);
    if (i % 4 == 0) {
      int n = 0;
      for (int w = 0; w < 12; w++) n += snprintf(buf + n, sizeof buf - n, "%s ", words[next_rand() % 16]);
      sqlite3_bind_int(d, 1, i);
      sqlite3_bind_text(d, 2, buf, n, SQLITE_TRANSIENT);
      if (sqlite3_step(d) != SQLITE_DONE) fail("insert doc");
      sqlite3_reset(d);
    }
  }
  exec("COMMIT");
  sqlite3_finalize(c);
  sqlite3_finalize(o);
  sqlite3_finalize(d);
}

int main(int argc, char **argv) {
  int size = argc > 1 ? atoi(argv[1]) : 30;
  if (size <= 0) {
    fprintf(stderr, "usage: %s [SIZE > 0]\n", argv[0]);
    return 2;
  }
  for (int round = 0; round < size; round++) {
    if (sqlite3_open(":memory:", &db) != SQLITE_OK) fail("open");
    exec("CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT, city TEXT, tier INT);"
         "CREATE TABLE orders(id INTEGER PRIMARY KEY, cust INT, amount REAL, day INT, tag TEXT);"
         "CREATE VIRTUAL TABLE doc USING fts5(id UNINDEXED, body);");
    fill(4000);
    exec("CREATE INDEX orders_cust ON orders(cust); CREATE INDEX orders_day ON orders(day, amount);"
         "ANALYZE;");
    query("SELECT c.city, count(*), sum(o.amount), avg(o.amount) FROM orders o JOIN customer c ON c.id = o.cust "
          "GROUP BY c.city ORDER BY 3 DESC");
    query("SELECT day, max(amount), min(amount) FROM orders WHERE day BETWEEN 100 AND 200 GROUP BY day");
    query("SELECT name FROM customer WHERE name LIKE '%ta%o%' ORDER BY tier, name LIMIT 50");
    query("SELECT c.name, (SELECT sum(amount) FROM orders o WHERE o.cust = c.id) AS total FROM customer c "
          "WHERE c.tier < 20 ORDER BY total DESC LIMIT 20");
    query("SELECT tag, count(DISTINCT cust), group_concat(DISTINCT day % 7) FROM orders GROUP BY tag");
    query("SELECT id, upper(substr(tag, 1, 3)) || printf('%08.2f', amount) FROM orders ORDER BY amount DESC, id "
          "LIMIT 200");
    query("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 500) "
          "SELECT sum(x * x % 97), count(*) FROM n JOIN customer ON customer.id = n.x");
    query("SELECT count(*), sum(length(body)) FROM doc WHERE doc MATCH 'alpha AND (kilo OR papa)'");
    exec("UPDATE orders SET amount = amount * 1.1 WHERE day % 5 = 0");
    exec("DELETE FROM orders WHERE amount > 900");
    query("SELECT count(*), total(amount) FROM orders");
    sqlite3_close(db);
  }
  printf("sqlite bench size %d checksum %llu\n", size, checksum);
  return 0;
}
