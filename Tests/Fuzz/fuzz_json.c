/*
 * fuzz_json.c — libFuzzer target over the core's JSON parsing and mapping: any bytes go through
 * courier_json_parse (with limits, and splitting across threads, chosen by the first byte; a split
 * parse must agree with a serial one), every value is read through the public
 * accessors and key paths, the document is serialized and parsed back (it must be equal), and a
 * fixed set of mappings (attributes, coercions, defaults, relationships, a recursive mapping) is
 * applied to it and to its members. The tape parser (courier_json_tape_parse) must accept exactly
 * the texts courier_json_parse accepts and hold the same values (checked entry by entry, and by
 * hinted key lookups), and a tape made from the parsed document must hold them too. Every mapping
 * is applied both ways, to the jansson document and on the tape (the parsed one and one made from
 * the value): the outputs must be equal, or the errors the same. The response path
 * (cr_json_apply_spec: an envelope, a key path, a mapping and a named result, read on the tape) must
 * give the results the jansson path gives, and a tape's text (courier_json_tape_dump) and jansson
 * value (cr_json_from_tape) must be the document's. Nothing may
 * crash, leak or trip a sanitizer; a broken round-trip or a disagreement aborts.
 *
 * Built by run.sh with the Swift toolchain's clang: -fsanitize=fuzzer,address,undefined.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "courier.h"
#include "json/json_internal.h" /* the response path (cr_json_apply_spec), linked in statically */
#include "../CCoreTests/tape_same.h"

static courier_mapping *g_item, *g_root, *g_tree, *g_loose;

static void build_mappings(void) {
    courier_mapping_new(&g_item);
    courier_mapping_add_attribute(g_item, "id", NULL, COURIER_JSON_INTEGER, COURIER_MAP_REQUIRED);
    courier_mapping_add_attribute(g_item, "title", "name", COURIER_JSON_STRING, COURIER_MAP_STRING_FROM_NUMBER);
    courier_mapping_add_attribute(g_item, "price", NULL, COURIER_JSON_REAL, COURIER_MAP_NUMBER_FROM_STRING);

    courier_mapping_new(&g_root);
    courier_mapping_add_attribute(g_root, "code", NULL, COURIER_JSON_NUMBER, COURIER_MAP_NUMBER_FROM_STRING);
    courier_mapping_add_attribute(g_root, "message", NULL, COURIER_JSON_STRING, COURIER_MAP_NULL_AS_ABSENT);
    courier_mapping_add_attribute(g_root, "data.name", "name", COURIER_JSON_ANY, 0);
    courier_mapping_add_attribute(g_root, "data.on", "on", COURIER_JSON_BOOL, COURIER_MAP_BOOL_FROM_NUMBER);
    courier_mapping_add_relationship(g_root, "data.items", "items", g_item, 1, 0);
    courier_mapping_add_relationship(g_root, "data.owner", "owner", g_item, 0, 0);
    courier_json *def = NULL;
    courier_json_new_string(&def, "none", 4);
    courier_mapping_set_default(g_root, "message", def);
    courier_json_free(def);

    courier_mapping_new(&g_tree);
    courier_mapping_add_attribute(g_tree, "v", NULL, COURIER_JSON_ANY, 0);
    courier_mapping_add_relationship(g_tree, "kids", NULL, g_tree, 1, 0);

    courier_mapping_new(&g_loose);
    courier_mapping_set_coercions(g_loose, COURIER_MAP_ALL_COERCIONS);
    courier_mapping_add_attribute(g_loose, "a", NULL, COURIER_JSON_INTEGER, 0);
    courier_mapping_add_attribute(g_loose, "b", NULL, COURIER_JSON_STRING, 0);
    courier_mapping_add_attribute(g_loose, "c", NULL, COURIER_JSON_BOOL, 0);
    courier_mapping_add_attribute(g_loose, "d.0.e", "e", COURIER_JSON_REAL, 0);
}

/* Reads every value through the public API; returns a number so nothing is optimized away. */
static size_t walk(const courier_json *v, int depth) {
    size_t n = 1, len = 0;
    switch (courier_json_typeof(v)) {
    case COURIER_JSON_OBJECT:
        for (const courier_json_iter *it = courier_json_iter_first(v); it; it = courier_json_iter_next(v, it)) {
            const char *key = courier_json_iter_key(it, &len);
            const courier_json *child = courier_json_iter_value(it);
            if (courier_json_getn(v, key, len) != child) abort(); /* lookup agrees with iteration */
            n += len + walk(child, depth + 1);
        }
        break;
    case COURIER_JSON_ARRAY:
        for (size_t i = 0; i < courier_json_size(v); i++) n += walk(courier_json_at(v, i), depth + 1);
        break;
    case COURIER_JSON_STRING:
        if (!courier_json_string(v, &len)) abort();
        n += len;
        break;
    case COURIER_JSON_INTEGER: n += (size_t)courier_json_integer(v); break;
    case COURIER_JSON_REAL: {
        /* A number kept as text (beyond int64 and double) reads back through its text. */
        double d = 0;
        uint64_t u = 0;
        int64_t i = 0;
        int drc = courier_json_read_double(&d, v);
        if (drc != COURIER_OK && drc != COURIER_E_NUMBER_RANGE) abort();
        if (drc == COURIER_E_NUMBER_RANGE && !courier_json_number_text(v, NULL)) abort(); /* a double always fits */
        if (courier_json_read_uint64(&u, v) == COURIER_OK) n += (size_t)u;
        if (courier_json_read_int64(&i, v) == COURIER_OK) n += (size_t)i;
        n += (size_t)(courier_json_real(v) != 0) + len;
        courier_json_number_text(v, &len);
        break;
    }
    case COURIER_JSON_BOOL: n += (size_t)courier_json_bool(v); break;
    default: break;
    }
    return n;
}

/* Maps `in` with jansson and checks the tape path agrees, on `tape` at `index` (when the tape
 * parser took the text) and on a tape made from the value. */
static void map_with(const courier_mapping *m, const courier_json *in, const courier_json_tape *tape, size_t index) {
    if (tape && !mapping_paths_agree(m, in, tape, index, NULL)) abort();
    courier_json_tape *own = NULL;
    if (courier_json_tape_from_value(&own, in, NULL) != COURIER_OK || !mapping_paths_agree(m, in, own, 0, NULL)) abort();
    courier_json_tape_free(own);
    courier_json *out = NULL;
    courier_mapping_error where;
    courier_error err;
    int rc = courier_mapping_apply(&out, &where, m, in, &err);
    if (rc == COURIER_OK) {
        if (!out) abort();
        walk(out, 0);
        char *text = NULL;
        size_t len = 0;
        if (courier_json_dump(&text, &len, out, COURIER_JSON_DUMP_SORT_KEYS, NULL) == COURIER_OK) courier_free(text);
        courier_json_free(out);
    } else {
        if (out || (rc != COURIER_E_MAPPING && rc != COURIER_E_NO_MEMORY)) abort();
        if (!memchr(where.path, '\0', sizeof where.path) || !err.message[0]) abort();
    }
}

/* The response path on the tape: an envelope (code, message, data) and the data mapped by g_item as
 * a named optional result. Where the envelope lets it through, the result must be what
 * courier_mapping_apply makes of the value at "data" (or its absence / the same error). */
static courier_envelope *g_env;
static cr_jspec *g_spec;

static void response_path(const courier_json *doc, const courier_json_tape *tape) {
    if (!g_env) {
        courier_envelope_new(&g_env);
        courier_envelope_set_code_path(g_env, "code", 0);
        courier_envelope_set_message_path(g_env, "message");
        courier_envelope_set_data_path(g_env, "data");
        courier_envelope_add_success_code(g_env, 0);
        if (cr_jspec_set_mapping(&g_spec, g_item) || cr_jspec_add_result(&g_spec, "raw", "data.0", NULL, COURIER_RESULT_OPTIONAL))
            abort();
    }
    cr_jresp *j = calloc(1, sizeof *j);
    if (!j) return;
    atomic_init(&j->doc, NULL);
    atomic_init(&j->tape, NULL);
    atomic_init(&j->data.json, NULL);
    courier_error err;
    int rc = cr_json_apply_spec(g_spec, g_env, tape, NULL, j, &err);
    const courier_json *c = courier_json_path(doc, "code");
    int code_int = c && courier_json_typeof(c) == COURIER_JSON_INTEGER;
    if (code_int && (rc == COURIER_E_API) != (courier_json_integer(c) != 0)) abort(); /* 0 is the one success */
    if (code_int && (!j->has_env_code || j->env_code != courier_json_integer(c))) abort();
    if (rc == COURIER_OK) {
        /* The data (fallback of the spec's mapping) as courier_mapping_apply maps it. */
        const courier_json *v = courier_json_path(doc, "data");
        courier_json *want = NULL;
        if (!v || courier_mapping_apply(&want, NULL, g_item, v, NULL) != COURIER_OK || !j->data.present ||
            !j->data.tape || !tape_same(j->data.tape, 0, want))
            abort();
        json_t *made = NULL;
        if (cr_json_from_tape(j->data.tape, 0, &made) != COURIER_OK || !courier_json_equal((courier_json *)made, want))
            abort();
        json_decref(made);
        courier_json_free(want);
        const courier_json *raw = courier_json_path(doc, "data.0");
        if (j->nresults != 1 || j->results[0].value.present != (raw != NULL)) abort();
        if (raw && !tape_same(tape, j->results[0].value.index, raw)) abort();
    } else if (rc != COURIER_E_MAPPING && rc != COURIER_E_API && rc != COURIER_E_NO_MEMORY) {
        abort();
    }
    cr_jresp_free(j);
}

/* A tape's text and jansson value are the document's. */
static void tape_views(const courier_json *doc, const courier_json_tape *tape) {
    char *a = NULL, *b = NULL;
    if (courier_json_tape_dump(&a, NULL, tape, 0, COURIER_JSON_DUMP_SORT_KEYS | COURIER_JSON_DUMP_ASCII, NULL) ||
        courier_json_dump(&b, NULL, doc, COURIER_JSON_DUMP_SORT_KEYS | COURIER_JSON_DUMP_ASCII, NULL) || strcmp(a, b))
        abort();
    courier_free(a);
    courier_free(b);
    json_t *made = NULL;
    if (cr_json_from_tape(tape, 0, &made) != COURIER_OK || !courier_json_equal((courier_json *)made, doc)) abort();
    json_decref(made);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_root) build_mappings();
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    if (size > 0) {
        /* The first byte picks the limits; the rest is the text. */
        uint8_t b = data[0];
        o.max_depth = (b & 0x0F) ? (b & 0x0F) * 8 : 2048;
        if (b & 0x10) o.flags |= COURIER_JSON_ALLOW_DUPLICATE_KEYS;
        if (b & 0x20) o.flags |= COURIER_JSON_ALLOW_NUL;
        /* 0x40: split top-level arrays across 2 or 3 threads, whatever their size. */
        o.max_threads = (b & 0x40) ? 2 + (b >> 7) : 1;
        o.parallel_min_bytes = 1;
        data++;
        size--;
    }
    courier_json *doc = NULL;
    courier_error err;
    int rc = courier_json_parse(&doc, data, size, &o, &err);
    if (o.max_threads > 1) {
        /* Split or not, the same outcome. */
        courier_json_options serial = o;
        serial.max_threads = 1;
        courier_json *one = NULL;
        int rc1 = courier_json_parse(&one, data, size, &serial, NULL);
        if (rc1 != rc || (rc == COURIER_OK && !courier_json_equal(doc, one))) abort();
        courier_json_free(one);
    }
    /* The tape parser: the same acceptance and the same document. */
    courier_json_tape *tape = NULL;
    courier_error terr;
    int trc = courier_json_tape_parse(&tape, data, size, &o, &terr);
    /* One known difference: jansson 2.14 drops a NUL byte right after a number or a literal
     * ("[1,2\0]" is accepted); the tape refuses it. */
    int nul_quirk = rc == COURIER_OK && trc == COURIER_E_JSON && memchr(data, 0, size);
    if ((trc != rc && !nul_quirk) || (trc == COURIER_OK) != (tape != NULL) || (trc != COURIER_OK && !terr.message[0]))
        abort();
    /* One error for the same text on both paths: the same message, so the same position. */
    if (rc == COURIER_E_JSON && trc == COURIER_E_JSON && strcmp(err.message, terr.message) != 0) abort();
    if (tape) {
        if (!tape_same(tape, 0, doc) || courier_json_tape_skip(tape, 0) != ({ size_t n; courier_json_tape_entries(tape, &n); n; }))
            abort();
        courier_json_tape_get(tape, 0, "id", 2, NULL);
        courier_json_tape *made = NULL;
        if (courier_json_tape_from_value(&made, doc, NULL) != COURIER_OK || !tape_same(made, 0, doc)) abort();
        courier_json_tape_free(made);
    }
    if (rc != COURIER_OK) {
        courier_json_tape_free(tape);
        if (doc || (rc != COURIER_E_JSON && rc != COURIER_E_TOO_LARGE && rc != COURIER_E_NO_MEMORY)) abort();
        return 0;
    }
    walk(doc, 0);
    courier_json_path(doc, "data.items.0.title");
    courier_json_path(doc, "0.0.0");
    courier_json_path(doc, "a.b.c");

    /* Serialize, parse back: the same document. */
    const unsigned flag_sets[] = {0, COURIER_JSON_DUMP_INDENT | COURIER_JSON_DUMP_SORT_KEYS,
                                  COURIER_JSON_DUMP_ASCII | COURIER_JSON_DUMP_ESCAPE_SLASH};
    for (size_t i = 0; i < 3; i++) {
        char *text = NULL;
        size_t len = 0;
        if (courier_json_dump(&text, &len, doc, flag_sets[i], NULL) != COURIER_OK) abort();
        courier_json *back = NULL;
        courier_json_options lax = {.size = sizeof lax};
        courier_json_options_init(&lax);
        lax.max_depth = 2048;
        lax.flags = o.flags;
        if (courier_json_parse(&back, text, len, &lax, NULL) != COURIER_OK) abort();
        if (!courier_json_equal(doc, back)) abort();
        courier_json_free(back);
        courier_free(text);
    }

    /* Both mapping paths (jansson, tape) on the same inputs: the same outputs and errors. */
    map_with(g_root, doc, tape, 0);
    map_with(g_item, doc, tape, 0);
    map_with(g_tree, doc, tape, 0);
    map_with(g_loose, doc, tape, 0);
    const courier_json *first = courier_json_at(doc, 0);
    if (first) map_with(g_root, first, tape, 1);
    if (tape) {
        tape_views(doc, tape);
        response_path(doc, tape);
    }
    courier_json_tape_free(tape);

    courier_json *copy = NULL;
    if (courier_json_copy(&copy, doc) == COURIER_OK) {
        if (!courier_json_equal(doc, copy)) abort();
        courier_json_free(copy);
    }
    courier_json_free(doc);
    return 0;
}
