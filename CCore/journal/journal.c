/*
 * journal.c — the journal thread (one turn: one transaction, one synced commit) and the engine's
 * hooks: freezing a transfer, answering it after the commit, the network monitor. The journal
 * reaches the engine only through the cr_journal_ops it was given at open (answering, sending, the
 * monitor); lifecycle events go to log.c.
 */
#include "journal/journal_internal.h"

/* "scheme://host:port", lowercase, default ports filled in: the unit of per-host order. */
static int host_of(const char *url, char *out, size_t cap) {
    CURLU *u = curl_url();
    if (!u) return COURIER_E_NO_MEMORY;
    int rc = COURIER_E_INVALID_URL;
    char *scheme = NULL, *host = NULL, *port = NULL;
    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
        int n = snprintf(out, cap, "%s://%s:%s", scheme, host, port);
        if (n > 0 && (size_t)n < cap) {
            for (char *c = out; *c; c++)
                if (*c >= 'A' && *c <= 'Z') *c = (char)(*c - 'A' + 'a');
            rc = COURIER_OK;
        }
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return rc;
}

/* ---- the turn ---- */

/* cr_fail with the message a + b, copied (on every freeze, where vsnprintf was a tenth of the
 * answer's instructions). */
static int fail_text(courier_error *err, int code, const char *a, const char *b) {
    memset(err, 0, sizeof *err);
    err->code = code;
    size_t na = strnlen(a, sizeof err->message - 1), nb = strnlen(b, sizeof err->message - 1 - na);
    memcpy(err->message, a, na);
    memcpy(err->message + na, b, nb);
    return code;
}

static void freeze_answer(cr_journal *j, jfreeze *f, bool frozen, const char *why) {
    courier_error err;
    int code;
    if (frozen && f->unconfirmed) {
        const courier_config *cfg = cr_core(j->e)->config;
        code = cr_fail(&err, COURIER_E_REPLICAS_UNCONFIRMED,
                       "written to the journal as %s, but %lld of %d replicas confirmed it within %lld ms (WAIT): not "
                       "acknowledged as frozen (it may still be replayed)",
                       f->id, f->replicas_acked, cfg->frozen.replicas, (long long)cfg->frozen.replicas_timeout_ms);
    } else if (frozen) {
        code = fail_text(&err, COURIER_E_FROZEN, "frozen as ", f->id);
    } else {
        err = f->err;
        code = f->code;
        size_t len = strlen(err.message);
        snprintf(err.message + len, sizeof err.message - len, "%s(not frozen: %s)", len ? " " : "", why);
    }
    j->ops->answer->answer(j->e, f->answer, code, NULL, &err);
    f->answer = NULL;
}

static void freeze_free(cr_journal *j, jfreeze *f) {
    free(f->payload);
    free(f->method);
    free(f->url);
    courier_frozen_free(f->snap);
    j->ops->answer->discard(f->answer); /* only when never answered */
    free(f);
}

static void outcome_free(joutcome *o) {
    courier_response_free(o->resp);
    courier_frozen_free(o->snap);
    cj_send_free(o->send);
    free(o);
}

/* A freeze committed: the lifecycle event, and a warning when the store will not outlive the
 * engine (a temporary store is removed at close, and the request with it, never replayed). */
static void frozen_committed(cr_journal *j, const jfreeze *f) {
    cr_event_frozen(j->e, f->answer_id, f->method, f->url);
    cj_policy_log_frozen(j, f);
    if (cr_core(j->e)->store_is_temp)
        cr_log(j->e, COURIER_LOG_WARNING, "frozen_temporary_store",
               "a %s request (id %llu) was frozen into the temporary store '%s', which is removed when the "
               "engine closes: it will not be sent again after that (give the engine a durable store: the "
               "default one, or a store directory)", f->method, (unsigned long long)f->answer_id,
               cr_core(j->e)->store_dir);
}

/* Writes the freezes one per transaction (after a group transaction failed), answering each. */
static void freezes_alone(cr_journal *j, jfreeze *fz, jevent ***events) {
    for (jfreeze *f = fz; f; f = f->next) {
        if (!f->answer) continue; /* answered already (written by the failed turn: a store without transactions) */
        cj_txn *txn;
        int rc = j->store->begin(j, true, &txn);
        if (rc == 0) {
            rc = cj_apply_freeze(j, txn, f);
            if (rc == 0) f->snap = cj_snap_in(j, txn, f->seq, &f->st);
            if (rc == 0) rc = j->store->commit(j, txn);
            else j->store->abort(j, txn);
        }
        if (j->store->broken(rc)) j->broken = 1;
        if (rc == 0) frozen_committed(j, f);
        freeze_answer(j, f, rc == 0, rc ? j->store->strerror(j, rc) : "");
        if (rc == 0 && !f->unconfirmed) {
            jevent *ev = cj_event_new(COURIER_FROZEN_EVENT_FROZEN, cj_snap_retain(f->snap), f->answer_id, COURIER_OK);
            cj_events_push(events, ev);
        }
    }
}

/* Delivers events in order to every listener, then frees them. Their responses, which the worker
 * made, go back to it to be freed (cj_responses_spent). */
void cj_events_deliver(cr_journal *j, jevent *list) {
    courier_response *small[64], **spent = small;
    size_t nspent = 0, capspent = sizeof small / sizeof small[0];
    while (list) {
        jevent *ev = list;
        list = ev->next;
        ev->ev.frozen = ev->snap;
        ev->ev.freeze_id = ev->snap ? ev->snap->q.id : ev->id;
        ev->ev.response = ev->resp;
        ev->ev.error = ev->ev.code == COURIER_OK ? NULL : &ev->err;
        cj_policy_log_event(j, ev); /* policy.c: the journal's decision line */
        pthread_mutex_lock(&j->lmu);
        size_t n = 0;
        for (jlistener *l = ev->ev.kind == CJ_EVENT_HELD ? NULL : j->listeners; l; l = l->next) n++;
        cr_callback **cbs = n ? malloc(n * sizeof *cbs) : NULL;
        size_t k = 0;
        if (cbs)
            for (jlistener *l = j->listeners; l; l = l->next) cbs[k++] = cr_callback_retain(l->cb);
        pthread_mutex_unlock(&j->lmu);
        for (size_t i = 0; i < k; i++) {
            ((courier_frozen_event_fn)cbs[i]->fn)(&ev->ev, cbs[i]->user);
            cr_callback_release(cbs[i]);
        }
        free(cbs);
        courier_frozen_free(ev->snap);
        if (ev->resp && nspent == capspent) { /* more than fit: the rest in turns of this size */
            cj_responses_spent(j, spent, nspent);
            nspent = 0;
        }
        if (ev->resp) spent[nspent++] = ev->resp;
        free(ev);
    }
    cj_responses_spent(j, spent, nspent);
}

/* The states of the records a turn's answers name, read together (the store's read_ahead): on
 * Redis one HMGET for the turn instead of one HGET per answer. */
static void read_ahead_answers(cr_journal *j, cj_txn *txn, const joutcome *oc) {
    size_t n = 0;
    for (const joutcome *o = oc; o; o = o->next) n++;
    uint64_t *seqs = malloc(n * sizeof *seqs);
    if (!seqs) return; /* (read one by one then) */
    n = 0;
    for (const joutcome *o = oc; o; o = o->next) seqs[n++] = o->seq;
    j->store->read_ahead(j, txn, seqs, n);
    free(seqs);
}

/* One turn of the journal thread. Returns the monotonic time of the next turn. */
static int64_t turn(cr_journal *j) {
    pthread_mutex_lock(&j->mu);
    jfreeze *fz = j->fz_head;
    j->fz_head = j->fz_tail = NULL;
    joutcome *oc = j->oc_head;
    j->oc_head = j->oc_tail = NULL;
    j->noc = 0;
    jresend *rs = j->rs_head;
    j->rs_head = NULL;
    j->kick = 0;
    bool kick_scan = j->kick_scan != 0;
    j->kick_scan = 0;
    unsigned mode = j->kick_mode;
    int64_t since = j->kick_since;
    int paused = j->paused, closing = j->closing;
    bool offline = j->ops->offline(j->e);
    bool auto_ok = !paused && !closing && !offline && !j->broken;
    /* The network's return (a replay-now the app did not ask for: J_KICK_APP unset) is automatic
     * replay: it waits while replay is paused (courier_frozen_resume runs it), and is void when the
     * monitor says offline again (its next return kicks anew). It once ran as the app's replay-now,
     * sending even while paused and offline: a request frozen offline right after the first response
     * of a paused engine (whose turn had not taken that kick yet) was sent at once. */
    if (mode && !(mode & J_KICK_APP) && !auto_ok) {
        if (offline || closing || j->broken) j->kick_mode = 0;
        mode = 0;
    }
    bool pass_ok = (auto_ok || (mode && !closing)) && !j->broken;
    /* Claimed records not sent yet are given back when nothing should be sent now. */
    jsend *unsent = NULL;
    if (!pass_ok && j->ready_head) {
        unsent = j->ready_head;
        j->ready_head = j->ready_tail = NULL;
        j->nready = 0;
    }
    /* Claims ahead of the wire, so a completion sends the next at once and one commit records
     * many answers (the wire itself stays bounded by the concurrency). How far ahead follows the
     * answers of the last turn: a slow disk (long commits) gets bigger batches. */
    long slots = j->ahead - j->wire - j->nready;
    pthread_mutex_unlock(&j->mu);
    while (unsent) {
        jsend *n = unsent->next;
        joutcome *o = calloc(1, sizeof *o);
        if (o) {
            o->journal = j;
            o->seq = unsent->seq;
            o->st = unsent->st;
            o->code = cr_fail(&o->err, COURIER_E_CANCELLED, "not sent: replay paused, offline or closing");
            o->not_sent = 1;
            o->next = oc;
            oc = o;
        }
        cj_send_free(unsent);
        unsent = n;
    }
    pthread_mutex_lock(&j->lmu);
    bool listening = j->listeners != NULL;
    pthread_mutex_unlock(&j->lmu);

    int64_t mono = cr_mono_ms();
    int64_t now = cj_jnow(j);
    int64_t wake = mono + j->poll_ms;
    bool want_scan = (mono >= j->next_recover_ms || kick_scan) && !j->broken && !closing;
    bool has_work = fz || oc || rs;
    bool due_now = false;
    int64_t next_due = INT64_MAX;
    jseqs dead = {0}, expired = {0};
    /* A turn that writes anyway looks at `due` inside its transaction: no extra read. */
    if (!j->broken && (!has_work || want_scan) &&
        j->store->peek(j, now, want_scan, &due_now, &next_due, &dead, &expired) == 0 && want_scan)
        j->next_recover_ms = mono + j->poll_ms;
    bool want_pass = pass_ok && slots > 0 && (due_now || mode || has_work);
    jevent *events = NULL, **etail = &events;
    jsend *sends = NULL, **stail = &sends;
    bool mode_done = false;

    if (has_work || want_pass || expired.n || dead.n) {
        cj_txn *txn = NULL;
        int rc = j->broken ? MDB_PANIC : j->store->begin(j, true, &txn);
        jfreeze *f;
        /* A store that writes a turn's freezes together (Redis: one pipeline, one AOF fsync). */
        if (rc == 0 && fz && j->store->freeze_batch) rc = j->store->freeze_batch(j, txn, fz);
        for (f = fz; rc == 0 && f; f = f->next) {
            if (!f->seq) rc = cj_apply_freeze(j, txn, f);
            /* The event's snapshot is read back from the written bytes, when someone listens. */
            if (rc == 0 && listening && !(f->snap = cj_snap_in(j, txn, f->seq, &f->st))) rc = ENOMEM;
        }
        if (rc == 0 && oc && j->store->read_ahead) read_ahead_answers(j, txn, oc);
        for (joutcome *o = oc; rc == 0 && o; o = o->next) o->applied = (rc = cj_apply_outcome(j, txn, o, now, &etail)) == 0;
        if (rc == 0 && dead.n) rc = cj_recover_claims(j, txn, dead.v, dead.n, now);
        if (rc == 0 && expired.n) rc = cj_sweep_expired(j, txn, expired.v, expired.n, now, &etail);
        for (jresend *r = rs; rc == 0 && r && !closing; r = r->next) rc = cj_resend_one(j, txn, r->id, now, &stail);
        if (rc == 0 && want_pass) {
            long left = slots;
            int64_t unused;
            for (jsend *s = sends; s; s = s->next) left--;
            rc = j->store->pass(j, txn, now, left, mode, since, &stail, &etail, &unused, &mode_done);
        }
        /* What is left, after the claims; nothing to wait for when this engine would not send it (paused,
         * offline, closing: the change that lets it send kicks a turn, whose look at `due` tells). */
        if (rc == 0 && pass_ok) {
            j->store->due_edges(j, txn, now, &due_now, &next_due);
        } else if (rc == 0) {
            due_now = false;
            next_due = INT64_MAX;
        }
        if (rc == 0) rc = j->store->commit(j, txn);
        else if (txn) j->store->abort(j, txn);
        if (j->store->broken(rc) && rc != MDB_PANIC) {
            j->broken = 1;
            cr_log(j->e, COURIER_LOG_ERROR, "journal", "the frozen-request journal '%s' reported corruption: %s",
                   j->env->base.dir, j->store->strerror(j, rc));
        }
        if (rc == 0) {
            for (f = fz; f; f = f->next) {
                frozen_committed(j, f);
                freeze_answer(j, f, true, "");
                if (f->snap && !f->unconfirmed) /* (unconfirmed by replicas: not reported frozen) */
                    cj_events_push(&etail, cj_event_new(COURIER_FROZEN_EVENT_FROZEN, cj_snap_retain(f->snap), f->answer_id,
                                                  COURIER_OK));
            }
            if (mode_done && mode) {
                pthread_mutex_lock(&j->mu);
                if (j->kick_since == since) j->kick_mode = 0;
                pthread_mutex_unlock(&j->mu);
            }
        } else {
            /* On LMDB nothing of this turn happened. On a store whose writes are each durable when
             * they return (Redis: j->store->atomic false), what was written stands: its freezes are
             * answered, its claims sent, its events given; only the rest is tried again. Freezes are
             * tried alone (so one cannot sink the others); answers wait for the next turn (a few
             * times, then their claims' leases decide). */
            bool atomic = j->store->atomic;
            if (atomic) {
                jevent *ev = events;
                while (ev) {
                    jevent *n = ev->next;
                    courier_frozen_free(ev->snap);
                    courier_response_free(ev->resp);
                    free(ev);
                    ev = n;
                }
                events = NULL;
                etail = &events;
                while (sends) {
                    jsend *n = sends->next;
                    cj_send_free(sends);
                    sends = n;
                }
            }
            for (f = fz; f; f = f->next) {
                if (!atomic && f->seq) {
                    frozen_committed(j, f);
                    freeze_answer(j, f, true, "");
                    if (f->snap && !f->unconfirmed)
                        cj_events_push(&etail, cj_event_new(COURIER_FROZEN_EVENT_FROZEN, cj_snap_retain(f->snap),
                                                            f->answer_id, COURIER_OK));
                    continue;
                }
                courier_frozen_free(f->snap);
                f->snap = NULL;
            }
            freezes_alone(j, fz, &etail);
            joutcome *keep = NULL, *last = NULL;
            while (oc) {
                joutcome *n = oc->next;
                oc->next = NULL;
                /* (Without transactions, an answer is kept while its claim's lease lasts: a Redis
                 * restart takes longer than three turns, and an answer dropped is a request sent again.) */
                bool keep_it = ++oc->tries < 3 || (!atomic && cj_jnow(j) < oc->st.claim_ms);
                if (!(oc->applied && !atomic) && keep_it && !j->broken) {
                    if (last) last->next = oc;
                    else keep = oc;
                    last = oc;
                } else {
                    outcome_free(oc); /* its claim stays until the lease ends or this engine closes */
                }
                oc = n;
            }
            pthread_mutex_lock(&j->mu);
            for (joutcome *o = keep; o; o = o->next) j->noc++;
            if (keep) {
                last->next = j->oc_head;
                if (!j->oc_head) j->oc_tail = last;
                j->oc_head = keep;
            }
            pthread_mutex_unlock(&j->mu);
            if (keep) wake = mono + 100;
            due_now = false;
            next_due = now + 100;
        }
    }
    free(dead.v);
    free(expired.v);
    while (fz) {
        jfreeze *n = fz->next;
        freeze_free(j, fz);
        fz = n;
    }
    while (rs) {
        jresend *n = rs->next;
        free(rs);
        rs = n;
    }
    long answers = 0;
    while (oc) {
        joutcome *n = oc->next;
        outcome_free(oc);
        oc = n;
        answers++;
    }
    long base = j->concurrency * 8 > 64 ? j->concurrency * 8 : 64;
    long ahead = answers * 4 < base ? base : answers * 4 > 4096 ? 4096 : answers * 4;
    pthread_mutex_lock(&j->mu);
    j->ahead = ahead;
    pthread_mutex_unlock(&j->mu);
    cj_events_deliver(j, events);
    j->ops->monitor_dispatch(j->e);
    cj_ready_push(j, sends, !closing); /* nothing is claimed while closing: the next turn gives back the rest */
    if (!closing) cj_pump_ready(j);

    /* When to look again: the next due record, a probe, the poll. */
    if (!j->broken && next_due != INT64_MAX) {
        int64_t delta = next_due - now;
        if (delta < 0) delta = 0;
        if (mono + delta < wake) wake = mono + delta;
    }
    int64_t probe = j->ops->monitor_tick(j->e, mono);
    if (probe < wake) wake = probe;
    /* Records still due now that this engine would send: not idle (a free slot will take them). */
    bool pending_now = pass_ok && !closing && due_now;
    pthread_mutex_lock(&j->mu);
    /* (The network's return kept while paused waits for the resume: nothing to do now.) */
    bool kicked = j->kick_mode && (!j->paused || (j->kick_mode & J_KICK_APP));
    bool busy = j->fz_head || j->oc_head || j->rs_head || j->kick || kicked || j->wire > 0 || j->ready_head;
    j->idle = !busy && !pending_now;
    j->turns++;
    /* courier_frozen_wait_idle waits for a turn that ends idle: a busy turn wakes nobody (during a
     * replay every turn ended with a broadcast, and the waiter's wake-up, its look and its mutex
     * were 15% of the process's futex calls). */
    if (j->idle) pthread_cond_broadcast(&j->idle_cv);
    pthread_mutex_unlock(&j->mu);
    return wake;
}

/* Group commit of replay answers. A turn whose only work is answers waits a little (at most
 * J_LINGER_US) while more are on their way, so one synced commit records many answers instead of
 * one or two: the wire stays full meanwhile (claimed records wait in the ready queue, and each
 * completion sends the next without the journal), and the linger ends early for a freeze, a
 * resend, a kick, closing, enough answers, or a ready queue running low. Nothing is promised
 * before the commit, so a crash meanwhile costs a resend (at least once), never a request.
 * Called with mu held. */
#define J_LINGER_US 2000
static void linger(cr_journal *j) {
    if (!j->oc_head) return;
    struct timespec until = cr_cond_deadline(J_LINGER_US);
    while (!j->closing && !j->fz_head && !j->rs_head && !j->kick && j->noc < cj_linger_target(j) && j->wire > 0 &&
           j->nready >= j->concurrency) {
        if (pthread_cond_timedwait(&j->cv, &j->mu, &until) == ETIMEDOUT) break;
    }
}

static void *jthread(void *arg) {
    cr_journal *j = arg;
    cr_thread_set_name("courier-journal");
    pthread_mutex_lock(&j->mu);
    while (!j->go && !j->closing) pthread_cond_wait(&j->cv, &j->mu);
    j->kick = 1;
    pthread_mutex_unlock(&j->mu);
    for (;;) {
        int64_t wake = turn(j);
        pthread_mutex_lock(&j->mu);
        if (j->closing && !j->fz_head && !j->oc_head && !j->rs_head && !j->ready_head) {
            pthread_mutex_unlock(&j->mu);
            break;
        }
        while (!j->closing && !j->fz_head && !j->oc_head && !j->rs_head && !j->kick) {
            int64_t left = wake - cr_mono_ms();
            if (left <= 0) break;
            struct timespec ts = cr_cond_deadline(left * 1000);
            pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        }
        linger(j);
        pthread_mutex_unlock(&j->mu);
    }
    return NULL;
}

/* ==== engine hooks ============================================================================= */

static void journal_free(cr_journal *j) {
    if (!j) return;
    while (j->listeners) {
        jlistener *l = j->listeners;
        j->listeners = l->next;
        cr_callback_release(l->cb);
        free(l);
    }
    if (j->store) j->store->close(j);
    cj_jenv_release(j->env, j->me.nonce);
    cj_policy_close(j);
    cr_callback_release(j->clock);
    pthread_mutex_destroy(&j->mu);
    pthread_mutex_destroy(&j->lmu);
    pthread_cond_destroy(&j->cv);
    pthread_cond_destroy(&j->idle_cv);
    free(j);
}

int cr_journal_open(courier_engine *e, const cr_journal_ops *ops, courier_error *err) {
    cr_journal *j = calloc(1, sizeof *j);
    if (!j) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    pthread_mutex_init(&j->mu, NULL);
    pthread_mutex_init(&j->lmu, NULL);
    cr_cond_init(&j->cv);
    cr_cond_init(&j->idle_cv);
    j->e = e;
    j->ops = ops;
    const struct cr_frozen_conf *fc = &cr_core(e)->config->frozen;
    j->concurrency = fc->concurrency > 0 ? fc->concurrency : J_DEFAULT_CONCURRENCY;
    j->backoff_base = fc->backoff_base_ms > 0 ? fc->backoff_base_ms : J_DEFAULT_BACKOFF_BASE;
    j->backoff_max = fc->backoff_max_ms > 0 ? fc->backoff_max_ms : J_DEFAULT_BACKOFF_MAX;
    if (j->backoff_max < j->backoff_base) j->backoff_max = j->backoff_base;
    j->lease_ms = fc->lease_ms > 0 ? fc->lease_ms : J_DEFAULT_LEASE;
    j->poll_ms = fc->poll_ms > 0 ? fc->poll_ms : J_DEFAULT_POLL;
    j->default_expiry = fc->expiry_ms > 0 ? fc->expiry_ms : J_DEFAULT_EXPIRY;
    j->paused = fc->paused;
    j->ahead = j->concurrency * 8 > 64 ? j->concurrency * 8 : 64;
    j->clock = cr_callback_retain(cr_core(e)->config->clock);
    uint32_t nonce = 0;
    while (!nonce) cj_random_bytes(&nonce, sizeof nonce);
    cj_random_bytes(&j->rng, sizeof j->rng);
    j->rng |= 1;
    j->me.pid = (uint32_t)getpid();
    j->me.nonce = nonce;
    char state;
    if (cj_proc_stat((long)getpid(), &state, &j->me.start) != 0) j->me.start = 0;
    j->me.boot = cj_boot_hash();
    j->next_token = 1;
    cr_core(e)->journal = j;
    int rc = cj_policy_open(j) ? cr_fail(err, COURIER_E_NO_MEMORY, NULL) : COURIER_OK;
    /* The journal's store setting: a redis:// or redis+cluster:// URL (records on Redis Streams, redis.c), else a
     * directory (LMDB, the default: the engine's store directory). The directory's LMDB journal is
     * opened either way: it keeps the cookie jar, and this process's engines (claims' owners). */
    const char *where = cr_core(e)->config->frozen.store[0] ? cr_core(e)->config->frozen.store : NULL;
    bool redis = where && (cr_redis_is_url(where) || strncmp(where, "unix://", 7) == 0);
    j->store = &cj_lmdb_store;
    j->pass = &cj_replay_pass; /* replay.c's decisions, which the stores' passes call */
    if (rc == COURIER_OK) rc = cj_jenv_acquire(where && !redis ? where : cr_core(e)->store_dir, nonce, &j->env, err);
    if (rc == COURIER_OK && redis) {
#ifdef COURIER_REDIS
        j->store = &cj_redis_store;
        rc = j->store->open(j, where, err);
        if (rc) j->store = NULL;
#else
        rc = cr_fail(err, COURIER_E_REDIS_UNSUPPORTED, "this library was built without Redis (COURIER_REDIS off: no hiredis)");
#endif
    }
    if (rc == COURIER_OK) {
        int prc = pthread_create(&j->thread, NULL, jthread, j);
        if (prc) {
            rc = cr_fail(err, COURIER_E_INTERNAL, "cannot start the journal thread: %s", strerror(prc));
            if (err) err->os_error = prc;
        } else {
            cr_thread_name(j->thread, "courier-journal");
            j->thread_started = 1;
        }
    }
    if (rc) {
        cr_core(e)->journal = NULL;
        journal_free(j);
    }
    return rc;
}

void cr_journal_start(courier_engine *e) {
    cr_journal *j = e ? cr_core(e)->journal : NULL;
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    j->go = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void cr_journal_close(courier_engine *e) {
    cr_journal *j = e ? cr_core(e)->journal : NULL;
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    j->closing = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (j->thread_started) pthread_join(j->thread, NULL);
    /* Nothing is left queued: the thread drained it. Defensive frees for a thread that never ran. */
    while (j->fz_head) {
        jfreeze *n = j->fz_head->next;
        freeze_answer(j, j->fz_head, false, "the engine closed");
        freeze_free(j, j->fz_head);
        j->fz_head = n;
    }
    while (j->oc_head) {
        joutcome *n = j->oc_head->next;
        outcome_free(j->oc_head);
        j->oc_head = n;
    }
    while (j->rs_head) {
        jresend *n = j->rs_head->next;
        free(j->rs_head);
        j->rs_head = n;
    }
    while (j->ready_head) {
        jsend *n = j->ready_head->next;
        cj_send_free(j->ready_head);
        j->ready_head = n;
    }
    for (size_t i = 0; i < j->nspent; i++) courier_response_free(j->spent[i]); /* no replay on the wire took them */
    free(j->spent);
    cr_core(e)->journal = NULL;
    journal_free(j);
}

int cr_frozen_attach(courier_engine *e, const courier_request *r, cr_transfer *t, courier_error *err) {
    t->freeze.policy = r->freeze.policy;
    t->freeze.flags = r->freeze.flags;
    t->freeze.expiry_ms = r->freeze.expiry_ms;
    t->freeze.ignore_offline = r->freeze.ignore_offline;
    if ((r->freeze.id[0] && !(t->freeze.id = cr_strdup(r->freeze.id))) ||
        (r->freeze.resend_policy[0] && !(t->freeze.resend_policy = cr_strdup(r->freeze.resend_policy))))
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    if (r->freeze.policy != COURIER_FREEZE_NEVER && r->cache) {
        t->freeze.cache_set = 1;
        t->freeze.cache_policy = r->cache->policy;
        t->freeze.cache_expiry_s = (r->cache->expiry_ms + 999) / 1000;
    }
    if (r->freeze.policy == COURIER_FREEZE_NEVER || !r->freeze.resend_policy[0] || !cr_core(e)->journal)
        return COURIER_OK;
    if (cj_policy_stamp(cr_core(e)->journal, r->freeze.resend_policy, NULL))
        return cr_fail(err, COURIER_E_RESEND_POLICY_UNKNOWN, "no resend policy '%s' is registered",
                       r->freeze.resend_policy);
    if (strcmp(r->freeze.resend_policy, "courier.manual") == 0) t->freeze.policy = COURIER_FREEZE_MANUAL;
    return COURIER_OK;
}

static bool freezable(const cr_transfer *t, int code) {
    switch (code) {
    case COURIER_E_CANNOT_RESOLVE:
    case COURIER_E_CANNOT_CONNECT:
    case COURIER_E_OFFLINE: return true;
    case COURIER_E_TIMEOUT:
    case COURIER_E_NETWORK:
    case COURIER_E_PARTIAL_RESPONSE: return (t->freeze.flags & COURIER_FREEZE_ON_AMBIGUOUS) != 0;
    default: return false;
    }
}

/* Hands t's freeze to the journal thread. With `own`, the journal answers t itself and frees it
 * (a transfer that never reached the worker); else a detached copy of what answering needs, and
 * t->caller_gone is set (the engine frees t). False (nothing taken) on no memory or a closing or
 * broken journal. */
static bool freeze_take(courier_engine *e, cr_transfer *t, int code, const courier_error *err, bool own) {
    cr_journal *j = cr_core(e)->journal;
    /* Bodies from files or multipart parts, and downloads to files, are not kept: a file may change
     * or vanish before the resend. Those fail as they are, and so do requests with a TLS policy of
     * their own (security.c), which the journal does not keep: a replay would go under the engine's. */
    if (t->parts || t->body_file || t->download_path || t->mime || t->security) return false;
    pthread_mutex_lock(&j->mu);
    bool closing = j->closing;
    pthread_mutex_unlock(&j->mu);
    if (closing || j->broken) return false;
    jfreeze *f = calloc(1, sizeof *f);
    if (!f) goto fail;
    jstate *st = &f->st;
    if (t->freeze.id) snprintf(f->id, sizeof f->id, "%s", t->freeze.id);
    else f->generated = 1; /* made in the write transaction */
    char idem[COURIER_FROZEN_ID_MAX + 1], host[J_HOST_MAX + 1];
    const char *given = cr_kvlist_get(&t->headers, "Idempotency-Key");
    if (given) snprintf(idem, sizeof idem, "%s", given);
    else cj_random_hex(idem);
    /* The scheduler's "scheme://host:port" when it has one (lowercase, default port filled in). */
    size_t hl = t->host ? strlen(t->host) : 0;
    if (t->host && hl < sizeof host && strstr(t->host, "://") && strrchr(t->host, ':') > strstr(t->host, "://"))
        memcpy(host, t->host, hl + 1);
    else if (host_of(t->url, host, sizeof host))
        snprintf(host, sizeof host, "%s", "unknown://");
    int64_t now = cj_jnow(j);
    st->policy = (uint8_t)t->freeze.policy;
    st->flags = (uint16_t)(t->freeze.flags & (COURIER_FREEZE_UNORDERED | COURIER_FREEZE_ON_AMBIGUOUS));
    st->created_ms = now;
    st->expires_ms = now + (t->freeze.expiry_ms > 0 ? t->freeze.expiry_ms : j->default_expiry);
    /* Frozen because the network failed: the first resend waits one backoff step. Frozen because
     * the monitor said offline: due as soon as the monitor says online. */
    st->next_ms = code == COURIER_E_OFFLINE ? 0 : now + j->backoff_base;
    st->host_len = (uint16_t)strlen(host);
    memcpy(st->host, host, st->host_len);
    st->id_len = (uint16_t)strlen(f->id);
    memcpy(st->id, f->id, st->id_len);
    if (t->freeze.resend_policy) (void)cj_policy_stamp(j, t->freeze.resend_policy, st); /* checked at send */
    if (cj_payload_of(t, idem, st->created_ms, st->expires_ms, host, &f->payload) || !(f->method = cr_strdup(t->method)) ||
        !(f->url = cr_strdup(t->url)))
        goto fail;
    f->code = code;
    if (err) f->err = *err;
    else cr_fail(&f->err, code, NULL);
    /* The caller is answered after the commit (the engine's handle: a detached copy of what
     * answering needs, or t itself when it was handed over). */
    if (!(f->answer = j->ops->answer->detach(e, t, own))) goto fail;
    f->answer_id = t->id;
    pthread_mutex_lock(&j->mu);
    if (j->fz_tail) j->fz_tail->next = f;
    else j->fz_head = f;
    j->fz_tail = f;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return true;
fail:
    if (f) {
        free(f->payload);
        free(f->method);
        free(f->url);
    }
    free(f);
    return false; /* answered with its own failure */
}

bool cr_frozen_defer(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err) {
    struct cr_journal *j = cr_core(e)->journal;
    if (!j || t->freeze.policy == COURIER_FREEZE_NEVER || t->caller_gone || resp || !freezable(t, code))
        return false;
    return freeze_take(e, t, code, err, false);
}

bool cr_frozen_offline_send(courier_engine *e, cr_transfer *t) {
    struct cr_journal *j = cr_core(e)->journal;
    if (!j || t->freeze.policy == COURIER_FREEZE_NEVER || t->freeze.ignore_offline || t->mock || t->custom ||
        t->cache || !j->ops->offline(e))
        return false;
    pthread_mutex_lock(&cr_core(e)->lock);
    bool closing = cr_core(e)->closing;
    pthread_mutex_unlock(&cr_core(e)->lock);
    if (closing) return false; /* courier_send says COURIER_E_CLOSED */
    courier_error err;
    fail_text(&err, COURIER_E_OFFLINE, "the network monitor says offline", "");
    cr_event_will_send(e, t);
    if (freeze_take(e, t, COURIER_E_OFFLINE, &err, true)) return true;
    return false;
}
