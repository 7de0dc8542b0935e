/*
 * selftest.c — checks every endpoint of the Courier test server with a tiny raw
 * HTTP client over plain sockets. Prints "N passed, M failed"; exits nonzero on
 * any failure.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include "courier_test_server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* Darwin: SIGPIPE is ignored in main() instead */
#endif

static int g_passed, g_failed;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (cond) {                                                                        \
            g_passed++;                                                                    \
        } else {                                                                           \
            g_failed++;                                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
        }                                                                                  \
    } while (0)

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------ */
/* Raw client                                                               */

typedef struct {
    int fd;
    char buf[65536];
    size_t start, end;
    int eof;     /* recv returned 0 */
    int err;     /* errno of a failed recv, 0 if none */
} client;

#define MAX_HDRS 64

typedef struct {
    int status;
    char *head;                  /* status line + header lines, split in place */
    const char *names[MAX_HDRS], *values[MAX_HDRS];
    int nh;
    char *body;                  /* NUL-terminated for convenience */
    size_t body_len;
    int complete;                /* body fully received per its framing */
} resp;

static client *cl_open(int port)
{
    client *c = calloc(1, sizeof *c);
    if (!c)
        abort();
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((unsigned short)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        perror("connect");
        abort();
    }
    struct timeval tv = {10, 0}; /* no test may hang forever */
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return c;
}

static void cl_close(client *c)
{
    if (c) {
        close(c->fd);
        free(c);
    }
}

static int cl_sendn(client *c, const void *d, size_t n)
{
    const char *p = d;
    while (n) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int cl_send(client *c, const char *s) { return cl_sendn(c, s, strlen(s)); }

static int cl_fill(client *c)
{
    if (c->start == c->end)
        c->start = c->end = 0;
    if (c->end == sizeof c->buf) {
        memmove(c->buf, c->buf + c->start, c->end - c->start);
        c->end -= c->start;
        c->start = 0;
    }
    for (;;) {
        ssize_t n = recv(c->fd, c->buf + c->end, sizeof c->buf - c->end, 0);
        if (n > 0) {
            c->end += (size_t)n;
            return 1;
        }
        if (n == 0) {
            c->eof = 1;
            return 0;
        }
        if (errno == EINTR)
            continue;
        c->err = errno;
        return -1;
    }
}

/* Reads a CRLF-terminated line (without CRLF) into out. Returns length or -1. */
static long cl_line(client *c, char *out, size_t max)
{
    for (;;) {
        char *nl = memchr(c->buf + c->start, '\n', c->end - c->start);
        if (nl) {
            size_t n = (size_t)(nl - (c->buf + c->start));
            size_t k = n;
            if (k && c->buf[c->start + k - 1] == '\r')
                k--;
            if (k >= max)
                return -1;
            memcpy(out, c->buf + c->start, k);
            out[k] = '\0';
            c->start += n + 1;
            return (long)k;
        }
        if (cl_fill(c) <= 0)
            return -1;
    }
}

/* Reads up to n bytes into dst; returns how many were read before EOF/error. */
static size_t cl_read(client *c, char *dst, size_t n)
{
    size_t got = 0;
    while (got < n) {
        if (c->start == c->end && cl_fill(c) <= 0)
            break;
        size_t k = c->end - c->start;
        if (k > n - got)
            k = n - got;
        memcpy(dst + got, c->buf + c->start, k);
        c->start += k;
        got += k;
    }
    return got;
}

static void resp_free(resp *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

static const char *hdr(const resp *r, const char *name)
{
    for (int i = 0; i < r->nh; i++)
        if (strcasecmp(r->names[i], name) == 0)
            return r->values[i];
    return NULL;
}

static int hdr_count(const resp *r, const char *name)
{
    int n = 0;
    for (int i = 0; i < r->nh; i++)
        n += strcasecmp(r->names[i], name) == 0;
    return n;
}

static int body_append(resp *r, const char *d, size_t n)
{
    char *nb = realloc(r->body, r->body_len + n + 1);
    if (!nb)
        return -1;
    r->body = nb;
    memcpy(r->body + r->body_len, d, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
    return 0;
}

/* Reads one response. `head_req`: the request was HEAD (no body).
   Returns 0 if a full response was read, -1 otherwise (r is still filled). */
static int cl_response(client *c, resp *r, int head_req)
{
    char line[70000];
    memset(r, 0, sizeof *r);
    size_t hcap = 4096, hlen = 0;
    r->head = malloc(hcap);
    long n = cl_line(c, line, sizeof line);
    if (n < 0 || strncmp(line, "HTTP/1.", 7) != 0 || n < 12)
        return -1;
    r->status = atoi(line + 9);
    /* collect header lines as NUL-separated strings in r->head */
    for (;;) {
        n = cl_line(c, line, sizeof line);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        if (hlen + (size_t)n + 1 > hcap) {
            while (hlen + (size_t)n + 1 > hcap)
                hcap *= 2;
            r->head = realloc(r->head, hcap);
        }
        memcpy(r->head + hlen, line, (size_t)n + 1);
        hlen += (size_t)n + 1;
    }
    for (size_t off = 0; off < hlen && r->nh < MAX_HDRS;) {
        char *l = r->head + off;
        off += strlen(l) + 1;
        char *colon = strchr(l, ':');
        if (!colon)
            continue;
        *colon = '\0';
        char *v = colon + 1;
        while (*v == ' ')
            v++;
        r->names[r->nh] = l;
        r->values[r->nh++] = v;
    }
    r->body = calloc(1, 1);
    if ((r->status >= 100 && r->status < 200) || r->status == 204 || r->status == 304 || head_req) {
        r->complete = 1;
        return 0;
    }
    const char *te = hdr(r, "Transfer-Encoding");
    const char *cl = hdr(r, "Content-Length");
    char tmp[16384];
    if (te && strcasecmp(te, "chunked") == 0) {
        for (;;) {
            if (cl_line(c, line, sizeof line) < 0)
                return -1;
            size_t size = strtoul(line, NULL, 16);
            while (size > 0) {
                size_t want = size < sizeof tmp ? size : sizeof tmp;
                size_t got = cl_read(c, tmp, want);
                body_append(r, tmp, got);
                if (got < want)
                    return -1;
                size -= got;
            }
            if (strtoul(line, NULL, 16) == 0)
                break;
            if (cl_line(c, line, sizeof line) != 0)
                return -1;
        }
        while ((n = cl_line(c, line, sizeof line)) > 0) {
        } /* trailers */
        if (n < 0)
            return -1;
    } else if (cl) {
        size_t left = strtoul(cl, NULL, 10);
        while (left > 0) {
            size_t want = left < sizeof tmp ? left : sizeof tmp;
            size_t got = cl_read(c, tmp, want);
            body_append(r, tmp, got);
            if (got < want)
                return -1;
            left -= got;
        }
    } else {
        size_t got;
        while ((got = cl_read(c, tmp, sizeof tmp)) > 0)
            body_append(r, tmp, got);
    }
    r->complete = 1;
    return 0;
}

/* Sends `req` on c and reads the response. */
static int cl_roundtrip(client *c, const char *req, resp *r)
{
    if (cl_send(c, req))
        return -1;
    return cl_response(c, r, strncmp(req, "HEAD ", 5) == 0);
}

/* One request on a fresh connection with "Connection: close". */
static int get(int port, const char *method, const char *target, const char *extra, resp *r)
{
    char req[8192];
    snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sConnection: close\r\n\r\n",
             method, target, extra ? extra : "");
    client *c = cl_open(port);
    int rc = cl_roundtrip(c, req, r);
    cl_close(c);
    return rc;
}

/* Has the peer closed (EOF or reset) within `ms`? */
static int peer_closed(client *c, int ms)
{
    if (c->start != c->end)
        return 0; /* unread data */
    struct pollfd p = {c->fd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0)
        return 0;
    char b;
    ssize_t n = recv(c->fd, &b, 1, 0);
    return n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE));
}

/* Nothing arrives within ms (and the connection is still open). */
static int silent_for(client *c, int ms)
{
    struct pollfd p = {c->fd, POLLIN, 0};
    return c->start == c->end && poll(&p, 1, ms) == 0;
}

static int body_is(const resp *r, const char *s)
{
    return r->body && r->body_len == strlen(s) && memcmp(r->body, s, r->body_len) == 0;
}

static int has(const resp *r, const char *s) { return r->body && strstr(r->body, s) != NULL; }

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */

static void test_echo(int port)
{
    resp r;
    int rc = get(port, "PUT", "/echo/sub?a=1&b=%20", "X-B: 2\r\nx-a: 1\r\nX-Utf: caf\xc3\xa9\r\n", &r);
    CHECK(rc == 0 && r.status == 200, "echo status %d", r.status);
    CHECK(hdr(&r, "Content-Type") && strcmp(hdr(&r, "Content-Type"), "application/json") == 0,
          "echo content type");
    CHECK(has(&r, "\"method\":\"PUT\""), "method: %s", r.body);
    CHECK(has(&r, "\"path\":\"/echo/sub\""), "path: %s", r.body);
    CHECK(has(&r, "\"query\":\"a=1&b=%20\""), "query: %s", r.body);
    CHECK(has(&r, "[\"Host\",\"127.0.0.1\"],[\"X-B\",\"2\"],[\"x-a\",\"1\"],"
                  "[\"X-Utf\",\"caf\\u00c3\\u00a9\"]"),
          "headers in order: %s", r.body);
    CHECK(has(&r, "\"body\":\"\",\"body_length\":0,\"connection\":1}"), "empty body: %s", r.body);
    CHECK(hdr(&r, "Connection") && strcmp(hdr(&r, "Connection"), "close") == 0, "Connection: close");
    resp_free(&r);

    /* body with bytes that need escaping, sent with Content-Length */
    client *c = cl_open(port);
    const char body[] = "a\"b\\c\n\x01\x7f\xc3\xa9\xff";
    char req[512];
    snprintf(req, sizeof req, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n",
             sizeof body - 1);
    cl_send(c, req);
    cl_sendn(c, body, sizeof body - 1);
    rc = cl_response(c, &r, 0);
    CHECK(rc == 0 && r.status == 200, "echo post status %d", r.status);
    CHECK(has(&r, "\"body\":\"a\\\"b\\\\c\\n\\u0001\x7f\\u00c3\\u00a9\\u00ff\""), "escaped body: %s",
          r.body);
    CHECK(has(&r, "\"body_length\":11"), "body_length: %s", r.body);
    resp_free(&r);
    cl_close(c);

    /* absolute-form target */
    char target[128];
    snprintf(target, sizeof target, "http://127.0.0.1:%d/echo?q=1", port);
    rc = get(port, "GET", target, NULL, &r);
    CHECK(rc == 0 && has(&r, "\"path\":\"/echo\",\"query\":\"q=1\""), "absolute form: %s", r.body);
    resp_free(&r);
}

static void test_keepalive_and_pipelining(cts_server *s, int port)
{
    long conns = cts_server_connection_count(s);
    client *c = cl_open(port);
    resp r;
    int rc = cl_roundtrip(c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc == 0 && r.status == 200 && has(&r, "\"connection\":1}"), "ka first: %s", r.body);
    CHECK(hdr(&r, "Connection") == NULL, "no Connection header on keep-alive 1.1");
    resp_free(&r);
    rc = cl_roundtrip(c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc == 0 && r.status == 200 && has(&r, "\"connection\":2}"), "ka second: %s", r.body);
    resp_free(&r);
    CHECK(cts_server_connection_count(s) == conns + 1, "one connection for two requests");

    /* pipelined: two requests in one write */
    cl_send(c, "GET /json HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?p=1 HTTP/1.1\r\nHost: x\r\n\r\n");
    rc = cl_response(c, &r, 0);
    CHECK(rc == 0 && r.status == 200 && has(&r, "\"courier\""), "pipelined 1");
    resp_free(&r);
    rc = cl_response(c, &r, 0);
    CHECK(rc == 0 && r.status == 200 && has(&r, "\"connection\":4}"), "pipelined 2: %s", r.body);
    resp_free(&r);

    /* Connection: close is honoured */
    rc = cl_roundtrip(c, "GET /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r);
    CHECK(rc == 0 && r.status == 200, "close request");
    CHECK(hdr(&r, "Connection") && strcmp(hdr(&r, "Connection"), "close") == 0, "Connection: close sent");
    CHECK(peer_closed(c, 2000), "server closed after Connection: close");
    resp_free(&r);
    cl_close(c);

    /* HTTP/1.0 closes by default, keeps alive on request */
    c = cl_open(port);
    rc = cl_roundtrip(c, "GET /json HTTP/1.0\r\n\r\n", &r);
    CHECK(rc == 0 && r.status == 200 && hdr(&r, "Connection") &&
              strcmp(hdr(&r, "Connection"), "close") == 0,
          "1.0 close");
    CHECK(peer_closed(c, 2000), "1.0 connection closed");
    resp_free(&r);
    cl_close(c);
    c = cl_open(port);
    rc = cl_roundtrip(c, "GET /json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r);
    CHECK(rc == 0 && r.status == 200 && hdr(&r, "Connection") &&
              strcasecmp(hdr(&r, "Connection"), "keep-alive") == 0,
          "1.0 keep-alive");
    resp_free(&r);
    rc = cl_roundtrip(c, "GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r);
    CHECK(rc == 0 && has(&r, "\"connection\":2}"), "1.0 keep-alive second: %s", r.body);
    resp_free(&r);
    cl_close(c);
}

static void test_chunked_request(int port)
{
    client *c = cl_open(port);
    resp r;
    int rc = cl_roundtrip(c,
                          "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n",
                          &r);
    CHECK(rc == 0 && r.status == 200, "chunked status %d", r.status);
    CHECK(has(&r, "\"body\":\"hello, world\",\"body_length\":12"), "chunked body: %s", r.body);
    resp_free(&r);

    /* same again, one byte per write, on the same connection */
    const char *req = "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      "A\r\n0123456789\r\n0\r\n\r\n";
    for (const char *p = req; *p; p++)
        cl_sendn(c, p, 1);
    rc = cl_response(c, &r, 0);
    CHECK(rc == 0 && has(&r, "\"body\":\"0123456789\"") && has(&r, "\"connection\":2}"),
          "byte-by-byte chunked: %s", r.body);
    resp_free(&r);
    cl_close(c);

    /* malformed chunk size */
    c = cl_open(port);
    rc = cl_roundtrip(c, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", &r);
    CHECK(rc == 0 && r.status == 400, "bad chunk -> 400, got %d", r.status);
    CHECK(peer_closed(c, 2000), "closed after bad chunk");
    resp_free(&r);
    cl_close(c);
}

static void test_expect_continue(int port)
{
    client *c = cl_open(port);
    resp r;
    cl_send(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    int rc = cl_response(c, &r, 0);
    CHECK(rc == 0 && r.status == 100, "100 Continue, got %d", r.status);
    resp_free(&r);
    cl_send(c, "hello");
    rc = cl_response(c, &r, 0);
    CHECK(rc == 0 && r.status == 200 && has(&r, "\"body\":\"hello\""), "body after 100: %s", r.body);
    resp_free(&r);

    /* chunked + expect */
    cl_send(c, "PUT /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-Continue\r\n\r\n");
    rc = cl_response(c, &r, 0);
    CHECK(rc == 0 && r.status == 100, "100 Continue (chunked), got %d", r.status);
    resp_free(&r);
    cl_send(c, "3\r\nabc\r\n0\r\n\r\n");
    rc = cl_response(c, &r, 0);
    CHECK(rc == 0 && has(&r, "\"body\":\"abc\""), "chunked body after 100: %s", r.body);
    resp_free(&r);
    cl_close(c);

    /* too large: 413 straight away, no 100 */
    c = cl_open(port);
    rc = cl_roundtrip(c,
                      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 67108865\r\n"
                      "Expect: 100-continue\r\n\r\n",
                      &r);
    CHECK(rc == 0 && r.status == 413, "413 instead of 100, got %d", r.status);
    resp_free(&r);
    cl_close(c);
}

static void test_limits(int port)
{
    resp r;
    client *c;
    int rc;

    /* malformed request line */
    c = cl_open(port);
    rc = cl_roundtrip(c, "GARBAGE\r\n\r\n", &r);
    CHECK(rc == 0 && r.status == 400, "malformed -> 400, got %d", r.status);
    CHECK(hdr(&r, "Connection") && strcmp(hdr(&r, "Connection"), "close") == 0, "400 closes");
    CHECK(peer_closed(c, 2000), "closed after 400");
    resp_free(&r);
    cl_close(c);

    /* bad header line, bad Content-Length, unsupported transfer coding */
    const char *bad[] = {
        "GET /json HTTP/1.1\r\nNo colon here\r\n\r\n",
        "GET /json HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
        "POST /json HTTP/1.1\r\nContent-Length: 12x\r\n\r\n",
        "POST /json HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "POST /json HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        "GET /json HTTP/2.0\r\n\r\n",
        "GET  /json HTTP/1.1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        c = cl_open(port);
        rc = cl_roundtrip(c, bad[i], &r);
        CHECK(rc == 0 && r.status == 400, "bad request %zu -> 400, got %d", i, r.status);
        resp_free(&r);
        cl_close(c);
    }

    /* 431 for > 64 KiB of headers; fine just below */
    size_t big = 70000;
    char *req = malloc(big + 256);
    strcpy(req, "GET /json HTTP/1.1\r\nHost: x\r\nX-Big: ");
    size_t l = strlen(req);
    memset(req + l, 'a', big);
    strcpy(req + l + big, "\r\n\r\n");
    c = cl_open(port);
    rc = cl_roundtrip(c, req, &r);
    CHECK(rc == 0 && r.status == 431, "431, got %d", r.status);
    resp_free(&r);
    cl_close(c);
    memset(req + l, 'a', 60000);
    strcpy(req + l + 60000, "\r\n\r\n");
    c = cl_open(port);
    rc = cl_roundtrip(c, req, &r);
    CHECK(rc == 0 && r.status == 200, "60 KB header accepted, got %d", r.status);
    resp_free(&r);
    cl_close(c);
    free(req);

    /* 413 for Content-Length and for chunked beyond 64 MiB */
    c = cl_open(port);
    rc = cl_roundtrip(c, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 67108865\r\n\r\n", &r);
    CHECK(rc == 0 && r.status == 413, "413 (CL), got %d", r.status);
    CHECK(peer_closed(c, 2000), "closed after 413");
    resp_free(&r);
    cl_close(c);
    c = cl_open(port);
    rc = cl_roundtrip(c, "POST /json HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4000001\r\n", &r);
    CHECK(rc == 0 && r.status == 413, "413 (chunked), got %d", r.status);
    resp_free(&r);
    cl_close(c);

    /* exactly 64 MiB is accepted */
    size_t max = 64u * 1024 * 1024;
    char *body = calloc(1, 1 << 20);
    c = cl_open(port);
    cl_send(c, "POST /status/201 HTTP/1.1\r\nHost: x\r\nContent-Length: 67108864\r\n\r\n");
    for (size_t sent = 0; sent < max; sent += 1 << 20)
        cl_sendn(c, body, 1 << 20);
    rc = cl_response(c, &r, 0);
    CHECK(rc == 0 && r.status == 201, "64 MiB body accepted, got %d", r.status);
    resp_free(&r);
    cl_close(c);
    free(body);

    /* 1 MiB body through /echo with every byte value */
    size_t n = 1 << 20;
    body = malloc(n);
    for (size_t i = 0; i < n; i++)
        body[i] = (char)(i & 0xff);
    c = cl_open(port);
    char head[256];
    snprintf(head, sizeof head, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n", n);
    cl_send(c, head);
    cl_sendn(c, body, n);
    rc = cl_response(c, &r, 0);
    CHECK(rc == 0 && r.status == 200 && has(&r, "\"body_length\":1048576"), "1 MiB echo");
    resp_free(&r);
    cl_close(c);
    free(body);
}

static void test_status(int port)
{
    resp r;
    int rc = get(port, "GET", "/status/404", NULL, &r);
    CHECK(rc == 0 && r.status == 404 && body_is(&r, "{\"status\":404}"), "status 404: %s", r.body);
    resp_free(&r);
    rc = get(port, "GET", "/status/418", NULL, &r);
    CHECK(rc == 0 && r.status == 418, "status 418");
    resp_free(&r);
    rc = get(port, "GET", "/status/500?x=1", NULL, &r);
    CHECK(rc == 0 && r.status == 500 && body_is(&r, "{\"status\":500}"), "status 500 with query");
    resp_free(&r);
    rc = get(port, "GET", "/status/abc", NULL, &r);
    CHECK(rc == 0 && r.status == 400, "status abc -> 400, got %d", r.status);
    resp_free(&r);

    /* 204 and 304: no body, no Content-Length, and the connection stays usable */
    client *c = cl_open(port);
    const char *codes[] = {"204", "304"};
    for (int i = 0; i < 2; i++) {
        char req[128];
        snprintf(req, sizeof req, "GET /status/%s HTTP/1.1\r\nHost: x\r\n\r\n", codes[i]);
        rc = cl_roundtrip(c, req, &r);
        CHECK(rc == 0 && r.status == atoi(codes[i]), "status %s", codes[i]);
        CHECK(hdr(&r, "Content-Length") == NULL, "no Content-Length on %s", codes[i]);
        resp_free(&r);
    }
    rc = cl_roundtrip(c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc == 0 && has(&r, "\"connection\":3}"), "connection usable after 204/304");
    resp_free(&r);
    cl_close(c);

    rc = get(port, "GET", "/nope", NULL, &r);
    CHECK(rc == 0 && r.status == 404 && body_is(&r, "{\"error\":\"not found\"}"), "404: %s", r.body);
    resp_free(&r);
}

static void test_delay_and_slow(int port)
{
    resp r;
    long long t0 = now_ms();
    int rc = get(port, "GET", "/delay/150", NULL, &r);
    long long dt = now_ms() - t0;
    CHECK(rc == 0 && r.status == 200 && body_is(&r, "{\"delayed\":150}"), "delay: %s", r.body);
    CHECK(dt >= 150 && dt < 5000, "delay took %lld ms", dt);
    resp_free(&r);

    t0 = now_ms();
    rc = get(port, "GET", "/slow-body/150", NULL, &r);
    dt = now_ms() - t0;
    CHECK(rc == 0 && r.status == 200 && r.body_len == 100, "slow-body len %zu", r.body_len);
    CHECK(r.body_len == 100 && r.body[0] == 'a' && r.body[26] == 'a' && r.body[99] == 'v',
          "slow-body content");
    CHECK(dt >= 150 && dt < 5000, "slow-body took %lld ms", dt);
    resp_free(&r);

    /* slow-body: the first half arrives before the pause */
    client *c = cl_open(port);
    cl_send(c, "GET /slow-body/400 HTTP/1.1\r\nHost: x\r\n\r\n");
    char line[1024];
    while (cl_line(c, line, sizeof line) > 0) {
    }
    char half[100];
    t0 = now_ms();
    size_t got = cl_read(c, half, 50);
    CHECK(got == 50 && now_ms() - t0 < 300, "first half early (%zu bytes)", got);
    got = cl_read(c, half + 50, 50);
    CHECK(got == 50 && now_ms() - t0 >= 350, "second half after the pause");
    cl_close(c);
}

static int check_pattern(const resp *r, size_t n)
{
    if (r->body_len != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)r->body[i] != (unsigned char)(i % 251))
            return 0;
    return 1;
}

static void test_bytes(int port)
{
    resp r;
    int rc = get(port, "GET", "/bytes/100000", NULL, &r);
    CHECK(rc == 0 && r.status == 200 && check_pattern(&r, 100000), "bytes 100000 (%zu)", r.body_len);
    CHECK(hdr(&r, "Content-Length") && strcmp(hdr(&r, "Content-Length"), "100000") == 0, "bytes CL");
    CHECK(hdr(&r, "Content-Type") && strcmp(hdr(&r, "Content-Type"), "application/octet-stream") == 0,
          "bytes type");
    resp_free(&r);

    rc = get(port, "GET", "/bytes/100000?chunked=1", NULL, &r);
    CHECK(rc == 0 && r.status == 200 && check_pattern(&r, 100000), "chunked bytes (%zu)", r.body_len);
    CHECK(hdr(&r, "Transfer-Encoding") && !hdr(&r, "Content-Length"), "chunked framing");
    resp_free(&r);

    rc = get(port, "GET", "/bytes/0", NULL, &r);
    CHECK(rc == 0 && r.status == 200 && r.body_len == 0, "bytes 0");
    resp_free(&r);
    rc = get(port, "GET", "/bytes/0?chunked=1", NULL, &r);
    CHECK(rc == 0 && r.status == 200 && r.body_len == 0, "chunked bytes 0");
    resp_free(&r);

    /* 5 MB on a keep-alive connection, then another request */
    client *c = cl_open(port);
    rc = cl_roundtrip(c, "GET /bytes/5000000 HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc == 0 && check_pattern(&r, 5000000), "bytes 5 MB");
    resp_free(&r);
    rc = cl_roundtrip(c, "GET /bytes/40000?chunked=1 HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc == 0 && check_pattern(&r, 40000), "chunked after plain on one connection");
    resp_free(&r);

    /* HEAD: same headers, no body; the connection stays in sync */
    rc = cl_roundtrip(c, "HEAD /bytes/1000 HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc == 0 && r.status == 200 && hdr(&r, "Content-Length") &&
              strcmp(hdr(&r, "Content-Length"), "1000") == 0,
          "HEAD bytes");
    resp_free(&r);
    rc = cl_roundtrip(c, "HEAD /bytes/1000?chunked=1 HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc == 0 && r.status == 200 && hdr(&r, "Transfer-Encoding"), "HEAD chunked bytes");
    resp_free(&r);
    rc = cl_roundtrip(c, "HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc == 0 && r.status == 200 && hdr(&r, "Content-Length") && atoi(hdr(&r, "Content-Length")) > 0,
          "HEAD echo");
    resp_free(&r);
    rc = cl_roundtrip(c, "GET /json HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc == 0 && r.status == 200 && has(&r, "\"courier\""), "GET after HEADs");
    CHECK(silent_for(c, 50), "no stray bytes after HEAD responses");
    resp_free(&r);
    cl_close(c);
}

static void test_broken(int port)
{
    resp r;
    /* close-mid-body: 100 of 1000 bytes, then EOF */
    client *c = cl_open(port);
    int rc = cl_roundtrip(c, "GET /close-mid-body HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc != 0 && r.status == 200, "close-mid-body is incomplete");
    CHECK(hdr(&r, "Content-Length") && strcmp(hdr(&r, "Content-Length"), "1000") == 0, "cmb CL");
    CHECK(check_pattern(&r, 100), "close-mid-body got %zu bytes", r.body_len);
    CHECK(c->eof, "close-mid-body ends with EOF");
    resp_free(&r);
    cl_close(c);

    /* reset: RST, no response */
    c = cl_open(port);
    cl_send(c, "GET /reset HTTP/1.1\r\nHost: x\r\n\r\n");
    char b[16];
    ssize_t n = recv(c->fd, b, sizeof b, 0);
    CHECK(n < 0 && errno == ECONNRESET, "reset gives ECONNRESET (n=%zd errno=%d)", n, errno);
    cl_close(c);

    /* hang: no answer; closing the client frees the server thread */
    c = cl_open(port);
    cl_send(c, "GET /hang HTTP/1.1\r\nHost: x\r\n\r\n");
    CHECK(silent_for(c, 300), "hang sends nothing");
    cl_close(c);
}

static void test_headers_redirect(int port)
{
    resp r;
    int rc = get(port, "GET", "/headers?X-One=1&X-Two=hello+world%21&Set-Cookie=a%3Db", NULL, &r);
    CHECK(rc == 0 && r.status == 200 && body_is(&r, "{}"), "headers status %d", r.status);
    CHECK(hdr(&r, "X-One") && strcmp(hdr(&r, "X-One"), "1") == 0, "X-One");
    CHECK(hdr(&r, "X-Two") && strcmp(hdr(&r, "X-Two"), "hello world!") == 0, "X-Two: %s",
          hdr(&r, "X-Two") ? hdr(&r, "X-Two") : "(none)");
    CHECK(hdr(&r, "Set-Cookie") && strcmp(hdr(&r, "Set-Cookie"), "a=b") == 0, "Set-Cookie");
    resp_free(&r);
    rc = get(port, "GET", "/headers?Content-Type=text%2Fplain", NULL, &r);
    CHECK(rc == 0 && hdr_count(&r, "Content-Type") == 1 &&
              strcmp(hdr(&r, "Content-Type"), "text/plain") == 0,
          "Content-Type override");
    resp_free(&r);
    rc = get(port, "GET", "/headers?X-Bad=a%0D%0AInjected:%201", NULL, &r);
    CHECK(rc == 0 && r.status == 400 && !hdr(&r, "Injected"), "CRLF value -> 400, got %d", r.status);
    resp_free(&r);
    rc = get(port, "GET", "/headers?X%0ABad=1", NULL, &r);
    CHECK(rc == 0 && r.status == 400, "CRLF name -> 400, got %d", r.status);
    resp_free(&r);

    rc = get(port, "GET", "/redirect?to=%2Fecho%3Fa%3D1", NULL, &r);
    CHECK(rc == 0 && r.status == 302 && hdr(&r, "Location") &&
              strcmp(hdr(&r, "Location"), "/echo?a=1") == 0,
          "redirect");
    resp_free(&r);
    rc = get(port, "GET", "/redirect?to=http%3A%2F%2Fexample.com%2Fx&status=307", NULL, &r);
    CHECK(rc == 0 && r.status == 307 && hdr(&r, "Location") &&
              strcmp(hdr(&r, "Location"), "http://example.com/x") == 0,
          "redirect 307");
    resp_free(&r);
    rc = get(port, "GET", "/redirect", NULL, &r);
    CHECK(rc == 0 && r.status == 400, "redirect without to -> 400");
    resp_free(&r);
}

static void test_etag_cache(cts_server *s, int port)
{
    resp r;
    int rc = get(port, "GET", "/etag/abc", NULL, &r);
    CHECK(rc == 0 && r.status == 200 && body_is(&r, "{\"etag\":\"abc\"}"), "etag 200: %s", r.body);
    CHECK(hdr(&r, "ETag") && strcmp(hdr(&r, "ETag"), "\"abc\"") == 0, "ETag header");
    CHECK(hdr(&r, "Cache-Control") && strcmp(hdr(&r, "Cache-Control"), "max-age=0") == 0, "etag CC");
    resp_free(&r);
    rc = get(port, "GET", "/etag/abc", "If-None-Match: \"xyz\", \"abc\"\r\n", &r);
    CHECK(rc == 0 && r.status == 304 && r.body_len == 0 && hdr(&r, "ETag"), "etag 304");
    resp_free(&r);
    rc = get(port, "GET", "/etag/abc", "If-None-Match: \"abcd\"\r\n", &r);
    CHECK(rc == 0 && r.status == 200, "etag mismatch 200");
    resp_free(&r);

    cts_server_reset_counts(s);
    rc = get(port, "GET", "/cache?max_age=60&vary=X-Lang", "X-Lang: fr\r\n", &r);
    CHECK(rc == 0 && r.status == 200 && body_is(&r, "{\"n\":1,\"vary\":\"fr\"}"), "cache 1: %s", r.body);
    CHECK(hdr(&r, "Cache-Control") && strcmp(hdr(&r, "Cache-Control"), "max-age=60") == 0, "cache CC");
    CHECK(hdr(&r, "Vary") && strcmp(hdr(&r, "Vary"), "X-Lang") == 0, "cache Vary");
    CHECK(!hdr(&r, "ETag") && !hdr(&r, "Last-Modified"), "cache: no unasked headers");
    resp_free(&r);
    rc = get(port, "GET", "/cache?etag=v1", NULL, &r);
    CHECK(rc == 0 && r.status == 200 && body_is(&r, "{\"n\":2,\"vary\":\"\"}"), "cache 2: %s", r.body);
    CHECK(hdr(&r, "ETag") && strcmp(hdr(&r, "ETag"), "\"v1\"") == 0, "cache ETag");
    CHECK(!hdr(&r, "Cache-Control"), "cache: no Cache-Control unless asked");
    resp_free(&r);
    rc = get(port, "GET", "/cache?etag=v1&max_age=5", "If-None-Match: \"v1\"\r\n", &r);
    CHECK(rc == 0 && r.status == 304 && hdr(&r, "ETag") && hdr(&r, "Cache-Control"), "cache 304 etag");
    resp_free(&r);
    const char *lm = "/cache?last_modified=Wed,%2021%20Oct%202015%2007:28:00%20GMT";
    rc = get(port, "GET", lm, "If-Modified-Since: Wed, 21 Oct 2015 07:28:00 GMT\r\n", &r);
    CHECK(rc == 0 && r.status == 304, "cache 304 last-modified, got %d", r.status);
    CHECK(hdr(&r, "Last-Modified") && strcmp(hdr(&r, "Last-Modified"), "Wed, 21 Oct 2015 07:28:00 GMT") == 0,
          "Last-Modified header");
    resp_free(&r);
    rc = get(port, "GET", lm, "If-Modified-Since: Thu, 22 Oct 2015 07:28:00 GMT\r\n", &r);
    CHECK(rc == 0 && r.status == 200, "cache IMS mismatch 200");
    resp_free(&r);
    rc = get(port, "GET", "/cache?body=hello+there", NULL, &r);
    CHECK(rc == 0 && r.status == 200 && body_is(&r, "hello there"), "cache body: %s", r.body);
    resp_free(&r);
    CHECK(cts_server_path_count(s, "/cache") == 6, "path count /cache = %ld",
          cts_server_path_count(s, "/cache"));
}

static void test_count_json(cts_server *s, int port)
{
    resp r;
    cts_server_reset_counts(s);
    CHECK(cts_server_request_count(s) == 0 && cts_server_connection_count(s) == 0, "reset");
    int rc = get(port, "GET", "/count", NULL, &r);
    CHECK(rc == 0 && body_is(&r, "{\"requests\":1,\"connections\":1}"), "count: %s", r.body);
    resp_free(&r);

    client *c = cl_open(port);
    cl_roundtrip(c, "GET /echo?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    resp_free(&r);
    cl_roundtrip(c, "GET /echo?y=2 HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    resp_free(&r);
    cl_roundtrip(c, "GET /echo/sub HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    resp_free(&r);
    rc = cl_roundtrip(c, "GET /count HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc == 0 && body_is(&r, "{\"requests\":5,\"connections\":2}"), "count 2: %s", r.body);
    resp_free(&r);
    cl_close(c);
    CHECK(cts_server_path_count(s, "/echo") == 2, "path count /echo");
    CHECK(cts_server_path_count(s, "/echo/sub") == 1, "path count /echo/sub");
    CHECK(cts_server_path_count(s, "/count") == 2, "path count /count");
    CHECK(cts_server_path_count(s, "/never") == 0 && cts_server_path_count(s, NULL) == 0, "unknown path");
    CHECK(cts_server_request_count(s) == 5, "request count %ld", cts_server_request_count(s));

    rc = get(port, "GET", "/json", NULL, &r);
    CHECK(rc == 0 && r.status == 200 &&
              body_is(&r, "{\"code\":200,\"message\":\"ok\",\"data\":{\"id\":1,\"name\":\"courier\","
                          "\"tags\":[\"a\",\"b\"],\"items\":[{\"id\":1,\"title\":\"one\"},"
                          "{\"id\":2,\"title\":\"two\"}]}}"),
          "json: %s", r.body);
    resp_free(&r);
}

static void test_concurrency(cts_server *s, int port)
{
    enum { N = 64 };
    client *cs[N];
    resp r;
    long conns = cts_server_connection_count(s);
    for (int i = 0; i < N; i++)
        cs[i] = cl_open(port);
    for (int i = 0; i < N; i++)
        cl_send(cs[i], "GET /delay/100 HTTP/1.1\r\nHost: x\r\n\r\n");
    long long t0 = now_ms();
    int ok = 0;
    for (int i = 0; i < N; i++) {
        if (cl_response(cs[i], &r, 0) == 0 && r.status == 200)
            ok++;
        resp_free(&r);
    }
    long long dt = now_ms() - t0;
    CHECK(ok == N, "%d of %d concurrent responses", ok, N);
    CHECK(dt < 2000, "concurrent delays overlapped (%lld ms)", dt);
    ok = 0;
    for (int i = 0; i < N; i++) {
        if (cl_roundtrip(cs[i], "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 0 &&
            has(&r, "\"connection\":2}"))
            ok++;
        resp_free(&r);
        cl_close(cs[i]);
    }
    CHECK(ok == N, "%d of %d second requests", ok, N);
    CHECK(cts_server_connection_count(s) == conns + N, "connections +%d", N);
}

/* cts_server_in_flight / max_in_flight: three parked /delay requests count three at once; the
   counts fall back as they are answered, and a reset starts the maximum from what is in flight. */
static void test_in_flight(cts_server *s, int port)
{
    enum { N = 3 };
    client *cs[N];
    resp r;
    /* The last test's answers may still be leaving the server: a request counts until its response
       has been sent, which the client can see first. */
    long long t0 = now_ms();
    while (cts_server_in_flight(s) > 0 && now_ms() - t0 < 5000)
        usleep(1000);
    cts_server_reset_counts(s);
    CHECK(cts_server_in_flight(s) == 0 && cts_server_max_in_flight(s) == 0, "nothing in flight after a reset");
    for (int i = 0; i < N; i++)
        cs[i] = cl_open(port);
    for (int i = 0; i < N; i++)
        cl_send(cs[i], "GET /delay/300 HTTP/1.1\r\nHost: x\r\n\r\n");
    t0 = now_ms();
    while (cts_server_in_flight(s) < N && now_ms() - t0 < 5000)
        usleep(1000);
    CHECK(cts_server_in_flight(s) == N, "in flight %ld", cts_server_in_flight(s));
    for (int i = 0; i < N; i++) {
        CHECK(cl_response(cs[i], &r, 0) == 0 && r.status == 200, "delayed response %d", i);
        resp_free(&r);
        cl_close(cs[i]);
    }
    t0 = now_ms();
    while (cts_server_in_flight(s) > 0 && now_ms() - t0 < 5000)
        usleep(1000);
    CHECK(cts_server_in_flight(s) == 0, "in flight after the answers %ld", cts_server_in_flight(s));
    CHECK(cts_server_max_in_flight(s) == N, "max in flight %ld", cts_server_max_in_flight(s));
    cts_server_reset_counts(s);
    CHECK(cts_server_max_in_flight(s) == 0, "max reset");
}

static void test_many_sequential(int port)
{
    enum { N = 3000 };
    client *c = cl_open(port);
    resp r;
    int ok = 0;
    long long t0 = now_ms();
    for (int i = 0; i < N; i++) {
        if (cl_roundtrip(c, "GET /json HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 0 && r.status == 200)
            ok++;
        resp_free(&r);
    }
    CHECK(ok == N, "%d of %d sequential requests", ok, N);
    int rc = cl_roundtrip(c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc == 0 && has(&r, "\"connection\":3001}"), "request number 3001: %s", r.body);
    resp_free(&r);
    cl_close(c);
    printf("  (%d sequential keep-alive requests in %lld ms)\n", N, now_ms() - t0);

    /* many short connections */
    ok = 0;
    for (int i = 0; i < 300; i++) {
        if (get(port, "GET", "/json", NULL, &r) == 0 && r.status == 200)
            ok++;
        resp_free(&r);
    }
    CHECK(ok == 300, "%d of 300 short connections", ok);
}

static void test_two_servers(cts_server *a)
{
    cts_server *b = NULL;
    int rc = cts_server_start(&b, NULL, 0);
    CHECK(rc == 0 && b, "second server starts (%d)", rc);
    if (!b)
        return;
    CHECK(cts_server_port(b) != cts_server_port(a), "different ports");
    cts_server_reset_counts(a);
    resp r;
    get(cts_server_port(b), "GET", "/echo", NULL, &r);
    resp_free(&r);
    CHECK(cts_server_request_count(b) == 1 && cts_server_request_count(a) == 0, "independent counts");
    CHECK(cts_server_path_count(b, "/echo") == 1 && cts_server_path_count(a, "/echo") == 0,
          "independent path counts");

    /* binding an occupied port fails with -EADDRINUSE */
    cts_server *d = NULL;
    rc = cts_server_start(&d, "127.0.0.1", cts_server_port(b));
    CHECK(rc == -EADDRINUSE && d == NULL, "port in use -> %d", rc);
    rc = cts_server_start(&d, "not an address", 0);
    CHECK(rc < 0 && d == NULL, "bad host -> %d", rc);
    cts_server_stop(b);
    cts_server_stop(NULL);
}

static void test_stop_while_parked(void)
{
    cts_server *s = NULL;
    int rc = cts_server_start(&s, "127.0.0.1", 0);
    CHECK(rc == 0, "start for stop test");
    if (rc)
        return;
    int port = cts_server_port(s);
    client *hang = cl_open(port), *delay = cl_open(port), *idle = cl_open(port),
           *slow = cl_open(port), *upload = cl_open(port);
    cl_send(hang, "GET /hang HTTP/1.1\r\nHost: x\r\n\r\n");
    cl_send(delay, "GET /delay/60000 HTTP/1.1\r\nHost: x\r\n\r\n");
    cl_send(slow, "GET /slow-body/60000 HTTP/1.1\r\nHost: x\r\n\r\n");
    resp r;
    rc = cl_roundtrip(idle, "GET /json HTTP/1.1\r\nHost: x\r\n\r\n", &r);
    CHECK(rc == 0 && r.status == 200, "idle connection's first request");
    resp_free(&r);
    cl_send(upload, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\npartial");
    /* large response the client never reads: the server blocks in send */
    client *stuck = cl_open(port);
    cl_send(stuck, "GET /bytes/100000000 HTTP/1.1\r\nHost: x\r\n\r\n");

    long long t0 = now_ms();
    while (cts_server_request_count(s) < 5 && now_ms() - t0 < 5000)
        usleep(1000);
    CHECK(cts_server_request_count(s) == 5, "parked requests parsed (%ld)", cts_server_request_count(s));
    usleep(100 * 1000);

    t0 = now_ms();
    cts_server_stop(s);
    long long dt = now_ms() - t0;
    CHECK(dt < 1000, "stop took %lld ms", dt);

    CHECK(peer_closed(hang, 2000), "hang connection closed by stop");
    CHECK(peer_closed(delay, 2000), "delay connection closed by stop");
    CHECK(peer_closed(idle, 2000), "idle connection closed by stop");
    CHECK(peer_closed(upload, 2000), "upload connection closed by stop");
    /* slow: headers and 50 bytes arrived, then the close */
    char buf[4096];
    size_t total = 0;
    ssize_t n;
    while ((n = recv(slow->fd, buf, sizeof buf, 0)) > 0)
        total += (size_t)n;
    CHECK(total > 50 && (n == 0 || errno == ECONNRESET), "slow-body cut by stop (%zu bytes)", total);
    cl_close(hang);
    cl_close(delay);
    cl_close(idle);
    cl_close(slow);
    cl_close(upload);
    cl_close(stuck);

    /* the port is free again */
    cts_server *again = NULL;
    rc = cts_server_start(&again, "127.0.0.1", port);
    CHECK(rc == 0, "restart on the same port (%d)", rc);
    cts_server_stop(again);
}

/* ------------------------------------------------------------------------ */
/* /ws/echo                                                                 */

/* Sends one client frame, masked with a fixed key, its length in the shortest form. */
static int ws_send(client *c, int fin, int opcode, const void *data, size_t n, int masked)
{
    unsigned char *f = malloc(n + 14);
    size_t hl = 2;
    f[0] = (unsigned char)((fin ? 0x80 : 0) | opcode);
    if (n < 126) {
        f[1] = (unsigned char)n;
    } else if (n <= 0xFFFF) {
        f[1] = 126;
        f[2] = (unsigned char)(n >> 8);
        f[3] = (unsigned char)n;
        hl = 4;
    } else {
        f[1] = 127;
        for (int i = 0; i < 8; i++)
            f[2 + i] = (unsigned char)((unsigned long long)n >> (56 - 8 * i));
        hl = 10;
    }
    static const unsigned char key[4] = {0x37, 0xfa, 0x21, 0x3d};
    if (masked) {
        f[1] |= 0x80;
        memcpy(f + hl, key, 4);
        hl += 4;
    }
    for (size_t i = 0; i < n; i++)
        f[hl + i] = (unsigned char)(((const unsigned char *)data)[i] ^ (masked ? key[i & 3] : 0));
    int r = cl_sendn(c, f, hl + n);
    free(f);
    return r;
}

typedef struct {
    int fin, opcode, masked;
    size_t len, len_bytes; /* payload length, and the bytes its length field took (0, 2 or 8) */
    unsigned char *data;   /* malloc'd (len + 1 bytes, NUL-terminated) */
} ws_frame;

/* Reads one server frame. 0, or -1 on EOF / a short read. */
static int ws_read(client *c, ws_frame *f)
{
    unsigned char h[10];
    memset(f, 0, sizeof *f);
    if (cl_read(c, (char *)h, 2) != 2)
        return -1;
    f->fin = h[0] >> 7;
    f->opcode = h[0] & 0x0F;
    f->masked = h[1] >> 7;
    f->len = h[1] & 0x7F;
    if (f->len == 126) {
        if (cl_read(c, (char *)h, 2) != 2)
            return -1;
        f->len = ((size_t)h[0] << 8) | h[1];
        f->len_bytes = 2;
    } else if (f->len == 127) {
        if (cl_read(c, (char *)h, 8) != 8)
            return -1;
        f->len = 0;
        for (int i = 0; i < 8; i++)
            f->len = (f->len << 8) | h[i];
        f->len_bytes = 8;
    }
    f->data = malloc(f->len + 1);
    if (cl_read(c, (char *)f->data, f->len) != f->len)
        return -1;
    f->data[f->len] = 0;
    return 0;
}

/* Opens /ws/echo: the 101 and its accept checked. NULL when the handshake failed. */
static client *ws_open(int port)
{
    client *c = cl_open(port);
    resp r;
    /* RFC 6455 1.3's sample key and accept */
    int rc = cl_roundtrip(c, "GET /ws/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                             "Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                             "Sec-WebSocket-Version: 13\r\n\r\n", &r);
    const char *accept = hdr(&r, "Sec-WebSocket-Accept");
    int ok = rc == 0 && r.status == 101 && accept && strcmp(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") == 0 &&
             hdr(&r, "Upgrade") && strcasecmp(hdr(&r, "Upgrade"), "websocket") == 0;
    CHECK(ok, "ws handshake: status %d accept %s", r.status, accept ? accept : "(none)");
    resp_free(&r);
    if (!ok) {
        cl_close(c);
        return NULL;
    }
    return c;
}

static void test_ws_echo(int port)
{
    resp r;
    /* not a handshake: a plain GET, and a wrong version */
    get(port, "GET", "/ws/echo", NULL, &r);
    CHECK(r.status == 400, "ws plain GET: %d", r.status);
    resp_free(&r);
    get(port, "GET", "/ws/echo",
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 8\r\n", &r);
    CHECK(r.status == 426 && hdr(&r, "Sec-WebSocket-Version"), "ws version 8: %d", r.status);
    resp_free(&r);

    client *c = ws_open(port);
    if (!c)
        return;
    ws_frame f;
    /* a text message (7-bit length), a binary one of 300 bytes (16-bit), one of 70000 (64-bit) */
    CHECK(ws_send(c, 1, 0x1, "hello", 5, 1) == 0 && ws_read(c, &f) == 0 && f.fin && f.opcode == 1 && !f.masked &&
          f.len == 5 && memcmp(f.data, "hello", 5) == 0, "ws text echo");
    free(f.data);
    size_t sizes[2] = {300, 70000};
    for (int k = 0; k < 2; k++) {
        unsigned char *big = malloc(sizes[k]);
        for (size_t i = 0; i < sizes[k]; i++)
            big[i] = (unsigned char)(i % 251);
        int sent = ws_send(c, 1, 0x2, big, sizes[k], 1);
        CHECK(sent == 0 && ws_read(c, &f) == 0 && f.opcode == 2 && f.len == sizes[k] &&
              f.len_bytes == (k == 0 ? 2u : 8u) && memcmp(f.data, big, sizes[k]) == 0,
              "ws binary echo of %zu bytes (length field %zu bytes)", sizes[k], f.len_bytes);
        free(f.data);
        free(big);
    }
    /* a fragmented message with a ping between its frames: echoed frame by frame, the pong first */
    ws_send(c, 0, 0x1, "frag", 4, 1);
    ws_send(c, 1, 0x9, "p!", 2, 1);
    ws_send(c, 0, 0x0, "men", 3, 1);
    ws_send(c, 1, 0x0, "ted", 3, 1);
    const int want_op[4] = {1, 0xA, 0, 0}, want_fin[4] = {0, 1, 0, 1};
    const char *want[4] = {"frag", "p!", "men", "ted"};
    for (int i = 0; i < 4; i++) {
        int rc = ws_read(c, &f);
        CHECK(rc == 0 && f.opcode == want_op[i] && f.fin == want_fin[i] && strcmp((char *)f.data, want[i]) == 0,
              "ws fragment %d: opcode %d fin %d '%s'", i, f.opcode, f.fin, f.data ? (char *)f.data : "");
        free(f.data);
    }
    /* close: the code comes back, then the server closes */
    const unsigned char bye[5] = {0x03, 0xE8, 'b', 'y', 'e'};
    CHECK(ws_send(c, 1, 0x8, bye, sizeof bye, 1) == 0 && ws_read(c, &f) == 0 && f.opcode == 8 && f.len == 2 &&
          f.data[0] == 0x03 && f.data[1] == 0xE8, "ws close 1000 echoed");
    free(f.data);
    CHECK(peer_closed(c, 5000), "ws server closes after the close");
    cl_close(c);

    /* protocol errors: an unmasked frame, a continuation with no message, a ping over 125 bytes */
    for (int k = 0; k < 3; k++) {
        c = ws_open(port);
        if (!c)
            return;
        char pad[126] = {0};
        if (k == 0)
            ws_send(c, 1, 0x1, "x", 1, 0);
        else if (k == 1)
            ws_send(c, 1, 0x0, "x", 1, 1);
        else
            ws_send(c, 1, 0x9, pad, sizeof pad, 1);
        int rc = ws_read(c, &f);
        CHECK(rc == 0 && f.opcode == 8 && f.len == 2 && f.data[0] == 0x03 && f.data[1] == 0xEA,
              "ws protocol error %d: close 1002", k);
        free(f.data);
        CHECK(peer_closed(c, 5000), "ws server closes after a protocol error %d", k);
        cl_close(c);
    }

    /* a frame sent in the same write as the handshake is not lost */
    c = cl_open(port);
    char req[512];
    int n = snprintf(req, sizeof req, "GET /ws/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                                      "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                      "Sec-WebSocket-Version: 13\r\n\r\n");
    unsigned char frame[7] = {0x81, 0x81, 0, 0, 0, 0, 'z'}; /* masked with a zero key */
    memcpy(req + n, frame, sizeof frame);
    cl_sendn(c, req, (size_t)n + sizeof frame);
    CHECK(cl_response(c, &r, 0) == 0 && r.status == 101, "ws pipelined handshake: %d", r.status);
    resp_free(&r);
    CHECK(ws_read(c, &f) == 0 && f.opcode == 1 && f.len == 1 && f.data[0] == 'z', "ws frame behind the handshake");
    free(f.data);
    cl_close(c);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    cts_server *s = NULL;
    int rc = cts_server_start(&s, NULL, 0);
    if (rc != 0) {
        fprintf(stderr, "cannot start server: %s\n", strerror(-rc));
        return 1;
    }
    int port = cts_server_port(s);
    CHECK(port > 0, "port %d", port);

    test_echo(port);
    test_keepalive_and_pipelining(s, port);
    test_chunked_request(port);
    test_expect_continue(port);
    test_limits(port);
    test_status(port);
    test_delay_and_slow(port);
    test_bytes(port);
    test_broken(port);
    test_headers_redirect(port);
    test_etag_cache(s, port);
    test_count_json(s, port);
    test_concurrency(s, port);
    test_in_flight(s, port);
    test_many_sequential(port);
    test_ws_echo(port);
    test_two_servers(s);
    cts_server_stop(s);
    test_stop_while_parked();

    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed ? 1 : 0;
}
