/*
 * netopts.c — names, addresses and sockets: the resolve and connect_to overrides, DNS-over-HTTPS,
 * the DNS cache's lifetime, the IP version, the happy-eyeballs delay and Unix-domain sockets, per
 * engine and per request (include/courier.h, "Names, addresses and sockets").
 *
 * The engine's settings go on every new or reset easy handle (cr_netopts_base, from
 * cr_transport_base), so a plain transfer costs nothing more. A request's go on its handle at setup
 * (cr_netopts_setup), which marks the handle dirty so the next transfer gets the engine's again.
 *
 * A request's resolve entries are sent as connect_to entries to the first address: libcurl keeps
 * CURLOPT_RESOLVE entries in the multi handle's DNS cache, shared by every transfer of the engine,
 * so a request's entry would answer other requests' lookups too. A connect_to entry belongs to its
 * transfer alone, and libcurl reuses a connection made through one only for a transfer with the
 * same entry. The URL's host stays the request's (Host, TLS name) either way.
 */
#include "http/http.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define CR_UNIX_PATH_MAX 107 /* sockaddr_un's sun_path, less its NUL */

void cr_netopts_free(cr_netopts *n) {
    if (!n) return;
    curl_slist_free_all(n->resolve);
    curl_slist_free_all(n->connect_to);
    free(n->doh_url);
    free(n->unix_socket);
    free(n);
}

static cr_netopts *netopts_new(void) {
    cr_netopts *n = cr_zalloc(sizeof *n);
    if (n) n->dns_cache_s = 60;
    return n;
}

/* Appends each line of src to *dst; 0, or -1 on no memory (*dst keeps what was appended). */
static int slist_append_all(struct curl_slist **dst, const struct curl_slist *src) {
    for (; src; src = src->next) {
        struct curl_slist *l = curl_slist_append(*dst, src->data);
        if (!l) return -1;
        *dst = l;
    }
    return 0;
}

int cr_netopts_copy(const cr_netopts *src, cr_netopts **out) {
    *out = NULL;
    if (!src) return COURIER_OK;
    cr_netopts *n = netopts_new();
    if (!n) return COURIER_E_NO_MEMORY;
    n->set = src->set;
    n->dns_cache_s = src->dns_cache_s;
    n->ip_resolve = src->ip_resolve;
    n->happy_eyeballs_ms = src->happy_eyeballs_ms;
    n->http_version = src->http_version;
    n->decode_content = src->decode_content;
    n->max_idle = src->max_idle;
    n->idle_age_s = src->idle_age_s;
    if (slist_append_all(&n->resolve, src->resolve) || slist_append_all(&n->connect_to, src->connect_to) ||
        cr_set_string(&n->doh_url, src->doh_url) || cr_set_string(&n->unix_socket, src->unix_socket)) {
        cr_netopts_free(n);
        return COURIER_E_NO_MEMORY;
    }
    *out = n;
    return COURIER_OK;
}

/* The settings of a configuration or request, made on first use (NULL: no memory). */
static cr_netopts *netopts_of(cr_netopts **slot) {
    if (!*slot) *slot = netopts_new();
    return *slot;
}

/* ---- checking what the caller gives ---------------------------------------------------------- */

static bool is_ipv4(const char *s, size_t len) {
    char buf[INET_ADDRSTRLEN];
    unsigned char a[4];
    if (len == 0 || len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return inet_pton(AF_INET, buf, a) == 1;
}

/* An IPv6 address, with or without brackets. */
static bool is_ipv6(const char *s, size_t len) {
    char buf[INET6_ADDRSTRLEN];
    unsigned char a[16];
    if (len >= 2 && s[0] == '[' && s[len - 1] == ']') s++, len -= 2;
    if (len == 0 || len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    return inet_pton(AF_INET6, buf, a) == 1;
}

/* A host as a curl entry takes it: a name (no ':', ',', space or control byte) or an IPv6 address
 * in brackets. */
static bool host_valid(const char *h) {
    if (!h || !*h) return false;
    size_t len = strlen(h);
    if (h[0] == '[') return is_ipv6(h, len) && h[len - 1] == ']';
    for (const char *p = h; *p; p++)
        if (*p == ':' || *p == ',' || (unsigned char)*p <= ' ' || *p == 0x7f) return false;
    return true;
}

static bool port_valid(int port) { return port >= 1 && port <= 65535; }

/* A comma-separated list of IPv4 and IPv6 addresses. */
static bool addresses_valid(const char *a) {
    if (!a || !*a) return false;
    for (const char *p = a;;) {
        size_t n = strcspn(p, ",");
        if (!is_ipv4(p, n) && !is_ipv6(p, n)) return false;
        if (!p[n]) return true;
        p += n + 1;
    }
}

/* ---- the setters -------------------------------------------------------------------------------- */

static int add_line(struct curl_slist **list, const char *line) {
    struct curl_slist *l = curl_slist_append(*list, line);
    if (!l) return COURIER_E_NO_MEMORY;
    *list = l;
    return COURIER_OK;
}

static int add_resolve(cr_netopts **slot, const char *host, int port, const char *addresses) {
    if (!host_valid(host) || !port_valid(port) || !addresses_valid(addresses)) return COURIER_E_INVALID_ARGUMENT;
    cr_netopts *n = netopts_of(slot);
    if (!n) return COURIER_E_NO_MEMORY;
    size_t len = strlen(host) + strlen(addresses) + 16;
    char *line = malloc(len);
    if (!line) return COURIER_E_NO_MEMORY;
    snprintf(line, len, "%s:%d:%s", host, port, addresses);
    int rc = add_line(&n->resolve, line);
    free(line);
    return rc;
}

static int add_connect_to(cr_netopts **slot, const char *host, int port, const char *to_host, int to_port) {
    if (!host_valid(host) || !port_valid(port) || !port_valid(to_port) || !to_host || !*to_host)
        return COURIER_E_INVALID_ARGUMENT;
    size_t tl = strlen(to_host);
    bool bare_v6 = to_host[0] != '[' && is_ipv6(to_host, tl); /* curl wants brackets */
    if (!bare_v6 && !host_valid(to_host)) return COURIER_E_INVALID_ARGUMENT;
    cr_netopts *n = netopts_of(slot);
    if (!n) return COURIER_E_NO_MEMORY;
    size_t len = strlen(host) + tl + 32;
    char *line = malloc(len);
    if (!line) return COURIER_E_NO_MEMORY;
    snprintf(line, len, bare_v6 ? "%s:%d:[%s]:%d" : "%s:%d:%s:%d", host, port, to_host, to_port);
    int rc = add_line(&n->connect_to, line);
    free(line);
    return rc;
}

static int set_unix_socket(cr_netopts **slot, const char *path) {
    if (path && (strlen(path) > CR_UNIX_PATH_MAX || strcmp(path, "@") == 0)) return COURIER_E_INVALID_ARGUMENT;
    cr_netopts *n = netopts_of(slot);
    if (!n) return COURIER_E_NO_MEMORY;
    int rc = cr_set_string(&n->unix_socket, path && *path ? path : NULL);
    if (rc == COURIER_OK) n->set |= CR_NET_UNIX;
    return rc;
}

int courier_config_add_resolve(courier_config *c, const char *host, int port, const char *addresses) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    return add_resolve(&c->net, host, port, addresses);
}

int courier_request_add_resolve(courier_request *r, const char *host, int port, const char *addresses) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    return add_resolve(&r->net, host, port, addresses);
}

int courier_config_add_connect_to(courier_config *c, const char *host, int port, const char *to_host, int to_port) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    return add_connect_to(&c->net, host, port, to_host, to_port);
}

int courier_request_add_connect_to(courier_request *r, const char *host, int port, const char *to_host,
                                   int to_port) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    return add_connect_to(&r->net, host, port, to_host, to_port);
}

int courier_config_set_doh_url(courier_config *c, const char *url) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    if (url && *url && (strncasecmp(url, "https://", 8) != 0 || !cr_url_valid(url))) return COURIER_E_INVALID_URL;
    cr_netopts *n = netopts_of(&c->net);
    if (!n) return COURIER_E_NO_MEMORY;
    return cr_set_string(&n->doh_url, url && *url ? url : NULL);
}

int courier_config_set_dns_cache_lifetime_ms(courier_config *c, int64_t ms) {
    if (!c || ms < -1) return COURIER_E_INVALID_ARGUMENT;
    cr_netopts *n = netopts_of(&c->net);
    if (!n) return COURIER_E_NO_MEMORY;
    int64_t s = ms <= 0 ? ms : ms / 1000 + (ms % 1000 != 0);
    n->dns_cache_s = s > LONG_MAX ? -1 : (long)s; /* longer than any engine lives: for ever */
    n->set |= CR_NET_DNS_CACHE;
    return COURIER_OK;
}

int courier_config_set_ip_version(courier_config *c, courier_ip_version version) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    long v;
    switch (version) {
    case COURIER_IP_ANY: v = CURL_IPRESOLVE_WHATEVER; break;
    case COURIER_IP_V4: v = CURL_IPRESOLVE_V4; break;
    case COURIER_IP_V6: v = CURL_IPRESOLVE_V6; break;
    default: return COURIER_E_INVALID_ARGUMENT;
    }
    cr_netopts *n = netopts_of(&c->net);
    if (!n) return COURIER_E_NO_MEMORY;
    n->ip_resolve = v;
    n->set |= CR_NET_IP;
    return COURIER_OK;
}

int courier_config_set_happy_eyeballs_delay_ms(courier_config *c, int64_t ms) {
    if (!c || ms < 0) return COURIER_E_INVALID_ARGUMENT;
    cr_netopts *n = netopts_of(&c->net);
    if (!n) return COURIER_E_NO_MEMORY;
    n->happy_eyeballs_ms = ms > LONG_MAX ? LONG_MAX : (long)ms;
    n->set |= CR_NET_EYEBALLS;
    return COURIER_OK;
}

int courier_config_set_unix_socket(courier_config *c, const char *path) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    return set_unix_socket(&c->net, path);
}

int courier_request_set_unix_socket(courier_request *r, const char *path) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    return set_unix_socket(&r->net, path);
}

static int set_http_version(cr_netopts **slot, courier_http_version v) {
    if ((int)v < COURIER_HTTP_DEFAULT || v > COURIER_HTTP_V3_ONLY) return COURIER_E_INVALID_ARGUMENT;
    if (v >= COURIER_HTTP_V3 && !courier_http3_available()) return COURIER_E_HTTP_VERSION;
    cr_netopts *n = netopts_of(slot);
    if (!n) return COURIER_E_NO_MEMORY;
    n->http_version = (int)v;
    n->set |= CR_NET_HTTPV;
    return COURIER_OK;
}

int courier_http3_available(void) {
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    return v && (v->features & CURL_VERSION_HTTP3) ? 1 : 0;
}

int courier_config_set_http_version(courier_config *c, courier_http_version version) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    return set_http_version(&c->net, version);
}

int courier_request_set_http_version(courier_request *r, courier_http_version version) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    return set_http_version(&r->net, version);
}

static int set_decode_content(cr_netopts **slot, int decode) {
    cr_netopts *n = netopts_of(slot);
    if (!n) return COURIER_E_NO_MEMORY;
    n->decode_content = decode ? 1 : 0;
    n->set |= CR_NET_DECODE;
    return COURIER_OK;
}

int courier_config_set_decode_content(courier_config *c, int decode) {
    if (!c) return COURIER_E_INVALID_ARGUMENT;
    return set_decode_content(&c->net, decode);
}

int courier_request_set_decode_content(courier_request *r, int decode) {
    if (!r) return COURIER_E_INVALID_ARGUMENT;
    return set_decode_content(&r->net, decode);
}

int courier_config_set_max_idle_connections(courier_config *c, int max_idle) {
    if (!c || max_idle < 1) return COURIER_E_INVALID_ARGUMENT;
    cr_netopts *n = netopts_of(&c->net);
    if (!n) return COURIER_E_NO_MEMORY;
    n->max_idle = max_idle;
    n->set |= CR_NET_MAX_IDLE;
    return COURIER_OK;
}

int courier_config_set_idle_connection_timeout_ms(courier_config *c, int64_t ms) {
    if (!c || ms < 0) return COURIER_E_INVALID_ARGUMENT;
    cr_netopts *n = netopts_of(&c->net);
    if (!n) return COURIER_E_NO_MEMORY;
    int64_t s = ms / 1000 + (ms % 1000 != 0);
    n->idle_age_s = s > LONG_MAX ? LONG_MAX : (long)s;
    n->set |= CR_NET_IDLE_AGE;
    return COURIER_OK;
}

long cr_netopts_max_idle(const cr_netopts *n, long fallback) {
    return n && (n->set & CR_NET_MAX_IDLE) ? n->max_idle : fallback;
}

bool cr_netopts_raw_content(const cr_netopts *req, const cr_netopts *cfg) {
    const cr_netopts *n = req && (req->set & CR_NET_DECODE) ? req : cfg && (cfg->set & CR_NET_DECODE) ? cfg : NULL;
    return n && !n->decode_content;
}

bool cr_netopts_http2_only(const cr_netopts *req, const cr_netopts *cfg) {
    const cr_netopts *n = req && (req->set & CR_NET_HTTPV) ? req : cfg && (cfg->set & CR_NET_HTTPV) ? cfg : NULL;
    return n && n->http_version == COURIER_HTTP_V2_ONLY;
}

/* libcurl's CURLOPT_HTTP_VERSION for a courier_http_version. */
static long curl_http_version(int v) {
    switch (v) {
    case COURIER_HTTP_V1_1: return CURL_HTTP_VERSION_1_1;
    case COURIER_HTTP_V2: return CURL_HTTP_VERSION_2_0;
    /* Prior knowledge: h2c for http:// (RFC 9113 3.3); over https, ALPN as usual (a server that
     * picks HTTP/1.1 is caught at its status line, transport.c). */
    case COURIER_HTTP_V2_ONLY: return CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
    case COURIER_HTTP_V3: return CURL_HTTP_VERSION_3;
#if LIBCURL_VERSION_NUM >= 0x075800 /* 7.88 */
    case COURIER_HTTP_V3_ONLY: return CURL_HTTP_VERSION_3ONLY;
#else
    case COURIER_HTTP_V3_ONLY: return CURL_HTTP_VERSION_3;
#endif
    default: return CURL_HTTP_VERSION_2TLS; /* transport.c's default */
    }
}

/* ---- on the wire --------------------------------------------------------------------------------- */

/* "host:port:addr1,addr2" as "host:port:addr1:port" (an IPv6 address in brackets). */
static int resolve_as_connect_to(struct curl_slist **list, const char *entry) {
    const char *p = entry;
    if (*p == '[') p = strchr(p, ']'); /* an IPv6 host: its colons are not separators */
    const char *c1 = p ? strchr(p, ':') : NULL;
    const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) return COURIER_OK; /* cannot happen: the setter checked it */
    const char *addr = c2 + 1;
    size_t alen = strcspn(addr, ",");
    if (alen >= 2 && addr[0] == '[') addr++, alen -= 2;
    bool v6 = memchr(addr, ':', alen) != NULL;
    size_t len = strlen(entry) + (size_t)(c2 - c1) + 4; /* the port again, brackets, NUL */
    char *line = malloc(len);
    if (!line) return COURIER_E_NO_MEMORY;
    snprintf(line, len, v6 ? "%.*s[%.*s]:%.*s" : "%.*s%.*s:%.*s", (int)(c2 + 1 - entry), entry, (int)alen, addr,
             (int)(c2 - c1 - 1), c1 + 1);
    int rc = add_line(list, line);
    free(line);
    return rc;
}

int cr_netopts_prepare(const cr_netopts *req, const cr_netopts *cfg, cr_netopts **out) {
    *out = NULL;
    if (!req) return COURIER_OK;
    cr_netopts *n = netopts_new();
    if (!n) return COURIER_E_NO_MEMORY;
    n->set = req->set & (CR_NET_UNIX | CR_NET_HTTPV);
    n->http_version = req->http_version;
    int rc = cr_set_string(&n->unix_socket, req->unix_socket);
    for (const struct curl_slist *l = req->resolve; l && rc == COURIER_OK; l = l->next)
        rc = resolve_as_connect_to(&n->connect_to, l->data);
    if (rc == COURIER_OK && slist_append_all(&n->connect_to, req->connect_to)) rc = COURIER_E_NO_MEMORY;
    if (rc == COURIER_OK && !req->connect_to && n->connect_to && cfg &&
        slist_append_all(&n->connect_to, cfg->connect_to))
        rc = COURIER_E_NO_MEMORY;
    if (rc != COURIER_OK) {
        cr_netopts_free(n);
        return rc;
    }
    *out = n;
    return COURIER_OK;
}

#define SET(opt, val) \
    if (c == CURLE_OK) c = curl_easy_setopt(h, opt, val)

/* A Unix socket path on the handle: '@' names an abstract socket. */
static CURLcode set_socket(CURL *h, const char *path) {
    CURLcode c = CURLE_OK;
    if (path && path[0] == '@') {
        SET(CURLOPT_UNIX_SOCKET_PATH, (char *)NULL);
        SET(CURLOPT_ABSTRACT_UNIX_SOCKET, path + 1);
    } else {
        SET(CURLOPT_ABSTRACT_UNIX_SOCKET, (char *)NULL);
        SET(CURLOPT_UNIX_SOCKET_PATH, path);
    }
    return c;
}

int cr_netopts_base(const cr_netopts *n, CURL *h) {
    if (!n) return CURLE_OK;
    CURLcode c = CURLE_OK;
    if (n->resolve) SET(CURLOPT_RESOLVE, n->resolve);
    if (n->connect_to) SET(CURLOPT_CONNECT_TO, n->connect_to);
    if (n->doh_url) SET(CURLOPT_DOH_URL, n->doh_url);
    if (n->set & CR_NET_DNS_CACHE) SET(CURLOPT_DNS_CACHE_TIMEOUT, n->dns_cache_s);
    if (n->set & CR_NET_IP) SET(CURLOPT_IPRESOLVE, n->ip_resolve);
    if ((n->set & CR_NET_EYEBALLS) && n->happy_eyeballs_ms) SET(CURLOPT_HAPPY_EYEBALLS_TIMEOUT_MS, n->happy_eyeballs_ms);
    if (n->unix_socket && c == CURLE_OK) c = set_socket(h, n->unix_socket);
    if (n->set & CR_NET_HTTPV) SET(CURLOPT_HTTP_VERSION, curl_http_version(n->http_version));
    if ((n->set & CR_NET_IDLE_AGE) && n->idle_age_s) SET(CURLOPT_MAXAGE_CONN, n->idle_age_s);
    return (int)c;
}

/* libcurl before 8.0.0 breaks a reused h2c connection opened with prior knowledge ("Error in the
 * HTTP2 framing layer" on its second request: curl/curl#10634, fixed by #10643 in 8.0.0). Asked of
 * the libcurl running, not the one compiled against. */
static bool h2c_reuse_broken(void) {
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    return !v || v->version_num < 0x080000;
}

int cr_netopts_setup(cr_transfer *t) {
    const cr_netopts *n = t->net;
    CURL *h = t->easy;
    CURLcode c = CURLE_OK;
    if (n) t->easy_dirty = 1; /* the request's own options: the next transfer gets the engine's again */
    if (n && n->connect_to) SET(CURLOPT_CONNECT_TO, n->connect_to);
    if (n && (n->set & CR_NET_UNIX) && c == CURLE_OK) c = set_socket(h, n->unix_socket);
    if (n && (n->set & CR_NET_HTTPV)) SET(CURLOPT_HTTP_VERSION, curl_http_version(n->http_version));
    if (t->http2_only) {
        /* A request that requires HTTP/2 on an engine that does not: libcurl would reuse the engine's
         * HTTP/1.1 connection to the origin (it keys reuse on the origin, not the version), so it
         * opens one of its own. h2c on a libcurl that breaks its reuse: a connection per request. */
        const cr_netopts *e = cr_core(t->engine)->config->net;
        bool own = !cr_netopts_http2_only(NULL, e);
        bool h2c = strncasecmp(t->url, "http:", 5) == 0 && h2c_reuse_broken();
        if (own || h2c) {
            SET(CURLOPT_FRESH_CONNECT, 1L);
            t->easy_dirty = 1;
        }
        if (h2c) SET(CURLOPT_FORBID_REUSE, 1L);
    }
    return (int)c;
}
#undef SET
