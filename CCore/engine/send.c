/*
 * send.c — what any thread hands the worker (engine.c): sends (asynchronous and synchronous),
 * cancels and posted work. Each goes into the engine's lists under core.lock and wakes the worker
 * (curl_multi_wakeup) when it waits; the worker takes them at its next turn. Below engine.c:
 * nothing here calls the worker's functions, so the engine's features (group.c, monitor.c,
 * stream_send.c, ws.c) send and post through this file.
 */
#include "engine/engine.h"

#include <stdlib.h>
#include <string.h>

int courier_send(uint64_t *out_id, courier_engine *e, const courier_request *r, courier_completion_fn done,
                 void *user, courier_error *err) {
    return cr_send(out_id, e, r, done, user, NULL, err);
}

int cr_send(uint64_t *out_id, courier_engine *e, const courier_request *r, courier_completion_fn done, void *user,
            courier_stream *stream, courier_error *err) {
    cr_error_clear(err);
    if (out_id) *out_id = 0;
    if (!e || !r) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or request is NULL");
    cr_transfer *t = NULL;
    cr_raised raised = {0};
    cr_raised *outer = cr_raise_catch(&raised);
    int rc = cr_transfer_prepare(e, r, &t, err);
    cr_raise_catch(outer);
    if (rc) {
        cr_raise_attach(&raised, err); /* user_error.c: err owns what a callback raised */
        return rc;
    }
    cr_raise_release(&raised);
    /* From here a refusal goes through cr_transfer_refuse (request.c): the FINISHED that ends
     * what the before-send interceptors began (a tracer's span), on this thread, then the free. */
    if ((rc = cr_catalog_attach(e, r, t)) != COURIER_OK) /* catalog.c: response descriptors */
        return cr_transfer_refuse(e, t, cr_fail(err, rc, NULL), err);
    /* session.c: adapters, retriers, the authenticator for this send; a send with any of them is
     * never shared with another (its attempts are its own) */
    if (cr_session_prepare(e, r, t)) return cr_transfer_refuse(e, t, cr_fail(err, COURIER_E_NO_MEMORY, NULL), err);
    if (t->sess) {
        free(t->coalesce_key);
        t->coalesce_key = NULL;
    }
    t->done = done;
    t->user = user;
    /* t->id: given by cr_transfer_prepare, before the customize and before-send callbacks */
    rc = cr_frozen_attach(e, r, t, err); /* journal.c: the request's freeze settings */
    if (!rc && stream) {
        /* stream_send.c: a stream is never frozen, cached or shared with another send. */
        if (t->freeze.policy != COURIER_FREEZE_NEVER)
            rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "a request that may be frozen cannot be a stream");
        else if (t->download_path)
            rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "a download to a file cannot be a stream");
        t->stream = stream;
        free(t->coalesce_key);
        t->coalesce_key = NULL;
        if (r->timeout_ms == 0) t->timeout_ms = 0; /* the engine's default does not bound a stream */
    } else if (!rc) {
        rc = cr_cache_before_send(e, r, t, err); /* cache key, policy, lookup (a hit is answered by the worker) */
    }
    if (rc) {
        t->stream = NULL;
        return cr_transfer_refuse(e, t, rc, err);
    }
    if (stream) cr_stream_set_id(stream, t->id);
    uint64_t taken_id = t->id;
    if (cr_frozen_offline_send(e, t)) { /* journal.c: offline and freezable: frozen without the worker */
        if (out_id) *out_id = taken_id;
        return COURIER_OK;
    }

    pthread_mutex_lock(&e->core.lock);
    if (e->core.closing) {
        pthread_mutex_unlock(&e->core.lock);
        return cr_transfer_refuse(e, t, cr_fail(err, COURIER_E_CLOSED, "the engine is closing"), err);
    }
    if (e->sched->guard_ms > 0 && !t->unguarded) {
        rc = cr_guard_check(&e->sched->guard, e->sched->guard_ms, t, err);
        if (rc) {
            pthread_mutex_unlock(&e->core.lock);
            return cr_transfer_refuse(e, t, rc, err);
        }
    }
    if (cr_idset_add(&e->live, t->id)) {
        pthread_mutex_unlock(&e->core.lock);
        return cr_transfer_refuse(e, t, cr_fail(err, COURIER_E_NO_MEMORY, NULL), err);
    }
    /* A wakeup only when the worker is about to wait (or waits) in curl_multi_poll, once: a worker
     * still working looks at `incoming` again before it waits, so waking it would cost a write here
     * and a turn of the loop there for nothing (senders on other threads, as Swift tasks and Python
     * threads are, met that once per request). The worker itself (a completion sending the next
     * request) never needs one. curl_multi_wakeup before the poll starts still ends it. */
    bool wake = e->polling && !pthread_equal(pthread_self(), e->worker);
    if (wake) e->polling = false;
    if (e->incoming_tail) e->incoming_tail->next = t;
    else e->incoming_head = t;
    e->incoming_tail = t;
    atomic_fetch_add(&e->core.queued, 1);
    uint64_t id = t->id; /* t may complete and be freed as soon as the lock is released */
    pthread_mutex_unlock(&e->core.lock);
    if (wake) curl_multi_wakeup(e->core.multi);
    if (out_id) *out_id = id;
    return COURIER_OK;
}

typedef struct sync_wait {
    pthread_mutex_t m;
    pthread_cond_t c;
    int done;
    int code;
    courier_response *resp;
    courier_error err;
} sync_wait;

static void sync_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    sync_wait *w = user;
    pthread_mutex_lock(&w->m);
    w->code = code;
    w->resp = resp;
    if (err) {
        w->err = *err;
        cr_error_forget_user((courier_error *)err); /* taken: w->err owns it now (user_error.c) */
    }
    w->done = 1;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
}

int courier_send_sync(courier_response **out_response, courier_engine *e, const courier_request *r,
                      courier_error *err) {
    cr_error_clear(err);
    if (out_response) *out_response = NULL;
    if (!e || !r) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or request is NULL");
    if (pthread_equal(pthread_self(), e->worker))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "courier_send_sync called on the engine's worker thread");
    sync_wait w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.m, NULL);
    pthread_cond_init(&w.c, NULL);
    int rc = courier_send(NULL, e, r, sync_done, &w, err);
    if (rc == COURIER_OK) {
        pthread_mutex_lock(&w.m);
        while (!w.done) pthread_cond_wait(&w.c, &w.m);
        pthread_mutex_unlock(&w.m);
        rc = w.code;
        if (err) *err = w.err;
        else cr_error_release_user(&w.err);
        if (out_response) *out_response = w.resp;
        else courier_response_free(w.resp);
    }
    pthread_cond_destroy(&w.c);
    pthread_mutex_destroy(&w.m);
    return rc;
}

int courier_cancel(courier_engine *e, uint64_t id) {
    if (!e) return COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&e->core.lock);
    if (!cr_idset_has(&e->live, id)) {
        pthread_mutex_unlock(&e->core.lock);
        return COURIER_E_NOT_FOUND;
    }
    if (e->ncancels == e->cap_cancels) {
        size_t cap = e->cap_cancels ? e->cap_cancels * 2 : 16;
        uint64_t *p = realloc(e->cancels, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&e->core.lock);
            return COURIER_E_NO_MEMORY;
        }
        e->cancels = p;
        e->cap_cancels = cap;
    }
    e->cancels[e->ncancels++] = id;
    pthread_mutex_unlock(&e->core.lock);
    curl_multi_wakeup(e->core.multi);
    return COURIER_OK;
}

int courier_cancel_all(courier_engine *e) {
    if (!e) return COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&e->core.lock);
    e->cancel_all = 1;
    pthread_mutex_unlock(&e->core.lock);
    curl_multi_wakeup(e->core.multi);
    return COURIER_OK;
}

int courier_engine_post(courier_engine *e, courier_work_fn fn, void *user, courier_error *err) {
    cr_error_clear(err);
    if (!e || !fn) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or function is NULL");
    pthread_mutex_lock(&e->core.lock);
    if (e->core.closing) {
        pthread_mutex_unlock(&e->core.lock);
        return cr_fail(err, COURIER_E_CLOSED, "the engine is closing");
    }
    if (e->nposts == e->cap_posts) {
        size_t cap = e->cap_posts ? e->cap_posts * 2 : 16;
        struct cr_post *grown = realloc(e->posts, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&e->core.lock);
            return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        }
        e->posts = grown;
        e->cap_posts = cap;
    }
    e->posts[e->nposts++] = (struct cr_post){fn, user};
    /* As courier_send: a wakeup only when the worker waits (or is about to), never from itself. */
    bool wake = e->polling && !pthread_equal(pthread_self(), e->worker);
    if (wake) e->polling = false;
    pthread_mutex_unlock(&e->core.lock);
    if (wake) curl_multi_wakeup(e->core.multi);
    return COURIER_OK;
}
