/*
 * response.c — the response: made by the transport (transport.c), by hand (mocks, interceptors,
 * custom transports) or from the cache (a hit is one allocation plus its body, see one_block);
 * its one copy and one detach, the reference count, and every courier_response_* accessor. The
 * fields belong to the layers that fill them (cache status, redirect chain, JSON results, attempts);
 * reading them is here.
 */
#include "http/http.h"

#include <stddef.h>

#include <stdlib.h>
#include <string.h>

/* ---- making, copying, freeing ----------------------------------------------------------------- */

int courier_response_new(courier_response **out, int status) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    *out = NULL;
    if (status < 100 || status > 999) return COURIER_E_INVALID_ARGUMENT;
    courier_response *r = calloc(1, sizeof *r);
    if (!r) return COURIER_E_NO_MEMORY;
    r->status = status;
    r->body = cr_strdup("");
    r->url = cr_strdup("");
    r->method = cr_strdup("");
    if (!r->body || !r->url || !r->method) {
        courier_response_free(r);
        return COURIER_E_NO_MEMORY;
    }
    *out = r;
    return COURIER_OK;
}

int courier_response_add_header(courier_response *r, const char *name, const char *value) {
    if (!r || !name || !value) return COURIER_E_INVALID_ARGUMENT;
    int rc = cr_check_header(name, strlen(name), value, strlen(value));
    if (rc) return rc;
    if ((rc = cr_response_detach(r))) return rc; /* a cached response's strings share one block */
    return cr_kvlist_add(&r->headers, name, strlen(name), value, strlen(value));
}

int courier_response_set_body(courier_response *r, const void *body, size_t len) {
    if (!r || (!body && len)) return COURIER_E_INVALID_ARGUMENT;
    char *copy = cr_strndup(body ? body : "", len);
    if (!copy) return COURIER_E_NO_MEMORY;
    free(r->body);
    r->body = copy;
    r->body_len = len;
    return COURIER_OK;
}

courier_response *courier_response_retain(const courier_response *r) {
    if (!r) return NULL;
    courier_response *m = (courier_response *)r; /* the count is the one mutable part */
    atomic_fetch_add_explicit(&m->extra_refs, 1, memory_order_relaxed);
    return m;
}

void courier_response_free(courier_response *r) {
    if (!r) return;
    /* A retained response: drop one reference. The last one frees. */
    int extra = atomic_load_explicit(&r->extra_refs, memory_order_acquire);
    while (extra > 0) {
        if (atomic_compare_exchange_weak_explicit(&r->extra_refs, &extra, extra - 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            return;
    }
    free(r->file);
    cr_hops_free(r->hops); /* redirect.c */
    cr_jresp_free(atomic_load(&r->jresp)); /* mapping.c: the JSON state, parsed or not */
    free(r->body);
    if (!r->one_block) { /* else they are parts of r's own allocation (a cache hit, cache.c) */
        free(r->method);
        free(r->url);
        cr_kvlist_clear(&r->headers);
        free(r->cache_key); /* cache.c */
    }
    free(r);
}

int cr_response_detach(courier_response *r) {
    if (!r || !r->one_block) return COURIER_OK;
    char *method = cr_strdup(r->method), *url = cr_strdup(r->url);
    char *key = r->cache_key ? cr_strdup(r->cache_key) : NULL;
    cr_kvlist headers = {0};
    if (!method || !url || (r->cache_key && !key) || cr_kvlist_copy(&headers, &r->headers)) {
        free(method);
        free(url);
        free(key);
        cr_kvlist_clear(&headers);
        return COURIER_E_NO_MEMORY;
    }
    /* The old parts stay in the block (freed with the response), unused. */
    r->method = method;
    r->url = url;
    r->cache_key = key;
    r->headers = headers;
    r->one_block = 0;
    return COURIER_OK;
}

courier_response *cr_response_copy(const courier_response *src) {
    courier_response *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->status = src->status;
    r->metrics = src->metrics;
    r->cache_status = src->cache_status;
    r->cache_reason = src->cache_reason;
    r->cache_created_ms = src->cache_created_ms;
    r->cache_expires_ms = src->cache_expires_ms;
    r->cache_age_s = src->cache_age_s;
    r->body_len = src->body_len;
    if (!(r->method = cr_strdup(src->method)) || !(r->url = cr_strdup(src->url)) ||
        (src->cache_key && !(r->cache_key = cr_strdup(src->cache_key))) ||
        !(r->body = cr_strndup(src->body, src->body_len)) || cr_kvlist_copy(&r->headers, &src->headers)) {
        courier_response_free(r);
        return NULL;
    }
    return r;
}

/* ---- what came back ------------------------------------------------------------------------------ */

int courier_response_status(const courier_response *r) { return r ? r->status : 0; }

const uint8_t *courier_response_body(const courier_response *r, size_t *len) {
    if (!r) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = r->body_len;
    return (const uint8_t *)r->body;
}

int courier_response_text(char **out, size_t *out_len, const courier_response *r, const char *default_charset,
                          courier_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!out || !r) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, NULL);
    char named[80];
    int found = cr_content_type_charset(cr_kvlist_get(&r->headers, "Content-Type"), named, sizeof named);
    if (found < 0) return cr_fail(err, COURIER_E_UNKNOWN_CHARSET, "the Content-Type's charset is too long");
    const char *charset = found ? named : default_charset;
    if (charset && cr_charset_check(charset) != COURIER_OK)
        return cr_fail(err, COURIER_E_UNKNOWN_CHARSET, "unknown charset '%s'", charset);
    const char *body = r->body ? r->body : "";
    size_t len = r->body ? r->body_len : 0;
    if (cr_charset_is_utf8(charset) && len >= 3 && memcmp(body, "\xEF\xBB\xBF", 3) == 0) { /* a BOM */
        body += 3;
        len -= 3;
    }
    cr_buf b = {0};
    int rc = cr_charset_to_utf8(&b, charset, body, len);
    if (rc != COURIER_OK) {
        cr_buf_free(&b);
        if (rc == COURIER_E_CHARSET)
            return cr_fail(err, rc, "the body is not valid %s", charset ? charset : "UTF-8");
        return cr_fail(err, rc, NULL);
    }
    *out = cr_buf_take(&b, out_len);
    if (!*out) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    cr_error_clear(err);
    return COURIER_OK;
}

const char *courier_response_header(const courier_response *r, const char *name) {
    return r && name ? cr_kvlist_get(&r->headers, name) : NULL;
}

size_t courier_response_header_count(const courier_response *r) { return r ? r->headers.count : 0; }

int courier_response_header_at(const char **name, const char **value, const courier_response *r, size_t i) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    if (i >= r->headers.count) return COURIER_E_NOT_FOUND;
    if (name) *name = r->headers.items[i].name;
    if (value) *value = r->headers.items[i].value;
    return COURIER_OK;
}

const char *courier_response_url(const courier_response *r) { return r ? r->url : NULL; }

const char *courier_response_method(const courier_response *r) { return r ? r->method : NULL; }

uint64_t courier_response_request_id(const courier_response *r) { return r ? r->id : 0; }

int courier_response_metrics(courier_metrics *out, const courier_response *r) {
    /* 0.2.0's struct ended with redirects (the remote address came later). */
    if (!r || !out || out->size < offsetof(courier_metrics, redirects) + sizeof(int)) return COURIER_E_INVALID_ARGUMENT;
    courier_metrics m = r->metrics;
    m.size = sizeof m;
    CR_SIZED_OUT(out, m);
    return COURIER_OK;
}

const char *courier_response_file(const courier_response *r) { return r ? r->file : NULL; }

size_t courier_response_redirect_count(const courier_response *r) { return r && r->hops ? r->hops->count : 0; }

int courier_response_redirect_at(const char **url, int *status, const courier_response *r, size_t i) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    if (!r->hops || i >= r->hops->count) return COURIER_E_NOT_FOUND;
    if (url) *url = r->hops->items[i].url;
    if (status) *status = r->hops->items[i].status;
    return COURIER_OK;
}

int courier_response_attempts(int *attempts, int64_t *waited_ms, const courier_response *r) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    if (attempts) *attempts = r->attempts > 0 ? r->attempts : 1;
    if (waited_ms) *waited_ms = (int64_t)(r->waited_s * 1000.0 + 0.5); /* a sum of whole milliseconds */
    return COURIER_OK;
}

/* ---- the cache's marks (cache.c sets them) -------------------------------------------------------- */

int courier_response_cache_reason(const courier_response *r) { return r ? r->cache_reason : COURIER_CACHE_REASON_NONE; }

int courier_response_from_cache(const courier_response *r) { return r && r->cache_status != 0; }

int courier_response_cache_status(const courier_response *r) { return r ? r->cache_status : 0; }

int64_t courier_response_age_ms(const courier_response *r) { return r && r->cache_status ? r->cache_age_s * 1000 : 0; }

int64_t courier_response_cache_created(const courier_response *r) { return r ? r->cache_created_ms : 0; }

int64_t courier_response_cache_expires(const courier_response *r) { return r ? r->cache_expires_ms : 0; }

const char *courier_response_cache_key(const courier_response *r) { return r ? r->cache_key : NULL; }

/* ---- the JSON (serialize.c parses it, mapping.c applies key paths, mappings, the envelope) -------- */

int courier_response_parse_json(const courier_json **out, const courier_response *r, courier_error *err) {
    cr_error_clear(err);
    if (out) *out = NULL;
    if (!r || !out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "response or out is NULL");
    cr_jresp *j = cr_jresp_of(r);
    if (!j) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    const json_t *doc;
    int rc = cr_jresp_doc(r, j, &doc, err);
    *out = (const courier_json *)doc;
    return rc;
}

const courier_json *courier_response_json(const courier_response *r) {
    const courier_json *doc = NULL;
    return courier_response_parse_json(&doc, r, NULL) == COURIER_OK ? doc : NULL;
}

const courier_json *courier_response_data(const courier_response *r) {
    cr_jresp *j = r ? cr_jresp_of(r) : NULL;
    if (!j) return NULL;
    if (j->data.present) return (const courier_json *)cr_jresp_value(r, j, &j->data);
    return j->applied ? NULL : courier_response_json(r);
}

const courier_json *courier_response_result(const courier_response *r, const char *name) {
    cr_jresp *j = r && name ? cr_jresp_of(r) : NULL;
    if (!j) return NULL;
    for (size_t i = 0; i < j->nresults; i++)
        if (strcmp(j->results[i].name, name) == 0) return (const courier_json *)cr_jresp_value(r, j, &j->results[i].value);
    return NULL;
}

/* A result on the tape: its own tape (a mapping's output) or its index in the body's. */
static int jval_tape(const courier_response *r, cr_jresp *j, const cr_jval *v, const courier_json_tape **tape,
                     size_t *index, courier_error *err) {
    if (v->tape) {
        *tape = v->tape;
        *index = 0;
        return COURIER_OK;
    }
    int rc = cr_jresp_tape(r, j, tape, err); /* made when the result was, so this only reads it */
    if (rc == COURIER_OK) *index = v->index;
    return rc;
}

int courier_response_result_tape(const courier_json_tape **tape, size_t *index, const courier_response *r,
                                 const char *name, courier_error *err) {
    cr_error_clear(err);
    if (tape) *tape = NULL;
    if (index) *index = 0;
    if (!r || !tape || !index) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "response, tape or index is NULL");
    cr_jresp *j = cr_jresp_of(r);
    if (!j) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    if (name) {
        for (size_t i = 0; i < j->nresults; i++) {
            if (strcmp(j->results[i].name, name) != 0) continue;
            if (!j->results[i].value.present) break;
            return jval_tape(r, j, &j->results[i].value, tape, index, err);
        }
        return cr_fail(err, COURIER_E_NOT_FOUND, "no result named '%.100s'", name);
    }
    if (j->data.present) return jval_tape(r, j, &j->data, tape, index, err);
    if (j->applied) return cr_fail(err, COURIER_E_NOT_FOUND, "the response has no default result");
    return cr_jresp_tape(r, j, tape, err); /* the whole body: *index stays 0, the root */
}

int courier_response_envelope(int64_t *code, const char **message, const courier_response *r) {
    if (code) *code = 0;
    if (message) *message = NULL;
    cr_jresp *j = r ? cr_jresp_of(r) : NULL;
    if (!j) return COURIER_E_INVALID_ARGUMENT;
    if (message) *message = j->env_message;
    if (!j->has_env_code) return COURIER_E_NOT_FOUND;
    if (code) *code = j->env_code;
    return COURIER_OK;
}

int courier_response_mapping_error(courier_mapping_error *out, const courier_response *r) {
    cr_jresp *j = r ? cr_jresp_of(r) : NULL;
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    if (!j) return COURIER_E_INVALID_ARGUMENT;
    if (!j->has_merr) return COURIER_E_NOT_FOUND;
    *out = j->merr;
    return COURIER_OK;
}

int courier_response_hsts_upgraded(const courier_response *r) { return r && r->hsts_upgraded ? 1 : 0; }
