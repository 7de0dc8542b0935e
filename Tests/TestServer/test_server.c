/*
 * test_server.c — Courier's HTTP/1.1 test server. See include/courier_test_server.h
 * for the endpoints and the API contract.
 *
 * Design
 *  - One accept thread, one thread per connection. Every socket is non-blocking
 *    and every wait is a poll() that also watches a "stop pipe": stop() writes one
 *    byte into it and never drains it, so from then on every poll in every thread
 *    returns at once. stop() also shutdown()s the open connections.
 *  - Connection threads exit by moving themselves from the `active` list to the
 *    `finished` list; the accept thread (periodically) and stop() join those.
 *  - All requests are read with a small buffered reader (conn_read_line /
 *    conn_read_exact) so that pipelined requests work.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "courier_test_server.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h> /* SHA-1 for the WebSocket handshake (/ws/echo) */

#define HEAD_MAX        (64 * 1024)              /* request line + headers, bytes */
#define BODY_MAX        (64ULL * 1024 * 1024)    /* request body, bytes */
#define RBUF_CAP        (HEAD_MAX + 16 * 1024)   /* read buffer; > HEAD_MAX */
#define CHUNK_LINE_MAX  4096                     /* chunk-size line incl. extensions */
#define LINGER_MS       1000                     /* drain time after a graceful close */
#define CONN_STACK      (512 * 1024)
#define OUT_CHUNK       (16 * 1024)              /* /bytes chunk size */

#ifdef MSG_NOSIGNAL
#define SEND_FLAGS MSG_NOSIGNAL
#else
#define SEND_FLAGS 0 /* Darwin: SO_NOSIGPIPE is set on each socket instead */
#endif

/* What to do with a connection after a request. */
enum { ACT_SEND, ACT_KEEP, ACT_CLOSE, ACT_ABORT, ACT_RESET };

/* read_request result besides 0 (ok) and an HTTP error status. */
#define RR_CLOSE (-1)

/* ------------------------------------------------------------------------ */
/* Types                                                                    */

typedef struct {
    char *name, *value;
} header;

typedef struct conn conn;

typedef struct {
    char *path;
    long n;
} path_count;

struct cts_server {
    int listen_fd;
    int port;
    int wake[2];                /* stop pipe, see top of file */
    atomic_int stopping;
    pthread_t accept_thread;
    atomic_long requests;
    atomic_long connections;
    atomic_long in_flight;      /* requests parsed and not yet answered */
    atomic_long max_in_flight;  /* the most at once since start or the last reset */

    pthread_mutex_t lock;       /* guards everything below */
    pthread_cond_t conn_done;   /* signalled when a connection thread finishes */
    conn *active;               /* connection threads still running */
    conn *finished;             /* exited, to be joined */
    path_count *paths;
    size_t npaths, cap_paths;
    long token_gen;             /* /session/token: the last token issued ("tok-<n>"; 0: none) */
};

struct conn {
    cts_server *srv;
    int fd;                     /* -1 once closed; changed only under srv->lock */
    pthread_t thread;
    conn *prev, *next;
    char *rbuf;                 /* RBUF_CAP bytes; unread data is [rstart, rend) */
    size_t rstart, rend;
    char *head;                 /* HEAD_MAX bytes: request line and header lines, NUL-terminated */
    header *hdrs;
    size_t hdr_cap;
    long served;                /* requests parsed on this connection */
    char socks[300];            /* "host:port" a SOCKS5 client asked for on this connection, else "" */
    char socks_user[128];       /* the SOCKS5 username/password it gave ("user:pass"), else "" */
};

typedef struct {
    char *method;
    const char *path;           /* without query; not decoded */
    const char *query;          /* after '?', "" if none */
    int minor;                  /* HTTP/1.<minor> */
    int is_head;
    int keep_alive;             /* final decision: 0 means close after responding */
    header *hdrs;
    size_t nhdrs;
    char *body;                 /* malloc'd or NULL */
    size_t body_len;
    char absolute[1024];        /* the target when it came in absolute-form (a proxy request), else "" */
} request;

/* Growable byte string, always NUL-terminated when non-empty. */
typedef struct {
    char *p;
    size_t len, cap;
    int failed;
} sbuf;

typedef struct {
    int status;
    const char *ctype;          /* NULL: no Content-Type */
    sbuf hdr;                   /* extra header lines, each "Name: value\r\n" */
    sbuf body;
    int no_body;                /* 204/304: neither body nor Content-Length */
} response;

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int set_fd_flags(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -1;
    int fdfl = fcntl(fd, F_GETFD);
    if (fdfl < 0 || fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) < 0)
        return -1;
    return 0;
}

static int sb_reserve(sbuf *b, size_t extra)
{
    if (b->failed)
        return -1;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->failed = 1;
        return -1;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static void sb_put(sbuf *b, const void *d, size_t n)
{
    if (n == 0 || sb_reserve(b, n))
        return;
    memcpy(b->p + b->len, d, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 2, 3)))
#endif
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof tmp) {
        sb_put(b, tmp, (size_t)n);
        return;
    }
    if (sb_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Appends s[0..n) as a quoted JSON string. Bytes are treated as Latin-1: control
   bytes and bytes >= 0x80 become \u00XX, so the JSON maps 1:1 back to bytes. */
static void sb_json_str(sbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t run = 0; /* start of the pending run of plain bytes */
    if (!s)
        s = "";
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        char esc[6];
        size_t elen = 2;
        esc[0] = '\\';
        switch (ch) {
        case '"':  esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            if (ch >= 0x20 && ch < 0x80)
                continue;
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[ch >> 4];
            esc[5] = hex[ch & 15];
            elen = 6;
        }
        sb_put(b, s + run, i - run);
        sb_put(b, esc, elen);
        run = i + 1;
    }
    sb_put(b, s + run, n - run);
    sb_put(b, "\"", 1);
}

static int is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int is_token(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)s[i]))
            return 0;
    return 1;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Parses a non-empty decimal number <= max. Returns 0 or -1. */
static int parse_num(const char *s, unsigned long long max, unsigned long long *out)
{
    unsigned long long v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* Does the comma-separated list `v` contain `tok` (case-insensitive)? If `last`,
   only the last element counts. */
static int list_has(const char *v, const char *tok, int last)
{
    size_t tlen = strlen(tok);
    int found = 0;
    while (*v) {
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        if (!*v)
            break;
        const char *e = v;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > v && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        int eq = (size_t)(t - v) == tlen && strncasecmp(v, tok, tlen) == 0;
        if (last)
            found = eq;
        else if (eq)
            return 1;
        v = e;
    }
    return found;
}

/* Percent-decodes s[0..n) into out (room for n bytes). Invalid escapes are kept. */
static size_t pct_decode(const char *s, size_t n, char *out, int plus_is_space)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int h, l;
        if (s[i] == '%' && i + 2 < n && (h = hexval((unsigned char)s[i + 1])) >= 0 &&
            (l = hexval((unsigned char)s[i + 2])) >= 0) {
            out[o++] = (char)(h * 16 + l);
            i += 2;
        } else if (plus_is_space && s[i] == '+') {
            out[o++] = ' ';
        } else {
            out[o++] = s[i];
        }
    }
    return o;
}

/* Decoded query string: pairs point into one allocation, each NUL-terminated
   (lengths are kept because values may contain %00). */
typedef struct {
    const char *key, *val;
    size_t klen, vlen;
} qpair;

typedef struct {
    qpair *pairs;
    size_t n;
    char *arena;
} query;

static int query_parse(const char *q, query *out)
{
    size_t qlen = strlen(q), cap = 1;
    for (const char *p = q; *p; p++)
        cap += *p == '&';
    out->n = 0;
    out->pairs = malloc(cap * sizeof *out->pairs);
    out->arena = malloc(qlen + 2 * cap + 1);
    if (!out->pairs || !out->arena) {
        free(out->pairs);
        free(out->arena);
        return -1;
    }
    char *a = out->arena;
    const char *p = q;
    while (*p) {
        const char *e = strchr(p, '&');
        if (!e)
            e = p + strlen(p);
        if (e > p) {
            const char *eq = memchr(p, '=', (size_t)(e - p));
            const char *kend = eq ? eq : e;
            qpair *qp = &out->pairs[out->n++];
            qp->key = a;
            qp->klen = pct_decode(p, (size_t)(kend - p), a, 1);
            a += qp->klen;
            *a++ = '\0';
            qp->val = a;
            qp->vlen = eq ? pct_decode(eq + 1, (size_t)(e - eq - 1), a, 1) : 0;
            a += qp->vlen;
            *a++ = '\0';
        }
        p = *e ? e + 1 : e;
    }
    return 0;
}

static const qpair *query_get(const query *q, const char *key)
{
    size_t klen = strlen(key);
    for (size_t i = 0; i < q->n; i++)
        if (q->pairs[i].klen == klen && memcmp(q->pairs[i].key, key, klen) == 0)
            return &q->pairs[i];
    return NULL;
}

static void query_free(query *q)
{
    free(q->pairs);
    free(q->arena);
}

/* A value that may go into a response header: no CR, LF or NUL. */
static int header_safe(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\r' || s[i] == '\n' || s[i] == '\0')
            return 0;
    return 1;
}

static const char *find_header(const request *rq, const char *name)
{
    for (size_t i = 0; i < rq->nhdrs; i++)
        if (strcasecmp(rq->hdrs[i].name, name) == 0)
            return rq->hdrs[i].value;
    return NULL;
}

static const char *reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 203: return "Non-Authoritative Information";
    case 204: return "No Content";
    case 205: return "Reset Content";
    case 206: return "Partial Content";
    case 300: return "Multiple Choices";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 402: return "Payment Required";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 416: return "Range Not Satisfiable";
    case 417: return "Expectation Failed";
    case 418: return "I'm a teapot";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 425: return "Too Early";
    case 426: return "Upgrade Required";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 451: return "Unavailable For Legal Reasons";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 511: return "Network Authentication Required";
    default:  return "Unknown";
    }
}

/* ------------------------------------------------------------------------ */
/* Stop-aware waiting and socket I/O                                        */

static int is_stopping(const cts_server *s)
{
    return atomic_load_explicit(&s->stopping, memory_order_acquire);
}

/* Waits until c->fd has `events` (or an error/hangup). Returns 1, or 0 when the
   server is stopping or `timeout_ms` (>= 0) elapses. */
static int wait_fd(conn *c, short events, int timeout_ms)
{
    struct pollfd p[2] = {{c->fd, events, 0}, {c->srv->wake[0], POLLIN, 0}};
    long long deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;
    for (;;) {
        int t = -1;
        if (timeout_ms >= 0) {
            long long left = deadline - now_ms();
            if (left <= 0)
                return 0;
            t = (int)left;
        }
        int r = poll(p, 2, t);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return 0;
        }
        if (p[1].revents)
            return 0;
        if (p[0].revents)
            return 1;
    }
}

/* Sleeps ms milliseconds. Returns 1, or 0 if the server started stopping. */
static int sleep_ms(cts_server *s, unsigned long long ms)
{
    long long deadline = now_ms() + (long long)ms;
    struct pollfd p = {s->wake[0], POLLIN, 0};
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            return 1;
        int r = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return 0;
    }
}

static int send_all(conn *c, const void *data, size_t n)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = send(c->fd, p, n, SEND_FLAGS);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!wait_fd(c, POLLOUT, -1))
                return -1;
            continue;
        }
        return -1;
    }
    return 0;
}

static int send_str(conn *c, const char *s) { return send_all(c, s, strlen(s)); }

/* Sends what `out` holds and empties it (keeping its memory). */
static int send_sbuf(conn *c, sbuf *out)
{
    if (out->failed)
        return -1;
    int r = out->len ? send_all(c, out->p, out->len) : 0;
    out->len = 0;
    return r;
}

/* Reads more bytes into rbuf. Returns > 0, 0 on EOF, -1 on error or stop. */
static long conn_fill(conn *c)
{
    if (c->rstart == c->rend) {
        c->rstart = c->rend = 0;
    } else if (c->rend == RBUF_CAP) {
        if (c->rstart == 0)
            return -1; /* callers never let this happen */
        memmove(c->rbuf, c->rbuf + c->rstart, c->rend - c->rstart);
        c->rend -= c->rstart;
        c->rstart = 0;
    }
    for (;;) {
        if (is_stopping(c->srv))
            return -1;
        ssize_t n = recv(c->fd, c->rbuf + c->rend, RBUF_CAP - c->rend, 0);
        if (n > 0) {
            c->rend += (size_t)n;
            return n;
        }
        if (n == 0)
            return 0;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        if (!wait_fd(c, POLLIN, -1))
            return -1;
    }
}

/* Reads one line ending in LF (a CR before it is dropped). The line, NUL-terminated,
   stays valid until the next read. `consumed` is its raw length with terminator.
   Returns 1; 0 on EOF before any byte; -1 on EOF mid-line, error or stop;
   -2 if the line would exceed `max` raw bytes. */
static int conn_read_line(conn *c, size_t max, char **line, size_t *len, size_t *consumed)
{
    size_t scanned = 0;
    for (;;) {
        char *base = c->rbuf + c->rstart;
        char *nl = memchr(base + scanned, '\n', c->rend - c->rstart - scanned);
        if (nl) {
            size_t n = (size_t)(nl - base);
            if (n + 1 > max)
                return -2;
            c->rstart += n + 1;
            *consumed = n + 1;
            if (n > 0 && base[n - 1] == '\r')
                n--;
            base[n] = '\0';
            *line = base;
            *len = n;
            return 1;
        }
        scanned = c->rend - c->rstart;
        if (scanned >= max)
            return -2;
        long r = conn_fill(c);
        if (r == 0)
            return scanned ? -1 : 0;
        if (r < 0)
            return -1;
    }
}

static int conn_read_exact(conn *c, char *dst, size_t n)
{
    while (n > 0) {
        size_t avail = c->rend - c->rstart;
        if (avail == 0) {
            if (conn_fill(c) <= 0)
                return -1;
            continue;
        }
        size_t k = avail < n ? avail : n;
        memcpy(dst, c->rbuf + c->rstart, k);
        c->rstart += k;
        dst += k;
        n -= k;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Request parsing                                                          */

static int add_header(conn *c, size_t *n, char *name, char *value)
{
    if (*n == c->hdr_cap) {
        size_t cap = c->hdr_cap ? c->hdr_cap * 2 : 32;
        header *h = realloc(c->hdrs, cap * sizeof *h);
        if (!h)
            return -1;
        c->hdrs = h;
        c->hdr_cap = cap;
    }
    c->hdrs[*n].name = name;
    c->hdrs[*n].value = value;
    (*n)++;
    return 0;
}

/* Parses "METHOD SP target SP HTTP/1.x" in place. Returns 0 or 400. */
static int parse_request_line(char *line, request *rq)
{
    char *sp1 = strchr(line, ' ');
    if (!sp1)
        return 400;
    *sp1 = '\0';
    char *target = sp1 + 1;
    char *sp2 = strchr(target, ' ');
    if (!sp2)
        return 400;
    *sp2 = '\0';
    const char *version = sp2 + 1;
    if (!is_token(line, strlen(line)) || !*target)
        return 400;
    for (const char *p = target; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f)
            return 400;
    if (strcmp(version, "HTTP/1.1") == 0)
        rq->minor = 1;
    else if (strcmp(version, "HTTP/1.0") == 0)
        rq->minor = 0;
    else
        return 400;
    rq->method = line;
    rq->is_head = strcmp(line, "HEAD") == 0;

    /* absolute-form ("http://host/path"): keep only the path */
    char *path = target;
    rq->absolute[0] = '\0';
    if (strncasecmp(path, "http://", 7) == 0 || strncasecmp(path, "https://", 8) == 0) {
        snprintf(rq->absolute, sizeof rq->absolute, "%s", target);
        char *slash = strchr(strstr(path, "://") + 3, '/');
        if (!slash) {
            char *q = strchr(strstr(path, "://") + 3, '?');
            rq->path = "/";
            rq->query = q ? q + 1 : "";
            return 0;
        }
        path = slash;
    }
    char *q = strchr(path, '?');
    if (q)
        *q = '\0';
    rq->path = path;
    rq->query = q ? q + 1 : "";
    return 0;
}

/* Parses "Name: value" in place. Returns 0 or 400. */
static int parse_header_line(conn *c, size_t *nh, char *line)
{
    if (*line == ' ' || *line == '\t')
        return 400; /* obsolete line folding */
    char *colon = strchr(line, ':');
    if (!colon || !is_token(line, (size_t)(colon - line)))
        return 400;
    *colon = '\0';
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
        v++;
    char *e = v + strlen(v);
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *e = '\0';
    for (const char *p = v; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return 400;
    }
    return add_header(c, nh, line, v) ? 500 : 0;
}

/* Parses a Content-Length value (possibly "n, n"). Returns 0, 400 or 413. */
static int parse_content_length(const char *v, int *have, unsigned long long *cl)
{
    while (*v) {
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        if (!*v)
            break;
        unsigned long long n = 0;
        int digits = 0, big = 0;
        for (; *v >= '0' && *v <= '9'; v++, digits++) {
            if (n > BODY_MAX)
                big = 1;
            else
                n = n * 10 + (unsigned)(*v - '0');
        }
        while (*v == ' ' || *v == '\t')
            v++;
        if (!digits || (*v && *v != ','))
            return 400;
        if (big)
            n = BODY_MAX + 1;
        if (*have && n != *cl)
            return 400;
        *have = 1;
        *cl = n;
    }
    return *have ? 0 : 400;
}

/* Reads a chunked body into rq. Returns 0, RR_CLOSE, or an HTTP error status. */
static int read_chunked(conn *c, request *rq)
{
    char *body = NULL, *line;
    size_t len = 0, cap = 0, llen, consumed;
    int r;
    for (;;) {
        r = conn_read_line(c, CHUNK_LINE_MAX, &line, &llen, &consumed);
        if (r == -2)
            goto bad;
        if (r <= 0)
            goto close;
        unsigned long long size = 0;
        int digits = 0, big = 0, h;
        const char *p = line;
        for (; (h = hexval((unsigned char)*p)) >= 0; p++, digits++) {
            if (size > BODY_MAX)
                big = 1;
            else
                size = size * 16 + (unsigned)h;
        }
        while (*p == ' ' || *p == '\t')
            p++;
        if (!digits || (*p && *p != ';'))
            goto bad; /* chunk extensions after ';' are ignored */
        if (big || size > BODY_MAX - len) {
            free(body);
            return 413;
        }
        if (size == 0)
            break;
        if (len + size > cap) {
            size_t ncap = cap ? cap : 4096;
            while (ncap < len + size)
                ncap *= 2;
            if (ncap > BODY_MAX)
                ncap = BODY_MAX; /* still >= len + size, checked above */
            char *nb = realloc(body, ncap);
            if (!nb) {
                free(body);
                return 500;
            }
            body = nb;
            cap = ncap;
        }
        if (conn_read_exact(c, body + len, (size_t)size))
            goto close;
        len += (size_t)size;
        r = conn_read_line(c, CHUNK_LINE_MAX, &line, &llen, &consumed);
        if (r == -2 || (r == 1 && llen != 0))
            goto bad;
        if (r <= 0)
            goto close;
    }
    /* trailer section: skipped */
    for (size_t total = 0;;) {
        r = conn_read_line(c, HEAD_MAX - total, &line, &llen, &consumed);
        if (r == -2) {
            free(body);
            return 431;
        }
        if (r <= 0)
            goto close;
        total += consumed;
        if (llen == 0)
            break;
    }
    rq->body = body;
    rq->body_len = len;
    return 0;
bad:
    free(body);
    return 400;
close:
    free(body);
    return RR_CLOSE;
}

/* Reads one request (head and body). Returns 0; RR_CLOSE to close silently
   (EOF, I/O error, stop); or an HTTP status to answer with before closing. */
static int read_request(conn *c, request *rq)
{
    size_t total = 0, used = 0, nh = 0, nlines = 0;
    memset(rq, 0, sizeof *rq);
    for (;;) {
        char *line;
        size_t len, consumed;
        int r = conn_read_line(c, HEAD_MAX - total, &line, &len, &consumed);
        if (r == -2)
            return 431;
        if (r <= 0)
            return RR_CLOSE;
        total += consumed;
        if (len == 0) {
            if (nlines == 0)
                continue; /* tolerate empty lines before the request line */
            break;
        }
        /* copy out of rbuf: later reads may move its contents */
        char *dst = c->head + used;
        memcpy(dst, line, len + 1);
        used += len + 1;
        int st = nlines++ == 0 ? parse_request_line(dst, rq) : parse_header_line(c, &nh, dst);
        if (st)
            return st;
    }
    rq->hdrs = c->hdrs;
    rq->nhdrs = nh;

    int have_cl = 0, te = 0, chunked = 0, conn_close = 0, conn_keep = 0, expect = 0;
    unsigned long long cl = 0;
    for (size_t i = 0; i < nh; i++) {
        const char *n = c->hdrs[i].name, *v = c->hdrs[i].value;
        if (strcasecmp(n, "Content-Length") == 0) {
            int st = parse_content_length(v, &have_cl, &cl);
            if (st)
                return st;
        } else if (strcasecmp(n, "Transfer-Encoding") == 0) {
            te = 1;
            chunked = list_has(v, "chunked", 1); /* the last coding must be chunked */
        } else if (strcasecmp(n, "Connection") == 0) {
            conn_close |= list_has(v, "close", 0);
            conn_keep |= list_has(v, "keep-alive", 0);
        } else if (strcasecmp(n, "Expect") == 0) {
            expect |= strcasecmp(v, "100-continue") == 0;
        }
    }
    rq->keep_alive = rq->minor >= 1 ? !conn_close : (conn_keep && !conn_close);
    if (te) {
        if (!chunked)
            return 400;
        if (have_cl)
            rq->keep_alive = 0; /* ambiguous framing: answer, then close (RFC 9112 6.3) */
    } else if (have_cl && cl > BODY_MAX) {
        return 413;
    }

    if (te || cl > 0) {
        if (expect && rq->minor >= 1 && send_str(c, "HTTP/1.1 100 Continue\r\n\r\n"))
            return RR_CLOSE;
        if (te)
            return read_chunked(c, rq);
        rq->body = malloc((size_t)cl);
        if (!rq->body)
            return 500;
        rq->body_len = (size_t)cl;
        if (conn_read_exact(c, rq->body, (size_t)cl)) {
            free(rq->body);
            rq->body = NULL;
            return RR_CLOSE;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Counters                                                                 */

/* Increments and returns the count for `path`. */
static long path_count_inc(cts_server *s, const char *path)
{
    long n = 0;
    pthread_mutex_lock(&s->lock);
    size_t i;
    for (i = 0; i < s->npaths; i++)
        if (strcmp(s->paths[i].path, path) == 0)
            break;
    if (i == s->npaths) {
        char *dup = strdup(path);
        if (s->npaths == s->cap_paths) {
            size_t cap = s->cap_paths ? s->cap_paths * 2 : 16;
            path_count *np = realloc(s->paths, cap * sizeof *np);
            if (np) {
                s->paths = np;
                s->cap_paths = cap;
            }
        }
        if (!dup || s->npaths == s->cap_paths) {
            free(dup);
            pthread_mutex_unlock(&s->lock);
            return 0;
        }
        s->paths[i].path = dup;
        s->paths[i].n = 0;
        s->npaths++;
    }
    n = ++s->paths[i].n;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* ------------------------------------------------------------------------ */
/* Responses                                                                */

/* Connection header for a response. */
static void put_connection(sbuf *out, const request *rq, int closing)
{
    if (closing)
        sb_puts(out, "Connection: close\r\n");
    else if (rq && rq->minor == 0)
        sb_puts(out, "Connection: keep-alive\r\n");
}

static int send_response(conn *c, const request *rq, response *rs, int closing)
{
    sbuf out = {0};
    sb_printf(&out, "HTTP/1.1 %d %s\r\n", rs->status, reason(rs->status));
    if (!rs->no_body) {
        if (rs->ctype)
            sb_printf(&out, "Content-Type: %s\r\n", rs->ctype);
        sb_printf(&out, "Content-Length: %zu\r\n", rs->body.len);
    }
    sb_put(&out, rs->hdr.p, rs->hdr.len);
    put_connection(&out, rq, closing);
    sb_puts(&out, "\r\n");
    /* small bodies go out in the same write as the head; big ones are not copied */
    int with_body = !(rq && rq->is_head) && !rs->no_body;
    int separate = with_body && rs->body.len > 64 * 1024;
    if (with_body && !separate)
        sb_put(&out, rs->body.p, rs->body.len);
    int r = (out.failed || rs->hdr.failed || rs->body.failed) ? -1 : send_all(c, out.p, out.len);
    if (r == 0 && separate)
        r = send_all(c, rs->body.p, rs->body.len);
    free(out.p);
    return r;
}

static int send_error_and_close(conn *c, int status)
{
    response rs = {0};
    rs.status = status;
    rs.ctype = "application/json";
    sb_printf(&rs.body, "{\"error\":\"%s\"}", reason(status));
    int r = send_response(c, NULL, &rs, 1);
    free(rs.body.p);
    return r;
}

static void json_error(response *rs, int status, const char *msg)
{
    rs->status = status;
    rs->ctype = "application/json";
    rs->body.len = 0;
    sb_printf(&rs->body, "{\"error\":\"%s\"}", msg);
}

/* Sends a response head with the given fixed lines, for the streaming handlers. */
static int send_head_status(conn *c, const request *rq, int status, const char *lines, int closing)
{
    sbuf out = {0};
    sb_printf(&out, "HTTP/1.1 %d %s\r\n", status, status == 206 ? "Partial Content" : "OK");
    sb_puts(&out, lines);
    put_connection(&out, rq, closing);
    sb_puts(&out, "\r\n");
    int r = out.failed ? -1 : send_all(c, out.p, out.len);
    free(out.p);
    return r;
}

static int send_head(conn *c, const request *rq, const char *lines, int closing)
{
    sbuf out = {0};
    sb_puts(&out, "HTTP/1.1 200 OK\r\n");
    sb_puts(&out, lines);
    put_connection(&out, rq, closing);
    sb_puts(&out, "\r\n");
    int r = out.failed ? -1 : send_all(c, out.p, out.len);
    free(out.p);
    return r;
}

/* ------------------------------------------------------------------------ */
/* Handlers. Each either fills `rs` and returns ACT_SEND, or answers itself and
   returns ACT_KEEP / ACT_CLOSE / ACT_ABORT / ACT_RESET.                     */

static int h_echo(conn *c, request *rq, response *rs)
{
    sbuf *b = &rs->body;
    rs->status = 200;
    rs->ctype = "application/json";
    sb_puts(b, "{\"method\":");
    sb_json_str(b, rq->method, strlen(rq->method));
    sb_puts(b, ",\"path\":");
    sb_json_str(b, rq->path, strlen(rq->path));
    sb_puts(b, ",\"query\":");
    sb_json_str(b, rq->query, strlen(rq->query));
    sb_puts(b, ",\"headers\":[");
    for (size_t i = 0; i < rq->nhdrs; i++) {
        sb_puts(b, i ? ",[" : "[");
        sb_json_str(b, rq->hdrs[i].name, strlen(rq->hdrs[i].name));
        sb_puts(b, ",");
        sb_json_str(b, rq->hdrs[i].value, strlen(rq->hdrs[i].value));
        sb_puts(b, "]");
    }
    sb_puts(b, "],\"body\":");
    sb_json_str(b, rq->body, rq->body_len);
    sb_printf(b, ",\"body_length\":%zu,\"connection\":%ld", rq->body_len, c->served);
    if (rq->absolute[0]) { /* a proxy request, and what a SOCKS5 client asked for */
        sb_puts(b, ",\"proxy_target\":");
        sb_json_str(b, rq->absolute, strlen(rq->absolute));
    }
    if (c->socks[0]) {
        sb_puts(b, ",\"socks\":");
        sb_json_str(b, c->socks, strlen(c->socks));
        sb_puts(b, ",\"socks_user\":");
        sb_json_str(b, c->socks_user, strlen(c->socks_user));
    }
    sb_puts(b, "}");
    return ACT_SEND;
}

static int h_status(const char *arg, response *rs)
{
    unsigned long long code;
    if (parse_num(arg, 999, &code) || code < 200 || code > 599) {
        json_error(rs, 400, "bad parameter");
        return ACT_SEND;
    }
    rs->status = (int)code;
    if (code == 204 || code == 304) {
        rs->no_body = 1;
    } else {
        rs->ctype = "application/json";
        sb_printf(&rs->body, "{\"status\":%d}", rs->status);
    }
    return ACT_SEND;
}

/* /problem/<status>: that status with an error document (a 4xx/5xx JSON body for response
 * descriptors): {"error":{"code":<status>01,"message":"problem <status>"}}. */
static int h_problem(const char *arg, response *rs)
{
    unsigned long long code;
    if (parse_num(arg, 999, &code) || code < 200 || code > 599 || code == 204 || code == 304) {
        json_error(rs, 400, "bad parameter");
        return ACT_SEND;
    }
    rs->status = (int)code;
    rs->ctype = "application/json";
    sb_printf(&rs->body, "{\"error\":{\"code\":%llu01,\"message\":\"problem %llu\"}}", code, code);
    return ACT_SEND;
}

static int h_delay(conn *c, const char *arg, response *rs)
{
    unsigned long long ms;
    if (parse_num(arg, 24ULL * 3600 * 1000, &ms)) {
        json_error(rs, 400, "bad parameter");
        return ACT_SEND;
    }
    if (!sleep_ms(c->srv, ms))
        return ACT_ABORT;
    rs->status = 200;
    rs->ctype = "application/json";
    sb_printf(&rs->body, "{\"delayed\":%llu}", ms);
    return ACT_SEND;
}

static int h_bytes(conn *c, request *rq, const char *arg, response *rs, int closing)
{
    unsigned long long n;
    if (parse_num(arg, ULLONG_MAX / 2, &n)) {
        json_error(rs, 400, "bad parameter");
        return ACT_SEND;
    }
    query q;
    if (query_parse(rq->query, &q))
        return ACT_ABORT;
    const qpair *qp = query_get(&q, "chunked");
    int chunked = qp && qp->vlen == 1 && qp->val[0] == '1';
    /* rate=B: about B bytes a second (chunks every 100 ms), for downloads to interrupt. */
    unsigned long long rate = 0;
    qp = query_get(&q, "rate");
    if (qp) {
        char tmp[32];
        snprintf(tmp, sizeof tmp, "%.*s", (int)(qp->vlen < 31 ? qp->vlen : 31), qp->val);
        if (parse_num(tmp, ULLONG_MAX / 2, &rate))
            rate = 0;
    }
    query_free(&q);

    /* Ranges (RFC 9110 14): "bytes=START-" or "bytes=START-END", with If-Range on the ETag. */
    char etag[64];
    snprintf(etag, sizeof etag, "\"bytes-%llu\"", n);
    unsigned long long start = 0, end = n ? n - 1 : 0;
    int partial = 0;
    const char *range = chunked ? NULL : find_header(rq, "Range");
    const char *if_range = find_header(rq, "If-Range");
    if (range && n && strncmp(range, "bytes=", 6) == 0 && (!if_range || strcmp(if_range, etag) == 0)) {
        char *e1 = NULL;
        unsigned long long a = strtoull(range + 6, &e1, 10);
        if (e1 != range + 6 && *e1 == '-') {
            unsigned long long b = e1[1] ? strtoull(e1 + 1, NULL, 10) : n - 1;
            if (a >= n) {
                json_error(rs, 416, "range not satisfiable");
                return ACT_SEND;
            }
            if (b >= n) b = n - 1;
            if (b >= a) {
                start = a;
                end = b;
                partial = 1;
            }
        }
    }

    char lines[256];
    if (chunked)
        snprintf(lines, sizeof lines,
                 "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n");
    else if (partial)
        snprintf(lines, sizeof lines,
                 "Content-Type: application/octet-stream\r\nETag: %s\r\nAccept-Ranges: bytes\r\n"
                 "Content-Range: bytes %llu-%llu/%llu\r\nContent-Length: %llu\r\n",
                 etag, start, end, n, end - start + 1);
    else
        snprintf(lines, sizeof lines,
                 "Content-Type: application/octet-stream\r\nETag: %s\r\nAccept-Ranges: bytes\r\n"
                 "Content-Length: %llu\r\n", etag, n);
    if (partial)
        n = end + 1;
    if (send_head_status(c, rq, partial ? 206 : 200, lines, closing))
        return ACT_ABORT;
    if (rq->is_head)
        return closing ? ACT_CLOSE : ACT_KEEP;

    /* pattern[i] = i % 251, long enough to take OUT_CHUNK bytes from any phase */
    unsigned char *pattern = malloc(OUT_CHUNK + 251);
    unsigned char *buf = malloc(OUT_CHUNK + 32);
    int act = ACT_ABORT;
    if (!pattern || !buf)
        goto out;
    for (size_t i = 0; i < OUT_CHUNK + 251; i++)
        pattern[i] = (unsigned char)(i % 251);
    unsigned long long sent = start;
    size_t phase = (size_t)(start % 251);
    /* With a rate, about rate/10 bytes go out per 100 ms tick. */
    unsigned long long per_tick = rate ? (rate / 10 ? rate / 10 : 1) : 0, tick_bytes = 0;
    while (sent < n) {
        if (per_tick && tick_bytes >= per_tick) {
            if (!sleep_ms(c->srv, 100))
                goto out;
            tick_bytes = 0;
        }
        size_t m = n - sent < OUT_CHUNK ? (size_t)(n - sent) : OUT_CHUNK;
        if (per_tick && m > per_tick - tick_bytes)
            m = (size_t)(per_tick - tick_bytes);
        tick_bytes += m;
        if (chunked) {
            int hl = snprintf((char *)buf, 16, "%zx\r\n", m);
            memcpy(buf + hl, pattern + phase, m);
            memcpy(buf + hl + m, "\r\n", 2);
            if (send_all(c, buf, (size_t)hl + m + 2))
                goto out;
        } else if (send_all(c, pattern + phase, m)) {
            goto out;
        }
        sent += m;
        phase = (phase + m) % 251;
    }
    if (chunked && send_str(c, "0\r\n\r\n"))
        goto out;
    act = closing ? ACT_CLOSE : ACT_KEEP;
out:
    free(pattern);
    free(buf);
    return act;
}

static int h_close_mid_body(conn *c, request *rq)
{
    unsigned char body[100];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (unsigned char)(i % 251);
    if (send_head(c, rq, "Content-Type: application/octet-stream\r\nContent-Length: 1000\r\n", 0))
        return ACT_ABORT;
    if (!rq->is_head && send_all(c, body, sizeof body))
        return ACT_ABORT;
    return ACT_CLOSE;
}

static int h_hang(conn *c)
{
    char tmp[4096];
    for (;;) {
        if (!wait_fd(c, POLLIN, -1))
            return ACT_ABORT; /* stopping */
        ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK))
            return ACT_ABORT; /* client went away */
    }
}

static int h_headers(request *rq, response *rs)
{
    query q;
    if (query_parse(rq->query, &q))
        return ACT_ABORT;
    rs->status = 200;
    rs->ctype = "application/json";
    for (size_t i = 0; i < q.n; i++) {
        const qpair *p = &q.pairs[i];
        if (!is_token(p->key, p->klen) || !header_safe(p->val, p->vlen)) {
            query_free(&q);
            rs->hdr.len = 0;
            json_error(rs, 400, "bad header");
            return ACT_SEND;
        }
        if (strcasecmp(p->key, "Content-Type") == 0)
            rs->ctype = NULL;
        sb_put(&rs->hdr, p->key, p->klen);
        sb_puts(&rs->hdr, ": ");
        sb_put(&rs->hdr, p->val, p->vlen);
        sb_puts(&rs->hdr, "\r\n");
    }
    query_free(&q);
    sb_puts(&rs->body, "{}");
    return ACT_SEND;
}

static int h_redirect(request *rq, response *rs)
{
    query q;
    if (query_parse(rq->query, &q))
        return ACT_ABORT;
    const qpair *to = query_get(&q, "to");
    const qpair *st = query_get(&q, "status");
    unsigned long long code = 302;
    if (!to || !header_safe(to->val, to->vlen) ||
        (st && (parse_num(st->val, 999, &code) ||
                !(code == 301 || code == 302 || code == 303 || code == 307 || code == 308)))) {
        query_free(&q);
        json_error(rs, 400, "bad parameter");
        return ACT_SEND;
    }
    rs->status = (int)code;
    sb_puts(&rs->hdr, "Location: ");
    sb_put(&rs->hdr, to->val, to->vlen);
    sb_puts(&rs->hdr, "\r\n");
    query_free(&q);
    return ACT_SEND;
}

/* /redirect-chain/{n}: 302 to /redirect-chain/{n-1}; 0 answers 200 {"chain":0}. */
static int h_redirect_chain(const char *arg, response *rs)
{
    unsigned long long n;
    if (parse_num(arg, 100000, &n)) {
        json_error(rs, 400, "bad parameter");
        return ACT_SEND;
    }
    if (n == 0) {
        rs->status = 200;
        rs->ctype = "application/json";
        sb_puts(&rs->body, "{\"chain\":0}");
        return ACT_SEND;
    }
    rs->status = 302;
    sb_printf(&rs->hdr, "Location: /redirect-chain/%llu\r\n", n - 1);
    return ACT_SEND;
}

/* Does any If-None-Match header list the entity tag `quoted` ("\"tag\"") or "*"? */
static int none_match(const request *rq, const char *quoted)
{
    for (size_t i = 0; i < rq->nhdrs; i++)
        if (strcasecmp(rq->hdrs[i].name, "If-None-Match") == 0 &&
            (strstr(rq->hdrs[i].value, quoted) || strcmp(rq->hdrs[i].value, "*") == 0))
            return 1;
    return 0;
}

static int h_etag(request *rq, const char *tag, response *rs)
{
    if (!*tag || strpbrk(tag, "\"\\")) {
        json_error(rs, 400, "bad parameter");
        return ACT_SEND;
    }
    sbuf quoted = {0};
    sb_printf(&quoted, "\"%s\"", tag);
    if (quoted.failed)
        return ACT_ABORT;
    sb_printf(&rs->hdr, "ETag: %s\r\nCache-Control: max-age=0\r\n", quoted.p);
    if (none_match(rq, quoted.p)) {
        rs->status = 304;
        rs->no_body = 1;
    } else {
        rs->status = 200;
        rs->ctype = "application/json";
        sb_puts(&rs->body, "{\"etag\":");
        sb_json_str(&rs->body, tag, strlen(tag));
        sb_puts(&rs->body, "}");
    }
    free(quoted.p);
    return ACT_SEND;
}

static int h_cache(request *rq, response *rs, long n)
{
    query q;
    if (query_parse(rq->query, &q))
        return ACT_ABORT;
    const qpair *max_age = query_get(&q, "max_age"), *etag = query_get(&q, "etag"),
                *lm = query_get(&q, "last_modified"), *vary = query_get(&q, "vary"),
                *body = query_get(&q, "body");
    const qpair *all[] = {max_age, etag, lm, vary};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        if (all[i] && !header_safe(all[i]->val, all[i]->vlen)) {
            query_free(&q);
            json_error(rs, 400, "bad parameter");
            return ACT_SEND;
        }
    }
    if (etag && memchr(etag->val, '"', etag->vlen)) {
        query_free(&q);
        json_error(rs, 400, "bad parameter");
        return ACT_SEND;
    }
    int not_modified = 0;
    if (max_age)
        sb_printf(&rs->hdr, "Cache-Control: max-age=%s\r\n", max_age->val);
    if (etag) {
        sbuf quoted = {0};
        sb_printf(&quoted, "\"%s\"", etag->val);
        sb_printf(&rs->hdr, "ETag: %s\r\n", quoted.p ? quoted.p : "");
        not_modified = quoted.p && none_match(rq, quoted.p);
        free(quoted.p);
    }
    if (lm) {
        sb_printf(&rs->hdr, "Last-Modified: %s\r\n", lm->val);
        /* If-None-Match takes precedence over If-Modified-Since (RFC 9110 13.1.3) */
        const char *ims = find_header(rq, "If-Modified-Since");
        if (!find_header(rq, "If-None-Match") && ims && strcmp(ims, lm->val) == 0)
            not_modified = 1;
    }
    if (vary)
        sb_printf(&rs->hdr, "Vary: %s\r\n", vary->val);

    if (not_modified) {
        rs->status = 304;
        rs->no_body = 1;
    } else if (body) {
        rs->status = 200;
        rs->ctype = "text/plain";
        sb_put(&rs->body, body->val, body->vlen);
    } else {
        const char *hv = vary ? find_header(rq, vary->val) : NULL;
        rs->status = 200;
        rs->ctype = "application/json";
        sb_printf(&rs->body, "{\"n\":%ld,\"vary\":", n);
        sb_json_str(&rs->body, hv ? hv : "", hv ? strlen(hv) : 0);
        sb_puts(&rs->body, "}");
    }
    query_free(&q);
    return ACT_SEND;
}

static int h_slow_body(conn *c, request *rq, const char *arg, response *rs, int closing)
{
    unsigned long long ms;
    if (parse_num(arg, 24ULL * 3600 * 1000, &ms)) {
        json_error(rs, 400, "bad parameter");
        return ACT_SEND;
    }
    char body[100];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (char)('a' + i % 26);
    if (send_head(c, rq, "Content-Type: text/plain\r\nContent-Length: 100\r\n", closing))
        return ACT_ABORT;
    if (rq->is_head)
        return closing ? ACT_CLOSE : ACT_KEEP;
    if (send_all(c, body, 50) || !sleep_ms(c->srv, ms) || send_all(c, body + 50, 50))
        return ACT_ABORT;
    return closing ? ACT_CLOSE : ACT_KEEP;
}

/* "/sse": server-sent events (see the header): ids counted from Last-Event-ID, a retry field,
   `per` events a connection (then a clean close), 204 after `total`, `gap` ms between events. */
static int h_sse(conn *c, request *rq, response *rs)
{
    query q;
    if (query_parse(rq->query, &q))
        return ACT_ABORT;
    unsigned long long per = 3, total = 0, retry = 0, gap = 0;
    char tmp[32];
    const qpair *qp;
    if ((qp = query_get(&q, "per"))) {
        snprintf(tmp, sizeof tmp, "%.*s", (int)(qp->vlen < 31 ? qp->vlen : 31), qp->val);
        parse_num(tmp, 1000000, &per);
    }
    if ((qp = query_get(&q, "total"))) {
        snprintf(tmp, sizeof tmp, "%.*s", (int)(qp->vlen < 31 ? qp->vlen : 31), qp->val);
        parse_num(tmp, 1000000000, &total);
    }
    if ((qp = query_get(&q, "retry"))) {
        snprintf(tmp, sizeof tmp, "%.*s", (int)(qp->vlen < 31 ? qp->vlen : 31), qp->val);
        parse_num(tmp, 3600000, &retry);
    }
    if ((qp = query_get(&q, "gap"))) {
        snprintf(tmp, sizeof tmp, "%.*s", (int)(qp->vlen < 31 ? qp->vlen : 31), qp->val);
        parse_num(tmp, 3600000, &gap);
    }
    query_free(&q);
    unsigned long long last = 0;
    const char *lei = find_header(rq, "Last-Event-ID");
    if (lei)
        last = strtoull(lei, NULL, 10);
    if (total && last >= total) {
        rs->status = 204;
        return ACT_SEND;
    }
    if (send_head(c, rq, "Content-Type: text/event-stream\r\nCache-Control: no-store\r\n", 1))
        return ACT_ABORT;
    char line[160];
    if (retry) {
        int n = snprintf(line, sizeof line, "retry: %llu\n\n", retry);
        if (send_all(c, line, (size_t)n))
            return ACT_ABORT;
    }
    /* with a gap each event is a write of its own; without one, events go out OUT_CHUNK at a time
       (as fast as the client reads: the benchmarks' mode) */
    sbuf out = {0};
    int r = 0;
    for (unsigned long long i = 1; r == 0 && i <= per && (!total || last + i <= total); i++) {
        if (gap && !sleep_ms(c->srv, gap)) {
            r = -1;
            break;
        }
        sb_printf(&out, "id: %llu\nevent: tick\ndata: event %llu\ndata: line two\n\n", last + i, last + i);
        if (gap || out.len >= OUT_CHUNK)
            r = send_sbuf(c, &out);
    }
    if (r == 0)
        r = send_sbuf(c, &out);
    free(out.p);
    return r ? ACT_ABORT : ACT_CLOSE;
}

/* "/origin/{name}": an origin whose headers the query sets, for the HTTP caching tests (see the
   header). Pairs whose name starts with '_' steer it: _status, _body, _gzip; "_304.Name" and
   "_head.Name" are header lines only on a 304 / a HEAD answer (replacing a plain pair of the same
   name). A request whose If-None-Match lists the ETag pair, or (without If-None-Match) whose
   If-Modified-Since equals the Last-Modified pair, gets 304. */
static int h_origin(request *rq, response *rs, long n)
{
    static const unsigned char gz[] = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xff, 0x4b,
                                       0x49, 0x4d, 0xce, 0x4f, 0x49, 0x4d, 0x51, 0x48, 0xca, 0x4f, 0xa9,
                                       0x04, 0x00, 0x81, 0x21, 0x6f, 0xed, 0x0c, 0x00, 0x00, 0x00};
    query q;
    if (query_parse(rq->query, &q))
        return ACT_ABORT;
    const qpair *st = query_get(&q, "_status"), *body = query_get(&q, "_body"), *gzip = query_get(&q, "_gzip");
    const qpair *etag = query_get(&q, "ETag"), *lm = query_get(&q, "Last-Modified");
    int status = st ? atoi(st->val) : 200;
    if (status < 100 || status > 599) {
        query_free(&q);
        json_error(rs, 400, "bad parameter");
        return ACT_SEND;
    }
    int not_modified = 0;
    if (etag && none_match(rq, etag->val))
        not_modified = 1;
    const char *ims = find_header(rq, "If-Modified-Since");
    if (lm && !find_header(rq, "If-None-Match") && ims && strcmp(ims, lm->val) == 0)
        not_modified = 1;
    const char *only = not_modified ? "_304." : rq->is_head ? "_head." : NULL;
    rs->status = not_modified ? 304 : status;
    rs->no_body = not_modified || status == 204 || status == 304;
    rs->ctype = "text/plain";
    for (size_t i = 0; i < q.n; i++) {
        const qpair *p = &q.pairs[i];
        const char *name = p->key;
        size_t nlen = p->klen;
        if (name[0] == '_') {
            if (!only || strncmp(name, only, strlen(only)) != 0)
                continue;
            name += strlen(only);
            nlen -= strlen(only);
        } else if (only) {
            /* a plain pair is replaced by an "_304." / "_head." pair of the same name */
            int replaced = 0;
            for (size_t k = 0; k < q.n && !replaced; k++)
                replaced = strncmp(q.pairs[k].key, only, strlen(only)) == 0 &&
                           strcasecmp(q.pairs[k].key + strlen(only), name) == 0;
            if (replaced)
                continue;
        }
        if (!is_token(name, nlen) || !header_safe(p->val, p->vlen)) {
            query_free(&q);
            rs->hdr.len = 0;
            json_error(rs, 400, "bad header");
            return ACT_SEND;
        }
        if (strcasecmp(name, "Content-Type") == 0)
            rs->ctype = NULL;
        sb_put(&rs->hdr, name, nlen);
        sb_puts(&rs->hdr, ": ");
        sb_put(&rs->hdr, p->val, p->vlen);
        sb_puts(&rs->hdr, "\r\n");
    }
    if (!rs->no_body) {
        if (gzip)
            sb_put(&rs->body, (const char *)gz, sizeof gz);
        else if (body)
            sb_put(&rs->body, body->val, body->vlen);
        else
            sb_printf(&rs->body, "n=%ld", n);
    }
    query_free(&q);
    return ACT_SEND;
}

/* Raw answers for framing tests: bytes no well-behaved server sends, then close. */
static int h_raw(conn *c, const char *name, response *rs)
{
    static const struct { const char *name; const char *bytes; size_t len; } canned[] = {
#define RAW(n, b) {n, b, sizeof b - 1}
        RAW("unterminated-headers", "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\n"),
        RAW("status-only", "HTTP/1.1 200 OK\r\n"),
        RAW("two-content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello.."),
        RAW("same-content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"),
        RAW("icy", "ICY 200 OK\r\nicy-name: x\r\n\r\nhello"),
        RAW("binary", "\x00\x01\x02\xff\xfe garbage\r\n\r\n"),
        RAW("negative-status", "HTTP/1.1 -200 OK\r\nContent-Length: 0\r\n\r\n"),
        RAW("long-status", "HTTP/1.1 20000000000000000000 OK\r\nContent-Length: 0\r\n\r\n"),
        RAW("bad-gzip", "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello"),
        RAW("empty", ""),
#undef RAW
    };
    for (size_t i = 0; i < sizeof canned / sizeof canned[0]; i++) {
        if (strcmp(name, canned[i].name) == 0)
            return send_all(c, canned[i].bytes, canned[i].len) ? ACT_ABORT : ACT_CLOSE;
    }
    unsigned long long n;
    if (strncmp(name, "big-header/", 11) == 0 && !parse_num(name + 11, 16ULL * 1024 * 1024, &n)) {
        /* One header line of n bytes of value, then a valid end. */
        const char *head = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Big: ";
        char *v = malloc(n + 1);
        if (!v)
            return ACT_ABORT;
        memset(v, 'a', n);
        int r = send_all(c, head, strlen(head)) || send_all(c, v, n) || send_all(c, "\r\n\r\n", 4);
        free(v);
        return r ? ACT_ABORT : ACT_CLOSE;
    }
    json_error(rs, 404, "not found");
    return ACT_SEND;
}

/* "/text?type=T&hex=H": a body of the bytes H (hex digits) with Content-Type T (percent-decoded),
   for the tests of text in other charsets ("text/plain; charset=GBK" and "d6d0cec4"). */
static int h_text(request *rq, response *rs)
{
    query q;
    if (query_parse(rq->query, &q))
        return ACT_ABORT;
    const qpair *type = query_get(&q, "type"), *hex = query_get(&q, "hex");
    rs->status = 200;
    if (type && !memchr(type->val, '\r', type->vlen) && !memchr(type->val, '\n', type->vlen))
        sb_printf(&rs->hdr, "Content-Type: %.*s\r\n", (int)type->vlen, type->val);
    for (size_t i = 0; hex && i + 1 < hex->vlen; i += 2) {
        int hi = hexval((unsigned char)hex->val[i]), lo = hexval((unsigned char)hex->val[i + 1]);
        if (hi < 0 || lo < 0)
            break;
        char byte = (char)(hi << 4 | lo);
        sb_put(&rs->body, &byte, 1);
    }
    query_free(&q);
    return ACT_SEND;
}

/* Returns the rest of `path` after `prefix`, or NULL. */
static const char *after(const char *path, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(path, prefix, n) == 0 ? path + n : NULL;
}

/* ------------------------------------------------------------------------ */
/* Cookies, authentication, proxies                                         */

/* /cookies/set?n=v&... : Set-Cookie n=v; Path=/ for each pair, then 302 to /cookies.
   /cookies/delete?n&... : Set-Cookie n=; Max-Age=0; Path=/ for each, then 302 to /cookies.
   /cookies : {"cookie":"<the Cookie header, or empty>"}. */
static int h_cookies(request *rq, response *rs)
{
    const char *p = rq->path;
    int set = strcmp(p, "/cookies/set") == 0, del = strcmp(p, "/cookies/delete") == 0;
    if (set || del) {
        query q;
        if (query_parse(rq->query, &q))
            return ACT_ABORT;
        for (size_t i = 0; i < q.n; i++) {
            const qpair *qp = &q.pairs[i];
            if (!is_token(qp->key, qp->klen) || !header_safe(qp->val, qp->vlen) || memchr(qp->val, ';', qp->vlen)) {
                query_free(&q);
                rs->hdr.len = 0;
                json_error(rs, 400, "bad cookie");
                return ACT_SEND;
            }
            sb_puts(&rs->hdr, "Set-Cookie: ");
            sb_put(&rs->hdr, qp->key, qp->klen);
            sb_puts(&rs->hdr, "=");
            if (set)
                sb_put(&rs->hdr, qp->val, qp->vlen);
            sb_puts(&rs->hdr, del ? "; Max-Age=0; Path=/\r\n" : "; Path=/\r\n");
        }
        query_free(&q);
        rs->status = 302;
        sb_puts(&rs->hdr, "Location: /cookies\r\n");
        return ACT_SEND;
    }
    if (strcmp(p, "/cookies") != 0) {
        json_error(rs, 404, "not found");
        return ACT_SEND;
    }
    const char *cookie = find_header(rq, "Cookie");
    rs->status = 200;
    rs->ctype = "application/json";
    sb_puts(&rs->body, "{\"cookie\":");
    sb_json_str(&rs->body, cookie ? cookie : "", cookie ? strlen(cookie) : 0);
    sb_puts(&rs->body, "}");
    return ACT_SEND;
}

/* MD5 (RFC 1321), for checking Digest answers. */
typedef struct {
    uint32_t a, b, c, d;
    uint64_t len;
    unsigned char buf[64];
} md5_ctx;

static uint32_t rol32(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void md5_block(md5_ctx *m, const unsigned char *p)
{
    static const uint32_t K[64] = {
        0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
        0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
        0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
        0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
        0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
        0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
        0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
        0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};
    static const int R[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                              5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                              4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                              6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};
    uint32_t w[16];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[i * 4] | (uint32_t)p[i * 4 + 1] << 8 | (uint32_t)p[i * 4 + 2] << 16 |
               (uint32_t)p[i * 4 + 3] << 24;
    uint32_t a = m->a, b = m->b, c = m->c, d = m->d;
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) {
            f = (b & c) | (~b & d);
            g = i;
        } else if (i < 32) {
            f = (d & b) | (~d & c);
            g = (5 * i + 1) % 16;
        } else if (i < 48) {
            f = b ^ c ^ d;
            g = (3 * i + 5) % 16;
        } else {
            f = c ^ (b | ~d);
            g = (7 * i) % 16;
        }
        uint32_t t = d;
        d = c;
        c = b;
        b = b + rol32(a + f + K[i] + w[g], R[i]);
        a = t;
    }
    m->a += a;
    m->b += b;
    m->c += c;
    m->d += d;
}

/* The lowercase hex MD5 of the parts joined by ':' (out: 33 bytes). */
static void md5_hex_join(char out[33], const char *const *parts, size_t n)
{
    md5_ctx m = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0, {0}};
    for (size_t i = 0; i < n; i++) {
        const char *s = parts[i];
        size_t len = strlen(s);
        for (size_t k = 0; k <= len; k++) {
            unsigned char ch;
            if (k == len) {
                if (i + 1 == n)
                    break;
                ch = ':';
            } else {
                ch = (unsigned char)s[k];
            }
            m.buf[m.len++ % 64] = ch;
            if (m.len % 64 == 0)
                md5_block(&m, m.buf);
        }
    }
    uint64_t bits = m.len * 8;
    size_t used = m.len % 64;
    m.buf[used++] = 0x80;
    if (used > 56) {
        memset(m.buf + used, 0, 64 - used);
        md5_block(&m, m.buf);
        used = 0;
    }
    memset(m.buf + used, 0, 56 - used);
    for (int i = 0; i < 8; i++)
        m.buf[56 + i] = (unsigned char)(bits >> (8 * i));
    md5_block(&m, m.buf);
    uint32_t v[4] = {m.a, m.b, m.c, m.d};
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", (v[i / 4] >> (8 * (i % 4))) & 0xff);
}

/* A parameter of an auth-param list (name=value or name="value"), copied into out; 0 if found. */
static int auth_param(const char *v, const char *name, char *out, size_t size)
{
    size_t nl = strlen(name);
    const char *p = v;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        const char *eq = strchr(p, '=');
        if (!eq)
            return -1;
        const char *key = p;
        size_t klen = (size_t)(eq - p);
        while (klen && key[klen - 1] == ' ')
            klen--;
        p = eq + 1;
        while (*p == ' ')
            p++;
        const char *val = p;
        size_t vlen;
        if (*p == '"') {
            val = ++p;
            while (*p && *p != '"')
                p += (*p == '\\' && p[1]) ? 2 : 1;
            vlen = (size_t)(p - val);
            if (*p)
                p++;
        } else {
            while (*p && *p != ',')
                p++;
            vlen = (size_t)(p - val);
            while (vlen && val[vlen - 1] == ' ')
                vlen--;
        }
        if (klen == nl && strncasecmp(key, name, nl) == 0) {
            if (vlen >= size)
                return -1;
            memcpy(out, val, vlen);
            out[vlen] = '\0';
            return 0;
        }
    }
    return -1;
}

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void base64_bytes(const unsigned char *s, size_t n, char *out, size_t size)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < size; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n) v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n) v |= s[i + 2];
        out[o++] = b64chars[(v >> 18) & 63];
        out[o++] = b64chars[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64chars[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? b64chars[v & 63] : '=';
    }
    out[o] = '\0';
}

static void base64_of(const char *s, char *out, size_t size)
{
    base64_bytes((const unsigned char *)s, strlen(s), out, size);
}

#define AUTH_BASIC 1
#define AUTH_DIGEST 2
#define AUTH_REALM "courier"
#define AUTH_NONCE "dcd98b7102dd2f0e8b11d0f600bfb0c093"
#define AUTH_OPAQUE "5ccc069c403ebaf9f0171e9517f40e41"

/* Checks an Authorization value against user and password for the schemes allowed; the scheme
   that passed, or 0. Digest per RFC 7616 with MD5 and qop=auth (and RFC 2069's form without qop):
   the username, realm, nonce and uri must be the ones of this request, and the response
   MD5(MD5(user:realm:pass):nonce:nc:cnonce:qop:MD5(method:uri)). */
static int auth_check(const request *rq, const char *v, const char *user, const char *pass, int schemes)
{
    if (!v)
        return 0;
    if ((schemes & AUTH_BASIC) && strncasecmp(v, "Basic ", 6) == 0) {
        char plain[512], want[700];
        snprintf(plain, sizeof plain, "%s:%s", user, pass);
        base64_of(plain, want, sizeof want);
        return strcmp(v + 6, want) == 0 ? AUTH_BASIC : 0;
    }
    if ((schemes & AUTH_DIGEST) && strncasecmp(v, "Digest ", 7) == 0) {
        const char *d = v + 7;
        char username[256], realm[256], nonce[256], uri[2048], response[64], qop[32], nc[32], cnonce[256],
            alg[32] = "MD5";
        if (auth_param(d, "username", username, sizeof username) || auth_param(d, "realm", realm, sizeof realm) ||
            auth_param(d, "nonce", nonce, sizeof nonce) || auth_param(d, "uri", uri, sizeof uri) ||
            auth_param(d, "response", response, sizeof response))
            return 0;
        auth_param(d, "algorithm", alg, sizeof alg);
        if (strcmp(username, user) != 0 || strcmp(realm, AUTH_REALM) != 0 || strcmp(nonce, AUTH_NONCE) != 0 ||
            strcasecmp(alg, "MD5") != 0)
            return 0;
        char target[2048];
        snprintf(target, sizeof target, "%s%s%s", rq->path, rq->query[0] ? "?" : "", rq->query);
        if (strcmp(uri, target) != 0)
            return 0;
        char ha1[33], ha2[33], want[33];
        const char *p1[] = {user, AUTH_REALM, pass};
        md5_hex_join(ha1, p1, 3);
        const char *p2[] = {rq->method, uri};
        md5_hex_join(ha2, p2, 2);
        if (auth_param(d, "qop", qop, sizeof qop) == 0) {
            if (strcmp(qop, "auth") != 0 || auth_param(d, "nc", nc, sizeof nc) ||
                auth_param(d, "cnonce", cnonce, sizeof cnonce))
                return 0;
            const char *p3[] = {ha1, nonce, nc, cnonce, qop, ha2};
            md5_hex_join(want, p3, 6);
        } else {
            const char *p3[] = {ha1, nonce, ha2};
            md5_hex_join(want, p3, 3);
        }
        return strcasecmp(response, want) == 0 ? AUTH_DIGEST : 0;
    }
    return 0;
}

/* /basic-auth/{user}/{pass}, /digest-auth/{user}/{pass}, /any-auth/{user}/{pass} (either):
   200 {"authenticated":true,"user":U,"scheme":"Basic"|"Digest"} when the Authorization header
   answers one of the route's schemes with those credentials, else 401 with a WWW-Authenticate
   challenge per scheme and {"authenticated":false}. */
static int h_auth(request *rq, const char *arg, int schemes, response *rs)
{
    char user[256], pass[256];
    const char *slash = strchr(arg, '/');
    if (!slash || (size_t)(slash - arg) >= sizeof user || strlen(slash + 1) >= sizeof pass) {
        json_error(rs, 400, "bad parameter");
        return ACT_SEND;
    }
    memcpy(user, arg, (size_t)(slash - arg));
    user[slash - arg] = '\0';
    snprintf(pass, sizeof pass, "%s", slash + 1);
    int ok = auth_check(rq, find_header(rq, "Authorization"), user, pass, schemes);
    rs->ctype = "application/json";
    if (ok) {
        rs->status = 200;
        sb_puts(&rs->body, "{\"authenticated\":true,\"user\":");
        sb_json_str(&rs->body, user, strlen(user));
        sb_printf(&rs->body, ",\"scheme\":\"%s\"}", ok == AUTH_BASIC ? "Basic" : "Digest");
        return ACT_SEND;
    }
    rs->status = 401;
    if (schemes & AUTH_DIGEST)
        sb_puts(&rs->hdr, "WWW-Authenticate: Digest realm=\"" AUTH_REALM "\", qop=\"auth\", nonce=\"" AUTH_NONCE
                          "\", opaque=\"" AUTH_OPAQUE "\", algorithm=MD5\r\n");
    if (schemes & AUTH_BASIC)
        sb_puts(&rs->hdr, "WWW-Authenticate: Basic realm=\"" AUTH_REALM "\"\r\n");
    sb_puts(&rs->body, "{\"authenticated\":false}");
    return ACT_SEND;
}

/* /session/token: issues a new bearer token, "tok-<n>" (n counts up from 1), which from then on is
   the only one /session/protected accepts: 200 {"token":"tok-<n>"}.
   /session/protected: 200 {"ok":true,"token":T} when Authorization is "Bearer T" with the token
   issued last; else 401 with WWW-Authenticate: Bearer and {"ok":false}. */
static int h_session(cts_server *s, request *rq, const char *arg, response *rs)
{
    rs->ctype = "application/json";
    if (strcmp(arg, "token") == 0) {
        pthread_mutex_lock(&s->lock);
        long n = ++s->token_gen;
        pthread_mutex_unlock(&s->lock);
        rs->status = 200;
        sb_printf(&rs->body, "{\"token\":\"tok-%ld\"}", n);
        return ACT_SEND;
    }
    if (strcmp(arg, "protected") != 0) {
        json_error(rs, 404, "no such session endpoint");
        return ACT_SEND;
    }
    pthread_mutex_lock(&s->lock);
    long n = s->token_gen;
    pthread_mutex_unlock(&s->lock);
    char want[64];
    snprintf(want, sizeof want, "Bearer tok-%ld", n);
    const char *v = find_header(rq, "Authorization");
    if (n > 0 && v && strcmp(v, want) == 0) {
        rs->status = 200;
        sb_printf(&rs->body, "{\"ok\":true,\"token\":\"tok-%ld\"}", n);
        return ACT_SEND;
    }
    rs->status = 401;
    sb_puts(&rs->hdr, "WWW-Authenticate: Bearer realm=\"session\"\r\n");
    sb_puts(&rs->body, "{\"ok\":false}");
    return ACT_SEND;
}

/* /ntlm-start: offers NTLM; 200 {"ntlm_negotiate":true} once the client sends an NTLM
   negotiate message (type 1: "NTLMSSP\0" then 1), which is as far as a client's choice of NTLM
   can be seen without an NTLM server. */
static int h_ntlm_start(request *rq, response *rs)
{
    const char *v = find_header(rq, "Authorization");
    rs->ctype = "application/json";
    if (v && strncmp(v, "NTLM TlRMTVNTUAAB", 17) == 0) {
        rs->status = 200;
        sb_puts(&rs->body, "{\"ntlm_negotiate\":true}");
        return ACT_SEND;
    }
    rs->status = 401;
    sb_puts(&rs->hdr, "WWW-Authenticate: NTLM\r\n");
    sb_puts(&rs->body, "{\"authenticated\":false}");
    return ACT_SEND;
}

/* ------------------------------------------------------------------------ */
/* /ws/echo: a WebSocket (RFC 6455) echo server, for tests and benchmarks   */

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_FLUSH (64 * 1024) /* echoes held before a send even while more input waits */

/* Appends one unmasked frame (FIN as given) to `out`. */
static void ws_put_frame(sbuf *out, int fin, int opcode, const unsigned char *data, size_t n)
{
    unsigned char h[10];
    size_t hl = 2;
    h[0] = (unsigned char)((fin ? 0x80 : 0) | opcode);
    if (n < 126) {
        h[1] = (unsigned char)n;
    } else if (n <= 0xFFFF) {
        h[1] = 126;
        h[2] = (unsigned char)(n >> 8);
        h[3] = (unsigned char)n;
        hl = 4;
    } else {
        h[1] = 127;
        for (int i = 0; i < 8; i++)
            h[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
        hl = 10;
    }
    sb_put(out, h, hl);
    sb_put(out, data, n);
}

/* Fails the connection (RFC 6455 7.1.7): a close frame with `code`, then the server closes. */
static int ws_fail(conn *c, sbuf *out, int code)
{
    unsigned char b[2] = {(unsigned char)(code >> 8), (unsigned char)code};
    ws_put_frame(out, 1, 0x8, b, 2);
    return send_sbuf(c, out) ? ACT_ABORT : ACT_CLOSE;
}

/* "/ws/echo" (see the header): the opening handshake, then every data frame sent back as it came
   (opcode and FIN kept, unmasked), ping answered by pong, close by close; ?hold=MS waits that long
   before the first read. Frames are read through
   the connection's buffered reader, so frames sent right behind the request are not lost. */
static int h_ws_echo(conn *c, request *rq, response *rs)
{
    const char *upgrade = find_header(rq, "Upgrade");
    const char *connection = find_header(rq, "Connection");
    const char *key = find_header(rq, "Sec-WebSocket-Key");
    const char *version = find_header(rq, "Sec-WebSocket-Version");
    if (strcmp(rq->method, "GET") != 0 || !upgrade || !list_has(upgrade, "websocket", 0) || !connection ||
        !list_has(connection, "upgrade", 0) || !key || strlen(key) != 24) {
        json_error(rs, 400, "not a websocket handshake");
        return ACT_SEND;
    }
    if (!version || strcmp(version, "13") != 0) {
        json_error(rs, 426, "websocket version 13 only");
        sb_puts(&rs->hdr, "Sec-WebSocket-Version: 13\r\n");
        return ACT_SEND;
    }
    char cat[64], accept[32];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    snprintf(cat, sizeof cat, "%s%s", key, WS_GUID);
    if (!EVP_Digest(cat, strlen(cat), md, &mdlen, EVP_sha1(), NULL))
        return ACT_ABORT;
    base64_bytes(md, mdlen, accept, sizeof accept);
    char head[256];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
    if (send_all(c, head, (size_t)hn))
        return ACT_ABORT;
    /* ?hold=MS (at most 5000): nothing read for that long after the handshake, so that a client's
       sends fill the socket (ws_test test_large_messages_in_order: frames written in part). */
    query q;
    if (query_parse(rq->query, &q))
        return ACT_ABORT;
    const qpair *hold = query_get(&q, "hold");
    if (hold && hold->vlen < 8) {
        char tmp[8];
        unsigned long long ms = 0;
        memcpy(tmp, hold->val, hold->vlen);
        tmp[hold->vlen] = 0;
        if (!parse_num(tmp, 5000, &ms))
            usleep((useconds_t)(ms * 1000));
    }
    query_free(&q);

    sbuf out = {0};
    unsigned char *payload = NULL;
    size_t cap = 0;
    int fragmented = 0; /* inside a fragmented data message */
    int act = ACT_ABORT;
    for (;;) {
        /* nothing more buffered: what we hold goes out before we wait for the peer */
        if ((c->rstart == c->rend || out.len >= WS_FLUSH) && send_sbuf(c, &out))
            break;
        unsigned char h[14];
        if (conn_read_exact(c, (char *)h, 2))
            break; /* EOF without a close, an error, or stop */
        int fin = h[0] & 0x80, opcode = h[0] & 0x0F, masked = h[1] & 0x80;
        uint64_t n = h[1] & 0x7F;
        if (n == 126) {
            if (conn_read_exact(c, (char *)h + 2, 2))
                break;
            n = ((uint64_t)h[2] << 8) | h[3];
        } else if (n == 127) {
            if (conn_read_exact(c, (char *)h + 2, 8))
                break;
            n = 0;
            for (int i = 0; i < 8; i++)
                n = (n << 8) | h[2 + i];
        }
        int control = opcode & 0x8;
        if ((h[0] & 0x70) || !masked || (opcode > 0x2 && opcode < 0x8) || opcode > 0xA ||
            (control && (!fin || n > 125)) || (opcode == 0 && !fragmented) || (opcode && !control && fragmented)) {
            act = ws_fail(c, &out, 1002);
            break;
        }
        if (n > BODY_MAX) {
            act = ws_fail(c, &out, 1009);
            break;
        }
        unsigned char mask[4];
        if (conn_read_exact(c, (char *)mask, 4))
            break;
        if (n > cap) {
            unsigned char *p = realloc(payload, (size_t)n);
            if (!p)
                break;
            payload = p;
            cap = (size_t)n;
        }
        if (n && conn_read_exact(c, (char *)payload, (size_t)n))
            break;
        for (size_t i = 0; i < n; i++)
            payload[i] ^= mask[i & 3];
        if (opcode == 0x8) {
            if (n == 1) {
                act = ws_fail(c, &out, 1002);
                break;
            }
            ws_put_frame(&out, 1, 0x8, payload, n >= 2 ? 2 : 0); /* the peer's code back, no reason */
            act = send_sbuf(c, &out) ? ACT_ABORT : ACT_CLOSE;
            break;
        }
        if (opcode == 0x9) {
            ws_put_frame(&out, 1, 0xA, payload, (size_t)n);
            continue;
        }
        if (opcode == 0xA)
            continue;
        if (!control)
            fragmented = !fin;
        ws_put_frame(&out, fin, opcode, payload, (size_t)n);
    }
    free(out.p);
    free(payload);
    return act;
}

/* A request in absolute-form (the server as a forward proxy) to a host whose name starts with
   "proxy-auth." needs Proxy-Authorization: Basic for proxyuser:proxypass, else 407. */
static int proxy_refuses(request *rq, response *rs)
{
    const char *host = strstr(rq->absolute, "://");
    if (!host || strncasecmp(host + 3, "proxy-auth.", 11) != 0)
        return 0;
    const char *v = find_header(rq, "Proxy-Authorization");
    if (v && strcmp(v, "Basic cHJveHl1c2VyOnByb3h5cGFzcw==") == 0)
        return 0;
    rs->status = 407;
    rs->ctype = "application/json";
    sb_puts(&rs->hdr, "Proxy-Authenticate: Basic realm=\"proxy\"\r\n");
    sb_puts(&rs->body, "{\"error\":\"proxy authentication required\"}");
    return 1;
}

/* A SOCKS5 greeting (RFC 1928; username/password per RFC 1929) at the start of a connection: the
   server answers it as a SOCKS5 proxy that "connects" to itself, records what was asked for, and
   serves HTTP on the connection. 0: done or not SOCKS; -1: close. */
static int socks5_accept(conn *c)
{
    if (c->rend == c->rstart && conn_fill(c) <= 0)
        return -1;
    if ((unsigned char)c->rbuf[c->rstart] != 5)
        return 0;
    unsigned char hdr[4], methods[255], len;
    if (conn_read_exact(c, (char *)hdr, 2) || conn_read_exact(c, (char *)methods, hdr[1]))
        return -1;
    int userpass = memchr(methods, 2, hdr[1]) != NULL;
    unsigned char reply[2] = {5, (unsigned char)(userpass ? 2 : memchr(methods, 0, hdr[1]) ? 0 : 0xff)};
    if (send_all(c, reply, 2) || reply[1] == 0xff)
        return -1;
    if (userpass) {
        char user[256], pass[256];
        if (conn_read_exact(c, (char *)hdr, 2) || conn_read_exact(c, user, hdr[1]) ||
            conn_read_exact(c, (char *)&len, 1) || conn_read_exact(c, pass, len))
            return -1;
        user[hdr[1]] = '\0';
        pass[len] = '\0';
        snprintf(c->socks_user, sizeof c->socks_user, "%s:%s", user, pass);
        unsigned char ok[2] = {1, 0};
        if (send_all(c, ok, 2))
            return -1;
    }
    char host[256];
    unsigned char port[2];
    if (conn_read_exact(c, (char *)hdr, 4) || hdr[1] != 1)
        return -1;
    if (hdr[3] == 1) {
        unsigned char a[4];
        if (conn_read_exact(c, (char *)a, 4))
            return -1;
        snprintf(host, sizeof host, "%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
    } else if (hdr[3] == 3) {
        if (conn_read_exact(c, (char *)&len, 1) || conn_read_exact(c, host, len))
            return -1;
        host[len] = '\0';
    } else if (hdr[3] == 4) {
        unsigned char a[16];
        if (conn_read_exact(c, (char *)a, 16))
            return -1;
        snprintf(host, sizeof host, "[ipv6]");
    } else {
        return -1;
    }
    if (conn_read_exact(c, (char *)port, 2))
        return -1;
    snprintf(c->socks, sizeof c->socks, "%s:%u", host, (unsigned)(port[0] << 8 | port[1]));
    unsigned char done[10] = {5, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    if (strncmp(host, "refuse.", 7) == 0) { /* "connection refused", then close */
        done[1] = 5;
        send_all(c, done, sizeof done);
        return -1;
    }
    return send_all(c, done, sizeof done) ? -1 : 0;
}

static int dispatch(conn *c, request *rq, response *rs, long path_n, int closing)
{
    const char *p = rq->path, *arg;
    cts_server *s = c->srv;

    if (rq->absolute[0] && proxy_refuses(rq, rs))
        return ACT_SEND;
    if (strcmp(p, "/cookies") == 0 || after(p, "/cookies/"))
        return h_cookies(rq, rs);
    if ((arg = after(p, "/basic-auth/")))
        return h_auth(rq, arg, AUTH_BASIC, rs);
    if ((arg = after(p, "/digest-auth/")))
        return h_auth(rq, arg, AUTH_DIGEST, rs);
    if ((arg = after(p, "/any-auth/")))
        return h_auth(rq, arg, AUTH_BASIC | AUTH_DIGEST, rs);
    if (strcmp(p, "/ntlm-start") == 0)
        return h_ntlm_start(rq, rs);
    if ((arg = after(p, "/session/")))
        return h_session(s, rq, arg, rs);
    if (strcmp(p, "/echo") == 0 || after(p, "/echo/"))
        return h_echo(c, rq, rs);
    if ((arg = after(p, "/status/")))
        return h_status(arg, rs);
    if ((arg = after(p, "/problem/")))
        return h_problem(arg, rs);
    if ((arg = after(p, "/delay/")))
        return h_delay(c, arg, rs);
    if ((arg = after(p, "/bytes/")))
        return h_bytes(c, rq, arg, rs, closing);
    if (strcmp(p, "/close-mid-body") == 0)
        return h_close_mid_body(c, rq);
    if (strcmp(p, "/hang") == 0)
        return h_hang(c);
    if (strcmp(p, "/reset") == 0)
        return ACT_RESET;
    if (strcmp(p, "/headers") == 0)
        return h_headers(rq, rs);
    if (strcmp(p, "/redirect") == 0)
        return h_redirect(rq, rs);
    if ((arg = after(p, "/redirect-chain/")))
        return h_redirect_chain(arg, rs);
    if ((arg = after(p, "/etag/")))
        return h_etag(rq, arg, rs);
    if (strcmp(p, "/cache") == 0)
        return h_cache(rq, rs, path_n);
    if (after(p, "/origin/"))
        return h_origin(rq, rs, path_n);
    if (strcmp(p, "/count") == 0) {
        rs->status = 200;
        rs->ctype = "application/json";
        sb_printf(&rs->body, "{\"requests\":%ld,\"connections\":%ld}",
                  atomic_load(&s->requests), atomic_load(&s->connections));
        return ACT_SEND;
    }
    if (strcmp(p, "/json") == 0) {
        rs->status = 200;
        rs->ctype = "application/json";
        sb_puts(&rs->body, "{\"code\":200,\"message\":\"ok\",\"data\":{\"id\":1,\"name\":\"courier\","
                           "\"tags\":[\"a\",\"b\"],\"items\":[{\"id\":1,\"title\":\"one\"},"
                           "{\"id\":2,\"title\":\"two\"}]}}");
        return ACT_SEND;
    }
    if ((arg = after(p, "/slow-body/")))
        return h_slow_body(c, rq, arg, rs, closing);
    if (strcmp(p, "/text") == 0)
        return h_text(rq, rs);
    if (strcmp(p, "/sse") == 0)
        return h_sse(c, rq, rs);
    if (strcmp(p, "/ws/echo") == 0)
        return h_ws_echo(c, rq, rs);
    if ((arg = after(p, "/raw/")))
        return h_raw(c, arg, rs);
    json_error(rs, 404, "not found");
    return ACT_SEND;
}

/* ------------------------------------------------------------------------ */
/* Connection threads                                                       */

/* Half-closes, then discards input for a while so the client reads our last
   response instead of a reset caused by unread data. */
static void lingering_close(conn *c)
{
    char tmp[4096];
    long long deadline = now_ms() + LINGER_MS;
    shutdown(c->fd, SHUT_WR);
    for (;;) {
        ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
        if (n > 0 || (n < 0 && errno == EINTR))
            continue;
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            return;
        long long left = deadline - now_ms();
        if (left <= 0 || !wait_fd(c, POLLIN, (int)left))
            return;
    }
}

static void *conn_main(void *arg)
{
    conn *c = arg;
    cts_server *s = c->srv;
    int act = ACT_ABORT;

    while (!is_stopping(s)) {
        if (c->served == 0 && socks5_accept(c) != 0)
            break; /* a SOCKS5 greeting that went wrong (or EOF) */
        request rq;
        int st = read_request(c, &rq);
        if (st == RR_CLOSE) {
            act = ACT_ABORT;
            break;
        }
        if (st != 0) {
            act = send_error_and_close(c, st) ? ACT_ABORT : ACT_CLOSE;
            break;
        }
        c->served++;
        atomic_fetch_add(&s->requests, 1);
        long path_n = path_count_inc(s, rq.path);
        long now_in = atomic_fetch_add(&s->in_flight, 1) + 1;
        long seen = atomic_load(&s->max_in_flight);
        while (now_in > seen && !atomic_compare_exchange_weak(&s->max_in_flight, &seen, now_in)) {
        }

        int closing = !rq.keep_alive || is_stopping(s);
        response rs = {0};
        act = dispatch(c, &rq, &rs, path_n, closing);
        if (act == ACT_SEND) {
            if (rs.status == 0)
                act = ACT_ABORT;
            else if (send_response(c, &rq, &rs, closing))
                act = ACT_ABORT;
            else
                act = closing ? ACT_CLOSE : ACT_KEEP;
        }
        atomic_fetch_sub(&s->in_flight, 1); /* answered, or given up on */
        free(rs.hdr.p);
        free(rs.body.p);
        free(rq.body);
        if (act != ACT_KEEP)
            break;
    }

    if (act == ACT_CLOSE && !is_stopping(s)) {
        lingering_close(c);
    } else if (act == ACT_RESET) {
        struct linger lg = {1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    free(c->rbuf);
    free(c->head);
    free(c->hdrs);
    c->rbuf = c->head = NULL;
    c->hdrs = NULL;

    /* close under the lock so stop() never shutdown()s a reused descriptor */
    pthread_mutex_lock(&s->lock);
    close(c->fd);
    c->fd = -1;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->active = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = NULL;
    c->next = s->finished;
    s->finished = c;
    pthread_cond_broadcast(&s->conn_done);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static void join_list(conn *c)
{
    while (c) {
        conn *next = c->next;
        pthread_join(c->thread, NULL);
        free(c);
        c = next;
    }
}

static void reap_finished(cts_server *s)
{
    pthread_mutex_lock(&s->lock);
    conn *f = s->finished;
    s->finished = NULL;
    pthread_mutex_unlock(&s->lock);
    join_list(f);
}

static void start_conn(cts_server *s, int fd)
{
    int one = 1;
    if (set_fd_flags(fd)) {
        close(fd);
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
#ifdef SO_NOSIGPIPE
    setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
    conn *c = calloc(1, sizeof *c);
    if (c) {
        c->rbuf = malloc(RBUF_CAP);
        c->head = malloc(HEAD_MAX);
    }
    if (!c || !c->rbuf || !c->head) {
        if (c) {
            free(c->rbuf);
            free(c->head);
        }
        free(c);
        close(fd);
        return;
    }
    c->srv = s;
    c->fd = fd;
    atomic_fetch_add(&s->connections, 1);

    pthread_mutex_lock(&s->lock);
    c->next = s->active;
    if (s->active)
        s->active->prev = c;
    s->active = c;
    pthread_mutex_unlock(&s->lock);

    pthread_attr_t attr;
    int err = pthread_attr_init(&attr);
    if (!err) {
        pthread_attr_setstacksize(&attr, CONN_STACK);
        err = pthread_create(&c->thread, &attr, conn_main, c);
        pthread_attr_destroy(&attr);
    }
    if (err) {
        pthread_mutex_lock(&s->lock);
        if (c->prev)
            c->prev->next = c->next;
        else
            s->active = c->next;
        if (c->next)
            c->next->prev = c->prev;
        pthread_mutex_unlock(&s->lock);
        close(fd);
        free(c->rbuf);
        free(c->head);
        free(c);
    }
}

static void *accept_main(void *arg)
{
    cts_server *s = arg;
    struct pollfd p[2] = {{s->listen_fd, POLLIN, 0}, {s->wake[0], POLLIN, 0}};
    for (;;) {
        int r = poll(p, 2, 1000); /* the timeout only serves to reap finished threads */
        reap_finished(s);
        if (r < 0)
            continue;
        if (p[1].revents)
            return NULL;
        if (!p[0].revents)
            continue;
        for (;;) {
            int fd = accept(s->listen_fd, NULL, NULL);
            if (fd >= 0) {
                start_conn(s, fd);
                continue;
            }
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                struct pollfd w = {s->wake[0], POLLIN, 0};
                poll(&w, 1, 50); /* out of resources: back off instead of spinning */
            }
            break;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Public API                                                               */

static int open_listener(const char *host, int port, int *out_fd, int *out_port)
{
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host, portstr, &hints, &res);
    if (gai != 0)
        return gai == EAI_SYSTEM && errno ? -errno : gai == EAI_MEMORY ? -ENOMEM : -EINVAL;

    int err = -EADDRNOTAVAIL;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd < 0) {
            err = -errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (set_fd_flags(fd) || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 1024)) {
            err = -errno;
            close(fd);
            continue;
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl)) {
            err = -errno;
            close(fd);
            continue;
        }
        *out_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                             : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        *out_fd = fd;
        freeaddrinfo(res);
        return 0;
    }
    freeaddrinfo(res);
    return err;
}

int cts_server_start(cts_server **out, const char *host, int port)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    if (port < 0 || port > 65535)
        return -EINVAL;

    cts_server *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->listen_fd = s->wake[0] = s->wake[1] = -1;
    atomic_init(&s->stopping, 0);
    atomic_init(&s->requests, 0);
    atomic_init(&s->connections, 0);

    int err = open_listener(host ? host : "127.0.0.1", port, &s->listen_fd, &s->port);
    if (err)
        goto fail;
    if (pipe(s->wake) || set_fd_flags(s->wake[0]) || set_fd_flags(s->wake[1])) {
        err = -errno;
        goto fail;
    }
    if ((err = pthread_mutex_init(&s->lock, NULL)) != 0) {
        err = -err;
        goto fail;
    }
    if ((err = pthread_cond_init(&s->conn_done, NULL)) != 0) {
        pthread_mutex_destroy(&s->lock);
        err = -err;
        goto fail;
    }
    if ((err = pthread_create(&s->accept_thread, NULL, accept_main, s)) != 0) {
        pthread_cond_destroy(&s->conn_done);
        pthread_mutex_destroy(&s->lock);
        err = -err;
        goto fail;
    }
    *out = s;
    return 0;

fail:
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->wake[0] >= 0)
        close(s->wake[0]);
    if (s->wake[1] >= 0)
        close(s->wake[1]);
    free(s);
    return err ? err : -EIO;
}

int cts_server_port(const cts_server *s) { return s ? s->port : 0; }

long cts_server_request_count(cts_server *s) { return s ? atomic_load(&s->requests) : 0; }

long cts_server_connection_count(cts_server *s) { return s ? atomic_load(&s->connections) : 0; }

long cts_server_max_in_flight(cts_server *s) { return s ? atomic_load(&s->max_in_flight) : 0; }

long cts_server_in_flight(cts_server *s) { return s ? atomic_load(&s->in_flight) : 0; }

long cts_server_path_count(cts_server *s, const char *path)
{
    long n = 0;
    if (!s || !path)
        return 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->npaths; i++) {
        if (strcmp(s->paths[i].path, path) == 0) {
            n = s->paths[i].n;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

void cts_server_reset_counts(cts_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    atomic_store(&s->requests, 0);
    atomic_store(&s->connections, 0);
    atomic_store(&s->max_in_flight, atomic_load(&s->in_flight));
    for (size_t i = 0; i < s->npaths; i++)
        free(s->paths[i].path);
    s->npaths = 0;
    pthread_mutex_unlock(&s->lock);
}

void cts_server_stop(cts_server *s)
{
    if (!s)
        return;
    atomic_store_explicit(&s->stopping, 1, memory_order_release);
    /* wakes every poll() in every thread, for good: the pipe is never drained */
    while (write(s->wake[1], "x", 1) < 0 && errno == EINTR) {
    }
    pthread_join(s->accept_thread, NULL);
    close(s->listen_fd);

    pthread_mutex_lock(&s->lock);
    for (conn *c = s->active; c; c = c->next)
        if (c->fd >= 0)
            shutdown(c->fd, SHUT_RDWR);
    for (;;) {
        conn *f = s->finished;
        s->finished = NULL;
        if (!f) {
            if (!s->active)
                break;
            pthread_cond_wait(&s->conn_done, &s->lock);
            continue;
        }
        pthread_mutex_unlock(&s->lock);
        join_list(f);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);

    for (size_t i = 0; i < s->npaths; i++)
        free(s->paths[i].path);
    free(s->paths);
    pthread_cond_destroy(&s->conn_done);
    pthread_mutex_destroy(&s->lock);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s);
}
