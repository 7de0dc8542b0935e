/*
 * stream_bench.c — the two C clients of `courier bench stream` (see cbench.h): one large body read
 * by a plain libcurl easy transfer whose write callback discards (the ceiling), and the same body
 * read through a Courier stream (courier_stream_next, each chunk borrowed and dropped).
 */
#include "cbench.h"

#include <courier.h>
#include <curl/curl.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t discard(char *data, size_t size, size_t n, void *user) {
    (void)data;
    *(int64_t *)user += (int64_t)(size * n);
    return size * n;
}

int cbench_stream_curl(const char *url, long buffer_size, int64_t *bytes, double *wall_s, double *cpu_s) {
    *bytes = 0;
    CURL *h = curl_easy_init();
    if (!h) return -1;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, bytes);
    if (buffer_size > 0) curl_easy_setopt(h, CURLOPT_BUFFERSIZE, buffer_size);
    double c0 = cbench_process_cpu_seconds(), t0 = now_s();
    CURLcode rc = curl_easy_perform(h);
    *wall_s = now_s() - t0;
    *cpu_s = cbench_process_cpu_seconds() - c0;
    curl_easy_cleanup(h);
    return rc == CURLE_OK ? 0 : -1;
}

int cbench_stream_courier(const char *url, int64_t *bytes, int64_t *max_held, double *wall_s, double *cpu_s) {
    *bytes = 0;
    *max_held = 0;
    courier_engine *e = NULL;
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_temporary_store(cfg, 1);
    int rc = courier_engine_open(&e, cfg, NULL);
    courier_config_free(cfg);
    if (rc) return -1;
    courier_request *r = NULL;
    courier_request_new(&r, "GET", url);
    double c0 = cbench_process_cpu_seconds(), t0 = now_s();
    courier_stream *s = NULL;
    rc = courier_stream_open(&s, e, r, NULL, NULL, NULL, NULL);
    courier_request_free(r);
    for (;;) {
        if (rc) break;
        const void *data;
        size_t len;
        rc = courier_stream_next(&data, &len, s, -1, NULL);
        if (rc || !len) break;
        *bytes += (int64_t)len;
        int64_t held = courier_stream_buffered(s);
        if (held > *max_held) *max_held = held;
    }
    *wall_s = now_s() - t0;
    *cpu_s = cbench_process_cpu_seconds() - c0;
    courier_stream_free(s);
    courier_engine_close(e);
    return rc ? -1 : 0;
}
