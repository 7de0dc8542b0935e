/*
 * group_test.c — batches and chains over the loopback server: every member's result, fail-fast
 * cancellation, chain order and requests built from the previous response, continue-on-failure,
 * skipping, the group's own in-flight limit (seen by the server and by the engine's counts),
 * cancelling the group (before start, running, by free, by closing the engine), exactly-once
 * completion and user_free, taking responses, adding members from a callback.
 */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* ---- a group recorder ------------------------------------------------------------------------ */

typedef struct grec {
    pthread_mutex_t m;
    int done_calls;
    int code;
    int64_t failed_index;
    int member_calls;
    int member_order[64]; /* indexes in the order the member callback saw them */
    int member_codes[64];
    long max_pending;     /* most requests the engine held at a member callback */
    courier_engine *engine;
    int frees;            /* user_free calls */
    pthread_cond_t freed; /* signalled by each */
} grec;

static void grec_init(grec *r, courier_engine *e) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->m, NULL);
    pthread_cond_init(&r->freed, NULL);
    r->failed_index = -99;
    r->engine = e;
}

static void on_done(courier_group *g, int code, int64_t failed_index, void *user) {
    (void)g;
    grec *r = user;
    pthread_mutex_lock(&r->m);
    if (++r->done_calls > 1) /* whenever it comes before the engine closes: the test fails */
        th_fail(__FILE__, __LINE__, "the group's completion ran %d times", r->done_calls);
    r->code = code;
    r->failed_index = failed_index;
    pthread_mutex_unlock(&r->m);
}

static void on_member(courier_group *g, size_t index, int code, const courier_response *resp, void *user) {
    (void)g;
    (void)resp;
    grec *r = user;
    int64_t queued = 0, active = 0;
    if (r->engine) courier_engine_pending(&queued, &active, r->engine);
    pthread_mutex_lock(&r->m);
    if (r->member_calls < 64) {
        r->member_order[r->member_calls] = (int)index;
        r->member_codes[r->member_calls] = code;
    }
    r->member_calls++;
    if (queued + active > r->max_pending) r->max_pending = queued + active;
    pthread_mutex_unlock(&r->m);
}

static void count_free(void *user) {
    grec *r = user;
    pthread_mutex_lock(&r->m);
    r->frees++;
    pthread_cond_broadcast(&r->freed);
    pthread_mutex_unlock(&r->m);
}

static atomic_int plain_frees;
static void count_plain_free(void *user) {
    (void)user;
    atomic_fetch_add(&plain_frees, 1);
}

static int grec_done_calls(grec *r) {
    pthread_mutex_lock(&r->m);
    int n = r->done_calls;
    pthread_mutex_unlock(&r->m);
    return n;
}

/* Waits up to 20 s for the group to complete; returns the number of done calls (a second call,
 * whenever it would come, fails the test in on_done). */
static int grec_wait(grec *r) {
    int64_t deadline = th_now_ms() + 20000;
    while (grec_done_calls(r) == 0 && th_now_ms() < deadline) usleep(2000);
    return grec_done_calls(r);
}

/* The run's user_free (and the group's last reference) go after `done` has returned, on the thread
 * that ran it: a test that sees `done` has been called waits for them (bounded; the caller checks
 * the count it gets back). */
static int grec_frees(grec *r) {
    pthread_mutex_lock(&r->m);
    int n = r->frees;
    pthread_mutex_unlock(&r->m);
    return n;
}

static int grec_wait_frees(grec *r, int n) {
    pthread_mutex_lock(&r->m);
    int got = th_wait_count(&r->freed, &r->m, &r->frees, n);
    pthread_mutex_unlock(&r->m);
    return got;
}

static int wait_plain_frees(int n) {
    int64_t deadline = th_now_ms() + 20000;
    while (atomic_load(&plain_frees) < n && th_now_ms() < deadline) usleep(1000);
    return atomic_load(&plain_frees);
}


static courier_request *req(const char *method, const char *target) {
    courier_request *r = NULL;
    courier_request_new(&r, method, target);
    return r;
}

/* A GET of `path` with a query of its own, so the engine's coalescing of identical GETs never
 * merges members (the server counts the path without the query). */
static courier_request *req_n(const char *path, int n) {
    char target[128];
    snprintf(target, sizeof target, "%s?member=%d", path, n);
    return req("GET", target);
}

static int result_code(courier_group *g, size_t i) {
    int code = 12345;
    courier_group_result(&code, NULL, NULL, g, i, NULL);
    return code;
}

static uint64_t result_id(courier_group *g, size_t i) {
    uint64_t id = 999;
    courier_group_result(NULL, NULL, &id, g, i, NULL);
    return id;
}

static int result_status(courier_group *g, size_t i) {
    const courier_response *resp = NULL;
    courier_group_result(NULL, &resp, NULL, g, i, NULL);
    return resp ? courier_response_status(resp) : -1;
}

static const char *result_body(courier_group *g, size_t i) {
    const courier_response *resp = NULL;
    courier_group_result(NULL, &resp, NULL, g, i, NULL);
    return resp ? (const char *)courier_response_body(resp, NULL) : NULL;
}

/* ---- batch --------------------------------------------------------------------------------- */

static void batch_gives_every_result(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_BATCH) == COURIER_OK);
    size_t idx = 99;
    CHECK_EQ(courier_group_add(&idx, g, req("GET", "/echo/b0"), 0), COURIER_OK);
    CHECK_EQ(idx, 0);
    CHECK_EQ(courier_group_add(&idx, g, req("GET", "/status/404"), 0), COURIER_OK);
    CHECK_EQ(idx, 1);
    CHECK_EQ(courier_group_add(&idx, g, req("POST", "/echo/b2"), 0), COURIER_OK);
    CHECK_EQ(courier_group_count(g), 3);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_set_member_callback(g, on_member, &r, NULL), COURIER_OK);
    CHECK_EQ(courier_group_start(g, on_done, &r, count_free), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(grec_wait_frees(&r, 1), 1);
    CHECK_EQ(r.code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(r.failed_index, 1);
    CHECK_EQ(r.member_calls, 3);
    CHECK_EQ(result_code(g, 0), COURIER_OK);
    CHECK_EQ(result_code(g, 1), COURIER_E_HTTP_STATUS);
    CHECK_EQ(result_code(g, 2), COURIER_OK);
    CHECK_EQ(result_status(g, 0), 200);
    CHECK_EQ(result_status(g, 1), 404); /* the response stays attached to a failure */
    CHECK_CONTAINS(result_body(g, 2), "\"method\":\"POST\"");
    uint64_t a = result_id(g, 0), b = result_id(g, 1), c = result_id(g, 2);
    CHECK(a && b && c && a != b && b != c && a != c);
    courier_error err;
    int code = 0;
    CHECK_EQ(courier_group_result(&code, NULL, NULL, g, 1, &err), COURIER_OK);
    CHECK_EQ(err.code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(err.http_status, 404);
    CHECK_EQ(courier_group_result(&code, NULL, NULL, g, 3, NULL), COURIER_E_NOT_FOUND);
    /* Adding after completion is refused (and the request is taken anyway). */
    CHECK_EQ(courier_group_add(NULL, g, req("GET", "/echo"), 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_group_cancel(g), COURIER_E_NOT_FOUND);
    CHECK_EQ(courier_group_start(g, NULL, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_group_free(g);
    courier_engine_close(e);
}

static void batch_fail_fast_cancels_the_rest(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_BATCH) == COURIER_OK);
    CHECK_EQ(courier_group_set_fail_fast(g, 1), COURIER_OK);
    CHECK_EQ(courier_group_set_max_in_flight(g, 2), COURIER_OK);
    courier_group_add(NULL, g, req("GET", "/hang"), 0);
    courier_group_add(NULL, g, req("GET", "/status/500"), 0);
    courier_group_add(NULL, g, req("GET", "/echo/ff2"), 0);
    courier_group_add(NULL, g, req("GET", "/echo/ff3"), 0);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(r.failed_index, 1);
    CHECK_EQ(result_code(g, 0), COURIER_E_CANCELLED); /* on the wire: cancelled */
    CHECK(result_id(g, 0) != 0);
    CHECK_EQ(result_code(g, 1), COURIER_E_HTTP_STATUS);
    CHECK_EQ(result_code(g, 2), COURIER_E_CANCELLED); /* never sent */
    CHECK_EQ(result_id(g, 2), 0);
    CHECK_EQ(result_code(g, 3), COURIER_E_CANCELLED);
    CHECK_EQ(result_id(g, 3), 0);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo/ff2"), 0);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo/ff3"), 0);
    int64_t queued = -1, active = -1;
    courier_engine_pending(&queued, &active, e);
    CHECK_EQ(queued + active, 0);
    courier_group_free(g);
    courier_engine_close(e);
}

static void batch_without_fail_fast_runs_everything(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_BATCH) == COURIER_OK);
    courier_group_add(NULL, g, req("GET", "/status/500"), 0);
    courier_group_add(NULL, g, req("GET", "/delay/50"), 0);
    courier_group_add(NULL, g, req("GET", "/status/503"), 0);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(r.failed_index, 0); /* the lowest failed index */
    CHECK_EQ(result_code(g, 1), COURIER_OK);
    CHECK_EQ(result_status(g, 2), 503);
    courier_group_free(g);
    courier_engine_close(e);
}

static void continue_flag_keeps_fail_fast_going(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_BATCH) == COURIER_OK);
    courier_group_set_fail_fast(g, 1);
    courier_group_add(NULL, g, req("GET", "/status/500"), COURIER_GROUP_CONTINUE_ON_FAILURE);
    courier_group_add(NULL, g, req("GET", "/delay/50"), 0);
    CHECK_EQ(courier_group_add(NULL, g, req("GET", "/echo"), 0x100), COURIER_E_INVALID_ARGUMENT);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_OK);
    CHECK_EQ(r.failed_index, -1);
    CHECK_EQ(result_code(g, 0), COURIER_E_HTTP_STATUS);
    CHECK_EQ(result_code(g, 1), COURIER_OK);
    courier_group_free(g);
    courier_engine_close(e);
}

/* The group's own limit: with max 2, the server never sees a third /hang, and the engine never
 * holds more than two of the group's requests. */
static void max_in_flight_holds_members_back(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_BATCH) == COURIER_OK);
    CHECK_EQ(courier_group_set_max_in_flight(g, -1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_group_set_max_in_flight(g, 2), COURIER_OK);
    for (int i = 0; i < 5; i++) courier_group_add(NULL, g, req_n("/hang", i), 0);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    /* The engine counts a send when it is made: start sent two, and nothing completes (/hang), so
     * nothing sends a third. */
    int64_t queued = -1, active = -1;
    courier_engine_pending(&queued, &active, e);
    CHECK_EQ(queued + active, 2);
    CHECK_EQ(courier_group_set_max_in_flight(g, 3), COURIER_E_INVALID_ARGUMENT); /* started */
    CHECK_EQ(th_wait_path("/hang", 2), 2);
    CHECK_EQ(cts_server_path_count(th_server(), "/hang"), 2);
    courier_engine_pending(&queued, &active, e);
    CHECK_EQ(queued, 0);
    CHECK_EQ(active, 2);
    CHECK_EQ(grec_done_calls(&r), 0);
    CHECK_EQ(courier_group_cancel(g), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_E_CANCELLED);
    CHECK_EQ(r.failed_index, -1);
    int sent = 0;
    for (size_t i = 0; i < 5; i++) {
        CHECK_EQ(result_code(g, i), COURIER_E_CANCELLED);
        if (result_id(g, i)) sent++;
    }
    CHECK_EQ(sent, 2);
    CHECK_EQ(cts_server_path_count(th_server(), "/hang"), 2);
    courier_group_free(g);
    courier_engine_close(e);
}

/* Every member finishes; at each member callback the engine holds at most max - 1 others (the member
 * being answered has already left the engine's counts, which drop just before a completion). */
static void max_in_flight_with_finishing_members(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_BATCH) == COURIER_OK);
    courier_group_set_max_in_flight(g, 2);
    for (int i = 0; i < 6; i++) courier_group_add(NULL, g, req_n("/delay/30", i), 0);
    grec r;
    grec_init(&r, e);
    courier_group_set_member_callback(g, on_member, &r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_OK);
    CHECK_EQ(r.member_calls, 6);
    CHECK_EQ(r.max_pending, 1);
    CHECK_EQ(cts_server_path_count(th_server(), "/delay/30"), 6);
    /* Members start in index order: ids grow with the index. */
    for (size_t i = 1; i < 6; i++) CHECK(result_id(g, i) > result_id(g, i - 1));
    courier_group_free(g);
    courier_engine_close(e);
}

/* ---- chain --------------------------------------------------------------------------------- */

static void chain_runs_in_order(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_CHAIN) == COURIER_OK);
    courier_group_add(NULL, g, req("GET", "/delay/40"), 0);
    courier_group_add(NULL, g, req("GET", "/delay/1"), 0);
    courier_group_add(NULL, g, req("GET", "/echo/c2"), 0);
    grec r;
    grec_init(&r, e);
    courier_group_set_member_callback(g, on_member, &r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_OK);
    CHECK_EQ(r.member_calls, 3);
    /* The slow first member still finishes first: one at a time, in order. */
    CHECK_EQ(r.member_order[0], 0);
    CHECK_EQ(r.member_order[1], 1);
    CHECK_EQ(r.member_order[2], 2);
    CHECK_EQ(r.max_pending, 0); /* nothing else is held while a step is answered */
    CHECK(result_id(g, 0) < result_id(g, 1) && result_id(g, 1) < result_id(g, 2));
    courier_group_free(g);
    courier_engine_close(e);
}

/* The dependent request: built from the previous response's body (HTNetworking's flattenMap). */
static int build_from_echo(courier_group *g, size_t index, int prev_code, const courier_response *prev,
                           courier_request **out, void *user) {
    (void)g;
    int *calls = user;
    (*calls)++;
    if (index != 1 || prev_code != COURIER_OK || !prev) return COURIER_E_INVALID_ARGUMENT;
    courier_json *doc = NULL;
    size_t len = 0;
    const uint8_t *body = courier_response_body(prev, &len);
    if (courier_json_parse(&doc, body, len, NULL, NULL) != COURIER_OK) return COURIER_E_INVALID_ARGUMENT;
    const char *query = courier_json_string(courier_json_get(doc, "query"), NULL); /* "user=42" */
    char target[256];
    snprintf(target, sizeof target, "/echo/profile?%s&from=%d", query ? query : "none",
             courier_response_status(prev));
    courier_json_free(doc);
    return courier_request_new(out, "GET", target);
}

static void chain_builds_from_previous_response(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_CHAIN) == COURIER_OK);
    int calls = 0;
    grec r;
    grec_init(&r, NULL);
    courier_group_add(NULL, g, req("GET", "/echo/login?user=42"), 0);
    atomic_store(&plain_frees, 0);
    CHECK_EQ(courier_group_add_built(NULL, g, build_from_echo, &calls, count_plain_free, 0), COURIER_OK);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_OK);
    CHECK_EQ(calls, 1);
    CHECK_CONTAINS(result_body(g, 1), "\"path\":\"/echo/profile\"");
    CHECK_CONTAINS(result_body(g, 1), "\"query\":\"user=42&from=200\"");
    /* Taking responses: once, only after completion. */
    courier_response *taken = courier_group_take_response(g, 1);
    CHECK(taken != NULL);
    CHECK(courier_group_take_response(g, 1) == NULL);
    CHECK_EQ(result_status(g, 1), -1);
    CHECK_EQ(result_code(g, 1), COURIER_OK);
    courier_response_free(taken);
    CHECK_EQ(atomic_load(&plain_frees), 0);
    courier_group_free(g);
    /* The builder's user_free runs when the group is released: the run's reference may outlive
     * the user's for a moment, since the worker drops it after `done` returns. */
    CHECK_EQ(wait_plain_frees(1), 1);
    courier_engine_close(e);
}

static void chain_failure_stops_the_rest(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_CHAIN) == COURIER_OK);
    courier_group_add(NULL, g, req("GET", "/echo/s0"), 0);
    courier_group_add(NULL, g, req("GET", "/status/500"), 0);
    courier_group_add(NULL, g, req("GET", "/echo/s2"), 0);
    int calls = 0;
    courier_group_add_built(NULL, g, build_from_echo, &calls, NULL, 0);
    grec r;
    grec_init(&r, NULL);
    courier_group_set_member_callback(g, on_member, &r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(r.failed_index, 1);
    CHECK_EQ(r.member_calls, 4); /* every member gets a result, the unsent ones too */
    CHECK_EQ(result_code(g, 0), COURIER_OK);
    CHECK_EQ(result_code(g, 2), COURIER_E_CANCELLED);
    CHECK_EQ(result_id(g, 2), 0);
    CHECK_EQ(result_code(g, 3), COURIER_E_CANCELLED);
    CHECK_EQ(calls, 0); /* a builder whose turn never came is never called */
    CHECK_EQ(cts_server_path_count(th_server(), "/echo/s2"), 0);
    courier_group_free(g);
    courier_engine_close(e);
}

typedef struct seen {
    int prev_code;
    int prev_status;
} seen;

static int build_after_failure(courier_group *g, size_t index, int prev_code, const courier_response *prev,
                               courier_request **out, void *user) {
    (void)g;
    (void)index;
    seen *s = user;
    s->prev_code = prev_code;
    s->prev_status = prev ? courier_response_status(prev) : -1;
    return courier_request_new(out, "GET", prev_code == COURIER_OK ? "/echo/then" : "/echo/else");
}

/* HTNetworking's ifRequestSucceed:then:else: as a chain. */
static void chain_continue_on_failure_branches(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_CHAIN) == COURIER_OK);
    seen s = {0, 0};
    courier_group_add(NULL, g, req("GET", "/status/500"), COURIER_GROUP_CONTINUE_ON_FAILURE);
    courier_group_add_built(NULL, g, build_after_failure, &s, NULL, 0);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_OK);
    CHECK_EQ(s.prev_code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(s.prev_status, 500);
    CHECK_CONTAINS(result_body(g, 1), "\"path\":\"/echo/else\"");
    courier_group_free(g);
    courier_engine_close(e);
}

static int build_skip(courier_group *g, size_t index, int prev_code, const courier_response *prev,
                      courier_request **out, void *user) {
    (void)g; (void)index; (void)prev_code; (void)prev; (void)user;
    *out = NULL;
    return COURIER_OK;
}

static int build_refuse(courier_group *g, size_t index, int prev_code, const courier_response *prev,
                        courier_request **out, void *user) {
    (void)g; (void)index; (void)prev_code; (void)prev; (void)user;
    courier_request_new(out, "GET", "/echo/leaked"); /* left in *out: the group frees it */
    return COURIER_E_INVALID_RESULT;
}

static void chain_skip_and_refuse(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_CHAIN) == COURIER_OK);
    courier_group_add_built(NULL, g, build_skip, NULL, NULL, 0);
    seen s = {1, 1};
    courier_group_add_built(NULL, g, build_after_failure, &s, NULL, 0); /* sees the skipped one */
    courier_group_add_built(NULL, g, build_refuse, NULL, NULL, 0);
    courier_group_add(NULL, g, req("GET", "/echo/never"), 0);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(result_code(g, 0), COURIER_OK);
    CHECK_EQ(result_id(g, 0), 0);
    CHECK_EQ(result_status(g, 0), -1);
    CHECK_EQ(s.prev_code, COURIER_OK);
    CHECK_EQ(s.prev_status, -1);
    CHECK_EQ(result_code(g, 1), COURIER_OK);
    CHECK_EQ(result_code(g, 2), COURIER_E_INVALID_RESULT);
    CHECK_EQ(result_id(g, 2), 0);
    CHECK_EQ(result_code(g, 3), COURIER_E_CANCELLED);
    CHECK_EQ(r.code, COURIER_E_INVALID_RESULT);
    CHECK_EQ(r.failed_index, 2);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo/leaked"), 0);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo/never"), 0);
    courier_group_free(g);
    courier_engine_close(e);
}

/* Pagination: each page's member callback appends the next page until three are fetched. */
static void add_next_page(courier_group *g, size_t index, int code, const courier_response *resp, void *user) {
    (void)resp;
    int *pages = user;
    (*pages)++;
    if (code == COURIER_OK && index < 2) {
        char target[64];
        snprintf(target, sizeof target, "/echo/page?n=%zu", index + 1);
        courier_group_add(NULL, g, req("GET", target), 0);
    }
}

static void members_added_from_a_callback(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_CHAIN) == COURIER_OK);
    int pages = 0;
    courier_group_set_member_callback(g, add_next_page, &pages, NULL);
    courier_group_add(NULL, g, req("GET", "/echo/page?n=0"), 0);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_OK);
    CHECK_EQ(pages, 3);
    CHECK_EQ(courier_group_count(g), 3);
    CHECK_CONTAINS(result_body(g, 2), "\"query\":\"n=2\"");
    courier_group_free(g);
    courier_engine_close(e);
}

/* A builder whose request lives in its own scope sends it with courier_group_submit. */
static int build_and_submit(courier_group *g, size_t index, int prev_code, const courier_response *prev,
                            courier_request **out, void *user) {
    (void)prev_code; (void)prev;
    int *second = user;
    courier_request *r = req("GET", index == 0 ? "/echo/submitted" : "http://bad url/");
    courier_error err;
    int rc = courier_group_submit(g, index, r, &err);
    *second = courier_group_submit(g, index, r, NULL); /* only once */
    courier_request_free(r); /* the request's scope ends here */
    *out = req("GET", "/echo/ignored");  /* ignored (and freed) after a submit */
    (void)rc;
    return COURIER_E_INTERNAL;           /* ignored after a submit */
}

static void build_callback_submits_a_borrowed_request(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_CHAIN) == COURIER_OK);
    int second0 = 0, second1 = 0;
    courier_group_add_built(NULL, g, build_and_submit, &second0, NULL, 0);
    courier_group_add_built(NULL, g, build_and_submit, &second1, NULL, 0);
    CHECK_EQ(courier_group_submit(g, 0, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_request *outside = req("GET", "/echo/outside");
    CHECK_EQ(courier_group_submit(g, 0, outside, NULL), COURIER_E_INVALID_ARGUMENT);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(second0, COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(result_code(g, 0), COURIER_OK);
    CHECK(result_id(g, 0) != 0);
    CHECK_CONTAINS(result_body(g, 0), "\"path\":\"/echo/submitted\"");
    CHECK_EQ(result_code(g, 1), COURIER_E_INVALID_URL); /* the submit's own failure */
    CHECK_EQ(result_id(g, 1), 0);
    CHECK_EQ(r.code, COURIER_E_INVALID_URL);
    CHECK_EQ(r.failed_index, 1);
    CHECK_EQ(courier_group_submit(g, 1, outside, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo/ignored"), 0);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo/outside"), 0);
    courier_request_free(outside);
    courier_group_free(g);
    courier_engine_close(e);
}

/* ---- cancelling and lifetime ----------------------------------------------------------------- */

static void cancel_the_whole_group(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_BATCH) == COURIER_OK);
    for (int i = 0; i < 3; i++) courier_group_add(NULL, g, req_n("/hang", i), 0);
    grec r;
    grec_init(&r, NULL);
    courier_group_set_member_callback(g, on_member, &r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, count_free), COURIER_OK);
    CHECK_EQ(th_wait_path("/hang", 3), 3);
    CHECK_EQ(courier_group_cancel(g), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_E_CANCELLED);
    CHECK_EQ(r.member_calls, 3);
    CHECK_EQ(grec_wait_frees(&r, 1), 1);
    for (size_t i = 0; i < 3; i++) CHECK_EQ(result_code(g, i), COURIER_E_CANCELLED);
    CHECK_EQ(courier_group_cancel(g), COURIER_E_NOT_FOUND);
    courier_group_free(g);
    courier_engine_close(e);
}

static void cancel_before_start(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_CHAIN) == COURIER_OK);
    courier_group_add(NULL, g, req("GET", "/echo/early"), 0);
    courier_group_add(NULL, g, req("GET", "/echo/early"), 0);
    CHECK_EQ(courier_group_cancel(g), COURIER_OK);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, count_free), COURIER_OK);
    CHECK_EQ(grec_done_calls(&r), 1); /* at once, on this thread */
    CHECK_EQ(grec_frees(&r), 1);
    CHECK_EQ(r.code, COURIER_E_CANCELLED);
    CHECK_EQ(result_code(g, 0), COURIER_E_CANCELLED);
    CHECK_EQ(result_id(g, 1), 0);
    int64_t queued = -1, active = -1; /* nothing was sent: the engine counts a send when it is made */
    courier_engine_pending(&queued, &active, e);
    CHECK_EQ(queued + active, 0);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo/early"), 0);
    courier_group_free(g);
    courier_engine_close(e);
}

static void empty_group_completes_at_once(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_BATCH) == COURIER_OK);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_done_calls(&r), 1);
    CHECK_EQ(r.code, COURIER_OK);
    CHECK_EQ(r.failed_index, -1);
    courier_group_free(g);
    /* Bad arguments. */
    CHECK_EQ(courier_group_new(&g, NULL, COURIER_GROUP_BATCH), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_group_new(&g, e, (courier_group_mode)7), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_group_new(NULL, e, COURIER_GROUP_BATCH), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_group_add(NULL, NULL, req("GET", "/"), 0), COURIER_E_INVALID_ARGUMENT);
    grec f;
    grec_init(&f, NULL);
    CHECK_EQ(courier_group_start(NULL, on_done, &f, count_free), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_group_add_built(NULL, NULL, build_skip, &f, count_free, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(f.frees, 2); /* user_free runs at once when registering fails */
    courier_group_free(NULL);
    courier_engine_close(e);
}

static void send_failures_are_member_results(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_BATCH) == COURIER_OK);
    courier_group_add(NULL, g, req("GET", "http://exa mple.com/"), 0);
    courier_group_add(NULL, g, req("GET", "/echo/ok"), 0);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_E_INVALID_URL);
    CHECK_EQ(r.failed_index, 0);
    CHECK_EQ(result_code(g, 0), COURIER_E_INVALID_URL);
    CHECK_EQ(result_id(g, 0), 0);
    CHECK_EQ(result_code(g, 1), COURIER_OK);
    courier_group_free(g);
    courier_engine_close(e);
}

static void free_while_running_still_completes_once(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_BATCH) == COURIER_OK);
    courier_group_add(NULL, g, req_n("/hang", 0), 0);
    courier_group_add(NULL, g, req_n("/hang", 1), 0);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, count_free), COURIER_OK);
    CHECK_EQ(th_wait_path("/hang", 2), 2);
    courier_group_free(g); /* cancels; the group lives until its run ends */
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(r.code, COURIER_E_CANCELLED);
    CHECK_EQ(grec_wait_frees(&r, 1), 1);
    courier_engine_close(e);
}

static void free_from_done(courier_group *g, int code, int64_t failed_index, void *user) {
    on_done(g, code, failed_index, user);
    courier_group_free(g);
}

static void free_inside_done_callback(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_BATCH) == COURIER_OK);
    courier_group_add(NULL, g, req("GET", "/echo/x"), 0);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, free_from_done, &r, count_free), COURIER_OK);
    CHECK_EQ(grec_wait(&r), 1);
    CHECK_EQ(grec_wait_frees(&r, 1), 1);
    courier_engine_close(e);
}

static void closing_the_engine_completes_the_group(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    cts_server_reset_counts(th_server());
    courier_group *g = NULL;
    REQUIRE(courier_group_new(&g, e, COURIER_GROUP_CHAIN) == COURIER_OK);
    courier_group_add(NULL, g, req("GET", "/hang"), 0);
    courier_group_add(NULL, g, req("GET", "/echo/after-close"), COURIER_GROUP_CONTINUE_ON_FAILURE);
    courier_group_add(NULL, g, req("GET", "/echo/after-close"), 0);
    grec r;
    grec_init(&r, NULL);
    CHECK_EQ(courier_group_start(g, on_done, &r, NULL), COURIER_OK);
    CHECK_EQ(th_wait_path("/hang", 1), 1);
    courier_engine_close(e);
    CHECK_EQ(grec_done_calls(&r), 1); /* before close returned */
    CHECK_EQ(result_code(g, 0), COURIER_E_CANCELLED);
    int c1 = result_code(g, 1);
    CHECK(c1 == COURIER_E_CLOSED || c1 == COURIER_E_CANCELLED);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo/after-close"), 0);
    courier_group_free(g); /* after the engine: only the group's own memory */
}

/* Many groups from several threads at once, each with limits, cancelled halfway or not. */
typedef struct stress_arg {
    courier_engine *e;
    int ok;
} stress_arg;

static void *stress_thread(void *p) {
    stress_arg *a = p;
    for (int round = 0; round < 10; round++) {
        courier_group *g = NULL;
        if (courier_group_new(&g, a->e, round % 2 ? COURIER_GROUP_CHAIN : COURIER_GROUP_BATCH)) return NULL;
        courier_group_set_max_in_flight(g, 1 + round % 3);
        for (int i = 0; i < 4; i++) courier_group_add(NULL, g, req("GET", i == 3 ? "/delay/20" : "/echo/st"), 0);
        grec r;
        grec_init(&r, NULL);
        courier_group_start(g, on_done, &r, NULL);
        if (round % 3 == 0) courier_group_cancel(g);
        if (grec_wait(&r) == 1) a->ok++;
        courier_group_free(g);
    }
    return NULL;
}

static void many_groups_on_many_threads(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    pthread_t th[4];
    stress_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i].e = e;
        args[i].ok = 0;
        pthread_create(&th[i], NULL, stress_thread, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(args[i].ok, 10);
    }
    courier_engine_close(e);
}

TESTS_MAIN(T(batch_gives_every_result), T(batch_fail_fast_cancels_the_rest), T(batch_without_fail_fast_runs_everything),
           T(continue_flag_keeps_fail_fast_going), T(max_in_flight_holds_members_back),
           T(max_in_flight_with_finishing_members), T(chain_runs_in_order), T(chain_builds_from_previous_response),
           T(chain_failure_stops_the_rest), T(chain_continue_on_failure_branches), T(chain_skip_and_refuse),
           T(members_added_from_a_callback), T(build_callback_submits_a_borrowed_request),
           T(cancel_the_whole_group), T(cancel_before_start),
           T(empty_group_completes_at_once), T(send_failures_are_member_results),
           T(free_while_running_still_completes_once), T(free_inside_done_callback),
           T(closing_the_engine_completes_the_group), T(many_groups_on_many_threads))
