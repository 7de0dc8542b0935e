/*
 * cache/cache.h — the cache as the layers above may use it: the hooks the engine calls
 * on the send path. The interface through which the engine answers a caller after a commit
 * (cr_answer_ops, shared with the journal, the cache's sibling) is in http/http.h. The cache's own
 * files share cache_internal.h.
 */
#ifndef COURIER_CACHE_H
#define COURIER_CACHE_H

#include "http/http.h"

/* Hidden like every internal declaration (see base/base.h). */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

/* ==== Cache (store.c, cache.c, cache_key.c, cache_http.c) ======================================= */

struct cr_cache_req;
struct cr_cache_xfer;

/* The engine's completion and start steps, handed to the cache so it can finish transfers. */
typedef void (*cr_complete_fn)(courier_engine *e, cr_transfer *t, int code, courier_response *resp,
                               courier_error *err);
typedef void (*cr_start_fn)(courier_engine *e, cr_transfer *t);
/* Engine open/close: the cache's state (the store itself opens on first use). `answer` (borrowed, for
 * the engine's life): how a write's callers are answered after it. */
CR_HIDDEN int cr_cache_engine_init(courier_engine *e, const cr_answer_ops *answer, courier_error *err);
CR_HIDDEN void cr_cache_engine_free(courier_engine *e);
/* courier_send, after the transfer is prepared and has its id: key, policy, lookup. A hit is kept
 * in t->cache for the worker; a revalidation adds conditional headers to t. */
CR_HIDDEN int cr_cache_before_send(courier_engine *e, const courier_request *r, cr_transfer *t,
                                   courier_error *err);
/* Worker, for each incoming transfer: true when the cache answered it (completed with `complete`;
 * a background revalidation is started with `start`). */
CR_HIDDEN bool cr_cache_answer(courier_engine *e, cr_transfer *t, cr_complete_fn complete, cr_start_fn start);
/* Worker, first thing when an answer arrives (before it is judged): a 304 merged into the stored
 * entry, or a stale entry served on error (stale-if-error). Returns the (possibly new) code. */
CR_HIDDEN int cr_cache_on_answer(courier_engine *e, cr_transfer *t, int code, courier_response **resp,
                                 courier_error *err);
/* Worker, after the judgement: true when the response is to be written; the completion then runs
 * from cr_cache_flush, after the turn's one write transaction. */
CR_HIDDEN bool cr_cache_defer(courier_engine *e, cr_transfer *t, int code, courier_response *resp,
                              courier_error *err);
/* Worker, once per loop turn before waiting: writes what was deferred, then answers its callers. */
CR_HIDDEN void cr_cache_flush(courier_engine *e);

/* cache.c: the cache's send-path work (key, policy, lookup) for a redirect hop, with the policy and
 * expiry of the transfer that started the chain. Worker thread. */
CR_HIDDEN int cr_cache_before_hop(courier_engine *e, const cr_transfer *prev, cr_transfer *next, courier_error *err);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* COURIER_CACHE_H */
