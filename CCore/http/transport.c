/*
 * transport.c — one transfer on libcurl: the easy handle's options (method, body, headers, TLS,
 * pinning, limits), the body and header callbacks, and how curl's result becomes a courier code
 * and a response that owns its bytes. The multi loop itself lives in engine.c.
 */
#include "http/http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* By where the fault is, as retry policies need it: not reached (resolve, connect, connect
 * timeout: nothing was sent), reached and cut off (timeout, partial, network: the server may have
 * acted), reached and not speaking HTTP (protocol, headers too large: the same again will fail). */
int cr_code_from_curl(CURLcode c, bool reached) {
    switch (c) {
    case CURLE_OK: return COURIER_OK;
    case CURLE_UNSUPPORTED_PROTOCOL: /* the URL's scheme, or a server answering HTTP/0.9 (no status line) */
        return reached ? COURIER_E_PROTOCOL : COURIER_E_INVALID_URL;
    case CURLE_URL_MALFORMAT: return COURIER_E_INVALID_URL;
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_PROXY: return COURIER_E_PROXY;
    case CURLE_COULDNT_RESOLVE_HOST: return COURIER_E_CANNOT_RESOLVE;
    case CURLE_COULDNT_CONNECT: return COURIER_E_CANNOT_CONNECT;
    case CURLE_OPERATION_TIMEDOUT: return COURIER_E_TIMEOUT;
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH: return COURIER_E_PINNING;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_SHUTDOWN_FAILED:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_USE_SSL_FAILED: return COURIER_E_TLS;
    case CURLE_SSL_CERTPROBLEM: return COURIER_E_CLIENT_CERTIFICATE; /* the local certificate or key */
    case CURLE_PARTIAL_FILE: return COURIER_E_PARTIAL_RESPONSE;
    case CURLE_FILESIZE_EXCEEDED: return COURIER_E_TOO_LARGE;
    case CURLE_OUT_OF_MEMORY: return COURIER_E_NO_MEMORY;
    case CURLE_ABORTED_BY_CALLBACK: return COURIER_E_CANCELLED;
    case CURLE_GOT_NOTHING:   /* closed without a byte of response */
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:    /* reset */
    case CURLE_HTTP2_STREAM:  /* the stream reset by the server */
    case CURLE_HTTP3:
#if LIBCURL_VERSION_NUM >= 0x075400 /* 7.84 */
    case CURLE_UNRECOVERABLE_POLL:
#endif
        return COURIER_E_NETWORK;
    case CURLE_HTTP2:         /* framing or HPACK of the server's HTTP/2 */
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_RANGE_ERROR: return COURIER_E_PROTOCOL;
    case CURLE_TOO_MANY_REDIRECTS: return COURIER_E_TOO_MANY_REDIRECTS; /* the engine follows; curl never should */
    default: return COURIER_E_INTERNAL;
    }
}

/* ---- curl callbacks -------------------------------------------------------------------------- */

static size_t on_body(char *data, size_t size, size_t n, void *user) {
    cr_transfer *t = user;
    size_t len = size * n;
    if (t->http.idle_ms) t->wire.last_rx_ms = cr_mono_ms();
    if (t->stream_live) {
        size_t taken = cr_stream_on_body(t, data, len); /* stream.c: to the reader, or paused */
        if (taken == 0 && len) t->oom = 1;
        return taken;
    }
    if (t->download_path) {
        size_t taken = cr_transfer_write(t, data, len); /* transfer.c: the part file */
        if (taken != (size_t)-1) return taken;
    }
    if ((int64_t)(t->resp_body.len + len) > t->max_bytes) {
        t->too_large = 1;
        return 0; /* aborts with CURLE_WRITE_ERROR */
    }
    if (!t->resp_body.cap) { /* one allocation when the length is announced */
        /* The Content-Length on_header checked (the last header block's; -1: none), which is what
         * curl's CURLINFO_CONTENT_LENGTH_DOWNLOAD_T would say, without the call. */
        int64_t cl = t->wire.content_length;
        if (cl > 0 && cl <= t->max_bytes) cr_buf_reserve(&t->resp_body, (size_t)cl);
    }
    if (cr_buf_append(&t->resp_body, data, len)) {
        t->oom = 1;
        return 0;
    }
    return len;
}

/* RFC 9112 4: "HTTP/" DIGIT "." DIGIT SP 3DIGIT SP [reason], curl's "HTTP/2 200" too. */
static bool status_line_valid(const char *d, size_t len) {
    size_t i = 5;
    if (i >= len || !isdigit((unsigned char)d[i])) return false;
    i++;
    if (i + 1 < len && d[i] == '.' && isdigit((unsigned char)d[i + 1])) i += 2;
    if (i + 4 > len || d[i] != ' ') return false;
    for (size_t k = 1; k <= 3; k++)
        if (!isdigit((unsigned char)d[i + k])) return false;
    char after = i + 4 < len ? d[i + 4] : '\r';
    return after == ' ' || after == '\r' || after == '\n';
}

/* A Content-Length value ("5", or a list of equal values "5, 5"): the length, or -1 if invalid. */
static int64_t content_length_of(const char *v, size_t len) {
    int64_t value = -1;
    size_t i = 0;
    while (i < len) {
        while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
        if (i == len) break;
        int64_t x = 0;
        size_t digits = 0;
        while (i < len && isdigit((unsigned char)v[i])) {
            if (x > (INT64_MAX - 9) / 10) return -1;
            x = x * 10 + (v[i++] - '0');
            digits++;
        }
        while (i < len && (v[i] == ' ' || v[i] == '\t')) i++;
        if (!digits || (i < len && v[i] != ',') || (value >= 0 && x != value)) return -1;
        value = x;
    }
    return value;
}

#define CR_MAX_HEADER_LINE (64 * 1024)   /* below libcurl's own 100 KiB, so the code is ours */
#define CR_MAX_HEADER_BLOCK (256 * 1024) /* below libcurl's 300 KiB */

/* The framing of the response's header block (RFC 9112 2.2, 4, 6.3): a status line first, lines
 * within the limits, Content-Length fields that agree, the blank line that ends it. Returns false
 * (t->wire.fault set) to abort the transfer. */
/* Whether a header line starts with `field` ("Name:", n bytes with the colon), case-insensitive.
 * The colon's place and the first letter turn almost every other line away before the compare:
 * each line is asked about three fields (callgrind: three strncasecmp per line were 1.5% of an
 * HTTPS GET). */
static inline bool line_is(const char *data, size_t len, const char *field, size_t n) {
    return len > n && data[n - 1] == ':' && (data[0] | 0x20) == (field[0] | 0x20) && strncasecmp(data, field, n) == 0;
}

static bool check_header_line(cr_transfer *t, const char *data, size_t len, bool status_line) {
    if (status_line || !t->wire.status_seen) {
        if (!(len >= 5 && memcmp(data, "HTTP/", 5) == 0 && status_line_valid(data, len))) {
            t->wire.fault = COURIER_E_PROTOCOL;
            snprintf(t->errbuf, CURL_ERROR_SIZE, "not an HTTP status line: '%.60s'", data);
            return false;
        }
        t->wire.status_seen = 1;
        t->wire.ended = 0;
        t->wire.block_bytes = 0;
        t->wire.content_length = -1;
    }
    t->wire.block_bytes += len;
    if (len > CR_MAX_HEADER_LINE || t->wire.block_bytes > CR_MAX_HEADER_BLOCK) {
        t->wire.fault = COURIER_E_HEADERS_TOO_LARGE;
        snprintf(t->errbuf, CURL_ERROR_SIZE, "a header line of %zu bytes, %zu in all", len, t->wire.block_bytes);
        return false;
    }
    if (line_is(data, len, "Content-Length:", 15) && !t->wire.ended) {
        size_t end = len;
        while (end > 15 && (data[end - 1] == '\r' || data[end - 1] == '\n')) end--;
        int64_t cl = content_length_of(data + 15, end - 15);
        if (cl < 0 || (t->wire.content_length >= 0 && cl != t->wire.content_length)) {
            t->wire.fault = COURIER_E_PROTOCOL;
            snprintf(t->errbuf, CURL_ERROR_SIZE, "invalid or conflicting Content-Length fields");
            return false;
        }
        t->wire.content_length = cl;
    }
    return true;
}

/* Header lines go into one growing buffer, "name\0value\0" after another (t->hdr_block, with
 * t->hdr_count entries), handed whole to the response at the end: no allocation per line. A status
 * line starts a new response (a redirect, 100 Continue): only the last one's headers and body stay. */
/* Whether this libcurl decodes every coding of a Content-Encoding value (the engine's
 * Accept-Encoding line lists what it decodes; "identity" changes nothing). */
static bool codings_known(const courier_engine *e, const char *v, size_t len) {
    const char *list = cr_core(e)->accept_encoding;
    size_t i = 0;
    while (i < len) {
        while (i < len && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) i++;
        size_t b = i;
        while (i < len && v[i] != ',' && v[i] != ' ' && v[i] != '\t') i++;
        size_t n = i - b;
        if (!n || (n == 8 && strncasecmp(v + b, "identity", 8) == 0)) continue;
        const char *name = v + b;
        if (n == 6 && strncasecmp(name, "x-gzip", 6) == 0) name += 2, n -= 2;
        bool found = false;
        for (const char *p = strchr(list, ':'); p && *p && !found;) {
            p++;
            while (*p == ' ' || *p == ',') p++;
            size_t m = strcspn(p, ", ");
            found = m == n && m && strncasecmp(p, name, n) == 0;
            p += m;
        }
        if (!found) return false;
    }
    return true;
}

static void read_metrics(CURL *h, courier_metrics *m);

/* A streamed response's head, as its header block ends: status, headers (copied: the transfer
 * keeps its own for the final response), URL, method and the metrics so far; an empty body. */
static courier_response *stream_head(cr_transfer *t) {
    courier_response *r = cr_zalloc(sizeof *r);
    if (!r) return NULL;
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    r->status = (int)status;
    r->id = t->id;
    char *eff = NULL;
    curl_easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &eff);
    r->url = cr_strdup(eff ? eff : t->url);
    r->hsts_upgraded = t->hsts_upgraded;
    r->method = cr_strdup(t->method);
    r->body = cr_strdup("");
    const char *p = t->hdr_block.data;
    bool ok = r->url && r->method && r->body;
    for (size_t i = 0; ok && i < t->hdr_count; i++) {
        size_t nl = strlen(p);
        const char *v = p + nl + 1;
        size_t vl = strlen(v);
        ok = cr_kvlist_add(&r->headers, p, nl, v, vl) == 0;
        p = v + vl + 1;
    }
    if (!ok) {
        courier_response_free(r);
        return NULL;
    }
    read_metrics(t->easy, &r->metrics);
    if (t->ce_decoded && !t->ce_raw) { /* curl decodes the body: the field and the length no longer apply */
        cr_kvlist_remove(&r->headers, "Content-Encoding");
        cr_kvlist_remove(&r->headers, "Content-Length");
    }
    return r;
}

static size_t on_header(char *data, size_t size, size_t n, void *user) {
    cr_transfer *t = user;
    size_t len = size * n;
    if (line_is(data, len, "Set-Cookie:", 11)) t->set_cookie = 1; /* the jar changes */
    if (line_is(data, len, "Strict-Transport-Security:", 26)) t->sts_seen = 1; /* hsts.c, after the attempt */
    if (t->http.idle_ms) t->wire.last_rx_ms = cr_mono_ms();
    bool status_line = len >= 5 && memcmp(data, "HTTP/", 5) == 0;
    if (!check_header_line(t, data, len, status_line)) return 0;
    if (status_line && t->http2_only && !(len >= 7 && memcmp(data, "HTTP/2 ", 7) == 0)) {
        /* HTTP/2 required (netopts.c) and the server answered over another version. */
        t->wire.fault = COURIER_E_HTTP_VERSION;
        snprintf(t->errbuf, CURL_ERROR_SIZE, "HTTP/2 required, the server answered '%.12s'", data);
        return 0;
    }
    if (status_line) {
        t->hdr_block.len = 0;
        t->hdr_count = 0;
        t->resp_body.len = 0;
        t->ce_decoded = 0;
        return len;
    }
    if (line_is(data, len, "Content-Encoding:", 17)) {
        size_t vl = len - 17;
        while (vl && (data[17 + vl - 1] == '\r' || data[17 + vl - 1] == '\n')) vl--;
        if (t->ce_raw || !codings_known(t->engine, data + 17, vl)) {
            /* An encoding curl cannot decode: the body reaches the app as received (curl builds
             * its decoders from this line before calling us; turning decoding off here makes it
             * pass the body through untouched). */
            curl_easy_setopt(t->easy, CURLOPT_HTTP_CONTENT_DECODING, 0L);
            t->easy_dirty = 1;
            t->ce_raw = 1;
        } else {
            t->ce_decoded = 1;
        }
    }
    size_t end = len; /* CR LF taken at once: almost every line ends so */
    if (end >= 2 && data[end - 1] == '\n' && data[end - 2] == '\r') end -= 2;
    while (end && (data[end - 1] == '\r' || data[end - 1] == '\n')) end--;
    if (end == 0) {
        t->wire.ended = 1; /* the blank line: the header block is complete */
        if (t->stream) cr_stream_headers_ended(t, stream_head); /* stream.c: streamed from here on? */
        return len;
    }
    if ((data[0] == ' ' || data[0] == '\t') && t->hdr_count) {
        /* obs-fold: continues the last value, which ends the buffer: replace its NUL. */
        size_t start = 0;
        while (start < end && (data[start] == ' ' || data[start] == '\t')) start++;
        t->hdr_block.len--; /* the last value's NUL */
        if (cr_buf_append_char(&t->hdr_block, ' ') || cr_buf_append(&t->hdr_block, data + start, end - start) ||
            cr_buf_append_char(&t->hdr_block, '\0')) {
            t->oom = 1;
            return 0;
        }
        return len;
    }
    const char *colon = memchr(data, ':', end);
    if (!colon) return len; /* not a header line: ignore */
    size_t name_len = (size_t)(colon - data);
    size_t vstart = name_len + 1;
    while (vstart < end && (data[vstart] == ' ' || data[vstart] == '\t')) vstart++;
    size_t vend = end;
    while (vend > vstart && (data[vend - 1] == ' ' || data[vend - 1] == '\t')) vend--;
    size_t vlen = vend - vstart;
    size_t need = name_len + vlen + 2;
    if (t->hdr_block.len + need + 1 > t->hdr_block.cap && /* room already there: no call */
        cr_buf_reserve(&t->hdr_block, need + (t->hdr_block.cap ? 0 : 256))) {
        t->oom = 1;
        return 0;
    }
    char *w = t->hdr_block.data + t->hdr_block.len;
    memcpy(w, data, name_len);
    w[name_len] = '\0';
    memcpy(w + name_len + 1, data + vstart, vlen);
    w[name_len + 1 + vlen] = '\0';
    t->hdr_block.len += name_len + vlen + 2;
    t->hdr_block.data[t->hdr_block.len] = '\0'; /* cr_buf keeps a NUL after its bytes */
    t->hdr_count++;
    return len;
}

/* Hands the collected header block to a list: one items array pointing into the block. */
static int take_headers(cr_transfer *t, cr_kvlist *out) {
    if (!t->hdr_count) return COURIER_OK;
    cr_kv *items = malloc(t->hdr_count * sizeof *items);
    if (!items) return COURIER_E_NO_MEMORY;
    size_t len = 0;
    char *block = cr_buf_take(&t->hdr_block, &len);
    char *p = block;
    for (size_t i = 0; i < t->hdr_count; i++) {
        items[i].name = p;
        p += strlen(p) + 1;
        items[i].value = p;
        p += strlen(p) + 1;
    }
    out->items = items;
    out->count = out->cap = t->hdr_count;
    out->block = block;
    out->block_len = len;
    t->hdr_count = 0;
    return COURIER_OK;
}

/* ---- setting up the easy handle --------------------------------------------------------------- */

/* Connected (or a connection reused), the request about to go: the idle clock starts. */
static int on_connected(void *user, char *ip, char *local_ip, int port, int local_port) {
    cr_transfer *t = user;
    if (t && t->http.idle_ms) t->wire.last_rx_ms = cr_mono_ms();
    if (t) cr_pool_connected(t, local_ip, local_port); /* pool.c: the connection it goes on */
    return CURL_PREREQFUNC_OK;
}

#define SET(opt, val) \
    if (c == CURLE_OK) c = curl_easy_setopt(h, opt, val)

/* The options every transfer of an engine shares. Set once per easy handle: pooled handles keep
 * them, and a handle that a transfer changed in other ways is reset and given them again
 * (cr_transport_rebase). `fresh`: a new handle. */
static int transport_base(courier_engine *e, CURL *h, bool fresh) {
    const courier_config *cfg = cr_core(e)->config;
    CURLcode c = CURLE_OK;
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_FOLLOWLOCATION, 0L); /* the engine follows redirects, hop by hop (redirect.c) */
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_PREREQFUNCTION, on_connected);
    SET(CURLOPT_ACCEPT_ENCODING, "");
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    if (c == CURLE_OK) c = (CURLcode)cr_security_base(cfg->security, h); /* security.c: TLS */
    if (c == CURLE_OK) c = (CURLcode)cr_netopts_base(cfg->net, h); /* netopts.c: DNS overrides, socket */
    if (c == CURLE_OK) c = (CURLcode)cr_pool_base(cr_core(e)->pool, h); /* pool.c: the pool's figures */
    /* libcurl reads the proxy variables from the environment on every transfer. When the process
     * has none (checked once, when the engine opened), say so once instead. The engine's own proxy
     * replaces both (auth.c). */
    if (!cr_core(e)->proxy_env) SET(CURLOPT_PROXY, "");
    if (c == CURLE_OK) c = (CURLcode)cr_auth_base(cfg->auth, h);
    if (c == CURLE_OK && cr_jar_base(e, h) != COURIER_OK) c = CURLE_OUT_OF_MEMORY; /* cookies.c: the jar */
    /* hsts.c: the Alt-Svc cache, when on. Only on a new handle: curl_easy_reset keeps the handle's
     * cache (and the file it writes at cleanup), and setting the file again would read it into the
     * cache a second time (libcurl 7.88 appends, so the file would grow with every reset). */
    if (c == CURLE_OK && fresh) c = (CURLcode)cr_altsvc_base(e, h);
    if (c == CURLE_OK) return COURIER_OK;
    return c == CURLE_OUT_OF_MEMORY ? COURIER_E_NO_MEMORY : COURIER_E_INTERNAL;
}

int cr_transport_base(courier_engine *e, CURL *h) { return transport_base(e, h, true); }

int cr_transport_rebase(courier_engine *e, CURL *h) {
    cr_easy_reset(h); /* cookies.c */
    return transport_base(e, h, false);
}

void cr_accept_encoding_line(char *out, size_t size) {
    /* The encodings curl decodes with CURLOPT_ACCEPT_ENCODING "" (its own order). */
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    char list[48] = "";
    if (v && (v->features & CURL_VERSION_LIBZ)) strcat(list, "deflate, gzip");
    if (v && (v->features & CURL_VERSION_BROTLI)) strcat(list, list[0] ? ", br" : "br");
#ifdef CURL_VERSION_ZSTD
    if (v && (v->features & CURL_VERSION_ZSTD)) strcat(list, list[0] ? ", zstd" : "zstd");
#endif
    if (list[0]) snprintf(out, size, "Accept-Encoding: %s", list);
    else if (size) out[0] = '\0';
}

bool cr_proxy_env_present(void) {
    static const char *const names[] = {"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return true;
    }
    return false;
}

/* ---- parsed URLs ------------------------------------------------------------------------------ */

struct cr_urlh {
    int refs; /* the cache's and each transfer's; worker thread only (transfers are freed there or
                 after it ended) */
    uint32_t hash;
    CURLU *u;
    char url[];
};

void cr_urlh_release(cr_urlh *h) {
    if (!h || --h->refs > 0) return;
    curl_url_cleanup(h->u);
    free(h);
}

void cr_urlh_cache_free(courier_engine *e) {
    for (size_t i = 0; i < CR_URLH_SLOTS; i++) {
        cr_urlh_release(cr_core(e)->urlh[i]);
        cr_core(e)->urlh[i] = NULL;
    }
}

static uint32_t url_hash(const char *s, size_t *len) {
    uint32_t h = 2166136261u; /* FNV-1a */
    const char *p = s;
    for (; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
    *len = (size_t)(p - s);
    return h;
}

/* A reference to url parsed, from the cache or parsed now (and cached, replacing the slot's last
 * one); NULL when curl's parser refuses it or memory runs out. Worker thread only. */
static cr_urlh *urlh_get(courier_engine *e, const char *url) {
    size_t len;
    uint32_t hash = url_hash(url, &len);
    cr_urlh **slot = &cr_core(e)->urlh[hash % CR_URLH_SLOTS];
    cr_urlh *h = *slot;
    if (h && h->hash == hash && strcmp(h->url, url) == 0) {
        h->refs++;
        return h;
    }
    h = malloc(sizeof *h + len + 1);
    if (!h) return NULL;
    h->refs = 2; /* the slot's and the caller's */
    h->hash = hash;
    memcpy(h->url, url, len + 1);
    h->u = curl_url();
    if (!h->u || curl_url_set(h->u, CURLUPART_URL, url, 0) != CURLUE_OK) {
        curl_url_cleanup(h->u);
        free(h);
        return NULL;
    }
    cr_urlh_release(*slot);
    *slot = h;
    return h;
}

/* The header lines of a transfer as one allocation: the nodes of a curl_slist (curl only reads it)
 * followed by their text, the last node linking to `rest` (lines curl_slist_append made, freed
 * apart). NULL when there are no lines or no memory. */
static struct curl_slist *header_lines(const cr_kvlist *headers, const char *const *extra, size_t nextra,
                                       struct curl_slist *rest) {
    size_t n = headers->count + nextra, text = 0;
    if (n == 0) return NULL;
    for (size_t i = 0; i < headers->count; i++)
        text += strlen(headers->items[i].name) + strlen(headers->items[i].value) + 3; /* ": " or ";", NUL */
    for (size_t i = 0; i < nextra; i++) text += strlen(extra[i]) + 1;
    struct curl_slist *nodes = malloc(n * sizeof *nodes + text);
    if (!nodes) return NULL;
    char *w = (char *)(nodes + n);
    for (size_t i = 0; i < n; i++) {
        nodes[i].data = w;
        nodes[i].next = i + 1 < n ? &nodes[i + 1] : rest;
        if (i < headers->count) {
            const cr_kv *kv = &headers->items[i];
            size_t nl = strlen(kv->name), vl = strlen(kv->value);
            memcpy(w, kv->name, nl);
            w += nl;
            if (vl) {
                memcpy(w, ": ", 2);
                memcpy(w + 2, kv->value, vl);
                w += 2 + vl;
            } else {
                *w++ = ';';
            }
            *w++ = '\0';
        } else {
            size_t l = strlen(extra[i - headers->count]);
            memcpy(w, extra[i - headers->count], l + 1);
            w += l + 1;
        }
    }
    return nodes;
}

int cr_transport_setup(courier_engine *e, cr_transfer *t) {
    CURL *h = t->easy;
    CURLcode c = CURLE_OK;

    /* The URL as a parsed URL handle (CURLOPT_CURLU): curl then skips its own parse and
     * re-serialization of CURLOPT_URL on every transfer (a tenth of a small GET's cost), and a URL
     * sent again reuses the parse. A URL curl's parser refuses goes in as a string, so the error is
     * curl's usual one. Always set: a pooled handle must not keep a previous transfer's URL handle. */
    if (!t->urlh) t->urlh = urlh_get(e, t->url);
    /* CURLOPT_URL is set too, to the same URL: it is what libcurl reports as the effective URL (and
     * resolves a relative redirect against) when the URL handle did not move (libcurl 7.88 keeps a
     * reused handle's previous one otherwise, or re-serializes the URL handle when it is NULL). */
    SET(CURLOPT_URL, t->url);
    SET(CURLOPT_CURLU, t->urlh ? t->urlh->u : NULL);
    SET(CURLOPT_PRIVATE, t);
    SET(CURLOPT_ERRORBUFFER, t->errbuf);
    SET(CURLOPT_WRITEDATA, t);
    SET(CURLOPT_HEADERDATA, t);
    SET(CURLOPT_PREREQDATA, t);
    if (t->stream) {
        /* A stream hands each callback's bytes to its reader: larger reads mean fewer hand-overs
         * (`courier bench stream`). The handle is reset before another transfer uses it. */
        SET(CURLOPT_BUFFERSIZE, 256L * 1024);
        t->easy_dirty = 1;
    }
    /* The options below are set only when they differ from what the handle has: a clean pooled
     * handle carries the record of its last transfer's (t->easy_set, engine.c), a new or reset one
     * none, so each is set (callgrind: a setopt is ~60 instructions, libcurl's included). */
    cr_easy_set *was = &t->easy_set;
    bool known = was->known && c == CURLE_OK;
    long connect_ms = (long)t->http.connect_ms;
    /* Downloads and streams are not held in memory: no size limit from curl (a stream's response
     * read whole is still bounded by on_body). */
    curl_off_t max_file = (curl_off_t)(t->download_path || t->stream ? 0 : t->max_bytes);
    if (!known || was->timeout_ms != t->timeout_ms) SET(CURLOPT_TIMEOUT_MS, t->timeout_ms);
    /* 0: curl's default, under the total */
    if (!known || was->connect_ms != connect_ms) SET(CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    /* Downloads to a file may be larger than the in-memory limit (0: no limit). */
    if (!known || was->max_file != max_file) SET(CURLOPT_MAXFILESIZE_LARGE, max_file);
    /* Requests started together for one HTTPS origin wait for the first connection's ALPN answer:
     * over h2 they then share it (the engine multiplexes, CURLPIPE_MULTIPLEX) instead of each opening
     * a connection and a TLS handshake of its own; told HTTP/1.1, they connect as before. Never for
     * http://: there libcurl 7.88 learns the version from the first response only, so requests would
     * wait behind a first one that hangs (engine_test's test_close_from_own_callback). */
    long pipewait = strncasecmp(t->url, "https:", 6) == 0 ? 1L : 0L;
    if (!known || was->pipewait != pipewait) SET(CURLOPT_PIPEWAIT, pipewait);
    was->known = 0; /* until every option below is set */
    was->timeout_ms = t->timeout_ms;
    was->connect_ms = connect_ms;
    was->max_file = max_file;
    was->pipewait = pipewait;

    /* Progress goes to the request's callback and to event monitors that want it. */
    t->watch_progress = t->progress || cr_event_wants(e, COURIER_EVENT_PROGRESS);
    /* Anything but a plain GET leaves options a later GET must not inherit: mark the handle. */
    t->easy_dirty = !(strcmp(t->method, "GET") == 0 && !t->has_body && !t->parts && !t->body_file && !t->watch_progress);
    if (c == CURLE_OK) c = (CURLcode)cr_auth_setup(e, t); /* auth.c: credentials, the request's proxy */
    if (c == CURLE_OK) c = (CURLcode)cr_security_setup(t); /* security.c: the request's own TLS policy */
    if (c == CURLE_OK && (t->net || t->http2_only)) c = (CURLcode)cr_netopts_setup(t); /* netopts.c */
    if (strcmp(t->method, "GET") == 0 && !t->has_body) {
        /* A clean handle's last transfer was a plain GET too (anything else marks it dirty) and
         * left the method GET; a new or reset handle's is curl's default, GET, set anyway. */
        if (!known) SET(CURLOPT_HTTPGET, 1L);
    } else if (strcmp(t->method, "HEAD") == 0) {
        SET(CURLOPT_NOBODY, 1L);
    } else {
        if (t->has_body) {
            SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)t->body_len);
            SET(CURLOPT_POSTFIELDS, t->body);
        }
        if (strcmp(t->method, "POST") != 0) SET(CURLOPT_CUSTOMREQUEST, t->method);
    }

    /* Multipart and file bodies, download resume headers, progress (transfer.c). */
    if (c == CURLE_OK) {
        courier_error terr;
        int trc = cr_transfer_setup(t, &t->slist, &terr);
        if (trc != COURIER_OK) return trc;
    }

    /* Header lines; "Name;" is curl's way to send an empty value. User-Agent and Accept-Encoding go
     * as lines too: curl formats its own (CURLOPT_USERAGENT, CURLOPT_ACCEPT_ENCODING) anew on every
     * transfer, and skips them when a line names them. CURLOPT_ACCEPT_ENCODING stays set (base):
     * it is what makes curl decode the body. */
    const char *extra_lines[2];
    size_t nextra = 0;
    if (cr_core(e)->accept_encoding[0] && !cr_kvlist_get(&t->headers, "Accept-Encoding"))
        extra_lines[nextra++] = cr_core(e)->accept_encoding;
    /* No "Expect: 100-continue" round trip for bodies, unless the caller asked for one. */
    bool sends_body = t->has_body || t->parts || t->body_file || strcmp(t->method, "GET") != 0;
    if (sends_body && !cr_kvlist_get(&t->headers, "Expect")) extra_lines[nextra++] = "Expect:";
    free(t->lines);
    t->lines = c == CURLE_OK ? header_lines(&t->headers, extra_lines, nextra, t->slist) : NULL;
    if (c == CURLE_OK && !t->lines && (t->headers.count || nextra)) c = CURLE_OUT_OF_MEMORY;
    SET(CURLOPT_HTTPHEADER, t->lines ? t->lines : t->slist);
    if (c == CURLE_OK) {
        was->known = 1;
        return COURIER_OK;
    }
    return c == CURLE_OUT_OF_MEMORY ? COURIER_E_NO_MEMORY : COURIER_E_INTERNAL;
}
#undef SET

/* ---- finishing -------------------------------------------------------------------------------- */

static double us_to_s(curl_off_t us) { return us > 0 ? (double)us / 1e6 : 0.0; }

static void read_metrics(CURL *h, courier_metrics *m) {
    curl_off_t v = 0;
    long l = 0;
    memset(m, 0, sizeof *m);
    if (curl_easy_getinfo(h, CURLINFO_NAMELOOKUP_TIME_T, &v) == CURLE_OK) m->dns_s = us_to_s(v);
    if (curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &v) == CURLE_OK) m->connect_s = us_to_s(v);
    if (curl_easy_getinfo(h, CURLINFO_APPCONNECT_TIME_T, &v) == CURLE_OK) m->tls_s = us_to_s(v);
    if (curl_easy_getinfo(h, CURLINFO_STARTTRANSFER_TIME_T, &v) == CURLE_OK) m->first_byte_s = us_to_s(v);
    if (curl_easy_getinfo(h, CURLINFO_TOTAL_TIME_T, &v) == CURLE_OK) m->total_s = us_to_s(v);
    long req_size = 0, hdr_size = 0;
    curl_off_t up = 0, down = 0;
    curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &req_size);
    curl_easy_getinfo(h, CURLINFO_HEADER_SIZE, &hdr_size);
    curl_easy_getinfo(h, CURLINFO_SIZE_UPLOAD_T, &up);
    curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &down);
    /* REQUEST_SIZE already counts a POSTFIELDS body; SIZE_UPLOAD counts streamed uploads only. */
    m->bytes_sent = (int64_t)req_size + (req_size > 0 ? 0 : (int64_t)up);
    m->bytes_received = (int64_t)hdr_size + (int64_t)down;
    if (curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &l) == CURLE_OK) m->connection_reused = l == 0;
    if (curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &l) == CURLE_OK) {
        switch (l) {
        case CURL_HTTP_VERSION_1_0: m->http_version = 10; break;
        case CURL_HTTP_VERSION_1_1: m->http_version = 11; break;
        case CURL_HTTP_VERSION_2_0: m->http_version = 20; break;
        case CURL_HTTP_VERSION_3: m->http_version = 30; break;
        default: m->http_version = 0;
        }
    }
    if (curl_easy_getinfo(h, CURLINFO_REDIRECT_COUNT, &l) == CURLE_OK) m->redirects = (int)l;
    /* The address reached. Over a Unix socket libcurl reports the socket's path (and port 80):
     * only an address that parses as one is kept. */
    char *ip = NULL;
    unsigned char addr[16];
    if (curl_easy_getinfo(h, CURLINFO_PRIMARY_IP, &ip) == CURLE_OK && ip && *ip && strlen(ip) < sizeof m->remote_ip &&
        (inet_pton(AF_INET, ip, addr) == 1 || inet_pton(AF_INET6, ip, addr) == 1)) {
        memcpy(m->remote_ip, ip, strlen(ip) + 1);
        if (curl_easy_getinfo(h, CURLINFO_PRIMARY_PORT, &l) == CURLE_OK) m->remote_port = (int)l;
    }
}

int cr_transport_result(cr_transfer *t, CURLcode result, courier_response **out_resp, courier_error *err) {
    *out_resp = NULL;
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);

    /* A header block that never ended (the server closed after a status line or a field) is a
     * response cut short, whatever curl made of it (RFC 9112 6.3). */
    if (result == CURLE_OK && !t->wire.ended) {
        result = CURLE_PARTIAL_FILE;
        snprintf(t->errbuf, CURL_ERROR_SIZE, "the connection closed inside the header block");
    }
    if (result != CURLE_OK) {
        courier_error ignored;
        cr_transfer_done(t, result, NULL, &ignored); /* closes files; a part file stays for resume */
        curl_off_t connected_us = 0;
        curl_easy_getinfo(t->easy, CURLINFO_CONNECT_TIME_T, &connected_us);
        int code = cr_code_from_curl(result, connected_us > 0);
        int timeout_kind = COURIER_TIMEOUT_NONE;
        long connect_code = 0; /* a proxy that refused the tunnel (CONNECT answered 407, 403...) */
        curl_easy_getinfo(t->easy, CURLINFO_HTTP_CONNECTCODE, &connect_code);
        if (connect_code >= 300) {
            code = COURIER_E_PROXY;
            status = connect_code;
        }
        if (t->http2_only && !t->wire.status_seen && strncasecmp(t->url, "http:", 5) == 0 &&
            (result == CURLE_GOT_NOTHING || result == CURLE_HTTP2 || result == CURLE_WEIRD_SERVER_REPLY ||
             result == CURLE_UNSUPPORTED_PROTOCOL))
            code = COURIER_E_HTTP_VERSION; /* h2c with prior knowledge to a server that does not speak it */
        if (t->too_large) code = COURIER_E_TOO_LARGE;
        else if (t->oom) code = COURIER_E_NO_MEMORY;
        else if (t->wire.fault) code = t->wire.fault;
        else if (t->wire.timeout_kind) code = COURIER_E_TIMEOUT, timeout_kind = t->wire.timeout_kind;
        else if (result == CURLE_OUT_OF_MEMORY && t->wire.status_seen && !t->wire.ended)
            code = COURIER_E_HEADERS_TOO_LARGE; /* libcurl's own limit (100 KiB a line) says "out of memory" */
        else if (code == COURIER_E_TIMEOUT) {
            /* curl's connect timeout is the smaller of the two while connecting (TLS included). */
            curl_off_t tls_us = 0;
            curl_easy_getinfo(t->easy, CURLINFO_APPCONNECT_TIME_T, &tls_us);
            bool https = strncasecmp(t->url, "https:", 6) == 0;
            bool up = connected_us > 0 && (!https || tls_us > 0);
            timeout_kind = !up && t->http.connect_ms > 0 && (t->timeout_ms <= 0 || t->http.connect_ms < t->timeout_ms)
                               ? COURIER_TIMEOUT_CONNECT
                               : COURIER_TIMEOUT_TOTAL;
        }
        else if (result == CURLE_WRITE_ERROR && t->download_path && t->download_mode != 3) code = COURIER_E_STORE;
        else if (result == CURLE_PEER_FAILED_VERIFICATION && cr_security_pins_certificate(t) &&
                 t->errbuf && strncmp(t->errbuf, "SSL certificate problem", 23) == 0)
            code = COURIER_E_PINNING; /* the chain holds none of the pinned certificates (not the name) */
        cr_fail(err, code, "%s: %s", courier_strerror(code), t->errbuf && t->errbuf[0] ? t->errbuf : curl_easy_strerror(result));
        err->curl_code = (int)result;
        err->http_status = (int)status;
        err->reserved[0] = timeout_kind; /* courier_error_timeout_kind */
        if (code == COURIER_E_TOO_LARGE)
            snprintf(err->message, sizeof err->message, "response body larger than %lld bytes",
                     (long long)t->max_bytes);
        return code;
    }

    courier_response *r = cr_zalloc(sizeof *r);
    if (!r) return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    r->status = (int)status;
    r->id = t->id;
    r->method = cr_strdup(t->method); /* the transfer keeps its own: it may be retried */
    char *eff = NULL;
    curl_easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &eff);
    r->url = cr_strdup(eff ? eff : t->url);
    r->hsts_upgraded = t->hsts_upgraded;
    if (take_headers(t, &r->headers)) {
        courier_response_free(r);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    r->body = cr_buf_take(&t->resp_body, &r->body_len);
    read_metrics(t->easy, &r->metrics);
    if (t->ce_decoded && !t->ce_raw && r->body && strcmp(t->method, "HEAD") != 0 && r->status != 304) {
        /* curl decoded the body: the field no longer applies, nor the encoded length */
        char cl[24];
        snprintf(cl, sizeof cl, "%zu", r->body_len);
        cr_kvlist_remove(&r->headers, "Content-Encoding");
        if (cr_kvlist_get(&r->headers, "Content-Length")) {
            cr_kvlist_remove(&r->headers, "Content-Length");
            if (cr_kvlist_add(&r->headers, "Content-Length", 14, cl, strlen(cl))) {
                courier_response_free(r);
                return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
            }
        }
    }
    if (!r->url || !r->body || !r->method) {
        courier_response_free(r);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    *out_resp = r;
    cr_error_clear(err);
    return cr_transfer_done(t, result, r, err); /* a download moves into place; the response stays */
}
