/*
 * courier/schedule.h — scheduling: priorities, retry, coalescing, the frequent-request guard.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_SCHEDULE_H
#define COURIER_INC_SCHEDULE_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Scheduling: limits, priorities, retry, coalescing, the frequent-request guard              */
/* ========================================================================================== */

/* Priorities decide which waiting request starts first when the engine's limits hold requests
 * back (courier_config_set_max_connections_per_host / _max_connections limit the requests in
 * flight, per host and in all). Equal priorities start in the order they were sent. */
typedef enum courier_priority {
    COURIER_PRIORITY_LOW = -1,
    COURIER_PRIORITY_NORMAL = 0, /* the default */
    COURIER_PRIORITY_HIGH = 1
} courier_priority;
COURIER_API int courier_request_set_priority(courier_request *request, courier_priority priority);

/* Retry rule flags. */
#define COURIER_RETRY_NON_IDEMPOTENT 0x1u /* also retry POST, PATCH and other non-idempotent methods */
#define COURIER_RETRY_IGNORE_RETRY_AFTER 0x2u /* do not wait for a server's Retry-After */

/* A retry rule: at most max_retries further attempts after the first, waiting base_delay_ms *
 * 2^(attempt-1), capped at max_delay_ms, with jitter (a random wait between half and all of it).
 * A server's Retry-After (seconds or an HTTP date, on 429 and 503) is waited for when it is at
 * most max_delay_ms; a longer one ends the retries with the response. Retried: network failures
 * (cannot resolve, cannot connect, timeout, partial response, network) and HTTP 408, 429 and 5xx;
 * only for idempotent methods (GET, HEAD, PUT, DELETE, OPTIONS, TRACE) unless
 * COURIER_RETRY_NON_IDEMPOTENT. Never after a cancel, TLS or pinning failure, a validator's "no",
 * or a body too large. max_retries 0 turns retrying off (the engine default unless set).
 * Errors: COURIER_E_INVALID_ARGUMENT (negative values, base > max). */
COURIER_API int courier_config_set_retry(courier_config *config, int max_retries, int64_t base_delay_ms,
                                         int64_t max_delay_ms, unsigned flags);
/* The same for one request, replacing the engine's rule. */
COURIER_API int courier_request_set_retry(courier_request *request, int max_retries, int64_t base_delay_ms,
                                          int64_t max_delay_ms, unsigned flags);
/* How many attempts the response took (1 without retries), and the total time the engine chose
 * to wait between them, in milliseconds (backoff and Retry-After; computed, not measured). Either
 * out pointer may be NULL. */
COURIER_API int courier_response_attempts(int *out_attempts, int64_t *out_waited_ms, const courier_response *response);

/* Identical GET and HEAD requests in flight at once (same URL, same header lines) share one
 * network request, whose answer goes to every caller (each gets its own response copy and runs
 * its own validator). On by default; 0 opts this request out. */
COURIER_API int courier_request_set_coalesce(courier_request *request, int coalesce);

/* The frequent-request guard (HLNetworking's): when window_ms > 0, a request identical to one
 * sent less than window_ms ago (same method, URL, header lines and body) is refused by
 * courier_send with COURIER_E_TOO_FREQUENT and nothing is sent. 0 (the default) turns it off. */
COURIER_API int courier_config_set_frequent_guard_ms(courier_config *config, int64_t window_ms);
/* 0 exempts this request from the guard (it is neither refused nor recorded). */
COURIER_API int courier_request_set_frequent_guard(courier_request *request, int guarded);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_SCHEDULE_H */
