/*
 * stubs_test.c — engine-wide stubs (matching rules, sequences over retries, delay, error,
 * unmatched requests failing or passing through to the loopback server, the record, judging like
 * real answers) and HAR 1.2: a file recorded from loopback traffic, checked against the spec's
 * required fields, and replayed as stubs.
 */
#include "harness.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

static courier_request *req(const char *method, const char *path) {
    courier_request *r = NULL;
    courier_request_new(&r, method, path);
    return r;
}

/* Sends and frees the request; *out gets the response (may be NULL: freed). */
static int send_path(courier_engine *e, const char *method, const char *path, courier_response **out) {
    courier_request *r = req(method, path);
    courier_response *resp = NULL;
    int rc = courier_send_sync(&resp, e, r, NULL);
    courier_request_free(r);
    if (out) *out = resp;
    else courier_response_free(resp);
    return rc;
}

static const char *body_of(const courier_response *resp) {
    return resp ? (const char *)courier_response_body(resp, NULL) : "(none)";
}

/* A stub answering `body` with status 200. */
static courier_stub *stub(const char *method, const char *pattern, courier_url_match m, const char *body) {
    courier_stub *s = NULL;
    courier_stub_new(&s, method, pattern, m, NULL);
    if (s && body) courier_stub_add_response(s, 200, body, strlen(body), "text/plain");
    return s;
}

static uint64_t add(courier_engine *e, courier_stub *s) {
    uint64_t id = 0;
    CHECK_EQ(courier_engine_add_stub(&id, e, s), COURIER_OK);
    courier_stub_free(s);
    return id;
}

static void tweak_stubs_only(courier_config *c) { courier_config_set_stub_mode(c, COURIER_STUBS_ONLY); }

static int wants_secret(const courier_stub_request *q, void *user) {
    (void)user;
    size_t len = 0;
    const char *body = courier_stub_request_body(q, &len);
    return body && len == 6 && memcmp(body, "secret", 6) == 0;
}

static void test_matching_rules(void) {
    courier_engine *e = th_engine(tweak_stubs_only);
    REQUIRE(e);
    long before = cts_server_path_count(th_server(), "/users/1");
    add(e, stub("GET", "/users/1", COURIER_URL_EXACT, "exact"));
    add(e, stub(NULL, "/files/", COURIER_URL_PREFIX, "prefix"));
    add(e, stub("GET", "/glob/*/item?", COURIER_URL_GLOB, "glob"));
    add(e, stub("GET", "^/re/[0-9]+$", COURIER_URL_REGEX, "regex"));
    add(e, stub("GET", th_url("/full"), COURIER_URL_EXACT, "whole URL"));
    courier_stub *h = stub("GET", "/h", COURIER_URL_EXACT, "with header");
    CHECK_EQ(courier_stub_match_header(h, "x-token", "abc"), COURIER_OK);
    add(e, h);
    courier_stub *p = stub("POST", "/login", COURIER_URL_EXACT, "predicate");
    CHECK_EQ(courier_stub_set_predicate(p, wants_secret, NULL, NULL), COURIER_OK);
    add(e, p);
    courier_response *resp = NULL;
    CHECK_EQ(send_path(e, "GET", "/users/1", &resp), COURIER_OK);
    CHECK_STR(body_of(resp), "exact");
    CHECK_STR(courier_response_header(resp, "Content-Type"), "text/plain");
    courier_response_free(resp);
    CHECK_EQ(send_path(e, "GET", "/users/1?x=1", NULL), COURIER_E_NO_STUB); /* exact: the query counts */
    CHECK_EQ(send_path(e, "POST", "/users/1", NULL), COURIER_E_NO_STUB);  /* method */
    CHECK_EQ(send_path(e, "DELETE", "/files/a/b", &resp), COURIER_OK);
    CHECK_STR(body_of(resp), "prefix");
    courier_response_free(resp);
    CHECK_EQ(send_path(e, "GET", "/glob/a/b/item7", &resp), COURIER_OK);
    CHECK_STR(body_of(resp), "glob");
    courier_response_free(resp);
    CHECK_EQ(send_path(e, "GET", "/glob/a/item77", NULL), COURIER_E_NO_STUB);
    CHECK_EQ(send_path(e, "GET", "/re/42", &resp), COURIER_OK);
    CHECK_STR(body_of(resp), "regex");
    courier_response_free(resp);
    CHECK_EQ(send_path(e, "GET", "/re/4x", NULL), COURIER_E_NO_STUB);
    CHECK_EQ(send_path(e, "GET", "/full", &resp), COURIER_OK);
    CHECK_STR(body_of(resp), "whole URL");
    courier_response_free(resp);
    CHECK_EQ(send_path(e, "GET", "/h", NULL), COURIER_E_NO_STUB);
    courier_request *r = req("GET", "/h");
    courier_request_add_header(r, "X-Token", "abc");
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_STR(body_of(resp), "with header");
    courier_response_free(resp);
    courier_request_free(r);
    r = req("POST", "/login");
    courier_request_set_body(r, "wrong", 5, "text/plain");
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_NO_STUB);
    courier_request_set_body(r, "secret", 6, "text/plain");
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_STR(body_of(resp), "predicate");
    courier_response_free(resp);
    courier_request_free(r);
    /* The stub added last wins; removing it uncovers the earlier one. */
    uint64_t over = add(e, stub("GET", "/users/", COURIER_URL_PREFIX, "override"));
    CHECK_EQ(send_path(e, "GET", "/users/1", &resp), COURIER_OK);
    CHECK_STR(body_of(resp), "override");
    courier_response_free(resp);
    CHECK_EQ(courier_engine_remove_stub(e, over), COURIER_OK);
    CHECK_EQ(courier_engine_remove_stub(e, over), COURIER_E_NOT_FOUND);
    CHECK_EQ(send_path(e, "GET", "/users/1", &resp), COURIER_OK);
    CHECK_STR(body_of(resp), "exact");
    courier_response_free(resp);
    /* Clearing removes every stub: the same request then meets none (and still goes nowhere). */
    size_t recorded = courier_engine_stub_request_count(e);
    CHECK_EQ(courier_engine_clear_stubs(e), COURIER_OK);
    CHECK_EQ(send_path(e, "GET", "/users/1", NULL), COURIER_E_NO_STUB);
    CHECK_EQ(courier_engine_stub_request_count(e), recorded + 1); /* the record stays, and grows */
    CHECK_EQ(cts_server_path_count(th_server(), "/users/1"), before); /* nothing went on the wire */
    /* A bad regular expression is refused when the stub is made. */
    courier_stub *bad = NULL;
    courier_error err;
    CHECK_EQ(courier_stub_new(&bad, "GET", "(", COURIER_URL_REGEX, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK(bad == NULL);
    courier_stub *empty = stub("GET", "/e", COURIER_URL_EXACT, NULL);
    CHECK_EQ(courier_engine_add_stub(NULL, e, empty), COURIER_E_INVALID_ARGUMENT); /* no answer */
    CHECK_EQ(courier_stub_add_header(empty, "X", "1"), COURIER_E_INVALID_ARGUMENT);
    courier_stub_free(empty);
    courier_engine_close(e);
}

static void tweak_retry(courier_config *c) {
    courier_config_set_stub_mode(c, COURIER_STUBS_ONLY);
    courier_config_set_retry(c, 3, 1, 2, 0);
}

static void test_sequence_one_answer_per_attempt(void) {
    courier_engine *e = th_engine(tweak_retry);
    REQUIRE(e);
    courier_stub *s = NULL;
    REQUIRE(courier_stub_new(&s, "GET", "/flaky", COURIER_URL_EXACT, NULL) == COURIER_OK);
    CHECK_EQ(courier_stub_add_response(s, 503, "busy", 4, NULL), COURIER_OK);
    CHECK_EQ(courier_stub_add_error(s, COURIER_E_CANNOT_CONNECT), COURIER_OK);
    CHECK_EQ(courier_stub_add_response(s, 200, "ok", 2, NULL), COURIER_OK);
    uint64_t id = add(e, s);
    courier_response *resp = NULL;
    CHECK_EQ(send_path(e, "GET", "/flaky", &resp), COURIER_OK); /* 503, cannot connect, then 200 */
    CHECK_STR(body_of(resp), "ok");
    int attempts = 0;
    courier_response_attempts(&attempts, NULL, resp);
    CHECK_EQ(attempts, 3);
    courier_response_free(resp);
    CHECK_EQ(courier_engine_stub_request_count(e), 3); /* each attempt is recorded */
    courier_stub_request *q = NULL;
    CHECK_EQ(courier_engine_stub_request_at(&q, e, 2), COURIER_OK);
    CHECK_EQ(courier_stub_request_stub_id(q), id);
    courier_stub_request_free(q);
    /* After the last answer, the last answers again. */
    CHECK_EQ(send_path(e, "GET", "/flaky", &resp), COURIER_OK);
    CHECK_STR(body_of(resp), "ok");
    courier_response_free(resp);
    courier_engine_close(e);
}

typedef struct done_rec {
    atomic_int done;
    atomic_int code;
    atomic_int seq;
} done_rec;
static atomic_int done_counter;
static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id, (void)err;
    done_rec *d = user;
    courier_response_free(resp);
    atomic_store(&d->code, code);
    atomic_store(&d->seq, atomic_fetch_add(&done_counter, 1));
    atomic_store(&d->done, 1);
}
static void wait_done(done_rec *d) {
    int64_t deadline = th_now_ms() + 10000;
    while (!atomic_load(&d->done) && th_now_ms() < deadline) usleep(2000);
    CHECK(atomic_load(&d->done));
}

static void test_delay_and_error(void) {
    courier_engine *e = th_engine(tweak_stubs_only);
    REQUIRE(e);
    courier_stub *s = stub("GET", "/slow", COURIER_URL_EXACT, "late");
    CHECK_EQ(courier_stub_set_delay_ms(s, 60000), COURIER_OK);
    CHECK_EQ(courier_stub_set_delay_ms(s, -1), COURIER_E_INVALID_ARGUMENT);
    add(e, s);
    add(e, stub("GET", "/fast", COURIER_URL_EXACT, "soon"));
    s = stub("GET", "/down", COURIER_URL_EXACT, NULL);
    CHECK_EQ(courier_stub_add_error(s, COURIER_E_TIMEOUT), COURIER_OK);
    CHECK_EQ(courier_stub_add_error(s, 1), COURIER_E_INVALID_ARGUMENT);
    add(e, s);
    done_rec slow = {0}, fast = {0};
    uint64_t slow_id = 0;
    courier_request *r = req("GET", "/slow");
    CHECK_EQ(courier_send(&slow_id, e, r, on_done, &slow, NULL), COURIER_OK);
    courier_request_free(r);
    r = req("GET", "/fast");
    CHECK_EQ(courier_send(NULL, e, r, on_done, &fast, NULL), COURIER_OK);
    courier_request_free(r);
    wait_done(&fast);
    CHECK_EQ(atomic_load(&fast.code), COURIER_OK);
    /* The delayed answer waits on a timer (the worker answered /fast meanwhile): cancel it. */
    CHECK_EQ(courier_cancel(e, slow_id), COURIER_OK);
    wait_done(&slow);
    CHECK_EQ(atomic_load(&slow.code), COURIER_E_CANCELLED);
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(courier_send_sync(&resp, e, (r = req("GET", "/down")), &err), COURIER_E_TIMEOUT);
    CHECK(resp == NULL);
    CHECK_EQ(err.code, COURIER_E_TIMEOUT);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_unmatched_fails_or_passes_through(void) {
    courier_engine *e = th_engine(tweak_stubs_only);
    REQUIRE(e);
    long before = cts_server_path_count(th_server(), "/json");
    courier_error err;
    courier_response *resp = NULL;
    courier_request *r = req("GET", "/json");
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_NO_STUB);
    CHECK_EQ(err.code, COURIER_E_NO_STUB);
    CHECK(resp == NULL);
    CHECK_EQ(cts_server_path_count(th_server(), "/json"), before);
    CHECK_STR(courier_strerror(COURIER_E_NO_STUB), courier_strerror(COURIER_E_NO_STUB)); /* has a text */
    CHECK(strcmp(courier_strerror(COURIER_E_NO_STUB), "unknown error") != 0);
    /* Pass-through: the loopback server answers; the record still shows the request. */
    CHECK_EQ(courier_engine_set_stub_mode(e, COURIER_STUBS_PASS_THROUGH), COURIER_OK);
    CHECK_EQ(courier_engine_stub_mode(e), COURIER_STUBS_PASS_THROUGH);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 200);
    CHECK_CONTAINS(body_of(resp), "courier");
    courier_response_free(resp);
    CHECK_EQ(cts_server_path_count(th_server(), "/json"), before + 1);
    CHECK_EQ(courier_engine_stub_request_count(e), 2);
    courier_stub_request *q = NULL;
    CHECK_EQ(courier_engine_stub_request_at(&q, e, 1), COURIER_OK);
    CHECK_EQ(courier_stub_request_stub_id(q), 0);
    courier_stub_request_free(q);
    /* Off: nothing is consulted or recorded. */
    CHECK_EQ(courier_engine_set_stub_mode(e, COURIER_STUBS_OFF), COURIER_OK);
    add(e, stub("GET", "/json", COURIER_URL_EXACT, "stubbed"));
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_CONTAINS(body_of(resp), "courier");
    courier_response_free(resp);
    CHECK_EQ(courier_engine_stub_request_count(e), 2);
    CHECK_EQ(courier_engine_set_stub_mode(e, (courier_stub_mode)7), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_record_of_requests(void) {
    courier_engine *e = th_engine(tweak_stubs_only);
    REQUIRE(e);
    add(e, stub(NULL, "/", COURIER_URL_PREFIX, "any"));
    courier_request *r = req("POST", "/orders?src=app");
    courier_request_add_header(r, "X-Trace", "t1");
    courier_request_set_body(r, "{\"qty\":2}", 9, "application/json");
    CHECK_EQ(courier_send_sync(NULL, e, r, NULL), COURIER_OK);
    courier_request_free(r);
    CHECK_EQ(send_path(e, "GET", "/second", NULL), COURIER_OK);
    REQUIRE(courier_engine_stub_request_count(e) == 2);
    courier_stub_request *q = NULL;
    REQUIRE(courier_engine_stub_request_at(&q, e, 0) == COURIER_OK);
    CHECK_EQ(courier_engine_clear_stub_requests(e), COURIER_OK); /* q stays valid */
    CHECK_EQ(courier_engine_stub_request_count(e), 0);
    CHECK_STR(courier_stub_request_method(q), "POST");
    CHECK_STR(courier_stub_request_url(q), th_url("/orders?src=app"));
    CHECK_STR(courier_stub_request_header(q, "x-trace"), "t1");
    CHECK_STR(courier_stub_request_header(q, "Content-Type"), "application/json");
    size_t len = 0;
    const char *body = courier_stub_request_body(q, &len);
    CHECK_EQ(len, 9);
    CHECK(body && memcmp(body, "{\"qty\":2}", 9) == 0);
    size_t n = courier_stub_request_header_count(q);
    CHECK(n >= 2);
    const char *name = NULL, *value = NULL;
    CHECK_EQ(courier_stub_request_header_at(&name, &value, q, 0), COURIER_OK);
    CHECK(name && value);
    CHECK_EQ(courier_stub_request_header_at(&name, &value, q, n), COURIER_E_NOT_FOUND);
    CHECK(courier_stub_request_stub_id(q) != 0);
    courier_stub_request_free(q);
    CHECK_EQ(courier_engine_stub_request_at(&q, e, 0), COURIER_E_NOT_FOUND);
    courier_engine_close(e);
}

static int reject_bad(const courier_response *resp, void *user) {
    (void)user;
    return strcmp((const char *)courier_response_body(resp, NULL), "bad") != 0;
}

static int events_seen;
static void count_finished(const courier_event *ev, void *user) {
    (void)user;
    if (ev->kind == COURIER_EVENT_FINISHED && ev->http_status == 404) events_seen++;
}

/* Stubs from the configuration; answers judged like real ones (status, validator, events) and a
 * file body. */
static void tweak_config_stubs(courier_config *c) {
    courier_config_set_stub_mode(c, COURIER_STUBS_ONLY);
    courier_stub *s = stub("GET", "/missing", COURIER_URL_EXACT, NULL);
    courier_stub_add_response(s, 404, "{\"error\":\"none\"}", 16, "application/json");
    courier_stub_add_header(s, "X-Why", "gone");
    courier_config_add_stub(c, s);
    courier_stub_free(s);
    courier_config_add_stub(c, (s = stub("GET", "/validated", COURIER_URL_EXACT, "bad")));
    courier_stub_free(s);
    char path[600];
    snprintf(path, sizeof path, "%s/user.json", th_tmpdir());
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("{\"id\":7}", f);
        fclose(f);
    }
    s = stub("GET", "/user", COURIER_URL_EXACT, NULL);
    courier_stub_add_file(s, 200, path);
    courier_config_add_stub(c, s);
    courier_stub_free(s);
}

static void test_config_stubs_are_judged(void) {
    courier_engine *e = th_engine(tweak_config_stubs);
    REQUIRE(e);
    CHECK_EQ(courier_engine_stub_mode(e), COURIER_STUBS_ONLY);
    CHECK_EQ(courier_monitor_add(NULL, e, 1u << COURIER_EVENT_FINISHED, count_finished, NULL, NULL), COURIER_OK);
    courier_response *resp = NULL;
    courier_error err;
    courier_request *r = req("GET", "/missing");
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_HTTP_STATUS);
    CHECK_EQ(err.http_status, 404);
    CHECK_STR(courier_response_header(resp, "X-Why"), "gone");
    CHECK_STR(body_of(resp), "{\"error\":\"none\"}");
    CHECK_EQ(events_seen, 1);
    courier_response_free(resp);
    courier_request_free(r);
    r = req("GET", "/validated");
    courier_request_set_validator(r, reject_bad, NULL, NULL);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_INVALID_RESULT);
    courier_response_free(resp);
    courier_request_free(r);
    CHECK_EQ(send_path(e, "GET", "/user", &resp), COURIER_OK);
    CHECK_STR(body_of(resp), "{\"id\":7}");
    CHECK_STR(courier_response_header(resp, "Content-Type"), "application/json");
    courier_response_free(resp);
    courier_engine_close(e);
}


/* A stubbed answer is stored by the cache like a real one; a hit then answers before the stubs
 * (nothing more is recorded, and the stub's next answer is not taken). */
static void test_cache_stores_stubbed_answers(void) {
    courier_engine *e = th_engine(tweak_stubs_only);
    REQUIRE(e);
    courier_stub *s = stub("GET", "/cached", COURIER_URL_EXACT, "first");
    courier_stub_add_response(s, 200, "second", 6, "text/plain");
    add(e, s);
    courier_request *r = req("GET", "/cached");
    courier_request_set_cache_policy(r, COURIER_CACHE_CACHE_FIRST);
    courier_request_set_cache_expiry_ms(r, 60000);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_STR(body_of(resp), "first");
    CHECK_EQ(courier_response_cache_status(resp), COURIER_CACHE_STATUS_NETWORK);
    courier_response_free(resp);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_STR(body_of(resp), "first");
    CHECK_EQ(courier_response_cache_status(resp), COURIER_CACHE_STATUS_HIT);
    courier_response_free(resp);
    courier_request_free(r);
    CHECK_EQ(courier_engine_stub_request_count(e), 1);
    courier_engine_close(e);
}

/* ---- HAR ------------------------------------------------------------------------------------- */

/* The HAR 1.2 spec's required fields (http://www.softwareishard.com/blog/har-12-spec/), with
 * their types. */
static bool has(json_t *o, const char *key, int type) {
    json_t *v = json_object_get(o, key);
    if (!v) {
        th_fail(__FILE__, __LINE__, "HAR: missing \"%s\"", key);
        return false;
    }
    bool ok = type == JSON_REAL ? json_is_number(v) : type == JSON_TRUE ? json_is_boolean(v) : (int)json_typeof(v) == type;
    if (!ok) th_fail(__FILE__, __LINE__, "HAR: \"%s\" has the wrong type", key);
    return ok;
}

static void check_name_values(json_t *a) {
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) {
        has(v, "name", JSON_STRING);
        has(v, "value", JSON_STRING);
    }
}

static void validate_har(json_t *root, size_t *nentries) {
    REQUIRE(has(root, "log", JSON_OBJECT));
    json_t *log = json_object_get(root, "log");
    has(log, "version", JSON_STRING);
    CHECK_STR(json_string_value(json_object_get(log, "version")), "1.2");
    REQUIRE(has(log, "creator", JSON_OBJECT));
    has(json_object_get(log, "creator"), "name", JSON_STRING);
    has(json_object_get(log, "creator"), "version", JSON_STRING);
    REQUIRE(has(log, "entries", JSON_ARRAY));
    json_t *entries = json_object_get(log, "entries");
    *nentries = json_array_size(entries);
    size_t i;
    json_t *en;
    json_array_foreach(entries, i, en) {
        has(en, "startedDateTime", JSON_STRING);
        const char *when = json_string_value(json_object_get(en, "startedDateTime"));
        CHECK(when && strlen(when) >= 20 && when[4] == '-' && when[10] == 'T'); /* ISO 8601 */
        has(en, "time", JSON_REAL);
        has(en, "cache", JSON_OBJECT);
        json_t *rq = json_object_get(en, "request"), *rs = json_object_get(en, "response");
        json_t *tm = json_object_get(en, "timings");
        if (!has(en, "request", JSON_OBJECT) || !has(en, "response", JSON_OBJECT) || !has(en, "timings", JSON_OBJECT))
            return;
        has(rq, "method", JSON_STRING);
        has(rq, "url", JSON_STRING);
        has(rq, "httpVersion", JSON_STRING);
        if (has(rq, "cookies", JSON_ARRAY)) check_name_values(json_object_get(rq, "cookies"));
        if (has(rq, "headers", JSON_ARRAY)) check_name_values(json_object_get(rq, "headers"));
        if (has(rq, "queryString", JSON_ARRAY)) check_name_values(json_object_get(rq, "queryString"));
        has(rq, "headersSize", JSON_INTEGER);
        has(rq, "bodySize", JSON_INTEGER);
        json_t *post = json_object_get(rq, "postData");
        if (post) {
            has(post, "mimeType", JSON_STRING);
            has(post, "text", JSON_STRING);
        }
        has(rs, "status", JSON_INTEGER);
        has(rs, "statusText", JSON_STRING);
        has(rs, "httpVersion", JSON_STRING);
        if (has(rs, "cookies", JSON_ARRAY)) check_name_values(json_object_get(rs, "cookies"));
        if (has(rs, "headers", JSON_ARRAY)) check_name_values(json_object_get(rs, "headers"));
        if (has(rs, "content", JSON_OBJECT)) {
            has(json_object_get(rs, "content"), "size", JSON_INTEGER);
            has(json_object_get(rs, "content"), "mimeType", JSON_STRING);
        }
        has(rs, "redirectURL", JSON_STRING);
        has(rs, "headersSize", JSON_INTEGER);
        has(rs, "bodySize", JSON_INTEGER);
        has(tm, "send", JSON_REAL);
        has(tm, "wait", JSON_REAL);
        has(tm, "receive", JSON_REAL);
        /* time is the sum of the timings that apply (-1: does not apply; ssl is within connect) */
        double sum = 0;
        const char *parts[] = {"blocked", "dns", "connect", "send", "wait", "receive"};
        for (size_t k = 0; k < 6; k++) {
            double v = json_number_value(json_object_get(tm, parts[k]));
            if (v > 0) sum += v;
        }
        double total = json_number_value(json_object_get(en, "time"));
        CHECK(sum - total < 0.01 && total - sum < 0.01);
    }
}

static json_t *entry_for(json_t *root, const char *method, const char *url, size_t nth) {
    json_t *entries = json_object_get(json_object_get(root, "log"), "entries");
    size_t i;
    json_t *en;
    json_array_foreach(entries, i, en) {
        json_t *rq = json_object_get(en, "request");
        if (strcmp(json_string_value(json_object_get(rq, "method")), method) == 0 &&
            strcmp(json_string_value(json_object_get(rq, "url")), url) == 0 && nth-- == 0)
            return en;
    }
    return NULL;
}

static void test_har_recorded_and_replayed(void) {
    char har[600];
    snprintf(har, sizeof har, "%s/traffic.har", th_tmpdir());
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    CHECK_EQ(courier_engine_record_har(e, "/no/such/dir/x.har", &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_engine_record_har(e, har, &err), COURIER_OK);
    /* Real loopback traffic: JSON, a POST with a body, binary bytes, a count asked twice. */
    courier_response *json_resp = NULL, *bytes_resp = NULL, *c1 = NULL, *c2 = NULL;
    CHECK_EQ(send_path(e, "GET", "/json?x=1&y=two", &json_resp), COURIER_OK);
    courier_request *r = req("POST", "/echo/post");
    courier_request_add_header(r, "Cookie", "a=1; b=2");
    courier_request_set_body(r, "hello=world", 11, "application/x-www-form-urlencoded");
    courier_response *echo_resp = NULL;
    CHECK_EQ(courier_send_sync(&echo_resp, e, r, NULL), COURIER_OK);
    courier_request_free(r);
    CHECK_EQ(send_path(e, "GET", "/bytes/300", &bytes_resp), COURIER_OK);
    r = req("GET", "/count");
    courier_request_set_coalesce(r, 0);
    CHECK_EQ(courier_send_sync(&c1, e, r, NULL), COURIER_OK);
    CHECK_EQ(courier_send_sync(&c2, e, r, NULL), COURIER_OK);
    courier_request_free(r);
    CHECK(strcmp(body_of(c1), body_of(c2)) != 0); /* the server counted in between */
    CHECK_EQ(courier_engine_record_har(e, NULL, NULL), COURIER_OK); /* stop */
    CHECK_EQ(send_path(e, "GET", "/json", NULL), COURIER_OK);      /* not recorded */
    courier_engine_close(e);

    json_error_t jerr;
    json_t *root = json_load_file(har, 0, &jerr);
    REQUIRE(root);
    size_t n = 0;
    validate_har(root, &n);
    CHECK_EQ(n, 5);
    json_t *en = entry_for(root, "GET", th_url("/json?x=1&y=two"), 0);
    REQUIRE(en);
    json_t *q = json_object_get(json_object_get(en, "request"), "queryString");
    CHECK_EQ(json_array_size(q), 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(q, 1), "value")), "two");
    json_t *rs = json_object_get(en, "response");
    CHECK_EQ(json_integer_value(json_object_get(rs, "status")), 200);
    CHECK_STR(json_string_value(json_object_get(rs, "statusText")), "OK");
    CHECK_STR(json_string_value(json_object_get(json_object_get(rs, "content"), "text")), body_of(json_resp));
    en = entry_for(root, "POST", th_url("/echo/post"), 0);
    REQUIRE(en);
    json_t *rq = json_object_get(en, "request");
    CHECK_STR(json_string_value(json_object_get(json_object_get(rq, "postData"), "text")), "hello=world");
    CHECK_EQ(json_integer_value(json_object_get(rq, "bodySize")), 11);
    CHECK_EQ(json_array_size(json_object_get(rq, "cookies")), 2);
    en = entry_for(root, "GET", th_url("/bytes/300"), 0);
    REQUIRE(en);
    json_t *content = json_object_get(json_object_get(en, "response"), "content");
    CHECK_EQ(json_integer_value(json_object_get(content, "size")), 300);
    json_decref(root);

    /* Replay: an engine that reaches no network answers the same from the file. */
    e = th_engine(tweak_stubs_only);
    REQUIRE(e);
    long before = cts_server_path_count(th_server(), "/count");
    size_t added = 0;
    CHECK_EQ(courier_engine_replay_har(&added, e, har, &err), COURIER_OK);
    CHECK_EQ(added, 4); /* /count's two entries are one stub */
    courier_response *resp = NULL;
    CHECK_EQ(send_path(e, "GET", "/json?x=1&y=two", &resp), COURIER_OK);
    CHECK_STR(body_of(resp), body_of(json_resp));
    CHECK_STR(courier_response_header(resp, "Content-Type"), courier_response_header(json_resp, "Content-Type"));
    courier_response_free(resp);
    r = req("POST", "/echo/post");
    courier_request_set_body(r, "hello=world", 11, "application/x-www-form-urlencoded");
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_STR(body_of(resp), body_of(echo_resp));
    courier_response_free(resp);
    courier_request_free(r);
    CHECK_EQ(send_path(e, "GET", "/bytes/300", &resp), COURIER_OK);
    size_t a = 0, b = 0;
    const void *got = courier_response_body(resp, &a), *want = courier_response_body(bytes_resp, &b);
    CHECK_EQ(a, b);
    CHECK(a == b && memcmp(got, want, a) == 0); /* binary bytes, through base64 */
    courier_response_free(resp);
    r = req("GET", "/count");
    courier_request_set_coalesce(r, 0);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_STR(body_of(resp), body_of(c1)); /* repeated entries answer in order */
    courier_response_free(resp);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_STR(body_of(resp), body_of(c2));
    courier_response_free(resp);
    courier_request_free(r);
    CHECK_EQ(cts_server_path_count(th_server(), "/count"), before); /* nothing went on the wire */
    CHECK_EQ(send_path(e, "GET", "/json", NULL), COURIER_E_NO_STUB);
    /* Not a HAR, and no file. */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad.har", th_tmpdir());
    FILE *f = fopen(bad, "w");
    REQUIRE(f);
    fputs("{\"log\":{}}", f);
    fclose(f);
    CHECK_EQ(courier_engine_replay_har(NULL, e, bad, &err), COURIER_E_JSON);
    snprintf(bad, sizeof bad, "%s/none.har", th_tmpdir());
    CHECK_EQ(courier_engine_replay_har(NULL, e, bad, &err), COURIER_E_NOT_FOUND);
    courier_engine_close(e);
    courier_response_free(json_resp);
    courier_response_free(echo_resp);
    courier_response_free(bytes_resp);
    courier_response_free(c1);
    courier_response_free(c2);
}

TESTS_MAIN(T(test_matching_rules), T(test_sequence_one_answer_per_attempt), T(test_delay_and_error),
           T(test_unmatched_fails_or_passes_through), T(test_record_of_requests), T(test_config_stubs_are_judged), T(test_cache_stores_stubbed_answers),
           T(test_har_recorded_and_replayed))
