/*
 * content_coding_test.c — the content codings end to end over the loopback server: gzip, deflate,
 * br and zstd each decoded (the field and the coded length gone), kept by the HTTP cache decoded,
 * a corrupt stream of each failing with COURIER_E_PROTOCOL, and the coded bytes untouched when
 * the engine or the request asks (courier_config/request_set_decode_content 0), past the cache.
 * The coded bodies were made once with Python's gzip and zlib and the brotli and zstd tools; each
 * "_bad" is its "_ok" with what follows the header (gzip, deflate) or the second half (br, zstd)
 * overwritten with 0xff: a block of a reserved type for the zlib codings, which libcurl 7.88 tells
 * (a zlib stream merely cut short after whole blocks passes libcurl 7.88 unnoticed: not tested).
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>

static const char plain[] = "decoded body: every coding comes back as these bytes\n";

static const unsigned char gzip_ok[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x4b, 0x49, 0x4d, 0xce, 0x4f, 0x49, 0x4d, 0x51, 0x48, 0xca, 0x4f, 0xa9, 0xb4, 0x52, 0x48, 0x2d, 0x4b, 0x2d, 0xaa, 0x54, 0x00, 0x8a, 0x64, 0xe6, 0xa5, 0x03, 0xa9, 0xdc, 0xd4, 0x62, 0x85, 0xa4, 0xc4, 0xe4, 0x6c, 0x85, 0xc4, 0x62, 0x85, 0x92, 0x8c, 0xd4, 0xe2, 0x54, 0x85, 0xa4, 0xca, 0x92, 0xd4, 0x62, 0x2e, 0x00, 0xca, 0x75, 0x17, 0xea, 0x35, 0x00, 0x00, 0x00};
static const unsigned char gzip_bad[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const unsigned char deflate_ok[] = {0x78, 0x9c, 0x4b, 0x49, 0x4d, 0xce, 0x4f, 0x49, 0x4d, 0x51, 0x48, 0xca, 0x4f, 0xa9, 0xb4, 0x52, 0x48, 0x2d, 0x4b, 0x2d, 0xaa, 0x54, 0x00, 0x8a, 0x64, 0xe6, 0xa5, 0x03, 0xa9, 0xdc, 0xd4, 0x62, 0x85, 0xa4, 0xc4, 0xe4, 0x6c, 0x85, 0xc4, 0x62, 0x85, 0x92, 0x8c, 0xd4, 0xe2, 0x54, 0x85, 0xa4, 0xca, 0x92, 0xd4, 0x62, 0x2e, 0x00, 0x0a, 0x96, 0x13, 0x16};
static const unsigned char deflate_bad[] = {0x78, 0x9c, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const unsigned char br_ok[] = {0x1f, 0x34, 0x00, 0x80, 0x14, 0xa1, 0x92, 0xbb, 0xc1, 0x79, 0x42, 0x09, 0x6f, 0x5a, 0x71, 0xf0, 0x32, 0x38, 0xe4, 0x48, 0x03, 0xc2, 0xd6, 0x31, 0x4b, 0xb0, 0x34, 0x81, 0x1e, 0x99, 0x09, 0xb9, 0xe4, 0xa8, 0x33, 0xad, 0x43, 0x95, 0xa9, 0x3d, 0x80, 0x59, 0x2e, 0xc1, 0x59, 0xeb, 0xfe, 0x97, 0x05};
static const unsigned char br_bad[] = {0x1f, 0x34, 0x00, 0x80, 0x14, 0xa1, 0x92, 0xbb, 0xc1, 0x79, 0x42, 0x09, 0x6f, 0x5a, 0x71, 0xf0, 0x32, 0x38, 0xe4, 0x48, 0x03, 0xc2, 0xd6, 0x31, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
static const unsigned char zstd_ok[] = {0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x68, 0x85, 0x01, 0x00, 0x52, 0x03, 0x0b, 0x10, 0xc0, 0xeb, 0xa8, 0x59, 0x3e, 0xc9, 0x62, 0x13, 0x91, 0xa4, 0xf0, 0xd7, 0x17, 0x3b, 0xb6, 0xb0, 0x40, 0xaf, 0xd6, 0x7c, 0x3d, 0x51, 0x56, 0x61, 0x73, 0xc2, 0xac, 0x3f, 0x79, 0x1e, 0xa8, 0x60, 0x9e, 0x37, 0x7d, 0xdd, 0x61, 0x31, 0xcd, 0x78, 0xcc, 0x3b, 0x06, 0x00, 0x8e, 0x20, 0xbe, 0xad};
static const unsigned char zstd_bad[] = {0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x68, 0x85, 0x01, 0x00, 0x52, 0x03, 0x0b, 0x10, 0xc0, 0xeb, 0xa8, 0x59, 0x3e, 0xc9, 0x62, 0x13, 0x91, 0xa4, 0xf0, 0xd7, 0x17, 0x3b, 0xb6, 0xb0, 0x40, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

typedef struct coding {
    const char *name;
    const unsigned char *ok, *bad;
    size_t ok_len, bad_len;
} coding;

#define CODING(n) {#n, n##_ok, n##_bad, sizeof n##_ok, sizeof n##_bad}
static const coding codings[] = {CODING(gzip), CODING(deflate), CODING(br), CODING(zstd)};

/* Whether this libcurl decodes the coding: the engine offers exactly those in Accept-Encoding
 * (as the loopback server's /echo saw it). */
static int decodes(const coding *c) {
    static char offered[256];
    if (!offered[0]) {
        courier_engine *e = th_engine(NULL);
        courier_request *r = NULL;
        courier_response *resp = NULL;
        if (e && courier_request_new(&r, "GET", th_url("/echo")) == COURIER_OK &&
            courier_send_sync(&resp, e, r, NULL) == COURIER_OK) {
            const char *body = (const char *)courier_response_body(resp, NULL);
            const char *at = body ? strstr(body, "[\"Accept-Encoding\",\"") : NULL;
            if (at) snprintf(offered, sizeof offered, "%.*s", (int)strcspn(at + 20, "\""), at + 20);
        }
        courier_response_free(resp);
        courier_request_free(r);
        courier_engine_close(e);
        if (!offered[0]) snprintf(offered, sizeof offered, "(none)");
    }
    size_t n = strlen(c->name);
    for (const char *p = offered; (p = strstr(p, c->name)) != NULL; p += n)
        if ((p == offered || p[-1] == ' ' || p[-1] == ',') && (p[n] == 0 || p[n] == ',' || p[n] == ' ')) return 1;
    return 0;
}

/* "/origin/{name}?Content-Encoding=...&Cache-Control=...&_body=<the bytes, percent-encoded>". */
static const char *origin_url(const char *name, const char *coding_name, const unsigned char *body, size_t len) {
    static char buf[4][2048];
    static int i;
    char *b = buf[i++ % 4];
    int n = snprintf(b, 2048, "%s/origin/%s?Content-Encoding=%s&Cache-Control=max-age%%3D60&_body=", th_base(), name,
                 coding_name);
    for (size_t k = 0; k < len && n + 4 < 2048; k++) n += snprintf(b + n, 2048 - (size_t)n, "%%%02x", body[k]);
    return b;
}

static int get(courier_engine *e, const char *url, int decode, courier_response **out) {
    courier_request *r = NULL;
    courier_error err;
    *out = NULL;
    if (courier_request_new(&r, "GET", url) != COURIER_OK) return -1000;
    if (decode >= 0) CHECK_EQ(courier_request_set_decode_content(r, decode), COURIER_OK);
    int rc = courier_send_sync(out, e, r, &err);
    courier_request_free(r);
    return rc;
}

static void http_cache(courier_config *c) {
    CHECK_EQ(courier_config_set_cache_policy(c, COURIER_CACHE_HTTP), COURIER_OK);
}

/* Each coding decoded, without its field and with the decoded length; the second time from the
 * HTTP cache, decoded the same. */
static void test_each_coding_decoded_and_cached(void) {
    courier_engine *e = th_engine(http_cache);
    REQUIRE(e);
    for (size_t i = 0; i < sizeof codings / sizeof codings[0]; i++) {
        const coding *c = &codings[i];
        if (!decodes(c)) {
            printf("  (this libcurl does not decode %s: skipped)\n", c->name);
            continue;
        }
        char name[32];
        snprintf(name, sizeof name, "ok-%s", c->name);
        const char *url = origin_url(name, c->name, c->ok, c->ok_len);
        for (int round = 0; round < 2; round++) {
            courier_response *r = NULL;
            CHECK_EQ(get(e, url, -1, &r), COURIER_OK);
            if (!r) continue;
            size_t len = 0;
            const uint8_t *body = courier_response_body(r, &len);
            CHECK_EQ(len, sizeof plain - 1);
            CHECK(body && memcmp(body, plain, sizeof plain - 1) == 0);
            CHECK(courier_response_header(r, "Content-Encoding") == NULL);
            const char *cl = courier_response_header(r, "Content-Length");
            if (cl) CHECK_EQ(atol(cl), (long)(sizeof plain - 1));
            CHECK_EQ(courier_response_cache_reason(r), round ? COURIER_CACHE_REASON_FRESH : COURIER_CACHE_REASON_MISS);
            courier_response_free(r);
        }
        char path[64];
        snprintf(path, sizeof path, "/origin/%s", name);
        CHECK_EQ(cts_server_path_count(th_server(), path), 1); /* the second answer was the cache's */
    }
    courier_engine_close(e);
}

/* A corrupt stream of each coding fails as a broken protocol, not with a body. */
static void test_each_corrupt_coding_fails(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    for (size_t i = 0; i < sizeof codings / sizeof codings[0]; i++) {
        const coding *c = &codings[i];
        if (!decodes(c)) continue;
        char name[32];
        snprintf(name, sizeof name, "bad-%s", c->name);
        courier_response *r = NULL;
        int rc = get(e, origin_url(name, c->name, c->bad, c->bad_len), -1, &r);
        if (rc != COURIER_E_PROTOCOL) printf("  %s: %d\n", c->name, rc);
        CHECK_EQ(rc, COURIER_E_PROTOCOL);
        courier_response_free(r);
    }
    courier_engine_close(e);
}

static void check_coded(courier_response *r, const coding *c) {
    REQUIRE(r);
    size_t len = 0;
    const uint8_t *body = courier_response_body(r, &len);
    CHECK_EQ(len, c->ok_len);
    CHECK(body && memcmp(body, c->ok, c->ok_len) == 0);
    CHECK_STR(courier_response_header(r, "Content-Encoding"), c->name);
    const char *cl = courier_response_header(r, "Content-Length");
    CHECK(cl && atol(cl) == (long)c->ok_len);
}

static void raw_engine(courier_config *c) {
    CHECK_EQ(courier_config_set_cache_policy(c, COURIER_CACHE_HTTP), COURIER_OK);
    CHECK_EQ(courier_config_set_decode_content(c, 0), COURIER_OK);
}

/* Coded bytes untouched: per request on a decoding engine with the HTTP cache (which neither
 * answers nor stores them), and per engine (a request may ask for decoding back). */
static void test_coded_bytes_untouched(void) {
    courier_engine *e = th_engine(http_cache);
    REQUIRE(e);
    for (size_t i = 0; i < sizeof codings / sizeof codings[0]; i++) {
        const coding *c = &codings[i];
        char name[32], path[64];
        snprintf(name, sizeof name, "raw-%s", c->name);
        snprintf(path, sizeof path, "/origin/%s", name);
        const char *url = origin_url(name, c->name, c->ok, c->ok_len);
        courier_response *r = NULL;
        CHECK_EQ(get(e, url, 0, &r), COURIER_OK); /* coded, not stored */
        check_coded(r, c);
        courier_response_free(r);
        if (decodes(c)) {
            CHECK_EQ(get(e, url, -1, &r), COURIER_OK); /* decoded: a miss, stored */
            CHECK_EQ(courier_response_cache_reason(r), COURIER_CACHE_REASON_MISS);
            courier_response_free(r);
        }
        CHECK_EQ(get(e, url, 0, &r), COURIER_OK); /* coded again: not the stored decoded body */
        check_coded(r, c);
        courier_response_free(r);
        CHECK_EQ(cts_server_path_count(th_server(), path), decodes(c) ? 3 : 2);
    }
    courier_engine_close(e);
    e = th_engine(raw_engine);
    REQUIRE(e);
    const coding *c = &codings[0];
    const char *url = origin_url("raw-engine", c->name, c->ok, c->ok_len);
    courier_response *r = NULL;
    CHECK_EQ(get(e, url, -1, &r), COURIER_OK);
    check_coded(r, c);
    courier_response_free(r);
    CHECK_EQ(get(e, url, 1, &r), COURIER_OK);
    size_t len = 0;
    if (r) CHECK_EQ((courier_response_body(r, &len), len), sizeof plain - 1);
    courier_response_free(r);
    CHECK_EQ(courier_config_set_decode_content(NULL, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_decode_content(NULL, 0), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
}

TESTS_MAIN(T(test_each_coding_decoded_and_cached), T(test_each_corrupt_coding_fails), T(test_coded_bytes_untouched))
