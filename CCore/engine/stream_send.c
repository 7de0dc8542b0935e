/*
 * stream_send.c — the engine's part of streamed responses (courier_stream, http/stream.c holds the
 * stream itself): opening one (a send whose completion ends the stream), cancelling it, and
 * unpausing its transfer on the worker when the reader has made room (libcurl's pause may only be
 * called on the thread that drives the transfer).
 */
#include "internal.h"

/* Worker: the reader made room; unpause. libcurl hands the bytes it kept to the body callback
 * inside this call (which may pause again). */
static void resume_work(void *user) {
    courier_stream *s = user;
    CURL *h = cr_stream_take_resume(s);
    if (h) curl_easy_pause(h, CURLPAUSE_CONT);
    cr_stream_release(s);
}

/* Reader's thread: asks the worker (a post wakes it); a closing engine ends the stream anyway. */
static void ask_resume(courier_stream *s, courier_engine *e) {
    cr_stream_retain(s);
    if (courier_engine_post(e, resume_work, s, NULL) != COURIER_OK) cr_stream_release(s);
}

int courier_stream_open(courier_stream **out, courier_engine *e, const courier_request *r,
                        courier_stream_notify_fn notify, void *user, courier_user_free_fn user_free,
                        courier_error *err) {
    cr_error_clear(err);
    if (out) *out = NULL;
    if (!out || !e || !r) {
        if (user_free) user_free(user);
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "stream, engine or request is NULL");
    }
    int64_t limit = e->core.config->stream_buffer > 0 ? e->core.config->stream_buffer : CR_DEFAULT_STREAM_BUFFER_BYTES;
    cr_stream_ops ops = {e, ask_resume, courier_cancel};
    courier_stream *s = cr_stream_new((size_t)limit, e->worker, notify, user, user_free, &ops);
    if (!s) {
        if (user_free) user_free(user);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    if (e->core.config->max_response_bytes > 0) {
        cr_stream_set_max_line(s, (size_t)e->core.config->max_response_bytes);
    }
    int rc = cr_send(NULL, e, r, cr_stream_done, s, s, err);
    if (rc != COURIER_OK) {
        cr_stream_release(s); /* the send's reference: no completion will come */
        cr_stream_release(s);
        return rc;
    }
    *out = s;
    return COURIER_OK;
}

int courier_stream_cancel(courier_stream *s) { return s ? cr_stream_cancel(s) : COURIER_E_INVALID_ARGUMENT; }

void courier_stream_free(courier_stream *s) {
    if (!s) return;
    cr_stream_cancel(s); /* not past its end: a close of the engine may be under way */
    cr_stream_release(s);
}
