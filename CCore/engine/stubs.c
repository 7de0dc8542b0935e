/*
 * stubs.c — engine-wide stubs for the app's own tests (URLProtocol's and MockWebServer's use):
 * stubs matched by method, URL pattern, headers and a predicate, whose answers are mock answers
 * (mock.c makes them, so they are judged, mapped, cached and reported as real ones); the record of
 * the requests the stubs saw; HAR recording's switch and replay (the HAR document itself: har.c).
 *
 * Threads: matching runs on the sending thread (cr_stubs_offer, from cr_sched_finish_prepare);
 * taking each attempt's answer and recording the request (cr_stubs_take, from route: after the
 * cache lookup, so a cache hit takes and records nothing) and HAR entries on the worker; the public
 * functions on any thread. All of it is guarded by the state's own lock, never held across a
 * predicate.
 */
#include "engine/engine.h"

#include <fnmatch.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

/* ---- a stub ------------------------------------------------------------------------------------ */

/* A stub being described, and (the same struct) the immutable copies that configurations share
 * and that engines own; an engine's copy also counts its place in the answers (under the lock). */
struct courier_stub {
    atomic_int refs;
    uint64_t id;     /* an engine's copy: its id */
    char *method;    /* NULL: any */
    char *pattern;   /* NULL: any URL */
    int match;       /* courier_url_match */
    int has_regex;
    regex_t re;
    cr_kvlist headers; /* name and value that must be present */
    cr_kvlist present; /* names that must be present, any value */
    cr_callback *pred;
    cr_mock **answers;
    size_t nanswers;
    size_t next; /* an engine's copy: the next answer (guarded by the engine's stubs lock) */
};

struct courier_stub_request {
    atomic_int refs;
    char *method;
    char *url;
    cr_kvlist headers;
    char *body;
    size_t body_len;
    int has_body;
    uint64_t stub_id;
};

struct cr_stubs {
    pthread_mutex_t lock;
    atomic_int mode;
    courier_stub **items; /* in the order added */
    size_t count, cap;
    uint64_t next_id;
    courier_stub_request **record;
    size_t nrecord, caprecord;
    atomic_int har_on;  /* recording: read by the worker without the lock first */
    void *har_log;      /* har.c's document, under the lock */
    char *har_path;
};

static courier_stub *stub_retain(courier_stub *s) {
    atomic_fetch_add(&s->refs, 1);
    return s;
}

static void stub_release(courier_stub *s) {
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
    free(s->method);
    free(s->pattern);
    if (s->has_regex) regfree(&s->re);
    cr_kvlist_clear(&s->headers);
    cr_kvlist_clear(&s->present);
    cr_callback_release(s->pred);
    for (size_t i = 0; i < s->nanswers; i++) cr_mock_free(s->answers[i]);
    free(s->answers);
    free(s);
}

static int compile(courier_stub *s, courier_error *err) {
    if (s->match != COURIER_URL_REGEX || !s->pattern) return COURIER_OK;
    int rc = regcomp(&s->re, s->pattern, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char why[160];
        regerror(rc, &s->re, why, sizeof why);
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "the URL pattern '%.100s' is not a regular expression: %s",
                       s->pattern, why);
    }
    s->has_regex = 1;
    return COURIER_OK;
}

static courier_stub *stub_alloc(void) {
    courier_stub *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    atomic_init(&s->refs, 1);
    return s;
}

int courier_stub_new(courier_stub **out, const char *method, const char *url_pattern, courier_url_match match,
                     courier_error *err) {
    cr_error_clear(err);
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if ((int)match < COURIER_URL_EXACT || match > COURIER_URL_REGEX)
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "unknown URL match kind %d", (int)match);
    courier_stub *s = stub_alloc();
    if (!s) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    s->match = (int)match;
    if ((method && *method && !(s->method = cr_strdup(method))) ||
        (url_pattern && *url_pattern && !(s->pattern = cr_strdup(url_pattern)))) {
        stub_release(s);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    int rc = compile(s, err);
    if (rc) {
        stub_release(s);
        return rc;
    }
    *out = s;
    return COURIER_OK;
}

void courier_stub_free(courier_stub *s) { stub_release(s); }

/* A copy with its own place in the answers (and its own compiled expression). */
static courier_stub *stub_copy(const courier_stub *src) {
    courier_stub *s = stub_alloc();
    if (!s) return NULL;
    s->match = src->match;
    if ((src->method && !(s->method = cr_strdup(src->method))) ||
        (src->pattern && !(s->pattern = cr_strdup(src->pattern))) || cr_kvlist_copy(&s->headers, &src->headers) ||
        cr_kvlist_copy(&s->present, &src->present) || compile(s, NULL) ||
        !(s->answers = calloc(src->nanswers ? src->nanswers : 1, sizeof *s->answers))) {
        stub_release(s);
        return NULL;
    }
    s->pred = cr_callback_retain(src->pred);
    for (size_t i = 0; i < src->nanswers; i++) {
        if (!(s->answers[i] = cr_mock_copy(src->answers[i]))) {
            stub_release(s);
            return NULL;
        }
        s->nanswers++;
    }
    return s;
}

int courier_stub_match_header(courier_stub *s, const char *name, const char *value) {
    if (!s || !name || !*name) return COURIER_E_INVALID_ARGUMENT;
    if (value) return cr_kvlist_add(&s->headers, name, strlen(name), value, strlen(value));
    return cr_kvlist_add(&s->present, name, strlen(name), "", 0);
}

int courier_stub_set_predicate(courier_stub *s, courier_stub_predicate_fn fn, void *user,
                               courier_user_free_fn user_free) {
    return cr_callback_set(s ? &s->pred : NULL, (void (*)(void))fn, user, user_free);
}

static cr_mock *append_answer(courier_stub *s) {
    cr_mock **p = realloc(s->answers, (s->nanswers + 1) * sizeof *p);
    if (!p) return NULL;
    s->answers = p;
    cr_mock *m = cr_mock_copy(NULL); /* status 200, nothing else */
    if (m) s->answers[s->nanswers++] = m;
    return m;
}

int courier_stub_add_response(courier_stub *s, int status, const void *body, size_t len, const char *content_type) {
    if (!s || status < 100 || status > 999 || (!body && len)) return COURIER_E_INVALID_ARGUMENT;
    if (content_type) {
        int rc = cr_check_header("Content-Type", 12, content_type, strlen(content_type));
        if (rc) return rc;
    }
    char *copy = cr_strndup(body ? body : "", len);
    cr_mock *m = copy ? append_answer(s) : NULL;
    if (!m) {
        free(copy);
        return COURIER_E_NO_MEMORY;
    }
    m->status = status;
    m->body = copy;
    m->body_len = len;
    m->has_body = 1;
    if (content_type && cr_kvlist_add(&m->headers, "Content-Type", 12, content_type, strlen(content_type)))
        return COURIER_E_NO_MEMORY;
    return COURIER_OK;
}

int courier_stub_add_file(courier_stub *s, int status, const char *path) {
    if (!s || status < 100 || status > 999 || !path || !*path) return COURIER_E_INVALID_ARGUMENT;
    char *copy = cr_strdup(path);
    cr_mock *m = copy ? append_answer(s) : NULL;
    if (!m) {
        free(copy);
        return COURIER_E_NO_MEMORY;
    }
    m->status = status;
    m->file = copy;
    return COURIER_OK;
}

int courier_stub_add_error(courier_stub *s, courier_code code) {
    if (!s || code >= 0) return COURIER_E_INVALID_ARGUMENT;
    cr_mock *m = append_answer(s);
    if (!m) return COURIER_E_NO_MEMORY;
    m->error = code;
    return COURIER_OK;
}

int courier_stub_add_header(courier_stub *s, const char *name, const char *value) {
    if (!s || !s->nanswers || !name || !value) return COURIER_E_INVALID_ARGUMENT;
    int rc = cr_check_header(name, strlen(name), value, strlen(value));
    if (rc) return rc;
    return cr_kvlist_add(&s->answers[s->nanswers - 1]->headers, name, strlen(name), value, strlen(value));
}

int courier_stub_set_delay_ms(courier_stub *s, int64_t delay_ms) {
    if (!s || !s->nanswers || delay_ms < 0) return COURIER_E_INVALID_ARGUMENT;
    s->answers[s->nanswers - 1]->delay_ms = (long)delay_ms;
    return COURIER_OK;
}

/* ---- configuration ----------------------------------------------------------------------------- */

int cr_stubs_conf_copy(cr_sched_conf *dst, const cr_sched_conf *src) {
    dst->stub_mode = src->stub_mode;
    if (!src->nstubs) return COURIER_OK;
    if (!(dst->stubs = calloc(src->nstubs, sizeof *dst->stubs))) return COURIER_E_NO_MEMORY;
    for (size_t i = 0; i < src->nstubs; i++) { /* immutable: shared */
        dst->stubs[dst->nstubs++] = stub_retain(src->stubs[i]);
    }
    return COURIER_OK;
}

void cr_stubs_conf_clear(cr_sched_conf *c) {
    for (size_t i = 0; i < c->nstubs; i++) stub_release(c->stubs[i]);
    free(c->stubs);
    c->stubs = NULL;
    c->nstubs = 0;
}

int cr_stub_copy(courier_stub **out, const courier_stub *src) {
    *out = NULL;
    if (!src || !src->nanswers) return COURIER_E_INVALID_ARGUMENT;
    return (*out = stub_copy(src)) ? COURIER_OK : COURIER_E_NO_MEMORY;
}

static bool mode_valid(int mode) { return mode >= COURIER_STUBS_OFF && mode <= COURIER_STUBS_PASS_THROUGH; }

/* ---- the engine's state ------------------------------------------------------------------------ */

static int add_locked(struct cr_stubs *st, courier_stub *s, uint64_t *out_id) {
    if (st->count == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 8;
        courier_stub **p = realloc(st->items, cap * sizeof *p);
        if (!p) return COURIER_E_NO_MEMORY;
        st->items = p;
        st->cap = cap;
    }
    s->id = ++st->next_id;
    st->items[st->count++] = s;
    if (out_id) *out_id = s->id;
    return COURIER_OK;
}

int cr_stubs_open(courier_engine *e) {
    struct cr_stubs *st = calloc(1, sizeof *st);
    if (!st) return COURIER_E_NO_MEMORY;
    pthread_mutex_init(&st->lock, NULL);
    e->stubs = st;
    const cr_sched_conf *sc = e->core.config->sched;
    atomic_init(&st->mode, sc ? sc->stub_mode : COURIER_STUBS_OFF);
    atomic_init(&st->har_on, 0);
    for (size_t i = 0; sc && i < sc->nstubs; i++) {
        courier_stub *s = stub_copy(sc->stubs[i]);
        if (!s || add_locked(st, s, NULL)) {
            stub_release(s);
            return COURIER_E_NO_MEMORY;
        }
    }
    return COURIER_OK;
}

static void record_release(courier_stub_request *q) {
    if (!q || atomic_fetch_sub(&q->refs, 1) != 1) return;
    free(q->method);
    free(q->url);
    cr_kvlist_clear(&q->headers);
    free(q->body);
    free(q);
}

static void clear_record_locked(struct cr_stubs *st) {
    for (size_t i = 0; i < st->nrecord; i++) record_release(st->record[i]);
    st->nrecord = 0;
}

void cr_stubs_close(courier_engine *e) {
    struct cr_stubs *st = e->stubs;
    if (!st) return;
    for (size_t i = 0; i < st->count; i++) stub_release(st->items[i]);
    free(st->items);
    clear_record_locked(st);
    free(st->record);
    cr_har_free_log(st->har_log);
    free(st->har_path);
    pthread_mutex_destroy(&st->lock);
    free(st);
    e->stubs = NULL;
}

int courier_engine_set_stub_mode(courier_engine *e, courier_stub_mode mode) {
    if (!e || !e->stubs || !mode_valid((int)mode)) return COURIER_E_INVALID_ARGUMENT;
    atomic_store(&e->stubs->mode, (int)mode);
    return COURIER_OK;
}

courier_stub_mode courier_engine_stub_mode(const courier_engine *e) {
    return e && e->stubs ? (courier_stub_mode)atomic_load(&e->stubs->mode) : COURIER_STUBS_OFF;
}

int courier_engine_add_stub(uint64_t *out_id, courier_engine *e, const courier_stub *stub) {
    if (out_id) *out_id = 0;
    if (!e || !e->stubs) return COURIER_E_INVALID_ARGUMENT;
    courier_stub *s = NULL;
    int rc = cr_stub_copy(&s, stub);
    if (rc) return rc;
    pthread_mutex_lock(&e->stubs->lock);
    rc = add_locked(e->stubs, s, out_id);
    pthread_mutex_unlock(&e->stubs->lock);
    if (rc) stub_release(s);
    return rc;
}

int courier_engine_remove_stub(courier_engine *e, uint64_t id) {
    if (!e || !e->stubs || !id) return COURIER_E_INVALID_ARGUMENT;
    struct cr_stubs *st = e->stubs;
    courier_stub *gone = NULL;
    pthread_mutex_lock(&st->lock);
    for (size_t i = 0; i < st->count; i++) {
        if (st->items[i]->id != id) continue;
        gone = st->items[i];
        memmove(&st->items[i], &st->items[i + 1], (st->count - i - 1) * sizeof *st->items);
        st->count--;
        break;
    }
    pthread_mutex_unlock(&st->lock);
    if (!gone) return COURIER_E_NOT_FOUND;
    stub_release(gone); /* a predicate's user_free may run here: outside the lock */
    return COURIER_OK;
}

int courier_engine_clear_stubs(courier_engine *e) {
    if (!e || !e->stubs) return COURIER_E_INVALID_ARGUMENT;
    struct cr_stubs *st = e->stubs;
    pthread_mutex_lock(&st->lock);
    courier_stub **items = st->items;
    size_t n = st->count;
    st->items = NULL;
    st->count = st->cap = 0;
    pthread_mutex_unlock(&st->lock);
    for (size_t i = 0; i < n; i++) stub_release(items[i]);
    free(items);
    return COURIER_OK;
}

/* ---- the record -------------------------------------------------------------------------------- */

static courier_stub_request *record_of(const cr_transfer *t) {
    courier_stub_request *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    atomic_init(&q->refs, 1);
    if (!(q->method = cr_strdup(t->method)) || !(q->url = cr_strdup(t->url)) || cr_kvlist_copy(&q->headers, &t->headers) ||
        (t->has_body && !(q->body = cr_strndup(t->body ? t->body : "", t->body_len)))) {
        record_release(q);
        return NULL;
    }
    q->has_body = t->has_body;
    q->body_len = t->has_body ? t->body_len : 0;
    return q;
}

/* Takes q (one reference). Caller holds the lock. */
static int record_locked(struct cr_stubs *st, courier_stub_request *q) {
    if (st->nrecord == st->caprecord) {
        size_t cap = st->caprecord ? st->caprecord * 2 : 16;
        courier_stub_request **p = realloc(st->record, cap * sizeof *p);
        if (!p) {
            record_release(q);
            return COURIER_E_NO_MEMORY;
        }
        st->record = p;
        st->caprecord = cap;
    }
    st->record[st->nrecord++] = q;
    return COURIER_OK;
}

size_t courier_engine_stub_request_count(const courier_engine *e) {
    if (!e || !e->stubs) return 0;
    struct cr_stubs *st = e->stubs;
    pthread_mutex_lock(&st->lock);
    size_t n = st->nrecord;
    pthread_mutex_unlock(&st->lock);
    return n;
}

int courier_engine_stub_request_at(courier_stub_request **out, const courier_engine *e, size_t index) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    *out = NULL;
    if (!e || !e->stubs) return COURIER_E_INVALID_ARGUMENT;
    struct cr_stubs *st = e->stubs;
    pthread_mutex_lock(&st->lock);
    if (index < st->nrecord) {
        *out = st->record[index];
        atomic_fetch_add(&(*out)->refs, 1);
    }
    pthread_mutex_unlock(&st->lock);
    return *out ? COURIER_OK : COURIER_E_NOT_FOUND;
}

int courier_engine_clear_stub_requests(courier_engine *e) {
    if (!e || !e->stubs) return COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&e->stubs->lock);
    clear_record_locked(e->stubs);
    pthread_mutex_unlock(&e->stubs->lock);
    return COURIER_OK;
}

void courier_stub_request_free(courier_stub_request *q) { record_release(q); }

const char *courier_stub_request_method(const courier_stub_request *q) { return q ? q->method : NULL; }
const char *courier_stub_request_url(const courier_stub_request *q) { return q ? q->url : NULL; }
const char *courier_stub_request_header(const courier_stub_request *q, const char *name) {
    return q && name ? cr_kvlist_get(&q->headers, name) : NULL;
}
size_t courier_stub_request_header_count(const courier_stub_request *q) { return q ? q->headers.count : 0; }
int courier_stub_request_header_at(const char **out_name, const char **out_value, const courier_stub_request *q,
                                   size_t index) {
    if (!out_name || !out_value || !q) return COURIER_E_INVALID_ARGUMENT;
    if (index >= q->headers.count) return COURIER_E_NOT_FOUND;
    *out_name = q->headers.items[index].name;
    *out_value = q->headers.items[index].value;
    return COURIER_OK;
}
const void *courier_stub_request_body(const courier_stub_request *q, size_t *out_len) {
    if (out_len) *out_len = q && q->has_body ? q->body_len : 0;
    return q && q->has_body ? q->body : NULL;
}
uint64_t courier_stub_request_stub_id(const courier_stub_request *q) { return q ? q->stub_id : 0; }

/* ---- matching ---------------------------------------------------------------------------------- */

/* The part of a URL a pattern starting with "/" is compared with: the path and query. */
static const char *path_of(const char *url) {
    size_t scheme = cr_url_scheme_len(url);
    const char *p = scheme ? strchr(url + scheme, '/') : url;
    return p ? p : "";
}

static bool url_matches(const courier_stub *s, const char *url) {
    if (!s->pattern) return true;
    bool rel = s->pattern[0] == '/' || (s->match == COURIER_URL_REGEX && strncmp(s->pattern, "^/", 2) == 0);
    const char *subject = rel ? path_of(url) : url;
    switch (s->match) {
    case COURIER_URL_EXACT: return strcmp(subject, s->pattern) == 0;
    case COURIER_URL_PREFIX: return strncmp(subject, s->pattern, strlen(s->pattern)) == 0;
    case COURIER_URL_GLOB: return fnmatch(s->pattern, subject, 0) == 0;
    case COURIER_URL_REGEX: return regexec(&s->re, subject, 0, NULL, 0) == 0;
    default: return false;
    }
}

/* Everything but the predicate. */
static bool plain_match(const courier_stub *s, const courier_stub_request *q) {
    if (s->method && strcmp(s->method, q->method) != 0) return false;
    if (!url_matches(s, q->url)) return false;
    for (size_t i = 0; i < s->present.count; i++)
        if (!cr_kvlist_get(&q->headers, s->present.items[i].name)) return false;
    for (size_t i = 0; i < s->headers.count; i++) {
        bool found = false; /* any line of that name with that value */
        for (size_t j = 0; j < q->headers.count && !found; j++)
            found = strcasecmp(q->headers.items[j].name, s->headers.items[i].name) == 0 &&
                    strcmp(q->headers.items[j].value, s->headers.items[i].value) == 0;
        if (!found) return false;
    }
    return true;
}

/* The answer at the stub's place (a copy); with advance, the place moves on (the last repeats).
 * Caller holds the lock. */
static cr_mock *answer_locked(courier_stub *s, bool advance) {
    size_t i = s->next < s->nanswers ? s->next : s->nanswers - 1;
    if (advance && s->next < s->nanswers) s->next++;
    return cr_mock_copy(s->answers[i]);
}

/* A transfer's part (t->stub): the stub that matched (a reference; NULL: none did), and whether a
 * retry's answer is waiting on its delay. */
typedef struct cr_stub_xfer {
    cr_ext ext;
    courier_stub *stub;
    int delayed;
} cr_stub_xfer;

static void xfer_free(void *state) {
    cr_stub_xfer *x = state;
    stub_release(x->stub);
    free(x);
}
static void *xfer_copy(const void *state) { /* never copied: a transfer is not */
    (void)state;
    return NULL;
}
static const cr_ext_ops xfer_ops = {xfer_copy, xfer_free};

int cr_stubs_offer(courier_engine *e, cr_transfer *t, courier_error *err) {
    struct cr_stubs *st = e->stubs;
    int mode = st ? atomic_load(&st->mode) : COURIER_STUBS_OFF;
    if (mode == COURIER_STUBS_OFF) return COURIER_OK;
    cr_stub_xfer *x = calloc(1, sizeof *x);
    courier_stub_request *q = x ? record_of(t) : NULL;
    if (!q) {
        free(x);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    x->ext.ops = &xfer_ops;
    /* A snapshot of the stubs (references), so no lock is held while predicates run. */
    pthread_mutex_lock(&st->lock);
    size_t n = st->count;
    courier_stub **snap = n ? malloc(n * sizeof *snap) : NULL;
    for (size_t i = 0; snap && i < n; i++) {
        snap[i] = stub_retain(st->items[i]);
    }
    pthread_mutex_unlock(&st->lock);
    int rc = n && !snap ? COURIER_E_NO_MEMORY : COURIER_OK;
    for (size_t i = n; snap && i-- > 0 && !x->stub;) { /* the stub added last first */
        courier_stub *s = snap[i];
        if (!plain_match(s, q)) continue;
        if (s->pred && !((courier_stub_predicate_fn)s->pred->fn)(q, s->pred->user)) continue;
        x->stub = stub_retain(s);
    }
    for (size_t i = 0; snap && i < n; i++) stub_release(snap[i]);
    free(snap);
    record_release(q);
    if (rc == COURIER_OK && x->stub) { /* the coming answer, so the engine treats t as mocked */
        pthread_mutex_lock(&st->lock);
        t->mock = answer_locked(x->stub, false);
        pthread_mutex_unlock(&st->lock);
        if (!t->mock) rc = COURIER_E_NO_MEMORY;
    } else if (rc == COURIER_OK && mode == COURIER_STUBS_ONLY) {
        char why[300];
        snprintf(why, sizeof why, "no stub matched %.20s %.240s", t->method, t->url);
        if (!(t->mock = cr_mock_copy(NULL)) || !(t->mock->why = cr_strdup(why))) rc = COURIER_E_NO_MEMORY;
        else t->mock->error = COURIER_E_NO_STUB;
    }
    if (rc) {
        xfer_free(x);
        return cr_fail(err, rc, NULL);
    }
    t->stub = x;
    return COURIER_OK;
}

long cr_stubs_take(courier_engine *e, cr_transfer *t) {
    cr_stub_xfer *x = t->stub;
    if (t->attempts < 0 || x->delayed) { /* the timer of an answer's delay fired: it is taken */
        x->delayed = 0;
        return 0;
    }
    struct cr_stubs *st = e->stubs;
    courier_stub_request *q = record_of(t);
    cr_mock *m = NULL;
    pthread_mutex_lock(&st->lock);
    if (x->stub) m = answer_locked(x->stub, true);
    if (q) {
        q->stub_id = x->stub ? x->stub->id : 0;
        record_locked(st, q); /* no memory: the record misses it */
    }
    pthread_mutex_unlock(&st->lock);
    if (m) { /* no memory: the coming answer taken at prepare answers */
        cr_mock_free(t->mock);
        t->mock = m;
    }
    if (t->attempts > 0 && t->mock && t->mock->delay_ms > 0) { /* a retry's answer: its delay (the first's: route's) */
        x->delayed = 1;
        return t->mock->delay_ms;
    }
    return 0;
}

/* ---- HAR --------------------------------------------------------------------------------------- */

int courier_engine_record_har(courier_engine *e, const char *path, courier_error *err) {
    cr_error_clear(err);
    if (!e || !e->stubs) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine is NULL");
    struct cr_stubs *st = e->stubs;
    void *log = NULL;
    char *copy = NULL;
    if (path) {
        if (!(log = cr_har_new_log()) || !(copy = cr_strdup(path))) {
            cr_har_free_log(log);
            return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        }
        int rc = cr_har_write(log, path, err); /* an empty log now: a bad path fails here */
        if (rc) {
            cr_har_free_log(log);
            free(copy);
            return rc;
        }
    }
    pthread_mutex_lock(&st->lock);
    void *old = st->har_log;
    char *old_path = st->har_path;
    st->har_log = log;
    st->har_path = copy;
    atomic_store(&st->har_on, log != NULL);
    pthread_mutex_unlock(&st->lock);
    cr_har_free_log(old);
    free(old_path);
    return COURIER_OK;
}

void cr_har_observe(courier_engine *e, const cr_transfer *t, int code, const courier_response *resp) {
    (void)code;
    struct cr_stubs *st = e->stubs;
    if (!st || !atomic_load_explicit(&st->har_on, memory_order_relaxed) || !resp) return;
    if (resp->cache_status == COURIER_CACHE_STATUS_HIT || resp->cache_status == COURIER_CACHE_STATUS_STALE) return;
    pthread_mutex_lock(&st->lock);
    if (st->har_log && cr_har_append(st->har_log, t, resp) == COURIER_OK)
        cr_har_write(st->har_log, st->har_path, NULL); /* a failed write is tried again at the next entry */
    pthread_mutex_unlock(&st->lock);
}

/* The replay's stubs, one per method and URL, made as the entries come (cr_har_read). */
typedef struct replay_ctx {
    courier_stub **stubs;
    size_t count;
    size_t cap;
} replay_ctx;

static int replay_entry(void *ctxp, const cr_har_entry *entry, courier_error *err) {
    replay_ctx *ctx = ctxp;
    courier_stub *s = NULL;
    for (size_t i = 0; i < ctx->count && !s; i++)
        if (strcmp(ctx->stubs[i]->method, entry->method) == 0 && strcmp(ctx->stubs[i]->pattern, entry->url) == 0)
            s = ctx->stubs[i];
    int rc;
    if (!s) {
        if (ctx->count == ctx->cap) {
            size_t cap = ctx->cap ? ctx->cap * 2 : 16;
            courier_stub **p = realloc(ctx->stubs, cap * sizeof *p);
            if (!p) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            ctx->stubs = p;
            ctx->cap = cap;
        }
        if ((rc = courier_stub_new(&s, entry->method, entry->url, COURIER_URL_EXACT, err)) != COURIER_OK) return rc;
        if (!s->method || !s->pattern) { /* an empty method or URL in the file */
            stub_release(s);
            return cr_fail(err, COURIER_E_JSON, "a HAR entry has an empty request.method or request.url");
        }
        ctx->stubs[ctx->count++] = s;
    }
    int status = entry->status >= 100 && entry->status <= 999 ? entry->status : 200;
    if ((rc = courier_stub_add_response(s, status, entry->body, entry->body_len, NULL)) != COURIER_OK)
        return cr_fail(err, rc, "a HAR entry's response cannot be a stub answer");
    cr_kvlist *h = &s->answers[s->nanswers - 1]->headers;
    for (size_t i = 0; i < entry->headers.count; i++) {
        const cr_kv *kv = &entry->headers.items[i];
        if (cr_check_header(kv->name, strlen(kv->name), kv->value, strlen(kv->value)) != COURIER_OK) continue;
        if (cr_kvlist_add(h, kv->name, strlen(kv->name), kv->value, strlen(kv->value)))
            return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    return COURIER_OK;
}

int courier_engine_replay_har(size_t *out_count, courier_engine *e, const char *path, courier_error *err) {
    cr_error_clear(err);
    if (out_count) *out_count = 0;
    if (!e || !e->stubs || !path) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or path is NULL");
    replay_ctx ctx = {0};
    int rc = cr_har_read(path, replay_entry, &ctx, err);
    size_t added = 0;
    for (size_t i = 0; i < ctx.count; i++) {
        if (rc == COURIER_OK) {
            pthread_mutex_lock(&e->stubs->lock);
            rc = add_locked(e->stubs, ctx.stubs[i], NULL); /* the engine takes the stub */
            pthread_mutex_unlock(&e->stubs->lock);
            if (rc == COURIER_OK) {
                added++;
                continue;
            }
            rc = cr_fail(err, rc, NULL);
        }
        stub_release(ctx.stubs[i]);
    }
    free(ctx.stubs);
    if (out_count) *out_count = added;
    return rc;
}
