/*
 * journal/journal.h — frozen requests as the engine may use them: open, start, close, freezing a
 * transfer, waking the journal thread, and what the journal may ask of the engine (cr_journal_ops).
 * The journal's rooms share journal_internal.h.
 */
#ifndef COURIER_JOURNAL_H
#define COURIER_JOURNAL_H

#include "http/http.h"

/* Hidden like every internal declaration (see base/base.h). */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

/* ==== Frozen requests and reachability (journal.c, monitor.c) ================================== */

struct cr_journal;
struct cr_monitor;

/* What the journal may ask of the engine, given at open (the engine's functions, never named by
 * the journal): answering a frozen caller after the commit, sending a replay, and the network
 * monitor, whose probes and listeners run on the journal thread. */
typedef struct cr_journal_ops {
    const cr_answer_ops *answer;
    /* courier_send: sends a rebuilt request (replay). */
    int (*send)(uint64_t *out_id, courier_engine *e, const courier_request *r, courier_completion_fn done, void *user,
                 courier_error *err);
    /* The monitor says offline (any thread). */
    bool (*offline)(courier_engine *e);
    /* Runs a due probe; the monotonic ms of the next one (INT64_MAX: none). */
    int64_t (*monitor_tick)(courier_engine *e, int64_t mono_ms);
    /* Gives a changed reachability state to the listeners. */
    void (*monitor_dispatch)(courier_engine *e);
    /* The monitor's current status (any thread; a resend policy's view of the network). */
    courier_reachability (*reachability)(const courier_engine *e);
} cr_journal_ops;

/* Engine open, after the store directory, the cache and the monitor, before the worker starts:
 * opens the journal (a corrupt one is moved aside: COURIER_E_JOURNAL_CORRUPT) and starts the
 * journal thread, which waits for cr_journal_start. `ops` is borrowed for the engine's life. On
 * failure nothing is left open. */
CR_HIDDEN int cr_journal_open(courier_engine *e, const cr_journal_ops *ops, courier_error *err);
/* Engine open, once the worker runs: lets the journal thread start (replay at open). */
CR_HIDDEN void cr_journal_start(courier_engine *e);
/* engine_free, first (after the worker stopped, before logging and the store go): writes what is
 * queued, answers it, stops the journal thread and the monitor, releases the journal. NULL-safe. */
CR_HIDDEN void cr_journal_close(courier_engine *e);
/* courier_send, once the transfer is prepared: copies the request's freeze settings into t. */
/* COURIER_E_RESEND_POLICY_UNKNOWN when a freezable request names a policy e does not have. */
CR_HIDDEN int cr_frozen_attach(courier_engine *e, const courier_request *r, cr_transfer *t, courier_error *err);
/* wake.c: the replay concurrency (n <= 0: the configured one); any thread (the monitor, by network kind). */
CR_HIDDEN void cr_journal_set_concurrency(courier_engine *e, long n);
/* finish(), before the cache write: a network failure (or COURIER_E_OFFLINE) of a transfer whose
 * policy allows it is handed to the journal, which answers the caller with COURIER_E_FROZEN after
 * the durable commit. True when it took over answering (t->caller_gone is then set). Worker. */
CR_HIDDEN bool cr_frozen_defer(courier_engine *e, cr_transfer *t, int code, courier_response *resp,
                               courier_error *err);
/* courier_send, after the cache lookup: a freezable request (no cache policy, no mock, no custom
 * transport) sent while the monitor says offline is handed to the journal at once, without a trip
 * through the worker; the journal answers it (COURIER_E_FROZEN) and frees it. True when taken
 * (courier_send then returns COURIER_OK with t's id and must not touch t). */
CR_HIDDEN bool cr_frozen_offline_send(courier_engine *e, cr_transfer *t);
/* wake.c: wakes the journal thread: CR_WAKE_TURN looks for work; CR_WAKE_REPLAY_NOW also makes every
 * request not tried since now due at once (the network came back). Any thread. */
#define CR_WAKE_TURN 0x1u
#define CR_WAKE_REPLAY_NOW 0x2u
CR_HIDDEN void cr_journal_wake(courier_engine *e, unsigned how);

/* journal.c: the journal environment's cookie database, for cookies.c (NULL/0 when none). */
struct MDB_env;
CR_HIDDEN int cr_journal_cookie_db(courier_engine *e, struct MDB_env **env, unsigned *dbi);
/* The same for hsts.c's database "hsts" (the engine's HSTS hosts). */
CR_HIDDEN int cr_journal_hsts_db(courier_engine *e, struct MDB_env **env, unsigned *dbi);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* COURIER_JOURNAL_H */
