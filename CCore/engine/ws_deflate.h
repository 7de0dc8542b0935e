/* ws_deflate.h — permessage-deflate (RFC 7692) for ws.c (ws_deflate.c says what is offered and why).
 * Worker thread only. */
#ifndef COURIER_WS_DEFLATE_H
#define COURIER_WS_DEFLATE_H

#include "base/base.h"

/* Messages shorter than this are sent uncompressed (RSV1 clear). */
#define WS_DEFLATE_MIN 1024

typedef struct cr_wsd cr_wsd;

/* The Sec-WebSocket-Extensions value offered. */
CR_HIDDEN const char *cr_wsd_offer(void);
/* The server's Sec-WebSocket-Extensions answer (non-empty) checked against the offer: *out the
 * compression context, or COURIER_E_WS_HANDSHAKE with d filled (an extension or a parameter not
 * offered, a bad value), COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_wsd_accept(cr_wsd **out, const char *answer, courier_error *d);
/* What was agreed (the server's answer), "" without compression. */
CR_HIDDEN const char *cr_wsd_agreed(const cr_wsd *z);
/* Whether a message of len bytes goes compressed (z NULL: never). */
CR_HIDDEN bool cr_wsd_worth(const cr_wsd *z, size_t len);
/* A message's payload compressed into out (replaced), the trailing 00 00 FF FF left out. */
CR_HIDDEN int cr_wsd_compress(cr_wsd *z, const uint8_t *data, size_t len, cr_buf *out);
/* A compressed message's payload inflated into out (replaced; NUL after its len): at most max bytes
 * (else COURIER_E_TOO_LARGE), COURIER_E_WS_PROTOCOL when it is not deflate data, COURIER_E_NO_MEMORY. */
CR_HIDDEN int cr_wsd_inflate(cr_wsd *z, const uint8_t *data, size_t len, size_t max, cr_buf *out);
CR_HIDDEN void cr_wsd_free(cr_wsd *z);

#endif
