/*
 * ws_events.c — the request events of a WebSocket's opening handshake (docs/design/tracing.md,
 * "A WebSocket's opening handshake").
 *
 * courier_ws_open prepares the handshake's request as courier_send prepares a send, so the
 * before-send interceptors run for it and a tracer starts a span under its id. From there the
 * handshake gets the events a request gets, as far as they apply: WILL_SEND when the worker takes
 * it up (cr_ws_start_work), DID_SEND once its connect-only handle is in the multi handle, and
 * exactly one FINISHED when the handshake ends: COURIER_OK with the 101 as the response, or the
 * failure's code and detail (a refused or malformed answer, a connection that failed or timed
 * out, the WebSocket closed or freed before it opened, the engine closing). No RETRIED, REDIRECTED
 * or FROM_CACHE (a WebSocket has no retries, redirects or cache), and no events per message.
 *
 * The prepared request (ws->t) is kept until then: its id, method, URL, header lines (the trace
 * context) and WILL_SEND's time are what FINISHED tells. Everything here runs on the worker (the
 * thread of the WebSocket's other events and of its notify); ws.c calls it, and it calls nothing of
 * ws.c. A FINISHED while the worker holds the WebSocket's `io` lock (a timer, the engine closing, a
 * free) runs the monitors under it, as the notify already runs there: a monitor must not wait for
 * this WebSocket's reads (courier_ws_take_reads, _return_reads, _read_socket, a waiting _next).
 */
#include "engine/ws_internal.h"

#include <stdlib.h>
#include <string.h>

void cr_ws_handshake_begun(courier_ws *ws) {
    if (ws->t) cr_event_will_send(ws->e, ws->t); /* lifecycle.c: FINISHED's duration counts from here */
}

void cr_ws_handshake_sent(courier_ws *ws) {
    if (ws->t) cr_event_did_send(ws->e, ws->t);
}

courier_response *cr_ws_handshake_response(const courier_ws *ws, const char *head) {
    const cr_transfer *t = ws->t;
    if (!t || !cr_event_listening(ws->e)) return NULL; /* nobody to give it to */
    courier_response *r = cr_zalloc(sizeof *r);
    if (!r) return NULL;
    r->status = 101;
    r->id = t->id;
    r->attempts = 1;
    r->method = cr_strdup(t->method);
    r->url = cr_strdup(t->url);
    r->body = cr_strdup("");
    bool ok = r->method && r->url && r->body;
    /* The header lines after the status line, each ending in CRLF (ws.c's check_response cut the
     * head after the last one's). Folded or malformed lines are left out. */
    for (const char *p = strstr(head, "\r\n"); ok && p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2, *end = strstr(line, "\r\n");
        if (!end) break;
        const char *colon = memchr(line, ':', (size_t)(end - line));
        if (!colon || colon == line || *line == ' ' || *line == '\t') continue;
        const char *v = colon + 1, *ve = end;
        while (v < ve && (*v == ' ' || *v == '\t')) v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        ok = cr_kvlist_add(&r->headers, line, (size_t)(colon - line), v, (size_t)(ve - v)) == 0;
    }
    if (!ok) { /* the FINISHED goes without its response rather than not at all */
        courier_response_free(r);
        return NULL;
    }
    return r;
}

void cr_ws_handshake_ended(courier_ws *ws, int code, courier_response *resp, const courier_error *detail) {
    cr_transfer *t = ws->t;
    if (!t) {
        courier_response_free(resp);
        return;
    }
    ws->t = NULL; /* once */
    courier_error d;
    if (code != COURIER_OK && !detail) {
        cr_fail(&d, code, NULL);
        detail = &d;
    }
    cr_raised *outer = cr_raise_catch(NULL); /* as answer's (engine.c): monitors raise nowhere */
    cr_event_finished(ws->e, t, code, resp, code == COURIER_OK ? NULL : detail); /* lifecycle.c */
    cr_raise_catch(outer);
    courier_response_free(resp);
    cr_transfer_free(t);
}
