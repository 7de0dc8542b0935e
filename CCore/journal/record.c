/*
 * record.c — the stored request: one table of its fields drives writing its JSON text (through
 * the one JSON writer, json.c's cr_json_put_*), reading it (through the JSON tape), the snapshots
 * handed to callers (which keep the decoded request whole) and the request of a replay (which
 * borrows the decoded method, url, headers and body). A field is added in three places: jreq
 * (journal_internal.h), its row below, and jreq_of_transfer (what the worker keeps of a transfer).
 */
#include "journal/journal_internal.h"

/* ==== base64 ==================================================================================== */

/* The value of each base64 character (standard alphabet), -1 for any other byte ('=' too). */
static const signed char b64_value[256] = {
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 62, -1, -1, -1, 63,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, -1, -1, -1, -1, -1, -1,
    -1,  0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14,
    15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, -1, -1, -1, -1, -1,
    -1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
    41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
    -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};

/* Decodes standard base64 (padding optional) in place: s[0..n) becomes the bytes, NUL-terminated
 * (each byte is written after the characters it comes from were read; n/4*3 + 1 <= n + 1 bytes).
 * Stops at the first '='. COURIER_E_INVALID_ARGUMENT (s then holds garbage) or COURIER_OK. */
static int b64_decode_in_place(char *s, size_t n, size_t *out_len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0, i = 0;
    /* Four characters, three bytes at a time (a character at a time it was most of a record's
     * field reading); the first group with a '=' or a stray byte ends it, and the loop below takes
     * over from there. */
    for (; i + 4 <= n; i += 4) {
        int a = b64_value[u[i]], b = b64_value[u[i + 1]], c = b64_value[u[i + 2]], d = b64_value[u[i + 3]];
        if ((a | b | c | d) < 0) break;
        uint32_t x = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        s[o] = (char)(x >> 16);
        s[o + 1] = (char)(x >> 8);
        s[o + 2] = (char)x;
        o += 3;
    }
    uint32_t acc = 0;
    int bits = 0;
    for (; i < n; i++) {
        if (s[i] == '=') break;
        int v = b64_value[u[i]];
        if (v < 0) return COURIER_E_INVALID_ARGUMENT;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            s[o++] = (char)(acc >> bits);
        }
    }
    s[o] = '\0';
    *out_len = o;
    return COURIER_OK;
}

/* ==== the fields ================================================================================ */

enum {
    JK_STR,     /* char *                       a JSON string */
    JK_INT,     /* int64_t                      an integer */
    JK_BOOL,    /* int                          true / false */
    JK_POLICY,  /* int64_t courier_freeze_policy "auto" / "manual" */
    JK_HEADERS, /* cr_kvlist (+ the idempotency key) [[name, value], ...] */
    JK_BODY,    /* body, body_len, has_body     base64 text */
    JK_OBJECT,  /* members of the same struct   {...} */
    JK_RESULTS, /* jres *results, nresults      [{...}, ...] */
};

enum {
    JW_ALWAYS,  /* written every time */
    JW_IF_SET,  /* written when present: its `has` flag, a non-NULL string, results */
    JW_OPENING, /* written by the journal thread in front of the rest (cj_apply_freeze) */
};

#define J_NO_FLAG 0xFFFFu

typedef struct jfield {
    const char *name;         /* the key */
    const char *key;          /* ",\"name\":": what is written before the value (the comma not first) */
    uint8_t key_len;
    uint8_t kind;             /* JK_* */
    uint8_t when;             /* JW_* */
    uint16_t off;             /* the value in its struct (jreq; jres for a result's members) */
    uint16_t has;             /* an int that says the value is present, or J_NO_FLAG */
    const struct jfield *sub; /* JK_OBJECT, JK_RESULTS: the members */
    uint8_t nsub;
    /* Rebuilding the request (a top-level field): sets the value on r. NULL: not part of it. */
    int (*apply)(courier_request *r, const jreq *q);
} jfield;

#define JKEY(n) n, ",\"" n "\":", (uint8_t)(sizeof(",\"" n "\":") - 1)
#define JQ(m) (uint16_t) offsetof(jreq, m)
#define JR(m) (uint16_t) offsetof(jres, m)
#define JSUB(t) t, (uint8_t)(sizeof t / sizeof t[0])

/* ---- rebuilding the request: one setter per field ------------------------------------------- */

static int apply_timeout(courier_request *r, const jreq *q) {
    return q->timeout_ms > 0 ? courier_request_set_timeout_ms(r, (long)q->timeout_ms) : COURIER_OK;
}

static int apply_priority(courier_request *r, const jreq *q) {
    if (q->priority) courier_request_set_priority(r, q->priority > 0 ? COURIER_PRIORITY_HIGH : COURIER_PRIORITY_LOW);
    return COURIER_OK;
}

static int apply_retry(courier_request *r, const jreq *q) {
    if (q->has_retry && q->retry_max > 0 &&
        courier_request_set_retry(r, (int)q->retry_max, (long)q->retry_base, (long)q->retry_maxd,
                                  (unsigned)q->retry_flags) != COURIER_OK)
        courier_request_set_retry(r, 0, 0, 0, 0);
    return COURIER_OK;
}

static int apply_cache(courier_request *r, const jreq *q) {
    if (q->has_cache) {
        courier_request_set_cache_policy(r, (int)q->cache_policy);
        if (q->cache_expiry > 0) courier_request_set_cache_expiry_ms(r, q->cache_expiry * 1000);
    }
    return COURIER_OK;
}

/* Key paths and result names are kept; mapping objects live in memory only. */
static int apply_json(courier_request *r, const jreq *q) {
    if (q->has_json) {
        if (q->key_path) courier_request_set_key_path(r, q->key_path);
        for (size_t k = 0; k < q->nresults; k++)
            courier_request_add_result(r, q->results[k].name, q->results[k].key_path, NULL,
                                       (unsigned)q->results[k].flags);
    }
    return COURIER_OK;
}

/* ---- the table ------------------------------------------------------------------------------ */

static const jfield retry_fields[] = {
    {JKEY("max"), JK_INT, JW_ALWAYS, JQ(retry_max), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("base_ms"), JK_INT, JW_ALWAYS, JQ(retry_base), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("max_ms"), JK_INT, JW_ALWAYS, JQ(retry_maxd), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("flags"), JK_INT, JW_ALWAYS, JQ(retry_flags), J_NO_FLAG, NULL, 0, NULL},
};

static const jfield cache_fields[] = {
    {JKEY("policy"), JK_INT, JW_ALWAYS, JQ(cache_policy), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("expiry_s"), JK_INT, JW_ALWAYS, JQ(cache_expiry), J_NO_FLAG, NULL, 0, NULL},
};

static const jfield result_fields[] = {
    {JKEY("name"), JK_STR, JW_ALWAYS, JR(name), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("key_path"), JK_STR, JW_IF_SET, JR(key_path), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("flags"), JK_INT, JW_ALWAYS, JR(flags), J_NO_FLAG, NULL, 0, NULL},
};

static const jfield json_fields[] = {
    {JKEY("key_path"), JK_STR, JW_IF_SET, JQ(key_path), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("had_mapping"), JK_BOOL, JW_ALWAYS, JQ(had_mapping), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("results"), JK_RESULTS, JW_IF_SET, JQ(results), J_NO_FLAG, JSUB(result_fields), NULL},
};

/* The stored request's members, in the order they are written. The record starts with
 * {"v":1,"id":...,"seq":... (the opening, written when the record's number is known). */
static const jfield fields[] = {
    {JKEY("v"), JK_INT, JW_OPENING, JQ(v), JQ(has_v), NULL, 0, NULL},
    {JKEY("id"), JK_STR, JW_OPENING, JQ(id), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("method"), JK_STR, JW_ALWAYS, JQ(method), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("url"), JK_STR, JW_ALWAYS, JQ(url), J_NO_FLAG, NULL, 0, NULL},
    /* The method, url, headers and body are lent to the request (cj_request_from), not set on it. */
    {JKEY("headers"), JK_HEADERS, JW_ALWAYS, JQ(headers), JQ(has_headers), NULL, 0, NULL},
    {JKEY("body_b64"), JK_BODY, JW_IF_SET, JQ(body), JQ(has_body), NULL, 0, NULL},
    {JKEY("timeout_ms"), JK_INT, JW_ALWAYS, JQ(timeout_ms), J_NO_FLAG, NULL, 0, apply_timeout},
    {JKEY("idempotency_key"), JK_STR, JW_ALWAYS, JQ(idem), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("created_ms"), JK_INT, JW_ALWAYS, JQ(created_ms), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("expires_ms"), JK_INT, JW_ALWAYS, JQ(expires_ms), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("policy"), JK_POLICY, JW_ALWAYS, JQ(policy), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("ordered"), JK_BOOL, JW_ALWAYS, JQ(ordered), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("host"), JK_STR, JW_ALWAYS, JQ(host), J_NO_FLAG, NULL, 0, NULL},
    {JKEY("priority"), JK_INT, JW_ALWAYS, JQ(priority), J_NO_FLAG, NULL, 0, apply_priority},
    {JKEY("retry"), JK_OBJECT, JW_ALWAYS, 0, JQ(has_retry), JSUB(retry_fields), apply_retry},
    {JKEY("cache"), JK_OBJECT, JW_IF_SET, 0, JQ(has_cache), JSUB(cache_fields), apply_cache},
    {JKEY("json"), JK_OBJECT, JW_IF_SET, 0, JQ(has_json), JSUB(json_fields), apply_json},
    /* policy.c: the resend policy's id (absent: the freeze policy's default) */
    {JKEY("resend_policy"), JK_STR, JW_IF_SET, JQ(resend_policy), J_NO_FLAG, NULL, 0, NULL},
};

#define AT(base, off, type) ((type *)(void *)((char *)(base) + (off)))

/* Frees a string of a read jreq unless it lies in the parse's text (which owns it). */
static void jfree(const jreq *q, char *p) {
    if (q->text && p >= q->text && p <= q->text + q->text_len) return;
    free(p);
}

/* Empties the headers: the items' array, and the strings that do not lie in the text. */
static void headers_clear(jreq *q) {
    cr_kvlist *h = &q->headers;
    for (size_t i = 0; i < h->count; i++) jfree(q, h->items[i].name); /* the value with it */
    free(h->items);
    if (h->block != q->text) free(h->block);
    memset(h, 0, sizeof *h);
}

void cj_jreq_clear(jreq *q) {
    jfree(q, q->id);
    jfree(q, q->method);
    jfree(q, q->url);
    jfree(q, q->idem);
    jfree(q, q->host);
    jfree(q, q->body);
    jfree(q, q->resend_policy);
    headers_clear(q);
    jfree(q, q->key_path);
    for (size_t i = 0; i < q->nresults; i++) {
        jfree(q, q->results[i].name);
        jfree(q, q->results[i].key_path);
    }
    free(q->results);
    free(q->text);
    memset(q, 0, sizeof *q);
}

/* ==== writing =================================================================================== */

static bool is_set(const jfield *f, const void *base) {
    if (f->has != J_NO_FLAG) return *AT(base, f->has, const int) != 0;
    if (f->kind == JK_STR) return *AT(base, f->off, char *const) != NULL;
    if (f->kind == JK_RESULTS) return ((const jreq *)base)->nresults != 0;
    return true;
}

static int put_str(cr_buf *b, const char *s) {
    return cr_json_put_string(b, s, CR_JSON_CSTRING, CR_JSON_PUT_CONTROL_U);
}

/* Appends n bytes: cr_buf_append without the call when they fit (keys and punctuation, a few
 * dozen appends per freeze). */
static inline int put_raw(cr_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap && cr_buf_reserve(b, n)) return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

static int put_fields(cr_buf *b, const jfield *fs, size_t n, const void *base, const jreq *q);

/* Writes one value. 0, or -1 without memory. */
static int put_value(cr_buf *b, const jfield *f, const void *base, const jreq *q) {
    switch (f->kind) {
    case JK_STR: return put_str(b, *AT(base, f->off, char *const));
    case JK_INT: return cr_json_put_int(b, *AT(base, f->off, const int64_t));
    case JK_BOOL: return *AT(base, f->off, const int) ? put_raw(b, "true", 4) : put_raw(b, "false", 5);
    case JK_POLICY:
        return *AT(base, f->off, const int64_t) == COURIER_FREEZE_MANUAL ? put_raw(b, "\"manual\"", 8)
                                                                         : put_raw(b, "\"auto\"", 6);
    case JK_HEADERS: {
        const cr_kvlist *h = AT(base, f->off, const cr_kvlist);
        int rc = put_raw(b, "[", 1);
        for (size_t i = 0; !rc && i < h->count; i++) {
            rc = i ? put_raw(b, ",[", 2) : put_raw(b, "[", 1);
            if (!rc) rc = put_str(b, h->items[i].name);
            if (!rc) rc = put_raw(b, ",", 1);
            if (!rc) rc = put_str(b, h->items[i].value);
            if (!rc) rc = put_raw(b, "]", 1);
        }
        /* Every stored request carries its idempotency key as a header (the replay sends it). */
        if (!rc && !cr_kvlist_get(h, "Idempotency-Key")) {
            rc = cr_buf_append_str(b, h->count ? ",[\"Idempotency-Key\"," : "[\"Idempotency-Key\",") ? -1 : 0;
            if (!rc) rc = put_str(b, q->idem);
            if (!rc) rc = put_raw(b, "]", 1);
        }
        return rc ? -1 : put_raw(b, "]", 1);
    }
    case JK_BODY: {
        const jreq *src = base;
        int rc = put_raw(b, "\"", 1);
        /* cr_base64_encode of nothing leaves a reserved, unterminated buffer: encode only bytes. */
        if (!rc && src->body_len) rc = cr_base64_encode(b, src->body, src->body_len);
        return rc || put_raw(b, "\"", 1);
    }
    case JK_OBJECT: {
        if (put_raw(b, "{", 1) || put_fields(b, f->sub, f->nsub, base, q)) return -1;
        return put_raw(b, "}", 1);
    }
    case JK_RESULTS: {
        const jres *items = ((const jreq *)base)->results;
        size_t n = ((const jreq *)base)->nresults;
        if (put_raw(b, "[", 1)) return -1;
        for (size_t i = 0; i < n; i++) {
            if ((i && put_raw(b, ",", 1)) || put_raw(b, "{", 1) ||
                put_fields(b, f->sub, f->nsub, &items[i], q) || put_raw(b, "}", 1))
                return -1;
        }
        return put_raw(b, "]", 1);
    }
    default: return -1;
    }
}

/* Writes the members of a table (not the opening ones): "key":value, comma-separated. */
static int put_fields(cr_buf *b, const jfield *fs, size_t n, const void *base, const jreq *q) {
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        const jfield *f = &fs[i];
        if (f->when == JW_OPENING || (f->when == JW_IF_SET && !is_set(f, base))) continue;
        if (put_raw(b, f->key + first, f->key_len - first) || put_value(b, f, base, q)) return -1;
        first = false;
    }
    return 0;
}

/* What a stored request keeps of a transfer (borrowed: the view is only written). */
static void jreq_of_transfer(jreq *q, const cr_transfer *t, jres *results, const char *idem, int64_t created,
                             int64_t expires, const char *host) {
    memset(q, 0, sizeof *q);
    q->method = t->method;
    q->url = t->url;
    q->headers = t->headers;
    q->has_headers = 1;
    q->body = t->body;
    q->body_len = t->body_len;
    q->has_body = t->has_body;
    q->timeout_ms = t->timeout_ms;
    q->idem = (char *)idem;
    q->created_ms = created;
    q->expires_ms = expires;
    q->policy = t->freeze.policy;
    q->ordered = !(t->freeze.flags & COURIER_FREEZE_UNORDERED);
    q->host = (char *)host;
    q->priority = t->priority;
    q->has_retry = 1;
    q->retry_max = t->retry.max;
    q->retry_base = t->retry.base_ms;
    q->retry_maxd = t->retry.max_ms;
    q->retry_flags = t->retry.flags;
    q->has_cache = t->freeze.cache_set;
    q->cache_policy = t->freeze.cache_policy;
    q->cache_expiry = t->freeze.cache_expiry_s;
    q->resend_policy = t->freeze.resend_policy;
    if (t->jspec) {
        q->has_json = 1;
        q->key_path = t->jspec->key_path;
        q->had_mapping = t->jspec->mapping != NULL;
        for (size_t i = 0; i < t->jspec->nresults; i++) {
            results[i].name = t->jspec->results[i].name;
            results[i].key_path = t->jspec->results[i].key_path;
            results[i].flags = t->jspec->results[i].flags;
        }
        q->results = results;
        q->nresults = t->jspec->nresults;
    }
}

/* Builds the stored request of a transfer as JSON text, all but its opening: the journal puts
 * {"v":1,"id":...,"seq":... in front when it writes it (the id may be made then). Written once,
 * directly (no document tree), on the worker. *out new (free). */
int cj_payload_of(const cr_transfer *t, const char *idem, int64_t created, int64_t expires, const char *host,
                  char **out) {
    jres stack[8], *results = stack;
    size_t nres = t->jspec ? t->jspec->nresults : 0;
    if (nres > sizeof stack / sizeof stack[0] && !(results = malloc(nres * sizeof *results)))
        return COURIER_E_NO_MEMORY;
    jreq q;
    jreq_of_transfer(&q, t, results, idem, created, expires, host);
    cr_buf b = {0};
    int rc = cr_buf_reserve(&b, 512 + (t->has_body ? t->body_len / 3 * 4 + 4 : 0)) ? -1 : 0;
    if (!rc) rc = put_fields(&b, fields, sizeof fields / sizeof fields[0], &q, &q);
    if (!rc) rc = cr_buf_append_char(&b, '}') ? -1 : 0;
    if (results != stack) free(results);
    if (rc) {
        cr_buf_free(&b);
        return COURIER_E_NO_MEMORY;
    }
    *out = cr_buf_take(&b, NULL);
    return *out ? COURIER_OK : COURIER_E_NO_MEMORY;
}

/* ==== reading (through the JSON tape) =========================================================== */

typedef struct jtape {
    const courier_json_tape_entry *e;
    char *text; /* the tape's text, which the jreq keeps (cj_jreq_read) */
} jtape;

/* A string entry: where it lies in the text, NUL-terminated there. */
static char *tape_str(const jtape *t, size_t i) { return t->text + t->e[i].payload; }

/* The entry just past the value at i. */
static size_t tape_skip(const jtape *t, size_t i) {
    return t->e[i].type == COURIER_JSON_OBJECT || t->e[i].type == COURIER_JSON_ARRAY ? (size_t)t->e[i].payload : i + 1;
}

static int get_fields(const jtape *t, size_t obj, const jfield *fs, size_t n, void *base, jreq *q);

/* Reads the value at entry i into field f of base. COURIER_OK, COURIER_E_NO_MEMORY, or
 * COURIER_E_JOURNAL_CORRUPT (a header that is not two strings, a body that is not base64). */
static int get_value(const jtape *t, size_t i, const jfield *f, void *base, jreq *q) {
    const courier_json_tape_entry *v = &t->e[i];
    switch (f->kind) {
    case JK_STR: {
        char **dst = AT(base, f->off, char *);
        jfree(q, *dst);
        *dst = v->type == COURIER_JSON_STRING ? tape_str(t, i) : NULL;
        return COURIER_OK;
    }
    case JK_INT:
        *AT(base, f->off, int64_t) = v->type == COURIER_JSON_INTEGER ? (int64_t)v->payload : 0;
        if (f->has != J_NO_FLAG) *AT(base, f->has, int) = v->type == COURIER_JSON_INTEGER;
        return COURIER_OK;
    case JK_BOOL:
        *AT(base, f->off, int) = v->type == COURIER_JSON_BOOL && (v->flags & COURIER_JSON_TAPE_TRUE);
        return COURIER_OK;
    case JK_POLICY:
        *AT(base, f->off, int64_t) = v->type == COURIER_JSON_STRING && v->length == 6 &&
                                             memcmp(t->text + v->payload, "manual", 6) == 0
                                         ? COURIER_FREEZE_MANUAL
                                         : COURIER_FREEZE_AUTO;
        return COURIER_OK;
    case JK_HEADERS: {
        cr_kvlist *h = AT(base, f->off, cr_kvlist);
        headers_clear(q);
        *AT(base, f->has, int) = v->type == COURIER_JSON_ARRAY;
        if (v->type != COURIER_JSON_ARRAY) return COURIER_OK;
        h->block = q->text;
        h->block_len = q->text_len + 1;
        /* Each header is [name, value], both strings (extra elements are ignored). */
        for (size_t k = i + 1; k < (size_t)v->payload;) {
            const courier_json_tape_entry *a = &t->e[k];
            if (a->type != COURIER_JSON_ARRAY || a->length < 2 || t->e[k + 1].type != COURIER_JSON_STRING)
                return COURIER_E_JOURNAL_CORRUPT;
            size_t vi = k + 2; /* the name is one entry */
            if (t->e[vi].type != COURIER_JSON_STRING) return COURIER_E_JOURNAL_CORRUPT;
            if (cr_kvlist_add_in_block(h, tape_str(t, k + 1), tape_str(t, vi))) return COURIER_E_NO_MEMORY;
            k = (size_t)a->payload;
        }
        return COURIER_OK;
    }
    case JK_BODY: {
        jreq *dst = base;
        jfree(q, dst->body);
        dst->body = NULL;
        dst->body_len = 0;
        dst->has_body = 0;
        if (v->type != COURIER_JSON_STRING) return COURIER_OK;
        /* Decoded where its base64 lies (the text is the jreq's; no other entry reads it). */
        if (b64_decode_in_place(tape_str(t, i), v->length, &dst->body_len)) return COURIER_E_JOURNAL_CORRUPT;
        dst->body = tape_str(t, i);
        dst->has_body = 1;
        return COURIER_OK;
    }
    case JK_OBJECT:
        if (v->type != COURIER_JSON_OBJECT) return COURIER_OK;
        *AT(base, f->has, int) = 1;
        for (size_t k = 0; k < f->nsub; k++) { /* a later member replaces an earlier one whole */
            const jfield *s = &f->sub[k];
            if (s->kind == JK_INT) *AT(base, s->off, int64_t) = 0;
        }
        return get_fields(t, i, f->sub, f->nsub, base, q);
    case JK_RESULTS: {
        jres **items = &((jreq *)base)->results;
        size_t *n = &((jreq *)base)->nresults;
        for (size_t k = 0; k < *n; k++) {
            jfree(q, (*items)[k].name);
            jfree(q, (*items)[k].key_path);
        }
        *n = 0;
        if (v->type != COURIER_JSON_ARRAY) return COURIER_OK;
        for (size_t k = i + 1; k < (size_t)v->payload; k = tape_skip(t, k)) {
            if (t->e[k].type != COURIER_JSON_OBJECT) continue; /* not an object: its fields read as absent */
            jres *p = realloc(*items, (*n + 1) * sizeof *p);
            if (!p) return COURIER_E_NO_MEMORY;
            *items = p;
            jres *x = &p[(*n)++];
            memset(x, 0, sizeof *x);
            int rc = get_fields(t, k, f->sub, f->nsub, x, q);
            if (rc) return rc;
        }
        return COURIER_OK;
    }
    default: return COURIER_OK;
    }
}

/* Reads the members of the object at entry obj that the table names; others are skipped. */
static int get_fields(const jtape *t, size_t obj, const jfield *fs, size_t n, void *base, jreq *q) {
    size_t end = (size_t)t->e[obj].payload;
    size_t from = 0; /* the row after the last one found: records list their members in the table's order */
    for (size_t k = obj + 1; k < end;) {
        const courier_json_tape_entry *key = &t->e[k];
        size_t v = k + 1;
        size_t next = tape_skip(t, v);
        if (!(key->flags & COURIER_JSON_TAPE_DEAD)) { /* a duplicate key: the last one wins */
            const char *name = t->text + key->payload;
            for (size_t m = 0, i = from; m < n; m++, i = i + 1 == n ? 0 : i + 1) {
                if (fs[i].key_len - 4u == key->length && memcmp(fs[i].name, name, key->length) == 0) {
                    int rc = get_value(t, v, &fs[i], base, q);
                    if (rc) return rc;
                    from = i + 1 == n ? 0 : i + 1;
                    break;
                }
            }
        }
        k = next;
    }
    return COURIER_OK;
}

int cj_jreq_read(const char *text, size_t len, jreq *q) {
    memset(q, 0, sizeof *q);
    courier_json_options o = {.size = sizeof o};
    courier_json_options_init(&o);
    o.max_depth = 32;
    o.max_bytes = INT64_MAX;
    o.flags = COURIER_JSON_ALLOW_DUPLICATE_KEYS;
    courier_json_tape *tape = NULL;
    int rc = cr_json_tape_parse_small(&tape, text, len, &o, NULL); /* a record: ~50 entries */
    if (rc) return rc == COURIER_E_NO_MEMORY ? rc : COURIER_E_JOURNAL_CORRUPT;
    /* The strings read point into the tape's copy of the text (no copy of each: docs/design/journal.md,
     * "Where replay's time goes"), which the jreq keeps when the tape is freed. */
    jtape t = {courier_json_tape_entries(tape, NULL), (char *)courier_json_tape_text(tape)};
    q->text = t.text;
    q->text_len = len;
    rc = t.e[0].type == COURIER_JSON_OBJECT ? get_fields(&t, 0, fields, sizeof fields / sizeof fields[0], q, q)
                                            : COURIER_E_JOURNAL_CORRUPT;
    cr_json_tape_release_text(tape, NULL); /* q->text, now q's */
    if (rc) cj_jreq_clear(q);
    return rc;
}

/* ==== the snapshot handed to callers ============================================================ */

void courier_frozen_free(courier_frozen *f) {
    if (!f || atomic_fetch_sub(&f->refs, 1) != 1) return;
    cj_jreq_clear(&f->q);
    free(f->host);
    free(atomic_load(&f->json));
    free(f->text);
    free(f);
}

/* The JSON view: the stored request text with the replay state spliced in as text, in place of
 * the closing brace. NULL without memory. */
static char *snap_json(const char *text, size_t len, const courier_frozen_info *in) {
    size_t end = len;
    while (end && text[end - 1] != '}') end--;
    if (end == 0) return NULL;
    char state[256];
    size_t sl = 0;
#define LIT(s) (memcpy(state + sl, s, sizeof s - 1), sl += sizeof s - 1)
    LIT(",\"state\":{\"attempts\":");
    sl += cr_json_format_int(state + sl, (int64_t)(uint32_t)in->attempts);
    LIT(",\"next_attempt_ms\":");
    sl += cr_json_format_int(state + sl, in->next_attempt_ms);
    LIT(",\"last_attempt_ms\":");
    sl += cr_json_format_int(state + sl, in->last_attempt_ms);
    if (in->claimed) LIT(",\"claimed\":true");
    else LIT(",\"claimed\":false");
    LIT(",\"last_code\":");
    sl += cr_json_format_int(state + sl, in->last_code);
    LIT(",\"last_status\":");
    sl += cr_json_format_int(state + sl, in->last_status);
    LIT("}}");
#undef LIT
    char *json = malloc(end - 1 + sl + 1);
    if (!json) return NULL;
    memcpy(json, text, end - 1);
    memcpy(json + end - 1, state, sl);
    json[end - 1 + sl] = '\0';
    return json;
}

/* courier_frozen_json: made when first read (most events' listeners never read it: it cost a
 * copy of the record and a snprintf per replay; docs/design/journal.md, "Where replay's time goes"). Any
 * thread: two first readers may both make it; one keeps its copy, the other frees its own. */
const char *cj_snap_json(const courier_frozen *cf) {
    courier_frozen *f = (courier_frozen *)cf; /* the view is made once; nothing a reader sees changes */
    char *json = atomic_load(&f->json);
    if (json || !f->text) return json;
    char *made = snap_json(f->text, f->tlen, &f->info);
    if (!made) return NULL;
    char *expected = NULL;
    if (!atomic_compare_exchange_strong(&f->json, &expected, made)) {
        free(made);
        return expected;
    }
    return made;
}

courier_frozen *cj_snap_take(uint64_t seq, jreq *q, char *text, size_t len, const jstate *st, bool *bad) {
    *bad = false;
    if (!q->method || !q->url || !q->id || !q->has_v) {
        *bad = true;
        free(text);
        return NULL;
    }
    courier_frozen *f = calloc(1, sizeof *f);
    if (!f) {
        free(text);
        return NULL;
    }
    atomic_init(&f->refs, 1);
    atomic_init(&f->json, NULL);
    f->seq = seq;
    f->q = *q; /* taken whole */
    memset(q, 0, sizeof *q);
    f->text = text;
    f->tlen = len;
    if (!f->q.idem) f->q.idem = cr_strdup("");
    f->host = cr_strndup(st->host, st->host_len);
    if (!f->q.idem || !f->host) goto fail;
    courier_frozen_info *in = &f->info;
    in->size = sizeof *in;
    in->policy = st->policy;
    in->flags = st->flags & (COURIER_FREEZE_UNORDERED | COURIER_FREEZE_ON_AMBIGUOUS);
    in->timeout_ms = (long)f->q.timeout_ms;
    in->attempts = (int)st->attempts;
    in->last_code = st->last_code;
    in->last_status = st->last_status;
    in->claimed = st->claim_ms != 0;
    in->created_ms = st->created_ms;
    in->expires_ms = st->expires_ms;
    in->next_attempt_ms = st->next_ms;
    in->last_attempt_ms = st->last_ms;
    /* A text that parsed as an object ends with its '}': the view can always be made from it. */
    return f;
fail:
    *q = f->q; /* given back: the caller's still */
    memset(&f->q, 0, sizeof f->q);
    courier_frozen_free(f);
    return NULL;
}

courier_frozen *cj_snap_from(uint64_t seq, jreq *q, const char *text, size_t len, const jstate *st, bool *bad) {
    char *copy = malloc(len ? len : 1);
    if (!copy) {
        *bad = false;
        cj_jreq_clear(q);
        return NULL;
    }
    memcpy(copy, text, len);
    courier_frozen *f = cj_snap_take(seq, q, copy, len, st, bad);
    if (!f) cj_jreq_clear(q);
    return f;
}

courier_frozen *cj_snap_make(uint64_t seq, const char *text, size_t len, const jstate *st, bool *bad) {
    jreq q;
    int rc = cj_jreq_read(text, len, &q);
    if (rc) {
        *bad = rc == COURIER_E_JOURNAL_CORRUPT;
        return NULL;
    }
    return cj_snap_from(seq, &q, text, len, st, bad);
}

courier_frozen *cj_snap_retain(courier_frozen *f) {
    if (f) atomic_fetch_add(&f->refs, 1);
    return f;
}

/* ---- the snapshot's accessors ---- */

const char *courier_frozen_id(const courier_frozen *f) { return f ? f->q.id : NULL; }
const char *courier_frozen_method(const courier_frozen *f) { return f ? f->q.method : NULL; }
const char *courier_frozen_url(const courier_frozen *f) { return f ? f->q.url : NULL; }
const char *courier_frozen_host(const courier_frozen *f) { return f ? f->host : NULL; }
const char *courier_frozen_idempotency_key(const courier_frozen *f) { return f ? f->q.idem : NULL; }
const char *courier_frozen_json(const courier_frozen *f) { return f ? cj_snap_json(f) : NULL; }

const uint8_t *courier_frozen_body(const courier_frozen *f, size_t *len) {
    if (len) *len = f && f->q.has_body ? f->q.body_len : 0;
    return f && f->q.has_body ? (const uint8_t *)f->q.body : NULL;
}

size_t courier_frozen_header_count(const courier_frozen *f) { return f ? f->q.headers.count : 0; }

int courier_frozen_header_at(const char **name, const char **value, const courier_frozen *f, size_t i) {
    if (!f) return COURIER_E_INVALID_ARGUMENT;
    if (i >= f->q.headers.count) return COURIER_E_NOT_FOUND;
    if (name) *name = f->q.headers.items[i].name;
    if (value) *value = f->q.headers.items[i].value;
    return COURIER_OK;
}

int courier_frozen_get_info(courier_frozen_info *out, const courier_frozen *f) {
    if (!f || !CR_SIZED_OK(out, courier_frozen_info)) return COURIER_E_INVALID_ARGUMENT;
    CR_SIZED_OUT(out, f->info);
    return COURIER_OK;
}

/* ==== rebuilding the request ==================================================================== */

int cj_request_from(const jreq *q, courier_request **out) {
    if (!q->method || !q->url || !q->has_headers) return COURIER_E_JOURNAL_CORRUPT;
    /* The decoded method, url, headers and body are lent, not copied (then copied again by the
     * send's prepare, and both freed): http/request.c checks them as the setters would. */
    courier_request *r = NULL;
    int rc = cr_request_borrow(&r, q->method, q->url, &q->headers, q->body, q->body_len, q->has_body);
    if (rc) return rc;
    for (size_t i = 0; rc == COURIER_OK && i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].apply) rc = fields[i].apply(r, q);
    /* The frozen request's own settings never freeze it again: the journal keeps it. */
    if (rc) {
        cr_request_free_borrowed(r);
        return rc;
    }
    *out = r;
    return COURIER_OK;
}

void cj_request_release(courier_request *r) { cr_request_free_borrowed(r); }
