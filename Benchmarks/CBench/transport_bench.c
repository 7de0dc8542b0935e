/*
 * transport_bench.c — the two C transport clients of `courier bench transport` (see cbench.h):
 * a plain libcurl multi loop (the ceiling) and the Courier C API driven from C.
 */
#include "cbench.h"

#include <courier.h>
#include <curl/curl.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double cbench_process_cpu_seconds(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec / 1e6;
}

static void result_clear(cbench_result *out) { memset(out, 0, sizeof *out); }

static void note_error(char *slot, size_t size, const char *what) {
    if (slot[0] == '\0') snprintf(slot, size, "%s", what);
}

/* ========================================================================================== */
/* libcurl multi                                                                               */
/* ========================================================================================== */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_once_rc = CURLE_OK;
static void curl_init_once(void) { curl_once_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static size_t count_body(char *data, size_t size, size_t n, void *user) {
    (void)data;
    *(int64_t *)user += (int64_t)(size * n);
    return size * n;
}

typedef struct curl_phase {
    long total;      /* requests to send in this phase */
    long started;    /* handed to the multi handle */
    long completed;
    long errors;
    int64_t bytes;
    long connections; /* CURLINFO_NUM_CONNECTS summed */
    int http_version;
    char first_error[256];
} curl_phase;

static int version_number(long v) {
    switch (v) {
    case CURL_HTTP_VERSION_1_0: return 10;
    case CURL_HTTP_VERSION_1_1: return 11;
    case CURL_HTTP_VERSION_2_0: return 20;
    case CURL_HTTP_VERSION_3: return 30;
    default: return 0;
    }
}

/* Runs `total` requests through `multi` with `n` of the `handles` in flight. */
static int curl_run_phase(CURLM *multi, CURL **handles, int n, long total, curl_phase *ph) {
    memset(ph, 0, sizeof *ph);
    ph->total = total;
    for (int i = 0; i < n && ph->started < total; i++) {
        if (curl_multi_add_handle(multi, handles[i]) != CURLM_OK) return -1;
        ph->started++;
    }
    while (ph->completed < total) {
        int running = 0;
        CURLMcode mc = curl_multi_perform(multi, &running);
        if (mc != CURLM_OK) {
            note_error(ph->first_error, sizeof ph->first_error, curl_multi_strerror(mc));
            return -1;
        }
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            CURL *h = msg->easy_handle;
            CURLcode rc = msg->data.result;
            long status = 0, connects = 0, version = 0;
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
            curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
            ph->connections += connects;
            curl_multi_remove_handle(multi, h);
            ph->completed++;
            if (rc == CURLE_OK && curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &version) == CURLE_OK)
                ph->http_version = version_number(version);
            if (rc != CURLE_OK) {
                ph->errors++;
                note_error(ph->first_error, sizeof ph->first_error, curl_easy_strerror(rc));
            } else if (status != 200) {
                char why[64];
                snprintf(why, sizeof why, "HTTP status %ld", status);
                ph->errors++;
                note_error(ph->first_error, sizeof ph->first_error, why);
            }
            if (ph->started < total) {
                if (curl_multi_add_handle(multi, h) != CURLM_OK) return -1;
                ph->started++;
            }
        }
        if (ph->completed >= total) break;
        curl_multi_poll(multi, NULL, 0, 1000, NULL);
    }
    return 0;
}

/* Courier's default header lines (transport.c, cr_accept_encoding_line): User-Agent, and the
 * encodings this libcurl decodes. */
static struct curl_slist *courier_default_lines(void) {
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    char ae[64] = "Accept-Encoding: ";
    size_t base = strlen(ae);
    if (v && (v->features & CURL_VERSION_LIBZ)) strcat(ae, "deflate, gzip");
    if (v && (v->features & CURL_VERSION_BROTLI)) strcat(ae, strlen(ae) > base ? ", br" : "br");
#ifdef CURL_VERSION_ZSTD
    if (v && (v->features & CURL_VERSION_ZSTD)) strcat(ae, strlen(ae) > base ? ", zstd" : "zstd");
#endif
    struct curl_slist *lines = curl_slist_append(NULL, "User-Agent: Courier/" COURIER_VERSION_STRING);
    if (lines && strlen(ae) > base) {
        struct curl_slist *n = curl_slist_append(lines, ae);
        if (!n) {
            curl_slist_free_all(lines);
            return NULL;
        }
        lines = n;
    }
    return lines;
}

static int curl_multi_loop(const char *url, long total, int concurrency, long warmup, int courier_headers,
                           const cbench_transport_options *options, cbench_result *out);

int cbench_curl_multi(const char *url, long total, int concurrency, long warmup,
                      const cbench_transport_options *options, cbench_result *out) {
    return curl_multi_loop(url, total, concurrency, warmup, 0, options, out);
}

int cbench_curl_multi_headers(const char *url, long total, int concurrency, long warmup,
                              const cbench_transport_options *options, cbench_result *out) {
    return curl_multi_loop(url, total, concurrency, warmup, 1, options, out);
}

static int curl_multi_loop(const char *url, long total, int concurrency, long warmup, int courier_headers,
                           const cbench_transport_options *options, cbench_result *out) {
    static const cbench_transport_options plain = {NULL, 0};
    if (!options) options = &plain;
    result_clear(out);
    if (!url || total <= 0 || concurrency <= 0) {
        note_error(out->first_error, sizeof out->first_error, "invalid arguments");
        return -1;
    }
    pthread_once(&curl_once, curl_init_once);
    if (curl_once_rc != CURLE_OK) {
        note_error(out->first_error, sizeof out->first_error, "curl_global_init failed");
        return -1;
    }
    CURLM *multi = curl_multi_init();
    CURL **handles = calloc((size_t)concurrency, sizeof *handles);
    int64_t *bytes = calloc((size_t)concurrency, sizeof *bytes);
    struct curl_slist *lines = courier_headers ? courier_default_lines() : NULL;
    int rc = (multi && handles && bytes && (lines || !courier_headers)) ? 0 : -1;
    if (multi) {
        curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)concurrency);
        curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)concurrency);
        if (options->multiplex) curl_multi_setopt(multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
    }
    for (int i = 0; rc == 0 && i < concurrency; i++) {
        CURL *h = curl_easy_init();
        if (!h) {
            rc = -1;
            break;
        }
        handles[i] = h;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, count_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &bytes[i]);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 30000L);
        if (options->ca_file) curl_easy_setopt(h, CURLOPT_CAINFO, options->ca_file);
        if (options->multiplex) {
            curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
            curl_easy_setopt(h, CURLOPT_PIPEWAIT, 1L);
        }
        if (courier_headers) {
            curl_easy_setopt(h, CURLOPT_HTTPHEADER, lines);
            curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
        }
    }
    curl_phase ph;
    long warm_connections = 0;
    if (rc == 0 && warmup > 0) {
        rc = curl_run_phase(multi, handles, concurrency, warmup, &ph);
        warm_connections = ph.connections;
    }
    if (rc == 0) {
        for (int i = 0; i < concurrency; i++) bytes[i] = 0;
        double t0 = now_s(), c0 = cbench_process_cpu_seconds();
        rc = curl_run_phase(multi, handles, concurrency, total, &ph);
        out->seconds = now_s() - t0;
        out->cpu_seconds = cbench_process_cpu_seconds() - c0;
        out->completed = ph.completed;
        out->errors = ph.errors + (total - ph.completed);
        for (int i = 0; i < concurrency; i++) out->body_bytes += bytes[i];
        out->connections = warm_connections + ph.connections;
        out->http_version = ph.http_version;
        memcpy(out->first_error, ph.first_error, sizeof out->first_error);
    }
    if (rc != 0) note_error(out->first_error, sizeof out->first_error, "libcurl multi setup failed");
    for (int i = 0; handles && i < concurrency; i++) {
        if (!handles[i]) continue;
        curl_multi_remove_handle(multi, handles[i]);
        curl_easy_cleanup(handles[i]);
    }
    if (multi) curl_multi_cleanup(multi);
    curl_slist_free_all(lines);
    free(handles);
    free(bytes);
    return rc;
}

/* ========================================================================================== */
/* Courier C API                                                                               */
/* ========================================================================================== */

typedef struct courier_phase courier_phase;

/* One in-flight slot: its own request object, so the worker thread (which resubmits from the
 * completion) and the starting thread never send the same one at once. */
typedef struct courier_slot {
    courier_phase *phase;
    courier_request *request; /* borrowed from cbench_courier_c */
} courier_slot;

/* One phase (the warm-up, then the timed run). Each has its own object, so a completion that is
 * still finishing on the worker thread never sees the next phase's counters. */
struct courier_phase {
    courier_engine *engine;
    long total;
    courier_slot *slots;
    atomic_long claimed;   /* sends claimed (each claim is one request of the phase) */
    atomic_long completed; /* claims finished, whether sent or not */
    atomic_long errors;
    atomic_llong bytes;
    atomic_long connections; /* transfers whose metrics say connection_reused 0 */
    atomic_int http_version;
    pthread_mutex_t m;
    pthread_cond_t c;
    int finished;
    char first_error[256];
};

static void courier_phase_error(courier_phase *ph, const char *what) {
    atomic_fetch_add(&ph->errors, 1);
    pthread_mutex_lock(&ph->m);
    note_error(ph->first_error, sizeof ph->first_error, what);
    pthread_mutex_unlock(&ph->m);
}

static void courier_phase_finish_one(courier_phase *ph) {
    if (atomic_fetch_add(&ph->completed, 1) + 1 == ph->total) {
        pthread_mutex_lock(&ph->m);
        ph->finished = 1;
        pthread_cond_signal(&ph->c);
        pthread_mutex_unlock(&ph->m);
    }
}

static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user);

/* Claims and sends requests for `slot` until one is in flight or the phase has none left. */
static void courier_slot_next(courier_phase *ph, courier_slot *slot) {
    while (atomic_fetch_add(&ph->claimed, 1) < ph->total) {
        courier_error err;
        int rc = courier_send(NULL, ph->engine, slot->request, on_done, slot, &err);
        if (rc == COURIER_OK) return;
        courier_phase_error(ph, err.message[0] ? err.message : courier_strerror(rc));
        courier_phase_finish_one(ph);
    }
}

/* Runs on the engine's worker thread. */
static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    courier_slot *slot = user;
    courier_phase *ph = slot->phase;
    if (code != COURIER_OK) {
        courier_phase_error(ph, err && err->message[0] ? err->message : courier_strerror(code));
    } else if (courier_response_status(resp) != 200) {
        char why[64];
        snprintf(why, sizeof why, "HTTP status %d", courier_response_status(resp));
        courier_phase_error(ph, why);
    } else {
        size_t len = 0;
        courier_response_body(resp, &len);
        atomic_fetch_add(&ph->bytes, (long long)len);
    }
    courier_metrics m = {.size = sizeof m};
    if (resp && courier_response_metrics(&m, resp) == COURIER_OK) {
        if (!m.connection_reused) atomic_fetch_add(&ph->connections, 1);
        if (code == COURIER_OK) atomic_store(&ph->http_version, m.http_version);
    }
    courier_response_free(resp);
    /* Send the next one before counting this one done, so the phase cannot end (and its caller
     * move on) while this slot still sends. */
    courier_slot_next(ph, slot);
    courier_phase_finish_one(ph);
}

static courier_phase *courier_phase_new(courier_engine *engine, courier_request **requests, int n, long total) {
    courier_phase *ph = calloc(1, sizeof *ph);
    if (!ph) return NULL;
    ph->slots = calloc((size_t)n, sizeof *ph->slots);
    if (!ph->slots) {
        free(ph);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        ph->slots[i].phase = ph;
        ph->slots[i].request = requests[i];
    }
    ph->engine = engine;
    ph->total = total;
    atomic_init(&ph->claimed, 0);
    atomic_init(&ph->completed, 0);
    atomic_init(&ph->errors, 0);
    atomic_init(&ph->bytes, 0);
    atomic_init(&ph->connections, 0);
    atomic_init(&ph->http_version, 0);
    pthread_mutex_init(&ph->m, NULL);
    pthread_cond_init(&ph->c, NULL);
    return ph;
}

static void courier_phase_free(courier_phase *ph) {
    if (!ph) return;
    pthread_cond_destroy(&ph->c);
    pthread_mutex_destroy(&ph->m);
    free(ph->slots);
    free(ph);
}

/* Starts `n` slots and waits until all `total` requests have completed. */
static void courier_phase_run(courier_phase *ph, int n) {
    for (int i = 0; i < n; i++) courier_slot_next(ph, &ph->slots[i]);
    pthread_mutex_lock(&ph->m);
    while (!ph->finished) pthread_cond_wait(&ph->c, &ph->m);
    pthread_mutex_unlock(&ph->m);
}

int cbench_courier_c(const char *url, long total, int concurrency, long warmup,
                     const cbench_transport_options *options, cbench_result *out) {
    result_clear(out);
    if (!url || total <= 0 || concurrency <= 0) {
        note_error(out->first_error, sizeof out->first_error, "invalid arguments");
        return COURIER_E_INVALID_ARGUMENT;
    }
    courier_config *cfg = NULL;
    int rc = courier_config_new(&cfg);
    if (rc == COURIER_OK) rc = courier_config_set_max_connections_per_host(cfg, concurrency);
    if (rc == COURIER_OK) rc = courier_config_set_max_connections(cfg, concurrency > 64 ? concurrency : 64);
    if (rc == COURIER_OK) rc = courier_config_set_timeout_ms(cfg, 30000);
    if (rc == COURIER_OK) rc = courier_config_set_temporary_store(cfg, 1);
    if (rc == COURIER_OK && options && options->ca_file) rc = courier_config_set_ca_file(cfg, options->ca_file);
    courier_engine *engine = NULL;
    courier_error err;
    memset(&err, 0, sizeof err);
    if (rc == COURIER_OK) rc = courier_engine_open(&engine, cfg, &err);
    courier_config_free(cfg);
    if (rc != COURIER_OK) {
        note_error(out->first_error, sizeof out->first_error, err.message[0] ? err.message : courier_strerror(rc));
        return rc;
    }

    courier_request **requests = calloc((size_t)concurrency, sizeof *requests);
    courier_phase *warm = NULL, *timed = NULL;
    if (!requests) rc = COURIER_E_NO_MEMORY;
    for (int i = 0; rc == COURIER_OK && i < concurrency; i++) {
        rc = courier_request_new(&requests[i], "GET", url);
        /* Identical GETs in flight at once would share one network request: measure the transport,
         * one network request per send, like the other clients. */
        if (rc == COURIER_OK) rc = courier_request_set_coalesce(requests[i], 0);
    }
    if (rc == COURIER_OK && warmup > 0) {
        warm = courier_phase_new(engine, requests, concurrency, warmup);
        if (warm) courier_phase_run(warm, concurrency);
        else rc = COURIER_E_NO_MEMORY;
    }
    if (rc == COURIER_OK) {
        timed = courier_phase_new(engine, requests, concurrency, total);
        if (!timed) rc = COURIER_E_NO_MEMORY;
    }
    if (rc == COURIER_OK) {
        double t0 = now_s(), c0 = cbench_process_cpu_seconds();
        courier_phase_run(timed, concurrency);
        out->seconds = now_s() - t0;
        out->cpu_seconds = cbench_process_cpu_seconds() - c0;
        out->completed = atomic_load(&timed->completed);
        out->errors = atomic_load(&timed->errors);
        out->body_bytes = atomic_load(&timed->bytes);
        out->connections = atomic_load(&timed->connections) + (warm ? atomic_load(&warm->connections) : 0);
        out->http_version = atomic_load(&timed->http_version);
        pthread_mutex_lock(&timed->m);
        memcpy(out->first_error, timed->first_error, sizeof out->first_error);
        pthread_mutex_unlock(&timed->m);
    } else {
        note_error(out->first_error, sizeof out->first_error, courier_strerror(rc));
    }
    courier_engine_close(engine); /* joins the worker: no completion runs after this */
    courier_phase_free(warm);
    courier_phase_free(timed);
    for (int i = 0; requests && i < concurrency; i++) courier_request_free(requests[i]);
    free(requests);
    return rc;
}

/* ========================================================================================== */
/* nginx's stub_status                                                                         */
/* ========================================================================================== */

static size_t keep_text(char *data, size_t size, size_t n, void *user) {
    char *buf = user;
    size_t have = strlen(buf), add = size * n;
    if (have + add >= 512) add = 511 - have;
    memcpy(buf + have, data, add);
    buf[have + add] = '\0';
    return size * n;
}

int cbench_nginx_status(const char *url, const char *ca_file, long *accepts, long *requests, char *error,
                        size_t error_size) {
    pthread_once(&curl_once, curl_init_once);
    CURL *h = curl_once_rc == CURLE_OK ? curl_easy_init() : NULL;
    if (!h) {
        snprintf(error, error_size, "libcurl could not be set up");
        return -1;
    }
    char text[512] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep_text);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, text);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    if (ca_file) curl_easy_setopt(h, CURLOPT_CAINFO, ca_file);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(h);
    /* "Active connections: 1 \nserver accepts handled requests\n 2 2 2 \n..." */
    const char *numbers = strstr(text, "requests\n");
    long handled = 0;
    if (rc != CURLE_OK || status != 200 || !numbers || sscanf(numbers + 9, "%ld %ld %ld", accepts, &handled, requests) != 3) {
        snprintf(error, error_size, "nginx status at %s: %s", url,
                 rc != CURLE_OK ? curl_easy_strerror(rc) : status != 200 ? "not 200" : "not stub_status text");
        return -1;
    }
    return 0;
}

int cbench_curl_default_cainfo(char *out, size_t size) {
    pthread_once(&curl_once, curl_init_once);
    CURL *h = curl_once_rc == CURLE_OK ? curl_easy_init() : NULL;
    if (!h) return -1;
    char *path = NULL;
    int rc = -1;
#if LIBCURL_VERSION_NUM >= 0x075400 /* 7.84: CURLINFO_CAINFO */
    if (curl_easy_getinfo(h, CURLINFO_CAINFO, &path) == CURLE_OK && path && strlen(path) < size) {
        snprintf(out, size, "%s", path);
        rc = 0;
    }
#endif
    curl_easy_cleanup(h);
    return rc;
}
