/*
 * courier/frozen.h — frozen requests (the durable offline journal, replay, events) and resend
 * policies.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_FROZEN_H
#define COURIER_INC_FROZEN_H

#include "base.h"
#include "network.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Frozen requests: a durable offline journal, replay, events                                  */
/* ========================================================================================== */

/* A request whose freeze policy allows it, sent while the network monitor says offline or failing
 * with a network-level error, is written to the engine's journal (<store>/journal, an LMDB
 * environment of its own whose commits are synced) and its completion runs once with
 * COURIER_E_FROZEN, only after the commit is on disk. It is sent again later, by this process or
 * any other that opens the same store: when the monitor says online, at the next engine open, and
 * on its own backoff timer. The journal keeps everything needed to send it in any process and any
 * language (method, effective URL, headers, body, timeout, cache policy and expiry, retry rule,
 * priority, JSON key path and result names; not callbacks: validators, customize callbacks and
 * mapping objects live in memory only), plus an idempotency key generated once, at freeze time,
 * and sent as "Idempotency-Key" with every resend (a request that carries its own Idempotency-Key
 * keeps it), so a server that honours the header applies a replayed POST once.
 *
 * Replay: oldest first; the requests to one host ("scheme://host:port") go one at a time, a later
 * one never before an earlier one has a final answer, unless frozen with COURIER_FREEZE_UNORDERED
 * (such a request neither waits nor is waited for); at most `concurrency` replays in flight per
 * engine; a failed attempt waits base * 2^(attempts-1) ms (capped, with jitter) before the next,
 * kept in the journal across restarts. A final answer (a response, including an HTTP status below
 * 500 other than 408, 425 and 429, or a non-retryable failure) removes the request in the same
 * transaction that records the outcome (courier_frozen_last_outcome). A retryable failure (network
 * errors, timeouts, 408, 425, 429, 5xx) keeps it for the next attempt. Replays go through
 * courier_send, so the engine's retry rule, cache and mapping apply to them as to any request.
 * Answers are recorded in groups: one synced commit records the answers of the replays that
 * finished since the last one (the journal waits at most 2 ms for more while replays are on the
 * wire), and their RESENT_* events are delivered after that commit.
 * At least once: a crash at any point, including between an answer and the commit that records
 * it, sends a request again (with the same idempotency key), and never loses one.
 * Expired requests are removed and reported (COURIER_FROZEN_EVENT_EXPIRED), never sent.
 * Several processes (and engines) on one store: a request is claimed in a transaction with a lease
 * before it is sent, so one replayer sends it; a claim whose process died (or whose engine closed,
 * or whose lease ended) is taken over. */

/* Freeze policies. */
typedef enum courier_freeze_policy {
    COURIER_FREEZE_NEVER = 0,  /* the default: a failure is the caller's */
    COURIER_FREEZE_AUTO = 1,   /* frozen when offline or on a network failure; resent automatically */
    COURIER_FREEZE_MANUAL = 2  /* frozen likewise; kept until the app resends it (courier_frozen_resend,
                                  courier_frozen_replay with COURIER_REPLAY_MANUAL) or removes it */
} courier_freeze_policy;

/* Freeze flags. */
#define COURIER_FREEZE_UNORDERED 0x1u    /* not kept in its host's order */
#define COURIER_FREEZE_ON_AMBIGUOUS 0x2u /* also freeze on a timeout, reset or partial response: the
                                            request may have reached the server (by default only
                                            cannot-resolve, cannot-connect and offline freeze) */
/* Longest freeze id, in bytes. Ids are 1..128 of A-Z a-z 0-9 and "-._~:@+=". */
#define COURIER_FROZEN_ID_MAX 128

/* The request's freeze policy (a courier_freeze_policy), expiry in ms after freezing (0: the
 * engine's default, 24 hours unless configured) and flags (COURIER_FREEZE_*).
 * Errors: COURIER_E_INVALID_ARGUMENT (unknown policy or flags, negative expiry). */
COURIER_API int courier_request_set_freeze(courier_request *request, courier_freeze_policy policy, int64_t expiry_ms,
                                           unsigned flags);
/* The freeze id to find the request again (copied). NULL (the default) generates one (32 hex
 * digits) at freeze time. Freezing a request whose id is already in the journal replaces the older
 * request (the newer description of one action wins; it takes the newer place in the order).
 * Errors: COURIER_E_INVALID_ARGUMENT (not 1..COURIER_FROZEN_ID_MAX allowed characters). */
COURIER_API int courier_request_set_freeze_id(courier_request *request, const char *id);
/* Nonzero: send even while the network monitor says offline ("try anyway"). Default 0: such a
 * send fails at once with COURIER_E_OFFLINE (its completion runs with it, from the worker thread,
 * without waiting for a timeout) or, when its policy allows, is frozen. */
COURIER_API int courier_request_set_ignore_offline(courier_request *request, int ignore);
/* The completion of a send that ends frozen runs on the engine's journal thread (one per engine),
 * after the commit, not on the worker thread: it must not wait for another send
 * (courier_send_sync) there. */
/* The freeze id of a COURIER_E_FROZEN error, or NULL for any other. Borrowed from *err. */
COURIER_API const char *courier_error_freeze_id(const courier_error *err);

/* Replay settings of engines opened with this configuration: replays in flight at most
 * (`concurrency` > 0; 0: 4), and the backoff between failed attempts of one request: base_ms
 * * 2^(attempts-1), at most max_ms, with jitter (a random wait between half and all of it); 0:
 * 1 000 ms and 300 000 ms. Errors: COURIER_E_INVALID_ARGUMENT (negative, max < base). */
COURIER_API int courier_config_set_frozen_replay(courier_config *config, int concurrency, int64_t backoff_base_ms,
                                                 int64_t backoff_max_ms);
/* The expiry of frozen requests that name none, in ms (0: 24 hours). */
COURIER_API int courier_config_set_frozen_expiry_ms(courier_config *config, int64_t expiry_ms);
/* How long a claim holds when its owner stays alive but silent, in ms (0: 300 000). A claim whose
 * owner died, or whose lease ended, is taken over at the engine's next look for work others left:
 * when it opens, on courier_frozen_replay, and every poll interval (courier_config_set_frozen_poll_ms).
 * Keep it longer than a request's timeout times its attempts. */
COURIER_API int courier_config_set_frozen_lease_ms(courier_config *config, int64_t lease_ms);
/* How often the engine looks for work that others left (requests frozen by other processes,
 * claims of the dead and claims whose lease ended), in ms (0: 10 000). */
COURIER_API int courier_config_set_frozen_poll_ms(courier_config *config, int64_t poll_ms);
/* Where the journal of frozen requests lives, apart from the cache: NULL or "" (the default) the
 * engine's store directory (LMDB, in "<dir>/journal"); another directory (LMDB there); or a Redis
 * URL, "redis://[:password@]host:port[/db]" (or a Redis Cluster's, "redis+cluster://host:port,
 * host:port/", seed nodes: docs/design/redis-cluster.md), when the library was built with Redis stores: the
 * requests then live on a Redis stream with a consumer group, shared by every engine, process and
 * machine that names the same Redis (docs/design/redis.md, "The journal on Redis"); the store directory
 * still keeps the cookie jar. Copied. Checked at engine open: a malformed Redis URL fails it with
 * COURIER_E_INVALID_ARGUMENT, a build without Redis with COURIER_E_REDIS_UNSUPPORTED; Redis is
 * not asked then, so an engine opens while Redis is down. Until Redis answers, the courier_frozen_*
 * calls fail with COURIER_E_REDIS and a send that would be frozen ends with its own error (not
 * frozen); once it answers (a restart too) the same engine freezes and replays again. A setting
 * that looks like a URL of another scheme or a mistyped one ("redis//h", "redis:/h") is refused
 * here, as by courier_config_set_cache_store. Not thread-safe: the configuration's thread, before
 * the engine opens (as every setter here).
 * Errors: COURIER_E_INVALID_ARGUMENT (1024 bytes or longer, a mistyped URL). */
COURIER_API int courier_config_set_frozen_store(courier_config *config, const char *location);
/* A freeze on a Redis journal is acknowledged (COURIER_E_FROZEN) only once `replicas` replicas of
 * its master have it: the freeze's script is followed by `WAIT replicas timeout_ms` on the same
 * connection. When fewer confirm within timeout_ms, the send ends with
 * COURIER_E_REPLICAS_UNCONFIRMED (-66) instead of COURIER_E_FROZEN: not acknowledged, though the
 * record is in the journal and may still be replayed. 0 (the default): no WAIT, acknowledged once
 * the master has it (asynchronous replication: a master lost before its replica copied the freeze
 * loses it). An LMDB journal has no replicas: the setting is ignored there. What N = 0, N = 1 and
 * appendfsync always promise: docs/design/redis-cluster.md. Not thread-safe (as every setter here).
 * Errors: COURIER_E_INVALID_ARGUMENT (replicas < 0 or > 64, timeout_ms < 1 with replicas > 0:
 * WAIT 0 would wait for ever, or timeout_ms < 0). */
COURIER_API int courier_config_set_frozen_replicas(courier_config *config, int replicas, int64_t timeout_ms);
/* Nonzero: the engine opens with automatic replay paused (courier_frozen_resume starts it), e.g.
 * to add event listeners first, or for tools that only look at the journal. */
COURIER_API int courier_config_set_frozen_paused(courier_config *config, int paused);

/* Pauses or resumes automatic replay (at open, when the network comes back, on backoff timers): a
 * paused engine sends no frozen request of its own accord. Explicit replays (courier_frozen_replay,
 * courier_frozen_resend) run either way. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_frozen_pause(courier_engine *engine);
COURIER_API int courier_frozen_resume(courier_engine *engine);

/* Replay flags. */
#define COURIER_REPLAY_MANUAL 0x1u /* include COURIER_FREEZE_MANUAL requests */
/* Replays now: every request not tried since this call is due at once, whatever its backoff (per-
 * host order and the concurrency bound still hold), sent even while the monitor says offline.
 * Returns at once; answers arrive as events. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_JOURNAL_CORRUPT. */
COURIER_API int courier_frozen_replay(courier_engine *engine, unsigned flags, courier_error *err);
/* Sends one frozen request now, whatever its policy, order or backoff (unless another replayer
 * holds it). Returns at once; the answer arrives as an event. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND, COURIER_E_STORE. */
COURIER_API int courier_frozen_resend(courier_engine *engine, const char *id, courier_error *err);
/* Waits until this engine's journal has nothing in flight, nothing queued and nothing it would
 * send now (requests waiting for a later backoff time, held by other replayers, or not sent
 * because replay is paused or the monitor says offline do not count). Any thread except the
 * engine's worker and journal threads (never from a callback). Returns COURIER_OK, or
 * COURIER_E_TIMEOUT after timeout_ms. */
COURIER_API int courier_frozen_wait_idle(courier_engine *engine, int64_t timeout_ms);

/* One frozen request as it was read (a snapshot): immutable, any thread. */
typedef struct courier_frozen courier_frozen;
typedef struct courier_frozen_list courier_frozen_list;

/* Numbers of a frozen request. */
typedef struct courier_frozen_info {
    size_t size;             /* sizeof(courier_frozen_info), set by the caller */
    courier_freeze_policy policy;
    unsigned flags;          /* COURIER_FREEZE_* */
    int64_t timeout_ms;
    int attempts;            /* resends started */
    int last_code;           /* the last attempt's code (0 before any); COURIER_E_JOURNAL_CORRUPT for
                                a record that does not decode (listed so it can be removed) */
    int last_status;         /* the last attempt's HTTP status, 0 if none */
    int claimed;             /* nonzero while a replayer holds it */
    int64_t created_ms;      /* when it was frozen (ms since the Unix epoch, engine clock) */
    int64_t expires_ms;      /* removed, never sent, from then on */
    int64_t next_attempt_ms; /* not resent automatically before (0: at once) */
    int64_t last_attempt_ms; /* 0 before any */
} courier_frozen_info;

/* Every frozen request of the engine's store, oldest first. *out new: courier_frozen_list_free.
 * Any thread. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_STORE, COURIER_E_JOURNAL_CORRUPT,
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_frozen_list_requests(courier_frozen_list **out, courier_engine *engine, courier_error *err);
COURIER_API size_t courier_frozen_list_count(const courier_frozen_list *list);
/* The i-th (0-based) or NULL. Borrowed until the list is freed. */
COURIER_API const courier_frozen *courier_frozen_list_at(const courier_frozen_list *list, size_t index);
/* Accepts NULL. */
COURIER_API void courier_frozen_list_free(courier_frozen_list *list);
/* The frozen request with this id. *out new: courier_frozen_free.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND, COURIER_E_STORE, COURIER_E_JOURNAL_CORRUPT. */
COURIER_API int courier_frozen_get(courier_frozen **out, courier_engine *engine, const char *id, courier_error *err);
/* Accepts NULL. */
COURIER_API void courier_frozen_free(courier_frozen *frozen);
/* Removes one (if a replay of it is on the wire, its answer is still reported, then forgotten).
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND, COURIER_E_STORE. */
COURIER_API int courier_frozen_remove(courier_engine *engine, const char *id, courier_error *err);
/* Removes every frozen request; *out_removed (may be NULL) receives how many. */
COURIER_API int courier_frozen_remove_all(int64_t *out_removed, courier_engine *engine, courier_error *err);
/* How many frozen requests the store holds. */
COURIER_API int courier_frozen_count(int64_t *out_count, courier_engine *engine, courier_error *err);
/* The recorded final answer of a request that left the journal (the last 1 000 are kept): its
 * code, HTTP status (0 if none) and time. Each out pointer may be NULL.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND. */
COURIER_API int courier_frozen_last_outcome(int *out_code, int *out_http_status, int64_t *out_at_ms,
                                            courier_engine *engine, const char *id, courier_error *err);

/* Fields of a snapshot, borrowed until it is freed. Never NULL for a valid snapshot. */
COURIER_API const char *courier_frozen_id(const courier_frozen *frozen);
COURIER_API const char *courier_frozen_method(const courier_frozen *frozen);
COURIER_API const char *courier_frozen_url(const courier_frozen *frozen);
/* "scheme://host:port", the unit of per-host order. */
COURIER_API const char *courier_frozen_host(const courier_frozen *frozen);
COURIER_API const char *courier_frozen_idempotency_key(const courier_frozen *frozen);
/* The stored record with its replay state, as one JSON object (the journal's own format:
 * docs/design/journal.md, "Records"). */
COURIER_API const char *courier_frozen_json(const courier_frozen *frozen);
/* The body, or NULL when the request has none; *len (may be NULL) receives its length. */
COURIER_API const uint8_t *courier_frozen_body(const courier_frozen *frozen, size_t *len);
/* The headers that are sent (Idempotency-Key included), in order. Errors: COURIER_E_NOT_FOUND. */
COURIER_API size_t courier_frozen_header_count(const courier_frozen *frozen);
COURIER_API int courier_frozen_header_at(const char **out_name, const char **out_value, const courier_frozen *frozen,
                                         size_t index);
/* Copies the numbers (the fields within out->size, set by the caller). */
COURIER_API int courier_frozen_get_info(courier_frozen_info *out, const courier_frozen *frozen);

/* Events of frozen requests. */
typedef enum courier_frozen_event_kind {
    COURIER_FROZEN_EVENT_FROZEN = 1,           /* written to the journal (after the commit) */
    COURIER_FROZEN_EVENT_RESENT_SUCCEEDED = 2, /* a resend got a final, successful answer; removed */
    COURIER_FROZEN_EVENT_RESENT_FAILED = 3,    /* a resend failed: `final` says whether it was removed
                                                  (a non-retryable answer) or will be tried again */
    COURIER_FROZEN_EVENT_EXPIRED = 4,          /* its expiry passed: removed, never sent again */
    COURIER_FROZEN_EVENT_POLICY_UNKNOWN = 5,   /* its resend policy is not registered in this engine:
                                                  kept, never sent or deleted by it; once per request
                                                  and engine */
    COURIER_FROZEN_EVENT_DELETED = 6           /* its resend policy's can_delete said yes: removed, never
                                                  sent again (outcome COURIER_E_DELETED_BY_POLICY) */
} courier_frozen_event_kind;

/* One event, borrowed for the duration of the call (copy what you keep). The struct only grows at
 * the end: `size` is its size as the library knows it. */
typedef struct courier_frozen_event {
    size_t size;                      /* set by the library */
    courier_frozen_event_kind kind;
    const char *freeze_id;
    const courier_frozen *frozen;     /* the request (as claimed, for resends) */
    uint64_t request_id;              /* FROZEN: the original send's id; RESENT_*: the resend's id */
    int code;                         /* RESENT_*: the resend's result */
    int final;                        /* RESENT_FAILED: 1 when removed; RESENT_SUCCEEDED, EXPIRED: 1 */
    int attempts;                     /* resends started so far */
    const courier_response *response; /* RESENT_*: the response when one arrived, else NULL */
    const courier_error *error;       /* RESENT_FAILED: the detail */
    const char *reason;               /* POLICY_UNKNOWN "not_registered", DELETED "can_delete", EXPIRED
                                         "expired"; NULL otherwise (static storage) */
} courier_frozen_event;

/* Runs on the engine's journal thread, one event at a time, in the order things happened there.
 * Events reach only the listeners of the engine where they happen: the engine that froze the
 * request (FROZEN), the engine that replayed or removed it (RESENT_*, EXPIRED). Other processes
 * sharing the store do not see them (they see the journal itself: list, count, last outcome).
 * Must not block for long and must not close the engine; may send requests and use the journal. */
typedef void (*courier_frozen_event_fn)(const courier_frozen_event *event, void *user);

/* Adds a listener; *out_token (may be NULL) receives its token, never 0. user_free (may be NULL)
 * runs once when it is removed or the engine closes (or at once if this fails). Listeners added
 * after open miss events of replays already started: open with courier_config_set_frozen_paused
 * and resume after adding them. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. */
COURIER_API int courier_frozen_add_listener(uint64_t *out_token, courier_engine *engine, courier_frozen_event_fn fn,
                                            void *user, courier_user_free_fn user_free);
/* Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_NOT_FOUND. A call in progress may still finish. */
COURIER_API int courier_frozen_remove_listener(courier_engine *engine, uint64_t token);

/* ========================================================================================== */
/* Resend policies: which frozen requests are sent or deleted, and when                        */
/* ========================================================================================== */

/* A frozen request names a resend policy by id (courier_request_set_resend_policy); the id is
 * written in its journal record ("resend_policy"), so every process that replays the store finds
 * it. Before each automatic replay (at open, when the network comes back, on backoff timers, and
 * courier_frozen_replay) the replaying engine asks the policy registered under that id in that
 * engine: can_delete first (yes: removed, never sent, COURIER_FROZEN_EVENT_DELETED), then can_send
 * (no: kept, asked again at the next poll, network change or replay). courier_frozen_resend (one
 * request by id) and courier_frozen_remove are the app's word and skip the policy. A request whose
 * id no policy of the replaying engine has is kept there, never sent or deleted (its expiry
 * included), and reported once per request and engine (COURIER_FROZEN_EVENT_POLICY_UNKNOWN and a
 * journal_policy log line); a process that knows the id replays it.
 *
 * Built-in policies, registered in every engine under reserved ids (ids starting "courier." are
 * reserved); every known policy's request is also removed once its expiry passes:
 *   "courier.auto"    sent whenever due (the default of COURIER_FREEZE_AUTO)
 *   "courier.manual"  only when the app resends or replays with COURIER_REPLAY_MANUAL (the default
 *                     of COURIER_FREEZE_MANUAL)
 *   "courier.online"  sent only while the monitor says online (UNKNOWN is not enough): "send when
 *                     the network is back"
 *   "courier.expire"  sent whenever due and dropped when the freeze has expired, nothing more (the
 *                     design's rule; it decides as courier.auto does)
 *   "courier.start"   sent only by a replay of an engine opened after it was frozen and last tried:
 *                     "resend at the next start" (at most one automatic attempt per engine open) */
#define COURIER_RESEND_POLICY_ID_MAX 64

/* A policy's question about one frozen request: `frozen` is a read-only snapshot (its id, method,
 * URL, headers, body, courier_frozen_get_info's attempts, last code and status, created and expires
 * times, courier_frozen_resend_policy), `age_ms` the time since it was frozen (engine clock), and
 * `reachability` the engine's current courier_reachability. Nonzero means yes. Runs on the engine's
 * journal or worker thread, outside any journal transaction; must not block for long or close the
 * engine. */
typedef int (*courier_resend_policy_fn)(const courier_frozen *frozen, int64_t age_ms,
                                        courier_reachability reachability, void *user);

/* Registers a policy under `id` (1..COURIER_RESEND_POLICY_ID_MAX of A-Z a-z 0-9 and "-._~:@+=", not
 * starting "courier."), replacing one registered under it before. can_send NULL: always yes;
 * can_delete NULL: never. user_free (may be NULL) runs once, after the last call, when the policy
 * is removed or replaced or the engine closes (or at once if this fails). Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL engine, bad or reserved id), COURIER_E_CLOSED,
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_resend_policy_add(courier_engine *engine, const char *id, courier_resend_policy_fn can_send,
                                          courier_resend_policy_fn can_delete, void *user,
                                          courier_user_free_fn user_free, courier_error *err);
/* Removes the policy registered under `id`; this engine's requests that name it are then kept
 * (reported as unknown). A call in progress may still finish. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, a reserved id), COURIER_E_NOT_FOUND. */
COURIER_API int courier_resend_policy_remove(courier_engine *engine, const char *id, courier_error *err);
/* The request's resend policy (copied); NULL restores the freeze policy's default ("courier.auto" or
 * "courier.manual"). "courier.manual" keeps it out of automatic replay like COURIER_FREEZE_MANUAL.
 * A freezable send naming an id its engine has no policy for fails with
 * COURIER_E_RESEND_POLICY_UNKNOWN. Errors: COURIER_E_INVALID_ARGUMENT (NULL request, bad id). */
COURIER_API int courier_request_set_resend_policy(courier_request *request, const char *id, courier_error *err);
/* The id of a frozen request's resend policy ("courier.auto" or "courier.manual" when it named
 * none). Borrowed until the snapshot is freed; NULL for NULL. */
COURIER_API const char *courier_frozen_resend_policy(const courier_frozen *frozen);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_FROZEN_H */
