/*
 * store_redis.h — what the journal's Redis store (store_redis.c: opening, transactions, records,
 * freezes, the API's reads), its replay claims (store_redis_replay.c: taking new and abandoned
 * entries, keeping this engine's alive, the per-host heads, a pass, the due times), its calls
 * (store_redis_calls.c: pipelines, the script, the group) and its listener for another engine's
 * handoff of a host's head (store_redis_wake.c) share. Private to the journal layer; only with
 * COURIER_REDIS.
 */
#ifndef COURIER_JOURNAL_STORE_REDIS_H
#define COURIER_JOURNAL_STORE_REDIS_H

#include "journal/journal_internal.h"

#ifdef COURIER_REDIS

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC visibility push(hidden)

#define R_GROUP "courier-replay"
#define R_FREE_CONSUMER "courier-released"
#define R_BATCH 1000
/* A pass looks for abandoned entries (XAUTOCLAIM, which scans the group's pending list) at most
 * this often: the scan cost ~9 ms of the master's time at 10,000 pending, every pass. */
#define R_ABANDONED_EVERY_MS 1000
/* A pass reads the states of the ordered records it found waiting for an earlier one of their
 * host (cj_redis.waiting) again at most this often; in between it reads only their hosts' heads. */
#define R_WAITING_EVERY_MS 1000
#define R_KEYS 8

typedef struct cj_redis cj_redis;

struct cj_redis {
    cr_redis *db;
    char keys[R_KEYS][200]; /* stream, state, ids, gid, hostq, hostq-of, outcomes, seq */
    size_t keylen[R_KEYS];
    char consumer[128];
    char script_sha[41];
    pthread_mutex_t mu; /* last, script_sha */
    courier_error last;
    /* The last pass's view (journal thread): a record due now left unclaimed, the next due time. */
    bool due_now;
    int64_t next_due;
    /* When a pass last looked for abandoned entries (XAUTOCLAIM; monotonic ms, journal thread). */
    int64_t abandoned_ms;
    /* Writes of the journal thread's turns that Redis did not take (it was away): sent first by
     * the next turn (store_redis.c, end_turn). Journal thread only. */
    struct rdeferred *backlog;
    size_t nbacklog, capbacklog;
    /* Ordered records of this engine's pending list that a pass found waiting for an earlier one
     * of their host (store_redis_replay.c, cjr_pass), ascending, each with its host's index in
     * hosts. A pass reads no state of these, only their hosts' heads (one ZRANGEBYLEX per host),
     * until the list is made again from every state, at most R_WAITING_EVERY_MS after the last
     * time (waiting_ms): an ordered backlog of N then costs a pass its pending list, not N states.
     * hosts: the hosts seen, each with its head as this pass read it. Journal thread only. */
    struct rwaiting {
        uint64_t seq;
        uint32_t host;
    } *waiting;
    size_t nwaiting, capwaiting;
    struct rhost {
        char name[J_HOST_MAX + 1];
        size_t len;
        uint64_t head;
        bool known; /* head read in this pass */
    } *hosts;
    size_t nhosts, caphosts;
    int64_t waiting_ms;
    /* The handoff (store_redis_wake.c): a thread subscribed to this engine's channel, started by
     * its first pass; `woken` set by it when another engine's removal made a record this engine
     * holds its host's head (or when it subscribed), and cleared by the pass it causes. */
    struct cjr_wake *wake;
    atomic_bool woken;
};

enum { K_STREAM, K_STATE, K_IDS, K_GID, K_HOSTQ, K_HOSTQ_OF, K_OUTCOMES, K_SEQ };

/* A transaction: the floor's calls are done when they return; the reply that backs a record's
 * text (rec_get) is kept until the next call or the end. */
/* A state rewrite or an outcome record kept for the commit. */
typedef struct rdeferred {
    uint64_t seq;   /* a state rewrite; 0: an outcome record */
    int remove;     /* the record's removal (seq), not a rewrite */
    size_t len;
    uint8_t data[J_STATE_FIXED + 4 + J_HOST_MAX + COURIER_FROZEN_ID_MAX + 160];
} rdeferred;

/* State rewrites (claims, answers to retry, holds) and outcome records are kept until the commit
 * and sent then in one pipeline: Redis, with appendfsync always, syncs its file once for a
 * pipeline it reads at once, so a turn's claims cost one fsync, as a turn's commit does on LMDB.
 * Removals (final answers) too: reads in the turn see all of them (rec_get and a pass overlay
 * them: a record removed in the turn reads as gone). Freezes are written at once (a freeze is
 * answered only once Redis has it); so are removals outside a turn (the API's). */
struct cj_rtxn {
    cr_journal *j;
    redisReply *held;
    rdeferred *dv;
    size_t dn, dcap;
    /* Records read ahead in this turn (rcached): the states of its answers' records (read_ahead)
     * and the states and texts of the records its pass is about to claim, each read for many
     * records in one round trip; rec_get answers from them. The replies that back them are kept
     * (kept) until the transaction ends. */
    struct rcached *cv;
    size_t cn, ccap;
    size_t *tab, tcap; /* cv's index by record number (store_redis_calls.c) */
    redisReply **kept;
    size_t nkept, capkept;
};

/* A record read ahead: its state (the HMGET element: a string, or nil when the record is gone)
 * and, when text_read, its request text (NULL: the stream has no entry for it). */
typedef struct rcached {
    uint64_t seq;
    const redisReply *state;
    bool text_read;
    const char *text;
    size_t tlen;
} rcached;

/* An argument list under construction (binary-safe). */
typedef struct rargs {
    const char *v[24];
    size_t len[24];
    int n;
    char num[8][24]; /* numbers formatted here */
    int nnum;
} rargs;

static inline void arg(rargs *a, const char *s, size_t len) {
    a->v[a->n] = s;
    a->len[a->n++] = len;
}
static inline void args(rargs *a, const char *s) { arg(a, s, strlen(s)); }
static inline void argn(rargs *a, int64_t x) {
    char *b = a->num[a->nnum++];
    arg(a, b, (size_t)snprintf(b, 24, "%lld", (long long)x));
}
static inline void argk(rargs *a, cr_journal *j, int k) { arg(a, j->redis->keys[k], j->redis->keylen[k]); }
static inline cr_redis_cmd cmd_of(rargs *a) { return (cr_redis_cmd){a->n, a->v, a->len}; }
/* The replay's three reads of the stream, built once (store_redis_replay.c's pass pipelines them;
 * adopting new entries, abandoned ones and the pending list also run them alone): */
/* XREADGROUP of this engine's consumer: the stream's new entries, a batch at most. */
static inline void args_xreadgroup(rargs *a, cr_journal *j) {
    args(a, "XREADGROUP");
    args(a, "GROUP");
    args(a, R_GROUP);
    args(a, j->redis->consumer);
    args(a, "COUNT");
    argn(a, R_BATCH);
    args(a, "STREAMS");
    argk(a, j, K_STREAM);
    args(a, ">");
}
/* XAUTOCLAIM from `cursor` (borrowed until the command runs): entries idle for a lease, a batch. */
static inline void args_xautoclaim(rargs *a, cr_journal *j, const char *cursor) {
    args(a, "XAUTOCLAIM");
    argk(a, j, K_STREAM);
    args(a, R_GROUP);
    args(a, j->redis->consumer);
    argn(a, j->lease_ms);
    args(a, cursor);
    args(a, "COUNT");
    argn(a, R_BATCH);
    args(a, "JUSTID");
}
/* XPENDING of this engine's consumer: its whole pending list (ids). */
static inline void args_xpending(rargs *a, cr_journal *j) {
    args(a, "XPENDING");
    argk(a, j, K_STREAM);
    args(a, R_GROUP);
    args(a, "-");
    args(a, "+");
    argn(a, 100000);
    args(a, j->redis->consumer);
}

static inline uint64_t seq_of_id(const char *id) { return strncmp(id, "0-", 2) == 0 ? strtoull(id + 2, NULL, 10) : 0; }

/* What the kept writes say of seq: 0 nothing, 1 its state (*st), -1 removed. */
static inline int deferred_state(struct cj_rtxn *t, uint64_t seq, jstate *st) {
    for (size_t i = t ? t->dn : 0; i-- > 0;) {
        if (t->dv[i].seq != seq) continue;
        if (t->dv[i].remove) return -1;
        return cj_state_decode(t->dv[i].data, t->dv[i].len, st) ? 1 : 0;
    }
    return 0;
}

/* Calls (store_redis_calls.c). cjr_run: n commands in one pipeline, replies new (cr_redis_replies_free);
 * an error reply fails the call unless errors_ok; 0 or CJ_E_REDIS (remembered). cjr_eval: EVALSHA of
 * the journal's script (loaded again after NOSCRIPT), ARGV after the group and the operation:
 * extra[0..nextra), integer reply in *out. cjr_remember: keeps e as the store's last error, returns
 * CJ_E_REDIS. cjr_ensure_group: the consumer group on the stream. cjr_my_pending: this engine's
 * pending entries (new reply). */
CR_HIDDEN int cjr_remember(cr_journal *j, const courier_error *e);
CR_HIDDEN int cjr_run(cr_journal *j, const cr_redis_cmd *cmds, size_t n, redisReply **replies, bool errors_ok);
CR_HIDDEN int cjr_eval(cr_journal *j, const char *op, const char *const *extra, const size_t *extralen, int nextra, long long *out);
/* cjr_eval followed by `WAIT wait_n wait_ms` in the same pipeline (wait_n > 0): *acked, the replicas
 * that confirmed the connection's writes (-1: not an integer). */
CR_HIDDEN int cjr_eval_wait(cr_journal *j, const char *op, const char *const *extra, const size_t *extralen, int nextra,
                            long long *out, int wait_n, int64_t wait_ms, long long *acked);
CR_HIDDEN int cjr_ensure_group(cr_journal *j);
CR_HIDDEN int cjr_my_pending(cr_journal *j, redisReply **out);
/* The script's sha in sha[41], loaded first (SCRIPT LOAD) when it is not: 0 or CJ_E_REDIS. */
CR_HIDDEN int cjr_script_sha_now(cr_journal *j, char sha[41]);

/* Reads ahead (store_redis_calls.c), each for many records in one round trip; a record a read
 * ahead did not get (it failed, no memory), rec_get reads itself.
 * cjr_entry_text: the "req" field of an XRANGE reply of one entry (borrowed from it), false when
 *   there is none.
 * cjr_cached: the record read ahead in t, or NULL.
 * cjr_cache_states: the states of seqs[0..n) from an HMGET reply in the same order, whose
 *   ownership t takes (freed with t, or now when it fails): 0, ENOMEM or MDB_CORRUPTED.
 * cjr_read_states: the states of seqs read into t (HMGET, a thousand a round trip): 0 or the error.
 * cjr_read_texts: the texts of seqs read into t (an XRANGE each, all in one pipeline): 0 or the error.
 * cjr_cache_free: what t read ahead, freed (at its end). */
CR_HIDDEN bool cjr_entry_text(const redisReply *x, const char **text, size_t *len);
CR_HIDDEN rcached *cjr_cached(struct cj_rtxn *t, uint64_t seq);
CR_HIDDEN int cjr_cache_states(struct cj_rtxn *t, const uint64_t *seqs, size_t n, redisReply *states);
CR_HIDDEN int cjr_read_states(cr_journal *j, struct cj_rtxn *t, const uint64_t *seqs, size_t n);
CR_HIDDEN int cjr_read_texts(cr_journal *j, struct cj_rtxn *t, const uint64_t *seqs, size_t n);
CR_HIDDEN void cjr_cache_free(struct cj_rtxn *t);

/* Replay claims (store_redis_replay.c): new entries become this engine's (cjr_adopt_new); a pass,
 * the due times and a peek, as cj_store_ops has them. */
CR_HIDDEN int cjr_adopt_new(cr_journal *j);
CR_HIDDEN int cjr_pass(cr_journal *j, cj_txn *txn, int64_t now, long slots, unsigned mode, int64_t since, jsend ***sends, jevent ***events, int64_t *next, bool *mode_done);
CR_HIDDEN void cjr_due_edges(cr_journal *j, cj_txn *txn, int64_t now, bool *due_now, int64_t *next_due);
CR_HIDDEN int cjr_peek(cr_journal *j, int64_t now, bool scan, bool *due_now, int64_t *next_due, jseqs *dead, jseqs *expired);

/* The handoff (store_redis_wake.c). cjr_wake_start: the thread that listens on this engine's
 * channel, started once (journal thread; a failure leaves it to the next pass, and the poll
 * interval still finds the work). It connects on its own (cr_redis_connect_alone), SUBSCRIBEs,
 * and on each message, and after each (re)subscription, sets `woken` and wakes the journal thread
 * (cj_kick): that turn's peek reports work and its pass reads the hosts' heads. It reconnects a
 * second after a failure. cjr_wake_stop: ends and joins it (store close, after the journal thread
 * ended). cjr_wake_channel: this engine's channel, "<tag>:wake:<consumer>", into buf (cap bytes). */
CR_HIDDEN void cjr_wake_start(cr_journal *j);
CR_HIDDEN void cjr_wake_stop(cr_journal *j);
CR_HIDDEN void cjr_wake_channel(const cj_redis *r, char *buf, size_t cap);

#pragma GCC visibility pop

#endif /* COURIER_REDIS */
#endif
