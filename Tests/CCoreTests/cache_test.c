/*
 * cache_test.c — cache policies in the send path and cache keys, against the loopback server:
 * cache-first answers without the network (proved with the server's per-path counters),
 * write-only, no-cache, validators and failures never cached, per-request and default expiry on
 * an injected clock, keys (canonical parameter order, filters, sensitive data, per-request base
 * URL, the query string, the request's own key), user-defined policies, the manager by request.
 */
#include "harness.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static _Atomic int64_t clock_offset_ms;
static int64_t test_clock(void *user) {
    (void)user;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + atomic_load(&clock_offset_ms);
}

static void tweak(courier_config *cfg) {
    courier_config_set_store_dir(cfg, th_tmpdir());
    courier_config_set_clock(cfg, test_clock, NULL, NULL);
}

static courier_request *req(const char *method, const char *target, int policy) {
    courier_request *r = NULL;
    if (courier_request_new(&r, method, target) != COURIER_OK) return NULL;
    courier_request_set_cache_policy(r, policy);
    return r;
}

static long hits_of(const char *path) { return cts_server_path_count(th_server(), path); }

/* Sends and returns the response (new) or NULL; *code gets the code. */
static courier_response *send(courier_engine *e, courier_request *r, int *code) {
    courier_response *resp = NULL;
    courier_error err;
    int rc = courier_send_sync(&resp, e, r, &err);
    if (code) *code = rc;
    return resp;
}

static void test_cache_first_answers_without_network(void) {
    courier_engine *e = th_engine(tweak);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_request *r = req("GET", "/cache?body=hello", COURIER_CACHE_CACHE_FIRST);
    int code = 0;
    courier_response *a = send(e, r, &code);
    CHECK_EQ(code, COURIER_OK);
    REQUIRE(a);
    CHECK_EQ(courier_response_from_cache(a), 0);
    CHECK_EQ(courier_response_cache_status(a), COURIER_CACHE_STATUS_NETWORK);
    courier_response_free(a);
    CHECK_EQ(hits_of("/cache"), 1);

    courier_response *b = send(e, r, &code);
    CHECK_EQ(code, COURIER_OK);
    REQUIRE(b);
    CHECK_EQ(courier_response_from_cache(b), 1);
    CHECK_EQ(courier_response_cache_status(b), COURIER_CACHE_STATUS_HIT);
    CHECK_STR((const char *)courier_response_body(b, NULL), "hello");
    CHECK_EQ(courier_response_status(b), 200);
    CHECK_STR(courier_response_header(b, "Content-Type"), "text/plain");
    CHECK(courier_response_request_id(b) != 0);
    CHECK_CONTAINS(courier_response_url(b), "/cache?body=hello");
    courier_response_free(b);
    CHECK_EQ(hits_of("/cache"), 1); /* no network for the hit */

    courier_cache_stats st = {.size = sizeof st};
    CHECK_EQ(courier_cache_get_stats(&st, e, NULL), COURIER_OK);
    CHECK_EQ(st.hits, 1);
    CHECK_EQ(st.misses, 1);
    CHECK_EQ(st.writes, 1);
    CHECK_EQ(st.count, 1);

    /* The manager sees it by request. */
    int has = 0;
    CHECK_EQ(courier_cache_has(&has, e, r, NULL), COURIER_OK);
    CHECK_EQ(has, 1);
    courier_response *g = NULL;
    CHECK_EQ(courier_cache_get(&g, e, r, 0, NULL), COURIER_OK);
    if (g) CHECK_STR((const char *)courier_response_body(g, NULL), "hello");
    courier_response_free(g);
    CHECK_EQ(courier_cache_remove(e, r, NULL), COURIER_OK);
    CHECK_EQ(courier_cache_has(&has, e, r, NULL), COURIER_OK);
    CHECK_EQ(has, 0);
    CHECK_EQ(courier_cache_remove(e, r, NULL), COURIER_E_NOT_FOUND);
    courier_request_free(r);
    courier_engine_close(e);
}

typedef struct async_box {
    _Atomic int done;
    int code;
    int from_cache;
} async_box;

static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)err;
    async_box *b = user;
    b->code = code;
    b->from_cache = courier_response_from_cache(resp);
    courier_response_free(resp);
    atomic_store(&b->done, 1);
}

static void test_hit_completes_asynchronously_once(void) {
    courier_engine *e = th_engine(tweak);
    REQUIRE(e);
    courier_request *r = req("GET", "/cache?body=async", COURIER_CACHE_CACHE_FIRST);
    int code;
    courier_response_free(send(e, r, &code));
    async_box boxes[20];
    memset(boxes, 0, sizeof boxes);
    for (int i = 0; i < 20; i++) CHECK_EQ(courier_send(NULL, e, r, on_done, &boxes[i], NULL), COURIER_OK);
    int64_t until = th_now_ms() + 10000;
    for (int i = 0; i < 20; i++)
        while (!atomic_load(&boxes[i].done) && th_now_ms() < until) usleep(1000);
    for (int i = 0; i < 20; i++) {
        CHECK_EQ(atomic_load(&boxes[i].done), 1);
        CHECK_EQ(boxes[i].code, COURIER_OK);
        CHECK_EQ(boxes[i].from_cache, 1);
    }
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_write_only_then_cache_first(void) {
    courier_engine *e = th_engine(tweak);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_request *w = req("GET", "/cache?body=fresh", COURIER_CACHE_WRITE_ONLY);
    int code;
    courier_response *a = send(e, w, &code);
    CHECK_EQ(code, COURIER_OK);
    CHECK_EQ(courier_response_from_cache(a), 0);
    courier_response_free(a);
    a = send(e, w, &code); /* write-only never reads */
    CHECK_EQ(courier_response_from_cache(a), 0);
    courier_response_free(a);
    CHECK_EQ(hits_of("/cache"), 2);
    courier_request *c = req("GET", "/cache?body=fresh", COURIER_CACHE_CACHE_FIRST);
    a = send(e, c, &code);
    CHECK_EQ(courier_response_from_cache(a), 1);
    courier_response_free(a);
    CHECK_EQ(hits_of("/cache"), 2);
    courier_request_free(w);
    courier_request_free(c);
    courier_engine_close(e);
}

static void test_no_cache_neither_reads_nor_writes(void) {
    courier_engine *e = th_engine(tweak);
    REQUIRE(e);
    courier_request *n = req("GET", "/cache?body=nc", COURIER_CACHE_NO_CACHE);
    int code;
    courier_response_free(send(e, n, &code));
    CHECK_EQ(code, COURIER_OK);
    int has = 1;
    CHECK_EQ(courier_cache_has(&has, e, n, NULL), COURIER_OK);
    CHECK_EQ(has, 0);
    /* The request's default is the engine's (no-cache unless configured). */
    courier_request *d = NULL;
    courier_request_new(&d, "GET", "/cache?body=nc");
    courier_response_free(send(e, d, &code));
    CHECK_EQ(courier_cache_has(&has, e, d, NULL), COURIER_OK);
    CHECK_EQ(has, 0);
    courier_request_free(n);
    courier_request_free(d);
    courier_engine_close(e);
}

static void default_policy(courier_config *cfg) {
    tweak(cfg);
    courier_config_set_cache_policy(cfg, COURIER_CACHE_CACHE_FIRST);
    courier_config_set_cache_expiry_ms(cfg, 30000);
}

static void test_engine_default_policy_and_expiry(void) {
    atomic_store(&clock_offset_ms, 0);
    courier_engine *e = th_engine(default_policy);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/cache?body=dflt");
    int code;
    courier_response_free(send(e, r, &code));
    courier_response *b = send(e, r, &code);
    CHECK_EQ(courier_response_from_cache(b), 1);
    CHECK(courier_response_cache_expires(b) - courier_response_cache_created(b) == 30 * 1000);
    courier_response_free(b);
    atomic_store(&clock_offset_ms, 31 * 1000);
    b = send(e, r, &code);
    CHECK_EQ(courier_response_from_cache(b), 0);
    courier_response_free(b);
    CHECK_EQ(hits_of("/cache"), 2);
    atomic_store(&clock_offset_ms, 0);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_request_expiry_on_the_clock(void) {
    atomic_store(&clock_offset_ms, 0);
    courier_engine *e = th_engine(tweak);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_request *r = req("GET", "/cache?body=exp", COURIER_CACHE_CACHE_FIRST);
    courier_request_set_cache_expiry_ms(r, 10000);
    int code;
    courier_response_free(send(e, r, &code));
    atomic_store(&clock_offset_ms, 9 * 1000);
    courier_response *b = send(e, r, &code);
    CHECK_EQ(courier_response_from_cache(b), 1);
    CHECK_EQ(courier_response_age_ms(b), 9000);
    courier_response_free(b);
    atomic_store(&clock_offset_ms, 11 * 1000);
    b = send(e, r, &code);
    CHECK_EQ(courier_response_from_cache(b), 0); /* expired: the network answers and rewrites */
    courier_response_free(b);
    b = send(e, r, &code);
    CHECK_EQ(courier_response_from_cache(b), 1);
    courier_response_free(b);
    CHECK_EQ(hits_of("/cache"), 2);
    atomic_store(&clock_offset_ms, 0);
    courier_request_free(r);
    courier_engine_close(e);
}

static int reject_all(const courier_response *resp, void *user) {
    (void)resp;
    (void)user;
    return 0;
}

static void test_invalid_and_failed_responses_are_not_cached(void) {
    courier_engine *e = th_engine(tweak);
    REQUIRE(e);
    courier_request *r = req("GET", "/cache?body=bad", COURIER_CACHE_CACHE_FIRST);
    courier_request_set_validator(r, reject_all, NULL, NULL);
    int code;
    courier_response_free(send(e, r, &code));
    CHECK_EQ(code, COURIER_E_INVALID_RESULT);
    int has = 1;
    CHECK_EQ(courier_cache_has(&has, e, r, NULL), COURIER_OK);
    CHECK_EQ(has, 0);
    courier_request *s = req("GET", "/status/500", COURIER_CACHE_CACHE_FIRST);
    courier_response_free(send(e, s, &code));
    CHECK_EQ(code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(courier_cache_has(&has, e, s, NULL), COURIER_OK);
    CHECK_EQ(has, 0);
    courier_request *f = NULL;
    courier_request_new(&f, "GET", "http://127.0.0.1:1/nothing-listens-here");
    courier_request_set_cache_policy(f, COURIER_CACHE_CACHE_FIRST);
    courier_response_free(send(e, f, &code));
    CHECK_EQ(code, COURIER_E_CANNOT_CONNECT);
    int64_t count = -1;
    CHECK_EQ(courier_cache_size(NULL, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 0);
    courier_cache_stats st = {.size = sizeof st};
    courier_cache_get_stats(&st, e, NULL);
    CHECK_EQ(st.writes, 0);
    courier_request_free(r);
    courier_request_free(s);
    courier_request_free(f);
    courier_engine_close(e);
}

/* ---- keys ------------------------------------------------------------------------------------ */

static char *key_of(courier_engine *e, courier_request *r) {
    char *k = NULL;
    CHECK_EQ(courier_cache_key(&k, e, r), COURIER_OK);
    return k;
}

static void test_key_is_canonical(void) {
    courier_engine *e = th_engine(tweak);
    REQUIRE(e);
    courier_request *a = req("GET", "/cache", COURIER_CACHE_CACHE_FIRST);
    courier_request_add_param(a, "b", "2");
    courier_request_add_param(a, "a", "x y");
    courier_request *b = req("GET", "/cache?b=2", COURIER_CACHE_CACHE_FIRST);
    courier_request_add_param(b, "a", "x y");
    char *ka = key_of(e, a), *kb = key_of(e, b);
    char expect[256];
    snprintf(expect, sizeof expect, "GET %s/cache?a=x%%20y&b=2", th_base());
    CHECK_STR(ka, expect);
    CHECK_STR(kb, expect);
    courier_free(ka);
    courier_free(kb);

    /* The same request built in another order hits the entry the first one wrote. */
    cts_server_reset_counts(th_server());
    int code;
    courier_response_free(send(e, a, &code));
    courier_response *r = send(e, b, &code);
    CHECK_EQ(courier_response_from_cache(r), 1);
    courier_response_free(r);
    CHECK_EQ(hits_of("/cache"), 1);

    /* The method is part of the key; so is the query string (URLCache drops it). */
    courier_request *post = req("POST", "/cache?b=2", COURIER_CACHE_CACHE_FIRST);
    courier_request_add_param(post, "a", "x y");
    char *kp = key_of(e, post);
    CHECK(strncmp(kp, "POST ", 5) == 0);
    courier_free(kp);
    courier_request *q1 = req("GET", "/cache?body=one&q=1", COURIER_CACHE_CACHE_FIRST);
    courier_request *q2 = req("GET", "/cache?body=two&q=2", COURIER_CACHE_CACHE_FIRST);
    courier_response_free(send(e, q1, &code));
    r = send(e, q2, &code);
    CHECK_EQ(courier_response_from_cache(r), 0);
    CHECK_STR((const char *)courier_response_body(r, NULL), "two");
    courier_response_free(r);
    courier_request_free(a);
    courier_request_free(b);
    courier_request_free(post);
    courier_request_free(q1);
    courier_request_free(q2);
    courier_engine_close(e);
}

static void test_key_filter_sensitive_base_and_own_key(void) {
    courier_engine *e = th_engine(tweak);
    REQUIRE(e);
    /* A filtered volatile parameter does not change the key. */
    courier_request *t1 = req("GET", "/cache?body=f", COURIER_CACHE_CACHE_FIRST);
    courier_request_add_param(t1, "ts", "1000");
    courier_request_add_cache_key_filter(t1, "ts");
    courier_request *t2 = req("GET", "/cache?body=f&ts=2000", COURIER_CACHE_CACHE_FIRST);
    courier_request_add_cache_key_filter(t2, "ts");
    char *k1 = key_of(e, t1), *k2 = key_of(e, t2);
    CHECK_STR(k1, k2);
    CHECK(strstr(k1, "ts=") == NULL);
    courier_free(k1);
    courier_free(k2);
    int code;
    courier_response_free(send(e, t1, &code));
    courier_response *r = send(e, t2, &code);
    CHECK_EQ(courier_response_from_cache(r), 1);
    courier_response_free(r);

    /* Sensitive data separates users. */
    courier_request *ua = req("GET", "/cache?body=alice", COURIER_CACHE_CACHE_FIRST);
    courier_request_set_cache_sensitive_data(ua, "user=alice");
    courier_request *ub = req("GET", "/cache?body=alice", COURIER_CACHE_CACHE_FIRST);
    courier_request_set_cache_sensitive_data(ub, "user=bob");
    char *ka = key_of(e, ua), *kb = key_of(e, ub);
    CHECK(strcmp(ka, kb) != 0);
    CHECK_CONTAINS(ka, "\nsensitive:user=alice");
    courier_free(ka);
    courier_free(kb);
    courier_response_free(send(e, ua, &code));
    r = send(e, ub, &code);
    CHECK_EQ(courier_response_from_cache(r), 0);
    courier_response_free(r);

    /* The request's own base URL is part of the key (a seed bug left it out). */
    courier_request *b1 = req("GET", "/cache?body=b", COURIER_CACHE_CACHE_FIRST);
    courier_request *b2 = req("GET", "/cache?body=b", COURIER_CACHE_CACHE_FIRST);
    char other[128];
    snprintf(other, sizeof other, "http://localhost:%d", cts_server_port(th_server()));
    courier_request_set_base_url(b2, other);
    char *kb1 = key_of(e, b1), *kb2 = key_of(e, b2);
    CHECK(strcmp(kb1, kb2) != 0);
    CHECK_CONTAINS(kb2, "http://localhost:");
    courier_free(kb1);
    courier_free(kb2);

    /* The request's own key. */
    courier_request *o1 = req("GET", "/cache?body=own1", COURIER_CACHE_CACHE_FIRST);
    courier_request_set_cache_key(o1, "my-key");
    courier_request *o2 = req("GET", "/cache?body=own2", COURIER_CACHE_CACHE_FIRST);
    courier_request_set_cache_key(o2, "my-key");
    char *ko = key_of(e, o1);
    CHECK_STR(ko, "my-key");
    courier_free(ko);
    courier_response_free(send(e, o1, &code));
    r = send(e, o2, &code);
    CHECK_EQ(courier_response_from_cache(r), 1);
    CHECK_STR((const char *)courier_response_body(r, NULL), "own1");
    CHECK_STR(courier_response_cache_key(r), "my-key");
    courier_response_free(r);
    courier_response *g = NULL;
    CHECK_EQ(courier_cache_get_key(&g, e, "my-key", 0, NULL), COURIER_OK);
    courier_response_free(g);
    CHECK_EQ(courier_request_set_cache_key(o1, ""), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_cache_policy(o1, 50), COURIER_E_INVALID_ARGUMENT);

    courier_request *list[] = {t1, t2, ua, ub, b1, b2, o1, o2};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) courier_request_free(list[i]);
    courier_engine_close(e);
}

/* ---- user-defined policies ---------------------------------------------------------------------- */

typedef struct policy_state {
    _Atomic int has_calls, answer_calls, write_calls, freed;
    int answer;
    _Atomic int64_t expires_chosen; /* what p_write answered */
} policy_state;

static int p_has(const courier_response *cached, int64_t now_ms, void *user) {
    policy_state *s = user;
    atomic_fetch_add(&s->has_calls, 1);
    (void)now_ms;
    return cached != NULL; /* any entry, even expired */
}
static int p_answer(const courier_response *cached, int64_t now_ms, void *user) {
    policy_state *s = user;
    (void)cached;
    (void)now_ms;
    atomic_fetch_add(&s->answer_calls, 1);
    return s->answer;
}
static int p_write(const courier_response *resp, int64_t *expires_ms, void *user) {
    policy_state *s = user;
    atomic_fetch_add(&s->write_calls, 1);
    *expires_ms = test_clock(NULL) + 5000;
    atomic_store(&s->expires_chosen, *expires_ms);
    return courier_response_status(resp) == 200;
}
static void p_free(void *user) { atomic_fetch_add(&((policy_state *)user)->freed, 1); }

static void test_user_defined_policy(void) {
    atomic_store(&clock_offset_ms, 0);
    courier_engine *e = th_engine(tweak);
    REQUIRE(e);
    static policy_state st;
    st.answer = 1;
    courier_cache_policy_callbacks cb = {sizeof cb, p_has, p_answer, p_write};
    CHECK_EQ(courier_engine_register_cache_policy(e, 99, &cb, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_engine_register_cache_policy(e, 100, &cb, &st, p_free), COURIER_OK);
    cts_server_reset_counts(th_server());
    courier_request *r = req("GET", "/cache?body=user", 100);
    int code;
    courier_response *a = send(e, r, &code);
    CHECK_EQ(code, COURIER_OK);
    CHECK_EQ(courier_response_from_cache(a), 0);
    courier_response_free(a);
    CHECK_EQ(atomic_load(&st.write_calls), 1);
    /* Past the expiry the policy chose, its has_cache still says yes: answered from the cache. */
    atomic_store(&clock_offset_ms, 60 * 1000);
    a = send(e, r, &code);
    CHECK_EQ(courier_response_from_cache(a), 1);
    /* The expiry the policy chose is the entry's (the entry's creation time is the engine's own
     * reading of the clock, which a slow run may take a millisecond apart from the policy's). */
    CHECK_EQ(courier_response_cache_expires(a), atomic_load(&st.expires_chosen));
    int64_t lifetime = courier_response_cache_expires(a) - courier_response_cache_created(a);
    CHECK(lifetime >= 4000 && lifetime <= 6000);
    courier_response_free(a);
    CHECK_EQ(hits_of("/cache"), 1);
    int has = 0;
    CHECK_EQ(courier_cache_has(&has, e, r, NULL), COURIER_OK);
    CHECK_EQ(has, 1);
    /* answer_from_cache says no: the network answers. */
    st.answer = 0;
    a = send(e, r, &code);
    CHECK_EQ(courier_response_from_cache(a), 0);
    courier_response_free(a);
    CHECK_EQ(hits_of("/cache"), 2);
    CHECK(atomic_load(&st.has_calls) >= 3);
    CHECK(atomic_load(&st.answer_calls) >= 2);

    /* An unregistered id fails the send. */
    courier_request *u = req("GET", "/cache?body=x", 101);
    courier_error err;
    CHECK_EQ(courier_send(NULL, e, u, on_done, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    /* Unregistering runs user_free once. */
    CHECK_EQ(courier_engine_register_cache_policy(e, 100, NULL, NULL, NULL), COURIER_OK);
    CHECK_EQ(atomic_load(&st.freed), 1);
    atomic_store(&clock_offset_ms, 0);
    courier_request_free(r);
    courier_request_free(u);
    courier_engine_close(e);
}

TESTS_MAIN(T(test_cache_first_answers_without_network), T(test_hit_completes_asynchronously_once),
           T(test_write_only_then_cache_first), T(test_no_cache_neither_reads_nor_writes),
           T(test_engine_default_policy_and_expiry), T(test_request_expiry_on_the_clock),
           T(test_invalid_and_failed_responses_are_not_cached), T(test_key_is_canonical),
           T(test_key_filter_sensitive_base_and_own_key), T(test_user_defined_policy))
