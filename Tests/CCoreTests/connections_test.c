/*
 * connections_test.c — connection and TLS reuse against a real nginx over TLS (scripts/tls-fixture):
 * requests in flight together, round after round, cost one TLS handshake per connection and no
 * more connections than requests in flight over HTTPS/1.1, and one connection for all of them over
 * h2 (they wait for the first connection's ALPN answer and multiplex on it). Each count is taken
 * three times: by the client (courier_metrics.connection_reused), by the engine's pool figures
 * (courier_pool_get_figures: made, reused, open) and by nginx (stub_status accepts, and
 * connections.log's line per TLS connection that carried a request). Without nginx the test exits
 * 77 (ctest: skipped).
 */
#include "harness.h"

#include <pthread.h>
#include <stdlib.h>

static th_nginx h1, h2;

/* ---- what nginx saw ------------------------------------------------------------------------- */

/* stub_status's "accepts": TCP connections accepted so far. `e` is an engine of its own that keeps
 * its one connection alive between two of these, so the difference counts the others alone. */
static long accepts(courier_engine *e, const th_nginx *n) {
    char url[128];
    snprintf(url, sizeof url, "https://localhost:%d/status", n->port);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", url);
    courier_response *resp = NULL;
    long value = -1, handled = 0, requests = 0;
    if (courier_send_sync(&resp, e, r, NULL) == COURIER_OK) {
        const char *text = (const char *)courier_response_body(resp, NULL);
        const char *numbers = strstr(text, "requests\n");
        if (!numbers || sscanf(numbers + 9, "%ld %ld %ld", &value, &handled, &requests) != 3) value = -1;
    }
    courier_response_free(resp);
    courier_request_free(r);
    return value;
}

/* The lines of connections.log from byte `from`, each "CONNECTION REUSED TLS HTTP": one per TLS
 * connection that carried a request. *http gets the HTTP protocol of the last line. */
static long log_lines(const th_nginx *n, long from, char *http, size_t http_size) {
    FILE *f = fopen(th_nginx_file(n, "connections.log"), "r");
    if (!f) return 0;
    fseek(f, from, SEEK_SET);
    char line[256];
    long count = 0;
    while (fgets(line, sizeof line, f)) {
        char conn[32], reused[8], tls[32], proto[32];
        if (sscanf(line, "%31s %7s %31s %31s", conn, reused, tls, proto) != 4) continue;
        count++;
        snprintf(http, http_size, "%s", proto);
    }
    fclose(f);
    return count;
}

static long log_size(const th_nginx *n) {
    FILE *f = fopen(th_nginx_file(n, "connections.log"), "r");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    return size;
}

/* ---- rounds of requests in flight together ----------------------------------------------------- */

typedef struct round {
    pthread_mutex_t m;
    pthread_cond_t c;
    int left;
    int failed;
    int new_connections; /* answers whose metrics say the connection was new */
    int http_version;
} round;

static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)err;
    round *r = user;
    courier_metrics m = {.size = sizeof m};
    int ok = code == COURIER_OK && courier_response_status(resp) == 200 &&
             courier_response_metrics(&m, resp) == COURIER_OK;
    courier_response_free(resp);
    pthread_mutex_lock(&r->m);
    if (!ok) r->failed++;
    if (ok && !m.connection_reused) r->new_connections++;
    if (ok) r->http_version = m.http_version;
    r->left--;
    pthread_cond_signal(&r->c);
    pthread_mutex_unlock(&r->m);
}

typedef struct seen {
    int client_connections; /* as the client counted them */
    long accepted;          /* TCP connections nginx accepted */
    long handshakes;        /* TLS connections that carried a request, from nginx's log */
    int http_version;       /* the client's */
    char server_http[32];   /* nginx's $server_protocol */
    int failed;
    courier_pool_host pool; /* the engine's pool figures (total) after the rounds */
} seen;

/* `rounds` rounds of `width` GETs of /1k.bin sent together, each round awaited, on one engine
 * that allows `width` connections per host and trusts the fixture's CA. */
static seen run_rounds(const th_nginx *n, int rounds, int width) {
    seen out;
    memset(&out, 0, sizeof out);
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_temporary_store(cfg, 1);
    courier_config_set_max_connections_per_host(cfg, width);
    courier_config_set_ca_file(cfg, th_nginx_file(n, "ca.pem"));
    courier_engine *status = NULL, *e = NULL;
    CHECK_EQ(courier_engine_open(&status, cfg, NULL), COURIER_OK);
    CHECK_EQ(courier_engine_open(&e, cfg, NULL), COURIER_OK);
    courier_config_free(cfg);
    if (!status || !e) {
        courier_engine_close(status);
        courier_engine_close(e);
        out.failed = 1;
        return out;
    }
    long before = accepts(status, n), from = log_size(n);
    char url[128];
    snprintf(url, sizeof url, "https://localhost:%d/1k.bin", n->port);
    courier_request *req = NULL;
    courier_request_new(&req, "GET", url);
    courier_request_set_coalesce(req, 0); /* each send is one request on the wire */
    round r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.m, NULL);
    pthread_cond_init(&r.c, NULL);
    for (int i = 0; i < rounds; i++) {
        pthread_mutex_lock(&r.m);
        r.left = width;
        pthread_mutex_unlock(&r.m);
        for (int k = 0; k < width; k++) CHECK_EQ(courier_send(NULL, e, req, on_done, &r, NULL), COURIER_OK);
        pthread_mutex_lock(&r.m);
        while (r.left > 0) pthread_cond_wait(&r.c, &r.m);
        pthread_mutex_unlock(&r.m);
    }
    /* nginx's one worker logged each connection's first request before it served this. */
    long after = accepts(status, n);
    out.accepted = after - before;
    out.handshakes = log_lines(n, from, out.server_http, sizeof out.server_http);
    out.client_connections = r.new_connections;
    out.http_version = r.http_version;
    out.failed = r.failed;
    courier_pool_figures *f = NULL;
    out.pool.size = sizeof out.pool;
    CHECK_EQ(courier_pool_get_figures(&f, e), COURIER_OK);
    CHECK_EQ(courier_pool_figures_total(&out.pool, f), COURIER_OK);
    courier_pool_figures_free(f);
    courier_engine_close(e);
    courier_engine_close(status);
    courier_request_free(req);
    pthread_cond_destroy(&r.c);
    pthread_mutex_destroy(&r.m);
    return out;
}

/* ---- tests ------------------------------------------------------------------------------------ */

static void test_https11_one_handshake_per_connection(void) {
    seen s = run_rounds(&h1, 10, 4);
    CHECK_EQ(s.failed, 0);
    CHECK_EQ(s.http_version, 11);
    CHECK_STR(s.server_http, "HTTP/1.1");
    CHECK_EQ(s.handshakes, s.accepted);           /* every connection: one TLS handshake */
    CHECK_EQ(s.client_connections, s.accepted);   /* the client's count is nginx's */
    CHECK(s.accepted >= 1 && s.accepted <= 4);    /* kept alive: never more than in flight */
    CHECK_EQ(s.pool.opened, s.accepted);          /* the pool's figures agree */
    CHECK_EQ(s.pool.reused, 40 - s.accepted);
    CHECK_EQ(s.pool.open, s.accepted);
    CHECK_EQ(s.pool.in_use, 0);
}

static void test_h2_requests_share_one_connection(void) {
    seen s = run_rounds(&h2, 10, 8);
    CHECK_EQ(s.failed, 0);
    CHECK_EQ(s.http_version, 20);
    CHECK_STR(s.server_http, "HTTP/2.0");
    CHECK_EQ(s.handshakes, s.accepted);
    CHECK_EQ(s.client_connections, s.accepted);
    CHECK_EQ(s.accepted, 1); /* the first round waited for ALPN and multiplexed */
    CHECK_EQ(s.pool.opened, 1);
    CHECK_EQ(s.pool.reused, 79); /* every stream but the first, on the one connection */
    CHECK_EQ(s.pool.open, 1);
    CHECK_EQ(s.pool.idle, 1);
}

int main(int argc, char **argv) {
    static const th_test tests[] = {T(test_https11_one_handshake_per_connection),
                                    T(test_h2_requests_share_one_connection)};
    int rc = th_tls_nginx(&h1, 0);
    if (rc == 0) rc = th_tls_nginx(&h2, 1);
    if (rc == 77) {
        printf("SKIPPED: nginx is not installed (scripts/setup installs it); the connection tests need it\n");
        return 77;
    }
    if (rc != 0) {
        printf("FAILED: nginx with the TLS fixture (scripts/tls-fixture) did not start; see %s and %s\n", h1.dir, h2.dir);
        return 1;
    }
    return th_run(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
