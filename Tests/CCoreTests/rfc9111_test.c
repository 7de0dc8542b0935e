/*
 * rfc9111_test.c — HTTP caching to the letter: one test per rule of RFC 9111 (and RFC 9110, RFC
 * 5861, RFC 9211 where they apply), named by its section, each against the loopback server's
 * /origin/{name} route (its headers set by the query), counting what reaches the origin. The
 * private (COURIER_CACHE_HTTP) and shared (COURIER_CACHE_HTTP_SHARED) policies run the same
 * tests where they differ. The cache's clock is the system clock plus an offset the tests move.
 * docs/design/cache.md, "HTTP caching to the letter", lists every rule with its test here.
 */
#include "harness.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t now_s(void) { return th_clock(NULL) / 1000; }

static int mode_policy = COURIER_CACHE_HTTP;
static int mode_default_policy = -1; /* -1: the mode's policy */
static int mode_status_header = 0;
static int64_t mode_max_bytes = 0;

static void tweak(courier_config *cfg) {
    courier_config_set_store_dir(cfg, th_tmpdir());
    courier_config_set_clock(cfg, th_clock, NULL, NULL);
    courier_config_set_cache_policy(cfg, mode_default_policy >= 0 ? mode_default_policy : mode_policy);
    if (mode_status_header) courier_config_set_cache_status_header(cfg, 1);
    if (mode_max_bytes) courier_config_set_cache_max_bytes(cfg, mode_max_bytes);
}

static courier_engine *engine(int policy) {
    th_clock_set_offset_ms(0);
    mode_policy = policy;
    cts_server_reset_counts(th_server());
    return th_engine(tweak);
}

static void close_engine(courier_engine *e) {
    courier_engine_close(e);
    mode_default_policy = -1;
    mode_status_header = 0;
    mode_max_bytes = 0;
}

/* "/origin/<name>?N=V&..." with every name and value percent-encoded; the list ends with NULL. */
static void pct(char *out, size_t cap, const char *s) {
    size_t n = strlen(out);
    for (; *s && n + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c))
            out[n++] = (char)c;
        else n += (size_t)snprintf(out + n, cap - n, "%%%02X", c);
    }
    out[n] = '\0';
}

static const char *origin(char *out, size_t cap, const char *name, ...) {
    snprintf(out, cap, "/origin/%s", name);
    va_list ap;
    va_start(ap, name);
    const char *k;
    bool first = true;
    while ((k = va_arg(ap, const char *))) {
        const char *v = va_arg(ap, const char *);
        strncat(out, first ? "?" : "&", cap - strlen(out) - 1);
        pct(out, cap, k);
        strncat(out, "=", cap - strlen(out) - 1);
        pct(out, cap, v);
        first = false;
    }
    va_end(ap);
    return out;
}

static long origin_count(const char *name) {
    char p[128];
    snprintf(p, sizeof p, "/origin/%s", name);
    return cts_server_path_count(th_server(), p);
}

/* An IMF-fixdate for unix seconds t. */
static const char *http_date(char out[40], int64_t t) {
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 40, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return out;
}

/* One exchange: the response (new, or NULL), its code, reason and cache status. */
typedef struct reply {
    courier_response *resp;
    int code;
    int reason;
    int cache_status;
    int status;
    long long http_status; /* from the error */
} reply;

static reply exchange(courier_engine *e, const char *method, const char *target, const char *hname, const char *hvalue) {
    courier_request *r = NULL;
    courier_request_new(&r, method, target);
    if (hname) courier_request_add_header(r, hname, hvalue);
    if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0)
        courier_request_set_body(r, "x", 1, "text/plain");
    reply out = {0};
    courier_error err;
    memset(&err, 0, sizeof err);
    out.code = courier_send_sync(&out.resp, e, r, &err);
    out.http_status = err.http_status;
    out.reason = courier_response_cache_reason(out.resp);
    out.cache_status = courier_response_cache_status(out.resp);
    out.status = out.resp ? courier_response_status(out.resp) : 0;
    courier_request_free(r);
    return out;
}

/* The reason of a GET, the response freed. */
static int get_reason(courier_engine *e, const char *target, const char *hname, const char *hvalue) {
    reply x = exchange(e, "GET", target, hname, hvalue);
    courier_response_free(x.resp);
    return x.reason;
}

/* Two GETs of target, whose reasons must be `first` then `second`. */
static void two_gets_at(const char *file, int line, courier_engine *e, const char *target, int first, int second) {
    int a = get_reason(e, target, NULL, NULL), b = get_reason(e, target, NULL, NULL);
    if (a != first || b != second)
        th_fail(file, line, "reasons %s, %s; expected %s, %s", courier_cache_reason_name(a), courier_cache_reason_name(b),
                courier_cache_reason_name(first), courier_cache_reason_name(second));
}
#define two_gets(e, target, first, second) two_gets_at(__FILE__, __LINE__, e, target, first, second)

static int header_lines(const courier_response *r, const char *name) {
    int n = 0;
    const char *hn, *hv;
    for (size_t i = 0; courier_response_header_at(&hn, &hv, r, i) == COURIER_OK; i++) n += strcasecmp(hn, name) == 0;
    return n;
}

/* ---- section 4.4: invalidation ------------------------------------------------------------------ */

static void check_unsafe_invalidates(int policy, const char *method) {
    courier_engine *e = engine(policy);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "inv", "Cache-Control", "max-age=600", NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_FRESH);
    reply p = exchange(e, method, u, NULL, NULL);
    CHECK_EQ(p.code, COURIER_OK);
    CHECK_EQ(p.reason, COURIER_CACHE_REASON_INVALIDATED);
    courier_response_free(p.resp);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    CHECK_EQ(origin_count("inv"), 3);
    close_engine(e);
}

static void test_9111_4_4_invalidate_on_unsafe(void) {
    const char *methods[] = {"POST", "PUT", "DELETE", "PATCH", "PURGE"};
    for (size_t i = 0; i < 5; i++) {
        check_unsafe_invalidates(COURIER_CACHE_HTTP, methods[i]);
        check_unsafe_invalidates(COURIER_CACHE_HTTP_SHARED, methods[i]);
    }
}

/* The GET names the policy; the POST is sent with none (the engine's default): it still
 * invalidates. */
static void test_9111_4_4_invalidate_without_policy(void) {
    mode_default_policy = COURIER_CACHE_NO_CACHE;
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "inv2", "Cache-Control", "max-age=600", NULL);
    courier_request *g = NULL;
    courier_request_new(&g, "GET", u);
    courier_request_set_cache_policy(g, COURIER_CACHE_HTTP);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, g, NULL), COURIER_OK);
    courier_response_free(resp);
    resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, g, NULL), COURIER_OK);
    CHECK_EQ(courier_response_cache_reason(resp), COURIER_CACHE_REASON_FRESH);
    courier_response_free(resp);
    reply p = exchange(e, "POST", u, NULL, NULL);
    CHECK_EQ(p.code, COURIER_OK);
    courier_response_free(p.resp);
    resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, g, NULL), COURIER_OK);
    CHECK_EQ(courier_response_cache_reason(resp), COURIER_CACHE_REASON_MISS);
    courier_response_free(resp);
    CHECK_EQ(origin_count("inv2"), 3);
    courier_request_free(g);
    close_engine(e);
}

/* A POST's parameters go in its body: the GET of the bare URL is the one invalidated. */
static void test_9111_4_4_invalidate_post_with_params(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    CHECK_EQ(get_reason(e, "/origin/inv4?Cache-Control=max-age%3D600", NULL, NULL), COURIER_CACHE_REASON_MISS);
    courier_request *p = NULL;
    courier_request_new(&p, "POST", "/origin/inv4?Cache-Control=max-age%3D600");
    courier_request_add_param(p, "name", "value");
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, p, NULL), COURIER_OK);
    CHECK_EQ(courier_response_cache_reason(resp), COURIER_CACHE_REASON_INVALIDATED);
    courier_response_free(resp);
    courier_request_free(p);
    CHECK_EQ(get_reason(e, "/origin/inv4?Cache-Control=max-age%3D600", NULL, NULL), COURIER_CACHE_REASON_MISS);
    CHECK_EQ(origin_count("inv4"), 3);
    close_engine(e);
}

static void test_9111_4_4_invalidate_location_and_content_location(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char a[256], b[256], c[256], other[512], post[1024];
    origin(a, sizeof a, "loc-a", "Cache-Control", "max-age=600", NULL);
    origin(b, sizeof b, "loc-b", "Cache-Control", "max-age=600", NULL);
    origin(c, sizeof c, "loc-c", "Cache-Control", "max-age=600", NULL);
    const char *urls[] = {a, b, c};
    for (int i = 0; i < 3; i++) CHECK_EQ(get_reason(e, urls[i], NULL, NULL), COURIER_CACHE_REASON_MISS);
    /* Location: absolute, same origin; Content-Location: relative ("loc-b?..." next to the POST's
     * "/origin/post"); a Location of another origin (localhost is not 127.0.0.1) is left alone. */
    snprintf(other, sizeof other, "http://localhost:%d%s", cts_server_port(th_server()), c);
    origin(post, sizeof post, "post", "Location", th_url(a), "Content-Location", b + strlen("/origin/"), NULL);
    reply p = exchange(e, "POST", post, NULL, NULL);
    CHECK_EQ(p.reason, COURIER_CACHE_REASON_INVALIDATED);
    courier_response_free(p.resp);
    origin(post, sizeof post, "post", "Location", other, NULL);
    courier_response_free(exchange(e, "POST", post, NULL, NULL).resp);
    CHECK_EQ(get_reason(e, a, NULL, NULL), COURIER_CACHE_REASON_MISS);
    CHECK_EQ(get_reason(e, b, NULL, NULL), COURIER_CACHE_REASON_MISS);
    CHECK_EQ(get_reason(e, c, NULL, NULL), COURIER_CACHE_REASON_FRESH);
    CHECK_EQ(origin_count("loc-a"), 2);
    CHECK_EQ(origin_count("loc-b"), 2);
    CHECK_EQ(origin_count("loc-c"), 1);
    close_engine(e);
}

static void test_9111_4_4_error_does_not_invalidate(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256], bad[256];
    origin(u, sizeof u, "inv3", "Cache-Control", "max-age=600", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    origin(bad, sizeof bad, "inv3-post", "_status", "500", "Location", th_url(u), NULL);
    reply p = exchange(e, "POST", bad, NULL, NULL);
    CHECK_EQ(p.code, COURIER_E_HTTP_STATUS);
    courier_response_free(p.resp);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_FRESH);
    CHECK_EQ(origin_count("inv3"), 1);
    close_engine(e);
}

/* ---- section 5.2.1: request directives ---------------------------------------------------------- */

static void test_9111_5_2_1_1_request_max_age(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "rq-max-age", "Cache-Control", "max-age=600", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    th_clock_set_offset_ms(30 * 1000);
    CHECK_EQ(get_reason(e, u, "Cache-Control", "max-age=100"), COURIER_CACHE_REASON_FRESH);
    CHECK_EQ(origin_count("rq-max-age"), 1);
    CHECK_EQ(get_reason(e, u, "Cache-Control", "max-age=10"), COURIER_CACHE_REASON_STALE_REFETCHED);
    CHECK_EQ(origin_count("rq-max-age"), 2);
    close_engine(e);
}

static void test_9111_5_2_1_2_max_stale(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256], mr[256];
    origin(u, sizeof u, "max-stale", "Cache-Control", "max-age=10", NULL);
    origin(mr, sizeof mr, "max-stale-mr", "Cache-Control", "max-age=10, must-revalidate", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    CHECK_EQ(get_reason(e, mr, NULL, NULL), COURIER_CACHE_REASON_MISS);
    th_clock_set_offset_ms(30 * 1000); /* stale by 20 s */
    reply x = exchange(e, "GET", u, "Cache-Control", "max-stale=60");
    CHECK_EQ(x.reason, COURIER_CACHE_REASON_STALE_ACCEPTED);
    CHECK_EQ(x.cache_status, COURIER_CACHE_STATUS_STALE);
    courier_response_free(x.resp);
    CHECK_EQ(get_reason(e, u, "Cache-Control", "max-stale"), COURIER_CACHE_REASON_STALE_ACCEPTED);
    CHECK_EQ(origin_count("max-stale"), 1);
    CHECK_EQ(get_reason(e, u, "Cache-Control", "max-stale=5"), COURIER_CACHE_REASON_STALE_REFETCHED);
    CHECK_EQ(origin_count("max-stale"), 2);
    /* must-revalidate forbids it (section 4.2.4) */
    CHECK_EQ(get_reason(e, mr, "Cache-Control", "max-stale"), COURIER_CACHE_REASON_STALE_REFETCHED);
    CHECK_EQ(origin_count("max-stale-mr"), 2);
    close_engine(e);
}

static void test_9111_5_2_1_3_min_fresh(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "min-fresh", "Cache-Control", "max-age=100", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    th_clock_set_offset_ms(50 * 1000); /* fresh for 50 s more */
    CHECK_EQ(get_reason(e, u, "Cache-Control", "min-fresh=30"), COURIER_CACHE_REASON_FRESH);
    CHECK_EQ(origin_count("min-fresh"), 1);
    CHECK_EQ(get_reason(e, u, "Cache-Control", "min-fresh=60"), COURIER_CACHE_REASON_STALE_REFETCHED);
    CHECK_EQ(origin_count("min-fresh"), 2);
    close_engine(e);
}

static void test_9111_5_2_1_4_request_no_cache(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "rq-no-cache", "Cache-Control", "max-age=600", "ETag", "\"v1\"", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    CHECK_EQ(get_reason(e, u, "Cache-Control", "no-cache"), COURIER_CACHE_REASON_REVALIDATED);
    CHECK_EQ(get_reason(e, u, "Pragma", "no-cache"), COURIER_CACHE_REASON_REVALIDATED);
    CHECK_EQ(origin_count("rq-no-cache"), 3);
    close_engine(e);
}

static void test_9111_5_2_1_5_request_no_store(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "rq-no-store", "Cache-Control", "max-age=600", NULL);
    CHECK_EQ(get_reason(e, u, "Cache-Control", "no-store"), COURIER_CACHE_REASON_NOT_STORED_NO_STORE);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    /* neither served from the cache: a stored fresh response is not used */
    CHECK_EQ(get_reason(e, u, "Cache-Control", "no-store"), COURIER_CACHE_REASON_NOT_STORED_NO_STORE);
    CHECK_EQ(origin_count("rq-no-store"), 3);
    close_engine(e);
}

static void test_9111_5_2_1_7_only_if_cached(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "only", "Cache-Control", "max-age=10", NULL);
    reply x = exchange(e, "GET", u, "Cache-Control", "only-if-cached");
    CHECK_EQ(x.code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(x.http_status, 504);
    REQUIRE(x.resp);
    CHECK_EQ(x.status, 504);
    CHECK_EQ(x.reason, COURIER_CACHE_REASON_ONLY_IF_CACHED);
    courier_response_free(x.resp);
    CHECK_EQ(origin_count("only"), 0);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    CHECK_EQ(get_reason(e, u, "Cache-Control", "only-if-cached"), COURIER_CACHE_REASON_FRESH);
    th_clock_set_offset_ms(30 * 1000); /* stale */
    x = exchange(e, "GET", u, "Cache-Control", "only-if-cached");
    CHECK_EQ(x.code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(x.status, 504);
    courier_response_free(x.resp);
    CHECK_EQ(get_reason(e, u, "Cache-Control", "only-if-cached, max-stale"), COURIER_CACHE_REASON_STALE_ACCEPTED);
    CHECK_EQ(origin_count("only"), 1);
    close_engine(e);
}

/* ---- sections 3 and 4.2.2: which statuses are stored ------------------------------------------ */

static void test_9111_3_error_status_with_max_age_is_stored(void) {
    const char *statuses[] = {"404", "503", "403"};
    for (int i = 0; i < 3; i++) {
        courier_engine *e = engine(COURIER_CACHE_HTTP);
        REQUIRE(e);
        char u[256], name[32];
        snprintf(name, sizeof name, "st-%s", statuses[i]);
        origin(u, sizeof u, name, "_status", statuses[i], "Cache-Control", "max-age=60", NULL);
        reply a = exchange(e, "GET", u, NULL, NULL);
        CHECK_EQ(a.code, COURIER_E_HTTP_STATUS);
        CHECK_EQ(a.reason, COURIER_CACHE_REASON_MISS);
        CHECK_EQ(a.cache_status, COURIER_CACHE_STATUS_NETWORK);
        reply b = exchange(e, "GET", u, NULL, NULL);
        /* the cached answer reaches the app exactly as the network's did, marked from the cache */
        CHECK_EQ(b.code, COURIER_E_HTTP_STATUS);
        CHECK_EQ(b.http_status, atoi(statuses[i]));
        REQUIRE(b.resp);
        CHECK_EQ(b.status, atoi(statuses[i]));
        CHECK_EQ(b.cache_status, COURIER_CACHE_STATUS_HIT);
        CHECK_EQ(b.reason, COURIER_CACHE_REASON_FRESH);
        CHECK_STR((const char *)courier_response_body(b.resp, NULL), (const char *)courier_response_body(a.resp, NULL));
        courier_response_free(a.resp);
        courier_response_free(b.resp);
        CHECK_EQ(origin_count(name), 1);
        close_engine(e);
    }
}

static void test_9111_3_status_without_freshness_not_stored(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256], lm[40];
    /* 500 and 403 are not heuristically cacheable: a validator alone does not let them in */
    origin(u, sizeof u, "st-500", "_status", "500", "ETag", "\"e\"", NULL);
    two_gets(e, u, COURIER_CACHE_REASON_NOT_STORED_STATUS, COURIER_CACHE_REASON_NOT_STORED_STATUS);
    CHECK_EQ(origin_count("st-500"), 2);
    origin(u, sizeof u, "st-403", "_status", "403", "Last-Modified", http_date(lm, now_s() - 100000), NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_NOT_STORED_STATUS);
    close_engine(e);
}

static void test_9111_4_2_2_heuristic_freshness(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[512], date[40], lm[40];
    int64_t t = now_s();
    /* Last-Modified 100,000 s before Date: fresh for 10% of it, 10,000 s */
    origin(u, sizeof u, "heur", "Date", http_date(date, t), "Last-Modified", http_date(lm, t - 100000), NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    th_clock_set_offset_ms(9000 * 1000LL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_FRESH);
    CHECK_EQ(origin_count("heur"), 1);
    th_clock_set_offset_ms(10100 * 1000LL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_REVALIDATED); /* If-Modified-Since -> 304 */
    CHECK_EQ(origin_count("heur"), 2);
    close_engine(e);
}

static void test_9111_4_2_2_heuristic_cap_one_day(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[512], date[40], lm[40];
    int64_t t = now_s();
    origin(u, sizeof u, "heur-cap", "Date", http_date(date, t), "Last-Modified", http_date(lm, t - 10LL * 365 * 86400), NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    th_clock_set_offset_ms(23 * 3600 * 1000LL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_FRESH);
    th_clock_set_offset_ms(25 * 3600 * 1000LL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_REVALIDATED);
    CHECK_EQ(origin_count("heur-cap"), 2);
    close_engine(e);
}

static void test_9111_4_2_2_heuristic_404(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[512], date[40], lm[40];
    int64_t t = now_s();
    origin(u, sizeof u, "heur-404", "_status", "404", "Date", http_date(date, t), "Last-Modified",
           http_date(lm, t - 100000), NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    reply b = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(b.code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(b.status, 404);
    CHECK_EQ(b.reason, COURIER_CACHE_REASON_FRESH);
    courier_response_free(b.resp);
    CHECK_EQ(origin_count("heur-404"), 1);
    close_engine(e);
}

/* ---- sections 4.2.1, 5.2, 5.3, 5.1: parsing --------------------------------------------------- */

static void test_9111_4_2_1_max_age_digits_only(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    const char *bad[] = {"max-age =60", "max-age= 60", "max-age=a100", "max-age=60a", "max-age=-1", "max-age=6 0"};
    for (int i = 0; i < 6; i++) {
        char u[256], name[32];
        snprintf(name, sizeof name, "ma-bad-%d", i);
        origin(u, sizeof u, name, "Cache-Control", bad[i], NULL);
        CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_NOT_STORED_NO_FRESHNESS);
    }
    char u[256];
    origin(u, sizeof u, "ma-quoted", "Cache-Control", "max-age=\"60\"", NULL); /* the quoted form is accepted */
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_FRESH);
    close_engine(e);
}

static void test_9111_4_2_1_repeated_directive(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    /* the same value twice: that value */
    origin(u, sizeof u, "rep-same", "Cache-Control", "max-age=60, max-age=60", NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_FRESH);
    /* different values, on one line or on two: stale */
    origin(u, sizeof u, "rep-one", "Cache-Control", "max-age=60, max-age=600", "ETag", "\"r\"", NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_REVALIDATED);
    origin(u, sizeof u, "rep-two", "Cache-Control", "max-age=60", "Cache-Control", "max-age=600", "ETag", "\"r\"", NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_REVALIDATED);
    /* two Expires that disagree: expired */
    char d1[40], d2[40];
    origin(u, sizeof u, "rep-exp", "Expires", http_date(d1, now_s() + 600), "Expires", http_date(d2, now_s() + 900),
           "ETag", "\"r\"", NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_REVALIDATED);
    close_engine(e);
}

static void test_9111_5_3_invalid_expires_is_expired(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256], d[40];
    const char *bad[] = {"0", "-1", "tomorrow", "2099-01-01", "Thu, 01 Jan 2099 00:00:00 UTC"};
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "exp-bad-%d", i);
        origin(u, sizeof u, name, "Expires", bad[i], NULL);
        CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_NOT_STORED_NO_FRESHNESS);
    }
    origin(u, sizeof u, "exp-good", "Expires", http_date(d, now_s() + 600), NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_FRESH);
    /* the two obsolete forms a recipient must accept (RFC 9110 section 5.6.7) */
    time_t t = (time_t)(now_s() + 600);
    struct tm tm;
    gmtime_r(&t, &tm);
    char rfc850[64], asc[64];
    strftime(rfc850, sizeof rfc850, "%A, %d-%b-%y %H:%M:%S GMT", &tm);
    strftime(asc, sizeof asc, "%a %b %e %H:%M:%S %Y", &tm);
    origin(u, sizeof u, "exp-850", "Expires", rfc850, NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_FRESH);
    origin(u, sizeof u, "exp-asc", "Expires", asc, NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_FRESH);
    close_engine(e);
}

static void test_9111_5_1_age_digits_only(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "age-bad", "Cache-Control", "max-age=100", "Age", "50x", NULL); /* ignored */
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    th_clock_set_offset_ms(10 * 1000);
    reply x = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(x.reason, COURIER_CACHE_REASON_FRESH);
    CHECK_EQ(courier_response_age_ms(x.resp), 10000);
    courier_response_free(x.resp);
    close_engine(e);
}

/* "a cache encountering a message with a list-based Age field value SHOULD use the first member":
 * with `Age: 7200, 0` and max-age=3600 the response is stale (it was served as fresh: the value
 * was taken as invalid and ignored); two field lines are the same list. */
static void test_9111_5_1_age_list_uses_the_first(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "age-list", "Cache-Control", "max-age=3600", "Age", "7200, 0", "ETag", "\"a\"", NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_REVALIDATED);
    origin(u, sizeof u, "age-lines", "Cache-Control", "max-age=3600", "Age", "7200", "Age", "0", "ETag", "\"a\"",
           NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_REVALIDATED);
    origin(u, sizeof u, "age-list-young", "Cache-Control", "max-age=3600", "Age", " 10 , 7200", NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_FRESH);
    close_engine(e);
}

/* ---- sections 3.2, 4.3.4, 4.3.5: 304 and HEAD update what is stored ---------------------------- */

static void test_9111_3_2_304_replaces_fields(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[512], d1[40], d2[40];
    int64_t t = now_s();
    origin(u, sizeof u, "r304", "Cache-Control", "max-age=0", "ETag", "\"v\"", "Date", http_date(d1, t), "X-A", "old",
           "X-Keep", "kept", "_304.Date", http_date(d2, t + 5), "_304.X-A", "new", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    reply x = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(x.reason, COURIER_CACHE_REASON_REVALIDATED);
    REQUIRE(x.resp);
    CHECK_EQ(header_lines(x.resp, "Date"), 1);
    CHECK_STR(courier_response_header(x.resp, "Date"), d2);
    CHECK_EQ(header_lines(x.resp, "X-A"), 1);
    CHECK_STR(courier_response_header(x.resp, "X-A"), "new");
    CHECK_STR(courier_response_header(x.resp, "X-Keep"), "kept");
    courier_response_free(x.resp);
    /* and what is stored was updated too */
    x = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(header_lines(x.resp, "Date"), 1);
    CHECK_STR(courier_response_header(x.resp, "X-A"), "new");
    courier_response_free(x.resp);
    close_engine(e);
}

static void test_9111_4_3_5_head_freshens_stored_get(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "head", "Cache-Control", "max-age=10", "ETag", "\"h\"", "X-H", "get", "_head.X-H", "head", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    th_clock_set_offset_ms(30 * 1000); /* stale */
    reply h = exchange(e, "HEAD", u, NULL, NULL);
    CHECK_EQ(h.code, COURIER_OK);
    CHECK_EQ(h.reason, COURIER_CACHE_REASON_UPDATED_STORED);
    courier_response_free(h.resp);
    reply g = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(g.reason, COURIER_CACHE_REASON_FRESH);
    CHECK_STR(courier_response_header(g.resp, "X-H"), "head");
    CHECK_STR((const char *)courier_response_body(g.resp, NULL), "n=1");
    courier_response_free(g.resp);
    CHECK_EQ(origin_count("head"), 2);
    close_engine(e);
}

static void test_9111_4_3_5_head_invalidates_changed(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "head2", "Cache-Control", "max-age=600", "ETag", "\"one\"", "_head.ETag", "\"two\"", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    reply h = exchange(e, "HEAD", u, NULL, NULL);
    CHECK_EQ(h.reason, COURIER_CACHE_REASON_INVALIDATED);
    courier_response_free(h.resp);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    CHECK_EQ(origin_count("head2"), 3);
    close_engine(e);
}

/* ---- section 4.2.3: Age --------------------------------------------------------------------------- */

static void test_9111_4_2_3_age_calculation(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[512], d[40];
    /* apparent age (Date 50 s ago) beats a smaller Age */
    origin(u, sizeof u, "age1", "Cache-Control", "max-age=600", "Date", http_date(d, now_s() - 50), "Age", "10", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    th_clock_set_offset_ms(20 * 1000);
    reply x = exchange(e, "GET", u, NULL, NULL);
    CHECK((courier_response_age_ms(x.resp) / 1000) >= 70 && (courier_response_age_ms(x.resp) / 1000) <= 71);
    CHECK_STR(courier_response_header(x.resp, "Age"), (courier_response_age_ms(x.resp) / 1000) == 70 ? "70" : "71");
    CHECK_EQ(header_lines(x.resp, "Age"), 1);
    courier_response_free(x.resp);
    /* a larger Age beats the apparent age */
    th_clock_set_offset_ms(0);
    origin(u, sizeof u, "age2", "Cache-Control", "max-age=600", "Date", http_date(d, now_s()), "Age", "100", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    th_clock_set_offset_ms(20 * 1000);
    x = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(courier_response_age_ms(x.resp), 120000);
    courier_response_free(x.resp);
    /* past its lifetime by age alone */
    th_clock_set_offset_ms(0);
    origin(u, sizeof u, "age3", "Cache-Control", "max-age=60", "Age", "100", "ETag", "\"a\"", NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_REVALIDATED);
    close_engine(e);
}

/* ---- sections 3.1, 5.2.2.4, 5.2.2.7: what is stored ------------------------------------------ */

static void test_9111_3_1_hop_by_hop_not_stored(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "hop", "Cache-Control", "max-age=60", "Connection", "X-Hop", "X-Hop", "1", "Keep-Alive",
           "timeout=5", "X-Keep", "1", NULL);
    reply a = exchange(e, "GET", u, NULL, NULL);
    CHECK_STR(courier_response_header(a.resp, "X-Hop"), "1"); /* the network's answer has them */
    courier_response_free(a.resp);
    reply b = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(b.reason, COURIER_CACHE_REASON_FRESH);
    CHECK(courier_response_header(b.resp, "X-Hop") == NULL);
    CHECK(courier_response_header(b.resp, "Keep-Alive") == NULL);
    CHECK(courier_response_header(b.resp, "Connection") == NULL);
    CHECK_STR(courier_response_header(b.resp, "X-Keep"), "1");
    courier_response_free(b.resp);
    close_engine(e);
}

static void test_9111_5_2_2_4_no_cache_field(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "nc-field", "Cache-Control", "max-age=60, no-cache=\"X-Secret\"", "X-Secret", "s", "X-Plain",
           "p", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    reply b = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(b.reason, COURIER_CACHE_REASON_FRESH); /* the rest is used without revalidation */
    CHECK(courier_response_header(b.resp, "X-Secret") == NULL);
    CHECK_STR(courier_response_header(b.resp, "X-Plain"), "p");
    courier_response_free(b.resp);
    CHECK_EQ(origin_count("nc-field"), 1);
    close_engine(e);
}

static void test_9111_5_2_2_7_private(void) {
    for (int shared = 0; shared < 2; shared++) {
        courier_engine *e = engine(shared ? COURIER_CACHE_HTTP_SHARED : COURIER_CACHE_HTTP);
        REQUIRE(e);
        char u[256];
        origin(u, sizeof u, "priv-field", "Cache-Control", "max-age=60, private=\"X-User\"", "X-User", "ann", NULL);
        CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
        reply b = exchange(e, "GET", u, NULL, NULL);
        CHECK_EQ(b.reason, COURIER_CACHE_REASON_FRESH);
        if (shared) CHECK(courier_response_header(b.resp, "X-User") == NULL);
        else CHECK_STR(courier_response_header(b.resp, "X-User"), "ann");
        courier_response_free(b.resp);
        origin(u, sizeof u, "priv", "Cache-Control", "private, max-age=60", NULL);
        two_gets(e, u, shared ? COURIER_CACHE_REASON_NOT_STORED_PRIVATE : COURIER_CACHE_REASON_MISS, shared ? COURIER_CACHE_REASON_NOT_STORED_PRIVATE : COURIER_CACHE_REASON_FRESH);
        CHECK_EQ(origin_count("priv"), shared ? 2 : 1);
        close_engine(e);
    }
}

/* ---- shared cache: s-maxage, proxy-revalidate, public, Authorization --------------------------- */

static void test_9111_5_2_2_10_s_maxage(void) {
    for (int shared = 0; shared < 2; shared++) {
        courier_engine *e = engine(shared ? COURIER_CACHE_HTTP_SHARED : COURIER_CACHE_HTTP);
        REQUIRE(e);
        char u[256];
        origin(u, sizeof u, "smax", "Cache-Control", "max-age=600, s-maxage=10", "ETag", "\"s\"", NULL);
        CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
        th_clock_set_offset_ms(30 * 1000);
        CHECK_EQ(get_reason(e, u, NULL, NULL), shared ? COURIER_CACHE_REASON_REVALIDATED : COURIER_CACHE_REASON_FRESH);
        CHECK_EQ(origin_count("smax"), shared ? 2 : 1);
        close_engine(e);
    }
}

/* The stored response is served stale on a 503 unless proxy-revalidate forbids it to a shared cache. */
static reply exchange_via(courier_engine *e, const char *target, const char *really) {
    th_redirect_to(th_url(really));
    courier_request *r = NULL;
    courier_request_new(&r, "GET", target);
    courier_request_set_customize(r, th_redirect_customize, NULL, NULL);
    reply out = {0};
    courier_error err;
    memset(&err, 0, sizeof err);
    out.code = courier_send_sync(&out.resp, e, r, &err);
    out.http_status = err.http_status;
    out.reason = courier_response_cache_reason(out.resp);
    out.cache_status = courier_response_cache_status(out.resp);
    out.status = out.resp ? courier_response_status(out.resp) : 0;
    courier_request_free(r);
    th_redirect_to(NULL);
    return out;
}

static void test_9111_5_2_2_8_proxy_revalidate(void) {
    for (int shared = 0; shared < 2; shared++) {
        courier_engine *e = engine(shared ? COURIER_CACHE_HTTP_SHARED : COURIER_CACHE_HTTP);
        REQUIRE(e);
        char u[256], fail[128];
        origin(u, sizeof u, "proxy-rv", "Cache-Control", "max-age=1, proxy-revalidate, stale-if-error=600", NULL);
        origin(fail, sizeof fail, "proxy-rv-503", "_status", "503", NULL);
        CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
        th_clock_set_offset_ms(5 * 1000);
        reply x = exchange_via(e, u, fail);
        CHECK_EQ(x.code, shared ? COURIER_E_HTTP_STATUS : COURIER_OK);
        CHECK_EQ(x.status, shared ? 503 : 200);
        CHECK_EQ(x.reason, shared ? COURIER_CACHE_REASON_NOT_STORED_STATUS : COURIER_CACHE_REASON_STALE_IF_ERROR);
        courier_response_free(x.resp);
        close_engine(e);
    }
}

static void test_9111_3_5_authorization(void) {
    struct {
        const char *cc;
        int shared_reason;
    } cases[] = {
        {"max-age=60", COURIER_CACHE_REASON_NOT_STORED_AUTHORIZATION},
        {"max-age=60, public", COURIER_CACHE_REASON_MISS},
        {"max-age=60, must-revalidate", COURIER_CACHE_REASON_MISS},
        {"s-maxage=60", COURIER_CACHE_REASON_MISS},
    };
    for (int shared = 0; shared < 2; shared++) {
        courier_engine *e = engine(shared ? COURIER_CACHE_HTTP_SHARED : COURIER_CACHE_HTTP);
        REQUIRE(e);
        for (int i = 0; i < 4; i++) {
            char u[256], name[32];
            snprintf(name, sizeof name, "auth-%d", i);
            origin(u, sizeof u, name, "Cache-Control", cases[i].cc, NULL);
            int want = shared ? cases[i].shared_reason : COURIER_CACHE_REASON_MISS;
            if (!shared && i == 3) want = COURIER_CACHE_REASON_NOT_STORED_NO_FRESHNESS; /* s-maxage is for shared caches */
            CHECK_EQ(get_reason(e, u, "Authorization", "Bearer t"), want);
        }
        close_engine(e);
    }
}

static void test_9111_5_2_2_9_public_allows_heuristics(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP_SHARED);
    REQUIRE(e);
    char u[512], d[40], lm[40];
    int64_t t = now_s();
    origin(u, sizeof u, "public-403", "_status", "403", "Cache-Control", "public", "Date", http_date(d, t),
           "Last-Modified", http_date(lm, t - 100000), NULL);
    two_gets(e, u, COURIER_CACHE_REASON_MISS, COURIER_CACHE_REASON_FRESH);
    CHECK_EQ(origin_count("public-403"), 1);
    close_engine(e);
}

/* ---- section 3.3: partial content ------------------------------------------------------------ */

static void test_9111_3_3_partial_content_not_stored(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    reply x = exchange(e, "GET", "/bytes/100", "Range", "bytes=0-9");
    CHECK_EQ(x.status, 206);
    CHECK_EQ(x.reason, COURIER_CACHE_REASON_NOT_STORED_STATUS);
    courier_response_free(x.resp);
    x = exchange(e, "GET", "/bytes/100", "Range", "bytes=0-9");
    CHECK_EQ(x.reason, COURIER_CACHE_REASON_NOT_STORED_STATUS);
    courier_response_free(x.resp);
    CHECK_EQ(cts_server_path_count(th_server(), "/bytes/100"), 2);
    close_engine(e);
}

/* A single Range that a stored complete response answers: 206 from the cache with Content-Range and
 * the stored fields (RFC 9110 section 14, RFC 9111 section 3.4); 416 out of range; several ranges,
 * an invalid one or an If-Range that does not hold: the whole 200. The origin is asked once. */
static reply ranged(courier_engine *e, const char *u, const char *range, const char *if_range) {
    courier_request *r = NULL;
    courier_request_new(&r, "GET", u);
    courier_request_add_header(r, "Range", range);
    if (if_range) courier_request_add_header(r, "If-Range", if_range);
    reply out = {0};
    courier_error err;
    out.code = courier_send_sync(&out.resp, e, r, &err);
    out.status = out.resp ? courier_response_status(out.resp) : 0;
    out.reason = courier_response_cache_reason(out.resp);
    courier_request_free(r);
    return out;
}

static const char *body_of(const reply *x) {
    static char b[64];
    size_t n = 0;
    const uint8_t *p = x->resp ? courier_response_body(x->resp, &n) : NULL;
    snprintf(b, sizeof b, "%.*s", (int)n, p ? (const char *)p : "");
    return b;
}

static void test_9110_14_range_from_the_cache(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[512], lm[40];
    origin(u, sizeof u, "ranged", "Cache-Control", "max-age=600", "ETag", "\"v1\"", "Last-Modified",
           http_date(lm, now_s() - 3600), "_body", "0123456789abcdef", NULL);
    reply x = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(x.status, 200);
    courier_response_free(x.resp);
    const struct {
        const char *range, *if_range;
        int status;
        const char *body, *content_range;
    } cases[] = {
        {"bytes=2-5", NULL, 206, "2345", "bytes 2-5/16"},
        {"bytes=10-", NULL, 206, "abcdef", "bytes 10-15/16"},
        {"bytes=-3", NULL, 206, "def", "bytes 13-15/16"},
        {"bytes=-30", NULL, 206, "0123456789abcdef", "bytes 0-15/16"},
        {"bytes=14-100", NULL, 206, "ef", "bytes 14-15/16"},
        {" bytes = 0-0 ", NULL, 206, "0", "bytes 0-0/16"},
        {"bytes=16-", NULL, 416, "", "bytes */16"},
        {"bytes=-0", NULL, 416, "", "bytes */16"},
        {"bytes=0-1,4-5", NULL, 200, "0123456789abcdef", NULL}, /* several: whole */
        {"bytes=5-2", NULL, 200, "0123456789abcdef", NULL},     /* invalid: ignored */
        {"items=0-1", NULL, 200, "0123456789abcdef", NULL},
        {"bytes=0-1", "\"v1\"", 206, "01", "bytes 0-1/16"},
        {"bytes=0-1", "\"v0\"", 200, "0123456789abcdef", NULL},    /* another version: whole */
        {"bytes=0-1", "W/\"v1\"", 200, "0123456789abcdef", NULL},  /* weak: never for a range */
        {"bytes=0-1", lm, 206, "01", "bytes 0-1/16"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        x = ranged(e, u, cases[i].range, cases[i].if_range);
        if (x.status != cases[i].status) fprintf(stderr, "case %zu (%s): %d\n", i, cases[i].range, x.status);
        CHECK_EQ(x.status, cases[i].status);
        CHECK_EQ(x.reason, COURIER_CACHE_REASON_FRESH);
        CHECK_STR(body_of(&x), cases[i].body);
        const char *cr = courier_response_header(x.resp, "Content-Range");
        if (cases[i].content_range) CHECK_STR(cr ? cr : "(none)", cases[i].content_range);
        else CHECK(cr == NULL);
        if (x.status == 206) {
            char n[24];
            snprintf(n, sizeof n, "%zu", strlen(cases[i].body));
            CHECK_STR(courier_response_header(x.resp, "Content-Length"), n);
            CHECK_STR(courier_response_header(x.resp, "ETag"), "\"v1\""); /* the stored fields */
        }
        courier_response_free(x.resp);
    }
    CHECK_EQ(origin_count("ranged"), 1);
    /* The entry itself stays whole. */
    x = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(x.status, 200);
    CHECK_STR(body_of(&x), "0123456789abcdef");
    courier_response_free(x.resp);
    close_engine(e);
}

/* ---- RFC 5861 section 4: stale-if-error on 500, 502, 503, 504 --------------------------------- */

static void test_5861_4_stale_if_error_on_5xx(void) {
    const char *codes[] = {"500", "502", "503", "504", "501"};
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "sie", "Cache-Control", "max-age=1, stale-if-error=600", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    th_clock_set_offset_ms(5 * 1000);
    for (int i = 0; i < 5; i++) {
        char fail[128], name[32];
        snprintf(name, sizeof name, "sie-%s", codes[i]);
        origin(fail, sizeof fail, name, "_status", codes[i], NULL);
        reply x = exchange_via(e, u, fail);
        if (i < 4) {
            CHECK_EQ(x.code, COURIER_OK);
            CHECK_EQ(x.status, 200);
            CHECK_EQ(x.cache_status, COURIER_CACHE_STATUS_STALE);
            CHECK_EQ(x.reason, COURIER_CACHE_REASON_STALE_IF_ERROR);
        } else { /* 501 is not an error the stale answer covers */
            CHECK_EQ(x.code, COURIER_E_HTTP_STATUS);
            CHECK_EQ(x.status, 501);
        }
        courier_response_free(x.resp);
        CHECK_EQ(origin_count(name), 1);
    }
    close_engine(e);
}

/* RFC 5861 section 4: stale-if-error in the request works like the response's. */
static void test_5861_4_stale_if_error_request_directive(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256], fail[128];
    origin(u, sizeof u, "sie-rq", "Cache-Control", "max-age=1", "ETag", "\"q\"", NULL);
    origin(fail, sizeof fail, "sie-rq-503", "_status", "503", NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    th_clock_set_offset_ms(5 * 1000);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", u);
    courier_request_add_header(r, "Cache-Control", "stale-if-error=60");
    courier_request_set_customize(r, th_redirect_customize, NULL, NULL);
    th_redirect_to(th_url(fail));
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_EQ(courier_response_cache_reason(resp), COURIER_CACHE_REASON_STALE_IF_ERROR);
    courier_response_free(resp);
    th_clock_set_offset_ms(100 * 1000); /* past the request's window */
    resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_HTTP_STATUS);
    courier_response_free(resp);
    th_redirect_to(NULL);
    courier_request_free(r);
    CHECK_EQ(origin_count("sie-rq-503"), 2);
    close_engine(e);
}

/* ---- Content-Encoding --------------------------------------------------------------------------- */

static void test_content_encoding_unknown_kept(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "ce-unknown", "Cache-Control", "max-age=60", "Content-Encoding", "x-custom", "_body", "raw!", NULL);
    reply a = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(a.code, COURIER_OK);
    REQUIRE(a.resp);
    CHECK_STR((const char *)courier_response_body(a.resp, NULL), "raw!");
    CHECK_STR(courier_response_header(a.resp, "Content-Encoding"), "x-custom");
    CHECK_EQ(a.reason, COURIER_CACHE_REASON_MISS);
    courier_response_free(a.resp);
    reply b = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(b.reason, COURIER_CACHE_REASON_FRESH);
    CHECK_STR((const char *)courier_response_body(b.resp, NULL), "raw!");
    CHECK_STR(courier_response_header(b.resp, "Content-Encoding"), "x-custom");
    courier_response_free(b.resp);
    close_engine(e);
}

static void test_content_encoding_decoded_drops_header(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "ce-gzip", "Cache-Control", "max-age=60", "Content-Encoding", "gzip", "_gzip", "1", NULL);
    for (int i = 0; i < 2; i++) {
        reply a = exchange(e, "GET", u, NULL, NULL);
        CHECK_EQ(a.code, COURIER_OK);
        REQUIRE(a.resp);
        CHECK_EQ(a.reason, i ? COURIER_CACHE_REASON_FRESH : COURIER_CACHE_REASON_MISS);
        CHECK_STR((const char *)courier_response_body(a.resp, NULL), "decoded body");
        CHECK(courier_response_header(a.resp, "Content-Encoding") == NULL);
        const char *cl = courier_response_header(a.resp, "Content-Length");
        if (cl) CHECK_STR(cl, "12");
        courier_response_free(a.resp);
    }
    close_engine(e);
}

/* ---- redirects: 301 and 308 stored and served under the rules ---------------------------------- */

static void test_9111_redirect_301_308_stored(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[512], d[40], lm[40];
    int64_t t = now_s();
    /* Without a Location the hop is the final answer the cache sees (redirect following is the
     * engine's: docs/design/transport.md, "Redirects"). 301 with explicit freshness, 308 with heuristic freshness. */
    origin(u, sizeof u, "moved-301", "_status", "301", "Cache-Control", "max-age=600", NULL);
    reply a = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(a.status, 301);
    CHECK_EQ(a.reason, COURIER_CACHE_REASON_MISS);
    courier_response_free(a.resp);
    a = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(a.status, 301);
    CHECK_EQ(a.reason, COURIER_CACHE_REASON_FRESH);
    courier_response_free(a.resp);
    CHECK_EQ(origin_count("moved-301"), 1);
    origin(u, sizeof u, "moved-308", "_status", "308", "Date", http_date(d, t), "Last-Modified", http_date(lm, t - 100000), NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_MISS);
    a = exchange(e, "GET", u, NULL, NULL);
    CHECK_EQ(a.status, 308);
    CHECK_EQ(a.reason, COURIER_CACHE_REASON_FRESH);
    courier_response_free(a.resp);
    CHECK_EQ(origin_count("moved-308"), 1);
    /* 302 is not heuristically cacheable */
    origin(u, sizeof u, "moved-302", "_status", "302", "Date", http_date(d, t), "Last-Modified", http_date(lm, t - 100000), NULL);
    CHECK_EQ(get_reason(e, u, NULL, NULL), COURIER_CACHE_REASON_NOT_STORED_STATUS);
    close_engine(e);
}

/* The engine follows redirects hop by hop, each hop through the cache: a stored 301 (and the stored
 * answer it leads to) answer the whole chain without the network; with following off, the stored
 * 301 itself is the answer. */
static void test_9111_cached_redirect_followed_from_cache(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char target[256], u[512];
    origin(target, sizeof target, "redir-target", "Cache-Control", "max-age=600", "_body", "arrived", NULL);
    origin(u, sizeof u, "redir-301", "_status", "301", "Cache-Control", "max-age=600", "Location", target, NULL);
    for (int round = 0; round < 2; round++) {
        reply x = exchange(e, "GET", u, NULL, NULL);
        CHECK_EQ(x.code, COURIER_OK);
        CHECK_EQ(x.status, 200);
        CHECK_STR((const char *)courier_response_body(x.resp, NULL), "arrived");
        CHECK_EQ(x.reason, round ? COURIER_CACHE_REASON_FRESH : COURIER_CACHE_REASON_MISS);
        courier_response_free(x.resp);
        CHECK_EQ(origin_count("redir-301"), 1);
        CHECK_EQ(origin_count("redir-target"), 1);
    }
    courier_request *r = NULL;
    courier_request_new(&r, "GET", u);
    courier_request_set_follow_redirects(r, 0);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 301);
    CHECK_EQ(courier_response_cache_reason(resp), COURIER_CACHE_REASON_FRESH);
    courier_response_free(resp);
    courier_request_free(r);
    CHECK_EQ(origin_count("redir-301"), 1);
    close_engine(e);
}

/* ---- Vary (section 4.1) ---------------------------------------------------------------------------- */

static void test_9111_4_1_vary(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "vary", "Cache-Control", "max-age=60", "Vary", "Accept-Language", NULL);
    CHECK_EQ(get_reason(e, u, "Accept-Language", "en"), COURIER_CACHE_REASON_MISS);
    CHECK_EQ(get_reason(e, u, "Accept-Language", "fr"), COURIER_CACHE_REASON_VARY_MISS);
    CHECK_EQ(get_reason(e, u, "Accept-Language", "en"), COURIER_CACHE_REASON_FRESH);
    origin(u, sizeof u, "vary-star", "Cache-Control", "max-age=60", "Vary", "*", NULL);
    two_gets(e, u, COURIER_CACHE_REASON_NOT_STORED_VARY, COURIER_CACHE_REASON_NOT_STORED_VARY);
    close_engine(e);
}

/* ---- the cache explains itself ------------------------------------------------------------------- */

static void test_cache_reason_names(void) {
    for (int i = 0; i <= COURIER_CACHE_REASON_NOT_STORED_POLICY; i++) {
        const char *n = courier_cache_reason_name(i);
        CHECK(n && strcmp(n, "unknown") != 0);
        for (int k = 0; k < i; k++) CHECK(strcmp(n, courier_cache_reason_name(k)) != 0);
    }
    CHECK_STR(courier_cache_reason_name(COURIER_CACHE_REASON_FRESH), "fresh");
    CHECK_STR(courier_cache_reason_name(COURIER_CACHE_REASON_NOT_STORED_PRIVATE), "not-stored-private");
    CHECK_STR(courier_cache_reason_name(-1), "unknown");
    CHECK_STR(courier_cache_reason_name(COURIER_CACHE_REASON_NOT_STORED_POLICY + 1), "unknown");
    CHECK_EQ(courier_response_cache_reason(NULL), COURIER_CACHE_REASON_NONE);
}

static void test_cache_too_large(void) {
    mode_max_bytes = 64 * 1024; /* an entry may take 8 KiB */
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    CHECK_EQ(get_reason(e, "/bytes/20000", NULL, NULL), COURIER_CACHE_REASON_NOT_STORED_TOO_LARGE);
    CHECK_EQ(get_reason(e, "/bytes/20000", NULL, NULL), COURIER_CACHE_REASON_NOT_STORED_TOO_LARGE);
    CHECK_EQ(cts_server_path_count(th_server(), "/bytes/20000"), 2);
    close_engine(e);
}

static void test_9211_cache_status_field(void) {
    mode_status_header = 1;
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    char u[256];
    origin(u, sizeof u, "cs", "Cache-Control", "max-age=60", NULL);
    reply a = exchange(e, "GET", u, NULL, NULL);
    CHECK_STR(courier_response_header(a.resp, "Cache-Status"), "Courier; fwd=uri-miss; fwd-status=200; stored; detail=miss");
    courier_response_free(a.resp);
    a = exchange(e, "GET", u, NULL, NULL);
    CHECK_STR(courier_response_header(a.resp, "Cache-Status"), "Courier; hit; detail=fresh");
    courier_response_free(a.resp);
    origin(u, sizeof u, "cs-ns", "Cache-Control", "no-store", NULL);
    a = exchange(e, "GET", u, NULL, NULL);
    CHECK_STR(courier_response_header(a.resp, "Cache-Status"), "Courier; fwd=uri-miss; fwd-status=200; detail=not-stored-no-store");
    courier_response_free(a.resp);
    close_engine(e);
    /* off by default */
    e = engine(COURIER_CACHE_HTTP);
    a = exchange(e, "GET", u, NULL, NULL);
    CHECK(courier_response_header(a.resp, "Cache-Status") == NULL);
    courier_response_free(a.resp);
    close_engine(e);
}

typedef struct lines {
    char text[8192];
} lines;
static void log_cb(courier_log_level level, const char *line, size_t len, void *user) {
    (void)level;
    lines *l = user;
    strncat(l->text, line, len < sizeof l->text - strlen(l->text) - 2 ? len : sizeof l->text - strlen(l->text) - 2);
    strcat(l->text, "\n");
}

static void test_cache_reason_in_log_lines(void) {
    courier_engine *e = engine(COURIER_CACHE_HTTP);
    REQUIRE(e);
    static lines l;
    memset(&l, 0, sizeof l);
    CHECK_EQ(courier_log_add_callback(NULL, e, COURIER_LOG_INFO, log_cb, &l, NULL), COURIER_OK);
    char u[256];
    origin(u, sizeof u, "log", "Cache-Control", "max-age=60", NULL);
    get_reason(e, u, NULL, NULL);
    get_reason(e, u, NULL, NULL);
    close_engine(e);
    CHECK_CONTAINS(l.text, "\"cache\":\"miss\"");
    CHECK_CONTAINS(l.text, "\"cache\":\"fresh\"");
    CHECK_CONTAINS(l.text, "cache: fresh");
}

TESTS_MAIN(T(test_9111_4_4_invalidate_on_unsafe), T(test_9111_4_4_invalidate_without_policy),
           T(test_9111_4_4_invalidate_post_with_params),
           T(test_9111_4_4_invalidate_location_and_content_location), T(test_9111_4_4_error_does_not_invalidate),
           T(test_9111_5_2_1_1_request_max_age), T(test_9111_5_2_1_2_max_stale), T(test_9111_5_2_1_3_min_fresh),
           T(test_9111_5_2_1_4_request_no_cache), T(test_9111_5_2_1_5_request_no_store),
           T(test_9111_5_2_1_7_only_if_cached), T(test_9111_3_error_status_with_max_age_is_stored),
           T(test_9111_3_status_without_freshness_not_stored), T(test_9111_4_2_2_heuristic_freshness),
           T(test_9111_4_2_2_heuristic_cap_one_day), T(test_9111_4_2_2_heuristic_404),
           T(test_9111_4_2_1_max_age_digits_only), T(test_9111_4_2_1_repeated_directive),
           T(test_9111_5_3_invalid_expires_is_expired), T(test_9110_14_range_from_the_cache), T(test_9111_5_1_age_list_uses_the_first), T(test_9111_5_1_age_digits_only),
           T(test_9111_3_2_304_replaces_fields), T(test_9111_4_3_5_head_freshens_stored_get),
           T(test_9111_4_3_5_head_invalidates_changed), T(test_9111_4_2_3_age_calculation),
           T(test_9111_3_1_hop_by_hop_not_stored), T(test_9111_5_2_2_4_no_cache_field), T(test_9111_5_2_2_7_private),
           T(test_9111_5_2_2_10_s_maxage), T(test_9111_5_2_2_8_proxy_revalidate), T(test_9111_3_5_authorization),
           T(test_9111_5_2_2_9_public_allows_heuristics), T(test_9111_3_3_partial_content_not_stored),
           T(test_5861_4_stale_if_error_on_5xx),
           T(test_5861_4_stale_if_error_request_directive), T(test_content_encoding_unknown_kept),
           T(test_content_encoding_decoded_drops_header), T(test_9111_redirect_301_308_stored),
           T(test_9111_cached_redirect_followed_from_cache), T(test_9111_4_1_vary),
           T(test_cache_reason_names), T(test_cache_too_large), T(test_9211_cache_status_field),
           T(test_cache_reason_in_log_lines))
