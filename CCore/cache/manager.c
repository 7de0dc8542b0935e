/*
 * manager.c — the cache's manager API: the key of a request (courier_cache_key), reading, testing
 * and removing entries by request or by key, putting an entry by key, the store's size, verify,
 * statistics and listing. Over what cache.c shares in cache_internal.h: the store opened on first
 * use (cr_cache_open_store), the lookup (cr_cache_lookup, following Vary records with a request's
 * headers) and the registered user policies. Any thread; each call is its own transaction.
 */
#include "cache_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct courier_cache_list {
    cr_list_item *items;
    size_t count;
};

int courier_cache_key(char **out, courier_engine *e, const courier_request *r) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    *out = NULL;
    if (!e || !r) return COURIER_E_INVALID_ARGUMENT;
    return cr_cache_key_for(e, r, out);
}

static int get_common(courier_engine *e, const char *key, const courier_request *r, int flags,
                      courier_response **out, courier_error *err) {
    cr_cache_store *s = cr_cache_open_store(e, err);
    if (!s) return cr_cache_store_code(e);
    int64_t now = cr_cache_now_ms(cr_core(e)->cache);
    bool fresh = false;
    cr_header_ctx hc = {e, r, NULL};
    courier_response *resp = NULL;
    bool allow_stale = (flags & COURIER_CACHE_ALLOW_STALE) != 0;
    int rc = cr_cache_lookup(e, s, key, NULL, r ? &hc : NULL, now, !allow_stale, &resp, NULL, &fresh, NULL);
    if (rc == COURIER_OK && !fresh && !allow_stale) {
        courier_response_free(resp); /* NULL: a stale entry is not built when it is not wanted */
        resp = NULL;
        rc = COURIER_E_NOT_FOUND;
    }
    if (rc == COURIER_OK && !fresh) {
        resp->cache_status = COURIER_CACHE_STATUS_STALE;
        resp->cache_reason = COURIER_CACHE_REASON_STALE_ACCEPTED;
    }
    if (rc == COURIER_E_NOT_FOUND) return cr_fail(err, rc, "no cache entry");
    if (rc) return cr_fail(err, rc, "cannot read the cache");
    if (out) *out = resp;
    else courier_response_free(resp);
    return COURIER_OK;
}

int courier_cache_get(courier_response **out, courier_engine *e, const courier_request *r, int flags,
                      courier_error *err) {
    cr_error_clear(err);
    if (out) *out = NULL;
    if (!e || !r) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or request is NULL");
    char *key = NULL;
    int rc = cr_cache_key_for(e, r, &key);
    if (rc) return cr_fail(err, rc, NULL);
    rc = get_common(e, key, r, flags, out, err);
    free(key);
    return rc;
}

int courier_cache_get_key(courier_response **out, courier_engine *e, const char *key, int flags,
                          courier_error *err) {
    cr_error_clear(err);
    if (out) *out = NULL;
    if (!e || !key) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or key is NULL");
    return get_common(e, key, NULL, flags, out, err);
}

static int has_common(courier_engine *e, const char *key, const courier_request *r, int *out_has,
                      courier_error *err) {
    *out_has = 0;
    int policy = r && r->cache && r->cache->policy >= COURIER_CACHE_POLICY_USER_MIN ? r->cache->policy : -1;
    policy_reg *reg = policy >= 0 ? cr_cache_find_policy(cr_core(e)->cache, policy) : NULL;
    courier_response *resp = NULL;
    int rc = get_common(e, key, r, reg ? COURIER_CACHE_ALLOW_STALE : 0, &resp, err);
    if (rc == COURIER_OK) {
        *out_has = 1;
        if (reg && reg->fns.has_cache)
            *out_has = reg->fns.has_cache(resp, cr_cache_now_ms(cr_core(e)->cache), reg->user) != 0;
        else if (reg) *out_has = resp->cache_status == COURIER_CACHE_STATUS_HIT;
    }
    courier_response_free(resp);
    cr_cache_policy_release(reg);
    if (rc == COURIER_E_NOT_FOUND) {
        cr_error_clear(err);
        return COURIER_OK;
    }
    return rc;
}

int courier_cache_has(int *out_has, courier_engine *e, const courier_request *r, courier_error *err) {
    cr_error_clear(err);
    if (!e || !r || !out_has) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "NULL argument");
    char *key = NULL;
    int rc = cr_cache_key_for(e, r, &key);
    if (rc) return cr_fail(err, rc, NULL);
    rc = has_common(e, key, r, out_has, err);
    free(key);
    return rc;
}

int courier_cache_has_key(int *out_has, courier_engine *e, const char *key, courier_error *err) {
    cr_error_clear(err);
    if (!e || !key || !out_has) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "NULL argument");
    return has_common(e, key, NULL, out_has, err);
}

static int remove_common(courier_engine *e, const char *key, const courier_request *r, courier_error *err) {
    cr_cache_store *s = cr_cache_open_store(e, err);
    if (!s) return cr_cache_store_code(e);
    uint8_t hash[16];
    cr_buf vk = {0};
    cr_key_hash(key, strlen(key), hash);
    if (r) {
        /* Under a Vary record, the variant this request selects. */
        cr_read rd;
        const char *names;
        size_t nlen;
        cr_header_ctx hc = {e, r, NULL};
        if (s->ops->read_begin(s, &rd) == COURIER_OK) {
            if (s->ops->vary_get(s, &rd, key, strlen(key), hash, &names, &nlen) == COURIER_OK &&
                !cr_buf_append_str(&vk, key) && !cr_cache_vary_suffix(&vk, names, nlen, cr_cache_header_lookup, &hc))
                cr_key_hash(vk.data, vk.len, hash);
            s->ops->read_end(s, &rd);
        }
    }
    const char *hashed = vk.data ? vk.data : key;
    int rc = s->ops->remove(s, hashed, strlen(hashed), hash, err);
    cr_buf_free(&vk);
    return rc;
}

int courier_cache_remove(courier_engine *e, const courier_request *r, courier_error *err) {
    cr_error_clear(err);
    if (!e || !r) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or request is NULL");
    char *key = NULL;
    int rc = cr_cache_key_for(e, r, &key);
    if (rc) return cr_fail(err, rc, NULL);
    rc = remove_common(e, key, r, err);
    free(key);
    return rc;
}

int courier_cache_remove_key(courier_engine *e, const char *key, courier_error *err) {
    cr_error_clear(err);
    if (!e || !key) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or key is NULL");
    return remove_common(e, key, NULL, err);
}

int courier_cache_put_key(courier_engine *e, const char *key, int status, const char *const *names,
                          const char *const *values, size_t nheaders, const void *body, size_t body_len,
                          int64_t expiry_ms, courier_error *err) {
    cr_error_clear(err);
    if (!e || !key || !*key || (!body && body_len) || (nheaders && (!names || !values)) || expiry_ms < 0 ||
        status < 0 || status > 999)
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "invalid argument");
    struct cr_cache *c = cr_core(e)->cache;
    cr_cache_store *s = cr_cache_open_store(e, err);
    if (!s) return cr_cache_store_code(e);
    /* The header block ("name\0value\0"...) is encoded here, on the stack when it is small. */
    char small[512];
    size_t hb_len = 0;
    const char *etag = NULL, *lm = NULL;
    for (size_t i = 0; i < nheaders; i++) {
        if (!names[i] || !values[i]) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "NULL header");
        size_t nl = strlen(names[i]), vl = strlen(values[i]);
        int rc = cr_check_header(names[i], nl, values[i], vl);
        if (rc) return cr_fail(err, rc, "invalid header");
        hb_len += nl + vl + 2;
        if (!etag && strcasecmp(names[i], "ETag") == 0) etag = values[i];
        if (!lm && strcasecmp(names[i], "Last-Modified") == 0) lm = values[i];
    }
    char *hb = hb_len <= sizeof small ? small : malloc(hb_len);
    if (!hb) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    for (size_t i = 0, off = 0; i < nheaders; i++) {
        size_t nl = strlen(names[i]) + 1, vl = strlen(values[i]) + 1;
        memcpy(hb + off, names[i], nl);
        memcpy(hb + off + nl, values[i], vl);
        off += nl + vl;
    }
    int64_t now = cr_cache_now_ms(c);
    cr_store_put p;
    memset(&p, 0, sizeof p);
    cr_key_hash(key, strlen(key), p.hash);
    cr_entry *en = &p.entry;
    en->status = status;
    en->created_ms = now;
    en->expires_ms = now + (expiry_ms ? expiry_ms : c->expiry_ms);
    en->discard_ms = en->expires_ms;
    en->key = key;
    en->key_len = strlen(key);
    en->method = "GET";
    en->method_len = 3;
    en->url = "";
    const char *sp = strchr(key, ' ');
    if (sp && cr_url_scheme_len(sp + 1)) { /* a default-style key: "METHOD URL..." */
        en->method = key;
        en->method_len = (size_t)(sp - key);
        en->url = sp + 1;
    }
    en->url_len = strcspn(en->url, "\n");
    en->body = body;
    en->body_len = body_len;
    if (etag) en->etag = etag, en->etag_len = strlen(etag);
    if (lm) en->last_modified = lm, en->last_modified_len = strlen(lm);
    en->headers = hb;
    en->headers_len = hb_len;
    cr_store_effect eff = {0};
    int rc = s->ops->write(s, &p, 1, c->max_bytes, now, &eff, err);
    if (hb != small) free(hb);
    if (rc == COURIER_OK) {
        atomic_fetch_add(&c->writes, (long long)eff.written);
        atomic_fetch_add(&c->evictions, (long long)eff.evicted);
        atomic_fetch_add(&c->write_failures, (long long)eff.skipped);
    } else {
        atomic_fetch_add(&c->write_failures, 1);
    }
    return rc;
}

int courier_cache_remove_all(int64_t *removed, courier_engine *e, courier_error *err) {
    cr_error_clear(err);
    if (removed) *removed = 0;
    if (!e) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine is NULL");
    cr_cache_store *s = cr_cache_open_store(e, err);
    return s ? s->ops->remove_all(s, removed, err) : cr_cache_store_code(e);
}

int courier_cache_remove_since(int64_t *removed, courier_engine *e, int64_t since_ms, courier_error *err) {
    cr_error_clear(err);
    if (removed) *removed = 0;
    if (!e) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine is NULL");
    cr_cache_store *s = cr_cache_open_store(e, err);
    return s ? s->ops->remove_since(s, since_ms, removed, err) : cr_cache_store_code(e);
}

int courier_cache_remove_expired(int64_t *removed, courier_engine *e, courier_error *err) {
    cr_error_clear(err);
    if (removed) *removed = 0;
    if (!e) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine is NULL");
    cr_cache_store *s = cr_cache_open_store(e, err);
    return s ? s->ops->remove_expired(s, cr_cache_now_ms(cr_core(e)->cache), removed, err) : cr_cache_store_code(e);
}

int courier_cache_size(int64_t *bytes, int64_t *count, courier_engine *e, courier_error *err) {
    cr_error_clear(err);
    if (bytes) *bytes = 0;
    if (count) *count = 0;
    if (!e) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine is NULL");
    cr_cache_store *s = cr_cache_open_store(e, err);
    return s ? s->ops->totals(s, bytes, count, err) : cr_cache_store_code(e);
}

int courier_cache_verify(courier_cache_verify_report *out, courier_engine *e, courier_error *err) {
    cr_error_clear(err);
    if (!e || !CR_SIZED_OK(out, courier_cache_verify_report))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "NULL argument or size");
    courier_cache_verify_report r = {.size = sizeof r};
    cr_cache_store *s = cr_cache_open_store(e, err);
    int rc = s ? s->ops->verify(s, &r, err) : cr_cache_store_code(e);
    CR_SIZED_OUT(out, r);
    return rc;
}

int courier_cache_get_stats(courier_cache_stats *out, courier_engine *e, courier_error *err) {
    cr_error_clear(err);
    if (!e || !CR_SIZED_OK(out, courier_cache_stats))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "NULL argument or size");
    struct cr_cache *c = cr_core(e)->cache;
    courier_cache_stats st = {.size = sizeof st};
    st.hits = atomic_load(&c->hits);
    st.misses = atomic_load(&c->misses);
    st.writes = atomic_load(&c->writes);
    st.evictions = atomic_load(&c->evictions);
    st.revalidations = atomic_load(&c->revalidations);
    st.stale_served = atomic_load(&c->stale);
    st.write_failures = atomic_load(&c->write_failures);
    st.max_bytes = c->max_bytes;
    int rc = courier_cache_size(&st.bytes, &st.count, e, err);
    CR_SIZED_OUT(out, st);
    return rc;
}

int courier_cache_list_entries(courier_cache_list **out, courier_engine *e, courier_error *err) {
    cr_error_clear(err);
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!e) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine is NULL");
    cr_cache_store *s = cr_cache_open_store(e, err);
    if (!s) return cr_cache_store_code(e);
    courier_cache_list *l = calloc(1, sizeof *l);
    if (!l) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    int rc = s->ops->list(s, &l->items, &l->count, err);
    if (rc) {
        free(l);
        return rc;
    }
    *out = l;
    return COURIER_OK;
}

size_t courier_cache_list_count(const courier_cache_list *l) { return l ? l->count : 0; }

int courier_cache_list_at(courier_cache_entry_info *out, const courier_cache_list *l, size_t index) {
    if (!l || !CR_SIZED_OK(out, courier_cache_entry_info)) return COURIER_E_INVALID_ARGUMENT;
    if (index >= l->count) return COURIER_E_NOT_FOUND;
    const cr_list_item *it = &l->items[index];
    courier_cache_entry_info info = {.size = sizeof info};
    info.key = it->key;
    info.url = it->url;
    info.id = it->id;
    info.status = it->status;
    info.bytes = it->size;
    info.created_ms = it->created_ms;
    info.expires_ms = it->expires_ms;
    CR_SIZED_OUT(out, info);
    return COURIER_OK;
}

void courier_cache_list_free(courier_cache_list *l) {
    if (!l) return;
    cr_list_items_free(l->items, l->count);
    free(l);
}
