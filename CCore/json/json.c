/*
 * json.c — the JSON handle API over jansson: parsing with limits, typed read accessors, key paths,
 * object iteration in document order, building values, serializing.
 *
 * A courier_json * is a jansson json_t * under another name, so reading costs one call and no
 * conversion. Values are immutable once they are reachable from a response; reading them from
 * several threads at once is safe (jansson's reads do not write, and its reference counts are
 * atomic).
 */
#include "json/json_internal.h"

#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define J(v) ((json_t *)(v))
#define CJ(v) ((const json_t *)(v))

/* ---- types ---------------------------------------------------------------------------------------- */

int courier_json_typeof(const courier_json *v) {
    if (!v) return COURIER_JSON_NONE;
    switch (json_typeof(CJ(v))) {
    case JSON_OBJECT: return COURIER_JSON_OBJECT;
    case JSON_ARRAY: return COURIER_JSON_ARRAY;
    case JSON_STRING: return cr_json_bignum(CJ(v), NULL) ? COURIER_JSON_REAL : COURIER_JSON_STRING;
    case JSON_INTEGER: return COURIER_JSON_INTEGER;
    case JSON_REAL: return COURIER_JSON_REAL;
    case JSON_TRUE:
    case JSON_FALSE: return COURIER_JSON_BOOL;
    case JSON_NULL: return COURIER_JSON_NULL;
    }
    return COURIER_JSON_NONE;
}

const char *courier_json_type_name(int type) {
    switch (type) {
    case COURIER_JSON_NONE: return "nothing";
    case COURIER_JSON_OBJECT: return "object";
    case COURIER_JSON_ARRAY: return "array";
    case COURIER_JSON_STRING: return "string";
    case COURIER_JSON_INTEGER: return "integer";
    case COURIER_JSON_REAL: return "real";
    case COURIER_JSON_BOOL: return "bool";
    case COURIER_JSON_NULL: return "null";
    case COURIER_JSON_NUMBER: return "number";
    case COURIER_JSON_ANY: return "any";
    default: return "unknown";
    }
}

/* ---- parsing ---------------------------------------------------------------------------------------- */

/* One pass over the text before jansson sees it: the nesting depth, checked against the caller's
 * limit before any allocation (jansson would stop only at its compile-time 2048), and the commas
 * between the elements of a top-level array, where a large array may be split for parsing on
 * several threads. Strings are skipped, honouring escapes. */
typedef struct scan_result {
    size_t too_deep_at; /* offset of the bracket that passed the limit, or SIZE_MAX */
    size_t cuts[CR_JSON_MAX_PARTS - 1]; /* offsets of top-level commas near len*k/parts */
    int ncuts;
} scan_result;

static void scan(const unsigned char *s, size_t len, int limit, int parts, scan_result *r) {
    int depth = 0;
    size_t i = 0, next_target = parts > 1 ? len / (size_t)parts : SIZE_MAX;
    r->too_deep_at = SIZE_MAX;
    r->ncuts = 0;
    while (i < len && s[i] <= ' ') i++;
    int top_array = i < len && s[i] == '[';
    while (i < len) {
        unsigned char c = s[i];
        if (c == '"') {
            /* Skip the string; an unterminated string is jansson's to report. */
            i++;
            while (i < len) {
                const unsigned char *q = memchr(s + i, '"', len - i);
                if (!q) return;
                size_t k = (size_t)(q - s);
                size_t bs = 0;
                while (k - bs > i && s[k - bs - 1] == '\\') bs++;
                i = k + 1;
                if ((bs & 1) == 0) break;
            }
            continue;
        }
        if (c == '[' || c == '{') {
            if (++depth > limit) {
                r->too_deep_at = i;
                return;
            }
        } else if (c == ']' || c == '}') {
            depth--;
        } else if (c == ',' && depth == 1 && top_array && i >= next_target && r->ncuts < parts - 1) {
            r->cuts[r->ncuts++] = i;
            next_target = r->ncuts + 1 < parts ? len / (size_t)parts * (size_t)(r->ncuts + 1) : SIZE_MAX;
        }
        i++;
    }
}

/* Part k of a split array, fed to json_load_callback: "[" (unless it is the first part, which
 * starts with the document's own '['), the slice, and "]" (unless it is the last part, which ends
 * with the document's own ']'). */
typedef struct part {
    const char *data;
    size_t len;
    int open, close; /* whether to add '[' before and ']' after */
    int stage;       /* 0: '[', 1: slice, 2: ']', 3: done */
    size_t pos;
    size_t flags;
    json_t *out;
    json_error_t err;
} part;

static size_t feed(void *buffer, size_t buflen, void *arg) {
    part *p = arg;
    char *b = buffer;
    size_t n = 0;
    while (n < buflen && p->stage < 3) {
        if (p->stage == 0) {
            if (p->open) b[n++] = '[';
            p->stage = 1;
        } else if (p->stage == 1) {
            size_t take = p->len - p->pos;
            if (take > buflen - n) take = buflen - n;
            memcpy(b + n, p->data + p->pos, take);
            n += take;
            p->pos += take;
            if (p->pos == p->len) p->stage = 2;
        } else {
            if (p->close) b[n++] = ']';
            p->stage = 3;
        }
    }
    return n;
}

static void *parse_part(void *arg) {
    part *p = arg;
    cr_thread_set_name("courier-json");
    p->out = json_load_callback(feed, p, p->flags, &p->err);
    return NULL;
}

/* Parses a top-level array in parts on several threads and joins them. NULL when anything does
 * not fit (a part that fails or is empty, a thread that cannot start): the caller then parses the
 * whole text on its own thread, which also reports errors exactly. */
static json_t *parse_split(const char *data, size_t len, const scan_result *sr, size_t flags) {
    int nparts = sr->ncuts + 1;
    /* jansson seeds its hash function on first use; do it here, before any thread starts, so the
     * threads only read the seed (a no-op once seeded). */
    json_object_seed(0);
    part parts[CR_JSON_MAX_PARTS];
    pthread_t threads[CR_JSON_MAX_PARTS];
    int started[CR_JSON_MAX_PARTS] = {0};
    size_t from = 0;
    for (int k = 0; k < nparts; k++) {
        size_t to = k < sr->ncuts ? sr->cuts[k] : len;
        memset(&parts[k], 0, sizeof parts[k]);
        parts[k].data = data + from;
        parts[k].len = to - from;
        parts[k].open = k > 0;
        parts[k].close = k < nparts - 1;
        parts[k].flags = flags;
        from = to + 1; /* past the comma */
    }
    for (int k = 1; k < nparts; k++)
        started[k] = pthread_create(&threads[k], NULL, parse_part, &parts[k]) == 0;
    parse_part(&parts[0]);
    for (int k = 1; k < nparts; k++) {
        if (started[k]) pthread_join(threads[k], NULL);
        else parse_part(&parts[k]);
    }
    json_t *joined = parts[0].out;
    int ok = 1;
    for (int k = 0; k < nparts; k++)
        if (!parts[k].out || !json_is_array(parts[k].out) || json_array_size(parts[k].out) == 0) ok = 0;
    for (int k = 1; k < nparts && ok; k++)
        if (json_array_extend(joined, parts[k].out)) ok = 0;
    for (int k = ok ? 1 : 0; k < nparts; k++)
        if (parts[k].out) json_decref(parts[k].out);
    return ok ? joined : NULL;
}

static int parts_for(const courier_json_options *opts, size_t len) {
    if (opts->max_threads == 1 || opts->parallel_min_bytes <= 0 || (int64_t)len < opts->parallel_min_bytes) return 1;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = opts->max_threads > 0 ? opts->max_threads : (int)(cpus > 0 ? cpus : 1);
    return n < 1 ? 1 : n > CR_JSON_MAX_PARTS ? CR_JSON_MAX_PARTS : n;
}

int cr_json_parse(const void *data, size_t len, const courier_json_options *opts, json_t **out, courier_error *err) {
    *out = NULL;
    if (!data && len) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "JSON data is NULL");
    if ((int64_t)len > opts->max_bytes)
        return cr_fail(err, COURIER_E_TOO_LARGE, "JSON text of %zu bytes is larger than the limit of %lld bytes", len,
                       (long long)opts->max_bytes);
    scan_result sr;
    scan(data, len, opts->max_depth, parts_for(opts, len), &sr);
    if (sr.too_deep_at != SIZE_MAX) {
        /* The tape parser says which error comes first (a malformed byte before the deep bracket,
         * or the depth at that bracket), as courier_json_tape_parse does for the same text. */
        courier_json_tape *tape = NULL;
        int rc = courier_json_tape_parse(&tape, data, len, opts, err);
        courier_json_tape_free(tape);
        if (rc != COURIER_OK) return rc;
        return cr_fail(err, COURIER_E_JSON, "JSON nesting deeper than %d at byte %zu", opts->max_depth, sr.too_deep_at);
    }
    size_t flags = JSON_DECODE_ANY;
    if (!(opts->flags & COURIER_JSON_ALLOW_DUPLICATE_KEYS)) flags |= JSON_REJECT_DUPLICATES;
    if (opts->flags & COURIER_JSON_ALLOW_NUL) flags |= JSON_ALLOW_NUL;
    if (sr.ncuts > 0) {
        json_t *v = parse_split(data, len, &sr, flags);
        if (v) {
            *out = v;
            return COURIER_OK;
        }
    }
    json_error_t je;
    json_t *v = json_loadb(len ? data : "", len, flags, &je);
    if (!v) {
        if (json_error_code(&je) == json_error_out_of_memory) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        /* The tape parser decides what jansson refuses: a number beyond int64 or double (kept as
         * text) or a byte order mark it accepts, and a malformed text it reports at the offending
         * byte, the position courier_json_tape_parse gives (jansson's is past the token it read). */
        courier_json_tape *tape = NULL;
        int rc = courier_json_tape_parse(&tape, data, len, opts, err);
        if (rc == COURIER_OK) {
            rc = cr_json_from_tape(tape, 0, &v);
            courier_json_tape_free(tape);
            if (rc) return cr_fail(err, rc, NULL);
        } else {
            return rc;
        }
    }
    *out = v;
    return COURIER_OK;
}

int courier_json_parse(courier_json **out, const void *data, size_t len, const courier_json_options *opts,
                       courier_error *err) {
    cr_error_clear(err);
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    courier_json_options o;
    cr_json_options_resolve(opts, &o);
    json_t *v = NULL;
    int rc = cr_json_parse(data, len, &o, &v, err);
    *out = (courier_json *)v;
    return rc;
}

void courier_json_free(courier_json *v) {
    if (v) json_decref(J(v));
}

/* ---- reading ------------------------------------------------------------------------------------------ */

size_t courier_json_size(const courier_json *v) {
    if (!v) return 0;
    if (json_is_array(CJ(v))) return json_array_size(CJ(v));
    if (json_is_object(CJ(v))) return json_object_size(CJ(v));
    return 0;
}

const courier_json *courier_json_at(const courier_json *v, size_t index) {
    return v ? (const courier_json *)json_array_get(CJ(v), index) : NULL;
}

const courier_json *courier_json_get(const courier_json *v, const char *key) {
    return v && key ? (const courier_json *)json_object_getn(CJ(v), key, strlen(key)) : NULL;
}

const courier_json *courier_json_getn(const courier_json *v, const char *key, size_t key_len) {
    return v && (key || !key_len) ? (const courier_json *)json_object_getn(CJ(v), key ? key : "", key_len) : NULL;
}

const courier_json *courier_json_get_hinted(const courier_json *v, const char *key, size_t key_len,
                                            const courier_json_iter **hint) {
    if (!v || (!key && key_len) || !json_is_object(CJ(v))) return NULL;
    if (!key) key = "";
    void *it = hint ? (void *)*hint : NULL;
    if (it && json_object_iter_key_len(it) == key_len && memcmp(json_object_iter_key(it), key, key_len) == 0) {
        *hint = (const courier_json_iter *)json_object_iter_next(J(v), it);
        return (const courier_json *)json_object_iter_value(it);
    }
    return (const courier_json *)json_object_getn(CJ(v), key, key_len);
}

/* One component of a key path: an object key, or an array index in decimal. */
const json_t *cr_json_step(const json_t *v, const char *seg, size_t len) {
    if (json_is_object(v)) return json_object_getn(v, seg, len);
    if (json_is_array(v)) {
        if (len == 0 || len > 19) return NULL;
        size_t idx = 0;
        for (size_t i = 0; i < len; i++) {
            if (seg[i] < '0' || seg[i] > '9') return NULL;
            idx = idx * 10 + (size_t)(seg[i] - '0');
        }
        return json_array_get(v, idx);
    }
    return NULL;
}

const json_t *cr_json_path(const json_t *v, const char *path, size_t len) {
    size_t i = 0;
    while (v && i < len) {
        const char *dot = memchr(path + i, '.', len - i);
        size_t end = dot ? (size_t)(dot - path) : len;
        v = cr_json_step(v, path + i, end - i);
        i = end + 1;
        if (dot && i == len) return NULL; /* a trailing dot names an empty key that cannot be written */
    }
    return v;
}

const courier_json *courier_json_path(const courier_json *v, const char *path) {
    if (!v) return NULL;
    if (!path) return v;
    return (const courier_json *)cr_json_path(CJ(v), path, strlen(path));
}

const char *courier_json_string(const courier_json *v, size_t *len) {
    if (!v || !cr_json_is_str(CJ(v))) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = json_string_length(CJ(v));
    return json_string_value(CJ(v));
}

int64_t courier_json_integer(const courier_json *v) {
    return v && json_is_integer(CJ(v)) ? (int64_t)json_integer_value(CJ(v)) : 0;
}

double courier_json_real(const courier_json *v) {
    size_t n = 0;
    const char *num = v ? cr_json_bignum(CJ(v), &n) : NULL;
    int status;
    if (num) return cr_json_strtod(num, n, &status); /* 0 without memory */
    return v ? json_number_value(CJ(v)) : 0.0;
}

const char *courier_json_number_text(const courier_json *v, size_t *len) {
    size_t n = 0;
    const char *num = v ? cr_json_bignum(CJ(v), &n) : NULL;
    if (len) *len = num ? n : 0;
    return num;
}

static int json_read(const courier_json *v, int64_t *i64, uint64_t *u64, double *d) {
    size_t n = 0;
    const char *num = v ? cr_json_bignum(CJ(v), &n) : NULL;
    if (num) return cr_json_number_read(num, n, 0, 0, 0, i64, u64, d);
    if (!v || !json_is_number(CJ(v))) return COURIER_E_INVALID_ARGUMENT;
    return cr_json_number_read(NULL, 0, json_is_integer(CJ(v)), json_is_integer(CJ(v)) ? json_integer_value(CJ(v)) : 0,
                               json_is_real(CJ(v)) ? json_real_value(CJ(v)) : 0, i64, u64, d);
}

int courier_json_read_int64(int64_t *out, const courier_json *v) {
    return out ? json_read(v, out, NULL, NULL) : COURIER_E_INVALID_ARGUMENT;
}

int courier_json_read_uint64(uint64_t *out, const courier_json *v) {
    return out ? json_read(v, NULL, out, NULL) : COURIER_E_INVALID_ARGUMENT;
}

int courier_json_read_double(double *out, const courier_json *v) {
    return out ? json_read(v, NULL, NULL, out) : COURIER_E_INVALID_ARGUMENT;
}

int courier_json_bool(const courier_json *v) { return v && json_is_true(CJ(v)) ? 1 : 0; }

int courier_json_equal(const courier_json *a, const courier_json *b) {
    if (!a || !b) return a == b;
    return json_equal(CJ(a), CJ(b));
}

/* ---- iteration ------------------------------------------------------------------------------------------ */

const courier_json_iter *courier_json_iter_first(const courier_json *object) {
    return object && json_is_object(CJ(object)) ? (const courier_json_iter *)json_object_iter(J(object)) : NULL;
}

const courier_json_iter *courier_json_iter_next(const courier_json *object, const courier_json_iter *it) {
    if (!object || !it) return NULL;
    return (const courier_json_iter *)json_object_iter_next(J(object), (void *)it);
}

const char *courier_json_iter_key(const courier_json_iter *it, size_t *len) {
    if (!it) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = json_object_iter_key_len((void *)it);
    return json_object_iter_key((void *)it);
}

const courier_json *courier_json_iter_value(const courier_json_iter *it) {
    return it ? (const courier_json *)json_object_iter_value((void *)it) : NULL;
}

/* ---- building ------------------------------------------------------------------------------------------ */

static int built(json_t *v, courier_json **out) {
    *out = (courier_json *)v;
    return v ? COURIER_OK : COURIER_E_NO_MEMORY;
}

int courier_json_new_object(courier_json **out) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    return built(json_object(), out);
}

int courier_json_new_array(courier_json **out) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    return built(json_array(), out);
}

int courier_json_new_string(courier_json **out, const char *s, size_t len) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    *out = NULL;
    if (!s && len) return COURIER_E_INVALID_ARGUMENT;
    if (!s) s = "";
    /* Embedded NULs are legal JSON (\u0000); the rest must be UTF-8. */
    for (size_t i = 0, start = 0; i <= len; i++) {
        if (i == len || s[i] == '\0') {
            if (i > start && !cr_utf8_valid(s + start, i - start)) return COURIER_E_INVALID_ENCODING;
            start = i + 1;
        }
    }
    return built(json_stringn_nocheck(s, len), out);
}

int courier_json_new_integer(courier_json **out, int64_t value) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    return built(json_integer((json_int_t)value), out);
}

int courier_json_new_real(courier_json **out, double value) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    *out = NULL;
    if (!isfinite(value)) return COURIER_E_INVALID_ARGUMENT; /* JSON has no NaN or infinity */
    return built(json_real(value), out);
}

int courier_json_new_bool(courier_json **out, int value) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    return built(json_boolean(value), out);
}

int courier_json_new_null(courier_json **out) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    return built(json_null(), out);
}

int courier_json_object_set(courier_json *object, const char *key, size_t key_len, courier_json *value) {
    if (!object || !value || (!key && key_len) || !json_is_object(J(object)) || J(object) == J(value)) {
        courier_json_free(value);
        return COURIER_E_INVALID_ARGUMENT;
    }
    if (!key) key = "";
    if (memchr(key, '\0', key_len) || !cr_utf8_valid(key, key_len)) {
        courier_json_free(value);
        return COURIER_E_INVALID_ENCODING;
    }
    return json_object_setn_new_nocheck(J(object), key, key_len, J(value)) ? COURIER_E_NO_MEMORY : COURIER_OK;
}

int courier_json_array_append(courier_json *array, courier_json *value) {
    if (!array || !value || !json_is_array(J(array)) || J(array) == J(value)) {
        courier_json_free(value);
        return COURIER_E_INVALID_ARGUMENT;
    }
    return json_array_append_new(J(array), J(value)) ? COURIER_E_NO_MEMORY : COURIER_OK;
}

int courier_json_copy(courier_json **out, const courier_json *v) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    *out = NULL;
    if (!v) return COURIER_E_INVALID_ARGUMENT;
    return built(json_deep_copy(CJ(v)), out);
}

/* ---- serializing ------------------------------------------------------------------------------------------ */

/* The shortest of %.15g, %.16g, %.17g that reads back as the same double, with ".0" added when
 * it would otherwise read back as an integer. */
int cr_json_format_real(double d, char *buf, size_t size) {
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, size, "%.*g", prec, d);
        if (n < 0 || (size_t)n >= size) return -1;
        if (strtod(buf, NULL) == d) break;
    }
    if (!strpbrk(buf, ".eEn")) { /* "n": inf and nan, which never reach here */
        if ((size_t)n + 2 >= size) return -1;
        memcpy(buf + n, ".0", 3);
        n += 2;
    }
    return n;
}

/* The one JSON writer besides jansson's: dump_value below and the journal's records (journal/record.c)
 * write through these. */

size_t cr_json_format_int(char *p, int64_t v) {
    /* Two digits per division, written in place from the end once the length is known (a
     * millisecond time's 13 digits were ~110 instructions a digit at a time; an outcome log record
     * formats four numbers). */
    static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                "8081828384858687888990919293949596979899";
    uint64_t u = v < 0 ? 0ULL - (uint64_t)v : (uint64_t)v;
    size_t o = 0;
    if (v < 0) p[o++] = '-';
    size_t n = 1;
    for (uint64_t t = u; t >= 10; t /= 10) n++;
    char *q = p + o + n;
    while (u >= 100) {
        unsigned r = (unsigned)(u % 100);
        u /= 100;
        q -= 2;
        q[0] = pairs[2 * r];
        q[1] = pairs[2 * r + 1];
    }
    if (u >= 10) {
        q[-2] = pairs[2 * u];
        q[-1] = pairs[2 * u + 1];
    } else {
        q[-1] = (char)('0' + u);
    }
    return o + n;
}

int cr_json_put_int(cr_buf *b, int64_t v) {
    if (cr_buf_reserve(b, 21)) return -1;
    b->len += cr_json_format_int(b->data + b->len, v);
    b->data[b->len] = '\0';
    return 0;
}

/* The bytes a JSON string escapes: control characters, '"' and '\\'. */
static const unsigned char json_esc[256] = {
    [0] = 1, [1] = 1, [2] = 1, [3] = 1, [4] = 1, [5] = 1, [6] = 1, [7] = 1, [8] = 1, [9] = 1, [10] = 1,
    [11] = 1, [12] = 1, [13] = 1, [14] = 1, [15] = 1, [16] = 1, [17] = 1, [18] = 1, [19] = 1, [20] = 1,
    [21] = 1, [22] = 1, [23] = 1, [24] = 1, [25] = 1, [26] = 1, [27] = 1, [28] = 1, [29] = 1, [30] = 1,
    [31] = 1, ['"'] = 1, ['\\'] = 1
};

int cr_json_put_string(cr_buf *b, const char *s, size_t len, unsigned flags) {
    static const char hex[] = "0123456789abcdef";
    if (!(flags & (COURIER_JSON_DUMP_ASCII | COURIER_JSON_DUMP_ESCAPE_SLASH))) {
        /* The common case: only quotes, backslashes and control characters are escaped; a string
         * without any is copied at once. */
        size_t i = 0;
        if (len == CR_JSON_CSTRING) { /* NUL-terminated: found while scanning (NUL is in the table) */
            while (!json_esc[(unsigned char)s[i]]) i++;
            len = s[i] ? i + strlen(s + i) : i;
        } else {
            while (i < len && !json_esc[(unsigned char)s[i]]) i++;
        }
        if (cr_buf_reserve(b, len + 2)) return -1;
        char *o = b->data + b->len;
        *o = '"';
        memcpy(o + 1, s, i);
        b->len += i + 1;
        if (i == len) {
            o[i + 1] = '"';
            o[i + 2] = '\0';
            b->len++;
            return 0;
        }
        o[i + 1] = '\0';
        size_t run = i;
        for (; i < len; i++) {
            unsigned char c = (unsigned char)s[i];
            if (!json_esc[c]) continue;
            if (i > run && cr_buf_append(b, s + run, i - run)) return -1;
            char esc[6] = {'\\', (char)c, 0, 0, 0, 0};
            size_t n = 2;
            if (c < 0x20) {
                char sh = 0;
                if (!(flags & CR_JSON_PUT_CONTROL_U)) {
                    switch (c) {
                    case '\b': sh = 'b'; break;
                    case '\f': sh = 'f'; break;
                    case '\n': sh = 'n'; break;
                    case '\r': sh = 'r'; break;
                    case '\t': sh = 't'; break;
                    default: break;
                    }
                }
                if (sh) {
                    esc[1] = sh;
                } else {
                    memcpy(esc, "\\u00", 4);
                    esc[4] = hex[c >> 4];
                    esc[5] = hex[c & 15];
                    n = 6;
                }
            }
            if (cr_buf_append(b, esc, n)) return -1;
            run = i + 1;
        }
        if (len > run && cr_buf_append(b, s + run, len - run)) return -1;
        return cr_buf_append_char(b, '"') ? -1 : 0;
    }
    if (len == CR_JSON_CSTRING) len = strlen(s);
    if (cr_buf_append_char(b, '"')) return -1;
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[16];
        size_t elen = 0;
        if (c == '"') esc = "\\\"", elen = 2;
        else if (c == '\\') esc = "\\\\", elen = 2;
        else if (c == '/' && (flags & COURIER_JSON_DUMP_ESCAPE_SLASH)) esc = "\\/", elen = 2;
        else if (c < 0x20) {
            switch ((flags & CR_JSON_PUT_CONTROL_U) ? 0 : c) {
            case '\b': esc = "\\b", elen = 2; break;
            case '\f': esc = "\\f", elen = 2; break;
            case '\n': esc = "\\n", elen = 2; break;
            case '\r': esc = "\\r", elen = 2; break;
            case '\t': esc = "\\t", elen = 2; break;
            default:
                memcpy(u, "\\u00", 4);
                u[4] = hex[c >> 4];
                u[5] = hex[c & 15];
                esc = u, elen = 6;
            }
        } else if (c >= 0x80 && (flags & COURIER_JSON_DUMP_ASCII)) {
            /* Decode one UTF-8 sequence (the value was validated when it was made). */
            unsigned cp;
            size_t n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
            if (i + n >= len) n = len - i - 1;
            cp = c & (n == 3 ? 0x07 : n == 2 ? 0x0F : 0x1F);
            for (size_t k = 1; k <= n; k++) cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3F);
            if (run && cr_buf_append(b, s + i - run, run)) return -1;
            run = 0;
            if (cp >= 0x10000) {
                cp -= 0x10000;
                unsigned hi = 0xD800 + (cp >> 10), lo = 0xDC00 + (cp & 0x3FF);
                snprintf(u, sizeof u, "\\u%04x\\u%04x", hi, lo);
                if (cr_buf_append(b, u, 12)) return -1;
            } else {
                snprintf(u, sizeof u, "\\u%04x", cp);
                if (cr_buf_append(b, u, 6)) return -1;
            }
            i += n;
            continue;
        }
        if (!esc) {
            run++;
            continue;
        }
        if ((run && cr_buf_append(b, s + i - run, run)) || cr_buf_append(b, esc, elen)) return -1;
        run = 0;
    }
    if (run && cr_buf_append(b, s + len - run, run)) return -1;
    return cr_buf_append_char(b, '"') ? -1 : 0;
}

static int dump_newline(cr_buf *b, unsigned flags, int depth) {
    if (!(flags & COURIER_JSON_DUMP_INDENT)) return 0;
    if (cr_buf_append_char(b, '\n')) return -1;
    for (int i = 0; i < depth; i++)
        if (cr_buf_append(b, "  ", 2)) return -1;
    return 0;
}

/* An object's member for the dumps: its key and its value, a jansson value (dump_value) or the index of
 * a tape entry (dump_tape); sorted by bytes, a shorter prefix first. */
typedef struct dump_member {
    const char *key;
    size_t len;
    union {
        const json_t *value;
        size_t index;
    } at;
} dump_member;

static int member_cmp(const void *a, const void *b) {
    const dump_member *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static int dump_value(cr_buf *b, const json_t *v, unsigned flags, int depth);
static int dump_tape(cr_buf *b, const courier_json_tape_entry *e, const char *t, size_t i, unsigned flags, int depth);

/* Writes an object of count members (sorted first when asked); a tape's members when e is set, else
 * jansson's. Frees m when it is not the caller's stack array. */
static int dump_members(cr_buf *b, dump_member *m, dump_member *stack, size_t count, const courier_json_tape_entry *e,
                        const char *t, unsigned flags, int depth) {
    if (flags & COURIER_JSON_DUMP_SORT_KEYS) qsort(m, count, sizeof *m, member_cmp);
    int rc = cr_buf_append_char(b, '{') ? -1 : 0;
    const char *colon = (flags & COURIER_JSON_DUMP_INDENT) ? ": " : ":";
    for (size_t i = 0; i < count && rc == 0; i++) {
        if ((i && cr_buf_append_char(b, ',')) || dump_newline(b, flags, depth + 1) ||
            cr_json_put_string(b, m[i].key, m[i].len, flags) || cr_buf_append_str(b, colon) ||
            (e ? dump_tape(b, e, t, m[i].at.index, flags, depth + 1) : dump_value(b, m[i].at.value, flags, depth + 1)))
            rc = -1;
    }
    if (rc == 0 && count && dump_newline(b, flags, depth)) rc = -1;
    if (rc == 0 && cr_buf_append_char(b, '}')) rc = -1;
    if (m != stack) free(m);
    return rc;
}

static int dump_value(cr_buf *b, const json_t *v, unsigned flags, int depth) {
    char num[40];
    int n;
    switch (json_typeof(v)) {
    case JSON_NULL: return cr_buf_append(b, "null", 4) ? -1 : 0;
    case JSON_TRUE: return cr_buf_append(b, "true", 4) ? -1 : 0;
    case JSON_FALSE: return cr_buf_append(b, "false", 5) ? -1 : 0;
    case JSON_INTEGER: return cr_json_put_int(b, (int64_t)json_integer_value(v));
    case JSON_REAL:
        n = cr_json_format_real(json_real_value(v), num, sizeof num);
        return n < 0 || cr_buf_append(b, num, (size_t)n) ? -1 : 0;
    case JSON_STRING: {
        size_t len = 0;
        const char *big = cr_json_bignum(v, &len);
        if (big) return cr_buf_append(b, big, len) ? -1 : 0; /* a number kept as text, as it came */
        return cr_json_put_string(b, json_string_value(v), json_string_length(v), flags);
    }
    case JSON_ARRAY: {
        size_t count = json_array_size(v);
        if (cr_buf_append_char(b, '[')) return -1;
        for (size_t i = 0; i < count; i++) {
            if ((i && cr_buf_append_char(b, ',')) || dump_newline(b, flags, depth + 1) ||
                dump_value(b, json_array_get(v, i), flags, depth + 1))
                return -1;
        }
        if (count && dump_newline(b, flags, depth)) return -1;
        return cr_buf_append_char(b, ']') ? -1 : 0;
    }
    case JSON_OBJECT: {
        size_t count = json_object_size(v), i = 0;
        dump_member stack[16], *m = stack;
        if (count > 16 && !(m = malloc(count * sizeof *m))) return -1;
        for (void *it = json_object_iter((json_t *)v); it && i < count; it = json_object_iter_next((json_t *)v, it), i++) {
            m[i] = (dump_member){json_object_iter_key(it), json_object_iter_key_len(it), {.value = json_object_iter_value(it)}};
        }
        return dump_members(b, m, stack, i, NULL, NULL, flags, depth);
    }
    }
    return -1;
}

/* dump_value's rules on a tape: the value at i of entries e (text t), members in document order
 * (DEAD ones left out) or sorted. */
static int dump_tape(cr_buf *b, const courier_json_tape_entry *e, const char *t, size_t i, unsigned flags, int depth) {
    const courier_json_tape_entry *x = &e[i];
    char num[40];
    int n;
    switch (x->type) {
    case COURIER_JSON_NULL: return cr_buf_append(b, "null", 4) ? -1 : 0;
    case COURIER_JSON_BOOL:
        return (x->flags & COURIER_JSON_TAPE_TRUE) ? (cr_buf_append(b, "true", 4) ? -1 : 0)
                                                    : (cr_buf_append(b, "false", 5) ? -1 : 0);
    case COURIER_JSON_INTEGER: return cr_json_put_int(b, (int64_t)x->payload);
    case COURIER_JSON_REAL: {
        if (x->flags & COURIER_JSON_TAPE_NUMBER_TEXT) /* kept as text, as it came */
            return cr_buf_append(b, t + x->length, cr_json_number_len(t + x->length)) ? -1 : 0;
        double d;
        memcpy(&d, &x->payload, sizeof d);
        n = cr_json_format_real(d, num, sizeof num);
        return n < 0 || cr_buf_append(b, num, (size_t)n) ? -1 : 0;
    }
    case COURIER_JSON_STRING: return cr_json_put_string(b, t + x->payload, x->length, flags);
    case COURIER_JSON_ARRAY: {
        if (cr_buf_append_char(b, '[')) return -1;
        size_t k = i + 1;
        for (size_t m = 0; m < x->length; m++) {
            if ((m && cr_buf_append_char(b, ',')) || dump_newline(b, flags, depth + 1) ||
                dump_tape(b, e, t, k, flags, depth + 1))
                return -1;
            k = e[k].type == COURIER_JSON_OBJECT || e[k].type == COURIER_JSON_ARRAY ? (size_t)e[k].payload : k + 1;
        }
        if (x->length && dump_newline(b, flags, depth)) return -1;
        return cr_buf_append_char(b, ']') ? -1 : 0;
    }
    case COURIER_JSON_OBJECT: {
        size_t count = x->length, c = 0;
        dump_member stack[16], *m = stack;
        if (count > 16 && !(m = malloc(count * sizeof *m))) return -1;
        for (size_t k = i + 1; k < x->payload && c < count;) {
            size_t v = k + 1;
            if (!(e[k].flags & COURIER_JSON_TAPE_DEAD)) m[c++] = (dump_member){t + e[k].payload, e[k].length, {.index = v}};
            k = e[v].type == COURIER_JSON_OBJECT || e[v].type == COURIER_JSON_ARRAY ? (size_t)e[v].payload : v + 1;
        }
        return dump_members(b, m, stack, c, e, t, flags, depth);
    }
    }
    return -1;
}

int courier_json_tape_dump(char **out, size_t *len, const courier_json_tape *tape, size_t index, unsigned flags,
                           courier_error *err) {
    cr_error_clear(err);
    if (len) *len = 0;
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    size_t count = 0;
    const courier_json_tape_entry *e = courier_json_tape_entries(tape, &count);
    if (!tape || index >= count) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "no value at index %zu", index);
    flags &= COURIER_JSON_DUMP_INDENT | COURIER_JSON_DUMP_SORT_KEYS | COURIER_JSON_DUMP_ASCII | COURIER_JSON_DUMP_ESCAPE_SLASH;
    cr_buf b = {0};
    if (dump_tape(&b, e, (const char *)courier_json_tape_text(tape), index, flags, 0) || !(*out = cr_buf_take(&b, len))) {
        cr_buf_free(&b);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    return COURIER_OK;
}

int cr_json_dump(const json_t *v, unsigned flags, cr_buf *out) {
    /* The public flags only (an internal bit such as CR_JSON_PUT_CONTROL_U is never the caller's). */
    flags &= COURIER_JSON_DUMP_INDENT | COURIER_JSON_DUMP_SORT_KEYS | COURIER_JSON_DUMP_ASCII | COURIER_JSON_DUMP_ESCAPE_SLASH;
    return dump_value(out, v, flags, 0) == 0 ? COURIER_OK : COURIER_E_NO_MEMORY;
}

int courier_json_dump(char **out, size_t *len, const courier_json *v, unsigned flags, courier_error *err) {
    cr_error_clear(err);
    if (len) *len = 0;
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!v) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "value is NULL");
    cr_buf b = {0};
    if (cr_json_dump(CJ(v), flags, &b) != COURIER_OK || !(*out = cr_buf_take(&b, len))) {
        cr_buf_free(&b);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    return COURIER_OK;
}

void courier_free(void *p) { free(p); }

/* ---- a JSON object as form text (request bodies) ------------------------------------------------ */

/* name=value for every leaf: nested objects as name[key], arrays as name[] (the seeds' AFNetworking
 * convention), true/false for booleans, an empty value for null. */
static int form_value(cr_form_emit_fn emit, void *ctx, cr_buf *name, const json_t *v, int depth) {
    if (depth > 32) return COURIER_E_INVALID_ARGUMENT;
    size_t mark = name->len;
    int rc = COURIER_OK;
    if (json_is_object(v)) {
        for (void *it = json_object_iter((json_t *)v); it && rc == COURIER_OK; it = json_object_iter_next((json_t *)v, it)) {
            name->len = mark;
            if (cr_buf_append_char(name, '[') || cr_buf_append(name, json_object_iter_key(it), json_object_iter_key_len(it)) ||
                cr_buf_append_char(name, ']'))
                rc = COURIER_E_NO_MEMORY;
            else
                rc = form_value(emit, ctx, name, json_object_iter_value(it), depth + 1);
        }
    } else if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v) && rc == COURIER_OK; i++) {
            name->len = mark;
            if (cr_buf_append(name, "[]", 2)) rc = COURIER_E_NO_MEMORY;
            else rc = form_value(emit, ctx, name, json_array_get(v, i), depth + 1);
        }
    } else {
        char num[40];
        const char *text = "";
        size_t tlen = 0;
        int n;
        switch (json_typeof(v)) {
        case JSON_STRING: /* a string, or a number kept as text */
            if (!(text = cr_json_bignum(v, &tlen))) text = json_string_value(v), tlen = json_string_length(v);
            break;
        case JSON_INTEGER:
            n = snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
            text = num, tlen = (size_t)n;
            break;
        case JSON_REAL:
            n = cr_json_format_real(json_real_value(v), num, sizeof num);
            text = num, tlen = n > 0 ? (size_t)n : 0;
            break;
        case JSON_TRUE: text = "true", tlen = 4; break;
        case JSON_FALSE: text = "false", tlen = 5; break;
        default: break;
        }
        rc = emit(ctx, name->data, name->len, text, tlen);
    }
    name->len = mark;
    if (name->data) name->data[mark] = '\0';
    return rc;
}

int cr_json_form_each(const json_t *object, cr_form_emit_fn emit, void *ctx) {
    if (!json_is_object(object)) return COURIER_E_INVALID_ARGUMENT;
    cr_buf name = {0};
    int rc = COURIER_OK;
    for (void *it = json_object_iter((json_t *)object); it && rc == COURIER_OK;
         it = json_object_iter_next((json_t *)object, it)) {
        name.len = 0;
        if (cr_buf_append(&name, json_object_iter_key(it), json_object_iter_key_len(it))) rc = COURIER_E_NO_MEMORY;
        else rc = form_value(emit, ctx, &name, json_object_iter_value(it), 0);
    }
    cr_buf_free(&name);
    return rc;
}

static int emit_encoded(void *ctx, const char *name, size_t name_len, const char *value, size_t value_len) {
    cr_buf *out = ctx;
    if ((out->len && cr_buf_append_char(out, '&')) || cr_percent_encode(out, name, name_len) ||
        cr_buf_append_char(out, '=') || cr_percent_encode(out, value, value_len))
        return COURIER_E_NO_MEMORY;
    return COURIER_OK;
}

int cr_json_form_encode(const json_t *object, cr_buf *out) { return cr_json_form_each(object, emit_encoded, out); }
