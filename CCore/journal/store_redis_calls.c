/*
 * store_redis_calls.c — the journal's Redis store, its calls: commands run in one pipeline
 * (cjr_run), the one Lua script for the writes that must be atomic (cjr_eval), the consumer group
 * on the stream, this engine's pending entries, and the last error kept for the API
 * (cjr_remember). The bottom of the Redis store: store_redis.c (the store's operations) and
 * store_redis_replay.c (its replay claims) both call here; store_redis.c has the layout.
 *
 * Threads: the journal thread and the API's callers; the floor (base/redis.c) pools connections.
 */
#include "journal/store_redis.h"

#ifdef COURIER_REDIS

/* One script for every write that must be atomic (a freeze with the replacement of its id, a
 * removal with its side records, a state rewrite of a record that may be gone). KEYS: the eight
 * keys above; ARGV[1] the group, ARGV[2] the operation; the caller's consumer name last for
 * "remove" (ARGV[4]) and "freeze" (ARGV[8]), "" or absent for none.
 * The handoff: a removal of the head of a host's ordered queue whose next record is pending on
 * another consumer PUBLISHes to that consumer's channel (<tag>:wake:<consumer>, cjr_wake_channel),
 * since only the holder of a head sends it and nothing else would tell it before its next poll
 * (store_redis_wake.c listens). Only ordered removals look (ZRANGEBYLEX of one member and XPENDING
 * of one id, inside the script: no round trip); a removal whose next head is the caller's own, or
 * not pending anywhere yet, publishes nothing. A PUBLISH refused (an ACL user without channel
 * permissions: Redis 7's default for new users) never fails the removal: the poll finds it then. */
static const char script[] =
    "local S,ST,IDS,GID,Q,QM,O=KEYS[1],KEYS[2],KEYS[3],KEYS[4],KEYS[5],KEYS[6],KEYS[7]\n"
    "local G,op=ARGV[1],ARGV[2]\n"
    "local me=(op=='remove' and ARGV[4]) or (op=='freeze' and ARGV[8]) or ''\n"
    "local function handoff(qm)\n"
    "  local h=string.sub(qm,1,#qm-20)\n" /* "host\0" */
    "  local nx=redis.call('ZRANGEBYLEX',Q,'['..h,'('..string.sub(h,1,-2)..'\\1','LIMIT',0,1)\n"
    "  if #nx==0 or string.sub(nx[1],-20)<string.sub(qm,-20) then return end\n" /* not the head that went */
    "  local sid='0-'..string.sub(nx[1],-20)\n" /* (Redis reads the zero-padded number as the id) */
    "  local p=redis.pcall('XPENDING',S,G,sid,sid,1)\n"
    "  if type(p)=='table' and #p==1 and p[1][2]~=me then\n"
    "    redis.pcall('PUBLISH',string.sub(S,1,#S-6)..'wake:'..p[1][2],'1')\n"
    "  end\n"
    "end\n"
    "local function remove(seq)\n"
    "  local sid='0-'..seq\n"
    "  redis.call('XACK',S,G,sid)\n"
    "  local n=redis.call('XDEL',S,sid)\n"
    "  local qm=redis.call('HGET',QM,seq)\n"
    "  if qm then redis.call('ZREM',Q,qm); redis.call('HDEL',QM,seq); handoff(qm) end\n"
    "  local gid=redis.call('HGET',GID,seq)\n"
    "  if gid then\n"
    "    if redis.call('HGET',IDS,gid)==seq then redis.call('HDEL',IDS,gid) end\n"
    "    redis.call('HDEL',GID,seq)\n"
    "  end\n"
    "  return redis.call('HDEL',ST,seq)+n\n"
    "end\n"
    "if op=='freeze' then\n"
    "  local seq,state,text,gid,qm=ARGV[3],ARGV[4],ARGV[5],ARGV[6],ARGV[7]\n"
    "  local r=redis.pcall('XADD',S,'0-'..seq,'req',text)\n"
    "  if type(r)=='table' and r.err then\n"
    "    if #redis.call('XRANGE',S,'0-'..seq,'0-'..seq)>0 then return 2 end\n" /* sent again after a reconnect */
    "    return 0\n" /* another engine wrote a later number first: take a new one */
    "  end\n"
    "  if gid~='' then\n"
    "    local old=redis.call('HGET',IDS,gid)\n"
    "    if old then remove(old) end\n"
    "    redis.call('HSET',IDS,gid,seq); redis.call('HSET',GID,seq,gid)\n"
    "  end\n"
    "  redis.call('HSET',ST,seq,state)\n"
    "  if qm~='' then redis.call('ZADD',Q,0,qm); redis.call('HSET',QM,seq,qm) end\n"
    "  return 1\n"
    "elseif op=='remove' then\n"
    "  return remove(ARGV[3])\n"
    "elseif op=='update' then\n"
    "  if redis.call('HEXISTS',ST,ARGV[3])==0 then return 0 end\n"
    "  redis.call('HSET',ST,ARGV[3],ARGV[4]); return 1\n"
    "elseif op=='clear' then\n"
    "  local n=redis.call('HLEN',ST)\n"
    "  redis.call('DEL',S,ST,IDS,GID,Q,QM)\n"
    "  redis.call('XGROUP','CREATE',S,G,'0','MKSTREAM')\n"
    "  return n\n"
    "end\n"
    "return redis.error_reply('unknown operation')\n";

/* ---- calls ---- */

int cjr_remember(cr_journal *j, const courier_error *e) {
    pthread_mutex_lock(&j->redis->mu);
    j->redis->last = *e;
    pthread_mutex_unlock(&j->redis->mu);
    return CJ_E_REDIS;
}

/* Runs n commands in one pipeline; replies new (cr_redis_replies_free). An error reply of a
 * command fails the call unless `errors_ok`. 0 or CJ_E_REDIS (remembered). */
int cjr_run(cr_journal *j, const cr_redis_cmd *cmds, size_t n, redisReply **replies, bool errors_ok) {
    courier_error e;
    cr_error_clear(&e);
    int rc = cr_redis_run(j->redis->db, cmds, n, replies, 0, &e);
    for (size_t i = 0; rc == COURIER_OK && !errors_ok && i < n; i++) rc = cr_redis_reply_check(replies[i], cmds[i].argv[0], &e);
    if (rc) {
        cr_redis_replies_free(replies, n);
        return cjr_remember(j, &e);
    }
    return 0;
}


/* EVALSHA of the script (loaded again after a restart or a SCRIPT FLUSH: NOSCRIPT). ARGV after
 * the group and the operation: extra[0..nextra). Integer reply in *out. */
int cjr_eval(cr_journal *j, const char *op, const char *const *extra, const size_t *extralen, int nextra,
                long long *out) {
    return cjr_eval_wait(j, op, extra, extralen, nextra, out, 0, 0, NULL);
}

int cjr_eval_wait(cr_journal *j, const char *op, const char *const *extra, const size_t *extralen, int nextra,
                  long long *out, int wait_n, int64_t wait_ms, long long *acked) {
    cj_redis *r = j->redis;
    for (int attempt = 0; attempt < 2; attempt++) {
        rargs a = {0};
        char sha[41];
        pthread_mutex_lock(&r->mu);
        memcpy(sha, r->script_sha, sizeof sha);
        pthread_mutex_unlock(&r->mu);
        bool load = !sha[0];
        if (load) {
            args(&a, "SCRIPT");
            args(&a, "LOAD");
            arg(&a, script, sizeof script - 1);
            cr_redis_cmd c = cmd_of(&a);
            redisReply *rep;
            int rc = cjr_run(j, &c, 1, &rep, false);
            if (rc) return rc;
            pthread_mutex_lock(&r->mu);
            snprintf(r->script_sha, sizeof r->script_sha, "%s", rep->type == REDIS_REPLY_STRING ? rep->str : "");
            memcpy(sha, r->script_sha, sizeof sha);
            pthread_mutex_unlock(&r->mu);
            freeReplyObject(rep);
            a = (rargs){0};
        }
        args(&a, "EVALSHA");
        args(&a, sha);
        argn(&a, R_KEYS - 1);
        for (int k = 0; k < R_KEYS - 1; k++) argk(&a, j, k);
        args(&a, R_GROUP);
        args(&a, op);
        for (int i = 0; i < nextra; i++) arg(&a, extra[i], extralen[i]);
        cr_redis_cmd c[2] = {cmd_of(&a)};
        /* WAIT on the same connection, in the same pipeline: it counts this connection's writes */
        char wn[16], wt[24];
        const char *wv[3] = {"WAIT", wn, wt};
        size_t wl[3] = {4, (size_t)snprintf(wn, sizeof wn, "%d", wait_n),
                        (size_t)snprintf(wt, sizeof wt, "%lld", (long long)wait_ms)};
        c[1] = (cr_redis_cmd){3, wv, wl};
        redisReply *reps[2] = {NULL, NULL}, *rep;
        int rc = cjr_run(j, c, wait_n > 0 ? 2 : 1, reps, true);
        if (rc) return rc;
        rep = reps[0];
        if (wait_n > 0) {
            if (acked) *acked = reps[1]->type == REDIS_REPLY_INTEGER ? reps[1]->integer : -1;
            freeReplyObject(reps[1]);
        }
        if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0 && attempt == 0) {
            freeReplyObject(rep);
            pthread_mutex_lock(&r->mu);
            r->script_sha[0] = '\0';
            pthread_mutex_unlock(&r->mu);
            continue;
        }
        courier_error e;
        rc = cr_redis_reply_check(rep, "the journal's script", &e);
        if (rc == COURIER_OK && out) *out = rep->type == REDIS_REPLY_INTEGER ? rep->integer : 0;
        freeReplyObject(rep);
        return rc ? cjr_remember(j, &e) : 0;
    }
    return 0;
}

/* The script's sha in sha[41], loaded first (SCRIPT LOAD) when it is not: 0 or CJ_E_REDIS. */
int cjr_script_sha_now(cr_journal *j, char sha[41]) {
    pthread_mutex_lock(&j->redis->mu);
    memcpy(sha, j->redis->script_sha, 41);
    pthread_mutex_unlock(&j->redis->mu);
    if (sha[0]) return 0;
    rargs a = {0};
    args(&a, "SCRIPT");
    args(&a, "LOAD");
    arg(&a, script, sizeof script - 1);
    cr_redis_cmd c = cmd_of(&a);
    redisReply *rep;
    int rc = cjr_run(j, &c, 1, &rep, false);
    if (rc) return rc;
    pthread_mutex_lock(&j->redis->mu);
    snprintf(j->redis->script_sha, sizeof j->redis->script_sha, "%s", rep->type == REDIS_REPLY_STRING ? rep->str : "");
    memcpy(sha, j->redis->script_sha, 41);
    pthread_mutex_unlock(&j->redis->mu);
    freeReplyObject(rep);
    if (sha[0]) return 0;
    courier_error e;
    cr_fail(&e, COURIER_E_REDIS, "Redis gave no sha for the journal's script (SCRIPT LOAD)");
    return cjr_remember(j, &e);
}

/* The group on the stream (made with the stream; BUSYGROUP: there already). */
int cjr_ensure_group(cr_journal *j) {
    rargs a = {0};
    args(&a, "XGROUP");
    args(&a, "CREATE");
    argk(&a, j, K_STREAM);
    args(&a, R_GROUP);
    args(&a, "0");
    args(&a, "MKSTREAM");
    cr_redis_cmd c = cmd_of(&a);
    redisReply *rep;
    int rc = cjr_run(j, &c, 1, &rep, true);
    if (rc) return rc;
    courier_error e;
    if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "BUSYGROUP", 9) != 0) {
        cr_redis_reply_check(rep, "XGROUP CREATE", &e);
        rc = cjr_remember(j, &e);
    }
    freeReplyObject(rep);
    return rc;
}

/* My pending entries: ids (new, count *n). */
int cjr_my_pending(cr_journal *j, redisReply **out) {
    rargs a = {0};
    args_xpending(&a, j);
    cr_redis_cmd c = cmd_of(&a);
    int rc = cjr_run(j, &c, 1, out, false);
    if (rc == 0 && (*out)->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(*out);
        *out = NULL;
        return MDB_CORRUPTED;
    }
    return rc;
}

/* ---- reads ahead ---- */

bool cjr_entry_text(const redisReply *x, const char **text, size_t *len) {
    /* [[id, [field, value, ...]]] */
    const redisReply *f = NULL;
    if (x && x->type == REDIS_REPLY_ARRAY && x->elements == 1 && x->element[0]->type == REDIS_REPLY_ARRAY &&
        x->element[0]->elements == 2)
        f = x->element[0]->element[1];
    for (size_t i = 0; f && f->type == REDIS_REPLY_ARRAY && i + 1 < f->elements; i += 2) {
        if (f->element[i]->type == REDIS_REPLY_STRING && strcmp(f->element[i]->str, "req") == 0 &&
            f->element[i + 1]->type == REDIS_REPLY_STRING) {
            *text = f->element[i + 1]->str;
            *len = f->element[i + 1]->len;
            return true;
        }
    }
    return false;
}

/* The records read ahead are found by a hash of their number (open addressing, linear probing:
 * t->tab holds an entry's index + 1, 0 for free; t->tcap a power of two, at least twice t->cn). */
static size_t slot_of(uint64_t seq, size_t tcap) { return (size_t)((seq * 0x9E3779B97F4A7C15ull) >> 17) & (tcap - 1); }

rcached *cjr_cached(struct cj_rtxn *t, uint64_t seq) {
    if (!t || !t->tcap) return NULL;
    for (size_t h = slot_of(seq, t->tcap);; h = (h + 1) & (t->tcap - 1)) {
        if (!t->tab[h]) return NULL;
        if (t->cv[t->tab[h] - 1].seq == seq) return &t->cv[t->tab[h] - 1];
    }
}

/* The entry of seq, added when new (NULL: no memory). */
static rcached *cache_slot(struct cj_rtxn *t, uint64_t seq) {
    rcached *c = cjr_cached(t, seq);
    if (c) return c;
    if (t->cn == t->ccap) {
        size_t cap = t->ccap ? t->ccap * 2 : 64;
        rcached *p = realloc(t->cv, cap * sizeof *p);
        if (!p) return NULL;
        t->cv = p;
        t->ccap = cap;
    }
    if (2 * (t->cn + 1) > t->tcap) { /* the table grown, every entry placed again */
        size_t tcap = t->tcap ? t->tcap * 2 : 128;
        size_t *tab = calloc(tcap, sizeof *tab);
        if (!tab) return NULL;
        for (size_t i = 0; i < t->cn; i++) {
            size_t h = slot_of(t->cv[i].seq, tcap);
            while (tab[h]) h = (h + 1) & (tcap - 1);
            tab[h] = i + 1;
        }
        free(t->tab);
        t->tab = tab;
        t->tcap = tcap;
    }
    size_t h = slot_of(seq, t->tcap);
    while (t->tab[h]) h = (h + 1) & (t->tcap - 1);
    t->tab[h] = t->cn + 1;
    c = &t->cv[t->cn++];
    memset(c, 0, sizeof *c);
    c->seq = seq;
    return c;
}

/* t keeps rep until it ends (false: no memory, rep freed). */
static bool keep(struct cj_rtxn *t, redisReply *rep) {
    if (t->nkept == t->capkept) {
        size_t cap = t->capkept ? t->capkept * 2 : 16;
        redisReply **p = realloc(t->kept, cap * sizeof *p);
        if (!p) {
            freeReplyObject(rep);
            return false;
        }
        t->kept = p;
        t->capkept = cap;
    }
    t->kept[t->nkept++] = rep;
    return true;
}

int cjr_cache_states(struct cj_rtxn *t, const uint64_t *seqs, size_t n, redisReply *states) {
    if (states->type != REDIS_REPLY_ARRAY || states->elements != n) {
        freeReplyObject(states);
        return MDB_CORRUPTED;
    }
    if (!keep(t, states)) return ENOMEM;
    for (size_t i = 0; i < n; i++) {
        rcached *c = cache_slot(t, seqs[i]);
        if (!c) return ENOMEM;
        c->state = states->element[i];
    }
    return 0;
}

int cjr_read_states(cr_journal *j, struct cj_rtxn *t, const uint64_t *seqs, size_t n) {
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i += R_BATCH) {
        size_t m = n - i < R_BATCH ? n - i : R_BATCH;
        const char **v = calloc(m + 2, sizeof *v);
        size_t *l = calloc(m + 2, sizeof *l);
        char (*nums)[24] = calloc(m, sizeof *nums);
        if (!v || !l || !nums) rc = ENOMEM;
        if (rc == 0) {
            v[0] = "HMGET";
            v[1] = j->redis->keys[K_STATE];
            l[0] = 5;
            l[1] = j->redis->keylen[K_STATE];
            for (size_t k = 0; k < m; k++) {
                l[k + 2] = (size_t)snprintf(nums[k], sizeof nums[k], "%llu", (unsigned long long)seqs[i + k]);
                v[k + 2] = nums[k];
            }
            cr_redis_cmd c = {(int)m + 2, v, l};
            redisReply *states;
            if ((rc = cjr_run(j, &c, 1, &states, false)) == 0) rc = cjr_cache_states(t, seqs + i, m, states);
        }
        free(v);
        free(l);
        free(nums);
    }
    return rc;
}

int cjr_read_texts(cr_journal *j, struct cj_rtxn *t, const uint64_t *seqs, size_t n) {
    if (!n) return 0;
    cr_redis_cmd *cmds = calloc(n, sizeof *cmds);
    const char **v = calloc(4 * n, sizeof *v);
    size_t *l = calloc(4 * n, sizeof *l);
    char (*ids)[32] = calloc(n, sizeof *ids);
    redisReply **reps = calloc(n, sizeof *reps);
    int rc = cmds && v && l && ids && reps ? 0 : ENOMEM;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        size_t idl = (size_t)snprintf(ids[i], sizeof ids[i], "0-%llu", (unsigned long long)seqs[i]);
        const char **a = v + 4 * i;
        size_t *al = l + 4 * i;
        a[0] = "XRANGE", al[0] = 6;
        a[1] = j->redis->keys[K_STREAM], al[1] = j->redis->keylen[K_STREAM];
        a[2] = a[3] = ids[i], al[2] = al[3] = idl;
        cmds[i] = (cr_redis_cmd){4, a, al};
    }
    if (rc == 0) rc = cjr_run(j, cmds, n, reps, false); /* (on failure it has freed the replies) */
    for (size_t i = 0; rc == 0 && i < n; i++) {
        redisReply *x = reps[i];
        reps[i] = NULL;
        rcached *c = cache_slot(t, seqs[i]);
        if (!c || !keep(t, x)) {
            if (c) c->text_read = false;
            else freeReplyObject(x);
            continue;
        }
        c->text_read = true;
        c->text = NULL;
        if (!cjr_entry_text(x, &c->text, &c->tlen)) c->text = NULL;
    }
    if (rc == 0) cr_redis_replies_free(reps, n);
    free(cmds);
    free(v);
    free(l);
    free(ids);
    free(reps);
    return rc;
}

void cjr_cache_free(struct cj_rtxn *t) {
    for (size_t i = 0; i < t->nkept; i++) freeReplyObject(t->kept[i]);
    free(t->kept);
    free(t->cv);
    free(t->tab);
    t->kept = NULL;
    t->cv = NULL;
    t->tab = NULL;
    t->nkept = t->capkept = t->cn = t->ccap = t->tcap = 0;
}

#endif /* COURIER_REDIS */
