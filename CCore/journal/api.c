/*
 * api.c — the public API of frozen requests: request and configuration setters, courier_frozen_*
 * (list, get, remove, resend, replay, pause, wait); the cookie jar's database. The snapshots'
 * accessors (courier_frozen_id, ...) are record.c's.
 */
#include "journal/journal_internal.h"

static bool valid_id(const char *id, size_t n) {
    if (n == 0 || n > COURIER_FROZEN_ID_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)id[i];
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) continue;
        if (c && strchr("-._~:@+=", c)) continue;
        return false;
    }
    return true;
}

/* ==== public API =============================================================================== */

static cr_journal *journal_of(courier_engine *e, courier_error *err) {
    if (!e) {
        cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine is NULL");
        return NULL;
    }
    if (!cr_core(e)->journal) cr_fail(err, COURIER_E_CLOSED, "the engine has no journal");
    return cr_core(e)->journal;
}

int courier_request_set_freeze(courier_request *r, courier_freeze_policy policy, int64_t expiry_ms, unsigned flags) {
    if (!r || (int)policy < COURIER_FREEZE_NEVER || (int)policy > COURIER_FREEZE_MANUAL || expiry_ms < 0 ||
        (flags & ~(COURIER_FREEZE_UNORDERED | COURIER_FREEZE_ON_AMBIGUOUS)))
        return COURIER_E_INVALID_ARGUMENT;
    r->freeze.policy = policy;
    r->freeze.expiry_ms = expiry_ms;
    r->freeze.flags = flags;
    return COURIER_OK;
}

int courier_request_set_freeze_id(courier_request *r, const char *id) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    if (!id) {
        r->freeze.id[0] = '\0';
        return COURIER_OK;
    }
    if (!valid_id(id, strlen(id))) return COURIER_E_INVALID_ARGUMENT;
    snprintf(r->freeze.id, sizeof r->freeze.id, "%s", id);
    return COURIER_OK;
}

const char *courier_error_freeze_id(const courier_error *err) {
    if (!err || err->code != COURIER_E_FROZEN || strncmp(err->message, "frozen as ", 10) != 0) return NULL;
    return err->message + 10;
}

int courier_config_set_frozen_replay(courier_config *c, int concurrency, int64_t backoff_base_ms, int64_t backoff_max_ms) {
    if (!c || concurrency < 0 || backoff_base_ms < 0 || backoff_max_ms < 0 ||
        (backoff_base_ms && backoff_max_ms && backoff_max_ms < backoff_base_ms))
        return COURIER_E_INVALID_ARGUMENT;
    c->frozen.concurrency = concurrency;
    c->frozen.backoff_base_ms = backoff_base_ms;
    c->frozen.backoff_max_ms = backoff_max_ms;
    return COURIER_OK;
}

int courier_config_set_frozen_expiry_ms(courier_config *c, int64_t expiry_ms) {
    if (!c || expiry_ms < 0) return COURIER_E_INVALID_ARGUMENT;
    c->frozen.expiry_ms = expiry_ms;
    return COURIER_OK;
}

int courier_config_set_frozen_lease_ms(courier_config *c, int64_t lease_ms) {
    if (!c || lease_ms < 0) return COURIER_E_INVALID_ARGUMENT;
    c->frozen.lease_ms = lease_ms;
    return COURIER_OK;
}

int courier_config_set_frozen_replicas(courier_config *c, int replicas, int64_t timeout_ms) {
    if (!c || replicas < 0 || replicas > 64 || timeout_ms < 0 || (replicas > 0 && timeout_ms < 1))
        return COURIER_E_INVALID_ARGUMENT;
    c->frozen.replicas = replicas;
    c->frozen.replicas_timeout_ms = timeout_ms;
    return COURIER_OK;
}

int courier_config_set_frozen_poll_ms(courier_config *c, int64_t poll_ms) {
    if (!c || poll_ms < 0) return COURIER_E_INVALID_ARGUMENT;
    c->frozen.poll_ms = poll_ms;
    return COURIER_OK;
}

int courier_config_set_frozen_store(courier_config *c, const char *location) {
    if (!c || (location && strlen(location) >= sizeof c->frozen.store) || cr_store_setting_mistyped(location))
        return COURIER_E_INVALID_ARGUMENT;
    snprintf(c->frozen.store, sizeof c->frozen.store, "%s", location ? location : "");
    return COURIER_OK;
}

int courier_config_set_frozen_paused(courier_config *c, int paused) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    c->frozen.paused = paused ? 1 : 0;
    return COURIER_OK;
}

int courier_frozen_pause(courier_engine *e) {
    cr_journal *j = journal_of(e, NULL);
    if (!j) return e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&j->mu);
    j->paused = 1;
    pthread_mutex_unlock(&j->mu);
    return COURIER_OK;
}

int courier_frozen_resume(courier_engine *e) {
    cr_journal *j = journal_of(e, NULL);
    if (!j) return e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&j->mu);
    j->paused = 0;
    j->kick = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return COURIER_OK;
}

int courier_frozen_replay(courier_engine *e, unsigned flags, courier_error *err) {
    cr_error_clear(err);
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    if (flags & ~COURIER_REPLAY_MANUAL) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "unknown flags");
    if (j->broken) return cr_fail(err, COURIER_E_JOURNAL_CORRUPT, "the journal reported corruption");
    pthread_mutex_lock(&j->mu);
    j->kick = 1;
    j->kick_scan = 1; /* claims are not in `due`: a dead owner's are found by the scan */
    j->kick_mode |= J_KICK_NOW | J_KICK_APP | ((flags & COURIER_REPLAY_MANUAL) ? J_KICK_MANUAL : 0);
    j->kick_since = cj_jnow(j);
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return COURIER_OK;
}

int courier_frozen_wait_idle(courier_engine *e, int64_t timeout_ms) {
    cr_journal *j = journal_of(e, NULL);
    if (!j) return e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT;
    int64_t end = cr_mono_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
    pthread_mutex_lock(&j->mu);
    uint64_t start = j->turns;
    j->kick = 1;
    pthread_cond_signal(&j->cv);
    int rc = COURIER_OK;
    while (!(j->turns > start && j->idle)) {
        int64_t left = end - cr_mono_ms();
        if (left <= 0) {
            rc = COURIER_E_TIMEOUT;
            break;
        }
        if (left > 200) left = 200; /* a turn may not wake us: look again */
        struct timespec ts = cr_cond_deadline(left * 1000);
        /* Every turn ends with a broadcast: a busy journal is left to its work (kicking it at each
         * turn would make a turn of every turn); only a wait that timed out looks again. */
        if (pthread_cond_timedwait(&j->idle_cv, &j->mu, &ts) == ETIMEDOUT && !j->idle) {
            j->kick = 1;
            pthread_cond_signal(&j->cv);
        }
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int courier_frozen_resend(courier_engine *e, const char *id, courier_error *err) {
    cr_error_clear(err);
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    if (!id || !valid_id(id, strlen(id))) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "invalid freeze id");
    cj_txn *txn;
    int rc = j->store->begin(j, false, &txn);
    if (rc) return j->store->fail(j, err, rc, "cannot read the journal");
    uint64_t seq;
    rc = cj_find_seq(j, txn, id, &seq);
    if (rc && rc != MDB_NOTFOUND) rc = j->store->fail(j, err, rc, "cannot read the journal");
    j->store->abort(j, txn);
    if (rc == MDB_NOTFOUND) return cr_fail(err, COURIER_E_NOT_FOUND, "no frozen request '%.150s'", id);
    if (rc) return rc;
    jresend *r = calloc(1, sizeof *r);
    if (!r) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    snprintf(r->id, sizeof r->id, "%s", id);
    pthread_mutex_lock(&j->mu);
    r->next = j->rs_head;
    j->rs_head = r;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    return COURIER_OK;
}

/* A snapshot of a record that does not decode: its id and the fact, so it can be seen and removed. */
static courier_frozen *snap_bad(uint64_t seq, const jstate *st, bool state_ok, const void *key) {
    courier_frozen *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    atomic_init(&f->refs, 1);
    f->seq = seq;
    char idbuf[40];
    /* The state's id when it is text (a damaged record's may be any bytes, which no JSON holds). */
    bool id_ok = state_ok && cr_utf8_valid(st->id, st->id_len) && !memchr(st->id, 0, st->id_len);
    if (!id_ok) snprintf(idbuf, sizeof idbuf, "#%llu", (unsigned long long)seq);
    (void)key;
    f->q.id = id_ok ? cr_strndup(st->id, st->id_len) : cr_strdup(idbuf);
    f->q.method = cr_strdup("");
    f->q.url = cr_strdup("");
    f->host = state_ok ? cr_strndup(st->host, st->host_len) : cr_strdup("");
    f->q.idem = cr_strdup("");
    json_t *o = json_pack("{s:i,s:s,s:b,s:I}", "v", 1, "id", f->q.id ? f->q.id : "", "corrupt", 1, "seq", (json_int_t)seq);
    atomic_init(&f->json, o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL);
    json_decref(o);
    f->info.size = sizeof f->info;
    f->info.last_code = COURIER_E_JOURNAL_CORRUPT;
    if (state_ok) {
        f->info.policy = st->policy;
        f->info.created_ms = st->created_ms;
        f->info.expires_ms = st->expires_ms;
        f->info.attempts = (int)st->attempts;
    }
    if (!f->q.id || !f->q.method || !f->q.url || !f->host || !f->q.idem || !atomic_load(&f->json)) {
        courier_frozen_free(f);
        return NULL;
    }
    return f;
}

/* One record of courier_frozen_list_requests. */
typedef struct list_acc {
    courier_frozen_list *l;
    size_t cap;
} list_acc;

static int list_one(void *user, uint64_t seq, const jstate *st, const char *text, size_t len) {
    list_acc *a = user;
    courier_frozen_list *l = a->l;
    bool bad = !st;
    courier_frozen *f = st ? cj_snap_make(seq, text, len, st, &bad) : NULL;
    if (!f && bad) f = snap_bad(seq, st, st != NULL, NULL);
    if (!f) return ENOMEM;
    if (l->count == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        courier_frozen **p = realloc(l->items, cap * sizeof *p);
        if (!p) {
            courier_frozen_free(f);
            return ENOMEM;
        }
        l->items = p;
        a->cap = cap;
    }
    l->items[l->count++] = f;
    return 0;
}

int courier_frozen_list_requests(courier_frozen_list **out, courier_engine *e, courier_error *err) {
    cr_error_clear(err);
    if (out) *out = NULL;
    cr_journal *j = journal_of(e, err);
    if (!j || !out) return !out ? cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL") : err ? err->code : COURIER_E_CLOSED;
    courier_frozen_list *l = calloc(1, sizeof *l);
    if (!l) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    cj_txn *txn;
    int rc = j->store->begin(j, false, &txn);
    if (rc) {
        free(l);
        return j->store->fail(j, err, rc, "cannot read the journal");
    }
    list_acc acc = {l, 0};
    rc = j->store->each(j, txn, list_one, &acc);
    int code = COURIER_OK;
    if (rc == ENOMEM) code = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    else if (rc) code = j->store->fail(j, err, rc, "cannot read the journal");
    j->store->abort(j, txn);
    if (code) {
        courier_frozen_list_free(l);
        return code;
    }
    *out = l;
    return COURIER_OK;
}

size_t courier_frozen_list_count(const courier_frozen_list *l) { return l ? l->count : 0; }

const courier_frozen *courier_frozen_list_at(const courier_frozen_list *l, size_t i) {
    return l && i < l->count ? l->items[i] : NULL;
}

void courier_frozen_list_free(courier_frozen_list *l) {
    if (!l) return;
    for (size_t i = 0; i < l->count; i++) courier_frozen_free(l->items[i]);
    free(l->items);
    free(l);
}

int courier_frozen_get(courier_frozen **out, courier_engine *e, const char *id, courier_error *err) {
    cr_error_clear(err);
    if (out) *out = NULL;
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    if (!id || !out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "id or out is NULL");
    if (!valid_id(id, strlen(id))) return cr_fail(err, COURIER_E_NOT_FOUND, "no frozen request '%.150s'", id);
    cj_txn *txn;
    int rc = j->store->begin(j, false, &txn);
    if (rc) return j->store->fail(j, err, rc, "cannot read the journal");
    uint64_t seq = 0;
    rc = cj_find_seq(j, txn, id, &seq);
    int code = COURIER_OK;
    if (rc == 0) {
        jstate st;
        const char *text;
        size_t len;
        rc = cj_rec_get(j, txn, seq, &st, &text, &len);
        if (rc == 0) {
            bool bad = true;
            *out = cj_snap_make(seq, text, len, &st, &bad);
            if (!*out && bad) *out = snap_bad(seq, &st, true, NULL);
            if (!*out) code = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        } else if (rc == MDB_CORRUPTED) {
            code = cr_fail(err, COURIER_E_JOURNAL_CORRUPT, "the state of '%.150s' does not decode", id);
        }
    }
    if (!code && rc && rc != MDB_NOTFOUND) code = j->store->fail(j, err, rc, "cannot read the journal");
    j->store->abort(j, txn);
    if (code) return code;
    if (rc == MDB_NOTFOUND) return cr_fail(err, COURIER_E_NOT_FOUND, "no frozen request '%.150s'", id);
    return COURIER_OK;
}

int courier_frozen_remove(courier_engine *e, const char *id, courier_error *err) {
    cr_error_clear(err);
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    if (!id) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "id is NULL");
    size_t n = strlen(id);
    uint64_t seq = 0;
    if (n > 1 && id[0] == '#') seq = strtoull(id + 1, NULL, 10); /* a record whose state is unreadable */
    else if (!valid_id(id, n)) return cr_fail(err, COURIER_E_NOT_FOUND, "no frozen request '%.150s'", id);
    cj_txn *txn;
    int rc = j->store->begin(j, true, &txn);
    if (rc) return j->store->fail(j, err, rc, "cannot write the journal");
    if (!seq) rc = cj_find_seq(j, txn, id, &seq);
    jstate st;
    if (rc == 0) rc = cj_st_get(j, txn, seq, &st);
    if (rc == 0) rc = cj_rec_remove(j, txn, seq, &st);
    else if (rc == MDB_CORRUPTED) rc = j->store->rec_remove_bad(j, txn, seq); /* an unreadable state: by its number */
    if (rc == 0) {
        rc = j->store->commit(j, txn);
    } else {
        if (rc != MDB_NOTFOUND) rc = j->store->fail(j, err, rc, "cannot write the journal");
        j->store->abort(j, txn);
        if (rc == MDB_NOTFOUND) return cr_fail(err, COURIER_E_NOT_FOUND, "no frozen request '%.150s'", id);
        return rc;
    }
    if (rc) return j->store->fail(j, err, rc, "cannot write the journal");
    return COURIER_OK;
}

int courier_frozen_remove_all(int64_t *removed, courier_engine *e, courier_error *err) {
    cr_error_clear(err);
    if (removed) *removed = 0;
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    cj_txn *txn;
    int rc = j->store->begin(j, true, &txn);
    if (rc) return j->store->fail(j, err, rc, "cannot write the journal");
    int64_t n = 0;
    rc = j->store->remove_all(j, txn, &n);
    if (rc == 0) {
        rc = j->store->commit(j, txn);
    } else {
        rc = j->store->fail(j, err, rc, "cannot write the journal");
        j->store->abort(j, txn);
        return rc;
    }
    if (rc) return j->store->fail(j, err, rc, "cannot write the journal");
    if (removed) *removed = n;
    return COURIER_OK;
}

int courier_frozen_count(int64_t *count, courier_engine *e, courier_error *err) {
    cr_error_clear(err);
    if (count) *count = 0;
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    if (!count) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "count is NULL");
    cj_txn *txn;
    int rc = j->store->begin(j, false, &txn);
    if (rc) return j->store->fail(j, err, rc, "cannot read the journal");
    rc = j->store->count(j, txn, count);
    if (rc) rc = j->store->fail(j, err, rc, "cannot read the journal");
    j->store->abort(j, txn);
    return rc;
}

int courier_frozen_last_outcome(int *code, int *http_status, int64_t *at_ms, courier_engine *e, const char *id,
                                courier_error *err) {
    cr_error_clear(err);
    cr_journal *j = journal_of(e, err);
    if (!j) return err ? err->code : (e ? COURIER_E_CLOSED : COURIER_E_INVALID_ARGUMENT);
    if (!id) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "id is NULL");
    cj_txn *txn;
    int rc = j->store->begin(j, false, &txn);
    if (rc) return j->store->fail(j, err, rc, "cannot read the journal");
    rc = j->store->last_outcome(j, txn, id, code, http_status, at_ms);
    if (rc && rc != MDB_NOTFOUND) rc = j->store->fail(j, err, rc, "cannot read the journal");
    j->store->abort(j, txn);
    if (rc == MDB_NOTFOUND) return cr_fail(err, COURIER_E_NOT_FOUND, "no recorded outcome for '%.150s'", id);
    return rc;
}

/* ==== the cookie jar's database (cookies.c) ==================================================== */

int cr_journal_cookie_db(courier_engine *e, MDB_env **env, unsigned *dbi) {
    if (!cr_core(e)->journal || !cr_core(e)->journal->env) return COURIER_E_STORE;
    *env = cr_core(e)->journal->env->base.env;
    *dbi = cr_core(e)->journal->env->db_cookies;
    return COURIER_OK;
}

/* ==== the HSTS list's database (hsts.c) ======================================================== */

int cr_journal_hsts_db(courier_engine *e, MDB_env **env, unsigned *dbi) {
    if (!cr_core(e)->journal || !cr_core(e)->journal->env) return COURIER_E_STORE;
    *env = cr_core(e)->journal->env->base.env;
    *dbi = cr_core(e)->journal->env->db_hsts;
    return COURIER_OK;
}
