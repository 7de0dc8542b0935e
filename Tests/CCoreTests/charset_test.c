/*
 * charset_test.c — parameters in other character sets than UTF-8 (GBK, Shift_JIS, ...) as the
 * loopback server receives them, byte for byte, and a response's text decoded by its charset.
 */
#include "harness.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What /echo received: its "query" or "body" member, and a header (NULL when absent). */
static json_t *echo_doc(const courier_response *resp) {
    size_t len = 0;
    const uint8_t *body = courier_response_body(resp, &len);
    return json_loadb((const char *)body, len, 0, NULL);
}

static const char *echo_header(json_t *doc, const char *name) {
    size_t i;
    json_t *pair;
    json_array_foreach(json_object_get(doc, "headers"), i, pair) {
        if (strcasecmp(json_string_value(json_array_get(pair, 0)), name) == 0)
            return json_string_value(json_array_get(pair, 1));
    }
    return NULL;
}

static void gbk_engine(courier_config *c) { CHECK_EQ(courier_config_set_param_charset(c, "GBK"), COURIER_OK); }

/* 中文 in GBK is D6 D0 CE C4; in Shift_JIS 日本 is 93 FA 96 7B; ASCII stays as it is. */
static void test_query_parameters_in_gbk(void) {
    courier_engine *e = th_engine(gbk_engine);
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/echo");
    courier_request_add_param(r, "q", "中文");
    courier_request_add_param(r, "名", "a b");
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    json_t *doc = echo_doc(resp);
    CHECK_STR(json_string_value(json_object_get(doc, "query")), "q=%D6%D0%CE%C4&%C3%FB=a%20b");
    json_decref(doc);
    courier_response_free(resp);

    /* The request's charset replaces the engine's; "UTF-8" there too. */
    courier_request_free(r);
    courier_request_new(&r, "GET", "/echo");
    CHECK_EQ(courier_request_set_param_charset(r, "Shift_JIS"), COURIER_OK);
    courier_request_add_param(r, "q", "日本");
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    doc = echo_doc(resp);
    CHECK_STR(json_string_value(json_object_get(doc, "query")), "q=%93%FA%96%7B");
    json_decref(doc);
    courier_response_free(resp);
    courier_request_set_param_charset(r, "utf-8");
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    doc = echo_doc(resp);
    CHECK_STR(json_string_value(json_object_get(doc, "query")), "q=%E6%97%A5%E6%9C%AC");
    json_decref(doc);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_form_body_in_gbk_says_its_charset(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "POST", "/echo");
    CHECK_EQ(courier_request_set_param_charset(r, "GBK"), COURIER_OK);
    courier_request_add_param(r, "city", "北京");
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    json_t *doc = echo_doc(resp);
    CHECK_STR(json_string_value(json_object_get(doc, "body")), "city=%B1%B1%BE%A9");
    CHECK_STR(echo_header(doc, "Content-Type"), "application/x-www-form-urlencoded; charset=GBK");
    json_decref(doc);
    courier_response_free(resp);
    /* The engine's default (UTF-8) keeps the plain form type. */
    courier_request_set_param_charset(r, NULL);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    doc = echo_doc(resp);
    CHECK_STR(json_string_value(json_object_get(doc, "body")), "city=%E5%8C%97%E4%BA%AC");
    CHECK_STR(echo_header(doc, "Content-Type"), "application/x-www-form-urlencoded");
    json_decref(doc);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_bad_charsets_and_unencodable_parameters(void) {
    courier_config *c = NULL;
    courier_config_new(&c);
    CHECK_EQ(courier_config_set_param_charset(c, "NO-SUCH-CHARSET"), COURIER_E_UNKNOWN_CHARSET);
    CHECK_EQ(courier_config_set_param_charset(c, "GBK//TRANSLIT"), COURIER_E_UNKNOWN_CHARSET);
    CHECK_EQ(courier_config_set_param_charset(c, ""), COURIER_E_UNKNOWN_CHARSET);
    CHECK_EQ(courier_config_set_param_charset(NULL, "GBK"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_param_charset(c, "ISO-8859-1"), COURIER_OK);
    CHECK_EQ(courier_config_set_param_charset(c, NULL), COURIER_OK);
    courier_config_free(c);

    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/echo");
    CHECK_EQ(courier_request_set_param_charset(r, "x-unknown"), COURIER_E_UNKNOWN_CHARSET);
    CHECK_EQ(courier_request_set_param_charset(r, "ISO-8859-1"), COURIER_OK);
    courier_request_add_param(r, "ok", "é");     /* E9 in Latin-1 */
    courier_request_add_param(r, "name", "中"); /* not in Latin-1 */
    courier_error err;
    uint64_t id = 0;
    CHECK_EQ(courier_send(&id, e, r, NULL, NULL, &err), COURIER_E_CHARSET);
    CHECK_EQ(err.code, COURIER_E_CHARSET);
    CHECK_CONTAINS(err.message, "'name'");
    CHECK_EQ(id, 0);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_CHARSET);
    CHECK(resp == NULL);
    courier_request_free(r);
    courier_request_new(&r, "GET", "/echo");
    courier_request_set_param_charset(r, "ISO-8859-1");
    courier_request_add_param(r, "ok", "é");
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    json_t *doc = echo_doc(resp);
    CHECK_STR(json_string_value(json_object_get(doc, "query")), "ok=%E9");
    json_decref(doc);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

/* Fetches /text with a content type and body bytes (hex), and decodes it. */
static int text_of(courier_engine *e, const char *type, const char *hex, const char *fallback, char **text,
                   size_t *len) {
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/text");
    if (type) courier_request_add_param(r, "type", type);
    courier_request_add_param(r, "hex", hex);
    courier_response *resp = NULL;
    int rc = courier_send_sync(&resp, e, r, NULL);
    courier_request_free(r);
    if (rc != COURIER_OK) return rc;
    courier_error err;
    memset(&err, 0x5A, sizeof err); /* the library writes every field, on success too */
    rc = courier_response_text(text, len, resp, fallback, &err);
    CHECK_EQ(err.code, rc);
    courier_response_free(resp);
    return rc;
}

static void test_response_text_by_its_charset(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char *text = NULL;
    size_t len = 0;
    CHECK_EQ(text_of(e, "text/plain; charset=GBK", "d6d0cec4", NULL, &text, &len), COURIER_OK);
    CHECK_STR(text, "中文");
    CHECK_EQ(len, 6);
    courier_free(text);
    CHECK_EQ(text_of(e, "text/html;charset=\"shift_jis\"", "93fa967b", NULL, &text, &len), COURIER_OK);
    CHECK_STR(text, "日本");
    courier_free(text);
    /* No charset named: the caller's default, else UTF-8 (a BOM dropped). */
    CHECK_EQ(text_of(e, "text/plain", "d6d0cec4", "GB18030", &text, &len), COURIER_OK);
    CHECK_STR(text, "中文");
    courier_free(text);
    CHECK_EQ(text_of(e, NULL, "efbbbfe4b8ad", NULL, &text, &len), COURIER_OK);
    CHECK_STR(text, "中");
    CHECK_EQ(len, 3);
    courier_free(text);
    CHECK_EQ(text_of(e, "text/plain; charset=utf-8", "", NULL, &text, &len), COURIER_OK);
    CHECK_STR(text, "");
    courier_free(text);

    /* Invalid bytes, a cut-short sequence, an unknown charset: codes, no text. */
    CHECK_EQ(text_of(e, "text/plain; charset=GBK", "d6ff", NULL, &text, &len), COURIER_E_CHARSET);
    CHECK(text == NULL);
    CHECK_EQ(text_of(e, "text/plain; charset=GBK", "d6d0ce", NULL, &text, &len), COURIER_E_CHARSET);
    CHECK_EQ(text_of(e, "text/plain", "c328", NULL, &text, &len), COURIER_E_CHARSET);
    CHECK_EQ(text_of(e, "text/plain; charset=x-klingon", "41", NULL, &text, &len), COURIER_E_UNKNOWN_CHARSET);
    CHECK_EQ(text_of(e, "text/plain", "41", "x-klingon", &text, &len), COURIER_E_UNKNOWN_CHARSET);
    CHECK(text == NULL);
    CHECK_EQ(courier_response_text(NULL, NULL, NULL, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
}

static void test_strerror_names_the_codes(void) {
    CHECK(strcmp(courier_strerror(COURIER_E_UNKNOWN_CHARSET), "unknown error") != 0);
    CHECK(strcmp(courier_strerror(COURIER_E_CHARSET), "unknown error") != 0);
}

TESTS_MAIN(T(test_query_parameters_in_gbk), T(test_form_body_in_gbk_says_its_charset),
           T(test_bad_charsets_and_unencodable_parameters), T(test_response_text_by_its_charset),
           T(test_strerror_names_the_codes))
