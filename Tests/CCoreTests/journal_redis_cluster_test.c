/*
 * journal_redis_cluster_test.c — the journal on a Redis Cluster (courier_config_set_frozen_store with
 * a redis+cluster:// URL) against a local cluster the test starts (scripts/redis-fixture cluster: 3
 * masters with a replica each, AOF with appendfsync always): freezes replayed once each, in order,
 * with their keys, and no command answered CROSSSLOT; a freeze that fewer replicas confirm than
 * courier_config_set_frozen_replicas asks ends COURIER_E_REPLICAS_UNCONFIRMED, not FROZEN; a bounded
 * chaos run in several processes (`courier stress frozen --chaos`'s, short: freezers with WAIT 1 and
 * replayers, this executable started again with --child) while the journal's master is SIGKILLed
 * twice, each time with a replayer: every acknowledged freeze arrives at least once, each time with
 * its key, and each host's acknowledged ordered freezes arrive first in freeze order; the loss WAIT prevents, made certain (the master's replica cut off,
 * the master killed, the replica promoted): N = 0 loses acknowledged freezes, N = 1 none; and the
 * cache on a cluster whose master is killed.
 * Exit 77 (skipped) without redis-server.
 */
#include "harness.h"
#include "cstress_frozen.h"
#include "journal_recorder.h"

#include "base/redis_cluster.h"

#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEASE_MS 3000

static const char *journal_url(const char *name) {
    static char buf[4][400];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, 400, "%s#%s", th_redis_cluster_url(), name);
    return b;
}

static courier_engine *open_engine(const char *url, const char *base, int paused, int replicas, int64_t replicas_ms) {
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    courier_config_set_store_dir(cfg, th_tmpdir());
    courier_config_set_frozen_store(cfg, url);
    if (base) courier_config_set_base_url(cfg, base);
    courier_config_set_frozen_poll_ms(cfg, 100);
    courier_config_set_frozen_replay(cfg, 4, 20, 200);
    courier_config_set_frozen_lease_ms(cfg, LEASE_MS);
    courier_config_set_timeout_ms(cfg, 15000); /* longer than a failover (node timeout 1 s + election) */
    if (replicas) CHECK_EQ(courier_config_set_frozen_replicas(cfg, replicas, replicas_ms), COURIER_OK);
    if (paused) courier_config_set_frozen_paused(cfg, 1);
    courier_engine *e = NULL;
    courier_error err;
    if (courier_engine_open(&e, cfg, &err) != COURIER_OK) fprintf(stderr, "open: %s\n", err.message);
    courier_config_free(cfg);
    return e;
}

/* Replays on e until its journal is empty (at most timeout_ms): what is left. */
static int64_t drain(courier_engine *e, int timeout_ms) {
    int64_t left = -1, end = th_now_ms() + timeout_ms;
    do {
        courier_frozen_wait_idle(e, 500);
        left = -1;
        courier_frozen_count(&left, e, NULL);
    } while (left != 0 && th_now_ms() < end);
    return left;
}

/* The port of the master of a key's slot now (CLUSTER SLOTS of any live node), 0 if none. */
static int owner_of(const char *key) {
    int slot = (int)cr_redis_key_slot(key, strlen(key));
    for (int i = 0; i < 6; i++) {
        redisContext *c = redisConnect("127.0.0.1", th_redis_cluster_port(i));
        if (!c || c->err) {
            if (c) redisFree(c);
            continue;
        }
        redisReply *rep = redisCommand(c, "CLUSTER SLOTS");
        redisFree(c);
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

/* CROSSSLOT errors answered by every live node since it started (INFO errorstats). */
static long long crossslot_errors(void) {
    long long n = 0;
    for (int i = 0; i < 6; i++) {
        redisContext *c = redisConnect("127.0.0.1", th_redis_cluster_port(i));
        if (!c || c->err) {
            if (c) redisFree(c);
            continue;
        }
        redisReply *rep = redisCommand(c, "INFO errorstats");
        const char *p = rep && rep->type == REDIS_REPLY_STRING ? strstr(rep->str, "errorstat_CROSSSLOT:count=") : NULL;
        if (p) n += atoll(p + 26);
        if (rep) freeReplyObject(rep);
        redisFree(c);
    }
    return n;
}

/* Frozen in one engine (nothing listening), replayed by another once each, in order, with their
 * keys: the journal's scripts and streams through the router, never CROSSSLOT. */
static void test_freeze_and_replay_on_a_cluster(void) {
    enum { N = 20 };
    REQUIRE(th_redis_cluster_url());
    const char *url = journal_url("basic");
    int port = jr_free_port();
    REQUIRE(port > 0);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    courier_engine *e = open_engine(url, base, 1, 0, 0);
    REQUIRE(e);
    CHECK_EQ(jr_freeze_all(e, "/c/%d", N, 0, 0), N);
    jr_server srv;
    REQUIRE(jr_open(&srv, port) == 0);
    courier_engine *r = open_engine(url, NULL, 0, 0, 0);
    REQUIRE(r);
    CHECK_EQ(drain(r, 60000), 0);
    courier_engine_close(r);
    jr_stop(&srv);
    CHECK_EQ(jr_count(&srv), N);
    for (int i = 0; i < N && i < (int)jr_count(&srv); i++) {
        jr_hit h = jr_get(&srv, (size_t)i);
        char path[32];
        snprintf(path, sizeof path, "/c/%d", i);
        CHECK_STR(h.path, path);
        CHECK_EQ(strlen(h.key), 32);
    }
    jr_free(&srv);
    CHECK_EQ(crossslot_errors(), 0);
}

/* WAIT after the freeze: with replicas=1 (each master has one) the freeze is acknowledged; with
 * replicas=2 it cannot be: COURIER_E_REPLICAS_UNCONFIRMED, not FROZEN (it is in the journal). */
static void test_wait_for_replicas(void) {
    REQUIRE(th_redis_cluster_url());
    const char *url = journal_url("wait");
    int port = jr_free_port();
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    courier_config *cfg = NULL;
    courier_config_new(&cfg);
    CHECK_EQ(courier_config_set_frozen_replicas(cfg, -1, 100), COURIER_E_INVALID_ARGUMENT);
    CHECK_EQ(courier_config_set_frozen_replicas(cfg, 1, 0), COURIER_E_INVALID_ARGUMENT); /* WAIT 1 0 waits for ever */
    CHECK_EQ(courier_config_set_frozen_replicas(cfg, 0, 0), COURIER_OK);
    CHECK_EQ(courier_config_set_frozen_replicas(NULL, 1, 100), COURIER_E_INVALID_ARGUMENT);
    courier_config_free(cfg);

    courier_engine *e = open_engine(url, base, 1, 1, 2000);
    REQUIRE(e);
    CHECK_EQ(jr_freeze_all(e, "/w1/%d", 5, 0, 1), 5); /* offline: frozen at once, one or a batch per turn */
    e = open_engine(url, base, 1, 2, 300);
    REQUIRE(e);
    courier_reachability_set_offline(e);
    courier_request *q = NULL;
    courier_request_new(&q, "POST", "/w2/0");
    courier_request_set_body(q, "n=0", 3, "text/plain");
    courier_request_set_freeze(q, COURIER_FREEZE_AUTO, 0, 0);
    courier_response *resp = NULL;
    courier_error err;
    CHECK_EQ(courier_send_sync(&resp, e, q, &err), COURIER_E_REPLICAS_UNCONFIRMED);
    CHECK_EQ(err.code, COURIER_E_REPLICAS_UNCONFIRMED);
    CHECK(courier_error_freeze_id(&err) == NULL); /* not reported frozen */
    courier_response_free(resp);
    courier_request_free(q);
    /* several at once (a turn's batch): each unconfirmed */
    jr_waiter w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.m, NULL);
    for (int i = 0; i < 6; i++) jr_send_frozen(e, &w, "/w3/%d", i, 0);
    for (int64_t end = th_now_ms() + 30000; jr_w_count(&w, NULL) < 6 && th_now_ms() < end;) usleep(5000);
    CHECK_EQ(jr_w_count(&w, NULL), 6);
    for (int i = 0; i < 6; i++) CHECK_EQ(w.codes[i], COURIER_E_REPLICAS_UNCONFIRMED);
    pthread_mutex_destroy(&w.m);
    /* in the journal all the same: 5 + 1 + 6 */
    int64_t count = -1;
    CHECK_EQ(courier_frozen_count(&count, e, NULL), COURIER_OK);
    CHECK_EQ(count, 12);
    courier_engine_close(e);
    CHECK_EQ(crossslot_errors(), 0);
}

/* Waits (up to 30 s) until node i is a replica in sync with its master (a replica that never
 * synced may not be promoted when its master dies). */
static bool replica_synced(int i) {
    for (int64_t end = th_now_ms() + 30000; th_now_ms() < end; usleep(50000)) {
        redisContext *c = redisConnect("127.0.0.1", th_redis_cluster_port(i));
        redisReply *r = c && !c->err ? redisCommand(c, "INFO replication") : NULL;
        bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "role:slave") &&
                  strstr(r->str, "master_link_status:up") && strstr(r->str, "master_sync_in_progress:0");
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        if (ok) return true;
    }
    return false;
}

/* The port of the first replica of a key's slot (CLUSTER SLOTS of its master), 0 if none. */
static int replica_of(const char *key) {
    int slot = (int)cr_redis_key_slot(key, strlen(key)), master = owner_of(key), port = 0;
    redisContext *c = master ? redisConnect("127.0.0.1", master) : NULL;
    redisReply *rep = c && !c->err ? redisCommand(c, "CLUSTER SLOTS") : NULL;
    for (size_t k = 0; rep && rep->type == REDIS_REPLY_ARRAY && k < rep->elements; k++) {
        redisReply *r = rep->element[k];
        if (r->element[0]->integer <= slot && slot <= r->element[1]->integer && r->elements > 3)
            port = (int)r->element[3]->element[1]->integer;
    }
    if (rep) freeReplyObject(rep);
    if (c) redisFree(c);
    return port;
}

/* The node (0..5) listening on port, -1 if none. */
static int node_at(int port) {
    for (int i = 0; i < 6; i++)
        if (port && th_redis_cluster_port(i) == port) return i;
    return -1;
}

/* One command on node i: its integer reply, 0 for a status reply, -1 on an error or no reply. */
static long long node_command(int i, const char *command) {
    redisContext *c = redisConnect("127.0.0.1", th_redis_cluster_port(i));
    redisReply *r = c && !c->err ? redisCommand(c, command) : NULL;
    long long v = !r || r->type == REDIS_REPLY_ERROR ? -1 : r->type == REDIS_REPLY_INTEGER ? r->integer : 0;
    if (r && r->type == REDIS_REPLY_ERROR) fprintf(stderr, "  %s: %s\n", command, r->str);
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return v;
}

/* ---- bounded chaos in several processes: freezers and replayers while masters are killed ---- */

/* The run of `courier stress frozen --chaos` (Benchmarks/CBench/stress_frozen.c), short: two
 * freezer processes (WAIT 1) and two replayer processes (this executable started again with
 * "--child SPEC") on one journal while the journal's master is SIGKILLed twice (its replica
 * promoted, the old master restarted and synced), each time with a replayer SIGKILLed and started
 * again: every acknowledged freeze arrives at least once, each arrival with the key of the first,
 * and each freezer's ordered host gets its acknowledged freezes first in freeze order (the
 * journal's promise: one at a time per host, a later one never before an earlier one's final
 * answer; a request sent again may come after a later one, so only first arrivals are ordered). */
static void test_chaos_processes_masters_killed(void) {
    REQUIRE(th_redis_cluster_url());
    char fixture[1200];
    snprintf(fixture, sizeof fixture, "%s/scripts/redis-fixture", COURIER_SOURCE_DIR);
    const char *argv[] = {"/proc/self/exe", "--child", NULL};
    cstress_frozen_config cfg = {.journal_url = journal_url("chaos"), .cluster_dir = th_redis_cluster_dir(),
                                 .fixture = fixture, .store_dir = th_tmpdir(), .child_argv = argv,
                                 .freezers = 2, .replayers = 2, .replicas = 1, .replicas_timeout_ms = 1000,
                                 .duration_s = 8, .kills = 2, .drain_timeout_ms = 120000};
    cstress_frozen_result r;
    CHECK_EQ(cstress_frozen_run(&cfg, &r), COURIER_OK);
    printf("chaos, 2 freezer and 2 replayer processes, %d master kills (WAIT 1): %lld freezes answered, %lld "
           "acknowledged, %lld unconfirmed, %lld failed (%d); %lld delivered (%lld arrivals); %lld acknowledged lost, "
           "%lld out of host order, %lld key mismatches%s%s\n",
           r.kills_done, (long long)r.answered, (long long)r.acknowledged, (long long)r.unconfirmed,
           (long long)r.failed, r.failed_code, (long long)r.delivered, (long long)r.arrivals, (long long)r.lost,
           (long long)r.order_violations, (long long)r.key_mismatches, r.first_error[0] ? "; " : "", r.first_error);
    CHECK_STR(r.first_error, "");
    CHECK_EQ(r.kills_done, 2);
    CHECK_EQ(r.replayer_kills, 2);
    CHECK(r.acknowledged > 0);
    CHECK_EQ(r.lost, 0);
    CHECK_EQ(r.order_violations, 0);
    CHECK_EQ(r.key_mismatches, 0);
    CHECK_EQ(r.left, 0);
    CHECK(r.delivered >= r.acknowledged);
    CHECK_EQ(crossslot_errors(), 0);
}

/* ---- the loss WAIT prevents, made deterministic ---- */

/* The journal's master M and its replica R: R stopped (SIGSTOP) and M's link to it closed (CLIENT
 * KILL TYPE replica: what M wrote before is in R's socket, nothing after), K freezes made with WAIT
 * `replicas`, M SIGKILLed, R continued and promoted (CLUSTER FAILOVER TAKEOVER), M restarted (it
 * rejoins as R's replica and drops what R lacks). Then a replayer drains the journal. *acked: how
 * many of the K were acknowledged FROZEN; *lost: how many of those never arrived. Freezes made
 * before (WAIT 1) all arrive. (SIGSTOP alone is not enough: M's writes wait in R's socket buffer,
 * and R reads them once continued.) */
static void loss_run(const char *name, int replicas, int *acked, int *lost) {
    enum { B = 4, K = 8 };
    *acked = *lost = -1;
    REQUIRE(th_redis_cluster_url());
    const char *url = journal_url(name);
    char key[96];
    snprintf(key, sizeof key, "{courier:journal:%s}:stream", name);
    int port = jr_free_port();
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
    courier_engine *e = open_engine(url, base, 1, 1, 2000);
    REQUIRE(e);
    CHECK_EQ(jr_freeze_all(e, "/base/%d", B, COURIER_FREEZE_UNORDERED, 1), B); /* on the replica too */
    int mi = node_at(owner_of(key)), ri = node_at(replica_of(key));
    REQUIRE(mi >= 0 && ri >= 0);
    REQUIRE(replica_synced(ri));
    e = open_engine(url, base, 1, replicas, 300);
    REQUIRE(e);
    int64_t count = -1;
    CHECK_EQ(courier_frozen_count(&count, e, NULL), COURIER_OK); /* the slot map learnt before R stops */
    CHECK_EQ(count, B);
    REQUIRE(th_redis_cluster_node(ri, "pause") == 0);
    CHECK(node_command(mi, "CLIENT KILL TYPE replica") >= 1);
    courier_reachability_set_offline(e);
    jr_waiter w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.m, NULL);
    for (int i = 0; i < K; i++) jr_send_frozen(e, &w, "/lost/%d", i, COURIER_FREEZE_UNORDERED);
    for (int64_t end = th_now_ms() + 30000; jr_w_count(&w, NULL) < K && th_now_ms() < end;) usleep(5000);
    CHECK_EQ(jr_w_count(&w, acked), K);
    for (int i = 0; i < K; i++) /* N = 0: FROZEN; N = 1: no replica confirms (it is cut off) */
        CHECK_EQ(w.codes[i], replicas ? COURIER_E_REPLICAS_UNCONFIRMED : COURIER_E_FROZEN);
    courier_engine_close(e);
    pthread_mutex_destroy(&w.m);
    CHECK_EQ(th_redis_cluster_node(mi, "kill"), 0);
    CHECK_EQ(th_redis_cluster_node(ri, "resume"), 0);
    CHECK_EQ(node_command(ri, "CLUSTER FAILOVER TAKEOVER"), 0);
    int rport = th_redis_cluster_port(ri);
    for (int64_t end = th_now_ms() + 30000; owner_of(key) != rport && th_now_ms() < end;) usleep(50000);
    CHECK_EQ(owner_of(key), rport);
    CHECK_EQ(th_redis_cluster_node(mi, "restart"), 0);
    CHECK(replica_synced(mi));
    jr_server srv;
    REQUIRE(jr_open(&srv, port) == 0);
    courier_engine *r = open_engine(url, NULL, 0, 0, 0);
    REQUIRE(r);
    CHECK_EQ(drain(r, 60000), 0);
    courier_engine_close(r);
    jr_stop(&srv);
    bool base_seen[B] = {0}, lost_seen[K] = {0};
    for (size_t i = 0; i < jr_count(&srv); i++) {
        jr_hit h = jr_get(&srv, i);
        int k = atoi(h.path + 6); /* "/base/" or "/lost/" */
        if (strncmp(h.path, "/base/", 6) == 0 && k >= 0 && k < B) base_seen[k] = true;
        if (strncmp(h.path, "/lost/", 6) == 0 && k >= 0 && k < K) lost_seen[k] = true;
    }
    int arrived = 0;
    for (int k = 0; k < B; k++) CHECK(base_seen[k]);
    for (int k = 0; k < K; k++) arrived += lost_seen[k];
    *lost = *acked - arrived;
    printf("replica cut off, master killed, replica promoted (WAIT %d): %d of %d freezes acknowledged, %d of those "
           "lost (%d arrived); %d made before, all arrived\n",
           replicas, *acked, K, *lost, arrived, B);
    jr_free(&srv);
    CHECK_EQ(crossslot_errors(), 0);
}

/* N = 0 acknowledges freezes the replica never receives: a failover to it loses them (asserted:
 * the construction makes it certain). N = 1 refuses them (COURIER_E_REPLICAS_UNCONFIRMED): none
 * acknowledged, none lost. */
static void test_replica_cut_off_loses_only_without_wait(void) {
    int acked = -1, lost = -1;
    loss_run("loss0", 0, &acked, &lost);
    CHECK_EQ(acked, 8);
    CHECK(lost > 0);
    CHECK_EQ(lost, acked);
    loss_run("loss1", 1, &acked, &lost);
    CHECK_EQ(acked, 0);
    CHECK_EQ(lost, 0);
}

/* ---- the cache on a cluster: a master killed under load costs time, never an error or a wrong answer ---- */

static const char *cache_url;

static void cache_tweak(courier_config *cfg) {
    courier_config_set_store_dir(cfg, th_tmpdir());
    courier_config_set_cache_policy(cfg, COURIER_CACHE_HTTP);
    courier_config_set_cache_store(cfg, cache_url);
    courier_config_set_timeout_ms(cfg, 15000);
}

static void test_cache_master_killed_under_load(void) {
    enum { URLS = 40, ROUNDS = 6 };
    REQUIRE((cache_url = th_redis_cluster_url()));
    courier_engine *e = th_engine(cache_tweak);
    REQUIRE(e);
    int errors = 0, wrong = 0, hits = 0;
    for (int round = 0; round < ROUNDS; round++) {
        if (round == 2) { /* the master of the first URL's entries... any master: node 0's role now */
            int victim = -1;
            for (int i = 0; i < 6 && victim < 0; i++) {
                redisContext *c = redisConnect("127.0.0.1", th_redis_cluster_port(i));
                redisReply *r = c && !c->err ? redisCommand(c, "ROLE") : NULL;
                if (r && r->type == REDIS_REPLY_ARRAY && strcmp(r->element[0]->str, "master") == 0) victim = i;
                if (r) freeReplyObject(r);
                if (c) redisFree(c);
            }
            REQUIRE(victim >= 0);
            CHECK_EQ(th_redis_cluster_node(victim, "kill"), 0);
        }
        for (int i = 0; i < URLS; i++) {
            char path[96], want[32];
            snprintf(want, sizeof want, "u%d", i);
            snprintf(path, sizeof path, "/cache?max_age=600&body=%s", want);
            courier_request *q = NULL;
            courier_request_new(&q, "GET", path);
            courier_response *resp = NULL;
            int rc = courier_send_sync(&resp, e, q, NULL);
            if (rc != COURIER_OK) errors++;
            else if (strcmp((const char *)courier_response_body(resp, NULL), want) != 0) wrong++;
            else hits += courier_response_cache_status(resp) == COURIER_CACHE_STATUS_HIT;
            courier_response_free(resp);
            courier_request_free(q);
        }
    }
    printf("cache on a cluster, a master killed: %d sends, %d errors, %d wrong, %d hits\n", URLS * ROUNDS, errors,
           wrong, hits);
    CHECK_EQ(errors, 0);
    CHECK_EQ(wrong, 0);
    CHECK(hits > 0);
    courier_engine_close(e);
}

static void skip_without_redis(void) {
    if (system("command -v redis-server >/dev/null 2>&1") != 0) {
        fprintf(stderr, "redis-server is not installed: skipped (scripts/setup installs it)\n");
        exit(77);
    }
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "--child") == 0) return cstress_frozen_child(argv[2]);
    static const th_test tests[] = {T(skip_without_redis), T(test_freeze_and_replay_on_a_cluster),
                                    T(test_wait_for_replicas), T(test_chaos_processes_masters_killed),
                                    T(test_replica_cut_off_loses_only_without_wait),
                                    T(test_cache_master_killed_under_load)};
    return th_run(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
