/*
 * redis_cache_bench.c — `courier bench cache --backend redis`: the cache on Redis through the
 * Courier C API (courier_cache_put_key / courier_cache_get_key on an engine whose cache store is
 * the URL) against a plain hiredis SET / GET loop on the same server, one command per operation
 * on one connection each, side by side in alternating chunks. On a Redis Cluster
 * (redis+cluster://seed,...) the hiredis side is plain hiredis sending each command straight to
 * its slot's master (the slot map asked once with CLUSTER SLOTS, one connection per master, the
 * key's slot computed here: no MOVED is ever followed), the best a cluster client can do.
 */
#include "cbench.h"

#include <courier.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef COURIER_REDIS
#include <hiredis/hiredis.h>
#endif

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long pick(uint64_t *state, long n) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (long)((*state >> 33) % (uint64_t)n);
}

#ifdef COURIER_REDIS

static void fail(cbench_redis_result *out, const char *fmt, const char *what) {
    out->errors++;
    if (!out->first_error[0]) snprintf(out->first_error, sizeof out->first_error, fmt, what);
}

/* host, port, password and db of redis://[[user]:password@]host[:port][/db] (enough for a bench). */
static int parse(const char *url, char *host, size_t hcap, int *port, char *pw, size_t pcap, int *db) {
    const char *p;
    if (strncmp(url, "redis://", 8) == 0) p = url + 8;
    else if (strncmp(url, "redis+cluster://", 16) == 0) p = url + 16; /* its first seed */
    else return -1;
    const char *at = strchr(p, '@');
    pw[0] = '\0';
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon) snprintf(pw, pcap, "%.*s", (int)(at - colon - 1), colon + 1);
        p = at + 1;
    }
    size_t hl = strcspn(p, ":/,");
    snprintf(host, hcap, "%.*s", (int)hl, p);
    p += hl;
    *port = 6379;
    *db = 0;
    if (*p == ':') *port = atoi(p + 1), p += strcspn(p, "/");
    if (*p == '/') *db = atoi(p + 1);
    return 0;
}


/* CRC16/XMODEM of the key or its hash tag, mod 16384 (the Redis Cluster spec's key slot; the same
 * as CCore/base/redis_cluster.c's, which the library does not export). */
static unsigned key_slot(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (open) {
        const char *close = memchr(open + 1, '}', len - (size_t)(open - key) - 1);
        if (close && close > open + 1) key = open + 1, len = (size_t)(close - open - 1);
    }
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint8_t)key[i] << 8);
        for (int k = 0; k < 8; k++) crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc & 16383;
}

/* The hiredis side: one connection per master, and each slot's. */
typedef struct hside {
    redisContext *node[16];
    int nodes;
    unsigned char of_slot[16384]; /* index into node[] */
} hside;

static redisContext *hs_connect(const char *host, int port, const char *pw) {
    redisContext *c = redisConnect(host, port);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    redisReply *r;
    if (pw[0] && (r = redisCommand(c, "AUTH %s", pw))) freeReplyObject(r);
    return c;
}

/* CLUSTER SLOTS asked of the seed: a connection per master, each slot its master's. */
static int hs_learn(hside *h, redisContext *seed, const char *seed_host, const char *pw) {
    redisReply *r = redisCommand(seed, "CLUSTER SLOTS");
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r) freeReplyObject(r);
        return -1;
    }
    char hosts[16][64];
    int ports[16];
    for (size_t i = 0; i < r->elements; i++) {
        redisReply *range = r->element[i];
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) continue;
        redisReply *m = range->element[2];
        const char *host = m->element[0]->len ? m->element[0]->str : seed_host;
        int port = (int)m->element[1]->integer, n;
        for (n = 0; n < h->nodes; n++)
            if (ports[n] == port && strcmp(hosts[n], host) == 0) break;
        if (n == h->nodes) {
            if (n == 16 || !(h->node[n] = hs_connect(host, port, pw))) {
                freeReplyObject(r);
                return -1;
            }
            snprintf(hosts[n], sizeof hosts[n], "%s", host);
            ports[n] = port;
            h->nodes++;
        }
        for (long long s = range->element[0]->integer; s <= range->element[1]->integer && s < 16384; s++)
            h->of_slot[s] = (unsigned char)n;
    }
    freeReplyObject(r);
    return h->nodes ? 0 : -1;
}

static redisContext *hs_for(hside *h, const char *key) {
    return h->node[h->of_slot[key_slot(key, strlen(key))]];
}

int cbench_redis_cache(const char *url, long entries, long gets, int chunks, size_t value_size,
                       cbench_redis_result *out) {
    memset(out, 0, sizeof *out);
    char host[256], pw[256];
    int port, db;
    if (parse(url, host, sizeof host, &port, pw, sizeof pw, &db)) {
        fail(out, "not a redis:// URL: %s", url);
        return -1;
    }
    redisContext *c = redisConnect(host, port);
    if (!c || c->err) {
        fail(out, "hiredis cannot connect: %s", c ? c->errstr : "no memory");
        if (c) redisFree(c);
        return -1;
    }
    redisReply *r;
    if (pw[0] && (r = redisCommand(c, "AUTH %s", pw))) freeReplyObject(r);
    if (db && (r = redisCommand(c, "SELECT %d", db))) freeReplyObject(r);
    bool cluster = strncmp(url, "redis+cluster://", 16) == 0;
    hside *hs = calloc(1, sizeof *hs);
    if (!hs || (cluster && hs_learn(hs, c, host, pw))) {
        fail(out, "hiredis: no slot map from %s", url);
        if (hs) for (int n = 0; n < hs->nodes; n++) redisFree(hs->node[n]);
        free(hs);
        redisFree(c);
        return -1;
    }
    if (!cluster) hs->node[0] = c, hs->nodes = 1; /* every slot: node 0 */
    courier_config *cfg = NULL;
    courier_engine *e = NULL;
    courier_error err;
    courier_config_new(&cfg);
    courier_config_set_temporary_store(cfg, 1);
    int rc = courier_config_set_cache_store(cfg, url);
    if (rc == COURIER_OK) rc = courier_engine_open(&e, cfg, &err);
    courier_config_free(cfg);
    if (rc != COURIER_OK) {
        fail(out, "courier: %s", courier_strerror(rc));
        for (int n = 0; n < hs->nodes; n++) redisFree(hs->node[n]);
        if (cluster) redisFree(c);
        free(hs);
        return -1;
    }
    char *body = malloc(value_size);
    for (size_t k = 0; k < value_size; k++) body[k] = (char)('a' + k % 26);
    if (chunks < 1) chunks = 1;
    double t_hp = 0, t_cp = 0, t_hg = 0, t_cg = 0;
    char key[40], hkey[48];
    /* Puts: every key once, in chunks alternating which side goes first. */
    for (int ch = 0; ch < chunks; ch++) {
        long from = entries * ch / chunks, to = entries * (ch + 1) / chunks;
        for (int side = 0; side < 2; side++) {
            bool hiredis_side = ((ch + side) & 1) == 0;
            double t0 = now_s();
            for (long i = from; i < to; i++) {
                cbench_cache_key(i, key);
                if (hiredis_side) {
                    snprintf(hkey, sizeof hkey, "hiredis:%s", key);
                    redisContext *hc = hs_for(hs, hkey);
                    r = redisCommand(hc, "SET %s %b", hkey, body, value_size);
                    if (!r || r->type == REDIS_REPLY_ERROR) fail(out, "hiredis SET: %s", r ? r->str : hc->errstr);
                    if (r) freeReplyObject(r);
                } else if ((rc = courier_cache_put_key(e, key, 200, NULL, NULL, 0, body, value_size, 3600000, &err))) {
                    fail(out, "courier put: %s", err.message);
                }
            }
            if (hiredis_side) t_hp += now_s() - t0;
            else t_cp += now_s() - t0;
        }
    }
    /* Gets: the same random keys on both sides. */
    for (int ch = 0; ch < chunks; ch++) {
        long n = gets / chunks;
        for (int side = 0; side < 2; side++) {
            bool hiredis_side = ((ch + side) & 1) == 0;
            uint64_t seed = 0x9e3779b97f4a7c15ULL + (uint64_t)ch;
            double t0 = now_s();
            for (long i = 0; i < n; i++) {
                cbench_cache_key(pick(&seed, entries), key);
                if (hiredis_side) {
                    snprintf(hkey, sizeof hkey, "hiredis:%s", key);
                    r = redisCommand(hs_for(hs, hkey), "GET %s", hkey);
                    if (!r || r->type != REDIS_REPLY_STRING || r->len != value_size)
                        fail(out, "hiredis GET: %s", r && r->str ? r->str : "a miss");
                    if (r) freeReplyObject(r);
                } else {
                    courier_response *resp = NULL;
                    size_t len = 0;
                    if (courier_cache_get_key(&resp, e, key, 0, &err) != COURIER_OK ||
                        (courier_response_body(resp, &len), len != value_size))
                        fail(out, "courier get: %s", err.message);
                    courier_response_free(resp);
                }
            }
            if (hiredis_side) t_hg += now_s() - t0;
            else t_cg += now_s() - t0;
        }
    }
    long timed_gets = gets / chunks * chunks;
    out->hiredis_put_ops = t_hp > 0 ? (double)entries / t_hp : 0;
    out->courier_put_ops = t_cp > 0 ? (double)entries / t_cp : 0;
    out->hiredis_get_ops = t_hg > 0 ? (double)timed_gets / t_hg : 0;
    out->courier_get_ops = t_cg > 0 ? (double)timed_gets / t_cg : 0;
    int64_t removed = 0;
    courier_cache_remove_all(&removed, e, NULL);
    for (int n = 0; n < hs->nodes; n++) { /* each master's own hiredis:* keys */
        r = redisCommand(hs->node[n], "EVAL %s 0",
                         "for _, k in ipairs(redis.call('KEYS', 'hiredis:*')) do redis.call('DEL', k) end");
        if (r) freeReplyObject(r);
        redisFree(hs->node[n]);
    }
    if (cluster) redisFree(c);
    free(hs);
    free(body);
    courier_engine_close(e);
    return 0;
}

#else

int cbench_redis_cache(const char *url, long entries, long gets, int chunks, size_t value_size,
                       cbench_redis_result *out) {
    (void)url, (void)entries, (void)gets, (void)chunks, (void)value_size, (void)pick, (void)now_s;
    memset(out, 0, sizeof *out);
    snprintf(out->first_error, sizeof out->first_error, "built without Redis (hiredis)");
    out->errors = 1;
    return -2;
}

#endif
