/*
 * courier/config.h — the configuration an engine opens with, security (TLS) policies, and where
 * connections go: DNS overrides, Unix sockets, HTTP versions, content codings (per engine and
 * per request).
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_CONFIG_H
#define COURIER_INC_CONFIG_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Configuration                                                                               */
/* ========================================================================================== */

/* A configuration for courier_engine_open. Not thread-safe: build it on one thread. Every string
 * setter copies its argument. Defaults: no base URL; timeout 60 000 ms; user agent
 * "Courier/<version>"; 5 requests (and connections) per host, 64 in all; form body encoding; TLS verification on
 * with the system's CA store; maximum response body 64 MiB; the durable default store directory
 * named by the app id (see courier_config_set_app_id).
 * *out is new: release it with courier_config_free (the engine copies what it needs at open).
 * Errors: COURIER_E_INVALID_ARGUMENT (out is NULL), COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_new(courier_config **out);
/* Accepts NULL. */
COURIER_API void courier_config_free(courier_config *config);

/* The base URL that relative request paths are joined to (http or https; may end with a path).
 * NULL clears it. Errors: COURIER_E_INVALID_URL. */
COURIER_API int courier_config_set_base_url(courier_config *config, const char *base_url);
/* A header added to every request unless the request sets the same name. Added in order; a
 * repeated name adds another line. Errors: COURIER_E_INVALID_HEADER, COURIER_E_INVALID_ENCODING. */
COURIER_API int courier_config_add_header(courier_config *config, const char *name, const char *value);
/* A parameter added to every request unless the request opts out
 * (courier_request_set_use_default_params). Errors: COURIER_E_INVALID_ENCODING. */
COURIER_API int courier_config_add_param(courier_config *config, const char *name, const char *value);
/* Default timeout of a request, whole transfer (all its redirects), in milliseconds (> 0): the
 * total timeout (courier_config_set_timeout has the connect and idle ones). */
COURIER_API int courier_config_set_timeout_ms(courier_config *config, int64_t timeout_ms);
/* The User-Agent header. NULL restores the default. Errors: COURIER_E_INVALID_HEADER. */
COURIER_API int courier_config_set_user_agent(courier_config *config, const char *user_agent);
/* Connection limits (>= 1). Requests over the limit wait in the engine's queue. WebSockets
 * (courier_ws_open) are not held to them: each has its connection besides the limits' (and a
 * request never takes an open WebSocket's connection to make room). */
COURIER_API int courier_config_set_max_connections_per_host(courier_config *config, int n);
COURIER_API int courier_config_set_max_connections(courier_config *config, int n);
/* How parameters are encoded when they go in the body (POST, PUT, PATCH, other methods). */
COURIER_API int courier_config_set_body_encoding(courier_config *config, courier_body_encoding encoding);
/* Largest response body accepted, in bytes (> 0). Larger bodies fail with COURIER_E_TOO_LARGE. */
COURIER_API int courier_config_set_max_response_bytes(courier_config *config, int64_t max_bytes);
/* A PEM file of CA certificates to verify servers with, instead of the system's. NULL restores. */
COURIER_API int courier_config_set_ca_file(courier_config *config, const char *path);
/* Pins the server's public key, in libcurl's form: "sha256//BASE64HASH" (several separated by ';')
 * or a path to a PEM/DER public key file. NULL removes the pin. A mismatch fails a request with
 * COURIER_E_PINNING. */
COURIER_API int courier_config_set_pinned_public_key(courier_config *config, const char *pin);
/* For development only: nonzero turns certificate and host name verification OFF (both of a
 * security policy's switches, below). */
COURIER_API int courier_config_set_insecure(courier_config *config, int insecure);

/* ========================================================================================== */
/* Security policies (HLNetworking's HLSecurityPolicyConfig), per engine and per request        */
/* ========================================================================================== */

/* How the server's certificate is pinned. */
typedef enum courier_pinning_mode {
    COURIER_PINNING_NONE = 0,       /* the CA verification alone (the default) */
    COURIER_PINNING_PUBLIC_KEY = 1, /* the server's public key must match a pin: libcurl's form,
                                       "sha256//BASE64" (several separated by ';'), or a PEM/DER
                                       public key file; a mismatch fails with COURIER_E_PINNING */
    COURIER_PINNING_CERTIFICATE = 2 /* the server's chain must hold one of the certificates of a PEM
                                       file (the leaf or a CA): they are the only trust anchors; a
                                       chain without one fails with COURIER_E_PINNING. Never turned
                                       off by allow_invalid_certificates */
} courier_pinning_mode;

/* A security policy: a value built with the setters below, copied by the functions that take it
 * (courier_config_set_security, courier_request_set_security), so it may be changed or freed
 * right after. Not thread-safe: build it on one thread. Defaults: no pinning, invalid certificates
 * refused, the domain name validated, the system's CA store, no client certificate.
 * *out is new: release it with courier_security_free. Errors: COURIER_E_INVALID_ARGUMENT,
 * COURIER_E_NO_MEMORY. */
typedef struct courier_security courier_security;
COURIER_API int courier_security_new(courier_security **out);
/* Accepts NULL. */
COURIER_API void courier_security_free(courier_security *security);
/* The pinning mode and its pins (copied; ignored for NONE). Errors: COURIER_E_INVALID_ARGUMENT (an
 * unknown mode, no pins), COURIER_E_NOT_FOUND (a file that cannot be read now). */
COURIER_API int courier_security_set_pinning(courier_security *security, courier_pinning_mode mode, const char *pins);
/* Nonzero accepts a certificate that does not verify (self-signed, expired, unknown CA): libcurl's
 * CURLOPT_SSL_VERIFYPEER off. Development only. Default 0. */
COURIER_API int courier_security_set_allow_invalid_certificates(courier_security *security, int allow);
/* 0 accepts a certificate that names another host: CURLOPT_SSL_VERIFYHOST off. Independent of
 * allow_invalid_certificates. Default 1. */
COURIER_API int courier_security_set_validates_domain_name(courier_security *security, int validate);
/* A PEM file of the CA certificates servers are verified with, instead of the system's (NULL
 * restores). Copied. Errors: COURIER_E_NOT_FOUND (cannot be read now). */
COURIER_API int courier_security_set_ca_file(courier_security *security, const char *path);
/* The client certificate sent when a server asks for one (mutual TLS): a PEM certificate with
 * its key in `key_path` (NULL: in the certificate's file), or a PKCS#12 file (".p12", ".pfx") with
 * both; `password` decrypts the key (NULL: none). cert_path NULL removes it. Copied. A certificate
 * or key that cannot be used (wrong password, mismatched key) fails requests with
 * COURIER_E_CLIENT_CERTIFICATE; a server that refuses it answers as it does (nginx: 400, or a TLS
 * alert: COURIER_E_TLS). Errors: COURIER_E_NOT_FOUND (a file that cannot be read now),
 * COURIER_E_INVALID_ARGUMENT (a key or password without a certificate). */
COURIER_API int courier_security_set_client_certificate(courier_security *security, const char *cert_path,
                                                        const char *key_path, const char *password);
/* Nonzero requires certificate status (OCSP stapling, RFC 6066 8; libcurl's
 * CURLOPT_SSL_VERIFYSTATUS): the client asks for it, and the server must staple a "good" OCSP
 * response for its certificate, signed for the certificate's issuer and not out of date. A server
 * that staples none, or a response that does not verify or says revoked or unknown, fails the
 * request with COURIER_E_TLS (courier_error.curl_code 91, CURLE_SSL_INVALIDCERTSTATUS) before
 * anything is sent. The issuer must be in the chain the server sends (as servers with an
 * intermediate CA do). Connections are not shared between requests that require it and ones that
 * do not. Default 0. Errors: COURIER_E_INVALID_ARGUMENT (NULL), COURIER_E_TLS (this libcurl's TLS
 * library cannot check certificate status). */
COURIER_API int courier_security_set_requires_certificate_status(courier_security *security, int require);
/* The engine's policy: replaces the whole of it (NULL: the defaults), including what
 * courier_config_set_ca_file, _pinned_public_key and _insecure set (they change fields of it).
 * `security` is copied. Errors: COURIER_E_INVALID_ARGUMENT (NULL config), COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_set_security(courier_config *config, const courier_security *security);
/* This request's own policy, replacing the whole of the engine's for it and every hop of its
 * redirects (NULL: the engine's). Copied. A request with its own policy never shares a connection
 * verified under another policy (libcurl keys reuse on them), is never coalesced with another, and
 * is not frozen (a frozen request is replayed under the engine's policy, so it fails instead).
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL request), COURIER_E_NO_MEMORY. */
COURIER_API int courier_request_set_security(courier_request *request, const courier_security *security);
/* The directory the engine keeps its store in (cache, journal). It is created (with parents,
 * mode 0700) at open. NULL restores the default: the durable default store named by the app id
 * (courier_config_set_app_id), or with courier_config_set_temporary_store a private temporary
 * directory removed at close. Errors: COURIER_E_INVALID_ARGUMENT (empty). */
COURIER_API int courier_config_set_store_dir(courier_config *config, const char *path);
/* The app's id ("com.example.notes", "notes"): names the default store, the directory where the
 * platform keeps an app's data, so frozen requests and the cache outlive the engine and the
 * process: "$XDG_DATA_HOME/<app id>/courier" (XDG_DATA_HOME when absolute, else
 * "~/.local/share/<app id>/courier") on Linux and other Unix systems,
 * "~/Library/Application Support/<app id>/courier" on Darwin. Engines of one app id share that
 * store (across processes and languages). Copied. NULL restores the default: the program's name
 * (glibc's program_invocation_short_name, Darwin's getprogname; "courier" when there is none).
 * Where the program is an interpreter (python3, node), that name is the interpreter's, the same
 * for every script it runs: a binding for one sets the app id itself (the Python binding: the
 * main script's name, or a temporary store when there is no script).
 * Unused when a store directory is set. Errors: COURIER_E_INVALID_ARGUMENT (empty, "." or "..",
 * a '/', or longer than 255 bytes). */
COURIER_API int courier_config_set_app_id(courier_config *config, const char *app_id);
/* Nonzero: when no store directory is set, the engine keeps its store in a private temporary
 * directory (under $TMPDIR, else /tmp) removed when it closes, instead of the default store: for
 * tests, demos and one-shot tools. Frozen requests then do not outlive the engine, and each
 * freeze logs a warning (event "frozen_temporary_store", level WARNING) on the engine's logger.
 * 0 (the default): the durable default store. A store directory, when set, wins. */
COURIER_API int courier_config_set_temporary_store(courier_config *config, int temporary);
/* Nonzero: open only a store that exists. When the store directory (the one set, or the default
 * store of the app id) does not exist or is not a directory, courier_engine_open fails with
 * COURIER_E_STORE (message "no store at '<path>'", os_error ENOENT or ENOTDIR) and creates
 * nothing; for tools and scripts that inspect or clean a store and must not make one by a typo.
 * 0 (the default): the directory is created at open. No effect with a temporary store; the
 * cache's and journal's own stores (courier_config_set_cache_store, _frozen_store) are not
 * checked. Errors: COURIER_E_INVALID_ARGUMENT (NULL config). */
COURIER_API int courier_config_set_store_must_exist(courier_config *config, int must_exist);
/* A validator run on every response of requests that have none of their own. NULL removes it.
 * user_free (may be NULL) is called once when the registration ends (config freed or replaced);
 * the engine keeps its own reference, so `user` must stay valid until the engine that was opened
 * with this configuration has closed, or use user_free to release it. */
COURIER_API int courier_config_set_validator(courier_config *config, courier_validator_fn fn, void *user,
                                             courier_user_free_fn user_free);

/* ========================================================================================== */
/* Names, addresses and sockets: DNS overrides, DNS-over-HTTPS, IP version, Unix sockets        */
/* ========================================================================================== */

/* Where a request's connection goes, apart from what the URL says. The URL's host stays the
 * request's host throughout: the Host field, TLS (SNI and the certificate's name), cookies, the
 * cache key and the origin of credentials are the URL's, whichever address the connection reaches.
 * A connection is reused only by requests that would have made the same one.
 *
 * Engine settings (every request of engines opened with the configuration):
 *   resolve      host:port answered with given addresses instead of the DNS (curl's --resolve):
 *                every address is tried, like the DNS's answer. Later entries for the same
 *                host:port replace earlier ones.
 *   connect_to   host:port reached by connecting to another host:port (curl's --connect-to); the
 *                first entry that matches is used.
 *   doh_url      names resolved over DNS-over-HTTPS (RFC 8484) at this https:// URL.
 *   dns_cache_lifetime_ms, ip_version, happy_eyeballs_delay_ms (below).
 *   unix_socket  every connection made over a Unix-domain socket (below).
 * Request settings replace the engine's for one request (and its redirects): its resolve entries
 * come first (a request's entry uses the first of its addresses), then its connect_to entries, then
 * the engine's connect_to entries unless the request added its own. A request's overrides are
 * its own: they are never seen by other requests, and a request with any of them is never coalesced
 * with another (courier_request_set_coalesce).
 *
 * The address a response came from, and whether its connection was reused, are in its metrics
 * (courier_metrics.remote_ip, .remote_port, .connection_reused). Setters run on the thread that
 * owns the configuration or request; strings are copied. */

/* Adds a resolve entry: `host` (a name, or an IPv6 address in brackets) and `port` (1..65535)
 * answered with `addresses`: one or more IPv4 or IPv6 addresses (IPv6 without brackets), separated
 * by commas ("127.0.0.1", "10.0.0.1,::1"). Errors: COURIER_E_INVALID_ARGUMENT (NULL config or
 * request, an empty host or one holding ':', ',' or a space, a port out of range, an address that
 * does not parse), COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_add_resolve(courier_config *config, const char *host, int port, const char *addresses);
COURIER_API int courier_request_add_resolve(courier_request *request, const char *host, int port,
                                            const char *addresses);
/* Adds a connect_to entry: connections for `host`:`port` go to `to_host`:`to_port` instead (a
 * name, an IPv4 address, or an IPv6 address with or without brackets; 1..65535). Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL config or request, a host as for resolve, a port out of range),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_add_connect_to(courier_config *config, const char *host, int port, const char *to_host,
                                              int to_port);
COURIER_API int courier_request_add_connect_to(courier_request *request, const char *host, int port,
                                               const char *to_host, int to_port);
/* Names are resolved over DNS-over-HTTPS at `url` (an https:// URL; NULL or "": the system's
 * resolver, the default). The DoH server's own name is resolved by the system. Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL config), COURIER_E_INVALID_URL (not an https:// URL),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_set_doh_url(courier_config *config, const char *url);
/* How long a resolved name is kept by the engine's DNS cache, in milliseconds (rounded up to whole
 * seconds; 0: not kept; -1: kept for the engine's life). Default 60000. Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL config, a value below -1). */
COURIER_API int courier_config_set_dns_cache_lifetime_ms(courier_config *config, int64_t ms);
/* Which addresses a name is resolved to and connected over. */
typedef enum courier_ip_version {
    COURIER_IP_ANY = 0, /* IPv4 and IPv6 (the default) */
    COURIER_IP_V4 = 4,  /* IPv4 only */
    COURIER_IP_V6 = 6   /* IPv6 only */
} courier_ip_version;
/* Errors: COURIER_E_INVALID_ARGUMENT (NULL config, another value). */
COURIER_API int courier_config_set_ip_version(courier_config *config, courier_ip_version version);
/* Happy eyeballs (RFC 8305): with both IPv6 and IPv4 addresses, the head start the first family
 * gets before the other is tried, in milliseconds (>= 0; 0: libcurl's default, 200). Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL config, a negative value). */
COURIER_API int courier_config_set_happy_eyeballs_delay_ms(courier_config *config, int64_t ms);
/* Connections made over the Unix-domain socket at `path` instead of TCP: the URL still gives the
 * scheme, the Host field, TLS's name and the cache key. A path starting with '@' names a Linux
 * abstract socket (the rest of the path; other systems have none: the send fails with
 * COURIER_E_CANNOT_CONNECT). NULL or "": TCP (for a request: TCP even when the engine has a
 * socket). A socket that does not exist or refuses: COURIER_E_CANNOT_CONNECT. At most 107 bytes.
 * Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL config or request, a path too long, or "@" alone),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_set_unix_socket(courier_config *config, const char *path);
COURIER_API int courier_request_set_unix_socket(courier_request *request, const char *path);

/* ========================================================================================== */
/* HTTP versions                                                                               */
/* ========================================================================================== */

/* Which HTTP versions a request may use. courier_metrics.http_version says which one it did. */
typedef enum courier_http_version {
    COURIER_HTTP_DEFAULT = 0, /* HTTP/2 over https when the server offers it by ALPN, else HTTP/1.1;
                                 HTTP/1.1 for http:// */
    COURIER_HTTP_V1_1 = 1,    /* HTTP/1.1 only: HTTP/2 is never offered */
    COURIER_HTTP_V2 = 2,      /* HTTP/2 preferred: over https by ALPN, over http:// by an
                                 "Upgrade: h2c" the server may ignore; HTTP/1.1 otherwise */
    COURIER_HTTP_V2_ONLY = 3, /* HTTP/2 required: over https by ALPN, over http:// with prior
                                 knowledge (h2c, RFC 9113 3.3: no upgrade, the connection starts in
                                 HTTP/2). A server that answers over HTTP/1.x, or an http:// server
                                 that does not speak HTTP/2, fails the request with
                                 COURIER_E_HTTP_VERSION (over https the request was sent). On an
                                 engine that does not require HTTP/2, such a request opens a
                                 connection of its own; h2c connections are not reused on a libcurl
                                 older than 8.0.0 (it breaks them: curl/curl#10634) */
    COURIER_HTTP_V3 = 4,      /* HTTP/3 preferred (QUIC), HTTP/2 or 1.1 when it cannot be had */
    COURIER_HTTP_V3_ONLY = 5  /* HTTP/3 only */
} courier_http_version;
/* Sets the HTTP version of every request of engines opened with config, or of one request
 * (replacing the engine's; its redirects keep it). HTTP/3 exists only where libcurl was built
 * with it (courier_http3_available): elsewhere asking for it fails here, with
 * COURIER_E_HTTP_VERSION. Setters run on the thread that owns the configuration or request.
 * Errors: COURIER_E_INVALID_ARGUMENT (NULL, another value), COURIER_E_HTTP_VERSION,
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_set_http_version(courier_config *config, courier_http_version version);
COURIER_API int courier_request_set_http_version(courier_request *request, courier_http_version version);
/* 1 when the libcurl Courier runs on speaks HTTP/3, else 0. Any thread. */
COURIER_API int courier_http3_available(void);

/* Content codings (RFC 9110 8.4). Requests offer the codings this libcurl decodes (Accept-Encoding:
 * deflate, gzip, br, zstd as built) and a response's body arrives decoded, its Content-Encoding and
 * Content-Length fields removed (a coding libcurl does not know arrives as received, the field
 * kept). A body that does not decode fails with COURIER_E_PROTOCOL. With decode 0 the body arrives
 * as the server coded it, Content-Encoding and Content-Length kept; such requests neither read nor
 * write the cache (which holds decoded bodies). Default 1; a request's setting replaces the
 * engine's. Errors: COURIER_E_INVALID_ARGUMENT (NULL), COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_set_decode_content(courier_config *config, int decode);
COURIER_API int courier_request_set_decode_content(courier_request *request, int decode);

/* The connection pool's limits. max_idle (>= 1): connections kept open between requests; when one
 * more is put back, the one idle longest is closed (default: courier_config_set_max_connections's
 * value). idle_timeout_ms (>= 0; rounded up to whole seconds; 0: libcurl's default, 118 s): a
 * connection idle longer is not reused but closed. Errors: COURIER_E_INVALID_ARGUMENT (NULL config,
 * a value out of range), COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_set_max_idle_connections(courier_config *config, int max_idle);
COURIER_API int courier_config_set_idle_connection_timeout_ms(courier_config *config, int64_t idle_timeout_ms);

/* ========================================================================================== */
/* HSTS and Alt-Svc                                                                            */
/* ========================================================================================== */

/* HTTP Strict Transport Security (RFC 6797), on by default. A Strict-Transport-Security field an
 * https:// response carries (the first one; an invalid one is ignored) makes its host an HSTS host
 * until max-age seconds have passed by the engine's clock (courier_config_set_clock),
 * includeSubDomains making its subdomains HSTS hosts too; max-age=0 removes the host. The field is
 * ignored over http:// and for IP addresses. From then on a request, or a redirect hop, to an
 * http:// URL of a known host goes out as https:// (an explicit port 80 becomes 443, another port
 * is kept): courier_response_url says https:// and courier_response_hsts_upgraded says 1. The list
 * is kept in the store (the journal's LMDB environment), so it survives a restart and is shared,
 * at once, by every engine and process on the same store directory; an engine on a temporary store
 * (or with its journal in Redis) keeps it in memory. 0 turns HSTS off for the engine (nothing is
 * upgraded or learnt; the store's list is left as it is). Errors: COURIER_E_INVALID_ARGUMENT (NULL). */
COURIER_API int courier_config_set_hsts(courier_config *config, int enabled);
/* 1 when the response's URL was changed from http:// to https:// because its host is a known HSTS
 * host (the request's or a redirect hop's), else 0 (also for NULL). Any thread. */
COURIER_API int courier_response_hsts_upgraded(const courier_response *response);

/* One HSTS host, as the list holds it. The host is borrowed from the list. */
typedef struct courier_hsts_entry {
    size_t size;            /* sizeof(courier_hsts_entry), set by the caller */
    const char *host;       /* lowercase, no trailing dot */
    int include_subdomains; /* nonzero: its subdomains are HSTS hosts too */
    int64_t expires;        /* seconds since 1970-01-01 UTC; 0: never (a preloaded "unlimited") */
} courier_hsts_entry;
typedef struct courier_hsts_entries courier_hsts_entries;
/* The engine's HSTS hosts as the store has them now (other engines' and processes' included),
 * expired ones left out, sorted by host. *out new: release with courier_hsts_entries_free. Any
 * thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL, or HSTS is off), COURIER_E_STORE,
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_hsts_list(courier_hsts_entries **out, courier_engine *engine, courier_error *err);
/* A list never changes: its readers may run on any threads at once; free it once, after the last
 * read. The number of entries (0 for NULL). */
COURIER_API size_t courier_hsts_entries_count(const courier_hsts_entries *entries);
/* Copies entry `index` into *out (the fields within its `size`, set by the caller); the host is
 * borrowed from the list until courier_hsts_entries_free. Errors: COURIER_E_NOT_FOUND (index out
 * of range), COURIER_E_INVALID_ARGUMENT (NULL, size too small). */
COURIER_API int courier_hsts_entries_at(courier_hsts_entry *out, const courier_hsts_entries *entries, size_t index);
/* Frees the list (NULL allowed). */
COURIER_API void courier_hsts_entries_free(courier_hsts_entries *entries);
/* Empties the list, in the store (so for every engine and process on it). *out_removed (may be
 * NULL) receives how many hosts went (expired ones included). Any thread. Errors: as
 * courier_hsts_list. */
COURIER_API int courier_hsts_clear(int64_t *out_removed, courier_engine *engine, courier_error *err);
/* Adds the hosts of a file in curl's HSTS format (one per line: `[.]host "YYYYMMDD HH:MM:SS"` in
 * UTC, or `"unlimited"`; a leading '.' means includeSubDomains; '#' lines are comments; what is not
 * such a line is skipped) to the list and the store. A host already known keeps the later expiry and
 * includeSubDomains if either has it; expired lines are skipped. `path` borrowed for the call.
 * *out_added (may be NULL): the hosts added or changed. Any thread. Errors: COURIER_E_NOT_FOUND
 * (no such file; err->os_error), COURIER_E_INVALID_ARGUMENT (NULL, HSTS off, the file cannot be
 * read), COURIER_E_STORE, COURIER_E_NO_MEMORY. */
COURIER_API int courier_hsts_preload(int64_t *out_added, courier_engine *engine, const char *path, courier_error *err);

/* Alternative services (RFC 7838), off by default. On: libcurl's Alt-Svc cache (h1, h2 and h3 as
 * this libcurl speaks them) remembers what https:// responses advertise and later connections to the
 * origin go to the alternative. The cache is libcurl's file "alt-svc.txt" in the store directory:
 * each connection handle reads it when it is made and writes it back, whole, when it is closed
 * (engine close at the latest), so it survives a restart; processes sharing the store each read it
 * as their handles are made, and the last one to close a handle writes what it knew (an entry lost
 * that way is learnt again from the origin's next Alt-Svc field). A temporary store keeps it in
 * memory. Errors: COURIER_E_INVALID_ARGUMENT (NULL config). */
COURIER_API int courier_config_set_alt_svc(courier_config *config, int enabled);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_CONFIG_H */
