/*
 * journal_redis_reads_test.c — what a replay asks of Redis, counted by Redis itself (INFO
 * commandstats, no clock): on a Redis Cluster and on one server, a replay reads its records'
 * states and texts together (one HMGET for a turn's answers and for a pass, one pipeline of XRANGE
 * for the records a pass claims), never one HGET per answer or per claim. Before, each replayed
 * request cost two round trips of its own on the journal thread (HGET of its state when claimed,
 * with its text, and again when answered): 4 HGET per request by commandstats (2 of them the
 * removal script's own), and on a cluster, whose round trips cost more, replay ran at a fraction
 * of one server's speed (docs/design/redis-cluster.md, "Replay"). Each test also checks that every
 * request arrived once, with its key. Exit 77 (skipped) without redis-server.
 */
#include "harness.h"
#include "journal_recorder.h"

#include <hiredis/hiredis.h>
#include <strings.h>
#include <unistd.h>

#define N 300

static courier_engine *open_engine(const char *url, const char *base, int paused) {
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_store_dir(cfg, th_tmpdir());
    courier_config_set_frozen_store(cfg, url);
    if (base) courier_config_set_base_url(cfg, base);
    courier_config_set_frozen_poll_ms(cfg, 100);
    courier_config_set_frozen_replay(cfg, 8, 20, 200);
    courier_config_set_timeout_ms(cfg, 15000);
    if (paused) courier_config_set_frozen_paused(cfg, 1);
    courier_engine *e = NULL;
    courier_error err;
    if (courier_engine_open(&e, cfg, &err) != COURIER_OK) fprintf(stderr, "open: %s\n", err.message);
    courier_config_free(cfg);
    return e;
}

/* Runs `command` on every port of ports[0..n); with `stat`, the sum of that command's calls in
 * the INFO commandstats replies ("cmdstat_<stat>:calls="). */
static long long on_every_node(const int *ports, int n, const char *command, const char *stat) {
    long long calls = 0;
    char needle[64];
    snprintf(needle, sizeof needle, "cmdstat_%s:calls=", stat ? stat : "");
    for (int i = 0; i < n; i++) {
        redisContext *c = redisConnect("127.0.0.1", ports[i]);
        if (!c || c->err) {
            if (c) redisFree(c);
            continue;
        }
        redisReply *rep = redisCommand(c, command);
        const char *p = stat && rep && rep->type == REDIS_REPLY_STRING ? strstr(rep->str, needle) : NULL;
        if (p) calls += atoll(p + strlen(needle));
        if (rep) freeReplyObject(rep);
        redisFree(c);
    }
    return calls;
}

/* N requests frozen (unordered) into the journal at url, then replayed by another engine while the
 * Redis at ports counts commands: the HGET and XRANGE calls per replayed request. */
static void replay_counted(const char *url, const int *ports, int nports) {
    int port = jr_free_port();
    REQUIRE(port > 0);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    courier_engine *e = open_engine(url, base, 1);
    REQUIRE(e);
    CHECK_EQ(jr_freeze_all(e, "/r/%d", N, COURIER_FREEZE_UNORDERED, 1), N);
    jr_server srv;
    REQUIRE(jr_open(&srv, port) == 0);
    on_every_node(ports, nports, "CONFIG RESETSTAT", NULL);
    courier_engine *r = open_engine(url, NULL, 0);
    REQUIRE(r);
    int64_t left = -1, end = th_now_ms() + 60000;
    do {
        courier_frozen_wait_idle(r, 500);
        courier_frozen_count(&left, r, NULL);
    } while (left != 0 && th_now_ms() < end);
    CHECK_EQ(left, 0);
    long long hget = on_every_node(ports, nports, "INFO commandstats", "hget");
    long long xrange = on_every_node(ports, nports, "INFO commandstats", "xrange");
    long long hmget = on_every_node(ports, nports, "INFO commandstats", "hmget");
    courier_engine_close(r);
    jr_stop(&srv);
    fprintf(stderr, "  %d replayed: %lld HGET, %lld XRANGE, %lld HMGET\n", N, hget, xrange, hmget);
    /* The removal script's own two HGET per request (its host-queue and id records), and none
     * per answer or claim; one XRANGE per record at most (its text, in a pass's pipeline). */
    CHECK(hget <= 2 * N + N / 10);
    CHECK(xrange <= N + N / 10);
    CHECK(hmget >= 1);
    /* every request once, with its key */
    CHECK_EQ(jr_count(&srv), N);
    for (int i = 0; i < N; i++) {
        char path[32];
        snprintf(path, sizeof path, "/r/%d", i);
        CHECK_EQ(jr_path_count(&srv, path), 1);
    }
    for (size_t i = 0; i < jr_count(&srv); i++) CHECK_EQ(strlen(jr_get(&srv, i).key), 32);
    jr_free(&srv);
}

static void test_cluster_replay_reads_records_together(void) {
    const char *cluster = th_redis_cluster_url();
    REQUIRE(cluster);
    char url[400];
    snprintf(url, sizeof url, "%s#reads", cluster);
    int ports[6];
    for (int i = 0; i < 6; i++) ports[i] = th_redis_cluster_port(i);
    replay_counted(url, ports, 6);
}

static void test_one_server_replay_reads_records_together(void) {
    const char *one = th_redis_url();
    REQUIRE(one);
    char url[400];
    snprintf(url, sizeof url, "%s#reads", one);
    int port = atoi(strrchr(one, ':') + 1); /* redis://127.0.0.1:PORT/0 */
    replay_counted(url, &port, 1);
}

/* The record states a replay read, from Redis' own log of every command it ran (SLOWLOG with a
 * threshold of 0 µs): the fields of every HMGET of the journal's state hash. A logged command
 * keeps 32 of its arguments, the last saying "... (K more arguments)". */
static long long state_fields_read(int port) {
    redisContext *c = redisConnect("127.0.0.1", port);
    if (!c || c->err) {
        if (c) redisFree(c);
        return -1;
    }
    long long fields = 0;
    redisReply *rep = redisCommand(c, "SLOWLOG GET -1");
    for (size_t i = 0; rep && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++) {
        redisReply *e = rep->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 4 || e->element[3]->type != REDIS_REPLY_ARRAY) continue;
        redisReply *a = e->element[3];
        if (a->elements < 3 || strcasecmp(a->element[0]->str, "HMGET") != 0 || !strstr(a->element[1]->str, ":state"))
            continue;
        fields += (long long)a->elements - 2;
        const char *more = a->element[a->elements - 1]->str;
        if (strncmp(more, "... (", 5) == 0) fields += atoll(more + 5) - 1;
    }
    if (rep) freeReplyObject(rep);
    redisFree(c);
    return fields;
}

/* An ordered backlog: N_ORDERED requests to one host, one at a time on the wire, each pass finding
 * the rest waiting for the one before. Before, every pass read the state of every record the
 * engine held (N²/2 states for the replay: 1,000 per request at 2,000); now a pass reads no state
 * of a record it found waiting while its host's head is another record (their states are read
 * again once a second, R_WAITING_EVERY_MS): a count by Redis, not a clock. In order, each once. */
#define N_ORDERED 1500
static void test_one_server_ordered_backlog_reads_few_states(void) {
    const char *one = th_redis_url();
    REQUIRE(one);
    char url[400];
    snprintf(url, sizeof url, "%s#ordered", one);
    int rport = atoi(strrchr(one, ':') + 1);
    int port = jr_free_port();
    REQUIRE(port > 0);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    courier_engine *e = open_engine(url, base, 1);
    REQUIRE(e);
    CHECK_EQ(jr_freeze_all(e, "/o/%d", N_ORDERED, 0, 1), N_ORDERED);
    jr_server srv;
    REQUIRE(jr_open(&srv, port) == 0);
    on_every_node(&rport, 1, "CONFIG SET slowlog-max-len 1000000", NULL);
    on_every_node(&rport, 1, "CONFIG SET slowlog-log-slower-than 0", NULL);
    on_every_node(&rport, 1, "SLOWLOG RESET", NULL);
    courier_engine *r = open_engine(url, NULL, 0);
    REQUIRE(r);
    int64_t left = -1, end = th_now_ms() + 120000;
    do {
        courier_frozen_wait_idle(r, 500);
        courier_frozen_count(&left, r, NULL);
    } while (left != 0 && th_now_ms() < end);
    CHECK_EQ(left, 0);
    on_every_node(&rport, 1, "CONFIG SET slowlog-log-slower-than 10000", NULL);
    long long fields = state_fields_read(rport);
    on_every_node(&rport, 1, "SLOWLOG RESET", NULL);
    courier_engine_close(r);
    jr_stop(&srv);
    fprintf(stderr, "  %d ordered replayed: %lld states read (%.1f per request)\n", N_ORDERED, fields,
            (double)fields / N_ORDERED);
    CHECK(fields >= N_ORDERED);
    CHECK(fields <= (long long)N_ORDERED * N_ORDERED / 8);
    /* every request once, in order, with its key */
    CHECK_EQ(jr_count(&srv), N_ORDERED);
    for (size_t i = 0; i < jr_count(&srv); i++) {
        char path[32];
        snprintf(path, sizeof path, "/o/%zu", i);
        jr_hit h = jr_get(&srv, i);
        CHECK_STR(h.path, path);
        CHECK_EQ(strlen(h.key), 32);
    }
    jr_free(&srv);
}

static void skip_without_redis(void) {
    if (system("command -v redis-server >/dev/null 2>&1") != 0) {
        fprintf(stderr, "redis-server is not installed: skipped (scripts/setup installs it)\n");
        exit(77);
    }
}

TESTS_MAIN(T(skip_without_redis), T(test_cluster_replay_reads_records_together),
           T(test_one_server_replay_reads_records_together), T(test_one_server_ordered_backlog_reads_few_states))
