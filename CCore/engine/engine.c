/*
 * engine.c — lifecycle and the worker thread with its curl multi loop: it takes what send.c queues
 * (sends, cancels, posted work) and answers each transfer. The store directory is store_dir.c's.
 *
 * Threads: any thread submits; submissions go into `incoming` under `lock` and wake the worker with
 * curl_multi_wakeup. Only the worker touches the multi handle, the easy handles and the active list.
 * Every transfer completes exactly once: its id stays in `live` from submission until just before
 * its completion runs.
 */
#include "engine/engine.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CR_POOL_MAX 64

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_OK;

static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* ---- transfer states and the scheduler's lists (worker thread only) ---------------------------- */

static const cr_session_ops session_ops; /* below, with the queues it names */

int cr_sched_new(courier_engine *e) {
    e->sched = calloc(1, sizeof *e->sched);
    if (!e->sched) return COURIER_E_NO_MEMORY;
    e->sched->rng = (uint64_t)cr_mono_ms() ^ (uint64_t)(uintptr_t)e ^ 0x9E3779B97F4A7C15ULL;
    if (!e->sched->rng) e->sched->rng = 1;
    e->sched->guard_ms = e->core.config->sched ? e->core.config->sched->guard_ms : 0;
    atomic_init(&e->mock_enabled, e->core.config->sched ? e->core.config->sched->mock_enabled : 0);
    int rc = cr_stubs_open(e); /* stubs.c */
    if (rc) return rc;
    return cr_session_open(e, &session_ops); /* session.c */
}

void cr_sched_free(courier_engine *e) {
    cr_stubs_close(e); /* stubs.c */
    if (!e->sched) return;
    for (size_t i = 0; i < e->sched->nhosts; i++) free(e->sched->hosts[i].host);
    free(e->sched->hosts);
    cr_guard_free(e->sched->guard);
    free(e->sched);
    e->sched = NULL;
}

/* The time the engine's timers (retry backoff, mock delays) run on: the configured clock when the
 * configuration has one (tests advance it instead of sleeping; the worker looks at least once a
 * second), else a monotonic clock. */
static int64_t timer_now(courier_engine *e) {
    const cr_callback *clock = e->core.config->clock;
    return clock ? ((courier_clock_fn)clock->fn)(clock->user) : cr_mono_ms();
}

static bool on_wire(int state) { return state == CR_T_ACTIVE || state == CR_T_CUSTOM; }

/* Moves t to a new state, keeping the pending counters (queued vs on the wire) right. */
static void set_state(courier_engine *e, cr_transfer *t, int state) {
    bool was = on_wire(t->state), now = on_wire(state);
    if (t->caller_gone) {
        /* Counted no more: the counters hold what callers still wait for. */
    } else if (was && !now) {
        atomic_fetch_sub(&e->active, 1);
        atomic_fetch_add(&e->core.queued, 1);
    } else if (!was && now) {
        atomic_fetch_sub(&e->core.queued, 1);
        atomic_fetch_add(&e->active, 1);
    }
    t->state = state;
}

static cr_host_count *host_slot(courier_engine *e, const char *host) {
    struct cr_sched *s = e->sched;
    for (size_t i = 0; i < s->nhosts; i++)
        if (strcmp(s->hosts[i].host, host) == 0) return &s->hosts[i];
    cr_host_count *p = realloc(s->hosts, (s->nhosts + 1) * sizeof *p);
    if (!p) return NULL;
    s->hosts = p;
    p[s->nhosts] = (cr_host_count){cr_strdup(host), 0};
    if (!p[s->nhosts].host) return NULL;
    return &p[s->nhosts++];
}

static void active_link(courier_engine *e, cr_transfer *t) {
    t->next = e->active_head;
    t->prev = NULL;
    if (e->active_head) e->active_head->prev = t;
    e->active_head = t;
}

static void active_unlink(courier_engine *e, cr_transfer *t) {
    if (t->prev) t->prev->next = t->next;
    else e->active_head = t->next;
    if (t->next) t->next->prev = t->prev;
    t->next = t->prev = NULL;
}

static int prio_index(int priority) { return priority > 0 ? 0 : priority < 0 ? 2 : 1; }

static void waiting_push(courier_engine *e, cr_transfer *t) {
    int q = prio_index(t->priority);
    t->next = NULL;
    if (e->sched->waiting_tail[q]) e->sched->waiting_tail[q]->next = t;
    else e->sched->waiting[q] = t;
    e->sched->waiting_tail[q] = t;
    set_state(e, t, CR_T_WAITING);
}

static void waiting_unlink(courier_engine *e, cr_transfer *t) {
    int q = prio_index(t->priority);
    cr_transfer *prev = NULL;
    for (cr_transfer *x = e->sched->waiting[q]; x; prev = x, x = x->next) {
        if (x != t) continue;
        if (prev) prev->next = x->next;
        else e->sched->waiting[q] = x->next;
        if (e->sched->waiting_tail[q] == x) e->sched->waiting_tail[q] = prev;
        x->next = NULL;
        return;
    }
}

static void timer_push(courier_engine *e, cr_transfer *t, int64_t due_ms) {
    t->due_ms = due_ms;
    cr_transfer **pp = &e->sched->timers;
    while (*pp && (*pp)->due_ms <= due_ms) pp = &(*pp)->next;
    t->next = *pp;
    *pp = t;
    set_state(e, t, CR_T_TIMER);
}

static void timer_unlink(courier_engine *e, cr_transfer *t) {
    for (cr_transfer **pp = &e->sched->timers; *pp; pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            t->next = NULL;
            return;
        }
    }
}

/* ---- answering the caller ---------------------------------------------------------------------- */

/* Tells t's caller (once): runs the completion and forgets the caller. t stays alive. */
static void answer(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err) {
    if (t->caller_gone) {
        courier_response_free(resp);
        return;
    }
    t->caller_gone = 1;
    atomic_fetch_sub(on_wire(t->state) ? &e->active : &e->core.queued, 1); /* before the caller looks */
    pthread_mutex_lock(&e->core.lock);
    cr_idset_remove(&e->live, t->id);
    pthread_mutex_unlock(&e->core.lock);
    if (resp) {
        resp->id = t->id;
        resp->attempts = t->attempts;
        resp->waited_s = t->waited_s;
    }
    /* user_error.c: an error a callback raised rides with the failure, for the completion only */
    if (code != COURIER_OK && err) cr_raise_attach(&t->raised, err);
    else cr_raise_release(&t->raised);
    cr_raised *outer = cr_raise_catch(NULL); /* monitors and the completion raise nowhere */
    cr_event_finished(e, t, code, resp, err);
    if (t->done) t->done(t->id, code, resp, code == COURIER_OK ? NULL : err, t->user);
    else courier_response_free(resp);
    cr_raise_catch(outer);
    cr_error_release_user(err); /* the completion has returned: what it did not keep is released */
}

/* Frees a transfer that is off every list. */
static void discard(courier_engine *e, cr_transfer *t) {
    if (!t->caller_gone) atomic_fetch_sub(on_wire(t->state) ? &e->active : &e->core.queued, 1);
    cr_transfer_free(t);
}

static void answer_code(courier_engine *e, cr_transfer *t, int code, const char *why) {
    courier_error err;
    cr_fail(&err, code, "%s", why);
    answer(e, t, code, NULL, &err);
}

static void send_hop(courier_engine *e, cr_transfer *t, courier_response *resp, cr_transfer *next, courier_error *err);

/* Every answer a transport produced for a caller ends here: the one place where a response is
 * judged (after-receive interceptors, JSON, HTTP status, validator) before the caller sees it.
 * Later stages (cache write) belong here too, so real, mocked, coalesced and custom-transport
 * responses are treated alike. */
static void judge(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err);

static void finish(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err) {
    /* Callbacks run while judging (redirect hook, interceptors, decoders, validator) raise into
     * this send's slot (user_error.c). */
    cr_raised *outer = cr_raise_catch(&t->raised);
    judge(e, t, code, resp, err);
    cr_raise_catch(outer);
}

static void judge(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err) {
    if (t->stream_live) { /* stream.c: its body went to the reader; the reader judges it */
        cr_redirect_attach(t, resp);
        answer(e, t, code, resp, err);
        return;
    }
    code = cr_cache_on_answer(e, t, code, &resp, err); /* cache: a 304 merged, or stale-if-error */
    if (code == COURIER_OK && resp && cr_redirect_wanted(t, resp)) {
        /* redirect.c: the next hop takes the caller over (or the chain ends here with a code). */
        cr_transfer *next = NULL;
        int rc = cr_redirect_next(e, t, resp, &next, err);
        if (rc == COURIER_OK) {
            send_hop(e, t, resp, next, err);
            return;
        }
        if (rc < 0) code = rc; /* too many, refused, not replayable: the 3xx stays attached */
    }
    cr_redirect_attach(t, resp); /* the chain, on the final answer */
    const cr_sched_conf *sc = e->core.config->sched;
    for (size_t i = 0; sc && resp && code == COURIER_OK && i < sc->ninterceptors; i++) {
        if (!sc->interceptors[i].after) continue;
        courier_response *before = resp;
        courier_metrics metrics = resp->metrics;
        int rc = sc->interceptors[i].after(t->id, &resp, sc->interceptors[i].owner->user);
        if (resp && resp != before && !cr_response_detach(resp)) {
            /* A replacement built by hand still describes this request and its transfer (it may
             * be a cached response, whose strings share one block: detached first). */
            if (!resp->url || !resp->url[0]) cr_set_string(&resp->url, t->url);
            if (!resp->method || !resp->method[0]) cr_set_string(&resp->method, t->method);
            if (resp->metrics.total_s == 0 && resp->metrics.bytes_received == 0) resp->metrics = metrics;
        }
        if (rc != COURIER_OK) code = cr_fail(err, rc < 0 ? rc : COURIER_E_INVALID_RESULT, "an interceptor failed the response");
        else if (!resp) code = cr_fail(err, COURIER_E_INTERNAL, "an interceptor removed the response");
    }
    if (code == COURIER_OK && resp) code = cr_json_finish(t, resp, err); /* envelope, key paths, mappings */
    if (code == COURIER_OK && resp) {
        if (!cr_status_accepted(&t->status_codes, resp->status)) { /* route.c: 400+, or the request's set */
            code = cr_fail(err, COURIER_E_HTTP_STATUS, "HTTP status %d", resp->status);
            err->http_status = resp->status;
        } else if (t->validator && !((courier_validator_fn)t->validator->fn)(resp, t->validator->user)) {
            /* a validator that raised fails the send with the code it raised */
            code = cr_fail(err, t->raised.code ? t->raised.code : COURIER_E_INVALID_RESULT,
                           "the validator rejected the response");
            err->http_status = resp->status;
        }
    }
    cr_raise_catch(NULL); /* what follows (freeze, cache write, the completion) is not judging */
    if (cr_frozen_defer(e, t, code, resp, err)) return; /* journal.c: frozen, answered after the commit */
    if (cr_cache_defer(e, t, code, resp, err)) return; /* cache write: answered by cr_cache_flush */
    answer(e, t, code, resp, err);
}

/* The completion of a redirect hop the cache stored: nobody waits for it (the next hop answers). */
static void hop_stored(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id, (void)code, (void)err, (void)user;
    courier_response_free(resp);
}

/* ---- answering after a commit (cr_answer_ops: the cache's writes, the journal's freezes) ------- */

static cr_later *later_detach(courier_engine *e, cr_transfer *t, bool take) {
    if (take) return (cr_later *)t;
    cr_transfer *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->id = t->id;
    a->engine = e;
    a->done = t->done;
    a->user = t->user;
    a->attempts = t->attempts;
    a->waited_s = t->waited_s;
    /* What the finished event and log line say of the request (issue 28: a cache write's line
     * read "GET ? -> 200 (0.0 ms)"): copies, since t stays in use until the engine frees it. */
    a->obs_t0_ns = t->obs_t0_ns;
    if ((t->method && !(a->method = cr_strdup(t->method))) || (t->url && !(a->url = cr_strdup(t->url)))) {
        cr_transfer_free(a);
        return NULL;
    }
    cr_raise_move(&a->raised, &t->raised); /* user_error.c: answered with the caller */
    t->caller_gone = 1;
    return (cr_later *)a;
}

/* A caller detached for later (a cache write's, a freeze's) is answered: the handle is a detached
 * copy of the caller's fields, or a transfer handed over whole. */
static void later_answer(courier_engine *e, cr_later *l, int code, courier_response *resp, courier_error *err) {
    cr_transfer *t = (cr_transfer *)l;
    if (t->done == hop_stored) { /* a redirect's 3xx, written: its chain went on without it */
        courier_response_free(resp);
        cr_transfer_free(t);
        return;
    }
    answer(e, t, code, resp, err);
    cr_transfer_free(t);
}

static void later_discard(cr_later *l) { cr_transfer_free((cr_transfer *)l); }

static const cr_answer_ops later_ops = {later_detach, later_answer, later_discard};

/* What the journal may ask of the engine (journal.c reaches the engine through this alone). */
static courier_reachability journal_reachability(const courier_engine *e) {
    return (courier_reachability)courier_reachability_status(e);
}
static const cr_journal_ops journal_ops = {&later_ops, courier_send, cr_monitor_offline, cr_monitor_tick,
                                           cr_monitor_dispatch, journal_reachability};

/* ---- the wire ---------------------------------------------------------------------------------- */

static void release_easy(courier_engine *e, cr_transfer *t) {
    if (!t->easy) return;
    curl_multi_remove_handle(e->core.multi, t->easy);
    if (t->stream_live) { /* a streamed handle may end paused: never reused */
        cr_easy_cleanup(t->easy);
        t->easy = NULL;
        return;
    }
    if (e->npool < CR_POOL_MAX) {
        /* Pooled handles keep the engine's shared options; one a transfer changed in other ways
         * (a method, a body, progress) starts over. */
        if (t->easy_dirty) {
            cr_transport_rebase(e, t->easy); /* transport.c */
            t->easy_set.known = 0; /* the per-transfer options are curl's defaults again */
        }
        e->pool_set[e->npool] = t->easy_set;
        e->pool[e->npool++] = t->easy;
    } else {
        cr_easy_cleanup(t->easy);
    }
    t->easy = NULL;
}

/* Takes an HTTP transfer off the wire (host count, active list, easy handle). */
static void off_wire(courier_engine *e, cr_transfer *t) {
    if (t->http.idle_ms) e->idle_watch--;
    active_unlink(e, t);
    cr_pool_release(t); /* pool.c: its connection is no longer in use by it */
    release_easy(e, t);
    cr_host_count *h = host_slot(e, t->host);
    if (h && h->active > 0) h->active--;
    e->sched->active_http--;
}

static void after_attempt(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err);

static void start_custom(courier_engine *e, cr_transfer *t) {
    if (t->call) cr_raise_release(&t->call->raised);
    free(t->call);
    t->call = calloc(1, sizeof *t->call);
    if (!t->call) {
        courier_error err;
        cr_fail(&err, COURIER_E_NO_MEMORY, NULL);
        after_attempt(e, t, COURIER_E_NO_MEMORY, NULL, &err);
        return;
    }
    t->call->t = t;
    t->call->e = e;
    atomic_init(&t->call->completed, 0);
    t->attempts++;
    set_state(e, t, CR_T_CUSTOM);
    active_link(e, t);
    cr_raised *outer = cr_raise_catch(&t->raised);
    int rc = t->custom->vt.start(t->call, t->custom->owner->user);
    cr_raise_catch(outer);
    if (rc != COURIER_OK) {
        active_unlink(e, t);
        set_state(e, t, CR_T_NEW);
        courier_error err;
        cr_fail(&err, rc < 0 ? rc : COURIER_E_INTERNAL, "the transport '%s' refused the request", t->custom->name);
        after_attempt(e, t, err.code, NULL, &err);
    }
}

static void start_http(courier_engine *e, cr_transfer *t) {
    if (cr_monitor_blocks(e, t)) { /* monitor.c: offline fails fast (finish freezes it per policy) */
        courier_error oerr;
        cr_fail(&oerr, COURIER_E_OFFLINE, "the network monitor says offline");
        after_attempt(e, t, COURIER_E_OFFLINE, NULL, &oerr);
        return;
    }
    cr_buf_free(&t->resp_body);
    cr_kvlist_clear(&t->resp_headers);
    t->hdr_block.len = 0;
    t->hdr_count = 0;
    t->too_large = t->oom = 0;
    memset(&t->wire, 0, sizeof t->wire); /* framing and idle state (transport.c) */
    t->wire.content_length = -1;
    if (!t->errbuf && !(t->errbuf = malloc(CURL_ERROR_SIZE))) {
        courier_error merr;
        cr_fail(&merr, COURIER_E_NO_MEMORY, NULL);
        after_attempt(e, t, COURIER_E_NO_MEMORY, NULL, &merr);
        return;
    }
    t->errbuf[0] = '\0';
    free(t->lines);
    t->lines = NULL;
    if (t->slist) {
        curl_slist_free_all(t->slist);
        t->slist = NULL;
    }
    t->easy_set.known = 0;
    if (e->npool) {
        e->npool--;
        t->easy = e->pool[e->npool];
        t->easy_set = e->pool_set[e->npool];
    } else {
        t->easy = NULL;
    }
    int rc = COURIER_OK;
    cr_jar_refresh(e); /* cookies.c: what another engine or process wrote to the store's jar */
    if (!t->easy && (t->easy = curl_easy_init()) != NULL) rc = cr_transport_base(e, t->easy);
    if (rc == COURIER_OK) rc = t->easy ? cr_transport_setup(e, t) : COURIER_E_NO_MEMORY;
    if (rc == COURIER_OK && curl_multi_add_handle(e->core.multi, t->easy) != CURLM_OK) rc = COURIER_E_INTERNAL;
    if (rc != COURIER_OK) {
        cr_easy_cleanup(t->easy);
        t->easy = NULL;
        courier_error err;
        cr_fail(&err, rc, "cannot start the transfer");
        after_attempt(e, t, rc, NULL, &err);
        return;
    }
    t->attempts++;
    cr_host_count *h = host_slot(e, t->host);
    if (h) h->active++;
    e->sched->active_http++;
    if (t->http.idle_ms) e->idle_watch++;
    set_state(e, t, CR_T_ACTIVE);
    active_link(e, t);
    cr_event_did_send(e, t);
}

/* Starts waiting transfers, highest priority first, while the limits allow. */
static void pump(courier_engine *e) {
    struct cr_sched *s = e->sched;
    long max_total = e->core.config->max_total, max_host = e->core.config->max_per_host;
    cr_monitor_limits(e, &max_host, &max_total); /* monitor.c: the limits of the network's kind */
    /* "Not on cellular" requests fail at once while the path is cellular, queued ones included. */
    for (int q = 0; q < 3; q++) {
        cr_transfer *prev = NULL, *t = s->waiting[q];
        while (t) {
            cr_transfer *next = t->next;
            if (t->no_cellular && cr_monitor_refuses(e, t)) {
                if (prev) prev->next = next;
                else s->waiting[q] = next;
                if (s->waiting_tail[q] == t) s->waiting_tail[q] = prev;
                t->next = NULL;
                courier_error cerr;
                cr_fail(&cerr, COURIER_E_CELLULAR, "the request is not allowed on a cellular network");
                after_attempt(e, t, COURIER_E_CELLULAR, NULL, &cerr);
            } else {
                prev = t;
            }
            t = next;
        }
    }
    for (int q = 0; q < 3; q++) {
        cr_transfer *prev = NULL, *t = s->waiting[q];
        while (t) {
            if (s->active_http >= max_total) return;
            cr_transfer *next = t->next;
            cr_host_count *h = host_slot(e, t->host);
            if (!h || h->active < max_host) {
                if (prev) prev->next = next;
                else s->waiting[q] = next;
                if (s->waiting_tail[q] == t) s->waiting_tail[q] = prev;
                t->next = NULL;
                start_http(e, t);
            } else {
                prev = t;
            }
            t = next;
        }
    }
}

/* A leader for t among the transfers that will go on the wire, or NULL. */
static cr_transfer *find_leader(courier_engine *e, const cr_transfer *t) {
    for (cr_transfer *x = e->active_head; x; x = x->next)
        if (x->state == CR_T_ACTIVE && x->coalesce_key && strcmp(x->coalesce_key, t->coalesce_key) == 0) return x;
    for (int q = 0; q < 3; q++)
        for (cr_transfer *x = e->sched->waiting[q]; x; x = x->next)
            if (x->coalesce_key && strcmp(x->coalesce_key, t->coalesce_key) == 0) return x;
    for (cr_transfer *x = e->sched->timers; x; x = x->next)
        if (x->coalesce_key && strcmp(x->coalesce_key, t->coalesce_key) == 0) return x;
    return NULL;
}

/* Where a new (or retried) transfer goes: a mock answer, a custom transport, a leader's followers,
 * or the waiting queue. */
static void route(courier_engine *e, cr_transfer *t) {
    if (t->sess && !cr_session_ready(e, t)) return; /* session.c: adapters, the credential first */
    if (t->stub) { /* stubs.c: this attempt's answer (and record); a retry's answer may wait on its delay */
        long wait = cr_stubs_take(e, t);
        if (wait > 0) {
            timer_push(e, t, timer_now(e) + wait);
            return;
        }
    }
    if (t->mock) {
        if (t->mock->delay_ms > 0 && t->attempts == 0) {
            t->attempts = -1; /* marks "delay served" when the timer fires */
            timer_push(e, t, timer_now(e) + t->mock->delay_ms);
            return;
        }
        if (t->attempts < 0) t->attempts = 0;
        t->attempts++;
        courier_response *resp = NULL;
        courier_error err;
        cr_error_clear(&err);
        cr_raised *outer = cr_raise_catch(&t->raised);
        int code = cr_mock_answer(t, &resp, &err);
        cr_raise_catch(outer);
        after_attempt(e, t, code, resp, &err);
        return;
    }
    if (t->custom) {
        start_custom(e, t);
        return;
    }
    if (t->coalesce_key && t->attempts == 0) {
        cr_transfer *leader = find_leader(e, t);
        if (leader) {
            t->leader = leader;
            t->next_follower = leader->followers;
            leader->followers = t;
            set_state(e, t, CR_T_FOLLOWER);
            return;
        }
    }
    waiting_push(e, t);
}

/* A redirect's next hop goes out like a new send (cache lookup, then the scheduler); the 3xx that
 * led to it is offered to the cache (a 301 or 308 is stored under its rules), then dropped. t has
 * handed its caller to next and is freed by the caller of finish. */
static void send_hop(courier_engine *e, cr_transfer *t, courier_response *resp, cr_transfer *next, courier_error *err) {
    t->done = hop_stored;
    cr_event_redirected(e, next, resp->status); /* lifecycle.c: a span's event */
    if (!cr_cache_defer(e, t, COURIER_OK, resp, err)) courier_response_free(resp);
    courier_error herr;
    cr_error_clear(&herr);
    int rc = cr_cache_before_hop(e, t, next, &herr);
    if (rc != COURIER_OK) {
        answer(e, next, rc, NULL, &herr);
        discard(e, next);
        return;
    }
    if (!cr_cache_answer(e, next, after_attempt, route)) route(e, next); /* a cached 301 answers here */
}

/* Tries t again after delay_ms (its failed attempt's response is dropped). */
static void retry_later(courier_engine *e, cr_transfer *t, int code, courier_response *resp, long delay) {
    cr_event_retried(e, t, t->attempts + 1, code, resp, delay);
    courier_response_free(resp);
    t->waited_s += (double)delay / 1000.0;
    timer_push(e, t, timer_now(e) + delay);
}

static void deliver(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err);

/* After an attempt: retry later, or give the answer to the caller and every follower. The order
 * (include/courier/hooks.h, "Sessions"): the authenticator's refusal, the fixed rule, then the retriers. */
static void after_attempt(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err) {
    cr_monitor_observe(e, t, code, resp); /* monitor.c: reachability from every attempt */
    cr_har_observe(e, t, code, resp);     /* stubs.c, har.c: the HAR entry, when recording */
    set_state(e, t, CR_T_NEW);
    if (t->sess && cr_session_after_attempt(e, t, code, resp, err)) return; /* session.c */
    bool anyone = !t->caller_gone || t->followers;
    long delay = anyone && !t->stream_live ? cr_retry_delay(t, code, resp, &e->sched->rng) : -1; /* never after a stream's body began */
    if (delay >= 0) {
        retry_later(e, t, code, resp, delay);
        return;
    }
    if (t->sess && anyone && !t->stream_live && cr_session_ask_retriers(e, t, code, resp, err)) return;
    deliver(e, t, code, resp, err);
}

/* Gives (code, resp) to t's caller and every follower, and frees t. */
static void deliver(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err) {
    while (t->followers) {
        cr_transfer *f = t->followers;
        t->followers = f->next_follower;
        f->leader = NULL;
        f->attempts = t->attempts;
        f->waited_s = t->waited_s;
        courier_error ferr = *err;
        courier_response *copy = resp ? cr_response_copy(resp) : NULL;
        int fcode = code;
        if (resp && !copy) fcode = cr_fail(&ferr, COURIER_E_NO_MEMORY, NULL);
        finish(e, f, fcode, copy, &ferr);
        discard(e, f);
    }
    if (t->caller_gone) courier_response_free(resp); /* a headless leader: nobody left to judge for */
    else finish(e, t, code, resp, err);
    discard(e, t);
}

/* ---- cancelling -------------------------------------------------------------------------------- */

static void cancel_transfer(courier_engine *e, cr_transfer *t, const char *why);

/* A headless leader (its caller gone) with no followers left has nobody to serve: stop it. */
static void drop_if_orphan(courier_engine *e, cr_transfer *t) {
    if (t->caller_gone && !t->followers) cancel_transfer(e, t, "no caller left");
}

static void cancel_transfer(courier_engine *e, cr_transfer *t, const char *why) {
    t->cancel_requested = 1;
    /* One that stops here closes its files before its caller hears of it: a cancelled download's
     * part file is whole on disk when the completion runs (another engine or process may resume it
     * from there). Not a custom transport's (it owns the call until it completes it), nor a leader
     * that keeps going for its followers. */
    if (t->state != CR_T_CUSTOM && !t->followers) cr_transfer_close_files(t);
    answer_code(e, t, COURIER_E_CANCELLED, why);
    switch (t->state) {
    case CR_T_FOLLOWER: {
        cr_transfer *leader = t->leader;
        for (cr_transfer **pp = &leader->followers; *pp; pp = &(*pp)->next_follower) {
            if (*pp == t) {
                *pp = t->next_follower;
                break;
            }
        }
        discard(e, t);
        drop_if_orphan(e, leader);
        return;
    }
    case CR_T_CUSTOM:
        /* The transport still owns the call until it completes it; ask it to stop. */
        if (t->custom->vt.cancel && !atomic_load(&t->call->completed)) t->custom->vt.cancel(t->call, t->custom->owner->user);
        return;
    default:
        break;
    }
    if (t->followers) return; /* keeps going for its followers, headless */
    if (t->state == CR_T_WAITING) waiting_unlink(e, t);
    else if (t->state == CR_T_TIMER) timer_unlink(e, t);
    else if (t->state == CR_T_ACTIVE) off_wire(e, t);
    discard(e, t);
}

static cr_transfer *find_in(cr_transfer *list, uint64_t id, bool follow_next) {
    for (cr_transfer *x = list; x; x = x->next) {
        if (x->id == id && !x->caller_gone) return x;
        for (cr_transfer *f = x->followers; f; f = f->next_follower)
            if (f->id == id) return f;
        if (!follow_next) break;
    }
    return NULL;
}

static cr_transfer *find_transfer(courier_engine *e, uint64_t id) {
    cr_transfer *t = find_in(e->active_head, id, true);
    for (int q = 0; q < 3 && !t; q++) t = find_in(e->sched->waiting[q], id, true);
    if (!t) t = find_in(e->sched->timers, id, true);
    return t;
}

/* Cancels t and every follower it has. */
static void cancel_with_followers(courier_engine *e, cr_transfer *t, const char *why) {
    if (t->state == CR_T_CUSTOM) {
        if (!t->caller_gone) cancel_transfer(e, t, why); /* stays until its transport completes it */
        return;
    }
    if (!t->followers) {
        cancel_transfer(e, t, why); /* t is gone now */
        return;
    }
    if (!t->caller_gone) cancel_transfer(e, t, why); /* headless: stays for its followers */
    for (;;) {
        cr_transfer *f = t->followers;
        bool last = f->next_follower == NULL;
        cancel_transfer(e, f, why); /* the last one drops the headless t */
        if (last) return;
    }
}

/* Cancels everything the worker holds. Custom calls stay until their transport completes them. */
static void cancel_everything(courier_engine *e, const char *why) {
    for (cr_transfer *t = e->active_head, *next; t; t = next) {
        next = t->next;
        cancel_with_followers(e, t, why);
    }
    for (int q = 0; q < 3; q++)
        while (e->sched->waiting[q]) cancel_with_followers(e, e->sched->waiting[q], why);
    while (e->sched->timers) cancel_with_followers(e, e->sched->timers, why);
}

static bool custom_calls_pending(courier_engine *e) {
    for (cr_transfer *t = e->active_head; t; t = t->next)
        if (t->state == CR_T_CUSTOM) return true;
    return false;
}

/* ---- sessions (session.c decides; the transfer waits here for adapters, retriers, refreshes) ------ */

static void hold_challenged(courier_engine *e, cr_transfer *t);

static cr_transfer *find_parked(courier_engine *e, uint64_t id) { return find_in(e->sched->timers, id, true); }

static void unpark_session(courier_engine *e, cr_transfer *t) {
    timer_unlink(e, t);
    set_state(e, t, CR_T_NEW);
}

static const cr_session_ops session_ops = {hold_challenged, find_parked, unpark_session, route, retry_later, deliver};

/* ---- the worker -------------------------------------------------------------------------------- */

/* ---- challenges (auth.c asks the handler; the transfer waits here for the answer) --------------- */

/* A transfer whose 401/407 went to a challenge handler waits on the timer list, due never: cancel
 * and close find it there like any waiting transfer. */
static void hold_challenged(courier_engine *e, cr_transfer *t) { timer_push(e, t, INT64_MAX); }

/* The answers given since the last turn: sent again with the credentials, or the held 401/407
 * delivered. An answer whose transfer is gone (cancelled) is dropped. */
static void resume_challenged(courier_engine *e) {
    courier_challenge *ch = cr_challenges_take(e);
    while (ch) {
        courier_challenge *next = cr_challenge_next(ch);
        cr_transfer *t = find_in(e->sched->timers, cr_challenge_id(ch), true);
        if (!t || !t->held) {
            cr_challenge_free(ch);
        } else {
            timer_unlink(e, t);
            set_state(e, t, CR_T_NEW);
            if (cr_challenge_apply(ch, t)) {
                route(e, t);
            } else {
                courier_response *resp = t->held;
                t->held = NULL;
                courier_error err;
                cr_error_clear(&err);
                after_attempt(e, t, COURIER_OK, resp, &err);
            }
        }
        ch = next;
    }
}

static void finish_done(courier_engine *e, CURLMsg *msg) {
    cr_transfer *t = NULL;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
    if (!t) return;
    CURLcode result = msg->data.result;
    courier_response *resp = NULL;
    courier_error err;
    cr_error_clear(&err);
    int code = cr_transport_result(t, result, &resp, &err);
    if (t->set_cookie) { /* cookies.c: the jar changed; stored before anyone hears of it */
        t->set_cookie = 0;
        cr_jar_save(e);
    }
    if (t->sts_seen) { /* hsts.c: the host's HSTS entry, stored before anyone hears of the response */
        t->sts_seen = 0;
        if (resp && cr_security_verifies(t->security ? t->security : e->core.config->security))
            cr_hsts_note(e, resp->url, cr_kvlist_get(&resp->headers, "Strict-Transport-Security"));
    }
    off_wire(e, t);
    if (code == COURIER_OK && cr_challenge_offer(e, t, resp, hold_challenged)) return; /* auth.c */
    after_attempt(e, t, code, resp, &err);
}

/* Idle timeouts (no byte received for idle_ms since connected): curl counts in seconds, the engine
 * in milliseconds. Fails the transfers past their limit as curl would have, and returns how long the
 * worker may wait before the next one is due (INT_MAX: none). */
static int idle_check(courier_engine *e) {
    if (!e->idle_watch) return INT_MAX;
    int64_t now = cr_mono_ms(), wait = INT_MAX;
    for (cr_transfer *t = e->active_head, *next; t; t = next) {
        next = t->next;
        if (t->state != CR_T_ACTIVE || !t->http.idle_ms || !t->wire.last_rx_ms) continue;
        if (cr_stream_paused(t)) { /* stream.c: the reader paused it: not idle */
            t->wire.last_rx_ms = now;
            continue;
        }
        /* A request body going out is not idle either (a large upload to a server that answers
         * only at the end). */
        curl_off_t sent = 0;
        curl_easy_getinfo(t->easy, CURLINFO_SIZE_UPLOAD_T, &sent);
        if ((int64_t)sent != t->wire.sent) {
            t->wire.sent = (int64_t)sent;
            t->wire.last_rx_ms = now;
        }
        int64_t left = t->wire.last_rx_ms + t->http.idle_ms - now;
        if (left > 0) {
            if (left < wait) wait = left;
            continue;
        }
        t->wire.timeout_kind = COURIER_TIMEOUT_IDLE;
        snprintf(t->errbuf, CURL_ERROR_SIZE, "no byte received for %lld ms", (long long)t->http.idle_ms);
        courier_response *resp = NULL;
        courier_error err;
        cr_error_clear(&err);
        int code = cr_transport_result(t, CURLE_OPERATION_TIMEDOUT, &resp, &err);
        off_wire(e, t);
        after_attempt(e, t, code, resp, &err);
    }
    return (int)wait;
}

static void finish_custom(courier_engine *e, courier_call *call) {
    cr_transfer *t = call->t;
    active_unlink(e, t);
    cr_raise_move(&t->raised, &call->raised); /* courier_call_raise's user error, for the send */
    courier_response *resp = call->resp;
    call->resp = NULL;
    courier_error err;
    cr_error_clear(&err);
    int code = call->code;
    if (code != COURIER_OK) cr_fail(&err, code, "%s", call->message[0] ? call->message : courier_strerror(code));
    if (t->caller_gone && !t->followers) {
        courier_response_free(resp);
        discard(e, t);
        return;
    }
    if (resp && (!resp->url[0] || !resp->method[0]) && !cr_response_detach(resp)) {
        if (!resp->url[0]) cr_set_string(&resp->url, t->url);
        if (!resp->method[0]) cr_set_string(&resp->method, t->method);
    }
    after_attempt(e, t, code, resp, &err);
}

static void engine_free(courier_engine *e);

/* Takes the posted functions (the caller holds core.lock), swapping buffers with *buf so neither
 * side allocates once both have grown; returns how many there are in *buf. */
static size_t take_posts(courier_engine *e, struct cr_post **buf, size_t *cap) {
    size_t n = e->nposts;
    if (!n) return 0;
    struct cr_post *tmp = *buf;
    size_t tmpcap = *cap;
    *buf = e->posts;
    *cap = e->cap_posts;
    e->posts = tmp;
    e->cap_posts = tmpcap;
    e->nposts = 0;
    return n;
}

static void *worker_main(void *arg) {
    courier_engine *e = arg;
    cr_thread_set_name("courier-worker");
    uint64_t *cancels = NULL;
    size_t cap_cancels = 0;
    struct cr_post *posts = NULL;
    size_t cap_posts = 0;
    for (;;) {
        pthread_mutex_lock(&e->core.lock);
        e->polling = false;
        size_t nposts = take_posts(e, &posts, &cap_posts);
        if (nposts) {
            /* Posted functions first (a Swift task resumed by a completion runs here, on the worker,
             * and its next send joins this turn's incoming list below). */
            pthread_mutex_unlock(&e->core.lock);
            for (size_t i = 0; i < nposts; i++) posts[i].fn(posts[i].user);
            pthread_mutex_lock(&e->core.lock);
        }
        cr_transfer *in = e->incoming_head;
        e->incoming_head = e->incoming_tail = NULL;
        courier_call *ext = e->external_done;
        e->external_done = NULL;
        size_t ncancels = e->ncancels;
        if (ncancels) {
            /* Swap the buffers so the lock is not held while cancelling. */
            uint64_t *tmp = cancels;
            size_t tmpcap = cap_cancels;
            cancels = e->cancels;
            cap_cancels = e->cap_cancels;
            e->cancels = tmp;
            e->cap_cancels = tmpcap;
            e->ncancels = 0;
        }
        int cancel_all = e->cancel_all;
        e->cancel_all = 0;
        int closing = e->core.closing;
        pthread_mutex_unlock(&e->core.lock);

        /* Calls custom transports completed (in the order they completed). */
        courier_call *rev = NULL;
        while (ext) {
            courier_call *next = ext->next_done;
            ext->next_done = rev;
            rev = ext;
            ext = next;
        }
        while (rev) {
            courier_call *next = rev->next_done;
            finish_custom(e, rev);
            rev = next;
        }
        cr_session_turn(e); /* session.c: answers of adapters, retriers, refreshes */
        resume_challenged(e);
        while (in) {
            cr_transfer *next = in->next;
            in->next = NULL;
            cr_event_will_send(e, in);
            if (closing) {
                answer_code(e, in, COURIER_E_CANCELLED, "the engine closed");
                discard(e, in);
            } else if (!cr_cache_answer(e, in, after_attempt, route)) { /* a cache hit answers here */
                route(e, in);
            }
            in = next;
        }
        for (size_t i = 0; i < ncancels; i++) {
            cr_transfer *t = find_transfer(e, cancels[i]);
            if (t) cancel_transfer(e, t, "cancelled");
        }
        if (cancel_all || closing) cancel_everything(e, closing ? "the engine closed" : "cancelled");
        cr_cache_flush(e); /* this turn's cache writes, then their answers */
        if (closing && e->ws_head) cr_ws_engine_closing(e); /* ws.c */
        if (closing && !custom_calls_pending(e)) break;

        /* Timers: retries go back to the queue, mock delays answer. */
        int64_t now = timer_now(e);
        while (e->sched->timers && e->sched->timers->due_ms <= now) {
            cr_transfer *t = e->sched->timers;
            e->sched->timers = t->next;
            t->next = NULL;
            set_state(e, t, CR_T_NEW);
            route(e, t);
        }
        pump(e);

        int running = 0;
        curl_multi_perform(e->core.multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(e->core.multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            struct courier_ws *ws = e->ws_head ? cr_ws_of_easy(e, msg->easy_handle) : NULL;
            if (ws) cr_ws_connected(e, ws, msg->data.result); /* ws.c: connect-only, the handle stays */
            else finish_done(e, msg);
        }
        int idle_wait = idle_check(e);
        pump(e);

        int timeout = idle_wait < 1000 ? idle_wait : 1000;
        if (e->ws_head) { /* ws.c: WebSockets' reads, writes and timers */
            int ws_wait = cr_ws_turn(e);
            if (ws_wait >= 0 && ws_wait < timeout) timeout = ws_wait;
        }
        if (e->sched->timers) {
            int64_t wait = e->sched->timers->due_ms - timer_now(e);
            if (wait < timeout) timeout = wait < 0 ? 0 : (int)wait;
        }
        cr_cache_flush(e); /* this turn's cache writes, then their answers */
        /* Work the callbacks of this turn handed in (they send without waking the worker). */
        pthread_mutex_lock(&e->core.lock);
        bool more = e->incoming_head || e->ncancels || e->cancel_all || e->external_done || e->core.answered ||
                    e->nposts || e->core.closing;
        if (!more) e->polling = true; /* from here a send from another thread wakes it */
        pthread_mutex_unlock(&e->core.lock);
        if (more) continue;
        size_t nfds = e->ws_head ? cr_ws_poll_fds(e, &e->ws_fds, &e->ws_fds_cap) : 0;
        curl_multi_poll(e->core.multi, nfds ? e->ws_fds : NULL, (unsigned)nfds, timeout, NULL);
    }
    /* Functions posted before the close began and not run yet run now, each once (posts made once
     * closing is set are refused, so this ends). */
    for (;;) {
        pthread_mutex_lock(&e->core.lock);
        size_t nposts = take_posts(e, &posts, &cap_posts);
        pthread_mutex_unlock(&e->core.lock);
        if (!nposts) break;
        for (size_t i = 0; i < nposts; i++) posts[i].fn(posts[i].user);
    }
    free(posts);
    free(cancels);
    if (e->free_on_exit) engine_free(e); /* closed from one of its own callbacks */
    return NULL;
}

/* ---- custom transports' calls -------------------------------------------------------------------- */

const char *courier_call_method(const courier_call *c) { return c ? c->t->method : NULL; }
const char *courier_call_url(const courier_call *c) { return c ? c->t->url : NULL; }
const char *courier_call_header(const courier_call *c, const char *name) {
    return c && name ? cr_kvlist_get(&c->t->headers, name) : NULL;
}
size_t courier_call_header_count(const courier_call *c) { return c ? c->t->headers.count : 0; }
int courier_call_header_at(const char **name, const char **value, const courier_call *c, size_t i) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    if (i >= c->t->headers.count) return COURIER_E_NOT_FOUND;
    if (name) *name = c->t->headers.items[i].name;
    if (value) *value = c->t->headers.items[i].value;
    return COURIER_OK;
}
const uint8_t *courier_call_body(const courier_call *c, size_t *len) {
    if (len) *len = c && c->t->has_body ? c->t->body_len : 0;
    return (const uint8_t *)(c && c->t->has_body ? c->t->body : "");
}
int64_t courier_call_timeout_ms(const courier_call *c) { return c ? c->t->timeout_ms : 0; }
uint64_t courier_call_request_id(const courier_call *c) { return c ? c->t->id : 0; }

int courier_call_raise(courier_call *c, courier_code code, courier_response *resp, const char *message, void *user,
                       courier_user_free_fn user_free) {
    if (!c || code >= 0 || atomic_load(&c->completed)) {
        courier_response_free(resp);
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    /* Only this caller may complete the call from now on, so the slot is written before the
     * completion publishes it. */
    cr_raise_into(&c->raised, (int)code, message, user, user_free);
    int rc = courier_call_complete(c, (int)code, resp, message);
    if (rc != COURIER_OK) cr_raise_release(&c->raised);
    return rc;
}

int courier_call_complete(courier_call *c, courier_code code, courier_response *resp, const char *message) {
    if (!c || (code == COURIER_OK && !resp) || code > 0) {
        courier_response_free(resp);
        return COURIER_E_INVALID_ARGUMENT;
    }
    if (atomic_exchange(&c->completed, 1)) {
        courier_response_free(resp);
        return COURIER_E_INVALID_ARGUMENT; /* completed twice */
    }
    c->code = code;
    c->resp = resp;
    snprintf(c->message, sizeof c->message, "%s", message ? message : "");
    courier_engine *e = c->e;
    /* Wake the worker while holding the lock: once the lock is released the worker may finish the
     * call and, if the engine is closing, free the engine, so nothing here may touch it after. */
    pthread_mutex_lock(&e->core.lock);
    c->next_done = e->external_done;
    e->external_done = c;
    curl_multi_wakeup(e->core.multi);
    pthread_mutex_unlock(&e->core.lock);
    return COURIER_OK;
}

int courier_engine_mock_enabled(const courier_engine *e) {
    return e ? atomic_load(&((courier_engine *)e)->mock_enabled) : 0;
}

int courier_engine_set_mock_enabled(courier_engine *e, int enabled) {
    if (!e) return COURIER_E_INVALID_ARGUMENT;
    atomic_store(&e->mock_enabled, enabled ? 1 : 0);
    return COURIER_OK;
}

/* ---- lifecycle --------------------------------------------------------------------------------- */

static void engine_free(courier_engine *e) {
    if (!e) return;
    cr_challenges_detach(e); /* auth.c: answers from now on are no-ops */
    cr_session_detach(e);    /* session.c: likewise */
    cr_journal_close(e); /* journal.c: queued freezes written and answered, before logging and the store go */
    cr_monitor_close(e); /* monitor.c: after the journal thread, which runs its probes, stopped */
    cr_obs_free(e);
    for (size_t i = 0; i < e->npool; i++) cr_easy_cleanup(e->pool[i]);
    free(e->pool);
    free(e->pool_set);
    cr_urlh_cache_free(e);
    if (e->core.multi) curl_multi_cleanup(e->core.multi);
    cr_pool_free(e->core.pool); /* pool.c: after the cleanup, which closes connections through it */
    cr_jar_close(e); /* cookies.c: after every easy handle on its share is gone */
    cr_hsts_close(e); /* hsts.c */
    cr_cache_engine_free(e); /* closes the cache's store before a temporary store is removed */
    cr_store_dir_remove_temp(e); /* store_dir.c: a temporary store goes with its engine */
    free(e->core.store_dir);
    free(e->cancels);
    free(e->posts);
    free(e->ws_fds);
    cr_idset_free(&e->live);
    cr_sched_free(e);
    cr_catalog_free(e);
    courier_config_free(e->core.config);
    pthread_mutex_destroy(&e->core.lock);
    free(e);
}

int courier_engine_open(courier_engine **out, const courier_config *config, courier_error *err) {
    cr_error_clear(err);
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK) return cr_fail(err, COURIER_E_INTERNAL, "curl_global_init failed (%d)", (int)global_rc);

    courier_engine *e = calloc(1, sizeof *e);
    if (!e) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    pthread_mutex_init(&e->core.lock, NULL);
    atomic_init(&e->core.next_id, 1);
    atomic_init(&e->core.queued, 0);
    atomic_init(&e->active, 0);
    e->core.sched_prepare = cr_sched_prepare; /* schedule.c, for request.c's cr_transfer_prepare */
    e->core.sched_finish_prepare = cr_sched_finish_prepare;
    e->core.config = cr_config_copy(config);
    e->pool = calloc(CR_POOL_MAX, sizeof *e->pool);
    e->pool_set = calloc(CR_POOL_MAX, sizeof *e->pool_set);
    if (!e->core.config || !e->pool || !e->pool_set) {
        engine_free(e);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    e->core.clock = e->core.config->clock; /* for log.c, which does not read the configuration */
    int rc = cr_sched_new(e);
    if (rc == COURIER_OK) rc = cr_catalog_new(e); /* catalog.c: APIs, routes, descriptors */
    if (rc) {
        engine_free(e);
        return cr_fail(err, rc, NULL);
    }
    rc = cr_store_dir_open(e, err); /* store_dir.c */
    if (rc == COURIER_OK) rc = cr_cache_engine_init(e, &later_ops, err);
    if (rc == COURIER_OK) rc = cr_monitor_open(e, cr_journal_wake, err); /* monitor.c: it tells the journal */
    if (rc == COURIER_OK) rc = cr_journal_open(e, &journal_ops, err); /* journal.c: frozen requests */
    if (rc == COURIER_OK) { /* cookies.c: the cookie jar, kept in the journal's environment */
        struct MDB_env *cenv = NULL;
        unsigned cdbi = 0;
        if (!e->core.store_is_temp && cr_journal_cookie_db(e, &cenv, &cdbi) != COURIER_OK) cenv = NULL;
        rc = cr_jar_open(e, cenv, cdbi, err);
    }
    struct MDB_env *henv = NULL; /* hsts.c: the HSTS list beside the jar (in memory without a journal here) */
    unsigned hdbi = 0;
    if (rc == COURIER_OK && (e->core.store_is_temp || cr_journal_hsts_db(e, &henv, &hdbi) != COURIER_OK)) henv = NULL;
    if (rc == COURIER_OK) rc = cr_hsts_open(e, henv, hdbi, err);
    if (rc) {
        engine_free(e);
        return rc;
    }
    e->core.proxy_env = cr_proxy_env_present();
    cr_accept_encoding_line(e->core.accept_encoding, sizeof e->core.accept_encoding);
    e->core.pool = cr_pool_new(); /* pool.c: the pool's figures (NULL: none kept) */
    e->core.multi = curl_multi_init();
    if (e->core.multi) cr_monitor_start_watch(e); /* monitor.c: the OS watch reports from here on */
    if (!e->core.multi) {
        engine_free(e);
        return cr_fail(err, COURIER_E_INTERNAL, "curl_multi_init failed");
    }
    /* The pool allows the most any network kind's limits allow; pump() holds requests to the
     * current kind's (monitor.c). */
    long pool_host = e->core.config->max_per_host, pool_total = e->core.config->max_total;
    for (size_t k = 0; k < sizeof e->core.config->kind_limits / sizeof e->core.config->kind_limits[0]; k++) {
        if (e->core.config->kind_limits[k].per_host > pool_host) pool_host = e->core.config->kind_limits[k].per_host;
        if (e->core.config->kind_limits[k].total > pool_total) pool_total = e->core.config->kind_limits[k].total;
    }
    e->pool_host = pool_host; /* ws.c adds room for the WebSockets open */
    e->pool_total = pool_total;
    curl_multi_setopt(e->core.multi, CURLMOPT_MAX_HOST_CONNECTIONS, pool_host);
    curl_multi_setopt(e->core.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, pool_total);
    curl_multi_setopt(e->core.multi, CURLMOPT_MAXCONNECTS, cr_netopts_max_idle(e->core.config->net, pool_total));
    curl_multi_setopt(e->core.multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);

    int prc = pthread_create(&e->worker, NULL, worker_main, e);
    if (prc != 0) {
        engine_free(e);
        cr_fail(err, COURIER_E_INTERNAL, "cannot start the worker thread: %s", strerror(prc));
        if (err) err->os_error = prc;
        return COURIER_E_INTERNAL;
    }
    cr_thread_name(e->worker, "courier-worker");
    cr_journal_start(e); /* journal.c: replay at open */
    *out = e;
    return COURIER_OK;
}

void courier_engine_close(courier_engine *e) {
    if (!e) return;
    /* From inside one of its own callbacks (a binding dropping its last reference there): the
     * worker cannot join itself, so it finishes closing on its own and frees the engine last. */
    bool on_worker = pthread_equal(pthread_self(), e->worker);
    pthread_mutex_lock(&e->core.lock);
    e->core.closing = 1;
    e->free_on_exit = on_worker;
    pthread_mutex_unlock(&e->core.lock);
    if (on_worker) {
        pthread_detach(e->worker);
        return;
    }
    curl_multi_wakeup(e->core.multi);
    pthread_join(e->worker, NULL);
    engine_free(e);
}

const char *courier_engine_store_dir(const courier_engine *e) { return e ? e->core.store_dir : NULL; }

int courier_engine_pending(int64_t *queued, int64_t *active, const courier_engine *e) {
    if (!e) return COURIER_E_INVALID_ARGUMENT;
    if (queued) *queued = atomic_load(&((courier_engine *)e)->core.queued);
    if (active) *active = atomic_load(&((courier_engine *)e)->active);
    return COURIER_OK;
}
