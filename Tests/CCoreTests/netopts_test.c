/*
 * netopts_test.c — names, addresses and sockets (CCore/http/netopts.c): resolve and connect_to per
 * engine and per request (the request's replacing the engine's, and never seen by other
 * requests), DNS-over-HTTPS, the IP version, the settings' checks, the remote address in the
 * metrics, and requests over a Unix-domain socket (a relay the test makes, in front of the loopback
 * test server), the URL's host kept for the Host field, the pool's figures counting its connection.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int port(void) { return cts_server_port(th_server()); }

/* GET url on e (with the request's settings made by `tweak`, may be NULL): the code, and the
 * response in *out (NULL allowed: freed). */
static int get(courier_engine *e, const char *url, void (*tweak)(courier_request *r), courier_response **out) {
    courier_request *r = NULL;
    courier_response *resp = NULL;
    courier_error err;
    if (courier_request_new(&r, "GET", url) != COURIER_OK) return -1000;
    if (tweak) tweak(r);
    int rc = courier_send_sync(&resp, e, r, &err);
    courier_request_free(r);
    if (out) *out = resp;
    else courier_response_free(resp);
    return rc;
}

static const char *body_of(const courier_response *r) {
    size_t len = 0;
    return r ? (const char *)courier_response_body(r, &len) : NULL;
}

static const char *url_for(const char *host, int p, const char *path) {
    static char buf[4][256];
    static int i;
    char *b = buf[i++ % 4];
    if (p) snprintf(b, 256, "http://%s:%d%s", host, p, path);
    else snprintf(b, 256, "http://%s%s", host, path);
    return b;
}

/* The Host field the test server saw, as its /echo JSON writes it. */
static const char *host_field(const char *host, int p) {
    static char buf[256];
    if (p) snprintf(buf, sizeof buf, "[\"Host\",\"%s:%d\"]", host, p);
    else snprintf(buf, sizeof buf, "[\"Host\",\"%s\"]", host);
    return buf;
}

/* ---- resolve ------------------------------------------------------------------------------------ */

static void engine_resolves_api_test(courier_config *c) {
    CHECK_EQ(courier_config_add_resolve(c, "api.test", port(), "127.0.0.1"), COURIER_OK);
}

/* A made-up name reaches the loopback server; the Host field is the URL's; the metrics name the
 * address reached, and a second request reuses the connection. */
static void test_engine_resolve_reaches_a_made_up_name(void) {
    courier_engine *e = th_engine(engine_resolves_api_test);
    REQUIRE(e);
    courier_response *r = NULL;
    CHECK_EQ(get(e, url_for("api.test", port(), "/echo"), NULL, &r), COURIER_OK);
    REQUIRE(r);
    CHECK_CONTAINS(body_of(r), host_field("api.test", port()));
    courier_metrics m = {.size = sizeof m};
    CHECK_EQ(courier_response_metrics(&m, r), COURIER_OK);
    CHECK_STR(m.remote_ip, "127.0.0.1");
    CHECK_EQ(m.remote_port, port());
    CHECK_EQ(m.connection_reused, 0);
    courier_response_free(r);
    r = NULL;
    CHECK_EQ(get(e, url_for("api.test", port(), "/echo"), NULL, &r), COURIER_OK);
    REQUIRE(r);
    m.size = sizeof m;
    CHECK_EQ(courier_response_metrics(&m, r), COURIER_OK);
    CHECK_EQ(m.connection_reused, 1);
    CHECK_STR(m.remote_ip, "127.0.0.1");
    courier_response_free(r);
    courier_engine_close(e);
}

/* The metrics struct of 0.2.0 (without the remote address) is still filled, and nothing past it. */
static void test_metrics_of_the_first_size(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_response *r = NULL;
    CHECK_EQ(get(e, th_url("/echo"), NULL, &r), COURIER_OK);
    REQUIRE(r);
    struct {
        courier_metrics m;
    } box;
    memset(&box, 0x5a, sizeof box);
    box.m.size = offsetof(courier_metrics, redirects) + sizeof(int);
    CHECK_EQ(courier_response_metrics(&box.m, r), COURIER_OK);
    CHECK_EQ(box.m.http_version, 11);
    CHECK_EQ((unsigned char)box.m.remote_ip[0], 0x5a); /* past the caller's size: untouched */
    box.m.size = offsetof(courier_metrics, redirects);
    CHECK_EQ(courier_response_metrics(&box.m, r), COURIER_E_INVALID_ARGUMENT);
    courier_response_free(r);
    courier_engine_close(e);
}

static void request_resolves_api_test(courier_request *r) {
    CHECK_EQ(courier_request_add_resolve(r, "api.test", port(), "127.0.0.1"), COURIER_OK);
}

/* A request's resolve entry is its own: the next request for the same name, without one, does not
 * reach the server through it (api.test is a reserved name no resolver knows). */
static void test_request_resolve_is_its_own(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_response *r = NULL;
    CHECK_EQ(get(e, url_for("api.test", port(), "/echo"), request_resolves_api_test, &r), COURIER_OK);
    REQUIRE(r);
    CHECK_CONTAINS(body_of(r), host_field("api.test", port()));
    courier_metrics m = {.size = sizeof m};
    CHECK_EQ(courier_response_metrics(&m, r), COURIER_OK);
    CHECK_STR(m.remote_ip, "127.0.0.1");
    courier_response_free(r);
    CHECK_EQ(get(e, url_for("api.test", port(), "/echo"), NULL, NULL), COURIER_E_CANNOT_RESOLVE);
    /* And again with the entry: a request's own connection, not the one the plain request missed. */
    CHECK_EQ(get(e, url_for("api.test", port(), "/echo"), request_resolves_api_test, NULL), COURIER_OK);
    /* The entry holds for the redirect's next hop too (same name). */
    r = NULL;
    CHECK_EQ(get(e, url_for("api.test", port(), "/redirect?to=/echo/next"), request_resolves_api_test, &r), COURIER_OK);
    if (r) CHECK_CONTAINS(body_of(r), "\"path\":\"/echo/next\"");
    courier_response_free(r);
    courier_engine_close(e);
}

static int dead_port;

static void engine_sends_api_test_nowhere(courier_config *c) {
    CHECK_EQ(courier_config_add_connect_to(c, "api.test", port(), "127.0.0.1", dead_port), COURIER_OK);
}

/* A request's resolve entry comes before the engine's connect_to; requests without one keep the
 * engine's. */
static void test_request_resolve_overrides_the_engine(void) {
    dead_port = th_free_port();
    courier_engine *e = th_engine(engine_sends_api_test_nowhere);
    REQUIRE(e);
    CHECK_EQ(get(e, url_for("api.test", port(), "/echo"), NULL, NULL), COURIER_E_CANNOT_CONNECT);
    courier_response *r = NULL;
    CHECK_EQ(get(e, url_for("api.test", port(), "/echo"), request_resolves_api_test, &r), COURIER_OK);
    CHECK_CONTAINS(body_of(r), host_field("api.test", port()));
    courier_response_free(r);
    CHECK_EQ(get(e, url_for("api.test", port(), "/echo"), NULL, NULL), COURIER_E_CANNOT_CONNECT);
    courier_engine_close(e);
}

/* ---- connect_to --------------------------------------------------------------------------------- */

static void engine_connects_api_test_80(courier_config *c) {
    CHECK_EQ(courier_config_add_connect_to(c, "api.test", 80, "127.0.0.1", port()), COURIER_OK);
}

/* http://api.test/ (port 80) reaches the loopback server's port; Host stays "api.test". */
static void test_engine_connect_to(void) {
    courier_engine *e = th_engine(engine_connects_api_test_80);
    REQUIRE(e);
    courier_response *r = NULL;
    CHECK_EQ(get(e, url_for("api.test", 0, "/echo"), NULL, &r), COURIER_OK);
    REQUIRE(r);
    CHECK_CONTAINS(body_of(r), host_field("api.test", 0));
    courier_metrics m = {.size = sizeof m};
    CHECK_EQ(courier_response_metrics(&m, r), COURIER_OK);
    CHECK_EQ(m.remote_port, port());
    courier_response_free(r);
    courier_engine_close(e);
}

static void engine_connects_api_test_80_nowhere(courier_config *c) {
    CHECK_EQ(courier_config_add_connect_to(c, "api.test", 80, "127.0.0.1", dead_port), COURIER_OK);
}

static void request_connects_api_test_80(courier_request *r) {
    CHECK_EQ(courier_request_add_connect_to(r, "api.test", 80, "127.0.0.1", port()), COURIER_OK);
}

/* A request's connect_to replaces the engine's for it alone. */
static void test_request_connect_to_overrides_the_engine(void) {
    dead_port = th_free_port();
    courier_engine *e = th_engine(engine_connects_api_test_80_nowhere);
    REQUIRE(e);
    CHECK_EQ(get(e, url_for("api.test", 0, "/echo"), NULL, NULL), COURIER_E_CANNOT_CONNECT);
    courier_response *r = NULL;
    int rc = get(e, url_for("api.test", 0, "/echo"), request_connects_api_test_80, &r);
    CHECK_EQ(rc, COURIER_OK);
    if (r) CHECK_CONTAINS(body_of(r), host_field("api.test", 0));
    courier_response_free(r);
    CHECK_EQ(get(e, url_for("api.test", 0, "/echo"), NULL, NULL), COURIER_E_CANNOT_CONNECT);
    courier_engine_close(e);
}

/* ---- DNS-over-HTTPS, IP version ------------------------------------------------------------------- */

static void engine_uses_a_dead_doh(courier_config *c) {
    char url[64];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/dns-query", dead_port);
    CHECK_EQ(courier_config_set_doh_url(c, url), COURIER_OK);
    CHECK_EQ(courier_config_set_dns_cache_lifetime_ms(c, 0), COURIER_OK);
}

/* With a DoH server that is not there, the machine's own name (which the system resolves, from
 * /etc/hosts here) cannot be resolved; an address in the URL needs no resolving. (libcurl answers
 * "localhost" itself, so that name would not show it.) */
static void test_doh_url_is_used(void) {
    char name[256] = "";
    struct addrinfo *ai = NULL, hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    gethostname(name, sizeof name - 1);
    int system_resolves = name[0] && getaddrinfo(name, NULL, &hints, &ai) == 0;
    if (ai) freeaddrinfo(ai);
    dead_port = th_free_port();
    courier_engine *e = th_engine(engine_uses_a_dead_doh);
    REQUIRE(e);
    if (system_resolves) CHECK_EQ(get(e, url_for(name, port(), "/echo"), NULL, NULL), COURIER_E_CANNOT_RESOLVE);
    else fprintf(stderr, "  (the system does not resolve its own name '%s': that half skipped)\n", name);
    CHECK_EQ(get(e, th_url("/echo"), NULL, NULL), COURIER_OK);
    courier_engine_close(e);
}

static void engine_v6_only(courier_config *c) {
    CHECK_EQ(courier_config_set_ip_version(c, COURIER_IP_V6), COURIER_OK);
    CHECK_EQ(courier_config_add_resolve(c, "api.test", port(), "127.0.0.1"), COURIER_OK);
}

static void engine_v4_only(courier_config *c) {
    CHECK_EQ(courier_config_set_ip_version(c, COURIER_IP_V4), COURIER_OK);
    CHECK_EQ(courier_config_set_happy_eyeballs_delay_ms(c, 50), COURIER_OK);
    CHECK_EQ(courier_config_set_dns_cache_lifetime_ms(c, -1), COURIER_OK);
    CHECK_EQ(courier_config_add_resolve(c, "api.test", port(), "::1,127.0.0.1"), COURIER_OK);
}

/* IPv6 only: the name's one IPv4 address is not used. IPv4 only: the IPv4 one of two is. */
static void test_ip_version(void) {
    courier_engine *e = th_engine(engine_v6_only);
    REQUIRE(e);
    CHECK_EQ(get(e, url_for("api.test", port(), "/echo"), NULL, NULL), COURIER_E_CANNOT_RESOLVE);
    courier_engine_close(e);
    e = th_engine(engine_v4_only);
    REQUIRE(e);
    courier_response *r = NULL;
    CHECK_EQ(get(e, url_for("api.test", port(), "/echo"), NULL, &r), COURIER_OK);
    courier_metrics m = {.size = sizeof m};
    if (r) CHECK_EQ(courier_response_metrics(&m, r), COURIER_OK);
    CHECK_STR(m.remote_ip, "127.0.0.1");
    courier_response_free(r);
    courier_engine_close(e);
}

/* ---- checks ------------------------------------------------------------------------------------ */

static void test_settings_are_checked(void) {
    courier_config *c = NULL;
    courier_request *r = NULL;
    REQUIRE(courier_config_new(&c) == COURIER_OK);
    REQUIRE(courier_request_new(&r, "GET", "/") == COURIER_OK);
    CHECK_EQ(courier_config_add_resolve(NULL, "a.test", 80, "127.0.0.1"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_resolve(c, "", 80, "127.0.0.1"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_resolve(c, NULL, 80, "127.0.0.1"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_resolve(c, "a.test:1", 80, "127.0.0.1"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_resolve(c, "a test", 80, "127.0.0.1"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_resolve(c, "a.test", 0, "127.0.0.1"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_resolve(c, "a.test", 65536, "127.0.0.1"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_resolve(c, "a.test", 80, "localhost"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_resolve(c, "a.test", 80, "127.0.0.1,"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_resolve(c, "a.test", 80, ""), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_resolve(c, "a.test", 80, "127.0.0.1,::1,[::2]"), COURIER_OK);
    CHECK_EQ(courier_config_add_resolve(c, "[::1]", 80, "127.0.0.1"), COURIER_OK);
    CHECK_EQ(courier_config_add_resolve(c, "[nope]", 80, "127.0.0.1"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_add_resolve(NULL, "a.test", 80, "127.0.0.1"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_add_resolve(r, "a.test", 80, "nope"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_connect_to(c, "a.test", 80, "", 81), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_connect_to(c, "a.test", 80, "b.test", 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_connect_to(c, "a.test", -1, "b.test", 81), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_connect_to(c, "a.test", 80, "b:test", 81), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_add_connect_to(c, "a.test", 80, "::1", 81), COURIER_OK);
    CHECK_EQ(courier_request_add_connect_to(r, "a.test", 80, "b.test", 81), COURIER_OK);
    CHECK_EQ(courier_request_add_connect_to(NULL, "a.test", 80, "b.test", 81), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_doh_url(c, "http://127.0.0.1/dns-query"), COURIER_E_INVALID_URL);
    CHECK_EQ(courier_config_set_doh_url(c, "https://"), COURIER_E_INVALID_URL);
    CHECK_EQ(courier_config_set_doh_url(c, "https://127.0.0.1/dns-query"), COURIER_OK);
    CHECK_EQ(courier_config_set_doh_url(c, NULL), COURIER_OK);
    CHECK_EQ(courier_config_set_doh_url(NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_dns_cache_lifetime_ms(c, -2), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_dns_cache_lifetime_ms(c, INT64_MAX), COURIER_OK);
    CHECK_EQ(courier_config_set_ip_version(c, (courier_ip_version)5), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_ip_version(c, COURIER_IP_ANY), COURIER_OK);
    CHECK_EQ(courier_config_set_happy_eyeballs_delay_ms(c, -1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_happy_eyeballs_delay_ms(NULL, 1), COURIER_E_INVALID_ARGUMENT);
    char longpath[200];
    memset(longpath, 'a', sizeof longpath - 1);
    longpath[sizeof longpath - 1] = 0;
    CHECK_EQ(courier_config_set_unix_socket(c, longpath), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_unix_socket(c, "@"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_unix_socket(c, "/tmp/x.sock"), COURIER_OK);
    CHECK_EQ(courier_request_set_unix_socket(r, ""), COURIER_OK);
    CHECK_EQ(courier_request_set_unix_socket(NULL, "/tmp/x.sock"), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
    courier_config_free(c);
}

/* ---- Unix-domain sockets -------------------------------------------------------------------------- */

/* A relay on a Unix socket (a path, or an abstract name after '@') to the loopback server: each
 * connection accepted is joined to a new TCP connection to the server, bytes copied both ways. */
typedef struct relay {
    int fd;
    pthread_t thread;
    int connections;
    pthread_mutex_t m;
} relay;

typedef struct pipe_pair {
    int a, b;
} pipe_pair;

static void *pump(void *arg) {
    pipe_pair *p = arg;
    struct pollfd fds[2] = {{.fd = p->a, .events = POLLIN}, {.fd = p->b, .events = POLLIN}};
    char buf[16384];
    for (;;) {
        if (poll(fds, 2, -1) < 0 && errno != EINTR) break;
        int done = 0;
        for (int i = 0; i < 2 && !done; i++) {
            if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n <= 0 || write(fds[1 - i].fd, buf, (size_t)n) != n) done = 1;
        }
        if (done) break;
    }
    close(p->a);
    close(p->b);
    free(p);
    return NULL;
}

static void *relay_accept(void *arg) {
    relay *r = arg;
    for (;;) {
        int c = accept(r->fd, NULL, NULL);
        if (c < 0) {
            if (errno == EINTR) continue;
            return NULL; /* shut down */
        }
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port())};
        a.sin_addr.s_addr = htonl(0x7f000001);
        pipe_pair *p = malloc(sizeof *p);
        if (s < 0 || !p || connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
            close(c);
            if (s >= 0) close(s);
            free(p);
            continue;
        }
        pthread_mutex_lock(&r->m);
        r->connections++;
        pthread_mutex_unlock(&r->m);
        p->a = c;
        p->b = s;
        pthread_t t;
        if (pthread_create(&t, NULL, pump, p) == 0) pthread_detach(t);
        else pump(p);
    }
}

/* Listens at path ("@name": abstract). 0 on success. */
static int relay_start(relay *r, const char *path) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->m, NULL);
    r->fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    socklen_t len;
    if (path[0] == '@') {
        size_t n = strlen(path + 1);
        memcpy(a.sun_path + 1, path + 1, n); /* sun_path[0] 0: abstract */
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    } else {
        snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
        len = sizeof a;
    }
    if (r->fd < 0 || bind(r->fd, (struct sockaddr *)&a, len) != 0 || listen(r->fd, 16) != 0) return -1;
    return pthread_create(&r->thread, NULL, relay_accept, r);
}

static int relay_connections(relay *r) {
    pthread_mutex_lock(&r->m);
    int n = r->connections;
    pthread_mutex_unlock(&r->m);
    return n;
}

static void relay_stop(relay *r) {
    shutdown(r->fd, SHUT_RDWR);
    pthread_join(r->thread, NULL);
    close(r->fd);
    pthread_mutex_destroy(&r->m);
}

static char socket_path[200];

static void engine_over_the_socket(courier_config *c) {
    CHECK_EQ(courier_config_set_unix_socket(c, socket_path), COURIER_OK);
}

static void request_over_tcp(courier_request *r) { CHECK_EQ(courier_request_set_unix_socket(r, ""), COURIER_OK); }

/* An engine over a socket path: the URL's host (a name nobody resolves) is the Host field; the
 * connection is the relay's; a request may go over TCP instead. */
static void test_engine_over_a_unix_socket(void) {
    snprintf(socket_path, sizeof socket_path, "%s/api.sock", th_tmpdir());
    relay rl;
    REQUIRE(relay_start(&rl, socket_path) == 0);
    courier_engine *e = th_engine(engine_over_the_socket);
    REQUIRE(e);
    courier_response *r = NULL;
    CHECK_EQ(get(e, "http://docker.test/echo", NULL, &r), COURIER_OK);
    REQUIRE(r);
    CHECK_CONTAINS(body_of(r), host_field("docker.test", 0));
    courier_metrics m = {.size = sizeof m};
    CHECK_EQ(courier_response_metrics(&m, r), COURIER_OK);
    CHECK_EQ(m.connection_reused, 0);
    CHECK_STR(m.remote_ip, ""); /* no IP address on a Unix socket */
    CHECK_EQ(m.remote_port, 0);
    courier_response_free(r);
    CHECK_EQ(relay_connections(&rl), 1);
    CHECK_EQ(get(e, "http://docker.test/echo", NULL, NULL), COURIER_OK);
    CHECK_EQ(relay_connections(&rl), 1); /* the socket's connection reused */
    /* Over TCP for one request: the loopback server directly, not the relay. */
    CHECK_EQ(get(e, th_url("/echo"), request_over_tcp, NULL), COURIER_OK);
    CHECK_EQ(relay_connections(&rl), 1);
    /* The pool's figures (pool.c) count the socket's connection as the relay does, under the URL's
     * host, apart from the TCP one. */
    courier_pool_figures *f = NULL;
    CHECK_EQ(courier_pool_get_figures(&f, e), COURIER_OK);
    REQUIRE(f);
    CHECK_EQ(courier_pool_figures_count(f), 2);
    courier_pool_host h = {.size = sizeof h};
    CHECK_EQ(courier_pool_figures_at(&h, f, 0), COURIER_OK);
    CHECK_STR(h.host, "http://docker.test:80");
    CHECK_EQ(h.opened, 1);
    CHECK_EQ(h.reused, 1);
    CHECK_EQ(h.open, 1);
    CHECK_EQ(h.idle, 1);
    CHECK_EQ(courier_pool_figures_total(&h, f), COURIER_OK);
    CHECK_EQ(h.opened, 2);
    CHECK_EQ(h.open, 2);
    courier_pool_figures_free(f);
    courier_engine_close(e);
    relay_stop(&rl);
}

static void request_over_the_socket(courier_request *r) {
    CHECK_EQ(courier_request_set_unix_socket(r, socket_path), COURIER_OK);
}

/* One request over a socket (here an abstract one), on an engine over TCP: its connection is never
 * reused by the engine's TCP requests to the same URL, nor the other way round. */
static void test_request_over_an_abstract_socket(void) {
    snprintf(socket_path, sizeof socket_path, "@courier-netopts-%d", (int)getpid());
    relay rl;
    REQUIRE(relay_start(&rl, socket_path) == 0);
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_response *r = NULL;
    CHECK_EQ(get(e, th_url("/echo"), NULL, NULL), COURIER_OK);
    CHECK_EQ(relay_connections(&rl), 0);
    CHECK_EQ(get(e, th_url("/echo"), request_over_the_socket, &r), COURIER_OK);
    CHECK_EQ(relay_connections(&rl), 1);
    if (r) CHECK_CONTAINS(body_of(r), host_field("127.0.0.1", port()));
    courier_response_free(r);
    CHECK_EQ(get(e, th_url("/echo"), NULL, NULL), COURIER_OK);
    CHECK_EQ(relay_connections(&rl), 1);
    CHECK_EQ(get(e, th_url("/echo"), request_over_the_socket, NULL), COURIER_OK);
    courier_engine_close(e);
    relay_stop(&rl);
}

/* No one at the path: the send fails as a connection that cannot be made. */
static void test_missing_socket_cannot_connect(void) {
    snprintf(socket_path, sizeof socket_path, "%s/nobody.sock", th_tmpdir());
    courier_engine *e = th_engine(engine_over_the_socket);
    REQUIRE(e);
    CHECK_EQ(get(e, "http://docker.test/echo", NULL, NULL), COURIER_E_CANNOT_CONNECT);
    courier_engine_close(e);
}


/* ---- the pool's limits ----------------------------------------------------------------------------- */

/* The loopback server's connections so far (its /count, this request's included). */
static long server_connections(courier_engine *e) {
    courier_response *r = NULL;
    long n = -1;
    if (get(e, th_url("/count"), NULL, &r) == COURIER_OK) {
        const char *b = body_of(r), *at = b ? strstr(b, "\"connections\":") : NULL;
        if (at) n = atol(at + 14);
    }
    courier_response_free(r);
    return n;
}

static int pool_idle;

static void engine_pool(courier_config *c) {
    CHECK_EQ(courier_config_add_resolve(c, "other.test", port(), "127.0.0.1"), COURIER_OK);
    if (pool_idle) CHECK_EQ(courier_config_set_max_idle_connections(c, pool_idle), COURIER_OK);
}

/* Two origins on one server, each asked twice: with the default both connections stay open (one
 * new connection after the first); with one idle connection kept, putting the second back closes
 * one of the two (which one, libcurl decides by last use, in milliseconds: either may go), so at
 * least one more is made. */
static void test_max_idle_connections(void) {
    for (pool_idle = 0; pool_idle <= 1; pool_idle++) {
        courier_engine *e = th_engine(engine_pool);
        REQUIRE(e);
        long before = server_connections(e); /* opens the 127.0.0.1 connection */
        CHECK_EQ(get(e, url_for("other.test", port(), "/echo"), NULL, NULL), COURIER_OK); /* a second one */
        CHECK_EQ(get(e, url_for("other.test", port(), "/echo"), NULL, NULL), COURIER_OK);
        long after = server_connections(e); /* 127.0.0.1 again */
        if (pool_idle) CHECK(after - before >= 2);
        else CHECK_EQ(after - before, 1);
        courier_engine_close(e);
    }
    courier_config *c = NULL;
    REQUIRE(courier_config_new(&c) == COURIER_OK);
    CHECK_EQ(courier_config_set_max_idle_connections(c, 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_max_idle_connections(NULL, 1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_idle_connection_timeout_ms(c, -1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_idle_connection_timeout_ms(c, INT64_MAX), COURIER_OK);
    courier_config_free(c);
}

static void engine_short_idle(courier_config *c) {
    CHECK_EQ(courier_config_set_idle_connection_timeout_ms(c, 1), COURIER_OK); /* one second */
}

/* A connection idle past the idle timeout is not reused: after waiting for the (one-second) timeout
 * to pass, the next request opens a new connection. */
static void test_idle_connection_timeout(void) {
    courier_engine *e = th_engine(engine_short_idle);
    REQUIRE(e);
    long before = server_connections(e);
    usleep(2100 * 1000); /* past the timeout (libcurl counts whole seconds) */
    long after = server_connections(e);
    CHECK_EQ(after - before, 1);
    courier_engine_close(e);
}

TESTS_MAIN(T(test_engine_resolve_reaches_a_made_up_name), T(test_metrics_of_the_first_size),
           T(test_request_resolve_is_its_own), T(test_request_resolve_overrides_the_engine),
           T(test_engine_connect_to), T(test_request_connect_to_overrides_the_engine), T(test_doh_url_is_used),
           T(test_ip_version), T(test_settings_are_checked), T(test_engine_over_a_unix_socket),
           T(test_request_over_an_abstract_socket), T(test_missing_socket_cannot_connect),
           T(test_max_idle_connections), T(test_idle_connection_timeout))
