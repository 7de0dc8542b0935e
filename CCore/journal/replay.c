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

int cj_outcome_log(cr_journal *j, MDB_txn *txn, const jstate *st, int code, int status, int64_t now) {
    uint64_t n;
    int rc = cj_last_next(txn, j->env->db_outcome, &n);
    if (rc) return rc;
    char text[COURIER_FROZEN_ID_MAX + 160];
    int len = snprintf(text, sizeof text, "{\"id\":\"%.*s\",\"code\":%d,\"status\":%d,\"at_ms\":%lld,\"attempts\":%u}",
                       (int)st->id_len, st->id, code, status, (long long)now, st->attempts);
    uint8_t k[8];
    cr_put_be64(k, n);
    MDB_val key = {8, k}, val = {(size_t)len, text};
    if ((rc = mdb_put(txn, j->env->db_outcome, &key, &val, MDB_APPEND))) return rc; /* n is past every key */
    MDB_stat ms;
    if (mdb_stat(txn, j->env->db_outcome, &ms) == 0 && ms.ms_entries > J_OUTCOMES_KEPT + 100) { /* trims in batches */
        MDB_cursor *c;
        if ((rc = mdb_cursor_open(txn, j->env->db_outcome, &c))) return rc;
        size_t extra = ms.ms_entries - J_OUTCOMES_KEPT;
        MDB_val ck, cv;
        while (extra-- && (rc = mdb_cursor_get(c, &ck, &cv, MDB_FIRST)) == 0) rc = mdb_cursor_del(c, 0);
        mdb_cursor_close(c);
        if (rc == MDB_NOTFOUND) rc = 0;
    }
    return rc;
}

/* Writes one frozen request. */
int cj_apply_freeze(cr_journal *j, MDB_txn *txn, jfreeze *f) {
    int rc = 0;
    MDB_val idk = {f->st.id_len, f->st.id}, idv;
    if (!f->generated) {
        rc = mdb_get(txn, j->env->db_ids, &idk, &idv);
        if (rc == 0 && idv.mv_size == 8) {
            /* The same freeze id again: the newer request replaces the older one. */
            uint64_t old = cr_get_be64(idv.mv_data);
            jstate ost;
            rc = cj_st_get(j, txn, old, &ost);
            if (rc == 0) rc = cj_rec_remove(j, txn, old, &ost);
            else if (rc == MDB_NOTFOUND) rc = 0;
        } else if (rc == MDB_NOTFOUND) {
            rc = 0;
        }
        if (rc) return rc;
    }
    uint64_t seq;
    if ((rc = cj_last_next(txn, j->env->db_req, &seq))) return rc;
    if (f->generated) {
        /* Generated: the record's number, then 64 random bits (no `ids` entry needed). */
        char rnd[33];
        cj_random_hex(rnd);
        static const char hex[] = "0123456789abcdef";
        for (int i = 0; i < 16; i++) f->id[i] = hex[(seq >> (60 - 4 * i)) & 15];
        memcpy(f->id + 16, rnd, 16);
        f->id[32] = '\0';
        f->st.id_len = 32;
        memcpy(f->st.id, f->id, 32);
    }
    /* The text: {"v":1,"id":...,"seq":..., then what the worker built. Ids need no escaping. */
    char opening[COURIER_FROZEN_ID_MAX + 64];
    size_t idl = strlen(f->id);
    memcpy(opening, "{\"v\":1,\"id\":\"", 13);
    memcpy(opening + 13, f->id, idl);
    memcpy(opening + 13 + idl, "\",\"seq\":", 8);
    size_t hl = 21 + idl;
    hl += cr_json_format_int(opening + hl, (int64_t)seq);
    opening[hl++] = ',';
    size_t pl = strlen(f->payload);
    char *text = malloc(hl + pl + 1);
    if (!text) return ENOMEM;
    memcpy(text, opening, hl);
    memcpy(text + hl, f->payload, pl + 1);
    if (!f->generated) {
        uint8_t sb[8];
        cr_put_be64(sb, seq);
        idk.mv_size = f->st.id_len;
        idk.mv_data = f->st.id;
        idv.mv_size = 8;
        idv.mv_data = sb;
        rc = mdb_put(txn, j->env->db_ids, &idk, &idv, 0);
    }
    if (!rc && f->st.policy == COURIER_FREEZE_AUTO) {
        bool in_due = true;
        if (is_ordered_auto(&f->st)) {
            uint64_t head = 0;
            rc = cj_hostq_op(j, txn, &f->st, seq, true);
            if (!rc) rc = cj_host_head(j, txn, f->st.host, f->st.host_len, &head);
            in_due = head == seq;
        }
        if (!rc && in_due) {
            f->st.flags |= JF_IN_DUE;
            rc = cj_key2_op(j, txn, j->env->db_due, due_time(&f->st), seq, true);
        }
    }
    if (!rc) rc = cj_rec_put(j, txn, seq, &f->st, text, strlen(text), true);
    free(text);
    if (rc == 0) f->seq = seq;
    return rc;
}

/* Records a replay's answer: removal with the outcome log on a final answer, the next attempt's
 * time on a retryable one, the claim given back when nothing was tried. */
int cj_apply_outcome(cr_journal *j, MDB_txn *txn, joutcome *o, int64_t now, jevent ***events) {
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

/* Claims a record for this engine: attempts + 1, lease until now + lease. */
static int claim(cr_journal *j, MDB_txn *txn, uint64_t seq, jstate *st, int64_t now, int explicit_, jsend ***sends) {
    jstate old = *st;
    st->claim_ms = now + j->lease_ms;
    st->owner = j->me;
    st->attempts++;
    st->last_ms = now;
    int rc = cj_st_update(j, txn, seq, &old, st);
    if (rc) return rc;
    MDB_val p;
    jstate again;
    if ((rc = cj_rec_get(j, txn, seq, &again, &p))) return rc;
    jsend *s = calloc(1, sizeof *s);
    char *text = malloc(p.mv_size ? p.mv_size : 1);
    if (!s || !text) {
        free(s);
        free(text);
        return ENOMEM;
    }
    memcpy(text, p.mv_data, p.mv_size);
    s->text = text;
    s->tlen = p.mv_size;
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
int cj_sweep_expired(cr_journal *j, MDB_txn *txn, const uint64_t *seqs, size_t n, int64_t now, jevent ***events) {
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

/* Gives back the claims of dead owners (found by a read scan, checked again here). */
int cj_recover_claims(cr_journal *j, MDB_txn *txn, const uint64_t *seqs, size_t n, int64_t now) {
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        jstate st;
        rc = cj_st_get(j, txn, seqs[i], &st);
        if (rc == MDB_NOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc || !st.claim_ms || !cj_claim_stale(j, &st, now)) continue;
        jstate old = st;
        st.claim_ms = 0;
        memset(&st.owner, 0, sizeof st.owner);
        rc = cj_st_update(j, txn, seqs[i], &old, &st);
    }
    return rc;
}

/* Claims due records while this engine has free slots. Returns the earliest future due time in
 * *next (INT64_MAX if none) and whether a replay-now scan found nothing left. */
int cj_pass(cr_journal *j, MDB_txn *txn, int64_t now, long slots, unsigned mode, int64_t since, jsend ***sends,
            jevent ***events, int64_t *next, bool *mode_done) {
    *next = INT64_MAX;
    *mode_done = true;
    MDB_cursor *c;
    int rc = 0;
    uint64_t *cand = NULL;
    size_t n = 0, cap = 0;
    MDB_val k, v;
    bool full = false; /* out of slots with candidates left */
    /* `due` in batches a little larger than the free slots: a batch is collected first (changing
     * `due` under the cursor would move it), then claimed, and the next one starts at the key the
     * last one stopped at (a claim moves its key to the lease's end, past now). So a pass costs what
     * it claims, not the journal's length. The first sweep takes what is due now; a replay-now then
     * sweeps what is not due yet. */
    for (int sweep = 0; sweep < ((mode & J_KICK_NOW) ? 2 : 1) && rc == 0 && !full; sweep++) {
        uint8_t from[16];
        bool have_from = sweep == 1, more = true;
        if (have_from) {
            cr_put_be64(from, cr_be_time(now + 1));
            memset(from + 8, 0, 8);
        }
        while (more && rc == 0 && !full) {
            more = false;
            n = 0;
            if ((rc = mdb_cursor_open(txn, j->env->db_due, &c))) break;
            size_t limit = (size_t)(slots > 0 ? slots : 0) + 16;
            if (have_from) {
                k.mv_size = 16;
                k.mv_data = from;
                rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
            } else {
                rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
            }
            for (; rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
                if (k.mv_size != 16) continue;
                int64_t t = (int64_t)cr_get_be64(k.mv_data);
                if (sweep == 0 && t > now) {
                    *next = t;
                    break;
                }
                if (n == limit) {
                    memcpy(from, k.mv_data, 16); /* the next batch starts here */
                    have_from = more = true;
                    break;
                }
                if (n == cap) {
                    cap = cap ? cap * 2 : 32;
                    uint64_t *p = realloc(cand, cap * sizeof *p);
                    if (!p) {
                        rc = ENOMEM;
                        break;
                    }
                    cand = p;
                }
                cand[n++] = cr_get_be64((const uint8_t *)k.mv_data + 8);
            }
            mdb_cursor_close(c);
            if (rc == MDB_NOTFOUND) rc = 0;
            for (size_t i = 0; i < n && rc == 0; i++) {
                jstate st;
                rc = cj_st_get(j, txn, cand[i], &st);
                if (rc == MDB_NOTFOUND) {
                    rc = 0;
                    continue;
                }
                if (rc) break;
                bool eligible = due_time(&st) <= now ||
                                ((mode & J_KICK_NOW) && st.last_ms < since && (!st.claim_ms || cj_claim_stale(j, &st, now)));
                if (st.claim_ms && !cj_claim_stale(j, &st, now)) eligible = false;
                if (!eligible) {
                    int64_t t = due_time(&st);
                    if (t > now && t < *next) *next = t;
                    continue;
                }
                /* The record's resend policy (policy.c): one this engine does not have keeps it as
                 * it is, expiry included; a built-in may hold it; a user policy is asked when sent. */
                const char *why = NULL;
                int verdict = cj_policy_gate(j, &st, &why);
                if (verdict == CJ_RP_UNKNOWN) {
                    if ((rc = cj_policy_hold(j, txn, cand[i], &st, now, verdict, why, events))) break;
                    continue;
                }
                if (st.expires_ms <= now) {
                    courier_frozen *snap = cj_snap_in(j, txn, cand[i], &st);
                    if ((rc = cj_rec_remove(j, txn, cand[i], &st))) {
                        courier_frozen_free(snap);
                        break;
                    }
                    jevent *ev = cj_event_new(COURIER_FROZEN_EVENT_EXPIRED, snap, 0, COURIER_OK);
                    if (ev) {
                        ev->ev.final = 1;
                        memcpy(ev->id, st.id, st.id_len);
                        cj_policy_note(j, ev, &st);
                    }
                    cj_events_push(events, ev);
                    continue;
                }
                if (verdict == CJ_RP_HOLD) {
                    if ((rc = cj_policy_hold(j, txn, cand[i], &st, now, verdict, why, events))) break;
                    continue;
                }
                if (slots <= 0) {
                    *mode_done = false;
                    *next = now;
                    full = true;
                    break;
                }
                if ((rc = claim(j, txn, cand[i], &st, now, mode != 0, sends))) break;
                slots--;
            }
        }
    }
    free(cand);
    if (rc || !(mode & J_KICK_MANUAL)) return rc;
    /* Manual records are not in `due`: a replay-now that includes them scans every record. */
    if ((rc = mdb_cursor_open(txn, j->env->db_req, &c))) return rc;
    n = 0;
    cand = NULL;
    cap = 0;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        jstate st;
        if (k.mv_size != 8 || !cj_state_decode(v.mv_data, v.mv_size, &st)) continue;
        if (st.policy != COURIER_FREEZE_MANUAL || st.last_ms >= since) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            uint64_t *p = realloc(cand, cap * sizeof *p);
            if (!p) {
                rc = ENOMEM;
                break;
            }
            cand = p;
        }
        cand[n++] = cr_get_be64(k.mv_data);
    }
    mdb_cursor_close(c);
    if (rc == MDB_NOTFOUND) rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        jstate st;
        if ((rc = cj_st_get(j, txn, cand[i], &st))) {
            if (rc == MDB_NOTFOUND) rc = 0;
            continue;
        }
        if (st.claim_ms && !cj_claim_stale(j, &st, now)) continue;
        if (cj_policy_gate(j, &st, NULL) == CJ_RP_UNKNOWN) continue; /* policy.c: kept as it is */
        if (slots <= 0) {
            *mode_done = false;
            *next = now;
            break;
        }
        if ((rc = claim(j, txn, cand[i], &st, now, mode != 0, sends))) break;
        slots--;
    }
    free(cand);
    return rc;
}

/* An explicit resend by id: claimed whatever its policy, order or backoff. */
int cj_resend_one(cr_journal *j, MDB_txn *txn, const char *id, int64_t now, jsend ***sends) {
    uint64_t seq;
    int rc = cj_find_seq(j, txn, id, &seq);
    if (rc == MDB_NOTFOUND) return 0;
    if (rc) return rc;
    jstate st;
    if ((rc = cj_st_get(j, txn, seq, &st))) return rc == MDB_NOTFOUND ? 0 : rc;
    if (st.claim_ms && !cj_claim_stale(j, &st, now)) return 0;
    return claim(j, txn, seq, &st, now, 2, sends); /* 2: by id, the app's word (no policy asked) */
}

static void seqs_add(jseqs *l, uint64_t seq) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        uint64_t *p = realloc(l->v, cap * sizeof *p);
        if (!p) return; /* found again by the next scan */
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = seq;
}

/* In any transaction: is a record due now, and when is the next one due after now? */
void cj_due_edges(cr_journal *j, MDB_txn *txn, int64_t now, bool *due_now, int64_t *next_due) {
    *due_now = false;
    *next_due = INT64_MAX;
    MDB_cursor *c;
    if (mdb_cursor_open(txn, j->env->db_due, &c)) return;
    MDB_val k, v;
    if (mdb_cursor_get(c, &k, &v, MDB_FIRST) == 0 && k.mv_size == 16) {
        int64_t t = (int64_t)cr_get_be64(k.mv_data);
        if (t <= now) {
            *due_now = true;
            uint8_t kb[16];
            cr_put_be64(kb, cr_be_time(now + 1));
            memset(kb + 8, 0, 8);
            k.mv_size = 16;
            k.mv_data = kb;
            if (mdb_cursor_get(c, &k, &v, MDB_SET_RANGE) == 0 && k.mv_size == 16)
                *next_due = (int64_t)cr_get_be64(k.mv_data);
        } else {
            *next_due = t;
        }
    }
    mdb_cursor_close(c);
}

/* Read-only look: is anything due now, and when next? With `scan`, also which claims are held by
 * the dead and which records expired (a pass over every record: only every poll interval). */
int cj_peek(cr_journal *j, int64_t now, bool scan, bool *due_now, int64_t *next_due, jseqs *dead,
            jseqs *expired) {
    *due_now = false;
    *next_due = INT64_MAX;
    MDB_txn *txn;
    int rc = cr_lmdb_begin(&j->env->base, MDB_RDONLY, &txn);
    if (rc) return rc;
    MDB_cursor *c;
    MDB_val k, v;
    cj_due_edges(j, txn, now, due_now, next_due);
    if (rc == 0 && scan && (rc = mdb_cursor_open(txn, j->env->db_req, &c)) == 0) {
        int grc;
        for (grc = mdb_cursor_get(c, &k, &v, MDB_FIRST); grc == 0; grc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
            jstate st;
            if (k.mv_size != 8 || !cj_state_decode(v.mv_data, v.mv_size, &st)) continue;
            bool stale = st.claim_ms && cj_claim_stale(j, &st, now);
            if (stale) seqs_add(dead, cr_get_be64(k.mv_data));
            if (st.expires_ms <= now && (!st.claim_ms || stale)) seqs_add(expired, cr_get_be64(k.mv_data));
        }
        mdb_cursor_close(c);
        if (grc != 0 && grc != MDB_NOTFOUND) rc = grc;
    }
    mdb_txn_abort(txn);
    return rc;
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

/* Sends one claimed record through the public send path (retry, cache, mapping apply unchanged).
 * j->wire already counts it. */
static void send_one(cr_journal *j, jsend *s) {
    joutcome *o = calloc(1, sizeof *o);
    if (!o) {
        /* The claim stays; its lease ends and it is sent again. */
        pthread_mutex_lock(&j->mu);
        j->wire--;
        pthread_mutex_unlock(&j->mu);
        free(s->text);
        free(s);
        return;
    }
    o->journal = j;
    o->seq = s->seq;
    o->st = s->st;
    int explicit_ = s->explicit_;
    courier_request *r = NULL;
    jreq q;
    int rc = cj_jreq_read(s->text, s->tlen, &q); /* decoded once: for the request and the snapshot */
    if (rc == COURIER_OK) rc = cj_request_from(&q, &r);
    /* A user resend policy is asked here, off the journal's transaction (policy.c). */
    int gate = rc == COURIER_OK && explicit_ != 2 ? cj_policy_gate(j, &s->st, NULL) : CJ_RP_SEND;
    bool ask = gate == CJ_RP_ASK || gate == CJ_RP_UNKNOWN; /* unknown: removed since the claim */
    if (rc == COURIER_OK && (ask || atomic_load(&j->nlisteners) > 0)) {
        /* The events carry a snapshot of the request; built only when someone listens. */
        bool bad = false;
        o->snap = cj_snap_from(s->seq, &q, s->text, s->tlen, &s->st, &bad);
    }
    cj_jreq_clear(&q);
    free(s->text);
    jstate claimed = s->st;
    free(s);
    if (ask && o->snap) {
        int verdict = cj_policy_ask(j, &claimed, o->snap, cj_jnow(j), &o->why);
        if (verdict != CJ_RP_SEND) {
            courier_request_free(r);
            o->verdict = verdict == CJ_RP_DELETE ? CJ_RP_DELETE : CJ_RP_HOLD;
            o->not_sent = 1;
            pthread_mutex_lock(&j->mu);
            j->wire--;
            pthread_mutex_unlock(&j->mu);
            outcome_push(j, o);
            return;
        }
    }
    if (rc == COURIER_OK && explicit_) rc = courier_request_set_ignore_offline(r, 1);
    uint64_t rid = 0;
    if (rc == COURIER_OK) rc = j->ops->send(j->e, r, replay_done, o, &rid, &o->err);
    if (rc != COURIER_OK) cr_error_release_user(&o->err); /* an interceptor's raise: nobody to give it to */
    if (rc == COURIER_OK) cj_policy_log_replay(j, &claimed, explicit_, rid);
    else if (rc == COURIER_E_JOURNAL_CORRUPT) cr_fail(&o->err, rc, "the stored request does not decode");
    else cr_fail(&o->err, rc, "the frozen request cannot be rebuilt");
    courier_request_free(r);
    if (rc != COURIER_OK) {
        o->code = rc;
        o->not_sent = 1;
        pthread_mutex_lock(&j->mu);
        j->wire--;
        pthread_mutex_unlock(&j->mu);
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

void cj_ready_push(cr_journal *j, jsend *list) {
    if (!list) return;
    pthread_mutex_lock(&j->mu);
    while (list) {
        jsend *n = list->next;
        list->next = NULL;
        if (j->ready_tail) j->ready_tail->next = list;
        else j->ready_head = list;
        j->ready_tail = list;
        j->nready++;
        list = n;
    }
    pthread_mutex_unlock(&j->mu);
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
    pthread_mutex_unlock(&j->mu);
    cj_pump_ready(j);
}
