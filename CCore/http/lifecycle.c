/*
 * lifecycle.c — the hooks of a transfer's lifecycle: will send, sent, progress, from the cache,
 * retried, redirected, finished. Each reads the transfer (id, method, URL, its timing and progress fields) and
 * the response, fills a courier_event and hands it to base's logging (cr_event_emit_reason, which
 * gives it to the monitors and writes its line). When nobody listens each costs one check
 * (cr_event_listening). Called on the thread where the event happens (the worker for all but
 * custom callers); t is borrowed for the call.
 */
#include "http/http.h"

#include <stdio.h>
#include <string.h>

static void event_init(courier_event *ev, int kind, const cr_transfer *t) {
    memset(ev, 0, sizeof *ev);
    ev->size = sizeof *ev;
    ev->kind = kind;
    if (t) {
        ev->request_id = t->id;
        ev->method = t->method;
        ev->url = t->url;
        /* trace.c: the trace context is two header lines of the send */
        ev->traceparent = cr_kvlist_get(&t->headers, "traceparent");
        ev->tracestate = cr_kvlist_get(&t->headers, "tracestate");
    }
}

void cr_event_will_send(courier_engine *e, cr_transfer *t) {
    /* Once a send: a request the journal tried to freeze at once (offline) had its WILL_SEND on the
     * sending thread; when that freeze was refused (a file body, a closing journal) the worker takes
     * the send up and must not say it again. */
    if (t->will_sent) return;
    t->will_sent = 1;
    if (!cr_event_listening(e)) return;
    t->obs_t0_ns = cr_mono_ns();
    courier_event ev;
    event_init(&ev, COURIER_EVENT_WILL_SEND, t);
    cr_event_emit(e, &ev);
}

void cr_event_did_send(courier_engine *e, cr_transfer *t) {
    if (!cr_event_listening(e)) return;
    courier_event ev;
    event_init(&ev, COURIER_EVENT_DID_SEND, t);
    cr_event_emit(e, &ev);
}

void cr_event_progress(courier_engine *e, cr_transfer *t, int64_t down_now, int64_t down_total, int64_t up_now,
                       int64_t up_total) {
    if (!cr_event_listening(e)) return;
    if (down_now == t->obs_progress[0] && up_now == t->obs_progress[1]) return; /* nothing moved */
    t->obs_progress[0] = down_now;
    t->obs_progress[1] = up_now;
    courier_event ev;
    event_init(&ev, COURIER_EVENT_PROGRESS, t);
    ev.bytes_received = down_now;
    ev.bytes_expected = down_total > 0 ? down_total : -1;
    ev.bytes_sent = up_now;
    ev.bytes_to_send = up_total > 0 ? up_total : -1;
    cr_event_emit(e, &ev);
}

void cr_event_finished(courier_engine *e, cr_transfer *t, int code, const courier_response *resp,
                       const courier_error *err) {
    if (!cr_event_listening(e)) return;
    courier_event ev;
    event_init(&ev, COURIER_EVENT_FINISHED, t);
    if (!ev.method && resp) ev.method = resp->method;
    ev.code = code;
    ev.http_status = resp ? resp->status : (err ? err->http_status : 0);
    ev.response = resp;
    ev.error = code == COURIER_OK ? NULL : err;
    if (t->obs_t0_ns) ev.duration_s = (double)(cr_mono_ns() - t->obs_t0_ns) / 1e9;
    /* OpenTelemetry's resend count: the final hop's retries, and the hops before it */
    const cr_hops *hops = resp && resp->hops ? resp->hops : t->hops; /* the chain moves into the answer */
    ev.resend_count = (t->attempts > 1 ? t->attempts - 1 : 0) + (int)(hops ? hops->count : 0);
    char status[16];
    if (code == COURIER_E_HTTP_STATUS && ev.http_status > 0) {
        snprintf(status, sizeof status, "%d", ev.http_status);
        ev.error_type = status;
    } else if (code != COURIER_OK) {
        ev.error_type = courier_code_name(code);
    }
    cr_event_emit_reason(e, &ev, resp ? resp->cache_reason : 0);
}

void cr_event_from_cache(courier_engine *e, cr_transfer *t, const courier_response *resp) {
    if (!cr_event_listening(e)) return;
    courier_event ev;
    event_init(&ev, COURIER_EVENT_FROM_CACHE, t);
    ev.http_status = resp ? resp->status : 0;
    ev.response = resp;
    cr_event_emit_reason(e, &ev, resp ? resp->cache_reason : 0);
}

void cr_event_retried(courier_engine *e, cr_transfer *t, int attempt, int code, const courier_response *resp,
                      long delay_ms) {
    if (!cr_event_listening(e)) return;
    courier_event ev;
    event_init(&ev, COURIER_EVENT_RETRIED, t);
    ev.attempt = attempt;
    ev.code = code;
    ev.http_status = resp ? resp->status : 0;
    ev.delay_ms = delay_ms;
    cr_event_emit(e, &ev);
}

void cr_event_redirected(courier_engine *e, const cr_transfer *next, int status) {
    if (!cr_event_listening(e)) return;
    courier_event ev;
    event_init(&ev, COURIER_EVENT_REDIRECTED, next);
    ev.http_status = status;
    ev.attempt = next->hops ? (int)next->hops->count : 1;
    cr_event_emit(e, &ev);
}
