/*
 * cache_http.c — HTTP caching semantics (RFC 9111) for the HTTP cache policies, private and
 * shared: Cache-Control of responses and requests (section 5.2), Expires, Age and Date, which
 * responses may be stored (section 3, 3.5), freshness (explicit, and heuristic from Last-Modified,
 * section 4.2.2), age (section 4.2.3), stale-while-revalidate and stale-if-error (RFC 5861), Vary,
 * the fields that are not stored (section 3.1, no-cache="f", private="f") and the header update
 * of a 304 or a HEAD (sections 3.2, 4.3.4, 4.3.5). The decisions that need the store are in cache.c.
 */
#include "cache_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CR_HTTP_KEEP_VALIDATABLE_S (7 * 24 * 3600) /* how long a stale entry with validators is kept */
/* Heuristic freshness (section 4.2.2): 10% of the time since Last-Modified, the RFC's own
 * suggestion (a document unchanged for ten days is likely unchanged for one more), capped at a
 * day like the common caches (Chromium, Firefox, Squid's default refresh_pattern max), so a file
 * untouched for years is still checked daily. */
#define CR_HTTP_HEURISTIC_PERCENT 10
#define CR_HTTP_HEURISTIC_MAX_S (24 * 3600)
#define CR_HTTP_DELTA_MAX 2147483648LL /* section 1.2.2: larger delta-seconds are taken as 2^31 */

/* ---- HTTP-date (RFC 9110 section 5.6.7) -------------------------------------------------------- */

static int month_of(const char *m) {
    static const char names[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    for (int i = 0; i < 12; i++)
        if (strncmp(names + 3 * i, m, 3) == 0) return i;
    return -1;
}

static int64_t days_from_civil(int64_t y, int m, int d) { /* m 1..12; days since 1970-01-01 */
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool digits(const char *s, int n, int *out) {
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* The three forms a recipient must accept: IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT",
 * rfc850 "Sunday, 06-Nov-94 08:49:37 GMT", asctime "Sun Nov  6 08:49:37 1994". Nothing else. */
int64_t cr_http_date(const char *s) {
    if (!s) return -1;
    size_t n = strlen(s);
    int day, mon, year, hh, mm, ss;
    const char *t; /* "HH:MM:SS" */
    const char *comma = strchr(s, ',');
    if (comma && n == 29 && comma == s + 3 && s[4] == ' ' && s[7] == ' ' && s[11] == ' ' && s[16] == ' ' &&
        strcmp(s + 25, " GMT") == 0) {
        if (!digits(s + 5, 2, &day) || (mon = month_of(s + 8)) < 0 || !digits(s + 12, 4, &year)) return -1;
        t = s + 17;
    } else if (comma && comma > s + 5 && n == (size_t)(comma - s) + 24 && comma[1] == ' ' && comma[4] == '-' &&
               comma[8] == '-' && comma[11] == ' ' && strcmp(comma + 20, " GMT") == 0) {
        int yy;
        if (!digits(comma + 2, 2, &day) || (mon = month_of(comma + 5)) < 0 || !digits(comma + 9, 2, &yy)) return -1;
        year = yy < 70 ? 2000 + yy : 1900 + yy; /* section 5.6.7: interpret as the most recent past */
        t = comma + 12;
    } else if (!comma && n == 24 && s[3] == ' ' && s[7] == ' ' && s[10] == ' ' && s[19] == ' ') {
        char d2[2] = {s[8] == ' ' ? '0' : s[8], s[9]};
        if (!digits(d2, 2, &day) || (mon = month_of(s + 4)) < 0 || !digits(s + 20, 4, &year)) return -1;
        t = s + 11;
    } else {
        return -1;
    }
    if (t[2] != ':' || t[5] != ':' || !digits(t, 2, &hh) || !digits(t + 3, 2, &mm) || !digits(t + 6, 2, &ss) ||
        day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60)
        return -1;
    return days_from_civil(year, mon + 1, day) * 86400 + hh * 3600 + mm * 60 + ss;
}

/* ---- Cache-Control --------------------------------------------------------------------------- */

/* delta-seconds (section 1.2.2): digits only (also inside a quoted string, section 5.2); -1 when
 * invalid. */
static int64_t delta_seconds(const char *v, size_t len) {
    if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
        v++;
        len -= 2;
    }
    if (!len) return -1;
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)v[i])) return -1;
        if (n < CR_HTTP_DELTA_MAX) n = n * 10 + (v[i] - '0');
    }
    return n > CR_HTTP_DELTA_MAX ? CR_HTTP_DELTA_MAX : n;
}

/* A delta-seconds directive seen again: the same value keeps it; another value, or an invalid one,
 * makes it invalid (section 4.2.1: a cache may take the response as stale, and does). */
static void set_delta(int64_t *field, int *invalid, bool has_value, const char *v, size_t vlen) {
    int64_t n = has_value ? delta_seconds(v, vlen) : -1;
    if (n < 0 || (*field >= 0 && *field != n)) *invalid = 1;
    if (n >= 0 && *field < 0) *field = n;
}

static void add_fields(cr_cc_fields *f, const char *v, size_t vlen) {
    if (vlen >= 2 && v[0] == '"') {
        v++;
        vlen -= 2;
    }
    if (f->n < sizeof f->list / sizeof f->list[0]) {
        f->list[f->n] = v;
        f->len[f->n] = vlen;
        f->n++;
    } else {
        f->overflow = 1;
    }
}

static void cc_directive(cr_cc *cc, const char *name, size_t nlen, bool has_value, const char *val, size_t vlen,
                         bool malformed) {
#define IS(s) (nlen == sizeof(s) - 1 && strncasecmp(name, s, nlen) == 0)
    if (IS("no-store")) cc->no_store = 1;
    else if (IS("no-cache")) {
        if (has_value && vlen && !malformed) add_fields(&cc->no_cache_fields, val, vlen);
        else cc->no_cache = 1;
    } else if (IS("private")) {
        if (has_value && vlen && !malformed) add_fields(&cc->private_fields, val, vlen);
        else cc->priv = 1;
    } else if (IS("must-revalidate")) cc->must_revalidate = 1;
    else if (IS("proxy-revalidate")) cc->proxy_revalidate = 1;
    else if (IS("public")) cc->pub = 1;
    else if (IS("only-if-cached")) cc->only_if_cached = 1;
    else if (IS("max-age")) set_delta(&cc->max_age, &cc->max_age_invalid, has_value && !malformed, val, vlen);
    else if (IS("s-maxage")) set_delta(&cc->s_maxage, &cc->s_maxage_invalid, has_value && !malformed, val, vlen);
    else if (IS("min-fresh")) set_delta(&cc->min_fresh, &cc->min_fresh_invalid, has_value && !malformed, val, vlen);
    else if (IS("max-stale")) {
        if (!has_value) cc->max_stale_any = 1;
        else set_delta(&cc->max_stale, &cc->max_stale_invalid, !malformed, val, vlen);
    } else if (IS("stale-while-revalidate")) {
        int64_t n = malformed ? -1 : delta_seconds(val, vlen);
        if (n >= 0 && (cc->swr < 0 || n < cc->swr)) cc->swr = n;
    } else if (IS("stale-if-error")) {
        int64_t n = malformed ? -1 : delta_seconds(val, vlen);
        if (n >= 0 && (cc->sie < 0 || n < cc->sie)) cc->sie = n;
    }
#undef IS
}

static bool tchar(char c) {
    return isalnum((unsigned char)c) || (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

void cr_cc_parse(const cr_kvlist *headers, cr_cc *cc) {
    memset(cc, 0, sizeof *cc);
    cc->max_age = cc->s_maxage = cc->min_fresh = cc->max_stale = cc->swr = cc->sie = -1;
    bool any = false;
    for (size_t i = 0; i < headers->count; i++) {
        if (strcasecmp(headers->items[i].name, "Cache-Control") != 0) continue;
        any = true;
        /* cache-directive = token [ "=" ( token / quoted-string ) ], separated by commas with
         * optional whitespace around them; no whitespace around "=". */
        const char *s = headers->items[i].value;
        while (*s) {
            while (*s == ' ' || *s == '\t' || *s == ',') s++;
            if (!*s) break;
            const char *n = s;
            while (tchar(*s)) s++;
            size_t nlen = (size_t)(s - n);
            bool malformed = nlen == 0;
            const char *v = "";
            size_t vlen = 0;
            bool has_value = false;
            if (*s == '=') {
                s++;
                has_value = true;
                v = s;
                if (*s == '"') {
                    s++;
                    while (*s && *s != '"') s += (*s == '\\' && s[1]) ? 2 : 1;
                    if (*s == '"') s++;
                    else malformed = true;
                } else {
                    while (tchar(*s)) s++;
                }
                vlen = (size_t)(s - v);
            }
            while (*s == ' ' || *s == '\t') s++;
            if (*s && *s != ',') {
                malformed = true; /* "max-age =5", "max-age=a 1", ... */
                while (*s && *s != ',') s++;
            }
            if (nlen) cc_directive(cc, n, nlen, has_value, v, vlen, malformed);
        }
    }
    if (!any) {
        const char *pragma = cr_kvlist_get(headers, "Pragma");
        if (pragma && strcasestr(pragma, "no-cache")) cc->no_cache = 1;
    }
}

/* The next element of a comma-separated list (RFC 9110 section 5.6.1) in [*s, end): false at the
 * end; else *b and *n hold it (n may be 0 for an empty element). */
static bool list_next(const char **s, const char *end, const char **b, size_t *n) {
    const char *p = *s;
    while (p < end && (*p == ' ' || *p == '\t' || *p == ',')) p++;
    if (p >= end) return false;
    *b = p;
    while (p < end && *p != ',' && *p != ' ' && *p != '\t') p++;
    *n = (size_t)(p - *b);
    *s = p;
    return true;
}

/* Does the list [s, end) name `name` (case-insensitive)? */
static bool list_names(const char *s, const char *end, const char *name) {
    size_t len = strlen(name), n;
    const char *b;
    while (list_next(&s, end, &b, &n))
        if (n == len && strncasecmp(b, name, len) == 0) return true;
    return false;
}

/* Does a field-name list (no-cache="a, b") name `name`? */
static bool fields_name(const cr_cc_fields *f, const char *name) {
    for (size_t k = 0; k < f->n; k++)
        if (list_names(f->list[k], f->list[k] + f->len[k], name)) return true;
    return false;
}

/* ---- what is stored -------------------------------------------------------------------------- */

/* Section 3.1: hop-by-hop fields are not stored. */
static bool hop_by_hop(const char *name) {
    static const char *const hop[] = {"Connection", "Proxy-Connection", "Keep-Alive", "TE",
                                      "Transfer-Encoding", "Upgrade", "Trailer"};
    for (size_t i = 0; i < sizeof hop / sizeof hop[0]; i++)
        if (strcasecmp(name, hop[i]) == 0) return true;
    return false;
}

/* Is `name` listed in a Connection field of `headers`? */
static bool named_by_connection(const cr_kvlist *headers, const char *name) {
    for (size_t i = 0; i < headers->count; i++) {
        const char *v = headers->items[i].value;
        if (strcasecmp(headers->items[i].name, "Connection") == 0 && list_names(v, v + strlen(v), name)) return true;
    }
    return false;
}

bool cr_http_field_stored(const cr_kvlist *headers, const cr_cc *rc, bool shared, const char *name) {
    if (hop_by_hop(name) || named_by_connection(headers, name)) return false;
    if (fields_name(&rc->no_cache_fields, name)) return false; /* section 5.2.2.4: not served unvalidated */
    if (shared && fields_name(&rc->private_fields, name)) return false; /* section 5.2.2.7 */
    return true;
}

bool cr_http_fields_filtered(const cr_kvlist *headers, const cr_cc *rc, bool shared) {
    for (size_t i = 0; i < headers->count; i++)
        if (!cr_http_field_stored(headers, rc, shared, headers->items[i].name)) return true;
    return false;
}

/* Section 4.2.2 / RFC 9110 section 15.1: the statuses a cache may store without explicit freshness. */
static bool heuristically_cacheable(int status) {
    switch (status) {
    case 200: case 203: case 204: case 206: case 300: case 301: case 308:
    case 404: case 405: case 410: case 414: case 501: return true;
    default: return false;
    }
}

/* The one Expires value (section 5.3): -1 when absent; 0 (already expired) when invalid or when
 * several lines disagree. */
static int64_t expires_of(const cr_kvlist *h, bool *present) {
    const char *first = NULL;
    bool conflict = false;
    for (size_t i = 0; i < h->count; i++) {
        if (strcasecmp(h->items[i].name, "Expires") != 0) continue;
        if (!first) first = h->items[i].value;
        else if (strcmp(first, h->items[i].value) != 0) conflict = true;
    }
    *present = first != NULL;
    if (!first) return -1;
    int64_t t = cr_http_date(first);
    return conflict || t < 0 ? 0 : t;
}

/* Age (section 5.1): digits only; an invalid value is ignored. "a cache encountering a message with
 * a list-based Age field value SHOULD use the first member": the first field line's first member
 * (`Age: 7200, 0` is 7200 seconds old). */
static int64_t age_value_of(const cr_kvlist *h) {
    const char *v = cr_kvlist_get(h, "Age");
    if (!v) return 0;
    while (*v == ' ' || *v == '\t') v++;
    size_t len = strcspn(v, ",");
    while (len && (v[len - 1] == ' ' || v[len - 1] == '\t')) len--;
    int64_t n = delta_seconds(v, len);
    if (n >= 0 && v[0] == '"') n = -1; /* Age is a bare delta-seconds */
    return n < 0 ? 0 : n;
}

int cr_http_storable(const char *method, const courier_response *resp, const cr_kvlist *req_headers, bool shared,
                     int64_t now_ms, double response_delay_s, cr_entry *e) {
    if (strcmp(method, "GET") != 0) return COURIER_CACHE_REASON_NOT_STORED_METHOD;
    int status = resp->status;
    /* 206 is not stored (a part, not the resource; docs/design/cache.md,
     * "Partial content"); 304 and 1xx are not final
     * answers of their own. */
    if (status < 200 || status == 206 || status == 304 || status > 599) return COURIER_CACHE_REASON_NOT_STORED_STATUS;
    cr_cc rc, qc;
    cr_cc_parse(&resp->headers, &rc);
    if (req_headers) cr_cc_parse(req_headers, &qc);
    else memset(&qc, 0, sizeof qc);
    if (rc.no_store || qc.no_store) return COURIER_CACHE_REASON_NOT_STORED_NO_STORE;
    if (shared && rc.priv) return COURIER_CACHE_REASON_NOT_STORED_PRIVATE;
    bool s_maxage = shared && (rc.s_maxage >= 0 || rc.s_maxage_invalid);
    if (shared && req_headers && cr_kvlist_get(req_headers, "Authorization") && !rc.must_revalidate && !rc.pub &&
        !s_maxage)
        return COURIER_CACHE_REASON_NOT_STORED_AUTHORIZATION;

    int64_t now_s = now_ms / 1000;
    int64_t date = cr_http_date(cr_kvlist_get(&resp->headers, "Date"));
    if (date < 0) date = now_s;
    const char *etag = cr_kvlist_get(&resp->headers, "ETag");
    const char *lm = cr_kvlist_get(&resp->headers, "Last-Modified");

    /* Freshness lifetime (section 4.2.1): s-maxage (shared), max-age, Expires, then heuristics. */
    bool exp_present;
    int64_t exp = expires_of(&resp->headers, &exp_present);
    int64_t lifetime;
    bool explicit_fresh = true;
    if (s_maxage) {
        lifetime = rc.s_maxage_invalid ? 0 : rc.s_maxage;
    } else if (rc.max_age >= 0 || rc.max_age_invalid) {
        lifetime = rc.max_age_invalid ? 0 : rc.max_age;
    } else if (exp_present) {
        lifetime = exp > date ? exp - date : 0;
    } else {
        explicit_fresh = false;
        int64_t lmt = cr_http_date(lm);
        lifetime = 0;
        if (lmt >= 0 && lmt < date && (heuristically_cacheable(status) || rc.pub)) {
            lifetime = (date - lmt) * CR_HTTP_HEURISTIC_PERCENT / 100;
            if (lifetime > CR_HTTP_HEURISTIC_MAX_S) lifetime = CR_HTTP_HEURISTIC_MAX_S;
        }
    }
    /* Section 3: without explicit freshness (or public / private), only the heuristically
     * cacheable statuses may be stored. */
    if (!explicit_fresh && !heuristically_cacheable(status) && !rc.pub && !(rc.priv && !shared))
        return COURIER_CACHE_REASON_NOT_STORED_STATUS;
    if (rc.no_cache) lifetime = 0;
    bool must_revalidate = rc.must_revalidate || (shared && (rc.proxy_revalidate || s_maxage));
    bool validators = etag || lm;
    int64_t swr = rc.swr > 0 && !must_revalidate ? rc.swr : 0;
    int64_t sie = rc.sie > 0 && !must_revalidate ? rc.sie : 0;
    if (lifetime <= 0 && !validators && sie <= 0 && swr <= 0) return COURIER_CACHE_REASON_NOT_STORED_NO_FRESHNESS;

    /* Age (section 4.2.3). */
    int64_t age_value = age_value_of(&resp->headers);
    int64_t delay = response_delay_s > 0 ? (int64_t)response_delay_s : 0; /* whole seconds, as Age counts */
    int64_t apparent = now_s > date ? now_s - date : 0;
    int64_t corrected_age = age_value + delay;
    int64_t initial_age = apparent > corrected_age ? apparent : corrected_age;
    if (initial_age > UINT32_MAX) initial_age = UINT32_MAX;

    memset(e, 0, sizeof *e);
    e->flags = CR_EF_HTTP | (must_revalidate ? CR_EF_MUST_REVALIDATE : 0) | (rc.no_cache ? CR_EF_NO_CACHE : 0);
    e->status = status;
    e->created_ms = now_ms;
    int64_t fresh_s = lifetime > initial_age ? lifetime - initial_age : 0;
    e->expires_ms = now_ms + fresh_s * 1000;
    e->initial_age_s = (uint32_t)initial_age;
    e->swr_s = (uint32_t)(swr > UINT32_MAX ? UINT32_MAX : swr);
    e->sie_s = (uint32_t)(sie > UINT32_MAX ? UINT32_MAX : sie);
    int64_t stale_keep = swr > sie ? swr : sie;
    e->discard_ms = e->expires_ms + stale_keep * 1000;
    if (validators && e->discard_ms < e->expires_ms + (int64_t)CR_HTTP_KEEP_VALIDATABLE_S * 1000)
        e->discard_ms = e->expires_ms + (int64_t)CR_HTTP_KEEP_VALIDATABLE_S * 1000;
    if (etag) {
        e->etag = etag;
        e->etag_len = strlen(etag);
    }
    if (lm) {
        e->last_modified = lm;
        e->last_modified_len = strlen(lm);
    }
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int cr_http_vary_names(const cr_kvlist *headers, char **out) {
    *out = NULL;
    char *names[64];
    size_t n = 0;
    int rc = COURIER_OK;
    bool star = false;
    for (size_t i = 0; i < headers->count && rc == COURIER_OK; i++) {
        if (strcasecmp(headers->items[i].name, "Vary") != 0) continue;
        const char *s = headers->items[i].value, *end = s + strlen(s), *b;
        size_t len;
        while (list_next(&s, end, &b, &len)) {
            if (!len) continue;
            if (len == 1 && *b == '*') star = true;
            char *name = cr_strndup(b, len);
            if (!name) {
                rc = COURIER_E_NO_MEMORY;
                break;
            }
            for (char *p = name; *p; p++) *p = (char)tolower((unsigned char)*p);
            bool dup = false;
            for (size_t k = 0; k < n; k++) dup |= strcmp(names[k], name) == 0;
            if (dup || n == 64) free(name);
            else names[n++] = name;
        }
    }
    cr_buf b = {0};
    if (rc == COURIER_OK) {
        if (star) {
            rc = cr_buf_append_str(&b, "*");
        } else {
            qsort(names, n, sizeof names[0], cmp_str);
            for (size_t k = 0; k < n && rc == COURIER_OK; k++)
                if ((k && cr_buf_append_char(&b, '\n')) || cr_buf_append_str(&b, names[k])) rc = COURIER_E_NO_MEMORY;
        }
    }
    for (size_t k = 0; k < n; k++) free(names[k]);
    if (rc == COURIER_OK && !(*out = cr_buf_take(&b, NULL))) rc = COURIER_E_NO_MEMORY;
    cr_buf_free(&b);
    return rc;
}

int64_t cr_http_age_s(const cr_entry *e, int64_t now_ms) {
    int64_t resident = now_ms > e->created_ms ? (now_ms - e->created_ms) / 1000 : 0;
    return (int64_t)e->initial_age_s + resident;
}

/* Section 3.2: these fields of a 304 (or a HEAD) do not replace the stored ones. */
static bool not_updated_by_304(const char *name) {
    static const char *const skip[] = {"Content-Length", "Content-Encoding", "Transfer-Encoding", "Connection",
                                       "Keep-Alive",     "Content-Range",    "Trailer",           "Upgrade",
                                       "TE",             "Proxy-Connection", "Age"};
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (strcasecmp(name, skip[i]) == 0) return true;
    return false;
}

int cr_http_merge_304(cr_kvlist *stored, const cr_kvlist *fresh) {
    /* Every stored field named in the 304 goes first, then the 304's lines are added in order: a
     * name sent on several lines keeps all of them, once. */
    for (size_t i = 0; i < fresh->count; i++) {
        const char *name = fresh->items[i].name;
        if (!not_updated_by_304(name) && !named_by_connection(fresh, name))
            cr_kvlist_remove(stored, name);
    }
    for (size_t i = 0; i < fresh->count; i++) {
        const char *name = fresh->items[i].name;
        if (not_updated_by_304(name) || named_by_connection(fresh, name)) continue;
        if (cr_kvlist_add(stored, name, strlen(name), fresh->items[i].value, strlen(fresh->items[i].value)))
            return COURIER_E_NO_MEMORY;
    }
    return COURIER_OK;
}

/* ---- ranges from the cache (RFC 9110 section 14, RFC 9111 section 3.4) ------------------------- */

static const char *skip_ows(const char *p) {
    while (*p == ' ' || *p == '\t') p++;
    return p;
}

/* Digits to a non-negative number; -1 when none or too large. */
static int64_t range_number(const char **pp) {
    const char *p = *pp;
    int64_t n = 0;
    if (!isdigit((unsigned char)*p)) return -1;
    for (; isdigit((unsigned char)*p); p++) {
        if (n > (INT64_MAX - 9) / 10) return -1;
        n = n * 10 + (*p - '0');
    }
    *pp = p;
    return n;
}

/* One byte range of `bytes=...` (first, last; first -1 with last = a suffix length). false: not
 * one valid range. */
static bool parse_range(const char *v, int64_t *first, int64_t *last) {
    v = skip_ows(v);
    if (strncasecmp(v, "bytes", 5) != 0) return false;
    v = skip_ows(v + 5);
    if (*v++ != '=') return false;
    v = skip_ows(v);
    *first = -1;
    *last = -1;
    if (*v == '-') {
        v++;
        if ((*last = range_number(&v)) < 0) return false;
    } else {
        if ((*first = range_number(&v)) < 0 || *v++ != '-') return false;
        if (isdigit((unsigned char)*v) && ((*last = range_number(&v)) < 0 || *last < *first)) return false;
    }
    v = skip_ows(v);
    return *v == 0; /* a comma: several ranges, left to the origin's 200 */
}

/* If-Range (RFC 9110 section 13.1.5): a strong ETag match, or the stored Last-Modified exactly. */
static bool if_range_holds(const courier_response *r, const char *cond) {
    cond = skip_ows(cond);
    if (cond[0] == '"' || (cond[0] == 'W' && cond[1] == '/')) {
        const char *etag = cr_kvlist_get(&r->headers, "ETag");
        if (!etag || cond[0] == 'W') return false; /* a weak tag never matches for a range */
        etag = skip_ows(etag);
        if (etag[0] != '"') return false;
        size_t cl = strlen(cond);
        while (cl && (cond[cl - 1] == ' ' || cond[cl - 1] == '\t')) cl--;
        return strlen(etag) >= cl && strncmp(etag, cond, cl) == 0 && skip_ows(etag + cl)[0] == 0;
    }
    const char *lm = cr_kvlist_get(&r->headers, "Last-Modified");
    int64_t t = cr_http_date(cond);
    return lm && t >= 0 && cr_http_date(lm) == t;
}

static int set_field(courier_response *r, const char *name, const char *value) {
    cr_kvlist_remove(&r->headers, name);
    return cr_kvlist_add(&r->headers, name, strlen(name), value, strlen(value)) == 0 ? COURIER_OK : COURIER_E_NO_MEMORY;
}

int cr_http_range_answer(courier_response *r, const cr_kvlist *req_headers) {
    const char *range = cr_kvlist_get(req_headers, "Range");
    if (!range || r->status != 200) return COURIER_OK;
    int64_t first, last;
    if (!parse_range(range, &first, &last)) return COURIER_OK;
    const char *cond = cr_kvlist_get(req_headers, "If-Range");
    if (cond && !if_range_holds(r, cond)) return COURIER_OK;
    int64_t len = (int64_t)r->body_len;
    if (first < 0) { /* a suffix: the last `last` bytes */
        if (last == 0) first = len; /* no byte: unsatisfiable */
        else first = last >= len ? 0 : len - last;
        last = len - 1;
    } else if (last < 0 || last >= len) {
        last = len - 1;
    }
    if (cr_response_detach(r) != COURIER_OK) return COURIER_E_NO_MEMORY;
    char v[96];
    if (first >= len) {
        r->status = 416;
        r->body_len = 0;
        if (r->body) r->body[0] = 0;
        snprintf(v, sizeof v, "bytes */%lld", (long long)len);
        if (set_field(r, "Content-Range", v) || set_field(r, "Content-Length", "0")) return COURIER_E_NO_MEMORY;
        return COURIER_OK;
    }
    r->status = 206;
    size_t n = (size_t)(last - first + 1);
    if (first > 0) memmove(r->body, r->body + first, n);
    r->body_len = n;
    r->body[n] = 0;
    snprintf(v, sizeof v, "bytes %lld-%lld/%lld", (long long)first, (long long)last, (long long)len);
    if (set_field(r, "Content-Range", v)) return COURIER_E_NO_MEMORY;
    snprintf(v, sizeof v, "%zu", n);
    return set_field(r, "Content-Length", v);
}
