/*
 * mapping_test.c — mappings applied to documents (attributes, relationships, coercions, defaults,
 * errors that name the path), envelopes, and requests that name key paths, mappings and results
 * against the loopback server.
 */
#include "harness.h"
#include "tape_same.h"

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
    "{\"code\":1e400}",                                                             /* refused by both parsers */
    "{\"code\":12345678901234567890}",                                             /* integer beyond int64 */
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
}

TESTS_MAIN(T(test_attributes_rename_select_and_nest), T(test_type_mismatch_names_path_and_types), T(test_coercions),
           T(test_defaults), T(test_relationships), T(test_tree_mapping_and_cycles), T(test_arrays_and_identity),
           T(test_bad_descriptions), T(test_request_key_path_and_mapping), T(test_request_mapping_failure),
           T(test_request_named_results), T(test_envelope), T(test_envelope_check_and_shape),
           T(test_tape_path_agrees_with_jansson), T(test_tape_output_and_arguments))
