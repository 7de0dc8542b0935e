/*
 * auth_test.c — authentication and proxies over the loopback server: Basic and Digest (the server
 * checks the Digest answer), "any safe" picking the strongest scheme offered, wrong credentials,
 * engine and request credentials, credentials kept from another origin, challenge handlers (called
 * once, answered now or later from another thread, declined, never for another origin, cancel and
 * close while waiting, 407), and proxies (engine and request, no-proxy list, the environment, "" for
 * direct, proxy credentials and 407, SOCKS5 with and without credentials, failures' codes).
 */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct opts {
    const char *user, *password;
    unsigned schemes;
    const char *proxy, *no_proxy;
    const char *proxy_user, *proxy_password;
    courier_challenge_fn handler;
    void *handler_user;
} opts;

static courier_engine *open_with(const opts *o) {
    courier_config *cfg = NULL;
    courier_engine *e = NULL;
    courier_error err;
    if (courier_config_new(&cfg) != COURIER_OK) return NULL;
    courier_config_set_base_url(cfg, th_base());
    courier_config_set_temporary_store(cfg, 1); /* each engine a jar of its own */
    if (o && o->user) CHECK_EQ(courier_config_set_credentials(cfg, o->user, o->password, o->schemes), COURIER_OK);
    if (o && o->proxy) CHECK_EQ(courier_config_set_proxy(cfg, o->proxy, o->no_proxy), COURIER_OK);
    if (o && o->proxy_user)
        CHECK_EQ(courier_config_set_proxy_credentials(cfg, o->proxy_user, o->proxy_password, COURIER_AUTH_BASIC), COURIER_OK);
    if (o && o->handler) courier_config_set_challenge_handler(cfg, o->handler, o->handler_user, NULL);
    if (courier_engine_open(&e, cfg, &err) != COURIER_OK) th_fail(__FILE__, __LINE__, "open: %s", err.message);
    courier_config_free(cfg);
    return e;
}

/* Sends r; returns the code, the status in *status and the body (caller frees) in *body. */
static int send_req(courier_engine *e, courier_request *r, int *status, char **body, courier_error *err) {
    courier_response *resp = NULL;
    int rc = courier_send_sync(&resp, e, r, err);
    if (status) *status = courier_response_status(resp);
    if (body) {
        size_t len = 0;
        const uint8_t *b = courier_response_body(resp, &len);
        *body = resp ? strndup((const char *)b, len) : NULL;
    }
    courier_response_free(resp);
    return rc;
}

static int get(courier_engine *e, const char *target, int *status, char **body) {
    courier_request *r = NULL;
    if (courier_request_new(&r, "GET", target) != COURIER_OK) return COURIER_E_NO_MEMORY;
    courier_error err;
    int rc = send_req(e, r, status, body, &err);
    courier_request_free(r);
    return rc;
}

static const char *proxy_url(const char *scheme) {
    static char buf[4][80];
    static int i;
    char *b = buf[i++ % 4];
    snprintf(b, 80, "%s://127.0.0.1:%d", scheme, cts_server_port(th_server()));
    return b;
}

/* ---- credentials ----------------------------------------------------------------------------- */

static void test_basic_and_digest_checked_by_the_server(void) {
    courier_engine *e = open_with(&(opts){.user = "alice", .password = "s3cret", .schemes = COURIER_AUTH_BASIC});
    REQUIRE(e);
    int status = 0;
    char *body = NULL;
    CHECK_EQ(get(e, "/basic-auth/alice/s3cret", &status, &body), COURIER_OK);
    CHECK_CONTAINS(body, "\"scheme\":\"Basic\"");
    free(body);
    courier_engine_close(e);

    e = open_with(&(opts){.user = "alice", .password = "s3cret", .schemes = COURIER_AUTH_DIGEST});
    REQUIRE(e);
    CHECK_EQ(get(e, "/digest-auth/alice/s3cret?x=1", &status, &body), COURIER_OK); /* uri with a query */
    CHECK_CONTAINS(body, "\"scheme\":\"Digest\"");
    free(body);
    /* A POST: the method is in the Digest hash; the body is sent again after the challenge. */
    courier_request *r = NULL;
    courier_request_new(&r, "POST", "/digest-auth/alice/s3cret");
    courier_request_set_body(r, "payload", 7, "text/plain");
    CHECK_EQ(send_req(e, r, &status, &body, NULL), COURIER_OK);
    CHECK_CONTAINS(body, "\"scheme\":\"Digest\"");
    free(body);
    courier_request_free(r);
    /* Wrong password: the server's check fails: 401, HTTP_STATUS. */
    CHECK_EQ(get(e, "/digest-auth/alice/other", &status, NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(status, 401);
    /* Digest alone does not answer a Basic-only server. */
    CHECK_EQ(get(e, "/basic-auth/alice/s3cret", &status, NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(status, 401);
    courier_engine_close(e);
}

static void test_any_safe_picks_digest_and_any_allows_basic(void) {
    courier_engine *e = open_with(&(opts){.user = "bob", .password = "pw", .schemes = COURIER_AUTH_ANY_SAFE});
    REQUIRE(e);
    int status = 0;
    char *body = NULL;
    CHECK_EQ(get(e, "/any-auth/bob/pw", &status, &body), COURIER_OK); /* offers Digest and Basic */
    CHECK_CONTAINS(body, "\"scheme\":\"Digest\"");
    free(body);
    CHECK_EQ(get(e, "/basic-auth/bob/pw", &status, NULL), COURIER_E_HTTP_STATUS); /* never Basic */
    CHECK_EQ(status, 401);
    courier_engine_close(e);

    e = open_with(&(opts){.user = "bob", .password = "pw", .schemes = COURIER_AUTH_ANY});
    REQUIRE(e);
    CHECK_EQ(get(e, "/any-auth/bob/pw", &status, &body), COURIER_OK);
    CHECK_CONTAINS(body, "\"scheme\":\"Digest\""); /* the strongest offered */
    free(body);
    CHECK_EQ(get(e, "/basic-auth/bob/pw", &status, &body), COURIER_OK);
    CHECK_CONTAINS(body, "\"scheme\":\"Basic\"");
    free(body);
    courier_engine_close(e);
}

static void test_ntlm_where_libcurl_has_it(void) {
    if (!(courier_auth_available() & COURIER_AUTH_NTLM)) {
        CHECK_EQ(courier_config_set_credentials(NULL, "u", "p", COURIER_AUTH_NTLM), COURIER_E_INVALID_ARGUMENT);
        return; /* this libcurl has no NTLM: nothing more to see */
    }
    /* Offered NTLM, "any safe" starts it (the negotiate message). */
    courier_engine *e = open_with(&(opts){.user = "u", .password = "p", .schemes = COURIER_AUTH_ANY_SAFE});
    REQUIRE(e);
    char *body = NULL;
    int status = 0;
    CHECK_EQ(get(e, "/ntlm-start", &status, &body), COURIER_OK);
    CHECK_CONTAINS(body, "\"ntlm_negotiate\":true");
    free(body);
    courier_engine_close(e);
    /* Credentials for Digest alone do not answer NTLM: the 401 stays. */
    e = open_with(&(opts){.user = "u", .password = "p", .schemes = COURIER_AUTH_DIGEST});
    REQUIRE(e);
    CHECK_EQ(get(e, "/ntlm-start", &status, NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(status, 401);
    courier_engine_close(e);
}

static void test_request_credentials_replace_the_engines_and_stay_at_their_origin(void) {
    courier_engine *e = open_with(&(opts){.user = "engine", .password = "e", .schemes = COURIER_AUTH_BASIC});
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/basic-auth/req/r");
    CHECK_EQ(courier_request_set_credentials(r, "req", "r", COURIER_AUTH_DIGEST | COURIER_AUTH_BASIC), COURIER_OK);
    char *body = NULL;
    int status = 0;
    CHECK_EQ(send_req(e, r, &status, &body, NULL), COURIER_OK);
    CHECK_CONTAINS(body, "\"user\":\"req\"");
    free(body);
    courier_request_free(r);
    /* A redirect to another origin (localhost is not 127.0.0.1): no Authorization there. */
    char target[300];
    snprintf(target, sizeof target, "/redirect?to=http%%3A%%2F%%2Flocalhost%%3A%d%%2Fecho", cts_server_port(th_server()));
    CHECK_EQ(get(e, target, &status, &body), COURIER_OK);
    CHECK(body && strstr(body, "\"path\":\"/echo\"") && !strstr(body, "Authorization"));
    free(body);
    /* The same origin gets them. */
    CHECK_EQ(get(e, "/echo", &status, &body), COURIER_OK);
    CHECK_CONTAINS(body, "Authorization");
    free(body);
    courier_engine_close(e);
}

static void test_credential_errors(void) {
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    CHECK((courier_auth_available() & (COURIER_AUTH_BASIC | COURIER_AUTH_DIGEST)) == (COURIER_AUTH_BASIC | COURIER_AUTH_DIGEST));
    CHECK_EQ(courier_config_set_credentials(cfg, "u", "p", 0), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_credentials(cfg, "u", "p", 0x40), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_credentials(cfg, "a:b", "p", COURIER_AUTH_BASIC), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_credentials(cfg, "a:b", "p", COURIER_AUTH_DIGEST), COURIER_OK);
    CHECK_EQ(courier_config_set_credentials(cfg, "u", "p\r\nX: y", COURIER_AUTH_BASIC), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_config_set_credentials(cfg, NULL, NULL, 0), COURIER_OK); /* removed */
    CHECK_EQ(courier_config_set_credentials(NULL, "u", "p", COURIER_AUTH_BASIC), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_proxy(cfg, "ftp://127.0.0.1:1", NULL), COURIER_E_INVALID_URL);
    CHECK_EQ(courier_config_set_proxy(cfg, "socks5://", NULL), COURIER_E_INVALID_URL);
    CHECK_EQ(courier_config_set_proxy(cfg, "http://h:1\r\n", NULL), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_config_set_proxy(cfg, "http://h:1", "a\nb"), COURIER_E_INVALID_HEADER);
    CHECK_EQ(courier_config_set_proxy(cfg, "socks5h://h:1080", "localhost,10.0.0.0/8"), COURIER_OK);
    CHECK_EQ(courier_config_set_proxy(cfg, "", NULL), COURIER_OK);
    courier_config_free(cfg);
    CHECK_EQ(courier_challenge_answer(NULL, "u", "p", COURIER_AUTH_BASIC), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_challenge_status(NULL), 0);
}

/* ---- challenge handlers ---------------------------------------------------------------------- */

typedef struct handler_state {
    atomic_int calls;
    int status;
    char url[300];
    char header[300];
    const char *user, *password; /* the answer; user NULL declines */
    unsigned schemes;
    int later;                   /* answer from another thread, after the handler returned */
    courier_challenge *kept;     /* not answered at all (the test answers it) */
    int keep;
    uint64_t request_id;         /* courier_challenge_request_id of the last challenge */
} handler_state;

typedef struct later_answer {
    courier_challenge *ch;
    handler_state *s;
} later_answer;

static void *answer_later(void *arg) {
    later_answer *a = arg;
    courier_challenge_answer(a->ch, a->s->user, a->s->password, a->s->schemes);
    free(a);
    return NULL;
}

static void handler(courier_challenge *ch, void *user) {
    handler_state *s = user;
    s->request_id = courier_challenge_request_id(ch); /* before the count a waiting test reads */
    atomic_fetch_add(&s->calls, 1);
    s->status = courier_challenge_status(ch);
    snprintf(s->url, sizeof s->url, "%s", courier_challenge_url(ch));
    snprintf(s->header, sizeof s->header, "%s", courier_challenge_header(ch));
    if (s->keep) {
        s->kept = ch;
        return;
    }
    if (s->later) {
        later_answer *a = malloc(sizeof *a);
        a->ch = ch;
        a->s = s;
        pthread_t th;
        pthread_create(&th, NULL, answer_later, a);
        pthread_detach(th);
        return;
    }
    courier_challenge_answer(ch, s->user, s->password, s->schemes);
}

static void test_challenge_handler_answers_once(void) {
    handler_state s = {.user = "carol", .password = "pw", .schemes = COURIER_AUTH_ANY};
    courier_engine *e = open_with(&(opts){.handler = handler, .handler_user = &s});
    REQUIRE(e);
    char *body = NULL;
    int status = 0;
    CHECK_EQ(get(e, "/digest-auth/carol/pw", &status, &body), COURIER_OK);
    CHECK_CONTAINS(body, "\"scheme\":\"Digest\"");
    free(body);
    CHECK_EQ(atomic_load(&s.calls), 1);
    CHECK_EQ(s.status, 401);
    CHECK_CONTAINS(s.header, "Digest realm=\"courier\"");
    CHECK_STR(s.url, th_url("/digest-auth/carol/pw"));

    /* Wrong credentials: the handler is not asked again; the 401 is the answer. */
    atomic_store(&s.calls, 0);
    s.password = "wrong";
    CHECK_EQ(get(e, "/basic-auth/carol/pw", &status, NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(status, 401);
    CHECK_EQ(atomic_load(&s.calls), 1);

    /* Declined: the 401 as it came. */
    atomic_store(&s.calls, 0);
    s.user = NULL;
    CHECK_EQ(get(e, "/basic-auth/carol/pw", &status, &body), COURIER_E_HTTP_STATUS);
    CHECK_EQ(status, 401);
    CHECK_CONTAINS(body, "\"authenticated\":false");
    free(body);
    CHECK_EQ(atomic_load(&s.calls), 1);

    /* Answered later from another thread. */
    atomic_store(&s.calls, 0);
    s.user = "carol";
    s.password = "pw";
    s.later = 1;
    CHECK_EQ(get(e, "/basic-auth/carol/pw", &status, &body), COURIER_OK);
    CHECK_CONTAINS(body, "\"scheme\":\"Basic\"");
    free(body);
    CHECK_EQ(atomic_load(&s.calls), 1);

    /* A response that is not 401/407 never asks. */
    atomic_store(&s.calls, 0);
    CHECK_EQ(get(e, "/status/403", &status, NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(atomic_load(&s.calls), 0);
    courier_engine_close(e);
}

static void test_challenge_handler_never_for_another_origin(void) {
    handler_state s = {.user = "dave", .password = "pw", .schemes = COURIER_AUTH_BASIC};
    courier_engine *e = open_with(&(opts){.handler = handler, .handler_user = &s});
    REQUIRE(e);
    char target[300];
    snprintf(target, sizeof target, "/redirect?to=http%%3A%%2F%%2Flocalhost%%3A%d%%2Fbasic-auth%%2Fdave%%2Fpw", cts_server_port(th_server()));
    int status = 0;
    CHECK_EQ(get(e, target, &status, NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(status, 401);
    CHECK_EQ(atomic_load(&s.calls), 0);
    /* A redirect within the origin: asked. */
    CHECK_EQ(get(e, "/redirect?to=/basic-auth/dave/pw", &status, NULL), COURIER_OK);
    CHECK_EQ(atomic_load(&s.calls), 1);
    courier_engine_close(e);
}

static void test_request_handler_replaces_the_engines(void) {
    handler_state engine_s = {.user = NULL}, req_s = {.user = "erin", .password = "pw", .schemes = COURIER_AUTH_BASIC};
    courier_engine *e = open_with(&(opts){.handler = handler, .handler_user = &engine_s});
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/basic-auth/erin/pw");
    courier_request_set_challenge_handler(r, handler, &req_s, NULL);
    CHECK_EQ(send_req(e, r, NULL, NULL, NULL), COURIER_OK);
    CHECK_EQ(atomic_load(&req_s.calls), 1);
    CHECK_EQ(atomic_load(&engine_s.calls), 0);
    courier_request_free(r);
    courier_engine_close(e);
}

static void done_cb(uint64_t id, int code, courier_response *resp, const courier_error *err, void *user) {
    (void)id;
    (void)err;
    courier_response_free(resp);
    atomic_store((atomic_int *)user, code == COURIER_OK ? 1 : code);
}

static void test_cancel_and_close_while_a_challenge_waits(void) {
    handler_state s = {.keep = 1};
    courier_engine *e = open_with(&(opts){.handler = handler, .handler_user = &s});
    REQUIRE(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/basic-auth/f/pw");
    atomic_int result = 0;
    uint64_t id = 0;
    REQUIRE(courier_send(&id, e, r, done_cb, &result, NULL) == COURIER_OK);
    for (int i = 0; i < 1000 && !atomic_load(&s.calls); i++) usleep(2000);
    REQUIRE(atomic_load(&s.calls) == 1);
    CHECK_EQ(s.request_id, id); /* the challenge names the send it belongs to */
    CHECK_EQ(courier_challenge_request_id(NULL), 0);
    int64_t queued = 0, active = 0;
    courier_engine_pending(&queued, &active, e);
    CHECK_EQ(queued, 1); /* waiting, off the wire */
    CHECK_EQ(courier_cancel(e, id), COURIER_OK);
    for (int i = 0; i < 1000 && !atomic_load(&result); i++) usleep(2000);
    CHECK_EQ(atomic_load(&result), COURIER_E_CANCELLED);
    CHECK_EQ(courier_challenge_answer(s.kept, "f", "pw", COURIER_AUTH_BASIC), COURIER_OK); /* a no-op now */

    /* Closing: the waiting request is cancelled; an answer after the close is a no-op. */
    atomic_store(&s.calls, 0);
    atomic_store(&result, 0);
    REQUIRE(courier_send(&id, e, r, done_cb, &result, NULL) == COURIER_OK);
    for (int i = 0; i < 1000 && !atomic_load(&s.calls); i++) usleep(2000);
    REQUIRE(atomic_load(&s.calls) == 1);
    courier_engine_close(e);
    CHECK_EQ(atomic_load(&result), COURIER_E_CANCELLED);
    CHECK_EQ(courier_challenge_answer(s.kept, NULL, NULL, 0), COURIER_OK);
    courier_request_free(r);
}

/* ---- proxies --------------------------------------------------------------------------------- */

static void test_engine_and_request_proxies(void) {
    int dead = th_free_port();
    char dead_proxy[64];
    snprintf(dead_proxy, sizeof dead_proxy, "http://127.0.0.1:%d", dead);
    courier_engine *e = open_with(&(opts){.proxy = proxy_url("http")});
    REQUIRE(e);
    char *body = NULL;
    int status = 0;
    CHECK_EQ(get(e, "http://site.test/echo?a=1", &status, &body), COURIER_OK);
    CHECK_CONTAINS(body, "\"proxy_target\":\"http://site.test/echo?a=1\"");
    free(body);
    courier_engine_close(e);

    /* The engine's proxy is dead; the request's own works; "" goes direct. */
    e = open_with(&(opts){.proxy = dead_proxy});
    REQUIRE(e);
    CHECK_EQ(get(e, "/echo", &status, NULL), COURIER_E_CANNOT_CONNECT);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "http://site.test/echo");
    CHECK_EQ(courier_request_set_proxy(r, proxy_url("http"), NULL), COURIER_OK);
    CHECK_EQ(send_req(e, r, &status, &body, NULL), COURIER_OK);
    CHECK_CONTAINS(body, "proxy_target");
    free(body);
    courier_request_free(r);
    courier_request_new(&r, "GET", "/echo");
    CHECK_EQ(courier_request_set_proxy(r, "", NULL), COURIER_OK);
    CHECK_EQ(send_req(e, r, &status, &body, NULL), COURIER_OK);
    CHECK(body && !strstr(body, "proxy_target"));
    free(body);
    courier_request_free(r);
    /* A pooled handle does not keep a request's proxy: the next request uses the engine's again. */
    CHECK_EQ(get(e, "/echo", &status, NULL), COURIER_E_CANNOT_CONNECT);
    courier_engine_close(e);

    /* The no-proxy list sends 127.0.0.1 direct. */
    e = open_with(&(opts){.proxy = dead_proxy, .no_proxy = "example.org, 127.0.0.1"});
    REQUIRE(e);
    CHECK_EQ(get(e, "/echo", &status, &body), COURIER_OK);
    CHECK(body && !strstr(body, "proxy_target"));
    free(body);
    courier_engine_close(e);
}

static void test_environment_read_when_nothing_is_set(void) {
    setenv("http_proxy", proxy_url("http"), 1);
    courier_engine *e = open_with(NULL);
    REQUIRE(e);
    char *body = NULL;
    int status = 0;
    CHECK_EQ(get(e, "http://site.test/echo", &status, &body), COURIER_OK);
    CHECK_CONTAINS(body, "proxy_target");
    free(body);
    courier_engine_close(e);
    /* "" means direct, whatever the environment says. */
    e = open_with(&(opts){.proxy = ""});
    REQUIRE(e);
    CHECK_EQ(get(e, "/echo", &status, &body), COURIER_OK);
    CHECK(body && !strstr(body, "proxy_target"));
    free(body);
    courier_engine_close(e);
    unsetenv("http_proxy");
}

static void test_proxy_credentials_and_407(void) {
    courier_engine *e = open_with(&(opts){.proxy = proxy_url("http")});
    REQUIRE(e);
    int status = 0;
    char *body = NULL;
    CHECK_EQ(get(e, "http://proxy-auth.test/echo", &status, NULL), COURIER_E_HTTP_STATUS);
    CHECK_EQ(status, 407);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "http://proxy-auth.test/echo");
    CHECK_EQ(courier_request_set_proxy_credentials(r, "proxyuser", "proxypass", COURIER_AUTH_BASIC), COURIER_OK);
    CHECK_EQ(send_req(e, r, &status, &body, NULL), COURIER_OK);
    CHECK_CONTAINS(body, "Proxy-Authorization");
    free(body);
    courier_request_free(r);
    courier_engine_close(e);

    e = open_with(&(opts){.proxy = proxy_url("http"), .proxy_user = "proxyuser", .proxy_password = "proxypass"});
    REQUIRE(e);
    CHECK_EQ(get(e, "http://proxy-auth.test/echo", &status, NULL), COURIER_OK);
    courier_engine_close(e);

    /* A 407 goes to the challenge handler, whose answer is the proxy's credentials. */
    handler_state s = {.user = "proxyuser", .password = "proxypass", .schemes = COURIER_AUTH_BASIC};
    e = open_with(&(opts){.proxy = proxy_url("http"), .handler = handler, .handler_user = &s});
    REQUIRE(e);
    CHECK_EQ(get(e, "http://proxy-auth.test/echo", &status, &body), COURIER_OK);
    CHECK_CONTAINS(body, "Proxy-Authorization");
    free(body);
    CHECK_EQ(atomic_load(&s.calls), 1);
    CHECK_EQ(s.status, 407);
    CHECK_CONTAINS(s.header, "Basic realm=\"proxy\"");
    courier_engine_close(e);

    /* A tunnel (https) the proxy refuses: COURIER_E_PROXY with the proxy's status. */
    e = open_with(&(opts){.proxy = proxy_url("http")});
    REQUIRE(e);
    courier_request_new(&r, "GET", "https://site.test/");
    courier_error err;
    CHECK_EQ(send_req(e, r, &status, NULL, &err), COURIER_E_PROXY);
    CHECK_EQ(err.http_status, 404);
    courier_request_free(r);
    courier_engine_close(e);
}

static void test_socks5(void) {
    courier_engine *e = open_with(&(opts){.proxy = proxy_url("socks5h")});
    REQUIRE(e);
    char *body = NULL;
    int status = 0;
    CHECK_EQ(get(e, "http://site.test/echo", &status, &body), COURIER_OK);
    CHECK_CONTAINS(body, "\"socks\":\"site.test:80\"");
    CHECK_CONTAINS(body, "\"socks_user\":\"\"");
    free(body);
    courier_error err;
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "http://refuse.test/echo");
    CHECK_EQ(send_req(e, r, NULL, NULL, &err), COURIER_E_PROXY);
    courier_request_free(r);
    courier_engine_close(e);

    e = open_with(&(opts){.proxy = proxy_url("socks5"), .proxy_user = "sock", .proxy_password = "pw"});
    REQUIRE(e);
    CHECK_EQ(get(e, "/echo", &status, &body), COURIER_OK); /* names resolved here: 127.0.0.1 */
    char want[64];
    snprintf(want, sizeof want, "\"socks\":\"127.0.0.1:%d\"", cts_server_port(th_server()));
    CHECK_CONTAINS(body, want);
    CHECK_CONTAINS(body, "\"socks_user\":\"sock:pw\"");
    free(body);
    courier_engine_close(e);
}

int main(int argc, char **argv) {
    unsetenv("http_proxy");
    unsetenv("all_proxy");
    unsetenv("ALL_PROXY");
    static const th_test tests[] = {
        T(test_basic_and_digest_checked_by_the_server),
        T(test_any_safe_picks_digest_and_any_allows_basic),
        T(test_ntlm_where_libcurl_has_it),
        T(test_request_credentials_replace_the_engines_and_stay_at_their_origin),
        T(test_credential_errors),
        T(test_challenge_handler_answers_once),
        T(test_challenge_handler_never_for_another_origin),
        T(test_request_handler_replaces_the_engines),
        T(test_cancel_and_close_while_a_challenge_waits),
        T(test_engine_and_request_proxies),
        T(test_environment_read_when_nothing_is_set),
        T(test_proxy_credentials_and_407),
        T(test_socks5),
    };
    return th_run(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
