/*
 * redis_cache_bench.c — `courier bench cache --backend redis`: the cache on Redis through the
 * Courier C API (courier_cache_put_key / courier_cache_get_key on an engine whose cache store is
 * the URL) against a plain hiredis SET / GET loop on the same server, one command per operation
 * on one connection each, side by side in alternating chunks.
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
    if (strncmp(url, "redis://", 8) != 0) return -1;
    const char *p = url + 8, *at = strchr(p, '@');
    pw[0] = '\0';
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (colon) snprintf(pw, pcap, "%.*s", (int)(at - colon - 1), colon + 1);
        p = at + 1;
    }
    size_t hl = strcspn(p, ":/");
    snprintf(host, hcap, "%.*s", (int)hl, p);
    p += hl;
    *port = 6379;
    *db = 0;
    if (*p == ':') *port = atoi(p + 1), p += strcspn(p, "/");
    if (*p == '/') *db = atoi(p + 1);
    return 0;
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
        redisFree(c);
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
                    r = redisCommand(c, "SET %s %b", hkey, body, value_size);
                    if (!r || r->type == REDIS_REPLY_ERROR) fail(out, "hiredis SET: %s", r ? r->str : c->errstr);
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
                    r = redisCommand(c, "GET %s", hkey);
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
    r = redisCommand(c, "EVAL %s 0", "for _, k in ipairs(redis.call('KEYS', 'hiredis:*')) do redis.call('DEL', k) end");
    if (r) freeReplyObject(r);
    free(body);
    courier_engine_close(e);
    redisFree(c);
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
