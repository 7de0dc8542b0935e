/*
 * courier/engine.h — opening and closing an engine, its worker thread, its store directory, the
 * connection pool's figures.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_ENGINE_H
#define COURIER_INC_ENGINE_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Engine                                                                                      */
/* ========================================================================================== */

/* Opens an engine: validates the configuration, creates the store directory, starts the worker
 * thread. `config` is borrowed for the call (NULL means all defaults). *out is new: release it with
 * courier_engine_close. Any thread.
 * Proxies come from the environment as libcurl reads them (http_proxy, https_proxy, all_proxy,
 * no_proxy) unless courier_config_set_proxy set one; whether any is set is read once, here. The
 * cookie jar is read from the store here (courier_config_set_cookies). A cache the configuration
 * names (courier_config_set_cache_store, or a default cache policy) is opened here.
 * Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_STORE (the store directory or the cache's store
 * cannot be created or opened; os_error or store_error set), COURIER_E_NO_MEMORY,
 * COURIER_E_INTERNAL (libcurl or the thread could not start). */
COURIER_API int courier_engine_open(courier_engine **out, const courier_config *config, courier_error *err);

/* Closes an engine: every request still queued or in flight completes with COURIER_E_CANCELLED,
 * exactly once, on the worker thread, before this returns; then the worker stops and all memory is
 * released. Accepts NULL. Any thread. Called from inside one of the engine's own callbacks (on its
 * worker thread, e.g. when a binding drops its last reference there), it returns at once: the
 * worker cancels what is left after the callback returns, then frees the engine itself. The
 * handle must not be used after this call either way. */
COURIER_API void courier_engine_close(courier_engine *engine);

/* A function the engine's worker thread runs for courier_engine_post. */
typedef void (*courier_work_fn)(void *user);

/* Runs fn(user) on the engine's worker thread, once, soon: at the start of the worker's next turn
 * (from one of the engine's own callbacks: within the same burst of work, before the worker waits
 * for the network again), in the order the posts were made. While fn runs the worker does nothing
 * else, so fn must not block for long; it may send (courier_send: the request joins that turn's
 * sends with no wakeup), cancel and post again, and must not call courier_send_sync or close the
 * engine. A function posted before courier_engine_close began runs before the worker stops (after
 * the cancelled completions), so `user` is never left behind. This is what an executor needs to
 * run a language's tasks on the worker, so a task that sends the next request when its response
 * arrives changes no thread (Swift: Engine.taskExecutor). `user` is the caller's; the engine never
 * frees it. Any thread.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL engine or fn), COURIER_E_CLOSED (the engine is closing:
 * fn will not run), COURIER_E_NO_MEMORY (fn will not run). */
COURIER_API int courier_engine_post(courier_engine *engine, courier_work_fn fn, void *user, courier_error *err);

/* The engine's store directory. Borrowed: valid until the engine closes. Any thread. */
COURIER_API const char *courier_engine_store_dir(const courier_engine *engine);

/* Counts of the requests whose caller has not been answered yet: waiting (queued under the limits,
 * for a retry or a mock's delay, or sharing another's answer) and on the wire. A request leaves
 * the counts just before its completion runs. Any thread. */
COURIER_API int courier_engine_pending(int64_t *out_queued, int64_t *out_active, const courier_engine *engine);

/* ========================================================================================== */
/* The connection pool's figures                                                               */
/* ========================================================================================== */

/* The engine's connections to one host, or to all of them (courier_pool_figures_total). A
 * connection counts from the moment a request's first bytes are about to go on it (after its TCP
 * connect and TLS handshake; a connect that fails is never counted) until libcurl closes it: when
 * the server closes it, when one more idle connection than courier_config_set_max_idle_connections
 * allows is put back, or when a connection idle past courier_config_set_idle_connection_timeout_ms
 * is found by the engine looking for one (the next request's connect, at most once a second; an
 * expired connection stays open, and counted idle, until then). WebSockets' connections are not
 * counted. */
typedef struct courier_pool_host {
    size_t size;       /* sizeof(courier_pool_host), set by the caller */
    const char *host;  /* "scheme://host:port" as the URL names it (lowercase; the default port
                          written out), whatever resolve, connect_to or a Unix socket made of it;
                          borrowed until the figures are freed. NULL in the total */
    int64_t open;      /* connections open now: idle + in_use */
    int64_t idle;      /* open with no request on it: kept for reuse */
    int64_t in_use;    /* open with a request on it (over HTTP/2, one or more) */
    int64_t opened;    /* connections made since the engine opened */
    int64_t reused;    /* requests sent on a connection already open, since the engine opened */
} courier_pool_host;

/* A snapshot of the pool, taken at once: one courier_pool_host per host the engine made a
 * connection to since it opened (in the order they came; hosts with no connection open stay,
 * with their totals). Over a Unix-domain socket, connections of one host are told apart by count
 * only (a socket has no local address): the figures are right, which connection was reused is not
 * known. */
typedef struct courier_pool_figures courier_pool_figures;
/* *out new: release with courier_pool_figures_free. Any thread; takes the pool's lock briefly
 * (the worker takes it a few times per request, never across a callback). Errors:
 * COURIER_E_INVALID_ARGUMENT, COURIER_E_NO_MEMORY. */
COURIER_API int courier_pool_get_figures(courier_pool_figures **out, const courier_engine *engine);
/* A snapshot never changes: its readers below may run on any threads at once; free it once, after
 * the last read. The number of hosts (0 for NULL). */
COURIER_API size_t courier_pool_figures_count(const courier_pool_figures *figures);
/* Copies host `index` into *out (the fields within its `size`, set by the caller). Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL, a size smaller than the struct's first version),
 * COURIER_E_NOT_FOUND (index out of range). */
COURIER_API int courier_pool_figures_at(courier_pool_host *out, const courier_pool_figures *figures, size_t index);
/* The sums over every host into *out (host NULL). Errors: COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_pool_figures_total(courier_pool_host *out, const courier_pool_figures *figures);
/* Accepts NULL. */
COURIER_API void courier_pool_figures_free(courier_pool_figures *figures);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_ENGINE_H */
