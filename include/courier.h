/*
 * courier.h — the public C API of Courier, a networking engine.
 *
 * This header and the parts it includes are the whole contract that C, Swift, Python and every
 * other language see.
 * Rules (see docs/ABI.md):
 *   - every function is prefixed courier_, every type courier_, every macro COURIER_;
 *   - functions return an int: COURIER_OK (0) or a negative courier_code;
 *   - codes are append-only and never reused; nothing is removed once released;
 *   - ownership is written beside every pointer: "new" (the caller releases it with the named
 *     function), "borrowed" (valid until the stated moment), "copied" (the callee copies it; the
 *     caller keeps ownership);
 *   - memory the library allocates is released by the library's own free functions: courier_free
 *     for strings and buffers, the handle's own free function for handles;
 *   - one grammar (docs/ABI.md, checked by scripts/check_header_grammar.py): out-parameters first
 *     and courier_error * last; a struct that may grow begins with size_t size (set by the caller
 *     for the structs it allocates); durations are int64_t milliseconds; a parameter that takes an
 *     enum has the enum's type; no long;
 *   - no curl, LMDB or jansson type appears here; no variadic functions; no static inline.
 *
 * Threads: an engine is thread-safe. A request object is used by one thread at a time until it is
 * sent (sending copies it, so it may be reused or freed right after). A response is immutable and
 * may be read from any thread. Completion callbacks run on the engine's worker thread. The threads
 * an engine starts carry names (where pthread_setname_np exists: Linux, macOS) that top -H, perf and
 * debuggers show: courier-worker (the transport; completions and posts run there), courier-journal
 * (frozen requests), courier-net (Linux's network watch), courier-probe (a reachability probe),
 * courier-json (a large document's parallel parse).
 *
 * The declarations are in parts, by what a user does (libcurl's way: curl/curl.h, curl/easy.h,
 * curl/multi.h, ...). This file holds the version and includes every part; a part may also be
 * included alone (#include <courier/cache.h>): it includes the parts it needs.
 *
 *   courier/base.h      version at run time, COURIER_API, codes, courier_error, courier_free, handles
 *   courier/config.h    the configuration an engine opens with; security (TLS) policies; DNS
 *                       overrides, Unix sockets, HTTP versions, content codings
 *   courier/engine.h    opening and closing an engine; posting work to its thread
 *   courier/request.h   building a request; the final request; sending, cancelling
 *   courier/stream.h    streamed responses, server-sent events, WebSocket
 *   courier/response.h  reading responses, metrics; redirects and timeouts; building responses
 *   courier/schedule.h  priorities, retry, coalescing, the frequent-request guard
 *   courier/hooks.h     mock answers, interceptors, adapters, retriers and the authenticator
 *                       (sessions), custom transports, errors raised by user code
 *   courier/transfer.h  multipart uploads, file bodies, downloads with resume, progress
 *   courier/json.h      JSON documents and tapes
 *   courier/mapping.h   mappings, envelopes, a request's JSON and named results, decoders
 *   courier/routes.h    accepted statuses, routes, response descriptors, the API catalogue
 *   courier/cache.h     cache policies, keys, expiry, the cache manager
 *   courier/group.h     batches and chains of requests
 *   courier/log.h       logging and event monitors
 *   courier/network.h   network reachability (the network monitor)
 *   courier/frozen.h    frozen requests (the offline journal), replay, resend policies
 *   courier/auth.h      cookies, authentication, proxies
 */
#ifndef COURIER_H
#define COURIER_H

#define COURIER_VERSION_MAJOR 0
#define COURIER_VERSION_MINOR 2
#define COURIER_VERSION_PATCH 1
/* 0xMMmmpp: major, minor, patch, one byte each. */
#define COURIER_VERSION_NUM ((COURIER_VERSION_MAJOR << 16) | (COURIER_VERSION_MINOR << 8) | COURIER_VERSION_PATCH)
#define COURIER_VERSION_STRING "0.2.1"

#include "courier/base.h"
#include "courier/config.h"
#include "courier/engine.h"
#include "courier/request.h"
#include "courier/stream.h"
#include "courier/response.h"
#include "courier/schedule.h"
#include "courier/hooks.h"
#include "courier/transfer.h"
#include "courier/json.h"
#include "courier/mapping.h"
#include "courier/routes.h"
#include "courier/cache.h"
#include "courier/group.h"
#include "courier/log.h"
#include "courier/network.h"
#include "courier/frozen.h"
#include "courier/auth.h"

#endif /* COURIER_H */
