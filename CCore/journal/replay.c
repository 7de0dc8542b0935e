/*
 * replay.c — what one turn writes (freezes, answers with the outcome log, claims with leases,
 * per-host order, expiry) and the sending of claimed records through courier_send.
 */
#include "journal/journal_internal.h"

/* ==== one loop turn ============================================================================ */

/* What an answer means for a record. */
enum { J_FINAL_OK, J_FINAL_FAIL, J_RETRY, J_NOT_TRIED, J_SET_ASIDE };

static int classify(int code, const courier_response *resp, const courier_error *err) {
    int status = resp ? resp->status : err ? err->http_status : 0;
    switch (code) {
    case COURIER_OK: return J_FINAL_OK;
    case COURIER_E_HTTP_STATUS:
        return status == 408 || status == 425 || status == 429 || status >= 500 ? J_RETRY : J_FINAL_FAIL;
    case COURIER_E_CANNOT_RESOLVE:
    case COURIER_E_CANNOT_CONNECT:
    case COURIER_E_TIMEOUT:
    case COURIER_E_NETWORK:
    case COURIER_E_PARTIAL_RESPONSE:
    case COURIER_E_TLS:
    case COURIER_E_PINNING:
    case COURIER_E_NO_MEMORY:
    case COURIER_E_INTERNAL:
    case COURIER_E_STORE:
    case COURIER_E_TOO_FREQUENT: return J_RETRY;
    case COURIER_E_CANCELLED:
    case COURIER_E_CLOSED:
    case COURIER_E_OFFLINE:
    case COURIER_E_FROZEN: return J_NOT_TRIED;
    case COURIER_E_JOURNAL_CORRUPT: return J_SET_ASIDE;
    default: return J_FINAL_FAIL;
    }
}

static long backoff_ms(cr_journal *j, uint32_t attempts) {
    long d = j->backoff_base;
    for (uint32_t i = 1; i < attempts && d < j->backoff_max; i++) d *= 2;
    if (d > j->backoff_max) d = j->backoff_max;
    if (d > 1) d = d / 2 + (long)(cj_jrand(j) % (uint64_t)(d - d / 2 + 1)); /* equal jitter */
    return d;
}

/* Writes one frozen request (the store's freeze). */
int cj_apply_freeze(cr_journal *j, cj_txn *txn, jfreeze *f) { return j->store->freeze(j, txn, f); }

/* Records a replay's answer: removal with the outcome log on a final answer, the next attempt's
 * time on a retryable one, the claim given back when nothing was tried. */
int cj_apply_outcome(cr_journal *j, cj_txn *txn, joutcome *o, int64_t now, jevent ***events) {
    if (o->verdict) return cj_policy_apply(j, txn, o, now, events); /* policy.c: held or deleted */
    jstate st;
    int rc = cj_st_get(j, txn, o->seq, &st);
    int kind = classify(o->code, o->resp, &o->err);
    int status = o->resp ? o->resp->status : o->err.http_status;
    int evkind = 0, final = 0, attempts = (int)o->st.attempts;
    bool expired = false;
    if (rc == MDB_NOTFOUND || (rc == 0 && (st.id_len != o->st.id_len || memcmp(st.id, o->st.id, st.id_len) != 0))) {
        /* Removed (or replaced) while on the wire: only the event remains to give. */
        if (kind != J_NOT_TRIED && kind != J_SET_ASIDE) {
            evkind = kind == J_FINAL_OK ? COURIER_FROZEN_EVENT_RESENT_SUCCEEDED : COURIER_FROZEN_EVENT_RESENT_FAILED;
            final = 1;
        }
    } else if (rc) {
        return rc;
    } else {
        bool mine = st.claim_ms && st.owner.pid == j->me.pid && st.owner.nonce == j->me.nonce &&
                    st.owner.start == j->me.start;
        jstate old = st;
        attempts = (int)st.attempts;
        if (kind == J_FINAL_OK || kind == J_FINAL_FAIL) {
            st.last_code = o->code;
            st.last_status = status;
            if ((rc = cj_rec_remove(j, txn, o->seq, &old)) || (rc = cj_outcome_log(j, txn, &st, o->code, status, now)))
                return rc;
            evkind = kind == J_FINAL_OK ? COURIER_FROZEN_EVENT_RESENT_SUCCEEDED : COURIER_FROZEN_EVENT_RESENT_FAILED;
            final = 1;
        } else if (!mine) {
            /* Another replayer took it over meanwhile and decides; report the failed attempt. */
            if (kind == J_RETRY) evkind = COURIER_FROZEN_EVENT_RESENT_FAILED;
        } else {
            st.claim_ms = 0;
            memset(&st.owner, 0, sizeof st.owner);
            if (kind == J_NOT_TRIED || kind == J_SET_ASIDE) {
                if (st.attempts) st.attempts--;
                attempts = (int)st.attempts;
                if (kind == J_SET_ASIDE) {
                    /* Its text does not decode: never sent; left (as late as backoff allows) for the
                     * app to see in the list and remove. */
                    st.last_code = COURIER_E_JOURNAL_CORRUPT;
                    st.next_ms = now + j->backoff_max;
                }
            } else {
                st.last_code = o->code;
                st.last_status = status;
                st.next_ms = now + backoff_ms(j, st.attempts);
                evkind = COURIER_FROZEN_EVENT_RESENT_FAILED;
            }
            if (kind == J_RETRY && st.expires_ms <= now) {
                /* Out of time after a failed attempt: removed and reported expired. */
                if ((rc = cj_rec_remove(j, txn, o->seq, &old))) return rc;
                expired = true;
            } else if ((rc = cj_st_update(j, txn, o->seq, &old, &st))) {
                return rc;
            }
        }
    }
    if (evkind) {
        jevent *ev = cj_event_new(evkind, cj_snap_retain(o->snap), o->request_id, o->code);
        if (ev) {
            memcpy(ev->id, o->st.id, o->st.id_len);
            cj_policy_note(j, ev, &o->st);
            ev->ev.final = final;
            ev->ev.attempts = attempts;
            ev->resp = o->resp;
            o->resp = NULL;
            ev->err = o->err;
        }
        cj_events_push(events, ev);
    }
    if (expired) {
        jevent *ev = cj_event_new(COURIER_FROZEN_EVENT_EXPIRED, cj_snap_retain(o->snap), 0, COURIER_OK);
        if (ev) {
            memcpy(ev->id, o->st.id, o->st.id_len);
            ev->ev.final = 1;
            ev->ev.attempts = attempts;
        }
        cj_events_push(events, ev);
    }
    return 0;
}

/* Why a record a pass claims in this replay-now mode is sent (CJ_SEND_*). */
static int kick_reason(unsigned mode) {
    return (mode & J_KICK_APP) ? CJ_SEND_REPLAY_NOW : (mode & J_KICK_NOW) ? CJ_SEND_ONLINE : CJ_SEND_DUE;
}

/* Claims a record for this engine: attempts + 1, lease until now + lease. had, hadlen: the
 * record's text as cj_consider's text, tlen (NULL: read here). */
static int claim(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, const char *had, size_t hadlen, int64_t now,
                 int explicit_, jsend ***sends) {
    jstate old = *st;
    st->claim_ms = now + j->lease_ms;
    st->owner = j->me;
    st->attempts++;
    st->last_ms = now;
    const char *ptext;
    size_t plen;
    int rc;
    char *text = NULL;
    jsend *s = calloc(1, sizeof *s); /* before the claim's write: a claim is written only with its send */
    if (!s) return ENOMEM;
    if (had && j->store->st_update_with) {
        /* The text the pass read, copied before the write (which may move it): written back with
         * the new state, not read again. */
        if (!(text = malloc(hadlen ? hadlen : 1))) {
            free(s);
            return ENOMEM;
        }
        memcpy(text, had, hadlen);
        if ((rc = j->store->st_update_with(j, txn, seq, &old, st, text, hadlen))) {
            free(s);
            free(text);
            return rc;
        }
        ptext = text;
        plen = hadlen;
    } else if (j->store->st_update_text) { /* the text read once, with the state it keeps */
        if ((rc = j->store->st_update_text(j, txn, seq, &old, st, &ptext, &plen))) {
            free(s);
            return rc;
        }
    } else {
        /* The text first, then the claim. On a store without transactions (Redis) a claim written
         * and its text's read failed (Redis gone between the two) is a claim with no send behind
         * it: written by the commit, or by a later turn (the writes Redis did not take are kept),
         * it held the record for this live engine until the lease ended (300 s by default), and
         * with it every ordered record of its host. */
        jstate again;
        if ((rc = cj_rec_get(j, txn, seq, &again, &ptext, &plen)) || !(text = malloc(plen ? plen : 1))) {
            free(s);
            return rc == MDB_NOTFOUND ? 0 : rc ? rc : ENOMEM; /* removed meanwhile (Redis) */
        }
        memcpy(text, ptext, plen); /* (borrowed until the next operation) */
        if ((rc = cj_st_update(j, txn, seq, &old, st))) {
            free(s);
            free(text);
            return rc;
        }
    }
    if (!text && (text = malloc(plen ? plen : 1))) memcpy(text, ptext, plen);
    if (!text) {
        free(s); /* (LMDB: the transaction is aborted, its claim with it) */
        return ENOMEM;
    }
    s->text = text;
    s->tlen = plen;
    s->st = *st;
    s->seq = seq;
    s->explicit_ = explicit_;
    **sends = s;
    *sends = &s->next;
    return 0;
}

/* Removes what expired by now among the records the periodic scan found (checked again here; not
 * what another live replayer holds), reporting each. Records that are due are also checked when
 * the replayer reaches them, so none is ever sent after its expiry. */
int cj_sweep_expired(cr_journal *j, cj_txn *txn, const uint64_t *seqs, size_t n, int64_t now, jevent ***events) {
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        jstate st;
        rc = cj_st_get(j, txn, seqs[i], &st);
        if (rc == MDB_NOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc) break;
        if (st.expires_ms > now) continue;
        if (st.claim_ms && !cj_claim_stale(j, &st, now)) continue; /* on the wire: its answer decides */
        if (cj_policy_gate(j, &st, NULL) == CJ_RP_UNKNOWN) continue; /* policy.c: kept, never deleted here */
        courier_frozen *snap = cj_snap_in(j, txn, seqs[i], &st);
        if ((rc = cj_rec_remove(j, txn, seqs[i], &st))) {
            courier_frozen_free(snap);
            break;
        }
        jevent *ev = cj_event_new(COURIER_FROZEN_EVENT_EXPIRED, snap, 0, COURIER_OK);
        if (ev) {
            memcpy(ev->id, st.id, st.id_len);
            cj_policy_note(j, ev, &st);
            ev->ev.final = 1;
            ev->ev.attempts = (int)st.attempts;
        }
        cj_events_push(events, ev);
    }
    return rc;
}

/* Gives back the claims of dead owners and puts records given back without their `due` key into
 * it (found by a read scan, checked again here). */
int cj_recover_claims(cr_journal *j, cj_txn *txn, const uint64_t *seqs, size_t n, int64_t now) {
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        jstate st;
        rc = cj_st_get(j, txn, seqs[i], &st);
        if (rc == MDB_NOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc) continue;
        /* The rewrite below, with no claim, gives such a record its key (store.c, due_follow). */
        if (!cj_given_back_unindexed(&st) && (!st.claim_ms || !cj_claim_stale(j, &st, now))) continue;
        jstate old = st;
        st.claim_ms = 0;
        memset(&st.owner, 0, sizeof st.owner);
        rc = cj_st_update(j, txn, seqs[i], &old, &st);
    }
    return rc;
}

/* One candidate of a pass, due by the store's index: claimed when eligible and a slot is free. */
int cj_consider(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, const char *text, size_t tlen, int64_t now,
                long *slots, unsigned mode, int64_t since, jsend ***sends, jevent ***events, int64_t *next,
                bool *mode_done, bool *stop) {
    int rc = 0;
    bool eligible = due_time(st) <= now ||
                    ((mode & J_KICK_NOW) && st->last_ms < since && (!st->claim_ms || cj_claim_stale(j, st, now)));
    if (st->claim_ms && !cj_claim_stale(j, st, now)) eligible = false;
    if (!eligible) {
        int64_t t = due_time(st);
        if (t > now && t < *next) *next = t;
        return 0;
    }
    /* The record's resend policy (policy.c): one this engine does not have keeps it as it is,
     * expiry included; a built-in may hold it; a user policy is asked when sent. */
    const char *why = NULL;
    int verdict = cj_policy_gate(j, st, &why);
    if (verdict == CJ_RP_UNKNOWN) return cj_policy_hold(j, txn, seq, st, now, verdict, why, events);
    if (st->expires_ms <= now) {
        courier_frozen *snap = cj_snap_in(j, txn, seq, st);
        if ((rc = cj_rec_remove(j, txn, seq, st))) {
            courier_frozen_free(snap);
            return rc;
        }
        jevent *ev = cj_event_new(COURIER_FROZEN_EVENT_EXPIRED, snap, 0, COURIER_OK);
        if (ev) {
            ev->ev.final = 1;
            memcpy(ev->id, st->id, st->id_len);
            cj_policy_note(j, ev, st);
        }
        cj_events_push(events, ev);
        return 0;
    }
    if (verdict == CJ_RP_HOLD) return cj_policy_hold(j, txn, seq, st, now, verdict, why, events);
    if (*slots <= 0) {
        *mode_done = false;
        *next = now;
        *stop = true;
        return 0;
    }
    if ((rc = claim(j, txn, seq, st, text, tlen, now, kick_reason(mode), sends))) return rc;
    (*slots)--;
    return 0;
}

/* A manual record in a replay-now that includes them. */
int cj_consider_manual(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, int64_t now, long *slots, unsigned mode,
                       jsend ***sends, int64_t *next, bool *mode_done, bool *stop) {
    if (st->claim_ms && !cj_claim_stale(j, st, now)) return 0;
    if (cj_policy_gate(j, st, NULL) == CJ_RP_UNKNOWN) return 0; /* policy.c: kept as it is */
    if (*slots <= 0) {
        *mode_done = false;
        *next = now;
        *stop = true;
        return 0;
    }
    int rc = claim(j, txn, seq, st, NULL, 0, now, kick_reason(mode), sends);
    if (rc == 0) (*slots)--;
    return rc;
}

/* An explicit resend by id: claimed whatever its policy, order or backoff. */
int cj_resend_one(cr_journal *j, cj_txn *txn, const char *id, int64_t now, jsend ***sends) {
    uint64_t seq;
    int rc = cj_find_seq(j, txn, id, &seq);
    if (rc == MDB_NOTFOUND) return 0;
    if (rc) return rc;
    jstate st;
    if ((rc = cj_st_get(j, txn, seq, &st))) return rc == MDB_NOTFOUND ? 0 : rc;
    if (st.claim_ms && !cj_claim_stale(j, &st, now)) return 0;
    if (j->store->take && (rc = j->store->take(j, txn, seq))) return rc == MDB_NOTFOUND ? 0 : rc;
    return claim(j, txn, seq, &st, NULL, 0, now, CJ_SEND_RESEND, sends); /* by id, the app's word (no policy asked) */
}

static void replay_done(uint64_t request_id, int code, courier_response *resp, const courier_error *err, void *user);

/* Answers that make a commit worth it without waiting longer (see linger). */
long cj_linger_target(const cr_journal *j) { return j->concurrency * 4 > 32 ? j->concurrency * 4 : 32; }

static void outcome_push(cr_journal *j, joutcome *o) {
    pthread_mutex_lock(&j->mu);
    if (j->oc_tail) j->oc_tail->next = o;
    else j->oc_head = o;
    j->oc_tail = o;
    j->noc++;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* A replay that will not be sent leaves the wire; the events' responses waiting for a completion
 * are freed then (a completion may no longer come to take them). */
static void off_wire(cr_journal *j) {
    pthread_mutex_lock(&j->mu);
    j->wire--;
    courier_response **spent = j->wire == 0 ? j->spent : NULL;
    size_t nspent = spent ? j->nspent : 0;
    if (spent) {
        j->spent = NULL;
        j->nspent = j->capspent = 0;
    }
    pthread_mutex_unlock(&j->mu);
    for (size_t i = 0; i < nspent; i++) courier_response_free(spent[i]);
    free(spent);
}

/* Sends one claimed record through the public send path (retry, cache, mapping apply unchanged).
 * j->wire already counts it. */
static void send_one(cr_journal *j, jsend *s) {
    /* The answer's record was made with the parse, on the journal thread (cj_ready_push), which
     * frees it with the claimed record once the answer is written: what the journal allocates it
     * frees itself, so its frees do not take the worker's malloc arena from under the worker. */
    joutcome *o = s->o ? s->o : calloc(1, sizeof *o);
    s->o = NULL;
    if (!o) {
        /* The claim stays; its lease ends and it is sent again. */
        off_wire(j);
        cj_send_free(s);
        return;
    }
    o->journal = j;
    o->seq = s->seq;
    o->st = s->st;
    o->send = s; /* freed with o (outcome_free) */
    int explicit_ = s->explicit_;
    courier_request *r = NULL;
    if (!s->decoded) {
        s->rc = cj_jreq_read(s->text, s->tlen, &s->q);
        s->decoded = 1;
    }
    int rc = s->rc; /* decoded once: for the request and the snapshot */
    /* A user resend policy is asked here, off the journal's transaction (policy.c). */
    int gate = rc == COURIER_OK && explicit_ != CJ_SEND_RESEND ? cj_policy_gate(j, &s->st, NULL) : CJ_RP_SEND;
    bool ask = gate == CJ_RP_ASK || gate == CJ_RP_UNKNOWN; /* unknown: removed since the claim */
    if (rc == COURIER_OK && !o->snap && (ask || atomic_load(&j->nlisteners) > 0)) {
        /* Someone listens (or a policy is asked) and the parse made no snapshot (nobody listened
         * then): made here. */
        bool bad = false;
        o->snap = cj_snap_take(s->seq, &s->q, s->text, s->tlen, &s->st, &bad);
        s->text = NULL;
    }
    /* The request borrows the decoded method, url, headers and body, wherever they are now (the
     * snapshot's, or the claimed record's: both live until the answer is recorded, after this send
     * returned). */
    bool own = false; /* r built here (freed here), not with the parse (freed with s) */
    if (rc == COURIER_OK && s->r) {
        r = s->r;
    } else if (rc == COURIER_OK) {
        rc = cj_request_from(o->snap ? &o->snap->q : &s->q, &r);
        own = rc == COURIER_OK;
    }
    if (rc != COURIER_OK) {
        courier_frozen_free(o->snap); /* no request, no snapshot: as when nobody listens */
        o->snap = NULL;
        ask = false;
    }
    jstate claimed = s->st;
    if (ask && o->snap) {
        int verdict = cj_policy_ask(j, &claimed, o->snap, cj_jnow(j), &o->why);
        if (verdict != CJ_RP_SEND) {
            if (own) cj_request_release(r);
            o->verdict = verdict == CJ_RP_DELETE ? CJ_RP_DELETE : CJ_RP_HOLD;
            o->not_sent = 1;
            off_wire(j);
            outcome_push(j, o);
            return;
        }
    }
    if (rc == COURIER_OK && (explicit_ == CJ_SEND_REPLAY_NOW || explicit_ == CJ_SEND_RESEND))
        rc = courier_request_set_ignore_offline(r, 1);
    uint64_t rid = 0;
    if (rc == COURIER_OK) rc = j->ops->send(&rid, j->e, r, replay_done, o, &o->err);
    if (rc != COURIER_OK) cr_error_release_user(&o->err); /* an interceptor's raise: nobody to give it to */
    if (rc == COURIER_OK) cj_policy_log_replay(j, &claimed, explicit_, rid);
    else if (rc == COURIER_E_JOURNAL_CORRUPT) cr_fail(&o->err, rc, "the stored request does not decode");
    else cr_fail(&o->err, rc, "the frozen request cannot be rebuilt");
    /* Once sent, o (and s with it) may already be answered and freed by the journal thread: only
     * a request built here is released here. */
    if (own) cj_request_release(r);
    if (rc != COURIER_OK) {
        o->code = rc;
        o->not_sent = 1;
        off_wire(j);
        outcome_push(j, o);
    }
}

/* Sends claimed records while fewer than `concurrency` are on the wire: from the journal thread
 * after a turn, and from each replay's completion (the worker), so the next request goes out
 * without waiting for the journal's next commit. */
void cj_pump_ready(cr_journal *j) {
    for (;;) {
        pthread_mutex_lock(&j->mu);
        jsend *s = j->ready_head;
        if (!s || j->wire >= j->concurrency) {
            pthread_mutex_unlock(&j->mu);
            return;
        }
        j->ready_head = s->next;
        if (!j->ready_head) j->ready_tail = NULL;
        j->nready--;
        j->wire++;
        pthread_mutex_unlock(&j->mu);
        s->next = NULL;
        send_one(j, s);
    }
}

void cj_send_free(jsend *s) {
    if (!s) return;
    cj_request_release(s->r); /* its borrowed parts are not touched */
    cj_jreq_clear(&s->q);
    free(s->text);
    if (s->o) {
        courier_frozen_free(s->o->snap);
        free(s->o);
    }
    free(s);
}

void cj_ready_push(cr_journal *j, jsend *list, bool pump) {
    /* The parse of a record (its JSON text on the tape, the fields decoded: a seventh of a
     * replay's instructions) is done here, on the journal thread, which otherwise waits on the disk
     * between turns, rather than on the worker that sends it, which is also the transport's thread
     * (docs/design/journal.md, "Where replay's time goes"). In chunks, each queued (and with `pump`, sent
     * while slots are free) before the next is parsed, so the wire does not wait for a whole turn's
     * claims to be parsed. */
    while (list) {
        jsend *head = list, *last = NULL;
        long n = 0;
        for (; list && n < 16; n++) {
            jsend *s = list;
            s->rc = cj_jreq_read(s->text, s->tlen, &s->q);
            s->decoded = 1;
            /* The answer's record and the events' snapshot are made here too (see send_one). */
            s->o = calloc(1, sizeof *s->o);
            int gate = s->rc == COURIER_OK && s->explicit_ != CJ_SEND_RESEND ? cj_policy_gate(j, &s->st, NULL) : CJ_RP_SEND;
            if (s->o && s->rc == COURIER_OK &&
                (gate == CJ_RP_ASK || gate == CJ_RP_UNKNOWN || atomic_load(&j->nlisteners) > 0)) {
                bool bad = false;
                s->o->snap = cj_snap_take(s->seq, &s->q, s->text, s->tlen, &s->st, &bad);
                s->text = NULL;
            }
            /* The request too, so the worker only sends it (its build, the header checks and its
             * free were ~2,200 instructions of the worker's per replay). It borrows from where the
             * decoded request lives now; a snapshot made later, when sent, takes the decoded
             * request whole (its strings stay where they are). Not built: built when sent. */
            if (s->o && s->rc == COURIER_OK && cj_request_from(s->o->snap ? &s->o->snap->q : &s->q, &s->r) != COURIER_OK)
                s->r = NULL;
            last = s;
            list = s->next;
        }
        last->next = NULL;
        pthread_mutex_lock(&j->mu);
        j->nready += n;
        if (j->ready_tail) j->ready_tail->next = head;
        else j->ready_head = head;
        j->ready_tail = last;
        pthread_mutex_unlock(&j->mu);
        if (pump) cj_pump_ready(j);
    }
}

void cj_responses_spent(cr_journal *j, courier_response **v, size_t n) {
    if (!n) return;
    bool handed = false;
    pthread_mutex_lock(&j->mu);
    /* A replay on the wire completes later (replay_done), and takes the list then. */
    if (j->wire > 0) {
        if (j->nspent + n > j->capspent) {
            size_t cap = j->capspent ? j->capspent : 64;
            while (cap < j->nspent + n) cap *= 2;
            courier_response **p = realloc(j->spent, cap * sizeof *p);
            if (p) {
                j->spent = p;
                j->capspent = cap;
            }
        }
        if (j->nspent + n <= j->capspent) {
            memcpy(j->spent + j->nspent, v, n * sizeof *v);
            j->nspent += n;
            handed = true;
        }
    }
    pthread_mutex_unlock(&j->mu);
    if (!handed)
        for (size_t i = 0; i < n; i++) courier_response_free(v[i]);
}

static void replay_done(uint64_t request_id, int code, courier_response *resp, const courier_error *err, void *user) {
    joutcome *o = user;
    cr_journal *j = o->journal;
    o->request_id = request_id;
    o->code = code;
    o->resp = resp;
    if (err) o->err = *err;
    else cr_error_clear(&o->err);
    cr_error_forget_user(&o->err); /* a copy: the completion's error keeps what a callback raised */
    pthread_mutex_lock(&j->mu);
    j->wire--;
    if (j->oc_tail) j->oc_tail->next = o;
    else j->oc_head = o;
    j->oc_tail = o;
    /* The journal thread is woken by the first answer (it may be waiting for work), and then only
     * when enough answers for one commit are queued or the claimed records run low (see linger). */
    if (++j->noc == 1 || j->noc >= cj_linger_target(j) || j->nready < j->concurrency) pthread_cond_signal(&j->cv);
    courier_response **spent = j->spent;
    size_t nspent = j->nspent;
    j->spent = NULL;
    j->nspent = j->capspent = 0;
    pthread_mutex_unlock(&j->mu);
    cj_pump_ready(j);
    /* The events' responses the journal thread handed back (cj_responses_spent), after the next
     * send went out. */
    for (size_t i = 0; i < nspent; i++) courier_response_free(spent[i]);
    free(spent);
}

const cj_pass_fns cj_replay_pass = {cj_consider, cj_consider_manual, cj_sweep_expired};
