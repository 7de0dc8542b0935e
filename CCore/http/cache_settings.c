/*
 * cache_settings.c — a request's cache settings (courier_request_set_cache_*): its policy, expiry,
 * key, sensitive data and key filters, held in r->cache (cr_cache_req, http/http.h). The cache
 * (cache/) reads them on the send path; a frozen request (journal/) keeps the policy and expiry
 * and sets them again on the rebuilt request. Here, below both, so neither calls the other.
 *
 * Threads: a request is set by one thread at a time until it is sent (courier.h).
 */
#include "http/http.h"

#include <stdlib.h>

static void req_cache_free(void *state) {
    cr_cache_req *c = state;
    free(c->key);
    free(c->sensitive);
    for (size_t i = 0; i < c->nfilters; i++) free(c->filters[i]);
    free(c->filters);
    free(c);
}

static const cr_ext_ops req_cache_ops = {NULL, req_cache_free}; /* a request is never copied */

static cr_cache_req *req_cache(courier_request *r) {
    if (!r->cache) {
        r->cache = calloc(1, sizeof *r->cache);
        if (r->cache) {
            r->cache->ext.ops = &req_cache_ops;
            r->cache->policy = -1;
        }
    }
    return r->cache;
}

int courier_request_set_cache_policy(courier_request *r, courier_cache_policy policy) {
    if (!r || policy < -1 || (policy > COURIER_CACHE_HTTP_SHARED && policy < COURIER_CACHE_POLICY_USER_MIN))
        return COURIER_E_INVALID_ARGUMENT;
    cr_cache_req *c = req_cache(r);
    if (!c) return COURIER_E_NO_MEMORY;
    c->policy = policy;
    return COURIER_OK;
}

int courier_request_set_cache_expiry_ms(courier_request *r, int64_t expiry_ms) {
    if (!r || expiry_ms < 0) return COURIER_E_INVALID_ARGUMENT;
    cr_cache_req *c = req_cache(r);
    if (!c) return COURIER_E_NO_MEMORY;
    c->expiry_ms = expiry_ms;
    return COURIER_OK;
}

int courier_request_set_cache_key(courier_request *r, const char *key) {
    if (!r || (key && !*key)) return COURIER_E_INVALID_ARGUMENT;
    cr_cache_req *c = req_cache(r);
    if (!c) return COURIER_E_NO_MEMORY;
    return cr_set_string(&c->key, key);
}

int courier_request_set_cache_sensitive_data(courier_request *r, const char *data) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    cr_cache_req *c = req_cache(r);
    if (!c) return COURIER_E_NO_MEMORY;
    return cr_set_string(&c->sensitive, data);
}

int courier_request_add_cache_key_filter(courier_request *r, const char *name) {
    if (!r || !name) return COURIER_E_INVALID_ARGUMENT;
    cr_cache_req *c = req_cache(r);
    if (!c) return COURIER_E_NO_MEMORY;
    char **p = realloc(c->filters, (c->nfilters + 1) * sizeof *p);
    if (!p) return COURIER_E_NO_MEMORY;
    c->filters = p;
    if (!(p[c->nfilters] = cr_strdup(name))) return COURIER_E_NO_MEMORY;
    c->nfilters++;
    return COURIER_OK;
}
