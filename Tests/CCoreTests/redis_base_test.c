/*
 * redis_base_test.c — the Redis floor (CCore/base/redis.c) against a real redis-server started for
 * the run (scripts/redis-fixture): store URLs parsed and refused, pipelines, AUTH and SELECT, the
 * reconnect after a restart, a server that is down or does not answer (COURIER_E_REDIS within the
 * timeout, never a hang), and the connection pool under threads. It calls the floor itself, so it
 * links the static library (CMakeLists.txt); built only with COURIER_REDIS.
 */
#include "harness.h"

#include "base/base.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <unistd.h>

static void test_url_parse(void) {
    cr_redis_url u;
    courier_error err;
    CHECK_EQ(cr_redis_url_parse("redis://127.0.0.1:6380/2", &u, &err), COURIER_OK);
    CHECK_STR(u.host, "127.0.0.1");
    CHECK_EQ(u.port, 6380);
    CHECK_EQ(u.db, 2);
    CHECK(!u.password && !u.user && !u.tls);
    cr_redis_url_free(&u);
    CHECK_EQ(cr_redis_url_parse("REDIS://:p%40ss@cache.example:7000", &u, &err), COURIER_OK);
    CHECK_STR(u.host, "cache.example");
    CHECK_STR(u.password, "p@ss");
    CHECK(!u.user);
    CHECK_EQ(u.db, 0);
    cr_redis_url_free(&u);
    CHECK_EQ(cr_redis_url_parse("redis://app:secret@[::1]/0?timeout_ms=250", &u, &err), COURIER_OK);
    CHECK_STR(u.host, "::1");
    CHECK_EQ(u.port, 6379);
    CHECK_STR(u.user, "app");
    CHECK_STR(u.password, "secret");
    CHECK_EQ(u.timeout_ms, 250);
    cr_redis_url_free(&u);
    CHECK_EQ(cr_redis_url_parse("redis://host/", &u, &err), COURIER_OK);
    cr_redis_url_free(&u);
    const char *bad[] = {"http://127.0.0.1:6379", "redis://", "redis://:pw@", "redis://h:0", "redis://h:65536",
                         "redis://h:6379x", "redis://h/db", "redis://h/1?nope=1", "redis://h/1?timeout_ms=0",
                         "redis://h:1/2/3", "redis://:%zz@h", "redis://[::1", "redis://h h"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = cr_redis_url_parse(bad[i], &u, &err);
        if (rc != COURIER_E_INVALID_ARGUMENT) th_fail(__FILE__, __LINE__, "%s: %d", bad[i], rc);
        CHECK(!u.host);
    }
    /* TLS: Debian's hiredis 0.14 has no hiredis_ssl */
    CHECK_EQ(cr_redis_url_parse("rediss://127.0.0.1:6380/0", &u, &err), COURIER_E_REDIS_UNSUPPORTED);
    CHECK_EQ(err.code, COURIER_E_REDIS_UNSUPPORTED);
    CHECK(cr_redis_is_url("Redis://x") && cr_redis_is_url("rediss://x") && !cr_redis_is_url("/tmp/redis://"));
    CHECK(cr_redis_available());
}

/* One command with string arguments; the reply (new) or NULL with *rc. */
static redisReply *cmd(cr_redis *r, int *rc, courier_error *err, int argc, const char **argv) {
    size_t lens[8];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    cr_redis_cmd c = {argc, argv, lens};
    redisReply *rep = NULL;
    *rc = cr_redis_run(r, &c, 1, &rep, 0, err);
    return rep;
}

static void test_pipeline_and_select(void) {
    const char *url = th_redis_url();
    REQUIRE(url);
    cr_redis *r0 = NULL, *r3 = NULL;
    courier_error err;
    REQUIRE(cr_redis_open(url, 2000, &r0, &err) == COURIER_OK);
    char url3[300];
    snprintf(url3, sizeof url3, "%.*s3", (int)strlen(url) - 1, url); /* ".../0" -> ".../3" */
    REQUIRE(cr_redis_open(url3, 2000, &r3, &err) == COURIER_OK);
    CHECK_EQ(cr_redis_db(r3), 3);
    const char *a1[] = {"SET", "k", "zero"}, *a2[] = {"GET", "k"}, *a3[] = {"SET", "k", "three"};
    size_t l1[] = {3, 1, 4}, l2[] = {3, 1};
    cr_redis_cmd cmds[2] = {{3, a1, l1}, {2, a2, l2}};
    redisReply *reps[2];
    CHECK_EQ(cr_redis_run(r0, cmds, 2, reps, 0, &err), COURIER_OK);
    CHECK(reps[0] && reps[0]->type == REDIS_REPLY_STATUS);
    CHECK(reps[1] && reps[1]->type == REDIS_REPLY_STRING && strcmp(reps[1]->str, "zero") == 0);
    cr_redis_replies_free(reps, 2);
    int rc;
    redisReply *rep = cmd(r3, &rc, &err, 3, a3);
    CHECK_EQ(rc, COURIER_OK);
    freeReplyObject(rep);
    rep = cmd(r0, &rc, &err, 2, a2);
    CHECK(rep && strcmp(rep->str, "zero") == 0); /* db 3 is another keyspace */
    freeReplyObject(rep);
    /* An error reply is a reply; cr_redis_reply_check maps it. */
    const char *a4[] = {"INCR", "k"};
    rep = cmd(r0, &rc, &err, 2, a4);
    CHECK_EQ(rc, COURIER_OK);
    CHECK_EQ(cr_redis_reply_check(rep, "INCR", &err), COURIER_E_REDIS);
    CHECK_CONTAINS(err.message, "INCR");
    freeReplyObject(rep);
    cr_redis_close(r0);
    cr_redis_close(r3);
}

static void test_auth(void) {
    const char *url = th_redis_url();
    REQUIRE(url);
    courier_error err;
    cr_redis *admin = NULL;
    REQUIRE(cr_redis_open(url, 2000, &admin, &err) == COURIER_OK);
    const char *set[] = {"CONFIG", "SET", "requirepass", "s3cret"};
    int rc;
    redisReply *rep = cmd(admin, &rc, &err, 4, set);
    REQUIRE(rc == COURIER_OK && rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    const char *port = strrchr(url, ':') + 1;
    char good[300], wrong[300];
    snprintf(good, sizeof good, "redis://:s3cret@127.0.0.1:%s", port);
    snprintf(wrong, sizeof wrong, "redis://:nope@127.0.0.1:%s", port);
    cr_redis *g = NULL, *w = NULL;
    REQUIRE(cr_redis_open(good, 2000, &g, &err) == COURIER_OK);
    REQUIRE(cr_redis_open(wrong, 2000, &w, &err) == COURIER_OK);
    const char *ping[] = {"PING"};
    rep = cmd(w, &rc, &err, 1, ping);
    CHECK_EQ(rc, COURIER_E_REDIS);
    CHECK(!rep);
    CHECK_CONTAINS(err.message, "AUTH");
    rep = cmd(g, &rc, &err, 1, ping);
    CHECK_EQ(rc, COURIER_OK);
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    const char *unset[] = {"CONFIG", "SET", "requirepass", ""};
    rep = cmd(g, &rc, &err, 4, unset);
    CHECK_EQ(rc, COURIER_OK);
    freeReplyObject(rep);
    cr_redis_close(admin); /* (its connection was made before the password: still authenticated) */
    cr_redis_close(g);
    cr_redis_close(w);
}

/* A restart of redis-server breaks every pooled connection: the next call reconnects once and
 * succeeds, its data still there (AOF). */
static void test_reconnect_after_restart(void) {
    const char *url = th_redis_url();
    REQUIRE(url);
    courier_error err;
    cr_redis *r = NULL;
    REQUIRE(cr_redis_open(url, 2000, &r, &err) == COURIER_OK);
    const char *set[] = {"SET", "kept", "yes"}, *get[] = {"GET", "kept"};
    int rc;
    redisReply *rep = cmd(r, &rc, &err, 3, set);
    CHECK_EQ(rc, COURIER_OK);
    freeReplyObject(rep);
    REQUIRE(th_redis_restart() == 0);
    rep = cmd(r, &rc, &err, 2, get);
    CHECK_EQ(rc, COURIER_OK);
    CHECK(rep && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, "yes") == 0);
    freeReplyObject(rep);
    cr_redis_close(r);
}

/* A port where nothing listens: COURIER_E_REDIS, and the next call fails at once (the backoff). */
static void test_down(void) {
    char url[100];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", th_free_port());
    courier_error err;
    cr_redis *r = NULL;
    REQUIRE(cr_redis_open(url, 2000, &r, &err) == COURIER_OK);
    const char *ping[] = {"PING"};
    int rc;
    redisReply *rep = cmd(r, &rc, &err, 1, ping);
    CHECK_EQ(rc, COURIER_E_REDIS);
    CHECK(!rep);
    CHECK_CONTAINS(err.message, "cannot connect");
    rep = cmd(r, &rc, &err, 1, ping);
    CHECK_EQ(rc, COURIER_E_REDIS);
    CHECK_CONTAINS(err.message, "unreachable");
    cr_redis_close(r);
}

/* A server that accepts the connection (the kernel's backlog) and never answers: the call fails
 * with COURIER_E_REDIS (os_error ETIMEDOUT) after the URL's timeout instead of hanging (ctest's
 * timeout would catch a hang). */
static void test_no_answer_times_out(void) {
    int port = 0;
    int fd = th_silent_listener(&port);
    REQUIRE(fd >= 0);
    char url[100];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0?timeout_ms=150", port);
    courier_error err;
    cr_redis *r = NULL;
    REQUIRE(cr_redis_open(url, 60000, &r, &err) == COURIER_OK);
    const char *ping[] = {"PING"};
    int rc;
    redisReply *rep = cmd(r, &rc, &err, 1, ping);
    CHECK_EQ(rc, COURIER_E_REDIS);
    CHECK_EQ(err.os_error, ETIMEDOUT);
    CHECK(!rep);
    cr_redis_close(r);
    close(fd);
}

static cr_redis *shared;

static void *incr_worker(void *arg) {
    (void)arg;
    const char *incr[] = {"INCR", "counter"};
    for (int i = 0; i < 200; i++) {
        int rc;
        courier_error err;
        redisReply *rep = cmd(shared, &rc, &err, 2, incr);
        if (rc != COURIER_OK) th_fail(__FILE__, __LINE__, "INCR: %s", err.message);
        if (rep) freeReplyObject(rep);
    }
    return NULL;
}

static void test_pool_threads(void) {
    const char *url = th_redis_url();
    REQUIRE(url);
    courier_error err;
    REQUIRE(cr_redis_open(url, 5000, &shared, &err) == COURIER_OK);
    const char *del[] = {"DEL", "counter"}, *get[] = {"GET", "counter"};
    int rc;
    freeReplyObject(cmd(shared, &rc, &err, 2, del));
    pthread_t t[6];
    for (int i = 0; i < 6; i++) pthread_create(&t[i], NULL, incr_worker, NULL);
    for (int i = 0; i < 6; i++) pthread_join(t[i], NULL);
    redisReply *rep = cmd(shared, &rc, &err, 2, get);
    CHECK(rep && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, "1200") == 0);
    if (rep) freeReplyObject(rep);
    cr_redis_close(shared);
    shared = NULL;
}

TESTS_MAIN(T(test_url_parse), T(test_pipeline_and_select), T(test_auth), T(test_reconnect_after_restart), T(test_down),
           T(test_no_answer_times_out), T(test_pool_threads))
