/*
 * error_contract_test.c — include/courier.h promises of `courier_error` that "the library writes
 * every field": every public function that takes a `courier_error *` is called here once on a path
 * that succeeds, with an err poisoned beforehand (0x5A in every byte), and must leave it all zero
 * (code, http_status, curl_code, os_error, store_error, every reserved[] and an empty message).
 * One or more functions of each module are also called on a path that fails, with a poisoned err:
 * err.code must be the returned code and the message NUL-terminated within its 256 bytes.
 * Real LMDB stores in temporary directories, the loopback test server; under COURIER_TEST_REDIS the
 * cache manager and the journal again with their stores on the test's redis-server.
 *
 * scripts/check_error_contract.py (ctest error_contract_coverage) fails when the header declares a
 * function taking `courier_error *` whose name does not appear here in an OK(...) or FAILS(...)
 * call: a new function gets its line here before it ships.
 */
#include "harness.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the checks -------------------------------------------------------------------------------- */

static void poison(courier_error *e) { memset(e, 0x5A, sizeof *e); }

static void check_cleared(const courier_error *e, const char *what, const char *file, int line) {
    int bad = e->code || e->http_status || e->curl_code || e->os_error || e->store_error || e->message[0];
    for (size_t i = 0; i < sizeof e->reserved / sizeof e->reserved[0]; i++) bad |= e->reserved[i] != 0;
    if (bad)
        th_fail(file, line, "%s succeeded and left *err unwritten: code %d http_status %d curl_code %d os_error %d "
                "store_error %d reserved[0] %d reserved[6] %d message[0] 0x%02x", what, e->code, e->http_status,
                e->curl_code, e->os_error, e->store_error, e->reserved[0], e->reserved[6],
                (unsigned char)e->message[0]);
}

static void check_failed(int rc, const courier_error *e, const char *what, const char *file, int line) {
    if (rc == COURIER_OK) {
        th_fail(file, line, "%s: expected a failure, got COURIER_OK", what);
        return;
    }
    if (e->code != rc) th_fail(file, line, "%s returned %d but err.code is %d", what, rc, e->code);
    if (!memchr(e->message, 0, sizeof e->message)) th_fail(file, line, "%s: err.message is not NUL-terminated", what);
}

/* OK(fn, args...): calls fn(args..., &err) with a poisoned err; it must succeed and clear err. The
 * name is the first argument so that scripts/check_error_contract.py can read it. */
#define OK(fn, ...)                                                                                   \
    do {                                                                                              \
        courier_error err_;                                                                           \
        poison(&err_);                                                                                \
        int rc_ = fn(__VA_ARGS__, &err_);                                                             \
        if (rc_ != COURIER_OK) th_fail(__FILE__, __LINE__, "%s: %d %.200s", #fn, rc_, err_.message);   \
        else check_cleared(&err_, #fn, __FILE__, __LINE__);                                           \
    } while (0)
/* FAILS(fn, args...): calls fn(args..., &err) with a poisoned err; it must fail with err.code the
 * returned code. Evaluates to the code. */
#define FAILS(fn, ...) fails_(fn(__VA_ARGS__, fails_err_(&err_fail_)), &err_fail_, #fn, __FILE__, __LINE__)
static courier_error err_fail_; /* (the tests run one at a time on the main thread) */
static courier_error *fails_err_(courier_error *e) {
    poison(e);
    return e;
}
static int fails_(int rc, courier_error *e, const char *what, const char *file, int line) {
    check_failed(rc, e, what, file, line);
    return rc;
}

/* ---- helpers -------------------------------------------------------------------------------------- */

static courier_request *req(const char *method, const char *target) {
    courier_request *r = NULL;
    courier_request_new(&r, method, target);
    return r;
}

/* A document from JSON text (the test fails when it does not parse). */
static courier_json *js(const char *text) {
    courier_json *v = NULL;
    if (courier_json_parse(&v, text, strlen(text), NULL, NULL) != COURIER_OK) th_fail(__FILE__, __LINE__, "%s", text);
    return v;
}

/* A one-shot latch for callbacks on the engine's threads. */
typedef struct latch {
    pthread_mutex_t m;
    pthread_cond_t c;
    int n;
    int code;
} latch;
static void latch_init(latch *l) {
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->m, NULL);
    pthread_cond_init(&l->c, NULL);
}
static void latch_destroy(latch *l) {
    pthread_mutex_destroy(&l->m);
    pthread_cond_destroy(&l->c);
}
static void latch_hit(latch *l, int code) {
    pthread_mutex_lock(&l->m);
    l->n++;
    l->code = code;
    pthread_cond_broadcast(&l->c);
    pthread_mutex_unlock(&l->m);
}
/* Waits (a generous bound, not an assertion on time) until n hits; returns the count. */
static int latch_wait(latch *l, int n) {
    pthread_mutex_lock(&l->m);
    int got = th_wait_count(&l->c, &l->m, &l->n, n);
    pthread_mutex_unlock(&l->m);
    return got;
}

static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)err;
    courier_response_free(resp);
    latch_hit(user, code);
}

static void on_work(void *user) { latch_hit(user, 0); }

/* An engine on a real LMDB store in a new temporary directory (th_engine's tweak). */
static const char *store_now;
static const char *cache_store_now;  /* NULL: the store's own */
static const char *frozen_store_now; /* NULL: the store's own */
static void on_store(courier_config *cfg) {
    courier_config_set_temporary_store(cfg, 0);
    CHECK_EQ(courier_config_set_store_dir(cfg, store_now), COURIER_OK);
    courier_config_set_frozen_paused(cfg, 1);
    courier_config_set_frozen_replay(cfg, 4, 20, 100);
    if (cache_store_now) CHECK_EQ(courier_config_set_cache_store(cfg, cache_store_now), COURIER_OK);
    if (frozen_store_now) CHECK_EQ(courier_config_set_frozen_store(cfg, frozen_store_now), COURIER_OK);
}
static courier_engine *stored_engine(const char *cache_store, const char *frozen_store) {
    store_now = th_tmpdir();
    cache_store_now = cache_store;
    frozen_store_now = frozen_store;
    return th_engine(on_store);
}

static courier_response *get(courier_engine *e, const char *target) {
    courier_request *r = req("GET", target);
    courier_response *resp = NULL;
    int rc = courier_send_sync(&resp, e, r, NULL);
    courier_request_free(r);
    if (rc != COURIER_OK) {
        th_fail(__FILE__, __LINE__, "GET %s: %d", target, rc);
        courier_response_free(resp);
        return NULL;
    }
    return resp;
}

/* ---- engine, sending, responses ------------------------------------------------------------------- */

static void engine_and_send(void) {
    courier_config *cfg = NULL;
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    courier_config_set_base_url(cfg, th_base());
    courier_config_set_store_dir(cfg, th_tmpdir());
    courier_engine *e = NULL;
    OK(courier_engine_open, &e, cfg);
    courier_config_free(cfg);
    REQUIRE(e);

    latch l;
    latch_init(&l);
    OK(courier_engine_post, e, on_work, &l);
    CHECK_EQ(latch_wait(&l, 1), 1);

    courier_request *r = req("GET", "/echo/contract");
    uint64_t id = 0;
    OK(courier_send, &id, e, r, on_done, &l);
    CHECK_EQ(latch_wait(&l, 2), 2);
    CHECK_EQ(l.code, COURIER_OK);
    courier_response *resp = NULL;
    OK(courier_send_sync, &resp, e, r);
    courier_response_free(resp);
    courier_request_free(r);

    /* failures */
    CHECK_EQ(FAILS(courier_engine_post, e, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    r = req("GET", "http://bad url/");
    CHECK_EQ(FAILS(courier_send, NULL, e, r, on_done, &l), COURIER_E_INVALID_URL);
    courier_request_free(r);
    r = req("GET", "/status/404");
    resp = NULL;
    CHECK_EQ(FAILS(courier_send_sync, &resp, e, r), COURIER_E_HTTP_STATUS);
    CHECK_EQ(err_fail_.http_status, 404);
    courier_response_free(resp);
    courier_request_free(r);
    r = req("GET", "/echo/by-transport");
    courier_request_set_transport(r, "no-such-transport");
    CHECK_EQ(FAILS(courier_send, NULL, e, r, on_done, &l), COURIER_E_NOT_FOUND);
    courier_request_free(r);
    r = req("GET", "/echo/by-policy");
    courier_request_set_cache_policy(r, (courier_cache_policy)(COURIER_CACHE_POLICY_USER_MIN + 7));
    CHECK_EQ(FAILS(courier_send, NULL, e, r, on_done, &l), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
    r = req("POST", "/echo/unknown-resend-policy");
    courier_request_set_freeze(r, COURIER_FREEZE_AUTO, 0, 0);
    courier_request_set_resend_policy(r, "never.registered", NULL);
    CHECK_EQ(FAILS(courier_send, NULL, e, r, on_done, &l), COURIER_E_RESEND_POLICY_UNKNOWN);
    resp = NULL;
    CHECK_EQ(FAILS(courier_send_sync, &resp, e, r), COURIER_E_RESEND_POLICY_UNKNOWN);
    courier_response_free(resp);
    courier_request_free(r);
    /* failures of the transfer: nobody listening, a timeout (its kind in reserved[0]) */
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", th_free_port());
    r = req("GET", url);
    resp = NULL;
    CHECK_EQ(FAILS(courier_send_sync, &resp, e, r), COURIER_E_CANNOT_CONNECT);
    CHECK(err_fail_.curl_code != 0);
    courier_response_free(resp);
    courier_request_free(r);
    r = req("GET", "/hang");
    courier_request_set_timeout(r, COURIER_TIMEOUT_TOTAL, 200);
    resp = NULL;
    CHECK_EQ(FAILS(courier_send_sync, &resp, e, r), COURIER_E_TIMEOUT);
    CHECK_EQ(courier_error_timeout_kind(&err_fail_), COURIER_TIMEOUT_TOTAL);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
    CHECK_EQ(l.n, 2);
    latch_destroy(&l);

    /* a store directory that is a file */
    char path[700];
    snprintf(path, sizeof path, "%s/a-file", th_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fclose(f);
    courier_config_new(&cfg);
    courier_config_set_store_dir(cfg, path);
    e = NULL;
    CHECK_EQ(FAILS(courier_engine_open, &e, cfg), COURIER_E_STORE);
    CHECK(e == NULL);
    courier_config_free(cfg);
    /* a journal, or a cache, whose directory is a file (the cache opens at first use: no failure) */
    courier_config_new(&cfg);
    courier_config_set_store_dir(cfg, th_tmpdir());
    courier_config_set_frozen_store(cfg, path);
    e = NULL;
    int rc = FAILS(courier_engine_open, &e, cfg);
    CHECK(rc != COURIER_OK);
    courier_engine_close(e);
    courier_config_free(cfg);
    CHECK_EQ(FAILS(courier_engine_open, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
#ifdef COURIER_TEST_REDIS
    /* a journal on a Redis nobody serves: the engine opens (it connects when Redis answers), and
     * the journal's calls fail with COURIER_E_REDIS meanwhile */
    char redis[128];
    snprintf(redis, sizeof redis, "redis://127.0.0.1:%d/0", th_free_port());
    courier_config_new(&cfg);
    courier_config_set_store_dir(cfg, th_tmpdir());
    courier_config_set_frozen_store(cfg, redis);
    e = NULL;
    OK(courier_engine_open, &e, cfg);
    int64_t count = 0;
    if (e) CHECK_EQ(FAILS(courier_frozen_count, &count, e), COURIER_E_REDIS);
    courier_engine_close(e);
    courier_config_free(cfg);
#endif
}

/* A customize callback's code (no courier_raise) is what courier_send returns, and err says it. */
static int refuse(courier_outgoing *o, void *user) {
    (void)o;
    (void)user;
    return COURIER_E_INTERNAL;
}
/* A validator that raises user data: courier_send_sync's err owns it until courier_error_clear. */
static int freed_user;
static void count_free(void *user) {
    (void)user;
    freed_user++;
}
static int raising_validator(const courier_response *resp, void *user) {
    (void)resp;
    (void)user;
    courier_raise(COURIER_E_USER, "the validator said no", &freed_user, count_free);
    return 0;
}

/* courier_send_sync from the worker thread (a completion) is refused. */
typedef struct nested {
    latch l;
    courier_engine *e;
} nested;
static void send_sync_inside(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id; (void)code; (void)err;
    courier_response_free(resp);
    nested *n = user;
    courier_request *r = req("GET", "/echo/nested");
    courier_response *inner = NULL;
    int rc = FAILS(courier_send_sync, &inner, n->e, r);
    courier_response_free(inner);
    courier_request_free(r);
    latch_hit(&n->l, rc);
}

static int refuse_before(courier_outgoing *o, void *user) {
    (void)o;
    (void)user;
    return COURIER_E_OFFLINE;
}
static void with_guard_and_interceptor(courier_config *cfg) {
    courier_config_set_frequent_guard_ms(cfg, 60000);
    courier_config_add_interceptor(cfg, refuse_before, NULL, NULL, NULL);
}

/* courier_send's refusals before anything is sent: the guard, an interceptor, a body file that is
 * not there, a parameter its charset cannot hold. */
static void send_refusals(void) {
    courier_engine *e = th_engine(with_guard_and_interceptor);
    REQUIRE(e);
    courier_request *r = req("GET", "/echo/guarded");
    CHECK_EQ(FAILS(courier_send, NULL, e, r, on_done, NULL), COURIER_E_OFFLINE); /* the interceptor */
    courier_request_free(r);
    courier_engine_close(e);

    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_base_url(cfg, th_base());
    courier_config_set_temporary_store(cfg, 1);
    courier_config_set_frequent_guard_ms(cfg, 60000);
    e = NULL;
    courier_engine_open(&e, cfg, NULL);
    courier_config_free(cfg);
    REQUIRE(e);
    latch l;
    latch_init(&l);
    r = req("GET", "/echo/guarded");
    OK(courier_send, NULL, e, r, on_done, &l);
    CHECK_EQ(FAILS(courier_send, NULL, e, r, on_done, &l), COURIER_E_TOO_FREQUENT);
    courier_request_free(r);
    CHECK_EQ(latch_wait(&l, 1), 1);

    char path[700];
    snprintf(path, sizeof path, "%s/no-such-body", th_tmpdir());
    r = req("POST", "/echo/file");
    courier_request_set_body_file(r, path, "text/plain");
    CHECK_EQ(FAILS(courier_send, NULL, e, r, on_done, &l), COURIER_E_NOT_FOUND);
    courier_response *resp = NULL;
    CHECK_EQ(FAILS(courier_send_sync, &resp, e, r), COURIER_E_NOT_FOUND);
    courier_response_free(resp);
    courier_request_free(r);
    r = req("GET", "/echo/latin1");
    courier_request_set_param_charset(r, "ISO-8859-1");
    courier_request_add_param(r, "q", "\xe4\xb8\xad"); /* a CJK character: not in Latin-1 */
    CHECK_EQ(FAILS(courier_send, NULL, e, r, on_done, &l), COURIER_E_CHARSET);
    courier_request_free(r);
    courier_engine_close(e);
    CHECK_EQ(l.n, 1);
    latch_destroy(&l);
}

static void errors_from_callbacks(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = req("GET", "/echo/refused");
    courier_request_set_customize(r, refuse, NULL, NULL);
    CHECK_EQ(FAILS(courier_send, NULL, e, r, on_done, NULL), COURIER_E_INTERNAL);
    courier_response *resp = NULL;
    CHECK_EQ(FAILS(courier_send_sync, &resp, e, r), COURIER_E_INTERNAL);
    courier_response_free(resp);
    courier_request_free(r);

    r = req("GET", "/echo/raised");
    courier_request_set_validator(r, raising_validator, NULL, NULL);
    freed_user = 0;
    courier_error err;
    poison(&err);
    resp = NULL;
    int rc = courier_send_sync(&resp, e, r, &err);
    courier_response_free(resp);
    courier_request_free(r);
    CHECK_EQ(rc, COURIER_E_USER);
    CHECK_EQ(err.code, COURIER_E_USER);
    CHECK(courier_error_user_data(&err) == &freed_user);
    CHECK_EQ(freed_user, 0);
    /* courier_error_clear: releases the user data and zeroes every field */
    courier_error_clear(&err);
    CHECK_EQ(freed_user, 1);
    check_cleared(&err, "courier_error_clear", __FILE__, __LINE__);
    /* on an error holding no user data, whatever else it holds */
    poison(&err);
    for (int i = 1; i <= 5; i++) err.reserved[i] = 0;
    courier_error_clear(&err);
    check_cleared(&err, "courier_error_clear", __FILE__, __LINE__);

    nested n;
    latch_init(&n.l);
    n.e = e;
    r = req("GET", "/echo/outer");
    CHECK_EQ(courier_send(NULL, e, r, send_sync_inside, &n, NULL), COURIER_OK);
    courier_request_free(r);
    CHECK_EQ(latch_wait(&n.l, 1), 1);
    CHECK_EQ(n.l.code, COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
    latch_destroy(&n.l);
}

static int failing_decoder(const uint8_t *body, size_t len, const char *type, courier_json **out, courier_error *err,
                           void *user) {
    (void)body; (void)len; (void)type; (void)out; (void)err; (void)user;
    return COURIER_E_JSON; /* writes nothing into err */
}
static void with_failing_decoder(courier_config *cfg) {
    courier_config_set_decoder(cfg, "text/x-undecodable", failing_decoder, NULL, NULL);
}

static void responses(void) {
    courier_engine *e = th_engine(with_failing_decoder);
    REQUIRE(e);
    courier_response *text = get(e, "/text?type=text%2Fplain%3B%20charset%3DGBK&hex=d6d0cec4");
    courier_response *json = get(e, "/json");
    REQUIRE(text && json);
    char *s = NULL;
    size_t n = 0;
    OK(courier_response_text, &s, &n, text, NULL);
    courier_free(s);
    const courier_json *doc = NULL;
    OK(courier_response_parse_json, &doc, json);
    const courier_json_tape *tape = NULL;
    size_t index = 0;
    OK(courier_response_result_tape, &tape, &index, json, NULL);

    /* failures: the charset module, JSON, a decoder callback that writes nothing into its err */
    s = NULL;
    CHECK_EQ(FAILS(courier_response_text, &s, NULL, json, "no-such-charset-x"), COURIER_E_UNKNOWN_CHARSET);
    courier_response *bad = get(e, "/text?type=text%2Fplain%3B%20charset%3Dutf-8&hex=ff");
    REQUIRE(bad);
    CHECK_EQ(FAILS(courier_response_text, &s, NULL, bad, NULL), COURIER_E_CHARSET);
    CHECK_EQ(FAILS(courier_response_parse_json, &doc, bad), COURIER_E_JSON);
    CHECK_EQ(FAILS(courier_response_result_tape, &tape, &index, json, "no-such-result"), COURIER_E_NOT_FOUND);
    courier_response *undecodable = get(e, "/text?type=text%2Fx-undecodable&hex=41");
    REQUIRE(undecodable);
    CHECK_EQ(FAILS(courier_response_parse_json, &doc, undecodable), COURIER_E_JSON);
    courier_response_free(undecodable);
    courier_response_free(bad);
    courier_response_free(text);
    courier_response_free(json);
    courier_engine_close(e);
}

/* ---- JSON, tapes, mappings ------------------------------------------------------------------------ */

static void json_tape_mapping(void) {
    const char *text = "{\"id\":7,\"name\":\"x\",\"tags\":[1,2]}";
    courier_json *v = NULL;
    OK(courier_json_parse, &v, text, strlen(text), NULL);
    REQUIRE(v);
    char *out = NULL;
    size_t len = 0;
    OK(courier_json_dump, &out, &len, v, 0);
    courier_free(out);
    courier_json_tape *t = NULL;
    OK(courier_json_tape_parse, &t, text, strlen(text), NULL);
    REQUIRE(t);
    courier_json_tape *t2 = NULL;
    OK(courier_json_tape_from_value, &t2, v);
    courier_json_tape_free(t2);
    out = NULL;
    OK(courier_json_tape_dump, &out, &len, t, 0, 0);
    courier_free(out);

    courier_mapping *m = NULL;
    REQUIRE(courier_mapping_new(&m) == COURIER_OK);
    CHECK_EQ(courier_mapping_add_attribute(m, "id", NULL, COURIER_JSON_INTEGER, COURIER_MAP_REQUIRED), COURIER_OK);
    courier_mapping_error where;
    courier_json *mapped = NULL;
    OK(courier_mapping_apply, &mapped, &where, m, v);
    courier_json_free(mapped);
    courier_json_tape *mt = NULL;
    OK(courier_mapping_apply_tape, &mt, &where, m, t, 0);
    courier_json_tape_free(mt);

    /* failures */
    courier_json *bad = NULL;
    CHECK_EQ(FAILS(courier_json_parse, &bad, "{\"a\":", 5, NULL), COURIER_E_JSON);
    courier_json_tape *bt = NULL;
    CHECK_EQ(FAILS(courier_json_tape_parse, &bt, "[1,,2]", 6, NULL), COURIER_E_JSON);
    courier_json_options small = {.size = sizeof small, .max_depth = 2, .max_bytes = 8};
    CHECK_EQ(FAILS(courier_json_parse, &bad, text, strlen(text), &small), COURIER_E_TOO_LARGE);
    CHECK_EQ(FAILS(courier_json_tape_parse, &bt, text, strlen(text), &small), COURIER_E_TOO_LARGE);
    small.max_bytes = 0;
    CHECK_EQ(FAILS(courier_json_parse, &bad, "[[[1]]]", 7, &small), COURIER_E_JSON);
    CHECK_EQ(FAILS(courier_json_tape_parse, &bt, "[[[1]]]", 7, &small), COURIER_E_JSON);
    CHECK_EQ(FAILS(courier_json_parse, &bad, "{\"a\":1,\"a\":2}", 13, NULL), COURIER_E_JSON);
    CHECK_EQ(FAILS(courier_json_parse, NULL, "1", 1, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_mapping_apply, &mapped, &where, NULL, v), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_mapping_apply_tape, &mt, &where, m, t, 999), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_json_dump, NULL, NULL, v, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_json_tape_dump, &out, NULL, t, 1000, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_json_tape_from_value, &bt, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_json *other = NULL;
    other = js("{\"id\":\"seven\"}");
    REQUIRE(other);
    courier_json_tape *ot = NULL;
    REQUIRE(courier_json_tape_parse(&ot, "{\"id\":\"seven\"}", 14, NULL, NULL) == COURIER_OK);
    CHECK_EQ(FAILS(courier_mapping_apply, &mapped, &where, m, other), COURIER_E_MAPPING);
    CHECK_EQ(FAILS(courier_mapping_apply_tape, &mt, &where, m, ot, 0), COURIER_E_MAPPING);
    courier_json_tape_free(ot);
    courier_json_free(other);
    courier_mapping_free(m);
    courier_json_tape_free(t);
    courier_json_free(v);
}

/* ---- routes, descriptors, the API catalogue --------------------------------------------------------- */

static void routes_and_catalogue(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_json *obj = NULL;
    obj = js("{\"id\":3,\"q\":\"x\"}");
    REQUIRE(obj);
    courier_request *r = req("GET", "/echo/:id");
    OK(courier_request_set_object, r, obj);
    courier_request_free(r);

    OK(courier_engine_add_route, e, "item", NULL, "GET", "/echo/item/:id");
    OK(courier_engine_add_route, e, NULL, "thing", "GET", "/echo/thing/:id");
    r = NULL;
    OK(courier_request_new_route, &r, e, "item", obj);
    courier_request_free(r);
    r = NULL;
    OK(courier_request_new_object, &r, e, "GET", "thing", obj);
    courier_request_free(r);
    OK(courier_engine_add_response_descriptor, e, "GET", "/json", 0, 0, "data", NULL);

    courier_json *decl = NULL;
    decl = js("{\"path\":\"/echo/api\"}");
    REQUIRE(decl);
    OK(courier_engine_add_api, e, "one.api", decl);
    const char *doc = "{\"apis\":{\"two\":{\"a\":{\"path\":\"/echo/a\"}}}}";
    size_t count = 0;
    OK(courier_engine_load_apis, &count, e, doc, strlen(doc));
    char path[700];
    snprintf(path, sizeof path, "%s/apis.json", th_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("{\"apis\":{\"three\":{\"path\":\"/echo/three\"}}}", f);
    fclose(f);
    OK(courier_engine_load_api_file, &count, e, path);
    r = NULL;
    OK(courier_request_new_api, &r, e, "two.a");
    courier_request_free(r);

    /* failures */
    r = req("GET", "/echo/:missing");
    CHECK_EQ(FAILS(courier_request_set_object, r, obj), COURIER_E_ROUTE_PARAMETER);
    courier_request_free(r);
    CHECK_EQ(FAILS(courier_engine_add_route, e, "x", NULL, "GET", NULL), COURIER_E_INVALID_ARGUMENT);
    r = NULL;
    CHECK_EQ(FAILS(courier_request_new_route, &r, e, "no-such-route", obj), COURIER_E_UNKNOWN_NAME);
    CHECK_EQ(FAILS(courier_request_new_object, &r, e, "GET", "no-such-type", obj), COURIER_E_UNKNOWN_NAME);
    CHECK_EQ(FAILS(courier_engine_add_response_descriptor, e, "G E T", NULL, 0, 0, NULL, NULL),
             COURIER_E_INVALID_ARGUMENT);
    courier_json *bad = NULL;
    bad = js("{\"path\":\"/x\",\"nonsense\":1}");
    REQUIRE(bad);
    CHECK_EQ(FAILS(courier_engine_add_api, e, "bad.api", bad), COURIER_E_CATALOG);
    courier_json_free(bad);
    bad = js("{\"path\":\"/x\",\"headers\":{\"Bad Name\":\"v\"}}");
    REQUIRE(bad);
    CHECK_EQ(FAILS(courier_engine_add_api, e, "bad.header", bad), COURIER_E_INVALID_HEADER);
    courier_json_free(bad);
    bad = js("{\"path\":\"/x\",\"base_url\":\"ftp://x\"}");
    REQUIRE(bad);
    CHECK(FAILS(courier_engine_add_api, e, "bad.url", bad) != COURIER_OK);
    courier_json_free(bad);
    CHECK_EQ(FAILS(courier_engine_add_api, e, "bad name", decl), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_engine_load_apis, &count, e, "{", 1), COURIER_E_JSON);
    CHECK_EQ(FAILS(courier_engine_load_apis, &count, e, "{\"apis\":[]}", 11), COURIER_E_CATALOG);
    const char *bad_doc = "{\"apis\":{\"ok\":{\"path\":\"/a\"},\"bad\":{\"path\":\"/b\",\"nonsense\":1}}}";
    CHECK_EQ(FAILS(courier_engine_load_apis, &count, e, bad_doc, strlen(bad_doc)), COURIER_E_CATALOG);
    OK(courier_engine_add_route, e, "needs", NULL, "GET", "/echo/:id/:other");
    CHECK_EQ(FAILS(courier_request_new_route, &r, e, "needs", obj), COURIER_E_ROUTE_PARAMETER);
    snprintf(path, sizeof path, "%s/no-such-file.json", th_tmpdir());
    CHECK_EQ(FAILS(courier_engine_load_api_file, &count, e, path), COURIER_E_NOT_FOUND);
    CHECK_EQ(FAILS(courier_request_new_api, &r, e, "no.such.api"), COURIER_E_UNKNOWN_NAME);
    courier_json_free(decl);
    courier_json_free(obj);
    courier_engine_close(e);
}

/* ---- the cache and its manager -------------------------------------------------------------------- */

static void cache_functions(courier_engine *e) {
    courier_request *r = req("GET", "/echo/cached");
    char *key = NULL;
    REQUIRE(courier_cache_key(&key, e, r) == COURIER_OK);
    int has = -1;
    OK(courier_cache_has, &has, e, r);
    CHECK_EQ(has, 0);
    const char *names[] = {"Content-Type"}, *values[] = {"text/plain"};
    OK(courier_cache_put_key, e, key, 200, names, values, 1, "hi", 2, 0);
    OK(courier_cache_has_key, &has, e, key);
    CHECK_EQ(has, 1);
    courier_response *resp = NULL;
    OK(courier_cache_get, &resp, e, r, 0);
    courier_response_free(resp);
    resp = NULL;
    OK(courier_cache_get_key, &resp, e, key, 0);
    courier_response_free(resp);
    int64_t bytes = 0, count = 0;
    OK(courier_cache_size, &bytes, &count, e);
    courier_cache_stats stats = {.size = sizeof stats};
    OK(courier_cache_get_stats, &stats, e);
    courier_cache_verify_report report = {.size = sizeof report};
    OK(courier_cache_verify, &report, e);
    courier_cache_list *list = NULL;
    OK(courier_cache_list_entries, &list, e);
    courier_cache_list_free(list);
    OK(courier_cache_remove, e, r);
    OK(courier_cache_put_key, e, key, 200, NULL, NULL, 0, "hi", 2, 0);
    OK(courier_cache_remove_key, e, key);
    int64_t removed = 0;
    OK(courier_cache_remove_expired, &removed, e);
    OK(courier_cache_remove_since, &removed, e, 0);
    OK(courier_cache_remove_all, &removed, e);

    /* failures */
    resp = NULL;
    CHECK_EQ(FAILS(courier_cache_get, &resp, e, r, 0), COURIER_E_NOT_FOUND);
    CHECK_EQ(FAILS(courier_cache_get_key, &resp, e, key, 0), COURIER_E_NOT_FOUND);
    CHECK_EQ(FAILS(courier_cache_remove, e, r), COURIER_E_NOT_FOUND);
    CHECK_EQ(FAILS(courier_cache_remove_key, e, key), COURIER_E_NOT_FOUND);
    const char *bad_names[] = {"Bad Name"};
    CHECK_EQ(FAILS(courier_cache_put_key, e, key, 200, bad_names, values, 1, "", 0, 0), COURIER_E_INVALID_HEADER);
    CHECK_EQ(FAILS(courier_cache_has_key, NULL, e, key), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_cache_size, NULL, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_free(key);
    courier_request_free(r);
}

/* Every manager function on a cache store that cannot be opened (or reached) fails with `want`. */
static void cache_functions_fail(courier_engine *e, int want) {
    courier_request *r = req("GET", "/echo/cached");
    const char *key = "GET http://127.0.0.1/echo/cached";
    int has = 0;
    courier_response *resp = NULL;
    int64_t n = 0, m = 0;
    CHECK_EQ(FAILS(courier_cache_has, &has, e, r), want);
    CHECK_EQ(FAILS(courier_cache_has_key, &has, e, key), want);
    CHECK_EQ(FAILS(courier_cache_get, &resp, e, r, 0), want);
    CHECK_EQ(FAILS(courier_cache_get_key, &resp, e, key, 0), want);
    CHECK_EQ(FAILS(courier_cache_remove, e, r), want);
    CHECK_EQ(FAILS(courier_cache_remove_key, e, key), want);
    CHECK_EQ(FAILS(courier_cache_put_key, e, key, 200, NULL, NULL, 0, "x", 1, 0), want);
    CHECK_EQ(FAILS(courier_cache_remove_all, &n, e), want);
    CHECK_EQ(FAILS(courier_cache_remove_since, &n, e, 0), want);
    CHECK_EQ(FAILS(courier_cache_remove_expired, &n, e), want);
    CHECK_EQ(FAILS(courier_cache_size, &n, &m, e), want);
    courier_cache_stats stats = {.size = sizeof stats};
    CHECK_EQ(FAILS(courier_cache_get_stats, &stats, e), want);
    courier_cache_verify_report report = {.size = sizeof report};
    CHECK_EQ(FAILS(courier_cache_verify, &report, e), want);
    courier_cache_list *list = NULL;
    CHECK_EQ(FAILS(courier_cache_list_entries, &list, e), want);
    courier_request_free(r);
}

static void cache_store_that_cannot_open(void) {
    /* A cache store the configuration names is opened with the engine: its open fails, with the
     * store's detail (issue 28: caching used to be turned off, said only on stderr). */
    const char *dir = th_tmpdir();
    char path[700];
    snprintf(path, sizeof path, "%s/a-file", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fclose(f);
    courier_config *cfg = NULL;
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_set_store_dir(cfg, dir), COURIER_OK);
    CHECK_EQ(courier_config_set_cache_store(cfg, path), COURIER_OK);
    courier_engine *e = NULL;
    courier_error err;
    memset(&err, 0x5A, sizeof err);
    CHECK_EQ(courier_engine_open(&e, cfg, &err), COURIER_E_STORE);
    courier_config_free(cfg);
    CHECK(e == NULL);
    CHECK_EQ(err.code, COURIER_E_STORE);
    CHECK_CONTAINS(err.message, "a-file");
    CHECK(err.os_error != 0 || err.store_error != 0);
    /* The store's own cache, opened at first use, where "<store>/cache" is a file: the manager
     * functions fail with the open's code and detail. */
    store_now = dir;
    cache_store_now = frozen_store_now = NULL;
    snprintf(path, sizeof path, "%s/cache", dir);
    REQUIRE((f = fopen(path, "w")));
    fclose(f);
    e = th_engine(on_store);
    REQUIRE(e);
    cache_functions_fail(e, COURIER_E_STORE);
    /* Each failure carries the open's own detail, not only its code. */
    courier_response *resp = NULL;
    memset(&err, 0x5A, sizeof err);
    CHECK_EQ(courier_cache_get_key(&resp, e, "GET http://127.0.0.1/x", 0, &err), COURIER_E_STORE);
    CHECK_CONTAINS(err.message, "cache");
    CHECK(err.os_error != 0 || err.store_error != 0);
    courier_engine_close(e);
}

static void cache_and_manager(void) {
    courier_engine *e = stored_engine(NULL, NULL);
    REQUIRE(e);
    cache_functions(e);
    courier_engine_close(e);
}

#ifdef COURIER_TEST_REDIS
static void cache_and_manager_on_redis(void) {
    const char *url = th_redis_url();
    REQUIRE(url && th_redis_flush() == 0);
    courier_engine *e = stored_engine(url, NULL);
    REQUIRE(e);
    cache_functions(e);
    courier_engine_close(e);
}

static void cache_on_redis_nobody_serves(void) {
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/0?timeout_ms=2000", th_free_port());
    courier_engine *e = stored_engine(url, NULL);
    REQUIRE(e);
    cache_functions_fail(e, COURIER_E_REDIS);
    courier_engine_close(e);
}
#endif

/* ---- the journal of frozen requests, resend policies ------------------------------------------------- */

static int always(const courier_frozen *f, int64_t age_ms, courier_reachability reach, void *user) {
    (void)f; (void)age_ms; (void)reach; (void)user;
    return 1;
}

static void freeze(courier_engine *e, const char *id) {
    courier_request *r = req("POST", "/echo/frozen");
    courier_request_set_body(r, "x", 1, "text/plain");
    courier_request_set_freeze(r, COURIER_FREEZE_MANUAL, 0, 0);
    courier_request_set_freeze_id(r, id);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_FROZEN);
    courier_response_free(resp);
    courier_request_free(r);
}

static void journal_functions(courier_engine *e) {
    OK(courier_resend_policy_add, e, "contract.always", always, NULL, NULL, NULL);
    courier_request *r = req("POST", "/echo/frozen");
    OK(courier_request_set_resend_policy, r, "contract.always");
    OK(courier_request_set_resend_policy, r, NULL);
    courier_request_free(r);

    courier_reachability_set_offline(e);
    freeze(e, "c-1");
    freeze(e, "c-2");
    freeze(e, "c-3");
    int64_t count = 0;
    OK(courier_frozen_count, &count, e);
    CHECK_EQ(count, 3);
    courier_frozen_list *list = NULL;
    OK(courier_frozen_list_requests, &list, e);
    courier_frozen_list_free(list);
    courier_frozen *f = NULL;
    OK(courier_frozen_get, &f, e, "c-1");
    courier_frozen_free(f);
    OK(courier_frozen_remove, e, "c-3");
    courier_reachability_set_online(e);
    OK(courier_frozen_resend, e, "c-1");
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    int code = -1, status = -1;
    int64_t at = 0;
    OK(courier_frozen_last_outcome, &code, &status, &at, e, "c-1");
    CHECK_EQ(code, COURIER_OK);
    CHECK_EQ(status, 200);
    OK(courier_frozen_replay, e, 0); /* c-2 is manual: not sent */
    CHECK_EQ(courier_frozen_wait_idle(e, 30000), COURIER_OK);
    int64_t removed = 0;
    OK(courier_frozen_remove_all, &removed, e);
    CHECK_EQ(removed, 1);
    OK(courier_resend_policy_remove, e, "contract.always");

    /* failures */
    f = NULL;
    CHECK_EQ(FAILS(courier_frozen_get, &f, e, "c-1"), COURIER_E_NOT_FOUND);
    CHECK_EQ(FAILS(courier_frozen_remove, e, "c-1"), COURIER_E_NOT_FOUND);
    CHECK_EQ(FAILS(courier_frozen_resend, e, "c-1"), COURIER_E_NOT_FOUND);
    CHECK_EQ(FAILS(courier_frozen_last_outcome, &code, &status, &at, e, "never-seen"), COURIER_E_NOT_FOUND);
    CHECK_EQ(FAILS(courier_frozen_count, NULL, e), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_frozen_list_requests, NULL, e), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_frozen_remove_all, &removed, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_frozen_replay, NULL, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_resend_policy_remove, e, "contract.always"), COURIER_E_NOT_FOUND);
    CHECK_EQ(FAILS(courier_resend_policy_add, e, "courier.mine", always, NULL, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    r = req("POST", "/echo/frozen");
    CHECK_EQ(FAILS(courier_request_set_resend_policy, r, "no spaces"), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
}

static void journal_and_frozen(void) {
    courier_engine *e = stored_engine(NULL, NULL);
    REQUIRE(e);
    journal_functions(e);
    courier_engine_close(e);
}

#ifdef COURIER_TEST_REDIS
static void journal_and_frozen_on_redis(void) {
    const char *url = th_redis_url();
    REQUIRE(url && th_redis_flush() == 0);
    courier_engine *e = stored_engine(NULL, url);
    REQUIRE(e);
    journal_functions(e);
    courier_engine_close(e);
}
#endif

/* ---- groups ----------------------------------------------------------------------------------------- */

static int build_submit(courier_group *g, size_t index, int prev_code, const courier_response *prev,
                        courier_request **out, void *user) {
    (void)prev_code; (void)prev; (void)out; (void)user;
    courier_request *r = req("GET", "/echo/submitted");
    /* (runs on this test's thread inside courier_group_start, or on the worker) */
    courier_error err;
    poison(&err);
    int rc = courier_group_submit(g, index, r, &err);
    if (rc != COURIER_OK) th_fail(__FILE__, __LINE__, "courier_group_submit: %d", rc);
    else check_cleared(&err, "courier_group_submit", __FILE__, __LINE__);
    poison(&err);
    int again = courier_group_submit(g, index, r, &err); /* only once */
    check_failed(again, &err, "courier_group_submit", __FILE__, __LINE__);
    courier_request_free(r);
    return COURIER_OK;
}
static void group_done(courier_group *g, int code, int64_t failed, void *user) {
    (void)g;
    (void)failed;
    latch_hit(user, code);
}

static void groups(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_BATCH) == COURIER_OK);
    courier_group_add_built(NULL, g, build_submit, NULL, NULL, 0);
    courier_group_add(NULL, g, req("GET", "/status/404"), COURIER_GROUP_CONTINUE_ON_FAILURE);
    courier_request *outside = req("GET", "/echo/outside");
    CHECK_EQ(FAILS(courier_group_submit, g, 0, outside), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(outside);
    latch l;
    latch_init(&l);
    REQUIRE(courier_group_start(g, group_done, &l, NULL) == COURIER_OK);
    REQUIRE(latch_wait(&l, 1) == 1);
    int code = -1;
    const courier_response *resp = NULL;
    uint64_t id = 0;
    OK(courier_group_result, &code, &resp, &id, g, 0);
    CHECK_EQ(code, COURIER_OK);
    /* a member that failed: its detail, with the code it has */
    courier_error err;
    poison(&err);
    CHECK_EQ(courier_group_result(&code, &resp, &id, g, 1, &err), COURIER_OK);
    CHECK_EQ(code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(err.code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(err.http_status, 404);
    CHECK(memchr(err.message, 0, sizeof err.message) != NULL);
    CHECK_EQ(FAILS(courier_group_result, &code, &resp, &id, g, 7), COURIER_E_NOT_FOUND);
    CHECK_EQ(FAILS(courier_group_result, &code, &resp, &id, NULL, 0), COURIER_E_INVALID_ARGUMENT);
    courier_group_free(g);
    courier_engine_close(e);
    latch_destroy(&l);
}

/* ---- logging ---------------------------------------------------------------------------------------- */

static void logging(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    OK(courier_log_set_component_level, e, COURIER_LOG_CACHE, COURIER_LOG_DEBUG);
    courier_log_level level = COURIER_LOG_OFF;
    OK(courier_log_get_component_level, &level, e, COURIER_LOG_CACHE);
    CHECK_EQ(level, COURIER_LOG_DEBUG);
    char path[700];
    snprintf(path, sizeof path, "%s/a.log", th_tmpdir());
    uint64_t sink = 0;
    OK(courier_log_add_file, &sink, e, COURIER_LOG_INFO, path, 1 << 20, 2);
    snprintf(path, sizeof path, "%s/b.log", th_tmpdir());
    OK(courier_log_add_rotating_file, &sink, e, COURIER_LOG_INFO, path, 0, 2, COURIER_LOG_ROTATE_DAILY);

    /* failures */
    CHECK_EQ(FAILS(courier_log_set_component_level, e, (courier_log_component)99, COURIER_LOG_DEBUG),
             COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_log_get_component_level, &level, e, (courier_log_component)99), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_log_add_file, &sink, e, COURIER_LOG_INFO, th_tmpdir(), 0, 1), COURIER_E_STORE);
    CHECK(err_fail_.os_error != 0);
    snprintf(path, sizeof path, "%s/no-such-dir/c.log", th_tmpdir());
    CHECK_EQ(FAILS(courier_log_add_rotating_file, &sink, e, COURIER_LOG_INFO, path, 0, 2, COURIER_LOG_ROTATE_SIZE),
             COURIER_E_STORE);
    CHECK_EQ(FAILS(courier_log_add_file, &sink, e, COURIER_LOG_INFO, path, -1, 1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_log_add_rotating_file, &sink, e, COURIER_LOG_INFO, path, 0, 2, (courier_log_rotation)9),
             COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
}

/* ---- network ---------------------------------------------------------------------------------------- */

static void network(void) {
    courier_network_kind kind = COURIER_NETWORK_UNKNOWN;
    int expensive = -1;
    /* "lo" exists on every Linux machine the tests run on (the loopback test server uses it) */
    OK(courier_network_link_kind, &kind, &expensive, "lo");
    CHECK_EQ(kind, COURIER_NETWORK_OTHER);
    CHECK_EQ(FAILS(courier_network_link_kind, &kind, &expensive, "no-such-if0"), COURIER_E_NOT_FOUND);
    CHECK_EQ(FAILS(courier_network_link_kind, &kind, &expensive, NULL), COURIER_E_INVALID_ARGUMENT);
}

/* ---- cookies ---------------------------------------------------------------------------------------- */

static void jar_off(courier_config *cfg) { courier_config_set_cookies(cfg, 0); }

static void cookies(void) {
    courier_engine *e = stored_engine(NULL, NULL);
    REQUIRE(e);
    courier_cookie c = {.size = sizeof c};
    courier_cookie_init(&c);
    c.domain = "127.0.0.1";
    c.name = "contract";
    c.value = "v";
    c.expires = (int64_t)time(NULL) + 3600;
    OK(courier_cookies_set, e, &c);
    courier_cookie_list *list = NULL;
    OK(courier_cookies_list, &list, e);
    CHECK_EQ(courier_cookie_list_count(list), 1);
    courier_cookie_list_free(list);
    OK(courier_cookies_remove, e, "127.0.0.1", NULL, "contract");
    OK(courier_cookies_set, e, &c);
    int64_t removed = 0;
    OK(courier_cookies_clear, &removed, e);
    CHECK_EQ(removed, 1);

    /* failures */
    CHECK_EQ(FAILS(courier_cookies_remove, e, "127.0.0.1", NULL, "contract"), COURIER_E_NOT_FOUND);
    c.name = "bad;name";
    CHECK_EQ(FAILS(courier_cookies_set, e, &c), COURIER_E_INVALID_HEADER);
    CHECK_EQ(FAILS(courier_cookies_list, NULL, e), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_cookies_clear, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);

    e = th_engine(jar_off);
    REQUIRE(e);
    c.name = "contract";
    courier_cookie_list *none = NULL;
    CHECK_EQ(FAILS(courier_cookies_list, &none, e), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_cookies_set, e, &c), COURIER_E_INVALID_ARGUMENT);
    CHECK(FAILS(courier_cookies_remove, e, "127.0.0.1", NULL, "contract") != COURIER_OK);
    CHECK(FAILS(courier_cookies_clear, &removed, e) != COURIER_OK);
    courier_engine_close(e);
}

/* ---- HSTS ------------------------------------------------------------------------------------------- */

static void hsts_off(courier_config *cfg) { courier_config_set_hsts(cfg, 0); }

static void hsts(void) {
    courier_engine *e = stored_engine(NULL, NULL);
    REQUIRE(e);
    char path[700];
    snprintf(path, sizeof path, "%s/hsts.txt", th_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("contract.example \"unlimited\"\n", f);
    fclose(f);
    int64_t n = 0;
    OK(courier_hsts_preload, &n, e, path);
    CHECK_EQ(n, 1);
    courier_hsts_entries *list = NULL;
    OK(courier_hsts_list, &list, e);
    CHECK_EQ(courier_hsts_entries_count(list), 1);
    courier_hsts_entries_free(list);
    OK(courier_hsts_clear, &n, e);
    CHECK_EQ(n, 1);

    /* failures */
    CHECK_EQ(FAILS(courier_hsts_preload, &n, e, "/no/such/hsts.txt"), COURIER_E_NOT_FOUND);
    CHECK_EQ(FAILS(courier_hsts_preload, &n, e, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_hsts_list, NULL, e), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_hsts_clear, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);

    e = th_engine(hsts_off);
    REQUIRE(e);
    courier_hsts_entries *none = NULL;
    CHECK_EQ(FAILS(courier_hsts_list, &none, e), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_hsts_clear, &n, e), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(FAILS(courier_hsts_preload, &n, e, path), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
}


/* Streams and server-sent events: each succeeding read clears err. */
static void streams_and_events(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = req("GET", "/bytes/100");
    courier_stream *s = NULL;
    OK(courier_stream_open, &s, e, r, NULL, NULL, NULL);
    courier_request_free(r);
    REQUIRE(s);
    const courier_response *head = NULL;
    OK(courier_stream_head, &head, s, 10000);
    unsigned char buf[10];
    size_t n = 0;
    OK(courier_stream_read, &n, s, buf, sizeof buf, 10000);
    const void *data = NULL;
    size_t len = 0;
    OK(courier_stream_next, &data, &len, s, 10000);
    CHECK_EQ(FAILS(courier_stream_read, &n, s, buf, 0, 0), COURIER_E_INVALID_ARGUMENT);
    courier_stream_free(s);
    r = req("GET", "/bytes/600");
    OK(courier_stream_open, &s, e, r, NULL, NULL, NULL);
    courier_request_free(r);
    const char *line = NULL;
    OK(courier_stream_next_line, &line, &len, s, 10000);
    CHECK_EQ(FAILS(courier_stream_next_line, NULL, &len, s, 0), COURIER_E_INVALID_ARGUMENT);
    courier_stream_free(s);
    r = req("GET", "/sse?per=1&total=1");
    courier_sse *es = NULL;
    OK(courier_sse_open, &es, e, r, NULL, NULL, NULL);
    courier_request_free(r);
    REQUIRE(es);
    courier_sse_event ev = {.size = sizeof ev};
    OK(courier_sse_next, &ev, es, 10000);
    CHECK_EQ(FAILS(courier_sse_next, &ev, es, 10000), COURIER_E_HTTP_STATUS); /* then 204 */
    courier_sse_free(es);
    courier_engine_close(e);
}

/* ---- WebSocket ------------------------------------------------------------------------------------ */

/* A one-connection WebSocket server: answers the handshake (101 with the right accept) and sends
 * one text frame "hi", then reads until the client goes. */
static void *ws_serve_once(void *arg) {
    int lfd = (int)(intptr_t)arg;
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0) return NULL;
    char req[4096] = "";
    size_t n = 0;
    while (n < sizeof req - 1 && !strstr(req, "\r\n\r\n")) {
        ssize_t k = read(fd, req + n, sizeof req - 1 - n);
        if (k <= 0) break;
        n += (size_t)k;
        req[n] = 0;
    }
    const char *key = strstr(req, "Sec-WebSocket-Key: ");
    char cat[128] = "";
    if (key) sscanf(key + 19, "%24s", cat);
    strcat(cat, "258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    EVP_Digest(cat, strlen(cat), md, &mdlen, EVP_sha1(), NULL);
    unsigned char accept_b64[64];
    EVP_EncodeBlock(accept_b64, md, (int)mdlen);
    char resp[512];
    int len = snprintf(resp, sizeof resp,
                       "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Accept: %s\r\n\r\n\x81\x02hi",
                       accept_b64);
    if (write(fd, resp, (size_t)len) != len) {
        close(fd);
        return NULL;
    }
    while (read(fd, req, sizeof req) > 0) {
    }
    close(fd);
    return NULL;
}

static void websocket(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    int port = 0;
    int lfd = th_silent_listener(&port);
    REQUIRE(lfd >= 0);
    pthread_t th;
    pthread_create(&th, NULL, ws_serve_once, (void *)(intptr_t)lfd);
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/", port);
    courier_request *r = req("GET", url);
    courier_ws *ws = NULL;
    OK(courier_ws_open, &ws, e, r, NULL, NULL, NULL, NULL);
    OK(courier_ws_send, ws, COURIER_WS_TEXT, "x", 1);
    courier_ws_message m = {.size = sizeof m};
    OK(courier_ws_next, &m, ws, 10000);
    CHECK_EQ(m.len, 2);
    /* failures */
    CHECK_EQ(FAILS(courier_ws_send, ws, COURIER_WS_TEXT, "\xff", 1), COURIER_E_INVALID_ENCODING);
    CHECK_EQ(FAILS(courier_ws_next, &m, ws, 0), COURIER_E_AGAIN);
    courier_ws_free(ws);
    CHECK_EQ(FAILS(courier_ws_open, &ws, e, NULL, NULL, NULL, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
    pthread_join(th, NULL);
    close(lfd);
    courier_engine_close(e);
}

/* ---- stubs and HAR (stubs.c, har.c) ------------------------------------------------------------ */

static void stubs_and_har(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_stub *s = NULL;
    OK(courier_stub_new, &s, "GET", "/echo/", COURIER_URL_PREFIX);
    REQUIRE(s);
    courier_stub_add_response(s, 200, "x", 1, NULL);
    CHECK_EQ(courier_engine_add_stub(NULL, e, s), COURIER_OK);
    courier_stub_free(s);
    s = NULL;
    CHECK_EQ(FAILS(courier_stub_new, &s, "GET", "[", COURIER_URL_REGEX), COURIER_E_INVALID_ARGUMENT);
    char path[600];
    snprintf(path, sizeof path, "%s/contract.har", th_tmpdir());
    OK(courier_engine_record_har, e, path);
    courier_request *r = req("GET", "/echo/har");
    courier_response *resp = NULL;
    OK(courier_send_sync, &resp, e, r);
    courier_response_free(resp);
    courier_request_free(r);
    OK(courier_engine_record_har, e, NULL);
    size_t n = 0;
    OK(courier_engine_replay_har, &n, e, path);
    CHECK_EQ(n, 1);
    snprintf(path, sizeof path, "%s/no-such.har", th_tmpdir());
    CHECK_EQ(FAILS(courier_engine_replay_har, &n, e, path), COURIER_E_NOT_FOUND);
    courier_engine_close(e);
}

#ifdef COURIER_TEST_REDIS
#define REDIS_TESTS , T(cache_and_manager_on_redis), T(cache_on_redis_nobody_serves), T(journal_and_frozen_on_redis)
#else
#define REDIS_TESTS
#endif
TESTS_MAIN(T(engine_and_send), T(send_refusals), T(errors_from_callbacks), T(responses), T(json_tape_mapping),
           T(routes_and_catalogue), T(cache_and_manager), T(cache_store_that_cannot_open), T(journal_and_frozen), T(groups), T(logging),
           T(network), T(cookies), T(hsts), T(streams_and_events), T(websocket), T(stubs_and_har) REDIS_TESTS)
