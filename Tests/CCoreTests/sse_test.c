/*
 * sse_test.c — server-sent events (courier_sse) over the loopback test server: events with type,
 * multi-line data and ids; reconnection after a clean end with Last-Event-ID and the server's retry
 * time; 204 ending the source for good; a Content-Type that is not text/event-stream; the parsing
 * rules of the WHATWG HTML spec on raw bodies (CR, LF and CRLF line ends, a leading BOM, comments, a
 * field with no colon, one leading space, retry with non-digits, a block without data, U+2028 kept
 * inside data, invalid UTF-8); close from another thread; reads that do not wait.
 */
#include "harness.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

static courier_sse *open_sse(courier_engine *e, const char *path, courier_error *err) {
    courier_request *r = NULL;
    courier_request_new(&r, "GET", path);
    courier_sse *es = NULL;
    int rc = courier_sse_open(&es, e, r, NULL, NULL, NULL, err);
    courier_request_free(r);
    return rc == COURIER_OK ? es : NULL;
}

/* /text with a raw body (hex) served as text/event-stream. */
static const char *raw_path(const char *body) {
    static char path[4096];
    int n = snprintf(path, sizeof path, "/text?type=text/event-stream&hex=");
    for (const unsigned char *p = (const unsigned char *)body; *p && n < (int)sizeof path - 3; p++)
        n += snprintf(path + n, sizeof path - (size_t)n, "%02x", *p);
    return path;
}

static void test_events_ids_and_reconnection(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    long before = th_wait_path("/sse", 0);
    /* 2 events a connection, 5 in all, retry 20 ms: 3 connections, then 204 ends it. */
    courier_sse *es = open_sse(e, "/sse?per=2&total=5&retry=20", &err);
    REQUIRE(es);
    courier_sse_event ev = {.size = sizeof ev};
    for (int i = 1; i <= 5; i++) {
        int rc = courier_sse_next(&ev, es, 10000, &err);
        CHECK_EQ(rc, COURIER_OK);
        if (rc) break;
        char want[64];
        snprintf(want, sizeof want, "event %d\nline two", i);
        CHECK_STR(ev.data, want);
        CHECK_EQ(ev.data_len, strlen(want));
        CHECK_STR(ev.type, "tick");
        snprintf(want, sizeof want, "%d", i);
        CHECK_STR(ev.last_event_id, want);
        CHECK_EQ(courier_sse_get_state(es), COURIER_SSE_OPEN);
    }
    CHECK_EQ(courier_sse_retry_ms(es), 20);
    CHECK_EQ(courier_sse_next(&ev, es, 10000, &err), COURIER_E_HTTP_STATUS);
    CHECK_EQ(err.http_status, 204);
    CHECK_EQ(courier_sse_get_state(es), COURIER_SSE_CLOSED);
    CHECK_EQ(courier_sse_next(&ev, es, 0, &err), COURIER_E_HTTP_STATUS); /* the same, every time */
    CHECK_EQ(th_wait_path("/sse", before + 4), before + 4);                 /* 3 with events, then the 204 */
    CHECK_EQ(courier_sse_close(es), COURIER_E_NOT_FOUND);
    courier_sse_free(es);
    courier_engine_close(e);
}

/* Reads a raw body's events (the source reconnects after each end; stop at n). */
static int read_events(courier_engine *e, const char *body, courier_sse_event *out, char store[][128], int n) {
    courier_error err;
    courier_sse *es = open_sse(e, raw_path(body), &err);
    if (!es) return -1;
    int got = 0;
    while (got < n) {
        courier_sse_event ev = {.size = sizeof ev};
        if (courier_sse_next(&ev, es, 10000, &err) != COURIER_OK) break;
        snprintf(store[3 * got], 128, "%s", ev.type);
        snprintf(store[3 * got + 1], 128, "%.*s", (int)ev.data_len, ev.data);
        snprintf(store[3 * got + 2], 128, "%s", ev.last_event_id);
        out[got] = ev;
        got++;
    }
    courier_sse_free(es);
    return got;
}

static void test_parsing_rules(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_sse_event ev[8];
    static char s[24][128];
    /* CR, LF and CRLF line ends; one leading BOM; a comment; one leading space only; a field
     * without a colon (empty data line); an id-only block moves the id without dispatching; retry
     * "+5" ignored; an unfinished block at the end is dropped. */
    const char *body = "\xEF\xBB\xBF"
                       ": a comment\r\n"
                       "data:  two spaces\r"
                       "data\n"
                       "\r\n"
                       "id: 7\n"
                       "\n"
                       "event: named\n"
                       "data: x\u2028y\n"
                       "retry: +5\n"
                       "\n"
                       "data: unfinished";
    CHECK_EQ(read_events(e, body, ev, s, 2), 2);
    CHECK_STR(s[0], "message");
    CHECK_STR(s[1], " two spaces\n");
    CHECK_STR(s[2], "");
    CHECK_STR(s[3], "named");
    CHECK_STR(s[4], "x\u2028y");
    CHECK_STR(s[5], "7"); /* from the id-only block */
    /* Invalid UTF-8 becomes U+FFFD; a BOM later in the stream is text. */
    CHECK_EQ(read_events(e, "data: a\xFF" "b\n\ndata: \xEF\xBB\xBFz\n\n", ev, s, 2), 2);
    CHECK_STR(s[1], "a\xEF\xBF\xBD" "b");
    CHECK_STR(s[4], "\xEF\xBB\xBFz");
    courier_engine_close(e);
}

/* Lone CRs end lines too: a body of only CRs dispatches each block. */
static void test_cr_only_line_ends(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_sse_event ev[4];
    static char s[12][128];
    CHECK_EQ(read_events(e, "data: one\r\rdata: two\r\r", ev, s, 2), 2);
    CHECK_STR(s[1], "one");
    CHECK_STR(s[4], "two");
    courier_engine_close(e);
}

static void test_not_an_event_stream(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_sse *es = open_sse(e, "/json", &err);
    REQUIRE(es);
    courier_sse_event ev = {.size = sizeof ev};
    CHECK_EQ(courier_sse_next(&ev, es, 10000, &err), COURIER_E_INVALID_RESULT);
    courier_sse_free(es);
    es = open_sse(e, "/status/503", &err);
    REQUIRE(es);
    CHECK_EQ(courier_sse_next(&ev, es, 10000, &err), COURIER_E_HTTP_STATUS);
    CHECK_EQ(err.http_status, 503);
    courier_sse_free(es);
    /* A request that may be frozen, or that has a body, cannot be an event source. */
    courier_request *r = NULL;
    courier_request_new(&r, "POST", "/sse");
    courier_request_set_body(r, "x", 1, "text/plain");
    CHECK_EQ(courier_sse_open(&es, e, r, NULL, NULL, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
    courier_engine_close(e);
}

static void *close_later(void *arg) {
    usleep(100 * 1000);
    courier_sse_close(arg);
    return NULL;
}

/* Close from another thread ends a waiting read with COURIER_E_CANCELLED, and no connection
 * follows. Reads with no wait say COURIER_E_AGAIN, and the wait before a reconnection is told. */
static void test_close_and_reads_that_do_not_wait(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_sse *es = open_sse(e, "/sse?per=1&retry=60000&gap=10", &err); /* one event, then 60 s */
    REQUIRE(es);
    courier_sse_event ev = {.size = sizeof ev};
    CHECK_EQ(courier_sse_next(&ev, es, 10000, &err), COURIER_OK);
    CHECK_EQ(courier_sse_next(&ev, es, 0, &err), COURIER_E_AGAIN);
    /* the connection ends: the source waits its retry time */
    int64_t until = th_now_ms() + 10000;
    while (courier_sse_retry_in_ms(es) < 0 && th_now_ms() < until) {
        courier_sse_next(&ev, es, 50, &err);
    }
    CHECK(courier_sse_retry_in_ms(es) > 1000);
    CHECK_EQ(courier_sse_get_state(es), COURIER_SSE_CONNECTING);
    pthread_t th;
    pthread_create(&th, NULL, close_later, es);
    CHECK_EQ(courier_sse_next(&ev, es, -1, &err), COURIER_E_CANCELLED);
    pthread_join(th, NULL);
    CHECK_EQ(courier_sse_get_state(es), COURIER_SSE_CLOSED);
    courier_sse_free(es);
    courier_engine_close(e);
}

TESTS_MAIN(T(test_events_ids_and_reconnection), T(test_parsing_rules), T(test_cr_only_line_ends),
           T(test_not_an_event_stream), T(test_close_and_reads_that_do_not_wait))
