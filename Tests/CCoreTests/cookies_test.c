/*
 * cookies_test.c — the engine's cookie jar over the loopback server: cookies a server sets come back
 * (across a redirect, across requests), survive an engine restart on the same store, are seen by a
 * second engine on the same store (another process: cookies_process_test.c), the API while
 * transfers run (also under TSan), follow libcurl's rules for Secure,
 * expiry and public suffixes (through the test server as a forward proxy, so the host is not
 * localhost), the API (list, set, remove, clear) and its errors, a frozen request replayed with the
 * jar of its resend, and the jar turned off.
 */
#include "cookies_common.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int list_count(courier_engine *e) {
    courier_cookie_list *l = NULL;
    if (courier_cookies_list(&l, e, NULL) != COURIER_OK) return -1;
    int n = (int)courier_cookie_list_count(l);
    courier_cookie_list_free(l);
    return n;
}

/* The value of the cookie named `name` in the jar ("" when absent; static buffer). */
static const char *jar_value(courier_engine *e, const char *name, courier_cookie *found) {
    static char value[256];
    value[0] = '\0';
    courier_cookie_list *l = NULL;
    if (courier_cookies_list(&l, e, NULL) != COURIER_OK) return "(error)";
    for (size_t i = 0; i < courier_cookie_list_count(l); i++) {
        courier_cookie c = {.size = sizeof c};
        courier_cookie_list_at(&c, l, i);
        if (strcmp(c.name, name) == 0) {
            snprintf(value, sizeof value, "%s", c.value);
            if (found) *found = c; /* strings dangle after the free: callers use the numbers only */
        }
    }
    courier_cookie_list_free(l);
    return value;
}

static void test_server_cookie_comes_back_across_redirect_and_requests(void) {
    courier_engine *e = open_on(NULL, 0, NULL);
    REQUIRE(e);
    /* /cookies/set answers 302 to /cookies: the cookie set by the first hop reaches the second. */
    char *body = get(e, "/cookies/set?session=abc&theme=dark", NULL);
    CHECK_CONTAINS(body, "session=abc");
    CHECK_CONTAINS(body, "theme=dark");
    free(body);
    body = cookies_seen(e, NULL); /* a later request of the same engine */
    CHECK_CONTAINS(body, "session=abc");
    free(body);
    CHECK_STR(jar_value(e, "theme", NULL), "dark");
    /* The server removes one (Max-Age=0): gone from the requests and from the jar. */
    body = get(e, "/cookies/delete?theme", NULL);
    CHECK(body && !strstr(body, "theme"));
    CHECK_CONTAINS(body, "session=abc");
    free(body);
    CHECK_STR(jar_value(e, "theme", NULL), "");
    CHECK_EQ(list_count(e), 1);
    courier_engine_close(e);
}

static void test_jar_survives_restart_on_the_same_store(void) {
    const char *store = th_tmpdir();
    courier_engine *e = open_on(store, 0, NULL);
    REQUIRE(e);
    free(get(e, "/cookies/set?kept=yes", NULL));
    courier_cookie c = {.size = sizeof c};
    courier_cookie_init(&c);
    c.domain = "127.0.0.1";
    c.name = "api";
    c.value = "v1";
    c.expires = (int64_t)time(NULL) + 3600;
    c.http_only = 1;
    CHECK_EQ(courier_cookies_set(e, &c, NULL), COURIER_OK);
    courier_engine_close(e);

    e = open_on(store, 0, NULL);
    REQUIRE(e);
    char *body = cookies_seen(e, NULL);
    CHECK_CONTAINS(body, "kept=yes");
    CHECK_CONTAINS(body, "api=v1");
    free(body);
    courier_cookie got = {.size = sizeof got};
    CHECK_STR(jar_value(e, "api", &got), "v1");
    CHECK_EQ(got.expires, c.expires);
    CHECK_EQ(got.http_only, 1);
    CHECK_EQ(got.include_subdomains, 0);
    CHECK_EQ(got.secure, 0);
    courier_engine_close(e);
}

static void test_two_engines_on_one_store_share_the_jar(void) {
    const char *store = th_tmpdir();
    courier_engine *a = open_on(store, 0, NULL), *b = open_on(store, 0, NULL);
    REQUIRE(a && b);
    free(get(b, "/cookies", NULL)); /* b has read the store already */
    free(get(a, "/cookies/set?from=a", NULL));
    char *body = cookies_seen(b, NULL); /* b re-reads what a wrote before sending */
    CHECK_CONTAINS(body, "from=a");
    free(body);
    /* Each writes its own cookie; neither loses the other's. */
    free(get(b, "/cookies/set?from_b=1", NULL));
    free(get(a, "/cookies/set?from_a=1", NULL));
    body = cookies_seen(b, NULL);
    CHECK_CONTAINS(body, "from_a=1");
    CHECK_CONTAINS(body, "from_b=1");
    free(body);
    CHECK_EQ(list_count(a), 3);
    courier_engine_close(a);
    courier_engine_close(b);
}

/* ---- threads: the API while transfers run ------------------------------------------------------ */

/* Another engine on the store changes the jar, and the sending engine's jar is listed (so re-read
 * from the store on this thread) while its worker sends: every request still carries the jar, and
 * under TSan no race. (The window a re-read without curl's cookie lock would leave is too narrow
 * for this test to hit reliably; the lock is there by construction, see cookies.c.) */
typedef struct api_args {
    courier_engine *sender, *other;
} api_args;

static void *api_loop(void *arg) {
    api_args *a = arg;
    for (int i = 0; i < 40; i++) {
        char value[16];
        snprintf(value, sizeof value, "v%d", i);
        courier_cookie c = {.size = sizeof c};
        courier_cookie_init(&c);
        c.domain = "127.0.0.1";
        c.name = "api";
        c.value = value;
        if (courier_cookies_set(a->other, &c, NULL) != COURIER_OK) return (void *)1;
        courier_cookie_list *l = NULL;
        if (courier_cookies_list(&l, a->sender, NULL) != COURIER_OK) return (void *)1;
        courier_cookie_list_free(l);
    }
    return NULL;
}

static void test_api_while_transfers_run(void) {
    const char *store = th_tmpdir();
    courier_engine *e = open_on(store, 0, NULL), *other = open_on(store, 0, NULL);
    REQUIRE(e && other);
    free(get(e, "/cookies/set?server=start", NULL));
    api_args args = {e, other};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, api_loop, &args) == 0);
    for (int i = 0; i < 40; i++) {
        char *body = get(e, "/cookies", NULL);
        CHECK_CONTAINS(body, "server=start");
        free(body);
    }
    void *failed = NULL;
    pthread_join(th, &failed);
    CHECK(failed == NULL);
    CHECK_STR(jar_value(e, "api", NULL), "v39");
    CHECK_STR(jar_value(e, "server", NULL), "start");
    courier_engine_close(e);
    courier_engine_close(other);
}

/* ---- libcurl's rules, on a host that is not localhost (through the server as a proxy) -------- */

static void test_secure_expiry_and_public_suffix_rules(void) {
    char proxy[64];
    snprintf(proxy, sizeof proxy, "http://127.0.0.1:%d", cts_server_port(th_server()));
    courier_engine *e = open_on(NULL, 0, proxy);
    REQUIRE(e);
    /* Over plain http, a Secure cookie is refused, a plain one kept. */
    free(get(e, "http://site.test/headers?Set-Cookie=plain%3D1%3B%20Path%3D%2F", NULL));
    free(get(e, "http://site.test/headers?Set-Cookie=sec%3D1%3B%20Secure%3B%20Path%3D%2F", NULL));
    CHECK_STR(jar_value(e, "plain", NULL), "1");
    CHECK_STR(jar_value(e, "sec", NULL), "");
    /* A Secure cookie set through the API is not sent over http; a plain one is. */
    courier_cookie c = {.size = sizeof c};
    courier_cookie_init(&c);
    c.domain = "site.test";
    c.name = "secret";
    c.value = "s";
    c.secure = 1;
    CHECK_EQ(courier_cookies_set(e, &c, NULL), COURIER_OK);
    char *body = get(e, "http://site.test/cookies", NULL);
    CHECK_CONTAINS(body, "plain=1");
    CHECK(body && !strstr(body, "secret"));
    free(body);
    /* A Domain cookie goes to subdomains; a host-only cookie does not. */
    free(get(e, "http://site.test/headers?Set-Cookie=wide%3D1%3B%20Domain%3Dsite.test%3B%20Path%3D%2F", NULL));
    body = get(e, "http://www.site.test/cookies", NULL);
    CHECK_CONTAINS(body, "wide=1");
    CHECK(body && !strstr(body, "plain=1"));
    free(body);
    /* Public suffixes (libpsl): Domain=co.uk is refused, Domain=example.co.uk kept. */
    free(get(e, "http://www.example.co.uk/headers?Set-Cookie=psl%3D1%3B%20Domain%3Dco.uk%3B%20Path%3D%2F", NULL));
    free(get(e, "http://www.example.co.uk/headers?Set-Cookie=site%3D1%3B%20Domain%3Dexample.co.uk%3B%20Path%3D%2F", NULL));
    CHECK_STR(jar_value(e, "psl", NULL), "");
    CHECK_STR(jar_value(e, "site", NULL), "1");
    /* Expires in the past removes; far in the future is kept with its date. */
    free(get(e, "http://site.test/headers?Set-Cookie=plain%3D1%3B%20Path%3D%2F%3B%20Expires%3DThu%2C%2001%20Jan%201970%2000%3A00%3A01%20GMT", NULL));
    CHECK_STR(jar_value(e, "plain", NULL), "");
    free(get(e, "http://site.test/headers?Set-Cookie=later%3D1%3B%20Path%3D%2F%3B%20Expires%3DFri%2C%2001%20Jan%202100%2000%3A00%3A00%20GMT", NULL));
    courier_cookie got = {.size = sizeof got};
    CHECK_STR(jar_value(e, "later", &got), "1");
    CHECK_EQ(got.expires, 4102444800LL);
    courier_engine_close(e);
}

/* ---- the API ------------------------------------------------------------------------------- */

static void test_api_set_remove_clear_and_errors(void) {
    courier_engine *e = open_on(NULL, 0, NULL);
    REQUIRE(e);
    courier_cookie c = {.size = 0};
    CHECK_EQ(courier_cookie_init(&c), COURIER_E_INVALID_ARGUMENT);
    c.size = sizeof c;
    courier_cookie_init(&c);
    c.domain = "127.0.0.1";
    c.name = "token";
    c.value = "t1";
    c.path = "/cookies";
    CHECK_EQ(courier_cookies_set(e, &c, NULL), COURIER_OK);
    char *body = cookies_seen(e, NULL);
    CHECK_CONTAINS(body, "token=t1");
    free(body);
    body = get(e, "/echo", NULL); /* path /cookies only */
    CHECK(body && !strstr(body, "token=t1"));
    free(body);
    c.value = "t2"; /* same domain, path and name: replaced */
    CHECK_EQ(courier_cookies_set(e, &c, NULL), COURIER_OK);
    CHECK_STR(jar_value(e, "token", NULL), "t2");
    CHECK_EQ(list_count(e), 1);
    /* An expiry in the past removes it. */
    c.expires = 1000;
    CHECK_EQ(courier_cookies_set(e, &c, NULL), COURIER_OK);
    CHECK_EQ(list_count(e), 0);

    /* Bad input: codes, and nothing changes. */
    courier_error err;
    courier_cookie bad = c;
    bad.expires = 0;
    bad.name = "a;b";
    CHECK_EQ(courier_cookies_set(e, &bad, &err), COURIER_E_INVALID_HEADER);
    bad.name = "a=b";
    CHECK_EQ(courier_cookies_set(e, &bad, NULL), COURIER_E_INVALID_HEADER);
    bad.name = "ok";
    bad.value = "line\nbreak";
    CHECK_EQ(courier_cookies_set(e, &bad, NULL), COURIER_E_INVALID_HEADER);
    bad.value = "v";
    bad.path = "no-slash";
    CHECK_EQ(courier_cookies_set(e, &bad, NULL), COURIER_E_INVALID_ARGUMENT);
    bad.path = NULL;
    bad.domain = "";
    CHECK_EQ(courier_cookies_set(e, &bad, NULL), COURIER_E_INVALID_ARGUMENT);
    bad.domain = "127.0.0.1";
    bad.size = 0;
    CHECK_EQ(courier_cookies_set(e, &bad, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_cookies_set(NULL, &c, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(list_count(e), 0);

    /* Remove one; clear the rest. */
    free(get(e, "/cookies/set?a=1&b=2&c=3", NULL));
    CHECK_EQ(courier_cookies_remove(e, "127.0.0.1", "/", "b", NULL), COURIER_OK);
    CHECK_EQ(courier_cookies_remove(e, "127.0.0.1", "/", "b", NULL), COURIER_E_NOT_FOUND);
    CHECK_EQ(courier_cookies_remove(e, "127.0.0.1", NULL, "nothing", NULL), COURIER_E_NOT_FOUND);
    body = cookies_seen(e, NULL);
    CHECK(body && !strstr(body, "b=2"));
    CHECK_CONTAINS(body, "a=1");
    free(body);
    int64_t removed = 0;
    CHECK_EQ(courier_cookies_clear(&removed, e, NULL), COURIER_OK);
    CHECK_EQ(removed, 2);
    CHECK_EQ(list_count(e), 0);
    body = cookies_seen(e, NULL);
    CHECK_CONTAINS(body, "\"cookie\":\"\"");
    free(body);

    courier_cookie_list *l = NULL;
    CHECK_EQ(courier_cookies_list(&l, e, NULL), COURIER_OK);
    CHECK_EQ(courier_cookie_list_at(&c, l, 0), COURIER_E_NOT_FOUND);
    courier_cookie_list_free(l);
    courier_cookie_list_free(NULL);
    courier_engine_close(e);
}

static void test_clear_reaches_other_engines(void) {
    const char *store = th_tmpdir();
    courier_engine *a = open_on(store, 0, NULL), *b = open_on(store, 0, NULL);
    REQUIRE(a && b);
    free(get(a, "/cookies/set?x=1", NULL));
    CHECK_STR(jar_value(b, "x", NULL), "1");
    CHECK_EQ(courier_cookies_clear(NULL, b, NULL), COURIER_OK);
    char *body = cookies_seen(a, NULL);
    CHECK_CONTAINS(body, "\"cookie\":\"\"");
    free(body);
    courier_engine_close(a);
    courier_engine_close(b);
}

/* ---- frozen requests: replayed with the jar as it is when they are sent again -------------------- */

typedef struct replay_seen {
    pthread_mutex_t m;
    char body[512];
    int done;
} replay_seen;

static void on_frozen_event(const courier_frozen_event *ev, void *user) {
    replay_seen *s = user;
    if (ev->kind != COURIER_FROZEN_EVENT_RESENT_SUCCEEDED) return;
    size_t len = 0;
    const uint8_t *body = courier_response_body(ev->response, &len);
    pthread_mutex_lock(&s->m);
    snprintf(s->body, sizeof s->body, "%.*s", (int)len, (const char *)body);
    s->done = 1;
    pthread_mutex_unlock(&s->m);
}

static void test_frozen_request_replays_with_the_jar_of_its_resend(void) {
    courier_engine *e = open_on(NULL, 0, NULL);
    REQUIRE(e);
    replay_seen seen = {PTHREAD_MUTEX_INITIALIZER, "", 0};
    REQUIRE(courier_frozen_add_listener(NULL, e, on_frozen_event, &seen, NULL) == COURIER_OK);
    courier_cookie c = {.size = sizeof c};
    courier_cookie_init(&c);
    c.domain = "127.0.0.1";
    c.name = "when";
    c.value = "frozen";
    CHECK_EQ(courier_cookies_set(e, &c, NULL), COURIER_OK);

    courier_reachability_set_offline(e);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", "/cookies");
    courier_request_set_freeze(r, COURIER_FREEZE_MANUAL, 0, 0);
    courier_request_set_freeze_id(r, "cookie-replay");
    CHECK_EQ(courier_send_sync(NULL, e, r, NULL), COURIER_E_FROZEN);
    courier_request_free(r);

    c.value = "resent"; /* the jar changes while the request waits in the journal */
    CHECK_EQ(courier_cookies_set(e, &c, NULL), COURIER_OK);
    courier_reachability_set_online(e);
    CHECK_EQ(courier_frozen_resend(e, "cookie-replay", NULL), COURIER_OK);
    int done = 0;
    for (int i = 0; i < 5000 && !done; i++) {
        pthread_mutex_lock(&seen.m);
        done = seen.done;
        pthread_mutex_unlock(&seen.m);
        if (!done) usleep(2000);
    }
    REQUIRE(done);
    CHECK_CONTAINS(seen.body, "when=resent");
    CHECK(!strstr(seen.body, "frozen"));
    courier_engine_close(e);
}

static void test_jar_off(void) {
    const char *store = th_tmpdir();
    courier_engine *on = open_on(store, 0, NULL);
    REQUIRE(on);
    free(get(on, "/cookies/set?stored=1", NULL));
    courier_engine_close(on);

    courier_engine *e = open_on(store, 1, NULL);
    REQUIRE(e);
    char *body = get(e, "/cookies/set?a=1", NULL);
    CHECK_CONTAINS(body, "\"cookie\":\"\""); /* neither the new cookie nor the stored one */
    free(body);
    courier_cookie_list *l = NULL;
    CHECK_EQ(courier_cookies_list(&l, e, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK(l == NULL);
    CHECK_EQ(courier_cookies_clear(NULL, e, NULL), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);

    e = open_on(store, 0, NULL); /* the store's jar was left as it was */
    CHECK_STR(jar_value(e, "stored", NULL), "1");
    CHECK_STR(jar_value(e, "a", NULL), "");
    courier_engine_close(e);
}

int main(int argc, char **argv) {
    static const th_test tests[] = {
        T(test_server_cookie_comes_back_across_redirect_and_requests),
        T(test_jar_survives_restart_on_the_same_store),
        T(test_two_engines_on_one_store_share_the_jar),
        T(test_api_while_transfers_run),
        T(test_secure_expiry_and_public_suffix_rules),
        T(test_api_set_remove_clear_and_errors),
        T(test_clear_reaches_other_engines),
        T(test_frozen_request_replays_with_the_jar_of_its_resend),
        T(test_jar_off),
    };
    return th_run(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
