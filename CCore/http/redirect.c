/*
 * redirect.c — redirects followed by the engine, hop by hop (RFC 9110 15.4), and the settings of
 * redirects and timeouts. A followed redirect becomes a new transfer with the same request id and
 * caller: method and body by the status, credentials dropped off the first origin, the downgrade
 * and scheme checks, the caller's hook; the engine then sends it like any transfer (cache lookup,
 * scheduler). The chain (URL and status of each redirect) goes from hop to hop into the response.
 */
#include "http/http.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- settings --------------------------------------------------------------------------------- */

void cr_http_opts_defaults(cr_http_opts *o) {
    memset(o, 0, sizeof *o);
    o->follow = 1;
    o->max_redirects = CR_DEFAULT_MAX_REDIRECTS;
}

void cr_http_opts_resolve(cr_http_opts *out, const cr_http_opts *engine, const cr_http_opts *request) {
    unsigned set = request->set;
    out->set = 0;
    out->follow = set & CR_HTTP_SET_FOLLOW ? request->follow : engine->follow;
    out->max_redirects = set & CR_HTTP_SET_MAX ? request->max_redirects : engine->max_redirects;
    out->allow_downgrade = set & CR_HTTP_SET_DOWNGRADE ? request->allow_downgrade : engine->allow_downgrade;
    out->connect_ms = set & CR_HTTP_SET_CONNECT ? request->connect_ms : engine->connect_ms;
    out->idle_ms = set & CR_HTTP_SET_IDLE ? request->idle_ms : engine->idle_ms;
    out->hook = cr_callback_retain(set & CR_HTTP_SET_HOOK ? request->hook : engine->hook);
}

int courier_config_set_follow_redirects(courier_config *c, int follow) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    c->http.follow = follow != 0;
    return COURIER_OK;
}

int courier_config_set_max_redirects(courier_config *c, int max_redirects) {
    if (!c || max_redirects < 0) return COURIER_E_INVALID_ARGUMENT;
    c->http.max_redirects = max_redirects;
    return COURIER_OK;
}

int courier_config_set_allow_redirect_downgrade(courier_config *c, int allow) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    c->http.allow_downgrade = allow != 0;
    return COURIER_OK;
}

int courier_config_set_redirect_hook(courier_config *c, courier_redirect_fn fn, void *user,
                                     courier_user_free_fn user_free) {
    return cr_callback_set(c ? &c->http.hook : NULL, (void (*)(void))fn, user, user_free);
}

int courier_request_set_follow_redirects(courier_request *r, int follow) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    r->http.follow = follow != 0;
    r->http.set |= CR_HTTP_SET_FOLLOW;
    return COURIER_OK;
}

int courier_request_set_max_redirects(courier_request *r, int max_redirects) {
    if (!r || max_redirects < 0) return COURIER_E_INVALID_ARGUMENT;
    r->http.max_redirects = max_redirects;
    r->http.set |= CR_HTTP_SET_MAX;
    return COURIER_OK;
}

int courier_request_set_allow_redirect_downgrade(courier_request *r, int allow) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    r->http.allow_downgrade = allow != 0;
    r->http.set |= CR_HTTP_SET_DOWNGRADE;
    return COURIER_OK;
}

int courier_request_set_redirect_hook(courier_request *r, courier_redirect_fn fn, void *user,
                                      courier_user_free_fn user_free) {
    int rc = cr_callback_set(r ? &r->http.hook : NULL, (void (*)(void))fn, user, user_free);
    if (rc == COURIER_OK) {
        if (fn) r->http.set |= CR_HTTP_SET_HOOK;
        else r->http.set &= ~CR_HTTP_SET_HOOK; /* the engine's again */
    }
    return rc;
}

int courier_config_set_timeout(courier_config *c, courier_timeout_kind kind, int64_t ms) {
    if (!c || ms < 0) return COURIER_E_INVALID_ARGUMENT;
    switch (kind) {
    case COURIER_TIMEOUT_CONNECT: c->http.connect_ms = ms; return COURIER_OK;
    case COURIER_TIMEOUT_IDLE: c->http.idle_ms = ms; return COURIER_OK;
    case COURIER_TIMEOUT_TOTAL:
        if (ms > LONG_MAX) return COURIER_E_INVALID_ARGUMENT;
        c->timeout_ms = (long)ms;
        return COURIER_OK;
    default: return COURIER_E_INVALID_ARGUMENT;
    }
}

int courier_request_set_timeout(courier_request *r, courier_timeout_kind kind, int64_t ms) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    unsigned bit = kind == COURIER_TIMEOUT_CONNECT ? CR_HTTP_SET_CONNECT : CR_HTTP_SET_IDLE;
    switch (kind) {
    case COURIER_TIMEOUT_CONNECT:
    case COURIER_TIMEOUT_IDLE:
        if (ms < 0) {
            r->http.set &= ~bit;
            return COURIER_OK;
        }
        if (kind == COURIER_TIMEOUT_CONNECT) r->http.connect_ms = ms;
        else r->http.idle_ms = ms;
        r->http.set |= bit;
        return COURIER_OK;
    case COURIER_TIMEOUT_TOTAL:
        if (ms > LONG_MAX) return COURIER_E_INVALID_ARGUMENT;
        r->timeout_ms = ms < 0 ? 0 : ms == 0 ? -1 : (long)ms; /* 0: the engine's, -1: none */
        return COURIER_OK;
    default: return COURIER_E_INVALID_ARGUMENT;
    }
}

/* The kind travels in the error's first reserved slot (the struct keeps its size). */
int courier_error_timeout_kind(const courier_error *err) {
    return err && err->code == COURIER_E_TIMEOUT ? err->reserved[0] : COURIER_TIMEOUT_NONE;
}

/* ---- the chain ---------------------------------------------------------------------------------- */

void cr_hops_free(cr_hops *h) {
    if (!h) return;
    for (size_t i = 0; i < h->count; i++) free(h->items[i].url);
    free(h->items);
    free(h->origin);
    free(h);
}

void cr_redirect_attach(cr_transfer *t, courier_response *resp) {
    if (resp && t->hsts_upgraded) resp->hsts_upgraded = 1; /* hsts.c: also on an answer from the cache */
    if (!t->hops || !resp || resp->hops) return;
    resp->hops = t->hops;
    t->hops = NULL;
    resp->metrics.redirects = (int)resp->hops->count;
}

static bool is_redirect_status(int s) { return s == 301 || s == 302 || s == 303 || s == 307 || s == 308; }

bool cr_redirect_wanted(const cr_transfer *t, const courier_response *resp) {
    return t->http.follow && !t->mock && !t->custom && is_redirect_status(resp->status) &&
           cr_kvlist_get(&resp->headers, "Location") != NULL;
}

/* "scheme://host:port" of a parsed URL, lowercase, the scheme's default port filled in. */
static char *origin_of(CURLU *u) {
    char *scheme = NULL, *host = NULL, *port = NULL, *out = NULL;
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        cr_buf b = {0};
        if (!cr_buf_append_str(&b, scheme) && !cr_buf_append_str(&b, "://") && !cr_buf_append_str(&b, host) &&
            !cr_buf_append_char(&b, ':') && !cr_buf_append_str(&b, port)) {
            for (size_t i = 0; i < b.len; i++) b.data[i] = (char)tolower((unsigned char)b.data[i]);
            out = cr_buf_take(&b, NULL);
        }
        cr_buf_free(&b);
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    return out;
}

char *cr_url_origin(const char *url) {
    CURLU *u = curl_url();
    char *o = u && curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK ? origin_of(u) : NULL;
    curl_url_cleanup(u);
    return o;
}

static bool is_https(const char *origin) { return strncmp(origin, "https://", 8) == 0; }
static bool is_http_scheme(const char *origin) {
    return strncmp(origin, "http://", 7) == 0 || strncmp(origin, "https://", 8) == 0;
}

/* The fields a request's credentials travel in: dropped once the chain leaves the first origin. */
static const char *const credential_fields[] = {"Authorization", "Cookie", "Proxy-Authorization"};

/* Removes the credential fields; with `unless_changed`, only those still as they were there. */
static void drop_credentials(cr_kvlist *h, const cr_kvlist *unless_changed) {
    for (size_t i = 0; i < sizeof credential_fields / sizeof *credential_fields; i++) {
        const char *v = cr_kvlist_get(h, credential_fields[i]);
        const char *was = unless_changed ? cr_kvlist_get(unless_changed, credential_fields[i]) : v;
        if (v && was && strcmp(v, was) == 0) cr_kvlist_remove(h, credential_fields[i]);
    }
}

static int remove_content_fields(cr_kvlist *h) {
    for (size_t i = 0; i < h->count;) {
        if (strncasecmp(h->items[i].name, "Content-", 8) != 0) {
            i++;
            continue;
        }
        char *name = cr_strdup(h->items[i].name); /* the item's own copy goes with it */
        if (!name) return COURIER_E_NO_MEMORY;
        cr_kvlist_remove(h, name);
        free(name);
    }
    return COURIER_OK;
}

static bool has_file_body(const cr_transfer *t) {
    if (t->body_file) return true;
    for (size_t i = 0; t->parts && i < t->parts->count; i++)
        if (t->parts->items[i].path) return true;
    return false;
}

/* Adds a redirect to the chain, made on the first one (taking *first_origin, the first request's
 * origin). */
static int hops_add(cr_hops **hp, char **first_origin, const char *url, int status) {
    cr_hops *h = *hp;
    if (!h) {
        if (!(h = calloc(1, sizeof *h))) return COURIER_E_NO_MEMORY;
        h->origin = *first_origin;
        *first_origin = NULL;
        *hp = h;
    }
    if (h->count == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 4;
        struct cr_hop *p = realloc(h->items, cap * sizeof *p);
        if (!p) return COURIER_E_NO_MEMORY;
        h->items = p;
        h->cap = cap;
    }
    if (!(h->items[h->count].url = cr_strdup(url))) return COURIER_E_NO_MEMORY;
    h->items[h->count++].status = status;
    return COURIER_OK;
}

int cr_redirect_next(courier_engine *e, cr_transfer *t, const courier_response *resp, cr_transfer **next,
                     courier_error *err) {
    *next = NULL;
    int status = resp->status;
    size_t done = t->hops ? t->hops->count : 0;
    if (done >= (size_t)t->http.max_redirects) {
        cr_fail(err, COURIER_E_TOO_MANY_REDIRECTS, "more than %d redirects", t->http.max_redirects);
        err->http_status = status;
        return COURIER_E_TOO_MANY_REDIRECTS;
    }

    /* The target: Location resolved against the URL that answered (RFC 9110 10.2.2). */
    const char *location = cr_kvlist_get(&resp->headers, "Location");
    courier_outgoing o = {0};
    char *origin = NULL, *first = NULL; /* the first request's origin, before the chain records it */
    int rc = COURIER_E_NO_MEMORY;
    CURLU *u = curl_url();
    if (!u) goto fail;
    if (curl_url_set(u, CURLUPART_URL, t->url, 0) != CURLUE_OK ||
        curl_url_set(u, CURLUPART_URL, location, CURLU_NON_SUPPORT_SCHEME | CURLU_URLENCODE) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_URL, &o.url, 0) != CURLUE_OK || !(origin = origin_of(u))) {
        rc = cr_fail(err, COURIER_E_PROTOCOL, "unusable Location '%.200s' in a %d", location, status);
        goto fail_reported;
    }
    { /* curl's string goes back with curl_free: keep a copy of our own */
        char *own = cr_strdup(o.url);
        curl_free(o.url);
        o.url = own;
        if (!o.url) goto fail;
    }

    /* Method and body (RFC 9110 15.4.2-15.4.9; 301/302 turn POST into GET as every peer does). */
    bool to_get = (status == 303 && strcmp(t->method, "HEAD") != 0) ||
                  ((status == 301 || status == 302) && strcmp(t->method, "POST") == 0);
    bool keeps_body = !to_get && (t->has_body || t->parts || t->body_file);
    if (keeps_body && has_file_body(t)) {
        rc = cr_fail(err, COURIER_E_BODY_NOT_REPLAYABLE, "a %d must send the body again; it was streamed from a file",
                     status);
        goto fail_reported;
    }
    if (!(o.method = cr_strdup(to_get ? "GET" : t->method)) || cr_kvlist_copy(&o.headers, &t->headers)) goto fail;
    if (to_get && remove_content_fields(&o.headers)) goto fail;
    /* Conditional fields the cache added for the previous URL are not the next one's. */
    cr_kvlist_remove(&o.headers, "If-None-Match");
    cr_kvlist_remove(&o.headers, "If-Modified-Since");
    if (!t->hops && !(first = cr_url_origin(t->url))) goto fail;
    const char *first_origin = t->hops ? t->hops->origin : first;
    bool left = (t->hops && t->hops->left_origin) || strcmp(first_origin, origin) != 0;
    if (left) drop_credentials(&o.headers, NULL);

    /* The caller's hook may follow, stop, refuse or change the hop. */
    if (t->http.hook) {
        o.id = t->id;
        int verdict = ((courier_redirect_fn)t->http.hook->fn)(resp, &o, t->http.hook->user);
        if (verdict == COURIER_REDIRECT_STOP) {
            rc = COURIER_REDIRECT_STOP;
            goto fail_reported;
        }
        if (verdict != COURIER_REDIRECT_FOLLOW) {
            rc = cr_fail(err, COURIER_E_REDIRECT_REFUSED, "the redirect hook refused the redirect to '%.180s'", o.url);
            goto fail_reported;
        }
        char *now = cr_url_origin(o.url);
        if (!now) goto fail;
        free(origin);
        origin = now;
        /* The hook moved the hop off the first origin: the caller's credentials stay behind (a
         * value the hook set itself goes). */
        if (!left && strcmp(first_origin, origin) != 0) {
            left = true;
            drop_credentials(&o.headers, &t->headers);
        }
    }
    /* HSTS (hsts.c): a hop to http:// on a known HSTS host goes out as https://. */
    int upgraded = 0;
    if (cr_hsts_upgrade(e, &o.url, &upgraded) != COURIER_OK) goto fail;
    if (upgraded) {
        char *now = cr_url_origin(o.url);
        if (!now) goto fail;
        free(origin);
        origin = now;
    }
    if (!is_http_scheme(origin)) {
        rc = cr_fail(err, COURIER_E_REDIRECT_REFUSED, "redirect to a scheme other than http(s): '%.180s'", o.url);
        goto fail_reported;
    }
    if (is_https(t->host) && !is_https(origin) && !t->http.allow_downgrade) {
        rc = cr_fail(err, COURIER_E_REDIRECT_REFUSED, "redirect from HTTPS to HTTP refused: '%.180s'", o.url);
        goto fail_reported;
    }

    /* The total timeout bounds the whole chain: the hop gets what is left of it. */
    int64_t now = cr_mono_ms(), deadline = 0;
    if (t->timeout_ms > 0) {
        deadline = t->hops && t->hops->deadline_ms ? t->hops->deadline_ms
                                                   : now + t->timeout_ms - (int64_t)(resp->metrics.total_s * 1000.0);
        if (deadline - now <= 0) {
            rc = cr_fail(err, COURIER_E_TIMEOUT, "the redirects took longer than %ld ms", t->timeout_ms);
            err->reserved[0] = COURIER_TIMEOUT_TOTAL;
            goto fail_reported;
        }
    }

    /* The hop: t's caller, id and settings, the chain with this redirect added. */
    cr_transfer *n = cr_zalloc(sizeof *n);
    if (!n || hops_add(&t->hops, &first, t->url, status)) {
        free(n);
        goto fail;
    }
    if (left) t->hops->left_origin = 1;
    t->hops->deadline_ms = deadline;
    n->id = t->id;
    n->engine = e;
    n->method = o.method;
    n->url = o.url;
    n->headers = o.headers;
    n->host = origin;
    if (keeps_body) {
        n->body = t->body;
        n->body_len = t->body_len;
        n->has_body = t->has_body;
        n->parts = t->parts;
        t->body = NULL;
        t->parts = NULL;
    }
    n->timeout_ms = deadline ? (long)(deadline - now) : 0;
    n->max_bytes = t->max_bytes;
    n->validator = t->validator;
    n->done = t->done;
    n->user = t->user;
    n->jspec = t->jspec;
    n->priority = t->priority;
    n->retry = t->retry;
    n->waited_s = t->waited_s;
    n->unguarded = t->unguarded;
    n->obs_t0_ns = t->obs_t0_ns;
    n->download_path = t->download_path;
    n->download_flags = t->download_flags;
    n->progress = t->progress;
    n->stream = t->stream; /* stream.c: the last hop streams */
    t->stream = NULL;
    n->freeze = t->freeze; /* its names move to the next hop */
    t->freeze.id = t->freeze.resend_policy = NULL;
    n->http = t->http;
    n->hops = t->hops;
    n->auth = t->auth; /* auth.c: credentials (kept to the first origin), proxy and handler travel on */
    t->auth = NULL;
    n->security = t->security; /* security.c: the request's own TLS policy holds for every hop */
    t->security = NULL;
    n->net = t->net; /* netopts.c: the request's DNS overrides and socket, likewise */
    n->http2_only = t->http2_only;
    n->hsts_upgraded = t->hsts_upgraded || upgraded;
    n->ce_raw = n->ce_raw_asked = t->ce_raw_asked; /* coded bodies asked for (netopts.c) */
    t->net = NULL;
    n->sess = t->sess; /* engine/session.c: adapters, retriers and the loop guard travel on */
    t->sess = NULL;
    t->validator = NULL;
    t->jspec = NULL;
    t->download_path = NULL;
    t->progress = NULL;
    t->http.hook = NULL;
    t->hops = NULL;
    t->caller_gone = 1; /* the hop answers the caller now */
    free(first);
    curl_url_cleanup(u);
    *next = n;
    return COURIER_OK;

fail:
    rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
fail_reported:
    free(first);
    if (rc < 0) err->http_status = status;
    curl_url_cleanup(u);
    free(o.method);
    free(o.url);
    cr_kvlist_clear(&o.headers);
    free(origin);
    return rc;
}
