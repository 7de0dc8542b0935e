/*
 * engine.c — lifecycle, the store directory, the worker thread and its curl multi loop, sending
 * (asynchronous and synchronous) and cancelling.
 *
 * Threads: any thread submits; submissions go into `incoming` under `lock` and wake the worker with
 * curl_multi_wakeup. Only the worker touches the multi handle, the easy handles and the active list.
 * Every transfer completes exactly once: its id stays in `live` from submission until just before
 * its completion runs.
 */
#include "internal.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CR_POOL_MAX 64

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_OK;

static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

/* ---- the store directory ---------------------------------------------------------------------- */

static int mkdir_p(const char *path) {
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) return ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST) return errno;
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) return errno;
    struct stat st;
    if (stat(buf, &st) != 0) return errno;
    if (!S_ISDIR(st.st_mode)) return ENOTDIR;
    if (access(buf, R_OK | W_OK | X_OK) != 0) return errno;
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int open_store_dir(courier_engine *e, courier_error *err) {
    if (e->config->store_dir) {
        int rc = mkdir_p(e->config->store_dir);
        if (rc) {
            cr_fail(err, COURIER_E_STORE, "cannot create store directory '%.180s': %s", e->config->store_dir,
                    strerror(rc));
            if (err) err->os_error = rc;
            return COURIER_E_STORE;
        }
        e->store_dir = cr_strdup(e->config->store_dir);
        return e->store_dir ? COURIER_OK : cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/courier-XXXXXX", tmp) >= (int)sizeof path)
        return cr_fail(err, COURIER_E_STORE, "TMPDIR is too long");
    if (!mkdtemp(path)) {
        int os = errno;
        cr_fail(err, COURIER_E_STORE, "cannot create a temporary store in '%.180s': %s", tmp, strerror(os));
        if (err) err->os_error = os;
        return COURIER_E_STORE;
    }
    e->store_dir = cr_strdup(path);
    e->store_is_temp = 1;
    if (!e->store_dir) {
        rmdir(path);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    return COURIER_OK;
}

/* ---- completing -------------------------------------------------------------------------------- */

/* Runs t's completion and frees it. The transfer must already be off every list and out of the
 * multi handle. */
static void complete(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err) {
    pthread_mutex_lock(&e->lock);
    cr_idset_remove(&e->live, t->id);
    pthread_mutex_unlock(&e->lock);
    if (t->done) t->done(t->id, code, resp, code == COURIER_OK ? NULL : err, t->user);
    else courier_response_free(resp);
    cr_transfer_free(t);
}

/* Every transfer that got an answer from its transport ends here: the one place where a response
 * is judged (HTTP status, validator) before the caller sees it. Later stages (mapping, cache
 * write) belong here too, so real, mocked and custom-transport responses are treated alike. */
static void finish(courier_engine *e, cr_transfer *t, int code, courier_response *resp, courier_error *err) {
    if (code == COURIER_OK && resp) {
        if (resp->status >= 400) {
            code = cr_fail(err, COURIER_E_HTTP_STATUS, "HTTP status %d", resp->status);
            err->http_status = resp->status;
        } else if (t->validator && !((courier_validator_fn)t->validator->fn)(resp, t->validator->user)) {
            code = cr_fail(err, COURIER_E_INVALID_RESULT, "the validator rejected the response");
            err->http_status = resp->status;
        }
    }
    complete(e, t, code, resp, err);
}

static void complete_code(courier_engine *e, cr_transfer *t, int code, const char *why) {
    courier_error err;
    cr_fail(&err, code, "%s", why);
    complete(e, t, code, NULL, &err);
}

static void release_easy(courier_engine *e, cr_transfer *t) {
    if (!t->easy) return;
    curl_multi_remove_handle(e->multi, t->easy);
    if (e->npool < CR_POOL_MAX) {
        curl_easy_reset(t->easy);
        e->pool[e->npool++] = t->easy;
    } else {
        curl_easy_cleanup(t->easy);
    }
    t->easy = NULL;
}

static void active_unlink(courier_engine *e, cr_transfer *t) {
    if (t->prev) t->prev->next = t->next;
    else e->active_head = t->next;
    if (t->next) t->next->prev = t->prev;
    t->next = t->prev = NULL;
    atomic_fetch_sub(&e->active, 1);
}

/* ---- the worker -------------------------------------------------------------------------------- */

static void start_transfer(courier_engine *e, cr_transfer *t) {
    t->easy = e->npool ? e->pool[--e->npool] : curl_easy_init();
    if (!t->easy) {
        complete_code(e, t, COURIER_E_NO_MEMORY, "cannot create a transfer");
        return;
    }
    int rc = cr_transport_setup(e, t);
    if (rc == COURIER_OK && curl_multi_add_handle(e->multi, t->easy) != CURLM_OK) rc = COURIER_E_INTERNAL;
    if (rc != COURIER_OK) {
        curl_easy_reset(t->easy);
        curl_easy_cleanup(t->easy);
        t->easy = NULL;
        complete_code(e, t, rc, "cannot start the transfer");
        return;
    }
    t->next = e->active_head;
    t->prev = NULL;
    if (e->active_head) e->active_head->prev = t;
    e->active_head = t;
    atomic_fetch_add(&e->active, 1);
}

static void cancel_active(courier_engine *e, cr_transfer *t, const char *why) {
    active_unlink(e, t);
    release_easy(e, t);
    complete_code(e, t, COURIER_E_CANCELLED, why);
}

static void finish_done(courier_engine *e, CURLMsg *msg) {
    cr_transfer *t = NULL;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
    if (!t) return;
    CURLcode result = msg->data.result;
    courier_response *resp = NULL;
    courier_error err;
    cr_error_clear(&err);
    active_unlink(e, t);
    int code = cr_transport_result(t, result, &resp, &err);
    release_easy(e, t);
    finish(e, t, code, resp, &err);
}

static void *worker_main(void *arg) {
    courier_engine *e = arg;
    uint64_t *cancels = NULL;
    size_t cap_cancels = 0;
    for (;;) {
        pthread_mutex_lock(&e->lock);
        cr_transfer *in = e->incoming_head;
        e->incoming_head = e->incoming_tail = NULL;
        size_t ncancels = e->ncancels;
        if (ncancels) {
            /* Swap the buffers so the lock is not held while cancelling. */
            uint64_t *tmp = cancels;
            size_t tmpcap = cap_cancels;
            cancels = e->cancels;
            cap_cancels = e->cap_cancels;
            e->cancels = tmp;
            e->cap_cancels = tmpcap;
            e->ncancels = 0;
        }
        int cancel_all = e->cancel_all;
        e->cancel_all = 0;
        int closing = e->closing;
        pthread_mutex_unlock(&e->lock);

        while (in) {
            cr_transfer *next = in->next;
            in->next = NULL;
            atomic_fetch_sub(&e->queued, 1);
            if (closing) complete_code(e, in, COURIER_E_CANCELLED, "the engine closed");
            else start_transfer(e, in);
            in = next;
        }
        for (size_t i = 0; i < ncancels; i++) {
            for (cr_transfer *t = e->active_head; t; t = t->next) {
                if (t->id == cancels[i]) {
                    cancel_active(e, t, "cancelled");
                    break;
                }
            }
        }
        if (cancel_all || closing) {
            while (e->active_head)
                cancel_active(e, e->active_head, closing ? "the engine closed" : "cancelled");
        }
        if (closing) break;

        int running = 0;
        curl_multi_perform(e->multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(e->multi, &left))) {
            if (msg->msg == CURLMSG_DONE) finish_done(e, msg);
        }
        curl_multi_poll(e->multi, NULL, 0, 1000, NULL);
    }
    free(cancels);
    return NULL;
}

/* ---- lifecycle --------------------------------------------------------------------------------- */

static void engine_free(courier_engine *e) {
    if (!e) return;
    for (size_t i = 0; i < e->npool; i++) curl_easy_cleanup(e->pool[i]);
    free(e->pool);
    if (e->multi) curl_multi_cleanup(e->multi);
    if (e->store_is_temp && e->store_dir) nftw(e->store_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(e->store_dir);
    free(e->cancels);
    cr_idset_free(&e->live);
    courier_config_free(e->config);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

int courier_engine_open(courier_engine **out, const courier_config *config, courier_error *err) {
    cr_error_clear(err);
    if (!out) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK) return cr_fail(err, COURIER_E_INTERNAL, "curl_global_init failed (%d)", (int)global_rc);

    courier_engine *e = calloc(1, sizeof *e);
    if (!e) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    pthread_mutex_init(&e->lock, NULL);
    atomic_init(&e->next_id, 1);
    atomic_init(&e->queued, 0);
    atomic_init(&e->active, 0);
    e->config = cr_config_copy(config);
    e->pool = calloc(CR_POOL_MAX, sizeof *e->pool);
    if (!e->config || !e->pool) {
        engine_free(e);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    int rc = open_store_dir(e, err);
    if (rc) {
        engine_free(e);
        return rc;
    }
    e->multi = curl_multi_init();
    if (!e->multi) {
        engine_free(e);
        return cr_fail(err, COURIER_E_INTERNAL, "curl_multi_init failed");
    }
    curl_multi_setopt(e->multi, CURLMOPT_MAX_HOST_CONNECTIONS, e->config->max_per_host);
    curl_multi_setopt(e->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, e->config->max_total);
    curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, e->config->max_total);
    curl_multi_setopt(e->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);

    int prc = pthread_create(&e->worker, NULL, worker_main, e);
    if (prc != 0) {
        engine_free(e);
        cr_fail(err, COURIER_E_INTERNAL, "cannot start the worker thread: %s", strerror(prc));
        if (err) err->os_error = prc;
        return COURIER_E_INTERNAL;
    }
    *out = e;
    return COURIER_OK;
}

void courier_engine_close(courier_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->lock);
    e->closing = 1;
    pthread_mutex_unlock(&e->lock);
    curl_multi_wakeup(e->multi);
    pthread_join(e->worker, NULL);
    engine_free(e);
}

const char *courier_engine_store_dir(const courier_engine *e) { return e ? e->store_dir : NULL; }

int courier_engine_pending(const courier_engine *e, long *queued, long *active) {
    if (!e) return COURIER_E_INVALID_ARGUMENT;
    if (queued) *queued = atomic_load(&((courier_engine *)e)->queued);
    if (active) *active = atomic_load(&((courier_engine *)e)->active);
    return COURIER_OK;
}

/* ---- sending ----------------------------------------------------------------------------------- */

int courier_send(courier_engine *e, const courier_request *r, courier_completion_fn done, void *user,
                 uint64_t *out_id, courier_error *err) {
    cr_error_clear(err);
    if (out_id) *out_id = 0;
    if (!e || !r) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or request is NULL");
    cr_transfer *t = NULL;
    int rc = cr_transfer_prepare(e, r, &t, err);
    if (rc) return rc;
    t->done = done;
    t->user = user;
    t->id = atomic_fetch_add(&e->next_id, 1);

    pthread_mutex_lock(&e->lock);
    if (e->closing) {
        pthread_mutex_unlock(&e->lock);
        cr_transfer_free(t);
        return cr_fail(err, COURIER_E_CLOSED, "the engine is closing");
    }
    if (cr_idset_add(&e->live, t->id)) {
        pthread_mutex_unlock(&e->lock);
        cr_transfer_free(t);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    /* One wakeup per batch: if incoming already held transfers, a wakeup is already pending. */
    bool wake = e->incoming_head == NULL;
    if (e->incoming_tail) e->incoming_tail->next = t;
    else e->incoming_head = t;
    e->incoming_tail = t;
    atomic_fetch_add(&e->queued, 1);
    uint64_t id = t->id; /* t may complete and be freed as soon as the lock is released */
    pthread_mutex_unlock(&e->lock);
    if (wake) curl_multi_wakeup(e->multi);
    if (out_id) *out_id = id;
    return COURIER_OK;
}

typedef struct sync_wait {
    pthread_mutex_t m;
    pthread_cond_t c;
    int done;
    int code;
    courier_response *resp;
    courier_error err;
} sync_wait;

static void sync_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    sync_wait *w = user;
    pthread_mutex_lock(&w->m);
    w->code = code;
    w->resp = resp;
    if (err) w->err = *err;
    w->done = 1;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
}

int courier_send_sync(courier_engine *e, const courier_request *r, courier_response **out_response,
                      courier_error *err) {
    cr_error_clear(err);
    if (out_response) *out_response = NULL;
    if (!e || !r) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "engine or request is NULL");
    if (pthread_equal(pthread_self(), e->worker))
        return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "courier_send_sync called on the engine's worker thread");
    sync_wait w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.m, NULL);
    pthread_cond_init(&w.c, NULL);
    int rc = courier_send(e, r, sync_done, &w, NULL, err);
    if (rc == COURIER_OK) {
        pthread_mutex_lock(&w.m);
        while (!w.done) pthread_cond_wait(&w.c, &w.m);
        pthread_mutex_unlock(&w.m);
        rc = w.code;
        if (err) *err = w.err;
        if (out_response) *out_response = w.resp;
        else courier_response_free(w.resp);
    }
    pthread_cond_destroy(&w.c);
    pthread_mutex_destroy(&w.m);
    return rc;
}

int courier_cancel(courier_engine *e, uint64_t id) {
    if (!e) return COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&e->lock);
    if (!cr_idset_has(&e->live, id)) {
        pthread_mutex_unlock(&e->lock);
        return COURIER_E_NOT_FOUND;
    }
    if (e->ncancels == e->cap_cancels) {
        size_t cap = e->cap_cancels ? e->cap_cancels * 2 : 16;
        uint64_t *p = realloc(e->cancels, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&e->lock);
            return COURIER_E_NO_MEMORY;
        }
        e->cancels = p;
        e->cap_cancels = cap;
    }
    e->cancels[e->ncancels++] = id;
    pthread_mutex_unlock(&e->lock);
    curl_multi_wakeup(e->multi);
    return COURIER_OK;
}

int courier_cancel_all(courier_engine *e) {
    if (!e) return COURIER_E_INVALID_ARGUMENT;
    pthread_mutex_lock(&e->lock);
    e->cancel_all = 1;
    pthread_mutex_unlock(&e->lock);
    curl_multi_wakeup(e->multi);
    return COURIER_OK;
}
