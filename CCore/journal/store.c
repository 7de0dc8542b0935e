/*
 * store.c — the journal's LMDB environment: one per store directory per process (a registry), opened
 * with the pre-mmap check, verified (both ends of every tree) and moved aside when corrupt; the
 * state record; who holds a claim; records and their indexes inside a transaction.
 */
#include "journal/journal_internal.h"

static int64_t realtime_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Files of a journal that has committed once; its absence beside a missing or empty data file
 * tells a fresh journal from one whose data was lost. */
#define J_MARKER "JOURNAL"


/* Opens the environment of the journal's directory (the floor's kind->open). 0, an LMDB/errno
 * code, or MDB_INVALID with *why when the journal exists but cannot be read (corrupt, truncated,
 * foreign), MDB_VERSION_MISMATCH with *why when a newer format wrote it. */
static int jenv_open(cr_lmdb_env *base, void *arg, const char **why) {
    (void)arg;
    jenv *v = (jenv *)base;
    pthread_mutex_init(&v->lock, NULL);
    *why = NULL;
    if (cr_lmdb_data_lost(base->dir, J_MARKER)) {
        *why = "its data file is missing or empty";
        return MDB_INVALID;
    }
    int rc = cr_lmdb_env_open(base, 10, J_MAP_BYTES, 0, why);
    if (rc) return rc;
    MDB_txn *txn = NULL;
    rc = cr_lmdb_begin_write(base->env, &txn);
    if (rc) goto bad;
    rc = cr_lmdb_check_names(txn); /* before a name is created in a damaged page */
    struct {
        const char *name;
        MDB_dbi *dbi;
    } dbs[] = {{"req", &v->db_req},       {"ids", &v->db_ids},
               {"due", &v->db_due},       {"hostq", &v->db_hostq},
               {"outcome", &v->db_outcome}, {"meta", &v->db_meta},
               {"cookies", &v->db_cookies}, {"hsts", &v->db_hsts}};
    enum { NDBS = sizeof dbs / sizeof dbs[0] };
    for (size_t i = 0; i < NDBS && rc == 0; i++) rc = mdb_dbi_open(txn, dbs[i].name, MDB_CREATE, dbs[i].dbi);
    if (rc) {
        mdb_txn_abort(txn);
        goto bad;
    }
    MDB_val k = {6, "format"}, val;
    rc = mdb_get(txn, v->db_meta, &k, &val);
    bool fresh = rc == MDB_NOTFOUND;
    if (fresh) {
        MDB_stat ms;
        /* A journal that had records but lost its format record is not fresh. */
        if (mdb_stat(txn, v->db_req, &ms) == 0 && ms.ms_entries > 0) {
            mdb_txn_abort(txn);
            *why = "its format record is missing";
            return MDB_INVALID;
        }
        uint8_t f[4];
        cr_put_le(f, J_FORMAT, 4);
        val.mv_size = 4;
        val.mv_data = f;
        rc = mdb_put(txn, v->db_meta, &k, &val, 0);
    } else if (rc == 0) {
        uint32_t f = val.mv_size == 4 ? (uint32_t)cr_get_le(val.mv_data, 4) : 0;
        if (f == 0 || f > J_FORMAT) {
            mdb_txn_abort(txn);
            *why = f > J_FORMAT ? "it was written by a newer format" : "its format record is unknown";
            return f > J_FORMAT ? MDB_VERSION_MISMATCH : MDB_INVALID;
        }
    }
    if (rc == 0) {
        MDB_dbi all[NDBS];
        for (size_t i = 0; i < NDBS; i++) all[i] = *dbs[i].dbi;
        rc = cr_lmdb_verify(txn, all, NDBS);
    }
    if (rc) {
        mdb_txn_abort(txn);
        goto bad;
    }
    rc = mdb_txn_commit(txn);
    if (rc) goto bad;
    cr_lmdb_mark(base->dir, J_MARKER, "Courier frozen-request journal, format 1\n");
    return 0;
bad:
    if (cr_lmdb_is_broken(rc)) {
        *why = mdb_strerror(rc);
        return MDB_INVALID;
    }
    return rc;
}

static void jenv_destroy(cr_lmdb_env *base) {
    jenv *v = (jenv *)base;
    pthread_mutex_destroy(&v->lock);
    free(v->nonces);
}

static const cr_lmdb_kind journal_kind = {
    .what = "frozen-request journal",
    .label = "corrupt",
    .size = sizeof(jenv),
    .corrupt_code = COURIER_E_JOURNAL_CORRUPT,
    .recreate = false,
    .sync_at_close = false,
    .open = jenv_open,
    .destroy = jenv_destroy,
};

int cj_jenv_acquire(const char *store_dir, uint32_t nonce, jenv **out, courier_error *err) {
    *out = NULL;
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/journal", store_dir) >= (int)sizeof dir)
        return cr_fail(err, COURIER_E_STORE, "the store path is too long");
    cr_lmdb_env *base = NULL;
    int rc = cr_lmdb_env_acquire(&journal_kind, dir, NULL, &base, NULL, 0, err);
    if (rc) return rc;
    jenv *v = (jenv *)base;
    pthread_mutex_lock(&v->lock);
    if (v->nnonces == v->capnonces) {
        size_t cap = v->capnonces ? v->capnonces * 2 : 4;
        uint32_t *p = realloc(v->nonces, cap * sizeof *p);
        if (p) {
            v->nonces = p;
            v->capnonces = cap;
        }
    }
    if (v->nnonces < v->capnonces) v->nonces[v->nnonces++] = nonce;
    pthread_mutex_unlock(&v->lock);
    *out = v;
    return COURIER_OK;
}

void cj_jenv_release(jenv *v, uint32_t nonce) {
    if (!v) return;
    pthread_mutex_lock(&v->lock);
    for (size_t i = 0; i < v->nnonces; i++) {
        if (v->nonces[i] == nonce) {
            v->nonces[i] = v->nonces[--v->nnonces];
            break;
        }
    }
    pthread_mutex_unlock(&v->lock);
    cr_lmdb_env_release(&v->base);
}

static bool jenv_has_nonce(jenv *v, uint32_t nonce) {
    bool found = false;
    pthread_mutex_lock(&v->lock);
    for (size_t i = 0; i < v->nnonces && !found; i++) found = v->nonces[i] == nonce;
    pthread_mutex_unlock(&v->lock);
    return found;
}

size_t cj_state_encode(const jstate *s, uint8_t *b) {
    memset(b, 0, J_STATE_FIXED);
    b[0] = J_STATE_VERSION;
    b[1] = s->policy;
    cr_put_le(b + 2, s->flags, 2);
    cr_put_le(b + 4, s->attempts, 4);
    cr_put_le(b + 8, (uint64_t)s->created_ms, 8);
    cr_put_le(b + 16, (uint64_t)s->expires_ms, 8);
    cr_put_le(b + 24, (uint64_t)s->next_ms, 8);
    cr_put_le(b + 32, (uint64_t)s->claim_ms, 8);
    cr_put_le(b + 40, (uint64_t)s->last_ms, 8);
    cr_put_le(b + 48, s->owner.pid, 4);
    cr_put_le(b + 52, s->owner.nonce, 4);
    cr_put_le(b + 56, s->owner.start, 8);
    cr_put_le(b + 64, s->owner.boot, 8);
    cr_put_le(b + 72, (uint32_t)s->last_code, 4);
    cr_put_le(b + 76, (uint32_t)s->last_status, 4);
    cr_put_le(b + 80, s->rp_hash, 8);
    size_t o = J_STATE_FIXED;
    cr_put_le(b + o, s->host_len, 2);
    memcpy(b + o + 2, s->host, s->host_len);
    o += 2u + s->host_len;
    cr_put_le(b + o, s->id_len, 2);
    memcpy(b + o + 2, s->id, s->id_len);
    return o + 2u + s->id_len;
}

/* Decodes the state at the start of a record; returns the bytes it takes, 0 when invalid. */
size_t cj_state_decode(const void *data, size_t len, jstate *s) {
    const uint8_t *b = data;
    memset(s, 0, sizeof *s);
    if (len < J_STATE_FIXED + 4 || b[0] != J_STATE_VERSION) return 0;
    s->policy = b[1];
    s->flags = (uint16_t)cr_get_le(b + 2, 2);
    s->attempts = (uint32_t)cr_get_le(b + 4, 4);
    s->created_ms = (int64_t)cr_get_le(b + 8, 8);
    s->expires_ms = (int64_t)cr_get_le(b + 16, 8);
    s->next_ms = (int64_t)cr_get_le(b + 24, 8);
    s->claim_ms = (int64_t)cr_get_le(b + 32, 8);
    s->last_ms = (int64_t)cr_get_le(b + 40, 8);
    s->owner.pid = (uint32_t)cr_get_le(b + 48, 4);
    s->owner.nonce = (uint32_t)cr_get_le(b + 52, 4);
    s->owner.start = cr_get_le(b + 56, 8);
    s->owner.boot = cr_get_le(b + 64, 8);
    s->last_code = (int32_t)(uint32_t)cr_get_le(b + 72, 4);
    s->last_status = (int32_t)(uint32_t)cr_get_le(b + 76, 4);
    s->rp_hash = cr_get_le(b + 80, 8);
    size_t o = J_STATE_FIXED;
    s->host_len = (uint16_t)cr_get_le(b + o, 2);
    if (s->host_len > J_HOST_MAX || o + 2u + s->host_len + 2u > len) return 0;
    memcpy(s->host, b + o + 2, s->host_len);
    o += 2u + s->host_len;
    s->id_len = (uint16_t)cr_get_le(b + o, 2);
    if (s->id_len == 0 || s->id_len > COURIER_FROZEN_ID_MAX || o + 2u + s->id_len > len) return 0;
    memcpy(s->id, b + o + 2, s->id_len);
    if (s->policy != COURIER_FREEZE_AUTO && s->policy != COURIER_FREEZE_MANUAL) return 0;
    return o + 2u + s->id_len;
}

int64_t cj_jnow(const cr_journal *j) {
    if (j->clock) return ((courier_clock_fn)j->clock->fn)(j->clock->user);
    return realtime_ms();
}

uint64_t cj_jrand(cr_journal *j) {
    j->rng ^= j->rng << 13;
    j->rng ^= j->rng >> 7;
    j->rng ^= j->rng << 17;
    return j->rng;
}

/* Is the claimer of s still at work? */
static bool owner_alive(cr_journal *j, const jowner *o) {
    if (o->pid == 0) return false;
    if (o->boot && j->me.boot && o->boot != j->me.boot) return false;
    if (o->pid == j->me.pid && o->start == j->me.start) return jenv_has_nonce(j->env, o->nonce);
    char state = 0;
    uint64_t start = 0;
    int rc = cj_proc_stat((long)o->pid, &state, &start);
    if (rc == -1) return false;
    if (rc == 0) return state != 'Z' && state != 'X' && (o->start == 0 || start == o->start);
    return !(kill((pid_t)o->pid, 0) != 0 && errno == ESRCH);
}

/* Takes a claim over when its owner is gone or its lease has ended. On Redis the owner may be on
 * another machine: only this process's claims are known alive or dead; the others hold until
 * their lease ends (redis.c takes them over then, with XAUTOCLAIM). */
bool cj_claim_stale(cr_journal *j, const jstate *s, int64_t now) {
    if (!s->claim_ms) return false;
    if (s->claim_ms <= now) return true;
    if (j->redis) {
        const jowner *o = &s->owner;
        bool this_process = o->pid == j->me.pid && o->start == j->me.start && o->boot == j->me.boot;
        return this_process && !jenv_has_nonce(j->env, o->nonce);
    }
    return !owner_alive(j, &s->owner);
}

/* ==== the LMDB store =========================================================================== */

#define J_STATE_MAX (J_STATE_FIXED + 4 + J_HOST_MAX + COURIER_FROZEN_ID_MAX)
#define TX(t) ((MDB_txn *)(t))

/* The cursor on `req` of the write transaction lm_begin began (opened on first use, closed by
 * LMDB when the transaction ends), or NULL in any other transaction. */
static MDB_cursor *req_cursor(cr_journal *j, MDB_txn *txn) {
    jenv *v = j->env;
    if (txn != atomic_load_explicit(&v->wtxn, memory_order_relaxed)) return NULL;
    if (!v->rcur && mdb_cursor_open(txn, v->db_req, &v->rcur)) v->rcur = NULL;
    return v->rcur;
}

/* That cursor when it still stands on record `seq` with a value of `size` bytes (what was read
 * last: a claim rewrites, an answer removes the record its transaction has just read), else NULL.
 * Writes to `req` in between through other cursors move it (LMDB adjusts the cursors of a write
 * transaction); the key under it is checked, so it is only ever a lookup saved. */
static MDB_cursor *req_at(cr_journal *j, MDB_txn *txn, uint64_t seq, size_t size) {
    jenv *v = j->env;
    if (txn != atomic_load_explicit(&v->wtxn, memory_order_relaxed) || !v->rcur || !v->rcur_valid ||
        v->rcur_seq != seq)
        return NULL;
    MDB_val k, d;
    if (mdb_cursor_get(v->rcur, &k, &d, MDB_GET_CURRENT) || k.mv_size != 8 || cr_get_be64(k.mv_data) != seq ||
        (size && d.mv_size != size)) {
        v->rcur_valid = false;
        return NULL;
    }
    return v->rcur;
}

/* A record's value is its state (rewritten on each claim and answer) followed by the request
 * text (written once): one put per freeze. */
static int rec_get(cr_journal *j, MDB_txn *txn, uint64_t seq, jstate *st, MDB_val *payload) {
    uint8_t k[8];
    cr_put_be64(k, seq);
    MDB_val key = {8, k}, val;
    MDB_cursor *c = req_cursor(j, txn);
    int rc;
    if (c) {
        jenv *v = j->env;
        rc = MDB_NOTFOUND;
        if (v->rcur_valid && v->rcur_seq < seq) { /* the next key first: no descent when it is seq */
            MDB_val nk;
            rc = mdb_cursor_get(c, &nk, &val, MDB_NEXT);
            if (rc == 0 && (nk.mv_size != 8 || cr_get_be64(nk.mv_data) != seq)) rc = MDB_NOTFOUND;
        }
        if (rc) rc = mdb_cursor_get(c, &key, &val, MDB_SET_KEY);
        v->rcur_seq = seq;
        v->rcur_valid = rc == 0;
    } else {
        rc = mdb_get(txn, j->env->db_req, &key, &val);
    }
    if (rc) return rc;
    size_t used = cj_state_decode(val.mv_data, val.mv_size, st);
    if (!used) return MDB_CORRUPTED;
    if (payload) {
        payload->mv_data = (char *)val.mv_data + used;
        payload->mv_size = val.mv_size - used;
    }
    return 0;
}

static int st_get(cr_journal *j, MDB_txn *txn, uint64_t seq, jstate *st) { return rec_get(j, txn, seq, st, NULL); }

/* Writes a record: the state, then the request text. `append`: seq is past every key (a new
 * record), so LMDB fills pages to the end instead of splitting them in halves: fuller pages, a
 * shallower tree, fewer pages in each commit's fsync. */
static int rec_put(cr_journal *j, MDB_txn *txn, uint64_t seq, const jstate *st, const void *payload, size_t plen,
                   bool append, const char **at) {
    uint8_t k[8], b[J_STATE_MAX];
    cr_put_be64(k, seq);
    size_t sl = cj_state_encode(st, b);
    MDB_val key = {8, k}, val = {sl + plen, NULL};
    /* A rewrite of the record just read, of the same size (a claim's: the state's size does not
     * change), in place through the cursor that read it (payload never points into the tree). */
    MDB_cursor *c = append ? NULL : req_at(j, txn, seq, sl + plen);
    int rc = c ? mdb_cursor_put(c, &key, &val, MDB_CURRENT | MDB_RESERVE)
               : mdb_put(txn, j->env->db_req, &key, &val, MDB_RESERVE | (append ? MDB_APPEND : 0));
    if (rc) return rc;
    memcpy(val.mv_data, b, sl);
    if (plen) memcpy((char *)val.mv_data + sl, payload, plen);
    if (at) *at = (const char *)val.mv_data + sl;
    return 0;
}

/* Rewrites the state of an existing record, keeping its request text; *text, *len (when text is
 * not NULL) the text where it now lies (borrowed until the transaction's next write). */
static int st_put(cr_journal *j, MDB_txn *txn, uint64_t seq, const jstate *st, const char **text, size_t *len) {
    jstate old;
    MDB_val p;
    int rc = rec_get(j, txn, seq, &old, &p);
    if (rc) return rc;
    char stack[2048], *copy = p.mv_size <= sizeof stack ? stack : malloc(p.mv_size);
    if (!copy) return ENOMEM;
    memcpy(copy, p.mv_data, p.mv_size); /* the put may move the page the text lives in */
    rc = rec_put(j, txn, seq, st, copy, p.mv_size, false, text);
    if (rc == 0 && text) *len = p.mv_size;
    if (copy != stack) free(copy);
    return rc;
}

/* Puts an index key with an empty value, appended (pages filled to the end, see rec_put) when it
 * sorts after every key of the database, as new records' keys usually do. */
static int index_put(MDB_txn *txn, MDB_dbi dbi, MDB_val *key) {
    MDB_val val = {0, ""};
    /* MDB_APPEND finds the last key itself and refuses (MDB_KEYEXIST, nothing written) a key that
     * does not sort after it: then put where it sorts. (Looking the last key up first was a second
     * descent of the tree for every claim's `due` key.) */
    int rc = mdb_put(txn, dbi, key, &val, MDB_APPEND);
    if (rc == MDB_KEYEXIST) rc = mdb_put(txn, dbi, key, &val, 0);
    return rc;
}

/* Removes a `due` key. In the write transaction lm_begin began, through its cursor on `due`: when
 * the cursor already stands on the key (the one after the key it removed last), without looking it
 * up (the key under it is compared first). */
static int due_del(cr_journal *j, MDB_txn *txn, MDB_val *key) {
    jenv *v = j->env;
    if (txn != atomic_load_explicit(&v->wtxn, memory_order_relaxed)) return mdb_del(txn, v->db_due, key, NULL);
    if (!v->dcur && mdb_cursor_open(txn, v->db_due, &v->dcur)) {
        v->dcur = NULL;
        return mdb_del(txn, v->db_due, key, NULL);
    }
    MDB_val k, d;
    bool at = v->dcur_valid && mdb_cursor_get(v->dcur, &k, &d, MDB_GET_CURRENT) == 0 && k.mv_size == key->mv_size &&
              memcmp(k.mv_data, key->mv_data, k.mv_size) == 0;
    int rc = 0;
    if (!at) {
        k = *key;
        rc = mdb_cursor_get(v->dcur, &k, &d, MDB_SET);
    }
    if (rc == 0) rc = mdb_cursor_del(v->dcur, 0);
    v->dcur_valid = rc == 0; /* on the next key, or past the last */
    return rc;
}

static int key2_op(cr_journal *j, MDB_txn *txn, MDB_dbi dbi, int64_t t, uint64_t seq, bool put) {
    uint8_t k[16];
    cr_put_be64(k, cr_be_time(t));
    cr_put_be64(k + 8, seq);
    MDB_val key = {16, k};
    int rc = put ? index_put(txn, dbi, &key) : dbi == j->env->db_due ? due_del(j, txn, &key) : mdb_del(txn, dbi, &key, NULL);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

static int hostq_op(cr_journal *j, MDB_txn *txn, const jstate *st, uint64_t seq, bool put) {
    uint8_t k[J_HOST_MAX + 9];
    memcpy(k, st->host, st->host_len);
    k[st->host_len] = 0;
    cr_put_be64(k + st->host_len + 1, seq);
    MDB_val key = {st->host_len + 9u, k};
    int rc = put ? index_put(txn, j->env->db_hostq, &key) : mdb_del(txn, j->env->db_hostq, &key, NULL);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* The oldest ordered record of a host, or 0. */
static int host_head(cr_journal *j, MDB_txn *txn, const char *host, size_t host_len, uint64_t *seq) {
    *seq = 0;
    uint8_t k[J_HOST_MAX + 9];
    memcpy(k, host, host_len);
    k[host_len] = 0;
    MDB_cursor *c;
    int rc = mdb_cursor_open(txn, j->env->db_hostq, &c);
    if (rc) return rc;
    MDB_val key = {host_len + 1u, k}, val;
    rc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE);
    if (rc == 0 && key.mv_size == host_len + 9u && memcmp(key.mv_data, k, host_len + 1u) == 0)
        *seq = cr_get_be64((const uint8_t *)key.mv_data + host_len + 1);
    mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Puts the new head of a host's ordered queue into `due`. */
static int host_promote(cr_journal *j, MDB_txn *txn, const char *host, size_t host_len) {
    uint64_t seq;
    int rc = host_head(j, txn, host, host_len, &seq);
    if (rc || !seq) return rc;
    jstate st;
    if ((rc = st_get(j, txn, seq, &st))) return rc == MDB_NOTFOUND ? 0 : rc;
    if (st.flags & (JF_IN_DUE | JF_DUE_ON_RELEASE)) return 0; /* in `due`, or back in it when its claim ends */
    if (st.claim_ms) {
        st.flags |= JF_DUE_ON_RELEASE; /* claimed (an explicit resend): in `due` once given back */
    } else {
        st.flags |= JF_IN_DUE;
        if ((rc = key2_op(j, txn, j->env->db_due, due_time(&st), seq, true))) return rc;
    }
    return st_put(j, txn, seq, &st, NULL, NULL);
}

/* The next key of a database keyed by be64 numbers: the last one + 1 (1 when empty). Numbers are
 * not kept in a counter, so a freeze writes one database page less. */
static int last_next(MDB_txn *txn, MDB_dbi dbi, uint64_t *out) {
    MDB_cursor *c;
    int rc = mdb_cursor_open(txn, dbi, &c);
    if (rc) return rc;
    MDB_val k, v;
    rc = mdb_cursor_get(c, &k, &v, MDB_LAST);
    *out = rc == 0 && k.mv_size == 8 ? cr_get_be64(k.mv_data) + 1 : 1;
    mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

bool cj_generated_id(const char *id, size_t n) {
    if (n != 32) return false;
    for (size_t i = 0; i < n; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'))) return false;
    return true;
}

uint64_t cj_generated_seq(const char *id) {
    char hex[17];
    memcpy(hex, id, 16);
    hex[16] = '\0';
    return strtoull(hex, NULL, 16);
}

/* The record a freeze id names: given ids through the `ids` index; generated ids carry their
 * record's number in their first 16 hex digits (checked against the stored id). */
static int lm_find_seq(cr_journal *j, cj_txn *t, const char *id, uint64_t *seq) {
    MDB_txn *txn = TX(t);
    size_t n = strlen(id);
    MDB_val k = {n, (void *)id}, v;
    int rc = mdb_get(txn, j->env->db_ids, &k, &v);
    if (rc == 0 && v.mv_size == 8) {
        *seq = cr_get_be64(v.mv_data);
        return 0;
    }
    if (rc && rc != MDB_NOTFOUND) return rc;
    if (!cj_generated_id(id, n)) return MDB_NOTFOUND;
    uint64_t s = cj_generated_seq(id);
    jstate st;
    rc = st_get(j, txn, s, &st);
    if (rc == 0 && st.id_len == n && memcmp(st.id, id, n) == 0) {
        *seq = s;
        return 0;
    }
    return rc == 0 || rc == MDB_CORRUPTED ? MDB_NOTFOUND : rc;
}

/* Removes a record and every index entry of it; promotes the next of its host. */
static int lm_rec_remove(cr_journal *j, cj_txn *t, uint64_t seq, const jstate *st) {
    MDB_txn *txn = TX(t);
    uint8_t k[8];
    cr_put_be64(k, seq);
    MDB_val key = {8, k};
    MDB_cursor *c = req_at(j, txn, seq, 0); /* an answer's: the record its state was just read from */
    int rc = c ? mdb_cursor_del(c, 0) : mdb_del(txn, j->env->db_req, &key, NULL);
    if (c) j->env->rcur_valid = rc == 0; /* on the record after seq: MDB_NEXT gives it (rec_get) */
    /* No id an app gave in the journal (generated ids have no entry): nothing to look up. */
    MDB_stat ids;
    bool any_ids = mdb_stat(txn, j->env->db_ids, &ids) != 0 || ids.ms_entries != 0;
    if ((rc == 0 || rc == MDB_NOTFOUND) && any_ids) {
        MDB_val idk = {st->id_len, (void *)st->id}, idv;
        /* Only if the id still names this record (a replacement keeps the id). */
        rc = mdb_get(txn, j->env->db_ids, &idk, &idv);
        if (rc == 0 && idv.mv_size == 8 && cr_get_be64(idv.mv_data) == seq) rc = mdb_del(txn, j->env->db_ids, &idk, NULL);
    }
    if (rc == MDB_NOTFOUND) rc = 0;
    if (!rc && (st->flags & JF_IN_DUE)) rc = key2_op(j, txn, j->env->db_due, due_time(st), seq, false);
    if (!rc && is_ordered_auto(st)) {
        rc = hostq_op(j, txn, st, seq, false);
        if (!rc) rc = host_promote(j, txn, st->host, st->host_len);
    }
    return rc;
}

static int lm_rec_remove_bad(cr_journal *j, cj_txn *t, uint64_t seq) {
    uint8_t kb[8];
    cr_put_be64(kb, seq);
    MDB_val k = {8, kb};
    int rc = mdb_del(TX(t), j->env->db_req, &k, NULL);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* The `due` key of a record whose state goes from old to *st (whose flags it sets): a claim takes
 * the key of a record in `due` away (JF_DUE_ON_RELEASE), giving the claim back puts it at the next
 * attempt, and an unclaimed record's key follows its next attempt. A record claimed by a store
 * written before JF_DUE_ON_RELEASE has its key at its lease's end (JF_IN_DUE): removed the same way. */
static int due_follow(cr_journal *j, MDB_txn *txn, uint64_t seq, const jstate *old, jstate *st) {
    bool had = (old->flags & JF_IN_DUE) != 0;
    st->flags &= (uint16_t)~(JF_IN_DUE | JF_DUE_ON_RELEASE);
    if (!had && !(old->flags & JF_DUE_ON_RELEASE)) return 0; /* manual, or behind its host's head */
    if (st->claim_ms) {
        st->flags |= JF_DUE_ON_RELEASE;
        return had ? key2_op(j, txn, j->env->db_due, due_time(old), seq, false) : 0;
    }
    st->flags |= JF_IN_DUE;
    if (had && due_time(old) == due_time(st)) return 0;
    int rc = had ? key2_op(j, txn, j->env->db_due, due_time(old), seq, false) : 0;
    return rc ? rc : key2_op(j, txn, j->env->db_due, due_time(st), seq, true);
}

/* Rewrites a record's state, moving its `due` key when its due time changed; with text, *text and
 * *len give the record's text where it now lies (a claim copies it: no second read). */
static int lm_st_update_text(cr_journal *j, cj_txn *t, uint64_t seq, const jstate *old, const jstate *st,
                             const char **text, size_t *len) {
    MDB_txn *txn = TX(t);
    jstate now = *st;
    int rc = due_follow(j, txn, seq, old, &now);
    return rc ? rc : st_put(j, txn, seq, &now, text, len);
}

/* Rewrites a record's state with the text its caller read (a claim: see cj_consider), moving its
 * `due` key when its due time changed. */
static int lm_st_update_with(cr_journal *j, cj_txn *t, uint64_t seq, const jstate *old, const jstate *st,
                             const char *text, size_t len) {
    MDB_txn *txn = TX(t);
    jstate now = *st;
    int rc = due_follow(j, txn, seq, old, &now);
    return rc ? rc : rec_put(j, txn, seq, &now, text, len, false, NULL);
}

static int lm_st_update(cr_journal *j, cj_txn *t, uint64_t seq, const jstate *old, const jstate *st) {
    return lm_st_update_text(j, t, seq, old, st, NULL, NULL);
}

/* ---- the `due` keys of the newest records ----
 * An automatic unordered freeze numbered past `due_upto` (meta: be64; every record up to it has the
 * `due` key its flags say) is written flagged JF_IN_DUE but without the key: its commit then
 * writes `req` and the main database's page naming it, not `due`'s leaf and branch too
 * (docs/design/journal.md, "Pages per freeze"). The next pass puts the keys of the records past
 * `due_upto` before it reads `due` (due_catch_up: reads of `req` and appends to `due`; no record
 * rewritten), and lm_due_edges counts such records as due now (due_behind), so the turn a resume,
 * the network's return or another engine's freeze wakes runs that pass. Every other use of a
 * JF_IN_DUE record's key (a claim, an answer, a removal) already takes a missing key for removed.
 * Records are numbered upwards (last key + 1), so the records past `due_upto` are the newest; a
 * number reused after removals that is not past it gets its key in the freeze. */
static uint64_t due_upto(cr_journal *j, MDB_txn *txn) {
    MDB_val k = {8, (void *)"due_upto"}, v;
    return mdb_get(txn, j->env->db_meta, &k, &v) == 0 && v.mv_size == 8 ? cr_get_be64(v.mv_data) : 0;
}

/* Puts the `due` keys of the records past `due_upto` that should have one (JF_IN_DUE; a key already
 * there is put again, unchanged), and sets `due_upto` to the newest record (lowered too when the
 * newest were removed, so a number reused later is past it). */
static int due_catch_up(cr_journal *j, MDB_txn *txn) {
    uint64_t upto = due_upto(j, txn), last;
    int rc = last_next(txn, j->env->db_req, &last);
    if (rc || --last == upto) return rc;
    if (last > upto) {
        MDB_cursor *c;
        if ((rc = mdb_cursor_open(txn, j->env->db_req, &c))) return rc;
        uint8_t kb[8];
        cr_put_be64(kb, upto + 1);
        MDB_val k = {8, kb}, v;
        for (rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
            jstate st;
            if (k.mv_size != 8 || !cj_state_decode(v.mv_data, v.mv_size, &st) || !(st.flags & JF_IN_DUE)) continue;
            if ((rc = key2_op(j, txn, j->env->db_due, due_time(&st), cr_get_be64(k.mv_data), true))) break;
        }
        mdb_cursor_close(c);
        if (rc != MDB_NOTFOUND) return rc;
    }
    uint8_t b[8];
    cr_put_be64(b, last);
    MDB_val key = {8, (void *)"due_upto"}, val = {8, b};
    return mdb_put(txn, j->env->db_meta, &key, &val, 0);
}

/* Records past `due_upto`: some may be due with no `due` key yet. */
static bool due_behind(cr_journal *j, MDB_txn *txn) {
    uint64_t next;
    return last_next(txn, j->env->db_req, &next) == 0 && next - 1 > due_upto(j, txn);
}

static int lm_rec_get(cr_journal *j, cj_txn *t, uint64_t seq, jstate *st, const char **text, size_t *len) {
    MDB_val v;
    int rc = rec_get(j, TX(t), seq, st, &v);
    if (rc == 0 && text) {
        *text = v.mv_data;
        *len = v.mv_size;
    }
    return rc;
}

static int lm_outcome_log(cr_journal *j, cj_txn *t, const jstate *st, int code, int status, int64_t now) {
    MDB_txn *txn = TX(t);
    jenv *v = j->env;
    size_t id = mdb_txn_id(txn);
    uint64_t n = v->oc_next;
    int rc = 0;
    bool known = id && v->oc_txnid == id; /* an earlier answer of this transaction: its number + 1 */
    if (!known && (rc = last_next(txn, v->db_outcome, &n))) return rc;
    char text[COURIER_FROZEN_ID_MAX + 160];
    int len = cj_outcome_text(st, code, status, now, text, sizeof text);
    uint8_t k[8];
    cr_put_be64(k, n);
    MDB_val key = {8, k}, val = {(size_t)len, text};
    rc = mdb_put(txn, v->db_outcome, &key, &val, MDB_APPEND); /* n is past every key */
    if (rc == MDB_KEYEXIST && known) { /* not past the end after all: looked up */
        if ((rc = last_next(txn, v->db_outcome, &n))) return rc;
        cr_put_be64(k, n);
        rc = mdb_put(txn, v->db_outcome, &key, &val, MDB_APPEND);
    }
    if (rc) {
        v->oc_txnid = 0;
        return rc;
    }
    v->oc_txnid = id;
    v->oc_next = n + 1;
    MDB_stat ms;
    if (mdb_stat(txn, v->db_outcome, &ms) == 0 && ms.ms_entries > J_OUTCOMES_KEPT + 100) { /* trims in batches */
        MDB_cursor *c;
        if ((rc = mdb_cursor_open(txn, v->db_outcome, &c))) return rc;
        size_t extra = ms.ms_entries - J_OUTCOMES_KEPT;
        MDB_val ck, cv;
        /* The oldest first: after a delete the cursor stands on the next, which MDB_NEXT gives. */
        for (rc = mdb_cursor_get(c, &ck, &cv, MDB_FIRST); rc == 0 && extra--;) {
            if ((rc = mdb_cursor_del(c, 0)) == 0 && extra) rc = mdb_cursor_get(c, &ck, &cv, MDB_NEXT);
        }
        mdb_cursor_close(c);
        if (rc == MDB_NOTFOUND) rc = 0;
    }
    return rc;
}

/* Writes one frozen request. */
static int lm_freeze(cr_journal *j, cj_txn *t, jfreeze *f) {
    MDB_txn *txn = TX(t);
    int rc = 0;
    MDB_val idk = {f->st.id_len, f->st.id}, idv;
    if (!f->generated) {
        rc = mdb_get(txn, j->env->db_ids, &idk, &idv);
        if (rc == 0 && idv.mv_size == 8) {
            /* The same freeze id again: the newer request replaces the older one. */
            uint64_t old = cr_get_be64(idv.mv_data);
            jstate ost;
            rc = st_get(j, txn, old, &ost);
            if (rc == 0) rc = lm_rec_remove(j, t, old, &ost);
            else if (rc == MDB_NOTFOUND) rc = 0;
        } else if (rc == MDB_NOTFOUND) {
            rc = 0;
        }
        if (rc) return rc;
    }
    uint64_t seq;
    if ((rc = last_next(txn, j->env->db_req, &seq))) return rc;
    char *text;
    if ((rc = cj_freeze_text(f, seq, &text))) return rc;
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
            rc = hostq_op(j, txn, &f->st, seq, true);
            if (!rc) rc = host_head(j, txn, f->st.host, f->st.host_len, &head);
            in_due = head == seq;
        }
        if (!rc && in_due) {
            f->st.flags |= JF_IN_DUE;
            /* Unordered and the newest: its key put by the next pass (due_catch_up). */
            if (is_ordered_auto(&f->st) || seq <= due_upto(j, txn))
                rc = key2_op(j, txn, j->env->db_due, due_time(&f->st), seq, true);
        }
    }
    if (!rc) rc = rec_put(j, txn, seq, &f->st, text, strlen(text), true, NULL);
    free(text);
    if (rc == 0) f->seq = seq;
    return rc;
}

/* Claims due records while this engine has free slots. Returns the earliest future due time in
 * *next (INT64_MAX if none) and whether a replay-now scan found nothing left. */
static int lm_pass(cr_journal *j, cj_txn *t, int64_t now, long slots, unsigned mode, int64_t since, jsend ***sends,
                   jevent ***events, int64_t *next, bool *mode_done) {
    MDB_txn *txn = TX(t);
    *next = INT64_MAX;
    *mode_done = true;
    MDB_cursor *c;
    int rc = due_catch_up(j, txn); /* the newest records' keys first */
    jseqs cand = {0};
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
            cand.n = 0;
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
                int64_t tm = (int64_t)cr_get_be64(k.mv_data);
                if (sweep == 0 && tm > now) {
                    *next = tm;
                    break;
                }
                if (cand.n == limit) {
                    memcpy(from, k.mv_data, 16); /* the next batch starts here */
                    have_from = more = true;
                    break;
                }
                cj_seqs_add(&cand, cr_get_be64((const uint8_t *)k.mv_data + 8)); /* no memory: the next pass */
            }
            mdb_cursor_close(c);
            if (rc == MDB_NOTFOUND) rc = 0;
            for (size_t i = 0; i < cand.n && rc == 0 && !full; i++) {
                jstate st;
                MDB_val p; /* the text, valid until the next write: a claim takes it (lm_st_update_with) */
                rc = rec_get(j, txn, cand.v[i], &st, &p);
                if (rc == MDB_NOTFOUND) {
                    rc = 0;
                    continue;
                }
                if (rc) break;
                rc = j->pass->consider(j, t, cand.v[i], &st, p.mv_data, p.mv_size, now, &slots, mode, since, sends, events,
                                 next, mode_done, &full);
            }
        }
    }
    cand.n = 0;
    if (rc || !(mode & J_KICK_MANUAL)) {
        free(cand.v);
        return rc;
    }
    /* Manual records are not in `due`: a replay-now that includes them scans every record. */
    if ((rc = mdb_cursor_open(txn, j->env->db_req, &c))) {
        free(cand.v);
        return rc;
    }
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        jstate st;
        if (k.mv_size != 8 || !cj_state_decode(v.mv_data, v.mv_size, &st)) continue;
        if (st.policy != COURIER_FREEZE_MANUAL || st.last_ms >= since) continue;
        cj_seqs_add(&cand, cr_get_be64(k.mv_data));
    }
    mdb_cursor_close(c);
    if (rc == MDB_NOTFOUND) rc = 0;
    full = false;
    for (size_t i = 0; i < cand.n && rc == 0 && !full; i++) {
        jstate st;
        if ((rc = st_get(j, txn, cand.v[i], &st))) {
            if (rc == MDB_NOTFOUND) rc = 0;
            continue;
        }
        rc = j->pass->consider_manual(j, t, cand.v[i], &st, now, &slots, mode, sends, next, mode_done, &full);
    }
    free(cand.v);
    return rc;
}

/* In any transaction: is a record due now, and when is the next one due after now? */
static void lm_due_edges(cr_journal *j, cj_txn *t, int64_t now, bool *due_now, int64_t *next_due) {
    *due_now = false;
    *next_due = INT64_MAX;
    MDB_cursor *c;
    if (mdb_cursor_open(TX(t), j->env->db_due, &c)) return;
    MDB_val k, v;
    if (mdb_cursor_get(c, &k, &v, MDB_FIRST) == 0 && k.mv_size == 16) {
        int64_t tm = (int64_t)cr_get_be64(k.mv_data);
        if (tm <= now) {
            *due_now = true;
            uint8_t kb[16];
            cr_put_be64(kb, cr_be_time(now + 1));
            memset(kb + 8, 0, 8);
            k.mv_size = 16;
            k.mv_data = kb;
            if (mdb_cursor_get(c, &k, &v, MDB_SET_RANGE) == 0 && k.mv_size == 16)
                *next_due = (int64_t)cr_get_be64(k.mv_data);
        } else {
            *next_due = tm;
        }
    }
    mdb_cursor_close(c);
    if (!*due_now && due_behind(j, TX(t))) *due_now = true; /* the next pass puts their keys, then knows */
}

/* Read-only look: is anything due now, and when next? With `scan`, also which claims are held by
 * the dead and which records expired (a pass over every record: only every poll interval). */
static int lm_peek(cr_journal *j, int64_t now, bool scan, bool *due_now, int64_t *next_due, jseqs *dead,
                   jseqs *expired) {
    *due_now = false;
    *next_due = INT64_MAX;
    MDB_txn *txn;
    int rc = cr_lmdb_begin(&j->env->base, MDB_RDONLY, &txn); /* the file checked whole first */
    if (rc) return rc;
    MDB_cursor *c;
    MDB_val k, v;
    lm_due_edges(j, (cj_txn *)txn, now, due_now, next_due);
    if (scan && (rc = mdb_cursor_open(txn, j->env->db_req, &c)) == 0) {
        int grc;
        for (grc = mdb_cursor_get(c, &k, &v, MDB_FIRST); grc == 0; grc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
            jstate st;
            if (k.mv_size != 8 || !cj_state_decode(v.mv_data, v.mv_size, &st)) continue;
            bool stale = st.claim_ms && cj_claim_stale(j, &st, now);
            /* Or given back without its `due` key (cj_given_back_unindexed): put back by the
             * recovery as a claim of the dead is. */
            if (stale || cj_given_back_unindexed(&st)) cj_seqs_add(dead, cr_get_be64(k.mv_data));
            if (st.expires_ms <= now && (!st.claim_ms || stale)) cj_seqs_add(expired, cr_get_be64(k.mv_data));
        }
        mdb_cursor_close(c);
        if (grc != 0 && grc != MDB_NOTFOUND) rc = grc;
    }
    mdb_txn_abort(txn);
    return rc;
}

static int lm_each(cr_journal *j, cj_txn *t, int (*fn)(void *, uint64_t, const jstate *, const char *, size_t),
                   void *user) {
    MDB_cursor *c;
    int rc = mdb_cursor_open(TX(t), j->env->db_req, &c);
    if (rc) return rc;
    MDB_val k, v;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size != 8) continue;
        jstate st;
        size_t used = cj_state_decode(v.mv_data, v.mv_size, &st);
        int frc = fn(user, cr_get_be64(k.mv_data), used ? &st : NULL, (const char *)v.mv_data + used, v.mv_size - used);
        if (frc) {
            rc = frc;
            break;
        }
    }
    mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

static int lm_count(cr_journal *j, cj_txn *t, int64_t *n) {
    MDB_stat ms;
    int rc = mdb_stat(TX(t), j->env->db_req, &ms);
    if (rc == 0) *n = (int64_t)ms.ms_entries;
    return rc;
}

static int lm_remove_all(cr_journal *j, cj_txn *t, int64_t *n) {
    MDB_txn *txn = TX(t);
    int rc = lm_count(j, t, n);
    MDB_dbi dbs[] = {j->env->db_req, j->env->db_ids, j->env->db_due, j->env->db_hostq};
    for (size_t i = 0; rc == 0 && i < sizeof dbs / sizeof dbs[0]; i++) rc = mdb_drop(txn, dbs[i], 0);
    return rc;
}

static int lm_last_outcome(cr_journal *j, cj_txn *t, const char *id, int *code, int *status, int64_t *at_ms) {
    MDB_cursor *c;
    int rc = mdb_cursor_open(TX(t), j->env->db_outcome, &c);
    if (rc) return rc;
    MDB_val k, v;
    bool found = false;
    for (rc = mdb_cursor_get(c, &k, &v, MDB_LAST); rc == 0 && !found; rc = mdb_cursor_get(c, &k, &v, MDB_PREV))
        found = cj_outcome_match(v.mv_data, v.mv_size, id, code, status, at_ms);
    mdb_cursor_close(c);
    return found ? 0 : rc == 0 ? MDB_NOTFOUND : rc;
}

static int lm_host_waiting(cr_journal *j, cj_txn *t, const char *host, size_t host_len, uint64_t seq, int64_t *n) {
    *n = 0;
    if (host_len > J_HOST_MAX) return 0;
    uint8_t k[J_HOST_MAX + 9];
    memcpy(k, host, host_len);
    k[host_len] = 0;
    cr_put_be64(k + host_len + 1, seq + 1);
    MDB_cursor *c;
    int rc = mdb_cursor_open(TX(t), j->env->db_hostq, &c);
    if (rc) return rc;
    MDB_val key = {host_len + 9u, k}, val;
    for (rc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE); rc == 0 && *n < CJ_WAITING_MAX;
         rc = mdb_cursor_get(c, &key, &val, MDB_NEXT)) {
        if (key.mv_size != host_len + 9u || memcmp(key.mv_data, k, host_len + 1u) != 0) break;
        (*n)++;
    }
    mdb_cursor_close(c);
    return rc == MDB_NOTFOUND || rc == 0 ? 0 : rc;
}

static int lm_open(cr_journal *j, const char *where, courier_error *err) {
    (void)j;
    (void)where;
    (void)err;
    return COURIER_OK; /* the environment is j->env, acquired by the journal for every store */
}

static void lm_close(cr_journal *j) { (void)j; }

static int lm_begin(cr_journal *j, bool write, cj_txn **t) {
    MDB_txn *txn = NULL;
    int rc = cr_lmdb_begin(&j->env->base, write ? 0 : MDB_RDONLY, &txn); /* the file checked whole first */
    *t = (cj_txn *)txn;
    if (rc == 0 && write) { /* this thread holds the writer lock until the commit or abort */
        j->env->rcur = j->env->dcur = NULL;
        j->env->rcur_valid = j->env->dcur_valid = false;
        atomic_store_explicit(&j->env->wtxn, txn, memory_order_relaxed);
    }
    return rc;
}

/* The end of a transaction: LMDB closes the write transaction's cursors with it. */
static void txn_ended(cr_journal *j, MDB_txn *txn) {
    if (txn != atomic_load_explicit(&j->env->wtxn, memory_order_relaxed)) return;
    atomic_store_explicit(&j->env->wtxn, NULL, memory_order_relaxed);
    j->env->rcur = j->env->dcur = NULL;
    j->env->rcur_valid = j->env->dcur_valid = false;
}

static int lm_commit(cr_journal *j, cj_txn *t) {
    txn_ended(j, TX(t));
    return mdb_txn_commit(TX(t));
}

static void lm_abort(cr_journal *j, cj_txn *t) {
    if (!t) return;
    txn_ended(j, TX(t));
    mdb_txn_abort(TX(t));
}

static const char *lm_strerror(cr_journal *j, int rc) {
    (void)j;
    return mdb_strerror(rc);
}

static int lm_fail(cr_journal *j, courier_error *err, int rc, const char *what) {
    (void)j;
    return cr_lmdb_fail(err, rc, COURIER_E_JOURNAL_CORRUPT, what);
}

const cj_store_ops cj_lmdb_store = {
    .kind = "lmdb",
    .atomic = true,
    .open = lm_open,
    .close = lm_close,
    .begin = lm_begin,
    .commit = lm_commit,
    .abort = lm_abort,
    .broken = cr_lmdb_is_broken,
    .strerror = lm_strerror,
    .fail = lm_fail,
    .rec_get = lm_rec_get,
    .st_update = lm_st_update,
    .st_update_text = lm_st_update_text,
    .st_update_with = lm_st_update_with,
    .rec_remove = lm_rec_remove,
    .rec_remove_bad = lm_rec_remove_bad,
    .outcome_log = lm_outcome_log,
    .find_seq = lm_find_seq,
    .freeze = lm_freeze,
    .take = NULL,
    .pass = lm_pass,
    .due_edges = lm_due_edges,
    .peek = lm_peek,
    .each = lm_each,
    .count = lm_count,
    .remove_all = lm_remove_all,
    .last_outcome = lm_last_outcome,
    .host_waiting = lm_host_waiting,
};

/* ==== the calls the rooms make, on whichever store is open ===================================== */

int cj_rec_get(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, const char **text, size_t *len) {
    return j->store->rec_get(j, txn, seq, st, text, len);
}

int cj_st_get(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st) {
    return j->store->rec_get(j, txn, seq, st, NULL, NULL);
}

int cj_find_seq(cr_journal *j, cj_txn *txn, const char *id, uint64_t *seq) { return j->store->find_seq(j, txn, id, seq); }

int cj_rec_remove(cr_journal *j, cj_txn *txn, uint64_t seq, const jstate *st) {
    return j->store->rec_remove(j, txn, seq, st);
}

int cj_st_update(cr_journal *j, cj_txn *txn, uint64_t seq, const jstate *old, const jstate *st) {
    return j->store->st_update(j, txn, seq, old, st);
}

int cj_outcome_log(cr_journal *j, cj_txn *txn, const jstate *st, int code, int status, int64_t now) {
    return j->store->outcome_log(j, txn, st, code, status, now);
}

/* The bytes snprintf("{\"id\":\"%.*s\",\"code\":%d,\"status\":%d,\"at_ms\":%lld,\"attempts\":%u}") wrote,
 * formatted directly (snprintf was 2,500 instructions of every final answer: docs/design/journal.md,
 * "Where replay's time goes"). */
static size_t put_lit(char *p, const char *s) {
    size_t n = strlen(s);
    memcpy(p, s, n);
    return n;
}

int cj_outcome_text(const jstate *st, int code, int status, int64_t now, char *out, size_t cap) {
    if (cap < (size_t)st->id_len + 110) /* the fixed text and five numbers at their longest fit in 110 */
        return snprintf(out, cap, "{\"id\":\"%.*s\",\"code\":%d,\"status\":%d,\"at_ms\":%lld,\"attempts\":%u}",
                        (int)st->id_len, st->id, code, status, (long long)now, st->attempts);
    size_t n = put_lit(out, "{\"id\":\"");
    memcpy(out + n, st->id, st->id_len);
    n += st->id_len;
    n += put_lit(out + n, "\",\"code\":");
    n += cr_json_format_int(out + n, code);
    n += put_lit(out + n, ",\"status\":");
    n += cr_json_format_int(out + n, status);
    n += put_lit(out + n, ",\"at_ms\":");
    n += cr_json_format_int(out + n, now);
    n += put_lit(out + n, ",\"attempts\":");
    n += cr_json_format_int(out + n, (int64_t)st->attempts);
    out[n++] = '}';
    out[n] = '\0';
    return (int)n;
}

bool cj_outcome_match(const char *text, size_t len, const char *id, int *code, int *status, int64_t *at_ms) {
    json_t *o = json_loadb(text, len, 0, NULL);
    const char *oid = json_string_value(json_object_get(o, "id"));
    bool found = oid && strcmp(oid, id) == 0;
    if (found) {
        if (code) *code = (int)json_integer_value(json_object_get(o, "code"));
        if (status) *status = (int)json_integer_value(json_object_get(o, "status"));
        if (at_ms) *at_ms = json_integer_value(json_object_get(o, "at_ms"));
    }
    json_decref(o);
    return found;
}

/* A snapshot of a record inside a transaction (NULL when unreadable). */
courier_frozen *cj_snap_in(cr_journal *j, cj_txn *txn, uint64_t seq, const jstate *st) {
    jstate again;
    const char *text;
    size_t len;
    if (cj_rec_get(j, txn, seq, &again, &text, &len)) return NULL;
    bool bad;
    return cj_snap_make(seq, text, len, st, &bad);
}

void cj_seqs_add(jseqs *l, uint64_t seq) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        uint64_t *p = realloc(l->v, cap * sizeof *p);
        if (!p) return; /* found again by the next scan */
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = seq;
}

int cj_freeze_text(jfreeze *f, uint64_t seq, char **out) {
    *out = NULL;
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
    *out = text;
    return 0;
}
