/*
 * mapping.c — mapping descriptions (attributes, relationships, coercions) and applying them to a
 * document (jansson's or the tape). Envelopes, what a request asks of its JSON and how a finished
 * response gets its results are jspec.c's, which applies mappings through here.
 *
 * A mapping is built on one thread. Once it is attached (to a request, an envelope, a config, or as
 * another mapping's child) it is sealed: it never changes again, so the worker thread may apply it
 * while other threads hold it. References are counted atomically; a child keeps what it needs alive.
 */
#include "json/json_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- descriptions ---------------------------------------------------------------------------------- */

typedef struct cr_attr {
    char *source; /* key path in the input */
    size_t source_len;
    int source_simple; /* no '.': one object lookup */
    int renamed;       /* the output's key is not the input's (a path, or another name) */
    char *dest;        /* key in the output */
    size_t dest_len;
    int type;       /* courier_json_type expected */
    unsigned flags; /* COURIER_MAP_* */
    json_t *def;    /* default when absent, owned; NULL for none */
    courier_json_tape *def_tape; /* the same default as a tape, for the tape path */
    courier_mapping *child; /* relationship target (retained unless it is the mapping itself) */
    int child_is_self;
    int to_many;
} cr_attr;

struct courier_mapping {
    atomic_int refs;
    atomic_int sealed;
    unsigned flags; /* coercions applied to every attribute */
    cr_attr *attrs;
    size_t count;
    size_t cap;
};

int courier_mapping_new(courier_mapping **out) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    courier_mapping *m = calloc(1, sizeof *m);
    *out = m;
    if (!m) return COURIER_E_NO_MEMORY;
    atomic_init(&m->refs, 1);
    atomic_init(&m->sealed, 0);
    return COURIER_OK;
}

courier_mapping *cr_mapping_retain(const courier_mapping *cm) {
    courier_mapping *m = (courier_mapping *)cm;
    if (!m) return NULL;
    atomic_store(&m->sealed, 1);
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
    return m;
}

void courier_mapping_free(courier_mapping *m) {
    if (!m) return;
    if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
    for (size_t i = 0; i < m->count; i++) {
        cr_attr *a = &m->attrs[i];
        free(a->source);
        free(a->dest);
        if (a->def) json_decref(a->def);
        courier_json_tape_free(a->def_tape);
        if (!a->child_is_self) courier_mapping_free(a->child);
    }
    free(m->attrs);
    free(m);
}

static int mapping_editable(const courier_mapping *m) {
    return m && !atomic_load(&((courier_mapping *)m)->sealed);
}

int courier_mapping_set_coercions(courier_mapping *m, unsigned flags) {
    if (!mapping_editable(m) || (flags & ~(unsigned)COURIER_MAP_ALL_COERCIONS)) return COURIER_E_INVALID_ARGUMENT;
    m->flags = flags;
    return COURIER_OK;
}

int cr_json_path_valid(const char *p) {
    if (!p || !*p) return 0;
    size_t len = strlen(p);
    if (p[0] == '.' || p[len - 1] == '.' || strstr(p, "..")) return 0;
    return cr_utf8_valid(p, len);
}

static cr_attr *find_dest(courier_mapping *m, const char *dest, size_t len) {
    for (size_t i = 0; i < m->count; i++)
        if (m->attrs[i].dest_len == len && memcmp(m->attrs[i].dest, dest, len) == 0) return &m->attrs[i];
    return NULL;
}

static int add_attr(courier_mapping *m, const char *source, const char *dest, int type, unsigned flags,
                    cr_attr **out) {
    if (!mapping_editable(m) || !cr_json_path_valid(source)) return COURIER_E_INVALID_ARGUMENT;
    if (!dest) {
        const char *dot = strrchr(source, '.');
        dest = dot ? dot + 1 : source;
    }
    size_t dlen = strlen(dest);
    if (!dlen || !cr_utf8_valid(dest, dlen)) return COURIER_E_INVALID_ARGUMENT;
    if (find_dest(m, dest, dlen)) return COURIER_E_INVALID_ARGUMENT;
    if (flags & ~(unsigned)(COURIER_MAP_REQUIRED | COURIER_MAP_ALL_COERCIONS)) return COURIER_E_INVALID_ARGUMENT;
    if (m->count == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 8;
        cr_attr *p = realloc(m->attrs, cap * sizeof *p);
        if (!p) return COURIER_E_NO_MEMORY;
        m->attrs = p;
        m->cap = cap;
    }
    cr_attr *a = &m->attrs[m->count];
    memset(a, 0, sizeof *a);
    a->source = cr_strdup(source);
    a->dest = cr_strdup(dest);
    if (!a->source || !a->dest) {
        free(a->source);
        free(a->dest);
        return COURIER_E_NO_MEMORY;
    }
    a->source_len = strlen(source);
    a->source_simple = strchr(source, '.') == NULL;
    a->dest_len = dlen;
    a->renamed = !a->source_simple || dlen != a->source_len || memcmp(dest, source, dlen) != 0;
    a->type = type;
    a->flags = flags;
    m->count++;
    *out = a;
    return COURIER_OK;
}

int courier_mapping_add_attribute(courier_mapping *m, const char *source, const char *dest, courier_json_type type,
                                  unsigned flags) {
    if ((int)type < COURIER_JSON_OBJECT || (int)type > COURIER_JSON_ANY || type == COURIER_JSON_NULL)
        return COURIER_E_INVALID_ARGUMENT;
    cr_attr *a;
    return add_attr(m, source, dest, type, flags, &a);
}

/* Does `from`'s graph of children reach `to`? */
static int reaches(const courier_mapping *from, const courier_mapping *to) {
    if (from == to) return 1;
    for (size_t i = 0; i < from->count; i++) {
        const cr_attr *a = &from->attrs[i];
        if (a->child && !a->child_is_self && reaches(a->child, to)) return 1;
    }
    return 0;
}

int courier_mapping_add_relationship(courier_mapping *m, const char *source, const char *dest,
                                     const courier_mapping *child, int to_many, unsigned flags) {
    if (!child || !mapping_editable(m)) return COURIER_E_INVALID_ARGUMENT;
    /* A mapping may name itself (a tree of nodes); any other cycle would never be freed. */
    if (child != m && reaches(child, m)) return COURIER_E_INVALID_ARGUMENT;
    cr_attr *a;
    int rc = add_attr(m, source, dest, to_many ? COURIER_JSON_ARRAY : COURIER_JSON_OBJECT, flags, &a);
    if (rc) return rc;
    a->to_many = to_many ? 1 : 0;
    if (child == m) {
        a->child = m;
        a->child_is_self = 1;
    } else {
        a->child = cr_mapping_retain(child);
    }
    return COURIER_OK;
}

int courier_mapping_set_default(courier_mapping *m, const char *dest, const courier_json *value) {
    if (!mapping_editable(m) || !dest || !value) return COURIER_E_INVALID_ARGUMENT;
    cr_attr *a = find_dest(m, dest, strlen(dest));
    if (!a) return COURIER_E_NOT_FOUND;
    json_t *copy = json_deep_copy((const json_t *)value);
    courier_json_tape *tape = NULL;
    if (!copy || courier_json_tape_from_value(&tape, value, NULL) != COURIER_OK) {
        if (copy) json_decref(copy);
        return COURIER_E_NO_MEMORY;
    }
    if (a->def) json_decref(a->def);
    courier_json_tape_free(a->def_tape);
    a->def = copy;
    a->def_tape = tape;
    return COURIER_OK;
}

size_t courier_mapping_attribute_count(const courier_mapping *m) { return m ? m->count : 0; }

/* ---- applying ---------------------------------------------------------------------------------------- */

/* The path to the value being mapped, as a chain of frames on the C stack; turned into text only
 * when something fails. */
typedef struct frame {
    const struct frame *up;
    const char *key; /* NULL: an array index */
    size_t len;
    size_t index;
} frame;

typedef struct apply_ctx {
    courier_mapping_error *where;
    courier_error *err;
    const char *prefix; /* key path of the input in its document ("" when standalone) */
    int depth;
} apply_ctx;

static void path_text(const frame *f, char *buf, size_t size, const char *prefix) {
    /* Collect frames root-first. */
    const frame *chain[64];
    size_t n = 0, skipped = 0;
    for (const frame *p = f; p; p = p->up) {
        if (n < 64) chain[n++] = p;
        else skipped++;
    }
    size_t len = 0;
    buf[0] = '\0';
#define PUT(s, l)                                                     \
    do {                                                              \
        size_t l_ = (l);                                              \
        if (len + l_ >= size) l_ = size - 1 - len;                    \
        memcpy(buf + len, (s), l_);                                   \
        len += l_;                                                    \
        buf[len] = '\0';                                              \
    } while (0)
    if (prefix && *prefix) PUT(prefix, strlen(prefix));
    if (skipped) {
        if (len) PUT(".", 1);
        PUT("...", 3);
    }
    for (size_t i = n; i-- > 0;) {
        if (len) PUT(".", 1);
        if (chain[i]->key) {
            PUT(chain[i]->key, chain[i]->len);
        } else {
            char num[24];
            int k = snprintf(num, sizeof num, "%zu", chain[i]->index);
            PUT(num, (size_t)k);
        }
    }
#undef PUT
}

static int type_of(const json_t *v) { return courier_json_typeof((const courier_json *)v); }

/* A mapping error at f: `found` is the courier_json_type found (COURIER_JSON_NONE: absent). */
static int mismatch_type(apply_ctx *c, const frame *f, int expected, int ft, const char *why) {
    char path[sizeof c->where->path];
    path_text(f, path, sizeof path, c->prefix);
    if (c->where) {
        memset(c->where, 0, sizeof *c->where);
        memcpy(c->where->path, path, sizeof path);
        c->where->expected = expected;
        c->where->found = ft;
    }
    if (why)
        return cr_fail(c->err, COURIER_E_MAPPING, "mapping failed at '%s': %s", path[0] ? path : "(root)", why);
    return cr_fail(c->err, COURIER_E_MAPPING, "mapping failed at '%s': expected %s, found %s", path[0] ? path : "(root)",
                   courier_json_type_name(expected), courier_json_type_name(ft));
}

int cr_mapping_type_error(courier_mapping_error *where, courier_error *err, const char *path, int expected,
                          int found) {
    apply_ctx c = {where, err, "", 0};
    frame f = {NULL, path, strlen(path ? path : ""), 0};
    return mismatch_type(&c, &f, expected, found, NULL);
}

static int mismatch(apply_ctx *c, const frame *f, int expected, const json_t *found, const char *why) {
    return mismatch_type(c, f, expected, type_of(found), why);
}

static int oom(apply_ctx *c) { return cr_fail(c->err, COURIER_E_NO_MEMORY, NULL); }

/* Parses a whole string as a JSON-style number. *is_int tells which kind it was. */
int cr_json_number_from_string(const char *s, size_t len, json_int_t *iv, double *dv, int *is_int) {
    if (len == 0 || len > 64) return -1;
    char buf[72];
    memcpy(buf, s, len);
    buf[len] = '\0';
    size_t i = 0;
    if (buf[i] == '-' || buf[i] == '+') i++;
    if (buf[i] < '0' || buf[i] > '9') return -1; /* no spaces, no "inf", no "nan", no hex */
    for (size_t k = i; k < len; k++) {
        char ch = buf[k];
        if (!((ch >= '0' && ch <= '9') || ch == '.' || ch == 'e' || ch == 'E' || ch == '-' || ch == '+')) return -1;
    }
    char *end;
    errno = 0;
    if (!strpbrk(buf, ".eE")) {
        long long v = strtoll(buf, &end, 10);
        if (*end == '\0' && errno == 0) {
            *iv = v;
            *is_int = 1;
            return 0;
        }
        errno = 0; /* too big for an integer: read it as a real */
    }
    double d = strtod(buf, &end);
    if (*end != '\0' || errno == ERANGE || !isfinite(d)) return -1;
    *dv = d;
    *is_int = 0;
    return 0;
}

/* A real with no fractional part that fits an integer. */
int cr_json_real_is_integral(double d, json_int_t *out) {
    if (!isfinite(d) || d != floor(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0) return 0;
    *out = (json_int_t)d;
    return 1;
}

/* The number an attribute of type `want` (INTEGER, REAL, NUMBER) makes of a value of
 * courier_json_type t: its integer iv, real dv or string s (len bytes) as found. Sets *iv or *dv
 * and *is_int; returns NULL, or why there is none ("" for a plain type mismatch). Both mapping
 * paths (jansson, tape) read numbers here. */
static const char *coerce_number(int want, unsigned co, int t, const char *s, size_t len, json_int_t *iv, double *dv,
                                 int *is_int) {
    if (t == COURIER_JSON_INTEGER) {
        *is_int = 1;
    } else if (t == COURIER_JSON_REAL) {
        *is_int = 0;
    } else if (t == COURIER_JSON_STRING && (co & COURIER_MAP_NUMBER_FROM_STRING)) {
        if (cr_json_number_from_string(s, len, iv, dv, is_int)) return "expected a number, found a string that is not one";
    } else {
        return "";
    }
    if (want == COURIER_JSON_INTEGER && !*is_int) {
        if (!cr_json_real_is_integral(*dv, iv)) return "expected integer, found a real with a fraction or out of range";
        *is_int = 1;
    } else if (want == COURIER_JSON_REAL && *is_int) {
        *dv = (double)*iv;
        *is_int = 0;
    }
    return NULL;
}

static int apply_object(const courier_mapping *m, const json_t *in, const frame *f, apply_ctx *c, json_t **out);

/* Maps one value to its expected type. *out is borrowed (== v) when nothing changed, else new. */
static int convert(const cr_attr *a, unsigned co, const json_t *v, const frame *f, apply_ctx *c, json_t **out,
                   int *owned) {
    *owned = 0;
    *out = (json_t *)v;
    int t = json_typeof(v);
    size_t big_len = 0;
    const char *big = cr_json_bignum(v, &big_len); /* a number kept as text (a REAL to type_of) */
    switch (a->type) {
    case COURIER_JSON_ANY: return COURIER_OK;
    case COURIER_JSON_OBJECT:
        if (t != JSON_OBJECT) return mismatch(c, f, a->type, v, NULL);
        if (a->child && !a->to_many) {
            json_t *o;
            int rc = apply_object(a->child, v, f, c, &o);
            if (rc) return rc;
            if (o == v) json_decref(o);
            else *owned = 1;
            *out = o;
        }
        return COURIER_OK;
    case COURIER_JSON_ARRAY: {
        if (t != JSON_ARRAY) return mismatch(c, f, a->type, v, NULL);
        if (!a->child) return COURIER_OK;
        size_t n = json_array_size(v);
        json_t *arr = NULL;
        for (size_t i = 0; i < n; i++) {
            const json_t *e = json_array_get(v, i);
            frame fe = {f, NULL, 0, i};
            if (!json_is_object(e)) {
                if (arr) json_decref(arr);
                return mismatch(c, &fe, COURIER_JSON_OBJECT, e, NULL);
            }
            json_t *o;
            int rc = apply_object(a->child, e, &fe, c, &o);
            if (rc) {
                if (arr) json_decref(arr);
                return rc;
            }
            if (!arr && o != e) {
                /* The first element that changed: copy the ones before it, unchanged. */
                if (!(arr = json_array())) {
                    json_decref(o);
                    return oom(c);
                }
                for (size_t k = 0; k < i; k++)
                    if (json_array_append(arr, json_array_get(v, k))) {
                        json_decref(o);
                        json_decref(arr);
                        return oom(c);
                    }
            }
            if (arr) {
                if (json_array_append_new(arr, o)) {
                    json_decref(arr);
                    return oom(c);
                }
            } else {
                json_decref(o);
            }
        }
        if (arr) {
            *out = arr;
            *owned = 1;
        }
        return COURIER_OK;
    }
    case COURIER_JSON_STRING:
        if (big) {
            if (!(co & COURIER_MAP_STRING_FROM_NUMBER)) return mismatch(c, f, a->type, v, NULL);
            if (!(*out = json_stringn_nocheck(big, big_len))) return oom(c); /* its text */
            *owned = 1;
            return COURIER_OK;
        }
        if (t == JSON_STRING) return COURIER_OK;
        if ((co & COURIER_MAP_STRING_FROM_NUMBER) && (t == JSON_INTEGER || t == JSON_REAL)) {
            char num[40];
            int n = t == JSON_INTEGER ? snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v))
                                      : cr_json_format_real(json_real_value(v), num, sizeof num);
            if (n < 0 || !(*out = json_stringn_nocheck(num, (size_t)n))) return oom(c);
            *owned = 1;
            return COURIER_OK;
        }
        return mismatch(c, f, a->type, v, NULL);
    case COURIER_JSON_INTEGER:
    case COURIER_JSON_REAL:
    case COURIER_JSON_NUMBER: {
        json_int_t iv = t == JSON_INTEGER ? json_integer_value(v) : 0;
        double dv = t == JSON_REAL || big ? courier_json_real((const courier_json *)v) : 0;
        int is_int = 0;
        const char *why = coerce_number(a->type, co, type_of(v), json_string_value(v), json_string_length(v), &iv, &dv,
                                        &is_int);
        if (why) return mismatch(c, f, a->type, v, *why ? why : NULL);
        if (is_int && t == JSON_INTEGER) return COURIER_OK;
        if (!is_int && (t == JSON_REAL || big)) return COURIER_OK; /* a number kept as text stays as it is */
        if (!(*out = is_int ? json_integer(iv) : json_real(dv))) return oom(c);
        *owned = 1;
        return COURIER_OK;
    }
    case COURIER_JSON_BOOL:
        if (t == JSON_TRUE || t == JSON_FALSE) return COURIER_OK;
        if ((co & COURIER_MAP_BOOL_FROM_NUMBER) && t == JSON_INTEGER &&
            (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
            *out = json_boolean(json_integer_value(v) == 1);
            *owned = 1;
            return COURIER_OK;
        }
        return mismatch(c, f, a->type, v, NULL);
    }
    return mismatch(c, f, a->type, v, NULL);
}

typedef struct slot {
    json_t *value; /* NULL: leave the key out */
    int owned;
} slot;

static int apply_object(const courier_mapping *m, const json_t *in, const frame *f, apply_ctx *c, json_t **out) {
    *out = NULL;
    if (!json_is_object(in)) return mismatch(c, f, COURIER_JSON_OBJECT, in, NULL);
    if (++c->depth > CR_JSON_MAX_DEPTH) {
        c->depth--;
        return mismatch(c, f, COURIER_JSON_OBJECT, in, "mapping nested too deeply");
    }
    slot stack[32], *s = stack;
    if (m->count > 32 && !(s = calloc(m->count, sizeof *s))) {
        c->depth--;
        return oom(c);
    }
    int rc = COURIER_OK;
    int same = json_object_size(in) == m->count; /* the output would equal the input itself */
    size_t i = 0;
    for (; i < m->count; i++) {
        const cr_attr *a = &m->attrs[i];
        unsigned co = a->flags | m->flags;
        const json_t *v = a->source_simple ? json_object_getn(in, a->source, a->source_len)
                                           : cr_json_path(in, a->source, a->source_len);
        s[i].value = NULL;
        s[i].owned = 0;
        if (v && json_is_null(v) && (co & COURIER_MAP_NULL_AS_ABSENT)) v = NULL;
        if (!v || (json_is_null(v) && a->type != COURIER_JSON_ANY)) {
            if (a->def) {
                s[i].value = a->def;
                same = 0;
            } else if (a->flags & COURIER_MAP_REQUIRED) {
                frame fa = {f, a->source, a->source_len, 0};
                rc = mismatch(c, &fa, a->type, v, NULL);
                break;
            } else if (v) {
                s[i].value = (json_t *)v; /* an optional null stays null */
                if (!a->source_simple || a->dest_len != a->source_len || memcmp(a->dest, a->source, a->dest_len))
                    same = 0;
            } else {
                same = 0;
            }
            continue;
        }
        frame fa = {f, a->source, a->source_len, 0};
        rc = convert(a, co, v, &fa, c, &s[i].value, &s[i].owned);
        if (rc) break;
        if (s[i].owned || !a->source_simple || a->dest_len != a->source_len || memcmp(a->dest, a->source, a->dest_len))
            same = 0;
    }
    if (rc == COURIER_OK) {
        if (same) {
            *out = json_incref((json_t *)in);
        } else if (!(*out = json_object())) {
            rc = oom(c);
        } else {
            for (size_t k = 0; k < m->count; k++) {
                if (!s[k].value) continue;
                const cr_attr *a = &m->attrs[k];
                json_t *v = s[k].owned ? s[k].value : json_incref(s[k].value);
                s[k].owned = 0;
                if (json_object_setn_new_nocheck(*out, a->dest, a->dest_len, v)) {
                    json_decref(*out);
                    *out = NULL;
                    rc = oom(c);
                    break;
                }
            }
        }
    }
    size_t filled = rc == COURIER_OK ? m->count : i + 1;
    for (size_t k = 0; k < filled && k < m->count; k++)
        if (s[k].owned) json_decref(s[k].value);
    if (s != stack) free(s);
    c->depth--;
    return rc;
}

int cr_mapping_apply(const courier_mapping *m, const json_t *in, const char *prefix, json_t **out,
                     courier_mapping_error *where, courier_error *err) {
    apply_ctx c = {where, err, prefix, 0};
    *out = NULL;
    if (where) memset(where, 0, sizeof *where);
    if (json_is_array(in)) {
        /* A mapping applied to an array maps each element (the seeds' collections). */
        size_t n = json_array_size(in);
        json_t *arr = json_array();
        if (!arr) return oom(&c);
        int same = 1;
        for (size_t i = 0; i < n; i++) {
            frame fe = {NULL, NULL, 0, i};
            json_t *o;
            int rc = apply_object(m, json_array_get(in, i), &fe, &c, &o);
            if (rc) {
                json_decref(arr);
                return rc;
            }
            if (o != json_array_get(in, i)) same = 0;
            if (json_array_append_new(arr, o)) {
                json_decref(arr);
                return oom(&c);
            }
        }
        if (same) {
            json_decref(arr);
            *out = json_incref((json_t *)in);
        } else {
            *out = arr;
        }
        return COURIER_OK;
    }
    return apply_object(m, in, NULL, &c, out);
}

/* ---- applying on the tape ------------------------------------------------------------------------------ */

/* The same rules as above, read from a tape and written to a new one: no tree, no hash table, one
 * array of entries and one text grown by doubling. Values kept as they are (strings, untyped
 * members, arrays and objects without a mapping) are copied entry by entry, their bytes with them. */

typedef courier_json_tape_entry tentry;

typedef struct tape_in {
    const courier_json_tape *t;
    const tentry *e;
    const char *text;
} tape_in;

typedef struct tape_out {
    tentry *e;
    size_t count, cap;
    cr_buf text;
} tape_out;

static inline size_t tskip(const tentry *e, size_t i) {
    return e[i].type == COURIER_JSON_OBJECT || e[i].type == COURIER_JSON_ARRAY ? (size_t)e[i].payload : i + 1;
}

/* Appends an entry; its index, or SIZE_MAX without memory. */
static inline size_t tput(tape_out *o, int type, uint8_t flags, uint32_t length, uint64_t payload) {
    if (o->count == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        tentry *p = realloc(o->e, cap * sizeof *p);
        if (!p) return SIZE_MAX;
        o->e = p;
        o->cap = cap;
    }
    o->e[o->count] = (tentry){(uint8_t)type, flags, 0, length, payload};
    return o->count++;
}

/* A STRING entry for len bytes at s (copied, NUL-terminated). */
static int tput_string(tape_out *o, const char *s, size_t len) {
    size_t at = o->text.len;
    if (len > UINT32_MAX || cr_buf_reserve(&o->text, len + 1)) return -1;
    memcpy(o->text.data + at, s, len);
    o->text.data[at + len] = '\0';
    o->text.len = at + len + 1;
    return tput(o, COURIER_JSON_STRING, 0, (uint32_t)len, at) == SIZE_MAX ? -1 : 0;
}

/* Copies the value at i of `src` (entries e, text) with everything inside it. */
static int tcopy(tape_out *o, const tentry *e, const char *text, size_t i) {
    size_t end = tskip(e, i), base = o->count;
    if (o->count + (end - i) > o->cap) {
        size_t cap = o->cap ? o->cap : 64;
        while (cap < o->count + (end - i)) cap *= 2;
        tentry *p = realloc(o->e, cap * sizeof *p);
        if (!p) return -1;
        o->e = p;
        o->cap = cap;
    }
    for (size_t k = i; k < end; k++) {
        tentry x = e[k];
        if (x.type == COURIER_JSON_STRING) {
            size_t at = o->text.len;
            if (cr_buf_reserve(&o->text, (size_t)x.length + 1)) return -1;
            memcpy(o->text.data + at, text + x.payload, (size_t)x.length + 1);
            o->text.len = at + x.length + 1;
            x.payload = at;
        } else if (x.type == COURIER_JSON_OBJECT || x.type == COURIER_JSON_ARRAY) {
            x.payload = x.payload - i + base;
        } else if (x.flags & COURIER_JSON_TAPE_NUMBER_TEXT) { /* a number kept as text: its text too */
            size_t at = o->text.len, n = cr_json_number_len(text + x.length);
            if (at > UINT32_MAX || cr_buf_reserve(&o->text, n + 1)) return -1;
            memcpy(o->text.data + at, text + x.length, n);
            o->text.data[at + n] = '\0';
            o->text.len = at + n + 1;
            x.length = (uint32_t)at;
        }
        o->e[o->count++] = x;
    }
    return 0;
}

static int ttype(const tape_in *in, size_t v) { return v ? in->e[v].type : COURIER_JSON_NONE; }

static int tapply_object(const courier_mapping *m, const tape_in *in, size_t v, const frame *f, apply_ctx *c,
                         tape_out *o, int *same);

/* Writes one value converted to its expected type (convert's rules). *same stays 1 when the value
 * written equals the input's as it is (where convert returns the input itself), else becomes 0. */
static int tconvert(const cr_attr *a, unsigned co, const tape_in *in, size_t v, const frame *f, apply_ctx *c,
                    tape_out *o, int *same) {
    const tentry *x = &in->e[v];
    int t = x->type;
    switch (a->type) {
    case COURIER_JSON_ANY: return tcopy(o, in->e, in->text, v) ? oom(c) : COURIER_OK;
    case COURIER_JSON_OBJECT:
        if (t != COURIER_JSON_OBJECT) return mismatch_type(c, f, a->type, t, NULL);
        if (a->child && !a->to_many) return tapply_object(a->child, in, v, f, c, o, same);
        return tcopy(o, in->e, in->text, v) ? oom(c) : COURIER_OK;
    case COURIER_JSON_ARRAY: {
        if (t != COURIER_JSON_ARRAY) return mismatch_type(c, f, a->type, t, NULL);
        if (!a->child) return tcopy(o, in->e, in->text, v) ? oom(c) : COURIER_OK;
        size_t at = tput(o, COURIER_JSON_ARRAY, 0, x->length, 0), k = v + 1;
        if (at == SIZE_MAX) return oom(c);
        for (size_t i = 0; i < x->length; i++, k = tskip(in->e, k)) {
            frame fe = {f, NULL, 0, i};
            if (in->e[k].type != COURIER_JSON_OBJECT) return mismatch_type(c, &fe, COURIER_JSON_OBJECT, in->e[k].type, NULL);
            int rc = tapply_object(a->child, in, k, &fe, c, o, same);
            if (rc) return rc;
        }
        o->e[at].payload = o->count;
        return COURIER_OK;
    }
    case COURIER_JSON_STRING:
        if (t == COURIER_JSON_STRING) return tcopy(o, in->e, in->text, v) ? oom(c) : COURIER_OK;
        if ((co & COURIER_MAP_STRING_FROM_NUMBER) && (x->flags & COURIER_JSON_TAPE_NUMBER_TEXT)) {
            *same = 0; /* a number kept as text: that text */
            return tput_string(o, in->text + x->length, cr_json_number_len(in->text + x->length)) ? oom(c) : COURIER_OK;
        }
        if ((co & COURIER_MAP_STRING_FROM_NUMBER) && (t == COURIER_JSON_INTEGER || t == COURIER_JSON_REAL)) {
            char num[40];
            double d;
            memcpy(&d, &x->payload, sizeof d);
            int n = t == COURIER_JSON_INTEGER ? (int)cr_json_format_int(num, (int64_t)x->payload)
                                              : cr_json_format_real(d, num, sizeof num);
            if (n < 0 || tput_string(o, num, (size_t)n)) return oom(c);
            *same = 0;
            return COURIER_OK;
        }
        return mismatch_type(c, f, a->type, t, NULL);
    case COURIER_JSON_INTEGER:
    case COURIER_JSON_REAL:
    case COURIER_JSON_NUMBER: {
        json_int_t iv = t == COURIER_JSON_INTEGER ? (json_int_t)(int64_t)x->payload : 0;
        double dv = 0;
        int is_int = 0;
        if (t == COURIER_JSON_REAL) memcpy(&dv, &x->payload, sizeof dv);
        const char *why = coerce_number(a->type, co, t, t == COURIER_JSON_STRING ? in->text + x->payload : NULL,
                                        x->length, &iv, &dv, &is_int);
        if (why) return mismatch_type(c, f, a->type, t, *why ? why : NULL);
        if (!is_int && (x->flags & COURIER_JSON_TAPE_NUMBER_TEXT)) /* kept as text (REAL, NUMBER): as it is */
            return tcopy(o, in->e, in->text, v) ? oom(c) : COURIER_OK;
        uint64_t bits;
        if (is_int != (t == COURIER_JSON_INTEGER) || t == COURIER_JSON_STRING) *same = 0;
        if (is_int) bits = (uint64_t)(int64_t)iv;
        else memcpy(&bits, &dv, sizeof bits);
        return tput(o, is_int ? COURIER_JSON_INTEGER : COURIER_JSON_REAL, 0, 0, bits) == SIZE_MAX ? oom(c) : COURIER_OK;
    }
    case COURIER_JSON_BOOL:
        if (t == COURIER_JSON_BOOL) return tput(o, t, x->flags, 0, 0) == SIZE_MAX ? oom(c) : COURIER_OK;
        if ((co & COURIER_MAP_BOOL_FROM_NUMBER) && t == COURIER_JSON_INTEGER && (x->payload == 0 || x->payload == 1))
            return (*same = 0), tput(o, COURIER_JSON_BOOL, x->payload ? COURIER_JSON_TAPE_TRUE : 0, 0, 0) == SIZE_MAX ? oom(c)
                                                                                                    : COURIER_OK;
        return mismatch_type(c, f, a->type, t, NULL);
    }
    return mismatch_type(c, f, a->type, t, NULL);
}

/* apply_object's rules: the output object is written member by member in the mapping's order;
 * when it equals the input as it is (apply_object's `same`: the input itself is returned), in the
 * input's order, as the jansson path's output lists it. *same becomes 0 unless that is so. */
static int tapply_object(const courier_mapping *m, const tape_in *in, size_t v, const frame *f, apply_ctx *c,
                         tape_out *o, int *same) {
    if (in->e[v].type != COURIER_JSON_OBJECT) return mismatch_type(c, f, COURIER_JSON_OBJECT, in->e[v].type, NULL);
    if (++c->depth > CR_JSON_MAX_DEPTH) {
        c->depth--;
        return mismatch_type(c, f, COURIER_JSON_OBJECT, COURIER_JSON_OBJECT, "mapping nested too deeply");
    }
    size_t text_at = o->text.len, at = tput(o, COURIER_JSON_OBJECT, 0, 0, 0), hint = 0, last = 0;
    uint32_t members = 0;
    int rc = at == SIZE_MAX ? oom(c) : COURIER_OK;
    int kept = in->e[v].length == m->count, ordered = 1; /* kept: apply_object's `same` */
    for (size_t i = 0; rc == COURIER_OK && i < m->count; i++) {
        const cr_attr *a = &m->attrs[i];
        unsigned co = a->flags | m->flags;
        size_t w = 0;
        if (a->source_simple) w = courier_json_tape_get(in->t, v, a->source, a->source_len, &hint);
        else if (!courier_json_tape_path(&w, in->t, v, a->source)) w = 0;
        int wt = ttype(in, w);
        if (wt == COURIER_JSON_NULL && (co & COURIER_MAP_NULL_AS_ABSENT)) w = 0, wt = COURIER_JSON_NONE;
        int renamed = a->renamed;
        if (w) {
            if (w < last) ordered = 0;
            last = w;
        }
        if (!w || (wt == COURIER_JSON_NULL && a->type != COURIER_JSON_ANY)) {
            if (a->def_tape || !w || renamed) kept = 0;
            if (!a->def_tape && (a->flags & COURIER_MAP_REQUIRED)) {
                frame fa = {f, a->source, a->source_len, 0};
                rc = mismatch_type(c, &fa, a->type, wt, NULL);
            } else if (a->def_tape || w) {
                /* The default, or an optional null that stays null. */
                if (tput_string(o, a->dest, a->dest_len)) rc = oom(c);
                else if (a->def_tape) {
                    if (tcopy(o, courier_json_tape_entries(a->def_tape, NULL),
                              (const char *)courier_json_tape_text(a->def_tape), 0))
                        rc = oom(c);
                } else if (tput(o, COURIER_JSON_NULL, 0, 0, 0) == SIZE_MAX) {
                    rc = oom(c);
                }
                members++;
            }
            continue;
        }
        frame fa = {f, a->source, a->source_len, 0};
        if (renamed) kept = 0;
        if (tput_string(o, a->dest, a->dest_len)) rc = oom(c);
        else rc = tconvert(a, co, in, w, &fa, c, o, &kept);
        members++;
    }
    if (rc == COURIER_OK && kept && !ordered) {
        /* The input as it is, in its order: written again by one copy. */
        o->count = at;
        o->text.len = text_at;
        o->text.data[text_at] = '\0';
        if (tcopy(o, in->e, in->text, v)) rc = oom(c);
    } else if (rc == COURIER_OK) {
        o->e[at].length = members;
        o->e[at].payload = o->count;
    }
    if (!kept) *same = 0;
    c->depth--;
    return rc;
}

int cr_mapping_apply_tape(const courier_mapping *m, const courier_json_tape *t, size_t index, const char *prefix,
                          courier_json_tape **out, courier_mapping_error *where, courier_error *err) {
    apply_ctx c = {where, err, prefix, 0};
    *out = NULL;
    if (where) memset(where, 0, sizeof *where);
    size_t count = 0;
    tape_in in = {t, courier_json_tape_entries(t, &count), (const char *)courier_json_tape_text(t)};
    if (index >= count) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "index %zu is not in the tape", index);
    /* About as many entries as the input: a mapping keeps most of what it reads. */
    tape_out o = {0};
    size_t guess = tskip(in.e, index) - index + 16;
    if (!(o.e = malloc(guess * sizeof *o.e)) || cr_buf_reserve(&o.text, 64)) {
        free(o.e);
        return oom(&c);
    }
    o.cap = guess;
    int rc = COURIER_OK;
    if (in.e[index].type == COURIER_JSON_ARRAY) {
        /* A mapping applied to an array maps each element (the seeds' collections). */
        size_t at = tput(&o, COURIER_JSON_ARRAY, 0, in.e[index].length, 0), k = index + 1;
        for (size_t i = 0; rc == COURIER_OK && i < in.e[index].length; i++, k = tskip(in.e, k)) {
            frame fe = {NULL, NULL, 0, i};
            int same = 1;
            rc = tapply_object(m, &in, k, &fe, &c, &o, &same);
        }
        if (rc == COURIER_OK) o.e[at].payload = o.count;
    } else {
        int same = 1;
        rc = tapply_object(m, &in, index, NULL, &c, &o, &same);
    }
    if (rc != COURIER_OK) {
        free(o.e);
        cr_buf_free(&o.text);
        return rc;
    }
    size_t text_len = 0;
    char *text = cr_buf_take(&o.text, &text_len);
    if (!text || !(*out = cr_json_tape_adopt(o.e, o.count, text, text_len))) {
        if (!text) free(o.e);
        return oom(&c);
    }
    return COURIER_OK;
}

int courier_mapping_apply_tape(courier_json_tape **out, courier_mapping_error *where, const courier_mapping *m,
                               const courier_json_tape *input, size_t index, courier_error *err) {
    cr_error_clear(err);
    if (where) memset(where, 0, sizeof *where);
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!m || !input) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "mapping or input is NULL");
    return cr_mapping_apply_tape(m, input, index, "", out, where, err);
}

int courier_mapping_apply(courier_json **out, courier_mapping_error *where, const courier_mapping *m,
                          const courier_json *input, courier_error *err) {
    cr_error_clear(err);
    if (where) memset(where, 0, sizeof *where);
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!m || !input) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "mapping or input is NULL");
    json_t *o = NULL;
    int rc = cr_mapping_apply(m, (const json_t *)input, "", &o, where, err);
    *out = (courier_json *)o;
    return rc;
}
