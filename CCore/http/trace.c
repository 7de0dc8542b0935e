/*
 * trace.c — a request's W3C trace context (https://www.w3.org/TR/trace-context/): the
 * "traceparent" and "tracestate" header lines, checked here once for every language. Being header
 * lines they travel as the others do: copied into each send at prepare, onto each attempt and
 * redirect hop, into the journal's record of a frozen request and back out on its resend
 * (docs/design/tracing.md). The events read them back (lifecycle.c).
 */
#include "http/http.h"

#include <string.h>

static bool lower_hex(const char *s, size_t n, bool *all_zero) {
    *all_zero = true;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
        if (c != '0') *all_zero = false;
    }
    return true;
}

/* Version 00's form: 00-<trace id: 32 hex>-<parent id: 16 hex>-<flags: 2 hex>, neither id zero. */
static bool traceparent_ok(const char *s) {
    bool zero;
    if (strlen(s) != 55 || s[2] != '-' || s[35] != '-' || s[52] != '-') return false;
    if (!lower_hex(s, 2, &zero) || strncmp(s, "00", 2) != 0) return false;
    if (!lower_hex(s + 3, 32, &zero) || zero) return false;
    if (!lower_hex(s + 36, 16, &zero) || zero) return false;
    return lower_hex(s + 53, 2, &zero);
}

/* List members of key=value, visible ASCII (0x20..0x7E), at most 512 characters. */
static bool tracestate_ok(const char *s) {
    size_t n = strlen(s);
    if (n > 512) return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7E) return false;
    return true;
}

int courier_request_set_trace_context(courier_request *r, const char *traceparent, const char *tracestate) {
    if (!r || !traceparent || !traceparent_ok(traceparent)) return COURIER_E_INVALID_ARGUMENT;
    if (tracestate && !tracestate_ok(tracestate)) return COURIER_E_INVALID_ARGUMENT;
    /* Added to a copy first, so that a failure leaves the request as it was. */
    cr_kvlist h = {0};
    if (cr_kvlist_copy(&h, &r->headers)) goto oom;
    cr_kvlist_remove(&h, "traceparent");
    cr_kvlist_remove(&h, "tracestate");
    if (cr_kvlist_add(&h, "traceparent", 11, traceparent, strlen(traceparent))) goto oom;
    if (tracestate && tracestate[0] && cr_kvlist_add(&h, "tracestate", 10, tracestate, strlen(tracestate))) goto oom;
    cr_kvlist_clear(&r->headers);
    r->headers = h;
    return COURIER_OK;
oom:
    cr_kvlist_clear(&h);
    return COURIER_E_NO_MEMORY;
}
