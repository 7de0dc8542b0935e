/*
 * driver.c — a fixed workload for instruction counts (valgrind --tool=callgrind):
 *   driver MODE N
 * MODE: "request" (N sync GETs over the loopback test server, no cache), "cache" (N sync GETs a
 * cache-first entry answers, no network), "get" (N courier_cache_get_key), "named" (as "request", to
 * http://localhost: a host name, so HSTS looks it up in the store, resolved to 127.0.0.1 by the
 * engine's resolve list so no DNS is asked). Run with two values of
 * N; (Ir(N2) - Ir(N1)) / (N2 - N1) is the cost of one operation, without set-up and tear-down.
 */
#include <courier.h>
#include <courier_test_server.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x)                                                                                       \
    do {                                                                                               \
        int rc_ = (x);                                                                                 \
        if (rc_ != COURIER_OK) {                                                                       \
            fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #x, rc_);                         \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: driver request|named|cache|get N\n");
        return 2;
    }
    const char *mode = argv[1];
    long n = atol(argv[2]);
    char dir[] = "/tmp/courier-callgrind-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    cts_server *srv = NULL;
    if (cts_server_start(&srv, "127.0.0.1", 0) != 0) return 1;
    char base[64];
    bool named = strcmp(mode, "named") == 0;
    snprintf(base, sizeof base, "http://%s:%d", named ? "localhost" : "127.0.0.1", cts_server_port(srv));
    courier_config *cfg = NULL;
    CHECK(courier_config_new(&cfg));
    if (named) CHECK(courier_config_add_resolve(cfg, "localhost", cts_server_port(srv), "127.0.0.1"));
    CHECK(courier_config_set_base_url(cfg, base));
    CHECK(courier_config_set_store_dir(cfg, dir));
    courier_engine *e = NULL;
    CHECK(courier_engine_open(&e, cfg, NULL));
    courier_config_free(cfg);
    courier_request *r = NULL;
    CHECK(courier_request_new(&r, "GET", "/bytes/512"));
    if (strcmp(mode, "cache") == 0) CHECK(courier_request_set_cache_policy(r, COURIER_CACHE_CACHE_FIRST));
    const char *key = "callgrind-entry";
    if (strcmp(mode, "get") == 0)
        CHECK(courier_cache_put_key(e, key, 200, NULL, NULL, 0, "0123456789abcdef", 16, 3600000, NULL));
    /* One warm-up operation (connection, store opened, entry written). */
    for (long i = 0; i <= n; i++) {
        courier_response *resp = NULL;
        if (strcmp(mode, "get") == 0) CHECK(courier_cache_get_key(&resp, e, key, 0, NULL));
        else CHECK(courier_send_sync(&resp, e, r, NULL));
        courier_response_free(resp);
    }
    courier_request_free(r);
    courier_engine_close(e);
    cts_server_stop(srv);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : 1;
}
