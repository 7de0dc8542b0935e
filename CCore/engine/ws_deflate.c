/*
 * ws_deflate.c — permessage-deflate (RFC 7692) for the WebSocket clients of ws.c: the offer in the
 * opening handshake, the server's answer checked, and each message's payload compressed and
 * inflated with zlib. wslay frames the messages and carries the RSV1 bit; this file only turns a
 * message's bytes into its compressed form and back. Worker thread only (as all of ws.c's wslay
 * work is): no locks.
 *
 * What is offered: "permessage-deflate; client_max_window_bits" — the server may choose our window
 * (client_max_window_bits=N), its own (server_max_window_bits=N: inflating with 15 bits reads any),
 * and either side's no_context_takeover. Messages shorter than WS_DEFLATE_MIN are sent as they are
 * (RSV1 clear; RFC 7692 §6 lets each message choose), as OkHttp does: compressing them costs more
 * than it saves. A message received compressed is inflated with at most max_message_bytes out, so
 * a small frame cannot grow into a large allocation.
 */
#include "internal.h"
#include "engine/ws_deflate.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

struct cr_wsd {
    z_stream tx, rx;
    int tx_ready, rx_ready;
    int tx_reset;   /* client_no_context_takeover: a fresh context for each message sent */
    int rx_reset;   /* server_no_context_takeover: the server starts each message afresh */
    int tx_stored;  /* client_max_window_bits=8: zlib cannot write a 256-byte window, so stored blocks */
    char agreed[96];
};

const char *cr_wsd_offer(void) { return "permessage-deflate; client_max_window_bits"; }

static int bad(courier_error *d, const char *why, const char *v) {
    return cr_fail(d, COURIER_E_WS_HANDSHAKE, "the server's permessage-deflate answer is not valid (%s): %.100s", why, v);
}

/* A window-bits value: 8 to 15, digits only, no leading zero (RFC 7692 §7.1.2). */
static int window_bits(const char *s, size_t n) {
    if (n == 0 || n > 2 || s[0] == '0') return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v >= 8 && v <= 15 ? v : -1;
}

int cr_wsd_accept(cr_wsd **out, const char *answer, courier_error *d) {
    *out = NULL;
    const char *p = answer;
    while (*p == ' ' || *p == '\t') p++;
    static const char name[] = "permessage-deflate";
    if (strncasecmp(p, name, sizeof name - 1) != 0) return bad(d, "not permessage-deflate", answer);
    p += sizeof name - 1;
    int seen_sn = 0, seen_cn = 0, seen_sb = 0, seen_cb = 0, client_bits = 15;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (*p == 0) break;
        if (*p == ',') return bad(d, "more than one extension", answer);
        if (*p != ';') return bad(d, "a malformed parameter list", answer);
        p++;
        while (*p == ' ' || *p == '\t') p++;
        const char *k = p;
        while (*p && *p != '=' && *p != ';' && *p != ',' && *p != ' ' && *p != '\t') p++;
        size_t kn = (size_t)(p - k);
        while (*p == ' ' || *p == '\t') p++;
        const char *v = NULL;
        size_t vn = 0;
        if (*p == '=') {
            p++;
            while (*p == ' ' || *p == '\t') p++;
            int quoted = *p == '"';
            if (quoted) p++;
            v = p;
            while (*p && *p != ';' && *p != ',' && *p != ' ' && *p != '\t' && *p != '"') p++;
            vn = (size_t)(p - v);
            if (quoted) {
                if (*p != '"') return bad(d, "an unclosed quote", answer);
                p++;
            }
        }
#define KEY(s) (kn == sizeof(s) - 1 && strncasecmp(k, s, kn) == 0)
        if (KEY("server_no_context_takeover") && !v && !seen_sn++) {
        } else if (KEY("client_no_context_takeover") && !v && !seen_cn++) {
        } else if (KEY("server_max_window_bits") && v && window_bits(v, vn) > 0 && !seen_sb++) {
        } else if (KEY("client_max_window_bits") && v && (client_bits = window_bits(v, vn)) > 0 && !seen_cb++) {
        } else {
            return bad(d, "an unknown, repeated or ill-valued parameter", answer);
        }
#undef KEY
    }
    cr_wsd *z = cr_zalloc(sizeof *z);
    if (!z) return cr_fail(d, COURIER_E_NO_MEMORY, NULL);
    z->tx_reset = seen_cn;
    z->rx_reset = seen_sn;
    z->tx_stored = client_bits == 8;
    /* Raw deflate (negative bits); zlib cannot write a window of 8 bits, so it gets 9 in name and
     * stored blocks in fact (tx_stored): no back-reference at all. */
    if (deflateInit2(&z->tx, z->tx_stored ? 0 : Z_DEFAULT_COMPRESSION, Z_DEFLATED,
                     -(client_bits < 9 ? 9 : client_bits), 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(z);
        return cr_fail(d, COURIER_E_NO_MEMORY, NULL);
    }
    z->tx_ready = 1;
    if (inflateInit2(&z->rx, -15) != Z_OK) {
        cr_wsd_free(z);
        return cr_fail(d, COURIER_E_NO_MEMORY, NULL);
    }
    z->rx_ready = 1;
    /* What was agreed, as the server said it (trimmed to our buffer). */
    size_t n = strlen(answer);
    while (n && (answer[n - 1] == ' ' || answer[n - 1] == '\t')) n--;
    const char *a = answer;
    while (*a == ' ' || *a == '\t') a++, n--;
    if (n > sizeof z->agreed - 1) n = sizeof z->agreed - 1;
    memcpy(z->agreed, a, n);
    z->agreed[n] = 0;
    *out = z;
    return COURIER_OK;
}

const char *cr_wsd_agreed(const cr_wsd *z) { return z ? z->agreed : ""; }

bool cr_wsd_worth(const cr_wsd *z, size_t len) { return z && len >= WS_DEFLATE_MIN; }

int cr_wsd_compress(cr_wsd *z, const uint8_t *data, size_t len, cr_buf *out) {
    out->len = 0;
    z_stream *s = &z->tx;
    s->next_in = (Bytef *)data;
    s->avail_in = 0;
    size_t left = len;
    int zr = Z_OK;
    do {
        if (cr_buf_reserve(out, (left < 65536 ? left : 65536) / 2 + 64) != COURIER_OK) return COURIER_E_NO_MEMORY;
        /* avail_in is a uInt: feed a message over 4 GiB in parts. */
        if (s->avail_in == 0 && left) {
            s->avail_in = left > (1u << 30) ? (1u << 30) : (uInt)left;
            left -= s->avail_in;
        }
        s->next_out = (Bytef *)out->data + out->len;
        s->avail_out = (uInt)(out->cap - out->len - 1);
        size_t room = s->avail_out;
        zr = deflate(s, left ? Z_NO_FLUSH : Z_SYNC_FLUSH);
        out->len += room - s->avail_out;
        if (zr != Z_OK && zr != Z_BUF_ERROR) return COURIER_E_INTERNAL;
    } while (left || s->avail_in || s->avail_out == 0);
    /* A sync flush ends with an empty stored block, 00 00 FF FF, which the wire leaves out (§7.2.1). */
    if (out->len < 4 || memcmp(out->data + out->len - 4, "\x00\x00\xff\xff", 4) != 0) return COURIER_E_INTERNAL;
    out->len -= 4;
    out->data[out->len] = 0;
    if (z->tx_reset && deflateReset(s) != Z_OK) return COURIER_E_INTERNAL;
    return COURIER_OK;
}

/* One inflate pass over in[0..n), appending to out (at most max bytes in all). COURIER_OK, 1 when
 * the server's deflate stream ended (a final block: the next message starts a new one), or a code. */
static int inflate_into(z_stream *s, const uint8_t *in, size_t n, size_t max, cr_buf *out) {
    s->next_in = (Bytef *)in;
    s->avail_in = (uInt)n;
    for (;;) {
        size_t limit = max - out->len + 1; /* one byte past max tells "too large" */
        size_t want = out->len < 4096 ? 4096 : out->len;
        if (want > limit) want = limit;
        if (want > (1u << 30)) want = 1u << 30;
        if (cr_buf_reserve(out, want) != COURIER_OK) return COURIER_E_NO_MEMORY;
        size_t room = out->cap - out->len - 1;
        if (room > want) room = want;
        s->next_out = (Bytef *)out->data + out->len;
        s->avail_out = (uInt)room;
        int zr = inflate(s, Z_SYNC_FLUSH);
        out->len += room - s->avail_out;
        if (out->len > max) return COURIER_E_TOO_LARGE;
        if (zr == Z_STREAM_END) return s->avail_in ? COURIER_E_WS_PROTOCOL : 1;
        if (zr == Z_MEM_ERROR) return COURIER_E_NO_MEMORY;
        if (zr != Z_OK && zr != Z_BUF_ERROR) return COURIER_E_WS_PROTOCOL; /* not deflate data */
        if (s->avail_in == 0 && s->avail_out != 0) return COURIER_OK;  /* all read, all out */
        if (zr == Z_BUF_ERROR && s->avail_out != 0) return COURIER_OK; /* no progress possible */
    }
}

int cr_wsd_inflate(cr_wsd *z, const uint8_t *data, size_t len, size_t max, cr_buf *out) {
    out->len = 0;
    static const uint8_t tail[4] = {0x00, 0x00, 0xff, 0xff};
    z_stream *s = &z->rx;
    /* wslay caps a message at max_message_bytes before this; avail_in is a uInt. */
    if (len > (1u << 31)) return COURIER_E_TOO_LARGE;
    int rc = inflate_into(s, data, len, max, out);
    if (rc == COURIER_OK) rc = inflate_into(s, tail, sizeof tail, max, out);
    if (rc == 1) { /* a final block: the stream is over, the tail (if any) unread */
        rc = inflateReset(s) == Z_OK ? COURIER_OK : COURIER_E_INTERNAL;
    } else if (rc == COURIER_OK && z->rx_reset) {
        rc = inflateReset(s) == Z_OK ? COURIER_OK : COURIER_E_INTERNAL;
    }
    if (rc == COURIER_OK && cr_buf_reserve(out, 0) != COURIER_OK) rc = COURIER_E_NO_MEMORY;
    if (rc == COURIER_OK) out->data[out->len] = 0;
    return rc;
}

void cr_wsd_free(cr_wsd *z) {
    if (!z) return;
    if (z->tx_ready) deflateEnd(&z->tx);
    if (z->rx_ready) inflateEnd(&z->rx);
    free(z);
}
