/*
 * http_version_test.c — courier_http_version per engine and per request, against nginx (the TLS
 * fixture: HTTP/1.1 only, HTTP/2 by ALPN, and clear-text HTTP/2 with prior knowledge) and the
 * loopback test server (HTTP/1.1): the default, HTTP/2 forbidden, preferred and required (a server
 * that cannot: COURIER_E_HTTP_VERSION), h2c with prior knowledge, and HTTP/3 where libcurl has it.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>

static th_nginx h1, h2, h2c;

static courier_http_version engine_version;
static const th_nginx *engine_ca;

static void tweak(courier_config *c) {
    if (engine_ca) CHECK_EQ(courier_config_set_ca_file(c, th_nginx_file(engine_ca, "ca.pem")), COURIER_OK);
    CHECK_EQ(courier_config_set_http_version(c, engine_version), COURIER_OK);
}

static courier_engine *engine_for(const th_nginx *server, courier_http_version v) {
    engine_ca = server;
    engine_version = v;
    return th_engine(tweak);
}

static const char *https_url(const th_nginx *n) {
    static char buf[4][128];
    static int i;
    char *b = buf[i++ % 4];
    snprintf(b, 128, "https://localhost:%d/", n->port);
    return b;
}

/* GET url: the code; the HTTP version used in *version (0 when it failed). `request_version` < 0:
 * the engine's. */
static int get(courier_engine *e, const char *url, int request_version, int *version) {
    courier_request *r = NULL;
    courier_response *resp = NULL;
    courier_error err;
    *version = 0;
    if (courier_request_new(&r, "GET", url) != COURIER_OK) return -1000;
    if (request_version >= 0)
        CHECK_EQ(courier_request_set_http_version(r, (courier_http_version)request_version), COURIER_OK);
    int rc = courier_send_sync(&resp, e, r, &err);
    if (rc && getenv("HV_DEBUG")) fprintf(stderr, "%s: %d %s\n", url, rc, err.message);
    courier_request_free(r);
    if (resp) {
        courier_metrics m = {.size = sizeof m};
        if (courier_response_metrics(&m, resp) == COURIER_OK && rc == COURIER_OK) *version = m.http_version;
        courier_response_free(resp);
    }
    return rc;
}

static void check_version(const th_nginx *server, courier_http_version v, int want_code, int want_version) {
    courier_engine *e = engine_for(server, v);
    REQUIRE(e);
    int version = -1;
    CHECK_EQ(get(e, https_url(server), -1, &version), want_code);
    CHECK_EQ(version, want_version);
    courier_engine_close(e);
}

/* The default: HTTP/2 when offered by ALPN, else HTTP/1.1. */
static void test_default(void) {
    check_version(&h2, COURIER_HTTP_DEFAULT, COURIER_OK, 20);
    check_version(&h1, COURIER_HTTP_DEFAULT, COURIER_OK, 11);
}

/* Forbidden: HTTP/1.1 even where HTTP/2 is offered. */
static void test_forbid_http2(void) {
    check_version(&h2, COURIER_HTTP_V1_1, COURIER_OK, 11);
}

/* Preferred: HTTP/2 where offered, HTTP/1.1 elsewhere (http:// too: the Upgrade is ignored). */
static void test_prefer_http2(void) {
    check_version(&h2, COURIER_HTTP_V2, COURIER_OK, 20);
    check_version(&h1, COURIER_HTTP_V2, COURIER_OK, 11);
    courier_engine *e = engine_for(NULL, COURIER_HTTP_V2);
    REQUIRE(e);
    int version = 0;
    CHECK_EQ(get(e, th_url("/echo"), -1, &version), COURIER_OK);
    CHECK_EQ(version, 11);
    courier_engine_close(e);
}

/* Required: HTTP/2 where offered; a server that answers over HTTP/1.1 fails the request. */
static void test_require_http2(void) {
    check_version(&h2, COURIER_HTTP_V2_ONLY, COURIER_OK, 20);
    check_version(&h1, COURIER_HTTP_V2_ONLY, COURIER_E_HTTP_VERSION, 0);
}

/* h2c with prior knowledge: an http:// server speaking only HTTP/2 is reached; an HTTP/1.1 server
 * (the loopback test server) fails with COURIER_E_HTTP_VERSION; the default cannot reach the h2c
 * server at all. */
static void test_h2c_prior_knowledge(void) {
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", h2c.port);
    courier_engine *e = engine_for(NULL, COURIER_HTTP_V2_ONLY);
    REQUIRE(e);
    int version = 0;
    CHECK_EQ(get(e, url, -1, &version), COURIER_OK);
    CHECK_EQ(version, 20);
    CHECK_EQ(get(e, url, -1, &version), COURIER_OK); /* again, on the same connection */
    CHECK_EQ(version, 20);
    CHECK_EQ(get(e, th_url("/echo"), -1, &version), COURIER_E_HTTP_VERSION);
    courier_engine_close(e);
    e = engine_for(NULL, COURIER_HTTP_DEFAULT);
    REQUIRE(e);
    CHECK(get(e, url, -1, &version) != COURIER_OK);
    courier_engine_close(e);
}

/* A request's version replaces the engine's, for that request alone. */
static void test_request_replaces_the_engines(void) {
    courier_engine *e = engine_for(&h2, COURIER_HTTP_V1_1);
    REQUIRE(e);
    int version = 0;
    CHECK_EQ(get(e, https_url(&h2), -1, &version), COURIER_OK);
    CHECK_EQ(version, 11);
    CHECK_EQ(get(e, https_url(&h2), COURIER_HTTP_V2_ONLY, &version), COURIER_OK);
    CHECK_EQ(version, 20);
    CHECK_EQ(get(e, https_url(&h2), -1, &version), COURIER_OK);
    CHECK_EQ(version, 11);
    courier_engine_close(e);
    e = engine_for(&h1, COURIER_HTTP_V2_ONLY);
    REQUIRE(e);
    CHECK_EQ(get(e, https_url(&h1), -1, &version), COURIER_E_HTTP_VERSION);
    CHECK_EQ(get(e, https_url(&h1), COURIER_HTTP_DEFAULT, &version), COURIER_OK);
    CHECK_EQ(version, 11);
    courier_engine_close(e);
}

/* HTTP/3 is there when libcurl was built with it; asking for it elsewhere fails at once. Values out
 * of the enum are refused. */
static void test_http3_and_checks(void) {
    courier_config *c = NULL;
    courier_request *r = NULL;
    REQUIRE(courier_config_new(&c) == COURIER_OK);
    REQUIRE(courier_request_new(&r, "GET", "/") == COURIER_OK);
    int want = courier_http3_available() ? COURIER_OK : COURIER_E_HTTP_VERSION;
    CHECK_EQ(courier_config_set_http_version(c, COURIER_HTTP_V3), want);
    CHECK_EQ(courier_config_set_http_version(c, COURIER_HTTP_V3_ONLY), want);
    CHECK_EQ(courier_request_set_http_version(r, COURIER_HTTP_V3), want);
    CHECK_EQ(courier_config_set_http_version(c, (courier_http_version)6), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_http_version(c, (courier_http_version)-1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_http_version(NULL, COURIER_HTTP_V2), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_http_version(NULL, COURIER_HTTP_V2), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_http_version(c, COURIER_HTTP_V2_ONLY), COURIER_OK);
    CHECK_EQ(courier_request_set_http_version(r, COURIER_HTTP_V1_1), COURIER_OK);
    CHECK(courier_strerror(COURIER_E_HTTP_VERSION) != NULL);
    courier_request_free(r);
    courier_config_free(c);
}

int main(int argc, char **argv) {
    static const th_test tests[] = {T(test_default),          T(test_forbid_http2),
                                    T(test_prefer_http2),     T(test_require_http2),
                                    T(test_h2c_prior_knowledge), T(test_request_replaces_the_engines),
                                    T(test_http3_and_checks)};
    int rc = th_tls_nginx(&h1, 0);
    if (rc == 0) rc = th_tls_nginx(&h2, 1);
    if (rc == 0) rc = th_tls_nginx(&h2c, 2);
    if (rc == 77) {
        printf("SKIPPED: nginx is not installed (scripts/setup installs it); the HTTP version tests need it\n");
        return 77;
    }
    if (rc != 0) {
        printf("FAILED: nginx with the TLS fixture (scripts/tls-fixture) did not start; see %s, %s and %s\n", h1.dir,
               h2.dir, h2c.dir);
        return 1;
    }
    return th_run(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
