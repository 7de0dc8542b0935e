/*
 * redis_cluster.c — Courier's own Redis Cluster router under cr_redis_run (hiredis 0.14 has no
 * cluster support; Debian has no cluster client library). It follows the Redis Cluster
 * specification (https://redis.io/docs/reference/cluster-spec/), client side:
 *   - the slot map from CLUSTER SLOTS, asked of any node known (the URL's seeds, then the nodes
 *     the map named), learnt at the first call and again after MOVED, a lost node or CLUSTERDOWN;
 *   - a key's slot: CRC16 (XMODEM) mod 16384 of the key, or of its hash tag ({...});
 *   - each command to its slot's master (with replica_reads=1, reads marked CR_REDIS_READ to a
 *     replica of it, whose connections said READONLY);
 *   - MOVED slot host:port: the slot is that node's (taken at once), the map is refreshed, the
 *     command sent again there;
 *   - ASK slot host:port: ASKING then the command, once, on that node (the map unchanged);
 *   - TRYAGAIN (a multi-key command during a migration): again after a pause, within the timeout;
 *     CLUSTERDOWN: the map learnt again and once more, then COURIER_E_REDIS;
 *   - a node that cannot be reached or breaks: the map refreshed from the others and the commands
 *     sent again where it says (a promoted replica after a failover), unless they were sent, not
 *     safe to repeat (CR_REDIS_NO_RETRY) and may have run; while the map still names the lost node
 *     (no replica promoted yet) the call fails at once with COURIER_E_REDIS, as one server down
 *     does (the floor's backoff makes the next calls fail fast too, until the map changes);
 *   - at most CR_REDIS_MAX_REDIRECTS redirections of one command.
 * A pipeline is split by node (one pipeline per node, in turn) and its replies put back in order.
 * A MULTI..EXEC goes whole to one node; a command without a key (WAIT, EXEC) goes with the command
 * before it, on the same connection (WAIT counts that connection's writes); SCRIPT goes to every
 * master (EVALSHA may run on any).
 *
 * The stores' entry points are here too (cr_redis_open, _run, _shards, _run_shard, _close): one
 * server's calls go straight to its pool (redis.c, below), a cluster's through the router.
 *
 * Threads: any. The map and the node table are under `mu` (never held across I/O); a refresh
 * is one at a time (`refresh_mu`), and a caller whose map was already replaced does not refresh
 * again. Each node has its own pool (redis.c), made when the node is first named and kept until
 * close (nodes are never forgotten, so a node's pointer stays valid without the lock).
 */
#include "base/redis_cluster.h"

#include <errno.h>
#include <strings.h>
#include <time.h>

/* CRC16/XMODEM (polynomial 0x1021, initial 0), the spec's key hash. */
static uint16_t crc16(const char *buf, size_t len) {
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint8_t)buf[i] << 8);
        for (int k = 0; k < 8; k++) crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

unsigned cr_redis_key_slot(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t rest = len - (size_t)(open - key) - 1;
        const char *close = memchr(open + 1, '}', rest);
        if (close && close > open + 1) return crc16(open + 1, (size_t)(close - open - 1)) & 16383;
    }
    return crc16(key, len) & 16383;
}

#ifdef COURIER_REDIS

#include <hiredis/hiredis.h>

#define CL_SLOTS 16384
#define CL_MAX_NODES 64

typedef struct cl_node {
    char *host;
    int port;
    cr_redis *pool;
} cl_node;

struct cr_redis_cluster {
    cr_redis_url url;
    int64_t timeout_ms;
    pthread_mutex_t mu; /* the map and the node table */
    pthread_mutex_t refresh_mu;
    cl_node *nodes[CL_MAX_NODES];
    int nnodes;
    int16_t master[CL_SLOTS];  /* node index, -1 unknown */
    int16_t replica[CL_SLOTS]; /* a replica's node index, -1 none */
    int16_t shards[CL_MAX_NODES]; /* the masters by their first slot */
    int nshards;
    bool mapped;
    uint64_t epoch; /* + 1 at each map learnt */
    unsigned next_ask;
};

static int sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    return nanosleep(&ts, NULL);
}

/* The index of host:port, added when new (mu held). -1: the table is full, or no memory. */
static int node_of(cr_redis_cluster *c, const char *host, size_t hlen, int port) {
    for (int i = 0; i < c->nnodes; i++)
        if (c->nodes[i]->port == port && strlen(c->nodes[i]->host) == hlen && memcmp(c->nodes[i]->host, host, hlen) == 0)
            return i;
    if (c->nnodes == CL_MAX_NODES) return -1;
    cl_node *n = calloc(1, sizeof *n);
    if (!n || !(n->host = cr_strndup(host, hlen)) ||
        cr_redis__pool_open(&c->url, n->host, port, c->url.replica_reads, c->timeout_ms, &n->pool, NULL)) {
        if (n) free(n->host);
        free(n);
        return -1;
    }
    n->port = port;
    c->nodes[c->nnodes] = n;
    return c->nnodes++;
}

int cr_redis__cluster_open(cr_redis_url *url, int64_t timeout_ms, cr_redis_cluster **out, courier_error *err) {
    *out = NULL;
    cr_redis_cluster *c = calloc(1, sizeof *c);
    if (!c) {
        cr_redis_url_free(url);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    c->url = *url;
    memset(url, 0, sizeof *url);
    c->timeout_ms = timeout_ms;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->refresh_mu, NULL);
    for (int s = 0; s < CL_SLOTS; s++) c->master[s] = c->replica[s] = -1;
    for (int i = 0; i < c->url.nseeds; i++)
        if (node_of(c, c->url.seeds[i].host, strlen(c->url.seeds[i].host), c->url.seeds[i].port) < 0) {
            cr_redis__cluster_close(c);
            return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
        }
    *out = c;
    return COURIER_OK;
}

void cr_redis__cluster_close(cr_redis_cluster *c) {
    if (!c) return;
    for (int i = 0; i < c->nnodes; i++) {
        cr_redis__pool_close(c->nodes[i]->pool);
        free(c->nodes[i]->host);
        free(c->nodes[i]);
    }
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->refresh_mu);
    cr_redis_url_free(&c->url);
    free(c);
}

/* ---- the slot map ---- */

/* A node of a CLUSTER SLOTS range ([host, port, id, ...]): its index (mu held), -1 if unusable.
 * An empty host means the node that answered. */
static int node_of_reply(cr_redis_cluster *c, const redisReply *n, const cl_node *asked) {
    if (n->type != REDIS_REPLY_ARRAY || n->elements < 2 || n->element[0]->type != REDIS_REPLY_STRING ||
        n->element[1]->type != REDIS_REPLY_INTEGER)
        return -1;
    const char *host = n->element[0]->str;
    size_t hlen = n->element[0]->len;
    if (!hlen || (hlen == 1 && host[0] == '?')) {
        host = asked->host;
        hlen = strlen(host);
    }
    return node_of(c, host, hlen, (int)n->element[1]->integer);
}

/* Installs the map of a CLUSTER SLOTS reply (mu held). */
static bool install(cr_redis_cluster *c, const redisReply *rep, const cl_node *asked) {
    if (rep->type != REDIS_REPLY_ARRAY || !rep->elements) return false;
    int16_t *master = malloc(2 * CL_SLOTS * sizeof *master), *replica = master + CL_SLOTS;
    if (!master) return false;
    for (int s = 0; s < CL_SLOTS; s++) master[s] = replica[s] = -1;
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *r = rep->element[i];
        if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->element[0]->type != REDIS_REPLY_INTEGER ||
            r->element[1]->type != REDIS_REPLY_INTEGER)
            continue;
        long long from = r->element[0]->integer, to = r->element[1]->integer;
        if (from < 0 || to >= CL_SLOTS || from > to) continue;
        int m = node_of_reply(c, r->element[2], asked), rp = -1;
        if (m < 0) continue;
        for (size_t k = 3; k < r->elements && rp < 0; k++) rp = node_of_reply(c, r->element[k], asked);
        for (long long s = from; s <= to; s++) {
            master[s] = (int16_t)m;
            replica[s] = (int16_t)rp;
        }
    }
    memcpy(c->master, master, CL_SLOTS * sizeof *master);
    memcpy(c->replica, replica, CL_SLOTS * sizeof *replica);
    free(master);
    c->nshards = 0;
    for (int s = 0; s < CL_SLOTS; s++) {
        int m = c->master[s];
        if (m < 0) continue;
        bool seen = false;
        for (int k = 0; k < c->nshards && !seen; k++) seen = c->shards[k] == m;
        if (!seen) c->shards[c->nshards++] = (int16_t)m;
    }
    c->mapped = true;
    c->epoch++;
    return true;
}

/* Learns the map (CLUSTER SLOTS) from the first node that answers, unless it was learnt again
 * since `seen` (another caller refreshed meanwhile). */
static int refresh(cr_redis_cluster *c, uint64_t seen, courier_error *err) {
    pthread_mutex_lock(&c->refresh_mu);
    pthread_mutex_lock(&c->mu);
    bool done = c->mapped && c->epoch != seen;
    int n = c->nnodes;
    pthread_mutex_unlock(&c->mu);
    int rc = COURIER_OK;
    if (!done) {
        rc = cr_fail(err, COURIER_E_REDIS, "no node of the Redis Cluster answered CLUSTER SLOTS");
        static const char *argv[2] = {"CLUSTER", "SLOTS"};
        static const size_t lens[2] = {7, 5};
        cr_redis_cmd cmd = {2, argv, lens};
        /* the seeds and every node met; those that fail fail fast (refused, or the pool's backoff) */
        for (int i = 0; i < n; i++) {
            pthread_mutex_lock(&c->mu);
            cl_node *node = c->nodes[i];
            pthread_mutex_unlock(&c->mu);
            redisReply *rep = NULL;
            bool sent;
            courier_error e;
            cr_error_clear(&e);
            if (cr_redis__pool_run(node->pool, &cmd, 1, &rep, 0, &sent, &e)) {
                if (err) *err = e;
                rc = e.code;
                continue;
            }
            if (rep->type == REDIS_REPLY_ERROR) {
                rc = cr_fail(err, COURIER_E_REDIS, "Redis at %s:%d refused CLUSTER SLOTS: %.200s (not a cluster?)",
                             node->host, node->port, rep->str);
                freeReplyObject(rep);
                continue;
            }
            pthread_mutex_lock(&c->mu);
            bool ok = install(c, rep, node);
            pthread_mutex_unlock(&c->mu);
            freeReplyObject(rep);
            if (ok) {
                rc = COURIER_OK;
                break;
            }
        }
    }
    pthread_mutex_unlock(&c->refresh_mu);
    return rc;
}

static int ensure_map(cr_redis_cluster *c, courier_error *err) {
    pthread_mutex_lock(&c->mu);
    bool mapped = c->mapped;
    uint64_t seen = c->epoch;
    pthread_mutex_unlock(&c->mu);
    return mapped ? COURIER_OK : refresh(c, seen, err);
}

/* ---- commands ---- */

static bool is(const cr_redis_cmd *cmd, int i, const char *word) {
    return cmd->argc > i && cmd->argvlen[i] == strlen(word) && strncasecmp(cmd->argv[i], word, cmd->argvlen[i]) == 0;
}

/* The argument that is a command's (first) key, -1 for none. */
static int key_index(const cr_redis_cmd *cmd) {
    static const char *const keyless[] = {"MULTI", "EXEC",  "DISCARD",  "WAIT",    "PING",   "ASKING", "READONLY",
                                          "SCRIPT", "INFO", "TIME",     "DBSIZE",  "CLUSTER", "ECHO", "FUNCTION",
                                          "SCAN",  "CONFIG", "FLUSHDB", "FLUSHALL", "READWRITE"};
    for (size_t i = 0; i < sizeof keyless / sizeof keyless[0]; i++)
        if (is(cmd, 0, keyless[i])) return -1;
    if (is(cmd, 0, "EVAL") || is(cmd, 0, "EVALSHA") || is(cmd, 0, "EVAL_RO") || is(cmd, 0, "EVALSHA_RO") ||
        is(cmd, 0, "FCALL") || is(cmd, 0, "FCALL_RO"))
        return cmd->argc > 3 && cmd->argvlen[2] < 12 && atoi(cmd->argv[2]) > 0 ? 3 : -1;
    if (is(cmd, 0, "XREADGROUP") || is(cmd, 0, "XREAD")) {
        for (int i = 1; i + 1 < cmd->argc; i++)
            if (is(cmd, i, "STREAMS")) return i + 1;
        return -1;
    }
    if (is(cmd, 0, "XGROUP") || is(cmd, 0, "XINFO") || is(cmd, 0, "OBJECT") || is(cmd, 0, "MEMORY"))
        return cmd->argc > 2 ? 2 : -1;
    return cmd->argc > 1 ? 1 : -1;
}

/* A unit: commands that go to one node together (a command with the keyless ones after it, or a
 * MULTI..EXEC), and where it goes. */
typedef struct unit {
    size_t first, count;
    int slot;   /* -1: no key */
    int ask;    /* node index of an ASK redirection still to follow, -1 none */
    int target; /* node index this round */
    int redirects;
    int downs; /* CLUSTERDOWN answers */
    bool done, script;
} unit;

static size_t make_units(const cr_redis_cmd *cmds, size_t n, unit *u) {
    size_t nu = 0;
    for (size_t i = 0; i < n;) {
        size_t count = 1;
        if (is(&cmds[i], 0, "MULTI")) {
            while (i + count < n && !is(&cmds[i + count - 1], 0, "EXEC") && !is(&cmds[i + count - 1], 0, "DISCARD"))
                count++;
        } else if (key_index(&cmds[i]) < 0 && nu && !is(&cmds[i], 0, "SCRIPT") && !u[nu - 1].script) {
            u[nu - 1].count++; /* WAIT and the like: with the command before, on its connection */
            i++;
            continue;
        }
        unit *x = &u[nu++];
        *x = (unit){.first = i, .count = count, .slot = -1, .ask = -1, .target = -1, .script = is(&cmds[i], 0, "SCRIPT")};
        for (size_t k = i; k < i + count && x->slot < 0; k++) {
            int ki = key_index(&cmds[k]);
            if (ki >= 0) x->slot = (int)cr_redis_key_slot(cmds[k].argv[ki], cmds[k].argvlen[ki]);
        }
        i += count;
    }
    return nu;
}

/* What the replies of a unit ask for. */
enum { R_OK, R_MOVED, R_ASK, R_TRYAGAIN, R_DOWN };

static int redirection(redisReply **reps, size_t n, int *slot, const char **addr, size_t *alen) {
    for (size_t i = 0; i < n; i++) {
        const redisReply *r = reps[i];
        if (!r || r->type != REDIS_REPLY_ERROR) continue;
        bool moved = strncmp(r->str, "MOVED ", 6) == 0, ask = strncmp(r->str, "ASK ", 4) == 0;
        if (moved || ask) {
            const char *p = r->str + (moved ? 6 : 4);
            *slot = atoi(p);
            p = strchr(p, ' ');
            if (!p) continue;
            *addr = p + 1;
            *alen = strlen(p + 1);
            return moved ? R_MOVED : R_ASK;
        }
        if (strncmp(r->str, "TRYAGAIN", 8) == 0) return R_TRYAGAIN;
        if (strncmp(r->str, "CLUSTERDOWN", 11) == 0) return R_DOWN;
    }
    return R_OK;
}

/* The node of "host:port" (a redirection's), added when new: -1 when unusable. */
static int node_of_addr(cr_redis_cluster *c, const char *addr, size_t len) {
    const char *colon = NULL;
    for (size_t i = len; i > 0; i--)
        if (addr[i - 1] == ':') {
            colon = addr + i - 1;
            break;
        }
    if (!colon || colon == addr) return -1;
    int port = atoi(colon + 1);
    const char *host = addr;
    size_t hlen = (size_t)(colon - addr);
    if (hlen > 2 && host[0] == '[') host++, hlen -= 2;
    pthread_mutex_lock(&c->mu);
    int idx = node_of(c, host, hlen, port);
    pthread_mutex_unlock(&c->mu);
    return idx;
}

/* Frees reps[from..n): the replies of a node's pipeline not yet handed to their units. */
static void free_from(redisReply **reps, size_t from, size_t n) {
    for (size_t i = from; i < n; i++)
        if (reps[i]) freeReplyObject(reps[i]);
}

/* SCRIPT ...: to every master; the first master's reply (an error reply of any master instead). */
static int run_script(cr_redis_cluster *c, const cr_redis_cmd *cmd, redisReply **reply, int flags, courier_error *err) {
    int rc = ensure_map(c, err);
    if (rc) return rc;
    pthread_mutex_lock(&c->mu);
    int16_t shards[CL_MAX_NODES];
    int ns = c->nshards;
    memcpy(shards, c->shards, sizeof shards);
    pthread_mutex_unlock(&c->mu);
    *reply = NULL;
    int worked = 0;
    for (int i = 0; i < ns; i++) {
        redisReply *rep = NULL;
        bool sent;
        courier_error e;
        cr_error_clear(&e);
        if (cr_redis__pool_run(c->nodes[shards[i]]->pool, cmd, 1, &rep, flags, &sent, &e)) {
            if (err) *err = e;
            rc = e.code;
            continue; /* a master down: its replica, once promoted, is loaded on NOSCRIPT */
        }
        worked++;
        if (!*reply || rep->type == REDIS_REPLY_ERROR) {
            if (*reply) freeReplyObject(*reply);
            *reply = rep;
        } else {
            freeReplyObject(rep);
        }
    }
    if (!worked) return rc ? rc : cr_fail(err, COURIER_E_REDIS, "no master of the Redis Cluster is known");
    return COURIER_OK;
}

int cr_redis__cluster_run(cr_redis_cluster *c, const cr_redis_cmd *cmds, size_t n, redisReply **replies, int flags,
                          courier_error *err) {
    for (size_t i = 0; i < n; i++) replies[i] = NULL;
    if (!n) return COURIER_OK;
    unit *u = malloc(n * sizeof *u);
    cr_redis_cmd *batch = malloc(2 * n * sizeof *batch); /* room for an ASKING before each unit */
    redisReply **breps = malloc(2 * n * sizeof *breps);
    size_t *bunit = malloc(2 * n * sizeof *bunit);
    if (!u || !batch || !breps || !bunit) {
        free(u), free(batch), free(breps), free(bunit);
        return cr_fail(err, COURIER_E_NO_MEMORY, NULL);
    }
    static const char *asking_argv[1] = {"ASKING"};
    static const size_t asking_len[1] = {6};
    const cr_redis_cmd asking = {1, asking_argv, asking_len};
    size_t nu = make_units(cmds, n, u);
    int64_t deadline = cr_mono_ms() + c->timeout_ms;
    int64_t pause = 20;
    size_t left = nu;
    int rc = COURIER_OK;
    bool need_refresh = false;
    for (size_t k = 0; k < nu; k++)
        if (u[k].script) {
            u[k].done = true;
            left--;
            if ((rc = run_script(c, &cmds[u[k].first], &replies[u[k].first], flags, err))) goto out;
        }
    uint64_t round_epoch = 0;
    uint64_t failed = 0; /* nodes that could not be reached in this call (bit per node index) */
    while (left) {
        pthread_mutex_lock(&c->mu);
        bool mapped = c->mapped;
        pthread_mutex_unlock(&c->mu);
        if (need_refresh || !mapped) {
            courier_error e;
            cr_error_clear(&e);
            int frc = refresh(c, mapped ? round_epoch : 0, &e);
            pthread_mutex_lock(&c->mu);
            mapped = c->mapped;
            pthread_mutex_unlock(&c->mu);
            if (frc && !mapped) { /* no node answers: down, as one server down (fails at once) */
                if (err) *err = e;
                rc = e.code;
                goto out;
            }
            need_refresh = false;
        }
        /* where each unit goes this round */
        pthread_mutex_lock(&c->mu);
        round_epoch = c->epoch;
        for (size_t k = 0; k < nu; k++) {
            if (u[k].done) continue;
            int s = u[k].slot >= 0 ? u[k].slot : 0;
            int t = u[k].ask >= 0 ? u[k].ask : c->master[s];
            if (u[k].ask < 0 && (flags & CR_REDIS_READ) && c->url.replica_reads && c->replica[s] >= 0)
                t = c->replica[s];
            if (u[k].slot < 0 && t < 0 && c->nshards) t = c->shards[0];
            u[k].target = t;
        }
        pthread_mutex_unlock(&c->mu);
        bool wait = false; /* TRYAGAIN: a pause before the next round */
        for (size_t k = 0; k < nu; k++) {
            if (u[k].done) continue;
            if (u[k].target < 0) { /* a slot no master serves (yet) */
                rc = cr_fail(err, COURIER_E_REDIS, "no node of the Redis Cluster serves slot %d", u[k].slot);
                goto out;
            }
            /* The map, learnt again, still names a node this call could not reach: the cluster has
             * not promoted its replica (yet). As with one server down: fail now (err says why), the
             * next call learns the map again; the cache counts a miss, the journal tries its turn
             * again, a freeze is not made. */
            if (u[k].target < 64 && (failed >> u[k].target & 1)) goto out;
        }
        /* one pipeline per node */
        for (size_t k = 0; k < nu; k++) {
            if (u[k].done || u[k].target < 0 || u[k].target == -2) continue;
            int node = u[k].target;
            size_t nb = 0;
            for (size_t m = k; m < nu; m++) {
                if (u[m].done || u[m].target != node) continue;
                if (u[m].ask >= 0) {
                    bunit[nb] = (size_t)-1;
                    batch[nb++] = asking;
                }
                for (size_t q = 0; q < u[m].count; q++) {
                    bunit[nb] = m;
                    batch[nb++] = cmds[u[m].first + q];
                }
            }
            bool sent = false;
            courier_error e;
            cr_error_clear(&e);
            int nrc = cr_redis__pool_run(c->nodes[node]->pool, batch, nb, breps, flags, &sent, &e);
            if (nrc) {
                /* the node is gone or broke: the map again (a replica may have taken over) */
                if (err) *err = e;
                rc = nrc;
                if (sent && (flags & CR_REDIS_NO_RETRY)) goto out; /* may have run: the caller decides */
                need_refresh = true;
                if (node < 64) failed |= 1ull << node;
                for (size_t m = k; m < nu; m++)
                    if (!u[m].done && u[m].target == node) u[m].target = -2, u[m].ask = -1;
                continue;
            }
            /* the replies back to their units */
            for (size_t b = 0, m = k; b < nb;) {
                if (bunit[b] == (size_t)-1) { /* ASKING's +OK */
                    freeReplyObject(breps[b]);
                    b++;
                    continue;
                }
                m = bunit[b];
                unit *x = &u[m];
                for (size_t q = 0; q < x->count; q++, b++) replies[x->first + q] = breps[b];
                int slot = -1;
                const char *addr = NULL;
                size_t alen = 0;
                int what = redirection(&replies[x->first], x->count, &slot, &addr, &alen);
                x->target = -2;
                if (what == R_OK) {
                    x->done = true;
                    left--;
                    continue;
                }
                char abuf[300];
                alen = addr ? (size_t)snprintf(abuf, sizeof abuf, "%.*s", (int)(alen < 299 ? alen : 299), addr) : 0;
                addr = abuf;
                cr_redis_replies_free(&replies[x->first], x->count);
                x->ask = -1;
                if (what == R_MOVED || what == R_ASK) {
                    if (++x->redirects > CR_REDIS_MAX_REDIRECTS) {
                        rc = cr_fail(err, COURIER_E_REDIS, "Redis Cluster: more than %d redirections of one command",
                                     CR_REDIS_MAX_REDIRECTS);
                        free_from(breps, b, nb); /* the replies not handed out yet */
                        goto out;
                    }
                    int to = node_of_addr(c, addr, alen);
                    if (to < 0) {
                        rc = cr_fail(err, COURIER_E_REDIS, "Redis Cluster: a redirection to an unusable node");
                        free_from(breps, b, nb); /* the replies not handed out yet */
                        goto out;
                    }
                    if (what == R_MOVED) {
                        pthread_mutex_lock(&c->mu);
                        if (slot >= 0 && slot < CL_SLOTS) c->master[slot] = (int16_t)to;
                        pthread_mutex_unlock(&c->mu);
                        need_refresh = true;
                    } else {
                        x->ask = to;
                    }
                } else if (what == R_DOWN) { /* the map again and once more, then down as one server down */
                    rc = cr_fail(err, COURIER_E_REDIS, "Redis Cluster: the cluster is down (CLUSTERDOWN)");
                    if (++x->downs > 1) {
                        free_from(breps, b, nb); /* the replies not handed out yet */
                        goto out;
                    }
                    need_refresh = true;
                } else { /* TRYAGAIN: after a pause, within the timeout */
                    rc = cr_fail(err, COURIER_E_REDIS,
                                 "Redis Cluster: a multi-key command during a slot's migration (TRYAGAIN)");
                    wait = true;
                }
            }
        }
        if (!left) break;
        if (cr_mono_ms() >= deadline) {
            if (rc == COURIER_OK) rc = cr_fail(err, COURIER_E_REDIS, "Redis Cluster: no answer within the timeout");
            goto out;
        }
        for (size_t k = 0; k < nu; k++)
            if (!u[k].done) u[k].target = -1;
        if (wait) { /* give the migration a moment */
            if (cr_mono_ms() + pause >= deadline) goto out;
            sleep_ms(pause);
            pause = pause * 2 > 250 ? 250 : pause * 2;
        }
    }
    rc = COURIER_OK;
out:
    if (rc) cr_redis_replies_free(replies, n);
    free(u), free(batch), free(breps), free(bunit);
    return rc;
}

int cr_redis__cluster_shards(cr_redis_cluster *c, int *count, courier_error *err) {
    *count = 0;
    int rc = ensure_map(c, err);
    if (rc) return rc;
    pthread_mutex_lock(&c->mu);
    *count = c->nshards;
    pthread_mutex_unlock(&c->mu);
    return COURIER_OK;
}

int cr_redis__cluster_run_shard(cr_redis_cluster *c, int shard, const cr_redis_cmd *cmds, size_t n,
                                redisReply **replies, int flags, courier_error *err) {
    for (size_t i = 0; i < n; i++) replies[i] = NULL;
    int rc = ensure_map(c, err);
    if (rc) return rc;
    pthread_mutex_lock(&c->mu);
    cl_node *node = shard >= 0 && shard < c->nshards ? c->nodes[c->shards[shard]] : NULL;
    pthread_mutex_unlock(&c->mu);
    if (!node) return cr_fail(err, COURIER_E_REDIS, "Redis Cluster: the masters changed during a walk of every key");
    bool sent;
    rc = cr_redis__pool_run(node->pool, cmds, n, replies, flags, &sent, err);
    if (rc) { /* the map again for the next call */
        pthread_mutex_lock(&c->mu);
        uint64_t seen = c->epoch;
        pthread_mutex_unlock(&c->mu);
        (void)refresh(c, seen, NULL);
    }
    return rc;
}

/* ---- the stores' entry points (base.h) ---- */

int cr_redis_open(const char *url, int64_t timeout_ms, cr_redis **out, courier_error *err) {
    int rc = cr_redis__pool_open_url(url, timeout_ms, out, err);
    if (rc || !cr_redis__url(*out)->cluster) return rc;
    cr_redis_url copy;
    if ((rc = cr_redis_url_parse(url, &copy, err)) == COURIER_OK)
        rc = cr_redis__cluster_open(&copy, cr_redis__timeout_ms(*out), cr_redis__cluster_of(*out), err);
    if (rc) {
        cr_redis__pool_close(*out);
        *out = NULL;
    }
    return rc;
}

void cr_redis_close(cr_redis *r) {
    if (!r) return;
    cr_redis__cluster_close(*cr_redis__cluster_of(r));
    cr_redis__pool_close(r);
}

int cr_redis_run(cr_redis *r, const cr_redis_cmd *cmds, size_t n, struct redisReply **replies, int flags,
                 courier_error *err) {
    cr_redis_cluster *c = *cr_redis__cluster_of(r);
    if (c) return cr_redis__cluster_run(c, cmds, n, replies, flags, err);
    bool sent;
    return cr_redis__pool_run(r, cmds, n, replies, flags, &sent, err);
}

int cr_redis_shards(cr_redis *r, int *count, courier_error *err) {
    cr_redis_cluster *c = *cr_redis__cluster_of(r);
    if (c) return cr_redis__cluster_shards(c, count, err);
    *count = 1;
    return COURIER_OK;
}

int cr_redis_run_shard(cr_redis *r, int shard, const cr_redis_cmd *cmds, size_t n, struct redisReply **replies,
                       int flags, courier_error *err) {
    cr_redis_cluster *c = *cr_redis__cluster_of(r);
    if (c) return cr_redis__cluster_run_shard(c, shard, cmds, n, replies, flags, err);
    bool sent;
    return cr_redis__pool_run(r, cmds, n, replies, flags, &sent, err);
}

#else /* no hiredis: the URL still parses, everything else is COURIER_E_REDIS_UNSUPPORTED */

static int unsupported(courier_error *err) {
    return cr_fail(err, COURIER_E_REDIS_UNSUPPORTED, "this library was built without Redis (COURIER_REDIS off: no hiredis)");
}

int cr_redis_open(const char *url, int64_t timeout_ms, cr_redis **out, courier_error *err) {
    (void)timeout_ms;
    *out = NULL;
    cr_redis_url u;
    int rc = cr_redis_url_parse(url, &u, err);
    if (rc) return rc;
    cr_redis_url_free(&u);
    return unsupported(err);
}
void cr_redis_close(cr_redis *r) { (void)r; }
int cr_redis_run(cr_redis *r, const cr_redis_cmd *cmds, size_t n, struct redisReply **replies, int flags,
                 courier_error *err) {
    (void)r, (void)cmds, (void)flags;
    for (size_t i = 0; i < n; i++) replies[i] = NULL;
    return unsupported(err);
}
int cr_redis_shards(cr_redis *r, int *count, courier_error *err) {
    (void)r;
    *count = 0;
    return unsupported(err);
}
int cr_redis_run_shard(cr_redis *r, int shard, const cr_redis_cmd *cmds, size_t n, struct redisReply **replies,
                       int flags, courier_error *err) {
    (void)shard;
    return cr_redis_run(r, cmds, n, replies, flags, err);
}

#endif
