/*
 * journal_fixture.h — what the one-process journal tests share (journal_test.c, journal_store_test.c):
 * a completion recorder (waiter), an event recorder (evlog), an injected clock, an engine opened on a
 * store with the tests' settings (open_eng, open_served), a freezable request and its send.
 * Header-only (static functions) so each test executable has its own copy.
 */
#ifndef JOURNAL_FIXTURE_H
#define JOURNAL_FIXTURE_H

#include "harness.h"
#include "journal_recorder.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

typedef struct waiter {
    pthread_mutex_t m;
    pthread_cond_t c;
    int n;
    int codes[128];
    int status[128];
    char ids[128][COURIER_FROZEN_ID_MAX + 1];
    int found_in_journal[128]; /* the completion could read its frozen request back */
    courier_engine *engine;
} waiter;

__attribute__((unused)) static void w_init(waiter *w, courier_engine *e) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->m, NULL);
    pthread_cond_init(&w->c, NULL);
    w->engine = e;
}

__attribute__((unused)) static void w_destroy(waiter *w) {
    pthread_mutex_destroy(&w->m);
    pthread_cond_destroy(&w->c);
}

__attribute__((unused)) static void w_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    waiter *w = user;
    int found = 0;
    const char *fid = courier_error_freeze_id(err);
    if (code == COURIER_E_FROZEN && fid) {
        courier_frozen *f = NULL;
        found = courier_frozen_get(&f, w->engine, fid, NULL) == COURIER_OK;
        courier_frozen_free(f);
    }
    pthread_mutex_lock(&w->m);
    if (w->n < 128) {
        w->codes[w->n] = code;
        w->status[w->n] = resp ? courier_response_status(resp) : 0;
        snprintf(w->ids[w->n], sizeof w->ids[0], "%s", fid ? fid : "");
        w->found_in_journal[w->n] = found;
    }
    w->n++;
    pthread_cond_broadcast(&w->c);
    pthread_mutex_unlock(&w->m);
    courier_response_free(resp);
}

/* Waits (generous bound) until n completions arrived. */
__attribute__((unused)) static int w_wait(waiter *w, int n) {
    pthread_mutex_lock(&w->m);
    int got = th_wait_count(&w->c, &w->m, &w->n, n);
    pthread_mutex_unlock(&w->m);
    return got;
}

typedef struct evrec {
    int kind;
    char id[COURIER_FROZEN_ID_MAX + 1];
    int code;
    int final;
    int status;
    int attempts;
    char idem[80];
    int body_ok; /* the response's body, read in the listener, is the recorder's {"ok":true} */
} evrec;

typedef struct evlog {
    pthread_mutex_t m;
    int n;
    evrec e[256];
} evlog;

__attribute__((unused)) static void ev_init(evlog *l) {
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->m, NULL);
}

__attribute__((unused)) static void ev_destroy(evlog *l) { pthread_mutex_destroy(&l->m); }

__attribute__((unused)) static void ev_cb(const courier_frozen_event *ev, void *user) {
    evlog *l = user;
    pthread_mutex_lock(&l->m);
    if (l->n < 256) {
        evrec *r = &l->e[l->n];
        r->kind = ev->kind;
        snprintf(r->id, sizeof r->id, "%s", ev->freeze_id ? ev->freeze_id : "");
        r->code = ev->code;
        r->final = ev->final;
        r->status = ev->response ? courier_response_status(ev->response) : 0;
        r->attempts = ev->attempts;
        snprintf(r->idem, sizeof r->idem, "%s", ev->frozen ? courier_frozen_idempotency_key(ev->frozen) : "");
        size_t blen = 0;
        const uint8_t *b = ev->response ? courier_response_body(ev->response, &blen) : NULL;
        r->body_ok = b && blen == 11 && memcmp(b, "{\"ok\":true}", 11) == 0;
    }
    l->n++;
    pthread_mutex_unlock(&l->m);
}

__attribute__((unused)) static int ev_count(evlog *l, int kind) {
    pthread_mutex_lock(&l->m);
    int n = 0;
    for (int i = 0; i < l->n && i < 256; i++) n += l->e[i].kind == kind;
    pthread_mutex_unlock(&l->m);
    return n;
}

__attribute__((unused)) static _Atomic int64_t fake_now;
__attribute__((unused)) static int64_t fake_clock(void *user) {
    (void)user;
    return atomic_load(&fake_now);
}

typedef struct opts {
    int paused;
    int fake_clock;
    long concurrency;
    long backoff_base, backoff_max;
    int from_errors;
    const char *probe;
    long probe_ms;
    const char *app_id; /* with store NULL: the default store of this app id */
    int temporary;      /* with store NULL: a temporary store */
    long poll_ms;       /* the journal thread's poll (0: 200 ms) */
} opts;

__attribute__((unused)) static courier_engine *open_eng(const char *store, int port, const opts *o, courier_error *err) {
    courier_config *cfg = NULL;
    courier_engine *e = NULL;
    courier_config_new(&cfg);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    courier_config_set_base_url(cfg, base);
    courier_config_set_store_dir(cfg, store);
    courier_config_set_timeout_ms(cfg, 10000);
    courier_config_set_frozen_poll_ms(cfg, o && o->poll_ms ? o->poll_ms : 200);
    courier_config_set_frozen_replay(cfg, o && o->concurrency ? o->concurrency : 4, o && o->backoff_base ? o->backoff_base : 20,
                                     o && o->backoff_max ? o->backoff_max : 100);
    if (o && o->paused) courier_config_set_frozen_paused(cfg, 1);
    if (o && o->fake_clock) courier_config_set_clock(cfg, fake_clock, NULL, NULL);
    if (o && (o->from_errors || o->probe)) courier_config_set_reachability(cfg, o->from_errors, o->probe, o->probe_ms);
    if (o && o->app_id) courier_config_set_app_id(cfg, o->app_id);
    if (o && o->temporary) courier_config_set_temporary_store(cfg, 1);
    courier_error local;
    int rc = courier_engine_open(&e, cfg, err ? err : &local);
    courier_config_free(cfg);
    return rc == COURIER_OK ? e : NULL;
}

/* A recorder on a free port and an engine on a fresh store in the test's temporary directory, its
 * base URL the recorder: how most replay tests start. NULL (the failure reported, nothing left
 * running) when either cannot be opened. */
__attribute__((unused)) static courier_engine *open_served(jr_server *srv, const opts *o) {
    if (jr_open(srv, 0) != 0) {
        th_fail(__FILE__, __LINE__, "jr_open: the recorder did not start");
        return NULL;
    }
    courier_engine *e = open_eng(th_tmpdir(), srv->port, o, NULL);
    if (!e) {
        th_fail(__FILE__, __LINE__, "open_eng: the engine did not open");
        jr_stop(srv);
        jr_free(srv);
    }
    return e;
}

/* A freezable request. */
__attribute__((unused)) static courier_request *freezable(const char *method, const char *path, const char *body, int policy, unsigned flags) {
    courier_request *r = NULL;
    courier_request_new(&r, method, path);
    if (body) courier_request_set_body(r, body, strlen(body), "text/plain");
    courier_request_set_freeze(r, policy, 0, flags);
    return r;
}

__attribute__((unused)) static int send_one(courier_engine *e, courier_request *r, waiter *w) {
    int rc = courier_send(NULL, e, r, w_done, w, NULL);
    courier_request_free(r);
    return rc;
}

__attribute__((unused)) static int64_t count_of(courier_engine *e) {
    int64_t n = -1;
    courier_frozen_count(&n, e, NULL);
    return n;
}

/* Waits until the journal holds no record or `ms` passed (a generous bound, not an assertion on
 * time: the caller checks what is left); returns the records left. */
__attribute__((unused)) static int64_t drain_within(courier_engine *e, int64_t ms) {
    int64_t end = th_now_ms() + ms;
    while (count_of(e) > 0 && th_now_ms() < end) courier_frozen_wait_idle(e, 1000);
    return count_of(e);
}

#endif
