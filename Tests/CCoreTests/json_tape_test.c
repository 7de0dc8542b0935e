/*
 * json_tape_test.c — the tape parser (courier_json_tape_*): layout, lookups with hints, escapes and
 * surrogates, numbers (int64 edges, beyond 2^53, negative zero, exponents, big and tiny reals),
 * malformed text, UTF-8, duplicate keys, depth and size limits, and agreement with
 * courier_json_parse (jansson) on every input: same acceptance, same values.
 */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static courier_json_tape *tape(const char *text) {
    courier_json_tape *t = NULL;
    courier_error err;
    int rc = courier_json_tape_parse(&t, text, strlen(text), NULL, &err);
    if (rc != COURIER_OK) th_fail(__FILE__, __LINE__, "tape parse of %s failed (%d): %s", text, rc, err.message);
    return t;
}

static int64_t integer_of(const courier_json_tape_entry *e) { return (int64_t)e->payload; }

static double real_of(const courier_json_tape_entry *e) {
    double d;
    memcpy(&d, &e->payload, sizeof d);
    return d;
}

static const char *string_of(const courier_json_tape *t, size_t i, size_t *len) {
    const courier_json_tape_entry *e = courier_json_tape_entries(t, NULL) + i;
    if (len) *len = e->length;
    return (const char *)courier_json_tape_text(t) + e->payload;
}

/* Whether the tape's value at i equals the jansson value v; *next receives the index after it. */
static int same(const courier_json_tape *t, size_t i, const courier_json *v) {
    size_t count = 0;
    const courier_json_tape_entry *e = courier_json_tape_entries(t, &count);
    if (i >= count) return 0;
    const courier_json_tape_entry *x = &e[i];
    if (x->type != courier_json_typeof(v)) return 0;
    switch (x->type) {
    case COURIER_JSON_OBJECT: {
        if (x->length != courier_json_size(v)) return 0;
        size_t k = i + 1, hint = 0;
        while (k < x->payload) {
            size_t val = k + 1, next = courier_json_tape_skip(t, val);
            if (!(e[k].flags & COURIER_JSON_TAPE_DEAD)) {
                size_t len;
                const char *key = string_of(t, k, &len);
                if (courier_json_tape_get(t, i, key, len, &hint) != val) return 0;
                if (!same(t, val, courier_json_getn(v, key, len))) return 0;
            }
            k = next;
        }
        return k == x->payload;
    }
    case COURIER_JSON_ARRAY: {
        if (x->length != courier_json_size(v)) return 0;
        size_t k = i + 1;
        for (size_t n = 0; n < x->length; n++) {
            if (!same(t, k, courier_json_at(v, n))) return 0;
            k = courier_json_tape_skip(t, k);
        }
        return k == x->payload;
    }
    case COURIER_JSON_STRING: {
        size_t len = 0, jlen = 0;
        const char *s = string_of(t, i, &len);
        const char *j = courier_json_string(v, &jlen);
        return len == jlen && memcmp(s, j, len) == 0 && s[len] == '\0';
    }
    case COURIER_JSON_INTEGER: return integer_of(x) == courier_json_integer(v);
    case COURIER_JSON_REAL: {
        double a = real_of(x), b = courier_json_real(v);
        size_t n1 = 0, n2 = 0;
        const char *s1 = courier_json_tape_number_text(t, i, &n1), *s2 = courier_json_number_text(v, &n2);
        if (!s1 != !s2 || n1 != n2 || (s1 && memcmp(s1, s2, n1) != 0)) return 0;
        return memcmp(&a, &b, sizeof a) == 0;
    }
    case COURIER_JSON_BOOL: return (x->flags & COURIER_JSON_TAPE_TRUE ? 1 : 0) == courier_json_bool(v);
    case COURIER_JSON_NULL: return 1;
    }
    return 0;
}

/* Both parsers on the text: the same code, and on success the same document (also through
 * courier_json_tape_from_value). Returns the code. */
static int agree_opts(const char *text, size_t len, const courier_json_options *o) {
    courier_json *doc = NULL;
    courier_json_tape *t = NULL, *t2 = NULL;
    courier_error e1, e2;
    int rc1 = courier_json_parse(&doc, text, len, o, &e1);
    int rc2 = courier_json_tape_parse(&t, text, len, o, &e2);
    if (rc1 != rc2)
        th_fail(__FILE__, __LINE__, "jansson %d (%s), tape %d (%s) on %.*s", rc1, e1.message, rc2, e2.message,
                (int)(len > 200 ? 200 : len), text);
    if (rc2 != COURIER_OK) {
        CHECK(t == NULL);
        CHECK(e2.message[0] != '\0');
        /* One error, the same on both paths: line, column and the byte offset of the offending byte. */
        if (strcmp(e1.message, e2.message) != 0)
            th_fail(__FILE__, __LINE__, "errors differ: jansson path '%s', tape '%s'", e1.message, e2.message);
    } else {
        if (!same(t, 0, doc)) th_fail(__FILE__, __LINE__, "documents differ on %.*s", (int)(len > 200 ? 200 : len), text);
        CHECK_EQ(courier_json_tape_skip(t, 0), ({ size_t n; courier_json_tape_entries(t, &n); n; }));
        CHECK_EQ(courier_json_tape_from_value(&t2, doc, NULL), COURIER_OK);
        CHECK(same(t2, 0, doc));
    }
    courier_json_free(doc);
    courier_json_tape_free(t);
    courier_json_tape_free(t2);
    return rc2;
}

static int agree(const char *text) { return agree_opts(text, strlen(text), NULL); }

static void test_layout_and_lookups(void) {
    courier_json_tape *t = tape("{\"id\":7,\"name\":\"a\",\"tags\":[\"x\",{\"k\":null}],\"on\":true,\"off\":false,\"p\":2.5}");
    size_t n = 0;
    const courier_json_tape_entry *e = courier_json_tape_entries(t, &n);
    REQUIRE(e);
    CHECK_EQ(n, 17);
    CHECK_EQ(e[0].type, COURIER_JSON_OBJECT);
    CHECK_EQ(e[0].length, 6);
    CHECK_EQ(e[0].payload, 17);
    CHECK_EQ(e[1].type, COURIER_JSON_STRING);
    CHECK_STR(string_of(t, 1, NULL), "id");
    CHECK_EQ(integer_of(&e[2]), 7);
    size_t hint = 0;
    /* In order: each found where the hint points. */
    CHECK_EQ(courier_json_tape_get(t, 0, "id", 2, &hint), 2);
    CHECK_EQ(hint, 3);
    CHECK_EQ(courier_json_tape_get(t, 0, "name", 4, &hint), 4);
    size_t tags = courier_json_tape_get(t, 0, "tags", 4, &hint);
    CHECK_EQ(e[tags].type, COURIER_JSON_ARRAY);
    CHECK_EQ(e[tags].length, 2);
    CHECK_EQ(courier_json_tape_skip(t, tags), 11);
    size_t inner = courier_json_tape_skip(t, tags + 1);
    CHECK_EQ(e[inner].type, COURIER_JSON_OBJECT);
    CHECK_EQ(e[courier_json_tape_get(t, inner, "k", 1, NULL)].type, COURIER_JSON_NULL);
    /* Out of order and missing: the search wraps around. */
    CHECK_EQ(courier_json_tape_get(t, 0, "id", 2, &hint), 2);
    size_t on = courier_json_tape_get(t, 0, "on", 2, &hint);
    CHECK(e[on].flags & COURIER_JSON_TAPE_TRUE);
    CHECK(!(e[courier_json_tape_get(t, 0, "off", 3, &hint)].flags & COURIER_JSON_TAPE_TRUE));
    CHECK(real_of(&e[courier_json_tape_get(t, 0, "p", 1, &hint)]) == 2.5);
    CHECK_EQ(courier_json_tape_get(t, 0, "missing", 7, &hint), 0);
    CHECK_EQ(courier_json_tape_get(t, 0, "i", 1, NULL), 0);
    CHECK_EQ(courier_json_tape_get(t, tags, "x", 1, NULL), 0); /* not an object */
    CHECK_EQ(courier_json_tape_get(t, 999, "x", 1, NULL), 0);
    CHECK_EQ(courier_json_tape_get(NULL, 0, "x", 1, NULL), 0);
    /* Key paths, as courier_json_path. */
    size_t at = 99;
    CHECK_EQ(courier_json_tape_path(&at, t, 0, ""), 1);
    CHECK_EQ(at, 0);
    CHECK_EQ(courier_json_tape_path(&at, t, 0, NULL), 1);
    CHECK_EQ(courier_json_tape_path(&at, t, 0, "tags"), 1);
    CHECK_EQ(at, tags);
    CHECK_EQ(courier_json_tape_path(&at, t, 0, "tags.1.k"), 1);
    CHECK_EQ(e[at].type, COURIER_JSON_NULL);
    CHECK_EQ(courier_json_tape_path(&at, t, 0, "tags.0"), 1);
    CHECK_STR(string_of(t, at, NULL), "x");
    CHECK_EQ(courier_json_tape_path(&at, t, tags, "1"), 1);
    CHECK_EQ(at, inner);
    const char *missing[] = {"tags.2", "tags.x", "tags.", "id.0", "nothing", "tags.1.k.z", "tags.-1", "tags.01x"};
    for (size_t i = 0; i < sizeof missing / sizeof *missing; i++) CHECK_EQ(courier_json_tape_path(&at, t, 0, missing[i]), 0);
    CHECK_EQ(courier_json_tape_path(NULL, t, 0, "id"), 0);
    courier_json_tape_free(t);
    courier_json_tape_free(NULL);
    CHECK(courier_json_tape_entries(NULL, &n) == NULL);
    CHECK_EQ(n, 0);
    CHECK(courier_json_tape_text(NULL) == NULL);
    CHECK_EQ(courier_json_tape_parse(NULL, "1", 1, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_json_tape_from_value(&t, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
}

static void test_scalars_at_top(void) {
    const char *texts[] = {"1", " \"s\" ", "true", "false", "null", "-0.5e-3", "[]", "{}", "[[],{}]", "{\"\":1}"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) CHECK_EQ(agree(texts[i]), COURIER_OK);
}

static void test_escapes_and_surrogates(void) {
    courier_json_tape *t = tape("[\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\",\"\\u00e9\\u20AC\",\"\\ud83d\\ude00!\",\"caf\xc3\xa9\"]");
    size_t len;
    const char *s = string_of(t, 1, &len);
    CHECK_EQ(len, 12);
    CHECK(memcmp(s, "a\"b\\c/d\b\f\n\r\t", 12) == 0);
    CHECK_STR(string_of(t, 2, NULL), "\xc3\xa9\xe2\x82\xac");
    CHECK_STR(string_of(t, 3, NULL), "\xf0\x9f\x98\x80!");
    CHECK_STR(string_of(t, 4, NULL), "caf\xc3\xa9");
    courier_json_tape_free(t);
    const char *ok[] = {"\"\\u0041\\u0062\"", "\"\\uDBFF\\uDFFF\"", "\"x\\u00e9y\\ud834\\udd1ez\"", "\"\xf4\x8f\xbf\xbf\"",
                        "\"\\\\\\\\\"", "{\"\\u006b\":1,\"k2\":2}", "\"\x7f\""};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) CHECK_EQ(agree(ok[i]), COURIER_OK);
    const char *bad[] = {"\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\ud800x\"", "\"\\u12\"", "\"\\u12G4\"",
                         "\"\\x\"", "\"\\u0000\"", "\"a\nb\"", "\"tab\there\"", "\"open", "\"\\", "\"\\u"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_EQ(agree(bad[i]), COURIER_E_JSON);
    /* \u0000 with ALLOW_NUL: a string with a NUL inside, read by its length. */
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.flags = COURIER_JSON_ALLOW_NUL;
    CHECK_EQ(agree_opts("\"a\\u0000b\"", 10, &o), COURIER_OK);
    CHECK_EQ(courier_json_tape_parse(&t, "\"a\\u0000b\"", 10, &o, NULL), COURIER_OK);
    CHECK(memcmp(string_of(t, 0, &len), "a\0b", 3) == 0);
    CHECK_EQ(len, 3);
    courier_json_tape_free(t);
    CHECK_EQ(agree_opts("{\"\\u0000k\":1}", 13, &o), COURIER_E_JSON); /* never in keys, as jansson */
}

static void test_invalid_utf8(void) {
    const char *bad[] = {"\"\x80\"", "\"\xc0\xaf\"", "\"\xc3\"", "\"\xe0\x80\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
                         "\"\xf8\x88\x80\x80\x80\"", "\"\xff\"", "[\"ok\",\"\xc3\x28\"]",
                         "{\"k\xc3\":1}"}; /* a byte order mark before the text is fine: test_byte_order_mark */
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_EQ(agree(bad[i]), COURIER_E_JSON);
    courier_error err;
    courier_json_tape *t = NULL;
    CHECK_EQ(courier_json_tape_parse(&t, "[1,\"\xff\"]", 7, NULL, &err), COURIER_E_JSON);
    CHECK_CONTAINS(err.message, "byte 4"); /* where: the rest of the input is valid JSON */
}

/* Plain bytes are skipped 8 at a time: every kind of byte that is not plain, at every offset of a
 * word and across word ends, and strings of every length around them, read as jansson reads them
 * (accepted or refused alike). */
static void test_strings_word_at_a_time(void) {
    static const char *const specials[] = {"\\\"", "\\\\", "\\n", "\\u00e9", "\xC3\xA9", "\xE2\x82\xAC", "\x7F", "\x01",
                                           "\x1F", "\xFF", "\xC3", "\"", "\t", " ", "~"};
    char text[256], body[64];
    for (size_t n = 0; n <= 40; n++) { /* every length, no special byte */
        memset(body, 'a' + (int)(n % 26), n);
        body[n] = '\0';
        snprintf(text, sizeof text, "[\"%s\",\"%s\"]", body, body);
        CHECK_EQ(agree(text), COURIER_OK);
    }
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) {
        for (size_t at = 0; at <= 24; at++) {
            memset(body, 'x', at);
            body[at] = '\0';
            snprintf(text, sizeof text, "{\"k%s\":\"%s%syyyyyyyyyyyyyyyyy\"}", body, body, specials[k]);
            agree(text);
        }
    }
}

static void test_numbers(void) {
    courier_json_tape *t = tape("[9007199254740993,-9223372036854775808,9223372036854775807,-0,-0.0,0.0,1e2,1E+2,"
                                "2.5e-3,1.7976931348623157e308,4.9e-324,1e-400,0.1,123456789012345678901234567890.5,"
                                "0.000000000000000000000000000001,-1.5,1.00000000000000011102230246251565404236316680908203125]");
    const courier_json_tape_entry *e = courier_json_tape_entries(t, NULL);
    CHECK_EQ(e[1].type, COURIER_JSON_INTEGER);
    CHECK_EQ(integer_of(&e[1]), INT64_C(9007199254740993)); /* beyond 2^53: exact */
    CHECK_EQ(integer_of(&e[2]), INT64_MIN);
    CHECK_EQ(integer_of(&e[3]), INT64_MAX);
    CHECK_EQ(e[4].type, COURIER_JSON_INTEGER); /* "-0" is the integer 0, as jansson */
    CHECK_EQ(integer_of(&e[4]), 0);
    CHECK_EQ(e[5].type, COURIER_JSON_REAL);
    CHECK(real_of(&e[5]) == 0.0 && signbit(real_of(&e[5])));
    CHECK(!signbit(real_of(&e[6])));
    CHECK_EQ(e[7].type, COURIER_JSON_REAL);
    CHECK(real_of(&e[7]) == 100.0 && real_of(&e[8]) == 100.0);
    CHECK(real_of(&e[9]) == 2.5e-3);
    CHECK(real_of(&e[10]) == 1.7976931348623157e308);
    CHECK(real_of(&e[11]) == 4.9e-324);
    CHECK(real_of(&e[12]) == 0.0); /* underflow is not an error */
    CHECK(real_of(&e[13]) == 0.1);
    CHECK(real_of(&e[14]) == 123456789012345678901234567890.5);
    CHECK(real_of(&e[15]) == 1e-30);
    CHECK(real_of(&e[16]) == -1.5);
    CHECK(real_of(&e[17]) == 1.0); /* exactly halfway: rounded to even */
    courier_json_tape_free(t);
    CHECK_EQ(agree("[1.00000000000000011102230246251565404236316680908203125,1.0000000000000001110223024625156540423631668"
                   "0908203125000000000000000000000000001]"), COURIER_OK);
    const char *ok[] = {"[0,-1,1.5,-1.5e10,1e22,1e23,9007199254740992.0,9007199254740993.0,123456789e-30,5e-324]",
                        "[0.30000000000000004,2.2250738585072014e-308,2.2250738585072011e-308,1e-22,8.5e-23]",
                        "[-9223372036854775807,922337203685477580,1000000000000000000000e-10,1.2345678901234567890123e5]",
                        "[0e10,0E-10,-0e+1,10000000000000000000000000000000000000000e-20]"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) CHECK_EQ(agree(ok[i]), COURIER_OK);
    const char *bad[] = {"01", "-01", "1.", ".5", "-", "+1", "1e", "1e+", "1.e5", "0x10", "NaN", "Infinity",
                         "-Infinity", "1.5.2", "[1 2]", "- 1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_EQ(agree(bad[i]), COURIER_E_JSON);
}

static void test_malformed(void) {
    const char *bad[] = {"", " ", "{", "[", "[1,]", "[,1]", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{,}", "{1:2}",
                         "{\"a\" 1}", "[1}", "{\"a\":1]", "]", "}", "tru", "nul", "falsey", "truefalse", "[1][2]",
                         "1 2", "\"a\" x", "{'a':1}", "[\x00]", "nan", "[1,,2]", "{\"a\":1 \"b\":2}", "\x01"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_EQ(agree(bad[i]), COURIER_E_JSON);
    CHECK_EQ(agree_opts("[1]\0", 4, NULL), COURIER_E_JSON);
    /* jansson 2.14 drops a NUL byte right after a number or a literal ("[1,2\0]" parses there);
     * the tape refuses every NUL outside strings. */
    const char *nuls[] = {"[1,2\0]", "[true\0]", "null\0", "{\"a\":1\0}"};
    const size_t nul_lens[] = {6, 7, 5, 8};
    for (size_t i = 0; i < 4; i++) {
        courier_json_tape *nt = NULL;
        CHECK_EQ(courier_json_tape_parse(&nt, nuls[i], nul_lens[i], NULL, NULL), COURIER_E_JSON);
        CHECK(nt == NULL);
    }
    courier_error err;
    courier_json_tape *t = NULL;
    CHECK_EQ(courier_json_tape_parse(&t, "{\n  \"a\": 1,\n  \"b\" 2}", 21, NULL, &err), COURIER_E_JSON);
    CHECK_CONTAINS(err.message, "line 3"); /* where */
    CHECK(t == NULL);
    CHECK_EQ(agree(" \t\r\n[ 1 , { \"a\" : [ ] } ]\n "), COURIER_OK);
}

static void test_duplicate_keys(void) {
    CHECK_EQ(agree("{\"a\":1,\"a\":2}"), COURIER_E_JSON);
    CHECK_EQ(agree("{\"a\":1,\"b\":{\"c\":1,\"c\":1}}"), COURIER_E_JSON);
    CHECK_EQ(agree("{\"a\":1,\"\\u0061\":2}"), COURIER_E_JSON); /* equal once unescaped */
    CHECK_EQ(agree("{\"a\":{\"a\":1},\"b\":[{\"a\":1},{\"a\":2}]}"), COURIER_OK);
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.flags = COURIER_JSON_ALLOW_DUPLICATE_KEYS;
    const char *text = "{\"a\":1,\"b\":2,\"a\":[3],\"a\":4}";
    CHECK_EQ(agree_opts(text, strlen(text), &o), COURIER_OK);
    courier_json_tape *t = NULL;
    CHECK_EQ(courier_json_tape_parse(&t, text, strlen(text), &o, NULL), COURIER_OK);
    const courier_json_tape_entry *e = courier_json_tape_entries(t, NULL);
    CHECK_EQ(e[0].length, 2);
    CHECK_EQ(integer_of(&e[courier_json_tape_get(t, 0, "a", 1, NULL)]), 4); /* the last wins */
    courier_json_tape_free(t);
    /* Large objects (sorted check): 40 distinct keys, then one repeated. */
    char big[2048];
    size_t n = 0;
    n += (size_t)snprintf(big + n, sizeof big - n, "{");
    for (int i = 0; i < 40; i++) n += (size_t)snprintf(big + n, sizeof big - n, "%s\"key%d\":%d", i ? "," : "", i, i);
    CHECK_EQ(agree_opts(big, n + (size_t)snprintf(big + n, sizeof big - n, "}"), NULL), COURIER_OK);
    n += (size_t)snprintf(big + n, sizeof big - n, ",\"key17\":\"again\",\"key3\":0}");
    CHECK_EQ(agree_opts(big, n, NULL), COURIER_E_JSON);
    courier_error err;
    CHECK_EQ(courier_json_tape_parse(&t, big, n, NULL, &err), COURIER_E_JSON);
    CHECK_EQ(agree_opts(big, n, &o), COURIER_OK); /* the duplicate was the fault: allowed, it parses */
    CHECK_EQ(courier_json_tape_parse(&t, big, n, &o, NULL), COURIER_OK);
    e = courier_json_tape_entries(t, NULL);
    CHECK_EQ(e[0].length, 40);
    CHECK_STR(string_of(t, courier_json_tape_get(t, 0, "key17", 5, NULL), NULL), "again");
    courier_json_tape_free(t);
}

/* Objects of up to 16 keys (the pairwise check, which compares a key with the earlier ones only
 * when a bit of its length and end bytes says one may equal it): keys of equal lengths, equal ends
 * and escapes, each object parsed as jansson parses it, with duplicates refused and allowed (the
 * last wins, the earlier ones DEAD). */
static void test_duplicate_keys_in_small_objects(void) {
    static const char *pool[] = {"",   "a",   "b",    "ab",    "ba",  "aa", "aba", "abba", "\\u0061", "a\\u0062",
                                 "ac", "axa", "ayyb", "azzzb", "bab", "ca", "a\\/", "a/",  "\\n",     "x"};
    enum { NPOOL = sizeof pool / sizeof pool[0] };
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.flags = COURIER_JSON_ALLOW_DUPLICATE_KEYS;
    uint32_t x = 12345;
    for (int round = 0; round < 400; round++) {
        char text[1024];
        size_t n = 0;
        x = x * 1103515245u + 12345u;
        int keys = 2 + (int)((x >> 16) % 15); /* 2..16 */
        n += (size_t)snprintf(text + n, sizeof text - n, "{");
        for (int k = 0; k < keys; k++) {
            x = x * 1103515245u + 12345u;
            /* The first rounds draw from a few keys (many duplicates), later ones from all. */
            unsigned pick = (x >> 16) % (round < 200 ? 6u : (unsigned)NPOOL);
            n += (size_t)snprintf(text + n, sizeof text - n, "%s\"%s\":%d", k ? "," : "", pool[pick], k);
        }
        n += (size_t)snprintf(text + n, sizeof text - n, "}");
        int plain = agree_opts(text, n, NULL);
        CHECK(plain == COURIER_OK || plain == COURIER_E_JSON);
        CHECK_EQ(agree_opts(text, n, &o), COURIER_OK);
    }
}

static void test_depth_and_size_limits(void) {
    char deep[1300];
    for (int i = 0; i < 600; i++) deep[i] = '[', deep[1199 - i] = ']';
    courier_json_tape *t = NULL;
    courier_error err;
    CHECK_EQ(courier_json_tape_parse(&t, deep, 1200, NULL, &err), COURIER_E_JSON);
    CHECK_EQ(err.code, COURIER_E_JSON);
    /* The default limit is the one courier_setting_default tells: that deep parses, one more not. */
    int64_t limit = 0;
    REQUIRE(courier_setting_default(&limit, COURIER_SETTING_JSON_MAX_DEPTH) == COURIER_OK);
    REQUIRE(limit > 0 && limit < 599);
    size_t skip = (size_t)(600 - limit); /* the middle 2 * limit bytes of deep: limit levels */
    CHECK_EQ(courier_json_tape_parse(&t, deep + skip, (size_t)(2 * limit), NULL, &err), COURIER_OK);
    courier_json_tape_free(t);
    t = NULL;
    CHECK_EQ(courier_json_tape_parse(&t, deep + skip - 1, (size_t)(2 * limit + 2), NULL, &err), COURIER_E_JSON);
    CHECK(t == NULL);
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.max_depth = 600;
    CHECK_EQ(agree_opts(deep, 1200, &o), COURIER_OK);
    o.max_depth = 599;
    CHECK_EQ(agree_opts(deep, 1200, &o), COURIER_E_JSON);
    o.max_depth = 1;
    CHECK_EQ(agree_opts("[1,2]", 5, &o), COURIER_OK);
    CHECK_EQ(agree_opts("[[1]]", 5, &o), COURIER_E_JSON);
    CHECK_EQ(agree_opts("{\"a\":{}}", 8, &o), COURIER_E_JSON);
    /* Deep but unterminated: the limit speaks first in both. */
    o.max_depth = 4;
    CHECK_EQ(agree_opts("[[[[[[[[", 8, &o), COURIER_E_JSON);
    courier_json_options_init(&o);
    o.max_bytes = 4;
    CHECK_EQ(courier_json_tape_parse(&t, "[1,2]", 5, &o, &err), COURIER_E_TOO_LARGE);
    CHECK(t == NULL);
    CHECK_EQ(courier_json_tape_parse(&t, "[12]", 4, &o, &err), COURIER_OK);
    courier_json_tape_free(t);
}

static void test_from_value_of_built_values(void) {
    courier_json *obj = NULL, *s = NULL, *r = NULL;
    courier_json_new_object(&obj);
    courier_json_new_string(&s, "v\0w", 3);
    courier_json_object_set(obj, "k", 1, s);
    courier_json_new_real(&r, -0.0);
    courier_json_object_set(obj, "r", 1, r);
    courier_json_tape *t = NULL;
    CHECK_EQ(courier_json_tape_from_value(&t, obj, NULL), COURIER_OK);
    CHECK(same(t, 0, obj));
    size_t len;
    CHECK(memcmp(string_of(t, courier_json_tape_get(t, 0, "k", 1, NULL), &len), "v\0w", 4) == 0);
    CHECK_EQ(len, 3);
    courier_json_tape_free(t);
    courier_json_free(obj);
}

/* A larger generated document with every kind of value, escapes and nesting. */
static void test_generated_document(void) {
    size_t cap = 1 << 20, n = 0;
    char *text = malloc(cap);
    REQUIRE(text);
    n += (size_t)snprintf(text + n, cap - n, "[");
    for (int i = 0; i < 2000; i++) {
        n += (size_t)snprintf(text + n, cap - n,
                              "%s{\"id\":%d,\"name\":\"item \\\"%d\\\" \\u00e9\\ud83d\\ude00\",\"price\":%d.%02de%d,"
                              "\"neg\":-%d,\"on\":%s,\"none\":null,\"tags\":[\"a\",\"b\\n\",[]],\"o\":{\"x\":{}}}",
                              i ? "," : "", i, i, i, i % 100, i % 7 - 3, i * 7919, i % 2 ? "true" : "false");
    }
    n += (size_t)snprintf(text + n, cap - n, "]");
    CHECK_EQ(agree_opts(text, n, NULL), COURIER_OK);
    free(text);
}

/* Numbers beyond int64 and double are valid JSON (RFC 8259): accepted on both paths, kept as their
 * text, read exactly where they fit and refused with COURIER_E_NUMBER_RANGE where they do not. */
static void test_numbers_beyond_int64_and_double(void) {
    const char *ok[] = {"9223372036854775808", "-9223372036854775809", "123456789012345678901234567890", "1e309",
                        "-1e400", "{\"a\":1,\"b\":18446744073709551615}", "[18446744073709551616,1E+400,-0.5e99999]",
                        "{\"deep\":[{\"n\":99999999999999999999999999999999999999999999999999999999999999999999999999}]}"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) CHECK_EQ(agree(ok[i]), COURIER_OK);

    courier_json_tape *t = tape("{\"a\":1,\"b\":18446744073709551615,\"c\":-9223372036854775809,\"d\":1e400,\"e\":2.5}");
    const courier_json_tape_entry *e = courier_json_tape_entries(t, NULL);
    size_t a = courier_json_tape_get(t, 0, "a", 1, NULL), b = courier_json_tape_get(t, 0, "b", 1, NULL),
           c = courier_json_tape_get(t, 0, "c", 1, NULL), d = courier_json_tape_get(t, 0, "d", 1, NULL),
           r = courier_json_tape_get(t, 0, "e", 1, NULL);
    CHECK_EQ(e[a].type, COURIER_JSON_INTEGER);
    CHECK_EQ(integer_of(&e[a]), 1);
    CHECK_EQ(e[b].type, COURIER_JSON_REAL);
    CHECK(e[b].flags & COURIER_JSON_TAPE_NUMBER_TEXT);
    CHECK(real_of(&e[b]) == 18446744073709551615.0); /* the nearest double, for readers of the payload */
    CHECK(isinf(real_of(&e[d])) && real_of(&e[d]) > 0);
    CHECK(!(e[r].flags & COURIER_JSON_TAPE_NUMBER_TEXT));
    size_t n = 0;
    const char *s = courier_json_tape_number_text(t, b, &n);
    REQUIRE(s);
    CHECK_EQ(n, 20);
    CHECK(memcmp(s, "18446744073709551615", 20) == 0);
    CHECK(courier_json_tape_number_text(t, a, &n) == NULL);
    CHECK_EQ(n, 0);
    CHECK(courier_json_tape_number_text(t, 999, NULL) == NULL);
    uint64_t u = 0;
    int64_t i64 = 0;
    double dv = 0;
    CHECK_EQ(courier_json_tape_read_uint64(&u, t, b), COURIER_OK);
    CHECK(u == UINT64_MAX);
    CHECK_EQ(courier_json_tape_read_int64(&i64, t, b), COURIER_E_NUMBER_RANGE);
    CHECK_EQ(courier_json_tape_read_double(&dv, t, b), COURIER_OK);
    CHECK(dv == 18446744073709551615.0);
    CHECK_EQ(courier_json_tape_read_uint64(&u, t, c), COURIER_E_NUMBER_RANGE);
    CHECK_EQ(courier_json_tape_read_int64(&i64, t, c), COURIER_E_NUMBER_RANGE);
    CHECK_EQ(courier_json_tape_read_double(&dv, t, c), COURIER_OK);
    CHECK(dv == -9223372036854775809.0);
    CHECK_EQ(courier_json_tape_read_double(&dv, t, d), COURIER_E_NUMBER_RANGE); /* read as a double: the error */
    CHECK_EQ(courier_json_tape_read_uint64(&u, t, d), COURIER_E_NUMBER_RANGE);
    CHECK_EQ(courier_json_tape_read_int64(&i64, t, a), COURIER_OK);
    CHECK_EQ(i64, 1);
    CHECK_EQ(courier_json_tape_read_uint64(&u, t, a), COURIER_OK);
    CHECK(u == 1);
    CHECK_EQ(courier_json_tape_read_double(&dv, t, r), COURIER_OK);
    CHECK(dv == 2.5);
    CHECK_EQ(courier_json_tape_read_int64(&i64, t, r), COURIER_E_NUMBER_RANGE); /* a fraction */
    CHECK_EQ(courier_json_tape_read_int64(&i64, t, 0), COURIER_E_INVALID_ARGUMENT); /* not a number */
    CHECK_EQ(courier_json_tape_read_int64(&i64, t, 999), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_json_tape_read_int64(NULL, t, a), COURIER_E_INVALID_ARGUMENT);
    /* Written back as it came: nothing lost. */
    char *out = NULL;
    CHECK_EQ(courier_json_tape_dump(&out, NULL, t, 0, 0, NULL), COURIER_OK);
    CHECK_STR(out, "{\"a\":1,\"b\":18446744073709551615,\"c\":-9223372036854775809,\"d\":1e400,\"e\":2.5}");
    courier_free(out);
    /* Through a jansson value and back to a tape: the text is kept. */
    courier_json *doc = NULL;
    CHECK_EQ(courier_json_parse(&doc, "[1,18446744073709551615,1e400]", 30, NULL, NULL), COURIER_OK);
    courier_json_tape *t2 = NULL;
    CHECK_EQ(courier_json_tape_from_value(&t2, doc, NULL), COURIER_OK);
    CHECK(same(t2, 0, doc));
    CHECK_EQ(courier_json_tape_read_uint64(&u, t2, 2), COURIER_OK);
    CHECK(u == UINT64_MAX);
    CHECK_EQ(courier_json_tape_dump(&out, NULL, t2, 0, 0, NULL), COURIER_OK);
    CHECK_STR(out, "[1,18446744073709551615,1e400]");
    courier_free(out);
    courier_json_tape_free(t2);
    courier_json_free(doc);
    courier_json_tape_free(t);
}

/* A UTF-8 byte order mark before the text is ignored on both paths (RFC 8259 8.1); anywhere else it
 * is an invalid token, at the byte offset of the caller's text. */
static void test_byte_order_mark(void) {
    CHECK_EQ(agree("\xEF\xBB\xBF{\"a\":1}"), COURIER_OK);
    CHECK_EQ(agree("\xEF\xBB\xBF 42"), COURIER_OK);
    CHECK_EQ(agree("\xEF\xBB\xBF"), COURIER_E_JSON);
    CHECK_EQ(agree("\xEF\xBB\xBF\xEF\xBB\xBF" "1"), COURIER_E_JSON);
    CHECK_EQ(agree(" \xEF\xBB\xBF" "1"), COURIER_E_JSON);
    CHECK_EQ(agree("[\xEF\xBB\xBF" "1]"), COURIER_E_JSON);
    courier_json_tape *t = tape("\xEF\xBB\xBF[\"x\"]");
    CHECK_STR(string_of(t, 1, NULL), "x");
    courier_json_tape_free(t);
    courier_error err;
    CHECK_EQ(courier_json_tape_parse(&t, "\xEF\xBB\xBF[x]", 6, NULL, &err), COURIER_E_JSON);
    CHECK_CONTAINS(err.message, "(byte 4)");
}

/* The same malformed text reports the same position on both paths: the offending byte's offset. */
static void test_error_position_is_one(void) {
    const char *text = "{\"a\":1,\"b\":tru}";
    courier_error e1, e2;
    courier_json *doc = NULL;
    courier_json_tape *t = NULL;
    CHECK_EQ(courier_json_parse(&doc, text, strlen(text), NULL, &e1), COURIER_E_JSON);
    CHECK_EQ(courier_json_tape_parse(&t, text, strlen(text), NULL, &e2), COURIER_E_JSON);
    CHECK_CONTAINS(e1.message, "(byte 11)");
    CHECK_STR(e1.message, e2.message);
    const char *more[] = {"[1,2", "{\"a\" 1}", "[1 2]", "\"\\x\"", "[-]", "{\"a\":1,\"a\":2}", "\"\xff\"", "[1.]"};
    for (size_t i = 0; i < sizeof more / sizeof *more; i++) CHECK_EQ(agree(more[i]), COURIER_E_JSON);
    /* A malformed byte before nesting that passes the limit is the error (found by the fuzz target:
     * courier_json_parse's depth scan had reported the later bracket). */
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.max_depth = 4;
    const char *deep = "[1 2,[[[[[[[[]]]]]]]]]";
    CHECK_EQ(agree_opts(deep, strlen(deep), &o), COURIER_E_JSON);
    CHECK_EQ(courier_json_parse(&doc, deep, strlen(deep), &o, &e1), COURIER_E_JSON);
    CHECK_CONTAINS(e1.message, "(byte 3)");
    const char *deep_only = "[1,[[[[[[[[]]]]]]]]]";
    CHECK_EQ(agree_opts(deep_only, strlen(deep_only), &o), COURIER_E_JSON);
}

TESTS_MAIN(T(test_layout_and_lookups), T(test_numbers_beyond_int64_and_double), T(test_byte_order_mark),
           T(test_error_position_is_one), T(test_scalars_at_top), T(test_escapes_and_surrogates), T(test_invalid_utf8),
           T(test_strings_word_at_a_time),
           T(test_numbers), T(test_malformed), T(test_duplicate_keys), T(test_duplicate_keys_in_small_objects), T(test_depth_and_size_limits),
           T(test_from_value_of_built_values), T(test_generated_document))
