/*
 * ws_echo.c — WebSocket echo round trips through the C API, for profiles and system-call counts
 * (docs/design/stream-speed.md): the test server in this process (/ws/echo), one engine, CONNS
 * threads each with its own WebSocket sending a 1 KiB binary message and waiting for its echo.
 *
 *   cc -O2 -Iinclude -ITests/TestServer/include Benchmarks/callgrind/ws_echo.c -o ws_echo \
 *      BUILD/libcourier.so BUILD/libcourier_test_server.a -lcrypto -lpthread -Wl,-rpath,BUILD
 *   ./ws_echo [CONNS (1)] [ROUND_TRIPS (5000)] [default-limits]
 *   strace -f -c ./ws_echo 1 3000     # minus the count of `./ws_echo 1 1000`, over 2000
 *
 * Prints round trips per second and the CPU time of the process (client and server) per round trip.
 * max_connections_per_host is raised to CONNS: WebSockets count toward libcurl's per-host limit,
 * and past it libcurl closes an open WebSocket's connection (docs/design/stream-speed.md);
 * `default-limits` keeps the engine's defaults, which shows that: `./ws_echo 8 2000 default-limits`.
 */
#include <courier.h>
#include "courier_test_server.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static courier_engine *engine;
static char url[128];
static int per_thread;
static pthread_barrier_t barrier;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec +
           (double)u.ru_stime.tv_usec / 1e6;
}

static void round_trips(courier_ws *ws, const unsigned char *msg, int n) {
    courier_ws_message m = {.size = sizeof m};
    courier_error err;
    for (int i = 0; i < n; i++) {
        int rc = courier_ws_send(ws, COURIER_WS_BINARY, msg, 1024, &err);
        if (rc == COURIER_OK) rc = courier_ws_next(&m, ws, -1, &err);
        if (rc != COURIER_OK || m.len != 1024) {
            fprintf(stderr, "ws_echo: %d %s\n", rc, err.message);
            _exit(1); /* other threads are still in the engine */
        }
    }
}

static void *client(void *arg) {
    (void)arg;
    courier_request *r = NULL;
    courier_ws *ws = NULL;
    courier_error err;
    if (courier_request_new(&r, "GET", url) || courier_ws_open(&ws, engine, r, NULL, NULL, NULL, NULL, &err)) {
        fprintf(stderr, "ws_echo: cannot open\n");
        _exit(1);
    }
    courier_request_free(r);
    unsigned char msg[1024];
    for (int i = 0; i < 1024; i++) msg[i] = (unsigned char)(i % 251);
    round_trips(ws, msg, 50); /* warm-up */
    pthread_barrier_wait(&barrier);
    round_trips(ws, msg, per_thread);
    pthread_barrier_wait(&barrier);
    courier_ws_message m = {.size = sizeof m};
    courier_ws_close(ws, 1000, NULL);
    while (courier_ws_next(&m, ws, -1, NULL) == COURIER_OK) {
    }
    courier_ws_free(ws);
    return NULL;
}

int main(int argc, char **argv) {
    int conns = argc > 1 ? atoi(argv[1]) : 1, total = argc > 2 ? atoi(argv[2]) : 5000;
    if (conns < 1 || total < conns) return 2;
    cts_server *srv = NULL;
    if (cts_server_start(&srv, NULL, 0)) return 1;
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/ws/echo", cts_server_port(srv));
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_temporary_store(cfg, 1);
    if (!(argc > 3 && strcmp(argv[3], "default-limits") == 0)) {
        courier_config_set_max_connections_per_host(cfg, conns > 5 ? conns : 5);
        courier_config_set_max_connections(cfg, 64 + conns);
    }
    courier_error err;
    if (courier_engine_open(&engine, cfg, &err)) return 1;
    courier_config_free(cfg);
    per_thread = total / conns;
    pthread_barrier_init(&barrier, NULL, (unsigned)conns + 1);
    pthread_t *threads = calloc((size_t)conns, sizeof *threads);
    for (int i = 0; i < conns; i++) pthread_create(&threads[i], NULL, client, NULL);
    pthread_barrier_wait(&barrier);
    double t0 = now_s(), c0 = cpu_s();
    pthread_barrier_wait(&barrier);
    double wall = now_s() - t0, cpu = cpu_s() - c0;
    for (int i = 0; i < conns; i++) pthread_join(threads[i], NULL);
    int n = per_thread * conns;
    printf("%d connection(s): %.0f round trips/s, %.1f us CPU per round trip (client and server)\n", conns,
           n / wall, cpu / n * 1e6);
    free(threads);
    courier_engine_close(engine);
    cts_server_stop(srv);
    return 0;
}
