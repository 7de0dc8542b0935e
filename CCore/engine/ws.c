/*
 * ws.c — WebSocket clients (courier_ws, RFC 6455) driven by the engine's worker thread.
 *
 * libcurl connects (CURLOPT_CONNECT_ONLY=1: DNS, TCP, proxy tunnel, TLS with the engine's policy,
 * HTTP/1.1 ALPN) on an easy handle that stays in the engine's multi handle; this file writes the
 * HTTP/1.1 Upgrade request and checks the 101, then hands the socket's bytes to wslay, which frames
 * and checks messages. Every curl call runs on the worker; every wslay call runs under the
 * WebSocket's `io` mutex (wslay has no locks): on the worker, or on the reader's thread when the
 * reads are its own (cr_ws_read_here: ws://, no proxy; docs/design/ws-reads.md). Otherwise the
 * reader's and senders' threads touch the shared part under `m` and post work to the worker
 * (courier_engine_post). The worker's loop (engine.c) calls cr_ws_turn every turn, polls the
 * sockets through cr_ws_poll_fds (POLLOUT only while wslay has something to write), hands the
 * connect-only transfer's CURLMSG_DONE to cr_ws_connected, and ends every WebSocket with
 * cr_ws_engine_closing when the engine closes. Timers (handshake, keepalive, close) are ours:
 * wslay has none. The caller's side (courier_ws_open, _send, _next, _close, _free) is ws_api.c's,
 * the handshake's request events (WILL_SEND to FINISHED) ws_events.c's; ws_internal.h has what
 * they share.
 */
#include "engine/ws_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <wslay/wslay.h>

/* ---- shared helpers ----------------------------------------------------------------------------- */

void cr_ws_release(courier_ws *ws) {
    if (!ws || atomic_fetch_sub(&ws->refs, 1) != 1) return;
    for (ws_msg *m = ws->in_first, *n; m; m = n) {
        n = m->next;
        free(m);
    }
    for (ws_msg *m = ws->out_first, *n; m; m = n) {
        n = m->next;
        free(m);
    }
    free(ws->borrowed);
    free(ws->raw);
    if (ws->reader_fd >= 0) close(ws->reader_fd); /* the caller's loop stopped watching it (courier_ws_free) */
    if (ws->wake_r >= 0) close(ws->wake_r);
    if (ws->wake_w >= 0) close(ws->wake_w);
    free((char *)ws->opt.subprotocols);
    cr_error_release_user(&ws->end_err);
    if (ws->user_free) ws->user_free(ws->user);
    pthread_cond_destroy(&ws->c);
    pthread_mutex_destroy(&ws->io);
    pthread_mutex_destroy(&ws->m);
    free(ws);
}

/* Worker: tells the reader (the condition variable) and the notify callback. The broadcast comes
 * after the unlock (what it announces was changed under m before): a reader woken while m is still
 * held goes back to sleep on m, a futex wait and wake more per message. */
static void tell(courier_ws *ws) {
    pthread_mutex_lock(&ws->m);
    bool call = ws->notify && !ws->freed;
    bool wake = ws->poll_waiting; /* a reader in poll(2) (ws_api.c, wait_here) */
    pthread_mutex_unlock(&ws->m);
    pthread_cond_broadcast(&ws->c);
    if (wake) {
        char b = 1;
        ssize_t w = write(ws->wake_w, &b, 1); /* full: readable already */
        (void)w;
    }
    if (call) ws->notify(ws, ws->user);
}

static void set_state(courier_ws *ws, int state) {
    pthread_mutex_lock(&ws->m);
    if (ws->state != COURIER_WS_CLOSED) ws->state = state;
    pthread_mutex_unlock(&ws->m);
}

/* ---- the worker's side -------------------------------------------------------------------------- */

static courier_ws **list_head(courier_engine *e) { return (courier_ws **)&e->ws_head; }

/* Worker (under io once the WebSocket is open: a caller's read may run meanwhile): the end. Takes
 * the connection down (no more bytes either way) and gives the reader `code` once it has read what
 * came before. */
static void finish(courier_ws *ws, int code, const courier_error *detail) {
    if (ws->phase == P_ENDED) return;
    ws->phase = P_ENDED;
    cr_ws_handshake_ended(ws, code, NULL, detail); /* ws_events.c: ended before it opened (once) */
    if (ws->ctx) {
        pthread_mutex_lock(&ws->m);
        if (!ws->close_code_sent && wslay_event_get_close_sent(ws->ctx))
            ws->close_code_sent = wslay_event_get_status_code_sent(ws->ctx);
        pthread_mutex_unlock(&ws->m);
    }
    pthread_mutex_lock(&ws->m);
    if (ws->caller_reads) ws->caller_reads = 0; /* under io too: finish runs under it once open */
    ws->state = COURIER_WS_CLOSED;
    ws->end_code = code;
    if (detail) ws->end_err = *detail;
    else cr_fail(&ws->end_err, code, NULL);
    ws->end_err.code = code;
    if (!ws->close_code) ws->close_code = 1006;
    for (ws_msg *m = ws->out_first, *n; m; m = n) {
        n = m->next;
        free(m);
    }
    ws->out_first = ws->out_last = NULL;
    ws->out_bytes = 0;
    pthread_mutex_unlock(&ws->m);
    tell(ws);
}

/* Worker: the WebSocket off the engine: easy handle out of the multi handle and cleaned up (curl
 * closes the socket), wslay's context freed, the worker's reference released. */
/* Worker: libcurl's pool limits grown by the WebSockets in the multi handle. A WebSocket's connection
 * is idle to libcurl (connect-only: no transfer holds it), and libcurl, asked for a new connection to
 * a host at its limit (or past the total), closes the oldest idle connection there: with the limits
 * as set at open, the sixth WebSocket to a host (5 per host by default), or a request to a host
 * where 5 were open, closed an open WebSocket's connection under it (ws_test
 * test_more_than_the_host_limit). Each WebSocket now brings room for its own connection; the
 * scheduler still holds requests to the configured limits (pump). */
static void pool_room(courier_engine *e) {
    if (e->pool_host > 0) curl_multi_setopt(e->core.multi, CURLMOPT_MAX_HOST_CONNECTIONS, e->pool_host + e->ws_pooled);
    if (e->pool_total > 0) {
        curl_multi_setopt(e->core.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, e->pool_total + e->ws_pooled);
        curl_multi_setopt(e->core.multi, CURLMOPT_MAXCONNECTS, e->pool_total + e->ws_pooled);
    }
}

static void unlink_ws(courier_engine *e, courier_ws *ws) {
    if (!ws->linked) return;
    ws->linked = 0;
    for (courier_ws **p = list_head(e); *p; p = &(*p)->next) {
        if (*p == ws) {
            *p = ws->next;
            break;
        }
    }
    pthread_mutex_lock(&ws->io); /* no sender writes the socket, no caller reads it from here on */
    ws->direct_ok = 0;
    ws->read_ok = 0;
    if (ws->caller_reads) {
        pthread_mutex_lock(&ws->m);
        ws->caller_reads = 0;
        pthread_mutex_unlock(&ws->m);
    }
    /* The caller's loop watches a dup of the socket: curl's close alone would leave the connection
     * open while the dup lives; a shutdown ends it now, as the close did before, and the loop sees it. */
    if (ws->reader_fd >= 0 && ws->sock != CURL_SOCKET_BAD) shutdown(ws->sock, SHUT_RDWR);
    pthread_mutex_unlock(&ws->io);
    if (ws->easy) {
        curl_multi_remove_handle(e->core.multi, ws->easy);
        cr_easy_cleanup(ws->easy);
        ws->easy = NULL;
    }
    if (ws->pooled) {
        ws->pooled = 0;
        e->ws_pooled--;
        pool_room(e);
    }
    if (ws->ctx) wslay_event_context_free(ws->ctx);
    ws->ctx = NULL;
    if (ws->t) cr_transfer_free(ws->t);
    ws->t = NULL;
    free(ws->errbuf);
    ws->errbuf = NULL;
    cr_buf_free(&ws->head);
    free(ws->extra);
    ws->extra = NULL;
    free(ws->offered);
    ws->offered = NULL;
    cr_wsd_free(ws->deflate);
    ws->deflate = NULL;
    cr_buf_free(&ws->zbuf);
    cr_ws_release(ws);
}

static int64_t now_ms(void) { return cr_mono_ms(); }

/* wslay's callbacks: bytes through curl, non-blocking. */
static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user) {
    (void)flags;
    courier_ws *ws = user;
    if (ws->extra_off < ws->extra_len) {
        size_t k = ws->extra_len - ws->extra_off < len ? ws->extra_len - ws->extra_off : len;
        memcpy(buf, ws->extra + ws->extra_off, k);
        ws->extra_off += k;
        return (ssize_t)k;
    }
    /* A reader behind by max_receive_queue_bytes: the socket is left unread (the server then waits,
     * by TCP's flow control) until courier_ws_next makes room and kicks the worker. */
    pthread_mutex_lock(&ws->m);
    int full = ws->in_full;
    pthread_mutex_unlock(&ws->m);
    if (full) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    size_t n = 0;
    CURLcode rc = CURLE_OK;
    if (ws->reading_here) { /* the caller's thread: libcurl is the worker's (see cr_ws_read_here) */
        /* A read shorter than asked emptied the socket: the next would block (a system call saved
         * per message); what comes later makes the caller's loop see the socket readable again. */
        if (ws->reading_here == 2) {
            wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
            return -1;
        }
        ssize_t got;
        do got = recv(ws->sock, buf, len, MSG_DONTWAIT);
        while (got < 0 && errno == EINTR);
        if (got < 0) rc = errno == EAGAIN || errno == EWOULDBLOCK ? CURLE_AGAIN : CURLE_RECV_ERROR;
        else n = (size_t)got;
        if (got > 0 && (size_t)got < len) ws->reading_here = 2;
    } else {
        rc = curl_easy_recv(ws->easy, buf, len, &n);
    }
    if (rc == CURLE_AGAIN) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (rc != CURLE_OK || n == 0) {
        if (rc != CURLE_OK) ws->io_error = rc;
        else ws->eof = 1;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    if (ws->opt.ping_interval_ms > 0 && !ws->ping_out) ws->next_ping_ms = now_ms() + ws->opt.ping_interval_ms;
    return (ssize_t)n;
}

/* wslay hands over a frame's header (flagged WSLAY_MSG_MORE) and its payload in two calls: the header
 * is held and written with the payload's first bytes, so that a small message is one write and one
 * TCP segment, not two (the peer then wakes once per message). */
static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user) {
    courier_ws *ws = user;
    if (ws->raw_len) { /* a sender's frame half written: its rest goes first (ws_direct.c) */
        int fr = cr_ws_direct_flush(ws);
        if (fr != 0) {
            if (fr < 0) ws->io_error = CURLE_SEND_ERROR;
            wslay_event_set_error(ctx, fr > 0 ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
            return -1;
        }
    }
    if ((flags & WSLAY_MSG_MORE) && ws->hold_len == 0 && len <= sizeof ws->hold) {
        memcpy(ws->hold, data, len);
        ws->hold_len = len;
        return (ssize_t)len;
    }
    uint8_t joined[sizeof ws->hold + 4096]; /* wslay masks payloads 4096 bytes at a time */
    const uint8_t *out = data;
    size_t out_len = len, held = ws->hold_len;
    if (held) {
        size_t k = len < sizeof joined - held ? len : sizeof joined - held;
        memcpy(joined, ws->hold, held);
        memcpy(joined + held, data, k);
        out = joined;
        out_len = held + k;
    }
    size_t n = 0;
    CURLcode rc = curl_easy_send(ws->easy, out, out_len, &n);
    if (rc == CURLE_AGAIN) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (rc != CURLE_OK) {
        ws->io_error = rc;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    if (held) { /* what was written counts first against the header held */
        if (n < held) {
            memmove(ws->hold, ws->hold + n, held - n);
            ws->hold_len = held - n;
            n = 0;
        } else {
            ws->hold_len = 0;
            n -= held;
        }
        if (n == 0) { /* none of this call's bytes went: wslay tries them again */
            wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
            return -1;
        }
    }
    return (ssize_t)n;
}

/* Masks from the kernel's CSPRNG (RFC 6455 §10.3: a peer must not predict them). */
static bool random_bytes(void *buf, size_t len) {
    uint8_t *p = buf;
    while (len) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/* The keys come from a pool refilled from the CSPRNG 64 keys at a time: one getrandom call per 64
 * frames instead of one per frame. */
static int on_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user) {
    if (cr_ws_masks(user, buf, len)) return 0; /* ws_direct.c: the pool the senders share (under io) */
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
}

/* Worker, from on_msg: a message Courier refuses after wslay took it (compressed data that does not
 * inflate, is too large inflated, or is not UTF-8 text): a close with `code`, no more reading; pump_open
 * ends the connection once the close is out, as it does for wslay's own refusals. */
static void fail_connection(courier_ws *ws, uint16_t code, const char *reason) {
    wslay_event_queue_close(ws->ctx, code, (const uint8_t *)reason, strlen(reason));
    wslay_event_shutdown_read(ws->ctx);
}

static void on_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *user) {
    (void)ctx;
    courier_ws *ws = user;
    if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME) {
        const uint8_t *payload = arg->msg;
        size_t len = arg->msg_length;
        if (wslay_get_rsv1(arg->rsv)) { /* compressed (wslay lets RSV1 through only once agreed) */
            int zr = cr_wsd_inflate(ws->deflate, arg->msg, arg->msg_length, (size_t)ws->opt.max_message_bytes,
                                    &ws->zbuf);
            if (zr == COURIER_E_NO_MEMORY) {
                ws->fail_code = COURIER_E_NO_MEMORY;
                return;
            }
            if (zr != COURIER_OK) {
                fail_connection(ws, zr == COURIER_E_TOO_LARGE ? 1009 : 1007,
                                zr == COURIER_E_TOO_LARGE ? "message too big" : "invalid compressed data");
                return;
            }
            payload = (const uint8_t *)ws->zbuf.data;
            len = ws->zbuf.len;
            if (arg->opcode == WSLAY_TEXT_FRAME && len && !cr_utf8_valid((const char *)payload, len)) {
                fail_connection(ws, 1007, "invalid UTF-8");
                return;
            }
        }
        ws_msg *m = malloc(sizeof *m + len + 1);
        if (!m) {
            ws->fail_code = COURIER_E_NO_MEMORY;
            return;
        }
        m->next = NULL;
        m->type = arg->opcode == WSLAY_TEXT_FRAME ? COURIER_WS_TEXT : COURIER_WS_BINARY;
        m->len = len;
        if (len) memcpy(m->data, payload, len);
        m->data[len] = 0;
        if (ws->zbuf.cap > (64u << 10)) cr_buf_free(&ws->zbuf); /* no large buffer kept between messages */
        pthread_mutex_lock(&ws->m);
        if (ws->in_last) ws->in_last->next = m;
        else ws->in_first = m;
        ws->in_last = m;
        ws->in_bytes += len;
        if ((int64_t)ws->in_bytes >= ws->opt.max_receive_queue_bytes) ws->in_full = 1;
        pthread_mutex_unlock(&ws->m);
        if (!ws->reading_here) tell(ws); /* a caller's read: the reader is right here */
    } else if (arg->opcode == WSLAY_PONG) {
        if (ws->ping_out) {
            ws->ping_out = 0;
            ws->deadline_ms = 0;
            if (ws->opt.ping_interval_ms > 0) ws->next_ping_ms = now_ms() + ws->opt.ping_interval_ms;
        }
    } else if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
        /* wslay checked the code and the reason's UTF-8, and queued its echo. */
        pthread_mutex_lock(&ws->m);
        ws->close_code = arg->status_code ? arg->status_code : 1005;
        size_t rl = arg->msg_length > 2 ? arg->msg_length - 2 : 0;
        if (rl > sizeof ws->close_reason - 1) rl = sizeof ws->close_reason - 1;
        if (rl) memcpy(ws->close_reason, arg->msg + 2, rl);
        ws->close_reason[rl] = 0;
        if (ws->state == COURIER_WS_OPEN) ws->state = COURIER_WS_CLOSING;
        pthread_mutex_unlock(&ws->m);
        tell(ws);
    }
}

/* Worker: what the caller sent, handed to wslay (which copies it). True when the reader asked for
 * reading to resume (read_again). */
static bool take_outgoing(courier_ws *ws) {
    pthread_mutex_lock(&ws->m);
    ws_msg *list = ws->out_first;
    ws->out_first = ws->out_last = NULL;
    bool read_again = ws->read_again;
    ws->read_again = 0;
    pthread_mutex_unlock(&ws->m);
    for (ws_msg *m = list, *n; m; m = n) {
        n = m->next;
        if (ws->phase == P_OPEN && !ws->we_closed && !wslay_event_get_close_sent(ws->ctx)) {
            if (m->type == 0) {
                ws->we_closed = 1;
                wslay_event_queue_close(ws->ctx, (uint16_t)m->len, m->data + 0, strlen((char *)m->data));
                pthread_mutex_lock(&ws->m);
                ws->close_code_sent = (int)m->len;
                pthread_mutex_unlock(&ws->m);
                int64_t to = ws->opt.close_timeout_ms;
                ws->deadline_ms = now_ms() + to;
                ws->ping_out = 0;
                ws->next_ping_ms = 0;
                set_state(ws, COURIER_WS_CLOSING);
            } else {
                struct wslay_event_msg wm = {m->type == COURIER_WS_TEXT ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME,
                                             m->data, m->len};
                uint8_t rsv = WSLAY_RSV_NONE;
                if (cr_wsd_worth(ws->deflate, m->len)) {
                    int zr = cr_wsd_compress(ws->deflate, m->data, m->len, &ws->zbuf);
                    if (zr != COURIER_OK) {
                        ws->fail_code = COURIER_E_NO_MEMORY;
                        free(m);
                        continue;
                    }
                    wm.msg = (const uint8_t *)ws->zbuf.data;
                    wm.msg_length = ws->zbuf.len;
                    rsv = WSLAY_RSV1_BIT;
                }
                /* wslay copies the payload. */
                if (wslay_event_queue_msg_ex(ws->ctx, &wm, rsv) != 0) ws->fail_code = COURIER_E_NO_MEMORY;
                if (ws->zbuf.cap > (64u << 10)) cr_buf_free(&ws->zbuf);
            }
        }
        free(m);
    }
    return read_again;
}

/* Worker: sizes the queue the caller sees (ours plus wslay's). */
static void count_queued(courier_ws *ws) {
    size_t n = (ws->ctx ? wslay_event_get_queued_msg_length(ws->ctx) : 0) + (ws->raw_len - ws->raw_off);
    pthread_mutex_lock(&ws->m);
    for (ws_msg *m = ws->out_first; m; m = m->next) n += m->type ? m->len : 0;
    ws->out_bytes = n;
    pthread_mutex_unlock(&ws->m);
}

static int fail_detail(courier_error *d, int code, const char *fmt, const char *a) {
    cr_fail(d, code, fmt, a);
    return code;
}

/* Worker: a masked close frame with `code` written straight to the socket (best effort: the
 * connection is being failed). Only when wslay has no frame half-written. */
static bool send_raw_close(courier_ws *ws, uint16_t code) {
    if (ws->hold_len) return false; /* a frame's header is still to go */
    uint8_t f[8] = {0x88, 0x82};
    if (!random_bytes(f + 2, 4)) return false;
    f[6] = (uint8_t)((code >> 8) ^ f[2]);
    f[7] = (uint8_t)((code & 0xFF) ^ f[3]);
    size_t n = 0;
    return curl_easy_send(ws->easy, f, sizeof f, &n) == CURLE_OK && n == sizeof f;
}

static void set_code_sent(courier_ws *ws, int code) {
    pthread_mutex_lock(&ws->m);
    ws->close_code_sent = code;
    pthread_mutex_unlock(&ws->m);
}

/* Worker: the connection's I/O while open: reads messages (when `read`: the poll saw the socket
 * readable, or the reader made room), writes what is queued, and ends it when the closing handshake
 * is over or something failed. A read goes on until the socket has nothing more (wslay reads until
 * WOULDBLOCK), so nothing waits in libcurl's or TLS's buffers between pumps and the poll alone says
 * when to read again; a pump for a send alone reads nothing (one recv that would block saved per
 * message). */
static void pump_open_io(courier_ws *ws, bool read) {
    courier_error d;
    if (ws->raw_len && cr_ws_direct_flush(ws) < 0) ws->io_error = CURLE_SEND_ERROR; /* a sender's rest first */
    if (take_outgoing(ws)) read = true;
    if (ws->polled && ws->e->ws_fds[ws->polled - 1].revents) read = true; /* a kick and the socket together */
    ws->polled = 0; /* the last poll's word about this socket is used up */
    ws->pump_by_ms = now_ms() + 1000;
    int r = ws->recv_err; /* a caller's read that failed (cr_ws_read_here) */
    ws->recv_err = 0;
    if (r == 0 && read && wslay_event_want_read(ws->ctx)) r = wslay_event_recv(ws->ctx);
    int received = wslay_event_get_close_received(ws->ctx);
    if (r == WSLAY_ERR_NOMEM || ws->fail_code == COURIER_E_NO_MEMORY) {
        finish(ws, COURIER_E_NO_MEMORY, NULL);
        return;
    }
    if (r != 0 && !ws->eof && !ws->io_error && !received) {
        /* The frame layer refused what the server sent (a control frame over 125 bytes or
         * fragmented, a bad length). wslay queued a close without a code; RFC 6455 asks for 1002:
         * written by hand when nothing else is queued, else wslay's goes. */
        if (wslay_event_get_queued_msg_count(ws->ctx) == 1 && send_raw_close(ws, 1002)) {
            set_code_sent(ws, 1002);
        } else {
            wslay_event_send(ws->ctx);
            if (wslay_event_get_close_sent(ws->ctx)) set_code_sent(ws, wslay_event_get_status_code_sent(ws->ctx));
        }
        finish(ws, fail_detail(&d, COURIER_E_WS_PROTOCOL, "the WebSocket server broke RFC 6455 (%s)",
                               "a control frame over 125 bytes or fragmented, or a bad frame header"),
               &d);
        return;
    }
    if (r == 0 && !received && !ws->eof && !ws->io_error && ws->we_closed && !wslay_event_get_read_enabled(ws->ctx)) {
        /* wslay stopped reading on a protocol error after our close was queued: it could not queue
         * a code of its own then (ours goes, or went), and the server's close may never come. */
        wslay_event_send(ws->ctx);
        if (wslay_event_get_close_sent(ws->ctx)) set_code_sent(ws, wslay_event_get_status_code_sent(ws->ctx));
        finish(ws, fail_detail(&d, COURIER_E_WS_PROTOCOL, "the WebSocket server broke RFC 6455 (%s)",
                               "while the connection was closing"),
               &d);
        return;
    }
    if (!ws->eof && !ws->io_error && wslay_event_want_write(ws->ctx)) wslay_event_send(ws->ctx);
    count_queued(ws);
    int sent = wslay_event_get_close_sent(ws->ctx);
    uint16_t code_sent = sent ? wslay_event_get_status_code_sent(ws->ctx) : 0;
    if (sent) set_code_sent(ws, code_sent);
    if (received && (sent || ws->eof || ws->io_error)) {
        finish(ws, fail_detail(&d, COURIER_E_WS_CLOSED, "the WebSocket closed%s", ""), &d);
        return;
    }
    if (sent && !received && !ws->we_closed) {
        /* Neither the caller's nor an echo: wslay failed the connection with this code. */
        if (code_sent == 1009) {
            finish(ws, fail_detail(&d, COURIER_E_TOO_LARGE, "a WebSocket message over the maximum size%s", ""), &d);
        } else {
            cr_fail(&d, COURIER_E_WS_PROTOCOL, "the WebSocket server broke RFC 6455 (closed with %u: %s)",
                    (unsigned)code_sent, code_sent == 1007 ? "invalid UTF-8" : "protocol error");
            finish(ws, COURIER_E_WS_PROTOCOL, &d);
        }
        return;
    }
    if (ws->eof || ws->io_error) {
        cr_fail(&d, COURIER_E_NETWORK, "the WebSocket connection %s without a close frame",
                ws->eof ? "ended" : "failed");
        d.curl_code = ws->io_error;
        finish(ws, COURIER_E_NETWORK, &d);
        return;
    }
    if (!sent && !received && !ws->we_closed && !wslay_event_get_read_enabled(ws->ctx) && !ws->deadline_ms) {
        /* wslay is failing the connection and its close waits for the socket: not forever. */
        ws->deadline_ms = now_ms() + ws->opt.close_timeout_ms;
        ws->ping_out = 0;
        ws->next_ping_ms = 0;
    }
}

/* Worker: a pump holds io (no sender writes the socket meanwhile, ws_direct.c) and says at its end
 * whether a sender may write the next message itself. */
static void pump_open(courier_ws *ws, bool read) {
    pthread_mutex_lock(&ws->io);
    pump_open_io(ws, read);
    cr_ws_direct_update(ws);
    pthread_mutex_unlock(&ws->io);
}

/* ---- the opening handshake ---------------------------------------------------------------------- */

static bool token_in(const char *list, const char *token) {
    size_t n = strlen(token);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        const char *s = p;
        while (*p && *p != ',') p++;
        const char *end = p;
        while (end > s && (end[-1] == ' ' || end[-1] == '\t')) end--;
        if ((size_t)(end - s) == n && strncasecmp(s, token, n) == 0) return true;
    }
    return false;
}

/* "Cookie: a=b; c=d" for the URL from the engine's jar, appended to out (nothing when none match
 * or the jar is off). */
static void cookie_line(courier_engine *e, CURLU *u, bool secure, cr_buf *out) {
    courier_cookie_list *list = NULL;
    if (courier_cookies_list(&list, e, NULL) != COURIER_OK) return;
    char *host = NULL, *path = NULL;
    curl_url_get(u, CURLUPART_HOST, &host, 0);
    curl_url_get(u, CURLUPART_PATH, &path, 0);
    int64_t now = (int64_t)time(NULL);
    size_t start = out->len;
    for (size_t i = 0, n = courier_cookie_list_count(list); host && i < n; i++) {
        courier_cookie c;
        memset(&c, 0, sizeof c);
        c.size = sizeof c;
        if (courier_cookie_list_at(&c, list, i) != COURIER_OK) continue;
        if (c.expires && c.expires <= now) continue;
        if (c.secure && !secure && strcmp(host, "localhost") != 0 && strcmp(host, "127.0.0.1") != 0) continue;
        size_t hl = strlen(host), dl = strlen(c.domain);
        bool dom = strcasecmp(host, c.domain) == 0 ||
                   (c.include_subdomains && hl > dl && host[hl - dl - 1] == '.' && strcasecmp(host + hl - dl, c.domain) == 0);
        if (!dom) continue;
        const char *p = path && *path ? path : "/";
        size_t pl = strlen(c.path);
        bool pathok = strncmp(p, c.path, pl) == 0 && (p[pl] == 0 || p[pl] == '/' || (pl && c.path[pl - 1] == '/'));
        if (!pathok) continue;
        cr_buf_append_str(out, out->len == start ? "Cookie: " : "; ");
        cr_buf_append_str(out, c.name);
        cr_buf_append_char(out, '=');
        cr_buf_append_str(out, c.value);
    }
    if (out->len != start) cr_buf_append_str(out, "\r\n");
    curl_free(host);
    curl_free(path);
    courier_cookie_list_free(list);
}

static bool skip_header(const char *name) {
    static const char *const ours[] = {"Host", "Upgrade", "Connection", "Sec-WebSocket-Key", "Sec-WebSocket-Version",
                                       "Sec-WebSocket-Protocol", "Sec-WebSocket-Extensions", "Content-Length",
                                       "Transfer-Encoding", "Accept-Encoding"};
    for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
        if (strcasecmp(name, ours[i]) == 0) return true;
    return false;
}

/* Worker: the Upgrade request into ws->head, and the accept value it expects. */
static int build_request(courier_ws *ws, courier_error *err) {
    cr_transfer *t = ws->t;
    uint8_t key[16];
    if (!random_bytes(key, sizeof key)) return cr_fail(err, COURIER_E_INTERNAL, "getrandom failed");
    cr_buf k = {0};
    if (cr_base64_encode(&k, key, sizeof key) != COURIER_OK) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    /* Sec-WebSocket-Accept: base64(SHA-1(key + the RFC 6455 GUID)). */
    char cat[64];
    snprintf(cat, sizeof cat, "%s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", k.data);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    cr_buf a = {0};
    if (!EVP_Digest(cat, strlen(cat), md, &mdlen, EVP_sha1(), NULL) || cr_base64_encode(&a, md, mdlen)) {
        cr_buf_free(&k);
        cr_buf_free(&a);
        return cr_fail(err, COURIER_E_INTERNAL, "SHA-1 failed");
    }
    snprintf(ws->accept, sizeof ws->accept, "%s", a.data);
    cr_buf_free(&a);

    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *path = NULL, *query = NULL, *scheme = NULL;
    if (!u || curl_url_set(u, CURLUPART_URL, t->url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        curl_url_cleanup(u);
        cr_buf_free(&k);
        return cr_fail(err, COURIER_E_INVALID_URL, "not a URL: %.200s", t->url);
    }
    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
    curl_url_get(u, CURLUPART_PORT, &port, 0); /* only when the URL gives one */
    curl_url_get(u, CURLUPART_PATH, &path, 0);
    curl_url_get(u, CURLUPART_QUERY, &query, 0);
    cr_buf *h = &ws->head;
    cr_buf_append_str(h, "GET ");
    cr_buf_append_str(h, path && *path ? path : "/");
    if (query) {
        cr_buf_append_char(h, '?');
        cr_buf_append_str(h, query);
    }
    cr_buf_append_str(h, " HTTP/1.1\r\nHost: ");
    cr_buf_append_str(h, host);
    if (port) {
        cr_buf_append_char(h, ':');
        cr_buf_append_str(h, port);
    }
    cr_buf_append_str(h, "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ");
    cr_buf_append_str(h, k.data);
    cr_buf_append_str(h, "\r\nSec-WebSocket-Version: 13\r\n");
    cr_buf_free(&k);
    if (ws->opt.compression) {
        cr_buf_append_str(h, "Sec-WebSocket-Extensions: ");
        cr_buf_append_str(h, cr_wsd_offer());
        cr_buf_append_str(h, "\r\n");
    }
    if (ws->offered) {
        cr_buf_append_str(h, "Sec-WebSocket-Protocol: ");
        cr_buf_append_str(h, ws->offered);
        cr_buf_append_str(h, "\r\n");
    }
    bool has_auth = false, has_cookie = false;
    for (size_t i = 0; i < t->headers.count; i++) {
        const cr_kv *kv = &t->headers.items[i];
        if (skip_header(kv->name)) continue;
        if (strcasecmp(kv->name, "Authorization") == 0) has_auth = true;
        if (strcasecmp(kv->name, "Cookie") == 0) has_cookie = true;
        cr_buf_append_str(h, kv->name);
        cr_buf_append_str(h, ": ");
        cr_buf_append_str(h, kv->value);
        cr_buf_append_str(h, "\r\n");
    }
    /* Basic credentials for the request's own origin (as transport.c gives them to curl). */
    const cr_auth *au = t->auth;
    if (!has_auth && au && au->user && (au->schemes & COURIER_AUTH_BASIC)) {
        char *origin = cr_url_origin(t->url);
        if (origin && au->origin && strcmp(origin, au->origin) == 0) {
            cr_buf up = {0}, b = {0};
            cr_buf_append_str(&up, au->user);
            cr_buf_append_char(&up, ':');
            cr_buf_append_str(&up, au->password ? au->password : "");
            if (cr_base64_encode(&b, up.data, up.len) == COURIER_OK) {
                cr_buf_append_str(h, "Authorization: Basic ");
                cr_buf_append(h, b.data, b.len);
                cr_buf_append_str(h, "\r\n");
            }
            cr_buf_free(&up);
            cr_buf_free(&b);
        }
        free(origin);
    }
    if (!has_cookie) cookie_line(ws->e, u, scheme && strcasecmp(scheme, "https") == 0, h);
    ws->plain = scheme && strcasecmp(scheme, "http") == 0; /* no TLS (cr_ws_connected checks the proxy) */
    cr_buf_append_str(h, "\r\n");
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_free(query);
    curl_free(scheme);
    curl_url_cleanup(u);
    if (!h->data) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    return COURIER_OK;
}

/* The value of header `name` in a response head (lines after the status line), copied into out. */
static bool head_value(const char *head, const char *name, char *out, size_t cap) {
    size_t n = strlen(name);
    out[0] = 0;
    bool found = false;
    for (const char *p = strstr(head, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, n) != 0 || line[n] != ':') continue;
        const char *v = line + n + 1;
        while (*v == ' ' || *v == '\t') v++;
        const char *end = strstr(v, "\r\n");
        if (!end) end = v + strlen(v);
        while (end > v && (end[-1] == ' ' || end[-1] == '\t')) end--;
        size_t l = (size_t)(end - v);
        size_t have = strlen(out);
        /* Fields given more than once are one comma-separated list. */
        if (found && have + 2 < cap) {
            memcpy(out + have, ", ", 2);
            have += 2;
        }
        if (l > cap - 1 - have) l = cap - 1 - have;
        memcpy(out + have, v, l);
        out[have + l] = 0;
        found = true;
    }
    return found;
}

static void init_wslay(courier_ws *ws, courier_response *resp);

/* Worker: the response head is whole (head_end: the bytes of it, blank line included). */
static int check_response(courier_ws *ws, size_t head_end, courier_error *d) {
    char *head = ws->head.data;
    head[head_end - 2] = 0; /* keeps the last header's CRLF */
    int status = 0;
    if (strncmp(head, "HTTP/1.1 ", 9) != 0 && strncmp(head, "HTTP/1.0 ", 9) != 0)
        return cr_fail(d, COURIER_E_WS_HANDSHAKE, "the WebSocket handshake's answer is not HTTP/1.1");
    status = atoi(head + 9);
    if (status != 101) {
        cr_fail(d, COURIER_E_WS_HANDSHAKE, "the WebSocket handshake was refused with HTTP status %d", status);
        d->http_status = status;
        return COURIER_E_WS_HANDSHAKE;
    }
    char v[256];
    if (!head_value(head, "Upgrade", v, sizeof v) || !token_in(v, "websocket"))
        return cr_fail(d, COURIER_E_WS_HANDSHAKE, "the WebSocket handshake's answer has no Upgrade: websocket");
    if (!head_value(head, "Connection", v, sizeof v) || !token_in(v, "upgrade"))
        return cr_fail(d, COURIER_E_WS_HANDSHAKE, "the WebSocket handshake's answer has no Connection: upgrade");
    if (!head_value(head, "Sec-WebSocket-Accept", v, sizeof v) || strcmp(v, ws->accept) != 0)
        return cr_fail(d, COURIER_E_WS_HANDSHAKE, "the WebSocket handshake's Sec-WebSocket-Accept is %s",
                       v[0] ? "wrong" : "missing");
    if (head_value(head, "Sec-WebSocket-Extensions", v, sizeof v) && v[0]) {
        if (!ws->opt.compression)
            return cr_fail(d, COURIER_E_WS_HANDSHAKE, "the server chose a WebSocket extension that was not offered: %.100s", v);
        int zrc = cr_wsd_accept(&ws->deflate, v, d);
        if (zrc != COURIER_OK) return zrc;
    }
    char proto[128] = "";
    if (head_value(head, "Sec-WebSocket-Protocol", proto, sizeof proto) && proto[0]) {
        if (!ws->offered || strchr(proto, ',') || !token_in(ws->offered, proto))
            return cr_fail(d, COURIER_E_WS_HANDSHAKE, "the server chose a subprotocol that was not offered: %.100s", proto);
    }
    pthread_mutex_lock(&ws->m);
    snprintf(ws->protocol, sizeof ws->protocol, "%s", proto);
    snprintf(ws->extensions, sizeof ws->extensions, "%s", cr_wsd_agreed(ws->deflate));
    pthread_mutex_unlock(&ws->m);
    return COURIER_OK;
}

/* Worker: the handshake's I/O: the request out, the response head in. */
static void pump_handshake(courier_ws *ws) {
    courier_error d;
    if (ws->phase == P_SENDING_HEAD) {
        while (ws->head_off < ws->head.len) {
            size_t n = 0;
            CURLcode rc = curl_easy_send(ws->easy, ws->head.data + ws->head_off, ws->head.len - ws->head_off, &n);
            if (rc == CURLE_AGAIN) return;
            if (rc != CURLE_OK) {
                cr_fail(&d, COURIER_E_NETWORK, "the WebSocket handshake could not be sent: %s", curl_easy_strerror(rc));
                d.curl_code = rc;
                finish(ws, COURIER_E_NETWORK, &d);
                return;
            }
            ws->head_off += n;
        }
        ws->head.len = 0; /* now the response */
        ws->phase = P_READING_HEAD;
    }
    char buf[4096];
    for (;;) {
        size_t n = 0;
        CURLcode rc = curl_easy_recv(ws->easy, buf, sizeof buf, &n);
        if (rc == CURLE_AGAIN) return;
        if (rc != CURLE_OK || n == 0) {
            cr_fail(&d, COURIER_E_WS_HANDSHAKE, "the WebSocket server closed the connection during the handshake");
            d.curl_code = rc;
            finish(ws, COURIER_E_WS_HANDSHAKE, &d);
            return;
        }
        size_t before = ws->head.len;
        if (cr_buf_append(&ws->head, buf, n) != COURIER_OK) {
            finish(ws, COURIER_E_NO_MEMORY, NULL);
            return;
        }
        size_t from = before > 3 ? before - 3 : 0;
        char *end = ws->head.len >= 4 ? memmem(ws->head.data + from, ws->head.len - from, "\r\n\r\n", 4) : NULL;
        if (!end) {
            if (ws->head.len > WS_MAX_HEAD) {
                finish(ws, fail_detail(&d, COURIER_E_HEADERS_TOO_LARGE, "the WebSocket handshake's answer is over %s",
                                       "16 KiB"),
                       &d);
                return;
            }
            continue;
        }
        size_t head_end = (size_t)(end - ws->head.data) + 4;
        if (head_end < ws->head.len) { /* the first frames came with the head */
            ws->extra_len = ws->head.len - head_end;
            ws->extra = malloc(ws->extra_len);
            if (!ws->extra) {
                finish(ws, COURIER_E_NO_MEMORY, NULL);
                return;
            }
            memcpy(ws->extra, ws->head.data + head_end, ws->extra_len);
        }
        int crc = check_response(ws, head_end, &d);
        courier_response *resp = crc == COURIER_OK ? cr_ws_handshake_response(ws, ws->head.data) : NULL;
        cr_buf_free(&ws->head);
        if (crc != COURIER_OK) {
            finish(ws, crc, &d);
            return;
        }
        init_wslay(ws, resp);
        return;
    }
}

/* Worker: the handshake succeeded (resp: the 101 for its FINISHED, taken; may be NULL). */
static void init_wslay(courier_ws *ws, courier_response *resp) {
    static const struct wslay_event_callbacks cbs = {on_recv, on_send, on_genmask, NULL, NULL, NULL, on_msg};
    if (wslay_event_context_client_init(&ws->ctx, &cbs, ws) != 0) {
        courier_response_free(resp);
        finish(ws, COURIER_E_NO_MEMORY, NULL);
        return;
    }
    cr_ws_handshake_ended(ws, COURIER_OK, resp, NULL); /* ws_events.c: before anyone sees it open */
    wslay_event_config_set_max_recv_msg_length(ws->ctx, (uint64_t)ws->opt.max_message_bytes);
    ws->masks_off = sizeof ws->masks; /* empty: the first frame fills it */
    if (ws->deflate) wslay_event_config_set_allowed_rsv_bits(ws->ctx, WSLAY_RSV1_BIT);
    ws->phase = P_OPEN;
    ws->deadline_ms = 0;
    if (ws->opt.ping_interval_ms > 0) ws->next_ping_ms = now_ms() + ws->opt.ping_interval_ms;
    set_state(ws, COURIER_WS_OPEN);
    tell(ws);
    pump_open(ws, true); /* the frames that came with the head, and what followed them */
}

/* Worker, under io (a caller's read may run meanwhile, and the pong it reads changes ping_out and
 * the deadlines): timers. */
static void check_timers(courier_ws *ws, int64_t now) {
    courier_error d;
    if (ws->phase == P_ENDED) return;
    if (ws->deadline_ms && now >= ws->deadline_ms) {
        if (ws->phase == P_OPEN && ws->ping_out && ws->caller_reads) {
            pump_open_io(ws, true); /* the pong may wait in the socket, unread by the caller */
            cr_ws_direct_update(ws);
            if (ws->phase != P_OPEN || !ws->ping_out) return;
        }
        if (ws->phase == P_OPEN && ws->ping_out) {
            /* A dead peer: say so (1011) if the socket takes it, and go. */
            if (!wslay_event_get_close_sent(ws->ctx)) {
                ws->we_closed = 1;
                static const char why[] = "keepalive ping timeout";
                wslay_event_queue_close(ws->ctx, 1011, (const uint8_t *)why, sizeof why - 1);
                wslay_event_send(ws->ctx);
            }
            ws->direct_ok = 0;
            finish(ws, fail_detail(&d, COURIER_E_TIMEOUT, "the WebSocket server did not answer a ping in %s", "time"),
                   &d);
            return;
        }
        finish(ws, fail_detail(&d, COURIER_E_TIMEOUT, "WebSocket: %s",
                               ws->phase == P_OPEN ? "the server's close frame did not come in time"
                                                   : "the connection or opening handshake took too long"),
               &d);
        return;
    }
    if (ws->phase == P_OPEN && ws->next_ping_ms && now >= ws->next_ping_ms && !ws->ping_out &&
        !wslay_event_get_close_sent(ws->ctx)) {
        uint8_t payload[8];
        int64_t stamp = now;
        memcpy(payload, &stamp, sizeof payload);
        struct wslay_event_msg wm = {WSLAY_PING, payload, sizeof payload};
        if (wslay_event_queue_msg(ws->ctx, &wm) == 0) {
            ws->ping_out = 1;
            ws->next_ping_ms = 0;
            ws->deadline_ms = now + (ws->opt.ping_timeout_ms > 0 ? ws->opt.ping_timeout_ms : ws->opt.ping_interval_ms);
            pump_open_io(ws, false);
            cr_ws_direct_update(ws);
        }
    }
}

void cr_ws_connected(courier_engine *e, courier_ws *ws, CURLcode result) {
    (void)e;
    if (ws->phase != P_CONNECTING) return;
    if (result != CURLE_OK) {
        courier_error d;
        int code = cr_code_from_curl(result, false);
        cr_fail(&d, code, "WebSocket: %s", ws->errbuf && ws->errbuf[0] ? ws->errbuf : curl_easy_strerror(result));
        d.curl_code = result;
        finish(ws, code, &d);
        return;
    }
    ws->phase = P_SENDING_HEAD;
    curl_socket_t s = CURL_SOCKET_BAD;
    if (curl_easy_getinfo(ws->easy, CURLINFO_ACTIVESOCKET, &s) == CURLE_OK) ws->sock = s;
    /* Through a proxy's tunnel (an HTTPS proxy is TLS) the frames are not written to the socket as
     * they are: no direct sends then (ws_direct.c). */
    long tunnel = 0;
    if (curl_easy_getinfo(ws->easy, CURLINFO_HTTP_CONNECTCODE, &tunnel) != CURLE_OK || tunnel != 0 ||
        s == CURL_SOCKET_BAD)
        ws->plain = 0;
    pump_handshake(ws);
}

courier_ws *cr_ws_of_easy(courier_engine *e, CURL *easy) {
    for (courier_ws *ws = e->ws_head; ws; ws = ws->next)
        if (ws->easy == easy) return ws;
    return NULL;
}

int cr_ws_turn(courier_engine *e) {
    int64_t now = now_ms();
    int64_t wait = INT64_MAX;
    for (courier_ws *ws = e->ws_head, *next; ws; ws = next) {
        next = ws->next;
        if (ws->phase == P_SENDING_HEAD || ws->phase == P_READING_HEAD) pump_handshake(ws); /* may open it */
        pthread_mutex_lock(&ws->io); /* the timers, and wslay, are shared with a caller's read */
        if (ws->phase == P_OPEN) {
            /* Only a WebSocket whose socket the last poll found ready (or one not pumped for a
             * second: curl_multi_poll reports POLLIN, POLLOUT and POLLPRI only), not every one every
             * turn: with 32 open, each turn was 32 reads that would block. */
            unsigned short rev = ws->polled ? e->ws_fds[ws->polled - 1].revents : 0;
            if (rev || now >= ws->pump_by_ms) {
                pump_open_io(ws, true);
                cr_ws_direct_update(ws);
            }
            ws->polled = 0;
        }
        check_timers(ws, now);
        int64_t deadline = ws->deadline_ms, ping = ws->next_ping_ms;
        /* The caller's reads: the worker reads too, once a second (pings answered, messages queued
         * while nobody reads; the caller's loop is told through the notify). */
        if (ws->caller_reads && ws->phase == P_OPEN && (!deadline || ws->pump_by_ms < deadline)) deadline = ws->pump_by_ms;
        pthread_mutex_unlock(&ws->io);
        if (ws->phase == P_ENDED) {
            unlink_ws(e, ws);
            continue;
        }
        if (deadline && deadline - now < wait) wait = deadline - now;
        if (ping && ping - now < wait) wait = ping - now;
    }
    if (wait == INT64_MAX) return -1;
    return wait < 0 ? 0 : wait > INT32_MAX ? INT32_MAX : (int)wait;
}

size_t cr_ws_poll_fds(courier_engine *e, struct curl_waitfd **fds, size_t *cap) {
    size_t n = 0;
    for (courier_ws *ws = e->ws_head; ws; ws = ws->next) {
        ws->polled = 0;
        if (ws->phase < P_SENDING_HEAD || ws->phase == P_ENDED) continue;
        curl_socket_t s = ws->sock; /* libcurl's CURLINFO_ACTIVESOCKET at connect (a search of its pool) */
        if (s == CURL_SOCKET_BAD) continue;
        pthread_mutex_lock(&ws->m);
        int full = ws->in_full || ws->caller_reads; /* unread, or read by the caller's loop */
        int theirs = ws->caller_reads;
        pthread_mutex_unlock(&ws->m);
        short ev = full && ws->phase == P_OPEN ? 0 : CURL_WAIT_POLLIN;
        if (ws->phase == P_SENDING_HEAD || (ws->phase == P_OPEN && (ws->wants_write || ws->out_pending)))
            ev |= CURL_WAIT_POLLOUT;
        /* Read by the caller and nothing to write: not polled at all (poll(2) reports POLLHUP and
         * POLLERR unasked, which would wake the worker every turn; it reads once a second). */
        if (!ev && theirs) continue;
        if (n == *cap) {
            size_t nc = *cap ? *cap * 2 : 8;
            struct curl_waitfd *g = realloc(*fds, nc * sizeof *g);
            if (!g) continue; /* not polled this turn (and pumped within the second) */
            *fds = g;
            *cap = nc;
        }
        (*fds)[n++] = (struct curl_waitfd){s, ev, 0};
        ws->polled = n;
    }
    return n;
}

void cr_ws_engine_closing(courier_engine *e) {
    e->ws_closed = 1;
    while (e->ws_head) {
        courier_ws *ws = e->ws_head;
        courier_error d;
        pthread_mutex_lock(&ws->io);
        finish(ws, fail_detail(&d, COURIER_E_CLOSED, "the engine closed%s", ""), &d);
        pthread_mutex_unlock(&ws->io);
        unlink_ws(e, ws);
    }
}

/* libcurl's header and body callbacks of the connect-only handle: nothing comes through them but a
 * proxy's answer to CONNECT, which libcurl has already judged. */
static size_t discard(char *data, size_t size, size_t n, void *user) {
    (void)data;
    (void)user;
    return size * n;
}

/* Worker (posted by courier_ws_open): the connect-only transfer into the multi handle. */
void cr_ws_start_work(void *user) {
    courier_ws *ws = user;
    courier_engine *e = ws->e;
    courier_error d;
    cr_transfer *t = ws->t;
    ws->linked = 1;
    ws->next = e->ws_head;
    e->ws_head = ws;
    ws->sock = CURL_SOCKET_BAD;
    cr_ws_handshake_begun(ws); /* ws_events.c: WILL_SEND; every way on ends in its FINISHED */
    /* The close begun: a start posted just before it may run after the worker's loop ended, which
     * called cr_ws_engine_closing only if a WebSocket was open then (trace_test
     * websocket_opened_as_the_engine_closes_ends): it must not connect. */
    pthread_mutex_lock(&e->core.lock);
    int closing = e->core.closing;
    pthread_mutex_unlock(&e->core.lock);
    if (e->ws_closed || closing || ws->phase == P_ENDED) {
        if (ws->phase != P_ENDED) finish(ws, fail_detail(&d, COURIER_E_CLOSED, "the engine closed%s", ""), &d);
        unlink_ws(e, ws);
        return;
    }
    pthread_mutex_lock(&ws->m);
    int gone = ws->freed || ws->close_asked;
    pthread_mutex_unlock(&ws->m);
    if (gone) {
        finish(ws, fail_detail(&d, COURIER_E_CANCELLED, "the WebSocket was closed before it opened%s", ""), &d);
        unlink_ws(e, ws);
        return;
    }
    int rc = build_request(ws, &d);
    CURL *h = rc == COURIER_OK ? curl_easy_init() : NULL;
    ws->errbuf = malloc(CURL_ERROR_SIZE);
    if (rc == COURIER_OK && (!h || !ws->errbuf)) rc = cr_fail(&d, COURIER_E_NO_MEMORY, NULL);
    if (rc == COURIER_OK) rc = cr_transport_base(e, h);
    if (rc == COURIER_OK) {
        ws->errbuf[0] = 0;
        ws->easy = h;
        t->easy = h;
        CURLcode c = curl_easy_setopt(h, CURLOPT_URL, t->url);
        if (!c) c = curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
        if (!c && t->net) c = (CURLcode)cr_netopts_setup(t); /* its DNS overrides and socket (netopts.c) */
        /* HTTP/1.1 only: an h2 answer to ALPN would make the Upgrade request garbage. */
        if (!c) c = curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        /* Through an HTTP proxy, a tunnel for ws:// too (curl tunnels only https by itself). */
        if (!c) c = curl_easy_setopt(h, CURLOPT_HTTPPROXYTUNNEL, 1L);
        if (!c) c = curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ws->errbuf);
        if (!c) c = curl_easy_setopt(h, CURLOPT_PREREQDATA, NULL);
        /* The engine's header and body callbacks expect a transfer: a proxy's CONNECT answer must
         * not reach them (it did, and crashed: ws_test test_through_a_proxy). */
        if (!c) c = curl_easy_setopt(h, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
        if (!c) c = curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, discard);
        if (!c) c = curl_easy_setopt(h, CURLOPT_HEADERDATA, NULL);
        if (!c) c = curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        if (!c) c = curl_easy_setopt(h, CURLOPT_WRITEDATA, NULL);
        if (!c) c = curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)ws->opt.handshake_timeout_ms);
        if (!c) c = (CURLcode)cr_auth_setup(e, t); /* the request's proxy */
        if (!c) c = (CURLcode)cr_security_setup(t); /* the request's TLS policy */
        if (!c) { /* room for this WebSocket's connection first (see pool_room) */
            ws->pooled = 1;
            e->ws_pooled++;
            pool_room(e);
        }
        if (!c && curl_multi_add_handle(e->core.multi, h) != CURLM_OK) c = CURLE_OUT_OF_MEMORY;
        t->easy = NULL;
        if (!c) cr_ws_handshake_sent(ws); /* ws_events.c: DID_SEND */
        if (c) rc = cr_fail(&d, c == CURLE_OUT_OF_MEMORY ? COURIER_E_NO_MEMORY : COURIER_E_INTERNAL,
                            "WebSocket: %s", curl_easy_strerror(c));
    } else if (h) {
        curl_easy_cleanup(h);
    }
    /* ws->t stays until the handshake ends: its FINISHED tells its id, URL and header lines (and
     * libcurl reads the request's CURLOPT_CONNECT_TO list, t->net's, until it has connected). */
    if (rc != COURIER_OK) {
        finish(ws, rc, &d);
        unlink_ws(e, ws);
        return;
    }
    ws->deadline_ms = now_ms() + ws->opt.handshake_timeout_ms;
}

/* Worker (posted by a send or a close): what the caller queued goes to wslay and out. */
static void kick_work(void *user) {
    courier_ws *ws = user;
    pthread_mutex_lock(&ws->m);
    ws->kick_posted = 0;
    int freed = ws->freed;
    pthread_mutex_unlock(&ws->m);
    if (ws->linked) {
        if (freed && ws->phase != P_ENDED) {
            courier_error d;
            pthread_mutex_lock(&ws->io);
            finish(ws, fail_detail(&d, COURIER_E_CANCELLED, "the WebSocket was freed%s", ""), &d);
            pthread_mutex_unlock(&ws->io);
        } else if (ws->phase == P_OPEN) {
            pump_open(ws, false); /* a send or a close; a reader that made room sets read_again */
        } else if (ws->phase != P_ENDED) {
            pthread_mutex_lock(&ws->m);
            int close_asked = ws->close_asked;
            pthread_mutex_unlock(&ws->m);
            if (close_asked) {
                courier_error d;
                finish(ws, fail_detail(&d, COURIER_E_CANCELLED, "the WebSocket was closed before it opened%s", ""),
                       &d);
            }
        }
        if (ws->phase == P_ENDED) unlink_ws(ws->e, ws);
    }
    cr_ws_release(ws); /* the post's reference */
}

/* Any thread, under m: claims the kick a send needs (false: one is pending already). The claim is
 * posted with cr_ws_kick_post once m is released, so that the worker, woken by the post, does not
 * find m still held by the sender and sleep again on it. */
bool cr_ws_kick_claim_locked(courier_ws *ws) {
    if (ws->kick_posted) return false;
    ws->kick_posted = 1;
    atomic_fetch_add(&ws->refs, 1);
    return true;
}

/* Any thread, without m: posts a claimed kick. Returns false when the engine refused (claim undone). */
bool cr_ws_kick_post(courier_ws *ws) {
    if (courier_engine_post(ws->e, kick_work, ws, NULL) == COURIER_OK) return true;
    pthread_mutex_lock(&ws->m);
    ws->kick_posted = 0;
    pthread_mutex_unlock(&ws->m);
    atomic_fetch_sub(&ws->refs, 1); /* never the last: the caller holds one */
    return false;
}

/* Any thread, under m: a kick posted unless one is pending. Returns false when the engine refused. */
bool cr_ws_kick_locked(courier_ws *ws) {
    if (ws->kick_posted) return true;
    ws->kick_posted = 1;
    atomic_fetch_add(&ws->refs, 1);
    if (courier_engine_post(ws->e, kick_work, ws, NULL) != COURIER_OK) {
        ws->kick_posted = 0;
        atomic_fetch_sub(&ws->refs, 1); /* never the last: the caller holds one */
        return false;
    }
    return true;
}

