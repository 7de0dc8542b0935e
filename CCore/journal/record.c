/*
 * record.c — the stored request: its JSON text read straight into a jreq, written from a transfer,
 * the snapshots handed to callers, and the request rebuilt for a replay.
 */
#include "journal/journal_internal.h"

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decodes standard base64 (padding optional). *out new (malloc), NUL-terminated. */
static int b64_decode(const char *s, size_t n, char **out, size_t *out_len) {
    char *p = malloc(n / 4 * 3 + 4);
    if (!p) return COURIER_E_NO_MEMORY;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '=') break;
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) {
            free(p);
            return COURIER_E_INVALID_ARGUMENT;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            p[o++] = (char)(acc >> bits);
        }
    }
    p[o] = '\0';
    *out = p;
    *out_len = o;
    return COURIER_OK;
}

void cj_jreq_clear(jreq *q) {
    free(q->id);
    free(q->method);
    free(q->url);
    free(q->idem);
    free(q->body_b64);
    cr_kvlist_clear(&q->headers);
    free(q->key_path);
    for (size_t i = 0; i < q->nresults; i++) {
        free(q->results[i].name);
        free(q->results[i].key_path);
    }
    free(q->results);
    memset(q, 0, sizeof *q);
}

typedef struct jrd {
    const char *p, *end;
    int depth;
} jrd;

enum { JR_OK = 0, JR_BAD = 1, JR_NOMEM = 2 };

static void jr_ws(jrd *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t')) r->p++;
}

static bool jr_peek(jrd *r, char c) {
    jr_ws(r);
    return r->p < r->end && *r->p == c;
}

static int jr_hex4(jrd *r, uint32_t *out) {
    if (r->end - r->p < 4) return JR_BAD;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = r->p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return JR_BAD;
        v = v << 4 | (uint32_t)d;
    }
    r->p += 4;
    *out = v;
    return JR_OK;
}

/* A string; with `out`, decoded into a new NUL-terminated string (*len its length). A string with
 * \u0000 is refused, as jansson refuses it. */
static int jr_string(jrd *r, char **out, size_t *len) {
    jr_ws(r);
    if (r->p >= r->end || *r->p != '"') return JR_BAD;
    r->p++;
    const char *s = r->p;
    bool plain = true;
    while (r->p < r->end && *r->p != '"') {
        unsigned char c = (unsigned char)*r->p;
        if (c < 0x20) return JR_BAD;
        if (c == '\\') {
            plain = false;
            if (++r->p >= r->end) return JR_BAD;
        }
        r->p++;
    }
    if (r->p >= r->end) return JR_BAD;
    const char *e = r->p++;
    if (!out && plain) return JR_OK; /* skipped; escapes are still checked below */
    char *b = malloc((size_t)(e - s) + 1);
    if (!b) return JR_NOMEM;
    size_t o = 0;
    for (const char *q = s; q < e;) {
        if (*q != '\\') {
            b[o++] = *q++;
            continue;
        }
        q++;
        char c = *q++;
        switch (c) {
        case '"': b[o++] = '"'; break;
        case '\\': b[o++] = '\\'; break;
        case '/': b[o++] = '/'; break;
        case 'b': b[o++] = '\b'; break;
        case 'f': b[o++] = '\f'; break;
        case 'n': b[o++] = '\n'; break;
        case 'r': b[o++] = '\r'; break;
        case 't': b[o++] = '\t'; break;
        case 'u': {
            jrd h = {q, e, 0};
            uint32_t cp;
            if (jr_hex4(&h, &cp)) goto bad;
            if (cp >= 0xDC00 && cp <= 0xDFFF) goto bad;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (h.end - h.p < 6 || h.p[0] != '\\' || h.p[1] != 'u') goto bad;
                h.p += 2;
                if (jr_hex4(&h, &lo) || lo < 0xDC00 || lo > 0xDFFF) goto bad;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (cp == 0) goto bad;
            q = h.p;
            /* UTF-8 is never longer than the escape it comes from (6 or 12 bytes). */
            if (cp < 0x80) {
                b[o++] = (char)cp;
            } else if (cp < 0x800) {
                b[o++] = (char)(0xC0 | cp >> 6);
                b[o++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                b[o++] = (char)(0xE0 | cp >> 12);
                b[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
                b[o++] = (char)(0x80 | (cp & 0x3F));
            } else {
                b[o++] = (char)(0xF0 | cp >> 18);
                b[o++] = (char)(0x80 | (cp >> 12 & 0x3F));
                b[o++] = (char)(0x80 | (cp >> 6 & 0x3F));
                b[o++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: goto bad;
        }
    }
    b[o] = '\0';
    if (out) {
        *out = b;
        if (len) *len = o;
    } else {
        free(b);
    }
    return JR_OK;
bad:
    free(b);
    return JR_BAD;
}

/* A number. *is_int says whether it is an integer (no fraction or exponent) that fits int64. */
static int jr_number(jrd *r, int64_t *v, bool *is_int) {
    jr_ws(r);
    bool neg = false, integer = true, overflow = false;
    uint64_t acc = 0;
    if (r->p < r->end && *r->p == '-') {
        neg = true;
        r->p++;
    }
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') return JR_BAD;
    if (*r->p == '0' && r->p + 1 < r->end && r->p[1] >= '0' && r->p[1] <= '9') return JR_BAD;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        unsigned d = (unsigned)(*r->p++ - '0');
        if (acc > (UINT64_MAX - d) / 10) overflow = true;
        else acc = acc * 10 + d;
    }
    if (r->p < r->end && *r->p == '.') {
        integer = false;
        r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9') return JR_BAD;
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        integer = false;
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-')) r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9') return JR_BAD;
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9') r->p++;
    }
    if (overflow || acc > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) integer = false;
    *is_int = integer;
    *v = !integer ? 0 : neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return JR_OK;
}

static int jr_literal(jrd *r, const char *lit) {
    jr_ws(r);
    size_t n = strlen(lit);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, lit, n) != 0) return JR_BAD;
    r->p += n;
    return JR_OK;
}

static int jr_skip(jrd *r);

/* Walks an object: calls member(r, key, klen, ctx) at each value (the member reads or skips it). */
static int jr_object(jrd *r, int (*member)(jrd *, const char *, size_t, void *), void *ctx) {
    if (!jr_peek(r, '{')) return JR_BAD;
    if (++r->depth > 32) return JR_BAD;
    r->p++;
    if (jr_peek(r, '}')) {
        r->p++;
        r->depth--;
        return JR_OK;
    }
    for (;;) {
        jr_ws(r);
        /* Keys are compared raw: the keys the journal reads have no escapes. */
        if (r->p >= r->end || *r->p != '"') return JR_BAD;
        const char *k = r->p + 1;
        int rc = jr_string(r, NULL, NULL);
        if (rc) return rc;
        size_t klen = (size_t)(r->p - 1 - k);
        if (!jr_peek(r, ':')) return JR_BAD;
        r->p++;
        if ((rc = member(r, k, klen, ctx))) return rc;
        jr_ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == '}') {
            r->p++;
            r->depth--;
            return JR_OK;
        }
        return JR_BAD;
    }
}

static int skip_member(jrd *r, const char *k, size_t n, void *ctx) {
    (void)k;
    (void)n;
    (void)ctx;
    return jr_skip(r);
}

static int jr_skip(jrd *r) {
    jr_ws(r);
    if (r->p >= r->end) return JR_BAD;
    switch (*r->p) {
    case '"': return jr_string(r, NULL, NULL);
    case '{': return jr_object(r, skip_member, NULL);
    case '[': {
        if (++r->depth > 32) return JR_BAD;
        r->p++;
        if (jr_peek(r, ']')) {
            r->p++;
            r->depth--;
            return JR_OK;
        }
        for (;;) {
            int rc = jr_skip(r);
            if (rc) return rc;
            jr_ws(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                continue;
            }
            if (r->p < r->end && *r->p == ']') {
                r->p++;
                r->depth--;
                return JR_OK;
            }
            return JR_BAD;
        }
    }
    case 't': return jr_literal(r, "true");
    case 'f': return jr_literal(r, "false");
    case 'n': return jr_literal(r, "null");
    default: {
        int64_t v;
        bool i;
        return jr_number(r, &v, &i);
    }
    }
}

/* A member expected to be a string: read (replacing an earlier one) or, of another type, skipped. */
static int jr_str_member(jrd *r, char **dst) {
    if (!jr_peek(r, '"')) return jr_skip(r);
    char *s = NULL;
    int rc = jr_string(r, &s, NULL);
    if (rc) return rc;
    free(*dst);
    *dst = s;
    return JR_OK;
}

/* A member expected to be an integer: its value, else 0 (and *is set false). */
static int jr_int_member(jrd *r, int64_t *dst, int *is) {
    jr_ws(r);
    if (r->p < r->end && (*r->p == '-' || (*r->p >= '0' && *r->p <= '9'))) {
        bool integer;
        int rc = jr_number(r, dst, &integer);
        if (is) *is = integer;
        return rc;
    }
    *dst = 0;
    if (is) *is = 0;
    return jr_skip(r);
}

static bool key_is(const char *k, size_t n, const char *name) { return strlen(name) == n && memcmp(k, name, n) == 0; }

static int retry_member(jrd *r, const char *k, size_t n, void *ctx) {
    jreq *q = ctx;
    int64_t v = 0;
    int which = key_is(k, n, "max") ? 1 : key_is(k, n, "base_ms") ? 2 : key_is(k, n, "max_ms") ? 3 : key_is(k, n, "flags") ? 4 : 0;
    if (!which) return jr_skip(r);
    int rc = jr_int_member(r, &v, NULL);
    if (which == 1) q->retry_max = (int)v;
    else if (which == 2) q->retry_base = (long)v;
    else if (which == 3) q->retry_maxd = (long)v;
    else q->retry_flags = (unsigned)v;
    return rc;
}

static int cache_member(jrd *r, const char *k, size_t n, void *ctx) {
    jreq *q = ctx;
    int64_t v = 0;
    int which = key_is(k, n, "policy") ? 1 : key_is(k, n, "expiry_s") ? 2 : 0;
    if (!which) return jr_skip(r);
    int rc = jr_int_member(r, &v, NULL);
    if (which == 1) q->cache_policy = (int)v;
    else q->cache_expiry = v;
    return rc;
}

static int result_member(jrd *r, const char *k, size_t n, void *ctx) {
    jres *x = ctx;
    if (key_is(k, n, "name")) return jr_str_member(r, &x->name);
    if (key_is(k, n, "key_path")) return jr_str_member(r, &x->key_path);
    if (key_is(k, n, "flags")) {
        int64_t v = 0;
        int rc = jr_int_member(r, &v, NULL);
        x->flags = (unsigned)v;
        return rc;
    }
    return jr_skip(r);
}

/* Arrays the journal reads: calls item(r, ctx) at each element. A value of another type is skipped
 * (*was_array false). */
static int jr_array(jrd *r, int (*item)(jrd *, void *), void *ctx, bool *was_array) {
    *was_array = false;
    if (!jr_peek(r, '[')) return jr_skip(r);
    *was_array = true;
    if (++r->depth > 32) return JR_BAD;
    r->p++;
    if (jr_peek(r, ']')) {
        r->p++;
        r->depth--;
        return JR_OK;
    }
    for (;;) {
        int rc = item(r, ctx);
        if (rc) return rc;
        jr_ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == ']') {
            r->p++;
            r->depth--;
            return JR_OK;
        }
        return JR_BAD;
    }
}

static int result_item(jrd *r, void *ctx) {
    jreq *q = ctx;
    if (!jr_peek(r, '{')) return jr_skip(r); /* not an object: its fields read as absent */
    jres *p = realloc(q->results, (q->nresults + 1) * sizeof *p);
    if (!p) return JR_NOMEM;
    q->results = p;
    jres *x = &p[q->nresults++];
    memset(x, 0, sizeof *x);
    return jr_object(r, result_member, x);
}

static int json_member(jrd *r, const char *k, size_t n, void *ctx) {
    jreq *q = ctx;
    if (key_is(k, n, "key_path")) return jr_str_member(r, &q->key_path);
    if (key_is(k, n, "results")) {
        bool arr;
        for (size_t i = 0; i < q->nresults; i++) { /* a later member replaces an earlier one */
            free(q->results[i].name);
            free(q->results[i].key_path);
        }
        q->nresults = 0;
        return jr_array(r, result_item, q, &arr);
    }
    if (key_is(k, n, "had_mapping")) {
        jr_ws(r);
        q->had_mapping = r->p < r->end && *r->p == 't';
        return jr_skip(r);
    }
    return jr_skip(r);
}

/* One header: [name, value], both strings (anything else makes the record unreadable). */
static int header_item(jrd *r, void *ctx) {
    jreq *q = ctx;
    if (!jr_peek(r, '[')) return JR_BAD;
    r->p++;
    char *name = NULL, *value = NULL;
    size_t nl = 0, vl = 0;
    int rc = jr_string(r, &name, &nl);
    if (!rc && !jr_peek(r, ',')) rc = JR_BAD;
    if (!rc) {
        r->p++;
        rc = jr_string(r, &value, &vl);
    }
    /* Extra elements are allowed (skipped), as jansson's readers ignored them. */
    while (!rc && jr_peek(r, ',')) {
        r->p++;
        rc = jr_skip(r);
    }
    if (!rc && !jr_peek(r, ']')) rc = JR_BAD;
    if (!rc) r->p++;
    if (!rc && cr_kvlist_add(&q->headers, name, nl, value, vl)) rc = JR_NOMEM;
    free(name);
    free(value);
    return rc;
}

static int top_member(jrd *r, const char *k, size_t n, void *ctx) {
    jreq *q = ctx;
    int64_t v = 0;
    int is = 0, rc;
    switch (n ? k[0] : 0) {
    case 'v':
        if (n == 1) {
            rc = jr_int_member(r, &v, &is);
            q->has_v = is;
            return rc;
        }
        break;
    case 'i':
        if (key_is(k, n, "id")) return jr_str_member(r, &q->id);
        if (key_is(k, n, "idempotency_key")) return jr_str_member(r, &q->idem);
        break;
    case 'm':
        if (key_is(k, n, "method")) return jr_str_member(r, &q->method);
        break;
    case 'u':
        if (key_is(k, n, "url")) return jr_str_member(r, &q->url);
        break;
    case 'b':
        if (key_is(k, n, "body_b64")) return jr_str_member(r, &q->body_b64);
        break;
    case 'h':
        if (key_is(k, n, "headers")) {
            bool arr;
            cr_kvlist_clear(&q->headers);
            rc = jr_array(r, header_item, q, &arr);
            q->has_headers = arr;
            return rc;
        }
        break;
    case 't':
        if (key_is(k, n, "timeout_ms")) {
            rc = jr_int_member(r, &v, NULL);
            q->timeout_ms = (long)v;
            return rc;
        }
        break;
    case 'p':
        if (key_is(k, n, "priority")) {
            rc = jr_int_member(r, &v, NULL);
            q->priority = (int)v;
            return rc;
        }
        break;
    case 'r':
        if (key_is(k, n, "retry")) {
            if (!jr_peek(r, '{')) return jr_skip(r);
            q->has_retry = 1;
            q->retry_max = 0;
            q->retry_base = q->retry_maxd = 0;
            q->retry_flags = 0;
            return jr_object(r, retry_member, q);
        }
        break;
    case 'c':
        if (key_is(k, n, "cache")) {
            if (!jr_peek(r, '{')) return jr_skip(r);
            q->has_cache = 1;
            q->cache_policy = 0;
            q->cache_expiry = 0;
            return jr_object(r, cache_member, q);
        }
        break;
    case 'j':
        if (key_is(k, n, "json")) {
            if (!jr_peek(r, '{')) return jr_skip(r);
            q->has_json = 1;
            return jr_object(r, json_member, q);
        }
        break;
    default: break;
    }
    return jr_skip(r);
}

/* Reads a stored request. COURIER_OK, COURIER_E_JOURNAL_CORRUPT (not a JSON object, or a header
 * that is not two strings) or COURIER_E_NO_MEMORY; *q is cleared on failure. */
int cj_jreq_read(const char *text, size_t len, jreq *q) {
    memset(q, 0, sizeof *q);
    jrd r = {text, text + len, 0};
    int rc = jr_object(&r, top_member, q);
    if (rc == JR_OK) {
        jr_ws(&r);
        if (r.p != r.end) rc = JR_BAD;
    }
    if (rc == JR_OK) return COURIER_OK;
    cj_jreq_clear(q);
    return rc == JR_NOMEM ? COURIER_E_NO_MEMORY : COURIER_E_JOURNAL_CORRUPT;
}

void courier_frozen_free(courier_frozen *f) {
    if (!f || atomic_fetch_sub(&f->refs, 1) != 1) return;
    free(f->id);
    free(f->method);
    free(f->url);
    free(f->host);
    free(f->idem);
    free(f->json);
    cr_kvlist_clear(&f->headers);
    free(f->body);
    free(f);
}

/* Builds a snapshot from a decoded request (its strings and headers are taken: *q is left
 * cleared), the stored text (for the JSON view) and the state. NULL on a bad record or no memory
 * (*bad says which). */
courier_frozen *cj_snap_from(uint64_t seq, jreq *q, const char *text, size_t len, const jstate *st, bool *bad) {
    *bad = false;
    if (!q->method || !q->url || !q->id || !q->has_v) {
        *bad = true;
        cj_jreq_clear(q);
        return NULL;
    }
    courier_frozen *f = calloc(1, sizeof *f);
    if (!f) {
        cj_jreq_clear(q);
        return NULL;
    }
    atomic_init(&f->refs, 1);
    f->seq = seq;
    f->id = q->id;
    f->method = q->method;
    f->url = q->url;
    f->idem = q->idem ? q->idem : cr_strdup("");
    f->headers = q->headers;
    q->id = q->method = q->url = q->idem = NULL;
    memset(&q->headers, 0, sizeof q->headers);
    f->host = cr_strndup(st->host, st->host_len);
    if (!f->idem || !f->host) goto oom;
    if (q->body_b64) {
        int rc = b64_decode(q->body_b64, strlen(q->body_b64), &f->body, &f->body_len);
        if (rc == COURIER_E_NO_MEMORY) goto oom;
        if (rc) {
            *bad = true;
            goto fail;
        }
        f->has_body = 1;
    }
    courier_frozen_info *in = &f->info;
    in->size = sizeof *in;
    in->policy = st->policy;
    in->flags = st->flags & (COURIER_FREEZE_UNORDERED | COURIER_FREEZE_ON_AMBIGUOUS);
    in->timeout_ms = q->timeout_ms;
    in->attempts = (int)st->attempts;
    in->last_code = st->last_code;
    in->last_status = st->last_status;
    in->claimed = st->claim_ms != 0;
    in->created_ms = st->created_ms;
    in->expires_ms = st->expires_ms;
    in->next_attempt_ms = st->next_ms;
    in->last_attempt_ms = st->last_ms;
    /* The JSON view: the stored request text plus the replay state, spliced in as text. */
    size_t end = len;
    while (end && text[end - 1] != '}') end--;
    char state[256];
    int sl = snprintf(state, sizeof state,
                      ",\"state\":{\"attempts\":%u,\"next_attempt_ms\":%lld,\"last_attempt_ms\":%lld,\"claimed\":%s,"
                      "\"last_code\":%d,\"last_status\":%d}}",
                      st->attempts, (long long)st->next_ms, (long long)st->last_ms, st->claim_ms ? "true" : "false",
                      (int)st->last_code, (int)st->last_status);
    if (end == 0 || !(f->json = malloc(end + (size_t)sl + 1))) goto oom;
    memcpy(f->json, text, end - 1);
    memcpy(f->json + end - 1, state, (size_t)sl + 1);
    cj_jreq_clear(q);
    return f;
oom:
fail:
    cj_jreq_clear(q);
    courier_frozen_free(f);
    return NULL;
}

/* Builds a snapshot from the stored request text and its state. NULL on a bad record or no memory
 * (*bad says which). */
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

/* ==== what a frozen request keeps ============================================================== */

/* Appends s as a JSON string (quotes, escapes; s is UTF-8). */
static int json_str(cr_buf *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    if (cr_buf_append_char(b, '"')) return COURIER_E_NO_MEMORY;
    const char *run = s;
    for (const char *p = s;; p++) {
        unsigned char c = (unsigned char)*p;
        if (c && c >= 0x20 && c != '"' && c != '\\') continue;
        if (p > run && cr_buf_append(b, run, (size_t)(p - run))) return COURIER_E_NO_MEMORY;
        if (!c) break;
        char esc[7] = {'\\', (char)c, 0};
        size_t n = 2;
        if (c < 0x20) {
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        if (cr_buf_append(b, esc, n)) return COURIER_E_NO_MEMORY;
        run = p + 1;
    }
    return cr_buf_append_char(b, '"');
}

/* Writes v in decimal at p (room for 21 bytes); returns the length. snprintf costs ~1,500
 * instructions a call, and a freeze formats a dozen numbers. */
size_t cj_dec_put(char *p, long long v) {
    char tmp[24];
    size_t n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t o = 0;
    if (v < 0) p[o++] = '-';
    while (n) p[o++] = tmp[--n];
    return o;
}

/* Appends lit then v in decimal. */
static int buf_num(cr_buf *b, const char *lit, long long v) {
    char d[24];
    int rc = cr_buf_append_str(b, lit);
    return rc ? rc : cr_buf_append(b, d, cj_dec_put(d, v));
}

/* Builds the stored request of a transfer as JSON text, all but its opening: the journal puts
 * {"v":1,"id":...,"seq":... in front when it writes it (the id may be made then). The text is
 * written once, directly (no document tree), on the worker. *out new (free). */
int cj_payload_of(const cr_transfer *t, const char *idem, int64_t created, int64_t expires, const char *host,
               char **out) {
    cr_buf b = {0};
    char num[96];
    int rc = cr_buf_append_str(&b, "\"method\":");
    if (!rc) rc = json_str(&b, t->method);
    if (!rc) rc = cr_buf_append_str(&b, ",\"url\":");
    if (!rc) rc = json_str(&b, t->url);
    if (!rc) rc = cr_buf_append_str(&b, ",\"headers\":[");
    for (size_t i = 0; !rc && i < t->headers.count; i++) {
        rc = cr_buf_append_str(&b, i ? ",[" : "[");
        if (!rc) rc = json_str(&b, t->headers.items[i].name);
        if (!rc) rc = cr_buf_append_char(&b, ',');
        if (!rc) rc = json_str(&b, t->headers.items[i].value);
        if (!rc) rc = cr_buf_append_char(&b, ']');
    }
    if (!rc && !cr_kvlist_get(&t->headers, "Idempotency-Key")) {
        rc = cr_buf_append_str(&b, t->headers.count ? ",[\"Idempotency-Key\"," : "[\"Idempotency-Key\",");
        if (!rc) rc = json_str(&b, idem);
        if (!rc) rc = cr_buf_append_char(&b, ']');
    }
    if (!rc) rc = cr_buf_append_char(&b, ']');
    if (!rc && t->has_body) {
        /* cr_base64_encode of nothing leaves a reserved, unterminated buffer: encode only bytes. */
        rc = cr_buf_append_str(&b, ",\"body_b64\":\"");
        if (!rc && t->body_len) rc = cr_base64_encode(&b, t->body, t->body_len);
        if (!rc) rc = cr_buf_append_char(&b, '"');
    }
    const struct cr_freeze_req *fr = &t->freeze;
    if (!rc) rc = buf_num(&b, ",\"timeout_ms\":", t->timeout_ms);
    if (!rc) rc = cr_buf_append_str(&b, ",\"idempotency_key\":");
    if (!rc) rc = json_str(&b, idem);
    if (!rc) rc = buf_num(&b, ",\"created_ms\":", (long long)created);
    if (!rc) rc = buf_num(&b, ",\"expires_ms\":", (long long)expires);
    if (!rc) rc = cr_buf_append_str(&b, fr->policy == COURIER_FREEZE_MANUAL ? ",\"policy\":\"manual\"" : ",\"policy\":\"auto\"");
    if (!rc) rc = cr_buf_append_str(&b, fr->flags & COURIER_FREEZE_UNORDERED ? ",\"ordered\":false" : ",\"ordered\":true");
    if (!rc) rc = cr_buf_append_str(&b, ",\"host\":");
    if (!rc) rc = json_str(&b, host);
    if (!rc) rc = buf_num(&b, ",\"priority\":", t->priority);
    if (!rc) rc = buf_num(&b, ",\"retry\":{\"max\":", t->retry.max);
    if (!rc) rc = buf_num(&b, ",\"base_ms\":", t->retry.base_ms);
    if (!rc) rc = buf_num(&b, ",\"max_ms\":", t->retry.max_ms);
    if (!rc) rc = buf_num(&b, ",\"flags\":", t->retry.flags);
    if (!rc) rc = cr_buf_append_char(&b, '}');
    if (!rc && fr->cache_set) {
        snprintf(num, sizeof num, ",\"cache\":{\"policy\":%d,\"expiry_s\":%lld}", fr->cache_policy,
                 (long long)fr->cache_expiry_s);
        rc = cr_buf_append_str(&b, num);
    }
    if (!rc && t->jspec) {
        /* Key paths and result names are kept; mapping objects live in memory only. */
        rc = cr_buf_append_str(&b, ",\"json\":{");
        if (!rc && t->jspec->key_path) {
            rc = cr_buf_append_str(&b, "\"key_path\":");
            if (!rc) rc = json_str(&b, t->jspec->key_path);
            if (!rc) rc = cr_buf_append_char(&b, ',');
        }
        if (!rc) rc = cr_buf_append_str(&b, t->jspec->mapping ? "\"had_mapping\":true" : "\"had_mapping\":false");
        if (!rc && t->jspec->nresults) {
            rc = cr_buf_append_str(&b, ",\"results\":[");
            for (size_t i = 0; !rc && i < t->jspec->nresults; i++) {
                const cr_result_spec *r = &t->jspec->results[i];
                rc = cr_buf_append_str(&b, i ? ",{\"name\":" : "{\"name\":");
                if (!rc) rc = json_str(&b, r->name);
                if (!rc && r->key_path) {
                    rc = cr_buf_append_str(&b, ",\"key_path\":");
                    if (!rc) rc = json_str(&b, r->key_path);
                }
                if (!rc) {
                    snprintf(num, sizeof num, ",\"flags\":%u}", r->flags);
                    rc = cr_buf_append_str(&b, num);
                }
            }
            if (!rc) rc = cr_buf_append_char(&b, ']');
        }
        if (!rc) rc = cr_buf_append_char(&b, '}');
    }
    if (!rc) rc = cr_buf_append_char(&b, '}');
    if (rc) {
        cr_buf_free(&b);
        return COURIER_E_NO_MEMORY;
    }
    *out = cr_buf_take(&b, NULL);
    return *out ? COURIER_OK : COURIER_E_NO_MEMORY;
}

/* Rebuilds the request from its decoded stored form (no snapshot needed). *out new.
 * COURIER_E_JOURNAL_CORRUPT when the text is not a request. */
int cj_request_from(const jreq *q, courier_request **out) {
    if (!q->method || !q->url || !q->has_headers) return COURIER_E_JOURNAL_CORRUPT;
    courier_request *r = NULL;
    int rc = courier_request_new(&r, q->method, q->url);
    if (rc) return rc;
    courier_request_set_use_default_params(r, 0);
    const char *ctype = NULL;
    for (size_t i = 0; rc == COURIER_OK && i < q->headers.count; i++) {
        const char *n = q->headers.items[i].name, *v = q->headers.items[i].value;
        rc = courier_request_add_header(r, n, v);
        if (rc == COURIER_OK && !ctype && strcasecmp(n, "Content-Type") == 0) ctype = v;
    }
    if (rc == COURIER_OK && q->body_b64) {
        char *body = NULL;
        size_t len = 0;
        rc = b64_decode(q->body_b64, strlen(q->body_b64), &body, &len);
        if (rc == COURIER_E_INVALID_ARGUMENT) rc = COURIER_E_JOURNAL_CORRUPT;
        if (rc == COURIER_OK) rc = courier_request_set_body(r, body, len, ctype);
        free(body);
    }
    if (rc == COURIER_OK && q->timeout_ms > 0) rc = courier_request_set_timeout_ms(r, q->timeout_ms);
    if (rc == COURIER_OK && q->has_retry && q->retry_max > 0 &&
        courier_request_set_retry(r, q->retry_max, q->retry_base, q->retry_maxd, q->retry_flags) != COURIER_OK)
        courier_request_set_retry(r, 0, 0, 0, 0);
    if (rc == COURIER_OK && q->priority)
        courier_request_set_priority(r, q->priority > 0 ? COURIER_PRIORITY_HIGH : COURIER_PRIORITY_LOW);
    if (rc == COURIER_OK && q->has_cache) {
        courier_request_set_cache_policy(r, q->cache_policy);
        if (q->cache_expiry > 0) courier_request_set_cache_expiry(r, q->cache_expiry);
    }
    if (rc == COURIER_OK && q->has_json) {
        if (q->key_path) courier_request_set_key_path(r, q->key_path);
        for (size_t k = 0; k < q->nresults; k++)
            courier_request_add_result(r, q->results[k].name, q->results[k].key_path, NULL, q->results[k].flags);
    }
    /* The frozen request's own settings never freeze it again: the journal keeps it. */
    if (rc) {
        courier_request_free(r);
        return rc;
    }
    *out = r;
    return COURIER_OK;
}
