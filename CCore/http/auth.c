/*
 * auth.c — credentials (Basic, Digest, Negotiate, NTLM through libcurl's CURLOPT_HTTPAUTH), proxies
 * (CURLOPT_PROXY, NOPROXY, proxy credentials), and challenge handlers: a 401 from the request's own
 * origin or a 407 from its proxy, answered once, from any thread, while the request waits off the
 * wire (the engine holds it on its timer list; see engine.c's "challenges").
 *
 * Settings come in groups (credentials; proxy credentials; proxy and no-proxy list; handler): a
 * request's group replaces the engine's. The engine's proxy group goes on every easy handle with the
 * shared options (cr_auth_base); a transfer's own groups and any credentials go on its handle, which
 * is then reset before another transfer uses it.
 */
#include "http/http.h"

#include <strings.h>

/* In a transfer's merged settings, which groups are its request's own (they go on its handle in
 * cr_auth_setup; the engine's are on every handle already): has_proxy 2 (1: the engine's), and this
 * bit in proxy_schemes. */
#define OWN_PROXY 2
#define OWN_PROXY_CREDS 0x100u

/* ---- groups ----------------------------------------------------------------------------------- */

void cr_auth_free(cr_auth *a) {
    if (!a) return;
    free(a->user);
    free(a->password);
    free(a->proxy_user);
    free(a->proxy_password);
    free(a->proxy);
    free(a->no_proxy);
    free(a->origin);
    cr_callback_release(a->challenge);
    free(a);
}

static int set_pair(char **u, char **p, const char *user, const char *password) {
    char *nu = cr_strdup(user), *np = cr_strdup(password ? password : "");
    if ((user && !nu) || !np) {
        free(nu);
        free(np);
        return COURIER_E_NO_MEMORY;
    }
    free(*u);
    free(*p);
    *u = nu;
    *p = user ? np : (free(np), NULL);
    return COURIER_OK;
}

/* Copies the groups of `src` that `pick` selects (bits: 1 credentials, 2 proxy credentials, 4 proxy,
 * 8 handler) into dst. */
static int copy_groups(cr_auth *dst, const cr_auth *src, unsigned pick) {
    if ((pick & 1) && src->user) {
        if (set_pair(&dst->user, &dst->password, src->user, src->password)) return COURIER_E_NO_MEMORY;
        dst->schemes = src->schemes;
    }
    if ((pick & 2) && src->proxy_user) {
        if (set_pair(&dst->proxy_user, &dst->proxy_password, src->proxy_user, src->proxy_password))
            return COURIER_E_NO_MEMORY;
        dst->proxy_schemes = src->proxy_schemes;
    }
    if ((pick & 4) && src->has_proxy) {
        dst->has_proxy = 1;
        if (cr_set_string(&dst->proxy, src->proxy) || cr_set_string(&dst->no_proxy, src->no_proxy))
            return COURIER_E_NO_MEMORY;
    }
    if ((pick & 8) && src->challenge) {
        cr_callback_release(dst->challenge);
        dst->challenge = cr_callback_retain(src->challenge);
    }
    return COURIER_OK;
}

cr_auth *cr_auth_copy(const cr_auth *a) {
    if (!a) return NULL;
    cr_auth *c = calloc(1, sizeof *c);
    if (c && copy_groups(c, a, 15)) {
        cr_auth_free(c);
        return NULL;
    }
    return c;
}

int cr_auth_merge(const cr_auth *req, const cr_auth *cfg, const char *url, cr_auth **out) {
    *out = NULL;
    if (!req && !cfg) return COURIER_OK;
    cr_auth *m = calloc(1, sizeof *m);
    if (!m) return COURIER_E_NO_MEMORY;
    unsigned from_req = 0;
    if (req) from_req = (req->user ? 1u : 0) | (req->proxy_user ? 2u : 0) | (req->has_proxy ? 4u : 0) | (req->challenge ? 8u : 0);
    if ((req && copy_groups(m, req, from_req)) || (cfg && copy_groups(m, cfg, ~from_req & 15u))) {
        cr_auth_free(m);
        return COURIER_E_NO_MEMORY;
    }
    if (!m->user && !m->proxy_user && !m->has_proxy && !m->challenge) {
        cr_auth_free(m);
        return COURIER_OK;
    }
    /* Remember which groups are the request's own: they go on the transfer's handle. */
    if (from_req & 4) m->has_proxy = OWN_PROXY;
    if (from_req & 2) m->proxy_schemes |= OWN_PROXY_CREDS;
    if ((m->user || m->challenge) && !(m->origin = cr_url_origin(url))) {
        cr_auth_free(m);
        return COURIER_E_NO_MEMORY;
    }
    *out = m;
    return COURIER_OK;
}

/* ---- setters ---------------------------------------------------------------------------------- */

unsigned courier_auth_available(void) {
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    unsigned a = COURIER_AUTH_BASIC | COURIER_AUTH_DIGEST;
    if (v && (v->features & CURL_VERSION_SPNEGO)) a |= COURIER_AUTH_NEGOTIATE;
    if (v && (v->features & CURL_VERSION_NTLM)) a |= COURIER_AUTH_NTLM;
    return a;
}

static unsigned long curl_mask(unsigned schemes) {
    unsigned long m = 0;
    if (schemes & COURIER_AUTH_BASIC) m |= CURLAUTH_BASIC;
    if (schemes & COURIER_AUTH_DIGEST) m |= CURLAUTH_DIGEST;
    if (schemes & COURIER_AUTH_NEGOTIATE) m |= CURLAUTH_NEGOTIATE;
    if (schemes & COURIER_AUTH_NTLM) m |= CURLAUTH_NTLM;
    return m;
}

/* Checks credentials; the schemes this build has, or 0 with *code set. */
static unsigned check_credentials(const char *user, const char *password, unsigned schemes, int *code) {
    *code = COURIER_OK;
    if (!user) return 0;
    unsigned usable = schemes & courier_auth_available();
    if (!schemes || (schemes & ~(unsigned)COURIER_AUTH_ANY) || !usable) {
        *code = COURIER_E_INVALID_ARGUMENT;
        return 0;
    }
    if ((schemes & COURIER_AUTH_BASIC) && strchr(user, ':')) { /* RFC 7617: no colon in the user id */
        *code = COURIER_E_INVALID_ARGUMENT;
        return 0;
    }
    int rc = cr_check_header("Authorization", 13, user, strlen(user));
    if (!rc && password) rc = cr_check_header("Authorization", 13, password, strlen(password));
    if (rc) *code = rc;
    return rc ? 0 : usable;
}

static cr_auth *auth_of(cr_auth **slot) {
    if (!*slot) *slot = calloc(1, sizeof **slot);
    return *slot;
}

static int set_credentials(cr_auth **slot, bool proxy, const char *user, const char *password, unsigned schemes) {
    int rc;
    unsigned usable = check_credentials(user, password, schemes, &rc);
    if (rc) return rc;
    cr_auth *a = auth_of(slot);
    if (!a) return COURIER_E_NO_MEMORY;
    if (set_pair(proxy ? &a->proxy_user : &a->user, proxy ? &a->proxy_password : &a->password, user, password))
        return COURIER_E_NO_MEMORY;
    *(proxy ? &a->proxy_schemes : &a->schemes) = usable;
    return COURIER_OK;
}

static bool proxy_url_ok(const char *url) {
    static const char *const schemes[] = {"http://", "https://", "socks5://", "socks5h://"};
    bool known = false;
    for (size_t i = 0; i < 4 && !known; i++) known = strncasecmp(url, schemes[i], strlen(schemes[i])) == 0;
    if (!known) return false;
    CURLU *u = curl_url();
    char *host = NULL;
    bool ok = u && curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
              curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK && host && *host;
    curl_free(host);
    curl_url_cleanup(u);
    return ok;
}

static int set_proxy(cr_auth **slot, const char *url, const char *no_proxy) {
    if (url && *url) {
        for (const unsigned char *p = (const unsigned char *)url; *p; p++)
            if (*p <= 0x20 || *p == 0x7f) return strchr(url, '\r') || strchr(url, '\n') ? COURIER_E_INVALID_HEADER : COURIER_E_INVALID_URL;
        if (!proxy_url_ok(url)) return COURIER_E_INVALID_URL;
    }
    if (no_proxy)
        for (const unsigned char *p = (const unsigned char *)no_proxy; *p; p++)
            if (*p < 0x20 || *p == 0x7f) return COURIER_E_INVALID_HEADER;
    cr_auth *a = auth_of(slot);
    if (!a) return COURIER_E_NO_MEMORY;
    a->has_proxy = url != NULL;
    if (cr_set_string(&a->proxy, url) || cr_set_string(&a->no_proxy, url ? no_proxy : NULL)) return COURIER_E_NO_MEMORY;
    return COURIER_OK;
}

int courier_config_set_credentials(courier_config *c, const char *user, const char *password, unsigned schemes) {
    return c ? set_credentials(&c->auth, false, user, password, schemes) : COURIER_E_INVALID_ARGUMENT;
}
int courier_request_set_credentials(courier_request *r, const char *user, const char *password, unsigned schemes) {
    return r ? set_credentials(&r->auth, false, user, password, schemes) : COURIER_E_INVALID_ARGUMENT;
}
int courier_config_set_proxy_credentials(courier_config *c, const char *user, const char *password, unsigned schemes) {
    return c ? set_credentials(&c->auth, true, user, password, schemes) : COURIER_E_INVALID_ARGUMENT;
}
int courier_request_set_proxy_credentials(courier_request *r, const char *user, const char *password,
                                          unsigned schemes) {
    return r ? set_credentials(&r->auth, true, user, password, schemes) : COURIER_E_INVALID_ARGUMENT;
}
int courier_config_set_proxy(courier_config *c, const char *url, const char *no_proxy) {
    return c ? set_proxy(&c->auth, url, no_proxy) : COURIER_E_INVALID_ARGUMENT;
}
int courier_request_set_proxy(courier_request *r, const char *url, const char *no_proxy) {
    return r ? set_proxy(&r->auth, url, no_proxy) : COURIER_E_INVALID_ARGUMENT;
}

static int set_handler(cr_auth **slot, courier_challenge_fn fn, void *user, courier_user_free_fn user_free) {
    cr_auth *a = slot ? auth_of(slot) : NULL;
    if (slot && !a) {
        if (fn && user_free) user_free(user);
        return COURIER_E_NO_MEMORY;
    }
    return cr_callback_set(a ? &a->challenge : NULL, (void (*)(void))fn, user, user_free);
}
int courier_config_set_challenge_handler(courier_config *c, courier_challenge_fn fn, void *user,
                                         courier_user_free_fn user_free) {
    return set_handler(c ? &c->auth : NULL, fn, user, user_free);
}
int courier_request_set_challenge_handler(courier_request *r, courier_challenge_fn fn, void *user,
                                          courier_user_free_fn user_free) {
    return set_handler(r ? &r->auth : NULL, fn, user, user_free);
}

/* ---- the easy handle -------------------------------------------------------------------------- */

#define SET(opt, val) \
    if (c == CURLE_OK) c = curl_easy_setopt(h, opt, val)

static CURLcode set_proxy_opts(CURL *h, const cr_auth *a) {
    CURLcode c = CURLE_OK;
    SET(CURLOPT_PROXY, a->proxy ? a->proxy : "");
    SET(CURLOPT_NOPROXY, a->no_proxy);
    return c;
}

static CURLcode set_proxy_creds(CURL *h, const cr_auth *a) {
    CURLcode c = CURLE_OK;
    SET(CURLOPT_PROXYUSERNAME, a->proxy_user);
    SET(CURLOPT_PROXYPASSWORD, a->proxy_password);
    SET(CURLOPT_PROXYAUTH, curl_mask(a->proxy_schemes));
    return c;
}

int cr_auth_base(const cr_auth *cfg, CURL *h) {
    CURLcode c = CURLE_OK;
    if (cfg && cfg->has_proxy) c = set_proxy_opts(h, cfg);
    if (c == CURLE_OK && cfg && cfg->proxy_user) c = set_proxy_creds(h, cfg);
    return (int)c;
}

int cr_auth_setup(courier_engine *e, cr_transfer *t) {
    (void)e;
    const cr_auth *a = t->auth;
    if (!a) return CURLE_OK;
    CURL *h = t->easy;
    CURLcode c = CURLE_OK;
    /* Credentials go to the request's own origin only: libcurl keeps them from the hosts it
     * follows a redirect to, and a hop the engine follows itself (a new transfer) to another
     * origin goes without them. */
    bool own_origin = false;
    if (a->user) {
        char *now = cr_url_origin(t->url);
        own_origin = now && a->origin && strcmp(now, a->origin) == 0;
        free(now);
    }
    if (own_origin) {
        SET(CURLOPT_USERNAME, a->user);
        SET(CURLOPT_PASSWORD, a->password);
        SET(CURLOPT_HTTPAUTH, curl_mask(a->schemes));
        t->easy_dirty = 1;
    }
    if (c == CURLE_OK && a->has_proxy == OWN_PROXY) {
        c = set_proxy_opts(h, a);
        t->easy_dirty = 1;
    }
    if (c == CURLE_OK && a->proxy_user && (a->proxy_schemes & OWN_PROXY_CREDS)) {
        c = set_proxy_creds(h, a);
        t->easy_dirty = 1;
    }
    return (int)c;
}
#undef SET

/* ---- challenges ------------------------------------------------------------------------------- */

struct courier_challenge {
    courier_engine *e;       /* NULL once the engine closed (under challenge_mu) */
    struct courier_challenge *next;
    uint64_t id;
    int status;
    char *url;
    char *header;
    /* The answer. */
    char *user, *password;
    unsigned schemes;
};

/* Guards every challenge's `e` and the engine lists (taken before the engine's lock). */
static pthread_mutex_t challenge_mu = PTHREAD_MUTEX_INITIALIZER;

void cr_challenge_free(courier_challenge *ch) {
    if (!ch) return;
    free(ch->url);
    free(ch->header);
    free(ch->user);
    free(ch->password);
    free(ch);
}

uint64_t cr_challenge_id(const courier_challenge *ch) { return ch->id; }
courier_challenge *cr_challenge_next(const courier_challenge *ch) { return ch->next; }

bool cr_challenge_offer(courier_engine *e, cr_transfer *t, courier_response *resp,
                        void (*hold)(courier_engine *e, cr_transfer *t)) {
    if (!resp || !t->auth || t->auth->challenged || !t->auth->challenge) return false;
    if (resp->status != 401 && resp->status != 407) return false;
    if (resp->status == 401) { /* never for another origin than the request's own */
        char *now = cr_url_origin(resp->url);
        bool same = now && t->auth->origin && strcmp(now, t->auth->origin) == 0;
        free(now);
        if (!same) return false;
    }
    courier_challenge *ch = calloc(1, sizeof *ch);
    cr_buf hdr = {0};
    const char *want = resp->status == 401 ? "WWW-Authenticate" : "Proxy-Authenticate";
    for (size_t i = 0; i < resp->headers.count; i++) {
        if (strcasecmp(resp->headers.items[i].name, want) != 0) continue;
        if ((hdr.len && cr_buf_append_str(&hdr, ", ")) || cr_buf_append_str(&hdr, resp->headers.items[i].value)) break;
    }
    if (!ch || !(ch->url = cr_strdup(resp->status == 401 ? resp->url : t->url)) || !(ch->header = cr_buf_take(&hdr, NULL))) {
        cr_buf_free(&hdr);
        cr_challenge_free(ch);
        return false; /* no memory: the 401 goes to the caller as it is */
    }
    ch->e = e;
    ch->id = t->id;
    ch->status = resp->status;
    t->auth->challenged = 1;
    t->held = resp;
    hold(e, t);
    pthread_mutex_lock(&challenge_mu);
    pthread_mutex_lock(&cr_core(e)->lock);
    ch->next = cr_core(e)->challenges;
    cr_core(e)->challenges = ch;
    pthread_mutex_unlock(&cr_core(e)->lock);
    pthread_mutex_unlock(&challenge_mu);
    cr_raised *outer = cr_raise_catch(&t->raised); /* user_error.c: t is held while the challenge waits */
    ((courier_challenge_fn)t->auth->challenge->fn)(ch, t->auth->challenge->user);
    cr_raise_catch(outer);
    return true;
}

int courier_challenge_status(const courier_challenge *ch) { return ch ? ch->status : 0; }
const char *courier_challenge_url(const courier_challenge *ch) { return ch ? ch->url : NULL; }
const char *courier_challenge_header(const courier_challenge *ch) { return ch ? ch->header : NULL; }
uint64_t courier_challenge_request_id(const courier_challenge *ch) { return ch ? ch->id : 0; }

int courier_challenge_answer(courier_challenge *ch, const char *user, const char *password, unsigned schemes) {
    if (!ch) return COURIER_E_INVALID_ARGUMENT;
    int rc;
    unsigned usable = check_credentials(user, password, schemes, &rc);
    if (rc == COURIER_OK && user && set_pair(&ch->user, &ch->password, user, password)) rc = COURIER_E_NO_MEMORY;
    if (rc != COURIER_OK) set_pair(&ch->user, &ch->password, NULL, NULL); /* declined */
    ch->schemes = usable;
    pthread_mutex_lock(&challenge_mu);
    courier_engine *e = ch->e;
    if (e) {
        pthread_mutex_lock(&cr_core(e)->lock);
        for (courier_challenge **pp = &cr_core(e)->challenges; *pp; pp = &(*pp)->next) {
            if (*pp == ch) {
                *pp = ch->next;
                break;
            }
        }
        courier_challenge **tail = &cr_core(e)->answered;
        while (*tail) tail = &(*tail)->next;
        ch->next = NULL;
        *tail = ch;
        curl_multi_wakeup(cr_core(e)->multi);
        pthread_mutex_unlock(&cr_core(e)->lock);
    }
    pthread_mutex_unlock(&challenge_mu);
    if (!e) cr_challenge_free(ch); /* the engine closed: nothing waits for it */
    return rc;
}

courier_challenge *cr_challenges_take(courier_engine *e) {
    pthread_mutex_lock(&cr_core(e)->lock);
    courier_challenge *list = cr_core(e)->answered;
    cr_core(e)->answered = NULL;
    pthread_mutex_unlock(&cr_core(e)->lock);
    return list;
}

bool cr_challenge_apply(courier_challenge *ch, cr_transfer *t) {
    bool again = ch->user != NULL;
    if (again) {
        cr_auth *a = t->auth; /* set: a handler was registered */
        bool proxy = ch->status == 407;
        char **u = proxy ? &a->proxy_user : &a->user, **p = proxy ? &a->proxy_password : &a->password;
        free(*u);
        free(*p);
        *u = ch->user;
        *p = ch->password;
        ch->user = ch->password = NULL;
        if (proxy) a->proxy_schemes = ch->schemes | OWN_PROXY_CREDS;
        else a->schemes = ch->schemes;
        courier_response_free(t->held);
        t->held = NULL;
    }
    cr_challenge_free(ch);
    return again;
}

void cr_challenges_detach(courier_engine *e) {
    pthread_mutex_lock(&challenge_mu);
    for (courier_challenge *ch = cr_core(e)->challenges; ch; ch = ch->next) ch->e = NULL;
    cr_core(e)->challenges = NULL;
    courier_challenge *ans = cr_core(e)->answered;
    cr_core(e)->answered = NULL;
    pthread_mutex_unlock(&challenge_mu);
    while (ans) {
        courier_challenge *next = ans->next;
        cr_challenge_free(ans);
        ans = next;
    }
}
