/*
 * cache_http_test.c — the HTTP cache policy (RFC 9111) against the loopback server: max-age
 * freshness on an injected clock, Age, no-store, ETag and Last-Modified revalidation with 304
 * merging, Vary with several variants per URL, request no-cache, must-revalidate,
 * stale-if-error (5xx and connection failure), stale-while-revalidate with its background
 * revalidation, and invalidation by an unsafe method.
 */
#include "harness.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>


static void tweak(courier_config *cfg) {
    courier_config_set_store_dir(cfg, th_tmpdir());
    courier_config_set_clock(cfg, th_clock, NULL, NULL);
    courier_config_set_cache_policy(cfg, COURIER_CACHE_HTTP);
}

static courier_engine *engine(void) {
    th_clock_set_offset_ms(0);
    cts_server_reset_counts(th_server());
    return th_engine(tweak);
}

static courier_request *get(const char *target) {
    courier_request *r = NULL;
    courier_request_new(&r, "GET", target);
    return r;
}

static courier_response *send(courier_engine *e, courier_request *r, int *code) {
    courier_response *resp = NULL;
    int rc = courier_send_sync(&resp, e, r, NULL);
    if (code) *code = rc;
    return resp;
}

/* Sends and returns the cache status (-1 with no response); frees the response. */
static int status_of(courier_engine *e, courier_request *r, int *code, char *body, size_t cap) {
    courier_response *resp = send(e, r, code);
    if (!resp) return -1;
    int s = courier_response_cache_status(resp);
    if (body) snprintf(body, cap, "%s", (const char *)courier_response_body(resp, NULL));
    courier_response_free(resp);
    return s;
}

static long count_of(const char *path) { return cts_server_path_count(th_server(), path); }

static void test_max_age_fresh_then_stale(void) {
    courier_engine *e = engine();
    REQUIRE(e);
    courier_request *r = get("/cache?max_age=60&body=fresh");
    int code;
    CHECK_EQ(status_of(e, r, &code, NULL, 0), COURIER_CACHE_STATUS_NETWORK);
    th_clock_set_offset_ms(20 * 1000);
    courier_response *b = send(e, r, &code);
    REQUIRE(b);
    CHECK_EQ(courier_response_cache_status(b), COURIER_CACHE_STATUS_HIT);
    CHECK_EQ(courier_response_age_ms(b), 20000);
    CHECK_STR(courier_response_header(b, "Age"), "20");
    CHECK_STR((const char *)courier_response_body(b, NULL), "fresh");
    courier_response_free(b);
    CHECK_EQ(count_of("/cache"), 1);
    th_clock_set_offset_ms(61 * 1000);
    CHECK_EQ(status_of(e, r, &code, NULL, 0), COURIER_CACHE_STATUS_NETWORK);
    CHECK_EQ(count_of("/cache"), 2);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_age_header_counts(void) {
    courier_engine *e = engine();
    REQUIRE(e);
    courier_request *r = get("/headers?Cache-Control=max-age%3D40&Age=30");
    int code;
    CHECK_EQ(status_of(e, r, &code, NULL, 0), COURIER_CACHE_STATUS_NETWORK);
    th_clock_set_offset_ms(5 * 1000);
    courier_response *b = send(e, r, &code);
    CHECK_EQ(courier_response_cache_status(b), COURIER_CACHE_STATUS_HIT);
    CHECK_EQ(courier_response_age_ms(b), 35000);
    courier_response_free(b);
    th_clock_set_offset_ms(11 * 1000); /* 30 + 11 > 40 */
    CHECK_EQ(status_of(e, r, &code, NULL, 0), COURIER_CACHE_STATUS_NETWORK);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_no_store_is_not_stored(void) {
    courier_engine *e = engine();
    REQUIRE(e);
    courier_request *r = get("/headers?Cache-Control=no-store%2C%20max-age%3D60");
    int code;
    CHECK_EQ(status_of(e, r, &code, NULL, 0), COURIER_CACHE_STATUS_NETWORK);
    CHECK_EQ(status_of(e, r, &code, NULL, 0), COURIER_CACHE_STATUS_NETWORK);
    int64_t count = -1;
    CHECK_EQ(courier_cache_size(NULL, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 0);
    /* No freshness and no validators: nothing worth storing. */
    courier_request *plain = get("/json");
    CHECK_EQ(status_of(e, plain, &code, NULL, 0), COURIER_CACHE_STATUS_NETWORK);
    CHECK_EQ(courier_cache_size(NULL, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 0);
    courier_request_free(r);
    courier_request_free(plain);
    courier_engine_close(e);
}

static void test_etag_revalidation_merges_304(void) {
    courier_engine *e = engine();
    REQUIRE(e);
    courier_request *r = get("/etag/v1");
    int code;
    char body[256];
    CHECK_EQ(status_of(e, r, &code, body, sizeof body), COURIER_CACHE_STATUS_NETWORK);
    CHECK_CONTAINS(body, "v1");
    courier_response *b = send(e, r, &code);
    CHECK_EQ(code, COURIER_OK);
    REQUIRE(b);
    CHECK_EQ(courier_response_cache_status(b), COURIER_CACHE_STATUS_REVALIDATED);
    CHECK_EQ(courier_response_from_cache(b), 1);
    CHECK_EQ(courier_response_status(b), 200);
    CHECK_CONTAINS((const char *)courier_response_body(b, NULL), "\"etag\":\"v1\"");
    CHECK_STR(courier_response_header(b, "ETag"), "\"v1\"");
    courier_response_free(b);
    CHECK_EQ(count_of("/etag/v1"), 2);
    courier_cache_stats st = {.size = sizeof st};
    courier_cache_get_stats(&st, e, NULL);
    CHECK_EQ(st.revalidations, 1);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_last_modified_revalidation(void) {
    courier_engine *e = engine();
    REQUIRE(e);
    courier_request *r = get("/cache?max_age=0&last_modified=Wed,%2021%20Oct%202015%2007:28:00%20GMT&body=lm");
    int code;
    char body[64];
    CHECK_EQ(status_of(e, r, &code, body, sizeof body), COURIER_CACHE_STATUS_NETWORK);
    CHECK_EQ(status_of(e, r, &code, body, sizeof body), COURIER_CACHE_STATUS_REVALIDATED);
    CHECK_EQ(code, COURIER_OK);
    CHECK_STR(body, "lm");
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_vary_keeps_several_variants(void) {
    courier_engine *e = engine();
    REQUIRE(e);
    courier_request *en = get("/cache?max_age=60&vary=Accept-Language");
    courier_request_add_header(en, "Accept-Language", "en");
    courier_request *fr = get("/cache?max_age=60&vary=Accept-Language");
    courier_request_add_header(fr, "Accept-Language", "fr");
    int code;
    char body[256];
    CHECK_EQ(status_of(e, en, &code, body, sizeof body), COURIER_CACHE_STATUS_NETWORK);
    CHECK_CONTAINS(body, "\"vary\":\"en\"");
    CHECK_EQ(status_of(e, fr, &code, body, sizeof body), COURIER_CACHE_STATUS_NETWORK);
    CHECK_CONTAINS(body, "\"vary\":\"fr\"");
    CHECK_EQ(status_of(e, en, &code, body, sizeof body), COURIER_CACHE_STATUS_HIT);
    CHECK_CONTAINS(body, "\"vary\":\"en\"");
    CHECK_EQ(status_of(e, fr, &code, body, sizeof body), COURIER_CACHE_STATUS_HIT);
    CHECK_CONTAINS(body, "\"vary\":\"fr\"");
    CHECK_EQ(count_of("/cache"), 2);
    int64_t count = 0;
    courier_cache_size(NULL, &count, e, NULL);
    CHECK_EQ(count, 2);
    /* The manager selects the variant too. */
    courier_response *g = NULL;
    CHECK_EQ(courier_cache_get(&g, e, fr, 0, NULL), COURIER_OK);
    if (g) CHECK_CONTAINS((const char *)courier_response_body(g, NULL), "\"vary\":\"fr\"");
    courier_response_free(g);
    CHECK_EQ(courier_cache_remove(e, fr, NULL), COURIER_OK);
    CHECK_EQ(status_of(e, en, &code, body, sizeof body), COURIER_CACHE_STATUS_HIT);
    courier_request_free(en);
    courier_request_free(fr);
    courier_engine_close(e);
}

static void test_request_no_cache_revalidates(void) {
    courier_engine *e = engine();
    REQUIRE(e);
    courier_request *r = get("/cache?max_age=60&etag=nc&body=z");
    int code;
    CHECK_EQ(status_of(e, r, &code, NULL, 0), COURIER_CACHE_STATUS_NETWORK);
    courier_request_add_header(r, "Cache-Control", "no-cache");
    char body[32];
    CHECK_EQ(status_of(e, r, &code, body, sizeof body), COURIER_CACHE_STATUS_REVALIDATED);
    CHECK_STR(body, "z");
    CHECK_EQ(count_of("/cache"), 2);
    courier_request_free(r);
    courier_engine_close(e);
}

/* th_redirect_customize sends to the stored URL's key but, after th_redirect_to, really to another
 * URL: the customize callback changes the outgoing URL, not the cache key. */

static void test_stale_if_error(void) {
    courier_engine *e = engine();
    REQUIRE(e);
    th_redirect_to(NULL);
    courier_request *r = get("/headers?Cache-Control=max-age%3D1%2C%20stale-if-error%3D600&X-Body=sie");
    courier_request_set_customize(r, th_redirect_customize, NULL, NULL);
    int code;
    CHECK_EQ(status_of(e, r, &code, NULL, 0), COURIER_CACHE_STATUS_NETWORK);
    th_clock_set_offset_ms(5 * 1000);
    th_redirect_to(th_url("/status/503"));
    courier_response *b = send(e, r, &code);
    CHECK_EQ(code, COURIER_OK);
    REQUIRE(b);
    CHECK_EQ(courier_response_cache_status(b), COURIER_CACHE_STATUS_STALE);
    CHECK_EQ(courier_response_status(b), 200);
    CHECK_STR(courier_response_header(b, "X-Body"), "sie");
    courier_response_free(b);
    CHECK_EQ(count_of("/status/503"), 1);
    /* A connection that fails counts as an error too. */
    th_redirect_to("http://127.0.0.1:1/");
    CHECK_EQ(status_of(e, r, &code, NULL, 0), COURIER_CACHE_STATUS_STALE);
    CHECK_EQ(code, COURIER_OK);
    /* Past the stale-if-error window the error shows. */
    th_clock_set_offset_ms(700 * 1000);
    th_redirect_to(th_url("/status/503"));
    courier_response_free(send(e, r, &code));
    CHECK_EQ(code, COURIER_E_HTTP_STATUS);
    th_redirect_to(NULL);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_must_revalidate_forbids_stale(void) {
    courier_engine *e = engine();
    REQUIRE(e);
    th_redirect_to(NULL);
    courier_request *r =
        get("/headers?Cache-Control=max-age%3D1%2C%20must-revalidate%2C%20stale-if-error%3D600%2C%20stale-while-revalidate%3D600");
    courier_request_set_customize(r, th_redirect_customize, NULL, NULL);
    int code;
    CHECK_EQ(status_of(e, r, &code, NULL, 0), COURIER_CACHE_STATUS_NETWORK);
    th_clock_set_offset_ms(5 * 1000);
    th_redirect_to(th_url("/status/503"));
    courier_response_free(send(e, r, &code));
    CHECK_EQ(code, COURIER_E_HTTP_STATUS);
    th_redirect_to(NULL);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_stale_while_revalidate(void) {
    courier_engine *e = engine();
    REQUIRE(e);
    courier_request *r = get("/headers?Cache-Control=max-age%3D1%2C%20stale-while-revalidate%3D600&X-Swr=1");
    int code;
    CHECK_EQ(status_of(e, r, &code, NULL, 0), COURIER_CACHE_STATUS_NETWORK);
    CHECK_EQ(count_of("/headers"), 1);
    th_clock_set_offset_ms(5 * 1000);
    courier_response *b = send(e, r, &code);
    CHECK_EQ(code, COURIER_OK);
    REQUIRE(b);
    CHECK_EQ(courier_response_cache_status(b), COURIER_CACHE_STATUS_STALE);
    CHECK_STR(courier_response_header(b, "X-Swr"), "1");
    courier_response_free(b);
    /* The background revalidation reaches the server and refreshes the entry. */
    int fresh = 0;
    int64_t until = th_now_ms() + 10000;
    while (th_now_ms() < until) {
        courier_cache_has(&fresh, e, r, NULL);
        if (fresh && count_of("/headers") == 2) break;
        usleep(2000);
    }
    CHECK_EQ(count_of("/headers"), 2);
    CHECK_EQ(fresh, 1);
    CHECK_EQ(status_of(e, r, &code, NULL, 0), COURIER_CACHE_STATUS_HIT);
    CHECK_EQ(count_of("/headers"), 2);
    courier_cache_stats st = {.size = sizeof st};
    courier_cache_get_stats(&st, e, NULL);
    CHECK_EQ(st.stale_served, 1);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_unsafe_method_invalidates(void) {
    courier_engine *e = engine();
    REQUIRE(e);
    courier_request *g = get("/cache?max_age=60&body=inv");
    int code;
    CHECK_EQ(status_of(e, g, &code, NULL, 0), COURIER_CACHE_STATUS_NETWORK);
    int has = 0;
    courier_cache_has(&has, e, g, NULL);
    CHECK_EQ(has, 1);
    courier_request *p = NULL;
    courier_request_new(&p, "POST", "/cache?max_age=60&body=inv");
    courier_request_set_body(p, "x", 1, "text/plain");
    courier_response_free(send(e, p, &code));
    CHECK_EQ(code, COURIER_OK);
    courier_cache_has(&has, e, g, NULL);
    CHECK_EQ(has, 0);
    courier_request_free(g);
    courier_request_free(p);
    courier_engine_close(e);
}

TESTS_MAIN(T(test_max_age_fresh_then_stale), T(test_age_header_counts), T(test_no_store_is_not_stored),
           T(test_etag_revalidation_merges_304), T(test_last_modified_revalidation),
           T(test_vary_keeps_several_variants), T(test_request_no_cache_revalidates), T(test_stale_if_error),
           T(test_must_revalidate_forbids_stale), T(test_stale_while_revalidate), T(test_unsafe_method_invalidates))
