/*
 * redis_cluster_test.c — the Redis Cluster router under the Redis floor (CCore/base/redis_cluster.c)
 * against a real local cluster (scripts/redis-fixture cluster: 3 masters with a replica each): the
 * URL, the key slot (as the cluster computes it), commands and pipelines sent to their slot's
 * master, MOVED after a slot moved (CLUSTER SETSLOT: the map refreshed), ASK during a migration
 * (ASKING, the map unchanged), a master killed with SIGKILL (its promoted replica found), reads
 * from replicas (READONLY). It calls the floor itself, so it links the static library
 * (CMakeLists.txt); built only with COURIER_REDIS. Exit 77 (skipped) without redis-server.
 */
#include "harness.h"

#include "base/base.h"
#include "base/redis_cluster.h"

#include <hiredis/hiredis.h>
#include <unistd.h>

/* ---- direct access to the nodes (plain hiredis, no routing) ---- */

static redisReply *node_cmd(int port, const char *fmt, const char *a, const char *b, const char *c) {
    redisContext *ctx = redisConnect("127.0.0.1", port);
    if (!ctx || ctx->err) {
        if (ctx) redisFree(ctx);
        return NULL;
    }
    redisReply *rep = redisCommand(ctx, fmt, a, b, c);
    redisFree(ctx);
    return rep;
}

/* The port of the master serving `slot`, by CLUSTER SLOTS of any live node; 0 if none. */
static int owner_of(int slot) {
    for (int i = 0; i < 6; i++) {
        redisReply *rep = node_cmd(th_redis_cluster_port(i), "CLUSTER SLOTS", NULL, NULL, NULL);
        if (!rep || rep->type != REDIS_REPLY_ARRAY) {
            if (rep) freeReplyObject(rep);
            continue;
        }
        int port = 0;
        for (size_t k = 0; k < rep->elements; k++) {
            redisReply *r = rep->element[k];
            if (r->element[0]->integer <= slot && slot <= r->element[1]->integer)
                port = (int)r->element[2]->element[1]->integer;
        }
        freeReplyObject(rep);
        return port;
    }
    return 0;
}

static void node_id(int port, char out[64]) {
    redisReply *rep = node_cmd(port, "CLUSTER MYID", NULL, NULL, NULL);
    snprintf(out, 64, "%s", rep && rep->type == REDIS_REPLY_STRING ? rep->str : "?");
    if (rep) freeReplyObject(rep);
}

/* The count of one error prefix (MOVED, ASK, CROSSSLOT) a node answered (INFO errorstats). */
static long long errorstat(int port, const char *what) {
    redisReply *rep = node_cmd(port, "INFO errorstats", NULL, NULL, NULL);
    long long n = 0;
    char needle[64];
    snprintf(needle, sizeof needle, "errorstat_%s:count=", what);
    if (rep && rep->type == REDIS_REPLY_STRING) {
        const char *p = strstr(rep->str, needle);
        if (p) n = atoll(p + strlen(needle));
    }
    if (rep) freeReplyObject(rep);
    return n;
}

static int master_port(int i) { /* the i-th master now (0..2), by the map */
    int ports[3] = {owner_of(0), owner_of(8000), owner_of(16383)};
    return ports[i];
}

/* ---- through the router ---- */

static redisReply *run1(cr_redis *r, int *rc, int flags, int argc, const char **argv) {
    size_t lens[8];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    cr_redis_cmd c = {argc, argv, lens};
    redisReply *rep = NULL;
    courier_error err;
    *rc = cr_redis_run(r, &c, 1, &rep, flags, &err);
    if (*rc) fprintf(stderr, "cr_redis_run: %s\n", err.message);
    return rep;
}

static bool get_is(cr_redis *r, const char *key, const char *value) {
    const char *argv[] = {"GET", key};
    int rc;
    redisReply *rep = run1(r, &rc, 0, 2, argv);
    bool ok = rc == COURIER_OK && rep && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, value) == 0;
    if (rep) freeReplyObject(rep);
    return ok;
}

static bool set(cr_redis *r, const char *key, const char *value) {
    const char *argv[] = {"SET", key, value};
    int rc;
    redisReply *rep = run1(r, &rc, 0, 3, argv);
    bool ok = rc == COURIER_OK && rep && rep->type == REDIS_REPLY_STATUS;
    if (rep) freeReplyObject(rep);
    return ok;
}

static cr_redis *open_cluster(int64_t timeout_ms) {
    const char *url = th_redis_cluster_url();
    if (!url) return NULL;
    cr_redis *r = NULL;
    courier_error err;
    if (cr_redis_open(url, timeout_ms, &r, &err) != COURIER_OK) th_fail(__FILE__, __LINE__, "open: %s", err.message);
    return r;
}

static void test_url(void) {
    cr_redis_url u;
    courier_error err;
    CHECK_EQ(cr_redis_url_parse("redis+cluster://10.0.0.1:7000,10.0.0.2:7001,[::1]:7002/?timeout_ms=300&replica_reads=1",
                                &u, &err), COURIER_OK);
    CHECK(u.cluster && u.replica_reads && !u.tls);
    CHECK_EQ(u.nseeds, 3);
    CHECK_STR(u.seeds[0].host, "10.0.0.1");
    CHECK_EQ(u.seeds[1].port, 7001);
    CHECK_STR(u.seeds[2].host, "::1");
    CHECK_EQ(u.timeout_ms, 300);
    CHECK_STR(u.host, "10.0.0.1");
    CHECK_EQ(u.port, 7000);
    cr_redis_url_free(&u);
    CHECK_EQ(cr_redis_url_parse("REDIS+CLUSTER://app:pw@h:7000", &u, &err), COURIER_OK);
    CHECK(u.cluster && !u.replica_reads);
    CHECK_STR(u.user, "app");
    CHECK_EQ(u.nseeds, 1);
    cr_redis_url_free(&u);
    const char *bad[] = {"redis+cluster://", "redis+cluster://h:1,", "redis+cluster://,h:1", "redis+cluster://h:1/2",
                         "redis+cluster://h:1?replica_reads=2", "redis://h:1?replica_reads=1", "redis+cluster://h:x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = cr_redis_url_parse(bad[i], &u, &err);
        if (rc != COURIER_E_INVALID_ARGUMENT) th_fail(__FILE__, __LINE__, "%s: %d", bad[i], rc);
        CHECK(!u.host && !u.seeds);
    }
    CHECK(cr_redis_is_url("redis+cluster://h:1"));
}

/* The slot of a key, hash tags included, as the cluster itself computes it (CLUSTER KEYSLOT). */
static void test_key_slot(void) {
    REQUIRE(th_redis_cluster_url());
    const char *keys[] = {"foo", "bar", "{user1000}.following", "{user1000}.followers", "foo{}{bar}", "foo{{bar}}zap",
                          "foo{bar}{zap}", "{}", "{", "}", "a{b", "{courier:journal:default}:stream",
                          "courier:cache:{0123456789abcdef0123456789abcdef}:v", ""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        redisReply *rep = node_cmd(th_redis_cluster_port(0), "CLUSTER KEYSLOT %s", keys[i], NULL, NULL);
        REQUIRE(rep && rep->type == REDIS_REPLY_INTEGER);
        if ((long long)cr_redis_key_slot(keys[i], strlen(keys[i])) != rep->integer)
            th_fail(__FILE__, __LINE__, "slot of '%s': %u, the cluster says %lld", keys[i],
                    cr_redis_key_slot(keys[i], strlen(keys[i])), rep->integer);
        freeReplyObject(rep);
    }
    for (int i = 0; i < 300; i++) {
        char k[32];
        snprintf(k, sizeof k, "key:%d", i * 7919);
        redisReply *rep = node_cmd(th_redis_cluster_port(0), "CLUSTER KEYSLOT %s", k, NULL, NULL);
        REQUIRE(rep && rep->type == REDIS_REPLY_INTEGER);
        CHECK_EQ((long long)cr_redis_key_slot(k, strlen(k)), rep->integer);
        freeReplyObject(rep);
    }
}

/* One pipeline of keys over every master: each reply in its place, each key on its slot's master;
 * a MULTI/EXEC and a WAIT go whole with their command. */
static void test_pipeline_over_masters(void) {
    cr_redis *r = open_cluster(10000);
    REQUIRE(r);
    enum { N = 120 };
    char keys[N][32], vals[N][32];
    const char *argv[2 * N][3];
    size_t lens[2 * N][3];
    cr_redis_cmd cmds[2 * N];
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], 32, "pipe:%d", i);
        snprintf(vals[i], 32, "v%d", i * 3);
        argv[i][0] = "SET", argv[i][1] = keys[i], argv[i][2] = vals[i];
        argv[N + i][0] = "GET", argv[N + i][1] = keys[i];
        for (int k = 0; k < 3; k++) lens[i][k] = strlen(argv[i][k]);
        for (int k = 0; k < 2; k++) lens[N + i][k] = strlen(argv[N + i][k]);
        cmds[i] = (cr_redis_cmd){3, argv[i], lens[i]};
        cmds[N + i] = (cr_redis_cmd){2, argv[N + i], lens[N + i]};
    }
    redisReply *reps[2 * N];
    courier_error err;
    REQUIRE(cr_redis_run(r, cmds, 2 * N, reps, 0, &err) == COURIER_OK);
    int shards = 0;
    CHECK_EQ(cr_redis_shards(r, &shards, &err), COURIER_OK);
    CHECK_EQ(shards, 3);
    for (int i = 0; i < N; i++) {
        CHECK(reps[i] && reps[i]->type == REDIS_REPLY_STATUS);
        CHECK(reps[N + i] && reps[N + i]->type == REDIS_REPLY_STRING && strcmp(reps[N + i]->str, vals[i]) == 0);
        /* on the master of its slot */
        redisReply *d = node_cmd(owner_of((int)cr_redis_key_slot(keys[i], strlen(keys[i]))), "GET %s", keys[i], NULL, NULL);
        CHECK(d && d->type == REDIS_REPLY_STRING && strcmp(d->str, vals[i]) == 0);
        if (d) freeReplyObject(d);
    }
    cr_redis_replies_free(reps, 2 * N);
    /* MULTI..EXEC of one hash tag, then WAIT on the same connection */
    const char *m0[] = {"MULTI"}, *m1[] = {"SET", "{tx}a", "1"}, *m2[] = {"INCR", "{tx}a"}, *m3[] = {"EXEC"},
               *m4[] = {"WAIT", "1", "2000"}, *m5[] = {"GET", "other"};
    size_t l0[] = {5}, l1[] = {3, 5, 1}, l2[] = {4, 5}, l3[] = {4}, l4[] = {4, 1, 4}, l5[] = {3, 5};
    cr_redis_cmd tx[] = {{1, m0, l0}, {3, m1, l1}, {2, m2, l2}, {1, m3, l3}, {3, m4, l4}, {2, m5, l5}};
    redisReply *tr[6];
    REQUIRE(cr_redis_run(r, tx, 6, tr, 0, &err) == COURIER_OK);
    CHECK(tr[3] && tr[3]->type == REDIS_REPLY_ARRAY && tr[3]->elements == 2 && tr[3]->element[1]->integer == 2);
    CHECK(tr[4] && tr[4]->type == REDIS_REPLY_INTEGER && tr[4]->integer == 1); /* the replica has the write */
    CHECK(tr[5] && tr[5]->type == REDIS_REPLY_NIL);
    cr_redis_replies_free(tr, 6);
    /* SCRIPT LOAD goes to every master: EVALSHA then runs on any */
    const char *ld[] = {"SCRIPT", "LOAD", "return redis.call('GET', KEYS[1])"};
    int rc;
    redisReply *sha = run1(r, &rc, 0, 3, ld);
    REQUIRE(rc == COURIER_OK && sha && sha->type == REDIS_REPLY_STRING);
    for (int i = 0; i < 10; i++) {
        const char *ev[] = {"EVALSHA", sha->str, "1", keys[i]};
        redisReply *e = run1(r, &rc, 0, 4, ev);
        CHECK(rc == COURIER_OK && e && e->type == REDIS_REPLY_STRING && strcmp(e->str, vals[i]) == 0);
        if (e) freeReplyObject(e);
    }
    freeReplyObject(sha);
    /* the seeds may include a node that is not there */
    cr_redis_close(r);
}

/* A slot moved to another master (CLUSTER SETSLOT ... NODE): the old one answers MOVED, the router
 * refreshes its map and sends the command there; the next command goes there directly. */
static void test_moved(void) {
    cr_redis *r = open_cluster(10000);
    REQUIRE(r);
    const char *key = "{moved}k";
    int slot = (int)cr_redis_key_slot(key, strlen(key));
    REQUIRE(set(r, key, "before"));
    int from = owner_of(slot), to = master_port(from == master_port(0) ? 1 : 0);
    REQUIRE(from && to && from != to);
    char from_id[64], to_id[64], s[16];
    node_id(from, from_id);
    node_id(to, to_id);
    snprintf(s, sizeof s, "%d", slot);
    redisReply *rep;
    rep = node_cmd(to, "CLUSTER SETSLOT %s IMPORTING %s", s, from_id, NULL), freeReplyObject(rep);
    rep = node_cmd(from, "CLUSTER SETSLOT %s MIGRATING %s", s, to_id, NULL), freeReplyObject(rep);
    char port[16];
    snprintf(port, sizeof port, "%d", to);
    rep = node_cmd(from, "MIGRATE 127.0.0.1 %s %s 0 5000 KEYS %s", port, "", key);
    REQUIRE(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    for (int i = 0; i < 3; i++) { /* the new owner first, then the rest (the spec's order) */
        int p = i == 0 ? to : i == 1 ? from : master_port(0) != to && master_port(0) != from ? master_port(0)
                                                  : master_port(1) != to && master_port(1) != from ? master_port(1)
                                                                                                    : master_port(2);
        rep = node_cmd(p, "CLUSTER SETSLOT %s NODE %s", s, to_id, NULL);
        CHECK(rep && rep->type == REDIS_REPLY_STATUS);
        if (rep) freeReplyObject(rep);
    }
    long long moved = errorstat(from, "MOVED");
    CHECK(get_is(r, key, "before")); /* the router still thinks `from` has it */
    CHECK_EQ(errorstat(from, "MOVED"), moved + 1);
    CHECK(set(r, key, "after"));
    CHECK(get_is(r, key, "after"));
    CHECK_EQ(errorstat(from, "MOVED"), moved + 1); /* the map was refreshed: straight to `to` */
    rep = node_cmd(to, "GET %s", key, NULL, NULL);
    CHECK(rep && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, "after") == 0);
    if (rep) freeReplyObject(rep);
    cr_redis_close(r);
}

/* A slot being migrated: a key already moved is answered ASK by the old master; the router sends
 * ASKING and the command to the new one, once, and keeps its map (the next command asks the old
 * master again). A key not moved yet is served by the old master; a new key goes to the new one. */
static void test_ask(void) {
    cr_redis *r = open_cluster(10000);
    REQUIRE(r);
    const char *moved_key = "{ask}moved", *stay_key = "{ask}stays", *new_key = "{ask}new";
    int slot = (int)cr_redis_key_slot(moved_key, strlen(moved_key));
    REQUIRE(set(r, moved_key, "m") && set(r, stay_key, "s"));
    int from = owner_of(slot), to = master_port(from == master_port(0) ? 1 : 0);
    char from_id[64], to_id[64], s[16], port[16];
    node_id(from, from_id);
    node_id(to, to_id);
    snprintf(s, sizeof s, "%d", slot);
    snprintf(port, sizeof port, "%d", to);
    redisReply *rep;
    rep = node_cmd(to, "CLUSTER SETSLOT %s IMPORTING %s", s, from_id, NULL), freeReplyObject(rep);
    rep = node_cmd(from, "CLUSTER SETSLOT %s MIGRATING %s", s, to_id, NULL), freeReplyObject(rep);
    rep = node_cmd(from, "MIGRATE 127.0.0.1 %s %s 0 5000 KEYS %s", port, "", moved_key);
    REQUIRE(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    long long ask = errorstat(from, "ASK");
    CHECK(get_is(r, moved_key, "m"));
    CHECK_EQ(errorstat(from, "ASK"), ask + 1);
    CHECK(get_is(r, stay_key, "s"));
    CHECK_EQ(errorstat(from, "ASK"), ask + 1); /* still on `from`: served there */
    CHECK(set(r, new_key, "n"));               /* absent on `from`: ASK, created on `to` */
    CHECK_EQ(errorstat(from, "ASK"), ask + 2);
    CHECK(get_is(r, moved_key, "m"));
    CHECK_EQ(errorstat(from, "ASK"), ask + 3); /* ASK left the map as it was */
    /* on `to` indeed (ASKING lets a client read an importing slot) */
    redisContext *ctx = redisConnect("127.0.0.1", to);
    REQUIRE(ctx && !ctx->err);
    freeReplyObject(redisCommand(ctx, "ASKING"));
    rep = redisCommand(ctx, "GET %s", new_key);
    CHECK(rep && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, "n") == 0);
    if (rep) freeReplyObject(rep);
    redisFree(ctx);
    /* finish the migration; the router follows the MOVED */
    rep = node_cmd(from, "MIGRATE 127.0.0.1 %s %s 0 5000 KEYS %s", port, "", stay_key);
    CHECK(rep && rep->type == REDIS_REPLY_STATUS);
    if (rep) freeReplyObject(rep);
    for (int i = 0; i < 3; i++) {
        rep = node_cmd(master_port(i) == to ? to : master_port(i), "CLUSTER SETSLOT %s NODE %s", s, to_id, NULL);
        if (rep) freeReplyObject(rep);
    }
    rep = node_cmd(from, "CLUSTER SETSLOT %s NODE %s", s, to_id, NULL);
    if (rep) freeReplyObject(rep);
    CHECK(get_is(r, stay_key, "s") && get_is(r, new_key, "n") && get_is(r, moved_key, "m"));
    cr_redis_close(r);
}

/* Reads from replicas (replica_reads=1): a read marked CR_REDIS_READ goes to the slot's replica
 * (READONLY), a write and an unmarked read to the master. */
static void test_replica_reads(void) {
    const char *url = th_redis_cluster_url();
    REQUIRE(url);
    char ro[400];
    snprintf(ro, sizeof ro, "%s?replica_reads=1", url);
    cr_redis *r = NULL;
    courier_error err;
    REQUIRE(cr_redis_open(ro, 10000, &r, &err) == COURIER_OK);
    const char *key = "{ro}k";
    const char *setw[] = {"SET", key, "v"}, *wait[] = {"WAIT", "1", "5000"}, *get[] = {"GET", key};
    size_t l1[] = {3, 5, 1}, l2[] = {4, 1, 4}, l3[] = {3, 5};
    cr_redis_cmd w[] = {{3, setw, l1}, {3, wait, l2}};
    redisReply *reps[2];
    REQUIRE(cr_redis_run(r, w, 2, reps, 0, &err) == COURIER_OK);
    CHECK(reps[1] && reps[1]->type == REDIS_REPLY_INTEGER && reps[1]->integer == 1);
    cr_redis_replies_free(reps, 2);
    int master = owner_of((int)cr_redis_key_slot(key, strlen(key)));
    redisReply *info = node_cmd(master, "INFO commandstats", NULL, NULL, NULL);
    REQUIRE(info);
    const char *p = strstr(info->str, "cmdstat_get:calls=");
    long long before = p ? atoll(p + 18) : 0;
    freeReplyObject(info);
    cr_redis_cmd g = {2, get, l3};
    redisReply *rep = NULL;
    for (int i = 0; i < 5; i++) {
        REQUIRE(cr_redis_run(r, &g, 1, &rep, CR_REDIS_READ, &err) == COURIER_OK);
        CHECK(rep && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, "v") == 0);
        freeReplyObject(rep);
    }
    info = node_cmd(master, "INFO commandstats", NULL, NULL, NULL);
    p = strstr(info->str, "cmdstat_get:calls=");
    CHECK_EQ(p ? atoll(p + 18) : 0, before); /* none reached the master */
    freeReplyObject(info);
    REQUIRE(cr_redis_run(r, &g, 1, &rep, 0, &err) == COURIER_OK); /* not marked: the master */
    freeReplyObject(rep);
    info = node_cmd(master, "INFO commandstats", NULL, NULL, NULL);
    p = strstr(info->str, "cmdstat_get:calls=");
    CHECK_EQ(p ? atoll(p + 18) : 0, before + 1);
    freeReplyObject(info);
    cr_redis_close(r);
}

/* Waits (up to 30 s) until every live node says cluster_state:ok. */
static bool cluster_ok(void) {
    for (int t = 0; t < 1200; t++) {
        bool ok = true;
        for (int i = 0; i < 6 && ok; i++) {
            redisReply *rep = node_cmd(th_redis_cluster_port(i), "CLUSTER INFO", NULL, NULL, NULL);
            if (!rep) continue; /* killed */
            ok = rep->type == REDIS_REPLY_STRING && strstr(rep->str, "cluster_state:ok");
            freeReplyObject(rep);
        }
        if (ok) return true;
        usleep(25000);
    }
    return false;
}

static int node_index_of(int port) {
    for (int i = 0; i < 6; i++)
        if (th_redis_cluster_port(i) == port) return i;
    return -1;
}

/* A master killed with SIGKILL: until its replica is promoted, calls for its slots fail at once
 * with COURIER_E_REDIS (as one server down; never a wrong answer), then the router finds the
 * promoted replica in a fresh map; a write acknowledged with WAIT 1 before the kill is there. */
static void test_failover(void) {
    cr_redis *r = open_cluster(20000);
    REQUIRE(r);
    const char *key = "{failover}k";
    const char *setw[] = {"SET", key, "kept"}, *wait[] = {"WAIT", "1", "5000"};
    size_t l1[] = {3, 11, 4}, l2[] = {4, 1, 4};
    cr_redis_cmd w[] = {{3, setw, l1}, {3, wait, l2}};
    redisReply *reps[2];
    courier_error err;
    REQUIRE(cr_redis_run(r, w, 2, reps, 0, &err) == COURIER_OK);
    CHECK(reps[1] && reps[1]->type == REDIS_REPLY_INTEGER && reps[1]->integer == 1);
    cr_redis_replies_free(reps, 2);
    int master = owner_of((int)cr_redis_key_slot(key, strlen(key)));
    int idx = node_index_of(master);
    REQUIRE(idx >= 0);
    REQUIRE(th_redis_cluster_node(idx, "kill") == 0);
    int failures = 0;
    bool got = false;
    for (int64_t end = th_now_ms() + 30000; !got && th_now_ms() < end;) {
        const char *argv[] = {"GET", key};
        int rc;
        redisReply *rep = run1(r, &rc, 0, 2, argv);
        if (rc == COURIER_OK) {
            got = rep && rep->type == REDIS_REPLY_STRING && strcmp(rep->str, "kept") == 0;
            CHECK(got); /* the first answer is the right one */
            if (!got) break;
        } else {
            CHECK_EQ(rc, COURIER_E_REDIS);
            CHECK(!rep);
            failures++;
            usleep(50000);
        }
        if (rep) freeReplyObject(rep);
    }
    CHECK(got);
    printf("failover: %d calls failed (COURIER_E_REDIS) before the promoted replica answered\n", failures);
    int now = owner_of((int)cr_redis_key_slot(key, strlen(key)));
    CHECK(now && now != master);
    CHECK(set(r, key, "written after"));
    CHECK(get_is(r, key, "written after"));
    /* the old master comes back as a replica of the new one */
    REQUIRE(th_redis_cluster_node(idx, "restart") == 0);
    CHECK(cluster_ok());
    CHECK(get_is(r, key, "written after"));
    cr_redis_close(r);
}

/* The port of the (first) replica serving `slot`, 0 if none. */
static int replica_of(int slot) {
    for (int i = 0; i < 6; i++) {
        redisReply *rep = node_cmd(th_redis_cluster_port(i), "CLUSTER SLOTS", NULL, NULL, NULL);
        if (!rep || rep->type != REDIS_REPLY_ARRAY) {
            if (rep) freeReplyObject(rep);
            continue;
        }
        int port = 0;
        for (size_t k = 0; k < rep->elements; k++) {
            redisReply *r = rep->element[k];
            if (r->element[0]->integer <= slot && slot <= r->element[1]->integer && r->elements > 3)
                port = (int)r->element[3]->element[1]->integer;
        }
        freeReplyObject(rep);
        return port;
    }
    return 0;
}

/* A master and its replica both killed: the cluster is down (cluster_state:fail), and every node
 * answers CLUSTERDOWN, even for slots of live masters. A pipeline over those fails with
 * COURIER_E_REDIS at once (after one fresh map), every reply released; the nodes restarted, the
 * same handle works again. */
static void test_cluster_down(void) {
    cr_redis *r = open_cluster(20000);
    REQUIRE(r);
    const char *dead_key = "{down}k";
    int slot = (int)cr_redis_key_slot(dead_key, strlen(dead_key));
    int master = owner_of(slot), replica = replica_of(slot);
    int mi = node_index_of(master), ri = node_index_of(replica);
    REQUIRE(mi >= 0 && ri >= 0);
    /* two keys of one live master (one pipeline to it) */
    char keys[2][32];
    int found = 0, live_owner = 0;
    for (int i = 0; found < 2 && i < 1000; i++) {
        snprintf(keys[found], sizeof keys[found], "live:%d", i);
        int o = owner_of((int)cr_redis_key_slot(keys[found], strlen(keys[found])));
        if (o != master && (!live_owner || o == live_owner)) live_owner = o, found++;
    }
    REQUIRE(found == 2);
    REQUIRE(set(r, keys[0], "a") && set(r, keys[1], "b"));
    REQUIRE(th_redis_cluster_node(ri, "kill") == 0);
    REQUIRE(th_redis_cluster_node(mi, "kill") == 0);
    int live = master_port(0) != master ? master_port(0) : master_port(1);
    bool down = false;
    for (int t = 0; t < 400 && !down; t++) {
        redisReply *rep = node_cmd(live, "CLUSTER INFO", NULL, NULL, NULL);
        down = rep && rep->type == REDIS_REPLY_STRING && strstr(rep->str, "cluster_state:fail");
        if (rep) freeReplyObject(rep);
        if (!down) usleep(25000);
    }
    REQUIRE(down);
    const char *g0[] = {"GET", keys[0]}, *g1[] = {"GET", keys[1]};
    size_t l0[] = {3, strlen(keys[0])}, l1[] = {3, strlen(keys[1])};
    cr_redis_cmd cmds[] = {{2, g0, l0}, {2, g1, l1}};
    redisReply *reps[2] = {NULL, NULL};
    courier_error err;
    int64_t t0 = th_now_ms();
    CHECK_EQ(cr_redis_run(r, cmds, 2, reps, 0, &err), COURIER_E_REDIS);
    printf("cluster down: %s (after %lld ms)\n", err.message, (long long)(th_now_ms() - t0));
    CHECK(!reps[0] && !reps[1]);
    CHECK(th_now_ms() - t0 < 10000); /* not the 20 s timeout */
    CHECK_EQ(th_redis_cluster_node(mi, "restart"), 0);
    CHECK_EQ(th_redis_cluster_node(ri, "restart"), 0);
    CHECK(cluster_ok());
    bool back = false;
    for (int64_t end = th_now_ms() + 30000; !back && th_now_ms() < end; usleep(50000)) back = get_is(r, keys[1], "b");
    CHECK(back);
    cr_redis_close(r);
}

/* No node of the URL answers: COURIER_E_REDIS within the timeout, not a hang. */
static void test_nothing_there(void) {
    cr_redis *r = NULL;
    courier_error err;
    REQUIRE(cr_redis_open("redis+cluster://127.0.0.1:1,127.0.0.1:2/", 500, &r, &err) == COURIER_OK);
    int64_t t0 = th_now_ms();
    int rc;
    redisReply *rep = run1(r, &rc, 0, 2, (const char *[]){"GET", "k"});
    CHECK_EQ(rc, COURIER_E_REDIS);
    CHECK(!rep);
    CHECK(th_now_ms() - t0 < 10000);
    cr_redis_close(r);
}

static void skip_without_redis(void) {
    if (system("command -v redis-server >/dev/null 2>&1") != 0) {
        fprintf(stderr, "redis-server is not installed: skipped (scripts/setup installs it)\n");
        exit(77);
    }
}

TESTS_MAIN(T(skip_without_redis), T(test_url), T(test_nothing_there), T(test_key_slot), T(test_pipeline_over_masters),
           T(test_moved), T(test_ask), T(test_replica_reads), T(test_failover), T(test_cluster_down))
