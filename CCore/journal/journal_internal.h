/*
 * journal_internal.h — what the journal's rooms share, and nothing outside CCore/journal/ includes.
 *
 * Rooms:
 *   store.c    the journal's LMDB environment (registry, open, verify, move aside), the state
 *              record, who holds a claim, records and their indexes inside a transaction
 *   store_redis.c  the same records on Redis Streams (a redis:// journal store; docs/design/redis.md,
 *              "The journal on Redis"): the stream, the consumer group, leases by XAUTOCLAIM
 *   record.c   the stored request: reading its JSON text, writing it, snapshots, rebuilding the
 *              request for a replay
 *   replay.c   what one turn writes: freezes, answers, claims with leases, per-host order, expiry;
 *              sending the claimed records
 *   events.c   the journal's events and their listeners
 *   journal.c  the journal thread and its turn, and the engine's hooks (freezing a transfer,
 *              answering it after the commit, the network monitor): the journal's only calls into
 *              the engine layer
 *   api.c      the public courier_frozen_* API, the request and configuration setters
 *

 * Storage. The journal is its own LMDB environment in <store>/journal, opened with LMDB's
 * default durability (data and meta page synced at every commit), apart from the cache's
 * environment (which trades sync for speed and is recreated when damaged; a journal never is).
 * One environment per directory per process, shared by the engines of the process through a
 * small registry (LMDB forbids opening an environment twice in one process). Named databases,
 * few on purpose (every database a commit touches costs pages in its fsync):
 *   req     seq(be64)                   -> state (fixed layout below) + the request as JSON (any
 *                                           language reads it; docs/design/journal.md, "Records")
 *   due     time(be64) | seq(be64)      -> ""   what the replayer looks at: every automatic record
 *                                               that is not ordered, and the head of each host's
 *                                               ordered queue; time = the lease's end when claimed,
 *                                               else the next attempt (0: never tried)
 *   hostq   host \0 seq(be64)           -> ""   ordered automatic records of a host, oldest first
 *   ids     freeze id                   -> seq(be64), for ids the app gave (a generated id is the
 *                                               seq in 16 hex digits + 64 random bits)
 *   outcome n(be64)                     -> JSON {"id","code","status","at_ms","attempts"}: the last
 *                                               1000+ final answers, written in the transaction that
 *                                               removes the request
 *   meta    "format" -> u32
 *   cookies "domain\tpath\tname"         -> the cookie as a Netscape cookie-file line; "" -> the jar's
 *                                               generation (u64, +1 at every write): cookies.c's
 * Sequence numbers are the last key + 1 (no counter to rewrite). Expiry is checked when a record
 * comes due, and by a scan of every record once per poll interval.
 *
 * State (version 1): u8 version, u8 policy, u16 flags, u32 attempts, i64 created_ms,
 * i64 expires_ms, i64 next_ms, i64 claim_ms (lease end, 0: unclaimed), i64 last_ms (last attempt),
 * u32 owner pid, u32 owner nonce, u64 owner start time, u64 owner boot id hash, i32 last code,
 * i32 last HTTP status, u64 hash of the resend policy's id (0: none named; policy.c; was reserved
 * and zero, so older records read as naming none), then u16 host length + host, u16 id length + id.
 *
 * Threads. Each engine has one journal thread: it is this engine's only writer of the journal
 * except the management calls. One loop turn takes everything queued (freezes from the worker,
 * answers of replays, explicit resends), writes it in ONE transaction together with the claims of
 * the next replays and the expired records it removes, commits (synced: a group commit), and only
 * then answers the frozen sends and delivers the events. Claimed requests wait in a ready queue;
 * at most `concurrency` are on the wire, sent through the public courier_send, and each replay's
 * completion sends the next at once. No transaction is held across a callback. A claimed record
 * is parsed by the journal thread once its claim is committed (cj_ready_push), not by the worker
 * that sends it; what the journal thread allocates for a replay it frees itself (with the answer),
 * and the events' responses, which the worker made, go back to the worker to be freed
 * (cj_responses_spent): a free into another thread's malloc arena takes its lock.
 *
 * Claims. A record is claimed in a write transaction (so one process or engine sends it) with a
 * lease: the claimer's identity (pid, process start time, boot id, engine nonce) and an end time.
 * A claim whose owner is dead (no such process, a zombie, another boot, a closed engine of this
 * process) or whose lease has ended is taken over.
 */

#ifndef COURIER_JOURNAL_INTERNAL_H
#define COURIER_JOURNAL_INTERNAL_H

#include "base/lmdb_env.h"
#include "journal/journal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Hidden like internal.h's declarations. */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

typedef struct cr_journal cr_journal;
/* A transaction of the journal's store: LMDB's MDB_txn; on Redis the journal's connection, held
 * (under its lock) from begin to commit, each operation done when it returns. */
typedef struct cj_txn cj_txn;
struct jfreeze;
struct jsend;
struct jevent;
struct jseqs;

/* Result codes inside the journal, beside LMDB's (MDB_NOTFOUND: no such record; MDB_CORRUPTED: a
 * state that does not decode) and errno values (ENOMEM): the Redis store failed (its connection
 * keeps the text; j->store->fail gives it with the code). */
#define CJ_E_REDIS (-30500)

#define J_FORMAT 1u
#define J_STATE_VERSION 1u
#define J_STATE_FIXED 88u
#define J_HOST_MAX 300
#define J_MAP_BYTES ((size_t)2 << 30)
#define J_OUTCOMES_KEPT 1000
#define J_DEFAULT_CONCURRENCY CR_DEFAULT_FROZEN_CONCURRENCY /* courier_setting_default (base/base.h) */
#define J_DEFAULT_BACKOFF_BASE CR_DEFAULT_FROZEN_BACKOFF_BASE_MS
#define J_DEFAULT_BACKOFF_MAX CR_DEFAULT_FROZEN_BACKOFF_MAX_MS
#define J_DEFAULT_LEASE 300000L
#define J_DEFAULT_EXPIRY ((int64_t)24 * 3600 * 1000)
#define J_DEFAULT_POLL 10000L

/* Persisted flags (beside COURIER_FREEZE_UNORDERED 0x1 and COURIER_FREEZE_ON_AMBIGUOUS 0x2). */
/* The record has a `due` key, at due_time() (an unordered record numbered past meta's `due_upto`
 * gets it from the next pass: store.c, due_catch_up) */
#define JF_IN_DUE 0x100u
/* Claimed out of `due` (LMDB store): the claim took the record's key away and giving the claim back
 * (an answer to retry, not tried, a takeover's recovery) puts it back, at the next attempt. A claim
 * is found by the scan every poll interval when its lease ends or its owner dies, not by `due`
 * (whose key it no longer moves: a delete and an append saved per claim, and the answer's delete).
 * Stores written before it keep a claim's key at its lease's end (JF_IN_DUE): still read. */
#define JF_DUE_ON_RELEASE 0x200u

/* Replay-now modes. */
#define J_KICK_NOW 0x1u    /* records not tried since the kick are due now, whatever their backoff */
#define J_KICK_MANUAL 0x2u /* and so are manual records */
/* The app asked (courier_frozen_replay): the replay-now runs while paused or offline, and its sends
 * ignore the monitor. Without it, J_KICK_NOW is the network's return (the monitor's change to
 * online, cr_journal_wake): automatic replay, which waits while paused and is dropped when the
 * monitor says offline again (a later return kicks anew), and whose sends the monitor may refuse. */
#define J_KICK_APP 0x4u

/* Why a claimed record is sent (jsend.explicit_, cj_policy_log_replay's reason). */
#define CJ_SEND_DUE 0       /* automatic: due */
#define CJ_SEND_REPLAY_NOW 1 /* the app's replay-now: sent even when the monitor says offline */
#define CJ_SEND_RESEND 2    /* the app's resend of one id: the same, and no resend policy asked */
#define CJ_SEND_ONLINE 3    /* made due by the network's return: automatic, logged as replay_now */

/* ==== who holds a claim ======================================================================== */

typedef struct jowner {
    uint32_t pid;
    uint32_t nonce;
    uint64_t start; /* the process's start time (clock ticks after boot), 0 if unknown */
    uint64_t boot;  /* hash of the boot id, 0 if unknown */
} jowner;

/* ==== the environment registry ================================================================= */

typedef struct jenv {
    cr_lmdb_env base; /* first: the floor's registry entry (dir, env) */
    MDB_dbi db_req, db_ids, db_due, db_hostq, db_outcome, db_meta;
    MDB_dbi db_cookies; /* cookies.c's: the engine's cookie jar */
    MDB_dbi db_hsts;    /* hsts.c's: the engine's known HSTS hosts */
    pthread_mutex_t lock; /* nonces */
    uint32_t *nonces;     /* the journals of this process open on it */
    size_t nnonces, capnonces;
    /* The outcome log's next number in the write transaction whose id is oc_txnid (0: none), so
     * each answer of a commit does not look up the log's last key again. Used in write
     * transactions only (one at a time: LMDB's writer lock). A transaction that aborted leaves a
     * number past the log's end, which stays right (a gap); MDB_APPEND refuses one that is not. */
    size_t oc_txnid;
    uint64_t oc_next;
    /* The write transaction begun by lm_begin (NULL: none; read by any thread, set by the one
     * holding LMDB's writer lock), and its cursor on `req`, which stands on the record numbered
     * rcur_seq when rcur_valid (or, after it removed that record, on the one after it): a claim's
     * rewrite and an answer's removal of the record the transaction has just read use it instead
     * of looking the key up again (store.c, req_at), and a read of a later record tries the next
     * key first (rec_get: a pass reads its candidates, and a turn's answers their records, mostly
     * in key order). */
    _Atomic(MDB_txn *) wtxn;
    MDB_cursor *rcur;
    uint64_t rcur_seq;
    bool rcur_valid;
    /* Its cursor on `due`, left by a removal on the key after the one removed (dcur_valid): a
     * turn's claims remove keys from the front of `due` one after the other (store.c, due_del). */
    MDB_cursor *dcur;
    bool dcur_valid;
} jenv;

/* ==== the state record ========================================================================= */

typedef struct jstate {
    uint8_t policy;
    uint16_t flags;
    uint32_t attempts;
    int64_t created_ms, expires_ms, next_ms, claim_ms, last_ms;
    jowner owner;
    int32_t last_code, last_status;
    uint64_t rp_hash; /* cj_policy_hash of the resend policy's id; 0: the freeze policy's default */
    uint16_t host_len;
    char host[J_HOST_MAX + 1];
    uint16_t id_len;
    char id[COURIER_FROZEN_ID_MAX + 1];
} jstate;

/* A record marked JF_DUE_ON_RELEASE with no claim: given back by a library from before the flag (one
 * opening this store after a crash mid-replay ignores it and leaves the record without its `due`
 * key, which no pass would then find). The scan every poll interval finds it and the recovery of
 * claims puts its key back (cj_recover_claims), so such a record waits one interval, not forever. */
static inline bool cj_given_back_unindexed(const jstate *st) {
    return !st->claim_ms && (st->flags & JF_DUE_ON_RELEASE);
}

/* ==== the stored request (record.c) ============================================================ */

/* The stored request, decoded: what the record's JSON text says (docs/design/journal.md, "Records", has the keys).
 * One table of fields in record.c drives writing it, reading it (through the JSON tape), the
 * snapshot (which keeps the jreq whole) and rebuilding the request for a replay. Read
 * (cj_jreq_read): the strings, header names and values and the body point into `text`, the
 * parse's copy of the record (strings unescaped in place and NUL-terminated there, the body's
 * base64 decoded in place), which the jreq owns; a string that does not lie in it is owned on its
 * own (the empty idempotency key a snapshot adds, a damaged record's snapshot, which has no text);
 * all freed by cj_jreq_clear. The headers' items point into `text` too (headers.block is `text`, so
 * cr_kvlist_remove and _set_value keep them; never cr_kvlist_clear them: cj_jreq_clear does).
 * Written (cj_payload_of): borrowed. Members of other types than expected read as absent (0,
 * NULL), as jansson's accessors do. */
typedef struct jres {
    char *name, *key_path;
    int64_t flags;
} jres;

typedef struct jreq {
    int64_t v;
    int has_v; /* "v" is an integer */
    char *id;
    char *method, *url;
    cr_kvlist headers;
    int has_headers; /* "headers" is an array */
    char *body;      /* decoded from "body_b64" (NUL-terminated) */
    size_t body_len;
    int has_body;
    int64_t timeout_ms;
    char *idem;
    int64_t created_ms, expires_ms;
    int64_t policy; /* COURIER_FREEZE_AUTO or _MANUAL ("auto", "manual") */
    int ordered;
    char *host;
    int64_t priority;
    int has_retry;
    int64_t retry_max, retry_base, retry_maxd, retry_flags;
    int has_cache;
    int64_t cache_policy, cache_expiry;
    int has_json, had_mapping;
    char *key_path;
    jres *results;
    size_t nresults;
    char *resend_policy; /* NULL: the freeze policy's default */
    char *text;          /* read: what the strings above point into (owned), text_len + 1 bytes */
    size_t text_len;
} jreq;

/* ==== the snapshot handed to callers =========================================================== */

struct courier_frozen {
    atomic_int refs;
    uint64_t seq;
    jreq q;      /* the decoded request (id, method, url, headers, body, idempotency key...) */
    char *host;  /* from the record's state */
    char *text;  /* the stored text (owned), from which json is made when first read */
    size_t tlen;
    _Atomic(char *) json; /* the stored text with the replay state spliced in (cj_snap_json) */
    courier_frozen_info info;
};

struct courier_frozen_list {
    courier_frozen **items;
    size_t count;
};

/* ==== the journal ============================================================================== */

typedef struct jfreeze {
    struct jfreeze *next;
    cr_later *answer;    /* the caller (the engine's detached handle), answered after the commit */
    int code;            /* why it is frozen */
    courier_error err;
    char id[COURIER_FROZEN_ID_MAX + 1];
    char *payload;   /* the request's JSON text but its opening (payload_of), built on the worker */
    char *method, *url; /* for the lifecycle event */
    jstate st;
    uint64_t seq;         /* once written */
    uint64_t tried;       /* the number a write was sent with whose answer was lost (Redis), else 0 */
    courier_frozen *snap; /* once written */
    uint64_t answer_id;   /* the original send's id */
    int generated;        /* the id is made at write time (from the record's number) */
    int unconfirmed;      /* written, but fewer replicas than asked confirmed it (WAIT): -66, not FROZEN */
    long long replicas_acked; /* what WAIT answered */
} jfreeze;

typedef struct joutcome {
    struct joutcome *next;
    jstate st;            /* the state as claimed */
    struct cr_journal *journal;
    int tries; /* turns whose transaction failed */
    int applied; /* written by the last turn (which may have failed after it) */
    uint64_t seq;
    uint64_t request_id;
    int code;
    courier_response *resp;
    courier_error err;
    courier_frozen *snap;
    int not_sent; /* courier_send refused it: nothing reached the network */
    int verdict;  /* CJ_RP_HOLD or CJ_RP_DELETE: a resend policy's answer instead of a send (policy.c) */
    const char *why;
    struct jsend *send; /* the claimed record it answers (its decoded request, lent to the send) */
} joutcome;

typedef struct jresend {
    struct jresend *next;
    char id[COURIER_FROZEN_ID_MAX + 1];
} jresend;

typedef struct jlistener {
    struct jlistener *next;
    uint64_t token;
    cr_callback *cb;
} jlistener;

typedef struct jevent {
    struct jevent *next;
    char id[COURIER_FROZEN_ID_MAX + 1];
    courier_frozen_event ev;
    courier_frozen *snap;
    courier_response *resp;
    courier_error err;
    char policy[COURIER_RESEND_POLICY_ID_MAX + 1]; /* the resend policy's id, for the log line */
    /* A held ordered record (HELD, POLICY_UNKNOWN): the later ordered records of its host waiting
     * behind it (at most CJ_WAITING_MAX; -1: not counted) and the host, for the log line. */
    int64_t waiting;
    char host[J_HOST_MAX + 1];
} jevent;

/* The most later records of a host a held record's log line counts (a walk of the host's queue). */
#define CJ_WAITING_MAX 10000

/* A jevent that is only logged, never given to listeners: a resend policy held a request. */
#define CJ_EVENT_HELD 0x100

/* A claimed record about to be sent. */
typedef struct jsend {
    struct jsend *next;
    int explicit_; /* CJ_SEND_*: asked for by the app (REPLAY_NOW, RESEND): sent even when the monitor says offline */
    jstate st;     /* as claimed */
    char *text;    /* the request text (copied in the transaction, decoded after its commit) */
    size_t tlen;
    uint64_t seq;
    /* Decoded by the journal thread after the commit, before the record joins the ready queue
     * (cj_send_decode), so the worker that sends it does not parse it: rc is cj_jreq_read's. */
    int decoded;
    int rc;
    jreq q;               /* what the snapshot did not take */
    struct joutcome *o;   /* the answer's record, made with the parse (NULL: made when sent) */
    /* The request to send, built with the parse on the journal thread (cj_ready_push), borrowing
     * q's (or the snapshot's) method, url, headers and body; freed with this record, by the journal
     * thread, once the answer is written. NULL: built when sent. */
    courier_request *r;
} jsend;

/* ==== the store: the seam between the journal and where its records live ========================
 * Chosen at open by the journal's store setting (courier_config_set_frozen_store): a directory is
 * the LMDB store (store.c), a redis:// URL the Redis Streams one (redis.c). Everything above
 * (freezes, answers, claims and leases, per-host order, expiry, policies, events, the API) is the
 * same code over these operations. Record-level operations run inside a transaction (begin,
 * commit); the others open their own. Results: 0, MDB_NOTFOUND, MDB_CORRUPTED, ENOMEM, an LMDB
 * code or CJ_E_REDIS. */
typedef struct cj_store_ops {
    const char *kind;
    /* A transaction is all or nothing (LMDB). False: each operation is durable when it returns
     * (Redis), so a turn that failed half-way keeps what it wrote (journal.c). */
    bool atomic;
    int (*open)(cr_journal *j, const char *where, courier_error *err);
    void (*close)(cr_journal *j);
    int (*begin)(cr_journal *j, bool write, cj_txn **txn);
    int (*commit)(cr_journal *j, cj_txn *txn);
    void (*abort)(cr_journal *j, cj_txn *txn);
    /* rc says the store is corrupt (the journal stops using it). */
    bool (*broken)(int rc);
    /* The text of rc. */
    const char *(*strerror)(cr_journal *j, int rc);
    /* Fails *err (may be NULL) for rc with "what: <the store's text>"; returns the courier code. */
    int (*fail)(cr_journal *j, courier_error *err, int rc, const char *what);
    /* A record: its state and (text, len: borrowed until the next operation) its request text. */
    int (*rec_get)(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, const char **text, size_t *len);
    int (*st_update)(cr_journal *j, cj_txn *txn, uint64_t seq, const jstate *old, const jstate *st);
    /* st_update that also gives the record's request text (text, len: borrowed until the next
     * operation), for a claim. NULL: st_update, then rec_get. */
    int (*st_update_text)(cr_journal *j, cj_txn *txn, uint64_t seq, const jstate *old, const jstate *st,
                          const char **text, size_t *len);
    /* st_update that writes the record back with `text` (len bytes, borrowed for the call): its
     * request text as the caller read it in this transaction, for a claim of a record the pass
     * has just read (no second read of it). NULL: st_update_text. */
    int (*st_update_with)(cr_journal *j, cj_txn *txn, uint64_t seq, const jstate *old, const jstate *st,
                          const char *text, size_t len);
    /* The states of records the turn is about to read one by one (its answers' records), read
     * together first: a store whose every read is a round trip (Redis) then reads them in one, and
     * rec_get finds them. A failure leaves the reads to rec_get. NULL: nothing (LMDB reads memory). */
    void (*read_ahead)(cr_journal *j, cj_txn *txn, const uint64_t *seqs, size_t n);
    /* Removes a record with its indexes; promotes the next of its host. */
    int (*rec_remove)(cr_journal *j, cj_txn *txn, uint64_t seq, const jstate *st);
    /* Removes a record whose state does not decode, by its number. */
    int (*rec_remove_bad)(cr_journal *j, cj_txn *txn, uint64_t seq);
    int (*outcome_log)(cr_journal *j, cj_txn *txn, const jstate *st, int code, int status, int64_t now);
    int (*find_seq)(cr_journal *j, cj_txn *txn, const char *id, uint64_t *seq);
    /* Writes a freeze (a given id replaces its older record): f->seq, f->id set. */
    int (*freeze)(cr_journal *j, cj_txn *txn, struct jfreeze *f);
    /* Writes a turn's freezes together, as far as it can (those it wrote have f->seq; freeze writes
     * the rest). NULL: one at a time. */
    int (*freeze_batch)(cr_journal *j, cj_txn *txn, struct jfreeze *list);
    /* An explicit resend: makes seq this engine's to claim (Redis: into its consumer's pending
     * list). NULL: nothing to do. */
    int (*take)(cr_journal *j, cj_txn *txn, uint64_t seq);
    /* Claims due records (cj_consider) while slots last; see replay.c's turn. */
    int (*pass)(cr_journal *j, cj_txn *txn, int64_t now, long slots, unsigned mode, int64_t since,
                struct jsend ***sends, struct jevent ***events, int64_t *next, bool *mode_done);
    /* After a turn's claims: is a record due now, and when next. */
    void (*due_edges)(cr_journal *j, cj_txn *txn, int64_t now, bool *due_now, int64_t *next_due);
    /* Read-only look (own transaction): due now, when next; with scan, the claims of the dead and
     * the expired records. */
    int (*peek)(cr_journal *j, int64_t now, bool scan, bool *due_now, int64_t *next_due, struct jseqs *dead,
                struct jseqs *expired);
    /* Every record, oldest first: fn(seq, state or NULL when it does not decode, text, len). A
     * nonzero return of fn stops and is returned. */
    int (*each)(cr_journal *j, cj_txn *txn,
                int (*fn)(void *user, uint64_t seq, const jstate *st, const char *text, size_t len), void *user);
    int (*count)(cr_journal *j, cj_txn *txn, int64_t *n);
    int (*remove_all)(cr_journal *j, cj_txn *txn, int64_t *n);
    /* The newest outcome record of id. MDB_NOTFOUND when none. */
    int (*last_outcome)(cr_journal *j, cj_txn *txn, const char *id, int *code, int *status, int64_t *at_ms);
    /* The ordered records of host (host_len bytes) after seq: the ones a held record keeps waiting,
     * counted up to CJ_WAITING_MAX. */
    int (*host_waiting)(cr_journal *j, cj_txn *txn, const char *host, size_t host_len, uint64_t seq, int64_t *n);
} cj_store_ops;

struct cr_journal {
    courier_engine *e;
    const cr_journal_ops *ops; /* the engine's: answering, sending, the monitor */
    jenv *env;                  /* the store directory's LMDB journal (records on LMDB; the cookie jar) */
    const cj_store_ops *store;  /* where the records live (chosen at open) */
    const struct cj_pass_fns *pass; /* replay.c's decisions, for the stores' passes (set at open) */
    struct cj_redis *redis;     /* the Redis store's state (redis.c), else NULL */
    jowner me;
    cr_callback *clock;
    _Atomic long concurrency; /* the network kind's when it sets one (cr_journal_set_concurrency) */
    long backoff_base, backoff_max, lease_ms, poll_ms;
    int64_t default_expiry;

    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_cond_t idle_cv;
    /* Guarded by mu. */
    jfreeze *fz_head, *fz_tail;
    joutcome *oc_head, *oc_tail;
    long noc;             /* answers queued (oc_head's length) */
    jresend *rs_head;
    int go, closing, paused;
    int kick;             /* look for due records now */
    int kick_scan;        /* a replay-now: look for claims of the dead and ended leases now too */
    unsigned kick_mode;   /* J_KICK_* */
    int64_t kick_since;   /* the replay-now instant */
    long wire;            /* replays sent and not yet answered (at most `concurrency`) */
    long ahead;           /* claims kept ahead of the wire (journal thread writes, mu) */
    struct jsend *ready_head, *ready_tail; /* claimed, not yet sent */
    courier_response **spent; /* the events' responses, for the worker to free (cj_responses_spent) */
    size_t nspent, capspent;
    long nready;
    uint64_t turns;       /* loop turns completed */
    int idle;             /* the last turn found nothing to do now */
    atomic_int broken;    /* the journal reported corruption at run time */

    pthread_mutex_t lmu; /* listeners */
    jlistener *listeners;
    atomic_int nlisteners;
    uint64_t next_token;

    uint64_t rng; /* journal thread */
    int64_t next_recover_ms;

    struct cj_policies *policies; /* resend policies (policy.c) */
};

/* Read-only look: is anything due or expired now, and which claims are held by the dead? */
/* A list of record numbers. */
typedef struct jseqs {
    uint64_t *v;
    size_t n, cap;
} jseqs;

static inline int64_t due_time(const jstate *s) { return s->claim_ms ? s->claim_ms : s->next_ms; }
static inline bool is_ordered_auto(const jstate *s) {
    return s->policy == COURIER_FREEZE_AUTO && !(s->flags & COURIER_FREEZE_UNORDERED);
}

/* What the rooms call in each other (cj_: the journal's; hidden). Each is described where it is
 * defined; the record's functions here. */

/* ---- store.c: the LMDB side, and the calls the rooms make into whichever store is open ---------- */

void cj_random_bytes(void *out, size_t n);
void cj_random_hex(char out[33]);
int cj_proc_stat(long pid, char *state, uint64_t *start);
uint64_t cj_boot_hash(void);
int cj_jenv_acquire(const char *store_dir, uint32_t nonce, jenv **out, courier_error *err);
void cj_jenv_release(jenv *v, uint32_t nonce);
size_t cj_state_decode(const void *data, size_t len, jstate *s);
size_t cj_state_encode(const jstate *s, uint8_t *b); /* b: J_STATE_MAX bytes */
int64_t cj_jnow(const cr_journal *j);
uint64_t cj_jrand(cr_journal *j);
bool cj_claim_stale(cr_journal *j, const jstate *s, int64_t now);
/* The store's operations on one record (j->store's, inside a transaction). */
int cj_rec_get(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, const char **text, size_t *len);
int cj_st_get(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st);
int cj_find_seq(cr_journal *j, cj_txn *txn, const char *id, uint64_t *seq);
int cj_rec_remove(cr_journal *j, cj_txn *txn, uint64_t seq, const jstate *st);
int cj_st_update(cr_journal *j, cj_txn *txn, uint64_t seq, const jstate *old, const jstate *st);
int cj_outcome_log(cr_journal *j, cj_txn *txn, const jstate *st, int code, int status, int64_t now);
courier_frozen *cj_snap_in(cr_journal *j, cj_txn *txn, uint64_t seq, const jstate *st);
/* The outcome log's record of one final answer (JSON text; the same on every store). *out new. */
int cj_outcome_text(const jstate *st, int code, int status, int64_t now, char *out, size_t cap);
/* Whether an outcome record names id; its fields then. */
bool cj_outcome_match(const char *text, size_t len, const char *id, int *code, int *status, int64_t *at_ms);
/* A generated freeze id: the record's number in 16 hex digits, then 64 random bits. */
bool cj_generated_id(const char *id, size_t n);
uint64_t cj_generated_seq(const char *id);
/* Adds seq to a list (no memory: left out, found again by the next scan). */
void cj_seqs_add(jseqs *l, uint64_t seq);
/* Gives f its record number: the generated id (if it has none) and the stored text's opening.
 * *text new (free). COURIER_OK or ENOMEM. */
int cj_freeze_text(jfreeze *f, uint64_t seq, char **text);

/* The LMDB store (store.c) and, built with hiredis, the Redis one (redis.c). */
extern const cj_store_ops cj_lmdb_store;
#ifdef COURIER_REDIS
extern const cj_store_ops cj_redis_store;
#endif

/* ---- record.c ----------------------------------------------------------------------------------- */

/* Frees what a read jreq owns and zeroes it. */
void cj_jreq_clear(jreq *q);
/* Reads a stored request's JSON text (through the tape). COURIER_OK, COURIER_E_JOURNAL_CORRUPT (not
 * a JSON object, a header that is not two strings, a body that is not base64) or
 * COURIER_E_NO_MEMORY; *q is cleared on failure. */
int cj_jreq_read(const char *text, size_t len, jreq *q);
/* A snapshot of a decoded request (*q is taken whole and left cleared), its stored text (the JSON
 * view) and its state. NULL on a bad record or no memory (*bad says which). */
courier_frozen *cj_snap_from(uint64_t seq, jreq *q, const char *text, size_t len, const jstate *st, bool *bad);
/* The same, taking text (new: malloc'd; freed here on failure) instead of copying it; on failure
 * *q is left as it was (the caller's to clear). */
courier_frozen *cj_snap_take(uint64_t seq, jreq *q, char *text, size_t len, const jstate *st, bool *bad);
/* The snapshot's JSON view, made when first read (any thread); NULL without memory. */
const char *cj_snap_json(const courier_frozen *f);
/* The same from the stored text. */
courier_frozen *cj_snap_make(uint64_t seq, const char *text, size_t len, const jstate *st, bool *bad);
courier_frozen *cj_snap_retain(courier_frozen *f);
/* A transfer's stored request as JSON text but its opening ({"v":1,"id":...,"seq":..., written by
 * cj_apply_freeze). *out new (free). COURIER_OK or COURIER_E_NO_MEMORY. */
int cj_payload_of(const cr_transfer *t, const char *idem, int64_t created, int64_t expires, const char *host,
                  char **out);
/* The request of a decoded record: it borrows q's method, url, headers and body (q must outlive
 * it). *out new (cj_request_release, before q is cleared). COURIER_E_JOURNAL_CORRUPT when it is
 * not one. */
int cj_request_from(const jreq *q, courier_request **out);
void cj_request_release(courier_request *r);

/* ---- events.c ----------------------------------------------------------------------------------- */

jevent *cj_event_new(int kind, courier_frozen *snap, uint64_t request_id, int code);
void cj_events_push(jevent ***tail, jevent *ev);
/* journal.c: delivers a turn's events to the listeners (events.c's), then frees them. */
void cj_events_deliver(cr_journal *j, jevent *list);
/* Responses the journal thread is done with (v borrowed; the responses taken): while replays are
 * on the wire, handed to the worker, which frees them after its next replay's completion (a free
 * into another thread's malloc arena takes that arena's lock from under its thread); else freed
 * here. */
void cj_responses_spent(cr_journal *j, courier_response **v, size_t n);

/* ---- replay.c ----------------------------------------------------------------------------------- */

/* What a store's pass does with each record it finds (replay.c's decisions, below): the stores
 * stand below replay.c and call these through j->pass, which journal.c sets to cj_replay_pass at
 * open, never by name. */
typedef struct cj_pass_fns {
    int (*consider)(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, const char *text, size_t tlen, int64_t now,
                    long *slots, unsigned mode, int64_t since, jsend ***sends, jevent ***events, int64_t *next,
                    bool *mode_done, bool *stop);
    int (*consider_manual)(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, int64_t now, long *slots,
                           unsigned mode, jsend ***sends, int64_t *next, bool *mode_done, bool *stop);
    int (*sweep_expired)(cr_journal *j, cj_txn *txn, const uint64_t *seqs, size_t n, int64_t now, jevent ***events);
} cj_pass_fns;
/* cj_consider, cj_consider_manual and cj_sweep_expired. */
extern const cj_pass_fns cj_replay_pass;

int cj_apply_freeze(cr_journal *j, cj_txn *txn, jfreeze *f);
/* A candidate of a pass (due by the store's index, or the Redis store's own record): claimed,
 * expired, held or left. *slots counts down; *stop when out of slots. text, tlen: the record's
 * request text as the pass read it with st, with no write in the transaction since (borrowed:
 * valid until the next write), or NULL: a claim reads it. */
int cj_consider(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, const char *text, size_t tlen, int64_t now,
                long *slots, unsigned mode, int64_t since, jsend ***sends, jevent ***events, int64_t *next,
                bool *mode_done, bool *stop);
int cj_consider_manual(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, int64_t now, long *slots, unsigned mode,
                       jsend ***sends, int64_t *next, bool *mode_done, bool *stop);
int cj_apply_outcome(cr_journal *j, cj_txn *txn, joutcome *o, int64_t now, jevent ***events);
int cj_sweep_expired(cr_journal *j, cj_txn *txn, const uint64_t *seqs, size_t n, int64_t now, jevent ***events);
int cj_recover_claims(cr_journal *j, cj_txn *txn, const uint64_t *seqs, size_t n, int64_t now);
int cj_resend_one(cr_journal *j, cj_txn *txn, const char *id, int64_t now, jsend ***sends);
long cj_linger_target(const cr_journal *j);
void cj_pump_ready(cr_journal *j);
/* Decodes the claimed records of a committed turn (the journal thread, no lock held) and queues
 * them to be sent; with pump, sends them as they are queued while slots are free. */
void cj_ready_push(cr_journal *j, jsend *list, bool pump);
/* Frees a claimed record that will not be sent (its text and what was decoded of it). */
void cj_send_free(jsend *s);
/* wake.c: a turn of j's journal thread, soon (as cr_journal_wake's CR_WAKE_TURN, for a caller that
 * has j, not the engine: the Redis store's listener, store_redis_wake.c). Any thread while j's
 * mutex lives (until journal_free). */
void cj_kick(cr_journal *j);

/* ---- policy.c: resend policies and the journal's decision lines ---------------------------------- */

enum { CJ_RP_SEND = 0, CJ_RP_HOLD, CJ_RP_UNKNOWN, CJ_RP_ASK, CJ_RP_DELETE };

/* Open (the built-ins registered, the open time noted) and close, with the journal. */
int cj_policy_open(cr_journal *j);
void cj_policy_close(cr_journal *j);
/* The hash a record keeps of a policy id (never 0). */
uint64_t cj_policy_hash(const char *id);
/* Whether a request's policy id is known to j; sets st's policy hash and (for "courier.manual") its
 * freeze policy. COURIER_OK or COURIER_E_RESEND_POLICY_UNKNOWN. */
int cj_policy_stamp(cr_journal *j, const char *id, jstate *st);
/* In a pass, inside the transaction (no user code runs): SEND, HOLD (a built-in said not now; *why
 * set), UNKNOWN, or ASK (a user policy: claimed, then asked off the transaction by cj_policy_ask). */
int cj_policy_gate(cr_journal *j, const jstate *st, const char **why);
/* A record the gate held or does not know: looked at again after the poll interval (nothing else
 * changes); an unknown policy is reported once per record and engine. */
int cj_policy_hold(cr_journal *j, cj_txn *txn, uint64_t seq, jstate *st, int64_t now, int verdict, const char *why,
                   jevent ***events);
/* Off the transaction, before a claimed record of a user policy is sent: SEND, HOLD, DELETE or
 * UNKNOWN (removed meanwhile), with *why. */
int cj_policy_ask(cr_journal *j, const jstate *st, const courier_frozen *snap, int64_t now, const char **why);
/* In a turn: a HOLD or DELETE answer of cj_policy_ask (o->verdict) written. */
int cj_policy_apply(cr_journal *j, cj_txn *txn, joutcome *o, int64_t now, jevent ***events);
/* ev's policy id from st (the registry's name for its hash, or the freeze policy's default). */
void cj_policy_note(cr_journal *j, jevent *ev, const jstate *st);
/* The journal's log lines: an event (before its listeners; it also gives an EXPIRED event its
 * reason), a committed freeze, a replay sent. */
void cj_policy_log_event(cr_journal *j, jevent *ev);
void cj_policy_log_frozen(cr_journal *j, const jfreeze *f);
void cj_policy_log_replay(cr_journal *j, const jstate *st, int explicit_, uint64_t request_id);
/* The outcome log (replay.c), shared with a policy's deletion. */
int cj_outcome_log(cr_journal *j, cj_txn *txn, const jstate *st, int code, int status, int64_t now);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif
