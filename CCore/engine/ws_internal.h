/*
 * engine/ws_internal.h — what the two sides of a WebSocket share: the worker's side (ws.c: the
 * connection, the handshake, wslay) and the caller's side (ws_api.c: the courier_ws_* calls). The
 * struct's comments say which fields are shared (under m) and which the worker's alone.
 */
#ifndef COURIER_ENGINE_WS_INTERNAL_H
#define COURIER_ENGINE_WS_INTERNAL_H

#include "internal.h"
#include "engine/ws_deflate.h"

#include <pthread.h>
#include <stdatomic.h>

#include <wslay/wslay.h>

/* Hidden like every internal declaration (see base/base.h). */
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility push(hidden)
#endif

#define WS_DEFAULT_MAX_MESSAGE (1 << 20)
#define WS_DEFAULT_CLOSE_TIMEOUT 10000
#define WS_DEFAULT_HANDSHAKE_TIMEOUT 30000
#define WS_DEFAULT_SEND_QUEUE (16 << 20)
#define WS_DEFAULT_RECEIVE_QUEUE (16 << 20)
#define WS_MAX_HEAD 16384

typedef struct ws_msg {
    struct ws_msg *next;
    int type;  /* COURIER_WS_TEXT / _BINARY; 0: a close request (code in len, reason in data) */
    size_t len;
    uint8_t data[];
} ws_msg;

enum { P_CONNECTING = 0, P_SENDING_HEAD, P_READING_HEAD, P_OPEN, P_ENDED };

struct courier_ws {
    pthread_mutex_t m;
    pthread_mutex_t io;         /* who writes the socket: the worker's pumps, or a sender (ws_direct.c) */
    pthread_cond_t c;
    atomic_int refs; /* the caller's and the worker's */
    courier_engine *e;
    pthread_t worker;
    /* Shared, under m. */
    int state;                  /* courier_ws_state */
    ws_msg *in_first, *in_last; /* received, unread */
    ws_msg *borrowed;           /* handed out by the last courier_ws_next */
    size_t in_bytes;            /* bytes of in_first..in_last */
    int in_full;                /* in_bytes reached max_receive_queue_bytes: the worker stopped reading */
    ws_msg *out_first, *out_last; /* sent by the caller, not yet handed to wslay */
    size_t out_bytes;           /* queued bytes: ours plus wslay's */
    int kick_posted;            /* a post to move out_* to wslay is pending */
    int read_again;             /* in_full was cleared: the kick's pump reads (the worker takes it) */
    int caller_reads;           /* the caller's loop reads the socket (courier_ws_take_reads, or a
                                   waiting courier_ws_next): the worker does not poll it for
                                   reading. Written under io and m */
    int poll_waiting;           /* courier_ws_next calls waiting in poll(2) on the socket and wake_r */
    int wake_r, wake_w;         /* a pipe that tell() writes while poll_waiting (-1: not made yet) */
    int close_asked;            /* courier_ws_close was called */
    int freed;                  /* courier_ws_free was called: no more notify */
    int end_code;               /* once CLOSED: what courier_ws_next returns */
    courier_error end_err;
    int close_code;             /* the server's close code (1005 none in its frame, 1006 no frame) */
    char close_reason[124];
    int close_code_sent;
    char protocol[128];
    char extensions[96];        /* the permessage-deflate agreed, as the server said it, or "" */
    courier_ws_notify_fn notify;
    void *user;
    courier_user_free_fn user_free;
    courier_ws_options opt;
    /* Worker only. */
    struct courier_ws *next;    /* the engine's list */
    int phase;                  /* P_* */
    int linked;                 /* in the engine's list and its easy handle in the multi handle */
    int pooled;                 /* counted in the engine's ws_pooled (its easy handle was added) */
    CURL *easy;
    char *errbuf;
    cr_transfer *t;             /* the prepared request, until the handshake ends (its FINISHED,
                                   ws_events.c) */
    wslay_event_context_ptr ctx;
    cr_buf head;                /* the handshake request, then the response head as it arrives */
    size_t head_off;            /* bytes of the request written */
    uint8_t *extra;             /* bytes read past the response head: the first frames */
    size_t extra_len, extra_off;
    char accept[32];            /* the Sec-WebSocket-Accept expected */
    char *offered;              /* the subprotocols offered (copied), or NULL */
    int eof, io_error;          /* what the recv/send callbacks saw (io_error: a CURLcode) */
    int we_closed;              /* the close frame queued by us (caller or keepalive), not wslay */
    int fail_code;              /* the error the connection is being failed with, else 0 */
    int64_t deadline_ms;        /* handshake, close or pong deadline (0: none) */
    int64_t next_ping_ms;       /* keepalive (0: off) */
    int ping_out;               /* a keepalive ping is waiting for its pong */
    cr_wsd *deflate;            /* permessage-deflate, when the server accepted it */
    cr_buf zbuf;                /* a message compressed or inflated */
    uint8_t hold[14];           /* a frame header wslay handed over, not written yet (on_send) */
    size_t hold_len;
    int plain;                  /* ws:// with no proxy tunnel: the frames go to the socket as they are */
    int out_pending;            /* raw had bytes at the end of the last pump: poll for POLLOUT */
    /* Under io (ws_direct.c): what a sender may write itself, and what it left for the worker. */
    int direct_ok;              /* set at each pump's end: a sender may write its message itself */
    uint8_t *raw;               /* the rest of a frame a sender wrote in part, written first */
    size_t raw_len, raw_off;
    uint8_t masks[256];         /* masking keys from the CSPRNG, taken 4 bytes at a time (cr_ws_masks) */
    size_t masks_off;           /* the next unused byte of masks */
    curl_socket_t sock;         /* the connection's socket, once connected (CURL_SOCKET_BAD before) */
    /* Under io: the caller's reads (courier_ws_take_reads, cr_ws_read_here). */
    int read_ok;                /* set at each pump's end: the caller may take the reads */
    int reading_here;           /* the caller's thread is in wslay_event_recv (on_recv reads with
                                   recv(2), on_msg tells nobody: the reader is there); 2: a recv
                                   returned less than asked (the socket is empty: no more recv) */
    int recv_err;               /* what the caller's wslay_event_recv returned, for the next pump */
    int wants_write;            /* wslay had something to write at the last pump's end (the poll's
                                   POLLOUT; the worker's copy, as the reader may queue a pong) */
    int reader_fd;              /* a dup of sock handed to the caller's loop (-1: none), closed
                                   with the WebSocket; the socket is shut down when the worker
                                   drops the connection, so the loop sees the end */
    size_t polled;              /* 1 + its slot in the engine's ws_fds of the last poll; 0: none */
    int64_t pump_by_ms;         /* pumped at the latest then, ready or not (a safety net) */
};

/* ws.c. Drops a reference (the caller's or the worker's); the last frees the WebSocket. Any thread. */
void cr_ws_release(courier_ws *ws);
/* Worker (posted by courier_ws_open, `user` the WebSocket): the connect-only transfer into the
 * multi handle. */
void cr_ws_start_work(void *user);
/* Any thread, under ws->m: a kick posted to the worker (the caller's messages handed to wslay, or a
 * close) unless one is pending. False when the engine refused (closing). */
bool cr_ws_kick_locked(courier_ws *ws);
/* The same in two steps, for courier_ws_send: under ws->m, claim the kick (false: one is pending);
 * after releasing ws->m, post the claim (false when the engine refused: the claim is undone). The
 * worker woken by the post then never finds ws->m still held by the sender. */
bool cr_ws_kick_claim_locked(courier_ws *ws);
bool cr_ws_kick_post(courier_ws *ws);

/* ws_events.c (see its head): the handshake's request events, on the worker. WILL_SEND when the
 * worker takes the WebSocket up; DID_SEND once its handle is in the multi handle; the 101 as a
 * response for FINISHED (`head`: the answer's head, NUL-terminated after the last header line's
 * CRLF), NULL when nobody listens or no memory; and the one FINISHED when the handshake ends:
 * COURIER_OK with resp (taken, may be NULL), or `code` with its detail (may be NULL), then ws->t
 * is freed. Nothing once ws->t is gone. */
void cr_ws_handshake_begun(courier_ws *ws);
void cr_ws_handshake_sent(courier_ws *ws);
courier_response *cr_ws_handshake_response(const courier_ws *ws, const char *head);
void cr_ws_handshake_ended(courier_ws *ws, int code, courier_response *resp, const courier_error *detail);

/* ws_direct.c (see its head). cr_ws_direct_send: any thread (courier_ws_send), `data` borrowed for
 * the call: WS_DIRECT_SENT (written), WS_DIRECT_KICK (taken; the caller kicks the worker: a part
 * is left in raw, or the socket failed) or WS_DIRECT_NO (not taken: queue it as usual). */
enum { WS_DIRECT_NO = 0, WS_DIRECT_SENT, WS_DIRECT_KICK };
int cr_ws_direct_send(courier_ws *ws, int type, const void *data, size_t len);
/* Under io: masking bytes from the WebSocket's CSPRNG pool; false when the CSPRNG failed. */
bool cr_ws_masks(courier_ws *ws, uint8_t *buf, size_t len);
/* Worker, under io: raw written first (0 all, 1 some left, -1 the socket failed). */
int cr_ws_direct_flush(courier_ws *ws);
/* Worker, under io, at a pump's end: direct_ok, read_ok, wants_write and out_pending. */
void cr_ws_direct_update(courier_ws *ws);
/* ws_api.c. The caller's thread (courier_ws_read_socket, a waiting courier_ws_next), while the reads are the caller's: reads the
 * socket under io, the messages queued for courier_ws_next. False when the reads are not (or no
 * longer) the caller's: the connection is ending or failed (the worker was kicked to end it), the
 * receive queue is full, or they were given back. */
bool cr_ws_read_here(courier_ws *ws);

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC visibility pop
#endif

#endif /* COURIER_ENGINE_WS_INTERNAL_H */
