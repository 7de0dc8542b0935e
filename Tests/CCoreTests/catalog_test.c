/*
 * catalog_test.c — the API catalogue (HLAPICenter: declarations by module, used by name, loaded
 * from JSON), the API version segment (apiVersion, review suffix, per request), routes (RKRoute:
 * patterns filled from objects, the rest as parameters or body), response descriptors
 * (RKResponseDescriptor: key path and mapping by method, path and status, error bodies mapped into
 * an error model) and per-request accepted statuses (statusCodeValidator), over the loopback
 * server.
 */
#include "harness.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static courier_json *parse(const char *text) {
    courier_json *doc = NULL;
    if (courier_json_parse(&doc, text, strlen(text), NULL, NULL) != COURIER_OK)
        th_fail(__FILE__, __LINE__, "parse failed: %s", text);
    return doc;
}

/* Sends r (freed) and returns the code; *resp (may be NULL) receives the response. */
static int send_free(courier_engine *e, courier_request *r, courier_response **resp, courier_error *err) {
    courier_response *tmp = NULL;
    int rc = courier_send_sync(&tmp, e, r, err);
    courier_request_free(r);
    if (resp) *resp = tmp;
    else courier_response_free(tmp);
    return rc;
}

/* The echo server's member `key` as a string (borrowed from resp). */
static const char *echoed(const courier_response *resp, const char *key) {
    const courier_json *doc = courier_response_json(resp);
    const courier_json *v = doc ? courier_json_get(doc, key) : NULL;
    return v ? courier_json_string(v, NULL) : NULL;
}

static const char *echoed_header(const courier_response *resp, const char *name) {
    const courier_json *h = courier_json_get(courier_response_json(resp), "headers");
    for (size_t i = 0; h && i < courier_json_size(h); i++) {
        const courier_json *kv = courier_json_at(h, i);
        if (strcasecmp(courier_json_string(courier_json_at(kv, 0), NULL), name) == 0)
            return courier_json_string(courier_json_at(kv, 1), NULL);
    }
    return NULL;
}

/* ---- API version ---------------------------------------------------------------------------------- */

static void echo_base_v5(courier_config *cfg) {
    courier_config_set_base_url(cfg, th_url("/echo"));
    CHECK_EQ(courier_config_set_api_version(cfg, "v5", 0), COURIER_OK);
}

static void echo_base_v5_review(courier_config *cfg) {
    courier_config_set_base_url(cfg, th_url("/echo"));
    CHECK_EQ(courier_config_set_api_version(cfg, "v5", 1), COURIER_OK);
}

static const char *path_of(courier_engine *e, const char *target, const char *version, int set, char *buf) {
    courier_request *r = NULL;
    courier_request_new(&r, "GET", target);
    if (set) CHECK_EQ(courier_request_set_api_version(r, version), COURIER_OK);
    courier_response *resp = NULL;
    courier_error err;
    buf[0] = '\0';
    if (send_free(e, r, &resp, &err) == COURIER_OK) snprintf(buf, 256, "%s", echoed(resp, "path"));
    else th_fail(__FILE__, __LINE__, "send %s: %s", target, err.message);
    courier_response_free(resp);
    return buf;
}

static void test_api_version_is_inserted_between_base_and_path(void) {
    char buf[256];
    courier_engine *e = th_engine(echo_base_v5);
    REQUIRE(e);
    CHECK_STR(path_of(e, "/s", NULL, 0, buf), "/echo/v5/s");
    CHECK_STR(path_of(e, "s", NULL, 0, buf), "/echo/v5/s");
    CHECK_STR(path_of(e, "/s", "v6", 1, buf), "/echo/v6/s"); /* a request's own version */
    CHECK_STR(path_of(e, "/s", "", 1, buf), "/echo/s");      /* "" : none for this request */
    CHECK_STR(path_of(e, "/s", NULL, 1, buf), "/echo/v5/s"); /* NULL : the engine's again */
    CHECK_STR(path_of(e, th_url("/echo/abs"), NULL, 0, buf), "/echo/abs"); /* absolute URLs untouched */
    /* The cache key is the URL sent. */
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/s");
    char *key = NULL;
    REQUIRE(courier_cache_key(&key, e, r) == COURIER_OK);
    CHECK_CONTAINS(key, "/echo/v5/s");
    courier_free(key);
    courier_request_free(r);
    courier_engine_close(e);

    e = th_engine(echo_base_v5_review);
    REQUIRE(e);
    CHECK_STR(path_of(e, "/s", NULL, 0, buf), "/echo/v5r/s");
    CHECK_STR(path_of(e, "/s", "v6", 1, buf), "/echo/v6r/s"); /* the review suffix is the engine's */
    CHECK_STR(path_of(e, "/s", "", 1, buf), "/echo/s");
    courier_engine_close(e);
}

static void test_api_version_rejects_bad_segments(void) {
    courier_config *cfg = NULL;
    REQUIRE(courier_config_new(&cfg) == COURIER_OK);
    CHECK_EQ(courier_config_set_api_version(cfg, "v 5", 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_api_version(cfg, "v5?x", 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_api_version(cfg, "/v5", 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_api_version(cfg, "api/v2", 0), COURIER_OK);
    CHECK_EQ(courier_config_set_api_version(NULL, "v5", 0), COURIER_E_INVALID_ARGUMENT);
    courier_config_free(cfg);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/");
    CHECK_EQ(courier_request_set_api_version(r, "v#1"), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
}

/* ---- the catalogue ---------------------------------------------------------------------------------- */

static void test_declared_api_is_used_by_name(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_json *decl = parse("{\"method\":\"POST\",\"path\":\"/echo/feed\",\"params\":{\"page\":1,\"tags\":[\"a\",\"b\"]},"
                               "\"headers\":{\"X-Module\":\"home\"},\"body_encoding\":\"form\",\"key_path\":\"body\","
                               "\"timeout_ms\":5000,\"priority\":\"high\",\"description\":\"the home feed\"}");
    courier_error err;
    REQUIRE(courier_engine_add_api(e, "home.feed", decl, &err) == COURIER_OK);
    courier_json_free(decl);

    courier_request *r = NULL;
    REQUIRE(courier_request_new_api(&r, e, "home.feed", &err) == COURIER_OK);
    CHECK_EQ(courier_request_add_param(r, "user_id", "7"), COURIER_OK); /* this use's own parameter */
    courier_response *resp = NULL;
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(echoed(resp, "method"), "POST");
    CHECK_STR(echoed(resp, "path"), "/echo/feed");
    CHECK_STR(echoed_header(resp, "X-Module"), "home");
    /* The declaration's key path applies: the default result is the body. */
    CHECK_STR(courier_json_string(courier_response_data(resp), NULL), "page=1&tags%5B%5D=a&tags%5B%5D=b&user_id=7");
    courier_response_free(resp);

    /* Unknown names and bad declarations. */
    CHECK_EQ(courier_request_new_api(&r, e, "home.nope", &err), COURIER_E_UNKNOWN_NAME);
    CHECK(r == NULL);
    CHECK_EQ(err.code, COURIER_E_UNKNOWN_NAME);
    decl = parse("{\"path\":\"/x\",\"pth\":\"/y\"}");
    CHECK_EQ(courier_engine_add_api(e, "bad.field", decl, &err), COURIER_E_CATALOG);
    CHECK_CONTAINS(err.message, "pth");
    courier_json_free(decl);
    decl = parse("{\"method\":\"GET\"}");
    CHECK_EQ(courier_engine_add_api(e, "bad.nopath", decl, &err), COURIER_E_CATALOG);
    courier_json_free(decl);
    decl = parse("{\"path\":\"/x\",\"cache_policy\":\"sometimes\"}");
    CHECK_EQ(courier_engine_add_api(e, "bad.cache", decl, &err), COURIER_E_CATALOG);
    courier_json_free(decl);
    decl = parse("{\"path\":\"/x\",\"headers\":{\"Bad Name\":\"v\"}}");
    CHECK_EQ(courier_engine_add_api(e, "bad.header", decl, &err), COURIER_E_INVALID_HEADER);
    courier_json_free(decl);
    decl = parse("{\"path\":\"/x\"}");
    CHECK_EQ(courier_engine_add_api(e, "bad name", decl, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_engine_add_api(e, ".lead", decl, &err), COURIER_E_INVALID_ARGUMENT);
    courier_json_free(decl);
    char *names = NULL;
    REQUIRE(courier_engine_api_names(&names, NULL, e) == COURIER_OK);
    CHECK_STR(names, "[\"home.feed\"]");
    courier_free(names);
    courier_engine_close(e);
}

static void test_declared_cache_and_freeze_policies_apply(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_json *decl = parse("{\"path\":\"/count\",\"cache_policy\":\"cache_first\",\"cache_expiry\":60,"
                               "\"cache_key_filter\":[\"ts\"],\"freeze\":{\"policy\":\"manual\",\"expiry_ms\":1000}}");
    courier_error err;
    REQUIRE(courier_engine_add_api(e, "stats.count", decl, &err) == COURIER_OK);
    courier_json_free(decl);
    /* Two uses with different ts: the second is the first's cached answer (the filter and policy
     * came from the declaration). */
    int64_t seen[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        courier_request *r = NULL;
        REQUIRE(courier_request_new_api(&r, e, "stats.count", &err) == COURIER_OK);
        courier_request_add_param(r, "ts", i ? "2" : "1");
        courier_response *resp = NULL;
        REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
        CHECK_EQ(courier_response_from_cache(resp), i == 1);
        seen[i] = courier_json_integer(courier_json_get(courier_response_json(resp), "requests"));
        courier_response_free(resp);
    }
    CHECK_EQ(seen[0], seen[1]);
    courier_engine_close(e);
}

static const char catalogue[] =
    "{\"description\":\"the app's APIs\",\n"
    " \"apis\":{\n"
    "  \"home\":{\"feed\":{\"path\":\"/echo/feed\",\"params\":{\"page\":1}},\n"
    "          \"detail\":{\"path\":\"/echo/items/:id\",\"method\":\"GET\"},\n"
    "          \"admin\":{\"stats\":{\"path\":\"/echo/stats\",\"status_codes\":[[200,299],404]}}},\n"
    "  \"ping\":{\"path\":\"/echo/ping\",\"api_version\":\"\"}},\n"
    " \"routes\":[{\"name\":\"user.photos\",\"path\":\"/echo/users/:id/photos\"}]}\n";

static void test_catalogue_loads_from_json(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    size_t count = 0;
    REQUIRE(courier_engine_load_apis(&count, e, catalogue, strlen(catalogue), &err) == COURIER_OK);
    CHECK_EQ(count, 4);
    char *names = NULL;
    REQUIRE(courier_engine_api_names(&names, NULL, e) == COURIER_OK);
    CHECK_STR(names, "[\"home.admin.stats\",\"home.detail\",\"home.feed\",\"ping\"]");
    courier_free(names);

    /* A path with a parameter, filled by the use's object. */
    courier_request *r = NULL;
    REQUIRE(courier_request_new_api(&r, e, "home.detail", &err) == COURIER_OK);
    courier_json *obj = parse("{\"id\":42,\"lang\":\"fr\"}");
    REQUIRE(courier_request_set_object(r, obj, &err) == COURIER_OK);
    courier_json_free(obj);
    courier_response *resp = NULL;
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(echoed(resp, "path"), "/echo/items/42");
    CHECK_STR(echoed(resp, "query"), "lang=fr");
    courier_response_free(resp);
    /* The catalogue's route. */
    obj = parse("{\"id\":\"u1\"}");
    REQUIRE(courier_request_new_route(&r, e, "user.photos", obj, &err) == COURIER_OK);
    courier_json_free(obj);
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(echoed(resp, "path"), "/echo/users/u1/photos");
    courier_response_free(resp);

    /* From a file, and the errors. */
    char path[512];
    snprintf(path, sizeof path, "%s/apis.json", th_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs(catalogue, f);
    fclose(f);
    courier_engine *e2 = th_engine(NULL);
    REQUIRE(e2);
    CHECK_EQ(courier_engine_load_api_file(&count, e2, path, &err), COURIER_OK);
    CHECK_EQ(count, 4);
    snprintf(path, sizeof path, "%s/missing.json", th_tmpdir());
    CHECK_EQ(courier_engine_load_api_file(&count, e2, path, &err), COURIER_E_NOT_FOUND);
    CHECK_EQ(count, 0);
    courier_engine_close(e2);

    static const char *const malformed[] = {"{\"apis\":{\"a\":", "[1,2", "{\"apis\":{\"a\":{\"path\":\"/x\",}}}"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++)
        CHECK_EQ(courier_engine_load_apis(&count, e, malformed[i], strlen(malformed[i]), &err), COURIER_E_JSON);
    static const char *const misshapen[] = {
        "[]",
        "{\"apis\":[]}",
        "{\"apis\":{\"a\":1}}",
        "{\"apis\":{\"m\":{\"ok\":{\"path\":\"/x\"},\"bad\":{\"path\":\"/y\",\"methd\":\"GET\"}}}}",
        "{\"apis\":{},\"routez\":[]}",
        "{\"routes\":[{\"path\":\"/x\"}]}",
    };
    for (size_t i = 0; i < sizeof misshapen / sizeof misshapen[0]; i++) {
        CHECK_EQ(courier_engine_load_apis(&count, e, misshapen[i], strlen(misshapen[i]), &err), COURIER_E_CATALOG);
        CHECK_EQ(err.code, COURIER_E_CATALOG);
    }
    /* All or nothing: "m.ok" of the bad document was not declared. */
    CHECK_EQ(courier_request_new_api(&r, e, "m.ok", &err), COURIER_E_UNKNOWN_NAME);
    courier_engine_close(e);
}

/* ---- routes ------------------------------------------------------------------------------------------ */

static void test_named_route_fills_pattern_percent_encoded(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    REQUIRE(courier_engine_add_route(e, "user.photos", NULL, NULL, "/echo/users/:id/photos", &err) == COURIER_OK);
    REQUIRE(courier_engine_add_route(e, "human", NULL, "GET", "/echo/humans/:user.id\\.json", &err) == COURIER_OK);
    courier_json *obj = parse("{\"id\":\"a b/c\",\"page\":2,\"filter\":{\"kind\":\"x\"},\"ok\":true}");
    courier_request *r = NULL;
    REQUIRE(courier_request_new_route(&r, e, "user.photos", obj, &err) == COURIER_OK);
    courier_json_free(obj);
    courier_response *resp = NULL;
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(echoed(resp, "method"), "GET");
    CHECK_STR(echoed(resp, "path"), "/echo/users/a%20b%2Fc/photos");
    CHECK_STR(echoed(resp, "query"), "page=2&filter%5Bkind%5D=x&ok=true");
    courier_response_free(resp);

    /* A key path parameter and an escaped literal. */
    obj = parse("{\"user\":{\"id\":7}}");
    REQUIRE(courier_request_new_route(&r, e, "human", obj, &err) == COURIER_OK);
    courier_json_free(obj);
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(echoed(resp, "path"), "/echo/humans/7.json");
    CHECK_STR(echoed(resp, "query"), "user%5Bid%5D=7"); /* a key path leaves its member to be sent */
    courier_response_free(resp);

    /* An absolute URL: its port is not a parameter. */
    courier_request_new(&r, "GET", th_url("/echo/abs/:id"));
    obj = parse("{\"id\":5}");
    REQUIRE(courier_request_set_object(r, obj, &err) == COURIER_OK);
    courier_json_free(obj);
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(echoed(resp, "path"), "/echo/abs/5");
    courier_response_free(resp);

    /* Missing or unusable parameters, unknown routes. */
    obj = parse("{\"page\":2}");
    CHECK_EQ(courier_request_new_route(&r, e, "user.photos", obj, &err), COURIER_E_ROUTE_PARAMETER);
    CHECK_CONTAINS(err.message, ":id");
    CHECK(r == NULL);
    courier_json_free(obj);
    obj = parse("{\"id\":{\"a\":1}}");
    CHECK_EQ(courier_request_new_route(&r, e, "user.photos", obj, &err), COURIER_E_ROUTE_PARAMETER);
    courier_json_free(obj);
    obj = parse("{\"id\":null}");
    CHECK_EQ(courier_request_new_route(&r, e, "user.photos", obj, &err), COURIER_E_ROUTE_PARAMETER);
    courier_json_free(obj);
    CHECK_EQ(courier_request_new_route(&r, e, "user.photos", NULL, &err), COURIER_E_ROUTE_PARAMETER);
    CHECK_EQ(courier_request_new_route(&r, e, "nope", NULL, &err), COURIER_E_UNKNOWN_NAME);
    CHECK_EQ(courier_engine_add_route(e, NULL, NULL, "GET", "/x", &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_engine_add_route(e, "x", NULL, "GET", "/x?y", &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_engine_add_route(e, "x", NULL, "G T", "/x", &err), COURIER_E_INVALID_ARGUMENT);
    /* set_object refuses a second object and a non-object. */
    courier_request_new(&r, "GET", "/echo/:id");
    obj = parse("[1]");
    CHECK_EQ(courier_request_set_object(r, obj, &err), COURIER_E_INVALID_ARGUMENT);
    courier_json_free(obj);
    courier_request_free(r);
    courier_engine_close(e);
}

static void json_encoding(courier_config *cfg) { courier_config_set_body_encoding(cfg, COURIER_BODY_JSON); }

static void test_class_routes_send_the_rest_in_the_body(void) {
    courier_engine *e = th_engine(json_encoding);
    REQUIRE(e);
    courier_error err;
    REQUIRE(courier_engine_add_route(e, NULL, "user", "POST", "/echo/users", &err) == COURIER_OK);
    REQUIRE(courier_engine_add_route(e, NULL, "user", NULL, "/echo/users/:id", &err) == COURIER_OK);
    courier_json *obj = parse("{\"id\":7,\"name\":\"Ann\",\"tags\":[1,2],\"admin\":false}");
    courier_request *r = NULL;
    /* PUT: the any-method route; the rest is a typed JSON body (the engine's encoding). */
    REQUIRE(courier_request_new_object(&r, e, "PUT", "user", obj, &err) == COURIER_OK);
    courier_response *resp = NULL;
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(echoed(resp, "method"), "PUT");
    CHECK_STR(echoed(resp, "path"), "/echo/users/7");
    CHECK_STR(echoed(resp, "body"), "{\"name\":\"Ann\",\"tags\":[1,2],\"admin\":false}");
    courier_response_free(resp);
    /* POST: its own route, no parameter: everything in the body; form when the request says so,
     * and the request's own parameters go with it. */
    REQUIRE(courier_request_new_object(&r, e, "POST", "user", obj, &err) == COURIER_OK);
    courier_request_set_body_encoding(r, COURIER_BODY_FORM);
    courier_request_add_param(r, "via", "test");
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(echoed(resp, "path"), "/echo/users");
    CHECK_STR(echoed(resp, "body"), "via=test&id=7&name=Ann&tags%5B%5D=1&tags%5B%5D=2&admin=false");
    courier_response_free(resp);
    /* JSON with parameters: strings first, the object's typed members after. */
    REQUIRE(courier_request_new_object(&r, e, "POST", "user", obj, &err) == COURIER_OK);
    courier_request_add_param(r, "via", "test");
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(echoed(resp, "body"), "{\"via\":\"test\",\"id\":7,\"name\":\"Ann\",\"tags\":[1,2],\"admin\":false}");
    courier_response_free(resp);
    /* A raw body set before: the rest goes in the query. */
    courier_request_new(&r, "POST", "/echo/raw/:id");
    courier_request_set_body(r, "x", 1, "text/plain");
    REQUIRE(courier_request_set_object(r, obj, &err) == COURIER_OK);
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(echoed(resp, "path"), "/echo/raw/7");
    CHECK_STR(echoed(resp, "query"), "name=Ann&tags%5B%5D=1&tags%5B%5D=2&admin=false");
    CHECK_STR(echoed(resp, "body"), "x");
    courier_response_free(resp);
    CHECK_EQ(courier_request_new_object(&r, e, "GET", "photo", obj, &err), COURIER_E_UNKNOWN_NAME);
    courier_json_free(obj);
    courier_engine_close(e);
}

/* ---- response descriptors and accepted statuses ------------------------------------------------------ */

static courier_mapping *error_mapping(void) {
    courier_mapping *m = NULL;
    courier_mapping_new(&m);
    courier_mapping_add_attribute(m, "code", "code", COURIER_JSON_INTEGER, COURIER_MAP_REQUIRED);
    courier_mapping_add_attribute(m, "message", "errorMsg", COURIER_JSON_STRING, 0);
    return m;
}

static void test_error_body_is_mapped_into_an_error_model(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_mapping *m = error_mapping();
    REQUIRE(courier_engine_add_response_descriptor(e, NULL, "/problem/:code", 400, 499, "error", m, &err) == COURIER_OK);
    courier_mapping_free(m);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/problem/404");
    courier_response *resp = NULL;
    CHECK_EQ(send_free(e, r, &resp, &err), COURIER_E_HTTP_STATUS);
    CHECK_EQ(err.http_status, 404);
    REQUIRE(resp);
    const courier_json *model = courier_response_data(resp);
    REQUIRE(model);
    CHECK_EQ(courier_json_integer(courier_json_get(model, "code")), 40401);
    CHECK_STR(courier_json_string(courier_json_get(model, "errorMsg"), NULL), "problem 404");
    CHECK(courier_json_get(model, "message") == NULL); /* mapped, not the raw body */
    courier_response_free(resp);
    /* A status outside the descriptor's: no error model, the body as it is. */
    courier_request_new(&r, "GET", "/problem/500");
    CHECK_EQ(send_free(e, r, &resp, &err), COURIER_E_HTTP_STATUS);
    REQUIRE(resp);
    CHECK(courier_json_get(courier_response_data(resp), "error") != NULL);
    courier_response_free(resp);
    /* A body that does not fit the mapping: still the status failure, no model. */
    courier_request_new(&r, "GET", "/status/404"); /* no descriptor path match either way */
    CHECK_EQ(send_free(e, r, NULL, &err), COURIER_E_HTTP_STATUS);
    courier_engine_close(e);
}

static void test_success_descriptor_by_method_and_path(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_mapping *m = NULL;
    courier_mapping_new(&m);
    courier_mapping_add_attribute(m, "name", "title", COURIER_JSON_STRING, COURIER_MAP_REQUIRED);
    REQUIRE(courier_engine_add_response_descriptor(e, "GET", "/json", 0, 0, "data", m, &err) == COURIER_OK);
    REQUIRE(courier_engine_add_response_descriptor(e, "POST", "/json", 0, 0, "nothing.here", NULL, &err) ==
            COURIER_OK);
    courier_mapping_free(m);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/json?x=1");
    courier_response *resp = NULL;
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(courier_json_string(courier_json_get(courier_response_data(resp), "title"), NULL), "courier");
    courier_response_free(resp);
    /* The request's own key path wins over the descriptor. */
    courier_request_new(&r, "GET", "/json");
    courier_request_set_key_path(r, "data.tags");
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_EQ(courier_json_typeof(courier_response_data(resp)), COURIER_JSON_ARRAY);
    courier_response_free(resp);
    /* The POST descriptor's key path is absent: a mapping failure, as a request's own would be. */
    courier_request_new(&r, "POST", "/json");
    CHECK_EQ(send_free(e, r, NULL, &err), COURIER_E_MAPPING);
    /* Another path: no descriptor, the whole document. */
    courier_request_new(&r, "GET", "/status/200");
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_EQ(courier_json_integer(courier_json_get(courier_response_data(resp), "status")), 200);
    courier_response_free(resp);
    CHECK_EQ(courier_engine_add_response_descriptor(e, NULL, NULL, 500, 400, NULL, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_engine_add_response_descriptor(e, NULL, "/a b", 0, 0, NULL, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_engine_add_response_descriptor(e, NULL, NULL, 0, 0, "a..b", NULL, &err), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
}

static void test_request_accepted_status_codes(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_request *r = NULL;
    courier_response *resp = NULL;
    /* A 404 accepted: a success. */
    courier_request_new(&r, "GET", "/status/404");
    CHECK_EQ(courier_request_add_status_codes(r, 200, 299), COURIER_OK);
    CHECK_EQ(courier_request_add_status_codes(r, 404, 404), COURIER_OK);
    CHECK_EQ(send_free(e, r, &resp, &err), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 404);
    courier_response_free(resp);
    /* A 200 not accepted: the status failure, response attached. */
    courier_request_new(&r, "GET", "/status/200");
    courier_request_add_status_codes(r, 201, 201);
    CHECK_EQ(send_free(e, r, &resp, &err), COURIER_E_HTTP_STATUS);
    CHECK_EQ(err.http_status, 200);
    CHECK(resp != NULL);
    courier_response_free(resp);
    /* Bad ranges. */
    courier_request_new(&r, "GET", "/");
    CHECK_EQ(courier_request_add_status_codes(r, 300, 200), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_add_status_codes(r, 99, 200), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_add_status_codes(r, 200, 600), COURIER_E_INVALID_ARGUMENT);
    for (int i = 0; i < 8; i++) CHECK_EQ(courier_request_add_status_codes(r, 200 + i, 200 + i), COURIER_OK);
    CHECK_EQ(courier_request_add_status_codes(r, 300, 300), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
    /* Declared in the catalogue: the 404 of home.admin.stats is a success. */
    courier_json *decl = parse("{\"path\":\"/status/404\",\"status_codes\":[[200,299],404]}");
    REQUIRE(courier_engine_add_api(e, "stats", decl, &err) == COURIER_OK);
    courier_json_free(decl);
    REQUIRE(courier_request_new_api(&r, e, "stats", &err) == COURIER_OK);
    CHECK_EQ(send_free(e, r, NULL, &err), COURIER_OK);
    courier_engine_close(e);
}

/* ---- threads ---------------------------------------------------------------------------------------- */

typedef struct worker_arg {
    courier_engine *e;
    int index;
    int failures;
} worker_arg;

static void *catalogue_worker(void *p) {
    worker_arg *w = p;
    char name[32], decl_text[128];
    snprintf(name, sizeof name, "mod%d.api", w->index);
    snprintf(decl_text, sizeof decl_text, "{\"path\":\"/echo/t%d/:id\",\"key_path\":\"path\"}", w->index);
    courier_json *decl = NULL, *obj = NULL;
    courier_json_parse(&decl, decl_text, strlen(decl_text), NULL, NULL);
    courier_json_parse(&obj, "{\"id\":1}", 8, NULL, NULL);
    courier_error err;
    for (int round = 0; round < 20; round++) {
        if (courier_engine_add_api(w->e, name, decl, &err) != COURIER_OK) w->failures++;
        if (courier_engine_add_route(w->e, name, NULL, NULL, "/echo/r/:id", &err) != COURIER_OK) w->failures++;
        if (round == 0 && courier_engine_add_response_descriptor(w->e, NULL, "/echo/none", 0, 0, NULL, NULL, &err))
            w->failures++;
        courier_request *r = NULL;
        if (courier_request_new_api(&r, w->e, name, &err) != COURIER_OK || courier_request_set_object(r, obj, &err) != COURIER_OK) {
            w->failures++;
            courier_request_free(r);
            continue;
        }
        courier_response *resp = NULL;
        if (send_free(w->e, r, &resp, &err) != COURIER_OK) w->failures++;
        courier_response_free(resp);
        char *names = NULL;
        if (courier_engine_api_names(&names, NULL, w->e) != COURIER_OK) w->failures++;
        courier_free(names);
    }
    courier_json_free(decl);
    courier_json_free(obj);
    return NULL;
}

static void test_catalogue_is_shared_between_threads(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    pthread_t threads[4];
    worker_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg){e, i, 0};
        REQUIRE(pthread_create(&threads[i], NULL, catalogue_worker, &args[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(threads[i], NULL);
        CHECK_EQ(args[i].failures, 0);
    }
    char *names = NULL;
    REQUIRE(courier_engine_api_names(&names, NULL, e) == COURIER_OK);
    CHECK_STR(names, "[\"mod0.api\",\"mod1.api\",\"mod2.api\",\"mod3.api\"]");
    courier_free(names);
    courier_engine_close(e);
}

/* issue 28 bug 6: an API whose path has a parameter, sent without an object, fails with
 * COURIER_E_ROUTE_PARAMETER (it was sent with the literal ":id"); a path without parameters has its
 * escapes removed, as a route's. */
static void test_api_path_parameter_without_object_is_refused(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    static const char doc[] = "{\"apis\":{\"shop\":{\"item\":{\"path\":\"/echo/items/:id\"},"
                              "\"colon\":{\"path\":\"/echo/a\\\\:b\"}}}}";
    REQUIRE(courier_engine_load_apis(NULL, e, doc, strlen(doc), &err) == COURIER_OK);
    courier_request *r = NULL;
    REQUIRE(courier_request_new_api(&r, e, "shop.item", &err) == COURIER_OK);
    uint64_t id = 99;
    CHECK_EQ(courier_send(&id, e, r, NULL, NULL, &err), COURIER_E_ROUTE_PARAMETER);
    CHECK_EQ(err.code, COURIER_E_ROUTE_PARAMETER);
    CHECK_EQ(id, 0);
    CHECK_EQ(courier_send_sync(NULL, e, r, &err), COURIER_E_ROUTE_PARAMETER);
    courier_request_free(r);
    /* With an object it is filled and sent. */
    REQUIRE(courier_request_new_api(&r, e, "shop.item", &err) == COURIER_OK);
    courier_json *obj = parse("{\"id\":7}");
    REQUIRE(courier_request_set_object(r, obj, &err) == COURIER_OK);
    courier_json_free(obj);
    courier_response *resp = NULL;
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(echoed(resp, "path"), "/echo/items/7");
    courier_response_free(resp);
    /* An escaped colon is no parameter: sent as a literal ':'. */
    REQUIRE(courier_request_new_api(&r, e, "shop.colon", &err) == COURIER_OK);
    REQUIRE(send_free(e, r, &resp, &err) == COURIER_OK);
    CHECK_STR(echoed(resp, "path"), "/echo/a:b");
    courier_response_free(resp);
    courier_engine_close(e);
}

TESTS_MAIN(T(test_api_path_parameter_without_object_is_refused), T(test_api_version_is_inserted_between_base_and_path), T(test_api_version_rejects_bad_segments),
           T(test_declared_api_is_used_by_name), T(test_declared_cache_and_freeze_policies_apply),
           T(test_catalogue_loads_from_json), T(test_named_route_fills_pattern_percent_encoded),
           T(test_class_routes_send_the_rest_in_the_body), T(test_error_body_is_mapped_into_an_error_model),
           T(test_success_descriptor_by_method_and_path), T(test_request_accepted_status_codes),
           T(test_catalogue_is_shared_between_threads))
