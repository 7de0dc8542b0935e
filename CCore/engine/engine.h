/*
 * engine/engine.h — the top layer: the engine's state (engine.c), scheduling, interceptors
 * and custom transports (schedule.c), the network monitor (monitor.c).
 */
#ifndef COURIER_ENGINE_H
#define COURIER_ENGINE_H

#include "cache/cache.h"
#include "journal/journal.h"

/* Hidden like every internal declaration (see base/base.h). */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

/* ---- the engine (engine.c) ------------------------------------------------------------------- */

struct courier_engine {
    /* What the layers below read (base/base.h): first, so cr_core(e) is the engine's address. The
     * engine itself names these fields e->core.config, e->core.lock, ... */
    cr_engine_core core;

    pthread_t worker;
    /* Guarded by core.lock. */
    cr_transfer *incoming_head;
    cr_transfer *incoming_tail;
    uint64_t *cancels;
    size_t ncancels;
    size_t cap_cancels;
    int cancel_all;
    /* courier_engine_post: functions waiting to run on the worker, in the order they were posted. */
    struct cr_post *posts;
    size_t nposts;
    size_t cap_posts;
    /* The worker is in (or about to enter) curl_multi_poll with nothing left to do: a send from
     * another thread wakes it then, and only then (engine.c, courier_send; the worker clears it
     * when it takes the incoming list). */
    bool polling;
    int free_on_exit; /* closed from the worker itself: it frees the engine when its loop ends */
    cr_idset live; /* ids submitted and not yet completed */

    atomic_long active;

    /* Worker thread only. */
    cr_transfer *active_head;
    long idle_watch; /* transfers on the wire with an idle timeout (engine.c) */
    CURL **pool;
    cr_easy_set *pool_set; /* pool[i]'s options (transport.c's record), beside it */
    size_t npool;
    /* Scheduling (schedule.c): worker-only unless noted. */
    struct cr_sched *sched;
    atomic_int mock_enabled;     /* any thread */
    struct courier_call *external_done; /* guarded by core.lock: custom transports' completed calls */
    struct cr_monitor *monitor;   /* reachability (monitor.c); owned by the journal's lifetime */
    struct cr_catalog *catalog;           /* APIs, routes, response descriptors (catalog.c) */
    /* WebSockets (ws.c), worker only: the open ones, the poll set, and whether the close ended them. */
    struct courier_ws *ws_head;
    struct curl_waitfd *ws_fds;
    size_t ws_fds_cap;
    int ws_closed;
    long ws_pooled;              /* WebSockets whose easy handle is in the multi handle */
    long pool_host, pool_total;  /* libcurl's pool limits set at open (before WebSockets' room) */
    struct cr_stubs *stubs; /* stubs.c: stubs, their record, HAR recording (own lock); any thread */
    struct cr_hub *hub; /* session.c: answers of adapters, retriers and refreshes; the credential */
};
_Static_assert(offsetof(struct courier_engine, core) == 0, "cr_core(e) casts the engine to its first member");

/* engine.c's scheduler lists (worker only) and the guard send.c checks under core.lock. */
typedef struct cr_host_count {
    char *host;
    long active;
} cr_host_count;

struct cr_sched {
    cr_transfer *waiting[3]; /* FIFO per priority: [0] high, [1] normal, [2] low */
    cr_transfer *waiting_tail[3];
    cr_transfer *timers;     /* sorted by due_ms */
    cr_host_count *hosts;
    size_t nhosts;
    long active_http;
    uint64_t rng;
    struct cr_guard *guard; /* under the engine's lock */
    long guard_ms;
};

/* A function courier_engine_post asked the worker to run. */
struct cr_post {
    courier_work_fn fn;
    void *user;
};

/* store_dir.c, engine open: e->core.store_dir set to the configured directory (created when missing;
 * COURIER_E_STORE when it must exist and does not), the platform's default for the app, or a new
 * temporary one (store_is_temp). COURIER_E_STORE, COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_store_dir_open(courier_engine *e, courier_error *err);
/* store_dir.c, engine free: removes a temporary store directory and everything in it (no-op otherwise). */
CR_HIDDEN void cr_store_dir_remove_temp(courier_engine *e);

/* ==== Scheduling, mock, custom transports (schedule.c, mock.c) ================================ */

enum { CR_T_NEW = 0, CR_T_WAITING, CR_T_ACTIVE, CR_T_TIMER, CR_T_FOLLOWER, CR_T_CUSTOM };

typedef struct cr_interceptor {
    courier_before_send_fn before;
    courier_after_receive_fn after;
    cr_callback *owner; /* user + user_free */
} cr_interceptor;

typedef struct cr_transport_reg {
    char *name;
    courier_transport vt;
    cr_callback *owner;
} cr_transport_reg;

/* What a configuration says about scheduling (copied into the engine at open). */
typedef struct cr_sched_conf {
    cr_ext ext; /* schedule.c's hooks (request.c copies and frees it through them) */
    int has_retry;
    struct cr_retry_rule retry;
    long guard_ms;
    int mock_enabled;
    cr_interceptor *interceptors;
    size_t ninterceptors;
    cr_transport_reg *transports;
    size_t ntransports;
    struct courier_stub **stubs; /* stubs.c: immutable copies, one reference each */
    size_t nstubs;
    int stub_mode;
    struct cr_sess_conf *session; /* adapters, retriers, authenticator (session.c, a cr_ext); NULL: none */
} cr_sched_conf;

/* The configuration's scheduling part, made on first use. NULL on no memory. */
CR_HIDDEN cr_sched_conf *cr_sched_conf_of(courier_config *c);

/* ---- sessions: adapters, retriers, the authenticator (session.c) ------------------------------ */

/* What session.c asks of the worker's queues (engine.c), all on the worker thread. */
typedef struct cr_session_ops {
    /* Takes t (off every list) and holds it off the wire, on the timer list due never, where cancel
     * and close find it. */
    void (*park)(courier_engine *e, cr_transfer *t);
    /* The transfer with this id on the timer list, still waiting for its caller, or NULL. */
    cr_transfer *(*find)(courier_engine *e, uint64_t id);
    /* Takes a parked t off the timer list (its state NEW again). */
    void (*unpark)(courier_engine *e, cr_transfer *t);
    /* Routes t for its attempt (session work done: the mock, the custom transport or the queue). */
    void (*go)(courier_engine *e, cr_transfer *t);
    /* Tries t again after delay_ms (its failed attempt: code and resp, taken). */
    void (*retry)(courier_engine *e, cr_transfer *t, int code, courier_response *resp, long delay_ms);
    /* Gives (code, resp) to t's caller and its followers, then frees t. */
    void (*deliver)(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err);
} cr_session_ops;

/* Engine open (after the configuration was copied) and engine_free (first: later answers become
 * no-ops). COURIER_OK or COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_session_open(courier_engine *e, const cr_session_ops *ops);
CR_HIDDEN void cr_session_detach(courier_engine *e);
/* send.c, after the transfer is prepared (sending thread): the engine's and the request's adapters
 * and retriers, and whether the authenticator applies to t->url, into t->sess (left NULL when
 * nothing applies). COURIER_OK or COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_session_prepare(courier_engine *e, const courier_request *r, cr_transfer *t);
/* Worker, from route: true when t's session work for this attempt is done (route goes on); false
 * when session.c took t (it parks it, and routes it through ops->go when done). */
CR_HIDDEN bool cr_session_ready(courier_engine *e, cr_transfer *t);
/* Worker, first thing after an attempt of a transfer with t->sess: puts back the request as it was
 * before the adapters and the authenticator, then judges a refused credential: true when session.c
 * took t (sent again, waiting for a refresh, or failed by the loop guard). */
CR_HIDDEN bool cr_session_after_attempt(courier_engine *e, cr_transfer *t, int code, courier_response *resp,
                                        courier_error *err);
/* Worker, when the fixed rule did not retry a failure: true when a retrier was asked (session.c
 * took t and resp). */
CR_HIDDEN bool cr_session_ask_retriers(courier_engine *e, cr_transfer *t, int code, courier_response *resp,
                                       courier_error *err);
/* Worker, each turn: the adaptations, retry answers and refresh results given since the last. */
CR_HIDDEN void cr_session_turn(courier_engine *e);


/* schedule.c: the worker's side of scheduling. */
/* send.c: courier_send, for a stream too (stream_send.c): with `stream`, the transfer reads its
 * body into it (stream.c) and is never frozen, cached or coalesced. */
CR_HIDDEN int cr_send(uint64_t *out_id, courier_engine *e, const courier_request *r, courier_completion_fn done,
                      void *user, courier_stream *stream, courier_error *err);
CR_HIDDEN int cr_sched_new(courier_engine *e);
CR_HIDDEN void cr_sched_free(courier_engine *e);
/* Prepare-time work on the sending thread: host, priority, retry rule, coalesce key, mock copy,
 * transport, interceptors' before-send, and the frequent-request guard. */
CR_HIDDEN int cr_sched_prepare(courier_engine *e, const courier_request *r, cr_transfer *t, courier_outgoing *o,
                               courier_error *err);
/* After the outgoing view became the transfer: host key and coalescing key. */
CR_HIDDEN int cr_sched_finish_prepare(const courier_request *r, cr_transfer *t, courier_error *err);
/* The frequent-request guard: COURIER_OK (and recorded) or COURIER_E_TOO_FREQUENT. Caller holds
 * the engine's lock. *g is made on first use. */
struct cr_guard;
CR_HIDDEN int cr_guard_check(struct cr_guard **g, long window_ms, const cr_transfer *t, courier_error *err);
CR_HIDDEN void cr_guard_free(struct cr_guard *g);
/* "scheme://host:port" of a valid absolute URL (new), the per-host limits' key; NULL on no memory. */
CR_HIDDEN char *cr_sched_host_key(const char *url);
/* Whether a transfer that ended with (code, resp) is tried again: the delay in ms, or -1. */
CR_HIDDEN long cr_retry_delay(const cr_transfer *t, int code, const courier_response *resp, uint64_t *rng);


/* stubs.c: engine-wide stubs and HAR (the public part: courier.h). */
/* The engine's state, made from its configuration's stubs and mode at open; freed at close. */
CR_HIDDEN int cr_stubs_open(courier_engine *e);
CR_HIDDEN void cr_stubs_close(courier_engine *e);
/* A copy of a stub with its own place in the answers: COURIER_E_INVALID_ARGUMENT (NULL, no answer)
 * or COURIER_E_NO_MEMORY. courier_config_add_stub (schedule.c) keeps such copies. */
CR_HIDDEN int cr_stub_copy(courier_stub **out, const courier_stub *src);
/* The configuration's stubs: a copy of the list (references) for a configuration copy, and release. */
CR_HIDDEN int cr_stubs_conf_copy(cr_sched_conf *dst, const cr_sched_conf *src);
CR_HIDDEN void cr_stubs_conf_clear(cr_sched_conf *c);
/* Sending thread, prepare time (t final, no mock, no custom transport): offers t to the stubs when
 * the mode is not OFF (predicates run here) and sets t->stub. A match sets t->mock to the stub's
 * coming answer; an unmatched request in COURIER_STUBS_ONLY gets a mock failing with
 * COURIER_E_NO_STUB. Nothing is taken or recorded yet (a cache hit may answer). OK or NO_MEMORY. */
CR_HIDDEN int cr_stubs_offer(courier_engine *e, cr_transfer *t, courier_error *err);
/* Worker, route(), each attempt of a transfer with t->stub: records it and puts the stub's next
 * answer in t->mock (kept on no memory). Returns the ms a retry's answer waits (its delay, the
 * caller sets the timer), else 0; the call when that timer fires takes nothing. */
CR_HIDDEN long cr_stubs_take(courier_engine *e, cr_transfer *t);
/* Worker, after every attempt: the HAR entry of (t, resp) when recording. */
CR_HIDDEN void cr_har_observe(courier_engine *e, const cr_transfer *t, int code, const courier_response *resp);
/* har.c, under the stubs' lock: a new HAR log (jansson), the entry of an exchange appended to it,
 * and the log written to path (a temporary file renamed over it). */
CR_HIDDEN void *cr_har_new_log(void);
CR_HIDDEN void cr_har_free_log(void *log);
CR_HIDDEN int cr_har_append(void *log, const cr_transfer *t, const courier_response *resp);
CR_HIDDEN int cr_har_write(void *log, const char *path, courier_error *err);
/* har.c: reads a HAR file and calls each(ctx, entry, err) per entry in order (the entry borrowed
 * for the call: the response's status, its headers but Content-Length, Content-Encoding and
 * Transfer-Encoding, its body decoded from base64 when so encoded). Stops at the first failure
 * (each's code). COURIER_E_NOT_FOUND (no file), COURIER_E_JSON (not a HAR, or an entry without
 * request.method, request.url or response.status), COURIER_E_NO_MEMORY. */
typedef struct cr_har_entry {
    const char *method;
    const char *url;
    int status;
    cr_kvlist headers;
    const char *body;
    size_t body_len;
} cr_har_entry;
CR_HIDDEN int cr_har_read(const char *path, int (*each)(void *ctx, const cr_har_entry *entry, courier_error *err),
                          void *ctx, courier_error *err);

/* monitor.c. The engine opens it before the journal and closes it after. `changed` is told when
 * the effective state changed (CR_WAKE_TURN, with CR_WAKE_REPLAY_NOW when it became online): the
 * engine passes the journal's cr_journal_wake. */
CR_HIDDEN int cr_monitor_open(courier_engine *e, void (*changed)(courier_engine *e, unsigned how), courier_error *err);
CR_HIDDEN void cr_monitor_close(courier_engine *e);
/* Worker, after every attempt (mocks and custom transports are ignored): a response means online;
 * cannot-resolve / cannot-connect mean offline when the configuration says so. */
CR_HIDDEN void cr_monitor_observe(courier_engine *e, const cr_transfer *t, int code, const courier_response *resp);
/* Any thread: the monitor says offline. */
CR_HIDDEN bool cr_monitor_offline(courier_engine *e);
/* Worker, before an attempt goes on the wire: true when it must fail with COURIER_E_OFFLINE. */
CR_HIDDEN bool cr_monitor_blocks(courier_engine *e, const cr_transfer *t);
/* Journal thread: runs a due probe; returns the monotonic ms of the next one (INT64_MAX: none). */
CR_HIDDEN int64_t cr_monitor_tick(courier_engine *e, int64_t mono_ms);
/* Journal thread: gives a changed state to the listeners. */
CR_HIDDEN void cr_monitor_dispatch(courier_engine *e);
/* Any thread: a source's report (the OS watch, or courier_reachability_report): status (UNKNOWN:
 * leaves online/offline as it is), kind and expensive. A change of kind applies that kind's limits
 * at once (the worker is woken to start or fail what waits; the journal's replay concurrency). */
CR_HIDDEN void cr_monitor_report(courier_engine *e, int status, courier_network_kind kind, int expensive);
/* Engine open, once the worker's multi handle exists: starts the OS watch when configured. */
CR_HIDDEN void cr_monitor_start_watch(courier_engine *e);
/* Worker: the request limits of the current kind (the engine's own where the kind sets none). */
CR_HIDDEN void cr_monitor_limits(courier_engine *e, long *per_host, long *total);
/* Worker: true when t must fail with COURIER_E_CELLULAR (it said "not on cellular"). */
CR_HIDDEN bool cr_monitor_refuses(courier_engine *e, const cr_transfer *t);
/* netwatch.c: the OS watch (a thread, or the platform's monitor) reporting each change of the path
 * to `report` (the monitor's cr_monitor_report: netwatch.c stands below monitor.c and never names
 * it), from the watch's own thread or queue; NULL when it cannot start or the platform has none. */
struct cr_netwatch;
typedef void (*cr_netwatch_report_fn)(courier_engine *e, int status, courier_network_kind kind, int expensive);
CR_HIDDEN struct cr_netwatch *cr_netwatch_start(courier_engine *e, cr_netwatch_report_fn report);
CR_HIDDEN void cr_netwatch_stop(struct cr_netwatch *w);

/* ---- APIs, routes, response descriptors by name (catalog.c) ------------------------------------ */

CR_HIDDEN int cr_catalog_new(courier_engine *e);
CR_HIDDEN void cr_catalog_free(courier_engine *e);
/* At send: the response descriptors whose method and path pattern match r go into t's jspec. */
CR_HIDDEN int cr_catalog_attach(courier_engine *e, const courier_request *r, cr_transfer *t);

/* ---- WebSockets (ws.c), called by the worker's loop (engine.c) ------------------------------------ */

/* The WebSocket whose connect-only transfer `easy` is, or NULL. */
CR_HIDDEN struct courier_ws *cr_ws_of_easy(courier_engine *e, CURL *easy);
/* Its transfer reported CURLMSG_DONE: connected (the handle stays in the multi handle), or failed. */
CR_HIDDEN void cr_ws_connected(courier_engine *e, struct courier_ws *ws, CURLcode result);
/* Every turn: each WebSocket's reads, writes and timers; ended ones are taken off. Returns the ms
 * until the next timer (-1: none). */
CR_HIDDEN int cr_ws_turn(courier_engine *e);
/* The sockets to poll (POLLIN always, POLLOUT while something waits to be written) into *fds
 * (grown as needed, owned by the engine); returns how many. */
CR_HIDDEN size_t cr_ws_poll_fds(courier_engine *e, struct curl_waitfd **fds, size_t *cap);
/* The engine is closing: every WebSocket ends with COURIER_E_CLOSED and is taken off. */
CR_HIDDEN void cr_ws_engine_closing(courier_engine *e);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* COURIER_ENGINE_H */
