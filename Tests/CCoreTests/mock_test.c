/*
 * mock_test.c — mock answers (bytes, file, status and headers, error, delay, callback) judged like
 * real ones, the mock switch, and a custom transport speaking a small private TCP protocol to a
 * peer this test runs.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static courier_request *req(const char *method, const char *path) {
    courier_request *r = NULL;
    courier_request_new(&r, method, path);
    return r;
}

static int send_sync(courier_engine *e, courier_request *r, courier_response **out) {
    int rc = courier_send_sync(out, e, r, NULL);
    courier_request_free(r);
    return rc;
}

static void tweak_mock_on(courier_config *c) { courier_config_set_mock_enabled(c, 1); }

static void test_mock_switch(void) {
    courier_engine *e = th_engine(NULL); /* off by default */
    REQUIRE(e);
    long before = cts_server_path_count(th_server(), "/json");
    courier_request *r = req("GET", "/json");
    CHECK_EQ(courier_request_set_mock_response(r, 201, "mocked", 6, "text/plain"), COURIER_OK);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 200); /* the real server answered */
    CHECK_EQ(cts_server_path_count(th_server(), "/json") - before, 1);
    courier_response_free(resp);
    CHECK_EQ(courier_engine_mock_enabled(e), 0);
    CHECK_EQ(courier_engine_set_mock_enabled(e, 1), COURIER_OK);
    CHECK_EQ(courier_engine_mock_enabled(e), 1);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 201);
    CHECK_STR((const char *)courier_response_body(resp, NULL), "mocked");
    CHECK_STR(courier_response_header(resp, "Content-Type"), "text/plain");
    CHECK_STR(courier_response_url(resp), th_url("/json"));
    CHECK_STR(courier_response_method(resp), "GET");
    CHECK_EQ(cts_server_path_count(th_server(), "/json") - before, 1); /* no network */
    courier_response_free(resp);
    CHECK_EQ(courier_engine_set_mock_enabled(e, 0), COURIER_OK);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 200);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_mock_file_status_headers_error(void) {
    courier_engine *e = th_engine(tweak_mock_on);
    REQUIRE(e);
    char path[600];
    snprintf(path, sizeof path, "%s/GET_users_1.json", th_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("{\"id\":1,\"name\":\"Ada\"}", f);
    fclose(f);
    courier_request *r = req("GET", "/users/1");
    CHECK_EQ(courier_request_set_mock_file(r, path), COURIER_OK);
    CHECK_EQ(courier_request_add_mock_header(r, "X-Mock", "1"), COURIER_OK);
    CHECK_EQ(courier_request_add_mock_header(r, "X-Bad", "a\r\nb"), COURIER_E_INVALID_HEADER);
    courier_response *resp = NULL;
    CHECK_EQ(send_sync(e, r, &resp), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 200);
    CHECK_STR((const char *)courier_response_body(resp, NULL), "{\"id\":1,\"name\":\"Ada\"}");
    CHECK_STR(courier_response_header(resp, "content-type"), "application/json");
    CHECK_STR(courier_response_header(resp, "X-Mock"), "1");
    courier_response_free(resp);

    r = req("GET", "/users/2");
    snprintf(path, sizeof path, "%s/missing.json", th_tmpdir());
    CHECK_EQ(courier_request_set_mock_file(r, path), COURIER_OK);
    courier_error err;
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_NOT_FOUND);
    CHECK(resp == NULL);
    courier_request_free(r);

    /* A mocked status >= 400 is an HTTP error like a real one, response attached. */
    r = req("GET", "/users/3");
    courier_request_set_mock_response(r, 404, "{\"error\":\"no\"}", 14, "application/json");
    CHECK_EQ(send_sync(e, r, &resp), COURIER_E_HTTP_STATUS);
    CHECK_EQ(courier_response_status(resp), 404);
    courier_response_free(resp);

    /* A mocked failure. */
    r = req("GET", "/users/4");
    CHECK_EQ(courier_request_set_mock_error(r, COURIER_E_CANNOT_CONNECT), COURIER_OK);
    CHECK_EQ(courier_request_set_mock_error(r, 3), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_E_CANNOT_CONNECT);
    CHECK_EQ(err.code, COURIER_E_CANNOT_CONNECT);
    CHECK(resp == NULL);
    courier_request_free(r);
    courier_engine_close(e);
}

static int reject_mocked(const courier_response *resp, void *user) {
    (void)user;
    return strcmp((const char *)courier_response_body(resp, NULL), "bad") != 0;
}

static void test_mock_is_judged_like_real(void) {
    courier_engine *e = th_engine(tweak_mock_on);
    REQUIRE(e);
    courier_request *r = req("GET", "/v");
    courier_request_set_validator(r, reject_mocked, NULL, NULL);
    courier_request_set_mock_response(r, 200, "bad", 3, NULL);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_INVALID_RESULT);
    CHECK(resp != NULL);
    courier_response_free(resp);
    courier_request_set_mock_response(r, 200, "good", 4, NULL);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
}

typedef struct order_rec {
    atomic_int done;
    atomic_int seq;
} order_rec;
static atomic_int order_counter;
static void order_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)code;
    (void)err;
    order_rec *o = user;
    courier_response_free(resp);
    atomic_store(&o->seq, atomic_fetch_add(&order_counter, 1));
    atomic_store(&o->done, 1);
}

static void test_mock_delay_does_not_block(void) {
    courier_engine *e = th_engine(tweak_mock_on);
    REQUIRE(e);
    order_rec slow = {0}, fast = {0};
    courier_request *r = req("GET", "/slow");
    courier_request_set_mock_response(r, 200, "late", 4, NULL);
    CHECK_EQ(courier_request_set_mock_delay_ms(r, 400), COURIER_OK);
    CHECK_EQ(courier_send(NULL, e, r, order_done, &slow, NULL), COURIER_OK);
    courier_request_free(r);
    r = req("GET", "/json"); /* real, while the mock waits */
    CHECK_EQ(courier_send(NULL, e, r, order_done, &fast, NULL), COURIER_OK);
    courier_request_free(r);
    int64_t deadline = th_now_ms() + 10000;
    while (!atomic_load(&slow.done) && th_now_ms() < deadline) usleep(2000);
    CHECK(atomic_load(&fast.done));
    CHECK(atomic_load(&fast.seq) < atomic_load(&slow.seq));
    /* A delayed mock can be cancelled. */
    order_rec c = {0};
    uint64_t id = 0;
    r = req("GET", "/slow2");
    courier_request_set_mock_response(r, 200, "x", 1, NULL);
    courier_request_set_mock_delay_ms(r, 60000);
    CHECK_EQ(courier_send(&id, e, r, order_done, &c, NULL), COURIER_OK);
    courier_request_free(r);
    CHECK_EQ(courier_cancel(e, id), COURIER_OK);
    deadline = th_now_ms() + 10000;
    while (!atomic_load(&c.done) && th_now_ms() < deadline) usleep(2000);
    CHECK(atomic_load(&c.done));
    courier_engine_close(e);
}

static uint64_t mock_saw_id;
static int echo_mock(const courier_outgoing *o, courier_response **out, void *user) {
    int *calls = user;
    (*calls)++;
    mock_saw_id = courier_outgoing_request_id(o);
    int rc = courier_response_new(out, 200);
    if (rc) return rc;
    char body[512];
    snprintf(body, sizeof body, "%s %s %s", courier_outgoing_method(o), courier_outgoing_url(o),
             courier_outgoing_header(o, "X-Who") ? courier_outgoing_header(o, "X-Who") : "-");
    return courier_response_set_body(*out, body, strlen(body));
}
static int failing_mock(const courier_outgoing *o, courier_response **out, void *user) {
    (void)o;
    (void)out;
    (void)user;
    return COURIER_E_TIMEOUT;
}

static void test_mock_callback(void) {
    courier_engine *e = th_engine(tweak_mock_on);
    REQUIRE(e);
    int calls = 0;
    courier_request *r = req("POST", "/things?x=1");
    courier_request_add_header(r, "X-Who", "me");
    CHECK_EQ(courier_request_set_mock_callback(r, echo_mock, &calls, NULL), COURIER_OK);
    courier_response *resp = NULL;
    CHECK_EQ(send_sync(e, r, &resp), COURIER_OK);
    CHECK(mock_saw_id != 0);
    CHECK_EQ(mock_saw_id, courier_response_request_id(resp)); /* the callback knows which send */
    char want[256];
    snprintf(want, sizeof want, "POST %s me", th_url("/things?x=1"));
    CHECK_STR((const char *)courier_response_body(resp, NULL), want);
    CHECK_EQ(calls, 1);
    courier_response_free(resp);
    r = req("GET", "/t");
    courier_request_set_mock_callback(r, failing_mock, NULL, NULL);
    CHECK_EQ(send_sync(e, r, &resp), COURIER_E_TIMEOUT);
    CHECK(resp == NULL);
    courier_engine_close(e);
}

/* ---- a custom transport over a private TCP protocol --------------------------------------------
 * Request:  "<METHOD> <URL> <BODYLEN>\n<BODY>"
 * Response: "<STATUS> <BODYLEN>\n<BODY>", where BODY = "peer saw <METHOD> <URL> <body>". */

typedef struct peer {
    int fd;
    int port;
    pthread_t thread;
    atomic_int served;
} peer;

static int read_line(int fd, char *buf, size_t cap) {
    size_t n = 0;
    while (n + 1 < cap) {
        char c;
        if (read(fd, &c, 1) != 1) return -1;
        if (c == '\n') break;
        buf[n++] = c;
    }
    buf[n] = 0;
    return (int)n;
}

static void *peer_main(void *arg) {
    peer *p = arg;
    for (;;) {
        int c = accept(p->fd, NULL, NULL);
        if (c < 0) return NULL;
        char line[1024], method[32], url[900];
        size_t len = 0;
        if (read_line(c, line, sizeof line) > 0 && sscanf(line, "%31s %899s %zu", method, url, &len) == 3 &&
            len < 4096) {
            char body[4096];
            size_t got = 0;
            while (got < len) {
                ssize_t k = read(c, body + got, len - got);
                if (k <= 0) break;
                got += (size_t)k;
            }
            body[got] = 0;
            if (strstr(url, "/silent")) { /* never answers: the client must cancel */
                char tmp[16];
                while (read(c, tmp, sizeof tmp) > 0) {}
            } else {
                char out[4096 + 1100];
                char msg[4096 + 1000];
                snprintf(msg, sizeof msg, "peer saw %s %s %s", method, url, body);
                int n = snprintf(out, sizeof out, "%d %zu\n%s", strstr(url, "/missing") ? 404 : 200, strlen(msg), msg);
                atomic_fetch_add(&p->served, 1); /* counted before the answer leaves: the client may
                                                     finish before this thread runs again */
                if (write(c, out, (size_t)n) != n) {}
            }
        }
        close(c);
    }
}

static int peer_start(peer *p) {
    memset(p, 0, sizeof *p);
    p->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(p->fd, (struct sockaddr *)&a, sizeof a) || listen(p->fd, 16)) return -1;
    socklen_t l = sizeof a;
    getsockname(p->fd, (struct sockaddr *)&a, &l);
    p->port = ntohs(a.sin_port);
    return pthread_create(&p->thread, NULL, peer_main, p);
}

static void peer_stop(peer *p) {
    shutdown(p->fd, SHUT_RDWR);
    close(p->fd);
    pthread_join(p->thread, NULL);
}

/* The transport: one thread per call, blocking I/O; cancel shuts the socket down. */
typedef struct tcp_call {
    courier_call *call;
    int port;
    atomic_int fd;
} tcp_call;

static void *tcp_call_main(void *arg) {
    tcp_call *tc = arg;
    courier_call *call = tc->call;
    int fd = atomic_load(&tc->fd);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)tc->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int code = COURIER_OK;
    courier_response *resp = NULL;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        code = COURIER_E_CANNOT_CONNECT;
    } else {
        size_t blen = 0;
        const uint8_t *body = courier_call_body(call, &blen);
        char head[1100];
        int n = snprintf(head, sizeof head, "%s %s %zu\n", courier_call_method(call), courier_call_url(call), blen);
        if (write(fd, head, (size_t)n) != n || (blen && write(fd, body, blen) != (ssize_t)blen)) code = COURIER_E_NETWORK;
        char line[128];
        int status = 0;
        size_t len = 0;
        if (code == COURIER_OK && (read_line(fd, line, sizeof line) <= 0 || sscanf(line, "%d %zu", &status, &len) != 2))
            code = COURIER_E_NETWORK;
        if (code == COURIER_OK && courier_response_new(&resp, status) == COURIER_OK) {
            char *buf = malloc(len + 1);
            size_t got = 0;
            while (buf && got < len) {
                ssize_t k = read(fd, buf + got, len - got);
                if (k <= 0) break;
                got += (size_t)k;
            }
            if (!buf || got != len) code = COURIER_E_PARTIAL_RESPONSE;
            else courier_response_set_body(resp, buf, len);
            courier_response_add_header(resp, "X-Transport", "tcp");
            free(buf);
            if (code != COURIER_OK) {
                courier_response_free(resp);
                resp = NULL;
            }
        }
    }
    close(fd);
    courier_call_complete(call, code, resp, code ? "tcp transport failed" : NULL);
    free(tc);
    return NULL;
}

static atomic_int transport_frees;
static atomic_int cancels_seen;

static int tcp_start(courier_call *call, void *user) {
    peer *p = user;
    if (strstr(courier_call_url(call), "/refuse")) return COURIER_E_INVALID_URL;
    tcp_call *tc = calloc(1, sizeof *tc);
    if (!tc) return COURIER_E_NO_MEMORY;
    tc->call = call;
    tc->port = p->port;
    atomic_init(&tc->fd, socket(AF_INET, SOCK_STREAM, 0));
    /* The call remembers its socket so cancel can reach it. */
    pthread_t th;
    if (pthread_create(&th, NULL, tcp_call_main, tc) != 0) {
        close(atomic_load(&tc->fd));
        free(tc);
        return COURIER_E_INTERNAL;
    }
    pthread_detach(th);
    return COURIER_OK;
}

static int silent_fd = -1;
static void tcp_cancel(courier_call *call, void *user) {
    (void)user;
    (void)call;
    atomic_fetch_add(&cancels_seen, 1);
    if (silent_fd >= 0) shutdown(silent_fd, SHUT_RDWR);
}

static void free_transport_user(void *u) {
    (void)u;
    atomic_fetch_add(&transport_frees, 1);
}

static peer the_peer;

static void tweak_tcp(courier_config *c) {
    courier_transport vt = {sizeof vt, tcp_start, tcp_cancel};
    courier_config_register_transport(c, "tcp", &vt, &the_peer, free_transport_user);
}

static int valid_tcp(const courier_response *r, void *u) {
    (void)u;
    return strstr((const char *)courier_response_body(r, NULL), "peer saw") != NULL;
}

static void test_custom_tcp_transport(void) {
    REQUIRE(peer_start(&the_peer) == 0);
    atomic_store(&transport_frees, 0);
    courier_engine *e = th_engine(tweak_tcp);
    REQUIRE(e);
    courier_request *r = req("POST", "/rpc/echo");
    CHECK_EQ(courier_request_set_transport(r, "tcp"), COURIER_OK);
    courier_request_set_body(r, "hello", 5, "text/plain");
    courier_request_set_validator(r, valid_tcp, NULL, NULL);
    courier_response *resp = NULL;
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    REQUIRE(resp);
    char want[256];
    snprintf(want, sizeof want, "peer saw POST %s hello", th_url("/rpc/echo"));
    CHECK_STR((const char *)courier_response_body(resp, NULL), want);
    CHECK_STR(courier_response_header(resp, "X-Transport"), "tcp");
    CHECK_STR(courier_response_url(resp), th_url("/rpc/echo"));
    courier_response_free(resp);
    courier_request_free(r);
    CHECK_EQ(atomic_load(&the_peer.served), 1);

    /* Its answers are judged like HTTP ones: 404 from the peer is an HTTP error. */
    r = req("GET", "/missing");
    courier_request_set_transport(r, "tcp");
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(courier_response_status(resp), 404);
    courier_response_free(resp);
    courier_request_free(r);

    /* Refused at start; unknown name; retry applies to custom transports too. */
    r = req("GET", "/refuse");
    courier_request_set_transport(r, "tcp");
    CHECK_EQ(courier_send_sync(NULL, e, r, NULL), COURIER_E_INVALID_URL);
    courier_request_free(r);
    r = req("GET", "/x");
    courier_request_set_transport(r, "carrier-pigeon");
    CHECK_EQ(courier_send_sync(NULL, e, r, NULL), COURIER_E_NOT_FOUND);
    courier_request_free(r);
    long served = atomic_load(&the_peer.served);
    r = req("GET", "/missing");
    courier_request_set_transport(r, "tcp");
    courier_request_set_retry(r, 2, 1, 5, 0);
    CHECK_EQ(courier_send_sync(NULL, e, r, NULL), COURIER_E_HTTP_STATUS);
    courier_request_free(r);
    CHECK_EQ(atomic_load(&the_peer.served) - served, 1); /* 404 is not retried */
    courier_engine_close(e);
    CHECK_EQ(atomic_load(&transport_frees), 1);
    peer_stop(&the_peer);
}

/* A transport that completes only when cancelled, from another thread: one state per call. */
typedef struct slow_call {
    courier_call *call;
    atomic_int cancelled;
    struct slow_call *next;
} slow_call;
static pthread_mutex_t slow_lock = PTHREAD_MUTEX_INITIALIZER;
static slow_call *slow_calls;
static atomic_int slow_cancels;
static atomic_int slow_starts;

static void *slow_finisher(void *arg) {
    slow_call *s = arg;
    while (!atomic_load(&s->cancelled)) usleep(1000);
    pthread_mutex_lock(&slow_lock);
    for (slow_call **pp = &slow_calls; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    pthread_mutex_unlock(&slow_lock);
    courier_call_complete(s->call, COURIER_E_CANCELLED, NULL, "stopped");
    free(s);
    return NULL;
}
static int slow_start(courier_call *call, void *user) {
    (void)user;
    slow_call *s = calloc(1, sizeof *s);
    if (!s) return COURIER_E_NO_MEMORY;
    s->call = call;
    pthread_mutex_lock(&slow_lock);
    s->next = slow_calls;
    slow_calls = s;
    pthread_mutex_unlock(&slow_lock);
    pthread_t th;
    pthread_create(&th, NULL, slow_finisher, s);
    pthread_detach(th);
    atomic_fetch_add(&slow_starts, 1);
    return COURIER_OK;
}
static void slow_cancel(courier_call *call, void *user) {
    (void)user;
    atomic_fetch_add(&slow_cancels, 1);
    pthread_mutex_lock(&slow_lock);
    for (slow_call *s = slow_calls; s; s = s->next)
        if (s->call == call) atomic_store(&s->cancelled, 1);
    pthread_mutex_unlock(&slow_lock);
}
static void tweak_slow(courier_config *c) {
    courier_transport vt = {sizeof vt, slow_start, slow_cancel};
    courier_config_register_transport(c, "slow", &vt, NULL, NULL);
    CHECK_EQ(courier_config_register_transport(c, "slow", &vt, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_register_transport(c, "http", &vt, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
}

static void test_custom_transport_cancel_and_close(void) {
    courier_engine *e = th_engine(tweak_slow);
    REQUIRE(e);
    order_rec one = {0};
    uint64_t id = 0;
    courier_request *r = req("GET", "/anything");
    courier_request_set_transport(r, "slow");
    atomic_store(&slow_starts, 0);
    CHECK_EQ(courier_send(&id, e, r, order_done, &one, NULL), COURIER_OK);
    int64_t deadline = th_now_ms() + 10000;
    while (atomic_load(&slow_starts) < 1 && th_now_ms() < deadline) usleep(1000); /* the call started */
    CHECK_EQ(courier_cancel(e, id), COURIER_OK);
    deadline = th_now_ms() + 10000;
    while (!atomic_load(&one.done) && th_now_ms() < deadline) usleep(2000);
    CHECK(atomic_load(&one.done));
    /* Close with a call in flight: close cancels it and waits for the transport to complete it. */
    order_rec two = {0};
    CHECK_EQ(courier_send(&id, e, r, order_done, &two, NULL), COURIER_OK);
    courier_request_free(r);
    deadline = th_now_ms() + 10000;
    while (atomic_load(&slow_starts) < 2 && th_now_ms() < deadline) usleep(1000); /* in flight */
    courier_engine_close(e);
    CHECK(atomic_load(&two.done));
    CHECK_EQ(atomic_load(&slow_cancels), 2);
}

TESTS_MAIN(T(test_mock_switch), T(test_mock_file_status_headers_error), T(test_mock_is_judged_like_real),
           T(test_mock_delay_does_not_block), T(test_mock_callback), T(test_custom_tcp_transport),
           T(test_custom_transport_cancel_and_close))
