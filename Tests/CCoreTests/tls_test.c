/*
 * tls_test.c — TLS verification, a CA file, the insecure switch and public-key pinning, against a
 * real TLS server on 127.0.0.1: `openssl s_server` with a self-signed certificate made here.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

extern char **environ;

static pid_t server_pid;
static int tls_port;
static char cert_path[600], key_path[600], pin[200];

static void stop_server(void) {
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
    }
}

/* Makes the certificate and starts s_server; returns 0 when openssl is missing (tests then fail). */
static int start_tls_server(void) {
    if (server_pid) return 1;
    const char *dir = th_tmpdir();
    snprintf(cert_path, sizeof cert_path, "%s/cert.pem", dir);
    snprintf(key_path, sizeof key_path, "%s/key.pem", dir);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s' -out '%s' -days 2 -subj /CN=localhost "
             "-addext 'subjectAltName=DNS:localhost,IP:127.0.0.1' >/dev/null 2>&1",
             key_path, cert_path);
    if (system(cmd) != 0) return 0;
    snprintf(cmd, sizeof cmd,
             "openssl x509 -in '%s' -pubkey -noout | openssl pkey -pubin -outform der | "
             "openssl dgst -sha256 -binary | base64",
             cert_path);
    FILE *p = popen(cmd, "r");
    if (!p) return 0;
    char b64[128] = {0};
    if (!fgets(b64, sizeof b64, p)) b64[0] = 0;
    pclose(p);
    b64[strcspn(b64, "\r\n")] = 0;
    if (strlen(b64) != 44) return 0;
    snprintf(pin, sizeof pin, "sha256//%s", b64);

    tls_port = th_free_port();
    char port[16];
    snprintf(port, sizeof port, "%d", tls_port);
    char *argv[] = {"openssl", "s_server", "-accept", port, "-cert", cert_path, "-key", key_path, "-www", "-quiet",
                    NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    int rc = posix_spawnp(&server_pid, "openssl", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return 0;
    atexit(stop_server);
    for (int i = 0; i < 500 && !th_can_connect(tls_port); i++) usleep(10000);
    return th_can_connect(tls_port);
}

static int get(const char *host, void (*tweak)(courier_config *), courier_error *err) {
    courier_config *cfg = NULL;
    courier_engine *e = NULL;
    if (courier_config_new(&cfg) != COURIER_OK) return COURIER_E_NO_MEMORY;
    if (tweak) tweak(cfg);
    int rc = courier_engine_open(&e, cfg, err);
    courier_config_free(cfg);
    if (rc) return rc;
    char url[128];
    snprintf(url, sizeof url, "https://%s:%d/", host, tls_port);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", url);
    courier_request_set_timeout_ms(r, 10000);
    courier_response *resp = NULL;
    rc = courier_send_sync(&resp, e, r, err);
    if (rc == COURIER_OK) {
        courier_metrics m = {.size = sizeof m};
        courier_response_metrics(&m, resp);
        if (courier_response_status(resp) != 200 || m.tls_s <= 0) rc = COURIER_E_INTERNAL;
    }
    courier_response_free(resp);
    courier_request_free(r);
    courier_engine_close(e);
    return rc;
}

static void with_ca(courier_config *c) { courier_config_set_ca_file(c, cert_path); }
static void insecure(courier_config *c) { courier_config_set_insecure(c, 1); }
static void with_ca_and_pin(courier_config *c) {
    courier_config_set_ca_file(c, cert_path);
    courier_config_set_pinned_public_key(c, pin);
}
static void with_ca_and_wrong_pin(courier_config *c) {
    courier_config_set_ca_file(c, cert_path);
    courier_config_set_pinned_public_key(c, "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
}
static void insecure_wrong_pin(courier_config *c) {
    courier_config_set_insecure(c, 1);
    courier_config_set_pinned_public_key(c, "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
}

static void test_verification_on_by_default(void) {
    REQUIRE(start_tls_server());
    courier_error err;
    CHECK_EQ(get("127.0.0.1", NULL, &err), COURIER_E_TLS);
    CHECK_EQ(err.code, COURIER_E_TLS);
    CHECK(err.curl_code != 0);
}

static void test_ca_file(void) {
    REQUIRE(start_tls_server());
    CHECK_EQ(get("127.0.0.1", with_ca, NULL), COURIER_OK);
    CHECK_EQ(get("localhost", with_ca, NULL), COURIER_OK);
}

static void test_host_name_is_checked(void) {
    REQUIRE(start_tls_server());
    /* 127.0.0.2 reaches the same server, but the certificate does not name it. */
    courier_error err;
    CHECK_EQ(get("127.0.0.2", with_ca, &err), COURIER_E_TLS);
    CHECK_EQ(get("127.0.0.2", insecure, NULL), COURIER_OK);
}

static void test_insecure_switch(void) {
    REQUIRE(start_tls_server());
    CHECK_EQ(get("127.0.0.1", insecure, NULL), COURIER_OK);
}

static void test_pinning(void) {
    REQUIRE(start_tls_server());
    CHECK_EQ(get("127.0.0.1", with_ca_and_pin, NULL), COURIER_OK);
    courier_error err;
    CHECK_EQ(get("127.0.0.1", with_ca_and_wrong_pin, &err), COURIER_E_PINNING);
    CHECK_EQ(err.code, COURIER_E_PINNING);
    /* Pinning still holds when verification is off. */
    CHECK_EQ(get("127.0.0.1", insecure_wrong_pin, NULL), COURIER_E_PINNING);
}

TESTS_MAIN(T(test_verification_on_by_default), T(test_ca_file), T(test_host_name_is_checked), T(test_insecure_switch),
           T(test_pinning))
