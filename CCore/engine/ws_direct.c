/*
 * ws_direct.c — a WebSocket message written by the sender's own thread (docs/design/stream-speed.md,
 * "Sending from the caller's thread").
 *
 * A courier_ws_send normally queues the message and posts a kick to the engine's worker, which
 * frames it through wslay and writes it: the worker wakes for every message sent and again for every
 * message received. When the connection is plain TCP (ws://, no proxy tunnel: no TLS or proxy layer
 * of libcurl's between the frame and the socket) and nothing of the WebSocket is waiting to be
 * written, the sender frames the message itself (RFC 6455 §5.2: FIN, the opcode, the masked
 * payload) and writes it to the socket with one send(2); the worker does not wake for it.
 *
 * Who may write the socket is decided under the WebSocket's `io` mutex: the worker holds it for
 * every write of its own (a pump, a keepalive's failure close) and while it takes the connection
 * down (unlink), and computes `direct_ok` under it at the end of each pump (the state above: open,
 * no compression, no close sent or received, nothing queued in wslay, no frame half written). A
 * sender only tries the lock (never waits for a pump: it queues as before when the worker has it),
 * then checks under `m` that the WebSocket is open, not closing and that no earlier message is still
 * queued, so messages keep their order. What send(2) does not take stays in `raw`, which the worker
 * writes before anything else (cr_ws_direct_flush, from on_send and at each pump's start): the
 * sender then kicks the worker (the caller does: this file calls nothing of ws.c).
 *
 * libcurl is not called from the sender's thread: curl_easy_send looks the connection up in the
 * multi handle's pool, which the worker changes meanwhile; send(2) on the socket libcurl gave at
 * connect needs nothing of libcurl's, and `io` keeps the socket open while it runs.
 */
#include "engine/ws_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* macOS: the socket has SO_NOSIGPIPE from libcurl */
#endif

/* Under io: `len` masking bytes from the WebSocket's pool of the kernel's CSPRNG (RFC 6455 §10.3),
 * refilled 64 keys at a time. False when the CSPRNG failed. */
bool cr_ws_masks(courier_ws *ws, uint8_t *buf, size_t len) {
    if (len > sizeof ws->masks || ws->masks_off + len > sizeof ws->masks) {
        uint8_t *p = len > sizeof ws->masks ? buf : ws->masks;
        size_t want = len > sizeof ws->masks ? len : sizeof ws->masks;
        while (want) {
            ssize_t n = getrandom(p, want, 0);
            if (n < 0) {
                if (errno == EINTR) continue;
                return false;
            }
            p += n;
            want -= (size_t)n;
        }
        if (len > sizeof ws->masks) return true;
        ws->masks_off = 0;
    }
    memcpy(buf, ws->masks + ws->masks_off, len);
    ws->masks_off += len;
    return true;
}

/* Worker, under io: writes what a sender left in `raw`. 0: all written (or none was left); 1: some
 * is still left (the socket is full); -1: the socket failed (the worker's next read says how). */
int cr_ws_direct_flush(courier_ws *ws) {
    while (ws->raw_off < ws->raw_len) {
        ssize_t n = send(ws->sock, ws->raw + ws->raw_off, ws->raw_len - ws->raw_off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 1;
            free(ws->raw);
            ws->raw = NULL;
            ws->raw_len = ws->raw_off = 0;
            return -1;
        }
        ws->raw_off += (size_t)n;
    }
    free(ws->raw);
    ws->raw = NULL;
    ws->raw_len = ws->raw_off = 0;
    return 0;
}

/* Worker, under io, at the end of a pump: whether a sender may write the next message itself, and
 * whether the caller's loop may read the socket. */
void cr_ws_direct_update(courier_ws *ws) {
    wslay_event_context_ptr c = ws->ctx;
    ws->direct_ok = ws->plain && ws->phase == P_OPEN && c && !ws->deflate && !ws->hold_len && !ws->raw_len &&
                    !ws->we_closed && !ws->fail_code && !ws->eof && !ws->io_error && !wslay_event_want_write(c) &&
                    !wslay_event_get_close_sent(c) && !wslay_event_get_close_received(c) &&
                    wslay_event_get_read_enabled(c);
    /* The caller's loop may read (courier_ws_take_reads) what comes to the socket as it is: frames,
     * with no TLS or proxy layer of libcurl's between; compression is fine (inflated under io). */
    ws->read_ok = ws->plain && ws->phase == P_OPEN && c && !ws->fail_code && !ws->eof && !ws->io_error &&
                  wslay_event_get_read_enabled(c) && !wslay_event_get_close_received(c);
    ws->wants_write = c && wslay_event_want_write(c);
    ws->out_pending = ws->raw_len > 0;
}

/* out = in masked with the 4-byte key (RFC 6455 §5.3), 8 bytes at a time: the key is copied out of
 * the frame first, so the compiler need not reload it after every byte written into the same
 * buffer. */
static void mask_payload(uint8_t *out, const uint8_t *in, size_t len, const uint8_t *key) {
    uint8_t k[8] = {key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3]};
    uint64_t k8;
    memcpy(&k8, k, 8);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) { /* memcpy: no alignment assumed, one load and one store each */
        uint64_t w;
        memcpy(&w, in + i, 8);
        w ^= k8;
        memcpy(out + i, &w, 8);
    }
    for (; i < len; i++) out[i] = in[i] ^ k[i & 3]; /* i & 3: the key's phase, as 8 is a multiple of 4 */
}

/* The largest message written directly: a bigger one goes through the worker (which writes it as
 * the socket takes it, without holding up the sender). */
#define DIRECT_MAX (64u << 10)

int cr_ws_direct_send(courier_ws *ws, int type, const void *data, size_t len) {
    if (len > DIRECT_MAX || pthread_mutex_trylock(&ws->io) != 0) return WS_DIRECT_NO;
    if (!ws->direct_ok) {
        pthread_mutex_unlock(&ws->io);
        return WS_DIRECT_NO;
    }
    pthread_mutex_lock(&ws->m);
    bool ok = ws->state == COURIER_WS_OPEN && !ws->close_asked && !ws->freed && !ws->out_first;
    pthread_mutex_unlock(&ws->m);
    if (!ok) {
        pthread_mutex_unlock(&ws->io);
        return WS_DIRECT_NO;
    }
    uint8_t small[14 + 4096];
    size_t head = len < 126 ? 2 : len < 65536 ? 4 : 10;
    size_t total = head + 4 + len;
    uint8_t *f = total <= sizeof small ? small : malloc(total);
    if (!f || !cr_ws_masks(ws, f + head, 4)) {
        if (f != small) free(f);
        pthread_mutex_unlock(&ws->io);
        return WS_DIRECT_NO;
    }
    f[0] = (uint8_t)(0x80 | (type == COURIER_WS_TEXT ? 0x1 : 0x2));
    if (len < 126) {
        f[1] = (uint8_t)(0x80 | len);
    } else if (len < 65536) {
        f[1] = 0x80 | 126;
        f[2] = (uint8_t)(len >> 8);
        f[3] = (uint8_t)len;
    } else {
        f[1] = 0x80 | 127;
        for (int i = 0; i < 8; i++) f[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
    }
    mask_payload(f + head + 4, data, len, f + head);
    size_t off = 0;
    int rc = WS_DIRECT_SENT;
    while (off < total) {
        ssize_t n = send(ws->sock, f + off, total - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            /* The connection failed: the worker's next read or write says how and ends it. */
            ws->direct_ok = 0;
            rc = WS_DIRECT_KICK;
            break;
        }
        if (n <= 0) { /* the socket is full: the rest goes after, from the worker */
            uint8_t *rest = malloc(total - off);
            if (!rest && off == 0) { /* nothing of it written: the ordinary queue takes it */
                rc = WS_DIRECT_NO;
                break;
            }
            if (!rest) { /* half a frame out and no memory for the rest: the connection is lost */
                ws->direct_ok = 0;
                ws->fail_code = COURIER_E_NO_MEMORY; /* under io: the worker's pump ends it */
                rc = WS_DIRECT_KICK;
                break;
            }
            memcpy(rest, f + off, total - off);
            ws->raw = rest;
            ws->raw_len = total - off;
            ws->raw_off = 0;
            ws->direct_ok = 0;
            rc = WS_DIRECT_KICK;
            break;
        }
        off += (size_t)n;
    }
    if (f != small) free(f);
    pthread_mutex_unlock(&ws->io);
    return rc;
}
