/*
 * redis_cluster.h — between the Redis floor (redis.c) and its cluster router (redis_cluster.c).
 * Not for other files: they call cr_redis_* (base.h), the same for one server and a cluster.
 */
#ifndef COURIER_BASE_REDIS_CLUSTER_H
#define COURIER_BASE_REDIS_CLUSTER_H

#include "base/base.h"

/* At most this many MOVED/ASK redirections of one command in one cr_redis_run. */
#define CR_REDIS_MAX_REDIRECTS 16

typedef struct cr_redis_cluster cr_redis_cluster;

#ifdef COURIER_REDIS
/* A pool for a store URL (redis.c): for a redis+cluster:// URL its URL and timeout only (no
 * connection is ever made on it: the router is attached with cr_redis__cluster_of). New
 * (cr_redis__pool_close). */
CR_HIDDEN int cr_redis__pool_open_url(const char *url, int64_t timeout_ms, cr_redis **out, courier_error *err);
CR_HIDDEN void cr_redis__pool_close(cr_redis *r);
/* The router slot of a handle (NULL for one server), its parsed URL and its timeout. */
CR_HIDDEN cr_redis_cluster **cr_redis__cluster_of(cr_redis *r);
CR_HIDDEN const cr_redis_url *cr_redis__url(const cr_redis *r);
CR_HIDDEN int64_t cr_redis__timeout_ms(const cr_redis *r);
/* One node's pool (redis.c): host:port with the URL's user and password, db 0; READONLY on each
 * connection when `readonly`. New (cr_redis_close). */
CR_HIDDEN int cr_redis__pool_open(const cr_redis_url *like, const char *host, int port, bool readonly,
                                  int64_t timeout_ms, cr_redis **out, courier_error *err);
/* cr_redis_run on one server's pool; *sent false when nothing reached the server (the connect
 * failed), so the commands may go to another node even when not safe to repeat. */
CR_HIDDEN int cr_redis__pool_run(cr_redis *r, const cr_redis_cmd *cmds, size_t n, struct redisReply **replies,
                                 int flags, bool *sent, courier_error *err);

/* The router (redis_cluster.c): takes *url (zeroed). */
CR_HIDDEN int cr_redis__cluster_open(cr_redis_url *url, int64_t timeout_ms, cr_redis_cluster **out, courier_error *err);
CR_HIDDEN void cr_redis__cluster_close(cr_redis_cluster *c);
CR_HIDDEN int cr_redis__cluster_run(cr_redis_cluster *c, const cr_redis_cmd *cmds, size_t n, struct redisReply **replies,
                                    int flags, courier_error *err);
CR_HIDDEN int cr_redis__cluster_shards(cr_redis_cluster *c, int *count, courier_error *err);
CR_HIDDEN int cr_redis__cluster_run_shard(cr_redis_cluster *c, int shard, const cr_redis_cmd *cmds, size_t n,
                                          struct redisReply **replies, int flags, courier_error *err);
#endif

/* The hash slot of a key (CRC16/XMODEM mod 16384 of the key, or of its hash tag: the bytes
 * between the first '{' and the next '}' when there are any). */
CR_HIDDEN unsigned cr_redis_key_slot(const char *key, size_t len);

#endif
