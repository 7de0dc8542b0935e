/*
 * trace_test.c — a request's W3C trace context (courier_request_set_trace_context) and the events
 * spans are built from (docs/design/tracing.md): the context checked, sent on every attempt and
 * redirect hop, kept by the journal and sent again by a frozen request's replay; REDIRECTED events;
 * FINISHED's resend count and error type; courier_code_name; a WebSocket's opening handshake as a
 * send (WILL_SEND, DID_SEND, one FINISHED however it ends). A real server on loopback (its /ws/echo).
 */
#include "harness.h"
#include "journal_fixture.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#define TS "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"

/* ---- the setter --------------------------------------------------------------------------------- */

static void trace_context_is_checked(void) {
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "/echo") == COURIER_OK);
    const char *bad[] = {
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",      /* no flags */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   /* uppercase */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   /* trace id zero */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   /* parent id zero */
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   /* another version's form */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX: y", /* header injection */
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ(courier_request_set_trace_context(r, bad[i], NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_trace_context(r, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_trace_context(NULL, TP, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_trace_context(r, TP, "a=1\nb=2"), COURIER_E_INVALID_ARGUMENT);
    char big[600];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_EQ(courier_request_set_trace_context(r, TP, big), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
}

/* The response's /echo body holds the request's header lines as the server got them. */
static char *echo_body(courier_response *resp) {
    size_t n = 0;
    const uint8_t *b = courier_response_body(resp, &n);
    char *s = malloc(n + 1);
    if (!s) return NULL;
    memcpy(s, b ? (const char *)b : "", n);
    s[n] = '\0';
    return s;
}

static void trace_context_goes_out_replacing_earlier_lines(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "/echo") == COURIER_OK);
    courier_request_add_header(r, "traceparent", "00-11111111111111111111111111111111-2222222222222222-00");
    courier_request_add_header(r, "TraceState", "old=1");
    CHECK_EQ(courier_request_set_trace_context(r, TP, TS), COURIER_OK);
    /* a refused one leaves the request as it was */
    CHECK_EQ(courier_request_set_trace_context(r, "nope", NULL), COURIER_E_INVALID_ARGUMENT);
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    REQUIRE(resp);
    char *body = echo_body(resp);
    CHECK_CONTAINS(body, "[\"traceparent\",\"" TP "\"]");
    CHECK_CONTAINS(body, "[\"tracestate\",\"" TS "\"]");
    CHECK(!strstr(body, "2222222222222222"));
    CHECK(!strstr(body, "old=1"));
    free(body);
    courier_response_free(resp);

    /* tracestate NULL removes the line; the parent is replaced */
    CHECK_EQ(courier_request_set_trace_context(r, "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-00", NULL),
             COURIER_OK);
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    REQUIRE(resp);
    body = echo_body(resp);
    CHECK_CONTAINS(body, "[\"traceparent\",\"00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-00\"]");
    CHECK(!strstr(body, "tracestate"));
    free(body);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

/* ---- events ------------------------------------------------------------------------------------- */

#define MAXEV 64
typedef struct trace_events {
    pthread_mutex_t m;
    int n;
    int kind[MAXEV];
    uint64_t id[MAXEV];
    int status[MAXEV];
    int attempt[MAXEV];
    int resend[MAXEV];
    int has_trace_fields[MAXEV]; /* size covers the fields added for spans */
    char url[MAXEV][200];
    char traceparent[MAXEV][64];
    char tracestate[MAXEV][64];
    char error_type[MAXEV][32];
} trace_events;

static void on_trace_event(const courier_event *ev, void *user) {
    trace_events *v = user;
    if (ev->kind == COURIER_EVENT_PROGRESS) return;
    pthread_mutex_lock(&v->m);
    if (v->n < MAXEV) {
        int i = v->n++;
        v->kind[i] = ev->kind;
        v->id[i] = ev->request_id;
        v->status[i] = ev->http_status;
        v->attempt[i] = ev->attempt;
        v->has_trace_fields[i] = ev->size >= offsetof(courier_event, error_type) + sizeof ev->error_type;
        v->resend[i] = ev->resend_count;
        snprintf(v->url[i], sizeof v->url[i], "%s", ev->url ? ev->url : "");
        snprintf(v->traceparent[i], sizeof v->traceparent[i], "%s", ev->traceparent ? ev->traceparent : "");
        snprintf(v->tracestate[i], sizeof v->tracestate[i], "%s", ev->tracestate ? ev->tracestate : "");
        snprintf(v->error_type[i], sizeof v->error_type[i], "%s", ev->error_type ? ev->error_type : "");
    }
    pthread_mutex_unlock(&v->m);
}

static int find_event(trace_events *v, int kind, int nth) {
    for (int i = 0; i < v->n; i++)
        if (v->kind[i] == kind && nth-- == 0) return i;
    return -1;
}

static void redirect_hops_are_events_and_resends(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    trace_events v = {.m = PTHREAD_MUTEX_INITIALIZER};
    CHECK_EQ(courier_monitor_add(NULL, e, 0, on_trace_event, &v, NULL), COURIER_OK);
    courier_request *r = NULL;
    /* two hops: /redirect -> /redirect (307) -> /echo */
    REQUIRE(courier_request_new(&r, "GET", "/redirect?to=%2Fredirect%3Fto%3D%252Fecho%26status%3D307") == COURIER_OK);
    CHECK_EQ(courier_request_set_trace_context(r, TP, TS), COURIER_OK);
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    REQUIRE(resp);
    char *body = echo_body(resp); /* the last hop carried the context too */
    CHECK_CONTAINS(body, "[\"traceparent\",\"" TP "\"]");
    free(body);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);

    int r1 = find_event(&v, COURIER_EVENT_REDIRECTED, 0), r2 = find_event(&v, COURIER_EVENT_REDIRECTED, 1);
    int fin = find_event(&v, COURIER_EVENT_FINISHED, 0), will = find_event(&v, COURIER_EVENT_WILL_SEND, 0);
    REQUIRE(r1 >= 0 && r2 >= 0 && fin >= 0 && will >= 0);
    CHECK(will < r1 && r1 < r2 && r2 < fin);
    CHECK_EQ(v.id[r1], v.id[fin]);
    CHECK_EQ(v.status[r1], 302);
    CHECK_EQ(v.attempt[r1], 1);
    CHECK_CONTAINS(v.url[r1], "/redirect?to=");
    CHECK_EQ(v.status[r2], 307);
    CHECK_EQ(v.attempt[r2], 2);
    CHECK_CONTAINS(v.url[r2], "/echo");
    for (int i = 0; i < v.n; i++) {
        CHECK(v.has_trace_fields[i]);
        CHECK_STR(v.traceparent[i], TP);
        CHECK_STR(v.tracestate[i], TS);
    }
    CHECK_EQ(v.resend[fin], 2);
    CHECK_STR(v.error_type[fin], "");
    CHECK_EQ(v.status[fin], 200);
}

static void finished_says_resends_and_error_type(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    trace_events v = {.m = PTHREAD_MUTEX_INITIALIZER};
    CHECK_EQ(courier_monitor_add(NULL, e, 1u << COURIER_EVENT_FINISHED, on_trace_event, &v, NULL), COURIER_OK);
    courier_request *r = NULL;
    courier_error err;
    courier_response *resp = NULL;

    /* a status: two retries, then the 503 fails it */
    REQUIRE(courier_request_new(&r, "GET", "/status/503") == COURIER_OK);
    CHECK_EQ(courier_request_set_retry(r, 2, 1, 2, COURIER_RETRY_IGNORE_RETRY_AFTER), COURIER_OK);
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_HTTP_STATUS);
    courier_response_free(resp);
    courier_request_free(r);

    /* a code: nobody listens there */
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/x", jr_free_port());
    REQUIRE(courier_request_new(&r, "GET", url) == COURIER_OK);
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_CANNOT_CONNECT);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);

    REQUIRE(v.n == 2);
    CHECK_STR(v.error_type[0], "503");
    CHECK_EQ(v.resend[0], 2);
    CHECK_STR(v.error_type[1], "cannot_connect");
    CHECK_EQ(v.resend[1], 0);
    CHECK_STR(v.traceparent[1], ""); /* none set: none made up */
}

/* A send refused after its before-send interceptors ran (a tracer's span started there) has one
 * FINISHED, on the sending thread before courier_send returns, with the refusal's code and error
 * type; a send refused before them has none. */
#define MAXSEEN 16
static uint64_t seen_ids[MAXSEEN];
static int nseen;

static int before_seen(courier_outgoing *o, void *user) {
    (void)user;
    if (nseen < MAXSEEN) seen_ids[nseen++] = courier_outgoing_request_id(o);
    return courier_outgoing_set_header(o, "traceparent", TP);
}
static int before_refuses_marked(courier_outgoing *o, void *user) {
    (void)user;
    return courier_outgoing_header(o, "X-Refuse") ? COURIER_E_INVALID_HEADER : COURIER_OK;
}
static void tweak_refusals(courier_config *c) {
    courier_config_add_interceptor(c, before_seen, NULL, NULL, NULL);
    courier_config_add_interceptor(c, before_refuses_marked, NULL, NULL, NULL);
    courier_config_set_frequent_guard_ms(c, 600000);
}

typedef struct refused_events {
    trace_events v;
    pthread_t thread[MAXEV];
    int code[MAXEV];
    int has_response[MAXEV];
} refused_events;

static void on_refused_event(const courier_event *ev, void *user) {
    refused_events *rv = user;
    pthread_mutex_lock(&rv->v.m);
    int i = rv->v.n;
    if (i < MAXEV) {
        rv->thread[i] = pthread_self();
        rv->code[i] = ev->code;
        rv->has_response[i] = ev->response != NULL;
    }
    pthread_mutex_unlock(&rv->v.m);
    on_trace_event(ev, &rv->v);
}

static int refuse_customize(courier_outgoing *o, void *user) {
    (void)o;
    (void)user;
    return COURIER_E_INVALID_ARGUMENT;
}

static void refused_sends_finish_after_the_interceptors(void) {
    nseen = 0;
    courier_engine *e = th_engine(tweak_refusals);
    REQUIRE(e);
    static refused_events rv;
    memset(&rv, 0, sizeof rv);
    pthread_mutex_init(&rv.v.m, NULL);
    CHECK_EQ(courier_monitor_add(NULL, e, 1u << COURIER_EVENT_FINISHED, on_refused_event, &rv, NULL), COURIER_OK);
    courier_request *r = NULL;
    courier_error err;
    uint64_t id = 0;
    const int want[] = {COURIER_E_NOT_FOUND, COURIER_E_INVALID_HEADER, COURIER_E_TOO_FREQUENT};
    const char *want_type[] = {"not_found", "invalid_header", "too_frequent"};

    /* a custom transport not registered */
    REQUIRE(courier_request_new(&r, "GET", "/echo?transport") == COURIER_OK);
    CHECK_EQ(courier_request_set_transport(r, "nope"), COURIER_OK);
    CHECK_EQ(courier_send(&id, e, r, NULL, NULL, &err), want[0]);
    CHECK_EQ(err.code, want[0]);
    CHECK_EQ(id, 0);
    courier_request_free(r);
    /* an interceptor after the tracer's refuses */
    REQUIRE(courier_request_new(&r, "GET", "/echo?refused") == COURIER_OK);
    CHECK_EQ(courier_request_add_header(r, "X-Refuse", "1"), COURIER_OK);
    CHECK_EQ(courier_send(NULL, e, r, NULL, NULL, &err), want[1]);
    courier_request_free(r);
    /* the frequent-request guard: the first goes out, the second is refused */
    REQUIRE(courier_request_new(&r, "GET", "/echo?guarded") == COURIER_OK);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    courier_response_free(resp);
    pthread_mutex_lock(&rv.v.m);
    int before = rv.v.n; /* the first's FINISHED (worker) */
    pthread_mutex_unlock(&rv.v.m);
    CHECK_EQ(before, 3);
    CHECK_EQ(courier_send(NULL, e, r, NULL, NULL, NULL), want[2]); /* no error out-parameter */
    courier_request_free(r);
    /* refused before the interceptors: no FINISHED, no interceptor */
    int seen_then = nseen;
    REQUIRE(courier_request_new(&r, "GET", "http://bad host/") == COURIER_OK);
    CHECK_EQ(courier_send(NULL, e, r, NULL, NULL, &err), COURIER_E_INVALID_URL);
    courier_request_free(r);
    REQUIRE(courier_request_new(&r, "GET", "/echo?customize") == COURIER_OK);
    CHECK_EQ(courier_request_set_customize(r, refuse_customize, NULL, NULL), COURIER_OK);
    CHECK_EQ(courier_send(NULL, e, r, NULL, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
    CHECK_EQ(nseen, seen_then);

    pthread_mutex_lock(&rv.v.m);
    int n = rv.v.n;
    pthread_mutex_unlock(&rv.v.m);
    courier_engine_close(e);
    REQUIRE(n == 4);
    REQUIRE(nseen == 4);
    /* events 0, 1 and 3 are the refusals, in order; 2 the guarded send that went out */
    const int refusal[] = {0, 1, 3};
    const int seen_at[] = {0, 1, 3};
    for (int k = 0; k < 3; k++) {
        int i = refusal[k];
        CHECK_EQ(rv.v.kind[i], COURIER_EVENT_FINISHED);
        CHECK_EQ(rv.v.id[i], seen_ids[seen_at[k]]); /* the id the interceptor saw (its span's) */
        CHECK_EQ(rv.code[i], want[k]);
        CHECK_STR(rv.v.error_type[i], want_type[k]);
        CHECK(pthread_equal(rv.thread[i], pthread_self())); /* inside courier_send */
        CHECK(!rv.has_response[i]);
        CHECK_STR(rv.v.traceparent[i], TP); /* the lines as the interceptors left them */
        CHECK_CONTAINS(rv.v.url[i], "/echo");
    }
    CHECK_EQ(rv.code[2], COURIER_OK);
    CHECK_EQ(rv.v.id[2], seen_ids[2]);
    pthread_mutex_destroy(&rv.v.m);
}

/* A stale-while-revalidate answer prepares a background revalidation (its own id: the interceptors
 * ran for it) inside the send; refused after that (the guard), the send drops it unstarted, and
 * its FINISHED (cancelled) comes too. */
static void tweak_swr(courier_config *c) {
    courier_config_set_store_dir(c, th_tmpdir());
    courier_config_set_clock(c, th_clock, NULL, NULL);
    courier_config_set_cache_policy(c, COURIER_CACHE_HTTP);
    courier_config_add_interceptor(c, before_seen, NULL, NULL, NULL);
    courier_config_set_frequent_guard_ms(c, 600000);
}

static void dropped_revalidation_finishes(void) {
    nseen = 0;
    th_clock_set_offset_ms(0);
    cts_server_reset_counts(th_server());
    courier_engine *e = th_engine(tweak_swr);
    REQUIRE(e);
    static refused_events rv;
    memset(&rv, 0, sizeof rv);
    pthread_mutex_init(&rv.v.m, NULL);
    CHECK_EQ(courier_monitor_add(NULL, e, 1u << COURIER_EVENT_FINISHED, on_refused_event, &rv, NULL), COURIER_OK);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "/headers?Cache-Control=max-age%3D1%2C%20stale-while-revalidate%3D600&X-Trace=1") ==
            COURIER_OK);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK); /* stored */
    courier_response_free(resp);
    th_clock_set_offset_ms(5 * 1000); /* stale, within stale-while-revalidate */
    courier_error err;
    CHECK_EQ(courier_send(NULL, e, r, NULL, NULL, &err), COURIER_E_TOO_FREQUENT);
    courier_request_free(r);
    pthread_mutex_lock(&rv.v.m);
    int n = rv.v.n;
    pthread_mutex_unlock(&rv.v.m);
    courier_engine_close(e);
    th_clock_set_offset_ms(0);
    CHECK_EQ(cts_server_path_count(th_server(), "/headers"), 1); /* the revalidation never went out */
    REQUIRE(nseen == 3); /* the first send, the second, its revalidation */
    REQUIRE(n == 3);
    CHECK_EQ(rv.v.id[0], seen_ids[0]);
    CHECK_EQ(rv.code[0], COURIER_OK);
    CHECK_EQ(rv.v.id[1], seen_ids[1]);
    CHECK_EQ(rv.code[1], COURIER_E_TOO_FREQUENT);
    CHECK_EQ(rv.v.id[2], seen_ids[2]);
    CHECK_EQ(rv.code[2], COURIER_E_CANCELLED);
    CHECK_STR(rv.v.error_type[2], "cancelled");
    CHECK(pthread_equal(rv.thread[2], pthread_self()));
    pthread_mutex_destroy(&rv.v.m);
}

static void code_names_are_stable(void) {
    CHECK_STR(courier_code_name(COURIER_OK), "ok");
    CHECK_STR(courier_code_name(COURIER_E_TIMEOUT), "timeout");
    CHECK_STR(courier_code_name(COURIER_E_CANNOT_CONNECT), "cannot_connect");
    CHECK_STR(courier_code_name(COURIER_E_CREDENTIAL_REFUSED), "credential_refused");
    CHECK_STR(courier_code_name(-9999), "unknown");
    CHECK_STR(courier_code_name(1), "unknown");
    CHECK_STR(courier_event_kind_name(COURIER_EVENT_REDIRECTED), "redirected");
    /* every code has a name of its own */
    for (int c = 0; c >= -80; c--) {
        const char *n = courier_code_name(c);
        int known = strcmp(courier_strerror(c), "unknown error") != 0;
        CHECK(known == (strcmp(n, "unknown") != 0));
    }
}

/* ---- a WebSocket's opening handshake ---------------------------------------------------------- */

/* courier_ws_open prepares its handshake's request as a send (the interceptors run, a tracer's span
 * starts under its id), so the handshake has a send's events: WILL_SEND, DID_SEND once it is on the
 * wire, and exactly one FINISHED, on the worker, whichever way it ends: opened (COURIER_OK, the 101
 * as the response, before the WebSocket is seen open), refused, failed, timed out, closed or freed
 * before it opened, the engine closed. Before, a WebSocket had none of them: a span never ended. */
typedef struct ws_events {
    pthread_mutex_t m;
    pthread_cond_t c;
    int n, finished;
    int kind[MAXEV];
    uint64_t id[MAXEV];
    int code[MAXEV];
    int status[MAXEV];
    int resp_status[MAXEV]; /* the response's, 0 without one */
    int on_worker[MAXEV];   /* not the test's thread */
    char upgrade[MAXEV][32];
    char url[MAXEV][200];
    char traceparent[MAXEV][64];
    char error_type[MAXEV][32];
} ws_events;

static pthread_t test_thread;

static void on_ws_event(const courier_event *ev, void *user) {
    ws_events *w = user;
    pthread_mutex_lock(&w->m);
    if (w->n < MAXEV) {
        int i = w->n++;
        w->kind[i] = ev->kind;
        w->id[i] = ev->request_id;
        w->code[i] = ev->code;
        w->status[i] = ev->http_status;
        w->resp_status[i] = ev->response ? courier_response_status(ev->response) : 0;
        const char *u = ev->response ? courier_response_header(ev->response, "Upgrade") : NULL;
        snprintf(w->upgrade[i], sizeof w->upgrade[i], "%s", u ? u : "");
        w->on_worker[i] = !pthread_equal(pthread_self(), test_thread);
        snprintf(w->url[i], sizeof w->url[i], "%s", ev->url ? ev->url : "");
        snprintf(w->traceparent[i], sizeof w->traceparent[i], "%s", ev->traceparent ? ev->traceparent : "");
        snprintf(w->error_type[i], sizeof w->error_type[i], "%s", ev->error_type ? ev->error_type : "");
    }
    if (ev->kind == COURIER_EVENT_FINISHED) w->finished++;
    pthread_mutex_unlock(&w->m);
    pthread_cond_broadcast(&w->c);
}

static int ws_finished(ws_events *w) {
    pthread_mutex_lock(&w->m);
    int n = w->finished;
    pthread_mutex_unlock(&w->m);
    return n;
}

static void tweak_ws(courier_config *c) { courier_config_add_interceptor(c, before_seen, NULL, NULL, NULL); }

static courier_ws *ws_open_to(courier_engine *e, const char *url, int64_t handshake_ms) {
    courier_request *r = NULL;
    if (courier_request_new(&r, "GET", url) != COURIER_OK) return NULL;
    courier_ws_options o = {.size = sizeof o};
    courier_ws_options_init(&o);
    o.handshake_timeout_ms = handshake_ms;
    courier_ws *ws = NULL;
    int rc = courier_ws_open(&ws, e, r, &o, NULL, NULL, NULL, NULL);
    courier_request_free(r);
    return rc == COURIER_OK ? ws : NULL;
}

/* The code the WebSocket ended with, after the messages still unread. */
static int ws_end(courier_ws *ws) {
    courier_ws_message m = {.size = sizeof m};
    int rc;
    while ((rc = courier_ws_next(&m, ws, 30000, NULL)) == COURIER_OK) {}
    return rc;
}

/* The events of send id `id`: WILL_SEND first, FINISHED last and once; its index, or -1. */
static int ws_finish_of(ws_events *w, uint64_t id) {
    int first = -1, last = -1, fin = -1, nfin = 0;
    for (int i = 0; i < w->n; i++) {
        if (w->id[i] != id) continue;
        if (first < 0) first = i;
        last = i;
        if (w->kind[i] == COURIER_EVENT_FINISHED) fin = i, nfin++;
    }
    CHECK(first >= 0 && w->kind[first] == COURIER_EVENT_WILL_SEND);
    CHECK_EQ(nfin, 1);
    CHECK_EQ(fin, last);
    return nfin == 1 ? fin : -1;
}

static void websocket_handshakes_finish(void) {
    nseen = 0;
    test_thread = pthread_self();
    courier_engine *e = th_engine(tweak_ws);
    REQUIRE(e);
    static ws_events w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.m, NULL);
    pthread_cond_init(&w.c, NULL);
    unsigned kinds = 1u << COURIER_EVENT_WILL_SEND | 1u << COURIER_EVENT_DID_SEND | 1u << COURIER_EVENT_FINISHED;
    CHECK_EQ(courier_monitor_add(NULL, e, kinds, on_ws_event, &w, NULL), COURIER_OK);
    courier_error err;
    courier_ws_message m = {.size = sizeof m};
    int port = 0, silent = th_silent_listener(&port); /* connects, never answers */
    REQUIRE(silent >= 0);
    char hang[64], nobody[64];
    snprintf(hang, sizeof hang, "ws://127.0.0.1:%d/", port);
    snprintf(nobody, sizeof nobody, "ws://127.0.0.1:%d/", th_free_port());

    /* 0: opens (the test server's echo), a message both ways, closes */
    courier_ws *ws = ws_open_to(e, "/ws/echo", 0);
    REQUIRE(ws);
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "hi", 2, &err), COURIER_OK);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK);
    CHECK_EQ(ws_finished(&w), 1); /* the handshake's, before the WebSocket was seen open */
    CHECK_EQ(courier_ws_close(ws, 1000, NULL), COURIER_OK);
    CHECK_EQ(ws_end(ws), COURIER_E_WS_CLOSED);
    courier_ws_free(ws);
    CHECK_EQ(ws_finished(&w), 1); /* the closing handshake is no request */
    /* 1: refused with a 403 */
    CHECK_EQ(ws_end(ws = ws_open_to(e, "/status/403", 0)), COURIER_E_WS_HANDSHAKE);
    courier_ws_free(ws);
    /* 2: nobody listens */
    CHECK_EQ(ws_end(ws = ws_open_to(e, nobody, 0)), COURIER_E_CANNOT_CONNECT);
    courier_ws_free(ws);
    /* 3: no answer within the handshake's time */
    CHECK_EQ(ws_end(ws = ws_open_to(e, hang, 200)), COURIER_E_TIMEOUT);
    courier_ws_free(ws);
    /* 4: closed before it opened */
    ws = ws_open_to(e, hang, 0);
    REQUIRE(ws);
    CHECK_EQ(courier_ws_close(ws, 1000, NULL), COURIER_OK);
    CHECK_EQ(ws_end(ws), COURIER_E_CANCELLED);
    courier_ws_free(ws);
    /* 5: freed before it opened: its FINISHED comes on the worker after the free */
    ws = ws_open_to(e, hang, 0);
    REQUIRE(ws);
    courier_ws_free(ws);
    pthread_mutex_lock(&w.m);
    CHECK_EQ(th_wait_count(&w.c, &w.m, &w.finished, 6), 6);
    pthread_mutex_unlock(&w.m);
    /* 6: the engine closes while it connects */
    ws = ws_open_to(e, hang, 0);
    REQUIRE(ws);
    courier_engine_close(e);
    CHECK_EQ(ws_end(ws), COURIER_E_CLOSED);
    courier_ws_free(ws);
    close(silent);

    REQUIRE(nseen == 7);
    REQUIRE(w.finished == 7);
    const int want[] = {COURIER_OK,        COURIER_E_WS_HANDSHAKE, COURIER_E_CANNOT_CONNECT, COURIER_E_TIMEOUT,
                        COURIER_E_CANCELLED, COURIER_E_CANCELLED,  COURIER_E_CLOSED};
    const char *want_type[] = {"", "ws_handshake", "cannot_connect", "timeout", "cancelled", "cancelled", "closed"};
    for (int k = 0; k < 7; k++) {
        int f = ws_finish_of(&w, seen_ids[k]); /* the id the interceptor saw: its span's */
        if (f < 0) continue;
        CHECK_EQ(w.code[f], want[k]);
        CHECK_STR(w.error_type[f], want_type[k]);
        CHECK(w.on_worker[f]);
        CHECK_STR(w.traceparent[f], TP); /* the lines as the interceptors left them */
        CHECK(strncmp(w.url[f], "http://127.0.0.1:", 17) == 0); /* ws:// goes out as http:// */
        if (k) CHECK_EQ(w.resp_status[f], 0); /* a failure has no response */
    }
    int f = ws_finish_of(&w, seen_ids[0]);
    if (f >= 0) { /* opened: the 101 is the response */
        CHECK_EQ(w.status[f], 101);
        CHECK_EQ(w.resp_status[f], 101);
        CHECK_STR(w.upgrade[f], "websocket");
        CHECK_CONTAINS(w.url[f], "/ws/echo");
        int did = -1;
        for (int i = 0; i < f; i++)
            if (w.id[i] == seen_ids[0] && w.kind[i] == COURIER_EVENT_DID_SEND) did = i;
        CHECK(did >= 0); /* between the two */
    }
    f = ws_finish_of(&w, seen_ids[1]);
    if (f >= 0) CHECK_EQ(w.status[f], 403); /* the status that refused it, without a response */
    pthread_cond_destroy(&w.c);
    pthread_mutex_destroy(&w.m);
}

/* A WebSocket opened just before its engine closes ends with COURIER_E_CLOSED by the time the close
 * returns, with its one FINISHED. Its start is posted to the worker; when the worker, busy with
 * posted work, saw the close in the same turn with no WebSocket open, it ended its loop and ran the
 * start afterwards, which connected as if nothing had closed: the WebSocket never ended, and
 * courier_ws_free then posted to the freed engine. The gate makes that order: a monitor holds the
 * worker inside a posted function (the free of a first WebSocket, its FINISHED) until the second
 * is opened and the close has begun (a post is refused). */
typedef struct close_gate {
    ws_events w;
    courier_engine *e;
    uint64_t gate_id;
    int entered, opened;
} close_gate;

static void noop_work(void *user) { (void)user; }

static void on_gate_event(const courier_event *ev, void *user) {
    close_gate *g = user;
    on_ws_event(ev, &g->w);
    if (ev->kind != COURIER_EVENT_FINISHED || ev->request_id != g->gate_id) return;
    pthread_mutex_lock(&g->w.m);
    g->entered = 1;
    pthread_cond_broadcast(&g->w.c);
    th_wait_count(&g->w.c, &g->w.m, &g->opened, 1);
    pthread_mutex_unlock(&g->w.m);
    int64_t until = th_now_ms() + 30000; /* a bound, not a timing: the close comes at once */
    while (courier_engine_post(g->e, noop_work, NULL, NULL) == COURIER_OK && th_now_ms() < until) sched_yield();
}

static void websocket_opened_as_the_engine_closes_ends(void) {
    int port = 0, silent = th_silent_listener(&port);
    REQUIRE(silent >= 0);
    char hang[64];
    snprintf(hang, sizeof hang, "ws://127.0.0.1:%d/", port);
    nseen = 0;
    test_thread = pthread_self();
    static close_gate g;
    memset(&g, 0, sizeof g);
    pthread_mutex_init(&g.w.m, NULL);
    pthread_cond_init(&g.w.c, NULL);
    courier_engine *e = g.e = th_engine(tweak_ws);
    REQUIRE(e);
    courier_ws *first = ws_open_to(e, hang, 0);
    REQUIRE(first && nseen == 1);
    g.gate_id = seen_ids[0];
    CHECK_EQ(courier_monitor_add(NULL, e, 1u << COURIER_EVENT_WILL_SEND | 1u << COURIER_EVENT_FINISHED, on_gate_event,
                                 &g, NULL),
             COURIER_OK);
    courier_ws_free(first); /* the worker's kick ends it: its FINISHED holds the worker */
    pthread_mutex_lock(&g.w.m);
    CHECK_EQ(th_wait_count(&g.w.c, &g.w.m, &g.entered, 1), 1);
    pthread_mutex_unlock(&g.w.m);
    courier_ws *ws = ws_open_to(e, hang, 0);
    REQUIRE(ws);
    pthread_mutex_lock(&g.w.m);
    g.opened = 1;
    pthread_cond_broadcast(&g.w.c);
    pthread_mutex_unlock(&g.w.m);
    courier_engine_close(e);
    courier_ws_message m = {.size = sizeof m};
    int rc = courier_ws_next(&m, ws, 0, NULL);
    CHECK_EQ(rc, COURIER_E_CLOSED);
    if (rc == COURIER_E_CLOSED) courier_ws_free(ws); /* else it would post to the freed engine */
    close(silent);
    REQUIRE(nseen == 2);
    CHECK_EQ(g.w.finished, 2);
    int f = ws_finish_of(&g.w, seen_ids[1]);
    if (f >= 0) CHECK_EQ(g.w.code[f], COURIER_E_CLOSED);
    pthread_cond_destroy(&g.w.c);
    pthread_mutex_destroy(&g.w.m);
}

/* ---- the journal -------------------------------------------------------------------------------- */

/* A frozen request keeps its trace context in the record's header lines, and its replay sends it
 * and says so in its events. */
static void frozen_request_replays_its_trace_context(void) {
    jr_server srv;
    courier_engine *e = open_served(&srv, NULL);
    REQUIRE(e);
    trace_events v = {.m = PTHREAD_MUTEX_INITIALIZER};
    CHECK_EQ(courier_monitor_add(NULL, e, 0, on_trace_event, &v, NULL), COURIER_OK);
    waiter w;
    w_init(&w, e);
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    courier_request *r = freezable("POST", "/traced", "a=1", COURIER_FREEZE_AUTO, 0);
    CHECK_EQ(courier_request_set_trace_context(r, TP, TS), COURIER_OK);
    CHECK_EQ(send_one(e, r, &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 1), 1);
    CHECK_EQ(w.codes[0], COURIER_E_FROZEN);

    courier_frozen *f = NULL;
    REQUIRE(courier_frozen_get(&f, e, w.ids[0], NULL) == COURIER_OK);
    int saw_parent = 0, saw_state = 0;
    for (size_t i = 0; i < courier_frozen_header_count(f); i++) {
        const char *n, *val;
        courier_frozen_header_at(&n, &val, f, i);
        if (strcmp(n, "traceparent") == 0) saw_parent = strcmp(val, TP) == 0;
        if (strcmp(n, "tracestate") == 0) saw_state = strcmp(val, TS) == 0;
    }
    CHECK(saw_parent && saw_state);
    CHECK_CONTAINS(courier_frozen_json(f), "[\"traceparent\",\"" TP "\"]");
    courier_frozen_free(f);

    CHECK_EQ(courier_reachability_set_online(e), COURIER_OK); /* starts replay */
    CHECK_EQ(drain_within(e, 30000), 0);
    courier_engine_close(e);
    jr_stop(&srv);
    REQUIRE(jr_path_count(&srv, "/traced") == 1);
    jr_hit h = jr_get(&srv, 0);
    CHECK_STR(h.path, "/traced");
    CHECK_CONTAINS(h.head, "traceparent: " TP "\r\n");
    CHECK_CONTAINS(h.head, "tracestate: " TS "\r\n");
    jr_free(&srv);
    w_destroy(&w);
    /* the replay's own events carry the context (two sends: the one frozen, and the replay) */
    int sends = 0;
    for (int i = 0; i < v.n; i++)
        if (v.kind[i] == COURIER_EVENT_WILL_SEND) {
            sends++;
            CHECK_STR(v.traceparent[i], TP);
        }
    CHECK_EQ(sends, 2);
}

/* A request the journal cannot freeze (a multipart body: a file part may change before a resend)
 * made while the monitor says offline: its WILL_SEND (on the sending thread, before the freeze is
 * tried) is not said again when the worker takes it up (and fails it: offline, nothing sent); one
 * WILL_SEND, one FINISHED. */
static void unfrozen_offline_send_says_will_send_once(void) {
    jr_server srv;
    courier_engine *e = open_served(&srv, NULL);
    REQUIRE(e);
    trace_events v = {.m = PTHREAD_MUTEX_INITIALIZER};
    CHECK_EQ(courier_monitor_add(NULL, e, 0, on_trace_event, &v, NULL), COURIER_OK);
    waiter w;
    w_init(&w, e);
    CHECK_EQ(courier_reachability_set_offline(e), COURIER_OK);
    courier_request *r = freezable("POST", "/parts", NULL, COURIER_FREEZE_AUTO, 0);
    CHECK_EQ(courier_request_add_part_data(r, "a", "1", 1, NULL, NULL), COURIER_OK);
    CHECK_EQ(send_one(e, r, &w), COURIER_OK);
    CHECK_EQ(w_wait(&w, 1), 1);
    CHECK_EQ(w.codes[0], COURIER_E_OFFLINE); /* not frozen, not sent */
    courier_engine_close(e);
    jr_stop(&srv);
    CHECK_EQ(jr_path_count(&srv, "/parts"), 0);
    jr_free(&srv);
    w_destroy(&w);
    int will = 0, fin = 0;
    for (int i = 0; i < v.n; i++) {
        will += v.kind[i] == COURIER_EVENT_WILL_SEND;
        fin += v.kind[i] == COURIER_EVENT_FINISHED;
    }
    CHECK_EQ(will, 1);
    CHECK_EQ(fin, 1);
}

TESTS_MAIN(T(trace_context_is_checked), T(trace_context_goes_out_replacing_earlier_lines),
           T(redirect_hops_are_events_and_resends), T(finished_says_resends_and_error_type),
           T(refused_sends_finish_after_the_interceptors), T(dropped_revalidation_finishes), T(code_names_are_stable),
           T(websocket_handshakes_finish), T(websocket_opened_as_the_engine_closes_ends),
           T(frozen_request_replays_its_trace_context), T(unfrozen_offline_send_says_will_send_once))
