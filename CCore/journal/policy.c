/*
 * policy.c — resend policies (the network-layer design's 重发策略: a policy object per id with
 * canSend / canDelete, registered and removed on the freeze manager, built-ins for the common
 * cases) and the journal's decision log lines.
 *
 * A request names its policy by id; the record keeps the id in its JSON text ("resend_policy") and
 * a 64-bit hash of it in the state's fixed part, so a replayer's pass decides from the state alone
 * whether it knows the policy, without reading the text. The pass runs inside the journal's write
 * transaction, so it only consults the registry (no user code): built-ins decide there; a user
 * policy's record is claimed like any other and its callbacks run off the transaction, in
 * send_one, before the request goes out; their "hold" or "delete" comes back to the next turn as an
 * answer (cj_policy_apply). A record whose policy the engine does not have is left as it is
 * (looked at again after the poll interval) and reported once per record and engine.
 */
#include "journal/journal_internal.h"

#define BUILTIN_AUTO 1
#define BUILTIN_MANUAL 2
#define BUILTIN_ONLINE 3
#define BUILTIN_EXPIRE 4
#define BUILTIN_START 5

typedef struct cj_policy {
    struct cj_policy *next;
    atomic_int refs;
    char id[COURIER_RESEND_POLICY_ID_MAX + 1];
    uint64_t hash;
    int builtin;               /* BUILTIN_*, 0 for the app's */
    cr_callback *cb;           /* can_send (may be a NULL fn) with the registration's user */
    courier_resend_policy_fn can_delete;
} cj_policy;

struct cj_policies {
    pthread_mutex_t mu;
    cj_policy *head;
    cr_idset reported; /* records reported as unknown (journal thread) */
    int64_t opened_ms; /* the engine's open, on the journal's clock */
};

static const struct {
    const char *id;
    int kind;
} builtins[] = {
    {"courier.auto", BUILTIN_AUTO},     {"courier.manual", BUILTIN_MANUAL}, {"courier.online", BUILTIN_ONLINE},
    {"courier.expire", BUILTIN_EXPIRE}, {"courier.start", BUILTIN_START},
};

uint64_t cj_policy_hash(const char *id) {
    uint64_t h = cr_fnv1a64(id, strlen(id));
    return h ? h : 1;
}

static bool valid_policy_id(const char *id) {
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > COURIER_RESEND_POLICY_ID_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)id[i];
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) continue;
        if (strchr("-._~:@+=", c)) continue;
        return false;
    }
    return true;
}

static bool reserved(const char *id) { return strncmp(id, "courier.", 8) == 0; }

static void policy_release(cj_policy *p) {
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1) return;
    cr_callback_release(p->cb);
    free(p);
}

static cj_policy *policy_new(const char *id, int builtin) {
    cj_policy *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    atomic_init(&p->refs, 1);
    snprintf(p->id, sizeof p->id, "%s", id);
    p->hash = cj_policy_hash(id);
    p->builtin = builtin;
    return p;
}

/* The policy with this hash, retained, or NULL. */
static cj_policy *find(struct cj_policies *ps, uint64_t hash) {
    if (!ps) return NULL;
    pthread_mutex_lock(&ps->mu);
    cj_policy *p = ps->head;
    while (p && p->hash != hash) p = p->next;
    if (p) atomic_fetch_add(&p->refs, 1);
    pthread_mutex_unlock(&ps->mu);
    return p;
}

int cj_policy_open(cr_journal *j) {
    struct cj_policies *ps = calloc(1, sizeof *ps);
    if (!ps) return COURIER_E_NO_MEMORY;
    pthread_mutex_init(&ps->mu, NULL);
    ps->opened_ms = cj_jnow(j);
    j->policies = ps;
    for (size_t i = sizeof builtins / sizeof builtins[0]; i-- > 0;) {
        cj_policy *p = policy_new(builtins[i].id, builtins[i].kind);
        if (!p) return COURIER_E_NO_MEMORY;
        p->next = ps->head;
        ps->head = p;
    }
    return COURIER_OK;
}

void cj_policy_close(cr_journal *j) {
    struct cj_policies *ps = j->policies;
    if (!ps) return;
    j->policies = NULL;
    while (ps->head) {
        cj_policy *p = ps->head;
        ps->head = p->next;
        policy_release(p);
    }
    cr_idset_free(&ps->reported);
    pthread_mutex_destroy(&ps->mu);
    free(ps);
}

int cj_policy_stamp(cr_journal *j, const char *id, jstate *st) {
    if (!id || !*id) return COURIER_OK;
    cj_policy *p = find(j->policies, cj_policy_hash(id));
    if (!p) return COURIER_E_RESEND_POLICY_UNKNOWN;
    if (st) st->rp_hash = p->hash;
    policy_release(p);
    return COURIER_OK;
}

/* The engine's view of the network (the monitor lives in the engine layer; its public face). */
static courier_reachability reachability_of(cr_journal *j) {
    return j->ops->reachability(j->e);
}

int cj_policy_gate(cr_journal *j, const jstate *st, const char **why) {
    if (why) *why = NULL;
    if (!st->rp_hash) return CJ_RP_SEND;
    cj_policy *p = find(j->policies, st->rp_hash);
    if (!p) {
        if (why) *why = "not_registered";
        return CJ_RP_UNKNOWN;
    }
    int verdict = CJ_RP_SEND;
    switch (p->builtin) {
    case BUILTIN_ONLINE:
        if (reachability_of(j) != COURIER_REACHABILITY_ONLINE) {
            verdict = CJ_RP_HOLD;
            if (why) *why = "not_online";
        }
        break;
    case BUILTIN_START: {
        int64_t touched = st->last_ms > st->created_ms ? st->last_ms : st->created_ms;
        if (touched >= j->policies->opened_ms) {
            verdict = CJ_RP_HOLD;
            if (why) *why = "not_since_start";
        }
        break;
    }
    case 0: verdict = CJ_RP_ASK; break;
    default: break; /* auto, manual (kept out of `due`), expire: as due */
    }
    policy_release(p);
    return verdict;
}

/* What snprintf(dst, size, "%s", src) writes, without its format parsing (once per answer). */
static void copy_str(char *dst, size_t size, const char *src) {
    size_t n = strlen(src);
    if (n >= size) n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void note_policy(jevent *ev, const cj_policy *p, const jstate *st) {
    if (!ev) return;
    if (p) copy_str(ev->policy, sizeof ev->policy, p->id);
    else if (!st->rp_hash) copy_str(ev->policy, sizeof ev->policy, st->policy == COURIER_FREEZE_MANUAL ? "courier.manual" : "courier.auto");
}

void cj_policy_note(cr_journal *j, jevent *ev, const jstate *st) {
    if (!ev) return;
    cj_policy *p = st->rp_hash ? find(j->policies, st->rp_hash) : NULL;
    note_policy(ev, p, st);
    policy_release(p);
}

/* A held ordered record keeps the later ordered records of its host waiting: the event counts
 * them (for the log line), so that an app sees why its other requests to that host do not go. */
static void note_waiting(cr_journal *j, cj_txn *txn, jevent *ev, uint64_t seq, const jstate *st) {
    if (!ev || !is_ordered_auto(st) || !j->store->host_waiting || !st->host_len) return;
    int64_t n = 0;
    if (j->store->host_waiting(j, txn, st->host, st->host_len, seq, &n)) return; /* not counted */
    ev->waiting = n;
    memcpy(ev->host, st->host, st->host_len);
    ev->host[st->host_len] = 0;
}

int cj_policy_hold(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, int64_t now, int verdict, const char *why,
                   jevent ***events) {
    jstate old = *st;
    st->next_ms = now + j->poll_ms;
    int rc = cj_st_update(j, txn, seq, &old, st);
    if (rc) return rc;
    jevent *ev = NULL;
    if (verdict == CJ_RP_UNKNOWN) {
        /* Once per record and engine: the record's number and id, hashed together. */
        uint64_t key = cj_policy_hash(st->id) ^ (seq * 0x9e3779b97f4a7c15ull);
        if (!key || key == UINT64_MAX) key = 1;
        if (cr_idset_has(&j->policies->reported, key)) return 0;
        if (cr_idset_add(&j->policies->reported, key)) return 0; /* no memory: reported next time */
        ev = cj_event_new(COURIER_FROZEN_EVENT_POLICY_UNKNOWN, cj_snap_in(j, txn, seq, st), 0, COURIER_OK);
        if (ev && ev->snap) snprintf(ev->policy, sizeof ev->policy, "%s", courier_frozen_resend_policy(ev->snap));
    } else {
        ev = cj_event_new(CJ_EVENT_HELD, NULL, 0, COURIER_OK);
        cj_policy_note(j, ev, st);
    }
    if (ev) {
        memcpy(ev->id, st->id, st->id_len);
        ev->ev.reason = why;
        ev->ev.attempts = (int)st->attempts;
        note_waiting(j, txn, ev, seq, st);
    }
    cj_events_push(events, ev);
    return 0;
}

int cj_policy_ask(cr_journal *j, const jstate *st, const courier_frozen *snap, int64_t now, const char **why) {
    *why = NULL;
    cj_policy *p = find(j->policies, st->rp_hash);
    if (!p) {
        *why = "not_registered";
        return CJ_RP_HOLD;
    }
    int verdict = CJ_RP_SEND;
    if (!p->builtin) {
        /* The view: the claimed state, not counting the claim's own attempt. */
        courier_frozen view = *snap;
        if (view.info.attempts > 0) view.info.attempts--;
        view.info.claimed = 0;
        int64_t age = now - st->created_ms;
        courier_reachability reach = reachability_of(j);
        if (p->can_delete && p->can_delete(&view, age, reach, p->cb->user)) {
            verdict = CJ_RP_DELETE;
            *why = "can_delete";
        } else if (p->cb->fn && !((courier_resend_policy_fn)p->cb->fn)(&view, age, reach, p->cb->user)) {
            verdict = CJ_RP_HOLD;
            *why = "can_send_false";
        }
    }
    policy_release(p);
    return verdict;
}

int cj_policy_apply(cr_journal *j, cj_txn *txn, joutcome *o, int64_t now, jevent ***events) {
    jstate st;
    int rc = cj_st_get(j, txn, o->seq, &st);
    if (rc == MDB_NOTFOUND) return 0;
    if (rc) return rc;
    if (st.id_len != o->st.id_len || memcmp(st.id, o->st.id, st.id_len) != 0) return 0; /* replaced */
    bool mine = st.claim_ms && st.owner.pid == j->me.pid && st.owner.nonce == j->me.nonce &&
                st.owner.start == j->me.start;
    if (!mine) return 0; /* another replayer took it over and decides */
    jstate old = st;
    if (st.attempts) st.attempts--; /* nothing was sent */
    jevent *ev;
    if (o->verdict == CJ_RP_DELETE) {
        st.last_code = COURIER_E_DELETED_BY_POLICY;
        st.last_status = 0;
        if ((rc = cj_rec_remove(j, txn, o->seq, &old)) ||
            (rc = cj_outcome_log(j, txn, &st, COURIER_E_DELETED_BY_POLICY, 0, now)))
            return rc;
        ev = cj_event_new(COURIER_FROZEN_EVENT_DELETED, cj_snap_retain(o->snap), 0, COURIER_E_DELETED_BY_POLICY);
        if (ev) {
            ev->ev.final = 1;
            cr_fail(&ev->err, COURIER_E_DELETED_BY_POLICY, "deleted by its resend policy");
        }
    } else {
        st.claim_ms = 0;
        memset(&st.owner, 0, sizeof st.owner);
        st.next_ms = now + j->poll_ms;
        if ((rc = cj_st_update(j, txn, o->seq, &old, &st))) return rc;
        ev = cj_event_new(CJ_EVENT_HELD, NULL, 0, COURIER_OK);
        note_waiting(j, txn, ev, o->seq, &st);
    }
    if (ev) {
        memcpy(ev->id, st.id, st.id_len);
        ev->ev.reason = o->why;
        ev->ev.attempts = (int)st.attempts;
        cj_policy_note(j, ev, &st);
    }
    cj_events_push(events, ev);
    return 0;
}

/* ---- the journal's log lines -------------------------------------------------------------------- */

void cj_policy_log_event(cr_journal *j, jevent *ev) {
    courier_engine *e = j->e;
    if (ev->ev.kind == COURIER_FROZEN_EVENT_EXPIRED && !ev->ev.reason) ev->ev.reason = "expired";
    const courier_frozen_event *x = &ev->ev;
    const char *fid = ev->snap ? courier_frozen_id(ev->snap) : ev->id;
    const char *policy = ev->policy[0] ? ev->policy : ev->snap ? courier_frozen_resend_policy(ev->snap) : "";
    cr_logf f[10];
    size_t n = 0;
    f[n++] = (cr_logf){"freeze_id", fid, 0, 0};
    f[n++] = (cr_logf){"policy", policy, 0, 0};
    f[n++] = (cr_logf){"attempts", NULL, x->attempts, 0};
    const char *event = NULL, *reason = x->reason, *decision = NULL;
    int level = COURIER_LOG_INFO;
    switch ((int)x->kind) {
    case COURIER_FROZEN_EVENT_RESENT_SUCCEEDED:
    case COURIER_FROZEN_EVENT_RESENT_FAILED:
        event = "journal_resent";
        reason = x->kind == COURIER_FROZEN_EVENT_RESENT_SUCCEEDED ? "succeeded" : x->final ? "failed_final" : "retry_later";
        f[n++] = (cr_logf){"code", NULL, x->code, 0};
        f[n++] = (cr_logf){"final", NULL, x->final, 1};
        if (ev->resp) f[n++] = (cr_logf){"status", NULL, ev->resp->status, 0};
        else if (ev->err.http_status) f[n++] = (cr_logf){"status", NULL, ev->err.http_status, 0};
        break;
    case COURIER_FROZEN_EVENT_EXPIRED:
        event = "journal_expired";
        reason = "expired";
        break;
    case COURIER_FROZEN_EVENT_POLICY_UNKNOWN:
        event = "journal_policy";
        decision = "keep";
        level = COURIER_LOG_WARNING;
        break;
    case COURIER_FROZEN_EVENT_DELETED:
        event = "journal_policy";
        decision = "delete";
        f[n++] = (cr_logf){"code", NULL, x->code, 0};
        break;
    case CJ_EVENT_HELD:
        event = "journal_policy";
        decision = "hold";
        /* A hold that keeps others of its host waiting is worth an app's attention. */
        level = ev->waiting > 0 ? COURIER_LOG_INFO : COURIER_LOG_DEBUG;
        break;
    default: return; /* FROZEN: cj_policy_log_frozen, which knows why */
    }
    if (!cr_log_wants(e, COURIER_LOG_JOURNAL, level)) return;
    if (reason) f[n++] = (cr_logf){"reason", reason, 0, 0};
    if (decision) f[n++] = (cr_logf){"decision", decision, 0, 0};
    if (ev->waiting >= 0) {
        f[n++] = (cr_logf){"host", ev->host, 0, 0};
        f[n++] = (cr_logf){"waiting", NULL, ev->waiting, 0};
    }
    char msg[COURIER_FROZEN_ID_MAX + COURIER_RESEND_POLICY_ID_MAX + J_HOST_MAX + 192];
    int len = snprintf(msg, sizeof msg, "frozen request %s (policy %s): %s%s%s", fid, policy,
                       decision ? decision : event + 8, reason ? ", " : "", reason ? reason : "");
    if (ev->waiting > 0 && len > 0 && (size_t)len < sizeof msg)
        snprintf(msg + len, sizeof msg - (size_t)len,
                 "; %lld later frozen request%s to %s wait%s behind it (ordered per host)",
                 (long long)ev->waiting, ev->waiting == 1 ? "" : "s", ev->host, ev->waiting == 1 ? "s" : "");
    cr_log_fields(e, COURIER_LOG_JOURNAL, level, event, x->request_id, msg, f, n);
}

void cj_policy_log_frozen(cr_journal *j, const jfreeze *f) {
    if (!cr_log_wants(j->e, COURIER_LOG_JOURNAL, COURIER_LOG_INFO)) return;
    const char *reason = f->code == COURIER_E_OFFLINE ? "offline"
                         : f->code == COURIER_E_CANNOT_RESOLVE || f->code == COURIER_E_CANNOT_CONNECT
                             ? "network_failure"
                             : "ambiguous_failure";
    jevent tmp;
    memset(&tmp, 0, sizeof tmp);
    cj_policy_note(j, &tmp, &f->st);
    cr_logf fl[] = {
        {"freeze_id", f->id, 0, 0},        {"policy", tmp.policy, 0, 0}, {"reason", reason, 0, 0},
        {"code", NULL, f->code, 0},        {"expires_ms", NULL, f->st.expires_ms, 0},
    };
    char msg[COURIER_FROZEN_ID_MAX + 64];
    snprintf(msg, sizeof msg, "frozen as %s (%s)", f->id, reason);
    cr_log_fields(j->e, COURIER_LOG_JOURNAL, COURIER_LOG_INFO, "journal_frozen", f->answer_id, msg, fl,
                  sizeof fl / sizeof fl[0]);
}

void cj_policy_log_replay(cr_journal *j, const jstate *st, int explicit_, uint64_t request_id) {
    if (!cr_log_wants(j->e, COURIER_LOG_JOURNAL, COURIER_LOG_INFO)) return;
    jevent tmp;
    memset(&tmp, 0, sizeof tmp);
    cj_policy_note(j, &tmp, st);
    char id[COURIER_FROZEN_ID_MAX + 1];
    snprintf(id, sizeof id, "%.*s", (int)st->id_len, st->id);
    const char *reason = explicit_ == CJ_SEND_RESEND ? "resend" : explicit_ != CJ_SEND_DUE ? "replay_now" : "due";
    cr_logf fl[] = {
        {"freeze_id", id, 0, 0},
        {"policy", tmp.policy, 0, 0},
        {"reason", reason, 0, 0},
        {"attempts", NULL, st->attempts, 0},
    };
    char msg[COURIER_FROZEN_ID_MAX + 64];
    snprintf(msg, sizeof msg, "resending %s (%s, attempt %u)", id, reason, st->attempts);
    cr_log_fields(j->e, COURIER_LOG_JOURNAL, COURIER_LOG_INFO, "journal_replay", request_id, msg, fl,
                  sizeof fl / sizeof fl[0]);
}

/* ---- public API ------------------------------------------------------------------------------------ */

int courier_resend_policy_add(courier_engine *e, const char *id, courier_resend_policy_fn can_send,
                              courier_resend_policy_fn can_delete, void *user, courier_user_free_fn user_free,
                              courier_error *err) {
    cr_error_clear(err);
    int rc = COURIER_OK;
    if (!e || !valid_policy_id(id) || reserved(id))
        rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "invalid engine or resend policy id (ids starting \"courier.\" are reserved)");
    else if (!cr_core(e)->journal || !cr_core(e)->journal->policies)
        rc = cr_fail(err, COURIER_E_CLOSED, "the engine has no journal");
    cj_policy *p = rc ? NULL : policy_new(id, 0);
    if (!rc && !p) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    if (rc) {
        if (user_free) user_free(user);
        return rc;
    }
    /* The registration's user rides on can_send's callback (whose fn may be NULL). */
    p->cb = calloc(1, sizeof *p->cb);
    if (!p->cb) {
        free(p);
        if (user_free) user_free(user);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    atomic_init(&p->cb->refs, 1);
    p->cb->fn = (void (*)(void))can_send;
    p->cb->user = user;
    p->cb->user_free = user_free;
    p->can_delete = can_delete;
    struct cj_policies *ps = cr_core(e)->journal->policies;
    pthread_mutex_lock(&ps->mu);
    cj_policy **at = &ps->head, *old = NULL;
    while (*at && (*at)->hash != p->hash) at = &(*at)->next;
    if (*at) {
        old = *at;
        p->next = old->next;
    }
    *at = p;
    pthread_mutex_unlock(&ps->mu);
    policy_release(old);
    cr_journal_wake(e, CR_WAKE_TURN); /* requests it holds may go now */
    return COURIER_OK;
}

int courier_resend_policy_remove(courier_engine *e, const char *id, courier_error *err) {
    cr_error_clear(err);
    if (!e || !valid_policy_id(id) || reserved(id))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "invalid engine or resend policy id");
    struct cj_policies *ps = cr_core(e)->journal ? cr_core(e)->journal->policies : NULL;
    if (!ps) return cr_fail(err, COURIER_E_NOT_FOUND, "no resend policy '%s'", id);
    uint64_t h = cj_policy_hash(id);
    pthread_mutex_lock(&ps->mu);
    cj_policy **at = &ps->head, *gone = NULL;
    while (*at && (*at)->hash != h) at = &(*at)->next;
    if (*at) {
        gone = *at;
        *at = gone->next;
    }
    pthread_mutex_unlock(&ps->mu);
    if (!gone) return cr_fail(err, COURIER_E_NOT_FOUND, "no resend policy '%s'", id);
    policy_release(gone);
    return COURIER_OK;
}

int courier_request_set_resend_policy(courier_request *r, const char *id, courier_error *err) {
    cr_error_clear(err);
    if (!r || (id && !valid_policy_id(id)))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "invalid request or resend policy id");
    snprintf(r->freeze.resend_policy, sizeof r->freeze.resend_policy, "%s", id ? id : "");
    return COURIER_OK;
}

const char *courier_frozen_resend_policy(const courier_frozen *f) {
    if (!f) return NULL;
    if (f->q.resend_policy) return f->q.resend_policy;
    return f->info.policy == COURIER_FREEZE_MANUAL ? "courier.manual" : "courier.auto";
}
