/*
 * request_test.c — request descriptions and bad input, over the loopback server: URL joining,
 * parameters (query and body, form and JSON, UTF-8, percent-encoding), headers (defaults,
 * overrides, CR/LF/NUL/space refused), raw bodies, auth helpers, customize.
 */
#include "harness.h"

#include <stdlib.h>

/* Sends r on e synchronously, expects 200 from /echo, returns the body (caller frees) or NULL. */
static char *echo(courier_engine *e, courier_request *r) {
    courier_response *resp = NULL;
    courier_error err;
    int rc = courier_send_sync(&resp, e, r, &err);
    if (rc != COURIER_OK) {
        th_fail(__FILE__, __LINE__, "send: %d (%s)", rc, err.message);
        courier_response_free(resp);
        return NULL;
    }
    size_t len = 0;
    const uint8_t *body = courier_response_body(resp, &len);
    char *copy = strndup((const char *)body, len);
    courier_response_free(resp);
    return copy;
}

static void test_url_joining(void) {
    static const char *bases[] = {"/api", "/api/"};
    static const char *paths[] = {"echo/x", "/echo/x"};
    for (int b = 0; b < 2; b++) {
        for (int p = 0; p < 2; p++) {
            courier_config *cfg = NULL;
            courier_engine *e = NULL;
            REQUIRE(courier_config_new(&cfg) == COURIER_OK);
            char base[256];
            snprintf(base, sizeof base, "%s%s", th_base(), bases[b]);
            CHECK_EQ(courier_config_set_base_url(cfg, base), COURIER_OK);
            REQUIRE(courier_engine_open(&e, cfg, NULL) == COURIER_OK);
            courier_config_free(cfg);
            courier_request *r = NULL;
            REQUIRE(courier_request_new(&r, "GET", paths[p]) == COURIER_OK);
            courier_response *resp = NULL;
            /* /api/echo/x is not an endpoint: 404 with the URL we expect. */
            CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_HTTP_STATUS);
            char want[300];
            snprintf(want, sizeof want, "%s/api/echo/x", th_base());
            CHECK_STR(courier_response_url(resp), want);
            courier_response_free(resp);
            courier_request_free(r);
            courier_engine_close(e);
        }
    }
}

static void test_per_request_base_url_and_absolute_url(void) {
    courier_engine *e = NULL;
    courier_config *cfg = NULL;
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_set_base_url(cfg, "http://127.0.0.1:1/unused"), COURIER_OK);
    REQUIRE(courier_engine_open(&e, cfg, NULL) == COURIER_OK);
    courier_config_free(cfg);

    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "echo") == COURIER_OK);
    CHECK_EQ(courier_request_set_base_url(r, th_base()), COURIER_OK);
    char *body = echo(e, r);
    CHECK_CONTAINS(body, "\"path\":\"/echo\"");
    free(body);
    courier_request_free(r);

    REQUIRE(courier_request_new(&r, "GET", th_url("/echo/abs")) == COURIER_OK);
    body = echo(e, r);
    CHECK_CONTAINS(body, "\"path\":\"/echo/abs\"");
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

/* issue 28 bug 2: a relative path whose query holds "://" is a path (absoluteness is the scheme at
 * the start alone, RFC 3986 section 3.1), sent to the base URL, keyed in the cache as joined. */
static void test_relative_path_with_url_in_query(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    static const char *paths[] = {"/echo?to=http://x", "echo?to=http://u@x:1/y#f", "echo?a=1&next=https://h/p?q"};
    static const char *queries[] = {"to=http://x", "to=http://u@x:1/y", "a=1&next=https://h/p?q"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        courier_request *r = NULL;
        REQUIRE(courier_request_new(&r, "GET", paths[i]) == COURIER_OK);
        char *body = echo(e, r);
        CHECK_CONTAINS(body, "\"path\":\"/echo\"");
        char want[200];
        snprintf(want, sizeof want, "\"query\":\"%s\"", queries[i]);
        CHECK_CONTAINS(body, want);
        free(body);
        /* The cache key is the joined URL too. */
        char *key = NULL;
        CHECK_EQ(courier_cache_key(&key, e, r), COURIER_OK);
        char prefix[300];
        snprintf(prefix, sizeof prefix, "GET %s/echo?", th_base());
        if (!key || strncmp(key, prefix, strlen(prefix)) != 0)
            th_fail(__FILE__, __LINE__, "key of %s: %s", paths[i], key ? key : "(null)");
        courier_free(key);
        courier_request_free(r);
    }
    courier_engine_close(e);
}

static void test_invalid_urls(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    static const char *bad[] = {"http://", "ftp://127.0.0.1/x", "http://exa mple.com/", "not a url at all://",
                                "http://127.0.0.1:99999/", "http://[::1/"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        courier_request *r = NULL;
        REQUIRE(courier_request_new(&r, "GET", bad[i]) == COURIER_OK);
        courier_error err;
        uint64_t id = 123;
        int rc = courier_send(&id, e, r, NULL, NULL, &err);
        if (rc != COURIER_E_INVALID_URL) th_fail(__FILE__, __LINE__, "%s gave %d", bad[i], rc);
        CHECK_EQ(err.code, COURIER_E_INVALID_URL);
        CHECK_EQ(id, 0);
        courier_request_free(r);
    }
    /* A relative path with a space or a control byte. */
    static const char *bad_paths[] = {"/a b", "/x\ty", "/\x7F"};
    for (size_t i = 0; i < sizeof bad_paths / sizeof bad_paths[0]; i++) {
        courier_request *r = NULL;
        REQUIRE(courier_request_new(&r, "GET", bad_paths[i]) == COURIER_OK);
        CHECK_EQ(courier_send(NULL, e, r, NULL, NULL, NULL), COURIER_E_INVALID_URL);
        courier_request_free(r);
    }
    /* A request base URL is checked when set. */
    {
        courier_request *r = NULL;
        REQUIRE(courier_request_new(&r, "GET", "/x") == COURIER_OK);
        CHECK_EQ(courier_request_set_base_url(r, "nope"), COURIER_E_INVALID_URL);
        CHECK_EQ(courier_request_set_base_url(r, "ftp://h/"), COURIER_E_INVALID_URL);
        courier_request_free(r);
    }
    /* A relative path with no base URL at all. */
    courier_engine *bare = NULL;
    REQUIRE(courier_engine_open(&bare, NULL, NULL) == COURIER_OK);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "/echo") == COURIER_OK);
    CHECK_EQ(courier_send_sync(NULL, bare, r, NULL), COURIER_E_INVALID_URL);
    courier_request_free(r);
    courier_engine_close(bare);
    /* A base URL that is not http(s). */
    courier_config *cfg = NULL;
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_set_base_url(cfg, "file:///etc"), COURIER_E_INVALID_URL);
    CHECK_EQ(courier_config_set_base_url(cfg, "http://ok.example/\r\nX: y"), COURIER_E_INVALID_URL);
    courier_config_free(cfg);
    /* Nothing reached the server. */
    courier_engine_close(e);
}

static void test_methods(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    static const char *methods[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "PURGE"};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        courier_request *r = NULL;
        REQUIRE(courier_request_new(&r, methods[i], "/echo") == COURIER_OK);
        char *body = echo(e, r);
        char want[64];
        snprintf(want, sizeof want, "\"method\":\"%s\"", methods[i]);
        CHECK_CONTAINS(body, want);
        free(body);
        courier_request_free(r);
    }
    /* HEAD: headers, no body. */
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "HEAD", "/echo") == COURIER_OK);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    size_t len = 99;
    courier_response_body(resp, &len);
    CHECK_EQ(len, 0);
    CHECK_EQ(courier_response_status(resp), 200);
    CHECK_STR(courier_response_method(resp), "HEAD");
    courier_response_free(resp);
    courier_request_free(r);
    /* A method that is not a token. */
    CHECK_EQ(courier_request_new(&r, "GE T", "/echo"), COURIER_E_INVALID_ARGUMENT);
    CHECK(r == NULL);
    CHECK_EQ(courier_request_new(&r, "", "/echo"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_new(&r, "GET\r\n", "/echo"), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
}

static void test_query_params_encoding(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "/echo?fixed=1") == COURIER_OK);
    CHECK_EQ(courier_request_add_param(r, "q", "a b&c=d/é"), COURIER_OK);
    CHECK_EQ(courier_request_add_param(r, "emoji", "\xF0\x9F\x98\x80"), COURIER_OK);
    CHECK_EQ(courier_request_add_param(r, "empty", ""), COURIER_OK);
    char *body = echo(e, r);
    CHECK_CONTAINS(body, "\"query\":\"fixed=1&q=a%20b%26c%3Dd%2F%C3%A9&emoji=%F0%9F%98%80&empty=\"");
    free(body);
    courier_request_free(r);

    /* DELETE also carries its parameters in the query. */
    REQUIRE(courier_request_new(&r, "DELETE", "/echo") == COURIER_OK);
    CHECK_EQ(courier_request_add_param(r, "id", "7"), COURIER_OK);
    body = echo(e, r);
    CHECK_CONTAINS(body, "\"query\":\"id=7\"");
    CHECK_CONTAINS(body, "\"body_length\":0");
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_bad_params_refused(void) {
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "/echo") == COURIER_OK);
    CHECK_EQ(courier_request_add_param(r, "bad", "\xC3\x28"), COURIER_E_INVALID_ENCODING);      /* broken sequence */
    CHECK_EQ(courier_request_add_param(r, "bad", "\xED\xA0\x80"), COURIER_E_INVALID_ENCODING);  /* surrogate */
    CHECK_EQ(courier_request_add_param(r, "bad", "\xC0\xAF"), COURIER_E_INVALID_ENCODING);      /* overlong */
    CHECK_EQ(courier_request_add_param(r, "\xFF", "x"), COURIER_E_INVALID_ENCODING);
    CHECK_EQ(courier_request_add_param(r, "trunc", "\xE2\x82"), COURIER_E_INVALID_ENCODING);    /* truncated */
    CHECK_EQ(courier_request_add_param_n(r, "nul", 3, "a\0b", 3), COURIER_E_INVALID_ENCODING);
    CHECK_EQ(courier_request_add_param(r, NULL, "x"), COURIER_E_INVALID_ARGUMENT);
    /* Nothing refused was kept: the request still sends with no query. */
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char *body = echo(e, r);
    CHECK_CONTAINS(body, "\"query\":\"\"");
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_form_and_json_body_params(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "POST", "/echo") == COURIER_OK);
    CHECK_EQ(courier_request_add_param(r, "name", "Ada Lovelace"), COURIER_OK);
    CHECK_EQ(courier_request_add_param(r, "lang", "fr&en"), COURIER_OK);
    char *body = echo(e, r);
    CHECK_CONTAINS(body, "\"body\":\"name=Ada%20Lovelace&lang=fr%26en\"");
    CHECK_CONTAINS(body, "[\"Content-Type\",\"application/x-www-form-urlencoded\"]");
    CHECK_CONTAINS(body, "\"query\":\"\"");
    free(body);

    CHECK_EQ(courier_request_set_body_encoding(r, COURIER_BODY_JSON), COURIER_OK);
    body = echo(e, r);
    CHECK_CONTAINS(body, "\"body\":\"{\\\"name\\\":\\\"Ada Lovelace\\\",\\\"lang\\\":\\\"fr&en\\\"}\"");
    CHECK_CONTAINS(body, "[\"Content-Type\",\"application/json\"]");
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

static void tweak_json(courier_config *cfg) { courier_config_set_body_encoding(cfg, COURIER_BODY_JSON); }

static void test_engine_json_encoding(void) {
    courier_engine *e = th_engine(tweak_json);
    REQUIRE(e);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "PUT", "/echo") == COURIER_OK);
    CHECK_EQ(courier_request_add_param(r, "k", "v\"q"), COURIER_OK);
    char *body = echo(e, r);
    CHECK_CONTAINS(body, "\"method\":\"PUT\"");
    CHECK_CONTAINS(body, "{\\\"k\\\":\\\"v\\\\\\\"q\\\"}");
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_raw_body(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "PATCH", "/echo") == COURIER_OK);
    static const char json[] = "{\"a\":[1,2,3]}";
    CHECK_EQ(courier_request_set_body(r, json, sizeof json - 1, "application/json"), COURIER_OK);
    CHECK_EQ(courier_request_add_param(r, "v", "2"), COURIER_OK); /* goes in the query with a raw body */
    char *body = echo(e, r);
    CHECK_CONTAINS(body, "\"body\":\"{\\\"a\\\":[1,2,3]}\"");
    CHECK_CONTAINS(body, "\"query\":\"v=2\"");
    CHECK_CONTAINS(body, "[\"Content-Type\",\"application/json\"]");
    free(body);
    courier_request_free(r);

    /* A binary body with NUL bytes goes through whole. */
    REQUIRE(courier_request_new(&r, "POST", "/echo") == COURIER_OK);
    static const unsigned char bin[] = {0, 1, 2, 0, 255};
    CHECK_EQ(courier_request_set_body(r, bin, sizeof bin, NULL), COURIER_OK);
    body = echo(e, r);
    CHECK_CONTAINS(body, "\"body_length\":5");
    CHECK_CONTAINS(body, "[\"Content-Type\",\"application/octet-stream\"]");
    free(body);
    courier_request_free(r);

    /* A large body (3 MiB): no Expect stall, every byte arrives. */
    size_t big = 3u << 20;
    char *data = malloc(big);
    REQUIRE(data);
    memset(data, 'x', big);
    REQUIRE(courier_request_new(&r, "POST", "/echo") == COURIER_OK);
    CHECK_EQ(courier_request_set_body(r, data, big, "text/plain"), COURIER_OK);
    free(data);
    body = echo(e, r);
    CHECK_CONTAINS(body, "\"body_length\":3145728");
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

static void tweak_defaults(courier_config *cfg) {
    courier_config_add_header(cfg, "X-App", "demo");
    courier_config_add_header(cfg, "Accept", "text/plain");
    courier_config_add_param(cfg, "app_version", "1.2");
    courier_config_set_user_agent(cfg, "CourierTest/1");
}

static void test_default_headers_and_params(void) {
    courier_engine *e = th_engine(tweak_defaults);
    REQUIRE(e);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "/echo") == COURIER_OK);
    CHECK_EQ(courier_request_add_header(r, "accept", "application/json"), COURIER_OK);
    CHECK_EQ(courier_request_add_param(r, "q", "1"), COURIER_OK);
    char *body = echo(e, r);
    CHECK_CONTAINS(body, "[\"X-App\",\"demo\"]");
    CHECK_CONTAINS(body, "[\"accept\",\"application/json\"]");
    CHECK(body && !strstr(body, "text/plain")); /* the request's Accept replaced the default */
    CHECK_CONTAINS(body, "[\"User-Agent\",\"CourierTest/1\"]");
    CHECK_CONTAINS(body, "\"query\":\"app_version=1.2&q=1\"");
    free(body);

    CHECK_EQ(courier_request_set_use_default_params(r, 0), COURIER_OK);
    body = echo(e, r);
    CHECK_CONTAINS(body, "\"query\":\"q=1\"");
    CHECK_CONTAINS(body, "[\"X-App\",\"demo\"]"); /* headers stay */
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

/* A request's headers copied into the send in one block (cr_kvlist_copy into an empty list): each
 * arrives once, the User-Agent added after them too, and a header set on the request after a send
 * (the request's own list, not the block) goes with the next send; freeing the copy frees the
 * block once (ASan). */
static void test_request_headers_copied_whole(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "/echo") == COURIER_OK);
    CHECK_EQ(courier_request_add_header(r, "X-One", "1"), COURIER_OK);
    CHECK_EQ(courier_request_add_header(r, "X-Two", ""), COURIER_OK);
    CHECK_EQ(courier_request_add_header(r, "X-Three", "three"), COURIER_OK);
    char *body = echo(e, r);
    CHECK_CONTAINS(body, "[\"X-One\",\"1\"]");
    CHECK_CONTAINS(body, "[\"X-Three\",\"three\"]");
    CHECK_CONTAINS(body, "[\"User-Agent\",\"Courier/");
    free(body);
    CHECK_EQ(courier_request_add_header(r, "X-Four", "4"), COURIER_OK);
    body = echo(e, r);
    CHECK_CONTAINS(body, "[\"X-One\",\"1\"]");
    CHECK_CONTAINS(body, "[\"X-Four\",\"4\"]");
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

/* A header value is checked 8 bytes at a time while it is printable ASCII: a byte that may not be
 * sent (a control byte, DEL) is refused, a tab and valid UTF-8 are not, and a byte that is not
 * UTF-8 is an encoding error, wherever the byte lies in a long value (each offset of 3 chunks). */
static void test_header_value_bytes_at_every_offset(void) {
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "/echo") == COURIER_OK);
    static const struct {
        const char *bytes;
        int code;
    } cases[] = {
        {"\n", COURIER_E_INVALID_HEADER}, {"\x01", COURIER_E_INVALID_HEADER}, {"\x1f", COURIER_E_INVALID_HEADER},
        {"\x7f", COURIER_E_INVALID_HEADER}, {"\t", COURIER_OK}, {" ", COURIER_OK}, {"~", COURIER_OK},
        {"\xc3\xbc", COURIER_OK}, {"\xf0\x9f\x98\x80", COURIER_OK}, {"\x80", COURIER_E_INVALID_ENCODING},
        {"\xc3", COURIER_E_INVALID_ENCODING}, {"\xff", COURIER_E_INVALID_ENCODING},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t bl = strlen(cases[c].bytes);
        for (size_t at = 0; at < 24; at++) {
            char v[40];
            memset(v, 'a', sizeof v);
            memcpy(v + at, cases[c].bytes, bl);
            v[at + bl + 7] = '\0'; /* the bytes, then 7 plain ones (so a chunk ends past them) */
            int rc = courier_request_add_header(r, "X-A", v);
            if (rc != cases[c].code)
                th_fail(__FILE__, __LINE__, "case %zu at %zu: %d, expected %d", c, at, rc, cases[c].code);
        }
    }
    courier_request_free(r);
}

static void test_header_injection_refused(void) {
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "/echo") == COURIER_OK);
    CHECK_EQ(courier_request_add_header(r, "X-A", "v\r\nX-Injected: 1"), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_request_add_header(r, "X-A", "v\nX-Injected: 1"), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_request_add_header(r, "X-A", "v\rX"), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_request_add_header(r, "X-A\r\nX-Injected", "1"), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_request_add_header(r, "X A", "1"), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_request_add_header(r, "X:A", "1"), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_request_add_header(r, "", "1"), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_request_add_header_n(r, "X-A", 3, "a\0b", 3), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_request_add_header_n(r, "X\0A", 3, "ab", 2), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_request_add_header(r, "X-A", "\xFF\xFE"), COURIER_E_INVALID_ENCODING);
    CHECK_EQ(courier_request_add_header(r, "X-A", "a\x7F"), COURIER_E_INVALID_HEADER);
    /* A name is an RFC 9110 token: every tchar, nothing else of ASCII (cr_is_token's table). */
    courier_request *names = NULL;
    REQUIRE(courier_request_new(&names, "GET", "/echo") == COURIER_OK);
    CHECK_EQ(courier_request_add_header(names, "!#$%&'*+-.^_`|~0189AZaz", "1"), COURIER_OK);
    static const char not_tchar[] = "\"(),/:;<=>?@[\\]{} \x7F\x01";
    for (const char *c = not_tchar; *c; c++) {
        char name[4] = {'X', *c, 'A', 0};
        CHECK_EQ(courier_request_add_header(names, name, "1"), COURIER_E_INVALID_HEADER);
    }
    courier_request_free(names);
    CHECK_EQ(courier_request_set_auth_token(r, NULL, "tok\r\nX: 1"), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_request_set_basic_auth(r, "u", "p\nX"), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_request_set_body(r, "x", 1, "text/plain\r\nX: 1"), COURIER_E_INVALID_HEADER);
    courier_config *cfg = NULL;
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_add_header(cfg, "X-B", "1\r\n"), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_config_set_user_agent(cfg, "UA\r\nX: 1"), COURIER_E_INVALID_HEADER);
    courier_config_free(cfg);
    /* A tab and UTF-8 are fine; an empty value is sent as empty. */
    CHECK_EQ(courier_request_add_header(r, "X-Tab", "a\tb"), COURIER_OK);
    CHECK_EQ(courier_request_add_header(r, "X-Utf8", "caf\xC3\xA9"), COURIER_OK);
    CHECK_EQ(courier_request_add_header(r, "X-Empty", ""), COURIER_OK);
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char *body = echo(e, r);
    CHECK(body && !strstr(body, "Injected"));
    CHECK_CONTAINS(body, "[\"X-Tab\",\"a\\tb\"]");
    CHECK_CONTAINS(body, "[\"X-Empty\",\"\"]");
    free(body);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_auth_helpers(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "/echo") == COURIER_OK);
    CHECK_EQ(courier_request_set_basic_auth(r, "Aladdin", "open sesame"), COURIER_OK);
    char *body = echo(e, r);
    CHECK_CONTAINS(body, "[\"Authorization\",\"Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==\"]");
    free(body);
    CHECK_EQ(courier_request_set_auth_token(r, NULL, "abc.def"), COURIER_OK);
    body = echo(e, r);
    CHECK_CONTAINS(body, "[\"Authorization\",\"Bearer abc.def\"]");
    CHECK(body && !strstr(body, "Basic")); /* replaced, not added */
    free(body);
    CHECK_EQ(courier_request_set_auth_token(r, "Token", "xyz"), COURIER_OK);
    body = echo(e, r);
    CHECK_CONTAINS(body, "[\"Authorization\",\"Token xyz\"]");
    free(body);
    CHECK_EQ(courier_request_set_basic_auth(r, "a:b", "c"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_auth_token(r, "Bad Scheme", "x"), COURIER_E_INVALID_HEADER);
    courier_request_free(r);
    courier_engine_close(e);
}

static int customize_cb(courier_outgoing *o, void *user) {
    int *calls = user;
    (*calls)++;
    char url[512];
    snprintf(url, sizeof url, "%s&signed=1", courier_outgoing_url(o));
    if (courier_outgoing_set_url(o, url) != COURIER_OK) return COURIER_E_INTERNAL;
    if (courier_outgoing_set_header(o, "X-Sig", "abc") != COURIER_OK) return COURIER_E_INTERNAL;
    if (courier_outgoing_set_header(o, "X-Remove-Me", NULL) != COURIER_OK) return COURIER_E_INTERNAL;
    if (courier_outgoing_set_header(o, "X-Bad", "a\r\nb") != COURIER_E_INVALID_HEADER) return COURIER_E_INTERNAL;
    if (courier_outgoing_set_url(o, "nope") != COURIER_E_INVALID_URL) return COURIER_E_INTERNAL;
    if (strcmp(courier_outgoing_method(o), "GET") != 0) return COURIER_E_INTERNAL;
    if (!courier_outgoing_header(o, "user-agent")) return COURIER_E_INTERNAL;
    size_t n = courier_outgoing_header_count(o);
    const char *name = NULL, *value = NULL;
    if (n == 0 || courier_outgoing_header_at(&name, &value, o, n - 1) != COURIER_OK || !name || !value)
        return COURIER_E_INTERNAL;
    if (courier_outgoing_header_at(&name, &value, o, n) != COURIER_E_NOT_FOUND) return COURIER_E_INTERNAL;
    return COURIER_OK;
}

static int refuse_cb(courier_outgoing *o, void *user) {
    (void)o;
    (void)user;
    return COURIER_E_INVALID_RESULT;
}

static int freed_count;
static void count_free(void *user) {
    (void)user;
    freed_count++;
}

static void test_customize(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    int calls = 0;
    REQUIRE(courier_request_new(&r, "GET", "/echo?x=1") == COURIER_OK);
    CHECK_EQ(courier_request_add_header(r, "X-Remove-Me", "1"), COURIER_OK);
    freed_count = 0;
    CHECK_EQ(courier_request_set_customize(r, customize_cb, &calls, count_free), COURIER_OK);
    char *body = echo(e, r);
    CHECK_EQ(calls, 1);
    CHECK_CONTAINS(body, "\"query\":\"x=1&signed=1\"");
    CHECK_CONTAINS(body, "[\"X-Sig\",\"abc\"]");
    CHECK(body && !strstr(body, "X-Remove-Me"));
    free(body);
    /* Refusing fails the send with the callback's code and nothing is sent. */
    long before = cts_server_path_count(th_server(), "/echo");
    CHECK_EQ(courier_request_set_customize(r, refuse_cb, NULL, NULL), COURIER_OK);
    CHECK_EQ(freed_count, 1); /* the replaced registration released its user data */
    uint64_t id = 5;
    CHECK_EQ(courier_send(&id, e, r, NULL, NULL, NULL), COURIER_E_INVALID_RESULT);
    CHECK_EQ(id, 0);
    CHECK_EQ(cts_server_path_count(th_server(), "/echo"), before);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_config_validation(void) {
    courier_config *cfg = NULL;
    CHECK_EQ(courier_config_new(NULL), COURIER_E_INVALID_ARGUMENT);
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_set_timeout_ms(cfg, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_timeout_ms(cfg, -5), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_max_connections_per_host(cfg, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_max_connections(cfg, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_max_response_bytes(cfg, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_body_encoding(cfg, (courier_body_encoding)7), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_param(cfg, "p", "\xFF"), COURIER_E_INVALID_ENCODING);
    CHECK_EQ(courier_config_set_store_dir(cfg, ""), COURIER_E_INVALID_ARGUMENT);
    courier_config_free(cfg);
    courier_config_free(NULL);
    courier_request_free(NULL);
    courier_response_free(NULL);
    courier_engine_close(NULL);
    CHECK_EQ(courier_request_new(NULL, "GET", "/"), COURIER_E_INVALID_ARGUMENT);
    CHECK_STR(courier_strerror(COURIER_E_TIMEOUT), "timed out");
    CHECK_STR(courier_strerror(-9999), "unknown error");
    CHECK_STR(courier_version(), COURIER_VERSION_STRING);
    CHECK_EQ(courier_version_num(), COURIER_VERSION_NUM);
}

TESTS_MAIN(T(test_url_joining), T(test_per_request_base_url_and_absolute_url), T(test_relative_path_with_url_in_query), T(test_invalid_urls), T(test_methods),
           T(test_query_params_encoding), T(test_bad_params_refused), T(test_form_and_json_body_params),
           T(test_engine_json_encoding), T(test_raw_body), T(test_default_headers_and_params),
           T(test_request_headers_copied_whole),
           T(test_header_injection_refused), T(test_header_value_bytes_at_every_offset),
           T(test_auth_helpers), T(test_customize), T(test_config_validation))
