/*
 * ws_api.c — the caller's side of a WebSocket (ws.c has the worker's): options, opening (the
 * request checked and prepared here, the connection started on the worker), sending, reading
 * (courier_ws_next), closing and freeing. Any thread; what the worker shares is under ws->m, and
 * everything else is posted to the worker (courier_engine_post).
 */
#include "engine/ws_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* ---- the caller's side --------------------------------------------------------------------------- */

int courier_ws_options_init(courier_ws_options *o) {
    if (!o || o->size < offsetof(courier_ws_options, max_send_queue_bytes) + sizeof(int64_t))
        return COURIER_E_INVALID_ARGUMENT;
    size_t size = o->size;
    courier_ws_options d;
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    d.max_message_bytes = WS_DEFAULT_MAX_MESSAGE;
    d.close_timeout_ms = WS_DEFAULT_CLOSE_TIMEOUT;
    d.max_send_queue_bytes = WS_DEFAULT_SEND_QUEUE;
    d.max_receive_queue_bytes = WS_DEFAULT_RECEIVE_QUEUE;
    memcpy(o, &d, size < sizeof d ? size : sizeof d);
    o->size = size;
    return COURIER_OK;
}

static bool is_token_char(unsigned char c) {
    return c > 0x20 && c < 0x7F && !strchr("()<>@,;:\\\"/[]?={}", c);
}

/* A comma-separated list of tokens, normalised to "a, b". NULL: not one. */
static char *subprotocol_list(const char *s) {
    cr_buf out = {0};
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        const char *start = p;
        while (is_token_char((unsigned char)*p)) p++;
        if (p == start) break;
        if (out.len) cr_buf_append_str(&out, ", ");
        cr_buf_append(&out, start, (size_t)(p - start));
        while (*p == ' ' || *p == '\t') p++;
        if (*p == 0) return out.data ? out.data : NULL;
        if (*p != ',') break;
        p++;
    }
    cr_buf_free(&out);
    return NULL;
}

/* ws(s):// becomes http(s)://: libcurl 7.88 on Debian has no ws scheme, and the proxy variables
 * apply by http/https. A relative target is joined with the base URL as any request's is. */
static char *map_scheme(const char *target) {
    const char *rest = NULL, *scheme = NULL;
    if (strncasecmp(target, "ws://", 5) == 0) rest = target + 5, scheme = "http://";
    else if (strncasecmp(target, "wss://", 6) == 0) rest = target + 6, scheme = "https://";
    if (!rest) return NULL;
    size_t n = strlen(scheme) + strlen(rest) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s", scheme, rest);
    return s;
}

int courier_ws_open(courier_ws **out, courier_engine *e, const courier_request *r, const courier_ws_options *options,
                    courier_ws_notify_fn notify, void *user, courier_user_free_fn user_free, courier_error *err) {
    cr_error_clear(err);
    if (out) *out = NULL;
    int rc = COURIER_OK;
    courier_ws_options opt;
    memset(&opt, 0, sizeof opt);
    opt.size = sizeof opt;
    courier_ws_options_init(&opt);
    if (!out || !e || !r) rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "WebSocket, engine or request is NULL");
    if (rc == COURIER_OK && options) {
        if (options->size < offsetof(courier_ws_options, max_send_queue_bytes) + sizeof(int64_t))
            rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "courier_ws_options.size is too small");
        else memcpy(&opt, options, options->size < sizeof opt ? options->size : sizeof opt);
        opt.size = sizeof opt;
    }
    if (rc == COURIER_OK) {
        if (opt.max_message_bytes <= 0) opt.max_message_bytes = WS_DEFAULT_MAX_MESSAGE;
        if (opt.close_timeout_ms <= 0) opt.close_timeout_ms = WS_DEFAULT_CLOSE_TIMEOUT;
        if (opt.max_send_queue_bytes <= 0) opt.max_send_queue_bytes = WS_DEFAULT_SEND_QUEUE;
        if (opt.max_receive_queue_bytes <= 0) opt.max_receive_queue_bytes = WS_DEFAULT_RECEIVE_QUEUE;
        if (opt.ping_interval_ms < 0 || opt.ping_timeout_ms < 0 || opt.handshake_timeout_ms < 0)
            rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "a negative WebSocket time");
    }
    char *offered = NULL;
    if (rc == COURIER_OK && opt.subprotocols && *opt.subprotocols && !(offered = subprotocol_list(opt.subprotocols)))
        rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "subprotocols must be tokens separated by commas");
    opt.subprotocols = NULL;
    /* The request, with ws(s) mapped, prepared as any send is (base URL, headers, credentials). */
    courier_request *copy = NULL;
    cr_transfer *t = NULL;
    if (rc == COURIER_OK) rc = cr_request_copy(&copy, r);
    if (rc == COURIER_E_INVALID_ARGUMENT)
        cr_fail(err, rc, "a WebSocket request has no multipart parts, file body or download");
    else if (rc) cr_fail(err, rc, NULL);
    if (rc == COURIER_OK) {
        char *mapped = map_scheme(copy->target);
        if (mapped) cr_request_take_target(copy, mapped);
        if (copy->has_body || copy->download_path || (int)copy->freeze.policy != (int)COURIER_FREEZE_NEVER)
            rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "a WebSocket request has no body, download or freezing");
        else if (strcmp(copy->method, "GET") != 0)
            rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "a WebSocket request's method is GET");
    }
    if (rc == COURIER_OK) rc = cr_transfer_prepare(e, copy, &t, err);
    courier_request_free(copy);
    courier_ws *ws = rc == COURIER_OK ? cr_zalloc(sizeof *ws) : NULL;
    if (rc == COURIER_OK && !ws) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    if (rc != COURIER_OK) {
        if (t) cr_transfer_refuse(e, t, rc, err); /* request.c: ends what its interceptors began */
        free(offered);
        if (user_free) user_free(user);
        return rc;
    }
    if (opt.handshake_timeout_ms == 0)
        opt.handshake_timeout_ms = t->timeout_ms > 0 ? t->timeout_ms : WS_DEFAULT_HANDSHAKE_TIMEOUT;
    pthread_mutex_init(&ws->m, NULL);
    pthread_mutex_init(&ws->io, NULL);
    cr_cond_init(&ws->c);
    atomic_init(&ws->refs, 2); /* the caller's, and the worker's (once cr_ws_start_work runs) */
    ws->e = e;
    ws->reader_fd = -1;
    ws->wake_r = ws->wake_w = -1;
    ws->worker = e->worker;
    ws->state = COURIER_WS_CONNECTING;
    ws->notify = notify;
    ws->user = user;
    ws->user_free = user_free;
    ws->opt = opt;
    ws->offered = offered;
    ws->t = t;
    rc = courier_engine_post(e, cr_ws_start_work, ws, err);
    if (rc != COURIER_OK) {
        cr_transfer_refuse(e, t, rc, err);
        ws->t = NULL;
        free(offered);
        ws->offered = NULL;
        ws->user_free = NULL;
        atomic_store(&ws->refs, 1);
        cr_ws_release(ws);
        if (user_free) user_free(user);
        return rc;
    }
    *out = ws;
    return COURIER_OK;
}

int courier_ws_send(courier_ws *ws, courier_ws_type type, const void *data, size_t len, courier_error *err) {
    cr_error_clear(err);
    if (!ws || (!data && len) || (type != COURIER_WS_TEXT && type != COURIER_WS_BINARY))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, NULL);
    if (type == COURIER_WS_TEXT && len && !cr_utf8_valid(data, len))
        return cr_fail(err, COURIER_E_INVALID_ENCODING, "a WebSocket text message that is not UTF-8");
    int direct = cr_ws_direct_send(ws, type, data, len); /* ws_direct.c: written here when it may be */
    if (direct == WS_DIRECT_SENT) return COURIER_OK;
    if (direct == WS_DIRECT_KICK) { /* the worker writes the rest, or finds the failure */
        pthread_mutex_lock(&ws->m);
        bool post = cr_ws_kick_claim_locked(ws);
        pthread_mutex_unlock(&ws->m);
        if (post && !cr_ws_kick_post(ws)) return cr_fail(err, COURIER_E_CLOSED, "the engine is closing");
        return COURIER_OK;
    }
    ws_msg *m = malloc(sizeof *m + len + 1);
    if (!m) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    m->next = NULL;
    m->type = type;
    m->len = len;
    if (len) memcpy(m->data, data, len);
    m->data[len] = 0;
    pthread_mutex_lock(&ws->m);
    int rc = COURIER_OK;
    bool post = false;
    if (ws->state == COURIER_WS_CLOSED || ws->state == COURIER_WS_CLOSING || ws->close_asked)
        rc = cr_fail(err, COURIER_E_WS_CLOSED, "the WebSocket is closing or closed");
    else if (ws->out_bytes && (int64_t)(ws->out_bytes + len) > ws->opt.max_send_queue_bytes)
        rc = cr_fail(err, COURIER_E_AGAIN, "the WebSocket's send queue is full");
    if (rc == COURIER_OK) {
        if (ws->out_last) ws->out_last->next = m;
        else ws->out_first = m;
        ws->out_last = m;
        ws->out_bytes += len;
        post = cr_ws_kick_claim_locked(ws);
        m = NULL; /* queued: finish() frees it if the engine refused */
    }
    pthread_mutex_unlock(&ws->m);
    free(m);
    if (post && !cr_ws_kick_post(ws)) rc = cr_fail(err, COURIER_E_CLOSED, "the engine is closing");
    return rc;
}

static int valid_close_code(int code) {
    return code == 1000 || code == 1001 || code == 1002 || code == 1003 || (code >= 1007 && code <= 1011) ||
           (code >= 3000 && code <= 4999);
}

int courier_ws_close(courier_ws *ws, int code, const char *reason) {
    if (!ws || !valid_close_code(code)) return COURIER_E_INVALID_ARGUMENT;
    size_t rl = reason ? strlen(reason) : 0;
    if (rl > 123 || (rl && !cr_utf8_valid(reason, rl))) return COURIER_E_INVALID_ARGUMENT;
    ws_msg *m = malloc(sizeof *m + rl + 1);
    if (!m) return COURIER_E_NO_MEMORY;
    m->next = NULL;
    m->type = 0;
    m->len = (size_t)code;
    if (rl) memcpy(m->data, reason, rl);
    m->data[rl] = 0;
    pthread_mutex_lock(&ws->m);
    int rc = COURIER_OK;
    if (ws->state == COURIER_WS_CLOSED || ws->state == COURIER_WS_CLOSING || ws->close_asked) {
        rc = COURIER_E_WS_CLOSED;
    } else {
        ws->close_asked = 1;
        if (ws->out_last) ws->out_last->next = m;
        else ws->out_first = m;
        ws->out_last = m;
        m = NULL;
        if (!cr_ws_kick_locked(ws)) rc = COURIER_E_CLOSED;
    }
    pthread_mutex_unlock(&ws->m);
    free(m);
    return rc;
}

static bool readable(const courier_ws *ws) { return ws->in_first || ws->state == COURIER_WS_CLOSED; }

/* A waiting courier_ws_next on a connection whose frames reach the socket as they are (ws://, no
 * proxy): the caller's thread reads the socket itself (the reads become its own, as with
 * courier_ws_take_reads, and stay so after the call: the worker reads once a second meanwhile),
 * waiting in poll(2) on the socket and on a pipe that tell() writes for what the worker finds
 * (its reads, the end). True: something to return, or the deadline (0: none) passed; false: not
 * possible or the reads went back to the worker (wait on the condition variable then). */
static bool wait_here(courier_ws *ws, int64_t deadline) {
    int fd = -1;
    pthread_mutex_lock(&ws->m);
    bool mine = ws->caller_reads;
    if (mine) fd = ws->reader_fd;
    pthread_mutex_unlock(&ws->m);
    if (!mine && courier_ws_take_reads(&fd, ws) != COURIER_OK) return false;
    pthread_mutex_lock(&ws->m);
    if (ws->wake_r < 0) {
        int p[2];
        if (pipe(p) == 0) {
            for (int i = 0; i < 2; i++) {
                fcntl(p[i], F_SETFL, fcntl(p[i], F_GETFL) | O_NONBLOCK);
                fcntl(p[i], F_SETFD, FD_CLOEXEC);
            }
            ws->wake_r = p[0];
            ws->wake_w = p[1];
        }
    }
    int wake = ws->wake_r;
    pthread_mutex_unlock(&ws->m);
    if (wake < 0) {
        courier_ws_return_reads(ws);
        return false;
    }
    for (;;) {
        if (!cr_ws_read_here(ws)) return false;
        pthread_mutex_lock(&ws->m);
        bool ready = readable(ws);
        if (!ready) ws->poll_waiting++; /* before the unlock: a tell() from now on writes the pipe */
        pthread_mutex_unlock(&ws->m);
        if (ready) return true;
        int ms = -1;
        if (deadline) {
            int64_t left = deadline - cr_mono_ms();
            ms = left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
        }
        struct pollfd p[2] = {{fd, POLLIN, 0}, {wake, POLLIN, 0}};
        int n = poll(p, 2, ms);
        pthread_mutex_lock(&ws->m);
        ws->poll_waiting--;
        ready = readable(ws);
        pthread_mutex_unlock(&ws->m);
        if (n > 0 && p[1].revents) {
            char buf[64];
            while (read(wake, buf, sizeof buf) > 0) {}
        }
        if (ready) return true;
        if (n == 0 || (deadline && cr_mono_ms() >= deadline)) return true; /* timed out */
        if (n < 0 && errno != EINTR) {
            courier_ws_return_reads(ws);
            return false;
        }
    }
}

int courier_ws_next(courier_ws_message *msg, courier_ws *ws, int64_t timeout_ms, courier_error *err) {
    cr_error_clear(err);
    if (!msg || !ws || msg->size < offsetof(courier_ws_message, len) + sizeof(size_t))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, NULL);
    if (timeout_ms != 0 && pthread_equal(pthread_self(), ws->worker))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "a WebSocket read that waits, on the engine's worker thread");
    int64_t deadline = timeout_ms > 0 ? cr_mono_ms() + timeout_ms : 0;
    pthread_mutex_lock(&ws->m);
    free(ws->borrowed);
    ws->borrowed = NULL;
    if (!readable(ws) && timeout_ms != 0 && (ws->state == COURIER_WS_OPEN || ws->caller_reads)) {
        /* (closing with the reads the caller's: it reads the server's close too) */
        pthread_mutex_unlock(&ws->m);
        bool waited = wait_here(ws, deadline);
        pthread_mutex_lock(&ws->m);
        if (waited || (timeout_ms > 0 && cr_mono_ms() >= deadline)) timeout_ms = 0; /* no more waiting */
        else if (timeout_ms > 0) timeout_ms = deadline - cr_mono_ms();
    }
    if (!readable(ws) && timeout_ms != 0) {
        struct timespec until = cr_cond_deadline(timeout_ms > 0 ? timeout_ms * 1000 : 0);
        while (!readable(ws)) {
            if (timeout_ms < 0) pthread_cond_wait(&ws->c, &ws->m);
            else if (pthread_cond_timedwait(&ws->c, &ws->m, &until) == ETIMEDOUT) break;
        }
    }
    int rc = COURIER_OK;
    if (ws->in_first) {
        ws_msg *m = ws->in_first;
        ws->in_first = m->next;
        if (!ws->in_first) ws->in_last = NULL;
        ws->borrowed = m;
        ws->in_bytes -= m->len;
        if (ws->in_full && (int64_t)ws->in_bytes < ws->opt.max_receive_queue_bytes / 2) {
            ws->in_full = 0; /* half empty: the worker reads again */
            ws->read_again = 1;
            if (ws->state != COURIER_WS_CLOSED) cr_ws_kick_locked(ws);
        }
        msg->type = (courier_ws_type)m->type;
        msg->data = m->data;
        msg->len = m->len;
    } else if (ws->state == COURIER_WS_CLOSED) {
        rc = ws->end_code;
        if (err) {
            *err = ws->end_err;
            cr_error_forget_user(err);
        }
    } else {
        rc = cr_fail(err, COURIER_E_AGAIN, "no WebSocket message yet");
    }
    pthread_mutex_unlock(&ws->m);
    return rc;
}

/* The caller's thread (courier_ws_read_socket), the caller's loop having found the socket readable:
 * the frames read here, under io, with recv(2) (libcurl is the worker's: on_recv) into the receive
 * queue, without a notify (the reader is here). What needs the worker (a pong or a close echo to
 * write, the end of the connection) is left to it with a kick; when the connection is ending, or the
 * receive queue is full, the reads go back to the worker (false). */
bool cr_ws_read_here(courier_ws *ws) {
    pthread_mutex_lock(&ws->io);
    pthread_mutex_lock(&ws->m);
    bool mine = ws->caller_reads && !ws->in_full;
    if (ws->caller_reads && ws->in_full) ws->caller_reads = 0; /* the reader makes room, then kicks */
    pthread_mutex_unlock(&ws->m);
    if (!mine) {
        pthread_mutex_unlock(&ws->io);
        return false;
    }
    ws->reading_here = 1;
    int r = wslay_event_want_read(ws->ctx) ? wslay_event_recv(ws->ctx) : 0;
    ws->reading_here = 0;
    bool keep = r == 0 && !ws->eof && !ws->io_error && !ws->fail_code && wslay_event_get_read_enabled(ws->ctx) &&
                !wslay_event_get_close_received(ws->ctx);
    bool kick = !keep || wslay_event_want_write(ws->ctx);
    if (!keep) {
        ws->recv_err = r; /* the worker's pump judges it */
        ws->direct_ok = 0;
        ws->read_ok = 0;
    }
    pthread_mutex_lock(&ws->m);
    if (!keep) ws->caller_reads = 0;
    if (kick && ws->state != COURIER_WS_CLOSED) cr_ws_kick_locked(ws);
    pthread_mutex_unlock(&ws->m);
    pthread_mutex_unlock(&ws->io);
    return keep;
}

int courier_ws_take_reads(int *out_fd, courier_ws *ws) {
    if (out_fd) *out_fd = -1;
    if (!ws || !out_fd) return COURIER_E_INVALID_ARGUMENT;
    int rc = COURIER_E_AGAIN;
    pthread_mutex_lock(&ws->io);
    if (ws->read_ok && ws->reader_fd < 0) {
        ws->reader_fd = fcntl(ws->sock, F_DUPFD_CLOEXEC, 0);
        if (ws->reader_fd < 0) rc = errno == EMFILE || errno == ENFILE ? COURIER_E_AGAIN : COURIER_E_INTERNAL;
    }
    if (ws->read_ok && ws->reader_fd >= 0) {
        pthread_mutex_lock(&ws->m);
        if (ws->state == COURIER_WS_OPEN && !ws->close_asked && !ws->freed) {
            ws->caller_reads = 1; /* the worker's next poll leaves the socket out */
            *out_fd = ws->reader_fd;
            rc = COURIER_OK;
        }
        pthread_mutex_unlock(&ws->m);
    }
    pthread_mutex_unlock(&ws->io);
    return rc;
}

int courier_ws_return_reads(courier_ws *ws) {
    if (!ws) return COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&ws->io);
    pthread_mutex_lock(&ws->m);
    if (ws->caller_reads) {
        ws->caller_reads = 0;
        ws->read_again = 1; /* the worker reads what came, and polls the socket again */
        if (ws->state != COURIER_WS_CLOSED) cr_ws_kick_locked(ws);
    }
    pthread_mutex_unlock(&ws->m);
    pthread_mutex_unlock(&ws->io);
    return COURIER_OK;
}

int courier_ws_read_socket(courier_ws *ws) {
    if (!ws) return COURIER_E_INVALID_ARGUMENT;
    return cr_ws_read_here(ws) ? COURIER_OK : COURIER_E_AGAIN;
}

#define GETTER(type, name, expr)                                 \
    type name(const courier_ws *ws) {                            \
        if (!ws) return 0;                                       \
        pthread_mutex_lock((pthread_mutex_t *)&ws->m);           \
        type v = (expr);                                         \
        pthread_mutex_unlock((pthread_mutex_t *)&ws->m);         \
        return v;                                                \
    }
GETTER(courier_ws_state, courier_ws_get_state, (courier_ws_state)ws->state)
GETTER(int, courier_ws_close_code, ws->close_code)
GETTER(int, courier_ws_close_code_sent, ws->close_code_sent)
GETTER(int64_t, courier_ws_queued_bytes, (int64_t)ws->out_bytes)
GETTER(int64_t, courier_ws_unread_bytes, (int64_t)ws->in_bytes)
#undef GETTER

/* Both strings are written once, under m, before the state that makes them readable here: the
 * protocol before OPEN, the reason before CLOSED. */
const char *courier_ws_protocol(const courier_ws *ws) {
    if (!ws) return "";
    pthread_mutex_lock((pthread_mutex_t *)&ws->m);
    const char *p = ws->state == COURIER_WS_CONNECTING ? "" : ws->protocol;
    pthread_mutex_unlock((pthread_mutex_t *)&ws->m);
    return p;
}

const char *courier_ws_extensions(const courier_ws *ws) {
    if (!ws) return "";
    pthread_mutex_lock((pthread_mutex_t *)&ws->m);
    const char *x = ws->state == COURIER_WS_CONNECTING ? "" : ws->extensions;
    pthread_mutex_unlock((pthread_mutex_t *)&ws->m);
    return x;
}

const char *courier_ws_close_reason(const courier_ws *ws) {
    if (!ws) return "";
    pthread_mutex_lock((pthread_mutex_t *)&ws->m);
    const char *r = ws->state == COURIER_WS_CLOSED ? ws->close_reason : "";
    pthread_mutex_unlock((pthread_mutex_t *)&ws->m);
    return r;
}

void courier_ws_free(courier_ws *ws) {
    if (!ws) return;
    pthread_mutex_lock(&ws->m);
    ws->freed = 1;
    if (ws->state != COURIER_WS_CLOSED) cr_ws_kick_locked(ws); /* the worker drops the connection */
    pthread_mutex_unlock(&ws->m);
    cr_ws_release(ws);
}
