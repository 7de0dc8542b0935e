/*
 * hsts_test.c — HSTS (RFC 6797) and Alt-Svc (RFC 7838) against nginx over TLS (scripts/tls-fixture:
 * "/hsts", "/hsts-sub", "/hsts-off", "/alt-svc", "/alt-used", "/cached"; and the same over h2c for
 * the field over http://) and the loopback test server (a redirect to http://). The fixture's port
 * speaks TLS only, so an http:// request that is not upgraded gets nginx's 400 ("plain HTTP request
 * sent to HTTPS port"), and one that is gets "ok".
 * The list (and the Alt-Svc cache) across a restart, in another process (this executable again with "--child") and on a
 * temporary store; includeSubDomains, max-age=0, expiry by the engine's clock, preload, clear, off.
 * Without nginx the test exits 77 (skipped).
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static th_nginx tls, h2c; /* h2c: the same locations over clear-text HTTP/2 (prior knowledge) */
static const char *engine_store; /* NULL: a temporary store */
static int engine_hsts = 1, engine_alt_svc, engine_clock;

static void tweak(courier_config *c) {
    CHECK_EQ(courier_config_set_ca_file(c, th_nginx_file(&tls, "ca.pem")), COURIER_OK);
    CHECK_EQ(courier_config_add_resolve(c, "localhost", tls.port, "127.0.0.1"), COURIER_OK);
    CHECK_EQ(courier_config_add_resolve(c, "sub.localhost", tls.port, "127.0.0.1"), COURIER_OK);
    if (engine_store) CHECK_EQ(courier_config_set_store_dir(c, engine_store), COURIER_OK);
    else CHECK_EQ(courier_config_set_temporary_store(c, 1), COURIER_OK);
    if (!engine_hsts) CHECK_EQ(courier_config_set_hsts(c, 0), COURIER_OK);
    if (engine_alt_svc) CHECK_EQ(courier_config_set_alt_svc(c, 1), COURIER_OK);
    if (engine_clock) CHECK_EQ(courier_config_set_clock(c, th_clock, NULL, NULL), COURIER_OK);
}

static courier_engine *open_on(const char *store) {
    engine_store = store;
    return th_engine(tweak);
}

static const char *url(const char *scheme, const char *host, const char *path) {
    static char buf[8][256];
    static int i;
    char *b = buf[i++ % 8];
    snprintf(b, 256, "%s://%s:%d%s", scheme, host, tls.port, path);
    return b;
}

/* GET target: the code; status, body (first 63 bytes), whether HSTS upgraded it and the final URL's
 * scheme ("https" or "http") into the out-parameters that are not NULL. */
typedef struct got {
    int code, status, upgraded;
    char body[64], scheme[8];
} got;

static got get(courier_engine *e, const char *target) {
    got g = {0};
    courier_request *r = NULL;
    courier_response *resp = NULL;
    if (courier_request_new(&r, "GET", target) != COURIER_OK) {
        g.code = -1000;
        return g;
    }
    courier_error err;
    g.code = courier_send_sync(&resp, e, r, &err);
    if (g.code && g.code != COURIER_E_HTTP_STATUS && getenv("HSTS_DEBUG")) fprintf(stderr, "%s: %d %s\n", target, g.code, err.message);
    courier_request_free(r);
    if (resp) {
        g.status = courier_response_status(resp);
        g.upgraded = courier_response_hsts_upgraded(resp);
        size_t len = 0;
        const uint8_t *body = courier_response_body(resp, &len);
        snprintf(g.body, sizeof g.body, "%.*s", (int)(len < 63 ? len : 63), (const char *)body);
        const char *u = courier_response_url(resp);
        snprintf(g.scheme, sizeof g.scheme, "%s", u && strncmp(u, "https:", 6) == 0 ? "https" : "http");
        courier_response_free(resp);
    }
    return g;
}

/* An http:// request to the TLS port went out as https://. */
static void check_upgraded(courier_engine *e, const char *host) {
    got g = get(e, url("http", host, "/"));
    CHECK_EQ(g.code, COURIER_OK);
    CHECK_EQ(g.status, 200);
    CHECK_STR(g.body, "ok");
    CHECK_STR(g.scheme, "https");
    CHECK_EQ(g.upgraded, 1);
}

/* It went out as http:// (nginx: 400, plain HTTP on its TLS port). */
static void check_not_upgraded(courier_engine *e, const char *host) {
    got g = get(e, url("http", host, "/"));
    CHECK_EQ(g.code, COURIER_E_HTTP_STATUS);
    CHECK_EQ(g.status, 400);
    CHECK_STR(g.scheme, "http");
    CHECK_EQ(g.upgraded, 0);
}

static void learn(courier_engine *e, const char *host, const char *path) {
    got g = get(e, url("https", host, path));
    CHECK_EQ(g.code, COURIER_OK);
    CHECK_EQ(g.upgraded, 0);
}

/* The list's hosts as "host/sub host/sub ...", and the first entry's expiry in *expires. */
static void list_of(courier_engine *e, char *out, size_t cap, int64_t *expires) {
    courier_hsts_entries *l = NULL;
    courier_error err;
    out[0] = '\0';
    CHECK_EQ(courier_hsts_list(&l, e, &err), COURIER_OK);
    for (size_t i = 0; i < courier_hsts_entries_count(l); i++) {
        courier_hsts_entry h = {.size = sizeof h};
        CHECK_EQ(courier_hsts_entries_at(&h, l, i), COURIER_OK);
        if (i == 0 && expires) *expires = h.expires;
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s%s/%d", n ? " " : "", h.host, h.include_subdomains);
    }
    courier_hsts_entry h = {.size = sizeof h};
    CHECK_EQ(courier_hsts_entries_at(&h, l, courier_hsts_entries_count(l)), COURIER_E_NOT_FOUND);
    courier_hsts_entries_free(l);
}

/* ---- another process ------------------------------------------------------------------------ */

static int child_main(int argc, char **argv) {
    if (argc < 5) return 64;
    tls.port = atoi(argv[4]);
    snprintf(tls.dir, sizeof tls.dir, "%s", argv[5]);
    engine_alt_svc = strcmp(argv[2], "expect-alt-used") == 0;
    courier_engine *e = open_on(argv[3]);
    if (!e) return 2;
    int rc = 0;
    if (strcmp(argv[2], "expect-upgrade") == 0) {
        got g = get(e, url("http", "localhost", "/"));
        rc = g.code == COURIER_OK && g.upgraded == 1 && strcmp(g.body, "ok") == 0 ? 0 : 3;
    } else if (strcmp(argv[2], "expect-alt-used") == 0) {
        char want[64];
        snprintf(want, sizeof want, "alt-used=localhost:%d", tls.port);
        got g = get(e, url("https", "localhost", "/alt-used"));
        rc = g.code == COURIER_OK && strcmp(g.body, want) == 0 ? 0 : 5;
    } else if (strcmp(argv[2], "remove") == 0) {
        rc = get(e, url("https", "localhost", "/hsts-off")).code == COURIER_OK ? 0 : 4;
    }
    courier_engine_close(e);
    return rc;
}

static int run_child(const char *mode, const char *store) {
    char port[16];
    snprintf(port, sizeof port, "%d", tls.port);
    pid_t pid = fork();
    if (pid == 0) {
        char *args[] = {"self", "--child", (char *)mode, (char *)store, port, tls.dir, NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* A host that sent Strict-Transport-Security is reached over https:// on the next request, and the
 * response says so. */
static void test_sts_upgrades_the_next_request(void) {
    courier_engine *e = open_on(th_tmpdir());
    REQUIRE(e);
    check_not_upgraded(e, "localhost");
    learn(e, "localhost", "/hsts");
    check_upgraded(e, "localhost");
    char list[256];
    int64_t expires = 0;
    list_of(e, list, sizeof list, &expires);
    CHECK_STR(list, "localhost/0");
    int64_t now = (int64_t)time(NULL);
    CHECK(expires >= now + 3600 - 120 && expires <= now + 3600 + 120);
    courier_engine_close(e);
}

/* Over http:// the field teaches nothing (RFC 6797 8.1): nginx's h2c server sends it on /hsts. */
static void test_field_over_http_is_ignored(void) {
    courier_engine *e = open_on(NULL);
    REQUIRE(e);
    char target[128];
    snprintf(target, sizeof target, "http://localhost:%d/hsts", h2c.port);
    courier_request *r = NULL;
    courier_response *resp = NULL;
    REQUIRE(courier_request_new(&r, "GET", target) == COURIER_OK);
    CHECK_EQ(courier_request_set_http_version(r, COURIER_HTTP_V2_ONLY), COURIER_OK);
    CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
    CHECK_STR(courier_response_header(resp, "Strict-Transport-Security"), "max-age=3600");
    courier_response_free(resp);
    courier_request_free(r);
    char list[256];
    list_of(e, list, sizeof list, NULL);
    CHECK_STR(list, "");
    courier_engine_close(e);
}

/* A redirect hop to http:// on a known host goes out as https://. */
static void test_redirect_hop_is_upgraded(void) {
    courier_engine *e = open_on(NULL);
    REQUIRE(e);
    learn(e, "localhost", "/hsts");
    char target[300];
    snprintf(target, sizeof target, "/redirect?to=http://localhost:%d/", tls.port);
    got g = get(e, th_url(target));
    CHECK_EQ(g.code, COURIER_OK);
    CHECK_STR(g.body, "ok");
    CHECK_STR(g.scheme, "https");
    CHECK_EQ(g.upgraded, 1);
    courier_engine_close(e);
}

/* An upgraded request answered from the cache says so too (the entry is the https:// URL's). */
static void test_cache_hit_of_an_upgraded_url(void) {
    courier_engine *e = open_on(th_tmpdir());
    REQUIRE(e);
    learn(e, "localhost", "/hsts");
    for (int i = 0; i < 2; i++) {
        courier_request *r = NULL;
        courier_response *resp = NULL;
        REQUIRE(courier_request_new(&r, "GET", url("http", "localhost", "/cached")) == COURIER_OK);
        CHECK_EQ(courier_request_set_cache_policy(r, COURIER_CACHE_HTTP), COURIER_OK);
        CHECK_EQ(courier_send_sync(&resp, e, r, NULL), COURIER_OK);
        CHECK_EQ(courier_response_cache_status(resp), i == 0 ? COURIER_CACHE_STATUS_NETWORK : COURIER_CACHE_STATUS_HIT);
        CHECK_EQ(courier_response_hsts_upgraded(resp), 1);
        CHECK(strncmp(courier_response_url(resp), "https://", 8) == 0);
        courier_response_free(resp);
        courier_request_free(r);
    }
    courier_engine_close(e);
}

/* A new engine on the same store knows the host (a restart). */
static void test_list_survives_restart(void) {
    const char *store = th_tmpdir();
    courier_engine *e = open_on(store);
    REQUIRE(e);
    learn(e, "localhost", "/hsts");
    courier_engine_close(e);
    e = open_on(store);
    REQUIRE(e);
    check_upgraded(e, "localhost");
    courier_engine_close(e);
}

/* Two processes on one store: the child upgrades on its first request what the parent learnt, and
 * the parent's open engine stops upgrading once the child's response said max-age=0. */
static void test_two_processes_share_the_list(void) {
    const char *store = th_tmpdir();
    courier_engine *e = open_on(store);
    REQUIRE(e);
    learn(e, "localhost", "/hsts");
    CHECK_EQ(run_child("expect-upgrade", store), 0);
    CHECK_EQ(run_child("remove", store), 0);
    check_not_upgraded(e, "localhost");
    courier_engine_close(e);
}

/* includeSubDomains: without it a subdomain is not upgraded, with it it is. */
static void test_include_subdomains(void) {
    courier_engine *e = open_on(NULL);
    REQUIRE(e);
    learn(e, "localhost", "/hsts");
    check_not_upgraded(e, "sub.localhost");
    learn(e, "localhost", "/hsts-sub");
    check_upgraded(e, "sub.localhost");
    char list[256];
    list_of(e, list, sizeof list, NULL);
    CHECK_STR(list, "localhost/1");
    courier_engine_close(e);
}

/* max-age=0 removes the host. */
static void test_max_age_zero_removes(void) {
    courier_engine *e = open_on(th_tmpdir());
    REQUIRE(e);
    learn(e, "localhost", "/hsts");
    check_upgraded(e, "localhost");
    learn(e, "localhost", "/hsts-off");
    check_not_upgraded(e, "localhost");
    char list[256];
    list_of(e, list, sizeof list, NULL);
    CHECK_STR(list, "");
    courier_engine_close(e);
}

/* An entry expires max-age seconds later by the engine's clock. */
static void test_expiry(void) {
    engine_clock = 1;
    th_clock_set_offset_ms(0);
    courier_engine *e = open_on(th_tmpdir());
    REQUIRE(e);
    learn(e, "localhost", "/hsts");
    th_clock_set_offset_ms(3500 * 1000LL);
    check_upgraded(e, "localhost");
    th_clock_set_offset_ms(3700 * 1000LL);
    check_not_upgraded(e, "localhost");
    char list[256];
    list_of(e, list, sizeof list, NULL);
    CHECK_STR(list, "");
    courier_engine_close(e);
    th_clock_set_offset_ms(0);
    engine_clock = 0;
}

/* A file in curl's format: hosts (and subdomains) upgraded, expired lines skipped; clear empties the
 * list; a missing file is COURIER_E_NOT_FOUND. */
static void test_preload_and_clear(void) {
    courier_engine *e = open_on(th_tmpdir());
    REQUIRE(e);
    char path[700];
    snprintf(path, sizeof path, "%s/preload.txt", th_tmpdir());
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("# a comment\n.localhost \"unlimited\"\nexample.org \"20991231 10:00:00\"\nold.example \"20000101 00:00:00\"\n"
          "not a line\n",
          f);
    fclose(f);
    int64_t added = -1, removed = -1;
    courier_error err;
    CHECK_EQ(courier_hsts_preload(&added, e, path, &err), COURIER_OK);
    CHECK_EQ(added, 2);
    char list[256];
    int64_t expires = -1;
    list_of(e, list, sizeof list, &expires);
    CHECK_STR(list, "example.org/0 localhost/1");
    CHECK_EQ(expires, 4102394400LL); /* 2099-12-31 10:00:00 UTC */
    check_upgraded(e, "sub.localhost");
    CHECK_EQ(courier_hsts_clear(&removed, e, &err), COURIER_OK);
    CHECK_EQ(removed, 2);
    list_of(e, list, sizeof list, NULL);
    CHECK_STR(list, "");
    check_not_upgraded(e, "localhost");
    CHECK_EQ(courier_hsts_preload(NULL, e, "/no/such/file", &err), COURIER_E_NOT_FOUND);
    courier_engine_close(e);
}

/* Off: nothing learnt or upgraded, the API says so. */
static void test_off(void) {
    engine_hsts = 0;
    courier_engine *e = open_on(NULL);
    engine_hsts = 1;
    REQUIRE(e);
    learn(e, "localhost", "/hsts");
    check_not_upgraded(e, "localhost");
    courier_hsts_entries *l = NULL;
    courier_error err;
    CHECK_EQ(courier_hsts_list(&l, e, &err), COURIER_E_INVALID_ARGUMENT);
    CHECK(l == NULL);
    CHECK_EQ(courier_config_set_hsts(NULL, 1), COURIER_E_INVALID_ARGUMENT);
    courier_engine_close(e);
}

/* Over a connection whose certificate was not verified, the field teaches nothing (RFC 6797 8.1). */
static void insecure(courier_config *c) {
    tweak(c);
    CHECK_EQ(courier_config_set_insecure(c, 1), COURIER_OK);
}

static void test_unverified_tls_teaches_nothing(void) {
    engine_store = NULL;
    courier_engine *e = th_engine(insecure);
    REQUIRE(e);
    learn(e, "localhost", "/hsts");
    char list[256];
    list_of(e, list, sizeof list, NULL);
    CHECK_STR(list, "");
    check_not_upgraded(e, "localhost");
    courier_engine_close(e);
}

/* Alt-Svc: an alternative advertised over https is used by a new engine on the same store (libcurl
 * then sends Alt-Used, which the fixture echoes); off, nothing is remembered. */
static void test_alt_svc_survives_restart(void) {
    const char *store = th_tmpdir();
    char want[64];
    snprintf(want, sizeof want, "alt-used=localhost:%d", tls.port);
    engine_alt_svc = 1;
    courier_engine *e = open_on(store);
    REQUIRE(e);
    CHECK_EQ(get(e, url("https", "localhost", "/alt-svc")).code, COURIER_OK);
    courier_engine_close(e);
    e = open_on(store);
    REQUIRE(e);
    got g = get(e, url("https", "localhost", "/alt-used"));
    CHECK_EQ(g.code, COURIER_OK);
    CHECK_STR(g.body, want);
    courier_engine_close(e);
    engine_alt_svc = 0;
    e = open_on(store); /* the setting off: the file is not read */
    REQUIRE(e);
    g = get(e, url("https", "localhost", "/alt-used"));
    CHECK_STR(g.body, "alt-used=");
    courier_engine_close(e);
}

/* Alt-Svc in another process: what this process's engine learnt (written to the store's
 * alt-svc.txt when its handles close) is used by an engine of another process on the same store. */
static void test_alt_svc_shared_with_another_process(void) {
    const char *store = th_tmpdir();
    engine_alt_svc = 1;
    courier_engine *e = open_on(store);
    REQUIRE(e);
    CHECK_EQ(get(e, url("https", "localhost", "/alt-svc")).code, COURIER_OK);
    courier_engine_close(e);
    engine_alt_svc = 0;
    CHECK_EQ(run_child("expect-alt-used", store), 0);
    CHECK(run_child("expect-alt-used", th_tmpdir()) != 0); /* another store: nothing learnt */
}

/* A pooled handle reset after a transfer that changed it (a POST) keeps its Alt-Svc cache and does
 * not read the file into it again: after many such transfers the file holds the entry once. */
static void test_alt_svc_file_has_no_duplicates(void) {
    const char *store = th_tmpdir();
    engine_alt_svc = 1;
    for (int round = 0; round < 2; round++) {
        courier_engine *e = open_on(store);
        REQUIRE(e);
        CHECK_EQ(get(e, url("https", "localhost", "/alt-svc")).code, COURIER_OK);
        for (int i = 0; i < 5; i++) {
            courier_request *r = NULL;
            courier_response *resp = NULL;
            REQUIRE(courier_request_new(&r, "POST", url("https", "localhost", "/alt-used")) == COURIER_OK);
            CHECK_EQ(courier_request_set_body(r, "x", 1, "text/plain"), COURIER_OK);
            courier_send_sync(&resp, e, r, NULL);
            courier_response_free(resp);
            courier_request_free(r);
        }
        courier_engine_close(e);
    }
    engine_alt_svc = 0;
    char path[700], line[512];
    snprintf(path, sizeof path, "%s/alt-svc.txt", store);
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    int entries = 0;
    while (fgets(line, sizeof line, f))
        if (line[0] != '#' && line[0] != '\n') entries++;
    fclose(f);
    CHECK_EQ(entries, 1);
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--child") == 0) return child_main(argc, argv);
    int rc = th_tls_nginx(&tls, 0);
    if (rc == 77) {
        printf("SKIPPED: nginx is not installed\n");
        return 77;
    }
    if (rc) {
        printf("FAILED: nginx with the TLS fixture (scripts/tls-fixture) did not start; see %s/error.log\n", tls.dir);
        return 1;
    }
    if (th_tls_nginx(&h2c, 2) != 0) {
        printf("FAILED: nginx with the h2c fixture did not start; see %s/error.log\n", h2c.dir);
        return 1;
    }
    static const th_test tests[] = {
        T(test_sts_upgrades_the_next_request), T(test_field_over_http_is_ignored), T(test_redirect_hop_is_upgraded), T(test_cache_hit_of_an_upgraded_url), T(test_list_survives_restart),
        T(test_two_processes_share_the_list),  T(test_include_subdomains),      T(test_max_age_zero_removes),
        T(test_expiry),                        T(test_preload_and_clear),       T(test_off),
        T(test_unverified_tls_teaches_nothing), T(test_alt_svc_survives_restart),
        T(test_alt_svc_shared_with_another_process), T(test_alt_svc_file_has_no_duplicates),
    };
    return th_run(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
