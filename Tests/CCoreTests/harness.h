/*
 * harness.h — the C tests' small framework: checks that record failures and go on, a runner that
 * prints "N passed, M failed", the loopback test server, and temporary directories.
 */
#ifndef COURIER_TEST_HARNESS_H
#define COURIER_TEST_HARNESS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "courier.h"
#include "courier_test_server.h"

typedef struct th_test {
    const char *name;
    void (*fn)(void);
} th_test;

void th_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int th_run(int argc, char **argv, const th_test *tests, size_t n);

#define CHECK(cond) \
    do { if (!(cond)) th_fail(__FILE__, __LINE__, "CHECK(%s)", #cond); } while (0)
#define CHECK_EQ(a, b)                                                                                   \
    do {                                                                                                 \
        long long th_a_ = (long long)(a), th_b_ = (long long)(b);                                        \
        if (th_a_ != th_b_) th_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, th_a_, th_b_); \
    } while (0)
#define CHECK_STR(a, b)                                                                                    \
    do {                                                                                                   \
        const char *th_a_ = (a), *th_b_ = (b);                                                             \
        if (!th_a_ || !th_b_ || strcmp(th_a_, th_b_) != 0)                                                 \
            th_fail(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b, th_a_ ? th_a_ : "(null)",    \
                    th_b_ ? th_b_ : "(null)");                                                             \
    } while (0)
#define CHECK_CONTAINS(hay, needle)                                                                       \
    do {                                                                                                  \
        const char *th_h_ = (const char *)(hay), *th_n_ = (needle);                                       \
        if (!th_h_ || !strstr(th_h_, th_n_))                                                              \
            th_fail(__FILE__, __LINE__, "%s contains \"%s\": got \"%.300s\"", #hay, th_n_, th_h_ ? th_h_ : "(null)"); \
    } while (0)
/* Stops the current test when a precondition fails (the rest would only crash). */
#define REQUIRE(cond)                                                             \
    do {                                                                          \
        if (!(cond)) {                                                            \
            th_fail(__FILE__, __LINE__, "REQUIRE(%s)", #cond);                    \
            return;                                                               \
        }                                                                         \
    } while (0)

#define TESTS_MAIN(...)                                                          \
    int main(int argc, char **argv) {                                           \
        static const th_test th_tests_[] = {__VA_ARGS__};                        \
        return th_run(argc, argv, th_tests_, sizeof th_tests_ / sizeof th_tests_[0]); \
    }
#define T(fn) {#fn, fn}

/* The process's loopback test server, started on first use, stopped at exit. */
cts_server *th_server(void);
/* Waits up to 10 s until the server has parsed `n` requests for `path` (counted since it started);
 * returns the count. The event a test waits for instead of sleeping ("it is on the wire"). */
long th_wait_path(const char *path, long n);
/* "http://127.0.0.1:PORT" + path, in a static rotating buffer (valid for the next 7 calls). */
const char *th_url(const char *path);
/* "http://127.0.0.1:PORT" */
const char *th_base(void);
/* A new empty temporary directory, removed with its contents at exit. Never NULL. */
const char *th_tmpdir(void);
/* The bytes of the pages an LMDB data file uses, from its newer meta page (the file may be longer:
 * the library pads it past them), and its page size; -1 when it is not an LMDB file. */
long th_lmdb_used_bytes(const char *data_mdb, long *psize);
/* Overwrites the last `pages` pages in use of an LMDB data file (its roots among them) with junk
 * that LMDB takes for leaves whose nodes lie 64 KiB past the page: past the end of the file when
 * it ends there. 0, or -1. */
int th_junk_last_pages(const char *data_mdb, int pages);
/* Overwrites n bytes of a file from `start`: zeros when seed is 0, else junk from the seed (the
 * same junk for the same seed). 0, or -1. */
int th_junk_bytes(const char *path, long start, long n, unsigned seed);
/* Junk over an eighth of a store's pages in use at each of its eight places, two seeds each:
 * make(data, cap) makes a filled store and writes its data file's path into data (NULL: skip the
 * test), use(dir) uses the damaged store in a child process and returns the child's status, which
 * must be 0 (a failure names the eighth and the seed). */
void th_junk_each_eighth(const char *(*make)(char *data, size_t cap), int (*use)(const char *dir));
/* What th_lmdb_damage_leaves does to every leaf page LMDB wrote in the pages in use of a data file
 * (old copies in free pages among them): its last node made to start where its first one does
 * (two nodes overlapping, bounds and header intact), or its header marked "dirty" (LMDB then
 * writes into the page in place, in its read-only map). */
typedef enum th_leaf_damage { TH_NODES_OVERLAP, TH_MARKED_DIRTY } th_leaf_damage;
/* The number of pages damaged, or -1. */
int th_lmdb_damage_leaves(const char *data_mdb, th_leaf_damage how);
/* Opens an engine whose base URL is the test server's; extra settings may be applied to cfg
   through `tweak` (may be NULL). Fails the test (returns NULL) when it cannot open. */
courier_engine *th_engine(void (*tweak)(courier_config *cfg));
/* A loopback TCP port that was free a moment ago: bound, never listened on, closed. Nothing answers
 * there (a "cannot connect" target) until someone binds it. */
int th_free_port(void);
/* A loopback socket that listens and never accepts or answers (the kernel's backlog takes the
 * connections): a server that hangs, for timeout tests. Returns its fd (close it) and its port
 * in *port; -1 on failure. */
int th_silent_listener(int *port);
/* Whether a TCP connect to 127.0.0.1:port succeeds now (a spawned server is up). */
int th_can_connect(int port);
/* Milliseconds from a monotonic clock. */
int64_t th_now_ms(void);
/* With `m` held: waits on `c` until *count >= n, or a generous 30 s bound (not an assertion on time:
 * the caller checks the count it gets back); returns *count, `m` still held. For the completions a
 * test counts under its own lock. */
int th_wait_count(pthread_cond_t *c, pthread_mutex_t *m, const int *count, int n);
/* A courier_clock_fn for the cache's tests: CLOCK_REALTIME in milliseconds plus an offset the test
 * moves with th_clock_set_offset_ms (expiry without sleeping). Any thread. */
int64_t th_clock(void *user);
void th_clock_set_offset_ms(int64_t ms);
/* A courier_customize_fn that sends the request to the URL last given to th_redirect_to (the cache
 * key stays the request's own); NULL restores the request's URL. `url` is copied. */
int th_redirect_customize(courier_outgoing *o, void *user);
void th_redirect_to(const char *url);

/* nginx over TLS, serving the world scripts/tls-fixture makes in a new temporary directory (its CA
 * ca.pem, a certificate for localhost, "/", "/mtls", "/1k.bin", "/status", connections.log) on a
 * free port of 127.0.0.1; with h2 1 it offers HTTP/2 by ALPN too; with h2 2 it speaks clear-text
 * HTTP/2 with prior knowledge only (h2c: no TLS). Stopped at exit (at most 4).
 * Returns 0 with *out filled, 77 when nginx is not installed, 1 when it did not start. */
typedef struct th_nginx {
    char dir[600];
    int port;
} th_nginx;
int th_tls_nginx(th_nginx *out, int h2);
/* "DIR/name" of a th_nginx, in a static rotating buffer (valid for the next 7 calls). */
const char *th_nginx_file(const th_nginx *n, const char *name);

/* Redis for the tests of the Redis stores: a redis-server of the test process's own, started on
 * first use by scripts/redis-fixture (a free loopback port, a temporary directory, AOF with
 * appendfsync always) and stopped at exit (by the process that started it, not a forked child).
 * Without redis-server the fixture fails and so does the test, saying why (scripts/setup installs
 * it). th_redis_url: "redis://127.0.0.1:PORT/0" (static), NULL when it could not start (the test
 * has failed). */
const char *th_redis_url(void);
/* Stops / restarts (same port, same files) the test's redis-server: 0 on success. */
int th_redis_stop(void);
int th_redis_restart(void);
/* Empties the test's Redis database (FLUSHDB): 0 on success. With COURIER_TEST_CACHE_REDIS set in
 * the environment, th_engine does it and puts the engine's cache there (the cache tests run again
 * on Redis: CMakeLists.txt). */
int th_redis_flush(void);
/* Kills the test's redis-server with SIGKILL (no shutdown: only what its append-only file holds
 * survives) and waits for it to go; th_redis_restart starts it again on its files. 0 on success. */
int th_redis_kill(void);
/* Runs one command on the test's Redis (words split at spaces, as redis-cli takes them): 0 unless
 * it failed or Redis answered an error; *out (NULL allowed): an integer reply, or the number of
 * elements of an array reply (else 0). */
int th_redis_command(const char *command, long long *out);
/* A Redis Cluster of the test process's own (scripts/redis-fixture cluster: 3 masters with a
 * replica each, node-timeout 1 s), started on first use in a temporary directory and stopped at
 * exit by the process that started it. th_redis_cluster_url: "redis+cluster://127.0.0.1:P0,...,/"
 * (static), NULL when it could not start (failed, saying why). With COURIER_TEST_CACHE_REDIS=cluster
 * th_engine puts the cache there (emptied first). */
const char *th_redis_cluster_url(void);
/* The port of node i (0..5; 0-2 began as masters, 3-5 as replicas), 0 when unknown. */
int th_redis_cluster_port(int i);
/* The cluster's directory (scripts/redis-fixture cluster's DIR: node0..node5), NULL before it started. */
const char *th_redis_cluster_dir(void);
/* scripts/redis-fixture VERB (kill, restart, stop, pause, resume) on node i alone: 0 on success. */
int th_redis_cluster_node(int i, const char *verb);
/* FLUSHALL on every master: 0 on success. */
int th_redis_cluster_flush(void);
/* Whether the library under test has Redis stores (CMake's COURIER_REDIS found hiredis). */
int th_redis_built(void);

#endif
