/*
 * session.c — the session around a send (issue 30): adapters that see and change each attempt's
 * request (its body too), retriers asked after a failure, and an authenticator that keeps the
 * engine's credential, applies it, and refreshes it once however many requests wait for it.
 *
 * Everything here runs on the worker thread except the answers (courier_adaptation_complete,
 * courier_retry_question_answer, courier_refresh_complete / _fail, courier_engine_set_credential),
 * which come from any thread: they are queued on the engine's hub under its lock and the worker
 * takes them at the start of its next turn (cr_session_turn), so a user callback never runs under
 * an engine lock and an answer given inside its callback does not re-enter the worker (Alamofire
 * #3294). A send waiting for an answer is parked on the timer list, due never (engine.c), where a
 * cancel or the close finds it; an answer whose send is gone is dropped. docs/design/session.md.
 */
#include "engine/engine.h"

#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* ---- lists of callbacks ----------------------------------------------------------------------- */

typedef struct cr_cblist {
    cr_callback **items;
    size_t n;
} cr_cblist;

static void cblist_clear(cr_cblist *l) {
    for (size_t i = 0; i < l->n; i++) cr_callback_release(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

/* Appends src's registrations (retained) to dst. COURIER_OK or COURIER_E_NO_MEMORY. */
static int cblist_append(cr_cblist *dst, const cr_cblist *src) {
    if (!src->n) return COURIER_OK;
    cr_callback **p = realloc(dst->items, (dst->n + src->n) * sizeof *p);
    if (!p) return COURIER_E_NO_MEMORY;
    dst->items = p;
    for (size_t i = 0; i < src->n; i++) p[dst->n++] = cr_callback_retain(src->items[i]);
    return COURIER_OK;
}

/* Adds a new registration of fn; user released on failure. */
static int cblist_add(cr_cblist *l, void (*fn)(void), void *user, courier_user_free_fn user_free) {
    cr_callback **p = realloc(l->items, (l->n + 1) * sizeof *p);
    if (!p) {
        if (user_free) user_free(user);
        return COURIER_E_NO_MEMORY;
    }
    l->items = p;
    int rc;
    cr_callback *cb = cr_callback_new(fn, user, user_free, &rc);
    if (!cb) return rc;
    p[l->n++] = cb;
    return COURIER_OK;
}

/* ---- what a configuration and a request say --------------------------------------------------- */

typedef struct cr_sess_conf {
    cr_ext ext;
    cr_cblist adapters, retriers;
    int has_auth;
    courier_authenticator vt;
    char *origin;       /* scheme://host:port */
    cr_callback *owner; /* the authenticator's user and user_free */
    char *credential;   /* the one the engine starts with, or NULL */
    int64_t expires_ms;
} cr_sess_conf;

typedef struct cr_sess_req {
    cr_ext ext;
    cr_cblist adapters, retriers;
    int no_auth;
} cr_sess_req;

static void sess_conf_free(void *state) {
    cr_sess_conf *c = state;
    cblist_clear(&c->adapters);
    cblist_clear(&c->retriers);
    free(c->origin);
    free(c->credential);
    cr_callback_release(c->owner);
    free(c);
}

static void *sess_conf_copy(const void *state);
static const cr_ext_ops sess_conf_ops = {sess_conf_copy, sess_conf_free};

static void *sess_conf_copy(const void *state) {
    const cr_sess_conf *src = state;
    cr_sess_conf *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->ext.ops = &sess_conf_ops;
    c->has_auth = src->has_auth;
    c->vt = src->vt;
    c->expires_ms = src->expires_ms;
    c->owner = cr_callback_retain(src->owner);
    if (cblist_append(&c->adapters, &src->adapters) || cblist_append(&c->retriers, &src->retriers) ||
        cr_set_string(&c->origin, src->origin) || cr_set_string(&c->credential, src->credential)) {
        sess_conf_free(c);
        return NULL;
    }
    return c;
}

static void sess_req_free(void *state) {
    cr_sess_req *q = state;
    cblist_clear(&q->adapters);
    cblist_clear(&q->retriers);
    free(q);
}

static void *sess_req_copy(const void *state);
static const cr_ext_ops sess_req_ops = {sess_req_copy, sess_req_free};

static void *sess_req_copy(const void *state) {
    const cr_sess_req *src = state;
    cr_sess_req *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->ext.ops = &sess_req_ops;
    q->no_auth = src->no_auth;
    if (cblist_append(&q->adapters, &src->adapters) || cblist_append(&q->retriers, &src->retriers)) {
        sess_req_free(q);
        return NULL;
    }
    return q;
}

static cr_sess_conf *conf_of(courier_config *config) {
    cr_sched_conf *s = cr_sched_conf_of(config);
    if (!s) return NULL;
    if (!s->session) {
        cr_sess_conf *c = calloc(1, sizeof *c);
        if (!c) return NULL;
        c->ext.ops = &sess_conf_ops;
        s->session = c;
    }
    return s->session;
}

static cr_sess_req *req_of(courier_request *r) {
    if (!r->session) {
        cr_sess_req *q = calloc(1, sizeof *q);
        if (!q) return NULL;
        q->ext.ops = &sess_req_ops;
        r->session = q;
    }
    return r->session;
}

static int add_to(cr_cblist *l, bool ok, void (*fn)(void), void *user, courier_user_free_fn user_free, int bad) {
    if (!ok) {
        if (user_free) user_free(user);
        return bad;
    }
    return cblist_add(l, fn, user, user_free);
}

int courier_config_add_adapter(courier_config *c, courier_adapter_fn fn, void *user, courier_user_free_fn user_free) {
    cr_sess_conf *s = c && fn ? conf_of(c) : NULL;
    return add_to(s ? &s->adapters : NULL, s != NULL, (void (*)(void))fn, user, user_free,
                  c && fn ? COURIER_E_NO_MEMORY : COURIER_E_INVALID_ARGUMENT);
}

int courier_config_add_retrier(courier_config *c, courier_retrier_fn fn, void *user, courier_user_free_fn user_free) {
    cr_sess_conf *s = c && fn ? conf_of(c) : NULL;
    return add_to(s ? &s->retriers : NULL, s != NULL, (void (*)(void))fn, user, user_free,
                  c && fn ? COURIER_E_NO_MEMORY : COURIER_E_INVALID_ARGUMENT);
}

int courier_request_add_adapter(courier_request *r, courier_adapter_fn fn, void *user, courier_user_free_fn user_free) {
    cr_sess_req *q = r && fn ? req_of(r) : NULL;
    return add_to(q ? &q->adapters : NULL, q != NULL, (void (*)(void))fn, user, user_free,
                  r && fn ? COURIER_E_NO_MEMORY : COURIER_E_INVALID_ARGUMENT);
}

int courier_request_add_retrier(courier_request *r, courier_retrier_fn fn, void *user, courier_user_free_fn user_free) {
    cr_sess_req *q = r && fn ? req_of(r) : NULL;
    return add_to(q ? &q->retriers : NULL, q != NULL, (void (*)(void))fn, user, user_free,
                  r && fn ? COURIER_E_NO_MEMORY : COURIER_E_INVALID_ARGUMENT);
}

int courier_request_set_authenticated(courier_request *r, int authenticated) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    if (authenticated && !r->session) return COURIER_OK;
    cr_sess_req *q = req_of(r);
    if (!q) return COURIER_E_NO_MEMORY;
    q->no_auth = authenticated ? 0 : 1;
    return COURIER_OK;
}

static void no_op(void) {}

int courier_config_set_authenticator(courier_config *c, const char *origin, const courier_authenticator *a, void *user,
                                     courier_user_free_fn user_free) {
    int rc = COURIER_E_INVALID_ARGUMENT;
    char *o = NULL;
    if (!c || !origin || !CR_SIZED_OK(a, courier_authenticator) || !a->refresh) goto fail;
    rc = COURIER_E_INVALID_URL;
    if (!cr_url_valid(origin) || !(o = cr_url_origin(origin))) goto fail;
    rc = COURIER_E_NO_MEMORY;
    cr_sess_conf *s = conf_of(c);
    if (!s) goto fail;
    cr_callback *owner = cr_callback_new(no_op, user, user_free, &rc);
    if (!owner) {
        free(o);
        return rc;
    }
    cr_callback_release(s->owner);
    s->owner = owner;
    free(s->origin);
    s->origin = o;
    memset(&s->vt, 0, sizeof s->vt);
    CR_SIZED_IN(s->vt, a);
    s->has_auth = 1;
    return COURIER_OK;
fail:
    free(o);
    if (user_free) user_free(user);
    return rc;
}

int courier_config_set_credential(courier_config *c, const char *credential, int64_t expires_at_ms) {
    if (!c || expires_at_ms < 0) return COURIER_E_INVALID_ARGUMENT;
    cr_sess_conf *s = conf_of(c);
    if (!s) return COURIER_E_NO_MEMORY;
    int rc = cr_set_string(&s->credential, credential);
    if (rc) return rc;
    s->expires_ms = credential ? expires_at_ms : 0;
    return COURIER_OK;
}

/* ---- the engine's hub ------------------------------------------------------------------------- */

enum { PARK_NONE = 0, PARK_ADAPT, PARK_AUTH, PARK_RETRY };

struct courier_adaptation {
    struct cr_hub *hub;
    struct courier_adaptation *next;
    uint64_t id;
    int attempt;
    size_t index; /* which adapter of the send */
    courier_outgoing o;
    atomic_int answered;
    int code;
    char message[200];
    cr_raised raised;
};

struct courier_retry_question {
    struct cr_hub *hub;
    struct courier_retry_question *next;
    uint64_t id;
    int attempt;
    size_t index; /* which retrier of the send */
    int code;
    courier_response *resp; /* a reference of its own, or NULL */
    char *method, *url;
    atomic_int answered;
    int64_t delay_ms;
};

struct courier_refresh {
    struct cr_hub *hub;
    char *credential; /* the one being replaced */
    atomic_int answered;
};

typedef struct cr_hub {
    pthread_mutex_t mu;
    courier_engine *e; /* NULL once the engine closed */
    int refs;          /* the engine's, and one per question not answered yet */
    const cr_session_ops *ops;
    const cr_sess_conf *conf; /* the engine's configuration (read-only), or NULL */
    /* Answers for the worker (guarded by mu). */
    struct courier_adaptation *adapted, *adapted_tail;
    struct courier_retry_question *decided, *decided_tail;
    /* The credential (guarded by mu). */
    char *credential;
    int64_t expires_ms;
    uint64_t version; /* +1 at each change */
    int refreshing;   /* a refresh was started and its result not taken by the worker yet */
    int result_ready;
    int result_code;
    char result_message[200];
    void *result_user;
    courier_user_free_fn result_free;
    courier_user_retain_fn result_retain;
    /* The sends waiting for the refresh (worker only). */
    uint64_t *waiters;
    size_t nwaiters, cap_waiters;
} cr_hub;

static cr_hub *hub_retain(cr_hub *h) {
    pthread_mutex_lock(&h->mu);
    h->refs++;
    pthread_mutex_unlock(&h->mu);
    return h;
}

static void hub_release(cr_hub *h) {
    pthread_mutex_lock(&h->mu);
    int left = --h->refs;
    pthread_mutex_unlock(&h->mu);
    if (left) return;
    free(h->credential);
    free(h->waiters);
    if (h->result_free && h->result_user) h->result_free(h->result_user);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

static void adaptation_free(struct courier_adaptation *a) {
    free(a->o.method);
    free(a->o.url);
    cr_kvlist_clear(&a->o.headers);
    free(a->o.body);
    free(a->o.body_file);
    cr_raise_release(&a->raised);
    hub_release(a->hub);
    free(a);
}

static void question_free(struct courier_retry_question *q) {
    courier_response_free(q->resp);
    free(q->method);
    free(q->url);
    hub_release(q->hub);
    free(q);
}

int cr_session_open(courier_engine *e, const cr_session_ops *ops) {
    cr_hub *h = calloc(1, sizeof *h);
    if (!h) return COURIER_E_NO_MEMORY;
    pthread_mutex_init(&h->mu, NULL);
    h->e = e;
    h->refs = 1;
    h->ops = ops;
    const cr_sched_conf *sc = e->core.config->sched;
    h->conf = sc ? sc->session : NULL;
    if (h->conf && h->conf->credential) {
        if (!(h->credential = cr_strdup(h->conf->credential))) {
            pthread_mutex_destroy(&h->mu);
            free(h);
            return COURIER_E_NO_MEMORY;
        }
        h->expires_ms = h->conf->expires_ms;
    }
    e->hub = h;
    return COURIER_OK;
}

void cr_session_detach(courier_engine *e) {
    cr_hub *h = e->hub;
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->e = NULL;
    struct courier_adaptation *a = h->adapted;
    struct courier_retry_question *q = h->decided;
    h->adapted = h->adapted_tail = NULL;
    h->decided = h->decided_tail = NULL;
    pthread_mutex_unlock(&h->mu);
    while (a) {
        struct courier_adaptation *next = a->next;
        adaptation_free(a);
        a = next;
    }
    while (q) {
        struct courier_retry_question *next = q->next;
        question_free(q);
        q = next;
    }
    e->hub = NULL;
    hub_release(h);
}

/* Wakes the worker (mu held, engine open). */
static void hub_wake(cr_hub *h) { curl_multi_wakeup(cr_core(h->e)->multi); }

/* ---- a transfer's session state --------------------------------------------------------------- */

typedef struct cr_sess_xfer {
    cr_ext ext;
    cr_cblist adapters, retriers;
    int auth; /* the authenticator may apply to this send */
    /* This attempt (reset after it). */
    int ready;    /* its session work is done: route goes on */
    int saved;    /* the request before the adapters and the authenticator is kept below */
    size_t stage; /* the next adapter */
    char *method, *url;
    cr_kvlist headers;
    char *body;
    size_t body_len;
    int has_body;
    char *body_file;
    int authed;            /* the attempt carried the credential of auth_version */
    uint64_t auth_version;
    int waited_refresh;    /* it waited for a refresh: no other before it goes out */
    /* The whole send. */
    int refreshed;         /* the loop guard: it waited for a refresh once */
    int park;              /* PARK_*: what it waits for */
    size_t retrier;        /* the retrier asked */
    int held_code;         /* the failure the retriers are asked about */
    courier_response *held;
    courier_error held_err;
} cr_sess_xfer;

static void base_clear(cr_sess_xfer *s) {
    free(s->method);
    free(s->url);
    cr_kvlist_clear(&s->headers);
    free(s->body);
    free(s->body_file);
    s->method = s->url = s->body = s->body_file = NULL;
    s->body_len = 0;
    s->has_body = 0;
    s->saved = 0;
}

static void sess_xfer_free(void *state) {
    cr_sess_xfer *s = state;
    cblist_clear(&s->adapters);
    cblist_clear(&s->retriers);
    base_clear(s);
    courier_response_free(s->held);
    free(s);
}

static void *sess_xfer_copy(const void *state) {
    (void)state;
    return NULL; /* a transfer's state is moved (a redirect's next hop), never copied */
}
static const cr_ext_ops sess_xfer_ops = {sess_xfer_copy, sess_xfer_free};

/* Whether the authenticator's credential goes to url. */
static bool auth_applies(const cr_sess_conf *c, const char *url) {
    char *o = cr_url_origin(url);
    bool same = o && strcmp(o, c->origin) == 0;
    free(o);
    if (same && c->vt.applies) {
        cr_raised *outer = cr_raise_catch(NULL);
        same = c->vt.applies(url, c->owner->user) != 0;
        cr_raise_catch(outer);
    }
    return same;
}

int cr_session_prepare(courier_engine *e, const courier_request *r, cr_transfer *t) {
    const char *url = t->url;
    const cr_sched_conf *sc = e->core.config->sched;
    const cr_sess_conf *c = sc ? sc->session : NULL;
    const cr_sess_req *q = r->session;
    bool auth = c && c->has_auth && !(q && q->no_auth) && auth_applies(c, url);
    size_t na = (c ? c->adapters.n : 0) + (q ? q->adapters.n : 0);
    size_t nr = (c ? c->retriers.n : 0) + (q ? q->retriers.n : 0);
    if (!auth && !na && !nr) return COURIER_OK;
    cr_sess_xfer *s = calloc(1, sizeof *s);
    if (!s) return COURIER_E_NO_MEMORY;
    s->ext.ops = &sess_xfer_ops;
    s->auth = auth;
    if ((c && (cblist_append(&s->adapters, &c->adapters) || cblist_append(&s->retriers, &c->retriers))) ||
        (q && (cblist_append(&s->adapters, &q->adapters) || cblist_append(&s->retriers, &q->retriers)))) {
        sess_xfer_free(s);
        return COURIER_E_NO_MEMORY;
    }
    t->sess = s;
    return COURIER_OK;
}

static char *dup_bytes(const char *p, size_t n) {
    char *d = malloc(n ? n : 1);
    if (d && n) memcpy(d, p, n);
    return d;
}

/* Keeps the request as courier_send made it, before this attempt's adapters and credential. */
static int base_save(cr_transfer *t, cr_sess_xfer *s) {
    if (s->saved) return COURIER_OK;
    if (!(s->method = cr_strdup(t->method)) || !(s->url = cr_strdup(t->url)) ||
        cr_kvlist_copy(&s->headers, &t->headers) || (t->has_body && !(s->body = dup_bytes(t->body, t->body_len))) ||
        (t->body_file && !(s->body_file = cr_strdup(t->body_file)))) {
        base_clear(s);
        return COURIER_E_NO_MEMORY;
    }
    s->body_len = t->body_len;
    s->has_body = t->has_body;
    s->saved = 1;
    return COURIER_OK;
}

/* The URL changed: its parsed form and its host key follow. */
static void url_changed(cr_transfer *t, const char *before) {
    if (before && strcmp(before, t->url) == 0) return;
    cr_urlh_release(t->urlh);
    t->urlh = NULL;
    char *host = cr_sched_host_key(t->url);
    if (host) {
        free(t->host);
        t->host = host;
    }
}

/* Puts the kept request back (after an attempt, or before failing the send). */
static void base_restore(cr_transfer *t, cr_sess_xfer *s) {
    if (s->saved) {
        char *before = t->url;
        t->url = s->url;
        s->url = NULL;
        url_changed(t, before);
        free(before);
        free(t->method);
        t->method = s->method;
        cr_kvlist_clear(&t->headers);
        t->headers = s->headers;
        free(t->body);
        t->body = s->body;
        t->body_len = s->body_len;
        t->has_body = s->has_body;
        free(t->body_file);
        t->body_file = s->body_file;
        s->method = s->body = s->body_file = NULL;
        memset(&s->headers, 0, sizeof s->headers);
        base_clear(s);
    }
    s->ready = 0;
    s->stage = 0;
    s->authed = 0;
    s->waited_refresh = 0;
}

/* Fails the send (before its attempt went out) with code. */
static void fail_send(courier_engine *e, cr_transfer *t, int code, const char *message) {
    cr_sess_xfer *s = t->sess;
    base_restore(t, s);
    courier_error err;
    cr_fail(&err, code, "%s", message && message[0] ? message : courier_strerror(code));
    e->hub->ops->deliver(e, t, code, NULL, &err);
}

static void park(courier_engine *e, cr_transfer *t, int why) {
    ((cr_sess_xfer *)t->sess)->park = why;
    e->hub->ops->park(e, t);
}

/* The parked send with this id waiting for `why`, taken off the timer list; or NULL. */
static cr_transfer *unpark(courier_engine *e, uint64_t id, int why) {
    cr_transfer *t = e->hub->ops->find(e, id);
    if (!t || !t->sess || ((cr_sess_xfer *)t->sess)->park != why) return NULL;
    ((cr_sess_xfer *)t->sess)->park = PARK_NONE;
    e->hub->ops->unpark(e, t);
    return t;
}

/* ---- the authenticator ------------------------------------------------------------------------ */

static int64_t wall_ms(courier_engine *e) {
    const cr_callback *clock = e->core.config->clock;
    if (clock) return ((courier_clock_fn)clock->fn)(clock->user);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static int add_waiter(cr_hub *h, uint64_t id) {
    if (h->nwaiters == h->cap_waiters) {
        size_t cap = h->cap_waiters ? h->cap_waiters * 2 : 16;
        uint64_t *p = realloc(h->waiters, cap * sizeof *p);
        if (!p) return COURIER_E_NO_MEMORY;
        h->waiters = p;
        h->cap_waiters = cap;
    }
    h->waiters[h->nwaiters++] = id;
    return COURIER_OK;
}

/* Parks t until the refresh's result (h->mu held). Starts the refresh when none runs: returns it,
 * to be handed to the authenticator once the lock is released; NULL otherwise. *rc: COURIER_OK or
 * COURIER_E_NO_MEMORY (t not parked). */
static struct courier_refresh *wait_refresh(courier_engine *e, cr_hub *h, cr_transfer *t, int *rc) {
    *rc = add_waiter(h, t->id);
    if (*rc) return NULL;
    park(e, t, PARK_AUTH);
    ((cr_sess_xfer *)t->sess)->refreshed = 1;
    if (h->refreshing) return NULL;
    struct courier_refresh *r = calloc(1, sizeof *r);
    if (!r || (h->credential && !(r->credential = cr_strdup(h->credential)))) {
        free(r);
        /* No refresh can start: the waiters fail at the next turn. */
        h->refreshing = 1;
        h->result_ready = 1;
        h->result_code = COURIER_E_NO_MEMORY;
        snprintf(h->result_message, sizeof h->result_message, "%s", courier_strerror(COURIER_E_NO_MEMORY));
        hub_wake(h);
        return NULL;
    }
    h->refreshing = 1;
    h->refs++;
    r->hub = h;
    atomic_init(&r->answered, 0);
    return r;
}

static void run_refresh(cr_hub *h, struct courier_refresh *r) {
    if (!r) return;
    cr_raised *outer = cr_raise_catch(NULL);
    h->conf->vt.refresh(r, h->conf->owner->user);
    cr_raise_catch(outer);
}

static int default_apply(courier_outgoing *o, const char *credential) {
    cr_buf b = {0};
    if (cr_buf_append_str(&b, "Bearer ") || cr_buf_append_str(&b, credential)) {
        cr_buf_free(&b);
        return COURIER_E_NO_MEMORY;
    }
    int rc = courier_outgoing_set_header(o, "Authorization", b.data);
    cr_buf_free(&b);
    return rc;
}

/* Before an attempt: 1 when t was parked for a refresh, else COURIER_OK (the credential applied, or
 * none to apply) or a failure code. */
static int authorize(courier_engine *e, cr_transfer *t) {
    cr_hub *h = e->hub;
    cr_sess_xfer *s = t->sess;
    const cr_sess_conf *c = h->conf;
    if (!auth_applies(c, t->url)) return COURIER_OK; /* an adapter sent it elsewhere */
    int64_t now = wall_ms(e); /* the app's clock, never called under the hub's lock */
    pthread_mutex_lock(&h->mu);
    bool stale = !h->credential || (h->expires_ms > 0 && now >= h->expires_ms);
    if (h->refreshing || (stale && !s->waited_refresh)) {
        int rc;
        struct courier_refresh *r = wait_refresh(e, h, t, &rc);
        pthread_mutex_unlock(&h->mu);
        if (rc) return rc;
        run_refresh(h, r);
        return 1;
    }
    char *credential = h->credential ? cr_strdup(h->credential) : NULL;
    uint64_t version = h->version;
    bool none = !h->credential;
    pthread_mutex_unlock(&h->mu);
    if (none) return COURIER_OK; /* logged out (courier_engine_set_credential NULL): sent without */
    if (!credential) return COURIER_E_NO_MEMORY;
    courier_outgoing o = {t->method, t->url, t->headers, t->id, 0, 0, NULL, 0, 0, NULL};
    char *url_before = cr_strdup(t->url);
    cr_raised *outer = cr_raise_catch(&t->raised);
    int rc = c->vt.apply ? c->vt.apply(&o, credential, c->owner->user) : default_apply(&o, credential);
    cr_raise_catch(outer);
    t->method = o.method;
    t->url = o.url;
    t->headers = o.headers;
    url_changed(t, url_before);
    free(url_before);
    free(credential);
    if (rc != COURIER_OK) return rc < 0 ? rc : COURIER_E_INVALID_ARGUMENT;
    s->authed = 1;
    s->auth_version = version;
    return COURIER_OK;
}

int courier_engine_set_credential(courier_engine *e, const char *credential, int64_t expires_at_ms) {
    if (!e || !e->hub || !e->hub->conf || !e->hub->conf->has_auth || expires_at_ms < 0)
        return COURIER_E_INVALID_ARGUMENT;
    char *copy = NULL;
    if (credential && !(copy = cr_strdup(credential))) return COURIER_E_NO_MEMORY;
    cr_hub *h = e->hub;
    pthread_mutex_lock(&h->mu);
    free(h->credential);
    h->credential = copy;
    h->expires_ms = copy ? expires_at_ms : 0;
    h->version++;
    pthread_mutex_unlock(&h->mu);
    return COURIER_OK;
}

const char *courier_refresh_credential(const courier_refresh *r) { return r ? r->credential : NULL; }

/* Stores a refresh's result for the worker and releases the refresh. */
static void refresh_end(struct courier_refresh *r, char *credential, int64_t expires_ms, int code, const char *message,
                        void *user, courier_user_free_fn user_free, courier_user_retain_fn user_retain) {
    cr_hub *h = r->hub;
    pthread_mutex_lock(&h->mu);
    if (code == COURIER_OK) {
        free(h->credential);
        h->credential = credential;
        h->expires_ms = expires_ms;
        h->version++;
        credential = NULL;
    }
    h->result_ready = 1;
    h->result_code = code;
    snprintf(h->result_message, sizeof h->result_message, "%s",
             message && message[0] ? message : code ? courier_strerror(code) : "");
    if (h->result_free && h->result_user) { /* an earlier result nobody took (cannot happen) */
        void *old = h->result_user;
        courier_user_free_fn f = h->result_free;
        h->result_user = NULL;
        pthread_mutex_unlock(&h->mu);
        f(old);
        pthread_mutex_lock(&h->mu);
    }
    h->result_user = user;
    h->result_free = user_free;
    h->result_retain = user_retain;
    if (h->e) hub_wake(h);
    pthread_mutex_unlock(&h->mu);
    free(credential);
    free(r->credential);
    free(r);
    hub_release(h);
}

int courier_refresh_complete(courier_refresh *r, const char *credential, int64_t expires_at_ms) {
    if (!r || atomic_exchange(&r->answered, 1)) return COURIER_E_INVALID_ARGUMENT;
    if (!credential || expires_at_ms < 0) {
        refresh_end(r, NULL, 0, COURIER_E_INVALID_ARGUMENT, "the refresh completed without a credential", NULL,
                    NULL, NULL);
        return COURIER_E_INVALID_ARGUMENT;
    }
    char *copy = cr_strdup(credential);
    if (!copy) {
        refresh_end(r, NULL, 0, COURIER_E_NO_MEMORY, NULL, NULL, NULL, NULL);
        return COURIER_E_NO_MEMORY;
    }
    refresh_end(r, copy, expires_at_ms, COURIER_OK, NULL, NULL, NULL, NULL);
    return COURIER_OK;
}

int courier_refresh_fail(courier_refresh *r, courier_code code, const char *message, void *user,
                         courier_user_free_fn user_free, courier_user_retain_fn user_retain) {
    if (!r || atomic_exchange(&r->answered, 1)) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    int rc = (int)code < 0 ? COURIER_OK : COURIER_E_INVALID_ARGUMENT;
    refresh_end(r, NULL, 0, (int)code < 0 ? (int)code : COURIER_E_USER, message, user, user_free, user_retain);
    return rc;
}

/* Worker: the refresh's result goes to every send waiting for it. */
static void take_refresh_result(courier_engine *e) {
    cr_hub *h = e->hub;
    pthread_mutex_lock(&h->mu);
    if (!h->result_ready) {
        pthread_mutex_unlock(&h->mu);
        return;
    }
    int code = h->result_code;
    char message[sizeof h->result_message];
    memcpy(message, h->result_message, sizeof message);
    void *user = h->result_user;
    courier_user_free_fn user_free = h->result_free;
    courier_user_retain_fn user_retain = h->result_retain;
    h->result_user = NULL;
    h->result_free = NULL;
    h->result_ready = 0;
    h->refreshing = 0;
    uint64_t *ids = h->waiters;
    size_t n = h->nwaiters;
    h->waiters = NULL;
    h->nwaiters = h->cap_waiters = 0;
    pthread_mutex_unlock(&h->mu);
    bool handed = false;
    for (size_t i = 0; i < n; i++) {
        cr_transfer *t = unpark(e, ids[i], PARK_AUTH);
        if (!t) continue;
        cr_sess_xfer *s = t->sess;
        if (code == COURIER_OK) {
            s->waited_refresh = 1;
            if (!s->ready) e->hub->ops->go(e, t); /* route: the session step applies the new credential */
            continue;
        }
        if (user) {
            /* Each failure its own reference, taken before any completion runs (a completion
             * releases the reference it carried). Without user_retain: the first only. */
            void *mine = user_retain ? user_retain(user) : !handed ? user : NULL;
            if (mine) cr_raise_into(&t->raised, code, message, mine, user_free);
            handed = true;
        }
        fail_send(e, t, code, message);
    }
    free(ids);
    if (user && (user_retain || !handed) && user_free) user_free(user); /* the refresh's own reference */
}

/* ---- adapters --------------------------------------------------------------------------------- */

/* Worker: t's session work for its attempt, from where it stands: the next adapter (t parked
 * until it answers), the authenticator, then the attempt goes on. */
static void step(courier_engine *e, cr_transfer *t) {
    cr_sess_xfer *s = t->sess;
    if (base_save(t, s)) {
        fail_send(e, t, COURIER_E_NO_MEMORY, NULL);
        return;
    }
    if (s->stage < s->adapters.n) {
        struct courier_adaptation *a = calloc(1, sizeof *a);
        bool multipart = t->parts && t->parts->count;
        if (!a || !(a->o.method = cr_strdup(t->method)) || !(a->o.url = cr_strdup(t->url)) ||
            cr_kvlist_copy(&a->o.headers, &t->headers) ||
            (t->has_body && !multipart && !(a->o.body = dup_bytes(t->body, t->body_len))) ||
            (t->body_file && !(a->o.body_file = cr_strdup(t->body_file)))) {
            if (a) {
                a->hub = hub_retain(e->hub);
                adaptation_free(a);
            }
            fail_send(e, t, COURIER_E_NO_MEMORY, NULL);
            return;
        }
        a->o.body_view = 1;
        a->o.multipart = multipart;
        a->o.has_body = t->has_body && !multipart;
        a->o.body_len = a->o.has_body ? t->body_len : 0;
        a->o.id = t->id;
        a->hub = hub_retain(e->hub);
        a->id = t->id;
        a->attempt = (t->attempts > 0 ? t->attempts : 0) + 1;
        a->index = s->stage;
        atomic_init(&a->answered, 0);
        park(e, t, PARK_ADAPT);
        const cr_callback *cb = s->adapters.items[s->stage];
        cr_raised *outer = cr_raise_catch(NULL);
        ((courier_adapter_fn)cb->fn)(a, cb->user);
        cr_raise_catch(outer);
        return;
    }
    if (s->auth && !s->authed) {
        int rc = authorize(e, t);
        if (rc == 1) return; /* waits for a refresh */
        if (rc != COURIER_OK) {
            fail_send(e, t, rc, "the authenticator could not apply the credential");
            return;
        }
    }
    s->ready = 1;
    e->hub->ops->go(e, t);
}

bool cr_session_ready(courier_engine *e, cr_transfer *t) {
    cr_sess_xfer *s = t->sess;
    if (!s || s->ready || !e->hub) return true;
    if (s->park != PARK_NONE) return false; /* cannot happen: a parked send is not routed */
    step(e, t);
    return false;
}

courier_outgoing *courier_adaptation_outgoing(courier_adaptation *a) { return a ? &a->o : NULL; }

int courier_adaptation_attempt(const courier_adaptation *a) { return a ? a->attempt : 0; }

/* Queues the answered adaptation for the worker (or frees it: the engine closed). */
static void adaptation_post(struct courier_adaptation *a) {
    cr_hub *h = a->hub;
    pthread_mutex_lock(&h->mu);
    bool open = h->e != NULL;
    if (open) {
        a->next = NULL;
        if (h->adapted_tail) h->adapted_tail->next = a;
        else h->adapted = a;
        h->adapted_tail = a;
        hub_wake(h);
    }
    pthread_mutex_unlock(&h->mu);
    if (!open) adaptation_free(a);
}

int courier_adaptation_complete(courier_adaptation *a, courier_code code, const char *message) {
    if (!a || atomic_exchange(&a->answered, 1)) return COURIER_E_INVALID_ARGUMENT;
    int rc = COURIER_OK;
    if ((int)code > 0) {
        code = COURIER_E_INTERNAL;
        rc = COURIER_E_INVALID_ARGUMENT;
    }
    a->code = (int)code;
    snprintf(a->message, sizeof a->message, "%s", message ? message : "");
    adaptation_post(a);
    return rc;
}

int courier_adaptation_raise(courier_adaptation *a, courier_code code, const char *message, void *user,
                             courier_user_free_fn user_free) {
    if (!a || atomic_exchange(&a->answered, 1)) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    int rc = (int)code < 0 ? COURIER_OK : COURIER_E_INVALID_ARGUMENT;
    a->code = (int)code < 0 ? (int)code : COURIER_E_USER;
    snprintf(a->message, sizeof a->message, "%s", message ? message : "");
    cr_raise_into(&a->raised, a->code, message, user, user_free);
    adaptation_post(a);
    return rc;
}

/* Worker: an adapter's answer applied to its send. */
static void take_adaptation(courier_engine *e, struct courier_adaptation *a) {
    cr_transfer *t = unpark(e, a->id, PARK_ADAPT);
    cr_sess_xfer *s = t ? t->sess : NULL;
    if (!t) return;
    if (s->stage != a->index) { /* cannot happen: one adapter at a time */
        fail_send(e, t, COURIER_E_INTERNAL, "an adaptation answered out of turn");
        return;
    }
    if (a->code != COURIER_OK) {
        cr_raise_move(&t->raised, &a->raised);
        fail_send(e, t, a->code, a->message);
        return;
    }
    char *before = t->url;
    t->url = a->o.url;
    a->o.url = NULL;
    url_changed(t, before);
    free(before);
    free(t->method);
    t->method = a->o.method;
    a->o.method = NULL;
    cr_kvlist_clear(&t->headers);
    t->headers = a->o.headers;
    memset(&a->o.headers, 0, sizeof a->o.headers);
    if (!a->o.multipart) {
        free(t->body);
        t->body = a->o.body;
        t->body_len = a->o.body_len;
        t->has_body = a->o.has_body;
        a->o.body = NULL;
    }
    free(t->body_file);
    t->body_file = a->o.body_file;
    a->o.body_file = NULL;
    s->stage++;
    step(e, t);
}

/* ---- after an attempt: a refused credential --------------------------------------------------- */

bool cr_session_after_attempt(courier_engine *e, cr_transfer *t, int code, courier_response *resp,
                              courier_error *err) {
    cr_sess_xfer *s = t->sess;
    bool authed = s->authed;
    uint64_t version = s->auth_version;
    base_restore(t, s); /* the next attempt, the journal and the caller see the request as sent */
    cr_hub *h = e->hub;
    if (!h || !authed || code == COURIER_E_CANCELLED || t->cancel_requested || t->stream_live) return false;
    if (t->caller_gone && !t->followers) return false;
    const cr_sess_conf *c = h->conf;
    cr_raised *outer = cr_raise_catch(NULL);
    bool refused = c->vt.refused ? c->vt.refused(code, resp, c->owner->user) != 0
                                 : (code == COURIER_OK && resp && resp->status == 401);
    cr_raise_catch(outer);
    if (!refused) return false;
    pthread_mutex_lock(&h->mu);
    if (!h->refreshing && version != h->version) {
        /* Refused with an older credential than the one now in force: sent again with it. */
        pthread_mutex_unlock(&h->mu);
        courier_response_free(resp);
        h->ops->go(e, t);
        return true;
    }
    if (s->refreshed) { /* the loop guard: refused again after it waited for a refresh */
        pthread_mutex_unlock(&h->mu);
        int status = resp ? resp->status : 0;
        cr_fail(err, COURIER_E_CREDENTIAL_REFUSED, "the credential was refused again after a refresh (HTTP %d)", status);
        err->http_status = status;
        h->ops->deliver(e, t, COURIER_E_CREDENTIAL_REFUSED, resp, err);
        return true;
    }
    int rc;
    struct courier_refresh *r = wait_refresh(e, h, t, &rc);
    pthread_mutex_unlock(&h->mu);
    if (rc) return false; /* no memory to wait: the 401 goes to the caller */
    courier_response_free(resp);
    run_refresh(h, r);
    return true;
}

/* ---- retriers --------------------------------------------------------------------------------- */

static void ask(courier_engine *e, cr_transfer *t) {
    cr_sess_xfer *s = t->sess;
    struct courier_retry_question *q = calloc(1, sizeof *q);
    if (!q || !(q->method = cr_strdup(t->method)) || !(q->url = cr_strdup(t->url))) {
        if (q) {
            free(q->method);
            free(q);
        }
        courier_response *resp = s->held;
        s->held = NULL;
        e->hub->ops->deliver(e, t, s->held_code, resp, &s->held_err);
        return;
    }
    q->hub = hub_retain(e->hub);
    q->id = t->id;
    q->attempt = t->attempts;
    q->index = s->retrier;
    q->code = s->held_code;
    q->resp = s->held ? courier_response_retain(s->held) : NULL;
    atomic_init(&q->answered, 0);
    park(e, t, PARK_RETRY);
    const cr_callback *cb = s->retriers.items[s->retrier];
    cr_raised *outer = cr_raise_catch(NULL);
    ((courier_retrier_fn)cb->fn)(q, cb->user);
    cr_raise_catch(outer);
}

bool cr_session_ask_retriers(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err) {
    cr_sess_xfer *s = t->sess;
    if (!s || !s->retriers.n || !e->hub || code == COURIER_E_CANCELLED || t->cancel_requested) return false;
    bool failed = code != COURIER_OK || (resp && !cr_status_accepted(&t->status_codes, resp->status));
    if (!failed) return false;
    s->retrier = 0;
    s->held_code = code;
    courier_response_free(s->held);
    s->held = resp;
    s->held_err = *err;
    ask(e, t);
    return true;
}

int courier_retry_question_code(const courier_retry_question *q) { return q ? q->code : 0; }
const courier_response *courier_retry_question_response(const courier_retry_question *q) { return q ? q->resp : NULL; }
int courier_retry_question_attempt(const courier_retry_question *q) { return q ? q->attempt : 0; }
uint64_t courier_retry_question_request_id(const courier_retry_question *q) { return q ? q->id : 0; }
const char *courier_retry_question_method(const courier_retry_question *q) { return q ? q->method : ""; }
const char *courier_retry_question_url(const courier_retry_question *q) { return q ? q->url : ""; }

int courier_retry_question_answer(courier_retry_question *q, int64_t delay_ms) {
    if (!q || atomic_exchange(&q->answered, 1)) return COURIER_E_INVALID_ARGUMENT;
    q->delay_ms = delay_ms < 0 ? -1 : delay_ms;
    cr_hub *h = q->hub;
    pthread_mutex_lock(&h->mu);
    bool open = h->e != NULL;
    if (open) {
        q->next = NULL;
        if (h->decided_tail) h->decided_tail->next = q;
        else h->decided = q;
        h->decided_tail = q;
        hub_wake(h);
    }
    pthread_mutex_unlock(&h->mu);
    if (!open) question_free(q);
    return COURIER_OK;
}

static void take_answer(courier_engine *e, struct courier_retry_question *q) {
    cr_transfer *t = unpark(e, q->id, PARK_RETRY);
    if (!t) return;
    cr_sess_xfer *s = t->sess;
    if (q->delay_ms >= 0) {
        courier_response *resp = s->held;
        s->held = NULL;
        e->hub->ops->retry(e, t, s->held_code, resp, (long)q->delay_ms);
    } else if (++s->retrier < s->retriers.n) {
        ask(e, t);
    } else {
        courier_response *resp = s->held;
        s->held = NULL;
        e->hub->ops->deliver(e, t, s->held_code, resp, &s->held_err);
    }
}

/* ---- the worker's turn ------------------------------------------------------------------------ */

void cr_session_turn(courier_engine *e) {
    cr_hub *h = e->hub;
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    struct courier_adaptation *a = h->adapted;
    struct courier_retry_question *q = h->decided;
    bool result = h->result_ready;
    h->adapted = h->adapted_tail = NULL;
    h->decided = h->decided_tail = NULL;
    pthread_mutex_unlock(&h->mu);
    if (result) take_refresh_result(e);
    while (a) {
        struct courier_adaptation *next = a->next;
        take_adaptation(e, a);
        adaptation_free(a);
        a = next;
    }
    while (q) {
        struct courier_retry_question *next = q->next;
        take_answer(e, q);
        question_free(q);
        q = next;
    }
}
