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
 * keys above; ARGV[1] the group, ARGV[2] the operation. */
static const char script[] =
    "local S,ST,IDS,GID,Q,QM,O=KEYS[1],KEYS[2],KEYS[3],KEYS[4],KEYS[5],KEYS[6],KEYS[7]\n"
    "local G,op=ARGV[1],ARGV[2]\n"
    "local function remove(seq)\n"
    "  local sid='0-'..seq\n"
    "  redis.call('XACK',S,G,sid)\n"
    "  local n=redis.call('XDEL',S,sid)\n"
    "  local qm=redis.call('HGET',QM,seq)\n"
    "  if qm then redis.call('ZREM',Q,qm); redis.call('HDEL',QM,seq) end\n"
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
    args(&a, "XPENDING");
    argk(&a, j, K_STREAM);
    args(&a, R_GROUP);
    args(&a, "-");
    args(&a, "+");
    argn(&a, 100000);
    args(&a, j->redis->consumer);
    cr_redis_cmd c = cmd_of(&a);
    int rc = cjr_run(j, &c, 1, out, false);
    if (rc == 0 && (*out)->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(*out);
        *out = NULL;
        return MDB_CORRUPTED;
    }
    return rc;
}

#endif /* COURIER_REDIS */
