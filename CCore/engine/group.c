/*
 * group.c — batches and chains of requests that complete as one (HLNetworking's HLRequestGroup,
 * YTKNetwork's batch and chain requests, HTNetworking's batch signals and ifRequestSucceed).
 *
 * Built only on the public send path: each member is sent with courier_send with a completion of
 * its own and cancelled with courier_cancel, so retry, cache, mock, logging and monitors treat it
 * like any other request.
 *
 * Threads: `lock` guards the members' states, the counters and the flags. No user callback and no
 * courier_send runs under it (a customize callback may call back into the group); courier_cancel
 * may (it only queues the id). Whoever moves the group forward runs `pump`: the thread calling
 * start or cancel, or the worker thread completing a member. A member counts as in flight from
 * the moment it is picked until its member callback has returned, so the group cannot complete
 * while a build or member callback runs, and callbacks may add members.
 *
 * Lifetime: references are held by the user (new .. free), by the run (start .. after `done`
 * returned) and by each member on the wire (send .. end of its completion), so freeing the group
 * from any callback, or while it runs, is safe.
 */
#include "engine/engine.h"

#include <stdlib.h>
#include <string.h>

enum { M_PENDING = 0, M_RUNNING, M_DONE };

typedef struct cr_member {
    courier_group *g;
    size_t index;
    unsigned flags;
    int state;
    courier_request *request; /* owned until sent */
    cr_callback *build;       /* courier_group_build_fn, or NULL */
    uint64_t id;              /* 0 until sent */
    int building;             /* its build callback is running (courier_group_submit allowed) */
    int submitted;            /* courier_group_submit sent it (or tried) */
    int submit_rc;
    courier_error submit_err;
    int code;
    courier_response *response;
    courier_error err;
} cr_member;

struct courier_group {
    atomic_int refs;
    courier_engine *engine;
    courier_group_mode mode;
    pthread_mutex_t lock;
    /* Guarded by lock. */
    cr_member **members;
    size_t count;
    size_t cap;
    size_t next;      /* next member to start */
    size_t in_flight; /* picked and not yet through their member callback */
    long max_in_flight;
    int fail_fast;
    int started;
    int stopping;     /* no member starts any more */
    int cancelled;    /* courier_group_cancel was called (before or after start) */
    int finishing;    /* the run is ending: nothing starts or joins any more */
    int completed;    /* `done` may run or has run: responses may be taken */
    int stop_code;    /* the reason of the stop: a failure's code or COURIER_E_CANCELLED */
    long stop_index;  /* the member whose failure stopped the group, or -1 */
    cr_callback *done;
    cr_callback *member_cb;
};

static void member_free(cr_member *m) {
    courier_request_free(m->request);
    cr_callback_release(m->build);
    courier_response_free(m->response);
    free(m);
}

static void group_release(courier_group *g) {
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1) return;
    for (size_t i = 0; i < g->count; i++) member_free(g->members[i]);
    free(g->members);
    cr_callback_release(g->done);
    cr_callback_release(g->member_cb);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

static void group_retain(courier_group *g) { atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed); }

/* ---- building -------------------------------------------------------------------------------- */

int courier_group_new(courier_group **out, courier_engine *engine, courier_group_mode mode) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    *out = NULL;
    if (!engine || (mode != COURIER_GROUP_BATCH && mode != COURIER_GROUP_CHAIN)) return COURIER_E_INVALID_ARGUMENT;
    courier_group *g = calloc(1, sizeof *g);
    if (!g) return COURIER_E_NO_MEMORY;
    atomic_init(&g->refs, 1);
    g->engine = engine;
    g->mode = mode;
    g->stop_index = -1;
    pthread_mutex_init(&g->lock, NULL);
    *out = g;
    return COURIER_OK;
}

void courier_group_free(courier_group *g) {
    if (!g) return;
    courier_group_cancel(g); /* a running group stops; it is released when its run ends */
    group_release(g);
}

int courier_group_set_fail_fast(courier_group *g, int fail_fast) {
    if (!g) return COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&g->lock);
    int rc = g->started ? COURIER_E_INVALID_ARGUMENT : COURIER_OK;
    if (rc == COURIER_OK) g->fail_fast = fail_fast != 0;
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int courier_group_set_max_in_flight(courier_group *g, int max) {
    if (!g || max < 0) return COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&g->lock);
    int rc = g->started ? COURIER_E_INVALID_ARGUMENT : COURIER_OK;
    if (rc == COURIER_OK) g->max_in_flight = max;
    pthread_mutex_unlock(&g->lock);
    return rc;
}

int courier_group_set_member_callback(courier_group *g, courier_group_member_fn fn, void *user,
                                      courier_user_free_fn user_free) {
    if (!g) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&g->lock);
    int started = g->started;
    pthread_mutex_unlock(&g->lock);
    if (started) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    int rc;
    cr_callback *cb = cr_callback_new((void (*)(void))fn, user, user_free, &rc);
    if (rc) return rc;
    cr_callback_release(g->member_cb);
    g->member_cb = cb;
    return COURIER_OK;
}

/* Appends a member; takes `request` and `build` in every case. */
static int add_member(courier_group *g, courier_request *request, cr_callback *build, unsigned flags,
                      size_t *out_index) {
    cr_member *m = calloc(1, sizeof *m);
    if (!m) {
        courier_request_free(request);
        cr_callback_release(build);
        return COURIER_E_NO_MEMORY;
    }
    m->g = g;
    m->flags = flags;
    m->request = request;
    m->build = build;
    pthread_mutex_lock(&g->lock);
    int rc = COURIER_OK;
    if (g->finishing) {
        rc = COURIER_E_INVALID_ARGUMENT;
    } else if (g->count == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 8;
        cr_member **p = realloc(g->members, cap * sizeof *p);
        if (!p) rc = COURIER_E_NO_MEMORY;
        else {
            g->members = p;
            g->cap = cap;
        }
    }
    if (rc == COURIER_OK) {
        m->index = g->count;
        g->members[g->count++] = m;
        if (out_index) *out_index = m->index;
    }
    pthread_mutex_unlock(&g->lock);
    if (rc != COURIER_OK) member_free(m);
    return rc; /* a running group picks the member up at its next step */
}

#define CR_GROUP_KNOWN_FLAGS ((unsigned)COURIER_GROUP_CONTINUE_ON_FAILURE)

int courier_group_add(size_t *out_index, courier_group *g, courier_request *request, unsigned flags) {
    if (!g || !request || (flags & ~CR_GROUP_KNOWN_FLAGS)) {
        courier_request_free(request);
        return COURIER_E_INVALID_ARGUMENT;
    }
    return add_member(g, request, NULL, flags, out_index);
}

int courier_group_add_built(size_t *out_index, courier_group *g, courier_group_build_fn build, void *user,
                            courier_user_free_fn user_free, unsigned flags) {
    if (!g || !build || (flags & ~CR_GROUP_KNOWN_FLAGS)) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    int rc;
    cr_callback *cb = cr_callback_new((void (*)(void))build, user, user_free, &rc);
    if (!cb) return rc;
    return add_member(g, NULL, cb, flags, out_index);
}

/* ---- running --------------------------------------------------------------------------------- */

static int counts_as_failure(const cr_member *m) {
    return m->code != COURIER_OK && !(m->flags & COURIER_GROUP_CONTINUE_ON_FAILURE);
}

/* Stops the group (lock held): no member starts any more. Returns how many ids were written to
 * `ids` (the members on the wire, to cancel once the lock is released); *ids is malloc'd. */
static size_t stop_locked(courier_group *g, int code, long index, uint64_t **ids) {
    *ids = NULL;
    if (g->stopping) return 0;
    g->stopping = 1;
    g->stop_code = code;
    g->stop_index = index;
    size_t n = 0;
    for (size_t i = 0; i < g->count; i++)
        if (g->members[i]->state == M_RUNNING && g->members[i]->id) n++;
    if (!n || !(*ids = malloc(n * sizeof **ids))) return 0;
    size_t k = 0;
    for (size_t i = 0; i < g->count; i++)
        if (g->members[i]->state == M_RUNNING && g->members[i]->id) (*ids)[k++] = g->members[i]->id;
    return k;
}

static void cancel_ids(courier_group *g, uint64_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) courier_cancel(g->engine, ids[i]);
    free(ids);
}

static void pump(courier_group *g);

/* Records a member's result and tells the member callback; then the member leaves the in-flight
 * count. `resp` and `err` are taken / copied. Called once per picked member, on any thread. */
static void settle(cr_member *m, int code, courier_response *resp, const courier_error *err) {
    courier_group *g = m->g;
    uint64_t *ids = NULL;
    size_t nids = 0;
    pthread_mutex_lock(&g->lock);
    m->state = M_DONE;
    m->code = code;
    m->response = resp;
    if (code != COURIER_OK) {
        if (err) m->err = *err;
        else cr_fail(&m->err, code, NULL);
        cr_error_forget_user(&m->err); /* a copy: a raised user error stays with its owner (user_error.c) */
        m->err.code = code;
    }
    if (counts_as_failure(m) && (g->mode == COURIER_GROUP_CHAIN || g->fail_fast))
        nids = stop_locked(g, code, (long)m->index, &ids);
    cr_callback *cb = cr_callback_retain(g->member_cb);
    pthread_mutex_unlock(&g->lock);
    if (nids) cancel_ids(g, ids, nids);
    if (cb) ((courier_group_member_fn)cb->fn)(g, m->index, code, resp, cb->user);
    cr_callback_release(cb);
    pthread_mutex_lock(&g->lock);
    g->in_flight--;
    pthread_mutex_unlock(&g->lock);
}

static void on_member_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    cr_member *m = user;
    courier_group *g = m->g;
    settle(m, code, resp, err);
    pump(g);
    group_release(g); /* the member's reference, taken when it was sent */
}

/* The group's code once it completes (lock held). */
static int final_code_locked(courier_group *g, long *index) {
    *index = g->stop_index;
    if (g->stopping && g->stop_code != COURIER_OK) return g->stop_code;
    for (size_t i = 0; i < g->count; i++) {
        if (counts_as_failure(g->members[i])) {
            *index = (long)i;
            return g->members[i]->code;
        }
    }
    *index = -1;
    return COURIER_OK;
}

/* Ends the run: members never started are settled as cancelled, then `done` runs once. */
static void finish_group(courier_group *g) {
    pthread_mutex_lock(&g->lock);
    size_t first = g->next;
    g->next = g->count;
    cr_callback *cb = cr_callback_retain(g->member_cb);
    for (size_t i = first; i < g->count; i++) {
        cr_member *m = g->members[i];
        m->state = M_DONE;
        m->code = COURIER_E_CANCELLED;
        cr_fail(&m->err, COURIER_E_CANCELLED, "not sent: the group stopped");
        courier_request_free(m->request);
        m->request = NULL;
    }
    size_t count = g->count;
    pthread_mutex_unlock(&g->lock);
    for (size_t i = first; cb && i < count; i++)
        ((courier_group_member_fn)cb->fn)(g, i, COURIER_E_CANCELLED, NULL, cb->user);
    cr_callback_release(cb);

    pthread_mutex_lock(&g->lock);
    long index;
    int code = final_code_locked(g, &index);
    g->completed = 1;
    cr_callback *done = g->done;
    g->done = NULL;
    pthread_mutex_unlock(&g->lock);
    if (done && done->fn) ((courier_group_done_fn)done->fn)(g, code, index, done->user);
    cr_callback_release(done);
    group_release(g); /* the run's reference */
}

/* Builds member m's request (outside the lock). Returns COURIER_OK with *out (new) or NULL (skip),
 * or the failure code with err filled. */
static int build_member(courier_group *g, cr_member *m, courier_request **out, courier_error *err) {
    *out = NULL;
    if (!m->build) {
        *out = m->request;
        m->request = NULL;
        return COURIER_OK;
    }
    int prev_code = COURIER_OK;
    const courier_response *prev = NULL;
    if (g->mode == COURIER_GROUP_CHAIN && m->index > 0) {
        pthread_mutex_lock(&g->lock);
        cr_member *p = g->members[m->index - 1];
        prev_code = p->code;
        prev = p->response; /* stays until the group is freed: taking needs a completed group */
        pthread_mutex_unlock(&g->lock);
    }
    courier_request *req = NULL;
    int rc = ((courier_group_build_fn)m->build->fn)(g, m->index, prev_code, prev, &req, m->build->user);
    if (rc != COURIER_OK) {
        courier_request_free(req);
        return cr_fail(err, rc < 0 ? rc : COURIER_E_INVALID_ARGUMENT, "the build callback failed the member");
    }
    *out = req;
    return COURIER_OK;
}

static void pump(courier_group *g) {
    for (;;) {
        pthread_mutex_lock(&g->lock);
        if (g->finishing || !g->started) {
            pthread_mutex_unlock(&g->lock);
            return;
        }
        cr_member *m = NULL;
        if (!g->stopping && g->next < g->count) {
            size_t limit = g->mode == COURIER_GROUP_CHAIN ? 1
                           : g->max_in_flight > 0         ? (size_t)g->max_in_flight
                                                          : SIZE_MAX;
            if (g->in_flight < limit) {
                m = g->members[g->next++];
                m->state = M_RUNNING;
                g->in_flight++;
            }
        }
        if (!m) {
            int finish = g->in_flight == 0 && (g->stopping || g->next == g->count);
            if (finish) g->finishing = 1; /* exactly one thread finishes the run */
            pthread_mutex_unlock(&g->lock);
            if (finish) finish_group(g);
            return;
        }
        pthread_mutex_unlock(&g->lock);

        courier_error err;
        cr_error_clear(&err);
        courier_request *req = NULL;
        pthread_mutex_lock(&g->lock);
        m->building = 1;
        pthread_mutex_unlock(&g->lock);
        int rc = build_member(g, m, &req, &err);
        pthread_mutex_lock(&g->lock);
        m->building = 0;
        int submitted = m->submitted;
        pthread_mutex_unlock(&g->lock);
        if (submitted) { /* the build callback sent it with courier_group_submit */
            courier_request_free(req);
            if (m->submit_rc != COURIER_OK) {
                settle(m, m->submit_rc, NULL, &m->submit_err);
                continue;
            }
            pthread_mutex_lock(&g->lock);
            int cancel = g->stopping && m->state == M_RUNNING;
            uint64_t sent_id = m->id;
            pthread_mutex_unlock(&g->lock);
            if (cancel) courier_cancel(g->engine, sent_id);
            continue;
        }
        if (rc == COURIER_OK && !req) { /* the build callback skipped this member */
            settle(m, COURIER_OK, NULL, NULL);
            continue;
        }
        if (rc == COURIER_OK) {
            pthread_mutex_lock(&g->lock);
            int stopping = g->stopping;
            pthread_mutex_unlock(&g->lock);
            if (stopping) rc = cr_fail(&err, COURIER_E_CANCELLED, "not sent: the group stopped");
        }
        uint64_t id = 0;
        if (rc == COURIER_OK) {
            group_retain(g); /* the member's reference, released by its completion */
            rc = courier_send(&id, g->engine, req, on_member_done, m, &err);
            if (rc != COURIER_OK) group_release(g);
        }
        courier_request_free(req);
        if (rc != COURIER_OK) {
            settle(m, rc, NULL, &err);
            cr_error_release_user(&err); /* a member's raised user error is not kept by the group */
            continue;
        }
        pthread_mutex_lock(&g->lock);
        m->id = id;
        int cancel = g->stopping && m->state == M_RUNNING;
        pthread_mutex_unlock(&g->lock);
        if (cancel) courier_cancel(g->engine, id);
    }
}

int courier_group_submit(courier_group *g, size_t index, const courier_request *request, courier_error *err) {
    cr_error_clear(err);
    if (!g || !request) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "group or request is NULL");
    pthread_mutex_lock(&g->lock);
    cr_member *m = index < g->count ? g->members[index] : NULL;
    if (!m || !m->building || m->submitted) {
        pthread_mutex_unlock(&g->lock);
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "not inside this member's build callback, or sent already");
    }
    m->submitted = 1;
    int stopping = g->stopping;
    pthread_mutex_unlock(&g->lock);
    courier_error local;
    cr_error_clear(&local);
    uint64_t id = 0;
    int rc;
    if (stopping) {
        rc = cr_fail(&local, COURIER_E_CANCELLED, "not sent: the group stopped");
    } else {
        group_retain(g); /* the member's reference, released by its completion */
        rc = courier_send(&id, g->engine, request, on_member_done, m, &local);
        if (rc != COURIER_OK) group_release(g);
    }
    pthread_mutex_lock(&g->lock);
    m->submit_rc = rc;
    m->submit_err = local;
    cr_error_forget_user(&m->submit_err); /* err below owns what a callback raised */
    if (rc == COURIER_OK) m->id = id;
    pthread_mutex_unlock(&g->lock);
    if (err) *err = local;
    else cr_error_release_user(&local);
    return rc;
}

int courier_group_start(courier_group *g, courier_group_done_fn done, void *user, courier_user_free_fn user_free) {
    if (!g) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&g->lock);
    int started = g->started;
    pthread_mutex_unlock(&g->lock);
    if (started) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    /* A registration even without `done`, so the run's end has one place to release `user`. */
    cr_callback *cb = malloc(sizeof *cb);
    if (!cb) {
        if (user_free) user_free(user);
        return COURIER_E_NO_MEMORY;
    }
    atomic_init(&cb->refs, 1);
    cb->fn = (void (*)(void))done;
    cb->user = user;
    cb->user_free = user_free;

    pthread_mutex_lock(&g->lock);
    if (g->started) { /* lost a race with another start */
        pthread_mutex_unlock(&g->lock);
        cr_callback_release(cb);
        return COURIER_E_INVALID_ARGUMENT;
    }
    g->done = cb;
    g->started = 1;
    group_retain(g); /* the run's reference, released by finish_group */
    if (g->cancelled && !g->stopping) {
        uint64_t *ids;
        stop_locked(g, COURIER_E_CANCELLED, -1, &ids); /* nothing is on the wire yet */
        free(ids);
    }
    pthread_mutex_unlock(&g->lock);
    group_retain(g); /* pump may finish the run; keep g valid until it returns */
    pump(g);
    group_release(g);
    return COURIER_OK;
}

int courier_group_cancel(courier_group *g) {
    if (!g) return COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&g->lock);
    if (g->finishing) {
        pthread_mutex_unlock(&g->lock);
        return COURIER_E_NOT_FOUND;
    }
    g->cancelled = 1;
    if (!g->started) { /* remembered: start then completes at once */
        pthread_mutex_unlock(&g->lock);
        return COURIER_OK;
    }
    uint64_t *ids = NULL;
    size_t n = stop_locked(g, COURIER_E_CANCELLED, -1, &ids);
    group_retain(g);
    pthread_mutex_unlock(&g->lock);
    cancel_ids(g, ids, n);
    pump(g); /* completes the run now if nothing is on the wire */
    group_release(g);
    return COURIER_OK;
}

/* ---- results --------------------------------------------------------------------------------- */

size_t courier_group_count(const courier_group *cg) {
    courier_group *g = (courier_group *)cg;
    if (!g) return 0;
    pthread_mutex_lock(&g->lock);
    size_t n = g->count;
    pthread_mutex_unlock(&g->lock);
    return n;
}

int courier_group_result(int *code, const courier_response **response, uint64_t *request_id, const courier_group *cg,
                         size_t index, courier_error *error) {
    courier_group *g = (courier_group *)cg;
    if (code) *code = COURIER_OK;
    if (response) *response = NULL;
    if (request_id) *request_id = 0;
    cr_error_clear(error);
    if (!g) return cr_fail(error, COURIER_E_INVALID_ARGUMENT, "courier_group_result: NULL group");
    pthread_mutex_lock(&g->lock);
    int rc = COURIER_E_NOT_FOUND;
    size_t count = g->count;
    if (index < g->count && g->members[index]->state == M_DONE) {
        cr_member *m = g->members[index];
        if (code) *code = m->code;
        if (response) *response = m->response;
        if (request_id) *request_id = m->id;
        if (error && m->code != COURIER_OK) *error = m->err;
        rc = COURIER_OK;
    } else if (index < g->count && request_id) {
        *request_id = g->members[index]->id;
    }
    pthread_mutex_unlock(&g->lock);
    if (rc != COURIER_OK)
        cr_fail(error, rc, index < count ? "member %zu of the group has no result yet"
                                         : "no member %zu in the group (it has %zu)", index, count);
    return rc;
}

courier_response *courier_group_take_response(courier_group *g, size_t index) {
    if (!g) return NULL;
    pthread_mutex_lock(&g->lock);
    courier_response *r = NULL;
    if (g->completed && index < g->count) {
        r = g->members[index]->response;
        g->members[index]->response = NULL;
    }
    pthread_mutex_unlock(&g->lock);
    return r;
}

courier_engine *courier_group_engine(const courier_group *g) { return g ? g->engine : NULL; }
