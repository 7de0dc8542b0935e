/*
 * engine_test.c — the engine over the loopback server: async and sync sends, exactly-once
 * completion, cancel and close with requests in flight, every error a transfer can end with,
 * responses (headers, redirects, metrics), the store directory, many threads at once.
 */
#include "harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>
#ifdef __linux__
#include <dirent.h>
#endif

/* ---- a completion recorder ------------------------------------------------------------------ */

typedef struct rec {
    pthread_mutex_t m;
    pthread_cond_t c;
    int calls;
    int code;
    int http_status;
    int curl_code;
    courier_response *resp;
    uint64_t id;
} rec;

static void rec_init(rec *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->m, NULL);
    pthread_cond_init(&r->c, NULL);
}

static void rec_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    rec *r = user;
    pthread_mutex_lock(&r->m);
    r->calls++;
    r->code = code;
    r->id = id;
    if (err) {
        r->http_status = err->http_status;
        r->curl_code = err->curl_code;
    }
    if (r->resp) courier_response_free(r->resp);
    r->resp = resp;
    pthread_cond_broadcast(&r->c);
    pthread_mutex_unlock(&r->m);
}

/* Waits up to 20 s for a first completion; returns the number of calls. */
static int rec_wait(rec *r) {
    int64_t deadline = th_now_ms() + 20000;
    pthread_mutex_lock(&r->m);
    while (r->calls == 0 && th_now_ms() < deadline) {
        pthread_mutex_unlock(&r->m);
        usleep(2000);
        pthread_mutex_lock(&r->m);
    }
    int calls = r->calls;
    pthread_mutex_unlock(&r->m);
    return calls;
}

static void rec_free(rec *r) {
    courier_response_free(r->resp);
    pthread_mutex_destroy(&r->m);
    pthread_cond_destroy(&r->c);
}

static courier_request *req(const char *method, const char *path) {
    courier_request *r = NULL;
    if (courier_request_new(&r, method, path) != COURIER_OK) return NULL;
    return r;
}

/* Sends path synchronously; returns the code, *out the response if wanted. */
static int sync_code(courier_engine *e, const char *path, long timeout_ms, courier_response **out, courier_error *err) {
    courier_request *r = req("GET", path);
    if (timeout_ms) courier_request_set_timeout_ms(r, timeout_ms);
    int rc = courier_send_sync(out, e, r, err);
    courier_request_free(r);
    return rc;
}

/* ---- tests ------------------------------------------------------------------------------------ */

static void test_async_send_completes_once(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    rec r;
    rec_init(&r);
    courier_request *q = req("GET", "/json");
    uint64_t id = 0;
    CHECK_EQ(courier_send(&id, e, q, rec_done, &r, NULL), COURIER_OK);
    courier_request_free(q); /* the engine copied it */
    CHECK(id != 0);
    CHECK_EQ(rec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_OK);
    CHECK_EQ(r.id, id);
    REQUIRE(r.resp);
    CHECK_EQ(courier_response_status(r.resp), 200);
    CHECK_EQ(courier_response_request_id(r.resp), id);
    size_t len = 0;
    const uint8_t *body = courier_response_body(r.resp, &len);
    CHECK(len > 10);
    CHECK_CONTAINS((const char *)body, "\"name\":\"courier\"");
    CHECK_EQ(body[len], 0); /* NUL after the body */
    CHECK_STR(courier_response_header(r.resp, "content-type"), "application/json");
    CHECK_STR(courier_response_url(r.resp), th_url("/json"));
    /* Cancel of a completed id is not found; nothing else arrives later (close has stopped the
     * worker when it returns). */
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(courier_cancel(e, id), COURIER_E_NOT_FOUND);
    courier_engine_close(e);
    CHECK_EQ(r.calls, 1);
    rec_free(&r);
}

static void test_response_outlives_engine(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_response *resp = NULL;
    CHECK_EQ(sync_code(e, "/json", 0, &resp, NULL), COURIER_OK);
    courier_engine_close(e);
    REQUIRE(resp);
    CHECK_CONTAINS((const char *)courier_response_body(resp, NULL), "courier");
    courier_response_free(resp);
}

static void test_headers_lookup_and_order(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_response *resp = NULL;
    CHECK_EQ(sync_code(e, "/headers?X-First=1&X-Second=two%20words&x-first=again", 0, &resp, NULL), COURIER_OK);
    REQUIRE(resp);
    CHECK_STR(courier_response_header(resp, "X-FIRST"), "1");
    CHECK_STR(courier_response_header(resp, "x-second"), "two words");
    CHECK(courier_response_header(resp, "X-Missing") == NULL);
    /* Iteration in received order: X-First before X-Second before the second x-first. */
    size_t n = courier_response_header_count(resp);
    int first = -1, second = -1, again = -1;
    for (size_t i = 0; i < n; i++) {
        const char *name = NULL, *value = NULL;
        CHECK_EQ(courier_response_header_at(&name, &value, resp, i), COURIER_OK);
        if (strcmp(name, "X-First") == 0) first = (int)i;
        if (strcmp(name, "X-Second") == 0) second = (int)i;
        if (strcmp(name, "x-first") == 0) again = (int)i;
    }
    CHECK(first >= 0 && second > first && again > second);
    const char *name = NULL;
    CHECK_EQ(courier_response_header_at(&name, NULL, resp, n), COURIER_E_NOT_FOUND);
    courier_response_free(resp);
    courier_engine_close(e);
}

static void test_http_error_status_keeps_response(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    static const int codes[] = {400, 404, 418, 500, 503};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        char path[32];
        snprintf(path, sizeof path, "/status/%d", codes[i]);
        courier_response *resp = NULL;
        courier_error err;
        CHECK_EQ(sync_code(e, path, 0, &resp, &err), COURIER_E_HTTP_STATUS);
        CHECK_EQ(err.code, COURIER_E_HTTP_STATUS);
        CHECK_EQ(err.http_status, codes[i]);
        REQUIRE(resp);
        CHECK_EQ(courier_response_status(resp), codes[i]);
        char want[32];
        snprintf(want, sizeof want, "{\"status\":%d}", codes[i]);
        CHECK_STR((const char *)courier_response_body(resp, NULL), want);
        courier_response_free(resp);
    }
    /* 2xx and 3xx without Location are successes. */
    CHECK_EQ(sync_code(e, "/status/204", 0, NULL, NULL), COURIER_OK);
    CHECK_EQ(sync_code(e, "/status/201", 0, NULL, NULL), COURIER_OK);
    courier_engine_close(e);
}

static int reject_if_no_name(const courier_response *resp, void *user) {
    atomic_int *calls = user;
    atomic_fetch_add(calls, 1);
    return strstr((const char *)courier_response_body(resp, NULL), "\"name\"") != NULL;
}

static atomic_int engine_validator_calls;
static int engine_validator(const courier_response *resp, void *user) {
    (void)user;
    atomic_fetch_add(&engine_validator_calls, 1);
    return courier_response_status(resp) == 200 && strstr((const char *)courier_response_body(resp, NULL), "ok");
}

static void tweak_validator(courier_config *cfg) { courier_config_set_validator(cfg, engine_validator, NULL, NULL); }

static void test_validators(void) {
    atomic_int calls = 0;
    courier_engine *e = th_engine(tweak_validator);
    REQUIRE(e);
    /* The engine's validator: /json has "ok", /echo does not. */
    engine_validator_calls = 0;
    CHECK_EQ(sync_code(e, "/json", 0, NULL, NULL), COURIER_OK);
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(sync_code(e, "/bytes/10", 0, &resp, &err), COURIER_E_INVALID_RESULT);
    CHECK_EQ(err.code, COURIER_E_INVALID_RESULT);
    CHECK(resp != NULL); /* the rejected response stays with the caller */
    CHECK_EQ(courier_response_status(resp), 200);
    courier_response_free(resp);
    CHECK_EQ(atomic_load(&engine_validator_calls), 2);
    /* A request's own validator replaces the engine's. */
    courier_request *r = req("GET", "/echo");
    CHECK_EQ(courier_request_set_validator(r, reject_if_no_name, &calls, NULL), COURIER_OK);
    CHECK_EQ(courier_send_sync(NULL, e, r, NULL), COURIER_E_INVALID_RESULT);
    courier_request_free(r);
    r = req("GET", "/json");
    CHECK_EQ(courier_request_set_validator(r, reject_if_no_name, &calls, NULL), COURIER_OK);
    CHECK_EQ(courier_send_sync(NULL, e, r, NULL), COURIER_OK);
    courier_request_free(r);
    CHECK_EQ(atomic_load(&calls), 2);
    CHECK_EQ(atomic_load(&engine_validator_calls), 2);
    /* Validators are not asked about HTTP errors. */
    CHECK_EQ(sync_code(e, "/status/500", 0, NULL, NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(atomic_load(&engine_validator_calls), 2);
    courier_engine_close(e);
}

static void test_timeout_and_hang(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    /* A timeout, not the server's late answer (a 200 after 10 s) nor its end of the body: the
     * engine did not wait for the server (told by the codes, never by the clock). */
    CHECK_EQ(sync_code(e, "/delay/10000", 300, NULL, &err), COURIER_E_TIMEOUT);
    CHECK_EQ(err.code, COURIER_E_TIMEOUT);
    CHECK(err.curl_code != 0);
    CHECK_EQ(sync_code(e, "/hang", 300, NULL, &err), COURIER_E_TIMEOUT);
    CHECK_EQ(sync_code(e, "/slow-body/10000", 300, NULL, &err), COURIER_E_TIMEOUT);
    /* The engine still works afterwards. */
    CHECK_EQ(sync_code(e, "/json", 0, NULL, NULL), COURIER_OK);
    courier_engine_close(e);
}

/* One engine sends one request at a time, so each takes the handle the last one left in the pool:
 * a clean handle keeps a record of its timeout and is given another only when it differs
 * (transport.c). A pooled handle never keeps the previous transfer's: a 300 ms timeout is not the
 * next request's (the engine's 60 s, the answer after 500 ms), and is set again after it. */
static void test_pooled_handle_takes_each_requests_timeout(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    CHECK_EQ(sync_code(e, "/delay/10000", 300, NULL, NULL), COURIER_E_TIMEOUT);
    CHECK_EQ(sync_code(e, "/delay/500", 0, NULL, NULL), COURIER_OK);
    CHECK_EQ(sync_code(e, "/delay/10000", 300, NULL, NULL), COURIER_E_TIMEOUT);
    CHECK_EQ(sync_code(e, "/json", 0, NULL, NULL), COURIER_OK);
    courier_engine_close(e);
}

static void tweak_small_max(courier_config *cfg) { courier_config_set_max_response_bytes(cfg, 4096); }

static void test_too_large(void) {
    courier_engine *e = th_engine(tweak_small_max);
    REQUIRE(e);
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(sync_code(e, "/bytes/4096", 0, &resp, NULL), COURIER_OK);
    size_t len = 0;
    const uint8_t *b = courier_response_body(resp, &len);
    CHECK_EQ(len, 4096);
    CHECK_EQ(b[300], 300 % 251);
    courier_response_free(resp);
    resp = NULL;
    CHECK_EQ(sync_code(e, "/bytes/4097", 0, &resp, &err), COURIER_E_TOO_LARGE);  /* Content-Length known */
    CHECK(resp == NULL);
    CHECK_EQ(err.code, COURIER_E_TOO_LARGE);
    CHECK_EQ(sync_code(e, "/bytes/100000?chunked=1", 0, &resp, &err), COURIER_E_TOO_LARGE); /* streamed */
    CHECK(resp == NULL);
    courier_engine_close(e);
}

static void test_default_max_is_64mib(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_response *resp = NULL;
    CHECK_EQ(sync_code(e, "/bytes/5000000", 0, &resp, NULL), COURIER_OK);
    size_t len = 0;
    courier_response_body(resp, &len);
    CHECK_EQ(len, 5000000);
    courier_response_free(resp);
    courier_engine_close(e);
}

static void test_server_faults(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(sync_code(e, "/close-mid-body", 0, &resp, &err), COURIER_E_PARTIAL_RESPONSE);
    CHECK(resp == NULL);
    int rc = sync_code(e, "/reset", 0, &resp, &err);
    CHECK_EQ(rc, COURIER_E_NETWORK);
    CHECK(resp == NULL);
    CHECK_EQ(sync_code(e, "/json", 0, NULL, NULL), COURIER_OK);
    courier_engine_close(e);
}

static void test_cannot_connect_and_resolve(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", th_free_port());
    courier_error err;
    CHECK_EQ(sync_code(e, url, 5000, NULL, &err), COURIER_E_CANNOT_CONNECT);
    CHECK_EQ(err.code, COURIER_E_CANNOT_CONNECT);
    CHECK(err.curl_code == 7); /* CURLE_COULDNT_CONNECT */
    /* .invalid never resolves (RFC 6761). */
    CHECK_EQ(sync_code(e, "http://courier-test.invalid/x", 5000, NULL, &err), COURIER_E_CANNOT_RESOLVE);
    courier_engine_close(e);
}

static void test_redirect_and_metrics(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_response *resp = NULL;
    CHECK_EQ(sync_code(e, "/redirect?to=/json", 0, &resp, NULL), COURIER_OK);
    REQUIRE(resp);
    CHECK_STR(courier_response_url(resp), th_url("/json"));
    CHECK_STR(courier_response_header(resp, "Content-Type"), "application/json");
    CHECK(courier_response_header(resp, "Location") == NULL); /* the final response's headers only */
    courier_metrics m = {.size = sizeof m};
    CHECK_EQ(courier_response_metrics(&m, resp), COURIER_OK);
    CHECK_EQ(m.redirects, 1);
    CHECK_EQ(m.http_version, 11);
    CHECK(m.total_s > 0);
    CHECK(m.first_byte_s > 0 && m.first_byte_s <= m.total_s);
    CHECK(m.bytes_received > 100);
    CHECK(m.bytes_sent > 20);
    courier_response_free(resp);

    /* A second request to the same host reuses the connection. */
    CHECK_EQ(sync_code(e, "/json", 0, &resp, NULL), COURIER_OK);
    CHECK_EQ(courier_response_metrics(&m, resp), COURIER_OK);
    CHECK_EQ(m.connection_reused, 1);
    CHECK(m.connect_s == 0 || m.connect_s <= m.total_s);
    /* The caller's size: one that says less than 0.2.0's struct is refused, untouched; a larger one
     * (a newer caller) gets the fields this library has, and keeps its size. */
    courier_metrics small = {.size = sizeof(size_t), .redirects = 7};
    CHECK_EQ(courier_response_metrics(&small, resp), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(small.redirects, 7);
    struct {
        courier_metrics m;
        double guard;
    } larger = {{.size = sizeof larger}, 12345.0};
    CHECK_EQ(courier_response_metrics(&larger.m, resp), COURIER_OK);
    CHECK_EQ(larger.m.size, sizeof larger);
    CHECK_EQ(larger.m.connection_reused, 1);
    CHECK(larger.guard == 12345.0);
    courier_response_free(resp);

    /* Keep-alive: many requests, few connections. */
    long conns_before = cts_server_connection_count(th_server());
    for (int i = 0; i < 20; i++) CHECK_EQ(sync_code(e, "/json", 0, NULL, NULL), COURIER_OK);
    CHECK(cts_server_connection_count(th_server()) - conns_before <= 1);
    courier_engine_close(e);
}

static void test_cancel_by_id(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    rec r;
    rec_init(&r);
    courier_request *q = req("GET", "/hang");
    uint64_t id = 0;
    long before = cts_server_path_count(th_server(), "/hang");
    CHECK_EQ(courier_send(&id, e, q, rec_done, &r, NULL), COURIER_OK);
    courier_request_free(q);
    CHECK_EQ(th_wait_path("/hang", before + 1), before + 1); /* on the wire */
    CHECK_EQ(r.calls, 0);
    CHECK_EQ(courier_cancel(e, id), COURIER_OK);
    CHECK_EQ(rec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_E_CANCELLED);
    CHECK(r.resp == NULL);
    CHECK_EQ(courier_cancel(e, id), COURIER_E_NOT_FOUND);
    CHECK_EQ(courier_cancel(e, 987654321), COURIER_E_NOT_FOUND);
    /* Cancelling right after sending, before the worker started it. */
    rec r2;
    rec_init(&r2);
    q = req("GET", "/delay/5000");
    CHECK_EQ(courier_send(&id, e, q, rec_done, &r2, NULL), COURIER_OK);
    courier_request_free(q);
    CHECK_EQ(courier_cancel(e, id), COURIER_OK);
    CHECK_EQ(rec_wait(&r2), 1);
    CHECK_EQ(r2.code, COURIER_E_CANCELLED);
    courier_engine_close(e);
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r2.calls, 1);
    rec_free(&r);
    rec_free(&r2);
}

static void test_cancel_all_and_close_in_flight(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    enum { N = 10 };
    rec recs[N];
    long hang0 = cts_server_path_count(th_server(), "/hang");
    long delay0 = cts_server_path_count(th_server(), "/delay/30000");
    for (int i = 0; i < N; i++) {
        rec_init(&recs[i]);
        courier_request *q = req("GET", i % 2 ? "/hang" : "/delay/30000");
        CHECK_EQ(courier_send(NULL, e, q, rec_done, &recs[i], NULL), COURIER_OK);
        courier_request_free(q);
    }
    /* Some on the wire (the per-host limit, 5), the others queued. */
    int64_t deadline = th_now_ms() + 10000;
    while (cts_server_path_count(th_server(), "/hang") - hang0 + cts_server_path_count(th_server(), "/delay/30000") - delay0 < 5 &&
           th_now_ms() < deadline)
        usleep(2000);
    CHECK_EQ(courier_cancel_all(e), COURIER_OK);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(rec_wait(&recs[i]), 1);
        CHECK_EQ(recs[i].code, COURIER_E_CANCELLED);
    }
    /* The engine keeps working after cancel_all. */
    CHECK_EQ(sync_code(e, "/json", 0, NULL, NULL), COURIER_OK);

    /* Close with requests queued and in flight: each completes once with cancelled, before close
       returns. More than the per-host limit so that some wait in curl's queue. */
    enum { M = 20 };
    rec more[M];
    long hang1 = cts_server_path_count(th_server(), "/hang");
    for (int i = 0; i < M; i++) {
        rec_init(&more[i]);
        courier_request *q = req("GET", "/hang");
        CHECK_EQ(courier_send(NULL, e, q, rec_done, &more[i], NULL), COURIER_OK);
        courier_request_free(q);
    }
    CHECK(th_wait_path("/hang", hang1 + 1) > hang1); /* some on the wire, the rest queued */
    int64_t queued = -1, active = -1;
    CHECK_EQ(courier_engine_pending(&queued, &active, e), COURIER_OK);
    CHECK_EQ(queued + active, M);
    courier_engine_close(e);
    for (int i = 0; i < M; i++) {
        CHECK_EQ(more[i].calls, 1);
        CHECK_EQ(more[i].code, COURIER_E_CANCELLED);
        rec_free(&more[i]);
    }
    for (int i = 0; i < N; i++) {
        CHECK_EQ(recs[i].calls, 1);
        rec_free(&recs[i]);
    }
}

static void test_close_right_after_send(void) {
    /* Sends that race with close: every accepted send completes exactly once. */
    for (int round = 0; round < 20; round++) {
        courier_engine *e = th_engine(NULL);
        REQUIRE(e);
        rec r;
        rec_init(&r);
        courier_request *q = req("GET", "/json");
        CHECK_EQ(courier_send(NULL, e, q, rec_done, &r, NULL), COURIER_OK);
        courier_request_free(q);
        courier_engine_close(e);
        CHECK_EQ(r.calls, 1);
        CHECK(r.code == COURIER_OK || r.code == COURIER_E_CANCELLED);
        rec_free(&r);
    }
}

typedef struct chain_ctx {
    courier_engine *e;
    atomic_int remaining;
    atomic_int ok;
    atomic_int sync_from_worker;
} chain_ctx;

static void chain_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)err;
    chain_ctx *c = user;
    courier_response_free(resp);
    if (code == COURIER_OK) atomic_fetch_add(&c->ok, 1);
    courier_request *q = req("GET", "/json");
    /* A synchronous send from the worker would deadlock: refused. */
    atomic_store(&c->sync_from_worker, courier_send_sync(NULL, c->e, q, NULL));
    if (atomic_fetch_sub(&c->remaining, 1) > 1) courier_send(NULL, c->e, q, chain_done, c, NULL);
    courier_request_free(q);
}

static void test_send_from_completion(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    chain_ctx c = {.e = e};
    atomic_init(&c.remaining, 5);
    atomic_init(&c.ok, 0);
    courier_request *q = req("GET", "/json");
    CHECK_EQ(courier_send(NULL, e, q, chain_done, &c, NULL), COURIER_OK);
    courier_request_free(q);
    int64_t deadline = th_now_ms() + 20000;
    while (atomic_load(&c.remaining) > 0 && th_now_ms() < deadline) usleep(2000);
    CHECK_EQ(atomic_load(&c.ok), 5);
    CHECK_EQ(atomic_load(&c.sync_from_worker), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
}

typedef struct thread_arg {
    courier_engine *e;
    int ok;
    int n;
} thread_arg;

static void *hammer(void *p) {
    thread_arg *a = p;
    for (int i = 0; i < a->n; i++) {
        courier_request *q = req(i % 3 ? "GET" : "POST", "/echo");
        courier_request_add_param(q, "i", "1");
        courier_response *resp = NULL;
        if (courier_send_sync(&resp, a->e, q, NULL) == COURIER_OK && courier_response_status(resp) == 200) a->ok++;
        courier_response_free(resp);
        courier_request_free(q);
    }
    return NULL;
}

static void test_many_threads(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    enum { T = 8, N = 40 };
    pthread_t th[T];
    thread_arg args[T];
    for (int i = 0; i < T; i++) {
        args[i] = (thread_arg){e, 0, N};
        pthread_create(&th[i], NULL, hammer, &args[i]);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(args[i].ok, N);
    }
    courier_engine_close(e);
}

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; p && (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* URLs go to curl as parsed URL handles, cached per engine and shared by the transfers sending the
 * same URL; pooled easy handles move from URL to URL. Each response still names its own URL, a
 * relative redirect resolves against the right one, and the default User-Agent and Accept-Encoding
 * lines are sent once each (a request's own Accept-Encoding replaces the default). */
static void test_url_handles_and_default_lines(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    const char *paths[] = {"/echo", "/echo?a=1", "/echo?a=2", "/echo", "/redirect?to=/echo%3Fafter%3D1", "/echo?a=1"};
    const char *finals[] = {"/echo", "/echo?a=1", "/echo?a=2", "/echo", "/echo?after=1", "/echo?a=1"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        courier_response *resp = NULL;
        CHECK_EQ(sync_code(e, paths[i], 0, &resp, NULL), COURIER_OK);
        REQUIRE(resp);
        CHECK_STR(courier_response_url(resp), th_url(finals[i]));
        const char *body = (const char *)courier_response_body(resp, NULL);
        const char *q = strchr(finals[i], '?');
        char want[64];
        snprintf(want, sizeof want, "\"query\":\"%s\"", q ? q + 1 : "");
        CHECK_CONTAINS(body, want);
        CHECK_EQ(count_of(body, "\"User-Agent\""), 1);
        CHECK_EQ(count_of(body, "\"Accept-Encoding\""), 1);
        CHECK_CONTAINS(body, "gzip");
        courier_response_free(resp);
    }
    courier_request *r = req("GET", "/echo");
    courier_request_add_header(r, "Accept-Encoding", "identity");
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    courier_request_free(r);
    REQUIRE(resp);
    const char *body = (const char *)courier_response_body(resp, NULL);
    CHECK_EQ(count_of(body, "\"Accept-Encoding\""), 1);
    CHECK_CONTAINS(body, "[\"Accept-Encoding\",\"identity\"]");
    courier_response_free(resp);

    /* More distinct URLs in flight at once than the cache holds: parsed URLs replaced in the cache
     * while transfers still send them (ASan would see a use after free). */
    enum { N = 120 };
    rec *recs = calloc(N, sizeof *recs);
    REQUIRE(recs);
    for (int i = 0; i < N; i++) {
        rec_init(&recs[i]);
        char path[48];
        snprintf(path, sizeof path, "/echo?n=%d", i % 80);
        courier_request *q = req("GET", path);
        courier_request_set_coalesce(q, 0);
        CHECK_EQ(courier_send(NULL, e, q, rec_done, &recs[i], NULL), COURIER_OK);
        courier_request_free(q);
    }
    for (int i = 0; i < N; i++) {
        CHECK_EQ(rec_wait(&recs[i]), 1);
        CHECK_EQ(recs[i].code, COURIER_OK);
        char want[48];
        snprintf(want, sizeof want, "/echo?n=%d", i % 80);
        if (recs[i].resp) CHECK_STR(courier_response_url(recs[i].resp), th_url(want));
    }
    courier_engine_close(e);
    for (int i = 0; i < N; i++) rec_free(&recs[i]);
    free(recs);
}

static void test_many_async_in_flight(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    enum { N = 300 };
    rec *recs = calloc(N, sizeof *recs);
    REQUIRE(recs);
    for (int i = 0; i < N; i++) {
        rec_init(&recs[i]);
        courier_request *q = req("GET", "/bytes/1024");
        CHECK_EQ(courier_send(NULL, e, q, rec_done, &recs[i], NULL), COURIER_OK);
        courier_request_free(q);
    }
    for (int i = 0; i < N; i++) {
        CHECK_EQ(rec_wait(&recs[i]), 1);
        CHECK_EQ(recs[i].code, COURIER_OK);
        size_t len = 0;
        courier_response_body(recs[i].resp, &len);
        CHECK_EQ(len, 1024);
    }
    courier_engine_close(e);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(recs[i].calls, 1);
        rec_free(&recs[i]);
    }
    free(recs);
}

static void test_store_directory(void) {
    /* A given directory is created with its parents and kept. */
    char path[700];
    snprintf(path, sizeof path, "%s/a/b/store", th_tmpdir());
    courier_config *cfg = NULL;
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_set_store_dir(cfg, path), COURIER_OK);
    courier_engine *e = NULL;
    CHECK_EQ(courier_engine_open(&e, cfg, NULL), COURIER_OK);
    courier_config_free(cfg);
    CHECK_STR(courier_engine_store_dir(e), path);
    struct stat st;
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_EQ(st.st_mode & 0777, 0700);
    courier_engine_close(e);
    CHECK(stat(path, &st) == 0);

    /* A temporary store, asked for, is a private directory removed at close. */
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_set_temporary_store(cfg, 1), COURIER_OK);
    REQUIRE(courier_engine_open(&e, cfg, NULL) == COURIER_OK);
    courier_config_free(cfg);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s", courier_engine_store_dir(e));
    CHECK(stat(tmp, &st) == 0 && S_ISDIR(st.st_mode));
    courier_engine_close(e);
    CHECK(stat(tmp, &st) != 0 && errno == ENOENT);

    /* The default: where apps keep data ($XDG_DATA_HOME when absolute, else ~/.local/share),
     * "<app id>/courier", the app id defaulting to the program's name; kept at close. */
    char data[600], home[600], want[900];
    snprintf(data, sizeof data, "%s/data", th_tmpdir());
    snprintf(home, sizeof home, "%s", th_tmpdir());
    char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("XDG_DATA_HOME", data, 1);
    REQUIRE(courier_engine_open(&e, NULL, NULL) == COURIER_OK);
    snprintf(want, sizeof want, "%s/engine_test/courier", data);
    CHECK_STR(courier_engine_store_dir(e), want);
    courier_engine_close(e);
    CHECK(stat(want, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_EQ(st.st_mode & 0777, 0700);
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_set_app_id(cfg, "com.example.app"), COURIER_OK);
    CHECK_EQ(courier_config_set_app_id(cfg, ""), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_app_id(cfg, "a/b"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_app_id(cfg, ".."), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_app_id(NULL, "x"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_temporary_store(NULL, 1), COURIER_E_INVALID_ARGUMENT);
    setenv("XDG_DATA_HOME", "relative/data", 1); /* not absolute: ignored, as the XDG spec asks */
    setenv("HOME", home, 1);
    REQUIRE(courier_engine_open(&e, cfg, NULL) == COURIER_OK);
    snprintf(want, sizeof want, "%s/.local/share/com.example.app/courier", home);
    CHECK_STR(courier_engine_store_dir(e), want);
    courier_engine_close(e);
    /* A store directory wins over the app id and the temporary setting. */
    snprintf(path, sizeof path, "%s/given", th_tmpdir());
    CHECK_EQ(courier_config_set_store_dir(cfg, path), COURIER_OK);
    CHECK_EQ(courier_config_set_temporary_store(cfg, 1), COURIER_OK);
    REQUIRE(courier_engine_open(&e, cfg, NULL) == COURIER_OK);
    CHECK_STR(courier_engine_store_dir(e), path);
    courier_engine_close(e);
    CHECK(stat(path, &st) == 0);
    courier_config_free(cfg);
    if (old_home) setenv("HOME", old_home, 1);
    else unsetenv("HOME");
    free(old_home);
    setenv("XDG_DATA_HOME", data, 1);

    /* A path under a regular file cannot be created: COURIER_E_STORE with errno. */
    char file[600];
    snprintf(file, sizeof file, "%s/plain", th_tmpdir());
    FILE *f = fopen(file, "w");
    REQUIRE(f);
    fclose(f);
    snprintf(path, sizeof path, "%s/sub", file);
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_set_store_dir(cfg, path), COURIER_OK);
    courier_error err;
    e = (courier_engine *)1;
    CHECK_EQ(courier_engine_open(&e, cfg, &err), COURIER_E_STORE);
    CHECK(e == NULL);
    CHECK_EQ(err.code, COURIER_E_STORE);
    CHECK_EQ(err.os_error, ENOTDIR);
    /* The store path is a file itself. */
    CHECK_EQ(courier_config_set_store_dir(cfg, file), COURIER_OK);
    CHECK_EQ(courier_engine_open(&e, cfg, &err), COURIER_E_STORE);
    courier_config_free(cfg);
}

static void test_two_engines_independent(void) {
    courier_engine *a = th_engine(NULL);
    courier_config *cfg = NULL;
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    char base[200];
    snprintf(base, sizeof base, "%s/echo", th_base());
    courier_config_set_base_url(cfg, base);
    courier_config_add_header(cfg, "X-Engine", "b");
    courier_engine *b = NULL;
    REQUIRE(courier_engine_open(&b, cfg, NULL) == COURIER_OK);
    courier_config_free(cfg); /* the engine keeps its own copy */
    REQUIRE(a);
    courier_response *resp = NULL;
    CHECK_EQ(sync_code(b, "sub", 0, &resp, NULL), COURIER_OK);
    CHECK_CONTAINS((const char *)courier_response_body(resp, NULL), "[\"X-Engine\",\"b\"]");
    CHECK_CONTAINS((const char *)courier_response_body(resp, NULL), "\"path\":\"/echo/sub\"");
    courier_response_free(resp);
    CHECK_EQ(sync_code(a, "/echo", 0, &resp, NULL), COURIER_OK);
    CHECK(!strstr((const char *)courier_response_body(resp, NULL), "X-Engine"));
    courier_response_free(resp);
    courier_engine_close(a);
    CHECK_EQ(sync_code(b, "x", 0, NULL, NULL), COURIER_OK);
    courier_engine_close(b);
}

static atomic_int user_frees;
static void count_user_free(void *user) {
    (void)user;
    atomic_fetch_add(&user_frees, 1);
}
static int accept_all(const courier_response *resp, void *user) {
    (void)resp;
    (void)user;
    return 1;
}

static void test_user_free_runs_once(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    atomic_store(&user_frees, 0);
    /* A send that stays on the wire until it is cancelled (not one that ends on its own a moment
     * later, which a stalled test thread could miss): it holds the registration until it ends. */
    courier_request *r = req("GET", "/hang");
    CHECK_EQ(courier_request_set_validator(r, accept_all, NULL, count_user_free), COURIER_OK);
    rec a;
    rec_init(&a);
    uint64_t id = 0;
    CHECK_EQ(courier_send(&id, e, r, rec_done, &a, NULL), COURIER_OK);
    courier_request_free(r); /* the send still holds the registration */
    CHECK_EQ(atomic_load(&user_frees), 0);
    CHECK_EQ(courier_cancel(e, id), COURIER_OK);
    CHECK_EQ(rec_wait(&a), 1);
    CHECK_EQ(a.code, COURIER_E_CANCELLED);
    courier_engine_close(e);
    CHECK_EQ(atomic_load(&user_frees), 1);
    rec_free(&a);
    /* The same once a send ends with its response. */
    atomic_store(&user_frees, 0);
    e = th_engine(NULL);
    REQUIRE(e);
    r = req("GET", "/json");
    CHECK_EQ(courier_request_set_validator(r, accept_all, NULL, count_user_free), COURIER_OK);
    rec_init(&a);
    CHECK_EQ(courier_send(NULL, e, r, rec_done, &a, NULL), COURIER_OK);
    courier_request_free(r);
    CHECK_EQ(rec_wait(&a), 1);
    CHECK_EQ(a.code, COURIER_OK);
    courier_engine_close(e);
    CHECK_EQ(atomic_load(&user_frees), 1);
    rec_free(&a);
    /* Replacing a registration releases the old one; NULL fn releases the new user at once. */
    r = req("GET", "/json");
    CHECK_EQ(courier_request_set_validator(r, accept_all, NULL, count_user_free), COURIER_OK);
    CHECK_EQ(courier_request_set_validator(r, NULL, NULL, count_user_free), COURIER_OK);
    CHECK_EQ(atomic_load(&user_frees), 3);
    courier_request_free(r);
    CHECK_EQ(atomic_load(&user_frees), 3);
    /* A configuration's validator: released when both the config and the engine are done. */
    courier_config *cfg = NULL;
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_set_validator(cfg, accept_all, NULL, count_user_free), COURIER_OK);
    REQUIRE(courier_engine_open(&e, cfg, NULL) == COURIER_OK);
    courier_config_free(cfg);
    CHECK_EQ(atomic_load(&user_frees), 3);
    courier_engine_close(e);
    CHECK_EQ(atomic_load(&user_frees), 4);
}

typedef struct self_close {
    courier_engine *e;
    atomic_int others;
    atomic_int others_cancelled;
} self_close;

static void other_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)err;
    self_close *s = user;
    courier_response_free(resp);
    if (code == COURIER_E_CANCELLED) atomic_fetch_add(&s->others_cancelled, 1);
    atomic_fetch_add(&s->others, 1);
}

static void closer_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)code;
    (void)err;
    self_close *s = user;
    courier_response_free(resp);
    courier_engine_close(s->e); /* from the worker thread: returns at once */
}

/* The engine's configuration validator's user_free: runs when the engine's memory is released
 * (the config itself is freed by th_engine), which after a close from a callback is the detached
 * worker's last act. */
static atomic_int self_closed_engines;
static void count_engine_gone(void *user) {
    (void)user;
    atomic_fetch_add(&self_closed_engines, 1);
}
static void tweak_watch_release(courier_config *c) {
    courier_config_set_validator(c, accept_all, NULL, count_engine_gone);
}

static void test_close_from_own_callback(void) {
    self_close s = {0};
    atomic_store(&self_closed_engines, 0);
    s.e = th_engine(tweak_watch_release);
    REQUIRE(s.e);
    for (int i = 0; i < 3; i++) {
        courier_request *q = req("GET", i == 0 ? "/hang" : i == 1 ? "/delay/20000" : "/hang?x=2");
        CHECK_EQ(courier_send(NULL, s.e, q, other_done, &s, NULL), COURIER_OK);
        courier_request_free(q);
    }
    courier_request *q = req("GET", "/json");
    CHECK_EQ(courier_send(NULL, s.e, q, closer_done, &s, NULL), COURIER_OK);
    courier_request_free(q);
    int64_t deadline = th_now_ms() + 20000;
    while (atomic_load(&s.others) < 3 && th_now_ms() < deadline) usleep(2000);
    CHECK_EQ(atomic_load(&s.others), 3);
    CHECK_EQ(atomic_load(&s.others_cancelled), 3);
    /* The detached worker frees the engine (and with it its validator's user) and exits. */
    deadline = th_now_ms() + 20000;
    while (atomic_load(&self_closed_engines) < 1 && th_now_ms() < deadline) usleep(2000);
    CHECK_EQ(atomic_load(&self_closed_engines), 1);
}

static void test_pending_counts_exact(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    int64_t queued = -1, active = -1;
    for (int i = 0; i < 10; i++) {
        CHECK_EQ(sync_code(e, "/json", 0, NULL, NULL), COURIER_OK);
        CHECK_EQ(courier_engine_pending(&queued, &active, e), COURIER_OK);
        CHECK_EQ(queued + active, 0); /* left the counts before its completion ran */
    }
    courier_engine_close(e);
}

static courier_response *kept;
static int keep_response(const courier_response *resp, void *user) {
    (void)user;
    kept = courier_response_retain(resp);
    return 1;
}

static void test_response_retain(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *q = req("GET", "/json");
    courier_request_set_validator(q, keep_response, NULL, NULL);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, q, NULL), COURIER_OK);
    courier_request_free(q);
    REQUIRE(kept);
    CHECK(kept == resp);
    courier_response_free(resp); /* the caller's reference */
    CHECK_CONTAINS((const char *)courier_response_body(kept, NULL), "courier"); /* still alive */
    courier_response *again = courier_response_retain(kept);
    courier_response_free(kept);
    CHECK_EQ(courier_response_status(again), 200);
    courier_response_free(again); /* the last: freed (ASan would see a leak otherwise) */
    CHECK(courier_response_retain(NULL) == NULL);
    courier_engine_close(e);
}

/* ---- courier_engine_post ------------------------------------------------------------------------ */

typedef struct post_ctx {
    courier_engine *e;
    pthread_mutex_t m;
    pthread_t worker;      /* the thread completions run on */
    int have_worker;
    int ran[200];          /* how often each post ran */
    int order[200];        /* the posts in the order they ran */
    int nran;
    int off_worker;        /* posts that ran on another thread */
    atomic_int remaining;  /* the chain's sends still to make */
    atomic_int ok;
    atomic_int chain_off_worker;
    int close_post_rc;     /* courier_engine_post from a completion while closing */
} post_ctx;

typedef struct post_arg {
    post_ctx *c;
    int i;
} post_arg;

static void post_record(void *user) {
    post_arg *a = user;
    post_ctx *c = a->c;
    pthread_mutex_lock(&c->m);
    if (!c->have_worker || !pthread_equal(pthread_self(), c->worker)) c->off_worker++;
    c->ran[a->i]++;
    if (c->nran < 200) c->order[c->nran] = a->i;
    c->nran++;
    pthread_mutex_unlock(&c->m);
}

static void note_worker(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id, (void)code, (void)err;
    post_ctx *c = user;
    pthread_mutex_lock(&c->m);
    c->worker = pthread_self();
    c->have_worker = 1;
    pthread_mutex_unlock(&c->m);
    courier_response_free(resp);
}

static void post_ctx_init(post_ctx *c, courier_engine *e) {
    memset(c, 0, sizeof *c);
    c->e = e;
    pthread_mutex_init(&c->m, NULL);
    atomic_init(&c->remaining, 0);
    atomic_init(&c->ok, 0);
    atomic_init(&c->chain_off_worker, 0);
}

/* Learns the worker thread from a completion. */
static void learn_worker(post_ctx *c) {
    courier_request *q = req("GET", "/json");
    CHECK_EQ(courier_send_sync(NULL, c->e, q, NULL), COURIER_OK);
    CHECK_EQ(courier_send(NULL, c->e, q, note_worker, c, NULL), COURIER_OK);
    courier_request_free(q);
    int64_t deadline = th_now_ms() + 20000;
    for (;;) {
        pthread_mutex_lock(&c->m);
        int have = c->have_worker;
        pthread_mutex_unlock(&c->m);
        if (have || th_now_ms() > deadline) break;
        usleep(1000);
    }
}

/* An engine, the context and the worker thread learnt; 0 when any is missing. */
static int post_start(post_ctx *c) {
    courier_engine *e = th_engine(NULL);
    if (!e) return 0;
    post_ctx_init(c, e);
    learn_worker(c);
    return c->have_worker;
}

static int posts_ran(post_ctx *c) {
    pthread_mutex_lock(&c->m);
    int n = c->nran;
    pthread_mutex_unlock(&c->m);
    return n;
}

static void test_post_runs_on_the_worker_in_order(void) {
    post_ctx c;
    REQUIRE(post_start(&c));
    courier_engine *e = c.e;
    post_arg args[200];
    for (int i = 0; i < 200; i++) {
        args[i] = (post_arg){&c, i};
        CHECK_EQ(courier_engine_post(e, post_record, &args[i], NULL), COURIER_OK);
        if (i % 50 == 0) usleep(2000); /* some posts find the worker waiting, some busy */
    }
    int64_t deadline = th_now_ms() + 20000;
    while (posts_ran(&c) < 200 && th_now_ms() < deadline) usleep(1000);
    CHECK_EQ(posts_ran(&c), 200);
    CHECK_EQ(c.off_worker, 0);
    int in_order = 1, once = 1;
    for (int i = 0; i < 200; i++) {
        if (c.order[i] != i) in_order = 0;
        if (c.ran[i] != 1) once = 0;
    }
    CHECK(in_order);
    CHECK(once);
    /* The refusals. */
    courier_error err;
    CHECK_EQ(courier_engine_post(NULL, post_record, &args[0], &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(err.code, COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_engine_post(e, NULL, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
    CHECK_EQ(posts_ran(&c), 200); /* nothing ran twice at the close */
    pthread_mutex_destroy(&c.m);
}

/* The shape an executor gives a loop of sends: each completion posts the next send, which is made
 * on the worker (as a resumed task would make it) and joins the worker's turn without a wakeup. */
static void chain_post_send(void *user);

static void chain_post_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id, (void)err;
    post_ctx *c = user;
    if (code == COURIER_OK && courier_response_status(resp) == 200) atomic_fetch_add(&c->ok, 1);
    courier_response_free(resp);
    if (atomic_fetch_sub(&c->remaining, 1) > 1) {
        if (courier_engine_post(c->e, chain_post_send, c, NULL) != COURIER_OK) atomic_store(&c->remaining, 0);
    }
}

static void chain_post_send(void *user) {
    post_ctx *c = user;
    pthread_mutex_lock(&c->m);
    if (!pthread_equal(pthread_self(), c->worker)) atomic_fetch_add(&c->chain_off_worker, 1);
    pthread_mutex_unlock(&c->m);
    courier_request *q = req("GET", "/json");
    if (!q || courier_send(NULL, c->e, q, chain_post_done, c, NULL) != COURIER_OK) atomic_store(&c->remaining, 0);
    courier_request_free(q);
}

static void test_post_chain_of_sends_from_the_worker(void) {
    post_ctx c;
    REQUIRE(post_start(&c));
    courier_engine *e = c.e;
    atomic_store(&c.remaining, 30);
    CHECK_EQ(courier_engine_post(e, chain_post_send, &c, NULL), COURIER_OK);
    int64_t deadline = th_now_ms() + 20000;
    while (atomic_load(&c.remaining) > 0 && th_now_ms() < deadline) usleep(1000);
    CHECK_EQ(atomic_load(&c.ok), 30);
    CHECK_EQ(atomic_load(&c.chain_off_worker), 0);
    courier_engine_close(e);
    pthread_mutex_destroy(&c.m);
}

static void post_while_closing(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id, (void)err;
    post_ctx *c = user;
    courier_response_free(resp);
    static post_arg late; /* never run: the post is refused */
    late = (post_arg){c, 199};
    if (code == COURIER_E_CANCELLED) c->close_post_rc = courier_engine_post(c->e, post_record, &late, NULL);
}

static void test_posts_at_close_run_once_and_later_ones_are_refused(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    post_ctx c;
    post_ctx_init(&c, e);
    courier_request *q = req("GET", "/hang");
    CHECK_EQ(courier_send(NULL, e, q, post_while_closing, &c, NULL), COURIER_OK);
    courier_request_free(q);
    post_arg args[100];
    for (int i = 0; i < 100; i++) {
        args[i] = (post_arg){&c, i};
        CHECK_EQ(courier_engine_post(e, post_record, &args[i], NULL), COURIER_OK);
    }
    courier_engine_close(e); /* posts not run yet run before the worker stops */
    CHECK_EQ(c.nran, 100);
    int once = 1;
    for (int i = 0; i < 100; i++)
        if (c.ran[i] != 1) once = 0;
    CHECK(once);
    CHECK_EQ(c.close_post_rc, COURIER_E_CLOSED); /* the cancelled completion's post was refused */
    CHECK_EQ(c.ran[199], 0);
    pthread_mutex_destroy(&c.m);
}

/* The engine's threads carry names (top -H, ps -L, perf, gdb): the worker, where completions and
 * posts run, is "courier-worker", and the frozen-request journal's thread "courier-journal". */
static void name_of_worker(void *user) {
    char *name = user;
    if (pthread_getname_np(pthread_self(), name, 16) != 0) name[0] = '\0';
}

static int thread_named(const char *want) {
#ifdef __linux__
    DIR *d = opendir("/proc/self/task");
    if (!d) return 0;
    int found = 0;
    for (struct dirent *de; !found && (de = readdir(d));) {
        if (de->d_name[0] == '.') continue;
        char path[300], comm[32] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f)) {
            comm[strcspn(comm, "\n")] = '\0';
            found = strcmp(comm, want) == 0;
        }
        fclose(f);
    }
    closedir(d);
    return found;
#else
    (void)want;
    return 1;
#endif
}

static void with_temporary_store(courier_config *cfg) { courier_config_set_temporary_store(cfg, 1); }

/* A store that must exist: a missing directory (set, or an app id's default store) fails the open
 * with COURIER_E_STORE, names the path, and is not created; an existing one opens. */
static void test_store_must_exist(void) {
    char path[700];
    snprintf(path, sizeof path, "%s/must-exist/store", th_tmpdir());
    courier_config *cfg = NULL;
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_set_store_must_exist(NULL, 1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_store_dir(cfg, path), COURIER_OK);
    CHECK_EQ(courier_config_set_store_must_exist(cfg, 1), COURIER_OK);
    courier_engine *e = NULL;
    courier_error err = {0};
    CHECK_EQ(courier_engine_open(&e, cfg, &err), COURIER_E_STORE);
    CHECK(e == NULL);
    CHECK_CONTAINS(err.message, path);
    CHECK_EQ(err.os_error, ENOENT);
    courier_error_clear(&err);
    struct stat st;
    CHECK(stat(path, &st) != 0 && errno == ENOENT);
    char parent[720];
    snprintf(parent, sizeof parent, "%s/must-exist", th_tmpdir());
    CHECK(stat(parent, &st) != 0 && errno == ENOENT);

    /* A file where the directory should be. */
    char file[720];
    snprintf(file, sizeof file, "%s/must-exist-file", th_tmpdir());
    FILE *f = fopen(file, "w");
    REQUIRE(f);
    fclose(f);
    CHECK_EQ(courier_config_set_store_dir(cfg, file), COURIER_OK);
    CHECK_EQ(courier_engine_open(&e, cfg, &err), COURIER_E_STORE);
    CHECK_EQ(err.os_error, ENOTDIR);
    courier_error_clear(&err);

    /* The default store of an app id that has none. */
    char data[700], want[800];
    snprintf(data, sizeof data, "%s/must-exist-data", th_tmpdir());
    char *old = getenv("XDG_DATA_HOME") ? strdup(getenv("XDG_DATA_HOME")) : NULL;
    setenv("XDG_DATA_HOME", data, 1);
    CHECK_EQ(courier_config_set_store_dir(cfg, NULL), COURIER_OK);
    CHECK_EQ(courier_config_set_app_id(cfg, "org.example.none"), COURIER_OK);
    CHECK_EQ(courier_engine_open(&e, cfg, &err), COURIER_E_STORE);
    snprintf(want, sizeof want, "%s/org.example.none/courier", data);
    CHECK_CONTAINS(err.message, want);
    courier_error_clear(&err);
    CHECK(stat(data, &st) != 0 && errno == ENOENT);

    /* Once the store exists (made by an engine that may create it), it opens. */
    CHECK_EQ(courier_config_set_store_must_exist(cfg, 0), COURIER_OK);
    REQUIRE(courier_engine_open(&e, cfg, NULL) == COURIER_OK);
    courier_engine_close(e);
    CHECK_EQ(courier_config_set_store_must_exist(cfg, 1), COURIER_OK);
    CHECK_EQ(courier_engine_open(&e, cfg, NULL), COURIER_OK);
    if (e) CHECK_STR(courier_engine_store_dir(e), want);
    courier_engine_close(e);
    if (old) {
        setenv("XDG_DATA_HOME", old, 1);
        free(old);
    } else {
        unsetenv("XDG_DATA_HOME");
    }
    courier_config_free(cfg);
}

static void test_threads_are_named(void) {
    courier_engine *e = th_engine(with_temporary_store);
    REQUIRE(e);
    static char name[16];
    memset(name, 0, sizeof name);
    CHECK_EQ(courier_engine_post(e, name_of_worker, name, NULL), COURIER_OK);
    /* The post runs on the worker; a send's completion after it shows it ran. */
    rec r;
    rec_init(&r);
    courier_request *q = req("GET", "/json");
    REQUIRE(q);
    CHECK_EQ(courier_send(NULL, e, q, rec_done, &r, NULL), COURIER_OK);
    courier_request_free(q);
    CHECK_EQ(rec_wait(&r), 1);
    CHECK_STR(name, "courier-worker");
    CHECK(thread_named("courier-worker"));
    CHECK(thread_named("courier-journal"));
    courier_response_free(r.resp);
    courier_engine_close(e);
    CHECK(!thread_named("courier-worker")); /* closing joins it */
}

TESTS_MAIN(T(test_async_send_completes_once), T(test_response_outlives_engine), T(test_headers_lookup_and_order),
           T(test_http_error_status_keeps_response), T(test_validators), T(test_timeout_and_hang),
           T(test_pooled_handle_takes_each_requests_timeout), T(test_too_large),
           T(test_default_max_is_64mib), T(test_server_faults), T(test_cannot_connect_and_resolve),
           T(test_redirect_and_metrics), T(test_cancel_by_id), T(test_cancel_all_and_close_in_flight),
           T(test_close_right_after_send), T(test_send_from_completion), T(test_many_threads),
           T(test_many_async_in_flight), T(test_store_directory), T(test_two_engines_independent), T(test_user_free_runs_once),
           T(test_close_from_own_callback), T(test_pending_counts_exact), T(test_response_retain),
           T(test_url_handles_and_default_lines), T(test_post_runs_on_the_worker_in_order),
           T(test_post_chain_of_sends_from_the_worker), T(test_posts_at_close_run_once_and_later_ones_are_refused),
           T(test_threads_are_named), T(test_store_must_exist))
