/*
 * courier/auth.h — cookies, authentication (credentials, challenges), proxies.
 *
 * A part of Courier's public C API. courier.h includes every part and states the rules they all
 * keep (ownership, threads, errors; docs/ABI.md); a program may include this part alone.
 */
#ifndef COURIER_INC_AUTH_H
#define COURIER_INC_AUTH_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================================== */
/* Cookies, authentication, proxies                                                            */
/* ========================================================================================== */

/* Cookies (RFC 6265). Every engine has a cookie jar, on by default: cookies a response sets are
 * sent with later requests (and every hop of a redirect chain) by libcurl's own cookie engine,
 * which applies the rules: domain and path matching, host-only versus Domain cookies, Secure
 * (sent over https, or to localhost; a Secure cookie set over plain http to another host is
 * refused), HttpOnly (kept, and sent like any other: there is no script here), Max-Age/Expires,
 * the __Secure- and __Host- prefixes, and public suffixes (a cookie for "com" or "co.uk" is
 * refused) through libpsl. SameSite is ignored: it governs which site a browser's request comes
 * from, and every request of an engine is its own caller's. The jar lives in the store (the
 * journal's environment, synced): it is read at open; a response that changed it is written
 * before its completion runs; and before a request goes on the wire the engine re-reads what
 * another engine or process wrote since (an engine on a private temporary store,
 * courier_config_set_temporary_store, keeps its jar in memory only). Session cookies (no expiry) are kept in the store too:
 * the store is the session; courier_cookies_clear ends it. A frozen request is replayed with the
 * jar as it is when it is sent again. 0 turns the jar off for the engine (no Cookie header is
 * ever added, Set-Cookie is ignored, the store's jar is left as it is). Errors: COURIER_E_INVALID_ARGUMENT
 * (NULL config). */
COURIER_API int courier_config_set_cookies(courier_config *config, int enabled);

/* One cookie, as the jar holds it. Strings are borrowed (see where each is taken or given). */
typedef struct courier_cookie {
    size_t size;            /* sizeof(courier_cookie), set by the caller */
    const char *domain;     /* the host (lowercase, no leading dot) */
    const char *path;       /* "/" when the cookie gave none or NULL in courier_cookies_set */
    const char *name;
    const char *value;
    int64_t expires;        /* seconds since 1970-01-01 UTC; 0: a session cookie */
    int include_subdomains; /* nonzero: a Domain cookie, sent to subdomains too; 0: host-only */
    int secure;             /* nonzero: sent over https (and to localhost) only */
    int http_only;          /* nonzero: HttpOnly was given */
} courier_cookie;
/* Fills *cookie with zeros, keeping its size (set by the caller). Errors:
 * COURIER_E_INVALID_ARGUMENT (NULL, a size smaller than the first version's). */
COURIER_API int courier_cookie_init(courier_cookie *cookie);

typedef struct courier_cookie_list courier_cookie_list;
/* The engine's jar as the store has it now (re-read when another engine or process changed it),
 * expired cookies left out, sorted by domain, path, name. *out new: release with
 * courier_cookie_list_free. Any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL, or the jar is
 * off), COURIER_E_STORE, COURIER_E_NO_MEMORY. */
COURIER_API int courier_cookies_list(courier_cookie_list **out, courier_engine *engine, courier_error *err);
COURIER_API size_t courier_cookie_list_count(const courier_cookie_list *list);
/* Copies cookie `index` into *out (the fields within its `size`, set by the caller); its
 * strings are borrowed from the list until courier_cookie_list_free. Errors: COURIER_E_NOT_FOUND
 * (index out of range), COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_cookie_list_at(courier_cookie *out, const courier_cookie_list *list, size_t index);
/* Accepts NULL. */
COURIER_API void courier_cookie_list_free(courier_cookie_list *list);
/* Adds a cookie to the jar, replacing the one with the same domain, path and name, and writes it
 * to the store before returning. `cookie` is borrowed for the call (strings copied). An expiry in
 * the past removes the cookie. Any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL, the jar is
 * off, a size smaller than the first version's, an empty domain or name, a path not starting with '/'),
 * COURIER_E_INVALID_HEADER (a tab, CR, LF, ';' or a control byte in a field, or '=' in the name),
 * COURIER_E_STORE, COURIER_E_NO_MEMORY. */
COURIER_API int courier_cookies_set(courier_engine *engine, const courier_cookie *cookie, courier_error *err);
/* Removes the cookie with this domain, path (NULL: "/") and name, from the jar and the store.
 * Any thread. Errors: COURIER_E_NOT_FOUND, COURIER_E_INVALID_ARGUMENT, COURIER_E_STORE. */
COURIER_API int courier_cookies_remove(courier_engine *engine, const char *domain, const char *path,
                                       const char *name, courier_error *err);
/* Empties the jar and the store's jar. *out_removed (may be NULL) receives how many cookies went.
 * Any thread. Errors: COURIER_E_INVALID_ARGUMENT, COURIER_E_STORE. */
COURIER_API int courier_cookies_clear(int64_t *out_removed, courier_engine *engine, courier_error *err);

/* Authentication schemes answered to a challenge (401 WWW-Authenticate, 407 Proxy-Authenticate),
 * a bit set. With BASIC alone the credentials go with the first request; with any other set the
 * first request goes without, and the strongest scheme the server's challenge offers among those
 * allowed answers it (RFC 7616 Digest with MD5 or SHA-256, Negotiate/SPNEGO, NTLM). */
typedef enum courier_auth_scheme {
    COURIER_AUTH_BASIC = 1,
    COURIER_AUTH_DIGEST = 2,
    COURIER_AUTH_NEGOTIATE = 4, /* when this libcurl has it: see courier_auth_available */
    COURIER_AUTH_NTLM = 8       /* likewise */
} courier_auth_scheme;
/* Every scheme but Basic (which sends the password in clear): the strongest the server offers. */
#define COURIER_AUTH_ANY_SAFE (COURIER_AUTH_DIGEST | COURIER_AUTH_NEGOTIATE | COURIER_AUTH_NTLM)
#define COURIER_AUTH_ANY (COURIER_AUTH_BASIC | COURIER_AUTH_ANY_SAFE)
/* The schemes this build can answer (a courier_auth_scheme bit set). Any thread. */
COURIER_API unsigned courier_auth_available(void);

/* Credentials for every request of the engine that has none of its own. user NULL removes them.
 * Strings copied. They are sent to the origin of the request's URL only, never to another host a
 * redirect leads to. Errors: COURIER_E_INVALID_ARGUMENT (schemes 0, unknown bits, or only schemes
 * this build lacks; a ':' in the user with BASIC), COURIER_E_INVALID_HEADER (CR, LF or NUL),
 * COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_set_credentials(courier_config *config, const char *user, const char *password,
                                               unsigned schemes);
/* Credentials for this request, replacing the engine's. Errors as above. */
COURIER_API int courier_request_set_credentials(courier_request *request, const char *user, const char *password,
                                                unsigned schemes);

/* A 401 or 407 that a challenge handler may answer: the request waits, off the wire, until
 * courier_challenge_answer is called once (from any thread, at any time). */
typedef struct courier_challenge courier_challenge;
/* Called at most once per request, on the engine's worker thread, when its answer is 401 from the
 * origin of the request's own URL (never for another origin a redirect reached) or 407 from its
 * proxy. It must not block: answer now or later, from any thread. */
typedef void (*courier_challenge_fn)(courier_challenge *challenge, void *user);
/* Registers the engine's handler (NULL removes it). user_free as for validators. Errors:
 * COURIER_E_INVALID_ARGUMENT. */
COURIER_API int courier_config_set_challenge_handler(courier_config *config, courier_challenge_fn fn, void *user,
                                                     courier_user_free_fn user_free);
/* This request's handler, replacing the engine's (fn NULL: the engine's). */
COURIER_API int courier_request_set_challenge_handler(courier_request *request, courier_challenge_fn fn,
                                                      void *user, courier_user_free_fn user_free);
/* 401 or 407. */
COURIER_API int courier_challenge_status(const courier_challenge *challenge);
/* The URL that answered 401 (for 407: the request's URL). Borrowed until the challenge is answered. */
COURIER_API const char *courier_challenge_url(const courier_challenge *challenge);
/* The WWW-Authenticate (401) or Proxy-Authenticate (407) values, joined by ", " ("" when none).
 * Borrowed until the challenge is answered. */
COURIER_API const char *courier_challenge_header(const courier_challenge *challenge);
/* The request's id (as courier_send returned it). The accessors above read a challenge from any
 * thread until it is answered; none fails (a NULL challenge gives 0 or ""). */
COURIER_API uint64_t courier_challenge_request_id(const courier_challenge *challenge);
/* Answers the challenge and releases it (it must not be used after): with credentials the request
 * is sent again with them (for a 407, as the proxy's); user NULL declines, and the request
 * completes with the 401 or 407 response (COURIER_E_HTTP_STATUS, or COURIER_E_PROXY for a tunnel).
 * A request cancelled or an engine closed meanwhile makes the answer a no-op. Must be called
 * exactly once per challenge. Any thread. Errors: COURIER_E_INVALID_ARGUMENT (NULL challenge, bad
 * schemes or credentials: the challenge is then declined and released all the same). */
COURIER_API int courier_challenge_answer(courier_challenge *challenge, const char *user, const char *password,
                                         unsigned schemes);

/* Proxies. A proxy URL is "http://host:port", "https://host:port", "socks5://host:port" (names
 * resolved here) or "socks5h://host:port" (names resolved by the proxy); "" means no proxy at all
 * (direct, whatever the environment says). With none set (NULL) the environment is read as
 * libcurl reads it (http_proxy, https_proxy, all_proxy, no_proxy). `no_proxy` is a comma-separated
 * list of host names (a name matches itself and its subdomains), IP addresses and CIDR ranges that
 * go direct; "*" sends everything direct. Strings copied.
 * Errors: COURIER_E_INVALID_URL (not one of those schemes, or no host), COURIER_E_INVALID_HEADER
 * (CR, LF or NUL), COURIER_E_NO_MEMORY. */
COURIER_API int courier_config_set_proxy(courier_config *config, const char *proxy_url, const char *no_proxy);
/* The proxy of this request, replacing the engine's (proxy_url NULL: the engine's). */
COURIER_API int courier_request_set_proxy(courier_request *request, const char *proxy_url, const char *no_proxy);
/* Credentials sent to the proxy (Proxy-Authorization; for SOCKS5 the username/password method).
 * user NULL removes them. Errors as for courier_config_set_credentials. */
COURIER_API int courier_config_set_proxy_credentials(courier_config *config, const char *user, const char *password,
                                                     unsigned schemes);
COURIER_API int courier_request_set_proxy_credentials(courier_request *request, const char *user,
                                                      const char *password, unsigned schemes);

#ifdef __cplusplus
}
#endif

#endif /* COURIER_INC_AUTH_H */
