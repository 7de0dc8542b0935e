/*
 * store_redis.c — the journal's records on Redis Streams (the store named by a redis:// URL; the
 * LMDB store is store.c). The same journal runs above it (replay.c, policy.c, api.c): only where a
 * record lives, who may claim it and how a pass finds due records differ. docs/design/redis.md, "The
 * journal on Redis", has the layout; in short, under one hash tag (one Cluster slot):
 *   {courier:journal:NAME}:stream    the frozen requests: entry id 0-<seq>, field "req" = the
 *                                    request's JSON text (record.c's encoding, as on LMDB)
 *   ...:state   hash seq -> the state record (store.c's encoding: attempts, next attempt, lease...)
 *   ...:ids     hash freeze id -> seq (ids the app gave);   ...:gid  hash seq -> that id
 *   ...:hostq   zset (lexical) "host\0<seq, 20 digits>": ordered records of each host, oldest first
 *   ...:hostq-of hash seq -> its hostq member
 *   ...:outcomes list of the last 1000 final answers (the outcome records' JSON, newest first)
 *   ...:seq     the last record number (INCR)
 * and the consumer group "courier-replay" on the stream: each engine is a consumer. A pass takes
 * new entries with XREADGROUP (into its pending list: they are its to replay), takes over the
 * entries of consumers silent for a lease with XAUTOCLAIM, keeps its own alive by claiming them
 * again (XCLAIM, JUSTID) every third of a lease, and replays what in its pending list is due. A
 * final answer is XACK + XDEL + the side records, in one script. Writes that belong together run
 * in one Lua script (atomic, one round trip); a freeze is answered once Redis answered it.
 *
 * Threads: the journal thread and the API's callers; the floor (base/redis.c) pools connections.
 * The calls themselves (pipelines, the script, the group) are store_redis_calls.c's.
 */
#include "journal/store_redis.h"

#ifdef COURIER_REDIS

/* ---- the store's operations ---- */

static int r_open(cr_journal *j, const char *where, courier_error *err) {
    cj_redis *r = calloc(1, sizeof *r);
    if (!r) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    pthread_mutex_init(&r->mu, NULL);
    atomic_init(&r->woken, false);
    r->next_due = INT64_MAX;
    j->redis = r;
    /* "redis://...#NAME": the journal's name in the key names (default "default"), so that one
     * Redis can keep several journals apart. */
    char url[sizeof cr_core(j->e)->config->frozen.store], name[64] = "default";
    snprintf(url, sizeof url, "%s", where);
    char *hash = strrchr(url, '#');
    if (hash) {
        *hash = '\0';
        if (!hash[1] || strlen(hash + 1) >= sizeof name || strpbrk(hash + 1, "{}")) {
            int rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "the journal's name after '#' must be 1-63 characters, no braces");
            pthread_mutex_destroy(&r->mu);
            free(r);
            j->redis = NULL;
            return rc;
        }
        snprintf(name, sizeof name, "%s", hash + 1);
    }
    static const char *const suffix[R_KEYS] = {"stream", "state", "ids", "gid", "hostq", "hostq-of", "outcomes", "seq"};
    for (int k = 0; k < R_KEYS; k++)
        r->keylen[k] = (size_t)snprintf(r->keys[k], sizeof r->keys[k], "{courier:journal:%s}:%s", name, suffix[k]);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    snprintf(r->consumer, sizeof r->consumer, "%s:%u:%08x", host, j->me.pid, j->me.nonce);
    /* Redis is not asked here: an engine opens whether Redis is there or not (a service starts
     * before its Redis, or while Redis restarts). The pool connects at the first call; until Redis
     * answers, freezes fail (the send's own error, "not frozen") and the API's calls say
     * COURIER_E_REDIS; the journal thread's next turn after that replays. The consumer group is
     * made by the first pass that finds it missing (cjr_adopt_new: NOGROUP). */
    int rc = cr_redis_open(url, cr_core(j->e)->config->timeout_ms, &r->db, err);
    if (rc) {
        cr_redis_close(r->db);
        pthread_mutex_destroy(&r->mu);
        free(r);
        j->redis = NULL;
    }
    return rc;
}

static int flush(cr_journal *j, struct cj_rtxn *t);

/* Gives this engine's entries back to the group at close (idle as if long silent, so another
 * engine's next pass takes them over at once) and leaves the group. */
static void r_close(cr_journal *j) {
    cj_redis *r = j->redis;
    if (!r) return;
    cjr_wake_stop(j); /* (no handoff is listened for once the engine gives its entries back) */
    if (r->backlog) { /* the last turns' writes Redis did not take: once more (else their leases decide) */
        struct cj_rtxn t = {.j = j, .dv = r->backlog, .dn = r->nbacklog, .dcap = r->capbacklog};
        (void)flush(j, &t);
    }
    redisReply *pend = NULL;
    if (cjr_my_pending(j, &pend) == 0) {
        for (size_t i = 0; i < pend->elements; i += R_BATCH) {
            const char *v[R_BATCH + 12];
            size_t len[R_BATCH + 12];
            int n = 0;
            v[n++] = "XCLAIM";
            v[n++] = r->keys[K_STREAM];
            v[n++] = R_GROUP;
            v[n++] = R_FREE_CONSUMER;
            v[n++] = "0";
            for (size_t k = i; k < pend->elements && k < i + R_BATCH; k++) {
                redisReply *e = pend->element[k];
                if (e->type == REDIS_REPLY_ARRAY && e->elements >= 1 && e->element[0]->type == REDIS_REPLY_STRING)
                    v[n++] = e->element[0]->str;
            }
            v[n++] = "IDLE";
            v[n++] = "1000000000000";
            v[n++] = "JUSTID";
            for (int k = 0; k < n; k++) len[k] = strlen(v[k]);
            cr_redis_cmd c = {n, v, len};
            redisReply *rep;
            if (cjr_run(j, &c, 1, &rep, true) == 0) freeReplyObject(rep);
        }
        freeReplyObject(pend);
    }
    const char *v[] = {"XGROUP", "DELCONSUMER", r->keys[K_STREAM], R_GROUP, r->consumer};
    size_t len[5];
    for (int k = 0; k < 5; k++) len[k] = strlen(v[k]);
    cr_redis_cmd c = {5, v, len};
    redisReply *rep;
    if (cjr_run(j, &c, 1, &rep, true) == 0) freeReplyObject(rep);
    cr_redis_close(r->db);
    pthread_mutex_destroy(&r->mu);
    free(r->waiting);
    free(r->hosts);
    free(r);
    j->redis = NULL;
}

/* Whether the caller is the engine's journal thread (its turns' transactions carry the backlog;
 * the API's never do). j->thread is written before the thread is let go (cr_journal_start). */
static bool on_journal_thread(cr_journal *j) { return j->thread_started && pthread_equal(pthread_self(), j->thread); }

static int r_begin(cr_journal *j, bool write, cj_txn **txn) {
    (void)write;
    struct cj_rtxn *t = calloc(1, sizeof *t);
    if (!t) return ENOMEM;
    t->j = j;
    cj_redis *r = j->redis;
    if (on_journal_thread(j) && r->backlog) { /* (the backlog is the journal thread's alone) */
        /* The writes a failed turn could not send (Redis away): this turn's own, first. */
        t->dv = r->backlog;
        t->dn = r->nbacklog;
        t->dcap = r->capbacklog;
        r->backlog = NULL;
        r->nbacklog = r->capbacklog = 0;
    }
    *txn = (cj_txn *)t;
    return 0;
}

#define R_DONE UINT64_MAX /* a kept write Redis has (rdeferred.seq) */

/* Sends the kept writes not yet written in one pipeline: EVALSHA update (the record may be gone:
 * then nothing) or remove, LPUSH + LTRIM of the outcome records. Each write Redis answered is
 * marked written (R_DONE); a NOSCRIPT answer (Redis restarted, or SCRIPT FLUSH) loads the script
 * and sends what it refused once more. 0 when every write is written (t->dn is then 0); else the
 * error, with the writes not written still in t->dv (r_commit keeps them for the next turn). */
static int flush(cr_journal *j, struct cj_rtxn *t) {
    int rc = 0;
    for (int round = 0; rc == 0 && round < 2; round++) {
        size_t left = 0;
        for (size_t i = 0; i < t->dn; i++) left += t->dv[i].seq != R_DONE;
        if (!left) break;
        char sha[41];
        if ((rc = cjr_script_sha_now(j, sha))) return rc;
        size_t n = 0;
        cr_redis_cmd *cmds = calloc(left + 1, sizeof *cmds);
        size_t *of = calloc(left + 1, sizeof *of); /* cmds[k] writes t->dv[of[k]] */
        const char **argv = calloc(left * 14 + 14, sizeof *argv);
        size_t *argl = calloc(left * 14 + 14, sizeof *argl);
        char (*nums)[24] = calloc(left + 1, sizeof *nums);
        redisReply **rep = calloc(left + 1, sizeof *rep);
        if (!cmds || !of || !argv || !argl || !nums || !rep) rc = ENOMEM;
        size_t ai = 0;
        bool outcomes = false, noscript = false;
        for (size_t i = 0; rc == 0 && i < t->dn; i++) {
            rdeferred *d = &t->dv[i];
            if (d->seq == R_DONE) continue;
            const char **v = argv + ai;
            size_t *l = argl + ai;
            int c = 0;
            if (d->seq) {
                v[c++] = "EVALSHA";
                v[c++] = sha;
                v[c++] = "7";
                for (int k = 0; k < R_KEYS - 1; k++) v[c++] = j->redis->keys[k];
                v[c++] = R_GROUP;
                v[c++] = d->remove ? "remove" : "update";
                snprintf(nums[n], sizeof nums[n], "%llu", (unsigned long long)d->seq);
                v[c++] = nums[n];
                if (d->remove) v[c++] = j->redis->consumer; /* (the handoff: the script's ARGV[4]) */
                for (int k = 0; k < c; k++) l[k] = strlen(v[k]);
                if (!d->remove) {
                    v[c] = (const char *)d->data;
                    l[c++] = d->len;
                }
            } else {
                v[c] = "LPUSH";
                l[c++] = 5;
                v[c] = j->redis->keys[K_OUTCOMES];
                l[c++] = j->redis->keylen[K_OUTCOMES];
                v[c] = (const char *)d->data;
                l[c++] = d->len;
                outcomes = true;
            }
            of[n] = i;
            cmds[n++] = (cr_redis_cmd){c, v, l};
            ai += (size_t)c;
        }
        if (rc == 0 && outcomes) {
            static const char *const trim[] = {"LTRIM", NULL, "0", "999"};
            const char **v = argv + ai;
            size_t *l = argl + ai;
            for (int k = 0; k < 4; k++) v[k] = k == 1 ? j->redis->keys[K_OUTCOMES] : trim[k];
            for (int k = 0; k < 4; k++) l[k] = strlen(v[k]);
            of[n] = SIZE_MAX;
            cmds[n++] = (cr_redis_cmd){4, v, l};
        }
        if (rc == 0 && n) {
            rc = cjr_run(j, cmds, n, rep, true); /* on failure it has freed the replies */
            bool got = rc == 0;
            for (size_t k = 0; rc == 0 && k < n; k++) {
                if (rep[k]->type != REDIS_REPLY_ERROR) {
                    if (of[k] != SIZE_MAX) t->dv[of[k]].seq = R_DONE;
                } else if (strncmp(rep[k]->str, "NOSCRIPT", 8) == 0) {
                    noscript = true; /* sent again after the script is loaded */
                } else {
                    courier_error e;
                    cr_redis_reply_check(rep[k], "the journal's pipeline", &e);
                    rc = cjr_remember(j, &e);
                }
            }
            if (got) cr_redis_replies_free(rep, n);
        }
        if (rc == 0 && noscript) {
            pthread_mutex_lock(&j->redis->mu);
            if (strcmp(j->redis->script_sha, sha) == 0) j->redis->script_sha[0] = '\0'; /* loaded by the next round */
            pthread_mutex_unlock(&j->redis->mu);
        }
        free(cmds);
        free(of);
        free(argv);
        free(argl);
        free(nums);
        free(rep);
    }
    if (rc) return rc;
    for (size_t i = 0; i < t->dn; i++)
        if (t->dv[i].seq != R_DONE) {
            courier_error e;
            cr_fail(&e, COURIER_E_REDIS, "the journal's script was refused twice (NOSCRIPT)");
            return cjr_remember(j, &e);
        }
    t->dn = 0;
    return 0;
}

static void txn_free(struct cj_rtxn *t) {
    if (t->held) freeReplyObject(t->held);
    cjr_cache_free(t);
    free(t->dv);
    free(t);
}

/* Ends a turn: its kept writes sent. When Redis cannot take them (it is away, it restarted), the
 * journal thread keeps the ones not written for its next turn (r_begin), in front of that turn's
 * own: an answer recorded in a turn whose commit failed is written when Redis is back, instead of
 * being lost and leaving its record claimed by this live engine until the lease ends (300 s by
 * default; the head of an ordered host held every request behind it that long). A write sent
 * twice is harmless: a state rewrite of a record that is gone does nothing, a removal of one
 * that is gone does nothing (an outcome record may be listed twice). The API's writes are not
 * kept: its caller is told they failed. */
static int end_turn(cr_journal *j, struct cj_rtxn *t) {
    int rc = flush(j, t);
    cj_redis *r = j->redis;
    if (rc && t->dn && on_journal_thread(j)) {
        size_t k = 0;
        for (size_t i = 0; i < t->dn; i++)
            if (t->dv[i].seq != R_DONE) t->dv[k++] = t->dv[i];
        free(r->backlog); /* (taken by r_begin: none is left here) */
        r->backlog = t->dv;
        r->nbacklog = k;
        r->capbacklog = t->dcap;
        t->dv = NULL;
    }
    txn_free(t);
    return rc;
}

/* Without transactions nothing is undone: what the turn did is written either way (now, or by a
 * later turn of the journal thread when Redis is away now). */
static void r_abort(cr_journal *j, cj_txn *txn) {
    struct cj_rtxn *t = (struct cj_rtxn *)txn;
    if (!t) return;
    (void)end_turn(j, t);
}

static int r_commit(cr_journal *j, cj_txn *txn) { return end_turn(j, (struct cj_rtxn *)txn); }

static int defer_write(struct cj_rtxn *t, uint64_t seq, int remove, const void *data, size_t len) {
    if (seq) {
        for (size_t i = 0; i < t->dn; i++) {
            if (t->dv[i].seq == seq) {
                if (t->dv[i].remove) return 0; /* removed in this turn: stays removed */
                t->dv[i].remove = remove;
                memcpy(t->dv[i].data, data, len);
                t->dv[i].len = len;
                return 0;
            }
        }
    }
    if (t->dn == t->dcap) {
        size_t cap = t->dcap ? t->dcap * 2 : 32;
        rdeferred *p = realloc(t->dv, cap * sizeof *p);
        if (!p) return ENOMEM;
        t->dv = p;
        t->dcap = cap;
    }
    rdeferred *d = &t->dv[t->dn++];
    d->seq = seq;
    d->remove = remove;
    d->len = len;
    memcpy(d->data, data, len);
    return 0;
}


/* Redis failing is never the journal's corruption: the next turn tries again. */
static bool r_broken(int rc) {
    (void)rc;
    return false;
}

static const char *r_strerror(cr_journal *j, int rc) {
    if (rc == CJ_E_REDIS && j->redis) {
        static _Thread_local char text[sizeof ((courier_error *)0)->message];
        pthread_mutex_lock(&j->redis->mu);
        snprintf(text, sizeof text, "%s", j->redis->last.message);
        pthread_mutex_unlock(&j->redis->mu);
        return text;
    }
    if (rc == ENOMEM) return "no memory";
    if (rc == MDB_CORRUPTED) return "a record does not decode";
    return mdb_strerror(rc);
}

static int r_fail(cr_journal *j, courier_error *err, int rc, const char *what) {
    if (rc == ENOMEM) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    if (rc == MDB_CORRUPTED) return cr_fail(err, COURIER_E_JOURNAL_CORRUPT, "%s: a record on Redis does not decode", what);
    if (rc != CJ_E_REDIS || !j->redis) return cr_fail(err, COURIER_E_REDIS, "%s", what);
    pthread_mutex_lock(&j->redis->mu);
    courier_error last = j->redis->last;
    pthread_mutex_unlock(&j->redis->mu);
    int code = cr_fail(err, last.code ? last.code : COURIER_E_REDIS, "%s: %s", what, last.message);
    if (err) err->os_error = last.os_error;
    return code;
}

/* The state of seq and (text) its request text: as read ahead in this turn, else in one round trip. */
static int r_rec_get(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, const char **text, size_t *len) {
    struct cj_rtxn *t = (struct cj_rtxn *)txn;
    rcached *ahead = cjr_cached(t, seq);
    if (ahead && ahead->state && (!text || ahead->text_read)) {
        int kept = deferred_state(t, seq, st);
        if (ahead->state->type != REDIS_REPLY_STRING || kept < 0) return MDB_NOTFOUND;
        if (!kept && !cj_state_decode(ahead->state->str, ahead->state->len, st)) return MDB_CORRUPTED;
        if (text && !ahead->text) return MDB_NOTFOUND;
        if (text) {
            *text = ahead->text; /* (kept by t until it ends) */
            *len = ahead->tlen;
        }
        return 0;
    }
    char num[24], sid[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)seq);
    snprintf(sid, sizeof sid, "0-%llu", (unsigned long long)seq);
    rargs a = {0}, b = {0};
    args(&a, "HGET");
    argk(&a, j, K_STATE);
    args(&a, num);
    args(&b, "XRANGE");
    argk(&b, j, K_STREAM);
    args(&b, sid);
    args(&b, sid);
    cr_redis_cmd c[2] = {cmd_of(&a), cmd_of(&b)};
    redisReply *rep[2];
    int rc = cjr_run(j, c, text ? 2 : 1, rep, false);
    if (rc) return rc;
    int kept = deferred_state(t, seq, st);
    if (rep[0]->type != REDIS_REPLY_STRING || kept < 0) rc = MDB_NOTFOUND;
    else if (!kept && !cj_state_decode(rep[0]->str, rep[0]->len, st)) rc = MDB_CORRUPTED;
    if (rc == 0 && text) {
        rc = cjr_entry_text(rep[1], text, len) ? 0 : MDB_NOTFOUND;
        if (rc == 0) {
            if (t->held) freeReplyObject(t->held);
            t->held = rep[1];
            rep[1] = NULL;
        }
    }
    cr_redis_replies_free(rep, text ? 2 : 1);
    return rc;
}

/* The states of a turn's answers' records, one HMGET (cjr_read_states); a failure leaves them to
 * rec_get. Only in the journal thread's turns (whose transactions read them next). */
static void r_read_ahead(cr_journal *j, cj_txn *txn, const uint64_t *seqs, size_t n) {
    (void)cjr_read_states(j, (struct cj_rtxn *)txn, seqs, n);
}

static int r_st_update(cr_journal *j, cj_txn *txn, uint64_t seq, const jstate *old, const jstate *st) {
    (void)j, (void)old;
    uint8_t b[J_STATE_FIXED + 4 + J_HOST_MAX + COURIER_FROZEN_ID_MAX];
    size_t bl = cj_state_encode(st, b);
    return defer_write((struct cj_rtxn *)txn, seq, 0, b, bl); /* a record removed meanwhile stays removed */
}

static int r_remove_seq(cr_journal *j, uint64_t seq) {
    char num[24];
    const char *x[2] = {num, j->redis->consumer};
    size_t xl[2] = {(size_t)snprintf(num, sizeof num, "%llu", (unsigned long long)seq), strlen(j->redis->consumer)};
    return cjr_eval(j, "remove", x, xl, 2, NULL);
}

static int r_rec_remove(cr_journal *j, cj_txn *txn, uint64_t seq, const jstate *st) {
    (void)j, (void)st;
    return defer_write((struct cj_rtxn *)txn, seq, 1, "", 0); /* written at the commit, with the turn's other writes */
}

static int r_rec_remove_bad(cr_journal *j, cj_txn *txn, uint64_t seq) {
    (void)txn;
    return r_remove_seq(j, seq);
}

static int r_outcome_log(cr_journal *j, cj_txn *txn, const jstate *st, int code, int status, int64_t now) {
    (void)j;
    char text[COURIER_FROZEN_ID_MAX + 160];
    int len = cj_outcome_text(st, code, status, now, text, sizeof text);
    return defer_write((struct cj_rtxn *)txn, 0, 0, text, (size_t)len);
}

static int r_find_seq(cr_journal *j, cj_txn *txn, const char *id, uint64_t *seq) {
    rargs a = {0};
    args(&a, "HGET");
    argk(&a, j, K_IDS);
    args(&a, id);
    cr_redis_cmd c = cmd_of(&a);
    redisReply *rep;
    int rc = cjr_run(j, &c, 1, &rep, false);
    if (rc) return rc;
    bool found = rep->type == REDIS_REPLY_STRING;
    if (found) *seq = strtoull(rep->str, NULL, 10);
    freeReplyObject(rep);
    if (found) return 0;
    size_t n = strlen(id);
    if (!cj_generated_id(id, n)) return MDB_NOTFOUND;
    uint64_t s = cj_generated_seq(id);
    jstate st;
    rc = r_rec_get(j, txn, s, &st, NULL, NULL);
    if (rc == 0 && st.id_len == n && memcmp(st.id, id, n) == 0) {
        *seq = s;
        return 0;
    }
    return rc == 0 || rc == MDB_CORRUPTED ? MDB_NOTFOUND : rc;
}

/* A freeze: a record number (INCR), then the script (XADD 0-<seq> with its side records and the
 * replacement of an older record of the same id). Another engine may have added a later number
 * between the two: a new number, then. */
static int r_freeze(cr_journal *j, cj_txn *txn, jfreeze *f) {
    (void)txn;
    if (f->tried) {
        /* A write of this freeze was sent and its answer lost (a restart, a broken connection):
         * if it landed, it is this freeze, written (not a second record of it). */
        char sid[32];
        snprintf(sid, sizeof sid, "0-%llu", (unsigned long long)f->tried);
        rargs a = {0};
        args(&a, "XRANGE");
        argk(&a, j, K_STREAM);
        args(&a, sid);
        args(&a, sid);
        cr_redis_cmd c = cmd_of(&a);
        redisReply *rep;
        int rc = cjr_run(j, &c, 1, &rep, false);
        if (rc) return rc;
        bool landed = rep->type == REDIS_REPLY_ARRAY && rep->elements == 1;
        freeReplyObject(rep);
        if (landed) {
            f->seq = f->tried;
            return 0;
        }
        f->tried = 0;
    }
    for (int attempt = 0; attempt < 16; attempt++) {
        rargs a = {0};
        args(&a, "INCR");
        argk(&a, j, K_SEQ);
        cr_redis_cmd c = cmd_of(&a);
        redisReply *rep;
        int rc = cjr_run(j, &c, 1, &rep, false);
        if (rc) return rc;
        uint64_t seq = rep->type == REDIS_REPLY_INTEGER && rep->integer > 0 ? (uint64_t)rep->integer : 0;
        freeReplyObject(rep);
        if (!seq) return MDB_CORRUPTED;
        char *text;
        if ((rc = cj_freeze_text(f, seq, &text))) return rc;
        uint8_t b[J_STATE_FIXED + 4 + J_HOST_MAX + COURIER_FROZEN_ID_MAX];
        size_t bl = cj_state_encode(&f->st, b);
        char num[24], qm[J_HOST_MAX + 24];
        size_t ql = 0;
        if (is_ordered_auto(&f->st)) {
            memcpy(qm, f->st.host, f->st.host_len);
            qm[f->st.host_len] = '\0';
            ql = f->st.host_len + 1u + (size_t)snprintf(qm + f->st.host_len + 1, 21, "%020llu", (unsigned long long)seq);
        }
        const char *x[6] = {num, (const char *)b, text, f->generated ? "" : f->st.id, qm, j->redis->consumer};
        size_t xl[6] = {(size_t)snprintf(num, sizeof num, "%llu", (unsigned long long)seq), bl, strlen(text),
                        f->generated ? 0 : f->st.id_len, ql, strlen(j->redis->consumer)};
        long long done = 0, acked = 0;
        f->tried = seq;
        const courier_config *cfg = cr_core(j->e)->config;
        rc = cjr_eval_wait(j, "freeze", x, xl, 6, &done, cfg->frozen.replicas, cfg->frozen.replicas_timeout_ms, &acked);
        free(text);
        if (rc) return rc;
        f->tried = 0;
        if (done) {
            f->seq = seq;
            if (cfg->frozen.replicas > 0 && acked < cfg->frozen.replicas) {
                f->unconfirmed = 1; /* written, not acknowledged: COURIER_E_REPLICAS_UNCONFIRMED */
                f->replicas_acked = acked;
            }
            return 0;
        }
    }
    courier_error e;
    cr_fail(&e, COURIER_E_REDIS, "the journal's record numbers keep being taken by other engines");
    return cjr_remember(j, &e);
}

/* A turn's freezes in two round trips: INCRBY for their numbers, then their scripts in one
 * pipeline (so Redis syncs its append-only file once for all of them, as one LMDB commit). A
 * freeze whose number another engine overtook (the script says 0), or that the pipeline left
 * unanswered, is written alone by r_freeze. */
static int r_freeze_batch(cr_journal *j, cj_txn *txn, jfreeze *list) {
    (void)txn;
    size_t n = 0;
    for (jfreeze *f = list; f; f = f->next) n += !f->seq && !f->tried;
    if (n < 2) return 0;
    char sha[41];
    pthread_mutex_lock(&j->redis->mu);
    memcpy(sha, j->redis->script_sha, sizeof sha);
    pthread_mutex_unlock(&j->redis->mu);
    if (!sha[0]) return 0; /* the first single freeze loads the script */
    rargs a = {0};
    args(&a, "INCRBY");
    argk(&a, j, K_SEQ);
    argn(&a, (int64_t)n);
    cr_redis_cmd c = cmd_of(&a);
    redisReply *rep;
    int rc = cjr_run(j, &c, 1, &rep, false);
    if (rc) return rc;
    uint64_t last = rep->type == REDIS_REPLY_INTEGER && rep->integer > 0 ? (uint64_t)rep->integer : 0;
    freeReplyObject(rep);
    if (last < n) return MDB_CORRUPTED;
    enum { ARGS = 18 };
    const courier_config *cfg = cr_core(j->e)->config;
    int wait_n = cfg->frozen.replicas;
    char wn[16], wt[24];
    const char *wv[3] = {"WAIT", wn, wt};
    size_t wl[3] = {4, (size_t)snprintf(wn, sizeof wn, "%d", wait_n),
                    (size_t)snprintf(wt, sizeof wt, "%lld", (long long)cfg->frozen.replicas_timeout_ms)};
    cr_redis_cmd *cmds = calloc(n + 1, sizeof *cmds);
    const char **argv = calloc(n * ARGS, sizeof *argv);
    size_t *argl = calloc(n * ARGS, sizeof *argl);
    char **texts = calloc(n, sizeof *texts);
    uint8_t (*states)[J_STATE_FIXED + 4 + J_HOST_MAX + COURIER_FROZEN_ID_MAX] = calloc(n, sizeof *states);
    char (*nums)[24] = calloc(n, sizeof *nums);
    char (*qms)[J_HOST_MAX + 24] = calloc(n, sizeof *qms);
    jfreeze **fs = calloc(n, sizeof *fs);
    redisReply **reps = calloc(n + 1, sizeof *reps);
    if (!cmds || !argv || !argl || !texts || !states || !nums || !qms || !fs || !reps) rc = ENOMEM;
    size_t k = 0;
    for (jfreeze *f = list; rc == 0 && f; f = f->next) {
        if (f->seq || f->tried) continue;
        uint64_t seq = last - n + 1 + k;
        if ((rc = cj_freeze_text(f, seq, &texts[k]))) break;
        size_t bl = cj_state_encode(&f->st, states[k]);
        size_t ql = 0;
        if (is_ordered_auto(&f->st)) {
            memcpy(qms[k], f->st.host, f->st.host_len);
            qms[k][f->st.host_len] = '\0';
            ql = f->st.host_len + 1u + (size_t)snprintf(qms[k] + f->st.host_len + 1, 21, "%020llu", (unsigned long long)seq);
        }
        const char **v = argv + k * ARGS;
        size_t *l = argl + k * ARGS;
        int m = 0;
        v[m++] = "EVALSHA";
        v[m++] = sha;
        v[m++] = "7";
        for (int q = 0; q < R_KEYS - 1; q++) v[m++] = j->redis->keys[q];
        v[m++] = R_GROUP;
        v[m++] = "freeze";
        snprintf(nums[k], sizeof nums[k], "%llu", (unsigned long long)seq);
        v[m++] = nums[k];
        for (int q = 0; q < m; q++) l[q] = strlen(v[q]);
        v[m] = (const char *)states[k];
        l[m++] = bl;
        v[m] = texts[k];
        l[m++] = strlen(texts[k]);
        v[m] = f->generated ? "" : f->st.id;
        l[m++] = f->generated ? 0 : f->st.id_len;
        v[m] = qms[k];
        l[m++] = ql;
        v[m] = j->redis->consumer; /* (a replaced record's handoff: the script's ARGV[8]) */
        l[m++] = strlen(j->redis->consumer);
        cmds[k] = (cr_redis_cmd){m, v, l};
        fs[k] = f;
        f->tried = seq;
        k++;
    }
    if (rc == 0 && k) {
        /* WAIT after the scripts, on their connection: it counts the writes before it */
        if (wait_n > 0) cmds[k] = (cr_redis_cmd){3, wv, wl};
        size_t sent = k + (wait_n > 0);
        rc = cjr_run(j, cmds, sent, reps, true);
        long long acked = rc == 0 && wait_n > 0 ? (reps[k]->type == REDIS_REPLY_INTEGER ? reps[k]->integer : -1) : 0;
        for (size_t i = 0; rc == 0 && i < k; i++) {
            if (reps[i]->type == REDIS_REPLY_INTEGER && reps[i]->integer > 0) {
                fs[i]->seq = fs[i]->tried;
                fs[i]->tried = 0;
                if (wait_n > 0 && acked < wait_n) {
                    fs[i]->unconfirmed = 1; /* written, not acknowledged: COURIER_E_REPLICAS_UNCONFIRMED */
                    fs[i]->replicas_acked = acked;
                }
            } else {
                fs[i]->tried = 0; /* not written (overtaken, NOSCRIPT): written alone */
                if (reps[i]->type == REDIS_REPLY_ERROR && strncmp(reps[i]->str, "NOSCRIPT", 8) == 0) {
                    pthread_mutex_lock(&j->redis->mu);
                    j->redis->script_sha[0] = '\0';
                    pthread_mutex_unlock(&j->redis->mu);
                }
            }
        }
        if (rc == 0) cr_redis_replies_free(reps, sent);
    }
    for (size_t i = 0; texts && i < k; i++) free(texts[i]);
    free(cmds);
    free(argv);
    free(argl);
    free(texts);
    free(states);
    free(nums);
    free(qms);
    free(fs);
    free(reps);
    return rc;
}

/* An explicit resend: the entry becomes this engine's whoever held it. */
static int r_take(cr_journal *j, cj_txn *txn, uint64_t seq) {
    (void)txn;
    int rc = cjr_adopt_new(j);
    if (rc) return rc;
    char sid[32];
    snprintf(sid, sizeof sid, "0-%llu", (unsigned long long)seq);
    rargs a = {0};
    args(&a, "XCLAIM");
    argk(&a, j, K_STREAM);
    args(&a, R_GROUP);
    args(&a, j->redis->consumer);
    args(&a, "0");
    args(&a, sid);
    args(&a, "JUSTID");
    cr_redis_cmd c = cmd_of(&a);
    redisReply *rep;
    if ((rc = cjr_run(j, &c, 1, &rep, false))) return rc;
    bool got = rep->type == REDIS_REPLY_ARRAY && rep->elements == 1;
    freeReplyObject(rep);
    return got ? 0 : MDB_NOTFOUND;
}

/* Every record, oldest first: the stream in pages, with the states of each page. */
static int r_each(cr_journal *j, cj_txn *txn, int (*fn)(void *, uint64_t, const jstate *, const char *, size_t),
                  void *user) {
    (void)txn;
    char from[48] = "-";
    for (;;) {
        rargs a = {0};
        args(&a, "XRANGE");
        argk(&a, j, K_STREAM);
        args(&a, from);
        args(&a, "+");
        args(&a, "COUNT");
        argn(&a, 500);
        cr_redis_cmd c = cmd_of(&a);
        redisReply *page;
        int rc = cjr_run(j, &c, 1, &page, false);
        if (rc) return rc;
        size_t n = page->type == REDIS_REPLY_ARRAY ? page->elements : 0;
        if (!n) {
            freeReplyObject(page);
            return 0;
        }
        /* HMGET state seq... */
        const char **v = calloc(n + 2, sizeof *v);
        size_t *len = calloc(n + 2, sizeof *len);
        char (*nums)[24] = calloc(n, sizeof *nums);
        redisReply *states = NULL;
        if (!v || !len || !nums) rc = ENOMEM;
        if (rc == 0) {
            v[0] = "HMGET";
            v[1] = j->redis->keys[K_STATE];
            for (size_t i = 0; i < n; i++) {
                redisReply *e = page->element[i];
                uint64_t s = e->type == REDIS_REPLY_ARRAY && e->elements == 2 ? seq_of_id(e->element[0]->str) : 0;
                snprintf(nums[i], sizeof nums[i], "%llu", (unsigned long long)s);
                v[i + 2] = nums[i];
            }
            for (size_t i = 0; i < n + 2; i++) len[i] = strlen(v[i]);
            cr_redis_cmd hc = {(int)n + 2, v, len};
            rc = cjr_run(j, &hc, 1, &states, false);
        }
        for (size_t i = 0; rc == 0 && i < n; i++) {
            redisReply *e = page->element[i], *f = e->type == REDIS_REPLY_ARRAY && e->elements == 2 ? e->element[1] : NULL;
            uint64_t s = strtoull(nums[i], NULL, 10);
            snprintf(from, sizeof from, "(%s", e->type == REDIS_REPLY_ARRAY && e->elements ? e->element[0]->str : "0-0");
            const char *text = "";
            size_t tl = 0;
            for (size_t k = 0; f && f->type == REDIS_REPLY_ARRAY && k + 1 < f->elements; k += 2)
                if (strcmp(f->element[k]->str, "req") == 0) {
                    text = f->element[k + 1]->str;
                    tl = f->element[k + 1]->len;
                }
            redisReply *sv = states->type == REDIS_REPLY_ARRAY && i < states->elements ? states->element[i] : NULL;
            if (!s || !sv || sv->type != REDIS_REPLY_STRING) continue; /* removed between the two reads */
            jstate st;
            bool ok = cj_state_decode(sv->str, sv->len, &st) != 0;
            rc = fn(user, s, ok ? &st : NULL, text, tl);
        }
        if (states) freeReplyObject(states);
        free(v);
        free(len);
        free(nums);
        freeReplyObject(page);
        if (rc || n < 500) return rc;
    }
}

static int r_count(cr_journal *j, cj_txn *txn, int64_t *n) {
    (void)txn;
    rargs a = {0};
    args(&a, "HLEN");
    argk(&a, j, K_STATE);
    cr_redis_cmd c = cmd_of(&a);
    redisReply *rep;
    int rc = cjr_run(j, &c, 1, &rep, false);
    if (rc) return rc;
    *n = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
    freeReplyObject(rep);
    return 0;
}

static int r_remove_all(cr_journal *j, cj_txn *txn, int64_t *n) {
    (void)txn;
    long long got = 0;
    int rc = cjr_eval(j, "clear", NULL, NULL, 0, &got);
    *n = got;
    return rc;
}

static int r_last_outcome(cr_journal *j, cj_txn *txn, const char *id, int *code, int *status, int64_t *at_ms) {
    (void)txn;
    rargs a = {0};
    args(&a, "LRANGE");
    argk(&a, j, K_OUTCOMES);
    args(&a, "0");
    args(&a, "-1");
    cr_redis_cmd c = cmd_of(&a);
    redisReply *rep;
    int rc = cjr_run(j, &c, 1, &rep, false);
    if (rc) return rc;
    bool found = false;
    for (size_t i = 0; !found && rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++)
        if (rep->element[i]->type == REDIS_REPLY_STRING)
            found = cj_outcome_match(rep->element[i]->str, rep->element[i]->len, id, code, status, at_ms);
    freeReplyObject(rep);
    return found ? 0 : MDB_NOTFOUND;
}

/* hostq's members are "host\0<seq, 20 digits>": the ones after seq sort after "host\0<seq + 1>". */
static int r_host_waiting(cr_journal *j, cj_txn *txn, const char *host, size_t hl, uint64_t seq, int64_t *n) {
    (void)txn;
    *n = 0;
    if (hl > J_HOST_MAX) return 0;
    char lo[J_HOST_MAX + 24], hi[J_HOST_MAX + 3];
    lo[0] = '[';
    memcpy(lo + 1, host, hl);
    lo[hl + 1] = '\0';
    int digits = snprintf(lo + hl + 2, sizeof lo - hl - 2, "%020llu", (unsigned long long)(seq + 1));
    hi[0] = '(';
    memcpy(hi + 1, host, hl);
    hi[hl + 1] = '\1';
    rargs a = {0};
    args(&a, "ZLEXCOUNT");
    argk(&a, j, K_HOSTQ);
    arg(&a, lo, hl + 2 + (size_t)digits);
    arg(&a, hi, hl + 2);
    cr_redis_cmd c = cmd_of(&a);
    redisReply *rep;
    int rc = cjr_run(j, &c, 1, &rep, false);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_INTEGER) *n = rep->integer < CJ_WAITING_MAX ? rep->integer : CJ_WAITING_MAX;
    freeReplyObject(rep);
    return 0;
}

const cj_store_ops cj_redis_store = {
    .kind = "redis",
    .atomic = false,
    .open = r_open,
    .close = r_close,
    .begin = r_begin,
    .commit = r_commit,
    .abort = r_abort,
    .broken = r_broken,
    .strerror = r_strerror,
    .fail = r_fail,
    .rec_get = r_rec_get,
    .st_update = r_st_update,
    .read_ahead = r_read_ahead,
    .rec_remove = r_rec_remove,
    .rec_remove_bad = r_rec_remove_bad,
    .outcome_log = r_outcome_log,
    .find_seq = r_find_seq,
    .freeze = r_freeze,
    .freeze_batch = r_freeze_batch,
    .take = r_take,
    .pass = cjr_pass,
    .due_edges = cjr_due_edges,
    .peek = cjr_peek,
    .each = r_each,
    .count = r_count,
    .remove_all = r_remove_all,
    .last_outcome = r_last_outcome,
    .host_waiting = r_host_waiting,
};

#endif /* COURIER_REDIS */
