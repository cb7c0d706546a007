// Benchmark workload: a mixed SQLite workload through the C API, to give profreport a trace of
// real code (about a thousand distinct functions) rather than of a few hand-written ones.
// Usage: sqlite_mix ROWS [THREADS [DIR]]. Each thread opens its own database file in DIR (default
// the current directory) and runs, on ROWS rows: inserts in transactions of 500, two index
// creations, range queries on the index, an ORDER BY that sorts, a GROUP BY, updates, deletes,
// ANALYZE and an integrity check. It prints one line of checksums (the same for the same
// arguments), so that a change to the build that changes the work shows.
// Built against the SQLite amalgamation that tools/bench/report_speed.py fetches at bench time.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite3.h"

struct Job {
    long rows;
    int index;
    const char* dir;
    int64_t checksum;
    int failed;
};

static void die(sqlite3* db, const char* what) {
    fprintf(stderr, "sqlite_mix: %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
    exit(1);
}

static void exec(sqlite3* db, const char* sql) {
    char* err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "sqlite_mix: %s: %s\n", sql, err ? err : "?");
        exit(1);
    }
}

static sqlite3_stmt* prepare(sqlite3* db, const char* sql) {
    sqlite3_stmt* st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die(db, sql);
    return st;
}

// Steps a statement to its end; returns the sum of its rows' first column (as an integer).
static int64_t drain(sqlite3* db, sqlite3_stmt* st) {
    int64_t sum = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) sum += sqlite3_column_int64(st, 0);
    if (rc != SQLITE_DONE) die(db, sqlite3_sql(st));
    sqlite3_reset(st);
    return sum;
}

// A deterministic pseudo-random sequence (xorshift), so that every run does the same work.
static uint64_t next(uint64_t* s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void run(struct Job* job) {
    char path[4096];
    snprintf(path, sizeof path, "%s/sqlite_mix.%d.db", job->dir, job->index);
    remove(path);
    sqlite3* db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK) die(db, path);
    exec(db, "PRAGMA synchronous=OFF; PRAGMA journal_mode=DELETE; PRAGMA cache_size=-8000;"
             "CREATE TABLE item(id INTEGER PRIMARY KEY, k INTEGER, name TEXT, val REAL, tag TEXT,"
             "                  payload BLOB);"
             "CREATE TABLE tag(name TEXT PRIMARY KEY, weight INTEGER) WITHOUT ROWID;");
    static const char* const kTags[] = {"red", "green", "blue", "cyan", "magenta", "yellow",
                                        "black", "white"};
    sqlite3_stmt* ins_tag = prepare(db, "INSERT INTO tag VALUES(?1, ?2)");
    for (int i = 0; i < 8; ++i) {
        sqlite3_bind_text(ins_tag, 1, kTags[i], -1, SQLITE_STATIC);
        sqlite3_bind_int(ins_tag, 2, i * 3 + 1);
        drain(db, ins_tag);
    }
    sqlite3_finalize(ins_tag);

    uint64_t seed = 0x9E3779B97F4A7C15ull + (uint64_t)job->index;
    int64_t sum = 0;
    const long rows = job->rows;

    // Inserts, 500 rows per transaction.
    sqlite3_stmt* ins = prepare(db, "INSERT INTO item(k, name, val, tag, payload) "
                                    "VALUES(?1, ?2, ?3, ?4, zeroblob(?5))");
    char name[64];
    for (long i = 0; i < rows; ++i) {
        if (i % 500 == 0) exec(db, "BEGIN");
        uint64_t r = next(&seed);
        snprintf(name, sizeof name, "n%08llx-%ld", (unsigned long long)(r >> 32), i);
        sqlite3_bind_int64(ins, 1, (sqlite3_int64)(r % (uint64_t)(rows * 4)));
        sqlite3_bind_text(ins, 2, name, -1, SQLITE_TRANSIENT);
        sqlite3_bind_double(ins, 3, (double)(r % 100000) / 7.0);
        sqlite3_bind_text(ins, 4, kTags[r % 8], -1, SQLITE_STATIC);
        sqlite3_bind_int(ins, 5, (int)(r % 64));
        drain(db, ins);
        if (i % 500 == 499 || i == rows - 1) exec(db, "COMMIT");
    }
    sqlite3_finalize(ins);

    exec(db, "CREATE INDEX item_k ON item(k); CREATE INDEX item_tag_val ON item(tag, val)");

    // Range queries on the index.
    sqlite3_stmt* range = prepare(db, "SELECT count(*) + CAST(sum(val) AS INTEGER) FROM item "
                                      "WHERE k BETWEEN ?1 AND ?2");
    for (long i = 0; i < rows / 20; ++i) {
        sqlite3_int64 lo = (sqlite3_int64)(next(&seed) % (uint64_t)(rows * 4));
        sqlite3_bind_int64(range, 1, lo);
        sqlite3_bind_int64(range, 2, lo + 40);
        sum += drain(db, range);
    }
    sqlite3_finalize(range);

    // A sort the indexes cannot give, a join with a group, string functions.
    sqlite3_stmt* sorted = prepare(db, "SELECT length(name) FROM item ORDER BY substr(name, 2, 6), "
                                       "val DESC");
    sum += drain(db, sorted);
    sqlite3_finalize(sorted);
    sqlite3_stmt* grouped = prepare(db, "SELECT count(*) * t.weight + CAST(avg(i.val) AS INTEGER) "
                                        "FROM item i JOIN tag t ON t.name = i.tag "
                                        "WHERE i.val > ?1 GROUP BY i.tag ORDER BY 1");
    for (int i = 0; i < 4; ++i) {
        sqlite3_bind_double(grouped, 1, i * 2000.0);
        sum += drain(db, grouped);
    }
    sqlite3_finalize(grouped);
    sqlite3_stmt* like = prepare(db, "SELECT count(*) FROM item WHERE name LIKE ?1 AND "
                                     "upper(tag) <> 'BLACK'");
    sqlite3_bind_text(like, 1, "n0%", -1, SQLITE_STATIC);
    sum += drain(db, like);
    sqlite3_finalize(like);

    // Updates through the index, in transactions of 100 statements.
    sqlite3_stmt* upd = prepare(db, "UPDATE item SET val = val * 1.01 + 1, name = name || 'u' "
                                    "WHERE k BETWEEN ?1 AND ?2");
    for (long i = 0; i < rows / 10; ++i) {
        if (i % 100 == 0) exec(db, "BEGIN");
        sqlite3_int64 lo = (sqlite3_int64)(next(&seed) % (uint64_t)(rows * 4));
        sqlite3_bind_int64(upd, 1, lo);
        sqlite3_bind_int64(upd, 2, lo + 8);
        drain(db, upd);
        sum += sqlite3_changes(db);
        if (i % 100 == 99 || i == rows / 10 - 1) exec(db, "COMMIT");
    }
    sqlite3_finalize(upd);

    exec(db, "BEGIN; DELETE FROM item WHERE id % 7 = 3; COMMIT; ANALYZE");
    sqlite3_stmt* total = prepare(db, "SELECT count(*) FROM item WHERE tag IN ('red', 'blue') "
                                      "AND val BETWEEN 100 AND 9000");
    sum += drain(db, total);
    sqlite3_finalize(total);
    sqlite3_stmt* check = prepare(db, "PRAGMA integrity_check");
    if (sqlite3_step(check) != SQLITE_ROW ||
        strcmp((const char*)sqlite3_column_text(check, 0), "ok") != 0)
        job->failed = 1;
    sqlite3_finalize(check);

    if (sqlite3_close(db) != SQLITE_OK) die(db, "close");
    remove(path);
    job->checksum = sum;
}

static void* thread_main(void* arg) {
    run((struct Job*)arg);
    return NULL;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: sqlite_mix ROWS [THREADS [DIR]]\n");
        return 2;
    }
    long rows = strtol(argv[1], NULL, 10);
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    const char* dir = argc > 3 ? argv[3] : ".";
    if (rows < 1 || threads < 1 || threads > 64) {
        fprintf(stderr, "sqlite_mix: ROWS must be >= 1 and THREADS in 1..64\n");
        return 2;
    }
    struct Job jobs[64];
    pthread_t ids[64];
    for (int t = 0; t < threads; ++t) {
        jobs[t] = (struct Job){rows, t, dir, 0, 0};
        // One thread runs on the main thread: a one-thread run has no extra thread stream.
        if (t > 0 && pthread_create(&ids[t], NULL, thread_main, &jobs[t]) != 0) {
            fprintf(stderr, "sqlite_mix: pthread_create failed\n");
            return 1;
        }
    }
    run(&jobs[0]);
    int failed = jobs[0].failed;
    printf("sqlite_mix: rows=%ld threads=%d checksums", rows, threads);
    for (int t = 0; t < threads; ++t) {
        if (t > 0) pthread_join(ids[t], NULL);
        failed |= jobs[t].failed;
        printf(" %lld", (long long)jobs[t].checksum);
    }
    printf("\n");
    if (failed) fprintf(stderr, "sqlite_mix: integrity check failed\n");
    return failed ? 1 : 0;
}
