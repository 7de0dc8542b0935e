/*
 * redis.c — the floor of the stores on Redis (the cache's, cache/store_redis.c; the journal's): a
 * store URL parsed, a small pool of hiredis connections to one server, and commands sent in one
 * pipeline with the engine's timeout, a reconnect on a broken connection, and hiredis' errors
 * mapped to Courier's codes. The entry points the stores call (cr_redis_open, _run, _close) are
 * in redis_cluster.c, above this file: one server's calls come straight here (cr_redis__pool_*),
 * a cluster's go through its router to one pool per node.
 *
 * Threads: any. Each connection has its own mutex; a caller takes a free one (or waits for one)
 * for one pipeline. Without hiredis (COURIER_REDIS undefined) the URL still parses and everything
 * else fails with COURIER_E_REDIS_UNSUPPORTED.
 */
#include "base/base.h"
#include "base/redis_cluster.h"

#include <ctype.h>
#include <errno.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#ifdef COURIER_REDIS
#include <hiredis/hiredis.h>
#endif

#define CR_REDIS_DEFAULT_PORT 6379

bool cr_redis_is_url(const char *s) {
    return s && (strncasecmp(s, "redis://", 8) == 0 || strncasecmp(s, "rediss://", 9) == 0 ||
                 strncasecmp(s, "redis+cluster://", 16) == 0);
}

bool cr_store_setting_mistyped(const char *s) {
    if (!s || cr_redis_is_url(s) || strncasecmp(s, "unix://", 7) == 0) return false;
    size_t n = 0;
    while ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
           (n && ((s[n] >= '0' && s[n] <= '9') || s[n] == '+' || s[n] == '-' || s[n] == '.')))
        n++;
    return n && ((s[n] == ':' && s[n + 1] == '/') || (s[n] == '/' && s[n + 1] == '/'));
}

void cr_redis_url_free(cr_redis_url *u) {
    if (!u) return;
    free(u->host);
    free(u->user);
    free(u->password);
    for (int i = 0; i < u->nseeds; i++) free(u->seeds[i].host);
    free(u->seeds);
    memset(u, 0, sizeof *u);
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A percent-decoded copy of s[0..len) (NULL: no memory or a bad escape). */
static char *decode(const char *s, size_t len, bool *bad) {
    char *out = malloc(len + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '%') {
            int h = i + 2 < len ? hexval((unsigned char)s[i + 1]) : -1;
            int l = h >= 0 ? hexval((unsigned char)s[i + 2]) : -1;
            if (h < 0 || l < 0 || (h == 0 && l == 0)) {
                *bad = true;
                free(out);
                return NULL;
            }
            *o++ = (char)(h * 16 + l);
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    return out;
}

static bool all_digits(const char *s, size_t len) {
    if (!len) return false;
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)s[i])) return false;
    return true;
}

/* host[:port] in s[0..len) ("[v6]" allowed): 0 with *host new, 1 not of that shape, -1 no memory. */
static int parse_hostport(const char *p, size_t hp, char **out_host, int *out_port) {
    const char *host = p, *port = NULL;
    size_t host_len = hp, port_len = 0;
    if (hp && *p == '[') { /* [IPv6] */
        const char *close = memchr(p, ']', hp);
        if (!close) return 1;
        host = p + 1;
        host_len = (size_t)(close - p - 1);
        if (close + 1 < p + hp) {
            if (close[1] != ':') return 1;
            port = close + 2;
            port_len = (size_t)(p + hp - port);
        }
    } else {
        const char *colon = memchr(p, ':', hp);
        if (colon) {
            host_len = (size_t)(colon - p);
            port = colon + 1;
            port_len = (size_t)(p + hp - port);
        }
    }
    if (!host_len || host_len > 253) return 1;
    for (size_t i = 0; i < host_len; i++)
        if ((unsigned char)host[i] <= ' ' || host[i] == '@' || host[i] == '%' || host[i] == ',') return 1;
    if (port) {
        if (!all_digits(port, port_len) || port_len > 5) return 1;
        *out_port = atoi(port);
        if (*out_port < 1 || *out_port > 65535) return 1;
    }
    return (*out_host = cr_strndup(host, host_len)) ? 0 : -1;
}

int cr_redis_url_parse(const char *url, cr_redis_url *out, courier_error *err) {
    memset(out, 0, sizeof *out);
    if (!cr_redis_is_url(url)) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "not a redis:// or rediss:// URL");
    out->cluster = tolower((unsigned char)url[5]) == '+';
    out->tls = !out->cluster && tolower((unsigned char)url[5]) == 's';
    const char *p = url + (out->cluster ? 16 : out->tls ? 9 : 8);
    out->port = CR_REDIS_DEFAULT_PORT;
    bool bad = false;
    /* userinfo */
    size_t auth_end = strcspn(p, "@/?#");
    if (p[auth_end] == '@') {
        size_t colon = strcspn(p, ":@");
        if (p[colon] == ':') {
            if (colon && !(out->user = decode(p, colon, &bad))) goto fail;
            if (!(out->password = decode(p + colon + 1, auth_end - colon - 1, &bad))) goto fail;
        } else if (!(out->password = decode(p, auth_end, &bad))) { /* "redis://secret@host" */
            goto fail;
        }
        p += auth_end + 1;
    }
    /* host[:port], or a cluster's host:port[,host:port...] */
    size_t hp = strcspn(p, "/?#");
    for (const char *h = p; h < p + hp;) {
        const char *comma = out->cluster ? memchr(h, ',', (size_t)(p + hp - h)) : NULL;
        size_t one = (size_t)((comma ? comma : p + hp) - h);
        char *host = NULL;
        int port = CR_REDIS_DEFAULT_PORT;
        int rc = parse_hostport(h, one, &host, &port);
        if (rc == 1) goto fail_shape;
        if (rc) goto fail;
        if (out->cluster) {
            cr_redis_seed *seeds = realloc(out->seeds, (size_t)(out->nseeds + 1) * sizeof *seeds);
            if (!seeds) {
                free(host);
                goto fail;
            }
            out->seeds = seeds;
            out->seeds[out->nseeds++] = (cr_redis_seed){host, port};
            if (out->nseeds > 64) goto fail_shape;
        } else {
            out->host = host;
            out->port = port;
        }
        h += one;
        if (h < p + hp) {
            h++; /* ',' */
            if (h == p + hp) goto fail_shape;
        }
    }
    if (out->cluster) {
        if (!out->nseeds) goto fail_shape;
        if (!(out->host = cr_strndup(out->seeds[0].host, strlen(out->seeds[0].host)))) goto fail;
        out->port = out->seeds[0].port;
    }
    if (!out->host) goto fail_shape;
    p += hp;
    /* /db */
    if (*p == '/') {
        p++;
        size_t dl = strcspn(p, "?#");
        if (dl) {
            if (!all_digits(p, dl) || dl > 5) goto fail_shape;
            out->db = atoi(p);
            if (out->cluster && out->db) goto fail_shape; /* a cluster has database 0 only */
        }
        p += dl;
    }
    /* ?timeout_ms=N */
    if (*p == '?') {
        p++;
        while (*p && *p != '#') {
            size_t n = strcspn(p, "&#");
            if (n > 11 && strncmp(p, "timeout_ms=", 11) == 0 && all_digits(p + 11, n - 11) && n - 11 <= 9) {
                out->timeout_ms = atoll(p + 11);
                if (out->timeout_ms <= 0) goto fail_shape;
            } else if (out->cluster && n == 15 && strncmp(p, "replica_reads=", 14) == 0 && (p[14] == '0' || p[14] == '1')) {
                out->replica_reads = p[14] == '1';
            } else {
                cr_redis_url_free(out);
                return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "Redis URL: unknown parameter '%.*s' (timeout_ms is known%s)",
                               (int)(n > 40 ? 40 : n), p, out->cluster ? ", and replica_reads=0|1" : "");
            }
            p += n;
            if (*p == '&') p++;
        }
    }
    if (*p) goto fail_shape;
    if (out->tls) {
        cr_redis_url_free(out);
        return cr_fail(err, COURIER_E_REDIS_UNSUPPORTED,
                       "rediss:// needs hiredis with TLS (hiredis_ssl, hiredis >= 1.0); this build has none");
    }
    return COURIER_OK;
fail_shape:
    cr_redis_url_free(out);
    return cr_fail(err, COURIER_E_INVALID_ARGUMENT,
                   out->cluster ? "not a Redis Cluster URL of the shape redis+cluster://[[user]:password@]host:port[,host:port...][/0][?timeout_ms=N&replica_reads=0|1]"
                                : "not a Redis URL of the shape redis://[[user]:password@]host[:port][/db][?timeout_ms=N]");
fail:
    cr_redis_url_free(out);
    if (bad) return cr_fail(err, COURIER_E_INVALID_ARGUMENT, "Redis URL: a bad %%-escape in the user or password");
    return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
}

#ifdef COURIER_REDIS

#define CR_REDIS_POOL 4
/* After a failed connect, calls fail at once for this long instead of each waiting the timeout. */
#define CR_REDIS_BACKOFF_MS 1000

typedef struct cr_redis_conn {
    pthread_mutex_t lock;
    redisContext *ctx;
} cr_redis_conn;

struct cr_redis {
    cr_redis_cluster *cluster; /* redis+cluster://: the router (redis_cluster.c), and no pool here */
    bool readonly;             /* a cluster node's pool for replica reads: READONLY on each connection */
    cr_redis_url url;
    int64_t timeout_ms;
    atomic_uint next;
    _Atomic int64_t down_until_ms; /* monotonic; 0 when the last connect worked */
    cr_redis_conn conns[CR_REDIS_POOL];
};

static cr_redis *pool_new(int64_t timeout_ms) {
    cr_redis *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    for (int i = 0; i < CR_REDIS_POOL; i++) pthread_mutex_init(&r->conns[i].lock, NULL);
    atomic_init(&r->next, 0);
    atomic_init(&r->down_until_ms, 0);
    r->timeout_ms = timeout_ms;
    return r;
}

int cr_redis__pool_open_url(const char *url, int64_t timeout_ms, cr_redis **out, courier_error *err) {
    *out = NULL;
    cr_redis_url u;
    int rc = cr_redis_url_parse(url, &u, err);
    if (rc) return rc;
    timeout_ms = u.timeout_ms > 0 ? u.timeout_ms : timeout_ms > 0 ? timeout_ms : CR_DEFAULT_TIMEOUT_MS;
    cr_redis *r = pool_new(timeout_ms);
    if (!r) {
        cr_redis_url_free(&u);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    r->url = u;
    *out = r;
    return COURIER_OK;
}

int cr_redis__pool_open(const cr_redis_url *like, const char *host, int port, bool readonly, int64_t timeout_ms,
                        cr_redis **out, courier_error *err) {
    cr_redis *r = *out = pool_new(timeout_ms);
    if (!r || !(r->url.host = cr_strndup(host, strlen(host))) ||
        (like->user && !(r->url.user = cr_strndup(like->user, strlen(like->user)))) ||
        (like->password && !(r->url.password = cr_strndup(like->password, strlen(like->password))))) {
        cr_redis__pool_close(r);
        *out = NULL;
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    r->url.port = port;
    r->readonly = readonly;
    return COURIER_OK;
}

void cr_redis__pool_close(cr_redis *r) {
    if (!r) return;
    for (int i = 0; i < CR_REDIS_POOL; i++) {
        if (r->conns[i].ctx) redisFree(r->conns[i].ctx);
        pthread_mutex_destroy(&r->conns[i].lock);
    }
    cr_redis_url_free(&r->url);
    free(r);
}

cr_redis_cluster **cr_redis__cluster_of(cr_redis *r) { return &r->cluster; }
const cr_redis_url *cr_redis__url(const cr_redis *r) { return &r->url; }
int64_t cr_redis__timeout_ms(const cr_redis *r) { return r->timeout_ms; }
const char *cr_redis_host(const cr_redis *r) { return r->url.host; }
int cr_redis_port(const cr_redis *r) { return r->url.port; }
int cr_redis_db(const cr_redis *r) { return r->url.db; }

static struct timeval tv_of(int64_t ms) {
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000)};
    return tv;
}

/* A reply to one command on a fresh connection (AUTH, SELECT): COURIER_OK or COURIER_E_REDIS. */
static int setup_command(redisContext *ctx, const char *what, int argc, const char **argv, courier_error *err) {
    redisReply *rep = redisCommandArgv(ctx, argc, argv, NULL);
    if (!rep) return cr_fail(err, COURIER_E_REDIS, "Redis %s failed: %s", what, ctx->errstr);
    int rc = COURIER_OK;
    if (rep->type == REDIS_REPLY_ERROR) rc = cr_fail(err, COURIER_E_REDIS, "Redis refused %s: %.200s", what, rep->str);
    freeReplyObject(rep);
    return rc;
}

/* A connection to host:port within the URL's timeout, that timeout set on it, and AUTH sent when
 * the URL has a password: the part every connection of this floor shares (connect_conn's pool and
 * cr_redis_connect_alone's listener). COURIER_OK with *out; else COURIER_E_REDIS (err), with
 * *unreachable when the connect itself failed (not AUTH). */
static int open_ctx(const cr_redis *r, const char *host, int port, redisContext **out, bool *unreachable,
                    courier_error *err) {
    *out = NULL;
    *unreachable = false;
    redisContext *ctx = redisConnectWithTimeout(host, port, tv_of(r->timeout_ms));
    if (!ctx || ctx->err) {
        cr_fail(err, COURIER_E_REDIS, "cannot connect to Redis at %s:%d: %s", host, port, ctx ? ctx->errstr : "no memory");
        if (err) err->os_error = errno;
        if (ctx) redisFree(ctx);
        *unreachable = true;
        return COURIER_E_REDIS;
    }
    int rc = redisSetTimeout(ctx, tv_of(r->timeout_ms)) == REDIS_OK
                 ? COURIER_OK
                 : cr_fail(err, COURIER_E_REDIS, "cannot set the Redis connection's timeout");
    if (!rc && r->url.password) {
        const char *argv[3] = {"AUTH", r->url.user ? r->url.user : r->url.password, r->url.password};
        rc = setup_command(ctx, "the password (AUTH)", r->url.user ? 3 : 2, argv, err);
    }
    if (rc) {
        redisFree(ctx);
        return rc;
    }
    *out = ctx;
    return COURIER_OK;
}

/* Connects c (its lock held): within the timeout, then AUTH and SELECT. */
static int connect_conn(cr_redis *r, cr_redis_conn *c, courier_error *err) {
    if (c->ctx) {
        redisFree(c->ctx);
        c->ctx = NULL;
    }
    int64_t now = cr_mono_ms();
    int64_t down = atomic_load(&r->down_until_ms);
    if (down && now < down)
        return cr_fail(err, COURIER_E_REDIS, "Redis at %s:%d is unreachable (a connect failed %lld ms ago)", r->url.host,
                       r->url.port, (long long)(CR_REDIS_BACKOFF_MS - (down - now)));
    redisContext *ctx = NULL;
    bool unreachable = false;
    int rc = open_ctx(r, r->url.host, r->url.port, &ctx, &unreachable, err);
    if (unreachable) atomic_store(&r->down_until_ms, cr_mono_ms() + CR_REDIS_BACKOFF_MS);
    if (rc) return rc;
    if (r->url.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", r->url.db);
        const char *argv[2] = {"SELECT", db};
        rc = setup_command(ctx, "the database (SELECT)", 2, argv, err);
    }
    if (!rc && r->readonly) {
        const char *argv[1] = {"READONLY"};
        rc = setup_command(ctx, "reads from a replica (READONLY)", 1, argv, err);
    }
    if (rc) {
        redisFree(ctx);
        return rc;
    }
    atomic_store(&r->down_until_ms, 0);
    c->ctx = ctx;
    return COURIER_OK;
}

static cr_redis_conn *take(cr_redis *r) {
    unsigned start = atomic_fetch_add(&r->next, 1);
    for (unsigned i = 0; i < CR_REDIS_POOL; i++) {
        cr_redis_conn *c = &r->conns[(start + i) % CR_REDIS_POOL];
        if (pthread_mutex_trylock(&c->lock) == 0) return c;
    }
    cr_redis_conn *c = &r->conns[start % CR_REDIS_POOL];
    pthread_mutex_lock(&c->lock);
    return c;
}

/* Sends the pipeline and reads its replies. 0, or the hiredis error (ctx->err) with *timed_out. */
static int exchange(redisContext *ctx, const cr_redis_cmd *cmds, size_t n, redisReply **replies, bool *timed_out) {
    for (size_t i = 0; i < n; i++)
        if (redisAppendCommandArgv(ctx, cmds[i].argc, cmds[i].argv, cmds[i].argvlen) != REDIS_OK) return ctx->err;
    for (size_t i = 0; i < n; i++) {
        void *rep = NULL;
        errno = 0;
        if (redisGetReply(ctx, &rep) != REDIS_OK || !rep) {
            *timed_out = ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
            for (size_t k = 0; k < i; k++) {
                freeReplyObject(replies[k]);
                replies[k] = NULL;
            }
            return ctx->err ? ctx->err : REDIS_ERR_OTHER;
        }
        replies[i] = rep;
    }
    return 0;
}

int cr_redis__pool_run(cr_redis *r, const cr_redis_cmd *cmds, size_t n, struct redisReply **replies, int flags,
                       bool *sent, courier_error *err) {
    *sent = false;
    for (size_t i = 0; i < n; i++) replies[i] = NULL;
    if (!n) return COURIER_OK;
    cr_redis_conn *c = take(r);
    int64_t start = cr_mono_ms();
    int rc = COURIER_OK;
    for (int attempt = 0;; attempt++) {
        bool fresh = false;
        if (!c->ctx) {
            if ((rc = connect_conn(r, c, err))) break;
            fresh = true;
        }
        bool timed_out = false;
        *sent = true;
        int herr = exchange(c->ctx, cmds, n, replies, &timed_out);
        if (!herr) break;
        rc = cr_fail(err, COURIER_E_REDIS, "Redis at %s:%d: %s%s", r->url.host, r->url.port, c->ctx->errstr,
                     timed_out ? " (no answer within the timeout)" : "");
        if (err && timed_out) err->os_error = ETIMEDOUT;
        redisFree(c->ctx); /* the connection is out of step with its replies: never reused */
        c->ctx = NULL;
        /* Once more on a new connection when the old one broke (the server restarted, an idle
         * connection was closed), never after a timeout (the caller's deadline has passed) nor on
         * a connection just made. */
        if (attempt > 0 || fresh || timed_out || (flags & CR_REDIS_NO_RETRY) ||
            (herr != REDIS_ERR_IO && herr != REDIS_ERR_EOF) || cr_mono_ms() - start >= r->timeout_ms)
            break;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

int cr_redis_connect_alone(const cr_redis *r, int which, redisContext **out, courier_error *err) {
    *out = NULL;
    const cr_redis_url *u = &r->url;
    const char *host = u->host;
    int port = u->port;
    if (u->cluster && u->nseeds > 0) {
        const cr_redis_seed *s = &u->seeds[(unsigned)which % (unsigned)u->nseeds];
        host = s->host;
        port = s->port;
    }
    redisContext *ctx = NULL;
    bool unreachable = false;
    int rc = open_ctx(r, host, port, &ctx, &unreachable, err);
    if (!rc && (redisSetTimeout(ctx, (struct timeval){0, 0}) != REDIS_OK || redisEnableKeepAlive(ctx) != REDIS_OK)) {
        redisFree(ctx);
        rc = cr_fail(err, COURIER_E_REDIS, "cannot set up the Redis connection for a blocking read");
    }
    if (rc) return rc;
    *out = ctx;
    return COURIER_OK;
}

void cr_redis_replies_free(struct redisReply **replies, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (replies[i]) freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
}

int cr_redis_reply_check(const struct redisReply *rep, const char *what, courier_error *err) {
    if (!rep) return cr_fail(err, COURIER_E_REDIS, "Redis gave no answer to %s", what);
    if (rep->type == REDIS_REPLY_ERROR) return cr_fail(err, COURIER_E_REDIS, "Redis refused %s: %.200s", what, rep->str);
    return COURIER_OK;
}

#else /* no hiredis */

const char *cr_redis_host(const cr_redis *r) { (void)r; return ""; }
int cr_redis_port(const cr_redis *r) { (void)r; return 0; }
int cr_redis_db(const cr_redis *r) { (void)r; return 0; }
void cr_redis_replies_free(struct redisReply **replies, size_t n) { (void)replies, (void)n; }
int cr_redis_connect_alone(const cr_redis *r, int which, struct redisContext **out, courier_error *err) {
    (void)r, (void)which;
    *out = NULL;
    return cr_fail(err, COURIER_E_REDIS_UNSUPPORTED, "this library was built without Redis (COURIER_REDIS off: no hiredis)");
}
int cr_redis_reply_check(const struct redisReply *rep, const char *what, courier_error *err) {
    (void)rep, (void)what;
    return cr_fail(err, COURIER_E_REDIS_UNSUPPORTED, "this library was built without Redis (COURIER_REDIS off: no hiredis)");
}

#endif

bool cr_redis_available(void) {
#ifdef COURIER_REDIS
    return true;
#else
    return false;
#endif
}
