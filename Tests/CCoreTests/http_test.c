/*
 * http_test.c — the HTTP client to the letter over the loopback server: redirects followed by the
 * engine (the method/body matrix, settings, the hook, credentials, the chain, downgrades), framing
 * of hostile responses (unended header blocks, conflicting Content-Length, garbage status lines,
 * huge headers) and how each transport failure is coded, and the three timeouts.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <strings.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static courier_request *req(const char *method, const char *path) {
    courier_request *r = NULL;
    if (courier_request_new(&r, method, path) != COURIER_OK) return NULL;
    courier_request_set_timeout_ms(r, 20000);
    return r;
}

static int send_req(courier_engine *e, courier_request *r, courier_response **out, courier_error *err) {
    courier_error local;
    int rc = courier_send_sync(out, e, r, err ? err : &local);
    courier_request_free(r);
    return rc;
}

/* The /echo document of a response: what the server received. NULL if the body is not one. */
static json_t *echo_of(const courier_response *resp) {
    size_t len = 0;
    const uint8_t *body = courier_response_body(resp, &len);
    return json_loadb((const char *)body, len, 0, NULL);
}

static const char *echo_header(json_t *doc, const char *name) {
    json_t *hs = json_object_get(doc, "headers");
    size_t i;
    json_t *pair;
    json_array_foreach(hs, i, pair) {
        if (strcasecmp(json_string_value(json_array_get(pair, 0)), name) == 0)
            return json_string_value(json_array_get(pair, 1));
    }
    return NULL;
}

/* ---- redirects ---------------------------------------------------------------------------------- */

/* 301, 302, 303, 307, 308 x GET, HEAD, POST, PUT, PATCH, DELETE: what /echo received after the hop. */
static void test_redirect_matrix(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    static const int statuses[] = {301, 302, 303, 307, 308};
    static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
    cts_server *s = th_server();
    for (size_t si = 0; si < 5; si++) {
        for (size_t mi = 0; mi < 6; mi++) {
            int st = statuses[si];
            const char *m = methods[mi];
            bool with_body = strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0;
            bool to_get = (st == 303 && strcmp(m, "HEAD") != 0) || ((st == 301 || st == 302) && strcmp(m, "POST") == 0);
            const char *want_method = to_get ? "GET" : m;
            bool want_body = with_body && !to_get;
            char path[128];
            snprintf(path, sizeof path, "/redirect?to=/echo/matrix&status=%d", st);
            courier_request *r = req(m, path);
            if (with_body) courier_request_set_body(r, "payload", 7, "text/x-test");
            long before = cts_server_path_count(s, "/echo/matrix");
            courier_response *resp = NULL;
            int rc = send_req(e, r, &resp, NULL);
            if (rc != COURIER_OK || !resp) {
                th_fail(__FILE__, __LINE__, "%d %s: code %d", st, m, rc);
                courier_response_free(resp);
                continue;
            }
            CHECK_EQ(courier_response_status(resp), 200);
            CHECK_EQ(cts_server_path_count(s, "/echo/matrix"), before + 1);
            CHECK_STR(courier_response_method(resp), want_method);
            CHECK_CONTAINS(courier_response_url(resp), "/echo/matrix");
            const char *hop_url = NULL;
            int hop_status = 0;
            CHECK_EQ(courier_response_redirect_count(resp), 1);
            CHECK_EQ(courier_response_redirect_at(&hop_url, &hop_status, resp, 0), COURIER_OK);
            CHECK_EQ(hop_status, st);
            CHECK_CONTAINS(hop_url, "/redirect?to=");
            if (strcmp(want_method, "HEAD") != 0) {
                json_t *doc = echo_of(resp);
                if (!doc) {
                    th_fail(__FILE__, __LINE__, "%d %s: no echo", st, m);
                } else {
                    const char *got_m = json_string_value(json_object_get(doc, "method"));
                    const char *got_body = json_string_value(json_object_get(doc, "body"));
                    const char *ctype = echo_header(doc, "Content-Type");
                    if (!got_m || strcmp(got_m, want_method) != 0)
                        th_fail(__FILE__, __LINE__, "%d %s: server got method %s", st, m, got_m ? got_m : "?");
                    if (want_body && (!got_body || strcmp(got_body, "payload") != 0 || !ctype ||
                                      strcmp(ctype, "text/x-test") != 0))
                        th_fail(__FILE__, __LINE__, "%d %s: body or Content-Type lost", st, m);
                    if (!want_body && ((got_body && *got_body) || ctype))
                        th_fail(__FILE__, __LINE__, "%d %s: body or Content-Type kept", st, m);
                    json_decref(doc);
                }
            }
            courier_response_free(resp);
        }
    }
    courier_engine_close(e);
}

/* A body dropped takes every Content-* field with it, not only Content-Type; a body kept keeps them. */
static void test_redirect_drops_all_content_fields_with_the_body(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    for (int keep = 0; keep < 2; keep++) {
        courier_request *r = req("PUT", keep ? "/redirect?to=/echo&status=308" : "/redirect?to=/echo&status=303");
        courier_request_set_body(r, "payload", 7, "text/plain");
        courier_request_add_header(r, "Content-Language", "fr");
        courier_request_add_header(r, "X-Other", "kept");
        courier_response *resp = NULL;
        CHECK_EQ(send_req(e, r, &resp, NULL), COURIER_OK);
        json_t *doc = echo_of(resp);
        REQUIRE(doc);
        CHECK_STR(echo_header(doc, "X-Other"), "kept");
        if (keep) CHECK_STR(echo_header(doc, "Content-Language"), "fr");
        else CHECK(echo_header(doc, "Content-Language") == NULL && echo_header(doc, "Content-Length") == NULL);
        json_decref(doc);
        courier_response_free(resp);
    }
    courier_engine_close(e);
}

typedef struct done_box {
    _Atomic int calls;
    _Atomic int code;
} done_box;

static void on_done(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id, (void)err;
    done_box *b = user;
    courier_response_free(resp);
    atomic_store(&b->code, code);
    atomic_fetch_add(&b->calls, 1);
}

/* The chain keeps the request's id: cancelling it stops the hop in flight, answered once. */
static void test_cancel_reaches_the_hop_in_flight(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    cts_server *s = th_server();
    long before = cts_server_path_count(s, "/hang");
    courier_request *r = req("GET", "/redirect?to=/hang");
    done_box box = {0};
    uint64_t id = 0;
    CHECK_EQ(courier_send(&id, e, r, on_done, &box, NULL), COURIER_OK);
    courier_request_free(r);
    for (int i = 0; i < 10000 && cts_server_path_count(s, "/hang") == before; i++) usleep(1000);
    CHECK_EQ(cts_server_path_count(s, "/hang"), before + 1); /* the second hop is on the wire */
    CHECK_EQ(courier_cancel(e, id), COURIER_OK);
    for (int i = 0; i < 10000 && atomic_load(&box.calls) == 0; i++) usleep(1000);
    CHECK_EQ(atomic_load(&box.code), COURIER_E_CANCELLED);
    courier_engine_close(e);
    CHECK_EQ(atomic_load(&box.calls), 1);
}

/* Identical GETs in flight share one network request; each caller's chain then goes on. */
static void test_coalesced_requests_follow_each(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    done_box boxes[3] = {0};
    for (int i = 0; i < 3; i++) {
        courier_request *r = req("GET", "/redirect?to=/delay/50");
        CHECK_EQ(courier_send(NULL, e, r, on_done, &boxes[i], NULL), COURIER_OK);
        courier_request_free(r);
    }
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 10000 && atomic_load(&boxes[i].calls) == 0; k++) usleep(1000);
        CHECK_EQ(atomic_load(&boxes[i].calls), 1);
        CHECK_EQ(atomic_load(&boxes[i].code), COURIER_OK);
    }
    courier_engine_close(e);
}

static void no_follow(courier_config *c) { courier_config_set_follow_redirects(c, 0); }

/* Not following delivers the 3xx (a success) with its Location; a request may say otherwise. */
static void test_redirect_not_followed(void) {
    courier_engine *e = th_engine(no_follow);
    REQUIRE(e);
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, req("GET", "/redirect?to=/echo&status=301"), &resp, NULL), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 301);
    CHECK_STR(courier_response_header(resp, "Location"), "/echo");
    CHECK_EQ(courier_response_redirect_count(resp), 0);
    courier_response_free(resp);
    resp = NULL;
    courier_request *r = req("GET", "/redirect?to=/echo");
    courier_request_set_follow_redirects(r, 1);
    CHECK_EQ(send_req(e, r, &resp, NULL), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 200);
    courier_response_free(resp);
    courier_engine_close(e);
}

/* The default maximum is 20 redirects: 20 are followed, the 21st fails with its own code and the
 * last 3xx attached; a request's own maximum. */
static void test_too_many_redirects(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, req("GET", "/redirect-chain/20"), &resp, NULL), COURIER_OK);
    CHECK_EQ(courier_response_redirect_count(resp), 20);
    courier_metrics m = {.size = sizeof m};
    courier_response_metrics(&m, resp);
    CHECK_EQ(m.redirects, 20);
    courier_response_free(resp);
    resp = NULL;
    courier_error err;
    CHECK_EQ(send_req(e, req("GET", "/redirect-chain/21"), &resp, &err), COURIER_E_TOO_MANY_REDIRECTS);
    CHECK_EQ(err.http_status, 302);
    CHECK_EQ(courier_response_status(resp), 302);
    CHECK_EQ(courier_response_redirect_count(resp), 20);
    courier_response_free(resp);
    resp = NULL;
    courier_request *r = req("GET", "/redirect-chain/3");
    courier_request_set_max_redirects(r, 2);
    CHECK_EQ(send_req(e, r, &resp, &err), COURIER_E_TOO_MANY_REDIRECTS);
    courier_response_free(resp);
    courier_engine_close(e);
}

static void mock_on(courier_config *c) { courier_config_set_mock_enabled(c, 1); }

/* A mock's 3xx is its answer, never followed (a mock answers the request as given). */
static void test_mock_redirect_not_followed(void) {
    courier_engine *e = th_engine(mock_on);
    REQUIRE(e);
    courier_request *r = req("GET", "/anything");
    courier_request_set_mock_response(r, 302, NULL, 0, NULL);
    courier_request_add_mock_header(r, "Location", "/echo");
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, r, &resp, NULL), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 302);
    CHECK_EQ(courier_response_redirect_count(resp), 0);
    courier_response_free(resp);
    courier_engine_close(e);
}

/* A Location that does not parse is the server's fault; another scheme is refused. */
static void test_redirect_bad_location(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, req("GET", "/redirect?to=http%3A%2F%2F%5B%3A%3A1"), &resp, NULL), COURIER_E_PROTOCOL);
    CHECK_EQ(courier_response_status(resp), 302);
    courier_response_free(resp);
    resp = NULL;
    CHECK_EQ(send_req(e, req("GET", "/redirect?to=ftp%3A%2F%2F127.0.0.1%2Fx"), &resp, NULL), COURIER_E_REDIRECT_REFUSED);
    courier_response_free(resp);
    courier_engine_close(e);
}

static int hook_calls;
static int hook_verdict;
static int hook_seen_status;
static int hook(const courier_response *resp, courier_outgoing *next, void *user) {
    (void)user;
    hook_calls++;
    hook_seen_status = courier_response_status(resp);
    if (hook_verdict == COURIER_REDIRECT_FOLLOW) {
        courier_outgoing_set_url(next, th_url("/echo/changed"));
        courier_outgoing_set_header(next, "X-Hook", "1");
    }
    return hook_verdict;
}

/* The hook sees each hop and may follow (changed), stop (the 3xx is the answer) or refuse. */
static void test_redirect_hook(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    hook_calls = 0;
    hook_verdict = COURIER_REDIRECT_FOLLOW;
    courier_request *r = req("POST", "/redirect?to=/echo&status=307");
    courier_request_set_body(r, "abc", 3, "text/plain");
    courier_request_set_redirect_hook(r, hook, NULL, NULL);
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, r, &resp, NULL), COURIER_OK);
    CHECK_EQ(hook_calls, 1);
    CHECK_EQ(hook_seen_status, 307);
    CHECK_CONTAINS(courier_response_url(resp), "/echo/changed");
    json_t *doc = echo_of(resp);
    CHECK(doc && echo_header(doc, "X-Hook"));
    CHECK_STR(json_string_value(json_object_get(doc, "body")), "abc");
    json_decref(doc);
    courier_response_free(resp);

    hook_verdict = COURIER_REDIRECT_STOP;
    r = req("GET", "/redirect?to=/echo");
    courier_request_set_redirect_hook(r, hook, NULL, NULL);
    resp = NULL;
    CHECK_EQ(send_req(e, r, &resp, NULL), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 302);
    courier_response_free(resp);

    hook_verdict = -1;
    r = req("GET", "/redirect?to=/echo");
    courier_request_set_redirect_hook(r, hook, NULL, NULL);
    resp = NULL;
    courier_error err;
    CHECK_EQ(send_req(e, r, &resp, &err), COURIER_E_REDIRECT_REFUSED);
    CHECK_EQ(err.http_status, 302);
    CHECK_EQ(courier_response_status(resp), 302); /* attached */
    courier_response_free(resp);
    courier_engine_close(e);
}

static int other_port;
/* Moves a same-origin hop to the other server; with user set, gives it credentials of its own. */
static int move_off_origin(const courier_response *resp, courier_outgoing *next, void *user) {
    (void)resp;
    char url[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/echo", other_port);
    courier_outgoing_set_url(next, url);
    if (user) courier_outgoing_set_header(next, "Authorization", "Bearer for-the-other-one");
    return COURIER_REDIRECT_FOLLOW;
}

/* Follows every hop as the rules made it. */
static int move_nowhere(const courier_response *resp, courier_outgoing *next, void *user) {
    (void)resp, (void)next, (void)user;
    return COURIER_REDIRECT_FOLLOW;
}

/* Authorization, Cookie and Proxy-Authorization never reach another origin; same origin keeps them. */
static void test_redirect_drops_credentials_off_origin(void) {
    cts_server *other = NULL;
    REQUIRE(cts_server_start(&other, "127.0.0.1", 0) == 0);
    courier_engine *e = th_engine(NULL);
    if (!e) {
        cts_server_stop(other);
        return;
    }
    char path[256];
    snprintf(path, sizeof path, "/redirect?to=http%%3A%%2F%%2F127.0.0.1%%3A%d%%2Fecho&status=307", cts_server_port(other));
    courier_request *r = req("GET", path);
    courier_request_add_header(r, "Authorization", "Bearer secret");
    courier_request_add_header(r, "Cookie", "session=1");
    courier_request_add_header(r, "Proxy-Authorization", "Basic eDp5");
    courier_request_add_header(r, "X-Keep", "yes");
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, r, &resp, NULL), COURIER_OK);
    json_t *doc = echo_of(resp);
    CHECK(doc != NULL);
    CHECK_STR(echo_header(doc, "X-Keep"), "yes");
    CHECK(echo_header(doc, "Authorization") == NULL);
    CHECK(echo_header(doc, "Cookie") == NULL);
    CHECK(echo_header(doc, "Proxy-Authorization") == NULL);
    json_decref(doc);
    courier_response_free(resp);

    /* Same origin: kept. */
    r = req("GET", "/redirect?to=/echo");
    courier_request_add_header(r, "Authorization", "Bearer secret");
    resp = NULL;
    CHECK_EQ(send_req(e, r, &resp, NULL), COURIER_OK);
    doc = echo_of(resp);
    CHECK_STR(echo_header(doc, "Authorization"), "Bearer secret");
    json_decref(doc);
    courier_response_free(resp);

    /* A hook that moves the hop to another origin: the caller's credentials stay behind, and a
     * value the hook set itself goes. */
    other_port = cts_server_port(other);
    for (int own = 0; own < 2; own++) {
        r = req("GET", "/redirect?to=/echo");
        courier_request_add_header(r, "Authorization", "Bearer secret");
        courier_request_set_redirect_hook(r, move_off_origin, own ? (void *)1 : NULL, NULL);
        resp = NULL;
        CHECK_EQ(send_req(e, r, &resp, NULL), COURIER_OK);
        doc = echo_of(resp);
        REQUIRE(doc);
        if (own) CHECK_STR(echo_header(doc, "Authorization"), "Bearer for-the-other-one");
        else CHECK(echo_header(doc, "Authorization") == NULL);
        json_decref(doc);
        courier_response_free(resp);
    }
    courier_engine_close(e);
    cts_server_stop(other);
}

/* A body streamed from a file is not sent twice: 307 fails with its own code, and the server never
 * received an empty request; a 303 (no body to send again) is followed. */
static void test_redirect_body_not_replayable(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char file[600];
    snprintf(file, sizeof file, "%s/body.txt", th_tmpdir());
    FILE *f = fopen(file, "wb");
    REQUIRE(f);
    fputs("from a file", f);
    fclose(f);
    cts_server *s = th_server();
    long before = cts_server_path_count(s, "/echo/file");
    courier_request *r = req("PUT", "/redirect?to=/echo/file&status=307");
    courier_request_set_body_file(r, file, "text/plain");
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, r, &resp, NULL), COURIER_E_BODY_NOT_REPLAYABLE);
    CHECK_EQ(courier_response_status(resp), 307);
    CHECK_EQ(cts_server_path_count(s, "/echo/file"), before);
    courier_response_free(resp);
    resp = NULL;
    r = req("PUT", "/redirect?to=/echo/file&status=303");
    courier_request_set_body_file(r, file, "text/plain");
    CHECK_EQ(send_req(e, r, &resp, NULL), COURIER_OK);
    CHECK_STR(courier_response_method(resp), "GET");
    courier_response_free(resp);
    courier_engine_close(e);
}

static void write_only_cache(courier_config *c) { courier_config_set_cache_policy(c, COURIER_CACHE_WRITE_ONLY); }

/* Each hop goes through the cache: a write-only cache holds the 302 and the final answer. */
static void test_redirect_hops_go_through_cache(void) {
    courier_engine *e = th_engine(write_only_cache);
    REQUIRE(e);
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, req("GET", "/redirect?to=/json"), &resp, NULL), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 200);
    courier_response_free(resp);
    int64_t bytes = 0, count = 0;
    CHECK_EQ(courier_cache_size(&bytes, &count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 2);
    courier_engine_close(e);
}

/* A download through a redirect: the file is the final answer's body, not the 3xx's. */
static void test_redirect_download(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char file[600];
    snprintf(file, sizeof file, "%s/download.bin", th_tmpdir());
    courier_request *r = req("GET", "/redirect?to=/bytes/1000&status=308");
    courier_request_set_download_file(r, file, 0);
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, r, &resp, NULL), COURIER_OK);
    CHECK_STR(courier_response_file(resp), file);
    FILE *f = fopen(file, "rb");
    REQUIRE(f);
    fseek(f, 0, SEEK_END);
    CHECK_EQ(ftell(f), 1000);
    fclose(f);
    courier_response_free(resp);
    /* A chain that ends in an error leaves no file (the 3xx was never a download). */
    snprintf(file, sizeof file, "%s/download-404.bin", th_tmpdir());
    r = req("GET", "/redirect?to=/status/404&status=307");
    courier_request_set_download_file(r, file, 0);
    resp = NULL;
    CHECK_EQ(send_req(e, r, &resp, NULL), COURIER_E_HTTP_STATUS);
    CHECK(access(file, F_OK) != 0);
    courier_response_free(resp);
    courier_engine_close(e);
}

/* ---- HTTPS to HTTP: openssl s_server -HTTP answers a file holding a whole response ------------- */

static pid_t tls_pid;
static void stop_tls(void) {
    if (tls_pid > 0) {
        kill(tls_pid, SIGTERM);
        waitpid(tls_pid, NULL, 0);
        tls_pid = 0;
    }
}

/* Starts a TLS server whose /down answers a 302 to the plain test server; returns its port or 0. */
static int start_downgrade_server(void) {
    const char *dir = th_tmpdir();
    char cmd[2048], path[700];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 2 "
             "-subj /CN=localhost -addext 'subjectAltName=IP:127.0.0.1' >/dev/null 2>&1",
             dir);
    if (system(cmd) != 0) return 0;
    snprintf(path, sizeof path, "%s/down", dir);
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fprintf(f, "HTTP/1.0 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n", th_url("/echo/down"));
    fclose(f);
    int port = th_free_port();
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    char *argv[] = {"openssl", "s_server", "-accept", ports, "-cert", "cert.pem", "-key", "key.pem", "-HTTP", "-quiet",
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addchdir_np(&fa, dir);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawnp(&tls_pid, "openssl", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return 0;
    atexit(stop_tls);
    for (int i = 0; i < 500 && !th_can_connect(port); i++) usleep(10000);
    return th_can_connect(port) ? port : 0;
}

static void insecure(courier_config *c) { courier_config_set_insecure(c, 1); }

static void test_redirect_downgrade_refused_unless_allowed(void) {
    int port = start_downgrade_server();
    REQUIRE(port);
    courier_engine *e = th_engine(insecure);
    REQUIRE(e);
    char url[128];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/down", port);
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(send_req(e, req("GET", url), &resp, &err), COURIER_E_REDIRECT_REFUSED);
    CHECK_EQ(courier_response_status(resp), 302);
    courier_response_free(resp);
    resp = NULL;
    courier_request *r = req("GET", url);
    courier_request_set_allow_redirect_downgrade(r, 1);
    CHECK_EQ(send_req(e, r, &resp, &err), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 200);
    CHECK_CONTAINS(courier_response_url(resp), "http://127.0.0.1");
    courier_response_free(resp);
    courier_engine_close(e);
    stop_tls();
}

static void engine_redirect_settings(courier_config *c) {
    courier_config_set_max_redirects(c, 2);
    courier_config_set_redirect_hook(c, hook, NULL, NULL);
    courier_config_set_allow_redirect_downgrade(c, 1);
    courier_config_set_insecure(c, 1);
}

/* The engine's redirect settings apply to every request that sets none of its own, and a request's
 * own setting replaces the engine's; bad values are refused. */
static void test_engine_redirect_settings(void) {
    courier_config *bad = NULL;
    CHECK_EQ(courier_config_new(&bad), COURIER_OK);
    CHECK_EQ(courier_config_set_max_redirects(bad, -1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_max_redirects(NULL, 1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_allow_redirect_downgrade(NULL, 1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_redirect_hook(NULL, hook, NULL, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_config_free(bad);

    courier_engine *e = th_engine(engine_redirect_settings);
    REQUIRE(e);
    courier_response *resp = NULL;
    courier_error err;
    /* the engine's maximum (2) */
    hook_calls = 0;
    hook_verdict = COURIER_REDIRECT_STOP;
    courier_request *r = req("GET", "/redirect-chain/3");
    courier_request_set_redirect_hook(r, NULL, NULL, NULL); /* NULL: the engine's hook stays */
    CHECK_EQ(send_req(e, r, &resp, &err), COURIER_OK); /* the engine's hook stopped at the first */
    CHECK_EQ(hook_calls, 1);
    CHECK_EQ(courier_response_status(resp), 302);
    courier_response_free(resp);
    resp = NULL;
    hook_verdict = COURIER_REDIRECT_STOP;
    r = req("GET", "/redirect-chain/3");
    courier_request_set_redirect_hook(r, move_nowhere, NULL, NULL); /* the request's hook replaces it */
    CHECK_EQ(send_req(e, r, &resp, &err), COURIER_E_TOO_MANY_REDIRECTS);
    CHECK_EQ(hook_calls, 1); /* the engine's hook was not asked */
    CHECK_EQ(courier_response_redirect_count(resp), 2);
    courier_response_free(resp);
    resp = NULL;
    r = req("GET", "/redirect-chain/3");
    courier_request_set_redirect_hook(r, move_nowhere, NULL, NULL);
    courier_request_set_max_redirects(r, 3); /* the request's maximum replaces the engine's */
    CHECK_EQ(send_req(e, r, &resp, &err), COURIER_OK);
    CHECK_EQ(courier_response_redirect_count(resp), 3);
    courier_response_free(resp);
    courier_engine_close(e);

    /* the engine's downgrade permission */
    int port = start_downgrade_server();
    REQUIRE(port);
    e = th_engine(engine_redirect_settings);
    REQUIRE(e);
    char url[128];
    snprintf(url, sizeof url, "https://127.0.0.1:%d/down", port);
    resp = NULL;
    r = req("GET", url);
    courier_request_set_redirect_hook(r, move_nowhere, NULL, NULL);
    CHECK_EQ(send_req(e, r, &resp, &err), COURIER_OK);
    CHECK_EQ(courier_response_status(resp), 200);
    courier_response_free(resp);
    courier_engine_close(e);
    stop_tls();
}

/* ---- framing (RFC 9112 6) and how failures are coded ------------------------------------------- */

static void http_cache(courier_config *c) { courier_config_set_cache_policy(c, COURIER_CACHE_HTTP); }
static void first_cache(courier_config *c) { courier_config_set_cache_policy(c, COURIER_CACHE_CACHE_FIRST); }

static int64_t cache_count(courier_engine *e) {
    int64_t bytes = 0, count = -1;
    courier_cache_size(&bytes, &count, e, NULL);
    return count;
}

/* A header block that never ended is a partial response, never a success, never stored. */
static void test_unended_header_block_is_partial(void) {
    courier_engine *e = th_engine(http_cache);
    REQUIRE(e);
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, req("GET", "/raw/unterminated-headers"), &resp, NULL), COURIER_E_PARTIAL_RESPONSE);
    CHECK(resp == NULL);
    CHECK_EQ(cache_count(e), 0);
    courier_engine_close(e);
    e = th_engine(first_cache);
    REQUIRE(e);
    CHECK_EQ(send_req(e, req("GET", "/raw/status-only"), &resp, NULL), COURIER_E_PARTIAL_RESPONSE);
    CHECK_EQ(cache_count(e), 0);
    courier_engine_close(e);
}

static void test_conflicting_content_length(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, req("GET", "/raw/two-content-length"), &resp, NULL), COURIER_E_PROTOCOL);
    CHECK_EQ(send_req(e, req("GET", "/raw/same-content-length"), &resp, NULL), COURIER_OK);
    size_t len = 0;
    const uint8_t *b = courier_response_body(resp, &len);
    CHECK_EQ(len, 5);
    CHECK(memcmp(b, "hello", 5) == 0);
    courier_response_free(resp);
    courier_engine_close(e);
}

static void test_garbage_status_lines_are_protocol_errors(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    const char *paths[] = {"/raw/icy", "/raw/binary", "/raw/negative-status", "/raw/long-status"};
    for (size_t i = 0; i < 4; i++) {
        courier_response *resp = NULL;
        int rc = send_req(e, req("GET", paths[i]), &resp, NULL);
        if (rc != COURIER_E_PROTOCOL) th_fail(__FILE__, __LINE__, "%s: code %d", paths[i], rc);
        courier_response_free(resp);
    }
    courier_engine_close(e);
}

static void test_header_too_large(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(send_req(e, req("GET", "/raw/big-header/200000"), &resp, &err), COURIER_E_HEADERS_TOO_LARGE);
    CHECK_EQ(send_req(e, req("GET", "/raw/big-header/80000"), &resp, &err), COURIER_E_HEADERS_TOO_LARGE);
    CHECK_EQ(send_req(e, req("GET", "/raw/big-header/1000"), &resp, NULL), COURIER_OK);
    CHECK_EQ(strlen(courier_response_header(resp, "X-Big")), 1000);
    courier_response_free(resp);
    courier_engine_close(e);
}

/* Each failure coded by where the fault is: not reached, cut off, or not HTTP. */
static void test_failure_codes(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/", th_free_port());
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, req("GET", url), &resp, NULL), COURIER_E_CANNOT_CONNECT);
    CHECK_EQ(send_req(e, req("GET", "/close-mid-body"), &resp, NULL), COURIER_E_PARTIAL_RESPONSE);
    CHECK_EQ(send_req(e, req("GET", "/reset"), &resp, NULL), COURIER_E_NETWORK);
    CHECK_EQ(send_req(e, req("GET", "/raw/empty"), &resp, NULL), COURIER_E_NETWORK); /* reached, no reply */
    CHECK_EQ(send_req(e, req("GET", "/raw/bad-gzip"), &resp, NULL), COURIER_E_PROTOCOL);
    courier_engine_close(e);
}

/* ---- timeouts ------------------------------------------------------------------------------------ */

/* A listener whose accept queue is full: connects to it hang (the SYN is dropped). */
static int full_listener(int *filler, int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 0) || getsockname(fd, (struct sockaddr *)&a, &al)) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    *filler = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(*filler, (struct sockaddr *)&a, sizeof a)) {
        close(*filler);
        close(fd);
        return -1;
    }
    return fd;
}

static void test_connect_timeout(void) {
    int filler = -1, port = 0;
    int lfd = full_listener(&filler, &port);
    REQUIRE(lfd >= 0);
    courier_engine *e = th_engine(NULL);
    if (e) {
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
        courier_request *r = req("GET", url);
        courier_request_set_timeout(r, COURIER_TIMEOUT_CONNECT, 200);
        courier_error err;
        CHECK_EQ(send_req(e, r, NULL, &err), COURIER_E_TIMEOUT);
        CHECK_EQ(courier_error_timeout_kind(&err), COURIER_TIMEOUT_CONNECT);
        courier_engine_close(e);
    }
    close(filler);
    close(lfd);
}

static void idle_300(courier_config *c) { courier_config_set_timeout(c, COURIER_TIMEOUT_IDLE, 300); }

static void test_idle_timeout(void) {
    courier_engine *e = th_engine(idle_300);
    REQUIRE(e);
    courier_error err;
    /* No answer at all, then a body that stops half way. */
    CHECK_EQ(send_req(e, req("GET", "/hang"), NULL, &err), COURIER_E_TIMEOUT);
    CHECK_EQ(courier_error_timeout_kind(&err), COURIER_TIMEOUT_IDLE);
    CHECK_EQ(send_req(e, req("GET", "/slow-body/5000"), NULL, &err), COURIER_E_TIMEOUT);
    CHECK_EQ(courier_error_timeout_kind(&err), COURIER_TIMEOUT_IDLE);
    /* A request may turn it off (bytes come every 100 ms anyway). */
    courier_request *r = req("GET", "/slow-body/100");
    courier_request_set_timeout(r, COURIER_TIMEOUT_IDLE, 0);
    CHECK_EQ(send_req(e, r, NULL, &err), COURIER_OK);
    courier_engine_close(e);
}

static int slow_hook(const courier_response *resp, courier_outgoing *next, void *user) {
    (void)resp, (void)next, (void)user;
    usleep(150 * 1000); /* time passes between the hops */
    return COURIER_REDIRECT_FOLLOW;
}

/* The total timeout bounds the whole chain, not each hop. */
static void test_total_timeout_spans_redirects(void) {
    courier_engine *e = th_engine(NULL);
    REQUIRE(e);
    courier_request *r = req("GET", "/redirect-chain/6");
    courier_request_set_timeout(r, COURIER_TIMEOUT_TOTAL, 500);
    courier_request_set_redirect_hook(r, slow_hook, NULL, NULL);
    courier_error err;
    courier_response *resp = NULL;
    CHECK_EQ(send_req(e, r, &resp, &err), COURIER_E_TIMEOUT);
    CHECK_EQ(courier_error_timeout_kind(&err), COURIER_TIMEOUT_TOTAL);
    courier_response_free(resp);
    courier_engine_close(e);
}

/* A server that reads a request body slowly (a small receive buffer, a pause between reads) and
 * answers only at the end. */
typedef struct slow_reader {
    int lfd;
    pthread_t th;
} slow_reader;

static void *slow_reader_main(void *arg) {
    slow_reader *sr = arg;
    int fd = accept(sr->lfd, NULL, NULL);
    if (fd < 0) return NULL;
    char buf[16384];
    size_t got = 0, head_end = 0;
    long long length = -1, body = 0;
    char head[8192];
    while (length < 0) { /* the header block */
        ssize_t n = recv(fd, head + got, sizeof head - 1 - got, 0);
        if (n <= 0) goto out;
        got += (size_t)n;
        head[got] = 0;
        char *end = strstr(head, "\r\n\r\n");
        if (!end) continue;
        head_end = (size_t)(end + 4 - head);
        char *cl = strcasestr(head, "Content-Length:");
        length = cl ? atoll(cl + 15) : 0;
        body = (long long)(got - head_end);
    }
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (body < length) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) goto out;
        body += n;
        clock_gettime(CLOCK_MONOTONIC, &now);
        /* Slowly (about 16 MB/s at most) for 2.5 s, well past the 1 s idle time, then at full speed:
           what the kernel buffered after the client's last write drains at once, however slowly a
           loaded machine runs this thread (a fixed 1 ms pause to the end flaked: 4 MiB left in the
           socket buffers took over 1 s to drain under load, and the idle timeout fired). */
        if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 < 2500) usleep(1000);
    }
    static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    send(fd, answer, sizeof answer - 1, MSG_NOSIGNAL);
out:
    close(fd);
    return NULL;
}

static int slow_reader_start(slow_reader *sr) {
    sr->lfd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 16384;
    setsockopt(sr->lfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(sr->lfd, (struct sockaddr *)&a, sizeof a) || listen(sr->lfd, 4) ||
        getsockname(sr->lfd, (struct sockaddr *)&a, &al) || pthread_create(&sr->th, NULL, slow_reader_main, sr)) {
        close(sr->lfd);
        return 0;
    }
    return ntohs(a.sin_port);
}

static void idle_1000(courier_config *c) { courier_config_set_timeout(c, COURIER_TIMEOUT_IDLE, 1000); }

/* A request body still going out is not idle: an upload that takes longer than the idle time (24 MiB,
 * read at about 16 MB/s at most for the first 2.5 s) succeeds, though no byte comes back until its
 * end. */
static void test_idle_timeout_counts_upload(void) {
    slow_reader sr;
    int port = slow_reader_start(&sr);
    REQUIRE(port);
    courier_engine *e = th_engine(idle_1000);
    if (e) {
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d/upload", port);
        size_t len = 24u * 1024 * 1024;
        char *body = calloc(1, len);
        courier_request *r = req("POST", url);
        courier_request_set_body(r, body, len, NULL);
        free(body);
        courier_error err;
        courier_response *resp = NULL;
        CHECK_EQ(send_req(e, r, &resp, &err), COURIER_OK);
        CHECK_EQ(courier_response_status(resp), 200);
        courier_response_free(resp);
        courier_engine_close(e);
    }
    pthread_join(sr.th, NULL);
    close(sr.lfd);
}

static void test_total_timeout(void) {
    courier_engine *e = th_engine(idle_300);
    REQUIRE(e);
    courier_error err;
    /* Bytes trickle every 100 ms (never idle for 300), the whole takes far longer than 400 ms. */
    courier_request *r = req("GET", "/bytes/100000?rate=1000");
    courier_request_set_timeout(r, COURIER_TIMEOUT_TOTAL, 400);
    CHECK_EQ(send_req(e, r, NULL, &err), COURIER_E_TIMEOUT);
    CHECK_EQ(courier_error_timeout_kind(&err), COURIER_TIMEOUT_TOTAL);
    CHECK_EQ(courier_request_set_timeout(NULL, COURIER_TIMEOUT_TOTAL, 1), COURIER_E_INVALID_ARGUMENT);
    courier_config *c = NULL;
    courier_config_new(&c);
    CHECK_EQ(courier_config_set_timeout(c, (courier_timeout_kind)9, 1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_timeout(c, COURIER_TIMEOUT_IDLE, -1), COURIER_E_INVALID_ARGUMENT);
    courier_config_free(c);
    courier_engine_close(e);
}

TESTS_MAIN(T(test_redirect_matrix), T(test_redirect_drops_all_content_fields_with_the_body),
           T(test_cancel_reaches_the_hop_in_flight), T(test_coalesced_requests_follow_each), T(test_redirect_not_followed), T(test_mock_redirect_not_followed),
           T(test_redirect_bad_location), T(test_too_many_redirects), T(test_engine_redirect_settings),
           T(test_redirect_hook), T(test_redirect_drops_credentials_off_origin), T(test_redirect_body_not_replayable),
           T(test_redirect_hops_go_through_cache), T(test_redirect_download), T(test_redirect_downgrade_refused_unless_allowed),
           T(test_unended_header_block_is_partial), T(test_conflicting_content_length),
           T(test_garbage_status_lines_are_protocol_errors), T(test_header_too_large), T(test_failure_codes),
           T(test_connect_timeout), T(test_idle_timeout), T(test_total_timeout),
           T(test_total_timeout_spans_redirects), T(test_idle_timeout_counts_upload))
