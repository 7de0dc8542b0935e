/*
 * cache_http.c — HTTP caching semantics (RFC 9111) for the HTTP cache policy, as a private cache:
 * Cache-Control (max-age, no-store, no-cache, must-revalidate, private allowed, s-maxage ignored,
 * stale-while-revalidate and stale-if-error of RFC 5861), Expires, Age and Date, heuristic
 * freshness from Last-Modified, Vary, and the header update of a 304.
 */
#include "cache_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CR_HTTP_KEEP_VALIDATABLE_S (7 * 24 * 3600) /* how long a stale entry with validators is kept */
#define CR_HTTP_HEURISTIC_MAX_S (24 * 3600)

int64_t cr_http_date(const char *s) {
    if (!s || !*s) return -1;
    time_t t = curl_getdate(s, NULL);
    return t < 0 ? -1 : (int64_t)t;
}

static int64_t parse_seconds(const char *v, size_t len) {
    if (len && *v == '"' && len >= 2) {
        v++;
        len -= 2;
    }
    if (!len) return -1;
    int64_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)v[i])) return i ? n : -1;
        if (n < (int64_t)1 << 40) n = n * 10 + (v[i] - '0');
    }
    return n;
}

static void cc_directive(cr_cc *cc, const char *name, size_t nlen, const char *val, size_t vlen) {
#define IS(s) (nlen == sizeof(s) - 1 && strncasecmp(name, s, nlen) == 0)
    if (IS("no-store")) cc->no_store = 1;
    else if (IS("no-cache")) cc->no_cache = 1; /* with field names: treated as plain no-cache */
    else if (IS("must-revalidate") || IS("proxy-revalidate")) cc->must_revalidate = 1;
    else if (IS("private")) cc->priv = 1;
    else if (IS("only-if-cached")) cc->only_if_cached = 1;
    else if (IS("max-age")) {
        int64_t n = parse_seconds(val, vlen);
        /* A malformed max-age means "stale" (RFC 9111 section 4.2.1). */
        cc->max_age = n < 0 ? 0 : (cc->max_age >= 0 && cc->max_age < n ? cc->max_age : n);
    } else if (IS("stale-while-revalidate")) {
        int64_t n = parse_seconds(val, vlen);
        if (n >= 0) cc->swr = n;
    } else if (IS("stale-if-error")) {
        int64_t n = parse_seconds(val, vlen);
        if (n >= 0) cc->sie = n;
    }
#undef IS
}

void cr_cc_parse(const cr_kvlist *headers, cr_cc *cc) {
    memset(cc, 0, sizeof *cc);
    cc->max_age = cc->swr = cc->sie = -1;
    bool any = false;
    for (size_t i = 0; i < headers->count; i++) {
        if (strcasecmp(headers->items[i].name, "Cache-Control") != 0) continue;
        any = true;
        const char *s = headers->items[i].value;
        while (*s) {
            while (*s == ' ' || *s == '\t' || *s == ',') s++;
            if (!*s) break;
            const char *n = s;
            while (*s && *s != '=' && *s != ',' && *s != ' ' && *s != '\t') s++;
            size_t nlen = (size_t)(s - n);
            const char *v = NULL;
            size_t vlen = 0;
            while (*s == ' ' || *s == '\t') s++;
            if (*s == '=') {
                s++;
                while (*s == ' ' || *s == '\t') s++;
                v = s;
                if (*s == '"') {
                    s++;
                    while (*s && *s != '"') s++;
                    if (*s == '"') s++;
                } else {
                    while (*s && *s != ',' && *s != ' ' && *s != '\t') s++;
                }
                vlen = (size_t)(s - v);
            }
            cc_directive(cc, n, nlen, v ? v : "", vlen);
            while (*s && *s != ',') s++;
        }
    }
    if (!any) {
        const char *pragma = cr_kvlist_get(headers, "Pragma");
        if (pragma && strcasestr(pragma, "no-cache")) cc->no_cache = 1;
    }
}

static bool status_cacheable(int status) {
    switch (status) {
    case 200: case 203: case 204: case 300: case 301: case 308: return true;
    default: return false;
    }
}

bool cr_http_storable(const char *method, const courier_response *resp, const cr_kvlist *req_headers,
                      int64_t now_ms, cr_entry *e) {
    if (strcmp(method, "GET") != 0 || !status_cacheable(resp->status)) return false;
    cr_cc rc, qc;
    cr_cc_parse(&resp->headers, &rc);
    if (req_headers) cr_cc_parse(req_headers, &qc);
    else memset(&qc, 0, sizeof qc);
    if (rc.no_store || qc.no_store) return false;

    int64_t now_s = now_ms / 1000;
    int64_t date = cr_http_date(cr_kvlist_get(&resp->headers, "Date"));
    if (date < 0) date = now_s;
    const char *etag = cr_kvlist_get(&resp->headers, "ETag");
    const char *lm = cr_kvlist_get(&resp->headers, "Last-Modified");

    int64_t lifetime;
    if (rc.max_age >= 0) {
        lifetime = rc.max_age;
    } else if (cr_kvlist_get(&resp->headers, "Expires")) {
        int64_t exp = cr_http_date(cr_kvlist_get(&resp->headers, "Expires"));
        lifetime = exp < 0 ? 0 : (exp > date ? exp - date : 0);
    } else if (lm && cr_http_date(lm) >= 0 && cr_http_date(lm) < date) {
        lifetime = (date - cr_http_date(lm)) / 10; /* heuristic freshness, RFC 9111 section 4.2.2 */
        if (lifetime > CR_HTTP_HEURISTIC_MAX_S) lifetime = CR_HTTP_HEURISTIC_MAX_S;
    } else {
        lifetime = 0;
    }
    if (rc.no_cache) lifetime = 0;
    bool validators = etag || lm;
    int64_t swr = rc.swr > 0 && !rc.must_revalidate ? rc.swr : 0;
    int64_t sie = rc.sie > 0 && !rc.must_revalidate ? rc.sie : 0;
    if (lifetime <= 0 && !validators && sie <= 0 && swr <= 0) return false;

    /* Age (RFC 9111 section 4.2.3); the response delay is taken as zero. */
    const char *agev = cr_kvlist_get(&resp->headers, "Age");
    int64_t age_value = agev ? parse_seconds(agev, strlen(agev)) : 0;
    if (age_value < 0) age_value = 0;
    int64_t apparent = now_s > date ? now_s - date : 0;
    int64_t initial_age = apparent > age_value ? apparent : age_value;
    if (initial_age > UINT32_MAX) initial_age = UINT32_MAX;

    memset(e, 0, sizeof *e);
    e->flags = CR_EF_HTTP | (rc.must_revalidate ? CR_EF_MUST_REVALIDATE : 0) | (rc.no_cache ? CR_EF_NO_CACHE : 0);
    e->status = resp->status;
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
    return true;
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
        const char *s = headers->items[i].value;
        while (*s) {
            while (*s == ' ' || *s == '\t' || *s == ',') s++;
            const char *b = s;
            while (*s && *s != ',' && *s != ' ' && *s != '\t') s++;
            if (s == b) continue;
            if (s - b == 1 && *b == '*') star = true;
            char *name = cr_strndup(b, (size_t)(s - b));
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

static bool not_updated_by_304(const char *name) {
    static const char *const skip[] = {"Content-Length", "Content-Encoding", "Transfer-Encoding", "Connection",
                                       "Keep-Alive",     "Content-Range",    "Trailer",           "Upgrade"};
    for (size_t i = 0; i < sizeof skip / sizeof skip[0]; i++)
        if (strcasecmp(name, skip[i]) == 0) return true;
    return false;
}

int cr_http_merge_304(cr_kvlist *stored, const cr_kvlist *fresh) {
    for (size_t i = 0; i < fresh->count; i++) {
        const char *name = fresh->items[i].name;
        if (not_updated_by_304(name)) continue;
        bool seen = false;
        for (size_t k = 0; k < i; k++) seen |= strcasecmp(fresh->items[k].name, name) == 0;
        if (!seen) cr_kvlist_remove(stored, name);
        if (cr_kvlist_add(stored, name, strlen(name), fresh->items[i].value, strlen(fresh->items[i].value)))
            return COURIER_E_NO_MEMORY;
    }
    return COURIER_OK;
}
