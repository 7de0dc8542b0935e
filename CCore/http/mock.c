/*
 * mock.c — mock answers (HTNetworking's enableMockTest): a status, headers and a body given as
 * bytes or a file, an error, a delay, or a callback; and building responses by hand, which mocks,
 * after-receive interceptors and custom transports share (the response itself: response.c).
 */
#include "http/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the mock description -------------------------------------------------------------------- */

void cr_mock_free(cr_mock *m) {
    if (!m) return;
    free(m->body);
    free(m->file);
    free(m->why);
    cr_kvlist_clear(&m->headers);
    cr_callback_release(m->fn);
    free(m);
}

cr_mock *cr_mock_copy(const cr_mock *src) {
    cr_mock *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->status = 200;
    if (!src) return m;
    m->status = src->status;
    m->has_body = src->has_body;
    m->body_len = src->body_len;
    m->error = src->error;
    m->delay_ms = src->delay_ms;
    m->fn = cr_callback_retain(src->fn);
    if ((src->has_body && !(m->body = cr_strndup(src->body, src->body_len))) ||
        (src->file && !(m->file = cr_strdup(src->file))) || (src->why && !(m->why = cr_strdup(src->why))) ||
        cr_kvlist_copy(&m->headers, &src->headers)) {
        cr_mock_free(m);
        return NULL;
    }
    return m;
}

static cr_mock *request_mock(courier_request *r) {
    if (!r->mock) r->mock = cr_mock_copy(NULL);
    return r->mock;
}

/* Clears the answer's source (body, file, error, callback) before a new one is set. */
static void clear_source(cr_mock *m) {
    free(m->body);
    m->body = NULL;
    m->body_len = 0;
    m->has_body = 0;
    free(m->file);
    m->file = NULL;
    free(m->why);
    m->why = NULL;
    m->error = 0;
    cr_callback_release(m->fn);
    m->fn = NULL;
}

int courier_request_set_mock_response(courier_request *r, int status, const void *body, size_t len,
                                      const char *content_type) {
    if (!r || status < 100 || status > 999 || (!body && len)) return COURIER_E_INVALID_ARGUMENT;
    if (content_type) {
        int rc = cr_check_header("Content-Type", 12, content_type, strlen(content_type));
        if (rc) return rc;
    }
    cr_mock *m = request_mock(r);
    char *copy = cr_strndup(body ? body : "", len);
    if (!m || !copy) {
        free(copy);
        return COURIER_E_NO_MEMORY;
    }
    clear_source(m);
    m->status = status;
    m->body = copy;
    m->body_len = len;
    m->has_body = 1;
    cr_kvlist_remove(&m->headers, "Content-Type");
    if (content_type && cr_kvlist_add(&m->headers, "Content-Type", 12, content_type, strlen(content_type)))
        return COURIER_E_NO_MEMORY;
    return COURIER_OK;
}

int courier_request_set_mock_file(courier_request *r, const char *path) {
    if (!r || !path || !*path) return COURIER_E_INVALID_ARGUMENT;
    cr_mock *m = request_mock(r);
    char *copy = cr_strdup(path);
    if (!m || !copy) {
        free(copy);
        return COURIER_E_NO_MEMORY;
    }
    clear_source(m);
    m->file = copy;
    return COURIER_OK;
}

int courier_request_set_mock_status(courier_request *r, int status) {
    if (!r || status < 100 || status > 999) return COURIER_E_INVALID_ARGUMENT;
    cr_mock *m = request_mock(r);
    if (!m) return COURIER_E_NO_MEMORY;
    m->status = status;
    return COURIER_OK;
}

int courier_request_add_mock_header(courier_request *r, const char *name, const char *value) {
    if (!r || !name || !value) return COURIER_E_INVALID_ARGUMENT;
    int rc = cr_check_header(name, strlen(name), value, strlen(value));
    if (rc) return rc;
    cr_mock *m = request_mock(r);
    if (!m) return COURIER_E_NO_MEMORY;
    return cr_kvlist_add(&m->headers, name, strlen(name), value, strlen(value));
}

int courier_request_set_mock_error(courier_request *r, courier_code code) {
    if (!r || code >= 0) return COURIER_E_INVALID_ARGUMENT;
    cr_mock *m = request_mock(r);
    if (!m) return COURIER_E_NO_MEMORY;
    clear_source(m);
    m->error = code;
    return COURIER_OK;
}

int courier_request_set_mock_delay_ms(courier_request *r, int64_t delay_ms) {
    if (!r || delay_ms < 0) return COURIER_E_INVALID_ARGUMENT;
    cr_mock *m = request_mock(r);
    if (!m) return COURIER_E_NO_MEMORY;
    m->delay_ms = delay_ms;
    return COURIER_OK;
}

int courier_request_set_mock_callback(courier_request *r, courier_mock_fn fn, void *user,
                                      courier_user_free_fn user_free) {
    if (!r || !fn) {
        if (user_free) user_free(user);
        return COURIER_E_INVALID_ARGUMENT;
    }
    cr_mock *m = request_mock(r);
    if (!m) {
        if (user_free) user_free(user);
        return COURIER_E_NO_MEMORY;
    }
    int rc;
    cr_callback *cb = cr_callback_new((void (*)(void))fn, user, user_free, &rc);
    if (!cb) return rc;
    clear_source(m);
    m->fn = cb;
    return COURIER_OK;
}

/* ---- answering ------------------------------------------------------------------------------- */

int cr_mock_answer(cr_transfer *t, courier_response **out, courier_error *err) {
    cr_mock *m = t->mock;
    *out = NULL;
    if (m->error && m->why) return cr_fail(err, m->error, "%s", m->why);
    if (m->error) return cr_fail(err, m->error, "mocked failure: %s", courier_strerror(m->error));
    courier_response *r = NULL;
    int rc;
    if (m->fn) {
        courier_outgoing o = {.method = t->method, .url = t->url, .headers = t->headers, .id = t->id};
        rc = ((courier_mock_fn)m->fn->fn)(&o, &r, m->fn->user);
        if (rc != COURIER_OK || !r) {
            courier_response_free(r);
            return cr_fail(err, rc < 0 ? rc : COURIER_E_INTERNAL, "the mock callback failed");
        }
    } else {
        if ((rc = courier_response_new(&r, m->status)) != COURIER_OK) return cr_fail(err, rc, NULL);
        if (cr_kvlist_copy(&r->headers, &m->headers)) {
            courier_response_free(r);
            return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        }
        if (m->file) {
            free(r->body);
            r->body = NULL;
            rc = cr_read_file(m->file, "mock file", t->max_bytes, &r->body, &r->body_len, err);
            if (rc) {
                courier_response_free(r);
                return rc;
            }
            const char *dot = strrchr(m->file, '.');
            if (!cr_kvlist_get(&r->headers, "Content-Type") && dot && strcasecmp(dot, ".json") == 0)
                cr_kvlist_add(&r->headers, "Content-Type", 12, "application/json", 16);
        } else if (m->has_body) {
            if ((rc = courier_response_set_body(r, m->body, m->body_len)) != COURIER_OK) {
                courier_response_free(r);
                return cr_fail(err, rc, NULL);
            }
        }
    }
    /* The response describes this request, whatever the callback filled in. */
    if (cr_response_detach(r) || cr_set_string(&r->url, t->url) || cr_set_string(&r->method, t->method)) {
        courier_response_free(r);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    *out = r;
    return COURIER_OK;
}
