/*
 * stream.c — a streamed response (courier_stream): the head as soon as the header block is read,
 * the body in chunks as libcurl hands them over, then the end. The engine's worker writes (the
 * header and body callbacks of transport.c, and the send's completion); one reader at a time reads,
 * from any thread, with a bounded wait or none. Unread body is bounded per stream: past the limit
 * the body callback answers CURL_WRITEFUNC_PAUSE (libcurl keeps those bytes and hands them over
 * again), and the reader, having taken half of the limit, asks the worker to unpause (libcurl's
 * pause may only be called on the worker: engine/stream_send.c posts it). The open, cancel and the
 * request to unpause need the engine and live in engine/stream_send.c.
 *
 * A response is streamed live only when the engine will answer with it (cr_stream_headers_ended):
 * a redirect it follows, a 401/407 or a status the retry rule may retry is read whole as any
 * response is, and handed over at the completion as head and one chunk.
 */
#include "http/http.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct cr_chunk {
    struct cr_chunk *next;
    size_t len;
    size_t off; /* bytes of it already read (courier_stream_read) */
    char data[];
} cr_chunk;

enum { S_WAITING = 0, S_HEAD = 1, S_ENDED = 2 };

/* The stream: one lock for what the worker and the reader share. */
struct courier_stream {
    pthread_mutex_t m;
    pthread_cond_t c;
    atomic_int refs; /* the caller's and the send's */
    uint64_t id;
    pthread_t worker;
    int state;                 /* S_*, under m */
    courier_response *head;    /* status, headers, URL, metrics so far; empty body */
    courier_response *final;   /* at a good end: the response with the final metrics (empty body) */
    int end_code;              /* at the end: COURIER_OK, or what ended it */
    courier_error end_err;
    int head_failed;           /* it ended before any head: end_code is the send's failure */
    cr_chunk *first, *last;    /* unread body */
    cr_chunk *borrowed;        /* the chunk courier_stream_next handed out last */
    size_t held;               /* unread body bytes */
    size_t limit;
    int paused;                /* the worker paused the transfer (under m) */
    int resume_asked;          /* the reader asked the worker to unpause (under m) */
    courier_stream_notify_fn notify;
    void *user;
    courier_user_free_fn user_free;
    cr_stream_ops ops;         /* engine/stream_send.c: asking the worker to unpause */
    cr_transfer *t;            /* worker only: the live transfer, while it is on the wire */
    /* The reader's (courier_stream_next_line): a line being gathered, or the one handed out last. */
    cr_buf line;
    int line_given;
    size_t max_line;
};

courier_stream *cr_stream_new(size_t limit, pthread_t worker, courier_stream_notify_fn notify, void *user,
                              courier_user_free_fn user_free, const cr_stream_ops *ops) {
    courier_stream *s = cr_zalloc(sizeof *s);
    if (!s) return NULL;
    pthread_mutex_init(&s->m, NULL);
    cr_cond_init(&s->c);
    atomic_init(&s->refs, 2);
    s->limit = limit;
    s->worker = worker;
    s->notify = notify;
    s->user = user;
    s->user_free = user_free;
    s->ops = *ops;
    s->max_line = CR_DEFAULT_MAX_RESPONSE;
    return s;
}

void cr_stream_set_id(courier_stream *s, uint64_t id) { s->id = id; }

void cr_stream_retain(courier_stream *s) { atomic_fetch_add(&s->refs, 1); }

courier_engine *cr_stream_engine(const courier_stream *s) { return s->ops.engine; }

void cr_stream_release(courier_stream *s) {
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
    for (cr_chunk *c = s->first, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(s->borrowed);
    cr_buf_free(&s->line);
    courier_response_free(s->head);
    courier_response_free(s->final);
    cr_error_release_user(&s->end_err);
    if (s->user_free) s->user_free(s->user);
    pthread_cond_destroy(&s->c);
    pthread_mutex_destroy(&s->m);
    free(s);
}

/* Under m: wakes a waiting reader; returns whether the notify callback is due (called unlocked). */
static bool became_readable(courier_stream *s) {
    pthread_cond_broadcast(&s->c);
    return s->notify != NULL;
}

static void notify(courier_stream *s) {
    if (s->notify) s->notify(s, s->user);
}

/* ---- the worker's side ------------------------------------------------------------------------- */

/* Whether the engine will answer with this response (nothing left for it to do on it): only then is
 * its body streamed as it arrives. A redirect it follows, a challenge (401, 407) and a status the
 * retry rule may retry (schedule.c's rule: 408, 429, 5xx while retries are left) are read whole. */
static bool answers_with(const cr_transfer *t, long status) {
    if (status >= 300 && status < 400 && t->http.follow && !t->mock && !t->custom) return false;
    if (status == 401 || status == 407) return false;
    if ((status == 408 || status == 429 || status >= 500) && t->retry.max > 0 && t->attempts <= t->retry.max)
        return false;
    return true;
}

void cr_stream_headers_ended(cr_transfer *t, courier_response *(*head_of)(cr_transfer *t)) {
    courier_stream *s = t->stream;
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    if (!s || status < 200 || t->caller_gone || !answers_with(t, status)) return;
    courier_response *head = head_of(t);
    if (!head) return; /* no memory: read whole, handed over at the end */
    t->stream_live = 1;
    pthread_mutex_lock(&s->m);
    s->t = t;
    s->head = head;
    s->state = S_HEAD;
    bool tell = became_readable(s);
    pthread_mutex_unlock(&s->m);
    if (tell) notify(s);
}

size_t cr_stream_on_body(cr_transfer *t, const char *data, size_t len) {
    courier_stream *s = t->stream;
    if (t->caller_gone) return len; /* answered (cancelled): dropped */
    if (!len) return 0;
    pthread_mutex_lock(&s->m);
    if (s->held && s->held + len > s->limit) {
        /* Full: libcurl keeps these bytes and hands them over again once unpaused. */
        s->paused = 1;
        pthread_mutex_unlock(&s->m);
        return CURL_WRITEFUNC_PAUSE;
    }
    pthread_mutex_unlock(&s->m);
    cr_chunk *c = malloc(sizeof *c + len);
    if (!c) {
        t->oom = 1;
        return 0; /* aborts: COURIER_E_NO_MEMORY */
    }
    c->next = NULL;
    c->len = len;
    c->off = 0;
    memcpy(c->data, data, len);
    pthread_mutex_lock(&s->m);
    bool was_empty = !s->first;
    if (s->last) s->last->next = c;
    else s->first = c;
    s->last = c;
    s->held += len;
    bool tell = was_empty && became_readable(s);
    pthread_mutex_unlock(&s->m);
    if (tell) notify(s);
    return len;
}

bool cr_stream_paused(const cr_transfer *t) {
    courier_stream *s = t->stream;
    if (!s || !t->stream_live) return false;
    pthread_mutex_lock(&s->m);
    bool paused = s->paused;
    pthread_mutex_unlock(&s->m);
    return paused;
}

CURL *cr_stream_take_resume(courier_stream *s) {
    pthread_mutex_lock(&s->m);
    CURL *h = NULL;
    if (s->t && s->paused) {
        s->paused = 0;
        h = s->t->easy;
        if (s->t->http.idle_ms) s->t->wire.last_rx_ms = cr_mono_ms(); /* paused time is not idle */
    }
    s->resume_asked = 0;
    pthread_mutex_unlock(&s->m);
    return h;
}

/* The send's completion (worker thread): the end, and for a response that was read whole, its
 * head and body first. */
void cr_stream_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    courier_stream *s = user;
    cr_chunk *body = NULL;
    pthread_mutex_lock(&s->m);
    s->t = NULL;
    s->paused = 0;
    bool live = s->state == S_HEAD;
    if (!live && resp && (code == COURIER_OK || code == COURIER_E_HTTP_STATUS) && !cr_response_detach(resp)) {
        /* Read whole (a final answer the engine judged, a mock, a custom transport): its head, then
         * its body as one chunk. Any status is the reader's to judge. */
        if (resp->body_len && (body = malloc(sizeof *body + resp->body_len))) {
            body->next = NULL;
            body->len = resp->body_len;
            body->off = 0;
            memcpy(body->data, resp->body, resp->body_len);
        }
        char *empty = body || !resp->body_len ? cr_strdup("") : NULL;
        if (empty) {
            free(resp->body);
            resp->body = empty;
            resp->body_len = 0;
            s->head = courier_response_retain(resp);
            s->state = S_HEAD;
            code = COURIER_OK;
        } else {
            free(body);
            body = NULL;
            code = COURIER_E_NO_MEMORY;
        }
    }
    if (body) {
        if (s->last) s->last->next = body;
        else s->first = body;
        s->last = body;
        s->held += body->len;
    }
    s->end_code = code;
    if (code != COURIER_OK) {
        if (err) {
            s->end_err = *err;
            cr_error_forget_user((courier_error *)err); /* taken: the stream owns it now */
        } else {
            cr_fail(&s->end_err, code, NULL);
        }
        s->head_failed = s->state == S_WAITING;
    }
    if (s->state == S_WAITING && resp && code != COURIER_OK) {
        s->final = resp; /* the response the failure carries (an interceptor's or validator's) */
        resp = NULL;
    } else if (code == COURIER_OK) {
        s->final = resp;
        resp = NULL;
    }
    s->state = S_ENDED;
    bool tell = became_readable(s);
    pthread_mutex_unlock(&s->m);
    courier_response_free(resp);
    if (tell) notify(s);
    cr_stream_release(s); /* the send's reference */
}

/* ---- the reader's side ------------------------------------------------------------------------- */

uint64_t courier_stream_id(const courier_stream *s) { return s ? s->id : 0; }

/* Under m: waits until `ready` or the deadline. false: timed out. */
static bool wait_until(courier_stream *s, bool (*ready)(const courier_stream *), int64_t timeout_ms) {
    if (ready(s)) return true;
    if (timeout_ms == 0) return false;
    struct timespec until = cr_cond_deadline(timeout_ms > 0 ? timeout_ms * 1000 : 0);
    while (!ready(s)) {
        if (timeout_ms < 0) pthread_cond_wait(&s->c, &s->m);
        else if (pthread_cond_timedwait(&s->c, &s->m, &until) == ETIMEDOUT) return ready(s);
    }
    return true;
}

static bool has_head(const courier_stream *s) { return s->state != S_WAITING; }
static bool has_body(const courier_stream *s) { return s->first || s->state == S_ENDED; }

static int refuse_wait_on_worker(const courier_stream *s, int64_t timeout_ms, courier_error *err) {
    if (timeout_ms != 0 && pthread_equal(pthread_self(), s->worker))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "a stream read that waits, on the engine's worker thread");
    return COURIER_OK;
}

/* Under m: the end's failure into err. What a callback raised (user_error.c) goes to the first
 * caller that is told (err then owns it, as courier_send_sync's does); later ones get a copy. */
static int ended_with(courier_stream *s, courier_error *err) {
    if (err) {
        *err = s->end_err;
        cr_error_forget_user(&s->end_err);
    }
    return s->end_code;
}

int courier_stream_head(const courier_response **head, courier_stream *s, int64_t timeout_ms, courier_error *err) {
    cr_error_clear(err);
    if (head) *head = NULL;
    if (!head || !s) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, NULL);
    int rc = refuse_wait_on_worker(s, timeout_ms, err);
    if (rc) return rc;
    pthread_mutex_lock(&s->m);
    if (!wait_until(s, has_head, timeout_ms)) rc = cr_fail(err, COURIER_E_AGAIN, "no head yet");
    else if (s->head) *head = s->head;
    else rc = ended_with(s, err);
    pthread_mutex_unlock(&s->m);
    return rc;
}

/* Under m: n bytes were read. True, once, when a paused stream's reader has made room (half the
 * limit): the caller asks the worker to unpause. */
static bool room_made(courier_stream *s, size_t n) {
    s->held -= n;
    if (!s->paused || s->resume_asked || s->held > s->limit / 2) return false;
    s->resume_asked = 1;
    return true;
}

/* Under m: the next unread chunk taken off the queue (held counts it no more), or NULL. Asks the
 * worker to unpause when the reader has made room (half the limit). */
static cr_chunk *take(courier_stream *s, bool *ask) {
    cr_chunk *c = s->first;
    if (!c) return NULL;
    s->first = c->next;
    if (!s->first) s->last = NULL;
    *ask = room_made(s, c->len - c->off);
    return c;
}

/* Under m: drops the chunk handed out last and waits for body bytes or the end. */
static bool body_ready(courier_stream *s, int64_t timeout_ms) {
    free(s->borrowed);
    s->borrowed = NULL;
    return wait_until(s, has_body, timeout_ms);
}

int courier_stream_next(const void **data, size_t *len, courier_stream *s, int64_t timeout_ms, courier_error *err) {
    cr_error_clear(err);
    if (data) *data = NULL;
    if (len) *len = 0;
    if (!data || !len || !s) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, NULL);
    int rc = refuse_wait_on_worker(s, timeout_ms, err);
    if (rc) return rc;
    bool ask = false;
    pthread_mutex_lock(&s->m);
    if (!body_ready(s, timeout_ms)) {
        rc = cr_fail(err, COURIER_E_AGAIN, "no body bytes yet");
    } else if (s->first) {
        cr_chunk *c = take(s, &ask);
        s->borrowed = c;
        *data = c->data + c->off;
        *len = c->len - c->off;
    } else if (s->end_code != COURIER_OK) {
        rc = ended_with(s, err);
    } /* else the end: *len 0 */
    if (ask) s->ops.resume(s, s->ops.engine); /* under the lock: never past the stream's end */
    pthread_mutex_unlock(&s->m);
    return rc;
}

void cr_stream_set_max_line(courier_stream *s, size_t max) { s->max_line = max; }

/* Under m: the line gathered so far handed out without its line end (LF, and a CR before it). */
static void give_line(courier_stream *s, const char **line, size_t *len, bool had_lf) {
    size_t n = s->line.len;
    if (had_lf) {
        n--;
        if (n && s->line.data[n - 1] == '\r') n--;
    }
    s->line.data[n] = 0;
    *line = s->line.data;
    *len = n;
    s->line_given = 1;
}

int courier_stream_next_line(const char **line, size_t *len, courier_stream *s, int64_t timeout_ms,
                             courier_error *err) {
    cr_error_clear(err);
    if (line) *line = NULL;
    if (len) *len = 0;
    if (!line || !len || !s) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, NULL);
    int rc = refuse_wait_on_worker(s, timeout_ms, err);
    if (rc) return rc;
    int64_t deadline = timeout_ms > 0 ? cr_mono_ms() + timeout_ms : 0;
    pthread_mutex_lock(&s->m);
    if (s->line_given) {
        s->line.len = 0;
        s->line_given = 0;
    }
    for (;;) {
        int64_t wait = timeout_ms > 0 ? deadline - cr_mono_ms() : timeout_ms;
        if (timeout_ms > 0 && wait <= 0) wait = 0;
        if (!body_ready(s, wait)) {
            rc = cr_fail(err, COURIER_E_AGAIN, "no whole line yet"); /* what came stays gathered */
            break;
        }
        if (s->first) {
            cr_chunk *c = s->first;
            const char *p = c->data + c->off;
            size_t n = c->len - c->off;
            const char *lf = memchr(p, '\n', n);
            size_t k = lf ? (size_t)(lf - p) + 1 : n;
            if (s->line.len + k > s->max_line + 2) { /* + CR LF */
                rc = cr_fail(err, COURIER_E_TOO_LARGE, "a line of the body over the maximum response size");
                break;
            }
            if (cr_buf_append(&s->line, p, k) != COURIER_OK) {
                rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
                break;
            }
            bool ask = false;
            if (k == n) {
                free(take(s, &ask));
            } else {
                c->off += k;
                ask = room_made(s, k);
            }
            if (ask) s->ops.resume(s, s->ops.engine); /* under the lock: never past the stream's end */
            if (lf) {
                give_line(s, line, len, true);
                break;
            }
            continue;
        }
        if (s->end_code != COURIER_OK) {
            rc = ended_with(s, err);
        } else if (s->line.len) {
            if (cr_buf_reserve(&s->line, 0) == COURIER_OK) give_line(s, line, len, false); /* the last, without LF */
        } /* else the end: *line NULL */
        break;
    }
    pthread_mutex_unlock(&s->m);
    return rc;
}

int courier_stream_read(size_t *n, courier_stream *s, void *buffer, size_t cap, int64_t timeout_ms,
                        courier_error *err) {
    cr_error_clear(err);
    if (n) *n = 0;
    if (!n || !s || (!buffer && cap)) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, NULL);
    if (!cap) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "a buffer of 0 bytes");
    int rc = refuse_wait_on_worker(s, timeout_ms, err);
    if (rc) return rc;
    bool ask = false;
    pthread_mutex_lock(&s->m);
    if (!body_ready(s, timeout_ms)) {
        rc = cr_fail(err, COURIER_E_AGAIN, "no body bytes yet");
    } else if (s->first) {
        cr_chunk *c = s->first;
        size_t k = c->len - c->off < cap ? c->len - c->off : cap;
        memcpy(buffer, c->data + c->off, k);
        *n = k;
        if (c->off + k == c->len) {
            free(take(s, &ask));
        } else {
            c->off += k;
            ask = room_made(s, k);
        }
    } else if (s->end_code != COURIER_OK) {
        rc = ended_with(s, err);
    }
    if (ask) s->ops.resume(s, s->ops.engine); /* under the lock: never past the stream's end */
    pthread_mutex_unlock(&s->m);
    return rc;
}

const courier_response *courier_stream_response(const courier_stream *s) {
    if (!s) return NULL;
    pthread_mutex_lock((pthread_mutex_t *)&s->m);
    const courier_response *r = s->state == S_ENDED && s->end_code == COURIER_OK ? s->final : NULL;
    pthread_mutex_unlock((pthread_mutex_t *)&s->m);
    return r;
}

int64_t courier_stream_buffered(const courier_stream *s) {
    if (!s) return 0;
    pthread_mutex_lock((pthread_mutex_t *)&s->m);
    int64_t n = (int64_t)s->held;
    pthread_mutex_unlock((pthread_mutex_t *)&s->m);
    return n;
}

bool cr_stream_ended(courier_stream *s) {
    pthread_mutex_lock(&s->m);
    bool ended = s->state == S_ENDED;
    pthread_mutex_unlock(&s->m);
    return ended;
}

int cr_stream_cancel(courier_stream *s) {
    pthread_mutex_lock(&s->m);
    int rc = s->state == S_ENDED ? COURIER_E_NOT_FOUND : s->ops.cancel(s->ops.engine, s->id);
    pthread_mutex_unlock(&s->m);
    return rc;
}
