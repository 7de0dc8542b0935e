/*
 * schedule_test.c — retry (counted by the server), Retry-After, limits and priorities, coalescing
 * (the server sees one request for N callers), the frequent-request guard, interceptors.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- helpers ----------------------------------------------------------------------------------- */

typedef struct rec {
    atomic_int calls;
    atomic_int code;
    courier_response *_Atomic resp;
    atomic_int order; /* position in a shared sequence */
} rec;

static atomic_int sequence;

static void rec_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)err;
    rec *r = user;
    atomic_store(&r->code, code);
    courier_response_free(atomic_exchange(&r->resp, resp));
    atomic_store(&r->order, atomic_fetch_add(&sequence, 1));
    atomic_fetch_add(&r->calls, 1);
}

static int wait_all(rec *recs, int n) {
    int64_t deadline = th_now_ms() + 20000;
    for (int i = 0; i < n; i++)
        while (atomic_load(&recs[i].calls) == 0 && th_now_ms() < deadline) usleep(2000);
    int done = 0;
    for (int i = 0; i < n; i++) done += atomic_load(&recs[i].calls) > 0;
    return done;
}

static void rec_clear(rec *recs, int n) {
    for (int i = 0; i < n; i++) courier_response_free(atomic_exchange(&recs[i].resp, NULL));
}

static courier_request *req(const char *method, const char *path) {
    courier_request *r = NULL;
    courier_request_new(&r, method, path);
    return r;
}

static int send_sync(courier_engine *e, courier_request *r, courier_response **out) {
    int rc = courier_send_sync(out, e, r, NULL);
    courier_request_free(r);
    return rc;
}

/* ---- retry ------------------------------------------------------------------------------------- */

static void test_retry_on_5xx_counted_by_server(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    long before = cts_server_path_count(th_server(), "/status/503");
    courier_request *r = req("GET", "/status/503");
    CHECK_EQ(courier_request_set_retry(r, 2, 10, 100, 0), COURIER_OK);
    courier_response *resp = NULL;
    CHECK_EQ(send_sync(e, r, &resp), COURIER_E_HTTP_STATUS);
    CHECK_EQ(cts_server_path_count(th_server(), "/status/503") - before, 3);
    int attempts = 0;
    int64_t waited = -1;
    CHECK_EQ(courier_response_attempts(&attempts, &waited, resp), COURIER_OK);
    CHECK_EQ(attempts, 3);
    CHECK(waited >= 10 && waited <= 30); /* 10 ms then 20 ms, each jittered to half..all */
    courier_response_free(resp);

    /* 404 is not retried. */
    before = cts_server_path_count(th_server(), "/status/404");
    r = req("GET", "/status/404");
    courier_request_set_retry(r, 3, 1, 10, 0);
    CHECK_EQ(send_sync(e, r, NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(cts_server_path_count(th_server(), "/status/404") - before, 1);
    courier_engine_close(e);
}

static void tweak_engine_retry(courier_config *c) { courier_config_set_retry(c, 1, 5, 50, 0); }

static void test_retry_only_idempotent_unless_opted_in(void) {
    courier_engine *e = th_engine(tweak_engine_retry);
    REQUIRE(e);
    long before = cts_server_path_count(th_server(), "/status/500");
    CHECK_EQ(send_sync(e, req("POST", "/status/500"), NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(cts_server_path_count(th_server(), "/status/500") - before, 1); /* POST: not retried */
    CHECK_EQ(send_sync(e, req("PUT", "/status/500"), NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(cts_server_path_count(th_server(), "/status/500") - before, 3); /* PUT: engine rule, 1 retry */
    courier_request *r = req("POST", "/status/500");
    courier_request_set_retry(r, 2, 5, 50, COURIER_RETRY_NON_IDEMPOTENT);
    CHECK_EQ(send_sync(e, r, NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(cts_server_path_count(th_server(), "/status/500") - before, 6);
    /* 429 and 408 are retried too. */
    long b429 = cts_server_path_count(th_server(), "/status/429");
    CHECK_EQ(send_sync(e, req("GET", "/status/429"), NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(cts_server_path_count(th_server(), "/status/429") - b429, 2);
    courier_engine_close(e);
}

static void test_retry_network_errors(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", th_free_port());
    courier_request *r = req("GET", url);
    courier_request_set_retry(r, 2, 5, 20, 0);
    courier_error err;
    rec one = {0};
    uint64_t id = 0;
    CHECK_EQ(courier_send(&id, e, r, rec_done, &one, &err), COURIER_OK);
    courier_request_free(r);
    CHECK_EQ(wait_all(&one, 1), 1);
    CHECK_EQ(atomic_load(&one.code), COURIER_E_CANNOT_CONNECT);
    /* A timeout is a network failure too: retried. */
    long before = cts_server_path_count(th_server(), "/delay/2000");
    r = req("GET", "/delay/2000");
    courier_request_set_timeout_ms(r, 100);
    courier_request_set_retry(r, 1, 5, 20, 0);
    CHECK_EQ(send_sync(e, r, NULL), COURIER_E_TIMEOUT);
    /* The server counts a request once it has parsed it, and its thread may get to the second
     * attempt only after the client's 100 ms have run out and the send has failed (a loaded
     * machine): wait for that count, bounded. */
    CHECK_EQ(th_wait_path("/delay/2000", before + 2) - before, 2);
    courier_engine_close(e);
}

/* RETRIED events: how many, and the last one's wait. */
static atomic_int retried_events;
static atomic_long retried_delay_ms;
static void on_retried(const courier_event *ev, void *user) {
    (void)user;
    atomic_store(&retried_delay_ms, ev->delay_ms);
    atomic_fetch_add(&retried_events, 1);
}

static void test_never_retry_after_cancel(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    long before = cts_server_path_count(th_server(), "/hang");
    atomic_store(&retried_events, 0);
    REQUIRE(courier_monitor_add(NULL, e, 1u << COURIER_EVENT_RETRIED, on_retried, NULL, NULL) == COURIER_OK);
    courier_request *r = req("GET", "/hang");
    courier_request_set_retry(r, 5, 1, 5, 0);
    rec one = {0};
    uint64_t id = 0;
    CHECK_EQ(courier_send(&id, e, r, rec_done, &one, NULL), COURIER_OK);
    courier_request_free(r);
    CHECK_EQ(th_wait_path("/hang", before + 1), before + 1); /* on the wire */
    CHECK_EQ(courier_cancel(e, id), COURIER_OK);
    CHECK_EQ(wait_all(&one, 1), 1);
    CHECK_EQ(atomic_load(&one.code), COURIER_E_CANCELLED);
    /* A retry is scheduled (RETRIED) before the caller would be answered; answered, the request is
     * gone: no RETRIED, one request on the wire. */
    CHECK_EQ(atomic_load(&retried_events), 0);
    CHECK_EQ(cts_server_path_count(th_server(), "/hang") - before, 1);
    CHECK_EQ(atomic_load(&one.calls), 1);
    /* Cancelled while waiting for its retry: cancelled, not retried. */
    before = cts_server_path_count(th_server(), "/status/503");
    r = req("GET", "/status/503");
    courier_request_set_retry(r, 3, 5000, 5000, 0);
    rec two = {0};
    CHECK_EQ(courier_send(&id, e, r, rec_done, &two, NULL), COURIER_OK);
    courier_request_free(r);
    int64_t until = th_now_ms() + 10000; /* answered and judged: its retry waits 5 s (RETRIED) */
    while (atomic_load(&retried_events) < 1 && th_now_ms() < until) usleep(1000);
    CHECK_EQ(atomic_load(&retried_events), 1);
    CHECK_EQ(courier_cancel(e, id), COURIER_OK);
    CHECK_EQ(wait_all(&two, 1), 1);
    CHECK_EQ(atomic_load(&two.code), COURIER_E_CANCELLED);
    CHECK_EQ(cts_server_path_count(th_server(), "/status/503") - before, 1);
    courier_engine_close(e);
}

static atomic_int mock_calls;
static int flaky_mock(const courier_outgoing *o, courier_response **out, void *user) {
    (void)o;
    const char *retry_after = user;
    int n = atomic_fetch_add(&mock_calls, 1);
    int rc = courier_response_new(out, n < 2 ? 503 : 200);
    if (rc) return rc;
    if (n < 2) courier_response_add_header(*out, "Retry-After", retry_after);
    courier_response_set_body(*out, "ok", 2);
    return COURIER_OK;
}

static void tweak_mock_on(courier_config *c) { courier_config_set_mock_enabled(c, 1); }

static void test_retry_after_is_honoured(void) {
    courier_engine *e = th_engine(tweak_mock_on);
    REQUIRE(e);
    atomic_store(&mock_calls, 0);
    courier_request *r = req("GET", "/anything");
    courier_request_set_mock_callback(r, flaky_mock, "1", NULL);
    courier_request_set_retry(r, 3, 1, 5000, 0);
    courier_response *resp = NULL;
    CHECK_EQ(send_sync(e, r, &resp), COURIER_OK);
    int attempts = 0;
    int64_t waited = 0;
    courier_response_attempts(&attempts, &waited, resp);
    CHECK_EQ(attempts, 3);
    CHECK(waited >= 2000); /* two Retry-After: 1 waits, chosen over 1-2 ms backoff */
    courier_response_free(resp);

    /* A Retry-After longer than the rule's maximum ends the retries with the response. */
    atomic_store(&mock_calls, 0);
    r = req("GET", "/anything");
    courier_request_set_mock_callback(r, flaky_mock, "120", NULL);
    courier_request_set_retry(r, 3, 1, 5000, 0);
    CHECK_EQ(send_sync(e, r, &resp), COURIER_E_HTTP_STATUS);
    CHECK_EQ(courier_response_status(resp), 503);
    courier_response_attempts(&attempts, NULL, resp);
    CHECK_EQ(attempts, 1);
    courier_response_free(resp);

    /* ... unless the rule ignores Retry-After. */
    atomic_store(&mock_calls, 0);
    r = req("GET", "/anything");
    courier_request_set_mock_callback(r, flaky_mock, "120", NULL);
    courier_request_set_retry(r, 3, 1, 10, COURIER_RETRY_IGNORE_RETRY_AFTER);
    CHECK_EQ(send_sync(e, r, &resp), COURIER_OK);
    courier_response_attempts(&attempts, &waited, resp);
    CHECK_EQ(attempts, 3);
    CHECK(waited < 1000);
    courier_response_free(resp);
    courier_engine_close(e);
}

static _Atomic int64_t fake_now_ms = 1700000000000;
static int64_t fake_clock(void *user) {
    (void)user;
    return atomic_load(&fake_now_ms);
}
static void tweak_fake_clock(courier_config *c) { courier_config_set_clock(c, fake_clock, NULL, NULL); }

/* Backoff runs on the engine's clock: with an injected one, the retry waits for the clock, not for
 * wall time; advancing it lets the retry go. */
static void test_backoff_on_injected_clock(void) {
    courier_engine *e = th_engine(tweak_fake_clock);
    REQUIRE(e);
    long before = cts_server_path_count(th_server(), "/status/502");
    courier_request *r = req("GET", "/status/502");
    courier_request_set_retry(r, 2, 60000, 600000, 0); /* a minute, then two */
    atomic_store(&retried_events, 0);
    REQUIRE(courier_monitor_add(NULL, e, 1u << COURIER_EVENT_RETRIED, on_retried, NULL, NULL) == COURIER_OK);
    rec one = {0};
    CHECK_EQ(courier_send(NULL, e, r, rec_done, &one, NULL), COURIER_OK);
    courier_request_free(r);
    /* The first answer judged, the retry scheduled (the RETRIED event tells): a wait of 30-60 s on
     * the engine's clock, which has not moved, so the retry waits. */
    int64_t deadline = th_now_ms() + 10000;
    while (atomic_load(&retried_events) < 1 && th_now_ms() < deadline) usleep(2000);
    CHECK_EQ(atomic_load(&retried_events), 1);
    CHECK(atomic_load(&retried_delay_ms) >= 30000 && atomic_load(&retried_delay_ms) <= 60000);
    CHECK_EQ(cts_server_path_count(th_server(), "/status/502") - before, 1);
    CHECK_EQ(atomic_load(&one.calls), 0);
    atomic_fetch_add(&fake_now_ms, 60000); /* the first wait is between 30 and 60 s */
    deadline = th_now_ms() + 10000;
    while (cts_server_path_count(th_server(), "/status/502") - before < 2 && th_now_ms() < deadline) usleep(2000);
    CHECK_EQ(cts_server_path_count(th_server(), "/status/502") - before, 2);
    /* The second wait (60 to 120 s) starts when the second answer has been judged, which may be a
     * moment after the server counted it: keep moving the clock until the request finishes. */
    deadline = th_now_ms() + 20000;
    while (atomic_load(&one.calls) == 0 && th_now_ms() < deadline) {
        atomic_fetch_add(&fake_now_ms, 120000);
        usleep(200000);
    }
    CHECK_EQ(wait_all(&one, 1), 1);
    CHECK_EQ(atomic_load(&one.code), COURIER_E_HTTP_STATUS);
    CHECK_EQ(cts_server_path_count(th_server(), "/status/502") - before, 3);
    courier_response *resp = atomic_exchange(&one.resp, NULL);
    int attempts = 0;
    int64_t waited = 0;
    courier_response_attempts(&attempts, &waited, resp);
    CHECK_EQ(attempts, 3);
    CHECK(waited >= 90000 && waited <= 180000); /* 30-60 s, then 60-120 s: computed, not measured */
    courier_response_free(resp);
    courier_engine_close(e);
}

static void test_retry_rule_validation(void) {
    courier_request *r = req("GET", "/x");
    CHECK_EQ(courier_request_set_retry(r, -1, 1, 2, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_retry(r, 1, 10, 5, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_priority(r, (courier_priority)5), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
    courier_config *c = NULL;
    REQUIRE(courier_config_new(&c) == COURIER_OK);
    CHECK_EQ(courier_config_set_retry(c, 1, -1, 5, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_frequent_guard_ms(c, -1), COURIER_E_INVALID_ARGUMENT);
    courier_config_free(c);
}

/* ---- limits and priorities --------------------------------------------------------------------- */

static void tweak_two_per_host(courier_config *c) { courier_config_set_max_connections_per_host(c, 2); }

static void test_per_host_limit(void) {
    courier_engine *e = th_engine(tweak_two_per_host);
    REQUIRE(e);
    enum { N = 6 };
    rec recs[N];
    memset(recs, 0, sizeof recs);
    cts_server_reset_counts(th_server()); /* max_in_flight from here */
    long base = cts_server_in_flight(th_server()); /* an earlier test's parked request, if any */
    for (int i = 0; i < N; i++) {
        char path[32];
        snprintf(path, sizeof path, "/delay/%d", 1300 + i); /* distinct: no coalescing */
        courier_request *r = req("GET", path);
        CHECK_EQ(courier_send(NULL, e, r, rec_done, &recs[i], NULL), COURIER_OK);
        courier_request_free(r);
    }
    /* Two on the wire and four queued, as soon as the worker has taken them (no fixed sleep). */
    int64_t queued = -1, active = -1;
    int64_t deadline = th_now_ms() + 10000;
    while (courier_engine_pending(&queued, &active, e) == COURIER_OK && !(active == 2 && queued == 4) &&
           th_now_ms() < deadline)
        usleep(1000);
    CHECK_EQ(active, 2);
    CHECK_EQ(queued, 4);
    CHECK_EQ(wait_all(recs, N), N);
    for (int i = 0; i < N; i++) CHECK_EQ(atomic_load(&recs[i].code), COURIER_OK);
    /* And never more than two at once, as the server saw them: the limit held all along. */
    CHECK(cts_server_max_in_flight(th_server()) <= base + 2);
    rec_clear(recs, N);
    CHECK_EQ(courier_engine_pending(&queued, &active, e), COURIER_OK);
    CHECK_EQ(queued + active, 0);
    courier_engine_close(e);
}

static void tweak_one_per_host(courier_config *c) { courier_config_set_max_connections_per_host(c, 1); }

static void test_priorities_order_waiting_requests(void) {
    courier_engine *e = th_engine(tweak_one_per_host);
    REQUIRE(e);
    rec blocker = {0}, low = {0}, normal = {0}, high = {0}, high2 = {0};
    long before = cts_server_path_count(th_server(), "/delay/1300");
    courier_request *r = req("GET", "/delay/1300");
    CHECK_EQ(courier_send(NULL, e, r, rec_done, &blocker, NULL), COURIER_OK);
    courier_request_free(r);
    CHECK_EQ(th_wait_path("/delay/1300", before + 1), before + 1); /* the blocker holds the connection */
    struct {
        rec *rec;
        courier_priority p;
        const char *path;
    } order[] = {{&low, COURIER_PRIORITY_LOW, "/echo?p=low"},
                 {&normal, COURIER_PRIORITY_NORMAL, "/echo?p=normal"},
                 {&high, COURIER_PRIORITY_HIGH, "/echo?p=high"},
                 {&high2, COURIER_PRIORITY_HIGH, "/echo?p=high2"}};
    for (int i = 0; i < 4; i++) {
        r = req("GET", order[i].path);
        CHECK_EQ(courier_request_set_priority(r, order[i].p), COURIER_OK);
        CHECK_EQ(courier_send(NULL, e, r, rec_done, order[i].rec, NULL), COURIER_OK);
        courier_request_free(r);
    }
    int64_t deadline = th_now_ms() + 20000;
    while (atomic_load(&low.calls) == 0 && th_now_ms() < deadline) usleep(2000);
    CHECK(atomic_load(&blocker.order) < atomic_load(&high.order));
    CHECK(atomic_load(&high.order) < atomic_load(&high2.order)); /* equal priorities: send order */
    CHECK(atomic_load(&high2.order) < atomic_load(&normal.order));
    CHECK(atomic_load(&normal.order) < atomic_load(&low.order));
    courier_engine_close(e);
    rec *list[] = {&blocker, &low, &normal, &high, &high2};
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(atomic_load(&list[i]->code), COURIER_OK);
        courier_response_free(atomic_exchange(&list[i]->resp, NULL));
    }
}

/* ---- coalescing -------------------------------------------------------------------------------- */

static void test_coalescing_identical_gets(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    enum { N = 5 };
    rec recs[N];
    memset(recs, 0, sizeof recs);
    long before = cts_server_path_count(th_server(), "/delay/1301");
    for (int i = 0; i < N; i++) {
        courier_request *r = req("GET", "/delay/1301");
        CHECK_EQ(courier_send(NULL, e, r, rec_done, &recs[i], NULL), COURIER_OK);
        courier_request_free(r);
    }
    CHECK_EQ(wait_all(recs, N), N);
    CHECK_EQ(cts_server_path_count(th_server(), "/delay/1301") - before, 1);
    for (int i = 0; i < N; i++) {
        CHECK_EQ(atomic_load(&recs[i].code), COURIER_OK);
        courier_response *resp = atomic_load(&recs[i].resp);
        REQUIRE(resp);
        CHECK_STR((const char *)courier_response_body(resp, NULL), "{\"delayed\":1301}");
    }
    /* Each caller owns a distinct response. */
    CHECK(atomic_load(&recs[0].resp) != atomic_load(&recs[1].resp));
    rec_clear(recs, N);

    /* Opting out sends each. */
    before = cts_server_path_count(th_server(), "/delay/1302");
    for (int i = 0; i < 3; i++) {
        courier_request *r = req("GET", "/delay/1302");
        courier_request_set_coalesce(r, 0);
        CHECK_EQ(courier_send(NULL, e, r, rec_done, &recs[i], NULL), COURIER_OK);
        courier_request_free(r);
    }
    memset(recs + 3, 0, sizeof recs[0] * 2);
    atomic_store(&recs[3].calls, 1);
    atomic_store(&recs[4].calls, 1);
    for (int i = 0; i < 3; i++) atomic_store(&recs[i].calls, 0);
    CHECK_EQ(wait_all(recs, 3), 3);
    CHECK_EQ(cts_server_path_count(th_server(), "/delay/1302") - before, 3);
    rec_clear(recs, N);

    /* Different headers: not the same request. */
    before = cts_server_path_count(th_server(), "/delay/1303");
    memset(recs, 0, sizeof recs);
    for (int i = 0; i < 2; i++) {
        courier_request *r = req("GET", "/delay/1303");
        courier_request_add_header(r, "X-User", i ? "a" : "b");
        CHECK_EQ(courier_send(NULL, e, r, rec_done, &recs[i], NULL), COURIER_OK);
        courier_request_free(r);
    }
    CHECK_EQ(wait_all(recs, 2), 2);
    CHECK_EQ(cts_server_path_count(th_server(), "/delay/1303") - before, 2);
    rec_clear(recs, N);
    courier_engine_close(e);
}

/* A follower's response is the one copy of the leader's (response.c's cr_response_copy): everything
 * the response says, header by header, with the follower's own request id. */
static void test_coalesced_follower_gets_a_full_copy(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    enum { N = 3 };
    rec recs[N];
    memset(recs, 0, sizeof recs);
    uint64_t ids[N];
    long before = cts_server_path_count(th_server(), "/delay/1305");
    for (int i = 0; i < N; i++) {
        courier_request *r = req("GET", "/delay/1305");
        CHECK_EQ(courier_send(&ids[i], e, r, rec_done, &recs[i], NULL), COURIER_OK);
        courier_request_free(r);
    }
    CHECK_EQ(wait_all(recs, N), N);
    CHECK_EQ(cts_server_path_count(th_server(), "/delay/1305") - before, 1);
    courier_response *lead = atomic_load(&recs[0].resp);
    REQUIRE(lead);
    for (int i = 0; i < N; i++) {
        courier_response *resp = atomic_load(&recs[i].resp);
        REQUIRE(resp);
        CHECK_EQ(courier_response_request_id(resp), ids[i]);
        CHECK_EQ(courier_response_status(resp), courier_response_status(lead));
        CHECK_STR(courier_response_url(resp), courier_response_url(lead));
        CHECK_STR(courier_response_method(resp), courier_response_method(lead));
        size_t n1 = 0, n2 = 0;
        const uint8_t *b1 = courier_response_body(resp, &n1), *b2 = courier_response_body(lead, &n2);
        CHECK_EQ(n1, n2);
        CHECK(n1 == n2 && memcmp(b1, b2, n1) == 0);
        CHECK_EQ(courier_response_header_count(resp), courier_response_header_count(lead));
        for (size_t k = 0; k < courier_response_header_count(lead); k++) {
            const char *name = NULL, *value = NULL, *name2 = NULL, *value2 = NULL;
            CHECK_EQ(courier_response_header_at(&name, &value, lead, k), COURIER_OK);
            CHECK_EQ(courier_response_header_at(&name2, &value2, resp, k), COURIER_OK);
            CHECK_STR(name2, name);
            CHECK_STR(value2, value);
        }
        courier_metrics m1, m2;
        CHECK_EQ(courier_response_metrics(&m1, resp), COURIER_OK);
        CHECK_EQ(courier_response_metrics(&m2, lead), COURIER_OK);
        CHECK_EQ(m1.bytes_received, m2.bytes_received);
        CHECK_EQ(courier_response_cache_status(resp), courier_response_cache_status(lead));
        CHECK_EQ(courier_response_cache_reason(resp), courier_response_cache_reason(lead));
    }
    rec_clear(recs, N);
    courier_engine_close(e);
}

static void test_coalescing_cancel_leader_and_follower(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    rec recs[3];
    memset(recs, 0, sizeof recs);
    uint64_t ids[3];
    long before = cts_server_path_count(th_server(), "/delay/1304");
    for (int i = 0; i < 3; i++) {
        courier_request *r = req("GET", "/delay/1304");
        CHECK_EQ(courier_send(&ids[i], e, r, rec_done, &recs[i], NULL), COURIER_OK);
        courier_request_free(r);
    }
    CHECK_EQ(th_wait_path("/delay/1304", before + 1), before + 1); /* the shared request on the wire */
    CHECK_EQ(courier_cancel(e, ids[0]), COURIER_OK); /* the leader's caller */
    CHECK_EQ(courier_cancel(e, ids[2]), COURIER_OK); /* a follower */
    CHECK_EQ(wait_all(recs, 3), 3);
    CHECK_EQ(atomic_load(&recs[0].code), COURIER_E_CANCELLED);
    CHECK_EQ(atomic_load(&recs[1].code), COURIER_OK); /* still served by the shared request */
    CHECK_EQ(atomic_load(&recs[2].code), COURIER_E_CANCELLED);
    CHECK_EQ(cts_server_path_count(th_server(), "/delay/1304") - before, 1);
    rec_clear(recs, 3);

    /* Everyone cancels: the shared request stops (nothing leaks, nothing answered twice). */
    memset(recs, 0, sizeof recs);
    long hang = cts_server_path_count(th_server(), "/hang");
    for (int i = 0; i < 3; i++) {
        courier_request *r = req("GET", "/hang");
        CHECK_EQ(courier_send(&ids[i], e, r, rec_done, &recs[i], NULL), COURIER_OK);
        courier_request_free(r);
    }
    CHECK_EQ(th_wait_path("/hang", hang + 1), hang + 1);
    for (int i = 0; i < 3; i++) CHECK_EQ(courier_cancel(e, ids[i]), COURIER_OK);
    CHECK_EQ(wait_all(recs, 3), 3);
    int64_t queued = -1, active = -1; /* a caller leaves the counts before its completion runs */
    courier_engine_pending(&queued, &active, e);
    CHECK_EQ(queued + active, 0);
    /* Close with a headless leader and followers in flight. */
    memset(recs, 0, sizeof recs);
    hang = cts_server_path_count(th_server(), "/hang");
    for (int i = 0; i < 3; i++) {
        courier_request *r = req("GET", "/hang");
        CHECK_EQ(courier_send(&ids[i], e, r, rec_done, &recs[i], NULL), COURIER_OK);
        courier_request_free(r);
    }
    CHECK_EQ(th_wait_path("/hang", hang + 1), hang + 1);
    CHECK_EQ(courier_cancel(e, ids[0]), COURIER_OK);
    CHECK_EQ(wait_all(recs, 1), 1); /* the leader's caller answered: the shared request is headless */
    courier_engine_close(e);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(atomic_load(&recs[i].calls), 1);
        CHECK_EQ(atomic_load(&recs[i].code), COURIER_E_CANCELLED);
    }
}

/* ---- the frequent-request guard ---------------------------------------------------------------- */

static void tweak_guard(courier_config *c) { courier_config_set_frequent_guard_ms(c, 60000); }

static void test_frequent_guard(void) {
    courier_engine *e = th_engine(tweak_guard);
    REQUIRE(e);
    long before = cts_server_path_count(th_server(), "/echo");
    CHECK_EQ(send_sync(e, req("GET", "/echo?g=1"), NULL), COURIER_OK);
    courier_error err;
    courier_request *r = req("GET", "/echo?g=1");
    uint64_t id = 7;
    CHECK_EQ(courier_send(&id, e, r, NULL, NULL, &err), COURIER_E_TOO_FREQUENT);
    CHECK_EQ(err.code, COURIER_E_TOO_FREQUENT);
    CHECK_EQ(id, 0);
    courier_request_free(r);
    CHECK_EQ(send_sync(e, req("GET", "/echo?g=2"), NULL), COURIER_OK); /* another request */
    r = req("POST", "/echo?g=1");
    courier_request_set_body(r, "a", 1, "text/plain");
    CHECK_EQ(send_sync(e, r, NULL), COURIER_OK); /* another method and body */
    r = req("POST", "/echo?g=1");
    courier_request_set_body(r, "b", 1, "text/plain");
    CHECK_EQ(send_sync(e, r, NULL), COURIER_OK); /* another body */
    r = req("GET", "/echo?g=1");
    courier_request_set_frequent_guard(r, 0);
    CHECK_EQ(send_sync(e, r, NULL), COURIER_OK); /* exempt */
    CHECK_EQ(cts_server_path_count(th_server(), "/echo") - before, 5);
    courier_engine_close(e);
}

/* ---- interceptors ------------------------------------------------------------------------------ */

static int before_a(courier_outgoing *o, void *user) {
    (void)user;
    const char *prev = courier_outgoing_header(o, "X-Chain");
    char v[64];
    snprintf(v, sizeof v, "%sa", prev ? prev : "");
    return courier_outgoing_set_header(o, "X-Chain", v);
}
static int before_b(courier_outgoing *o, void *user) {
    (void)user;
    if (strstr(courier_outgoing_url(o), "refuse")) return COURIER_E_INVALID_ARGUMENT;
    const char *prev = courier_outgoing_header(o, "X-Chain");
    char v[64];
    snprintf(v, sizeof v, "%sb", prev ? prev : "");
    return courier_outgoing_set_header(o, "X-Chain", v);
}
static int after_replace(uint64_t id, courier_response **resp, void *user) {
    (void)id;
    (void)user;
    if (strstr(courier_response_url(*resp), "replace")) {
        courier_response *n = NULL;
        int rc = courier_response_new(&n, 299);
        if (rc) return rc;
        courier_response_add_header(n, "X-Replaced", "yes");
        courier_response_set_body(n, "replaced", 8);
        courier_response_free(*resp);
        *resp = n;
    }
    if (strstr(courier_response_url(*resp), "fail")) return COURIER_E_INVALID_RESULT;
    return COURIER_OK;
}
static int interceptor_frees;
static void count_free(void *u) {
    (void)u;
    interceptor_frees++;
}

static void tweak_interceptors(courier_config *c) {
    courier_config_add_interceptor(c, before_a, NULL, NULL, count_free);
    courier_config_add_interceptor(c, before_b, after_replace, NULL, count_free);
}

static void test_interceptors(void) {
    interceptor_frees = 0;
    courier_engine *e = th_engine(tweak_interceptors);
    REQUIRE(e);
    CHECK_EQ(interceptor_frees, 0);
    courier_response *resp = NULL;
    courier_request *r = req("GET", "/echo");
    courier_request_add_header(r, "X-Chain", "r");
    CHECK_EQ(send_sync(e, r, &resp), COURIER_OK);
    CHECK_CONTAINS((const char *)courier_response_body(resp, NULL), "[\"X-Chain\",\"rab\"]"); /* in order */
    courier_response_free(resp);
    long before = cts_server_path_count(th_server(), "/echo");
    CHECK_EQ(send_sync(e, req("GET", "/echo?refuse=1"), NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo"), before);
    CHECK_EQ(send_sync(e, req("GET", "/echo?replace=1"), &resp), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 299);
    CHECK_STR(courier_response_header(resp, "x-replaced"), "yes");
    CHECK_STR(courier_response_url(resp), th_url("/echo?replace=1")); /* still describes the request */
    CHECK_STR(courier_response_method(resp), "GET");
    courier_metrics m = {.size = sizeof m};
    courier_response_metrics(&m, resp);
    CHECK(m.total_s > 0); /* the transfer's metrics carried over */
    CHECK_STR((const char *)courier_response_body(resp, NULL), "replaced");
    courier_response_free(resp);
    CHECK_EQ(send_sync(e, req("GET", "/echo?fail=1"), &resp), COURIER_E_INVALID_RESULT);
    CHECK(resp != NULL);
    courier_response_free(resp);
    courier_engine_close(e);
    CHECK_EQ(interceptor_frees, 2);
}

/* A before-send interceptor and a customize callback see the id the send's events and response
 * carry (a tracer starts its span there and ends it at FINISHED): it was 0 there before. */
static _Atomic uint64_t seen_before_id, seen_customize_id, seen_finished_id;
static int before_id(courier_outgoing *o, void *user) {
    (void)user;
    atomic_store(&seen_before_id, courier_outgoing_request_id(o));
    return COURIER_OK;
}
static int customize_id(courier_outgoing *o, void *user) {
    (void)user;
    atomic_store(&seen_customize_id, courier_outgoing_request_id(o));
    return COURIER_OK;
}
static void finished_id(const courier_event *ev, void *user) {
    (void)user;
    if (ev->kind == COURIER_EVENT_FINISHED) atomic_store(&seen_finished_id, ev->request_id);
}
static void tweak_id_interceptor(courier_config *c) { courier_config_add_interceptor(c, before_id, NULL, NULL, NULL); }

static void test_interceptors_see_the_send_id(void) {
    courier_engine *e = th_engine(tweak_id_interceptor);
    REQUIRE(e);
    CHECK_EQ(courier_monitor_add(NULL, e, 0, finished_id, NULL, NULL), COURIER_OK);
    for (int i = 0; i < 2; i++) {
        courier_request *r = req("GET", "/echo");
        courier_request_set_customize(r, customize_id, NULL, NULL);
        courier_response *resp = NULL;
        CHECK_EQ(send_sync(e, r, &resp), COURIER_OK);
        uint64_t id = courier_response_request_id(resp);
        CHECK(id != 0);
        CHECK_EQ(atomic_load(&seen_before_id), id);
        CHECK_EQ(atomic_load(&seen_customize_id), id);
        CHECK_EQ(atomic_load(&seen_finished_id), id);
        courier_response_free(resp);
    }
    /* courier_send: the id it returns is the one the interceptor saw */
    rec recs[1] = {{0}};
    uint64_t out_id = 0;
    courier_request *r = req("GET", "/echo?async=1");
    CHECK_EQ(courier_send(&out_id, e, r, rec_done, &recs[0], NULL), COURIER_OK);
    courier_request_free(r);
    CHECK_EQ(wait_all(recs, 1), 1);
    CHECK(out_id != 0);
    CHECK_EQ(atomic_load(&seen_before_id), out_id);
    rec_clear(recs, 1);
    courier_engine_close(e);
}

TESTS_MAIN(T(test_retry_on_5xx_counted_by_server), T(test_retry_only_idempotent_unless_opted_in),
           T(test_retry_network_errors), T(test_never_retry_after_cancel), T(test_retry_after_is_honoured),
           T(test_backoff_on_injected_clock), T(test_retry_rule_validation), T(test_per_host_limit), T(test_priorities_order_waiting_requests),
           T(test_coalescing_identical_gets), T(test_coalesced_follower_gets_a_full_copy), T(test_coalescing_cancel_leader_and_follower), T(test_frequent_guard),
           T(test_interceptors), T(test_interceptors_see_the_send_id))
