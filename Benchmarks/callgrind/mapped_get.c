/* mapped_get.c — a mapped GET through the engine, N times, one after another (courier_send_sync):
 *   net N data|tape : GET /json of the in-process loopback server, key path data.items, a 2-field
 *                     item mapping; the result read with courier_response_data (C's jansson value)
 *                     or courier_response_result_tape (what Swift and Python read now)
 *   mock N data|tape: a mocked 200 answer of the 1 MB `courier bench mapping` document (5,000 objects
 *                     x 10 fields) mapped by the 10-field mapping; the result read the same ways
 * Instructions per request: callgrind at two N, the difference divided by the difference of N
 * (Benchmarks/callgrind/mapped_get.sh). Built with -DBEFORE against a checkout without
 * courier_response_result_tape (before issue 15's response path), the "tape" reads are left out. */
#include <courier.h>
#include <courier_test_server.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

char *cbench_mapping_document(int count, size_t *len);
void *cbench_mapping_new(int renames);

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    int mock = strcmp(argv[1], "mock") == 0, n = atoi(argv[2]), tape = strcmp(argv[3], "tape") == 0;
    cts_server *srv = NULL;
    char base[64] = "http://127.0.0.1:1";
    if (!mock) {
        if (cts_server_start(&srv, "127.0.0.1", 0)) return 1;
        snprintf(base, sizeof base, "http://127.0.0.1:%d", cts_server_port(srv));
    }
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_base_url(cfg, base);
    if (mock) courier_config_set_mock_enabled(cfg, 1);
    courier_engine *e = NULL;
    courier_error err;
    if (courier_engine_open(&e, cfg, &err)) { fprintf(stderr, "open: %s\n", err.message); return 1; }
    courier_mapping *m = NULL;
    size_t doc_len = 0;
    char *doc = NULL;
    if (mock) {
        m = cbench_mapping_new(0);
        doc = cbench_mapping_document(5000, &doc_len);
    } else {
        courier_mapping_new(&m);
        courier_mapping_add_attribute(m, "id", "itemId", COURIER_JSON_INTEGER, COURIER_MAP_REQUIRED);
        courier_mapping_add_attribute(m, "title", NULL, COURIER_JSON_STRING, COURIER_MAP_REQUIRED);
    }
    courier_request *r = NULL;
    courier_request_new(&r, "GET", mock ? "/doc" : "/json");
    if (!mock) courier_request_set_key_path(r, "data.items");
    courier_request_set_mapping(r, m);
    if (mock) courier_request_set_mock_response(r, 200, doc, doc_len, "application/json");
    long long sum = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        courier_response *resp = NULL;
        int rc = courier_send_sync(&resp, e, r, &err);
        if (rc) { fprintf(stderr, "send: %d %s\n", rc, err.message); return 1; }
#ifndef BEFORE /* main has no courier_response_result_tape */
        if (tape) {
            const courier_json_tape *t = NULL;
            size_t at = 0;
            if (courier_response_result_tape(&t, &at, resp, NULL, NULL) == COURIER_OK)
                sum += courier_json_tape_entries(t, NULL)[at].length;
        } else
#endif
        {
            sum += (long long)courier_json_size(courier_response_data(resp));
        }
        courier_response_free(resp);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%s %s n=%d sum=%lld %.1f us/request\n", argv[1], argv[3], n, sum, s / n * 1e6);
    courier_request_free(r);
    courier_mapping_free(m);
    free(doc);
    courier_engine_close(e);
    courier_config_free(cfg);
    if (srv) cts_server_stop(srv);
    return 0;
}
