/*
 * mapping_test.c — mappings applied to documents (attributes, relationships, coercions, defaults,
 * errors that name the path), envelopes, and requests that name key paths, mappings and results
 * against the loopback server.
 */
#include "harness.h"
#include "tape_same.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static courier_json *parse(const char *text) {
    courier_json *doc = NULL;
    courier_error err;
    if (courier_json_parse(&doc, text, strlen(text), NULL, &err) != COURIER_OK)
        th_fail(__FILE__, __LINE__, "parse: %s", err.message);
    return doc;
}

/* Compares a value with expected JSON text. */
static int same(const courier_json *v, const char *text) {
    courier_json *want = parse(text);
    int eq = courier_json_equal(v, want);
    if (!eq) {
        char *got = NULL;
        courier_json_dump(&got, NULL, v, COURIER_JSON_DUMP_SORT_KEYS, NULL);
        fprintf(stderr, "    got  %s\n    want %s\n", got ? got : "(null)", text);
        courier_free(got);
    }
    courier_json_free(want);
    return eq;
}

static int apply(const courier_mapping *m, const char *input, courier_json **out, courier_mapping_error *where,
                 courier_error *err) {
    courier_json *in = parse(input);
    int rc = courier_mapping_apply(out, where, m, in, err);
    courier_json_free(in);
    return rc;
}

/* ---- attributes ------------------------------------------------------------------------------------- */

static void test_attributes_rename_select_and_nest(void) {
    courier_mapping *m = NULL;
    REQUIRE(courier_mapping_new(&m) == COURIER_OK);
    CHECK_EQ(courier_mapping_add_attribute(m, "id", NULL, COURIER_JSON_INTEGER, COURIER_MAP_REQUIRED), COURIER_OK);
    CHECK_EQ(courier_mapping_add_attribute(m, "user_name", "userName", COURIER_JSON_STRING, 0), COURIER_OK);
    CHECK_EQ(courier_mapping_add_attribute(m, "profile.age", NULL, COURIER_JSON_INTEGER, 0), COURIER_OK);
    CHECK_EQ(courier_mapping_add_attribute(m, "price", NULL, COURIER_JSON_REAL, 0), COURIER_OK);
    CHECK_EQ(courier_mapping_add_attribute(m, "extra", NULL, COURIER_JSON_ANY, 0), COURIER_OK);
    CHECK_EQ(courier_mapping_attribute_count(m), 5);
    courier_json *out = NULL;
    courier_error err;
    REQUIRE(apply(m, "{\"id\":7,\"user_name\":\"ann\",\"profile\":{\"age\":31},\"price\":3,\"extra\":[1,{}],"
                     "\"ignored\":true}",
                  &out, NULL, &err) == COURIER_OK);
    CHECK(same(out, "{\"id\":7,\"userName\":\"ann\",\"age\":31,\"price\":3.0,\"extra\":[1,{}]}"));
    CHECK_EQ(courier_json_typeof(courier_json_get(out, "price")), COURIER_JSON_REAL);
    /* Members come out in the mapping's order. */
    const courier_json_iter *it = courier_json_iter_first(out);
    CHECK_STR(courier_json_iter_key(it, NULL), "id");
    it = courier_json_iter_next(out, it);
    CHECK_STR(courier_json_iter_key(it, NULL), "userName");
    courier_json_free(out);

    /* Absent optional attributes are left out. */
    REQUIRE(apply(m, "{\"id\":1}", &out, NULL, &err) == COURIER_OK);
    CHECK(same(out, "{\"id\":1}"));
    courier_json_free(out);
    courier_mapping_free(m);
}

static void test_type_mismatch_names_path_and_types(void) {
    courier_mapping *m = NULL;
    courier_mapping_new(&m);
    courier_mapping_add_attribute(m, "id", NULL, COURIER_JSON_INTEGER, COURIER_MAP_REQUIRED);
    courier_mapping_add_attribute(m, "profile.age", NULL, COURIER_JSON_INTEGER, 0);
    courier_json *out = (courier_json *)0x1;
    courier_mapping_error where;
    courier_error err;
    CHECK_EQ(apply(m, "{\"id\":\"seven\"}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK(out == NULL);
    CHECK_EQ(err.code, COURIER_E_MAPPING);
    CHECK_STR(where.path, "id");
    CHECK_EQ(where.expected, COURIER_JSON_INTEGER);
    CHECK_EQ(where.found, COURIER_JSON_STRING);
    CHECK_CONTAINS(err.message, "'id'"); /* the message names the path, as where does */

    CHECK_EQ(apply(m, "{\"id\":1,\"profile\":{\"age\":1.5}}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_STR(where.path, "profile.age");
    CHECK_EQ(where.found, COURIER_JSON_REAL);

    /* Missing required: found nothing. */
    CHECK_EQ(apply(m, "{\"x\":1}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_STR(where.path, "id");
    CHECK_EQ(where.found, COURIER_JSON_NONE);
    /* Required and null. */
    CHECK_EQ(apply(m, "{\"id\":null}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_EQ(where.found, COURIER_JSON_NULL);
    /* Not an object at all. */
    CHECK_EQ(apply(m, "\"text\"", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_STR(where.path, "");
    CHECK_EQ(where.expected, COURIER_JSON_OBJECT);
    CHECK_EQ(where.found, COURIER_JSON_STRING);
    /* A real without fraction is an integer. */
    REQUIRE(apply(m, "{\"id\":3.0}", &out, &where, &err) == COURIER_OK);
    CHECK(same(out, "{\"id\":3}"));
    CHECK_EQ(courier_json_typeof(courier_json_get(out, "id")), COURIER_JSON_INTEGER);
    courier_json_free(out);
    courier_mapping_free(m);
}

static void test_coercions(void) {
    courier_mapping *m = NULL;
    courier_mapping_new(&m);
    courier_mapping_add_attribute(m, "n", NULL, COURIER_JSON_INTEGER, COURIER_MAP_NUMBER_FROM_STRING);
    courier_mapping_add_attribute(m, "r", NULL, COURIER_JSON_REAL, COURIER_MAP_NUMBER_FROM_STRING);
    courier_mapping_add_attribute(m, "num", NULL, COURIER_JSON_NUMBER, COURIER_MAP_NUMBER_FROM_STRING);
    courier_mapping_add_attribute(m, "s", NULL, COURIER_JSON_STRING, COURIER_MAP_STRING_FROM_NUMBER);
    courier_mapping_add_attribute(m, "s2", NULL, COURIER_JSON_STRING, COURIER_MAP_STRING_FROM_NUMBER);
    courier_mapping_add_attribute(m, "b", NULL, COURIER_JSON_BOOL, COURIER_MAP_BOOL_FROM_NUMBER);
    courier_mapping_add_attribute(m, "gone", NULL, COURIER_JSON_STRING, COURIER_MAP_NULL_AS_ABSENT);
    courier_mapping_add_attribute(m, "kept", NULL, COURIER_JSON_STRING, 0);
    courier_json *out = NULL;
    courier_mapping_error where;
    courier_error err;
    REQUIRE(apply(m, "{\"n\":\"-42\",\"r\":\"2.5\",\"num\":\"7\",\"s\":12,\"s2\":0.5,\"b\":1,\"gone\":null,\"kept\":null}",
                  &out, &where, &err) == COURIER_OK);
    CHECK(same(out, "{\"n\":-42,\"r\":2.5,\"num\":7,\"s\":\"12\",\"s2\":\"0.5\",\"b\":true,\"kept\":null}"));
    courier_json_free(out);

    CHECK_EQ(apply(m, "{\"n\":\"12abc\"}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_STR(where.path, "n");
    CHECK_EQ(apply(m, "{\"n\":\" 12\"}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_EQ(apply(m, "{\"n\":\"1.5\"}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_EQ(apply(m, "{\"b\":2}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_EQ(where.expected, COURIER_JSON_BOOL);
    CHECK_EQ(apply(m, "{\"r\":\"nan\"}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_EQ(apply(m, "{\"r\":\"1e999\"}", &out, &where, &err), COURIER_E_MAPPING);

    /* Without the flag there is no coercion; mapping-wide coercions apply to every attribute. */
    courier_mapping *strict = NULL;
    courier_mapping_new(&strict);
    courier_mapping_add_attribute(strict, "n", NULL, COURIER_JSON_INTEGER, 0);
    CHECK_EQ(apply(strict, "{\"n\":\"1\"}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_EQ(courier_mapping_set_coercions(strict, COURIER_MAP_NUMBER_FROM_STRING), COURIER_OK);
    REQUIRE(apply(strict, "{\"n\":\"1\"}", &out, &where, &err) == COURIER_OK);
    CHECK(same(out, "{\"n\":1}"));
    courier_json_free(out);
    CHECK_EQ(courier_mapping_set_coercions(strict, COURIER_MAP_REQUIRED), COURIER_E_INVALID_ARGUMENT);
    courier_mapping_free(strict);
    courier_mapping_free(m);
}

static void test_defaults(void) {
    courier_mapping *m = NULL;
    courier_mapping_new(&m);
    courier_mapping_add_attribute(m, "role", NULL, COURIER_JSON_STRING, COURIER_MAP_REQUIRED | COURIER_MAP_NULL_AS_ABSENT);
    courier_json *def = parse("\"guest\"");
    CHECK_EQ(courier_mapping_set_default(m, "role", def), COURIER_OK);
    CHECK_EQ(courier_mapping_set_default(m, "nope", def), COURIER_E_NOT_FOUND);
    courier_json_free(def);
    courier_json *out = NULL;
    courier_error err;
    REQUIRE(apply(m, "{}", &out, NULL, &err) == COURIER_OK);
    CHECK(same(out, "{\"role\":\"guest\"}"));
    courier_json_free(out);
    REQUIRE(apply(m, "{\"role\":null}", &out, NULL, &err) == COURIER_OK);
    CHECK(same(out, "{\"role\":\"guest\"}"));
    courier_json_free(out);
    REQUIRE(apply(m, "{\"role\":\"admin\"}", &out, NULL, &err) == COURIER_OK);
    CHECK(same(out, "{\"role\":\"admin\"}"));
    courier_json_free(out);
    courier_mapping_free(m);
}

/* ---- relationships ----------------------------------------------------------------------------------- */

static void test_relationships(void) {
    courier_mapping *item = NULL, *owner = NULL, *root = NULL;
    courier_mapping_new(&item);
    courier_mapping_add_attribute(item, "id", NULL, COURIER_JSON_INTEGER, COURIER_MAP_REQUIRED);
    courier_mapping_add_attribute(item, "title", "name", COURIER_JSON_STRING, 0);
    courier_mapping_new(&owner);
    courier_mapping_add_attribute(owner, "login", NULL, COURIER_JSON_STRING, 0);
    courier_mapping_new(&root);
    courier_mapping_add_attribute(root, "name", NULL, COURIER_JSON_STRING, 0);
    CHECK_EQ(courier_mapping_add_relationship(root, "items", NULL, item, 1, COURIER_MAP_REQUIRED), COURIER_OK);
    CHECK_EQ(courier_mapping_add_relationship(root, "meta.owner", "owner", owner, 0, 0), COURIER_OK);
    /* The children are retained: the caller's references can go now. */
    courier_mapping_free(item);
    courier_mapping_free(owner);

    courier_json *out = NULL;
    courier_mapping_error where;
    courier_error err;
    REQUIRE(apply(root, "{\"name\":\"c\",\"items\":[{\"id\":1,\"title\":\"one\",\"x\":0},{\"id\":2}],"
                        "\"meta\":{\"owner\":{\"login\":\"ann\",\"pw\":\"secret\"}}}",
                  &out, &where, &err) == COURIER_OK);
    CHECK(same(out, "{\"name\":\"c\",\"items\":[{\"id\":1,\"name\":\"one\"},{\"id\":2}],\"owner\":{\"login\":\"ann\"}}"));
    courier_json_free(out);

    CHECK_EQ(apply(root, "{\"items\":[{\"id\":1},{\"id\":\"2\"}]}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_STR(where.path, "items.1.id");
    CHECK_EQ(where.expected, COURIER_JSON_INTEGER);
    CHECK_EQ(where.found, COURIER_JSON_STRING);
    CHECK_CONTAINS(err.message, "items.1.id");
    CHECK_EQ(apply(root, "{\"items\":[{\"id\":1},3]}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_STR(where.path, "items.1");
    CHECK_EQ(where.expected, COURIER_JSON_OBJECT);
    CHECK_EQ(apply(root, "{\"items\":{\"id\":1}}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_STR(where.path, "items");
    CHECK_EQ(where.expected, COURIER_JSON_ARRAY);
    CHECK_EQ(where.found, COURIER_JSON_OBJECT);
    CHECK_EQ(apply(root, "{\"name\":\"x\"}", &out, &where, &err), COURIER_E_MAPPING); /* items required */
    CHECK_EQ(apply(root, "{\"items\":[],\"meta\":{\"owner\":[]}}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_STR(where.path, "meta.owner");
    courier_mapping_free(root);
}

static void test_tree_mapping_and_cycles(void) {
    courier_mapping *node = NULL;
    courier_mapping_new(&node);
    courier_mapping_add_attribute(node, "v", NULL, COURIER_JSON_INTEGER, COURIER_MAP_REQUIRED);
    CHECK_EQ(courier_mapping_add_relationship(node, "kids", NULL, node, 1, 0), COURIER_OK);
    courier_json *out = NULL;
    courier_mapping_error where;
    courier_error err;
    REQUIRE(apply(node, "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3,\"junk\":1}]},{\"v\":4}]}", &out, &where,
                  &err) == COURIER_OK);
    CHECK(same(out, "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3}]},{\"v\":4}]}"));
    courier_json_free(out);
    CHECK_EQ(apply(node, "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"w\":3}]}]}", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_STR(where.path, "kids.0.kids.0.v");

    /* a -> b -> a would never be freed: refused. */
    courier_mapping *a = NULL, *b = NULL;
    courier_mapping_new(&a);
    courier_mapping_new(&b);
    CHECK_EQ(courier_mapping_add_relationship(b, "a", NULL, a, 0, 0), COURIER_OK);
    /* a is sealed now that b holds it. */
    CHECK_EQ(courier_mapping_add_relationship(a, "b", NULL, b, 0, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_mapping_add_attribute(a, "x", NULL, COURIER_JSON_ANY, 0), COURIER_E_INVALID_ARGUMENT);
    courier_mapping_free(a);
    courier_mapping_free(b);
    courier_mapping_free(node);
}

static void test_arrays_and_identity(void) {
    courier_mapping *m = NULL;
    courier_mapping_new(&m);
    courier_mapping_add_attribute(m, "id", NULL, COURIER_JSON_INTEGER, 0);
    courier_mapping_add_attribute(m, "name", NULL, COURIER_JSON_STRING, 0);
    courier_json *in = parse("[{\"id\":1,\"name\":\"a\"},{\"name\":\"b\",\"id\":2}]");
    courier_json *out = NULL;
    courier_error err;
    REQUIRE(courier_mapping_apply(&out, NULL, m, in, &err) == COURIER_OK);
    CHECK(courier_json_equal(in, out));
    /* The output may share the input's values, and outlives it. */
    courier_json_free(in);
    CHECK_STR(courier_json_string(courier_json_path(out, "1.name"), NULL), "b");
    courier_json_free(out);
    courier_mapping_error where;
    CHECK_EQ(apply(m, "[{\"id\":1},{\"id\":true}]", &out, &where, &err), COURIER_E_MAPPING);
    CHECK_STR(where.path, "1.id");
    CHECK_EQ(courier_mapping_apply(&out, NULL, NULL, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    courier_mapping_free(m);
}

static void test_bad_descriptions(void) {
    courier_mapping *m = NULL;
    courier_mapping_new(&m);
    CHECK_EQ(courier_mapping_add_attribute(m, "", NULL, COURIER_JSON_ANY, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_mapping_add_attribute(m, "a..b", NULL, COURIER_JSON_ANY, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_mapping_add_attribute(m, ".a", NULL, COURIER_JSON_ANY, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_mapping_add_attribute(m, "a", NULL, COURIER_JSON_NULL, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_mapping_add_attribute(m, "a", NULL, 42, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_mapping_add_attribute(m, "a", NULL, COURIER_JSON_ANY, 0x100), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_mapping_add_attribute(m, "a", NULL, COURIER_JSON_ANY, 0), COURIER_OK);
    CHECK_EQ(courier_mapping_add_attribute(m, "x.a", NULL, COURIER_JSON_ANY, 0), COURIER_E_INVALID_ARGUMENT); /* dup dest */
    CHECK_EQ(courier_mapping_add_relationship(m, "r", NULL, NULL, 0, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_mapping_new(NULL), COURIER_E_INVALID_ARGUMENT);
    courier_mapping_free(m);
    courier_mapping_free(NULL);
}

/* ---- requests ------------------------------------------------------------------------------------------- */

static courier_mapping *item_mapping(void) {
    courier_mapping *m = NULL;
    courier_mapping_new(&m);
    courier_mapping_add_attribute(m, "id", "itemId", COURIER_JSON_INTEGER, COURIER_MAP_REQUIRED);
    courier_mapping_add_attribute(m, "title", NULL, COURIER_JSON_STRING, COURIER_MAP_REQUIRED);
    return m;
}

static void test_request_key_path_and_mapping(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/json");
    CHECK_EQ(courier_request_set_key_path(r, "data.items"), COURIER_OK);
    courier_mapping *m = item_mapping();
    CHECK_EQ(courier_request_set_mapping(r, m), COURIER_OK);
    courier_mapping_free(m);
    courier_response *resp = NULL;
    courier_error err;
    REQUIRE(courier_send_sync(&resp, e, r, &err) == COURIER_OK);
    CHECK(same(courier_response_data(resp), "[{\"itemId\":1,\"title\":\"one\"},{\"itemId\":2,\"title\":\"two\"}]"));
    /* The whole document is there too, parsed once: the same handle every time. */
    const courier_json *doc = courier_response_json(resp);
    CHECK(doc != NULL);
    CHECK(doc == courier_response_json(resp));
    CHECK_EQ(courier_json_integer(courier_json_path(doc, "code")), 200);
    int64_t code = 0;
    CHECK_EQ(courier_response_envelope(&code, NULL, resp), COURIER_E_NOT_FOUND);
    courier_mapping_error where;
    CHECK_EQ(courier_response_mapping_error(&where, resp), COURIER_E_NOT_FOUND);
    courier_request_free(r);
    /* Values stay valid after the request and the engine are gone, as long as the response. */
    courier_engine_close(e);
    CHECK_STR(courier_json_string(courier_json_path(courier_response_data(resp), "1.title"), NULL), "two");
    courier_response_free(resp);
}

static void test_request_mapping_failure(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/json");
    courier_request_set_key_path(r, "data");
    courier_mapping *m = NULL;
    courier_mapping_new(&m);
    courier_mapping_add_attribute(m, "name", NULL, COURIER_JSON_INTEGER, 0);
    courier_request_set_mapping(r, m);
    /* Sealed once attached. */
    CHECK_EQ(courier_mapping_add_attribute(m, "id", NULL, COURIER_JSON_ANY, 0), COURIER_E_INVALID_ARGUMENT);
    courier_mapping_free(m);
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_MAPPING);
    CHECK_EQ(err.code, COURIER_E_MAPPING);
    CHECK_EQ(err.http_status, 200);
    CHECK_CONTAINS(err.message, "data.name");
    REQUIRE(resp != NULL);
    courier_mapping_error where;
    CHECK_EQ(courier_response_mapping_error(&where, resp), COURIER_OK);
    CHECK_STR(where.path, "data.name");
    CHECK_EQ(where.expected, COURIER_JSON_INTEGER);
    CHECK_EQ(where.found, COURIER_JSON_STRING);
    courier_response_free(resp);

    /* A key path that is not there. */
    courier_request_set_mapping(r, NULL);
    courier_request_set_key_path(r, "data.nothing");
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_MAPPING);
    CHECK_EQ(courier_response_mapping_error(&where, resp), COURIER_OK);
    CHECK_STR(where.path, "data.nothing");
    CHECK_EQ(where.found, COURIER_JSON_NONE);
    courier_response_free(resp);
    CHECK_EQ(courier_request_set_key_path(r, "a..b"), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_request_named_results(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/json");
    courier_mapping *m = item_mapping();
    CHECK_EQ(courier_request_add_result(r, "items", "data.items", m, 0), COURIER_OK);
    CHECK_EQ(courier_request_add_result(r, "tags", "data.tags", NULL, 0), COURIER_OK);
    CHECK_EQ(courier_request_add_result(r, "first", "data.items.0", m, 0), COURIER_OK);
    CHECK_EQ(courier_request_add_result(r, "maybe", "data.absent", m, COURIER_RESULT_OPTIONAL), COURIER_OK);
    CHECK_EQ(courier_request_add_result(r, "tags", "data", NULL, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_add_result(r, "", "data", NULL, 0), COURIER_E_INVALID_ARGUMENT);
    courier_mapping_free(m);
    courier_response *resp = NULL;
    courier_error err;
    REQUIRE(courier_send_sync(&resp, e, r, &err) == COURIER_OK);
    CHECK(same(courier_response_result(resp, "items"), "[{\"itemId\":1,\"title\":\"one\"},{\"itemId\":2,\"title\":\"two\"}]"));
    CHECK(same(courier_response_result(resp, "tags"), "[\"a\",\"b\"]"));
    CHECK(same(courier_response_result(resp, "first"), "{\"itemId\":1,\"title\":\"one\"}"));
    CHECK(courier_response_result(resp, "maybe") == NULL);
    CHECK(courier_response_result(resp, "unknown") == NULL);
    /* No key path for the default result: the whole document. */
    CHECK(courier_response_data(resp) == courier_response_json(resp));
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

static courier_envelope *standard_envelope(void) {
    courier_envelope *env = NULL;
    courier_envelope_new(&env);
    courier_envelope_set_code_path(env, "code", 0);
    courier_envelope_set_message_path(env, "message");
    courier_envelope_set_data_path(env, "data");
    courier_envelope_add_success_code(env, 200);
    courier_envelope_add_success_code(env, 0);
    return env;
}

static void envelope_config(courier_config *cfg) {
    courier_envelope *env = standard_envelope();
    courier_config_set_envelope(cfg, env);
    courier_envelope_free(env);
    courier_config_add_json_type(cfg, "text/plain");
}

static int send_body(courier_engine *e, const char *body, courier_response **resp, courier_error *err) {
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/cache");
    courier_request_add_param(r, "body", body);
    int rc = courier_send_sync(resp, e, r, err);
    courier_request_free(r);
    return rc;
}

static void test_envelope(void) {
    courier_engine *e = th_engine(envelope_config);
    REQUIRE(e);
    courier_response *resp = NULL;
    courier_error err;
    /* Success: the data is the default result. */
    REQUIRE(send_body(e, "{\"code\":0,\"message\":\"fine\",\"data\":{\"x\":1}}", &resp, &err) == COURIER_OK);
    CHECK(same(courier_response_data(resp), "{\"x\":1}"));
    int64_t code = -1;
    const char *msg = NULL;
    CHECK_EQ(courier_response_envelope(&code, &msg, resp), COURIER_OK);
    CHECK_EQ(code, 0);
    CHECK_STR(msg, "fine");
    courier_response_free(resp);

    /* A failure code fails the request with its code and message, response attached. */
    CHECK_EQ(send_body(e, "{\"code\":\"4031\",\"message\":\"token expired\"}", &resp, &err), COURIER_E_API);
    CHECK_EQ(err.code, COURIER_E_API);
    CHECK_CONTAINS(err.message, "token expired");
    CHECK_EQ(err.http_status, 200);
    REQUIRE(resp != NULL);
    CHECK_EQ(courier_response_envelope(&code, &msg, resp), COURIER_OK);
    CHECK_EQ(code, 4031);
    CHECK_STR(msg, "token expired");
    courier_response_free(resp);

    /* No code: passes (not required); no data: no default result. */
    REQUIRE(send_body(e, "{\"other\":true}", &resp, &err) == COURIER_OK);
    CHECK(courier_response_data(resp) == NULL);
    courier_response_free(resp);

    /* Not JSON under a JSON content type: COURIER_E_JSON. */
    CHECK_EQ(send_body(e, "{oops", &resp, &err), COURIER_E_JSON);
    CHECK(resp != NULL);
    courier_response_free(resp);

    /* The code must be a number. */
    CHECK_EQ(send_body(e, "{\"code\":[1]}", &resp, &err), COURIER_E_MAPPING);
    courier_mapping_error where;
    CHECK_EQ(courier_response_mapping_error(&where, resp), COURIER_OK);
    CHECK_STR(where.path, "code");
    CHECK_EQ(where.found, COURIER_JSON_ARRAY);
    courier_response_free(resp);

    /* A request may opt out, or name its own key path inside the envelope. */
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/cache");
    courier_request_add_param(r, "body", "{\"code\":500,\"message\":\"no\"}");
    courier_request_set_envelope(r, NULL);
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
    courier_response_free(resp);
    courier_request_free(r);

    courier_request_new(&r, "GET", "/json");
    courier_request_set_key_path(r, "data.tags");
    REQUIRE(courier_send_sync(&resp, e, r, &err) == COURIER_OK);
    CHECK(same(courier_response_data(resp), "[\"a\",\"b\"]"));
    CHECK_EQ(courier_response_envelope(&code, NULL, resp), COURIER_OK);
    CHECK_EQ(code, 200);
    courier_response_free(resp);
    courier_request_free(r);

    /* HTTP errors stay HTTP errors; their JSON is still readable. */
    courier_request_new(&r, "GET", "/status/503");
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_HTTP_STATUS);
    CHECK_EQ(courier_json_integer(courier_json_get(courier_response_json(resp), "status")), 503);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

static int reject_odd(const courier_json *doc, int has_code, int64_t code, const char *message, void *user) {
    (*(int *)user)++;
    return !courier_json_bool(courier_json_get(doc, "odd"));
}

static void check_config(courier_config *cfg) {
    static int calls;
    courier_envelope *env = NULL;
    courier_envelope_new(&env);
    courier_envelope_set_code_path(env, "code", 1);
    courier_mapping *shape = NULL;
    courier_mapping_new(&shape);
    courier_mapping_add_attribute(shape, "odd", NULL, COURIER_JSON_BOOL, 0);
    courier_envelope_set_mapping(env, shape);
    courier_mapping_free(shape);
    courier_envelope_set_check(env, reject_odd, &calls, NULL);
    courier_config_set_envelope(cfg, env);
    CHECK_EQ(courier_envelope_set_code_path(env, "x", 0), COURIER_E_INVALID_ARGUMENT); /* sealed */
    courier_envelope_free(env);
    courier_config_add_json_type(cfg, "text/plain");
}

static void test_envelope_check_and_shape(void) {
    courier_engine *e = th_engine(check_config);
    REQUIRE(e);
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(send_body(e, "{\"code\":1,\"odd\":false}", &resp, &err), COURIER_OK);
    courier_response_free(resp);
    CHECK_EQ(send_body(e, "{\"code\":1,\"odd\":true}", &resp, &err), COURIER_E_API);
    courier_response_free(resp);
    CHECK_EQ(send_body(e, "{\"code\":1,\"odd\":\"yes\"}", &resp, &err), COURIER_E_MAPPING); /* the shape */
    courier_response_free(resp);
    CHECK_EQ(send_body(e, "{\"odd\":false}", &resp, &err), COURIER_E_MAPPING); /* code required */
    courier_mapping_error where;
    CHECK_EQ(courier_response_mapping_error(&where, resp), COURIER_OK);
    CHECK_STR(where.path, "code");
    courier_response_free(resp);
    courier_engine_close(e);
}

/* ---- the tape path agrees with the jansson path ------------------------------------------------------ */

/* The documents of the comparison: what services send, and the edges of parsing and mapping. */
static const char *const agree_docs[] = {
    "{\"id\":1,\"title\":\"Tea\",\"price\":2.5,\"on\":1}",
    "[{\"id\":1,\"title\":7},{\"id\":\"2\",\"title\":\"b\",\"price\":\"3.25\"},{\"id\":3.0}]",
    "{\"code\":\"200\",\"message\":null,\"data\":{\"name\":\"x\",\"on\":0,\"items\":[{\"id\":5}],\"owner\":{\"id\":6}}}",
    "{\"code\":200,\"message\":\"ok\",\"data\":{\"items\":[{\"id\":5},7]}}",           /* an element not an object */
    "{\"code\":\"abc\",\"data\":{\"items\":{\"id\":1}}}",                             /* envelope code not a number */
    "{\"code\":1e400}",                                                             /* beyond double: kept as text */
    "{\"code\":12345678901234567890}",                                             /* integer beyond int64 */
    "{\"id\":18446744073709551615,\"title\":1e400,\"price\":-9223372036854775809,\"a\":1E999,\"b\":99999999999999999999,"
    "\"data\":{\"name\":1e400,\"items\":[{\"id\":1,\"price\":1e400}]},\"v\":18446744073709551616}",  /* kept as text */
    "{\"id\":-9223372036854775808,\"price\":-0.0,\"title\":1.5e-300,\"a\":1e22,\"b\":0.1}",
    "{\"id\":9.5}",                                                                /* a fraction for integer */
    "{\"id\":1,\"title\":\"\\u00e9\\ud83d\\ude00\\n\\\"q\\\"\",\"v\":\"\\u0041\"}",  /* unicode escapes */
    "{\"id\":1,\"id\":2,\"title\":\"a\",\"title\":\"b\"}",                          /* duplicates (allowed below) */
    "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[{\"v\":3,\"kids\":[{\"v\":[[[[{}]]]]}]}]},{\"v\":null}]}", /* deep */
    "{\"v\":1,\"kids\":[{\"kids\":\"no\"}]}",
    "{\"a\":\"42\",\"b\":17,\"c\":1,\"d\":[{\"e\":\"1e3\"}]}",
    "{\"a\":\"4.5\",\"b\":2.25,\"c\":2,\"d\":[]}",
    "{\"a\":null,\"b\":null,\"c\":null,\"d\":null}",
    "{}", "[]", "[{}]", "null", "42", "\"text\"", "[1]",
    "{\"data\":{\"name\":{\"deep\":[1,{\"x\":null}]},\"on\":true,\"owner\":null}}",
    "{\"id\":\"\",\"title\":true,\"price\":\"nan\"}",
    "{\"id\":\" 1\",\"price\":\"0x10\"}",
};

static courier_mapping *agree_mappings[5];

static void build_agree_mappings(void) {
    courier_mapping *item = NULL, *root = NULL, *tree = NULL, *loose = NULL, *any = NULL;
    courier_mapping_new(&item);
    courier_mapping_add_attribute(item, "id", NULL, COURIER_JSON_INTEGER, COURIER_MAP_REQUIRED | COURIER_MAP_NUMBER_FROM_STRING);
    courier_mapping_add_attribute(item, "title", "name", COURIER_JSON_STRING, COURIER_MAP_STRING_FROM_NUMBER);
    courier_mapping_add_attribute(item, "price", NULL, COURIER_JSON_REAL, COURIER_MAP_NUMBER_FROM_STRING);
    courier_mapping_add_attribute(item, "on", NULL, COURIER_JSON_BOOL, COURIER_MAP_BOOL_FROM_NUMBER);
    courier_mapping_new(&root);
    courier_mapping_add_attribute(root, "code", NULL, COURIER_JSON_NUMBER, COURIER_MAP_NUMBER_FROM_STRING | COURIER_MAP_REQUIRED);
    courier_mapping_add_attribute(root, "message", NULL, COURIER_JSON_STRING, COURIER_MAP_NULL_AS_ABSENT);
    courier_mapping_add_attribute(root, "data.name", "name", COURIER_JSON_ANY, 0);
    courier_mapping_add_attribute(root, "data.on", "on", COURIER_JSON_BOOL, COURIER_MAP_BOOL_FROM_NUMBER);
    courier_mapping_add_attribute(root, "data.missing.path", "missing", COURIER_JSON_STRING, 0);
    courier_mapping_add_relationship(root, "data.items", "items", item, 1, 0);
    courier_mapping_add_relationship(root, "data.owner", "owner", item, 0, 0);
    courier_json *def = NULL;
    courier_json_parse(&def, "{\"none\":[1,\"x\",null]}", 21, NULL, NULL);
    courier_mapping_set_default(root, "message", def);
    courier_json_free(def);
    courier_mapping_new(&tree);
    courier_mapping_add_attribute(tree, "v", NULL, COURIER_JSON_ANY, 0);
    courier_mapping_add_relationship(tree, "kids", NULL, tree, 1, 0);
    courier_mapping_new(&loose);
    courier_mapping_set_coercions(loose, COURIER_MAP_ALL_COERCIONS);
    courier_mapping_add_attribute(loose, "a", NULL, COURIER_JSON_INTEGER, 0);
    courier_mapping_add_attribute(loose, "b", NULL, COURIER_JSON_STRING, 0);
    courier_mapping_add_attribute(loose, "c", NULL, COURIER_JSON_BOOL, 0);
    courier_mapping_add_attribute(loose, "d.0.e", "e", COURIER_JSON_REAL, 0);
    courier_mapping_new(&any);
    courier_mapping_add_attribute(any, "id", NULL, COURIER_JSON_NUMBER, COURIER_MAP_REQUIRED);
    courier_mapping_add_attribute(any, "title", NULL, COURIER_JSON_STRING, COURIER_MAP_REQUIRED);
    agree_mappings[0] = item;
    agree_mappings[1] = root;
    agree_mappings[2] = tree;
    agree_mappings[3] = loose;
    agree_mappings[4] = any;
}

static void test_tape_path_agrees_with_jansson(void) {
    build_agree_mappings();
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.flags = COURIER_JSON_ALLOW_DUPLICATE_KEYS;
    int oks = 0, fails = 0;
    for (size_t d = 0; d < sizeof agree_docs / sizeof *agree_docs; d++) {
        const char *text = agree_docs[d];
        courier_json *doc = NULL;
        courier_json_tape *tape = NULL;
        int rc1 = courier_json_parse(&doc, text, strlen(text), &o, NULL);
        int rc2 = courier_json_tape_parse(&tape, text, strlen(text), &o, NULL);
        CHECK_EQ(rc1, rc2);
        if (rc1 != COURIER_OK || rc2 != COURIER_OK) {
            courier_json_free(doc);
            courier_json_tape_free(tape);
            continue;
        }
        for (size_t m = 0; m < sizeof agree_mappings / sizeof *agree_mappings; m++) {
            int rc = 0;
            if (!mapping_paths_agree(agree_mappings[m], doc, tape, 0, &rc))
                th_fail(__FILE__, __LINE__, "document %zu, mapping %zu: the paths disagree", d, m);
            if (rc == COURIER_OK) oks++;
            else fails++;
        }
        courier_json_free(doc);
        courier_json_tape_free(tape);
    }
    CHECK(oks > 10);
    CHECK(fails > 10); /* both outcomes are compared, not only one */
    for (size_t m = 0; m < sizeof agree_mappings / sizeof *agree_mappings; m++) courier_mapping_free(agree_mappings[m]);
}

/* ---- the response path (on the tape) agrees with the jansson path ------------------------------------- */

/* What a request asks: its default result (key path, mapping) or one named result, and its envelope. */
typedef struct agree_spec {
    const char *key_path;
    int mapping;       /* index in agree_mappings, or -1 */
    const char *name;  /* a named result instead of the default one */
    int optional;
    int envelope;      /* 0 none, 1 the standard one, 2 with agree_mappings[1] as its shape and a check */
} agree_spec;

static void agree_config(courier_config *cfg) {
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.flags = COURIER_JSON_ALLOW_DUPLICATE_KEYS;
    courier_config_set_json_options(cfg, &o);
    courier_config_add_json_type(cfg, "text/plain");
}

static int agree_checks;
static int agree_check(const courier_json *doc, int has_code, int64_t code, const char *message, void *user) {
    (void)message, (void)user;
    if (doc) agree_checks++;
    return !has_code || code == 200;
}

static courier_envelope *agree_envelope(int kind) {
    courier_envelope *env = NULL;
    courier_envelope_new(&env);
    courier_envelope_set_code_path(env, "code", 0);
    courier_envelope_set_message_path(env, "message");
    courier_envelope_set_data_path(env, "data");
    courier_envelope_add_success_code(env, 200);
    if (kind == 2) {
        courier_envelope_set_mapping(env, agree_mappings[1]);
        courier_envelope_set_check(env, agree_check, NULL, NULL);
    }
    return env;
}

/* The jansson path, as cr_json_apply_spec read it before the move: the envelope (its shape by
 * courier_mapping_apply, its code and message by courier_json_path), then the value at the key
 * path (or the envelope's data path), mapped by courier_mapping_apply. */
static int agree_oracle(const courier_json *doc, const agree_spec *sp, courier_json **out, int *present,
                        courier_mapping_error *where, int64_t *env_code, int *has_code) {
    *out = NULL;
    *present = 0;
    *has_code = 0;
    memset(where, 0, sizeof *where);
    const char *fallback = NULL;
    if (sp->envelope) {
        fallback = "data";
        if (sp->envelope == 2) {
            courier_json *shape = NULL;
            int rc = courier_mapping_apply(&shape, where, agree_mappings[1], doc, NULL);
            courier_json_free(shape);
            if (rc) return rc;
        }
        const courier_json *c = courier_json_path(doc, "code");
        if (c) {
            int t = courier_json_typeof(c);
            char *end = NULL;
            size_t len = 0;
            const char *s = t == COURIER_JSON_STRING ? courier_json_string(c, &len) : NULL;
            if (t == COURIER_JSON_INTEGER) *env_code = courier_json_integer(c), *has_code = 1;
            else if (s && len && ((s[0] >= '0' && s[0] <= '9') || s[0] == '-') && !strpbrk(s, ".eE ")) {
                long long v = strtoll(s, &end, 10);
                if (*end == '\0') *env_code = v, *has_code = 1;
            } else if (t == COURIER_JSON_REAL) {
                double d = courier_json_real(c);
                if (d == (double)(int64_t)d) *env_code = (int64_t)d, *has_code = 1;
            }
            if (!*has_code) {
                strcpy(where->path, "code");
                where->expected = COURIER_JSON_INTEGER;
                where->found = t;
                return COURIER_E_MAPPING;
            }
        }
        if (*has_code && *env_code != 200) return COURIER_E_API;
    }
    const char *path = sp->key_path ? sp->key_path : fallback;
    int optional = sp->optional || (!sp->name && !sp->key_path && sp->mapping < 0); /* the envelope's data */
    if (!sp->name && !sp->key_path && sp->mapping < 0 && !fallback) path = NULL;
    const courier_json *v = path ? courier_json_path(doc, path) : doc;
    const courier_mapping *m = sp->mapping >= 0 ? agree_mappings[sp->mapping] : NULL;
    if (!v || (courier_json_typeof(v) == COURIER_JSON_NULL && m)) {
        if (optional) return COURIER_OK;
        /* A root that is absent or null names itself "0" (a frame without a key reads as index 0). */
        snprintf(where->path, sizeof where->path, "%s", path ? path : "0");
        where->expected = m ? COURIER_JSON_OBJECT : COURIER_JSON_ANY;
        where->found = v ? COURIER_JSON_NULL : COURIER_JSON_NONE;
        return COURIER_E_MAPPING;
    }
    *present = 1;
    if (!m) {
        return courier_json_copy(out, v);
    }
    int rc = courier_mapping_apply(out, where, m, v, NULL);
    if (rc == COURIER_E_MAPPING && path && *path) { /* the response path names it from the document's root */
        char tail[sizeof where->path];
        memcpy(tail, where->path, sizeof tail);
        snprintf(where->path, sizeof where->path, "%.120s%s%.120s", path, tail[0] ? "." : "", tail);
    }
    if (rc) *present = 0;
    return rc;
}

static int agree_sends, agree_compared;

/* Sends doc as a body with the spec and compares what the response path made with the oracle. */
static void agree_one(courier_engine *e, size_t d, const char *text, const courier_json *doc, int parse_rc,
                      const agree_spec *sp, size_t k) {
    courier_json *strict = NULL;
    int unique = courier_json_parse(&strict, text, strlen(text), NULL, NULL) == COURIER_OK;
    courier_json_free(strict);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/cache");
    courier_request_add_param(r, "body", text);
    courier_mapping *m = sp->mapping >= 0 ? agree_mappings[sp->mapping] : NULL;
    if (sp->name) CHECK_EQ(courier_request_add_result(r, sp->name, sp->key_path, m, sp->optional ? COURIER_RESULT_OPTIONAL : 0), COURIER_OK);
    else {
        if (sp->key_path) courier_request_set_key_path(r, sp->key_path);
        if (m) courier_request_set_mapping(r, m);
    }
    courier_envelope *env = sp->envelope ? agree_envelope(sp->envelope) : NULL;
    if (env) courier_request_set_envelope(r, env);
    courier_envelope_free(env);
    courier_response *resp = NULL;
    courier_error err;
    int rc = courier_send_sync(&resp, e, r, &err);
    agree_sends++;
    courier_request_free(r);
    courier_json *want = NULL;
    courier_mapping_error want_where, got_where;
    int present = 0, has_code = 0;
    int64_t code = 0, got_code = 0;
    int want_rc = parse_rc ? parse_rc : agree_oracle(doc, sp, &want, &present, &want_where, &code, &has_code);
    if (rc != want_rc) {
        th_fail(__FILE__, __LINE__, "document %zu, spec %zu: code %d, the jansson path %d (%s)", d, k, rc, want_rc,
                err.message);
    } else if (rc == COURIER_E_MAPPING) {
        CHECK_EQ(courier_response_mapping_error(&got_where, resp), COURIER_OK);
        CHECK_STR(got_where.path, want_where.path);
        CHECK_EQ(got_where.expected, want_where.expected);
        CHECK_EQ(got_where.found, want_where.found);
        agree_compared++;
    } else if (rc == COURIER_OK || rc == COURIER_E_API) {
        CHECK_EQ(courier_response_envelope(&got_code, NULL, resp), has_code ? COURIER_OK : COURIER_E_NOT_FOUND);
        CHECK_EQ(got_code, code);
        if (rc == COURIER_OK) {
            const courier_json_tape *tape = NULL;
            size_t at = 9;
            int trc = courier_response_result_tape(&tape, &at, resp, sp->name, &err);
            const courier_json *got = sp->name ? courier_response_result(resp, sp->name) : courier_response_data(resp);
            if (!present) {
                CHECK_EQ(trc, COURIER_E_NOT_FOUND);
                CHECK(got == NULL);
            } else {
                /* The tape as the response path left it, then the jansson value made from it on
                 * first ask, then the text of each: the same value three ways. */
                CHECK_EQ(trc, COURIER_OK);
                if (trc == COURIER_OK && !tape_same(tape, at, want))
                    th_fail(__FILE__, __LINE__, "document %zu, spec %zu: the result's tape differs", d, k);
                if (!got || !courier_json_equal(got, want))
                    th_fail(__FILE__, __LINE__, "document %zu, spec %zu: the result differs", d, k);
                CHECK(got == (sp->name ? courier_response_result(resp, sp->name) : courier_response_data(resp)));
                char *a = NULL, *b = NULL;
                if (trc == COURIER_OK) CHECK_EQ(courier_json_tape_dump(&a, NULL, tape, at, COURIER_JSON_DUMP_SORT_KEYS, NULL), COURIER_OK);
                CHECK_EQ(courier_json_dump(&b, NULL, want, COURIER_JSON_DUMP_SORT_KEYS, NULL), COURIER_OK);
                if (a && b) CHECK_STR(a, b);
                courier_free(a);
                courier_free(b);
                /* In the same order too (members as the jansson path lists them), where the
                 * document has no duplicate keys (jansson keeps a duplicate at its first place). */
                if (unique && trc == COURIER_OK) {
                    a = b = NULL;
                    CHECK_EQ(courier_json_tape_dump(&a, NULL, tape, at, 0, NULL), COURIER_OK);
                    CHECK_EQ(courier_json_dump(&b, NULL, got, 0, NULL), COURIER_OK);
                    if (a && b && strcmp(a, b))
                        th_fail(__FILE__, __LINE__, "document %zu, spec %zu: order %s, jansson's %s", d, k, a, b);
                    courier_free(a);
                    courier_free(b);
                    CHECK_EQ(courier_json_dump(&b, NULL, want, 0, NULL), COURIER_OK);
                    char *c = NULL;
                    CHECK_EQ(courier_json_dump(&c, NULL, got, 0, NULL), COURIER_OK);
                    if (b && c && strcmp(b, c))
                        th_fail(__FILE__, __LINE__, "document %zu, spec %zu: order %s, the jansson path's %s", d, k, c, b);
                    courier_free(b);
                    courier_free(c);
                }
                agree_compared++;
            }
        }
    }
    courier_json_free(want);
    courier_response_free(resp);
}

static void test_response_path_agrees_with_jansson(void) {
    build_agree_mappings();
    courier_engine *e = th_engine(agree_config);
    REQUIRE(e);
    const agree_spec specs[] = {
        {NULL, 0, NULL, 0, 0}, {NULL, 1, NULL, 0, 0}, {NULL, 2, NULL, 0, 0}, {NULL, 3, NULL, 0, 0}, {NULL, 4, NULL, 0, 0},
        {"data", 1, NULL, 0, 0}, {"data.items", 0, NULL, 0, 0}, {"data.owner", 0, NULL, 0, 0}, {"data.name", -1, NULL, 0, 0},
        {"kids.0", 2, NULL, 0, 0}, {NULL, -1, NULL, 0, 1}, {NULL, -1, NULL, 0, 2}, {"data.items", 0, NULL, 0, 1},
        {"data.items", 0, "items", 1, 0}, {NULL, 0, "all", 0, 0}, {"data.owner", -1, "owner", 1, 0},
        {"data", -1, "data", 0, 2},
    };
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.flags = COURIER_JSON_ALLOW_DUPLICATE_KEYS;
    for (size_t d = 0; d < sizeof agree_docs / sizeof *agree_docs; d++) {
        const char *text = agree_docs[d];
        courier_json *doc = NULL;
        int prc = courier_json_parse(&doc, text, strlen(text), &o, NULL);
        for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) agree_one(e, d, text, doc, prc, &specs[k], k);
        courier_json_free(doc);
    }
    CHECK(agree_compared > 100);
    CHECK(agree_checks > 0); /* the check callback saw a document */
    courier_engine_close(e);
    for (size_t m = 0; m < sizeof agree_mappings / sizeof *agree_mappings; m++) courier_mapping_free(agree_mappings[m]);
}

/* courier_response_result_tape's arguments and outcomes; courier_json_tape_dump's too. */
static void test_result_tape(void) {
    courier_engine *e = th_engine(agree_config);
    REQUIRE(e);
    courier_response *resp = NULL;
    courier_error err;
    const courier_json_tape *tape = NULL;
    size_t at = 7;
    /* Nothing asked: the whole body, parsed into a tape on first ask. */
    REQUIRE(send_body(e, "{\"b\":[1,2.5,\"x\\n\"],\"a\":{\"t\":true,\"n\":null}}", &resp, &err) == COURIER_OK);
    CHECK_EQ(courier_response_result_tape(&tape, &at, resp, NULL, &err), COURIER_OK);
    CHECK_EQ(at, 0);
    CHECK(tape_same(tape, 0, courier_response_json(resp)));
    char *text = NULL;
    size_t len = 0;
    CHECK_EQ(courier_json_tape_dump(&text, &len, tape, 0, 0, &err), COURIER_OK);
    CHECK_STR(text, "{\"b\":[1,2.5,\"x\\n\"],\"a\":{\"t\":true,\"n\":null}}");
    CHECK_EQ(len, strlen(text));
    courier_free(text);
    CHECK_EQ(courier_json_tape_dump(&text, NULL, tape, 0, COURIER_JSON_DUMP_SORT_KEYS | COURIER_JSON_DUMP_INDENT, &err), COURIER_OK);
    char *want = NULL;
    courier_json_dump(&want, NULL, courier_response_json(resp), COURIER_JSON_DUMP_SORT_KEYS | COURIER_JSON_DUMP_INDENT, NULL);
    CHECK_STR(text, want);
    courier_free(text);
    courier_free(want);
    CHECK_EQ(courier_json_tape_dump(&text, NULL, tape, 99, 0, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_json_tape_dump(&text, NULL, NULL, 0, 0, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_json_tape_dump(NULL, NULL, tape, 0, 0, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_response_result_tape(&tape, &at, resp, "none", &err), COURIER_E_NOT_FOUND);
    CHECK(tape == NULL);
    CHECK_EQ(courier_response_result_tape(NULL, &at, resp, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_response_result_tape(&tape, NULL, resp, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_response_result_tape(&tape, &at, NULL, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    courier_response_free(resp);
    /* A body that is not JSON, nothing asked: the request succeeds; the tape says why there is none. */
    REQUIRE(send_body(e, "{oops", &resp, &err) == COURIER_OK);
    CHECK_EQ(courier_response_result_tape(&tape, &at, resp, NULL, &err), COURIER_E_JSON);
    CHECK(courier_response_data(resp) == NULL);
    courier_response_free(resp);
    /* A key path: the result is the body's value, on the body's tape; its jansson value is the
     * document's own. */
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/cache");
    courier_request_add_param(r, "body", "{\"data\":{\"items\":[{\"id\":1}]}}");
    courier_request_set_key_path(r, "data.items");
    REQUIRE(courier_send_sync(&resp, e, r, &err) == COURIER_OK);
    courier_request_free(r);
    CHECK_EQ(courier_response_result_tape(&tape, &at, resp, NULL, &err), COURIER_OK);
    CHECK_EQ(at, 4);
    CHECK_EQ(courier_json_tape_entries(tape, NULL)[at].type, COURIER_JSON_ARRAY);
    CHECK(courier_response_data(resp) == courier_json_path(courier_response_json(resp), "data.items"));
    courier_response_free(resp);
    courier_engine_close(e);
}

/* Readers on several threads at once: each result's jansson value is made once and every reader
 * gets the same one (a response is immutable and read from any thread). */
typedef struct reader {
    const courier_response *resp;
    const courier_json *data, *first, *raw, *doc;
    const courier_json_tape *tape;
} reader;

static void *read_results(void *arg) {
    reader *r = arg;
    r->data = courier_response_data(r->resp);
    r->first = courier_response_result(r->resp, "first");
    r->raw = courier_response_result(r->resp, "raw");
    r->doc = courier_response_json(r->resp);
    size_t at = 0;
    courier_response_result_tape(&r->tape, &at, r->resp, "raw", NULL);
    return NULL;
}

static void test_results_made_once_across_threads(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_mapping *m = item_mapping();
    for (int round = 0; round < 20; round++) {
        courier_request *r = NULL;
        courier_request_new(&r, "GET", "/json");
        courier_request_set_key_path(r, "data.items");
        courier_request_set_mapping(r, m);
        courier_request_add_result(r, "first", "data.items.0", m, 0);
        courier_request_add_result(r, "raw", "data.tags", NULL, 0);
        courier_response *resp = NULL;
        courier_error err;
        REQUIRE(courier_send_sync(&resp, e, r, &err) == COURIER_OK);
        courier_request_free(r);
        reader rd[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            memset(&rd[i], 0, sizeof rd[i]);
            rd[i].resp = resp;
            REQUIRE(pthread_create(&th[i], NULL, read_results, &rd[i]) == 0);
        }
        for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < 4; i++) {
            CHECK(rd[i].data && rd[i].data == courier_response_data(resp));
            CHECK(rd[i].first && rd[i].first == courier_response_result(resp, "first"));
            CHECK(rd[i].raw && rd[i].raw == courier_json_path(rd[i].doc, "data.tags"));
            CHECK(rd[i].doc == rd[0].doc && rd[i].tape == rd[0].tape && rd[i].tape != NULL);
        }
        CHECK(same(rd[0].data, "[{\"itemId\":1,\"title\":\"one\"},{\"itemId\":2,\"title\":\"two\"}]"));
        courier_response_free(resp);
    }
    courier_mapping_free(m);
    courier_engine_close(e);
}

static void test_tape_output_and_arguments(void) {
    courier_mapping *m = NULL;
    REQUIRE(courier_mapping_new(&m) == COURIER_OK);
    courier_mapping_add_attribute(m, "a.b", "x", COURIER_JSON_REAL, 0);
    courier_mapping_add_attribute(m, "s", NULL, COURIER_JSON_STRING, COURIER_MAP_STRING_FROM_NUMBER);
    const char *text = "{\"s\":12,\"skip\":[1,2],\"a\":{\"b\":3}}";
    courier_json_tape *in = NULL, *out = NULL;
    REQUIRE(courier_json_tape_parse(&in, text, strlen(text), NULL, NULL) == COURIER_OK);
    courier_mapping_error where;
    courier_error err;
    CHECK_EQ(courier_mapping_apply_tape(&out, &where, m, in, 0, &err), COURIER_OK);
    size_t n = 0;
    const courier_json_tape_entry *e = courier_json_tape_entries(out, &n);
    const char *t = (const char *)courier_json_tape_text(out);
    /* {"x":3.0,"s":"12"}: in the mapping's order, the integer made a real, the number a string. */
    CHECK_EQ(n, 5);
    CHECK_EQ(e[0].type, COURIER_JSON_OBJECT);
    CHECK_EQ(e[0].length, 2);
    CHECK_EQ(e[0].payload, 5);
    CHECK_STR(t + e[1].payload, "x");
    CHECK_EQ(e[2].type, COURIER_JSON_REAL);
    double d = 0;
    memcpy(&d, &e[2].payload, sizeof d);
    CHECK(d == 3.0);
    CHECK_STR(t + e[3].payload, "s");
    CHECK_EQ(e[4].type, COURIER_JSON_STRING);
    CHECK_STR(t + e[4].payload, "12");
    courier_json_tape_free(out);
    out = NULL;
    CHECK_EQ(courier_mapping_apply_tape(&out, &where, m, in, 99, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_mapping_apply_tape(&out, &where, NULL, in, 0, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_mapping_apply_tape(NULL, &where, m, in, 0, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK(out == NULL);
    /* A failure names the path in the tape's value as courier_mapping_apply does. */
    CHECK_EQ(courier_mapping_apply_tape(&out, &where, m, in, 4, &err), COURIER_E_MAPPING); /* the array [1,2] */
    CHECK_STR(where.path, "0");
    CHECK_EQ(where.expected, COURIER_JSON_OBJECT);
    CHECK_EQ(where.found, COURIER_JSON_INTEGER);
    courier_json_tape_free(in);
    courier_mapping_free(m);
    /* An object kept as it is (every member, same names, same types) lists its members in the
     * input's order, as courier_mapping_apply (which returns the input itself) does; changed, in
     * the mapping's. */
    REQUIRE(courier_mapping_new(&m) == COURIER_OK);
    courier_mapping_add_attribute(m, "b", NULL, COURIER_JSON_INTEGER, 0);
    courier_mapping_add_attribute(m, "a", NULL, COURIER_JSON_ANY, 0);
    const char *texts[] = {"{\"a\":[1,{\"x\":2}],\"b\":1}", "{\"a\":1,\"b\":1.0}", "{\"a\":1,\"b\":2,\"c\":3}"};
    const char *want[] = {"{\"a\":[1,{\"x\":2}],\"b\":1}", "{\"b\":1,\"a\":1}", "{\"b\":2,\"a\":1}"};
    for (size_t i = 0; i < 3; i++) {
        REQUIRE(courier_json_tape_parse(&in, texts[i], strlen(texts[i]), NULL, NULL) == COURIER_OK);
        CHECK_EQ(courier_mapping_apply_tape(&out, &where, m, in, 0, &err), COURIER_OK);
        char *got = NULL, *jan = NULL;
        CHECK_EQ(courier_json_tape_dump(&got, NULL, out, 0, 0, NULL), COURIER_OK);
        CHECK_STR(got, want[i]);
        courier_json *doc = parse(texts[i]), *mapped = NULL;
        CHECK_EQ(courier_mapping_apply(&mapped, &where, m, doc, &err), COURIER_OK);
        courier_json_dump(&jan, NULL, mapped, 0, NULL);
        CHECK_STR(got, jan);
        courier_free(got);
        courier_free(jan);
        courier_json_free(mapped);
        courier_json_free(doc);
        courier_json_tape_free(out);
        courier_json_tape_free(in);
    }
    courier_mapping_free(m);
}

/* Numbers beyond int64 and double (kept as text) do not stop a mapping that reads other fields; where
 * a mapping reads them they keep their text, become that text as strings, and are a mapping error
 * as integers; the jansson and tape paths agree. */
static void test_numbers_beyond_int64_and_double(void) {
    const char *text = "{\"id\":1,\"big\":18446744073709551615,\"huge\":1e400,\"neg\":-9223372036854775809,\"name\":\"x\"}";
    courier_json *doc = parse(text);
    courier_json_tape *tape = NULL;
    CHECK_EQ(courier_json_tape_parse(&tape, text, strlen(text), NULL, NULL), COURIER_OK);
    courier_mapping *other = NULL, *kept = NULL, *as_int = NULL, *as_str = NULL, *strict_str = NULL;
    courier_mapping_new(&other);
    courier_mapping_add_attribute(other, "id", NULL, COURIER_JSON_INTEGER, COURIER_MAP_REQUIRED);
    courier_mapping_add_attribute(other, "name", NULL, COURIER_JSON_STRING, 0);
    courier_mapping_new(&kept);
    courier_mapping_add_attribute(kept, "big", NULL, COURIER_JSON_NUMBER, 0);
    courier_mapping_add_attribute(kept, "huge", NULL, COURIER_JSON_REAL, 0);
    courier_mapping_add_attribute(kept, "neg", NULL, COURIER_JSON_ANY, 0);
    courier_mapping_new(&as_int);
    courier_mapping_add_attribute(as_int, "big", NULL, COURIER_JSON_INTEGER, 0);
    courier_mapping_new(&as_str);
    courier_mapping_add_attribute(as_str, "big", NULL, COURIER_JSON_STRING, COURIER_MAP_STRING_FROM_NUMBER);
    courier_mapping_add_attribute(as_str, "huge", NULL, COURIER_JSON_STRING, COURIER_MAP_STRING_FROM_NUMBER);
    courier_mapping_new(&strict_str);
    courier_mapping_add_attribute(strict_str, "big", NULL, COURIER_JSON_STRING, 0);
    int rc = 0;
    courier_json *out = NULL;
    char *dumped = NULL;
    CHECK(mapping_paths_agree(other, doc, tape, 0, &rc));
    CHECK_EQ(rc, COURIER_OK);
    CHECK_EQ(courier_mapping_apply(&out, NULL, other, doc, NULL), COURIER_OK);
    CHECK(same(out, "{\"id\":1,\"name\":\"x\"}"));
    courier_json_free(out);
    CHECK(mapping_paths_agree(kept, doc, tape, 0, &rc));
    CHECK_EQ(rc, COURIER_OK);
    CHECK_EQ(courier_mapping_apply(&out, NULL, kept, doc, NULL), COURIER_OK);
    CHECK_EQ(courier_json_dump(&dumped, NULL, out, COURIER_JSON_DUMP_SORT_KEYS, NULL), COURIER_OK);
    CHECK_STR(dumped, "{\"big\":18446744073709551615,\"huge\":1e400,\"neg\":-9223372036854775809}");
    courier_free(dumped);
    courier_json_free(out);
    courier_json_tape *tout = NULL;
    CHECK_EQ(courier_mapping_apply_tape(&tout, NULL, kept, tape, 0, NULL), COURIER_OK);
    CHECK_EQ(courier_json_tape_dump(&dumped, NULL, tout, 0, COURIER_JSON_DUMP_SORT_KEYS, NULL), COURIER_OK);
    CHECK_STR(dumped, "{\"big\":18446744073709551615,\"huge\":1e400,\"neg\":-9223372036854775809}");
    courier_free(dumped);
    uint64_t u = 0;
    CHECK_EQ(courier_json_tape_read_uint64(&u, tout, courier_json_tape_get(tout, 0, "big", 3, NULL)), COURIER_OK);
    CHECK(u == UINT64_MAX);
    courier_json_tape_free(tout);
    courier_mapping_error where;
    courier_error err;
    CHECK(mapping_paths_agree(as_int, doc, tape, 0, &rc));
    CHECK_EQ(rc, COURIER_E_MAPPING);
    CHECK_EQ(courier_mapping_apply(&out, &where, as_int, doc, &err), COURIER_E_MAPPING);
    CHECK_STR(where.path, "big");
    CHECK_EQ(where.expected, COURIER_JSON_INTEGER);
    CHECK_EQ(where.found, COURIER_JSON_REAL);
    CHECK(mapping_paths_agree(as_str, doc, tape, 0, &rc));
    CHECK_EQ(rc, COURIER_OK);
    CHECK_EQ(courier_mapping_apply(&out, NULL, as_str, doc, NULL), COURIER_OK);
    CHECK(same(out, "{\"big\":\"18446744073709551615\",\"huge\":\"1e400\"}")); /* exactly its text */
    courier_json_free(out);
    CHECK(mapping_paths_agree(strict_str, doc, tape, 0, &rc));
    CHECK_EQ(rc, COURIER_E_MAPPING); /* a number, never a string */
    courier_mapping_free(other);
    courier_mapping_free(kept);
    courier_mapping_free(as_int);
    courier_mapping_free(as_str);
    courier_mapping_free(strict_str);
    courier_json_tape_free(tape);
    courier_json_free(doc);
}

TESTS_MAIN(T(test_numbers_beyond_int64_and_double), T(test_attributes_rename_select_and_nest), T(test_type_mismatch_names_path_and_types), T(test_coercions),
           T(test_defaults), T(test_relationships), T(test_tree_mapping_and_cycles), T(test_arrays_and_identity),
           T(test_bad_descriptions), T(test_request_key_path_and_mapping), T(test_request_mapping_failure),
           T(test_request_named_results), T(test_envelope), T(test_envelope_check_and_shape),
           T(test_tape_path_agrees_with_jansson), T(test_tape_output_and_arguments),
           T(test_response_path_agrees_with_jansson), T(test_result_tape),
           T(test_results_made_once_across_threads))
