/*
 * pool_test.c — the connection pool's figures (CCore/http/pool.c, courier_pool_get_figures) over the
 * loopback test server: sequential requests to one host make one connection and reuse it, two hosts
 * are counted apart, an idle connection past the idle timeout is closed and leaves the counts, a
 * request on the wire keeps its connection in use, a connect that fails counts nowhere.
 */
#include "harness.h"

#include <unistd.h>

static int port(void) { return cts_server_port(th_server()); }

static int get(courier_engine *e, const char *url) {
    courier_request *r = NULL;
    courier_response *resp = NULL;
    if (courier_request_new(&r, "GET", url) != COURIER_OK) return -1000;
    int rc = courier_send_sync(&resp, e, r, NULL);
    courier_request_free(r);
    courier_response_free(resp);
    return rc;
}

static const char *url_for(const char *host, const char *path) {
    static char buf[4][256];
    static int i;
    char *b = buf[i++ % 4];
    snprintf(b, 256, "http://%s:%d%s", host, port(), path);
    return b;
}

/* "http://host:PORT", as the figures name a host. */
static const char *host_key(const char *host) {
    static char buf[2][128];
    static int i;
    char *b = buf[i++ % 2];
    snprintf(b, 128, "http://%s:%d", host, port());
    return b;
}

/* The engine's figures for `host` (NULL: the total) into *out; 1 when the host is listed. Also the
 * number of hosts listed in *count (may be NULL). */
static int figures(courier_engine *e, const char *host, courier_pool_host *out, size_t *count) {
    memset(out, 0, sizeof *out);
    out->size = sizeof *out;
    courier_pool_figures *f = NULL;
    CHECK_EQ(courier_pool_get_figures(&f, e), COURIER_OK);
    if (!f) return 0;
    if (count) *count = courier_pool_figures_count(f);
    int found = 0;
    if (!host) {
        found = courier_pool_figures_total(out, f) == COURIER_OK;
        CHECK(out->host == NULL);
    }
    for (size_t i = 0; host && !found && i < courier_pool_figures_count(f); i++) {
        courier_pool_host h = {.size = sizeof h};
        CHECK_EQ(courier_pool_figures_at(&h, f, i), COURIER_OK);
        if (h.host && strcmp(h.host, host) == 0) {
            *out = h;
            out->host = NULL; /* borrowed from f */
            found = 1;
        }
    }
    courier_pool_figures_free(f);
    return found;
}

static void resolve_other(courier_config *c) {
    CHECK_EQ(courier_config_add_resolve(c, "other.test", port(), "127.0.0.1"), COURIER_OK);
}

/* N sequential requests to one host: one connection made, N-1 sent on it again; it stays open, idle. */
static void test_sequential_requests_reuse_one_connection(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_pool_host h;
    size_t count = 99;
    CHECK(!figures(e, host_key("127.0.0.1"), &h, &count)); /* nothing yet */
    CHECK_EQ(count, 0);
    for (int i = 0; i < 5; i++) CHECK_EQ(get(e, th_url("/echo")), COURIER_OK);
    REQUIRE(figures(e, host_key("127.0.0.1"), &h, &count));
    CHECK_EQ(count, 1);
    CHECK_EQ(h.opened, 1);
    CHECK_EQ(h.reused, 4);
    CHECK_EQ(h.open, 1);
    CHECK_EQ(h.idle, 1);
    CHECK_EQ(h.in_use, 0);
    REQUIRE(figures(e, NULL, &h, NULL));
    CHECK_EQ(h.opened, 1);
    CHECK_EQ(h.reused, 4);
    CHECK_EQ(h.open, 1);
    courier_engine_close(e);
}

/* Two hosts (one server, two names): each has its connection and its counts. */
static void test_two_hosts_are_counted_apart(void) {
    courier_engine *e = th_engine(resolve_other);
    REQUIRE(e);
    for (int i = 0; i < 2; i++) CHECK_EQ(get(e, url_for("127.0.0.1", "/echo")), COURIER_OK);
    for (int i = 0; i < 3; i++) CHECK_EQ(get(e, url_for("other.test", "/echo")), COURIER_OK);
    courier_pool_host h;
    size_t count = 0;
    REQUIRE(figures(e, host_key("127.0.0.1"), &h, &count));
    CHECK_EQ(count, 2);
    CHECK_EQ(h.opened, 1);
    CHECK_EQ(h.reused, 1);
    CHECK_EQ(h.open, 1);
    CHECK_EQ(h.idle, 1);
    REQUIRE(figures(e, host_key("other.test"), &h, NULL));
    CHECK_EQ(h.opened, 1);
    CHECK_EQ(h.reused, 2);
    CHECK_EQ(h.open, 1);
    CHECK_EQ(h.idle, 1);
    REQUIRE(figures(e, NULL, &h, NULL));
    CHECK_EQ(h.opened, 2);
    CHECK_EQ(h.reused, 3);
    CHECK_EQ(h.open, 2);
    CHECK_EQ(h.idle, 2);
    CHECK_EQ(h.in_use, 0);
    courier_engine_close(e);
}

static void short_idle(courier_config *c) {
    resolve_other(c);
    CHECK_EQ(courier_config_set_idle_connection_timeout_ms(c, 1), COURIER_OK); /* one second */
}

/* An idle connection past the idle timeout is closed when the engine next looks for a connection
 * (here another host's): its host's open and idle counts drop to 0, its totals stay. */
static void test_idle_timeout_drops_the_idle_count(void) {
    courier_engine *e = th_engine(short_idle);
    REQUIRE(e);
    CHECK_EQ(get(e, url_for("127.0.0.1", "/echo")), COURIER_OK);
    courier_pool_host h;
    REQUIRE(figures(e, host_key("127.0.0.1"), &h, NULL));
    CHECK_EQ(h.idle, 1);
    usleep(2100 * 1000); /* past the timeout (libcurl counts whole seconds) */
    CHECK_EQ(get(e, url_for("other.test", "/echo")), COURIER_OK);
    REQUIRE(figures(e, host_key("127.0.0.1"), &h, NULL));
    CHECK_EQ(h.open, 0);
    CHECK_EQ(h.idle, 0);
    CHECK_EQ(h.opened, 1);
    REQUIRE(figures(e, NULL, &h, NULL));
    CHECK_EQ(h.open, 1); /* other.test's */
    CHECK_EQ(h.idle, 1);
    CHECK_EQ(h.opened, 2);
    courier_engine_close(e);
}

typedef struct done {
    pthread_mutex_t m;
    pthread_cond_t c;
    int calls, code;
} done;

static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)err;
    done *d = user;
    courier_response_free(resp);
    pthread_mutex_lock(&d->m);
    d->calls++;
    d->code = code;
    pthread_cond_broadcast(&d->c);
    pthread_mutex_unlock(&d->m);
}

/* A request on the wire (the server has it and answers late) keeps its connection in use; answered,
 * the connection is idle. */
static void test_slow_request_is_in_use(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    done d = {.calls = 0};
    pthread_mutex_init(&d.m, NULL);
    pthread_cond_init(&d.c, NULL);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", th_url("/delay/1500")) == COURIER_OK);
    uint64_t id = 0;
    CHECK_EQ(courier_send(&id, e, r, on_done, &d, NULL), COURIER_OK);
    courier_request_free(r);
    CHECK_EQ(th_wait_path("/delay/1500", 1), 1); /* the server has it: it went on a connection */
    courier_pool_host h;
    REQUIRE(figures(e, host_key("127.0.0.1"), &h, NULL));
    CHECK_EQ(h.open, 1);
    CHECK_EQ(h.in_use, 1);
    CHECK_EQ(h.idle, 0);
    CHECK_EQ(h.opened, 1);
    pthread_mutex_lock(&d.m);
    CHECK_EQ(th_wait_count(&d.c, &d.m, &d.calls, 1), 1);
    CHECK_EQ(d.code, COURIER_OK);
    pthread_mutex_unlock(&d.m);
    REQUIRE(figures(e, host_key("127.0.0.1"), &h, NULL));
    CHECK_EQ(h.open, 1);
    CHECK_EQ(h.in_use, 0);
    CHECK_EQ(h.idle, 1);
    courier_engine_close(e);
    pthread_mutex_destroy(&d.m);
    pthread_cond_destroy(&d.c);
}

/* A connect that fails makes no connection and lists no host; the accessors check their arguments. */
static void test_failed_connect_and_arguments(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    int silent_port = 0;
    int fd = th_silent_listener(&silent_port); /* a port, then closed: nothing listens there */
    REQUIRE(fd >= 0);
    close(fd);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", silent_port);
    CHECK_EQ(get(e, url), COURIER_E_CANNOT_CONNECT);
    courier_pool_host h;
    size_t count = 99;
    REQUIRE(figures(e, NULL, &h, &count));
    CHECK_EQ(count, 0);
    CHECK_EQ(h.open, 0);
    CHECK_EQ(h.opened, 0);

    courier_pool_figures *f = NULL;
    CHECK_EQ(courier_pool_get_figures(NULL, e), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_pool_get_figures(&f, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK(f == NULL);
    CHECK_EQ(courier_pool_get_figures(&f, e), COURIER_OK);
    courier_pool_host small = {.size = 4};
    CHECK_EQ(courier_pool_figures_total(&small, f), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_pool_figures_total(NULL, f), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_pool_figures_total(&h, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_pool_figures_at(&h, f, 0), COURIER_E_NOT_FOUND);
    CHECK_EQ(courier_pool_figures_at(&h, NULL, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_pool_figures_count(NULL), 0);
    courier_pool_figures_free(f);
    courier_pool_figures_free(NULL);
    courier_engine_close(e);
}

TESTS_MAIN(T(test_sequential_requests_reuse_one_connection), T(test_two_hosts_are_counted_apart),
           T(test_idle_timeout_drops_the_idle_count), T(test_slow_request_is_in_use),
           T(test_failed_connect_and_arguments))
