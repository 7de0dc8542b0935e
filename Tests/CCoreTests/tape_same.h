/*
 * tape_same.h — whether a tape's value equals a jansson-backed value, through the public API only:
 * shared by the fuzz target (Tests/Fuzz) and the C tests that compare the tape and jansson paths.
 */
#ifndef COURIER_TEST_TAPE_SAME_H
#define COURIER_TEST_TAPE_SAME_H

#include <stdint.h>
#include <string.h>

#include "courier.h"

/* Whether the tape's value at i equals v (types, counts, keys through hinted lookups, strings by
 * bytes, numbers by bits). */
static int tape_same(const courier_json_tape *t, size_t i, const courier_json *v) {
    size_t count = 0;
    const courier_json_tape_entry *e = courier_json_tape_entries(t, &count);
    const char *text = (const char *)courier_json_tape_text(t);
    if (i >= count || e[i].type != courier_json_typeof(v)) return 0;
    const courier_json_tape_entry *x = &e[i];
    switch (x->type) {
    case COURIER_JSON_OBJECT: {
        if (x->length != courier_json_size(v) || x->payload > count) return 0;
        size_t k = i + 1, hint = 0;
        while (k < x->payload) {
            size_t val = k + 1, next = courier_json_tape_skip(t, val);
            if (e[k].type != COURIER_JSON_STRING) return 0;
            if (!(e[k].flags & COURIER_JSON_TAPE_DEAD)) {
                const char *key = text + e[k].payload;
                if (courier_json_tape_get(t, i, key, e[k].length, &hint) != val) return 0;
                if (!tape_same(t, val, courier_json_getn(v, key, e[k].length))) return 0;
            }
            k = next;
        }
        return k == x->payload;
    }
    case COURIER_JSON_ARRAY: {
        if (x->length != courier_json_size(v) || x->payload > count) return 0;
        size_t k = i + 1;
        for (size_t n = 0; n < x->length; n++) {
            if (!tape_same(t, k, courier_json_at(v, n))) return 0;
            k = courier_json_tape_skip(t, k);
        }
        return k == x->payload;
    }
    case COURIER_JSON_STRING: {
        size_t len = 0;
        const char *s = courier_json_string(v, &len);
        return x->length == len && memcmp(text + x->payload, s, len) == 0 && text[x->payload + len] == '\0';
    }
    case COURIER_JSON_INTEGER: return (int64_t)x->payload == courier_json_integer(v);
    case COURIER_JSON_REAL: {
        double d = courier_json_real(v);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        size_t n1 = 0, n2 = 0;
        const char *s1 = courier_json_tape_number_text(t, i, &n1), *s2 = courier_json_number_text(v, &n2);
        if (!s1 != !s2 || n1 != n2 || (s1 && memcmp(s1, s2, n1) != 0)) return 0; /* kept as text: the same text */
        return bits == x->payload;
    }
    case COURIER_JSON_BOOL: return ((x->flags & COURIER_JSON_TAPE_TRUE) != 0) == (courier_json_bool(v) != 0);
    case COURIER_JSON_NULL: return 1;
    }
    return 0;
}


/* Applies m to `in` (courier_mapping_apply) and to the value at `index` of `t`
 * (courier_mapping_apply_tape): 1 when both give the same code, and then the same output, or the
 * same error (code, message, where); 0 when they differ. *rc (may be NULL) gets the code. */
static int mapping_paths_agree(const courier_mapping *m, const courier_json *in, const courier_json_tape *t,
                               size_t index, int *rc) {
    courier_json *out = NULL;
    courier_json_tape *tout = NULL;
    courier_mapping_error w1, w2;
    courier_error e1, e2;
    int rc1 = courier_mapping_apply(&out, &w1, m, in, &e1);
    int rc2 = courier_mapping_apply_tape(&tout, &w2, m, t, index, &e2);
    int same = rc1 == rc2;
    if (same && rc1 == COURIER_OK) {
        same = out && tout && tape_same(tout, 0, out);
    } else if (same) {
        same = !out && !tout && e1.code == e2.code && strcmp(e1.message, e2.message) == 0 &&
               strcmp(w1.path, w2.path) == 0 && w1.expected == w2.expected && w1.found == w2.found;
    }
    courier_json_free(out);
    courier_json_tape_free(tout);
    if (rc) *rc = rc1;
    return same;
}

#endif
