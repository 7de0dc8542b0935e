/*
 * serialize_test.c — response decoders by MIME type (built-in JSON types, types registered as JSON,
 * custom decoder callbacks, lazily parsed bodies) and request body encoders (JSON, form).
 */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

static courier_json *parse(const char *text) {
    courier_json *doc = NULL;
    if (courier_json_parse(&doc, text, strlen(text), NULL, NULL) != COURIER_OK)
        th_fail(__FILE__, __LINE__, "parse failed: %s", text);
    return doc;
}

/* GET /headers with a Content-Type: the body is "{}". */
static int get_with_type(courier_engine *e, const char *ctype, courier_response **resp) {
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/headers");
    courier_request_add_param(r, "Content-Type", ctype);
    courier_error err;
    int rc = courier_send_sync(resp, e, r, &err);
    courier_request_free(r);
    return rc;
}

static void test_builtin_json_types(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    static const struct {
        const char *ctype;
        int json;
    } cases[] = {
        {"application/json", 1},
        {"application/json; charset=utf-8", 1},
        {"Application/JSON", 1},
        {"application/problem+json", 1},
        {"application/vnd.api+json;v=2", 1},
        {"text/html", 0},
        {"text/plain", 0},
        {"application/octet-stream", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        courier_response *resp = NULL;
        REQUIRE(get_with_type(e, cases[i].ctype, &resp) == COURIER_OK);
        const courier_json *doc = NULL;
        courier_error err;
        int rc = courier_response_parse_json(&doc, resp, &err);
        if ((rc == COURIER_OK) != cases[i].json) th_fail(__FILE__, __LINE__, "%s: %d", cases[i].ctype, rc);
        if (!cases[i].json) {
            CHECK_EQ(rc, COURIER_E_JSON); /* the same JSON body under a JSON type parses */
            CHECK_EQ(err.code, COURIER_E_JSON);
            CHECK(courier_response_json(resp) == NULL);
        } else {
            CHECK_EQ(courier_json_typeof(doc), COURIER_JSON_OBJECT);
        }
        courier_response_free(resp);
    }
    /* A request that asks for JSON from a type without a decoder fails. */
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/headers");
    courier_request_add_param(r, "Content-Type", "text/html");
    courier_request_set_key_path(r, "x");
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_JSON);
    CHECK(resp != NULL);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

static void html_as_json(courier_config *cfg) {
    CHECK_EQ(courier_config_add_json_type(cfg, "text/html"), COURIER_OK);
    CHECK_EQ(courier_config_add_json_type(cfg, "image/*"), COURIER_OK);
    CHECK_EQ(courier_config_add_json_type(cfg, "nonsense"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_json_type(cfg, "text/html; charset=x"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_json_type(cfg, ""), COURIER_E_INVALID_ARGUMENT);
}

static void test_registered_json_types(void) {
    courier_engine *e = th_engine(html_as_json);
    REQUIRE(e);
    const char *types[] = {"text/html", "TEXT/HTML;charset=utf-8", "image/x-anything"};
    for (size_t i = 0; i < 3; i++) {
        courier_response *resp = NULL;
        REQUIRE(get_with_type(e, types[i], &resp) == COURIER_OK);
        if (courier_json_typeof(courier_response_json(resp)) != COURIER_JSON_OBJECT)
            th_fail(__FILE__, __LINE__, "%s not decoded", types[i]);
        courier_response_free(resp);
    }
    courier_response *resp = NULL;
    REQUIRE(get_with_type(e, "text/plain", &resp) == COURIER_OK);
    CHECK(courier_response_json(resp) == NULL);
    courier_response_free(resp);
    courier_engine_close(e);
}

/* A decoder for text/plain that reads "k=v" lines into an object of strings. */
static int kv_decoder(const uint8_t *body, size_t len, const char *ctype, courier_json **out, courier_error *err,
                      void *user) {
    (*(int *)user)++;
    if (len && body[0] == '!') {
        snprintf(err->message, sizeof err->message, "bang");
        return COURIER_E_INVALID_RESULT;
    }
    courier_json *o = NULL;
    courier_json_new_object(&o);
    const char *p = (const char *)body, *end = p + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl ? nl : end;
        const char *eq = memchr(p, '=', (size_t)(line_end - p));
        if (eq) {
            courier_json *v = NULL;
            courier_json_new_string(&v, eq + 1, (size_t)(line_end - eq - 1));
            courier_json_object_set(o, p, (size_t)(eq - p), v);
        }
        p = nl ? nl + 1 : end;
    }
    *out = o;
    return COURIER_OK;
}

static int decoder_calls;
static int decoder_freed;
static void count_free(void *user) { decoder_freed++; }

static void custom_decoder(courier_config *cfg) {
    CHECK_EQ(courier_config_set_decoder(cfg, "text/plain", kv_decoder, &decoder_calls, count_free), COURIER_OK);
}

static void test_custom_decoder(void) {
    decoder_calls = decoder_freed = 0;
    courier_engine *e = th_engine(custom_decoder);
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/cache");
    courier_request_add_param(r, "body", "name=courier\nkind=engine");
    courier_request_set_key_path(r, "kind");
    courier_response *resp = NULL;
    courier_error err;
    REQUIRE(courier_send_sync(&resp, e, r, &err) == COURIER_OK);
    CHECK_STR(courier_json_string(courier_response_data(resp), NULL), "engine");
    CHECK_STR(courier_json_string(courier_json_get(courier_response_json(resp), "name"), NULL), "courier");
    CHECK_EQ(decoder_calls, 1); /* decoded once */
    courier_response_free(resp);
    courier_request_free(r);

    courier_request_new(&r, "GET", "/cache");
    courier_request_add_param(r, "body", "!broken");
    courier_request_set_key_path(r, "kind");
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_INVALID_RESULT);
    CHECK_STR(err.message, "bang");
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
    CHECK_EQ(decoder_freed, 1); /* once: the configuration and the engine have both let go */
}

static void test_lazy_parse_and_errors(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/json");
    courier_response *resp = NULL;
    courier_error err;
    REQUIRE(courier_send_sync(&resp, e, r, &err) == COURIER_OK);
    courier_engine_close(e);
    /* Parsed on first use, after the engine is gone. */
    const courier_json *doc = courier_response_json(resp);
    CHECK_STR(courier_json_string(courier_json_path(doc, "data.items.1.title"), NULL), "two");
    CHECK(courier_response_data(resp) == doc);
    courier_response_free(resp);
    courier_request_free(r);
    CHECK(courier_response_json(NULL) == NULL);
    const courier_json *out = NULL;
    CHECK_EQ(courier_response_parse_json(&out, NULL, &err), COURIER_E_INVALID_ARGUMENT);
}

/* A response the transport did not see: an empty JSON body, and a content type with no decoder, each fail
 * with COURIER_E_JSON and a message that says which, and the response is left as it was. */
static void test_empty_and_undecodable_bodies(void) {
    courier_response *resp = NULL;
    courier_error err;
    REQUIRE(courier_response_new(&resp, 200) == COURIER_OK);
    CHECK_EQ(courier_response_add_header(resp, "Content-Type", "application/json"), COURIER_OK);
    const courier_json *out = NULL;
    CHECK_EQ(courier_response_parse_json(&out, resp, &err), COURIER_E_JSON);
    CHECK(out == NULL);
    CHECK(strstr(err.message, "the body is empty") != NULL);
    courier_response_free(resp);

    REQUIRE(courier_response_new(&resp, 200) == COURIER_OK);
    CHECK_EQ(courier_response_add_header(resp, "Content-Type", "image/png"), COURIER_OK);
    CHECK_EQ(courier_response_set_body(resp, "{}", 2), COURIER_OK);
    CHECK_EQ(courier_response_parse_json(&out, resp, &err), COURIER_E_JSON);
    CHECK(strstr(err.message, "no decoder for content type 'image/png'") != NULL);
    size_t len = 0;
    const void *body = courier_response_body(resp, &len);
    CHECK(len == 2 && memcmp(body, "{}", 2) == 0);
    courier_response_free(resp);
}

static void limits_config(courier_config *cfg) {
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.max_depth = 2;
    CHECK_EQ(courier_config_set_json_options(cfg, &o), COURIER_OK);
}

static void test_engine_parse_limits(void) {
    courier_engine *e = th_engine(limits_config);
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/json"); /* depth 4 */
    courier_request_set_key_path(r, "data");
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_JSON);
    CHECK_EQ(err.code, COURIER_E_JSON);
    courier_response_free(resp);
    courier_engine_close(e);
    /* The depth was the fault: the same request on an engine with the default limits succeeds. */
    e = th_engine(NULL);
    REQUIRE(e);
    resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

/* ---- encoders ------------------------------------------------------------------------------------------ */

static const char *echoed_body(courier_response *resp) {
    return courier_json_string(courier_json_get(courier_response_json(resp), "body"), NULL);
}

static const char *echoed_header(courier_response *resp, const char *name) {
    const courier_json *hs = courier_json_get(courier_response_json(resp), "headers");
    for (size_t i = 0; i < courier_json_size(hs); i++) {
        const courier_json *h = courier_json_at(hs, i);
        if (strcasecmp(courier_json_string(courier_json_at(h, 0), NULL), name) == 0)
            return courier_json_string(courier_json_at(h, 1), NULL);
    }
    return NULL;
}

static void test_json_body(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "POST", "/echo");
    courier_json *body = parse("{\"name\":\"cafe\",\"n\":1,\"r\":0.5,\"list\":[true,null]}");
    CHECK_EQ(courier_request_set_json_body(r, body, 0), COURIER_OK);
    courier_json_free(body);
    courier_response *resp = NULL;
    courier_error err;
    REQUIRE(courier_send_sync(&resp, e, r, &err) == COURIER_OK);
    CHECK_STR(echoed_body(resp), "{\"name\":\"cafe\",\"n\":1,\"r\":0.5,\"list\":[true,null]}");
    CHECK_STR(echoed_header(resp, "Content-Type"), "application/json");
    courier_response_free(resp);
    CHECK_EQ(courier_request_set_json_body(r, NULL, 0), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_form_body(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "POST", "/echo");
    courier_json *body = parse("{\"q\":\"a b&c\",\"n\":2,\"ok\":true,\"none\":null,\"r\":1.5,"
                               "\"user\":{\"name\":\"x\"},\"ids\":[1,2]}");
    CHECK_EQ(courier_request_set_form_body(r, body), COURIER_OK);
    courier_json_free(body);
    courier_response *resp = NULL;
    courier_error err;
    REQUIRE(courier_send_sync(&resp, e, r, &err) == COURIER_OK);
    CHECK_STR(echoed_body(resp), "q=a%20b%26c&n=2&ok=true&none=&r=1.5&user%5Bname%5D=x&ids%5B%5D=1&ids%5B%5D=2");
    CHECK_STR(echoed_header(resp, "Content-Type"), "application/x-www-form-urlencoded");
    courier_response_free(resp);
    courier_json *arr = parse("[1]");
    CHECK_EQ(courier_request_set_form_body(r, arr), COURIER_E_INVALID_ARGUMENT);
    courier_json_free(arr);
    courier_request_free(r);
    courier_engine_close(e);
}

TESTS_MAIN(T(test_builtin_json_types), T(test_empty_and_undecodable_bodies), T(test_registered_json_types), T(test_custom_decoder),
           T(test_lazy_parse_and_errors), T(test_engine_parse_limits), T(test_json_body), T(test_form_body))
