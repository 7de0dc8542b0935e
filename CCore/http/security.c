/*
 * security.c — security policies (HLNetworking's HLSecurityPolicyConfig), per engine and per
 * request: pinning (none, public key, whole certificate), the two verification switches
 * (allowInvalidCertificates: CURLOPT_SSL_VERIFYPEER; validatesDomainName: CURLOPT_SSL_VERIFYHOST),
 * a CA file, a client certificate with its key and password (mutual TLS), and certificate status
 * (OCSP stapling required: CURLOPT_SSL_VERIFYSTATUS).
 *
 * The engine's policy goes on every easy handle with the shared options (cr_security_base); a
 * request's own policy replaces all of it on its handle, which is then reset before reuse
 * (cr_security_setup sets easy_dirty). libcurl keys connection reuse on these settings, so a
 * connection verified under one policy is never reused by a request under another.
 */
#include "http/http.h"

#include <strings.h>
#include <unistd.h>

void cr_security_defaults(courier_security *s) {
    memset(s, 0, sizeof *s);
    s->validates_domain = 1;
}

int courier_security_new(courier_security **out) {
    if (!out) return COURIER_E_INVALID_ARGUMENT;
    *out = malloc(sizeof **out);
    if (!*out) return COURIER_E_NO_MEMORY;
    cr_security_defaults(*out);
    return COURIER_OK;
}

void courier_security_free(courier_security *s) {
    if (!s) return;
    free(s->pins);
    free(s->ca_file);
    free(s->cert);
    free(s->key);
    free(s->key_password);
    free(s);
}

courier_security *cr_security_copy(const courier_security *src) {
    courier_security *s = malloc(sizeof *s);
    if (!s) return NULL;
    *s = *src;
    s->pins = s->ca_file = s->cert = s->key = s->key_password = NULL;
    if (cr_set_string(&s->pins, src->pins) || cr_set_string(&s->ca_file, src->ca_file) ||
        cr_set_string(&s->cert, src->cert) || cr_set_string(&s->key, src->key) ||
        cr_set_string(&s->key_password, src->key_password)) {
        courier_security_free(s);
        return NULL;
    }
    return s;
}

/* A file the policy names must be readable now: a typo is found where it is made. */
static int readable(const char *path) {
    if (!*path) return COURIER_E_INVALID_ARGUMENT;
    return access(path, R_OK) == 0 ? COURIER_OK : COURIER_E_NOT_FOUND;
}

int courier_security_set_pinning(courier_security *s, courier_pinning_mode mode, const char *pins) {
    if (!s) return COURIER_E_INVALID_ARGUMENT;
    switch (mode) {
    case COURIER_PINNING_NONE:
        s->mode = mode;
        return cr_set_string(&s->pins, NULL);
    case COURIER_PINNING_PUBLIC_KEY:
        if (!pins || !*pins) return COURIER_E_INVALID_ARGUMENT;
        if (strncmp(pins, "sha256//", 8) != 0) {
            int rc = readable(pins); /* a public key file */
            if (rc) return rc;
        }
        break;
    case COURIER_PINNING_CERTIFICATE:
        if (!pins) return COURIER_E_INVALID_ARGUMENT;
        {
            int rc = readable(pins); /* a PEM file of the certificates pinned */
            if (rc) return rc;
        }
        break;
    default:
        return COURIER_E_INVALID_ARGUMENT;
    }
    int rc = cr_set_string(&s->pins, pins);
    if (rc == COURIER_OK) s->mode = mode;
    return rc;
}

int courier_security_set_allow_invalid_certificates(courier_security *s, int allow) {
    if (!s) return COURIER_E_INVALID_ARGUMENT;
    s->allow_invalid = allow ? 1 : 0;
    return COURIER_OK;
}

int courier_security_set_validates_domain_name(courier_security *s, int validate) {
    if (!s) return COURIER_E_INVALID_ARGUMENT;
    s->validates_domain = validate ? 1 : 0;
    return COURIER_OK;
}

int courier_security_set_ca_file(courier_security *s, const char *path) {
    if (!s) return COURIER_E_INVALID_ARGUMENT;
    if (path) {
        int rc = readable(path);
        if (rc) return rc;
    }
    return cr_set_string(&s->ca_file, path);
}

int courier_security_set_client_certificate(courier_security *s, const char *cert_path, const char *key_path,
                                            const char *password) {
    if (!s) return COURIER_E_INVALID_ARGUMENT;
    if (!cert_path) {
        if (key_path || password) return COURIER_E_INVALID_ARGUMENT;
    } else {
        int rc = readable(cert_path);
        if (!rc && key_path) rc = readable(key_path);
        if (rc) return rc;
    }
    char *cert = cr_strdup(cert_path), *key = cr_strdup(key_path), *pw = cr_strdup(password);
    if ((cert_path && !cert) || (key_path && !key) || (password && !pw)) {
        free(cert);
        free(key);
        free(pw);
        return COURIER_E_NO_MEMORY;
    }
    free(s->cert);
    free(s->key);
    free(s->key_password);
    s->cert = cert;
    s->key = key;
    s->key_password = pw;
    return COURIER_OK;
}

/* Whether this libcurl's TLS library checks a stapled OCSP response: libcurl refuses
 * CURLOPT_SSL_VERIFYSTATUS with CURLE_NOT_BUILT_IN otherwise. Asked once, of a fresh handle. */
static pthread_once_t status_once = PTHREAD_ONCE_INIT;
static bool status_supported;

static void check_status_support(void) {
    CURL *h = curl_easy_init();
    if (!h) return;
    status_supported = curl_easy_setopt(h, CURLOPT_SSL_VERIFYSTATUS, 1L) == CURLE_OK;
    curl_easy_cleanup(h);
}

static bool status_support(void) {
    pthread_once(&status_once, check_status_support);
    return status_supported;
}

int courier_security_set_requires_certificate_status(courier_security *s, int require) {
    if (!s) return COURIER_E_INVALID_ARGUMENT;
    if (require && !status_support()) return COURIER_E_TLS;
    s->requires_status = require ? 1 : 0;
    return COURIER_OK;
}

/* The engine's policy, created on first change (NULL: the defaults). */
courier_security *cr_config_security(courier_config *c) {
    if (!c->security && courier_security_new(&c->security) != COURIER_OK) return NULL;
    return c->security;
}

int courier_config_set_security(courier_config *c, const courier_security *s) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    courier_security *copy = NULL;
    if (s && !(copy = cr_security_copy(s))) return COURIER_E_NO_MEMORY;
    courier_security_free(c->security);
    c->security = copy;
    return COURIER_OK;
}

int courier_request_set_security(courier_request *r, const courier_security *s) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    courier_security *copy = NULL;
    if (s && !(copy = cr_security_copy(s))) return COURIER_E_NO_MEMORY;
    courier_security_free(r->security);
    r->security = copy;
    return COURIER_OK;
}

/* ---- on the easy handle ------------------------------------------------------------------------ */

#define SET(opt, val) \
    if (c == CURLE_OK) c = curl_easy_setopt(h, opt, val)

/* libcurl's built-in CA bundle and directory, to give back to a handle whose engine set its own
 * (NULL when this libcurl has none). Read once from a fresh handle. */
static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;
static char *default_cainfo, *default_capath;

static void read_defaults(void) {
    CURL *h = curl_easy_init();
    if (!h) return;
#if LIBCURL_VERSION_NUM >= 0x075400 /* 7.84: CURLINFO_CAINFO, CURLINFO_CAPATH */
    char *p = NULL;
    if (curl_easy_getinfo(h, CURLINFO_CAINFO, &p) == CURLE_OK && p) default_cainfo = strdup(p);
    p = NULL;
    if (curl_easy_getinfo(h, CURLINFO_CAPATH, &p) == CURLE_OK && p) default_capath = strdup(p);
#endif
    curl_easy_cleanup(h);
}

bool cr_security_verifies(const courier_security *s) {
    if (!s) return true; /* the defaults verify */
    return (s->mode == COURIER_PINNING_CERTIFICATE || !s->allow_invalid) && s->validates_domain;
}

/* Every TLS option of a policy. `all`: also the ones a policy leaves at libcurl's default, to
 * replace what the engine's policy put on the handle. */
static CURLcode apply(const courier_security *s, CURL *h, bool all) {
    CURLcode c = CURLE_OK;
    bool certificate = s->mode == COURIER_PINNING_CERTIFICATE;
    /* Whole-certificate pinning: the pinned certificates are the only trust anchors (partial chains
     * allowed, libcurl's default), so the server's chain must hold one of them; never switched off
     * by allow_invalid. */
    SET(CURLOPT_SSL_VERIFYPEER, certificate || !s->allow_invalid ? 1L : 0L);
    SET(CURLOPT_SSL_VERIFYHOST, s->validates_domain ? 2L : 0L);
    const char *ca = certificate ? s->pins : s->ca_file;
    if (ca) {
        SET(CURLOPT_CAINFO, ca);
        if (certificate) SET(CURLOPT_CAPATH, NULL);
    } else if (all) {
        pthread_once(&defaults_once, read_defaults);
        SET(CURLOPT_CAINFO, default_cainfo);
        SET(CURLOPT_CAPATH, default_capath);
    }
    const char *pin = s->mode == COURIER_PINNING_PUBLIC_KEY ? s->pins : NULL;
    if (pin || all) SET(CURLOPT_PINNEDPUBLICKEY, pin);
    if (s->cert || all) {
        size_t n = s->cert ? strlen(s->cert) : 0;
        bool p12 = n > 4 && (strcasecmp(s->cert + n - 4, ".p12") == 0 || strcasecmp(s->cert + n - 4, ".pfx") == 0);
        SET(CURLOPT_SSLCERT, s->cert);
        SET(CURLOPT_SSLCERTTYPE, p12 ? "P12" : "PEM");
        SET(CURLOPT_SSLKEY, s->key);
        SET(CURLOPT_KEYPASSWD, s->key_password);
    }
    /* Certificate status: the server must staple a good OCSP response for its certificate (one
     * missing, unverifiable, revoked or out of date fails the handshake: CURLE_SSL_INVALIDCERTSTATUS,
     * COURIER_E_TLS). libcurl keys connection reuse on it too. */
    if (s->requires_status || (all && status_support())) SET(CURLOPT_SSL_VERIFYSTATUS, s->requires_status ? 1L : 0L);
    return c;
}
#undef SET

int cr_security_base(const courier_security *s, CURL *h) {
    courier_security defaults;
    if (!s) {
        cr_security_defaults(&defaults);
        s = &defaults;
    }
    return (int)apply(s, h, false);
}

int cr_security_setup(cr_transfer *t) {
    if (!t->security) return CURLE_OK;
    t->easy_dirty = 1;
    return (int)apply(t->security, t->easy, true);
}

bool cr_security_pins_certificate(const cr_transfer *t) {
    const courier_security *s = t->security ? t->security : cr_core(t->engine)->config->security;
    return s && s->mode == COURIER_PINNING_CERTIFICATE;
}
