/*
 * sse.c — server-sent events (courier_sse): an event source over courier_stream, parsed by the
 * WHATWG HTML rules and reconnected as EventSource does (the header says the rules). The reader's
 * thread drives it: courier_sse_next connects, reads, parses and, after a connection ends,
 * waits the reconnection time and connects again with Last-Event-ID. No thread or timer of its own:
 * an event loop that does not wait in courier_sse_next asks courier_sse_retry_in_ms when to
 * look again. The lock guards what another thread touches (close, the state, the current stream).
 */
#include "internal.h"

#include <errno.h>

#define SSE_DEFAULT_RETRY_MS 3000
#define SSE_MAX_BACKOFF_MS 30000

typedef struct sse_event {
    struct sse_event *next;
    char *type;
    char *data;
    size_t data_len;
    char *id;
} sse_event;

struct courier_sse {
    pthread_mutex_t m;
    pthread_cond_t c;
    atomic_int refs;           /* the caller's, and one per stream whose notify may still run */
    courier_engine *e;
    pthread_t worker;
    courier_request *req;      /* a copy, sent at each connection */
    courier_stream *stream;    /* the connection being read (swapped by the reader under m) */
    int state;                 /* courier_sse_state, under m */
    int closed;                /* courier_sse_close was called (under m) */
    int ended;                 /* ended for good: end_code, end_err */
    int end_code;
    courier_error end_err;
    int64_t retry_ms;          /* the reconnection time */
    int64_t reconnect_at;      /* monotonic ms of the next connection while waiting (under m), else 0 */
    int failures;              /* connections in a row that brought no event */
    int events_this_connection;
    /* The parser (reader only). */
    cr_buf line;
    int after_cr;              /* the last byte was a CR: an LF next is the same line end */
    int bom;                   /* bytes of a leading BOM matched at this connection's start; 3: done */
    cr_buf data;
    cr_buf type;
    cr_buf last_id;            /* the persistent last event ID */
    sse_event *first, *last;   /* parsed, not yet read */
    sse_event *given;          /* the event courier_sse_next handed out last */
    courier_sse_notify_fn notify;
    void *user;
    courier_user_free_fn user_free;
};

static void event_free(sse_event *ev) {
    if (!ev) return;
    free(ev->type);
    free(ev->data);
    free(ev->id);
    free(ev);
}

static void events_release(courier_sse *es) {
    if (!es || atomic_fetch_sub(&es->refs, 1) != 1) return;
    for (sse_event *ev = es->first, *n; ev; ev = n) {
        n = ev->next;
        event_free(ev);
    }
    event_free(es->given);
    courier_request_free(es->req);
    cr_buf_free(&es->line);
    cr_buf_free(&es->data);
    cr_buf_free(&es->type);
    cr_buf_free(&es->last_id);
    cr_error_release_user(&es->end_err);
    if (es->user_free) es->user_free(es->user);
    pthread_cond_destroy(&es->c);
    pthread_mutex_destroy(&es->m);
    free(es);
}

static void release_from_stream(void *user) { events_release(user); }

/* The stream's notify (worker thread): the source may have something new. */
static void stream_notify(courier_stream *s, void *user) {
    (void)s;
    courier_sse *es = user;
    if (es->notify) es->notify(es, es->user);
}

static void set_state(courier_sse *es, int state) {
    pthread_mutex_lock(&es->m);
    es->state = state;
    pthread_mutex_unlock(&es->m);
}

/* ---- parsing (WHATWG HTML, "Parsing an event stream") -------------------------------------------- */

/* The line with every byte that does not start valid UTF-8 replaced by U+FFFD, into out. */
static int utf8_clean(cr_buf *out, const char *s, size_t n) {
    out->len = 0;
    if (cr_utf8_valid(s, n)) return cr_buf_append(out, s, n);
    for (size_t i = 0; i < n;) {
        unsigned char b = (unsigned char)s[i];
        size_t k = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        if (k && i + k <= n && cr_utf8_valid(s + i, k)) {
            if (cr_buf_append(out, s + i, k)) return -1;
            i += k;
        } else {
            if (cr_buf_append(out, "\xEF\xBF\xBD", 3)) return -1;
            i++;
        }
    }
    return 0;
}

static int dispatch(courier_sse *es) {
    if (!es->data.len) { /* no data: nothing fires (the last event ID moved all the same) */
        es->type.len = 0;
        return 0;
    }
    sse_event *ev = calloc(1, sizeof *ev);
    if (!ev) return -1;
    size_t len = es->data.len - 1; /* the last LF goes */
    ev->type = es->type.len ? cr_strndup(es->type.data, es->type.len) : cr_strdup("message");
    ev->data = cr_strndup(es->data.data, len);
    ev->data_len = len;
    ev->id = cr_strndup(es->last_id.data ? es->last_id.data : "", es->last_id.len);
    es->data.len = 0;
    es->type.len = 0;
    if (!ev->type || !ev->data || !ev->id) {
        event_free(ev);
        return -1;
    }
    if (es->last) es->last->next = ev;
    else es->first = ev;
    es->last = ev;
    es->events_this_connection++;
    return 0;
}

static bool is_field(const char *f, size_t n, const char *name) { return strlen(name) == n && memcmp(f, name, n) == 0; }

static int process_line(courier_sse *es, const char *raw, size_t raw_len) {
    cr_buf clean = {0};
    if (utf8_clean(&clean, raw, raw_len)) {
        cr_buf_free(&clean);
        return -1;
    }
    const char *l = clean.data ? clean.data : "";
    size_t n = clean.len;
    int rc = 0;
    if (n == 0) {
        rc = dispatch(es);
    } else if (l[0] != ':') { /* a comment otherwise */
        const char *colon = memchr(l, ':', n);
        size_t fl = colon ? (size_t)(colon - l) : n;
        const char *v = colon ? colon + 1 : l + n;
        size_t vl = colon ? n - fl - 1 : 0;
        if (vl && v[0] == ' ') {
            v++;
            vl--;
        }
        if (is_field(l, fl, "event")) {
            es->type.len = 0;
            rc = cr_buf_append(&es->type, v, vl);
        } else if (is_field(l, fl, "data")) {
            rc = cr_buf_append(&es->data, v, vl) || cr_buf_append_char(&es->data, '\n') ? -1 : 0;
        } else if (is_field(l, fl, "id")) {
            if (!memchr(v, '\0', vl)) {
                es->last_id.len = 0;
                rc = cr_buf_append(&es->last_id, v, vl);
            }
        } else if (is_field(l, fl, "retry")) {
            bool digits = vl > 0 && vl < 12;
            for (size_t i = 0; digits && i < vl; i++) digits = v[i] >= '0' && v[i] <= '9';
            if (digits) es->retry_ms = strtoll(v, NULL, 10);
        } /* other fields are ignored */
    }
    cr_buf_free(&clean);
    return rc;
}

/* Feeds body bytes of the current connection. */
static int feed(courier_sse *es, const unsigned char *p, size_t n) {
    static const unsigned char bom[3] = {0xEF, 0xBB, 0xBF};
    for (size_t i = 0; i < n; i++) {
        unsigned char b = p[i];
        if (es->bom < 3) {
            if (b == bom[es->bom]) {
                if (++es->bom == 3) continue; /* one BOM at the very start, skipped */
                continue;
            }
            /* not a BOM after all: the bytes matched so far are text */
            if (es->bom && cr_buf_append(&es->line, (const char *)bom, (size_t)es->bom)) return -1;
            es->bom = 3;
        }
        if (es->after_cr) {
            es->after_cr = 0;
            if (b == '\n') continue; /* the LF of a CRLF, maybe split over two chunks */
        }
        if (b == '\r' || b == '\n') {
            es->after_cr = b == '\r';
            if (process_line(es, es->line.data ? es->line.data : "", es->line.len)) return -1;
            es->line.len = 0;
        } else if (cr_buf_append_char(&es->line, (char)b)) {
            return -1;
        }
    }
    return 0;
}

/* ---- connections ------------------------------------------------------------------------------ */

static int64_t remaining(int64_t deadline) {
    if (deadline < 0) return -1;
    int64_t left = deadline - cr_mono_ms();
    return left > 0 ? left : 0;
}

/* Ends the source for good with code (err: the detail, may be NULL; taken). */
static void end_for_good(courier_sse *es, int code, courier_error *err) {
    es->ended = 1;
    es->end_code = code;
    if (err) {
        es->end_err = *err;
        cr_error_forget_user(err);
    } else {
        cr_fail(&es->end_err, code, NULL);
    }
    courier_stream *s;
    pthread_mutex_lock(&es->m);
    s = es->stream;
    es->stream = NULL;
    es->state = COURIER_SSE_CLOSED;
    es->reconnect_at = 0;
    pthread_mutex_unlock(&es->m);
    courier_stream_free(s);
}

/* The connection ended (cleanly or not): drop it and wait the reconnection time, doubled after
 * connections in a row that brought no event. */
static void reconnect_later(courier_sse *es) {
    if (es->events_this_connection) es->failures = 0;
    else es->failures++;
    int64_t delay = es->retry_ms;
    for (int i = 1; i < es->failures && delay < SSE_MAX_BACKOFF_MS; i++) delay *= 2;
    if (es->failures > 1 && delay > SSE_MAX_BACKOFF_MS) delay = SSE_MAX_BACKOFF_MS;
    courier_stream *s;
    pthread_mutex_lock(&es->m);
    s = es->stream;
    es->stream = NULL;
    es->state = COURIER_SSE_CONNECTING;
    es->reconnect_at = cr_mono_ms() + delay;
    pthread_mutex_unlock(&es->m);
    courier_stream_free(s);
}

static int connect_now(courier_sse *es, courier_error *err) {
    courier_request *r = NULL;
    int rc = cr_request_copy(&r, es->req);
    if (rc) return cr_fail(err, rc, NULL);
    if (es->last_id.len) {
        /* RFC 9110 field values: the ID (no NUL, CR or LF: a line never holds them) */
        rc = courier_request_add_header_n(r, "Last-Event-ID", 13, es->last_id.data, es->last_id.len);
        if (rc) {
            courier_request_free(r);
            return cr_fail(err, rc, "the last event ID cannot be sent");
        }
    }
    atomic_fetch_add(&es->refs, 1); /* the stream's notify target until it is freed */
    courier_stream *s = NULL;
    rc = courier_stream_open(&s, es->e, r, stream_notify, es, release_from_stream, err);
    courier_request_free(r);
    if (rc) return rc; /* user_free released the reference */
    es->line.len = es->data.len = es->type.len = 0;
    es->after_cr = 0;
    es->bom = 0;
    es->events_this_connection = 0;
    pthread_mutex_lock(&es->m);
    es->stream = s;
    es->state = COURIER_SSE_CONNECTING;
    int closed = es->closed;
    pthread_mutex_unlock(&es->m);
    if (closed) courier_stream_cancel(s); /* closed meanwhile */
    return COURIER_OK;
}

/* The head is there: a 200 text/event-stream opens the source; anything else ends it. */
static int check_head(courier_sse *es, const courier_response *head, courier_error *err) {
    int status = courier_response_status(head);
    if (status != 200) {
        cr_fail(err, COURIER_E_HTTP_STATUS, status == 204 ? "the event source said stop (204)"
                                                          : "the event source answered HTTP %d", status);
        err->http_status = status;
        return COURIER_E_HTTP_STATUS;
    }
    const char *type = courier_response_header(head, "Content-Type");
    size_t n = 0;
    if (type) {
        while (type[n] && type[n] != ';' && type[n] != ' ' && type[n] != '\t') n++;
    }
    if (!type || n != 17 || strncasecmp(type, "text/event-stream", 17) != 0) {
        cr_fail(err, COURIER_E_INVALID_RESULT, "not an event stream: Content-Type '%.100s'", type ? type : "");
        err->http_status = status;
        return COURIER_E_INVALID_RESULT;
    }
    return COURIER_OK;
}

/* ---- the API ----------------------------------------------------------------------------------- */

int courier_sse_open(courier_sse **out, courier_engine *e, const courier_request *r,
                        courier_sse_notify_fn notify, void *user, courier_user_free_fn user_free,
                        courier_error *err) {
    cr_error_clear(err);
    if (out) *out = NULL;
    int rc = COURIER_OK;
    if (!out || !e || !r) rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "events, engine or request is NULL");
    else if (r->freeze.policy != COURIER_FREEZE_NEVER)
        rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "a request that may be frozen cannot be an event source");
    else if (r->has_body || r->parts || r->body_file || r->download_path)
        rc = cr_fail(err, COURIER_E_INVALID_ARGUMENT, "an event source is a GET: no body, parts or download");
    courier_sse *es = rc ? NULL : calloc(1, sizeof *es);
    if (!rc && !es) rc = cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    if (rc) {
        if (user_free) user_free(user);
        return rc;
    }
    pthread_mutex_init(&es->m, NULL);
    cr_cond_init(&es->c);
    atomic_init(&es->refs, 1);
    es->e = e;
    es->worker = e->worker;
    es->retry_ms = SSE_DEFAULT_RETRY_MS;
    es->notify = notify;
    es->user = user;
    es->user_free = user_free;
    if ((rc = cr_request_copy(&es->req, r)) != COURIER_OK ||
        (rc = courier_request_add_header(es->req, "Accept", "text/event-stream")) != COURIER_OK) {
        cr_fail(err, rc, rc == COURIER_E_NO_MEMORY ? NULL : "the request cannot be an event source");
        events_release(es);
        return rc;
    }
    rc = connect_now(es, err);
    if (rc) {
        events_release(es);
        return rc;
    }
    *out = es;
    return COURIER_OK;
}

/* Under nothing: waits on the source's condition until its deadline or a close. */
static void wait_on(courier_sse *es, int64_t ms) {
    struct timespec until = cr_cond_deadline(ms * 1000);
    pthread_mutex_lock(&es->m);
    while (!es->closed && pthread_cond_timedwait(&es->c, &es->m, &until) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&es->m);
}

int courier_sse_next(courier_sse_event *ev, courier_sse *es, int64_t timeout_ms, courier_error *err) {
    cr_error_clear(err);
    if (!ev || !es || ev->size < sizeof *ev) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, NULL);
    if (timeout_ms != 0 && pthread_equal(pthread_self(), es->worker))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "an event read that waits, on the engine's worker thread");
    event_free(es->given);
    es->given = NULL;
    int64_t deadline = timeout_ms < 0 ? -1 : cr_mono_ms() + timeout_ms;
    for (;;) {
        if (es->first) {
            sse_event *x = es->first;
            es->first = x->next;
            if (!es->first) es->last = NULL;
            es->given = x;
            ev->type = x->type;
            ev->data = x->data;
            ev->data_len = x->data_len;
            ev->last_event_id = x->id;
            return COURIER_OK;
        }
        if (es->ended) {
            if (err) {
                *err = es->end_err;
                cr_error_forget_user(&es->end_err); /* the first caller told owns what was raised */
            }
            return es->end_code;
        }
        pthread_mutex_lock(&es->m);
        int closed = es->closed;
        int64_t at = es->reconnect_at;
        courier_stream *s = es->stream;
        pthread_mutex_unlock(&es->m);
        if (closed) {
            courier_error cerr;
            cr_fail(&cerr, COURIER_E_CANCELLED, "the event source was closed");
            end_for_good(es, COURIER_E_CANCELLED, &cerr);
            continue;
        }
        courier_error serr;
        if (!s) {
            int64_t wait = at - cr_mono_ms();
            if (wait > 0) {
                int64_t left = remaining(deadline);
                if (left == 0) return cr_fail(err, COURIER_E_AGAIN, "waiting to reconnect");
                wait_on(es, left < 0 || left > wait ? wait : left);
                continue;
            }
            pthread_mutex_lock(&es->m);
            es->reconnect_at = 0;
            pthread_mutex_unlock(&es->m);
            int rc = connect_now(es, &serr);
            if (rc == COURIER_E_NO_MEMORY || rc == COURIER_E_CANNOT_RESOLVE) {
                reconnect_later(es); /* a passing failure: try again later */
                continue;
            }
            if (rc) end_for_good(es, rc == COURIER_E_CLOSED ? COURIER_E_CLOSED : rc, &serr);
            continue;
        }
        int64_t left = remaining(deadline);
        pthread_mutex_lock(&es->m);
        int state = es->state;
        pthread_mutex_unlock(&es->m);
        int rc;
        if (state == COURIER_SSE_CONNECTING) {
            const courier_response *head = NULL;
            rc = courier_stream_head(&head, s, left, &serr);
            if (rc == COURIER_E_AGAIN) {
                if (remaining(deadline) == 0) return cr_fail(err, COURIER_E_AGAIN, "connecting");
                continue;
            }
            if (rc == COURIER_OK) {
                rc = check_head(es, head, &serr);
                if (rc) end_for_good(es, rc, &serr);
                else set_state(es, COURIER_SSE_OPEN);
                continue;
            }
        } else {
            const void *data;
            size_t len;
            rc = courier_stream_next(&data, &len, s, left, &serr);
            if (rc == COURIER_E_AGAIN) {
                if (remaining(deadline) == 0) return cr_fail(err, COURIER_E_AGAIN, "no event yet");
                continue;
            }
            if (rc == COURIER_OK && len) {
                if (feed(es, data, len)) {
                    courier_error merr;
                    cr_fail(&merr, COURIER_E_NO_MEMORY, NULL);
                    end_for_good(es, COURIER_E_NO_MEMORY, &merr);
                }
                continue;
            }
            if (rc == COURIER_OK) { /* a clean end: EventSource connects again */
                reconnect_later(es);
                continue;
            }
        }
        /* The connection failed. */
        pthread_mutex_lock(&es->m);
        closed = es->closed;
        pthread_mutex_unlock(&es->m);
        if (closed) {
            courier_error_clear(&serr);
            continue;
        }
        if (rc == COURIER_E_CANCELLED || rc == COURIER_E_CLOSED) { /* the engine closed */
            courier_error_clear(&serr);
            courier_error cerr;
            cr_fail(&cerr, COURIER_E_CLOSED, "the engine closed");
            end_for_good(es, COURIER_E_CLOSED, &cerr);
            continue;
        }
        courier_error_clear(&serr);
        reconnect_later(es); /* a network failure: reestablish */
    }
}

courier_sse_state courier_sse_get_state(const courier_sse *es) {
    if (!es) return COURIER_SSE_CLOSED;
    pthread_mutex_lock((pthread_mutex_t *)&es->m);
    int state = es->state;
    pthread_mutex_unlock((pthread_mutex_t *)&es->m);
    return (courier_sse_state)state;
}

int64_t courier_sse_retry_in_ms(const courier_sse *es) {
    if (!es) return -1;
    pthread_mutex_lock((pthread_mutex_t *)&es->m);
    int64_t at = es->stream || es->closed || es->state == COURIER_SSE_CLOSED ? 0 : es->reconnect_at;
    pthread_mutex_unlock((pthread_mutex_t *)&es->m);
    if (!at) return -1;
    int64_t left = at - cr_mono_ms();
    return left > 0 ? left : 0;
}

int64_t courier_sse_retry_ms(const courier_sse *es) { return es ? es->retry_ms : 0; }

int courier_sse_close(courier_sse *es) {
    if (!es) return COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&es->m);
    if (es->closed || es->state == COURIER_SSE_CLOSED) {
        pthread_mutex_unlock(&es->m);
        return COURIER_E_NOT_FOUND;
    }
    es->closed = 1;
    if (es->stream) courier_stream_cancel(es->stream); /* the reader frees it, not us */
    pthread_cond_broadcast(&es->c);
    pthread_mutex_unlock(&es->m);
    if (es->notify) es->notify(es, es->user); /* an event loop waiting for a reconnection looks again */
    return COURIER_OK;
}

void courier_sse_free(courier_sse *es) {
    if (!es) return;
    courier_sse_close(es);
    pthread_mutex_lock(&es->m);
    courier_stream *s = es->stream;
    es->stream = NULL;
    pthread_mutex_unlock(&es->m);
    courier_stream_free(s);
    events_release(es);
}
