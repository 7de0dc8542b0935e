/*
 * ws_test.c — WebSocket clients (courier_ws) against an independent peer: Python's `websockets`
 * (Tests/WebSocket/peer.py, started here; Tests/WebSocket/with-peer.sh provides it and skips the
 * test when it cannot be installed). Echo of text, binary, empty and large messages; fragmented
 * messages; a subprotocol; headers, credentials and cookies in the handshake; the closing
 * handshake both ways; every protocol error a server can make, with the error and the close code
 * the peer received; a message over the maximum; a connection dropped without a close frame; a
 * peer that never answers pings; failed handshakes; sends from several threads; the engine closed
 * under an open WebSocket.
 */
#include "harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int ws_port, raw_port, tls_port, proxy_port;
static char tls_dir[700]; /* scripts/tls-fixture's world (ca.pem, server.pem/.key, server.pin) */
static pid_t peer_pid;
static int peer_stdin = -1;

/* Starts peer.py (before any engine, so no thread is running) and reads its ports. */
static int start_peer(void) {
    const char *py = getenv("COURIER_WS_PYTHON"), *script = getenv("COURIER_WS_PEER");
    if (!py || !script) return -1;
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    char cert[800], key[800];
    snprintf(cert, sizeof cert, "%s/server.pem", tls_dir);
    snprintf(key, sizeof key, "%s/server.key", tls_dir);
    char *argv[] = {(char *)py, (char *)script, tls_dir[0] ? cert : NULL, key, NULL};
    int rc = posix_spawn(&peer_pid, py, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    if (rc != 0) return -1;
    peer_stdin = in[1];
    FILE *f = fdopen(out[0], "r");
    char line[128];
    if (!f || !fgets(line, sizeof line, f) || sscanf(line, "PORTS %d %d %d %d", &ws_port, &raw_port, &tls_port, &proxy_port) != 4) return -1;
    fclose(f);
    return 0;
}

static void stop_peer(void) {
    if (peer_stdin >= 0) close(peer_stdin); /* the peer ends at the end of its stdin */
    if (peer_pid > 0) waitpid(peer_pid, NULL, 0);
}

static const char *ws_url(int port, const char *path) {
    static char buf[8][256];
    static int i;
    char *b = buf[i++ % 8];
    snprintf(b, 256, "ws://127.0.0.1:%d%s", port, path);
    return b;
}

static courier_ws *open_ws_opt(courier_engine *e, const char *url, const courier_ws_options *o, courier_error *err) {
    courier_request *r = NULL;
    if (courier_request_new(&r, "GET", url) != COURIER_OK) return NULL;
    courier_ws *ws = NULL;
    int rc = courier_ws_open(&ws, e, r, o, NULL, NULL, NULL, err);
    courier_request_free(r);
    return rc == COURIER_OK ? ws : NULL;
}

static courier_ws *open_ws(courier_engine *e, const char *path, courier_error *err) {
    return open_ws_opt(e, ws_url(ws_port, path), NULL, err);
}

/* The next message as text ("" on a failure, the code in *rc). */
static const char *next_text(courier_ws *ws, int *rc) {
    static char buf[4096];
    courier_ws_message m = {.size = sizeof m};
    courier_error err;
    *rc = courier_ws_next(&m, ws, 10000, &err);
    if (*rc != COURIER_OK) return "";
    snprintf(buf, sizeof buf, "%.*s", (int)m.len, (const char *)m.data);
    return buf;
}

static void test_echo(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws *ws = open_ws(e, "/echo", &err);
    REQUIRE(ws);
    /* Sent before the handshake ended: queued until it did. */
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "hello", 5, &err), COURIER_OK);
    static const uint8_t bin[] = {0, 1, 2, 0, 255};
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_BINARY, bin, sizeof bin, &err), COURIER_OK);
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "", 0, &err), COURIER_OK);
    size_t big_len = 300 * 1000; /* a 64-bit length on the wire, many socket writes */
    uint8_t *big = malloc(big_len);
    REQUIRE(big);
    for (size_t i = 0; i < big_len; i++) big[i] = (uint8_t)(i * 7);
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_BINARY, big, big_len, &err), COURIER_OK);
    courier_ws_message m = {.size = sizeof m};
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK);
    CHECK_EQ(m.type, COURIER_WS_TEXT);
    CHECK_EQ(m.len, 5);
    CHECK_STR((const char *)m.data, "hello");
    CHECK_EQ(courier_ws_get_state(ws), COURIER_WS_OPEN);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK);
    CHECK_EQ(m.type, COURIER_WS_BINARY);
    CHECK(m.len == sizeof bin && memcmp(m.data, bin, sizeof bin) == 0);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK);
    CHECK_EQ(m.type, COURIER_WS_TEXT);
    CHECK_EQ(m.len, 0);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK);
    CHECK_EQ(m.type, COURIER_WS_BINARY);
    CHECK(m.len == big_len && memcmp(m.data, big, big_len) == 0);
    free(big);
    CHECK_EQ(courier_ws_next(&m, ws, 0, &err), COURIER_E_AGAIN);
    CHECK_STR(courier_ws_protocol(ws), "");
    CHECK_EQ(courier_ws_close_code(ws), 0);
    /* The closing handshake: ours, then the server's echo. */
    CHECK_EQ(courier_ws_close(ws, 1000, "done"), COURIER_OK);
    CHECK_EQ(courier_ws_close(ws, 1000, NULL), COURIER_E_WS_CLOSED);
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "late", 4, &err), COURIER_E_WS_CLOSED);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_WS_CLOSED);
    CHECK_EQ(err.code, COURIER_E_WS_CLOSED);
    CHECK_EQ(courier_ws_close_code(ws), 1000);
    CHECK_STR(courier_ws_close_reason(ws), "done");
    CHECK_EQ(courier_ws_close_code_sent(ws), 1000);
    CHECK_EQ(courier_ws_get_state(ws), COURIER_WS_CLOSED);
    CHECK_EQ(courier_ws_next(&m, ws, 0, &err), COURIER_E_WS_CLOSED); /* the same, every time */
    courier_ws_free(ws);
    courier_engine_close(e);
}

static void test_fragments_and_subprotocol(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws_options o = {.size = sizeof o};
    CHECK_EQ(courier_ws_options_init(&o), COURIER_OK);
    CHECK_EQ(o.max_message_bytes, 1 << 20);
    o.subprotocols = "chat,  superchat";
    courier_ws *ws = open_ws_opt(e, ws_url(ws_port, "/fragments"), &o, &err);
    REQUIRE(ws);
    int rc;
    CHECK_STR(next_text(ws, &rc), "hello world");
    CHECK_EQ(rc, COURIER_OK);
    courier_ws_message m = {.size = sizeof m};
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK);
    CHECK_EQ(m.type, COURIER_WS_BINARY);
    CHECK(m.len == 3 && memcmp(m.data, "\x00\x01\x02", 3) == 0);
    CHECK_STR(courier_ws_protocol(ws), "superchat");
    courier_ws_free(ws); /* open: dropped */
    courier_engine_close(e);
}

static void test_handshake_headers(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_cookie c = {.size = sizeof c, .domain = "127.0.0.1", .path = "/", .name = "session", .value = "s1"};
    CHECK_EQ(courier_cookies_set(e, &c, &err), COURIER_OK);
    courier_cookie other = {.size = sizeof other, .domain = "127.0.0.1", .path = "/elsewhere", .name = "no", .value = "x"};
    CHECK_EQ(courier_cookies_set(e, &other, &err), COURIER_OK);
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", ws_url(ws_port, "/headers?x=1")) == COURIER_OK);
    CHECK_EQ(courier_request_add_header(r, "X-Test", "yes"), COURIER_OK);
    CHECK_EQ(courier_request_set_basic_auth(r, "user", "pass"), COURIER_OK);
    courier_ws *ws = NULL;
    CHECK_EQ(courier_ws_open(&ws, e, r, NULL, NULL, NULL, NULL, &err), COURIER_OK);
    courier_request_free(r);
    REQUIRE(ws);
    int rc;
    const char *h = next_text(ws, &rc);
    CHECK_EQ(rc, COURIER_OK);
    CHECK_CONTAINS(h, "X-Test: yes\n");
    CHECK_CONTAINS(h, "Authorization: Basic dXNlcjpwYXNz\n");
    CHECK_CONTAINS(h, "Cookie: session=s1\n");
    CHECK(!strstr(h, "no=x"));
    CHECK_CONTAINS(h, "Sec-WebSocket-Version: 13\n");
    char host[64];
    snprintf(host, sizeof host, "Host: 127.0.0.1:%d\n", ws_port);
    CHECK_CONTAINS(h, host);
    courier_ws_free(ws);
    courier_engine_close(e);
}

static void test_server_closes(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws *ws = open_ws(e, "/close", &err);
    REQUIRE(ws);
    courier_ws_message m = {.size = sizeof m};
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_WS_CLOSED);
    CHECK_EQ(courier_ws_close_code(ws), 4000);
    CHECK_STR(courier_ws_close_reason(ws), "server says bye");
    CHECK_EQ(courier_ws_close_code_sent(ws), 4000); /* the echo */
    CHECK_EQ(courier_ws_close(ws, 1000, NULL), COURIER_E_WS_CLOSED);
    courier_ws_free(ws);
    courier_engine_close(e);
}

/* The close code the peer received on its last connection to `route` ("None": no close frame). */
static const char *peer_saw(courier_engine *e, const char *route) {
    static char out[32];
    char path[128];
    snprintf(path, sizeof path, "/report?route=%s", route);
    courier_error err;
    courier_ws *ws = open_ws(e, path, &err);
    if (!ws) return "";
    int rc;
    snprintf(out, sizeof out, "%s", next_text(ws, &rc));
    courier_ws_free(ws);
    return out;
}

static void test_protocol_errors(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    static const struct {
        const char *route;
        int code, sent;
    } cases[] = {
        {"/masked", COURIER_E_WS_PROTOCOL, 1002},    /* a masked frame from the server (§5.1) */
        {"/rsv", COURIER_E_WS_PROTOCOL, 1002},       /* RSV1 with no extension (§5.2) */
        {"/opcode", COURIER_E_WS_PROTOCOL, 1002},    /* opcode 3 (§5.2) */
        {"/bigping", COURIER_E_WS_PROTOCOL, 1002},   /* a control frame of 126 bytes (§5.5) */
        {"/fragping", COURIER_E_WS_PROTOCOL, 1002},  /* a fragmented control frame (§5.5) */
        {"/badutf8", COURIER_E_WS_PROTOCOL, 1007},   /* invalid UTF-8 in a text message (§8.1) */
        {"/badclose", COURIER_E_WS_PROTOCOL, 1002},  /* close code 1005 on the wire (§7.4.1) */
        {"/badreason", COURIER_E_WS_PROTOCOL, 1007}, /* invalid UTF-8 in a close reason */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        courier_error err;
        courier_ws *ws = open_ws(e, cases[i].route, &err);
        REQUIRE(ws);
        int rc;
        CHECK_STR(next_text(ws, &rc), "before"); /* what came before the error is delivered */
        courier_ws_message m = {.size = sizeof m};
        rc = courier_ws_next(&m, ws, 10000, &err);
        if (rc != cases[i].code) fprintf(stderr, "%s: %d %s\n", cases[i].route, rc, err.message);
        CHECK_EQ(rc, cases[i].code);
        CHECK_EQ(err.code, cases[i].code);
        CHECK_EQ(courier_ws_close_code_sent(ws), cases[i].sent);
        CHECK_EQ(courier_ws_get_state(ws), COURIER_WS_CLOSED);
        courier_ws_free(ws);
        char want[16];
        snprintf(want, sizeof want, "%d", cases[i].sent);
        const char *saw = peer_saw(e, cases[i].route);
        if (strcmp(saw, want) != 0) fprintf(stderr, "%s: the peer saw %s\n", cases[i].route, saw);
        CHECK_STR(saw, want);
    }
    courier_engine_close(e);
}

/* A protocol error after the client's close was queued: wslay cannot queue its own code then;
 * the connection still fails with COURIER_E_WS_PROTOCOL (not a wait for the server's close). */
static void test_protocol_error_while_closing(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws *ws = open_ws_opt(e, ws_url(raw_port, "/badafterclose"), NULL, &err);
    REQUIRE(ws);
    for (int64_t until = th_now_ms() + 10000; courier_ws_get_state(ws) == COURIER_WS_CONNECTING && th_now_ms() < until;)
        usleep(1000); /* (the handshake's end; a close before it abandons the connection) */
    CHECK_EQ(courier_ws_close(ws, 1000, NULL), COURIER_OK); /* the server's first read is this close */
    courier_ws_message m = {.size = sizeof m};
    int rc = courier_ws_next(&m, ws, 10000, &err);
    if (rc != COURIER_E_WS_PROTOCOL) fprintf(stderr, "%d %s\n", rc, err.message);
    CHECK_EQ(rc, COURIER_E_WS_PROTOCOL);
    CHECK_EQ(courier_ws_close_code_sent(ws), 1000);
    courier_ws_free(ws);
    courier_engine_close(e);
}

static void test_too_large(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws_options o = {.size = sizeof o};
    courier_ws_options_init(&o);
    o.max_message_bytes = 1000;
    courier_ws *ws = open_ws_opt(e, ws_url(ws_port, "/big?n=1000"), &o, &err);
    REQUIRE(ws);
    courier_ws_message m = {.size = sizeof m};
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK); /* at the limit */
    CHECK_EQ(m.len, 1000);
    courier_ws_free(ws);
    ws = open_ws_opt(e, ws_url(ws_port, "/big?n=1001"), &o, &err);
    REQUIRE(ws);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_TOO_LARGE);
    CHECK_EQ(courier_ws_close_code_sent(ws), 1009);
    courier_ws_free(ws);
    courier_engine_close(e);
}

static void test_dropped_connection(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws *ws = open_ws(e, "/drop", &err);
    REQUIRE(ws);
    int rc;
    CHECK_STR(next_text(ws, &rc), "bye");
    courier_ws_message m = {.size = sizeof m};
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_NETWORK);
    CHECK_EQ(courier_ws_close_code(ws), 1006);
    CHECK_EQ(courier_ws_close_code_sent(ws), 0);
    courier_ws_free(ws);
    courier_engine_close(e);
}

static void test_dead_peer(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws_options o = {.size = sizeof o};
    courier_ws_options_init(&o);
    o.ping_interval_ms = 50;
    o.ping_timeout_ms = 200;
    courier_ws *ws = open_ws_opt(e, ws_url(ws_port, "/silent"), &o, &err);
    REQUIRE(ws);
    courier_ws_message m = {.size = sizeof m};
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_TIMEOUT);
    CHECK_EQ(courier_ws_close_code_sent(ws), 1011);
    courier_ws_free(ws);
    /* A peer that answers: the keepalive pings get their pongs and messages go on. */
    ws = open_ws_opt(e, ws_url(ws_port, "/echo"), &o, &err);
    REQUIRE(ws);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "x", 1, &err), COURIER_OK);
        CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK);
    }
    courier_ws_free(ws);
    courier_engine_close(e);
}

static void test_failed_handshakes(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws_message m = {.size = sizeof m};
    courier_ws *ws = open_ws(e, "/reject", &err);
    REQUIRE(ws);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_WS_HANDSHAKE);
    CHECK_EQ(err.http_status, 403);
    CHECK_EQ(courier_ws_close_code_sent(ws), 0);
    courier_ws_free(ws);
    static const char *const raw[] = {"/badaccept", "/noupgrade", "/proto", "/ext"};
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
        ws = open_ws_opt(e, ws_url(raw_port, raw[i]), NULL, &err);
        REQUIRE(ws);
        CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_WS_HANDSHAKE);
        CHECK_EQ(courier_ws_get_state(ws), COURIER_WS_CLOSED);
        courier_ws_free(ws);
    }
    /* A good 101 with the first frame in the same packet. */
    ws = open_ws_opt(e, ws_url(raw_port, "/firstframes"), NULL, &err);
    REQUIRE(ws);
    int rc;
    CHECK_STR(next_text(ws, &rc), "early");
    courier_ws_free(ws);
    /* No answer within the handshake timeout. */
    int port = 0;
    int fd = th_silent_listener(&port);
    REQUIRE(fd >= 0);
    courier_ws_options o = {.size = sizeof o};
    courier_ws_options_init(&o);
    o.handshake_timeout_ms = 200;
    ws = open_ws_opt(e, ws_url(port, "/"), &o, &err);
    REQUIRE(ws);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_TIMEOUT);
    courier_ws_free(ws);
    close(fd);
    /* Nobody listening. */
    ws = open_ws_opt(e, ws_url(th_free_port(), "/"), NULL, &err);
    REQUIRE(ws);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_CANNOT_CONNECT);
    courier_ws_free(ws);
    courier_engine_close(e);
}

static void test_arguments(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws *ws = NULL;
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", "ftp://127.0.0.1/") == COURIER_OK);
    CHECK_EQ(courier_ws_open(&ws, e, r, NULL, NULL, NULL, NULL, &err), COURIER_E_INVALID_URL);
    CHECK(ws == NULL);
    courier_request_free(r);
    REQUIRE(courier_request_new(&r, "POST", ws_url(ws_port, "/echo")) == COURIER_OK);
    CHECK_EQ(courier_ws_open(&ws, e, r, NULL, NULL, NULL, NULL, &err), COURIER_E_INVALID_ARGUMENT);
    courier_request_free(r);
    courier_ws_options o = {.size = sizeof o};
    courier_ws_options_init(&o);
    o.subprotocols = "a b";
    CHECK(open_ws_opt(e, ws_url(ws_port, "/echo"), &o, &err) == NULL);
    CHECK_EQ(err.code, COURIER_E_INVALID_ARGUMENT);
    ws = open_ws(e, "/echo", &err);
    REQUIRE(ws);
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "\xff", 1, &err), COURIER_E_INVALID_ENCODING);
    CHECK_EQ(courier_ws_send(ws, (courier_ws_type)9, "x", 1, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_ws_close(ws, 1005, NULL), COURIER_E_INVALID_ARGUMENT); /* reserved */
    CHECK_EQ(courier_ws_close(ws, 999, NULL), COURIER_E_INVALID_ARGUMENT);
    char reason[125];
    memset(reason, 'r', 124);
    reason[124] = 0;
    CHECK_EQ(courier_ws_close(ws, 1000, reason), COURIER_E_INVALID_ARGUMENT); /* over 123 bytes */
    reason[123] = 0;
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "x", 1, &err), COURIER_OK);
    int rc;
    CHECK_STR(next_text(ws, &rc), "x"); /* open (a close before that abandons the connection) */
    CHECK_EQ(courier_ws_close(ws, 1000, reason), COURIER_OK);
    courier_ws_message m = {.size = sizeof m};
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_WS_CLOSED);
    CHECK_EQ(strlen(courier_ws_close_reason(ws)), 123);
    courier_ws_free(ws);
    courier_ws_free(NULL);
    courier_engine_close(e);
}

/* Several threads send at once; every message comes back once, each thread's in its order. */
enum { SENDERS = 4, PER_SENDER = 100 };
static courier_ws *shared_ws;

static void *sender(void *arg) {
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < PER_SENDER; i++) {
        char msg[32];
        int n = snprintf(msg, sizeof msg, "%d:%d", id, i);
        if (courier_ws_send(shared_ws, COURIER_WS_TEXT, msg, (size_t)n, NULL) != COURIER_OK) break;
    }
    return NULL;
}

static atomic_int notified;
static void count_notify(courier_ws *ws, void *user) {
    (void)ws;
    (void)user;
    atomic_fetch_add(&notified, 1);
}

static void test_threads(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", ws_url(ws_port, "/echo")) == COURIER_OK);
    atomic_store(&notified, 0);
    CHECK_EQ(courier_ws_open(&shared_ws, e, r, NULL, count_notify, NULL, NULL, &err), COURIER_OK);
    courier_request_free(r);
    REQUIRE(shared_ws);
    pthread_t th[SENDERS];
    for (int i = 0; i < SENDERS; i++) pthread_create(&th[i], NULL, sender, (void *)(intptr_t)i);
    int next[SENDERS] = {0};
    int got = 0;
    for (; got < SENDERS * PER_SENDER; got++) {
        courier_ws_message m = {.size = sizeof m};
        if (courier_ws_next(&m, shared_ws, 10000, &err) != COURIER_OK) break;
        int id = -1, i = -1;
        sscanf((const char *)m.data, "%d:%d", &id, &i);
        REQUIRE(id >= 0 && id < SENDERS);
        CHECK_EQ(i, next[id]);
        next[id] = i + 1;
    }
    CHECK_EQ(got, SENDERS * PER_SENDER);
    for (int i = 0; i < SENDERS; i++) pthread_join(th[i], NULL);
    CHECK(atomic_load(&notified) > 0);
    CHECK(courier_ws_queued_bytes(shared_ws) >= 0);
    courier_ws_free(shared_ws);
    courier_engine_close(e);
}

static void test_engine_closes(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws *ws = open_ws(e, "/echo", &err);
    REQUIRE(ws);
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "a", 1, &err), COURIER_OK);
    int rc;
    CHECK_STR(next_text(ws, &rc), "a");
    courier_ws *never = open_ws(e, "/echo", &err); /* may not have connected yet */
    REQUIRE(never);
    courier_engine_close(e);
    courier_ws_message m = {.size = sizeof m};
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_CLOSED);
    CHECK_EQ(courier_ws_get_state(ws), COURIER_WS_CLOSED);
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "b", 1, &err), COURIER_E_WS_CLOSED);
    CHECK_EQ(courier_ws_next(&m, never, 10000, &err), COURIER_E_CLOSED);
    courier_ws_free(ws); /* after the engine: fine */
    courier_ws_free(never);
}

static void test_close_before_open(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    int fd, port = 0;
    fd = th_silent_listener(&port);
    REQUIRE(fd >= 0);
    courier_ws *ws = open_ws_opt(e, ws_url(port, "/"), NULL, &err);
    REQUIRE(ws);
    CHECK_EQ(courier_ws_close(ws, 1000, NULL), COURIER_OK);
    courier_ws_message m = {.size = sizeof m};
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_CANCELLED);
    courier_ws_free(ws);
    close(fd);
    courier_engine_close(e);
}

/* wss:// to the peer over TLS, with the engine's CA, a request's pin, a wrong pin, and no CA. */
static void tls_ca(courier_config *cfg) {
    courier_security *sec = NULL;
    courier_security_new(&sec);
    char ca[800];
    snprintf(ca, sizeof ca, "%s/ca.pem", tls_dir);
    courier_security_set_ca_file(sec, ca);
    courier_config_set_security(cfg, sec);
    courier_security_free(sec);
}

static int echo_secure(courier_engine *e, const char *url, const char *pin, courier_error *err) {
    courier_request *r = NULL;
    courier_request_new(&r, "GET", url);
    if (pin) {
        courier_security *sec = NULL;
        courier_security_new(&sec);
        char ca[800];
        snprintf(ca, sizeof ca, "%s/ca.pem", tls_dir);
        courier_security_set_ca_file(sec, ca);
        courier_security_set_pinning(sec, COURIER_PINNING_PUBLIC_KEY, pin);
        courier_request_set_security(r, sec);
        courier_security_free(sec);
    }
    courier_ws *ws = NULL;
    int rc = courier_ws_open(&ws, e, r, NULL, NULL, NULL, NULL, err);
    courier_request_free(r);
    if (rc != COURIER_OK) return rc;
    courier_ws_send(ws, COURIER_WS_TEXT, "secure", 6, err);
    courier_ws_message m = {.size = sizeof m};
    rc = courier_ws_next(&m, ws, 10000, err);
    if (rc == COURIER_OK && (m.len != 6 || memcmp(m.data, "secure", 6) != 0)) rc = -1000;
    if (rc == COURIER_OK) {
        courier_ws_close(ws, 1000, NULL);
        rc = courier_ws_next(&m, ws, 10000, err) == COURIER_E_WS_CLOSED ? COURIER_OK : -1001;
    }
    courier_ws_free(ws);
    return rc;
}

static int wss_echo(courier_engine *e, const char *pin, courier_error *err) {
    char url[128];
    snprintf(url, sizeof url, "wss://localhost:%d/echo", tls_port);
    return echo_secure(e, url, pin, err);
}

static void test_tls(void) {
    if (!tls_port) {
        printf("test_tls: skipped: scripts/tls-fixture could not make certificates (openssl, perl)\n");
        return;
    }
    courier_error err;
    courier_engine *e = th_engine(tls_ca);
    REQUIRE(e);
    CHECK_EQ(wss_echo(e, NULL, &err), COURIER_OK);
    char pin[200] = "", path[800];
    snprintf(path, sizeof path, "%s/server.pin", tls_dir);
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    if (!fgets(pin, sizeof pin, f)) pin[0] = 0;
    fclose(f);
    pin[strcspn(pin, "\r\n")] = 0;
    CHECK_EQ(wss_echo(e, pin, &err), COURIER_OK);
    CHECK_EQ(wss_echo(e, "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", &err), COURIER_E_PINNING);
    courier_engine_close(e);
    e = th_engine(NULL); /* the system's CAs do not know the fixture's */
    REQUIRE(e);
    CHECK_EQ(wss_echo(e, NULL, &err), COURIER_E_TLS);
    courier_engine_close(e);
}

/* HSTS (hsts.c) upgrades ws:// as it upgrades http:// (the Fetch standard does the same for a
 * WebSocket): ws:// to a known HSTS host goes out as wss://. The peer's TLS port speaks TLS only, so
 * a ws:// handshake that is not upgraded fails there. */
static void test_hsts_upgrades_ws(void) {
    if (!tls_port) {
        printf("test_hsts_upgrades_ws: skipped: no TLS listener\n");
        return;
    }
    courier_error err;
    char url[128], list[900];
    snprintf(url, sizeof url, "ws://localhost:%d/echo", tls_port);
    courier_engine *e = th_engine(tls_ca);
    REQUIRE(e);
    CHECK(echo_secure(e, url, NULL, &err) != COURIER_OK); /* not yet known: plain TCP to a TLS port */
    snprintf(list, sizeof list, "%s/hsts-ws.txt", th_tmpdir());
    FILE *f = fopen(list, "w");
    REQUIRE(f);
    fputs("localhost \"unlimited\"\n", f);
    fclose(f);
    int64_t added = 0;
    CHECK_EQ(courier_hsts_preload(&added, e, list, &err), COURIER_OK);
    CHECK_EQ(added, 1);
    CHECK_EQ(echo_secure(e, url, NULL, &err), COURIER_OK); /* upgraded: the TLS echo answers */
    snprintf(url, sizeof url, "ws://127.0.0.1:%d/echo", tls_port); /* an IP address is never an HSTS host */
    CHECK(echo_secure(e, url, NULL, &err) != COURIER_OK);
    courier_engine_close(e);
}

/* permessage-deflate (RFC 7692), offered by the option. */
static courier_ws_options deflate_options(void) {
    courier_ws_options o = {.size = sizeof o};
    courier_ws_options_init(&o);
    o.compression = 1;
    return o;
}

static void test_deflate_with_websockets(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws_options o = deflate_options();
    /* Not offered unless asked: the same server agrees to nothing. */
    courier_ws *ws = open_ws(e, "/deflated", &err);
    REQUIRE(ws);
    int rc;
    CHECK_STR(next_text(ws, &rc), "none");
    CHECK_STR(courier_ws_extensions(ws), "");
    courier_ws_free(ws);
    ws = open_ws_opt(e, ws_url(ws_port, "/deflated"), &o, &err);
    REQUIRE(ws);
    CHECK_STR(next_text(ws, &rc), "permessage-deflate");
    CHECK(strncmp(courier_ws_extensions(ws), "permessage-deflate", 18) == 0);
    courier_ws_free(ws);
    /* An echo through websockets' own compression, both ways, small and large, text and binary,
     * several messages on one context. */
    ws = open_ws_opt(e, ws_url(ws_port, "/echo"), &o, &err);
    REQUIRE(ws);
    size_t big_len = 200 * 1000;
    char *big = malloc(big_len + 1);
    REQUIRE(big);
    for (size_t i = 0; i < big_len; i++) big[i] = "abcdefgh ijk"[i % 12 == 11 ? (i / 12) % 12 : i % 12];
    big[big_len] = 0;
    for (int round = 0; round < 3; round++) {
        CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "small", 5, &err), COURIER_OK);
        CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, big, big_len, &err), COURIER_OK);
        CHECK_EQ(courier_ws_send(ws, COURIER_WS_BINARY, big, 3000, &err), COURIER_OK);
        courier_ws_message m = {.size = sizeof m};
        CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK);
        CHECK(m.type == COURIER_WS_TEXT && m.len == 5 && memcmp(m.data, "small", 5) == 0);
        CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK);
        CHECK(m.type == COURIER_WS_TEXT && m.len == big_len && memcmp(m.data, big, big_len) == 0);
        CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK);
        CHECK(m.type == COURIER_WS_BINARY && m.len == 3000 && memcmp(m.data, big, 3000) == 0);
    }
    CHECK_EQ(courier_ws_close(ws, 1000, NULL), COURIER_OK);
    courier_ws_message m = {.size = sizeof m};
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_WS_CLOSED);
    courier_ws_free(ws);
    /* Inflated past max_message_bytes: 2 MB of "x" is a few KiB on the wire. */
    ws = open_ws_opt(e, ws_url(ws_port, "/big?n=2000000"), &o, &err);
    REQUIRE(ws);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_TOO_LARGE);
    CHECK_EQ(courier_ws_close_code_sent(ws), 1009);
    courier_ws_free(ws);
    free(big);
    courier_engine_close(e);
}

static void test_deflate_by_hand(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws_options o = deflate_options();
    /* What goes on the wire: RSV1 and a short payload for a message of 1 KiB or more, a fresh context
     * for each (the server asked for client_no_context_takeover), small ones as they are. */
    courier_ws *ws = open_ws_opt(e, ws_url(raw_port, "/zinspect"), &o, &err);
    REQUIRE(ws);
    CHECK_STR(courier_ws_extensions(ws), "");
    char msg[2001];
    memset(msg, 'z', 2000);
    msg[2000] = 0;
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, msg, 2000, &err), COURIER_OK);
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, msg, 2000, &err), COURIER_OK);
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "tiny", 4, &err), COURIER_OK);
    int rc;
    for (int i = 0; i < 2; i++) {
        const char *got = next_text(ws, &rc);
        CHECK_EQ(rc, COURIER_OK);
        int rsv1 = -1, len = -1;
        CHECK_EQ(sscanf(got, "rsv1=%d len=%d", &rsv1, &len), 2);
        CHECK_EQ(rsv1, 1);
        CHECK(len > 0 && len < 100);
        const char *text = strstr(got, "text=");
        CHECK(text && strcmp(text + 5, msg) == 0);
    }
    CHECK_STR(next_text(ws, &rc), "rsv1=0 len=4 text=tiny");
    CHECK_STR(courier_ws_extensions(ws), "permessage-deflate; client_no_context_takeover");
    courier_ws_free(ws);
    /* Received: one context across messages, a final block and the fresh stream after it. */
    ws = open_ws_opt(e, ws_url(raw_port, "/zserver"), &o, &err);
    REQUIRE(ws);
    CHECK_STR(next_text(ws, &rc), "hello hello hello hello");
    CHECK_STR(next_text(ws, &rc), "hello hello hello hello again");
    CHECK_STR(next_text(ws, &rc), "the end of a stream");
    CHECK_STR(next_text(ws, &rc), "a new stream");
    courier_ws_free(ws);
    /* Compressed data that does not inflate, or inflates to text that is not UTF-8: 1007, after what
     * came before. */
    static const char *const bad[] = {"/zbad", "/zbadutf8"};
    for (int i = 0; i < 2; i++) {
        ws = open_ws_opt(e, ws_url(raw_port, bad[i]), &o, &err);
        REQUIRE(ws);
        CHECK_STR(next_text(ws, &rc), "before");
        courier_ws_message m = {.size = sizeof m};
        rc = courier_ws_next(&m, ws, 10000, &err);
        if (rc != COURIER_E_WS_PROTOCOL) fprintf(stderr, "%s: %d %s\n", bad[i], rc, err.message);
        CHECK_EQ(rc, COURIER_E_WS_PROTOCOL);
        CHECK_EQ(courier_ws_close_code_sent(ws), 1007);
        courier_ws_free(ws);
    }
    /* A parameter nobody offered; and compression agreed when it was not offered (/zserver). */
    ws = open_ws_opt(e, ws_url(raw_port, "/zparams"), &o, &err);
    REQUIRE(ws);
    courier_ws_message m = {.size = sizeof m};
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_WS_HANDSHAKE);
    courier_ws_free(ws);
    ws = open_ws_opt(e, ws_url(raw_port, "/zserver"), NULL, &err);
    REQUIRE(ws);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_WS_HANDSHAKE);
    courier_ws_free(ws);
    courier_engine_close(e);
}

/* A reader that falls behind: the engine stops reading the socket once max_receive_queue_bytes are
 * waiting, so what it holds stays bounded while the server is held back; every message arrives. */
static void test_slow_reader(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws_options o = {.size = sizeof o};
    courier_ws_options_init(&o);
    o.max_receive_queue_bytes = 64 * 1024;
    courier_ws *ws = open_ws_opt(e, ws_url(ws_port, "/echo"), &o, &err);
    REQUIRE(ws);
    enum { N = 400, LEN = 8192 };
    static uint8_t payload[LEN];
    for (int i = 0; i < N; i++) {
        memset(payload, (uint8_t)i, LEN);
        while ((courier_ws_send(ws, COURIER_WS_BINARY, payload, LEN, &err)) == COURIER_E_AGAIN) usleep(1000);
    }
    /* The echo comes back while nothing is read: 3.2 MB, of which the engine holds 64 KiB and one
     * message at most. */
    for (int64_t until = th_now_ms() + 10000; courier_ws_unread_bytes(ws) < 64 * 1024 && th_now_ms() < until;)
        usleep(1000);
    usleep(200 * 1000); /* (time for more to come, were the socket still read) */
    CHECK(courier_ws_unread_bytes(ws) >= 64 * 1024);
    CHECK(courier_ws_unread_bytes(ws) <= 64 * 1024 + LEN);
    courier_ws_message m = {.size = sizeof m};
    int got = 0;
    for (int i = 0; i < N; i++) {
        int rc = courier_ws_next(&m, ws, 10000, &err);
        if (rc != COURIER_OK) break;
        CHECK(m.len == LEN && m.data[0] == (uint8_t)i && m.data[LEN - 1] == (uint8_t)i);
        got++;
    }
    CHECK_EQ(got, N);
    CHECK_EQ(courier_ws_close(ws, 1000, NULL), COURIER_OK);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_WS_CLOSED);
    courier_ws_free(ws);
    courier_engine_close(e);
}

/* Messages of every length form (7-, 16- and 64-bit), some written by the sender's thread and some
 * (over 64 KiB) by the worker, while the server reads nothing (/ws/echo?hold=1500: it starts reading
 * 1.5 s after the handshake) and then while it is held back by a reader that does not read: the
 * socket fills, so frames are written in part and their rest later (ws_direct.c). Every message
 * comes back whole, with its bytes, in the order sent. The peer is the test server's /ws/echo
 * (plain TCP, no proxy: the path where senders write themselves). Nothing here depends on the hold's
 * length: a shorter one only exercises less. */
static uint8_t pattern_byte(int i, size_t k) { return (uint8_t)(i * 31 + k * 7 + (k >> 8)); }

/* Message i's length: the first half 64 KiB at most (each the sender's to write while nothing waits
 * to be written), then 70,000-byte ones among them (the worker's). */
static size_t message_len(int i, int n) {
    static const size_t sizes[] = {0, 1, 125, 126, 4096, 4097, 60000, 65535, 65536, 70000};
    return sizes[i % (i < n / 2 ? 9 : 10)];
}

static void test_large_messages_in_order(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws_options o = {.size = sizeof o};
    courier_ws_options_init(&o);
    o.max_receive_queue_bytes = 64 * 1024;
    courier_ws *ws = open_ws_opt(e, ws_url(cts_server_port(th_server()), "/ws/echo?hold=1500"), &o, &err);
    REQUIRE(ws);
    enum { N = 400 }; /* about 15 MB: more than loopback's socket buffers hold */
    static uint8_t buf[70000];
    for (int i = 0; i < N; i++) {
        size_t len = message_len(i, N);
        for (size_t k = 0; k < len; k++) buf[k] = pattern_byte(i, k);
        int rc;
        while ((rc = courier_ws_send(ws, COURIER_WS_BINARY, buf, len, &err)) == COURIER_E_AGAIN) usleep(1000);
        CHECK_EQ(rc, COURIER_OK);
    }
    courier_ws_message m = {.size = sizeof m};
    int got = 0, bad = 0;
    for (int i = 0; i < N; i++) {
        if (courier_ws_next(&m, ws, 10000, &err) != COURIER_OK) break;
        size_t len = message_len(i, N);
        if (m.len != len) bad++;
        else
            for (size_t k = 0; k < len; k++)
                if (m.data[k] != pattern_byte(i, k)) {
                    bad++;
                    break;
                }
        got++;
    }
    CHECK_EQ(got, N);
    CHECK_EQ(bad, 0);
    CHECK_EQ(courier_ws_close(ws, 1000, NULL), COURIER_OK);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_WS_CLOSED);
    CHECK_EQ(courier_ws_close_code(ws), 1000);
    courier_ws_free(ws);
    courier_engine_close(e);
}

/* Every tail of the sender's masking (ws_direct.c masks 8 bytes at a time, then byte by byte): each
 * length 0-40 and 1,020-1,030, one round trip at a time so that each is written by the sender's
 * thread (nothing of the WebSocket's waits to be written), comes back with its bytes. */
static void test_direct_send_every_tail(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_ws *ws = open_ws_opt(e, ws_url(cts_server_port(th_server()), "/ws/echo"), NULL, &err);
    REQUIRE(ws);
    courier_ws_message m = {.size = sizeof m};
    static uint8_t buf[1030];
    int bad = 0;
    for (int i = 0; i < 52; i++) {
        size_t len = i <= 40 ? (size_t)i : (size_t)(1020 + i - 41);
        for (size_t k = 0; k < len; k++) buf[k] = pattern_byte(i, k);
        CHECK_EQ(courier_ws_send(ws, COURIER_WS_BINARY, buf, len, &err), COURIER_OK);
        CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK);
        if (m.len != len || (len && memcmp(m.data, buf, len) != 0)) bad++;
    }
    CHECK_EQ(bad, 0);
    courier_ws_free(ws);
    courier_engine_close(e);
}

/* The caller's reads (courier_ws_take_reads): its loop watches the socket, reads it on its thread
 * (courier_ws_read_socket) and takes the messages with courier_ws_next(0); the worker no longer
 * reads. Waits for the socket as an event loop would, then returns to the worker's reads when
 * courier_ws_read_socket says so. */
/* The notify of these WebSockets: a byte in a pipe (an event loop watches it beside the socket:
 * messages the worker read before it saw the reads taken come through it). */
static int notify_pipe[2] = {-1, -1};
static void notify_write(courier_ws *ws, void *user) {
    (void)ws;
    (void)user;
    char b = 1;
    ssize_t r = write(notify_pipe[1], &b, 1);
    (void)r; /* full: readable already */
}

static int caller_next(courier_ws *ws, int fd, courier_ws_message *m, courier_error *err, int *given_back) {
    for (int64_t until = th_now_ms() + 10000; th_now_ms() < until;) {
        int rc = courier_ws_next(m, ws, 0, err);
        if (rc != COURIER_E_AGAIN) return rc;
        if (*given_back) return courier_ws_next(m, ws, 10000, err); /* the notify's way (a wait) */
        struct pollfd p[2] = {{fd, POLLIN, 0}, {notify_pipe[0], POLLIN, 0}};
        if (poll(p, 2, 10000) < 1) return COURIER_E_TIMEOUT;
        if (p[1].revents) {
            char buf[64];
            while (read(notify_pipe[0], buf, sizeof buf) > 0) {}
        }
        if (p[0].revents && courier_ws_read_socket(ws) == COURIER_E_AGAIN) *given_back = 1;
    }
    return COURIER_E_TIMEOUT;
}

static courier_ws *open_for_caller_reads(courier_engine *e, const char *url, int *fd, courier_error *err) {
    courier_request *r = NULL;
    if (courier_request_new(&r, "GET", url) != COURIER_OK) return NULL;
    courier_ws *ws = NULL;
    int orc = courier_ws_open(&ws, e, r, NULL, notify_write, NULL, NULL, err);
    courier_request_free(r);
    if (orc != COURIER_OK) return NULL;
    int rc = COURIER_E_AGAIN;
    for (int64_t until = th_now_ms() + 10000; rc == COURIER_E_AGAIN && th_now_ms() < until; usleep(1000))
        rc = courier_ws_take_reads(fd, ws); /* once open and the worker's first pump has run */
    CHECK_EQ(rc, COURIER_OK);
    CHECK(*fd >= 0);
    return ws;
}

static void test_caller_reads(void) {
    REQUIRE(pipe(notify_pipe) == 0);
    for (int i = 0; i < 2; i++) fcntl(notify_pipe[i], F_SETFL, O_NONBLOCK);
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    int fd = -1, back = 0;
    CHECK_EQ(courier_ws_take_reads(&fd, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(fd, -1);
    CHECK_EQ(courier_ws_read_socket(NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_ws_return_reads(NULL), COURIER_E_INVALID_ARGUMENT);
    /* Every length form, under and over the direct send's limit, in order; then the closing
     * handshake read by the caller until the reads go back to the worker, which ends it. */
    courier_ws *ws = open_for_caller_reads(e, ws_url(ws_port, "/echo"), &fd, &err);
    REQUIRE(ws);
    enum { N = 60 };
    static uint8_t buf[70000];
    courier_ws_message m = {.size = sizeof m};
    int got = 0, bad = 0;
    for (int i = 0; i < N; i++) {
        size_t len = message_len(i, N);
        for (size_t k = 0; k < len; k++) buf[k] = pattern_byte(i, k);
        CHECK_EQ(courier_ws_send(ws, COURIER_WS_BINARY, buf, len, &err), COURIER_OK);
        if (caller_next(ws, fd, &m, &err, &back) != COURIER_OK) break;
        got++;
        if (m.len != len) bad++;
        else
            for (size_t k = 0; k < len; k++)
                if (m.data[k] != pattern_byte(i, k)) {
                    bad++;
                    break;
                }
    }
    CHECK_EQ(got, N);
    CHECK_EQ(bad, 0);
    CHECK_EQ(back, 0); /* the reads stayed the caller's all along */
    CHECK_EQ(courier_ws_close(ws, 1000, "bye"), COURIER_OK);
    CHECK_EQ(caller_next(ws, fd, &m, &err, &back), COURIER_E_WS_CLOSED);
    CHECK_EQ(back, 1);
    CHECK_EQ(courier_ws_close_code(ws), 1000);
    CHECK_EQ(courier_ws_close_code_sent(ws), 1000);
    CHECK_EQ(courier_ws_take_reads(&fd, ws), COURIER_E_AGAIN);
    courier_ws_free(ws);

    /* A server's ping read by the caller is answered (the peer echoes only after the pong), and
     * reads given back and taken again lose nothing. */
    ws = open_for_caller_reads(e, ws_url(ws_port, "/pingecho"), &fd, &err);
    REQUIRE(ws);
    back = 0;
    for (int i = 0; i < 20; i++) {
        char want[16];
        snprintf(want, sizeof want, "ping %d", i);
        CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, want, strlen(want), &err), COURIER_OK);
        if (i % 5 == 4) { /* given back: the worker reads (the caller must not wait on the socket) */
            CHECK_EQ(courier_ws_return_reads(ws), COURIER_OK);
            back = 1;
        }
        int rc = caller_next(ws, fd, &m, &err, &back);
        CHECK_EQ(rc, COURIER_OK);
        CHECK(rc == COURIER_OK && m.len == strlen(want) && memcmp(m.data, want, m.len) == 0);
        if (back) { /* ended with the worker's reads: take them again */
            int fd2 = -1;
            CHECK_EQ(courier_ws_take_reads(&fd2, ws), COURIER_OK);
            CHECK_EQ(fd2, fd); /* the same descriptor, the WebSocket's */
            back = 0;
        }
    }
    /* A waiting courier_ws_next reads the socket itself too (the reads stay the caller's). */
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "wait", 4, &err), COURIER_OK);
    CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK);
    CHECK(m.len == 4 && memcmp(m.data, "wait", 4) == 0);
    courier_ws_free(ws);

    /* A protocol error read by the caller: the worker fails the connection with its close code. */
    ws = open_for_caller_reads(e, ws_url(ws_port, "/late?bad=/masked"), &fd, &err);
    REQUIRE(ws);
    back = 0;
    CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "go", 2, &err), COURIER_OK);
    CHECK_EQ(caller_next(ws, fd, &m, &err, &back), COURIER_OK);
    CHECK(m.len == 6 && memcmp(m.data, "before", 6) == 0);
    int rc = caller_next(ws, fd, &m, &err, &back);
    CHECK_EQ(rc, COURIER_E_WS_PROTOCOL);
    CHECK_EQ(err.code, COURIER_E_WS_PROTOCOL);
    CHECK_EQ(courier_ws_close_code_sent(ws), 1002);
    courier_ws_free(ws);

    /* wss:// (frames under TLS): the reads stay the worker's. */
    if (tls_dir[0]) {
        courier_engine_close(e);
        e = th_engine(tls_ca);
        REQUIRE(e);
        char url[128];
        snprintf(url, sizeof url, "wss://localhost:%d/echo", tls_port);
        ws = open_ws_opt(e, url, NULL, &err);
        REQUIRE(ws);
        CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "tls", 3, &err), COURIER_OK);
        CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_OK); /* open */
        CHECK_EQ(courier_ws_take_reads(&fd, ws), COURIER_E_AGAIN);
        CHECK_EQ(fd, -1);
        CHECK_EQ(courier_ws_read_socket(ws), COURIER_E_AGAIN);
        courier_ws_free(ws);
    }
    courier_engine_close(e);
    close(notify_pipe[0]);
    close(notify_pipe[1]);
}

/* The keepalive while the reads are the caller's: the pongs are read on the caller's thread (an
 * event loop's, then a waiting courier_ws_next's) and clear the ping under io; a pong left unread
 * would fail the connection with COURIER_E_TIMEOUT after 150 ms, well inside the loop. */
static void test_caller_reads_keepalive(void) {
    REQUIRE(pipe(notify_pipe) == 0);
    for (int i = 0; i < 2; i++) fcntl(notify_pipe[i], F_SETFL, O_NONBLOCK);
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    courier_request *r = NULL;
    REQUIRE(courier_request_new(&r, "GET", ws_url(ws_port, "/echo")) == COURIER_OK);
    courier_ws_options o = {.size = sizeof o};
    courier_ws_options_init(&o);
    o.ping_interval_ms = 20;
    o.ping_timeout_ms = 150;
    courier_ws *ws = NULL;
    REQUIRE(courier_ws_open(&ws, e, r, &o, notify_write, NULL, NULL, &err) == COURIER_OK);
    courier_request_free(r);
    int fd = -1, rc = COURIER_E_AGAIN, back = 0;
    for (int64_t until = th_now_ms() + 10000; rc == COURIER_E_AGAIN && th_now_ms() < until; usleep(1000))
        rc = courier_ws_take_reads(&fd, ws);
    CHECK_EQ(rc, COURIER_OK);
    courier_ws_message m = {.size = sizeof m};
    int ok = 0;
    for (int64_t until = th_now_ms() + 600; th_now_ms() < until && ok >= 0;) { /* some 30 pings */
        CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "k", 1, &err), COURIER_OK);
        rc = back ? courier_ws_next(&m, ws, 10000, &err) : caller_next(ws, fd, &m, &err, &back);
        if (rc != COURIER_OK) {
            fprintf(stderr, "keepalive: %d %s\n", rc, err.message);
            ok = -1;
            break;
        }
        ok++;
        usleep(5000);
    }
    CHECK(ok > 0);
    CHECK_EQ(courier_ws_get_state(ws), COURIER_WS_OPEN);
    CHECK_EQ(back, 0);
    courier_ws_free(ws);
    courier_engine_close(e);
    close(notify_pipe[0]);
    close(notify_pipe[1]);
}

/* Through an HTTP proxy: a CONNECT tunnel for ws:// (curl tunnels only https by itself) and wss://,
 * the echo and the closing handshake through it; the proxy counts the tunnels it made. */
static char ws_proxy[80];
static void with_ws_proxy(courier_config *c) {
    courier_config_set_proxy(c, ws_proxy, NULL);
    if (tls_dir[0]) tls_ca(c);
}

static int proxy_tunnels(void) {
    courier_engine *e = th_engine(NULL);
    if (!e) return -1;
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/tunnels", proxy_port);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", url);
    courier_response *resp = NULL;
    courier_error err;
    int n = -1;
    if (courier_send_sync(&resp, e, r, &err) == COURIER_OK) {
        size_t len = 0;
        const uint8_t *b = courier_response_body(resp, &len);
        n = atoi((const char *)b);
    }
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
    return n;
}

static void test_through_a_proxy(void) {
    snprintf(ws_proxy, sizeof ws_proxy, "http://127.0.0.1:%d", proxy_port);
    int before = proxy_tunnels();
    CHECK(before >= 0);
    courier_engine *e = th_engine(with_ws_proxy);
    REQUIRE(e);
    courier_error err;
    for (int tls = 0; tls < 2; tls++) {
        if (tls && !tls_dir[0]) break;
        char url[128];
        if (tls) snprintf(url, sizeof url, "wss://localhost:%d/echo", tls_port); /* the certificate's name */
        else snprintf(url, sizeof url, "ws://127.0.0.1:%d/echo", ws_port);
        courier_ws *ws = open_ws_opt(e, url, NULL, &err);
        REQUIRE(ws);
        CHECK_EQ(courier_ws_send(ws, COURIER_WS_TEXT, "via proxy", 9, &err), COURIER_OK);
        int rc;
        const char *got = next_text(ws, &rc);
        if (rc != COURIER_OK) {
            courier_ws_message m0 = {.size = sizeof m0};
            courier_ws_next(&m0, ws, 0, &err);
            fprintf(stderr, "%s: %d %s\n", url, rc, err.message);
        }
        CHECK_STR(got, "via proxy");
        CHECK_EQ(courier_ws_close(ws, 1000, NULL), COURIER_OK);
        courier_ws_message m = {.size = sizeof m};
        CHECK_EQ(courier_ws_next(&m, ws, 10000, &err), COURIER_E_WS_CLOSED);
        courier_ws_free(ws);
    }
    courier_engine_close(e);
    CHECK_EQ(proxy_tunnels(), before + (tls_dir[0] ? 2 : 1));
}

/* More WebSockets to one host than max_connections_per_host (5 by default), then requests to that
 * host while they are open: every WebSocket keeps its connection. (libcurl closes the oldest idle
 * connection of a host at its limit, and a WebSocket's connection is idle to libcurl: the sixth
 * WebSocket's connection closed the first one's under it, COURIER_E_NETWORK.) The peer here is the
 * test server's /ws/echo, so the requests go to the same host and port. */
static void test_more_than_the_host_limit(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_error err;
    enum { N = 8 };
    courier_ws *ws[N];
    char want[32];
    int rc;
    const char *url = ws_url(cts_server_port(th_server()), "/ws/echo");
    for (int i = 0; i < N; i++) {
        ws[i] = open_ws_opt(e, url, NULL, &err);
        REQUIRE(ws[i]);
        snprintf(want, sizeof want, "open %d", i);
        CHECK_EQ(courier_ws_send(ws[i], COURIER_WS_TEXT, want, strlen(want), &err), COURIER_OK);
        CHECK_STR(next_text(ws[i], &rc), want);
        CHECK_EQ(rc, COURIER_OK);
    }
    for (int k = 0; k < 3; k++) {
        courier_request *r = NULL;
        courier_response *resp = NULL;
        REQUIRE(courier_request_new(&r, "GET", th_url("/json")) == COURIER_OK);
        CHECK_EQ(courier_send_sync(&resp, e, r, &err), COURIER_OK);
        courier_response_free(resp);
        courier_request_free(r);
    }
    for (int i = 0; i < N; i++) {
        snprintf(want, sizeof want, "again %d", i);
        CHECK_EQ(courier_ws_send(ws[i], COURIER_WS_TEXT, want, strlen(want), &err), COURIER_OK);
        CHECK_STR(next_text(ws[i], &rc), want);
        CHECK_EQ(rc, COURIER_OK);
        CHECK_EQ(courier_ws_close(ws[i], 1000, NULL), COURIER_OK);
        next_text(ws[i], &rc);
        CHECK_EQ(rc, COURIER_E_WS_CLOSED);
        courier_ws_free(ws[i]);
    }
    courier_engine_close(e);
}

static const th_test tests[] = {
    T(test_echo),          T(test_fragments_and_subprotocol), T(test_handshake_headers), T(test_server_closes),
    T(test_protocol_errors), T(test_protocol_error_while_closing), T(test_too_large),               T(test_dropped_connection), T(test_dead_peer),
    T(test_failed_handshakes), T(test_arguments),             T(test_threads),            T(test_engine_closes),
    T(test_close_before_open), T(test_tls), T(test_hsts_upgrades_ws), T(test_deflate_with_websockets),
    T(test_deflate_by_hand),   T(test_slow_reader),           T(test_large_messages_in_order), T(test_direct_send_every_tail),
    T(test_more_than_the_host_limit), T(test_through_a_proxy),    T(test_caller_reads), T(test_caller_reads_keepalive),
};

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (!getenv("COURIER_WS_PYTHON")) {
        printf("ws_test: skipped: run it through Tests/WebSocket/with-peer.sh (ctest does)\n");
        return 0;
    }
    /* Certificates for the TLS listener (before any thread: system() forks). */
    snprintf(tls_dir, sizeof tls_dir, "%s/tls", th_tmpdir());
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/tls-fixture' '%s' 1 >/dev/null 2>&1", COURIER_SOURCE_DIR, tls_dir);
    if (system(cmd) != 0) tls_dir[0] = 0;
    if (start_peer() != 0) {
        fprintf(stderr, "ws_test: the peer (%s) did not start\n", getenv("COURIER_WS_PEER"));
        return 1;
    }
    int rc = th_run(argc, argv, tests, sizeof tests / sizeof tests[0]);
    stop_peer();
    return rc;
}
