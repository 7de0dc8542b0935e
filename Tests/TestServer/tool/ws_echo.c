/*
 * courier-ws-echo — a lean WebSocket (RFC 6455) echo peer for benchmarks (Linux: epoll).
 *
 *   courier-ws-echo [--port N] [--stdin-eof]
 *
 * Same start-up contract as courier-test-server: listens on 127.0.0.1 port N (default 0 = a free
 * port), prints the port and a newline on stdout, then serves until SIGTERM/SIGINT or, with
 * --stdin-eof, until stdin reaches EOF. Any path is accepted for the upgrade.
 *
 * Why it exists: the test server's /ws/echo runs a thread per connection that parks in poll() after
 * every message, so with 32 connections on 2 cores each round trip costs the server about as much
 * CPU as the client under test (docs/design/ws-echo-peer.md); a benchmark of clients then measures
 * the server as much as the clients. This peer is one thread over epoll (level-triggered): per
 * message one recv and one send, a context switch only when every connection is idle, and the
 * unmasking done while copying into the reply. Both clients of a benchmark meet this same peer.
 *
 * What it answers (what benchmarks send): the opening handshake (GET, Upgrade: websocket,
 * Connection: upgrade, Sec-WebSocket-Version: 13, a 24-character key; else 400 and close); then
 * every data frame back as it came (opcode and FIN kept, unmasked), ping answered by pong, pong
 * ignored, close answered by close (the peer's code back) and the connection closed; a frame that
 * breaks the protocol (unmasked, reserved bits or opcodes, a bad control frame or continuation)
 * fails the connection with close 1002, a frame over 16 MiB with 1009. No extensions (no
 * permessage-deflate) and no subprotocol are ever agreed. Not a test server: the tests use
 * courier-test-server's /ws/echo.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define HEAD_MAX 8192                 /* the handshake request, at most */
#define FRAME_MAX (16u * 1024 * 1024) /* a frame's payload, at most (else close 1009) */
#define READ_CHUNK 65536              /* one recv, at most */

typedef struct {
    unsigned char *p;
    size_t len, cap, off; /* off: bytes already consumed (in) or sent (out) */
} buf;

typedef struct conn {
    struct conn *prev, *next; /* every open connection, to free them at exit */
    int fd;
    int open;      /* the handshake is done */
    int closing;   /* close once `out` is sent */
    int writing;   /* waiting for EPOLLOUT (reads paused) */
    int fragmented; /* inside a fragmented data message */
    buf in, out;
} conn;

static int g_epoll = -1; /* the one epoll instance (one thread) */
static conn *g_conns;    /* the open connections */

static int buf_reserve(buf *b, size_t more)
{
    if (b->off && b->off == b->len) /* all consumed: start over */
        b->off = b->len = 0;
    if (b->len + more <= b->cap)
        return 0;
    if (b->off) { /* slide what is left to the front first */
        memmove(b->p, b->p + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
        if (b->len + more <= b->cap)
            return 0;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static void conn_free(conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        g_conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    epoll_ctl(g_epoll, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->in.p);
    free(c->out.p);
    free(c);
}

/* Appends an unmasked frame's header for `n` payload bytes to `out` (room was reserved). */
static void put_head(buf *out, int fin, int opcode, size_t n)
{
    unsigned char *h = out->p + out->len;
    h[0] = (unsigned char)((fin ? 0x80 : 0) | opcode);
    if (n < 126) {
        h[1] = (unsigned char)n;
        out->len += 2;
    } else if (n <= 0xFFFF) {
        h[1] = 126;
        h[2] = (unsigned char)(n >> 8);
        h[3] = (unsigned char)n;
        out->len += 4;
    } else {
        h[1] = 127;
        for (int i = 0; i < 8; i++)
            h[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
        out->len += 10;
    }
}

/* Appends a frame whose payload is `src` unmasked with `mask` (NULL: copied as it is). */
static int put_frame(buf *out, int fin, int opcode, const unsigned char *src, size_t n, const unsigned char *mask)
{
    if (buf_reserve(out, n + 10))
        return -1;
    put_head(out, fin, opcode, n);
    unsigned char *dst = out->p + out->len;
    size_t i = 0;
    if (mask) {
        uint32_t m4;
        memcpy(&m4, mask, 4);
        uint64_t m8 = ((uint64_t)m4 << 32) | m4;
        for (; i + 8 <= n; i += 8) { /* the mask repeats every 4 bytes: 8 at a time */
            uint64_t w;
            memcpy(&w, src + i, 8);
            w ^= m8;
            memcpy(dst + i, &w, 8);
        }
        for (; i < n; i++)
            dst[i] = src[i] ^ mask[i & 3];
    } else {
        memcpy(dst, src, n);
    }
    out->len += n;
    return 0;
}

/* Sends what `out` holds; on a full socket waits for EPOLLOUT with reads paused. 0, or -1 to drop. */
static int flush(conn *c)
{
    while (c->out.off < c->out.len) {
        ssize_t w = send(c->fd, c->out.p + c->out.off, c->out.len - c->out.off, MSG_NOSIGNAL);
        if (w > 0) {
            c->out.off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!c->writing) {
                struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
                if (epoll_ctl(g_epoll, EPOLL_CTL_MOD, c->fd, &ev))
                    return -1;
                c->writing = 1;
            }
            return 0;
        }
        return -1;
    }
    c->out.off = c->out.len = 0;
    if (c->closing) {
        shutdown(c->fd, SHUT_WR);
        return -1;
    }
    if (c->writing) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(g_epoll, EPOLL_CTL_MOD, c->fd, &ev))
            return -1;
        c->writing = 0;
    }
    return 0;
}

static int fail(conn *c, int code)
{
    unsigned char b[2] = {(unsigned char)(code >> 8), (unsigned char)code};
    c->closing = 1;
    return put_frame(&c->out, 1, 0x8, b, 2, NULL);
}

/* The value of header `name` in the NUL-terminated head, copied into `val`; 1 if found. */
static int header(const char *head, const char *name, char *val, size_t size)
{
    size_t nl = strlen(name);
    for (const char *l = strstr(head, "\r\n"); l && l[2] != '\r'; l = strstr(l + 2, "\r\n")) {
        const char *s = l + 2;
        if (strncasecmp(s, name, nl) != 0 || s[nl] != ':')
            continue;
        s += nl + 1;
        while (*s == ' ' || *s == '\t')
            s++;
        const char *e = strstr(s, "\r\n");
        while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        size_t n = (size_t)(e - s);
        if (n >= size)
            return 0;
        memcpy(val, s, n);
        val[n] = 0;
        return 1;
    }
    return 0;
}

/* Whether the comma-separated list `v` has `token` (any case). */
static int has_token(const char *v, const char *token)
{
    size_t n = strlen(token);
    for (const char *s = v; *s;) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        const char *e = s;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if ((size_t)(t - s) == n && strncasecmp(s, token, n) == 0)
            return 1;
        s = e;
    }
    return 0;
}

/* The opening handshake, once the whole head is in. 0, or -1 when the answer closes. */
static int handshake(conn *c, size_t head_len)
{
    char head[HEAD_MAX + 1], v[256], key[64];
    memcpy(head, c->in.p + c->in.off, head_len);
    head[head_len] = 0;
    c->in.off += head_len;
    int ok = strncmp(head, "GET ", 4) == 0 && header(head, "Upgrade", v, sizeof v) && has_token(v, "websocket") &&
             header(head, "Connection", v, sizeof v) && has_token(v, "upgrade") &&
             header(head, "Sec-WebSocket-Version", v, sizeof v) && strcmp(v, "13") == 0 &&
             header(head, "Sec-WebSocket-Key", key, sizeof key) && strlen(key) == 24;
    const char *bad = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    if (!ok) {
        if (buf_reserve(&c->out, strlen(bad)))
            return -1;
        memcpy(c->out.p + c->out.len, bad, strlen(bad));
        c->out.len += strlen(bad);
        c->closing = 1; /* sent, then closed */
        return 0;
    }
    char cat[128];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    int cn = snprintf(cat, sizeof cat, "%s%s", key, WS_GUID);
    if (!EVP_Digest(cat, (size_t)cn, md, &mdlen, EVP_sha1(), NULL))
        return -1;
    unsigned char accept[64];
    EVP_EncodeBlock(accept, md, (int)mdlen);
    char ans[256];
    int an = snprintf(ans, sizeof ans,
                      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                      "Sec-WebSocket-Accept: %s\r\n\r\n", (const char *)accept);
    if (buf_reserve(&c->out, (size_t)an))
        return -1;
    memcpy(c->out.p + c->out.len, ans, (size_t)an);
    c->out.len += (size_t)an;
    c->open = 1;
    return 0;
}

/* Answers every whole frame `in` holds. 0, or -1 on memory failure. */
static int frames(conn *c)
{
    while (!c->closing) {
        const unsigned char *h = c->in.p + c->in.off;
        size_t avail = c->in.len - c->in.off;
        if (avail < 2)
            return 0;
        int fin = h[0] & 0x80, opcode = h[0] & 0x0F, masked = h[1] & 0x80;
        uint64_t n = h[1] & 0x7F;
        size_t hl = 2;
        if (n == 126) {
            if (avail < 4)
                return 0;
            n = ((uint64_t)h[2] << 8) | h[3];
            hl = 4;
        } else if (n == 127) {
            if (avail < 10)
                return 0;
            n = 0;
            for (int i = 0; i < 8; i++)
                n = (n << 8) | h[2 + i];
            hl = 10;
        }
        int control = opcode & 0x8;
        if ((h[0] & 0x70) || !masked || (opcode > 0x2 && opcode < 0x8) || opcode > 0xA ||
            (control && (!fin || n > 125)) || (opcode == 0 && !c->fragmented) ||
            (opcode && !control && c->fragmented))
            return fail(c, 1002);
        if (n > FRAME_MAX)
            return fail(c, 1009);
        if (avail < hl + 4 + n)
            return 0; /* the rest has not come yet */
        const unsigned char *mask = h + hl, *payload = h + hl + 4;
        c->in.off += hl + 4 + (size_t)n;
        if (opcode == 0x8) {
            if (n == 1)
                return fail(c, 1002);
            c->closing = 1;
            return put_frame(&c->out, 1, 0x8, payload, n >= 2 ? 2 : 0, mask); /* the code back */
        }
        if (opcode == 0xA)
            continue;
        if (!control)
            c->fragmented = !fin;
        if (put_frame(&c->out, opcode == 0x9 ? 1 : fin, opcode == 0x9 ? 0xA : opcode, payload, (size_t)n, mask))
            return -1;
    }
    return 0;
}

/* The connection is readable: one recv (level-triggered: more is reported again), then answers. */
static void on_readable(conn *c)
{
    if (buf_reserve(&c->in, READ_CHUNK)) {
        conn_free(c);
        return;
    }
    ssize_t r = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, 0);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (r <= 0) {
        conn_free(c);
        return;
    }
    c->in.len += (size_t)r;
    if (!c->open) {
        const unsigned char *s = c->in.p + c->in.off;
        size_t avail = c->in.len - c->in.off;
        const unsigned char *end = memmem(s, avail, "\r\n\r\n", 4);
        if (!end) {
            if (avail > HEAD_MAX) {
                conn_free(c);
            }
            return;
        }
        if ((size_t)(end + 4 - s) > HEAD_MAX || handshake(c, (size_t)(end + 4 - s))) {
            conn_free(c);
            return;
        }
    }
    if ((c->open && frames(c)) || flush(c))
        conn_free(c);
}

static void usage(void)
{
    fprintf(stderr, "usage: courier-ws-echo [--port N] [--stdin-eof]\n");
}

int main(int argc, char **argv)
{
    int port = 0, stdin_eof = 0, one = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*argv[i] == '\0' || *end || v < 0 || v > 65535) {
                usage();
                return 2;
            }
            port = (int)v;
        } else if (strcmp(argv[i], "--stdin-eof") == 0) {
            stdin_eof = 1;
        } else {
            usage();
            return 2;
        }
    }
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 512) ||
        getsockname(lfd, (struct sockaddr *)&a, &al)) {
        perror("courier-ws-echo: listen");
        return 1;
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    int sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
    g_epoll = epoll_create1(EPOLL_CLOEXEC);
    /* the listener and the two ways to stop are told apart by these tags (a conn is a pointer) */
    static char tag_listen, tag_signal, tag_stdin;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &tag_listen};
    if (sfd < 0 || g_epoll < 0 || epoll_ctl(g_epoll, EPOLL_CTL_ADD, lfd, &ev)) {
        perror("courier-ws-echo: epoll");
        return 1;
    }
    ev.data.ptr = &tag_signal;
    epoll_ctl(g_epoll, EPOLL_CTL_ADD, sfd, &ev);
    ev.data.ptr = &tag_stdin;
    if (stdin_eof && epoll_ctl(g_epoll, EPOLL_CTL_ADD, STDIN_FILENO, &ev)) {
        perror("courier-ws-echo: stdin");
        return 1;
    }
    printf("%d\n", ntohs(a.sin_port));
    fflush(stdout);

    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(g_epoll, evs, 64, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("courier-ws-echo: epoll_wait");
            return 1;
        }
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &tag_signal)
                goto out;
            if (p == &tag_stdin) {
                char b[256];
                if (read(STDIN_FILENO, b, sizeof b) > 0)
                    continue; /* data is read and ignored; EOF or an error stops */
                goto out;
            }
            if (p == &tag_listen) {
                for (;;) {
                    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (fd < 0)
                        break;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    conn *c = calloc(1, sizeof *c);
                    struct epoll_event ce = {.events = EPOLLIN, .data.ptr = c};
                    if (!c || epoll_ctl(g_epoll, EPOLL_CTL_ADD, fd, &ce)) {
                        free(c);
                        close(fd);
                        continue;
                    }
                    c->fd = fd;
                    c->next = g_conns;
                    if (g_conns)
                        g_conns->prev = c;
                    g_conns = c;
                }
                continue;
            }
            conn *c = p;
            if (c->writing) {
                if (flush(c))
                    conn_free(c);
            } else {
                on_readable(c);
            }
        }
    }
out:
    while (g_conns)
        conn_free(g_conns);
    close(g_epoll);
    close(sfd);
    close(lfd);
    return 0;
}
