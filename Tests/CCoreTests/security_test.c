/*
 * security_test.c — security policies per engine and per request (pinning none / public key /
 * whole certificate, allowInvalidCertificates and validatesDomainName apart, a CA file, client
 * certificates, certificate status by OCSP stapling) against a real nginx on 127.0.0.1, with a CA, a server certificate and a client CA
 * made for the run by scripts/tls-fixture. Without nginx the test exits 77: ctest says "skipped"
 * (scripts/setup installs nginx, so CI runs it).
 */
#include "harness.h"

#include <stdlib.h>

static th_nginx server;

static const char *file(const char *name) { return th_nginx_file(&server, name); }

static const char *server_pin(void) {
    static char pin[128];
    FILE *f = fopen(file("server.pin"), "r");
    if (!f) return "";
    if (!fgets(pin, sizeof pin, f)) pin[0] = 0;
    fclose(f);
    pin[strcspn(pin, "\r\n")] = 0;
    return pin;
}

/* A policy made by `make` (NULL: none). */
typedef void (*policy_fn)(courier_security *s);

static courier_security *policy(policy_fn make) {
    if (!make) return NULL;
    courier_security *s = NULL;
    if (courier_security_new(&s) != COURIER_OK) return NULL;
    make(s);
    return s;
}

static courier_engine *engine_with(policy_fn make) {
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_temporary_store(cfg, 1);
    courier_security *s = policy(make);
    if (s) CHECK_EQ(courier_config_set_security(cfg, s), COURIER_OK);
    courier_security_free(s); /* copied */
    courier_engine *e = NULL;
    CHECK_EQ(courier_engine_open(&e, cfg, NULL), COURIER_OK);
    courier_config_free(cfg);
    return e;
}

/* GET https://host:port/path with the request's own policy (NULL: the engine's). The body goes to
 * `body` (may be NULL) and the HTTP status to *status. */
static int get(courier_engine *e, const char *host, const char *path, policy_fn make, int *status, char *body,
               size_t body_size) {
    char url[256];
    snprintf(url, sizeof url, "https://%s:%d%s", host, server.port, path);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", url);
    courier_request_set_timeout_ms(r, 20000);
    courier_security *s = policy(make);
    if (s) CHECK_EQ(courier_request_set_security(r, s), COURIER_OK);
    courier_security_free(s);
    courier_response *resp = NULL;
    courier_error err;
    int rc = courier_send_sync(&resp, e, r, &err);
    CHECK_EQ(err.code, rc);
    if (status) *status = courier_response_status(resp);
    if (body && body_size) {
        size_t n = 0;
        const uint8_t *b = resp ? courier_response_body(resp, &n) : (const uint8_t *)"";
        snprintf(body, body_size, "%.*s", (int)n, (const char *)b);
    }
    courier_response_free(resp);
    courier_request_free(r);
    return rc;
}

static int get_root(courier_engine *e, const char *host, policy_fn make) {
    return get(e, host, "/", make, NULL, NULL, 0);
}

static void with_ca(courier_security *s) { courier_security_set_ca_file(s, file("ca.pem")); }
static void allow_invalid(courier_security *s) { courier_security_set_allow_invalid_certificates(s, 1); }
static void no_domain_check(courier_security *s) { courier_security_set_validates_domain_name(s, 0); }
static void ca_no_domain_check(courier_security *s) {
    with_ca(s);
    no_domain_check(s);
}
static void ca_and_pin(courier_security *s) {
    with_ca(s);
    CHECK_EQ(courier_security_set_pinning(s, COURIER_PINNING_PUBLIC_KEY, server_pin()), COURIER_OK);
}
static void ca_and_wrong_pin(courier_security *s) {
    with_ca(s);
    courier_security_set_pinning(s, COURIER_PINNING_PUBLIC_KEY, "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=");
}
static void pin_server_cert(courier_security *s) {
    CHECK_EQ(courier_security_set_pinning(s, COURIER_PINNING_CERTIFICATE, file("server.pem")), COURIER_OK);
}
static void pin_ca_cert(courier_security *s) { courier_security_set_pinning(s, COURIER_PINNING_CERTIFICATE, file("ca.pem")); }
static void pin_other_cert(courier_security *s) {
    courier_security_set_pinning(s, COURIER_PINNING_CERTIFICATE, file("other.pem"));
}
static void pin_other_cert_allow_invalid(courier_security *s) {
    pin_other_cert(s);
    allow_invalid(s);
}
static void client_pem(courier_security *s) {
    with_ca(s);
    CHECK_EQ(courier_security_set_client_certificate(s, file("client.pem"), file("client.key"), "secret"), COURIER_OK);
}
static void client_p12(courier_security *s) {
    with_ca(s);
    CHECK_EQ(courier_security_set_client_certificate(s, file("client.p12"), NULL, "secret"), COURIER_OK);
}
static void client_wrong_password(courier_security *s) {
    with_ca(s);
    courier_security_set_client_certificate(s, file("client.pem"), file("client.key"), "wrong");
}
static void client_rogue(courier_security *s) {
    with_ca(s);
    courier_security_set_client_certificate(s, file("rogue.pem"), file("rogue.key"), NULL);
}

/* allowInvalidCertificates and validatesDomainName are two switches: each turns off its own check. */
static void test_the_two_switches_are_separate(void) {
    courier_engine *e = engine_with(NULL);
    REQUIRE(e);
    CHECK_EQ(get_root(e, "localhost", NULL), COURIER_E_TLS);              /* an unknown CA */
    CHECK_EQ(get_root(e, "localhost", with_ca), COURIER_OK);
    CHECK_EQ(get_root(e, "127.0.0.1", with_ca), COURIER_E_TLS);           /* the name does not match */
    CHECK_EQ(get_root(e, "127.0.0.1", ca_no_domain_check), COURIER_OK);
    CHECK_EQ(get_root(e, "localhost", allow_invalid), COURIER_OK);        /* the CA no longer matters */
    CHECK_EQ(get_root(e, "127.0.0.1", allow_invalid), COURIER_E_TLS);     /* the name still does */
    CHECK_EQ(get_root(e, "127.0.0.1", no_domain_check), COURIER_E_TLS);   /* the CA still does */
    courier_engine_close(e);
}

static void test_pinning_modes(void) {
    courier_engine *e = engine_with(NULL);
    REQUIRE(e);
    CHECK_EQ(get_root(e, "localhost", ca_and_pin), COURIER_OK);
    CHECK_EQ(get_root(e, "localhost", ca_and_wrong_pin), COURIER_E_PINNING);
    /* Whole certificates: the pinned ones are the trust anchors, the leaf or its CA. */
    CHECK_EQ(get_root(e, "localhost", pin_server_cert), COURIER_OK);
    CHECK_EQ(get_root(e, "localhost", pin_ca_cert), COURIER_OK);
    CHECK_EQ(get_root(e, "localhost", pin_other_cert), COURIER_E_PINNING);
    CHECK_EQ(get_root(e, "localhost", pin_other_cert_allow_invalid), COURIER_E_PINNING);
    CHECK_EQ(get_root(e, "127.0.0.1", pin_server_cert), COURIER_E_TLS); /* the name is checked apart */
    courier_engine_close(e);
}

/* A request's policy replaces the engine's, on that request alone: the next one is under the
 * engine's again (the handle reset, no connection verified under the other policy reused). */
static void test_request_policy_replaces_the_engines(void) {
    courier_engine *e = engine_with(with_ca);
    REQUIRE(e);
    CHECK_EQ(get_root(e, "localhost", NULL), COURIER_OK);
    CHECK_EQ(get_root(e, "localhost", pin_other_cert), COURIER_E_PINNING);
    CHECK_EQ(get_root(e, "localhost", NULL), COURIER_OK);
    CHECK_EQ(get_root(e, "127.0.0.1", NULL), COURIER_E_TLS);
    CHECK_EQ(get_root(e, "127.0.0.1", ca_no_domain_check), COURIER_OK);
    CHECK_EQ(get_root(e, "127.0.0.1", NULL), COURIER_E_TLS);
    courier_engine_close(e);

    e = engine_with(pin_other_cert);
    REQUIRE(e);
    CHECK_EQ(get_root(e, "localhost", NULL), COURIER_E_PINNING);
    CHECK_EQ(get_root(e, "localhost", with_ca), COURIER_OK);
    CHECK_EQ(get_root(e, "localhost", NULL), COURIER_E_PINNING);
    courier_engine_close(e);
}

static void test_client_certificates(void) {
    /* A key that does not open (first, on a fresh engine: libcurl keys connection reuse on the
     * certificate file, not on the key's password). */
    courier_engine *e = engine_with(with_ca);
    REQUIRE(e);
    int status = 0;
    char body[256];
    CHECK_EQ(get(e, "localhost", "/mtls", client_wrong_password, &status, NULL, 0), COURIER_E_CLIENT_CERTIFICATE);
    courier_engine_close(e);

    e = engine_with(with_ca);
    REQUIRE(e);
    CHECK_EQ(get(e, "localhost", "/mtls", NULL, &status, body, sizeof body), COURIER_E_HTTP_STATUS);
    CHECK_EQ(status, 403);
    CHECK_EQ(get(e, "localhost", "/mtls", client_pem, &status, body, sizeof body), COURIER_OK);
    CHECK_EQ(status, 200);
    CHECK_STR(body, "client CN=courier-client");
    CHECK_EQ(get(e, "localhost", "/mtls", client_p12, &status, body, sizeof body), COURIER_OK);
    CHECK_STR(body, "client CN=courier-client");
    CHECK_EQ(get(e, "localhost", "/mtls", client_rogue, &status, NULL, 0), COURIER_E_HTTP_STATUS);
    CHECK_EQ(status, 403); /* nginx: a certificate of another CA does not verify */
    CHECK_EQ(get(e, "localhost", "/mtls", NULL, &status, NULL, 0), COURIER_E_HTTP_STATUS);
    courier_engine_close(e);

    /* The engine's certificate for every request; a request's policy without one goes without. */
    e = engine_with(client_pem);
    REQUIRE(e);
    CHECK_EQ(get(e, "localhost", "/mtls", NULL, &status, body, sizeof body), COURIER_OK);
    CHECK_STR(body, "client CN=courier-client");
    CHECK_EQ(get(e, "localhost", "/mtls", with_ca, &status, NULL, 0), COURIER_E_HTTP_STATUS);
    CHECK_EQ(status, 403);
    courier_engine_close(e);
}

static void ca_requires_status(courier_security *s) {
    with_ca(s);
    CHECK_EQ(courier_security_set_requires_certificate_status(s, 1), COURIER_OK);
}

/* An engine (policy by `make`) that reaches the fixture's SNI servers "ocsp.localhost" (staples a
 * good OCSP response) and "nostaple.localhost" (staples none) on 127.0.0.1. */
static courier_engine *status_engine(policy_fn make) {
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_temporary_store(cfg, 1);
    courier_security *s = policy(make);
    if (s) CHECK_EQ(courier_config_set_security(cfg, s), COURIER_OK);
    courier_security_free(s);
    CHECK_EQ(courier_config_add_resolve(cfg, "ocsp.localhost", server.port, "127.0.0.1"), COURIER_OK);
    CHECK_EQ(courier_config_add_resolve(cfg, "nostaple.localhost", server.port, "127.0.0.1"), COURIER_OK);
    courier_engine *e = NULL;
    CHECK_EQ(courier_engine_open(&e, cfg, NULL), COURIER_OK);
    courier_config_free(cfg);
    return e;
}

/* GET https://host:port/ under the request's policy (NULL: the engine's): the code, the body in
 * `body`, libcurl's code in *curl_code. */
static int get_status(courier_engine *e, const char *host, policy_fn make, char *body, size_t size, int *curl_code) {
    char url[256];
    snprintf(url, sizeof url, "https://%s:%d/", host, server.port);
    courier_request *r = NULL;
    courier_request_new(&r, "GET", url);
    courier_request_set_timeout_ms(r, 20000);
    courier_security *s = policy(make);
    if (s) CHECK_EQ(courier_request_set_security(r, s), COURIER_OK);
    courier_security_free(s);
    courier_response *resp = NULL;
    courier_error err;
    int rc = courier_send_sync(&resp, e, r, &err);
    CHECK_EQ(err.code, rc);
    *curl_code = err.curl_code;
    size_t n = 0;
    const uint8_t *b = resp ? courier_response_body(resp, &n) : (const uint8_t *)"";
    snprintf(body, size, "%.*s", (int)n, (const char *)b);
    courier_response_free(resp);
    courier_request_free(r);
    return rc;
}

/* Certificate status required (OCSP stapling): a server that staples a good response is reached, one
 * that staples none fails with COURIER_E_TLS before a byte of the response (libcurl's
 * CURLE_SSL_INVALIDCERTSTATUS, 91) and its body never arrives; not required, the same server answers.
 * A connection made without the requirement is not reused by a request that has it. */
static void test_certificate_status(void) {
    courier_engine *e = status_engine(with_ca);
    REQUIRE(e);
    char body[64];
    int curl_code = 0;
    CHECK_EQ(get_status(e, "nostaple.localhost", NULL, body, sizeof body, &curl_code), COURIER_OK);
    CHECK_STR(body, "no staple");
    CHECK_EQ(get_status(e, "nostaple.localhost", ca_requires_status, body, sizeof body, &curl_code), COURIER_E_TLS);
    CHECK_EQ(curl_code, 91);
    CHECK_STR(body, "");
    CHECK_EQ(get_status(e, "ocsp.localhost", ca_requires_status, body, sizeof body, &curl_code), COURIER_OK);
    CHECK_STR(body, "stapled");
    CHECK_EQ(get_status(e, "localhost", ca_requires_status, body, sizeof body, &curl_code), COURIER_E_TLS);
    CHECK_EQ(curl_code, 91);
    courier_engine_close(e);

    /* The engine's policy for every request; a request's own policy without it goes without. */
    e = status_engine(ca_requires_status);
    REQUIRE(e);
    CHECK_EQ(get_status(e, "ocsp.localhost", NULL, body, sizeof body, &curl_code), COURIER_OK);
    CHECK_STR(body, "stapled");
    CHECK_EQ(get_status(e, "nostaple.localhost", NULL, body, sizeof body, &curl_code), COURIER_E_TLS);
    CHECK_EQ(curl_code, 91);
    CHECK_EQ(get_status(e, "nostaple.localhost", with_ca, body, sizeof body, &curl_code), COURIER_OK);
    CHECK_STR(body, "no staple");
    CHECK_EQ(get_status(e, "nostaple.localhost", NULL, body, sizeof body, &curl_code), COURIER_E_TLS);
    courier_engine_close(e);
}

static void test_setters_check_their_input(void) {
    courier_security *s = NULL;
    CHECK_EQ(courier_security_new(NULL), COURIER_E_INVALID_ARGUMENT);
    REQUIRE(courier_security_new(&s) == COURIER_OK);
    CHECK_EQ(courier_security_set_pinning(s, (courier_pinning_mode)7, "x"), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_security_set_pinning(s, COURIER_PINNING_PUBLIC_KEY, NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_security_set_pinning(s, COURIER_PINNING_PUBLIC_KEY, "/no/such.pem"), COURIER_E_NOT_FOUND);
    CHECK_EQ(courier_security_set_pinning(s, COURIER_PINNING_CERTIFICATE, "/no/such.pem"), COURIER_E_NOT_FOUND);
    CHECK_EQ(courier_security_set_pinning(s, COURIER_PINNING_NONE, NULL), COURIER_OK);
    CHECK_EQ(courier_security_set_ca_file(s, "/no/such.pem"), COURIER_E_NOT_FOUND);
    CHECK_EQ(courier_security_set_client_certificate(s, "/no/such.pem", NULL, NULL), COURIER_E_NOT_FOUND);
    CHECK_EQ(courier_security_set_client_certificate(s, NULL, "/k", NULL), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_security_set_client_certificate(s, NULL, NULL, NULL), COURIER_OK);
    CHECK_EQ(courier_config_set_security(NULL, s), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_request_set_security(NULL, s), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_security_set_allow_invalid_certificates(NULL, 1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_security_set_requires_certificate_status(NULL, 1), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_security_set_requires_certificate_status(s, 1), COURIER_OK); /* OpenSSL checks it */
    CHECK_EQ(courier_security_set_requires_certificate_status(s, 0), COURIER_OK);
    CHECK(strcmp(courier_strerror(COURIER_E_CLIENT_CERTIFICATE), "unknown error") != 0);
    courier_security_free(s);
    courier_security_free(NULL);
}

int main(int argc, char **argv) {
    static const th_test tests[] = {T(test_setters_check_their_input), T(test_the_two_switches_are_separate),
                                    T(test_pinning_modes), T(test_request_policy_replaces_the_engines),
                                    T(test_client_certificates), T(test_certificate_status)};
    int rc = th_tls_nginx(&server, 0);
    if (rc == 77) {
        printf("SKIPPED: nginx is not installed (scripts/setup installs it); the TLS policy tests need it\n");
        return 77;
    }
    if (rc != 0) {
        printf("FAILED: nginx with the TLS fixture (scripts/tls-fixture) did not start; see %s/error.log\n", server.dir);
        return 1;
    }
    return th_run(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
