/*
 * schedule.c — what decides when and how often a request goes out: priorities, the retry rule
 * (which failures, how long to wait, Retry-After), coalescing keys, the frequent-request guard,
 * interceptors and custom-transport registrations. The worker's queues that apply these live in
 * engine.c; this file holds the rules, so they exist once.
 */
#include "engine/engine.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- configuration --------------------------------------------------------------------------- */

static void sched_conf_clear(cr_sched_conf *c) {
    for (size_t i = 0; i < c->ninterceptors; i++) cr_callback_release(c->interceptors[i].owner);
    free(c->interceptors);
    for (size_t i = 0; i < c->ntransports; i++) {
        free(c->transports[i].name);
        cr_callback_release(c->transports[i].owner);
    }
    free(c->transports);
    cr_stubs_conf_clear(c); /* stubs.c */
    cr_ext_free(c->session); /* session.c */
    memset(c, 0, sizeof *c);
}

static void *sched_conf_copy(const void *state);
static void sched_conf_free(void *state);
static const cr_ext_ops sched_conf_ops = {sched_conf_copy, sched_conf_free};

static void sched_conf_free(void *state) {
    cr_sched_conf *c = state;
    sched_conf_clear(c);
    free(c);
}

static void *sched_conf_copy(const void *state) {
    const cr_sched_conf *src = state;
    cr_sched_conf *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->ext.ops = &sched_conf_ops;
    c->has_retry = src->has_retry;
    c->retry = src->retry;
    c->guard_ms = src->guard_ms;
    c->mock_enabled = src->mock_enabled;
    if (cr_stubs_conf_copy(c, src)) goto fail; /* stubs.c */
    if (src->session && !(c->session = cr_ext_copy(src->session))) goto fail; /* session.c */
    if (src->ninterceptors) {
        c->interceptors = calloc(src->ninterceptors, sizeof *c->interceptors);
        if (!c->interceptors) goto fail;
        for (size_t i = 0; i < src->ninterceptors; i++) {
            c->interceptors[i] = src->interceptors[i];
            cr_callback_retain(c->interceptors[i].owner);
            c->ninterceptors++;
        }
    }
    if (src->ntransports) {
        c->transports = calloc(src->ntransports, sizeof *c->transports);
        if (!c->transports) goto fail;
        for (size_t i = 0; i < src->ntransports; i++) {
            c->transports[i] = src->transports[i];
            c->transports[i].name = cr_strdup(src->transports[i].name);
            cr_callback_retain(c->transports[i].owner);
            c->ntransports++;
            if (!c->transports[i].name) goto fail;
        }
    }
    return c;
fail:
    sched_conf_free(c);
    return NULL;
}

cr_sched_conf *cr_sched_conf_of(courier_config *c) {
    if (!c->sched && (c->sched = calloc(1, sizeof *c->sched))) c->sched->ext.ops = &sched_conf_ops;
    return c->sched;
}

int courier_config_set_retry(courier_config *c, int max_retries, int64_t base_ms, int64_t max_ms, unsigned flags) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    int rc = cr_retry_check(max_retries, base_ms, max_ms);
    if (rc) return rc;
    cr_sched_conf *s = cr_sched_conf_of(c);
    if (!s) return COURIER_E_NO_MEMORY;
    s->has_retry = 1;
    s->retry = (struct cr_retry_rule){max_retries, base_ms, max_ms, flags};
    return COURIER_OK;
}

int courier_config_set_frequent_guard_ms(courier_config *c, int64_t window_ms) {
    if (!c || window_ms < 0) return COURIER_E_INVALID_ARGUMENT;
    cr_sched_conf *s = cr_sched_conf_of(c);
    if (!s) return COURIER_E_NO_MEMORY;
    s->guard_ms = window_ms;
    return COURIER_OK;
}

int courier_config_set_mock_enabled(courier_config *c, int enabled) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    cr_sched_conf *s = cr_sched_conf_of(c);
    if (!s) return COURIER_E_NO_MEMORY;
    s->mock_enabled = enabled ? 1 : 0;
    return COURIER_OK;
}

/* The configuration's stubs (stubs.c keeps them and the engine's). */
int courier_config_add_stub(courier_config *c, const courier_stub *stub) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    cr_sched_conf *sc = cr_sched_conf_of(c);
    if (!sc) return COURIER_E_NO_MEMORY;
    courier_stub **p = realloc(sc->stubs, (sc->nstubs + 1) * sizeof *p);
    if (!p) return COURIER_E_NO_MEMORY;
    sc->stubs = p;
    courier_stub *copy = NULL;
    int rc = cr_stub_copy(&copy, stub);
    if (rc) return rc;
    sc->stubs[sc->nstubs++] = copy;
    return COURIER_OK;
}

int courier_config_set_stub_mode(courier_config *c, courier_stub_mode mode) {
    if (!c || (int)mode < COURIER_STUBS_OFF || mode > COURIER_STUBS_PASS_THROUGH) return COURIER_E_INVALID_ARGUMENT;
    cr_sched_conf *sc = cr_sched_conf_of(c);
    if (!sc) return COURIER_E_NO_MEMORY;
    sc->stub_mode = (int)mode;
    return COURIER_OK;
}

static void no_op(void) {}

int courier_config_add_interceptor(courier_config *c, courier_before_send_fn before, courier_after_receive_fn after,
                                   void *user, courier_user_free_fn user_free) {
    if (!c || (!before && !after)) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    cr_sched_conf *s = cr_sched_conf_of(c);
    cr_interceptor *p = s ? realloc(s->interceptors, (s->ninterceptors + 1) * sizeof *p) : NULL;
    if (!p) {
        if (user_free) user_free(user);
        return COURIER_E_NO_MEMORY;
    }
    s->interceptors = p;
    int rc;
    cr_callback *owner = cr_callback_new(no_op, user, user_free, &rc);
    if (!owner) return rc;
    p[s->ninterceptors++] = (cr_interceptor){before, after, owner};
    return COURIER_OK;
}

int courier_config_register_transport(courier_config *c, const char *name, const courier_transport *transport,
                                      void *user, courier_user_free_fn user_free) {
    int rc = COURIER_E_INVALID_ARGUMENT;
    cr_sched_conf *s = c ? cr_sched_conf_of(c) : NULL;
    if (c && !s) rc = COURIER_E_NO_MEMORY;
    if (!s || !name || !*name || strcmp(name, "http") == 0 || !CR_SIZED_OK(transport, courier_transport) ||
        !transport->start)
        goto fail;
    for (size_t i = 0; i < s->ntransports; i++)
        if (strcmp(s->transports[i].name, name) == 0) goto fail;
    rc = COURIER_E_NO_MEMORY;
    cr_transport_reg *p = realloc(s->transports, (s->ntransports + 1) * sizeof *p);
    if (!p) goto fail;
    s->transports = p;
    cr_transport_reg reg = {0};
    CR_SIZED_IN(reg.vt, transport);
    if (!(reg.name = cr_strdup(name))) goto fail;
    reg.owner = cr_callback_new(no_op, user, user_free, &rc);
    if (!reg.owner) {
        free(reg.name);
        return rc;
    }
    p[s->ntransports++] = reg;
    return COURIER_OK;
fail:
    if (user_free) user_free(user);
    return rc;
}

/* ---- request settings ------------------------------------------------------------------------ */

int courier_request_set_coalesce(courier_request *r, int coalesce) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    r->no_coalesce = coalesce ? 0 : 1;
    return COURIER_OK;
}

int courier_request_set_frequent_guard(courier_request *r, int guarded) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    r->unguarded = guarded ? 0 : 1;
    return COURIER_OK;
}

int courier_request_set_transport(courier_request *r, const char *name) {
    if (!r || (name && !*name)) return COURIER_E_INVALID_ARGUMENT;
    if (name && strcmp(name, "http") == 0) name = NULL;
    return cr_set_string(&r->transport_name, name);
}

/* ---- prepare time ---------------------------------------------------------------------------- */

static bool is_idempotent(const char *m) {
    return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "PUT") == 0 || strcmp(m, "DELETE") == 0 ||
           strcmp(m, "OPTIONS") == 0 || strcmp(m, "TRACE") == 0;
}

/* "scheme://host:port" of an absolute URL that cr_url_valid accepted (so: http or https, with a
 * host). Read by hand: a second full parse per request would cost more than the rest of this. */
char *cr_sched_host_key(const char *url) {
    size_t scheme_len = cr_url_scheme_len(url);
    if (!scheme_len) return NULL;
    const char *auth = url + scheme_len;
    scheme_len -= 3; /* "://" */
    size_t auth_len = strcspn(auth, "/?#");
    const char *at = memchr(auth, '@', auth_len); /* drop userinfo */
    if (at) {
        auth_len -= (size_t)(at + 1 - auth);
        auth = at + 1;
    }
    const char *close = auth_len && auth[0] == '[' ? memchr(auth, ']', auth_len) : NULL;
    const char *colon = memchr(close ? close : auth, ':', auth_len - (size_t)((close ? close : auth) - auth));
    size_t host_len = colon ? (size_t)(colon - auth) : auth_len;
    const char *port = colon ? colon + 1 : (scheme_len == 5 ? "443" : "80");
    size_t port_len = colon ? auth_len - host_len - 1 : strlen(port);
    if (colon && port_len == 0) {
        port = scheme_len == 5 ? "443" : "80";
        port_len = strlen(port);
    }
    cr_buf b = {0};
    if (cr_buf_reserve(&b, scheme_len + 3 + host_len + 1 + port_len)) return NULL;
    for (size_t i = 0; i < scheme_len; i++) b.data[b.len++] = (char)tolower((unsigned char)url[i]);
    cr_buf_append_str(&b, "://");
    for (size_t i = 0; i < host_len; i++) b.data[b.len++] = (char)tolower((unsigned char)auth[i]);
    cr_buf_append_char(&b, ':');
    cr_buf_append(&b, port, port_len);
    return cr_buf_take(&b, NULL);
}

/* Method, URL and header lines, one per line: what makes two requests "the same". */
static char *identity(const cr_transfer *t, bool with_body, size_t *len) {
    cr_buf b = {0};
    int rc = cr_buf_append_str(&b, t->method) || cr_buf_append_char(&b, '\n') || cr_buf_append_str(&b, t->url);
    for (size_t i = 0; i < t->headers.count && !rc; i++)
        rc = cr_buf_append_char(&b, '\n') || cr_buf_append_str(&b, t->headers.items[i].name) ||
             cr_buf_append_char(&b, ':') || cr_buf_append_str(&b, t->headers.items[i].value);
    if (with_body && t->has_body && !rc) rc = cr_buf_append_str(&b, "\n\n") || cr_buf_append(&b, t->body, t->body_len);
    if (rc) {
        cr_buf_free(&b);
        return NULL;
    }
    return cr_buf_take(&b, len);
}

int cr_sched_prepare(courier_engine *e, const courier_request *r, cr_transfer *t, courier_outgoing *o,
                     courier_error *err) {
    const cr_sched_conf *sc = e->core.config->sched;
    /* Interceptors' before-send, in order, after the request's own customize. From here on a
     * refusal has a FINISHED (request.c's cr_transfer_refuse): a span an interceptor starts ends. */
    t->intercepted = 1;
    for (size_t i = 0; sc && i < sc->ninterceptors; i++) {
        if (!sc->interceptors[i].before) continue;
        int rc = sc->interceptors[i].before(o, sc->interceptors[i].owner->user);
        if (rc != COURIER_OK)
            return cr_fail(err, rc < 0 ? rc : COURIER_E_INVALID_ARGUMENT, "an interceptor refused the request");
    }
    t->priority = r->priority;
    t->unguarded = r->unguarded;
    if (r->has_retry) t->retry = r->retry;
    else if (sc && sc->has_retry) t->retry = sc->retry;
    if (r->transport_name) {
        for (size_t i = 0; sc && i < sc->ntransports; i++)
            if (strcmp(sc->transports[i].name, r->transport_name) == 0) t->custom = &sc->transports[i];
        if (!t->custom)
            return cr_fail(err, COURIER_E_NOT_FOUND, "no transport named '%.100s' is registered", r->transport_name);
    }
    if (r->mock && atomic_load(&e->mock_enabled)) {
        if (!(t->mock = cr_mock_copy(r->mock))) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    return COURIER_OK;
}

/* Called after the outgoing view became the transfer: host key and coalescing key. */
int cr_sched_finish_prepare(const courier_request *r, cr_transfer *t, courier_error *err) {
    if (!(t->host = cr_sched_host_key(t->url))) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    if (!t->mock && !t->custom) { /* stubs.c: the engine's stubs may answer it (sets t->mock) */
        int rc = cr_stubs_offer(t->engine, t, err);
        if (rc) return rc;
    }
    if (!r->no_coalesce && !r->security && !r->net && !t->mock && !t->custom && !t->has_body &&
        (strcmp(t->method, "GET") == 0 || strcmp(t->method, "HEAD") == 0)) {
        if (!(t->coalesce_key = identity(t, false, NULL))) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    return COURIER_OK;
}

/* ---- the frequent-request guard ---------------------------------------------------------------- */

/* Guard entries live in the engine's scheduler state, under the engine's lock. */
typedef struct cr_guard_entry {
    uint64_t hash;
    int64_t at_ms;
} cr_guard_entry;

struct cr_guard {
    cr_guard_entry *items;
    size_t count;
    size_t cap;
};

/* Returns COURIER_OK and records the request, or COURIER_E_TOO_FREQUENT. Caller holds e->core.lock. */
int cr_guard_check(struct cr_guard **gp, long window_ms, const cr_transfer *t, courier_error *err) {
    if (!*gp && !(*gp = calloc(1, sizeof **gp))) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    struct cr_guard *g = *gp;
    size_t idlen = 0;
    char *id = identity(t, true, &idlen);
    if (!id) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    uint64_t h = cr_fnv1a64(id, idlen);
    free(id);
    int64_t now = cr_mono_ms();
    size_t w = 0;
    bool seen = false;
    for (size_t i = 0; i < g->count; i++) { /* drop what left the window; find this one */
        if (now - g->items[i].at_ms >= window_ms) continue;
        if (g->items[i].hash == h) seen = true;
        g->items[w++] = g->items[i];
    }
    g->count = w;
    if (seen) return cr_fail(err, COURIER_E_TOO_FREQUENT, "an identical request was sent less than %ld ms ago", window_ms);
    if (g->count == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        cr_guard_entry *p = realloc(g->items, cap * sizeof *p);
        if (!p) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        g->items = p;
        g->cap = cap;
    }
    g->items[g->count++] = (cr_guard_entry){h, now};
    return COURIER_OK;
}

void cr_guard_free(struct cr_guard *g) {
    if (!g) return;
    free(g->items);
    free(g);
}

/* ---- retry ------------------------------------------------------------------------------------- */

/* Seconds from a Retry-After value (delta-seconds or an HTTP date), or -1. */
static double retry_after_s(const char *v) {
    if (!v || !*v) return -1;
    char *end = NULL;
    long secs = strtol(v, &end, 10);
    if (end != v && *end == '\0') return secs >= 0 ? (double)secs : -1;
    time_t at = curl_getdate(v, NULL);
    if (at == (time_t)-1) return -1;
    double d = difftime(at, time(NULL));
    return d > 0 ? d : 0;
}

static bool retryable_code(int code) {
    return code == COURIER_E_CANNOT_RESOLVE || code == COURIER_E_CANNOT_CONNECT || code == COURIER_E_TIMEOUT ||
           code == COURIER_E_PARTIAL_RESPONSE || code == COURIER_E_NETWORK;
}

/* Decides whether a transfer that ended with (code, resp) is tried again, and after how many ms.
 * Returns -1 for no. `rng` is the worker's random state. */
long cr_retry_delay(const cr_transfer *t, int code, const courier_response *resp, uint64_t *rng) {
    const struct cr_retry_rule *rule = &t->retry;
    if (rule->max <= 0 || t->attempts > rule->max || t->cancel_requested) return -1;
    if (!is_idempotent(t->method) && !(rule->flags & COURIER_RETRY_NON_IDEMPOTENT)) return -1;
    int status = resp ? resp->status : 0;
    bool by_status = code == COURIER_OK && (status == 408 || status == 429 || status >= 500);
    if (!by_status && !(code != COURIER_OK && retryable_code(code))) return -1;
    /* Exponential backoff with jitter: a random wait between half and all of base * 2^(n-1). */
    long delay = rule->base_ms;
    for (int i = 1; i < t->attempts && delay < rule->max_ms; i++) delay *= 2;
    if (delay > rule->max_ms) delay = rule->max_ms;
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    if (delay > 1) delay = delay / 2 + (long)(*rng % (uint64_t)(delay - delay / 2 + 1));
    if (by_status && (status == 429 || status == 503) && !(rule->flags & COURIER_RETRY_IGNORE_RETRY_AFTER)) {
        double ra = retry_after_s(cr_kvlist_get(&resp->headers, "Retry-After"));
        if (ra >= 0) {
            if (ra * 1000.0 > (double)rule->max_ms) return -1; /* longer than the rule allows */
            long ra_ms = (long)(ra * 1000.0);
            if (ra_ms > delay) delay = ra_ms;
        }
    }
    return delay;
}
