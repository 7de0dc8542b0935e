/*
 * mapping_bench.c — the C side of `courier bench mapping`: the document, raw jansson parse + walk
 * (the bar for the core) and the core's parse + mapping, on the tape and, as before, on a jansson
 * document; each run once per call so the Swift side times them alike.
 */
#include "cbench.h"

#include <courier.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the document ------------------------------------------------------------------------------------ */

char *cbench_mapping_document(int count, size_t *len) {
    static const char *words[] = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
                                  "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"};
    size_t cap = (size_t)count * 320 + 64, n = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    unsigned long long seed = 0x9E3779B97F4A7C15ULL;
#define RND() (seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17, seed)
    s[n++] = '[';
    for (int i = 0; i < count; i++) {
        /* One draw per statement, so the document is the same whatever the compiler. */
        const char *w1 = words[RND() % 16];
        const char *w2 = words[RND() % 16];
        const char *w3 = words[RND() % 16];
        int has_note = (int)(RND() % 3);
        unsigned long long price = RND() % 900 + 1, cents = RND() % 100, quantity = RND() % 1000;
        int active = (int)(RND() % 2);
        unsigned long long rating = RND() % 5, tenth = RND() % 10;
        unsigned long long month = RND() % 12 + 1, day = RND() % 28 + 1, hour = RND() % 24, minute = RND() % 60;
        const char *note = has_note ? words[RND() % 16] : "";
        n += (size_t)snprintf(
            s + n, cap - n,
            "%s{\"id\":%d,\"name\":\"%s %s\",\"email\":\"%s.%s%d@example.com\",\"price\":%llu.%02llu,"
            "\"quantity\":%llu,\"active\":%s,\"rating\":%llu.%llu,\"created_at\":\"2024-%02llu-%02lluT%02llu:%02llu:00Z\","
            "\"tags\":[\"%s\",\"%s\"],\"note\":%s%s%s}",
            i ? "," : "", i + 1, w1, w2, w2, w3, i, price, cents, quantity, active ? "true" : "false", rating, tenth,
            month, day, hour, minute, w3, w1, has_note ? "\"" : "null", note, has_note ? " note\"" : "");
    }
#undef RND
    s[n++] = ']';
    s[n] = '\0';
    *len = n;
    return s;
}

void cbench_mapping_document_free(char *doc) { free(doc); }

/* ---- raw jansson ---------------------------------------------------------------------------------------- */

/* Reads every value of a parsed document, as a consumer would. */
static long long walk(const json_t *v) {
    long long sum = 0;
    size_t i;
    const char *key;
    json_t *child;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        json_object_foreach((json_t *)v, key, child) sum += (long long)strlen(key) + walk(child);
        break;
    case JSON_ARRAY:
        json_array_foreach(v, i, child) sum += walk(child);
        break;
    case JSON_STRING: sum += (long long)json_string_length(v); break;
    case JSON_INTEGER: sum += (long long)json_integer_value(v); break;
    case JSON_REAL: sum += (long long)json_real_value(v); break;
    case JSON_TRUE: sum += 1; break;
    default: break;
    }
    return sum;
}

long long cbench_jansson_parse_walk(const void *data, size_t len) {
    json_error_t e;
    json_t *doc = json_loadb(data, len, 0, &e);
    if (!doc) return -1;
    long long sum = walk(doc);
    json_decref(doc);
    return sum;
}

long long cbench_jansson_parse_only(const void *data, size_t len) {
    json_error_t e;
    json_t *doc = json_loadb(data, len, 0, &e);
    if (!doc) return -1;
    json_decref(doc);
    return 0;
}

/* ---- the core ---------------------------------------------------------------------------------------------- */

void *cbench_mapping_new(int renames) {
    courier_mapping *m = NULL;
    if (courier_mapping_new(&m) != COURIER_OK) return NULL;
    int ok = courier_mapping_add_attribute(m, "id", renames ? "identifier" : NULL, COURIER_JSON_INTEGER, COURIER_MAP_REQUIRED) == 0 &&
             courier_mapping_add_attribute(m, "name", NULL, COURIER_JSON_STRING, COURIER_MAP_REQUIRED) == 0 &&
             courier_mapping_add_attribute(m, "email", NULL, COURIER_JSON_STRING, 0) == 0 &&
             courier_mapping_add_attribute(m, "price", NULL, COURIER_JSON_REAL, 0) == 0 &&
             courier_mapping_add_attribute(m, "quantity", NULL, COURIER_JSON_INTEGER, 0) == 0 &&
             courier_mapping_add_attribute(m, "active", NULL, COURIER_JSON_BOOL, 0) == 0 &&
             courier_mapping_add_attribute(m, "rating", NULL, COURIER_JSON_REAL, 0) == 0 &&
             courier_mapping_add_attribute(m, "created_at", renames ? "createdAt" : NULL, COURIER_JSON_STRING, 0) == 0 &&
             courier_mapping_add_attribute(m, "tags", NULL, COURIER_JSON_ARRAY, 0) == 0 &&
             courier_mapping_add_attribute(m, "note", NULL, COURIER_JSON_STRING, 0) == 0;
    if (!ok) {
        courier_mapping_free(m);
        return NULL;
    }
    return m;
}

void cbench_mapping_free(void *mapping) { courier_mapping_free(mapping); }

long long cbench_mapping_run(const void *data, size_t len, const void *mapping) {
    courier_json_tape *doc = NULL, *out = NULL;
    if (courier_json_tape_parse(&doc, data, len, NULL, NULL) != COURIER_OK) return -1;
    int rc = courier_mapping_apply_tape(&out, NULL, mapping, doc, 0, NULL);
    long long n = rc == COURIER_OK ? (long long)courier_json_tape_entries(out, NULL)[0].length : -1;
    courier_json_tape_free(out);
    courier_json_tape_free(doc);
    return n;
}

/* Whether the tape path's output equals, entry by entry, a tape of the jansson path's output (the
 * benchmark's mappings keep the document's member order, so the order agrees too). */
int cbench_mapping_paths_agree(const void *data, size_t len, const void *mapping) {
    courier_json *doc = NULL, *jout = NULL;
    courier_json_tape *tdoc = NULL, *tout = NULL, *jtape = NULL;
    int same = courier_json_parse(&doc, data, len, NULL, NULL) == COURIER_OK &&
               courier_mapping_apply(&jout, NULL, mapping, doc, NULL) == COURIER_OK &&
               courier_json_tape_from_value(&jtape, jout, NULL) == COURIER_OK &&
               courier_json_tape_parse(&tdoc, data, len, NULL, NULL) == COURIER_OK &&
               courier_mapping_apply_tape(&tout, NULL, mapping, tdoc, 0, NULL) == COURIER_OK;
    size_t n1 = 0, n2 = 0;
    const courier_json_tape_entry *a = same ? courier_json_tape_entries(jtape, &n1) : NULL;
    const courier_json_tape_entry *b = same ? courier_json_tape_entries(tout, &n2) : NULL;
    same = same && n1 == n2;
    for (size_t i = 0; same && i < n1; i++) {
        same = a[i].type == b[i].type && a[i].flags == b[i].flags && a[i].length == b[i].length;
        if (same && a[i].type == COURIER_JSON_STRING)
            same = memcmp(courier_json_tape_text(jtape) + a[i].payload, courier_json_tape_text(tout) + b[i].payload,
                          a[i].length) == 0;
        else if (same)
            same = a[i].payload == b[i].payload;
    }
    courier_json_tape_free(jtape);
    courier_json_tape_free(tout);
    courier_json_tape_free(tdoc);
    courier_json_free(jout);
    courier_json_free(doc);
    return same;
}

long long cbench_mapping_jansson_run(const void *data, size_t len, const void *mapping) {
    courier_json *doc = NULL, *out = NULL;
    if (courier_json_parse(&doc, data, len, NULL, NULL) != COURIER_OK) return -1;
    int rc = courier_mapping_apply(&out, NULL, mapping, doc, NULL);
    long long n = rc == COURIER_OK ? (long long)courier_json_size(out) : -1;
    courier_json_free(out);
    courier_json_free(doc);
    return n;
}

long long cbench_mapping_parse_only(const void *data, size_t len) {
    courier_json *doc = NULL;
    if (courier_json_parse(&doc, data, len, NULL, NULL) != COURIER_OK) return -1;
    courier_json_free(doc);
    return 0;
}

long long cbench_tape_parse_only(const void *data, size_t len) {
    courier_json_tape *tape = NULL;
    if (courier_json_tape_parse(&tape, data, len, NULL, NULL) != COURIER_OK) return -1;
    size_t n = 0;
    courier_json_tape_entries(tape, &n);
    courier_json_tape_free(tape);
    return (long long)n;
}

long long cbench_mapping_parse_split(const void *data, size_t len) {
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.max_threads = 0;
    courier_json *doc = NULL;
    if (courier_json_parse(&doc, data, len, &o, NULL) != COURIER_OK) return -1;
    courier_json_free(doc);
    return 0;
}
