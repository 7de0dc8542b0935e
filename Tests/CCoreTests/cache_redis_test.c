/*
 * cache_redis_test.c — the cache on Redis (courier_config_set_cache_store with a redis:// URL)
 * against a real redis-server started for the run (scripts/redis-fixture): the setting's checks,
 * the key layout with its per-URL hash tag and the TTLs (read back with hiredis), Vary variants
 * sharing their URL's tag, the manager (size, list, remove since / expired / all, verify), Redis
 * down and Redis not answering (COURIER_E_REDIS from the manager within the timeout, the network
 * for a request), and engines on several threads sharing one server. The policies and the HTTP
 * rules run again on Redis as ctest cache_test_redis, cache_http_test_redis, rfc9111_test_redis;
 * two processes share one Redis cache in cache_redis_process_test.c.
 */
#include "harness.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static const char *url_now;

static void on_redis(courier_config *cfg) {
    courier_config_set_clock(cfg, th_clock, NULL, NULL);
    CHECK_EQ(courier_config_set_cache_store(cfg, url_now), COURIER_OK);
}

static courier_engine *engine_on(const char *url) {
    th_clock_set_offset_ms(0);
    url_now = url;
    return th_engine(on_redis);
}

/* The test's Redis, empty. */
static const char *fresh_redis(void) {
    const char *url = th_redis_url();
    if (url && th_redis_flush() != 0) return NULL;
    return url;
}

static redisContext *direct(const char *url) {
    redisContext *c = redisConnect("127.0.0.1", atoi(strrchr(url, ':') + 1));
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* The keys matching pattern, sorted, in a NULL-terminated array (free with free_keys). */
static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static char **keys_of(redisContext *c, const char *pattern, size_t *n) {
    redisReply *r = redisCommand(c, "KEYS %s", pattern);
    *n = r && r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
    char **out = calloc(*n + 1, sizeof *out);
    for (size_t i = 0; i < *n; i++) out[i] = strdup(r->element[i]->str);
    if (r) freeReplyObject(r);
    qsort(out, *n, sizeof *out, by_name);
    return out;
}
static void free_keys(char **k) {
    for (size_t i = 0; k && k[i]; i++) free(k[i]);
    free(k);
}
static long long pttl(redisContext *c, const char *key) {
    redisReply *r = redisCommand(c, "PTTL %s", key);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -9;
    if (r) freeReplyObject(r);
    return v;
}

static void test_setting_is_checked(void) {
    courier_config *cfg = NULL;
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_set_cache_store(NULL, "redis://127.0.0.1"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_cache_store(cfg, ""), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_cache_store(cfg, "redis://127.0.0.1:99999/0"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_cache_store(cfg, "redis://127.0.0.1/zero"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_cache_store(cfg, "redis://127.0.0.1/0?tls=1"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_cache_store(cfg, "rediss://127.0.0.1:6380/0"), COURIER_E_REDIS_UNSUPPORTED);
    CHECK_EQ(courier_config_set_cache_store(cfg, "redis://:pw@127.0.0.1:6380/3?timeout_ms=500"), COURIER_OK);
    CHECK_EQ(courier_config_set_cache_store(cfg, th_tmpdir()), COURIER_OK); /* a directory: LMDB */
    CHECK_EQ(courier_config_set_cache_store(cfg, NULL), COURIER_OK);
    courier_config_free(cfg);
    CHECK_STR(courier_strerror(COURIER_E_REDIS), courier_strerror(-54));
    CHECK(strstr(courier_strerror(COURIER_E_REDIS_UNSUPPORTED), "Redis") != NULL);
}

/* A directory as the cache store: LMDB there, not under the store directory. */
static void test_directory_store_is_lmdb(void) {
    const char *dir = th_tmpdir();
    url_now = dir;
    courier_engine *e = th_engine(on_redis);
    REQUIRE(e);
    CHECK_EQ(courier_cache_put_key(e, "k", 200, NULL, NULL, 0, "v", 1, 60000, NULL), COURIER_OK);
    char path[700];
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    CHECK(access(path, F_OK) == 0);
    courier_engine_close(e);
}

/* Entries under courier:cache:{T}:e:H with the TTL of their usable lifetime; the variants of a
 * URL and its Vary record share the URL's tag. */
static void test_keys_tags_and_ttls(void) {
    const char *url = fresh_redis();
    REQUIRE(url);
    redisContext *c = direct(url);
    REQUIRE(c);
    courier_engine *e = engine_on(url);
    REQUIRE(e);
    const char *names[] = {"ETag"}, *values[] = {"\"v1\""};
    CHECK_EQ(courier_cache_put_key(e, "GET http://example.test/a", 200, names, values, 1, "body", 4, 100000, NULL),
             COURIER_OK);
    size_t n;
    char **k = keys_of(c, "courier:cache:*", &n);
    CHECK_EQ(n, 1);
    if (n == 1) {
        CHECK(strncmp(k[0], "courier:cache:{", 15) == 0);
        CHECK(strstr(k[0], "}:e:") != NULL);
        /* a key of its own (no Vary): the tag is its own hash */
        CHECK(strncmp(k[0] + 15, strstr(k[0], "}:e:") + 4, 32) == 0);
        long long t = pttl(c, k[0]);
        CHECK(t > 90000 && t <= 100000);
    }
    free_keys(k);

    /* The HTTP policy with Vary: two variants and the record, one tag; the record lives as long as
     * the longest-lived variant (stale-while-revalidate counts: TTL = max-age + swr). */
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/headers?Cache-Control=max-age%3D30%2C%20stale-while-revalidate%3D70&Vary=Accept");
    courier_request_set_cache_policy(r, COURIER_CACHE_HTTP);
    courier_request_add_header(r, "Accept", "text/a");
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    courier_response_free(resp);
    courier_request_free(r);
    r = NULL;
    courier_request_new(&r, "GET", "/headers?Cache-Control=max-age%3D5&Vary=Accept");
    courier_request_set_cache_policy(r, COURIER_CACHE_HTTP);
    courier_request_add_header(r, "Accept", "text/b");
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    courier_response_free(resp);
    courier_request_free(r);
    k = keys_of(c, "courier:cache:*", &n);
    CHECK_EQ(n, 5); /* the put_key entry, and two URLs with a variant and a Vary record each */
    size_t records = 0;
    for (size_t i = 0; i < n; i++) {
        const char *end = strstr(k[i], "}:");
        REQUIRE(end);
        if (strcmp(end, "}:v") == 0) {
            records++;
            long long t = pttl(c, k[i]);
            CHECK(t > 0);
            /* each record shares its tag with an entry */
            size_t same = 0;
            for (size_t j = 0; j < n; j++)
                if (j != i && strncmp(k[j], k[i], (size_t)(end - k[i]) + 1) == 0) same++;
            CHECK_EQ(same, 1);
        }
    }
    CHECK_EQ(records, 2);
    free_keys(k);
    /* the first URL's variant: max-age 30 + swr 70 = 100 s */
    k = keys_of(c, "courier:cache:*:e:*", &n);
    long long longest = 0;
    for (size_t i = 0; i < n; i++) {
        long long t = pttl(c, k[i]);
        if (t > longest) longest = t;
    }
    CHECK(longest > 90000 && longest <= 100000);
    free_keys(k);
    courier_engine_close(e);
    redisFree(c);
}

/* The manager on Redis: size, list, verify, remove, remove since / expired / all. */
static void test_manager(void) {
    const char *url = fresh_redis();
    REQUIRE(url);
    courier_engine *e = engine_on(url);
    REQUIRE(e);
    for (int i = 0; i < 30; i++) {
        char key[32];
        snprintf(key, sizeof key, "item-%d", i);
        if (i == 20) th_clock_set_offset_ms(10 * 1000);
        CHECK_EQ(courier_cache_put_key(e, key, 200, NULL, NULL, 0, "0123456789", 10, (i < 10 ? 5 : 600) * 1000, NULL), COURIER_OK);
    }
    int64_t bytes = 0, count = 0;
    CHECK_EQ(courier_cache_size(&bytes, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 30);
    CHECK(bytes > 30 * 10);
    courier_cache_list *l = NULL;
    CHECK_EQ(courier_cache_list_entries(&l, e, NULL), COURIER_OK);
    CHECK_EQ(courier_cache_list_count(l), 30);
    courier_cache_entry_info info = {.size = sizeof info};
    CHECK_EQ(courier_cache_list_at(&info, l, 0), COURIER_OK);
    CHECK(strncmp(info.key, "item-", 5) == 0);
    CHECK_EQ(strlen(info.id), 32);
    courier_cache_list_free(l);
    courier_cache_verify_report rep = {.size = sizeof rep};
    CHECK_EQ(courier_cache_verify(&rep, e, NULL), COURIER_OK);
    CHECK_EQ(rep.entries, 30);
    CHECK_EQ(rep.problems, 0);
    CHECK_EQ(rep.total_bytes, bytes);

    courier_response *g = NULL;
    CHECK_EQ(courier_cache_get_key(&g, e, "item-25", 0, NULL), COURIER_OK);
    if (g) CHECK_STR((const char *)courier_response_body(g, NULL), "0123456789");
    courier_response_free(g);
    CHECK_EQ(courier_cache_remove_key(e, "item-25", NULL), COURIER_OK);
    CHECK_EQ(courier_cache_remove_key(e, "item-25", NULL), COURIER_E_NOT_FOUND);
    int has = 1;
    CHECK_EQ(courier_cache_has_key(&has, e, "item-25", NULL), COURIER_OK);
    CHECK_EQ(has, 0);

    /* items 20..29 were written 10 s later on the engine's clock */
    int64_t since = th_clock(NULL) - 1000, removed = 0;
    CHECK_EQ(courier_cache_remove_since(&removed, e, since, NULL), COURIER_OK);
    CHECK_EQ(removed, 9);
    /* items 0..9 expired 5 s after they were written: gone from the engine's point of view */
    th_clock_set_offset_ms(20 * 1000);
    CHECK_EQ(courier_cache_remove_expired(&removed, e, NULL), COURIER_OK);
    CHECK_EQ(removed, 10);
    CHECK_EQ(courier_cache_size(&bytes, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 10);
    CHECK_EQ(courier_cache_remove_all(&removed, e, NULL), COURIER_OK);
    CHECK_EQ(removed, 10);
    CHECK_EQ(courier_cache_size(&bytes, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 0);
    CHECK_EQ(bytes, 0);
    courier_engine_close(e);
}

/* A damaged value (written by something else) reads as a miss and verify counts it. */
static void test_damaged_value(void) {
    const char *url = fresh_redis();
    REQUIRE(url);
    courier_engine *e = engine_on(url);
    REQUIRE(e);
    CHECK_EQ(courier_cache_put_key(e, "victim", 200, NULL, NULL, 0, "payload!", 8, 60000, NULL), COURIER_OK);
    redisContext *c = direct(url);
    REQUIRE(c);
    size_t n;
    char **k = keys_of(c, "courier:cache:*:e:*", &n);
    REQUIRE(n == 1);
    redisReply *r = redisCommand(c, "SETRANGE %s 100 X", k[0]); /* inside the payload */
    if (r) freeReplyObject(r);
    free_keys(k);
    redisFree(c);
    courier_cache_verify_report rep = {.size = sizeof rep};
    courier_error err;
    CHECK_EQ(courier_cache_verify(&rep, e, &err), COURIER_E_CACHE_INCONSISTENT);
    CHECK_EQ(rep.damaged, 1);
    courier_engine_close(e);
}

/* Redis down: the manager says COURIER_E_REDIS, a request goes to the network as on a miss. */
static void test_redis_down(void) {
    char url[100];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0", th_free_port());
    courier_engine *e = engine_on(url);
    REQUIRE(e);
    courier_error err;
    courier_response *g = NULL;
    CHECK_EQ(courier_cache_get_key(&g, e, "k", 0, &err), COURIER_E_REDIS);
    CHECK_EQ(err.code, COURIER_E_REDIS);
    CHECK_EQ(courier_cache_put_key(e, "k", 200, NULL, NULL, 0, "v", 1, 60000, &err), COURIER_E_REDIS);
    int64_t bytes, count;
    CHECK_EQ(courier_cache_size(&bytes, &count, e, &err), COURIER_E_REDIS);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/cache?body=anyway");
    courier_request_set_cache_policy(r, COURIER_CACHE_CACHE_FIRST);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    if (resp) {
        CHECK_EQ(courier_response_cache_status(resp), COURIER_CACHE_STATUS_NETWORK);
        CHECK_STR((const char *)courier_response_body(resp, NULL), "anyway");
    }
    courier_response_free(resp);
    courier_request_free(r);
    courier_cache_stats st = {.size = sizeof st};
    courier_cache_get_stats(&st, e, NULL);
    CHECK(st.write_failures >= 1);
    courier_engine_close(e);
}

/* issue 28, trap 7: an engine opened while its cache's Redis is down opens (the cache store is
 * opened on first use and never waits for Redis), its requests get the network's answers, the
 * manager says COURIER_E_REDIS; once Redis is there the same engine's cache works. */
static void test_redis_comes_after_open(void) {
    const char *url = fresh_redis();
    REQUIRE(url);
    REQUIRE(th_redis_stop() == 0);
    courier_engine *e = engine_on(url);
    REQUIRE(e);
    courier_error err;
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/cache?body=before");
    courier_request_set_cache_policy(r, COURIER_CACHE_CACHE_FIRST);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    if (resp) CHECK_EQ(courier_response_cache_status(resp), COURIER_CACHE_STATUS_NETWORK);
    courier_response_free(resp);
    courier_request_free(r);
    int64_t count = -1;
    CHECK_EQ(courier_cache_size(NULL, &count, e, &err), COURIER_E_REDIS);
    REQUIRE(th_redis_restart() == 0);
    int64_t end = th_now_ms() + 30000;
    while (courier_cache_size(NULL, &count, e, NULL) != COURIER_OK && th_now_ms() < end) usleep(20000);
    CHECK_EQ(courier_cache_size(NULL, &count, e, NULL), COURIER_OK);
    CHECK_EQ(courier_cache_put_key(e, "k", 200, NULL, NULL, 0, "v", 1, 60000, &err), COURIER_OK);
    courier_response *g = NULL;
    CHECK_EQ(courier_cache_get_key(&g, e, "k", 0, &err), COURIER_OK);
    if (g) {
        size_t len = 0;
        const uint8_t *b = courier_response_body(g, &len);
        CHECK(len == 1 && b && b[0] == 'v');
    }
    courier_response_free(g);
    courier_engine_close(e);
}

/* A server that takes the connection and never answers: the manager fails with COURIER_E_REDIS
 * after the URL's timeout, a request still gets the network's answer (ctest's timeout catches a
 * hang). */
static void test_redis_not_answering(void) {
    int port = 0;
    int fd = th_silent_listener(&port);
    REQUIRE(fd >= 0);
    char url[100];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0?timeout_ms=200", port);
    courier_engine *e = engine_on(url);
    REQUIRE(e);
    courier_error err;
    int has = 0;
    CHECK_EQ(courier_cache_has_key(&has, e, "k", &err), COURIER_E_REDIS);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/cache?body=still");
    courier_request_set_cache_policy(r, COURIER_CACHE_CACHE_FIRST);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
    close(fd);
}

/* Engines used on several threads share one server (the connection pool under load; TSan in CI).
 * The engines open on this thread (the harness is not thread-safe), each is used by one thread. */
typedef struct hammer_arg {
    courier_engine *e;
    int id;
} hammer_arg;

static void *hammer(void *p) {
    hammer_arg *a = p;
    for (int i = 0; i < 100; i++) {
        char key[32];
        snprintf(key, sizeof key, "t%d-%d", a->id, i % 10);
        if (courier_cache_put_key(a->e, key, 200, NULL, NULL, 0, key, strlen(key), 60000, NULL) != COURIER_OK)
            th_fail(__FILE__, __LINE__, "put %s", key);
        courier_response *g = NULL;
        if (courier_cache_get_key(&g, a->e, key, 0, NULL) != COURIER_OK) th_fail(__FILE__, __LINE__, "get %s", key);
        else if (strcmp((const char *)courier_response_body(g, NULL), key) != 0) th_fail(__FILE__, __LINE__, "body %s", key);
        courier_response_free(g);
    }
    return NULL;
}

static void test_threads_share_one_server(void) {
    const char *url = fresh_redis();
    REQUIRE(url);
    hammer_arg args[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        args[i].id = i;
        args[i].e = engine_on(url);
        REQUIRE(args[i].e);
    }
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, hammer, &args[i]);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    int64_t count = 0;
    CHECK_EQ(courier_cache_size(NULL, &count, args[0].e, NULL), COURIER_OK);
    CHECK_EQ(count, 40);
    for (int i = 0; i < 4; i++) courier_engine_close(args[i].e);
}

TESTS_MAIN(T(test_setting_is_checked), T(test_directory_store_is_lmdb), T(test_keys_tags_and_ttls), T(test_manager),
           T(test_damaged_value), T(test_redis_down), T(test_redis_comes_after_open), T(test_redis_not_answering), T(test_threads_share_one_server))
