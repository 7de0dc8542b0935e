/*
 * json_test.c — the JSON handle API: parsing and its limits, typed accessors, key paths, iteration
 * order, building values, serializing.
 */
#include "harness.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static courier_json *parse(const char *text) {
    courier_json *doc = NULL;
    courier_error err;
    int rc = courier_json_parse(&doc, text, strlen(text), NULL, &err);
    if (rc != COURIER_OK) th_fail(__FILE__, __LINE__, "parse failed (%d): %s", rc, err.message);
    return doc;
}

static int parse_code(const char *text, size_t len, const courier_json_options *o, courier_error *err) {
    courier_json *doc = (courier_json *)0x1;
    int rc = courier_json_parse(&doc, text, len, o, err);
    if (rc != COURIER_OK && doc != NULL) th_fail(__FILE__, __LINE__, "out not NULL after a failure");
    courier_json_free(doc);
    return rc;
}

static const char *SAMPLE =
    "{\"code\":200,\"message\":\"ok\",\"data\":{\"id\":1,\"name\":\"courier\",\"price\":2.5,\"on\":true,"
    "\"off\":false,\"none\":null,\"tags\":[\"a\",\"b\"],\"items\":[{\"id\":1,\"title\":\"one\"},"
    "{\"id\":2,\"title\":\"two\"}]}}";

static void test_accessors(void) {
    courier_json *doc = parse(SAMPLE);
    REQUIRE(doc);
    CHECK_EQ(courier_json_typeof(doc), COURIER_JSON_OBJECT);
    CHECK_EQ(courier_json_size(doc), 3);
    const courier_json *data = courier_json_get(doc, "data");
    CHECK_EQ(courier_json_typeof(data), COURIER_JSON_OBJECT);
    CHECK_EQ(courier_json_integer(courier_json_get(doc, "code")), 200);
    size_t len = 99;
    CHECK_STR(courier_json_string(courier_json_get(data, "name"), &len), "courier");
    CHECK_EQ(len, 7);
    CHECK(courier_json_real(courier_json_get(data, "price")) == 2.5);
    CHECK(courier_json_real(courier_json_get(data, "id")) == 1.0);
    CHECK_EQ(courier_json_typeof(courier_json_get(data, "price")), COURIER_JSON_REAL);
    CHECK_EQ(courier_json_typeof(courier_json_get(data, "on")), COURIER_JSON_BOOL);
    CHECK_EQ(courier_json_bool(courier_json_get(data, "on")), 1);
    CHECK_EQ(courier_json_bool(courier_json_get(data, "off")), 0);
    CHECK_EQ(courier_json_typeof(courier_json_get(data, "none")), COURIER_JSON_NULL);
    CHECK_EQ(courier_json_typeof(courier_json_get(data, "missing")), COURIER_JSON_NONE);
    CHECK(courier_json_getn(data, "namexyz", 4) == courier_json_get(data, "name"));
    const courier_json *tags = courier_json_get(data, "tags");
    CHECK_EQ(courier_json_typeof(tags), COURIER_JSON_ARRAY);
    CHECK_EQ(courier_json_size(tags), 2);
    CHECK_STR(courier_json_string(courier_json_at(tags, 1), NULL), "b");
    CHECK(courier_json_at(tags, 2) == NULL);
    /* Wrong types give neutral values, never a crash. */
    CHECK(courier_json_string(tags, &len) == NULL);
    CHECK_EQ(len, 0);
    CHECK_EQ(courier_json_integer(courier_json_get(data, "name")), 0);
    CHECK(courier_json_at(data, 0) == NULL);
    CHECK(courier_json_get(tags, "a") == NULL);
    CHECK_EQ(courier_json_size(courier_json_get(data, "name")), 0);
    CHECK_EQ(courier_json_typeof(NULL), COURIER_JSON_NONE);
    CHECK(courier_json_get(NULL, "x") == NULL);
    courier_json_free(doc);
    courier_json_free(NULL);
}

static void test_key_paths(void) {
    courier_json *doc = parse(SAMPLE);
    REQUIRE(doc);
    CHECK(courier_json_path(doc, NULL) == doc);
    CHECK(courier_json_path(doc, "") == doc);
    CHECK(courier_json_path(doc, "data") == courier_json_get(doc, "data"));
    CHECK_EQ(courier_json_size(courier_json_path(doc, "data.items")), 2);
    CHECK_STR(courier_json_string(courier_json_path(doc, "data.items.1.title"), NULL), "two");
    CHECK_EQ(courier_json_integer(courier_json_path(doc, "data.items.0.id")), 1);
    CHECK_STR(courier_json_string(courier_json_path(doc, "data.tags.0"), NULL), "a");
    CHECK(courier_json_path(doc, "data.items.2") == NULL);
    CHECK(courier_json_path(doc, "data.items.x") == NULL);
    CHECK(courier_json_path(doc, "data.items.-1") == NULL);
    CHECK(courier_json_path(doc, "data.name.first") == NULL);
    CHECK(courier_json_path(doc, "data.") == NULL);
    CHECK(courier_json_path(doc, "nope.x") == NULL);
    courier_json_free(doc);
}

static void test_iteration_in_document_order(void) {
    courier_json *doc = parse("{\"z\":1,\"a\":2,\"m\":3,\"b\":4}");
    REQUIRE(doc);
    const char *want[] = {"z", "a", "m", "b"};
    size_t n = 0;
    for (const courier_json_iter *it = courier_json_iter_first(doc); it; it = courier_json_iter_next(doc, it)) {
        size_t len;
        const char *k = courier_json_iter_key(it, &len);
        REQUIRE(n < 4);
        CHECK_STR(k, want[n]);
        CHECK_EQ(len, 1);
        CHECK_EQ(courier_json_integer(courier_json_iter_value(it)), (long long)n + 1);
        n++;
    }
    CHECK_EQ(n, 4);
    courier_json *arr = parse("[1]");
    CHECK(courier_json_iter_first(arr) == NULL);
    courier_json *empty = parse("{}");
    CHECK(courier_json_iter_first(empty) == NULL);
    courier_json_free(arr);
    courier_json_free(empty);
    courier_json_free(doc);
}

static void test_hinted_lookups(void) {
    courier_json *doc = parse("{\"a\":1,\"b\":2,\"c\":3}");
    REQUIRE(doc);
    const courier_json_iter *hint = courier_json_iter_first(doc);
    /* In document order: each found at the hint, which moves on. */
    CHECK_EQ(courier_json_integer(courier_json_get_hinted(doc, "a", 1, &hint)), 1);
    CHECK_STR(courier_json_iter_key(hint, NULL), "b");
    CHECK_EQ(courier_json_integer(courier_json_get_hinted(doc, "b", 1, &hint)), 2);
    /* Out of order or absent: found by hash (or not), the hint stays. */
    CHECK_EQ(courier_json_integer(courier_json_get_hinted(doc, "a", 1, &hint)), 1);
    CHECK_STR(courier_json_iter_key(hint, NULL), "c");
    CHECK(courier_json_get_hinted(doc, "zz", 2, &hint) == NULL);
    CHECK_EQ(courier_json_integer(courier_json_get_hinted(doc, "c", 1, &hint)), 3);
    CHECK(hint == NULL);
    CHECK_EQ(courier_json_integer(courier_json_get_hinted(doc, "b", 1, &hint)), 2); /* NULL hint: by hash */
    CHECK_EQ(courier_json_integer(courier_json_get_hinted(doc, "b", 1, NULL)), 2);
    CHECK(courier_json_get_hinted(courier_json_get(doc, "a"), "a", 1, NULL) == NULL);
    courier_json_free(doc);
}

static void test_scalars_at_top_and_strings_with_nul(void) {
    courier_json *doc = parse("\"x\"");
    CHECK_STR(courier_json_string(doc, NULL), "x");
    courier_json_free(doc);
    doc = parse(" 42 ");
    CHECK_EQ(courier_json_integer(doc), 42);
    courier_json_free(doc);
    courier_error err;
    CHECK_EQ(parse_code("\"a\\u0000b\"", 10, NULL, &err), COURIER_E_JSON);
    courier_json_options o = {.size = sizeof o};
    REQUIRE(courier_json_options_init(&o) == COURIER_OK);
    o.flags = COURIER_JSON_ALLOW_NUL;
    courier_json *nul = NULL;
    REQUIRE(courier_json_parse(&nul, "\"a\\u0000b\"", 10, &o, &err) == COURIER_OK);
    size_t len = 0;
    const char *s = courier_json_string(nul, &len);
    CHECK_EQ(len, 3);
    CHECK(s && memcmp(s, "a\0b", 3) == 0);
    courier_json_free(nul);
}

static void test_bad_input_is_an_error(void) {
    courier_error err;
    static const struct {
        const char *text;
        int code;
    } cases[] = {
        {"", COURIER_E_JSON},
        {"{", COURIER_E_JSON},
        {"{\"a\":}", COURIER_E_JSON},
        {"[1,2,]", COURIER_E_JSON},
        {"{'a':1}", COURIER_E_JSON},
        {"nul", COURIER_E_JSON},
        {"{\"a\":1} x", COURIER_E_JSON},
        {"{\"a\":1,\"a\":2}", COURIER_E_JSON},                     /* duplicate key */
        {"\"\xff\xfe\"", COURIER_E_JSON},                          /* invalid UTF-8 */
        {"\"\xc0\xaf\"", COURIER_E_JSON},                          /* overlong */
        {"\"\\ud800\"", COURIER_E_JSON},                           /* lone surrogate */
        {"NaN", COURIER_E_JSON},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&err, 0x55, sizeof err);
        int rc = parse_code(cases[i].text, strlen(cases[i].text), NULL, &err);
        if (rc != cases[i].code) th_fail(__FILE__, __LINE__, "case %zu (%s): %d", i, cases[i].text, rc);
        CHECK_EQ(err.code, cases[i].code);
        CHECK(err.message[0] != '\0');
    }
    /* The message says where. */
    parse_code("{\"a\":1,\n \"b\": x}", 16, NULL, &err);
    CHECK_CONTAINS(err.message, "line 2");
    CHECK_EQ(parse_code(NULL, 3, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_json_parse(NULL, "1", 1, NULL, &err), COURIER_E_INVALID_ARGUMENT);
}

static char *nested(int depth, size_t *len) {
    char *s = malloc((size_t)depth * 2 + 2);
    for (int i = 0; i < depth; i++) s[i] = '[';
    for (int i = 0; i < depth; i++) s[depth + i] = ']';
    s[depth * 2] = '\0';
    *len = (size_t)depth * 2;
    return s;
}

static void test_depth_limit(void) {
    courier_error err;
    size_t len;
    char *s = nested(512, &len);
    CHECK_EQ(parse_code(s, len, NULL, &err), COURIER_OK);
    free(s);
    s = nested(513, &len);
    CHECK_EQ(parse_code(s, len, NULL, &err), COURIER_E_JSON); /* one level more than 512 parses */
    CHECK_EQ(err.code, COURIER_E_JSON);
    free(s);
    /* Very deep input (a stack-overflow attempt) is refused before parsing. */
    s = nested(200000, &len);
    CHECK_EQ(parse_code(s, len, NULL, &err), COURIER_E_JSON);
    free(s);
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.max_depth = 2;
    CHECK_EQ(parse_code("[[1]]", 5, &o, &err), COURIER_OK);
    CHECK_EQ(parse_code("[[[1]]]", 7, &o, &err), COURIER_E_JSON);
    /* Brackets inside strings do not count, escaped quotes do not end strings. */
    CHECK_EQ(parse_code("[\"[[[[\\\"[[[\"]", 13, &o, &err), COURIER_OK);
    o.max_depth = 5000; /* clamped to jansson's 2048 */
    s = nested(2048, &len);
    CHECK_EQ(parse_code(s, len, &o, &err), COURIER_OK);
    free(s);
}

static void test_size_limit(void) {
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.max_bytes = 8;
    courier_error err;
    CHECK_EQ(parse_code("[1,2,3]", 7, &o, &err), COURIER_OK);
    CHECK_EQ(parse_code("[1,2,3,4]", 9, &o, &err), COURIER_E_TOO_LARGE);
}

/* A large top-level array is parsed in parts on several threads: the same document, and the same
 * errors, as one parse. */
static void test_split_parse(void) {
    size_t n = 2000;
    char *text = malloc(n * 64 + 16);
    size_t len = 0;
    text[len++] = ' ';
    text[len++] = '[';
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(text + len, "%s{\"id\":%zu,\"s\":\"a,b]\\\"[\",\"x\":[1,{\"y\":null}]}", i ? " ," : "", i);
    text[len++] = ']';
    text[len++] = '\n';
    text[len] = '\0';
    courier_json_options one, split;
    courier_json_options_init(&one);
    one.max_threads = 1;
    courier_json_options_init(&split);
    split.max_threads = 4;
    split.parallel_min_bytes = 1;
    courier_json *a = NULL, *b = NULL;
    courier_error err;
    REQUIRE(courier_json_parse(&a, text, len, &one, &err) == COURIER_OK);
    REQUIRE(courier_json_parse(&b, text, len, &split, &err) == COURIER_OK);
    CHECK_EQ(courier_json_size(b), n);
    CHECK(courier_json_equal(a, b));
    CHECK_EQ(courier_json_integer(courier_json_path(b, "1999.id")), 1999);
    courier_json_free(a);
    courier_json_free(b);

    /* Invalid text stays invalid whatever the cut: commas at the edges of parts, garbage after. */
    static const char *bad[] = {"[1,,2,3,4]", "[,1,2,3,4]", "[1,2,3,4,]", "[1,2,3,4]]", "[1,2 3,4]", "[1,2,3,4] x",
                                "[1,2,{\"a\":1,\"a\":2},4]", "[1,2,3,4", "[1,\"2,3,4]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int threads = 2; threads <= 4; threads++) {
            split.max_threads = threads;
            courier_json *v = NULL;
            int rc = courier_json_parse(&v, bad[i], strlen(bad[i]), &split, &err);
            if (rc != COURIER_E_JSON) th_fail(__FILE__, __LINE__, "%s with %d threads: %d", bad[i], threads, rc);
            courier_json_free(v);
        }
    }
    courier_json *small = NULL;
    CHECK_EQ(courier_json_parse(&small, "[1,2,3,4]", 9, &split, &err), COURIER_OK);
    CHECK_EQ(courier_json_size(small), 4);
    courier_json_free(small);
    free(text);
}

static void test_build_and_dump(void) {
    courier_json *o = NULL, *v = NULL, *arr = NULL;
    REQUIRE(courier_json_new_object(&o) == COURIER_OK);
    courier_json_new_integer(&v, -7);
    CHECK_EQ(courier_json_object_set(o, "int", 3, v), COURIER_OK);
    courier_json_new_real(&v, 0.1);
    CHECK_EQ(courier_json_object_set(o, "real", 4, v), COURIER_OK);
    courier_json_new_real(&v, 3.0);
    CHECK_EQ(courier_json_object_set(o, "whole", 5, v), COURIER_OK);
    courier_json_new_string(&v, "a\"b\\c\n\x01/é", 10);
    CHECK_EQ(courier_json_object_set(o, "str", 3, v), COURIER_OK);
    courier_json_new_bool(&v, 1);
    CHECK_EQ(courier_json_object_set(o, "yes", 3, v), COURIER_OK);
    courier_json_new_null(&v);
    CHECK_EQ(courier_json_object_set(o, "nil", 3, v), COURIER_OK);
    courier_json_new_array(&arr);
    courier_json_new_integer(&v, 1);
    CHECK_EQ(courier_json_array_append(arr, v), COURIER_OK);
    courier_json_new_string(&v, "😀", 4);
    CHECK_EQ(courier_json_array_append(arr, v), COURIER_OK);
    CHECK_EQ(courier_json_object_set(o, "arr", 3, arr), COURIER_OK);

    char *text = NULL;
    size_t len = 0;
    courier_error err;
    REQUIRE(courier_json_dump(&text, &len, o, 0, &err) == COURIER_OK);
    CHECK_STR(text, "{\"int\":-7,\"real\":0.1,\"whole\":3.0,\"str\":\"a\\\"b\\\\c\\n\\u0001/é\",\"yes\":true,"
                    "\"nil\":null,\"arr\":[1,\"😀\"]}");
    CHECK_EQ(len, strlen(text));
    /* It reads back equal. */
    courier_json *back = NULL;
    REQUIRE(courier_json_parse(&back, text, len, NULL, &err) == COURIER_OK);
    CHECK(courier_json_equal(o, back));
    courier_free(text);

    REQUIRE(courier_json_dump(&text, &len,
                              o, COURIER_JSON_DUMP_SORT_KEYS | COURIER_JSON_DUMP_ASCII | COURIER_JSON_DUMP_ESCAPE_SLASH, &err) == COURIER_OK);
    CHECK_STR(text, "{\"arr\":[1,\"\\ud83d\\ude00\"],\"int\":-7,\"nil\":null,\"real\":0.1,"
                    "\"str\":\"a\\\"b\\\\c\\n\\u0001\\/\\u00e9\",\"whole\":3.0,\"yes\":true}");
    courier_free(text);
    courier_json *small = parse("{\"a\":[1,{}],\"b\":{}}");
    REQUIRE(courier_json_dump(&text, NULL, small, COURIER_JSON_DUMP_INDENT, &err) == COURIER_OK);
    CHECK_STR(text, "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": {}\n}");
    courier_free(text);
    courier_json_free(small);

    /* Copies are independent. */
    courier_json *copy = NULL;
    REQUIRE(courier_json_copy(&copy, back) == COURIER_OK);
    courier_json_new_integer(&v, 1);
    courier_json_object_set(copy, "extra", 5, v);
    CHECK(!courier_json_equal(copy, back));
    CHECK_EQ(courier_json_size(back), 7);
    courier_json_free(copy);
    courier_json_free(back);
    courier_json_free(o);
}

static void test_build_errors(void) {
    courier_json *o = NULL, *v = NULL, *arr = NULL;
    courier_json_new_object(&o);
    courier_json_new_array(&arr);
    CHECK_EQ(courier_json_new_string(&v, "\xff", 1), COURIER_E_INVALID_ENCODING);
    CHECK(v == NULL);
    CHECK_EQ(courier_json_new_real(&v, 1.0 / 0.0), COURIER_E_INVALID_ARGUMENT);
    courier_json_new_integer(&v, 1);
    CHECK_EQ(courier_json_object_set(o, "\xff", 1, v), COURIER_E_INVALID_ENCODING); /* v taken */
    courier_json_new_integer(&v, 1);
    CHECK_EQ(courier_json_object_set(arr, "k", 1, v), COURIER_E_INVALID_ARGUMENT); /* v taken */
    courier_json_new_integer(&v, 1);
    CHECK_EQ(courier_json_array_append(o, v), COURIER_E_INVALID_ARGUMENT); /* v taken */
    CHECK_EQ(courier_json_object_set(o, "self", 4, o), COURIER_E_INVALID_ARGUMENT); /* o taken: freed */
    courier_json_free(arr);
    char *text = (char *)"x";
    CHECK_EQ(courier_json_dump(&text, NULL, NULL, 0, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK(text == NULL);
}

/* Integers are written with every digit and the sign, at each length and at the ends of the range
 * (the writer makes two digits per division, from the end): the text is what printf writes. */
static void test_integers_dump_exactly(void) {
    const int64_t values[] = {0, 1, -1, 9, 10, -10, 99, 100, 101, 999, 1000, 12345, 99999, 100000, -100000,
                              1796180846329, -1796180846329, 999999999999999999, 1000000000000000000,
                              INT64_MAX, INT64_MIN, INT64_MIN + 1};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        courier_json *v = NULL;
        courier_json_new_integer(&v, values[i]);
        char *text = NULL, want[32];
        size_t len = 0;
        REQUIRE(courier_json_dump(&text, &len, v, 0, NULL) == COURIER_OK);
        snprintf(want, sizeof want, "%lld", (long long)values[i]);
        CHECK_STR(text, want);
        CHECK_EQ(len, strlen(want));
        courier_free(text);
        courier_json_free(v);
    }
}

static void test_reals_round_trip(void) {
    const double values[] = {0.1, 1.0 / 3.0, 1e300, -2.5e-300, 123456789.125, 5e-324, 1.7976931348623157e308};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        courier_json *v = NULL, *back = NULL;
        courier_json_new_real(&v, values[i]);
        char *text = NULL;
        size_t len = 0;
        REQUIRE(courier_json_dump(&text, &len, v, 0, NULL) == COURIER_OK);
        REQUIRE(courier_json_parse(&back, text, len, NULL, NULL) == COURIER_OK);
        CHECK_EQ(courier_json_typeof(back), COURIER_JSON_REAL);
        if (courier_json_real(back) != values[i]) th_fail(__FILE__, __LINE__, "%s does not read back", text);
        courier_free(text);
        courier_json_free(v);
        courier_json_free(back);
    }
}

/* Numbers beyond int64 and double are valid JSON (RFC 8259): the document is accepted, fields
 * that fit read as before, and the others keep their text, read exactly where they fit. */
static void test_numbers_beyond_int64_and_double(void) {
    courier_json *doc = parse("{\"a\":1,\"b\":18446744073709551615,\"c\":-9223372036854775809,\"d\":1e400,"
                              "\"e\":[123456789012345678901234567890,-1E+400],\"f\":2.5}");
    CHECK_EQ(courier_json_integer(courier_json_get(doc, "a")), 1);
    const courier_json *b = courier_json_get(doc, "b"), *c = courier_json_get(doc, "c"), *d = courier_json_get(doc, "d");
    CHECK_EQ(courier_json_typeof(b), COURIER_JSON_REAL);
    CHECK_EQ(courier_json_typeof(d), COURIER_JSON_REAL);
    CHECK(courier_json_string(b, NULL) == NULL); /* a number, never a string */
    CHECK_EQ(courier_json_integer(b), 0);
    CHECK(courier_json_real(b) == 18446744073709551615.0);
    CHECK(isinf(courier_json_real(d)));
    size_t n = 0;
    const char *text = courier_json_number_text(b, &n);
    REQUIRE(text);
    CHECK_EQ(n, 20);
    CHECK(memcmp(text, "18446744073709551615", 20) == 0);
    CHECK(courier_json_number_text(courier_json_get(doc, "a"), &n) == NULL);
    CHECK(courier_json_number_text(courier_json_get(doc, "f"), NULL) == NULL);
    uint64_t u = 0;
    int64_t i = 0;
    double r = 0;
    CHECK_EQ(courier_json_read_uint64(&u, b), COURIER_OK);
    CHECK(u == UINT64_MAX);
    CHECK_EQ(courier_json_read_int64(&i, b), COURIER_E_NUMBER_RANGE);
    CHECK_EQ(courier_json_read_int64(&i, c), COURIER_E_NUMBER_RANGE);
    CHECK_EQ(courier_json_read_uint64(&u, c), COURIER_E_NUMBER_RANGE);
    CHECK_EQ(courier_json_read_double(&r, c), COURIER_OK);
    CHECK(r == -9223372036854775809.0);
    CHECK_EQ(courier_json_read_double(&r, d), COURIER_E_NUMBER_RANGE); /* an error only when read as a double */
    CHECK_EQ(courier_json_read_uint64(&u, courier_json_path(doc, "e.0")), COURIER_E_NUMBER_RANGE); /* beyond uint64 */
    CHECK_EQ(courier_json_read_int64(&i, courier_json_get(doc, "a")), COURIER_OK);
    CHECK_EQ(i, 1);
    CHECK_EQ(courier_json_read_uint64(&u, courier_json_get(doc, "f")), COURIER_E_NUMBER_RANGE); /* a fraction */
    CHECK_EQ(courier_json_read_double(&r, courier_json_get(doc, "f")), COURIER_OK);
    CHECK(r == 2.5);
    CHECK_EQ(courier_json_read_double(&r, doc), COURIER_E_INVALID_ARGUMENT); /* not a number */
    CHECK_EQ(courier_json_read_double(NULL, d), COURIER_E_INVALID_ARGUMENT);
    CHECK_STR(courier_strerror(COURIER_E_NUMBER_RANGE), "a JSON number does not fit the type it was read as");
    /* Written back exactly as it came; a copy is equal. */
    char *out = NULL;
    CHECK_EQ(courier_json_dump(&out, NULL, doc, 0, NULL), COURIER_OK);
    CHECK_STR(out, "{\"a\":1,\"b\":18446744073709551615,\"c\":-9223372036854775809,\"d\":1e400,"
                   "\"e\":[123456789012345678901234567890,-1E+400],\"f\":2.5}");
    courier_free(out);
    courier_json *copy = NULL;
    CHECK_EQ(courier_json_copy(&copy, doc), COURIER_OK);
    CHECK(courier_json_equal(copy, doc));
    courier_json_free(copy);
    courier_json_free(doc);
    /* A string that looks like the internal form is still refused by the builders (not UTF-8). */
    courier_json *s = NULL;
    CHECK_EQ(courier_json_new_string(&s, "\xff" "1", 2), COURIER_E_INVALID_ENCODING);
    /* A byte order mark before the text is ignored. */
    doc = parse("\xEF\xBB\xBF{\"a\":1}");
    CHECK_EQ(courier_json_integer(courier_json_get(doc, "a")), 1);
    courier_json_free(doc);
}

static void test_type_names(void) {
    CHECK_STR(courier_json_type_name(COURIER_JSON_STRING), "string");
    CHECK_STR(courier_json_type_name(COURIER_JSON_NONE), "nothing");
    CHECK_STR(courier_json_type_name(99), "unknown");
    CHECK_STR(courier_strerror(COURIER_E_JSON), "invalid JSON");
    CHECK_EQ(courier_json_options_init(NULL), COURIER_E_INVALID_ARGUMENT);
    courier_json_options zero = {.size = 0};
    CHECK_EQ(courier_json_options_init(&zero), COURIER_E_INVALID_ARGUMENT);
    /* A newer caller's struct is larger: init writes only the fields this library has and keeps the
     * caller's size; parse reads only them. */
    _Alignas(courier_json_options) unsigned char raw[sizeof(courier_json_options) + 8];
    memset(raw, 0xAB, sizeof raw);
    courier_json_options *newer = (courier_json_options *)(void *)raw;
    newer->size = sizeof raw;
    CHECK_EQ(courier_json_options_init(newer), COURIER_OK);
    CHECK_EQ(newer->size, sizeof raw);
    CHECK_EQ(newer->max_depth, 512);
    CHECK_EQ(raw[sizeof(courier_json_options)], 0xAB);
    courier_json *doc = NULL;
    CHECK_EQ(courier_json_parse(&doc, "[1,2]", 5, newer, NULL), COURIER_OK);
    courier_json_free(doc);
}

TESTS_MAIN(T(test_accessors), T(test_integers_dump_exactly), T(test_key_paths), T(test_iteration_in_document_order), T(test_hinted_lookups),
           T(test_scalars_at_top_and_strings_with_nul), T(test_bad_input_is_an_error), T(test_depth_limit),
           T(test_size_limit), T(test_split_parse), T(test_build_and_dump), T(test_build_errors), T(test_reals_round_trip),
           T(test_numbers_beyond_int64_and_double), T(test_type_names))
