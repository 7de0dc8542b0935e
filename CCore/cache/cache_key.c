/*
 * cache_key.c — cache keys and their hashes.
 *
 * The default key of a request is one line of text:
 *   METHOD SP absolute-URL-without-query [ "?" canonical parameters ]
 *   [ "\nbody:" 16 hex digits of the raw body's hash ]      (only when a raw body is set)
 *   [ "\nsensitive:" the request's sensitive data ]
 * The URL is the request's target joined to its own base URL, else the engine's (scheme and host
 * lowercased, fragment dropped). The parameters are those of the URL's query string, the engine's
 * defaults (unless the request opts out) and the request's own, each percent-encoded the same
 * way, minus the names of the request's key filter, sorted bytewise: the same request built in
 * any order gives the same key. A request's own key replaces the first line (sensitive data is
 * still appended). The store keys entries by a 128-bit hash of this text and keeps the text.
 */
#include "cache_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the default key ------------------------------------------------------------------------- */

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..len) into a new string (NUL-terminated; *out_len its length). */
static char *pct_decode(const char *s, size_t len, size_t *out_len) {
    char *o = malloc(len + 1);
    if (!o) return NULL;
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        int h, l;
        if (s[i] == '%' && i + 2 < len &&
            (h = hexval((unsigned char)s[i + 1])) >= 0 && (l = hexval((unsigned char)s[i + 2])) >= 0) {
            o[j++] = (char)(h << 4 | l);
            i += 2;
        } else {
            o[j++] = s[i];
        }
    }
    o[j] = '\0';
    *out_len = j;
    return o;
}

typedef struct pair_list {
    char **items; /* "enc(name)=enc(value)" */
    size_t n, cap;
} pair_list;

static bool filtered(const cr_cache_req *c, const char *name) {
    if (!c) return false;
    for (size_t i = 0; i < c->nfilters; i++)
        if (strcmp(c->filters[i], name) == 0) return true;
    return false;
}

static int pairs_add(pair_list *pl, const cr_cache_req *c, const char *name, size_t nlen, const char *value,
                     size_t vlen) {
    char *n = cr_strndup(name, nlen);
    if (!n) return COURIER_E_NO_MEMORY;
    bool skip = filtered(c, n);
    int rc = COURIER_OK;
    if (!skip) {
        cr_buf b = {0};
        if (cr_percent_encode(&b, name, nlen) || cr_buf_append_char(&b, '=') || cr_percent_encode(&b, value, vlen)) {
            rc = COURIER_E_NO_MEMORY;
        } else if (pl->n == pl->cap) {
            size_t cap = pl->cap ? pl->cap * 2 : 16;
            char **p = realloc(pl->items, cap * sizeof *p);
            if (!p) rc = COURIER_E_NO_MEMORY;
            else {
                pl->items = p;
                pl->cap = cap;
            }
        }
        if (rc == COURIER_OK) pl->items[pl->n++] = cr_buf_take(&b, NULL);
        else cr_buf_free(&b);
    }
    free(n);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Adds the pairs of a raw query string (decoded, re-encoded canonically). */
static int pairs_from_query(pair_list *pl, const cr_cache_req *c, const char *q, size_t len) {
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && q[j] != '&') j++;
        if (j > i) {
            const char *eq = memchr(q + i, '=', j - i);
            size_t nl = eq ? (size_t)(eq - (q + i)) : j - i;
            size_t dn, dv;
            char *n = pct_decode(q + i, nl, &dn);
            char *v = eq ? pct_decode(eq + 1, (size_t)(q + j - eq - 1), &dv) : (dv = 0, cr_strdup(""));
            int rc = (n && v) ? pairs_add(pl, c, n, dn, v, dv) : COURIER_E_NO_MEMORY;
            free(n);
            free(v);
            if (rc) return rc;
        }
        i = j + 1;
    }
    return COURIER_OK;
}

static bool absolute(const char *s) { return cr_url_scheme_len(s) != 0; }

int cr_cache_key_for(const courier_engine *e, const courier_request *r, char **out) {
    *out = NULL;
    const cr_cache_req *c = r->cache;
    cr_buf k = {0};
    int rc = COURIER_E_NO_MEMORY;
    pair_list pl = {0};
    char *url = NULL;

    if (c && c->key) {
        if (cr_buf_append_str(&k, c->key)) goto done;
    } else {
        /* The absolute URL, joined as cr_transfer_prepare joins it. */
        cr_buf u = {0};
        const char *base = r->base_url ? r->base_url : cr_core(e)->config->base_url;
        if (absolute(r->target) || !base) {
            if (cr_buf_append_str(&u, r->target)) goto done;
        } else {
            char vbuf[CR_API_VERSION_MAX + 2];
            if (cr_join_url(&u, base, cr_api_version_of(cr_core(e)->config, r, vbuf), r->target)) {
                cr_buf_free(&u);
                goto done;
            }
        }
        url = cr_buf_take(&u, NULL);
        if (!url) goto done;
        char *hash = strchr(url, '#');
        if (hash) *hash = '\0';
        /* Lowercase scheme and host. */
        size_t scheme = cr_url_scheme_len(url);
        if (scheme) {
            char *host_end = url + scheme;
            while (*host_end && *host_end != '/' && *host_end != '?') host_end++;
            for (char *p = url; p < host_end; p++) *p = (char)tolower((unsigned char)*p);
        }
        char *q = strchr(url, '?');
        if (q) {
            *q = '\0';
            if ((rc = pairs_from_query(&pl, c, q + 1, strlen(q + 1)))) goto done;
            rc = COURIER_E_NO_MEMORY;
        }
        if (r->use_default_params) {
            const cr_kvlist *dp = &cr_core(e)->config->params;
            for (size_t i = 0; i < dp->count; i++)
                if (pairs_add(&pl, c, dp->items[i].name, strlen(dp->items[i].name), dp->items[i].value,
                              strlen(dp->items[i].value)))
                    goto done;
        }
        for (size_t i = 0; i < r->params.count; i++)
            if (pairs_add(&pl, c, r->params.items[i].name, strlen(r->params.items[i].name), r->params.items[i].value,
                          strlen(r->params.items[i].value)))
                goto done;
        if (pl.n > 1) qsort(pl.items, pl.n, sizeof *pl.items, cmp_str);
        if (cr_buf_append_str(&k, r->method) || cr_buf_append_char(&k, ' ') || cr_buf_append_str(&k, url)) goto done;
        for (size_t i = 0; i < pl.n; i++)
            if (cr_buf_append_char(&k, i ? '&' : '?') || cr_buf_append_str(&k, pl.items[i])) goto done;
        if (r->has_body) {
            char hex[17];
            uint64_t h = cr_hash64(r->body, r->body_len, 0);
            for (int i = 15; i >= 0; i--) {
                hex[i] = "0123456789abcdef"[h & 15];
                h >>= 4;
            }
            hex[16] = '\0';
            if (cr_buf_append_str(&k, "\nbody:") || cr_buf_append_str(&k, hex)) goto done;
        }
    }
    if (c && c->sensitive && (cr_buf_append_str(&k, "\nsensitive:") || cr_buf_append_str(&k, c->sensitive))) goto done;
    *out = cr_buf_take(&k, NULL);
    rc = *out ? COURIER_OK : COURIER_E_NO_MEMORY;
done:
    for (size_t i = 0; i < pl.n; i++) free(pl.items[i]);
    free(pl.items);
    free(url);
    cr_buf_free(&k);
    return rc;
}

int cr_cache_vary_suffix(cr_buf *out, const char *names, size_t names_len,
                         const char *(*lookup)(const void *ctx, const char *name), const void *ctx) {
    if (cr_buf_append_str(out, "\nvary:")) return COURIER_E_NO_MEMORY;
    size_t i = 0;
    bool first = true;
    while (i < names_len) {
        size_t j = i;
        while (j < names_len && names[j] != '\n') j++;
        if (j > i) {
            char name[128];
            size_t nl = j - i < sizeof name - 1 ? j - i : sizeof name - 1;
            memcpy(name, names + i, nl);
            name[nl] = '\0';
            const char *v = lookup(ctx, name);
            if ((!first && cr_buf_append_char(out, '&')) || cr_buf_append_str(out, name) ||
                cr_buf_append_char(out, '=') || (v && cr_percent_encode(out, v, strlen(v))))
                return COURIER_E_NO_MEMORY;
            first = false;
        }
        i = j + 1;
    }
    return COURIER_OK;
}

/* The scheme://authority prefix length of an absolute URL, or 0. */
static size_t origin_len(const char *url) {
    size_t scheme = cr_url_scheme_len(url);
    if (!scheme) return 0;
    const char *p = url + scheme;
    while (*p && *p != '/' && *p != '?' && *p != '#') p++;
    return (size_t)(p - url);
}

int cr_cache_get_key_of_ref(const courier_engine *e, const char *base, const char *ref, char **out) {
    *out = NULL;
    size_t olen = origin_len(base);
    if (!olen || !ref || !*ref) return COURIER_E_NOT_FOUND;
    cr_buf u = {0};
    int rc = COURIER_OK;
    if (origin_len(ref)) {
        /* absolute: same origin only (RFC 9111 section 4.4), scheme and host compared as the key
         * writes them (lowercase) */
        if (origin_len(ref) != olen || strncasecmp(ref, base, olen) != 0) return COURIER_E_NOT_FOUND;
        rc = cr_buf_append_str(&u, ref);
    } else if (ref[0] == '/' && ref[1] == '/') { /* scheme-relative */
        rc = cr_buf_append(&u, base, cr_url_scheme_len(base) - 2) || cr_buf_append_str(&u, ref); /* "scheme:" */
        if (!rc && (origin_len(u.data) != olen || strncasecmp(u.data, base, olen) != 0)) {
            cr_buf_free(&u);
            return COURIER_E_NOT_FOUND;
        }
    } else if (ref[0] == '/') {
        rc = cr_buf_append(&u, base, olen) || cr_buf_append_str(&u, ref);
    } else {
        /* relative to the base's directory (dot segments are left as they are) */
        const char *q = base + olen + strcspn(base + olen, "?#");
        const char *slash = q;
        while (slash > base + olen && slash[-1] != '/') slash--;
        if (slash == base + olen) rc = cr_buf_append(&u, base, olen) || cr_buf_append_char(&u, '/');
        else rc = cr_buf_append(&u, base, (size_t)(slash - base));
        rc = rc || cr_buf_append_str(&u, ref);
    }
    char *abs = rc ? NULL : cr_buf_take(&u, NULL);
    cr_buf_free(&u);
    if (!abs) return COURIER_E_NO_MEMORY;
    courier_request *tmp = NULL;
    rc = courier_request_new(&tmp, "GET", abs);
    if (rc == COURIER_OK) rc = cr_cache_key_for(e, tmp, out);
    courier_request_free(tmp);
    free(abs);
    return rc;
}
