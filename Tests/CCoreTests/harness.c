#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifdef COURIER_TEST_REDIS
#include <hiredis/hiredis.h>
#endif

static int failures_in_test;
static const char *current_test;
static cts_server *server;
static char *tmpdirs[64];
static int ntmpdirs;

void th_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "  FAIL %s (%s:%d): ", current_test ? current_test : "?", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    failures_in_test++;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

static void cleanup(void) {
    cts_server_stop(server);
    server = NULL;
    for (int i = 0; i < ntmpdirs; i++) {
        nftw(tmpdirs[i], rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(tmpdirs[i]);
    }
    ntmpdirs = 0;
}

cts_server *th_server(void) {
    if (!server) {
        int rc = cts_server_start(&server, "127.0.0.1", 0);
        if (rc != 0) {
            fprintf(stderr, "cannot start the test server: %d\n", rc);
            exit(2);
        }
    }
    return server;
}

const char *th_base(void) {
    static char buf[64];
    snprintf(buf, sizeof buf, "http://127.0.0.1:%d", cts_server_port(th_server()));
    return buf;
}

const char *th_url(const char *path) {
    static char bufs[8][1024];
    static int next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s%s", th_base(), path);
    return b;
}

const char *th_tmpdir(void) {
    const char *tmp = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/courier-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(path) || ntmpdirs == 64) {
        fprintf(stderr, "cannot create a temporary directory\n");
        exit(2);
    }
    tmpdirs[ntmpdirs++] = strdup(path);
    return tmpdirs[ntmpdirs - 1];
}

courier_engine *th_engine(void (*tweak)(courier_config *cfg)) {
    courier_config *cfg = NULL;
    courier_engine *e = NULL;
    courier_error err;
    if (courier_config_new(&cfg) != COURIER_OK) {
        th_fail(__FILE__, __LINE__, "courier_config_new");
        return NULL;
    }
    courier_config_set_base_url(cfg, th_base());
    courier_config_set_temporary_store(cfg, 1); /* each test engine its own store (a tweak may set one) */
    if (getenv("COURIER_TEST_CACHE_REDIS")) { /* the same tests with the cache on Redis (CMakeLists.txt) */
        bool cluster = strcmp(getenv("COURIER_TEST_CACHE_REDIS"), "cluster") == 0;
        const char *url = cluster ? th_redis_cluster_url() : th_redis_url();
        if (!url || (cluster ? th_redis_cluster_flush() : th_redis_flush()) != 0 || courier_config_set_cache_store(cfg, url) != COURIER_OK) {
            th_fail(__FILE__, __LINE__, "the cache on Redis (%s)", url ? url : "no redis-server");
            courier_config_free(cfg);
            return NULL;
        }
    }
    if (tweak) tweak(cfg);
    int rc = courier_engine_open(&e, cfg, &err);
    courier_config_free(cfg);
    if (rc != COURIER_OK) {
        th_fail(__FILE__, __LINE__, "courier_engine_open: %d %s", rc, err.message);
        return NULL;
    }
    return e;
}

int th_silent_listener(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

int th_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, (struct sockaddr *)&a, sizeof a);
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

int th_can_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

long th_wait_path(const char *path, long n) {
    int64_t deadline = th_now_ms() + 10000;
    long got;
    while ((got = cts_server_path_count(th_server(), path)) < n && th_now_ms() < deadline) usleep(2000);
    return got;
}

int64_t th_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int th_wait_count(pthread_cond_t *c, pthread_mutex_t *m, const int *count, int n) {
    int64_t end = th_now_ms() + 30000;
    while (*count < n && th_now_ms() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(c, m, &ts);
    }
    return *count;
}

static _Atomic int64_t th_clock_offset;

int64_t th_clock(void *user) {
    (void)user;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + atomic_load(&th_clock_offset);
}

void th_clock_set_offset_ms(int64_t ms) { atomic_store(&th_clock_offset, ms); }

static char th_redirect_buf[2][1024];
static const char *_Atomic th_redirect_url;

int th_redirect_customize(courier_outgoing *o, void *user) {
    (void)user;
    const char *to = atomic_load(&th_redirect_url);
    return to ? courier_outgoing_set_url(o, to) : COURIER_OK;
}

void th_redirect_to(const char *url) {
    static int flip;
    if (!url) {
        atomic_store(&th_redirect_url, NULL);
        return;
    }
    flip ^= 1; /* the other buffer: a sender may still read the current one */
    snprintf(th_redirect_buf[flip], sizeof th_redirect_buf[flip], "%s", url);
    atomic_store(&th_redirect_url, th_redirect_buf[flip]);
}

int th_run(int argc, char **argv, const th_test *tests, size_t n) {
    const char *only = argc > 1 ? argv[1] : NULL;
    int passed = 0, failed = 0;
    atexit(cleanup);
    /* An engine opened with the default store writes under $XDG_DATA_HOME: never the real home. */
    char data[600];
    snprintf(data, sizeof data, "%s/data", th_tmpdir());
    setenv("XDG_DATA_HOME", data, 1);
    for (size_t i = 0; i < n; i++) {
        if (only && strcmp(only, tests[i].name) != 0) continue;
        current_test = tests[i].name;
        failures_in_test = 0;
        int64_t t0 = th_now_ms();
        tests[i].fn();
        if (failures_in_test) {
            failed++;
            fprintf(stderr, "not ok %s\n", tests[i].name);
        } else {
            passed++;
            printf("ok %s (%lld ms)\n", tests[i].name, (long long)(th_now_ms() - t0));
        }
        fflush(stdout);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

long th_lmdb_used_bytes(const char *data_mdb, long *psize) {
    /* A meta page: 16-byte page header, magic at 16, the page size at 40, the last page at 136,
     * the transaction id at 144; the second one a page further. */
    int fd = open(data_mdb, O_RDONLY);
    uint8_t m[2][152];
    uint32_t ps = 0;
    long used = -1;
    if (fd >= 0 && pread(fd, m[0], 152, 0) == 152) {
        memcpy(&ps, m[0] + 40, 4);
        if (ps >= 512 && ps <= 65536 && pread(fd, m[1], 152, ps) == 152) {
            uint64_t t0, t1, last;
            memcpy(&t0, m[0] + 144, 8);
            memcpy(&t1, m[1] + 144, 8);
            memcpy(&last, m[t1 > t0] + 136, 8);
            used = (long)((last + 1) * ps);
            if (psize) *psize = ps;
        }
    }
    if (fd >= 0) close(fd);
    return used;
}

int th_junk_last_pages(const char *data_mdb, int pages) {
    long psize = 0, used = th_lmdb_used_bytes(data_mdb, &psize);
    int fd = open(data_mdb, O_RDWR);
    if (used < 0 || fd < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    long first = used / psize - pages;
    char *page = calloc(1, (size_t)psize);
    int rc = first > 2 && page ? 0 : -1;
    for (long p = first; rc == 0 && p < used / psize; p++) {
        uint64_t pgno = (uint64_t)p;
        uint16_t flags = 0x02 /* leaf */, lower = 16 + 2 * 20, upper = (uint16_t)(psize - 64), off = 0xFFF0;
        memset(page, 0x5A, (size_t)psize);
        memcpy(page, &pgno, 8);
        memset(page + 8, 0, 2);
        memcpy(page + 10, &flags, 2);
        memcpy(page + 12, &lower, 2);
        memcpy(page + 14, &upper, 2);
        for (int n = 0; n < 20; n++) memcpy(page + 16 + 2 * n, &off, 2);
        if (pwrite(fd, page, (size_t)psize, (off_t)p * psize) != (ssize_t)psize) rc = -1;
    }
    free(page);
    close(fd);
    return rc;
}

int th_lmdb_damage_leaves(const char *data_mdb, th_leaf_damage how) {
    long psize = 0, used = th_lmdb_used_bytes(data_mdb, &psize);
    int fd = open(data_mdb, O_RDWR);
    uint8_t *page = used > 0 ? malloc((size_t)psize) : NULL;
    int n = page && fd >= 0 ? 0 : -1;
    for (long p = 2; n >= 0 && p < used / psize; p++) {
        if (pread(fd, page, (size_t)psize, (off_t)p * psize) != (ssize_t)psize) {
            n = -1;
            break;
        }
        uint64_t pgno;
        uint16_t flags, lower, upper;
        memcpy(&pgno, page, 8);
        memcpy(&flags, page + 10, 2);
        memcpy(&lower, page + 12, 2);
        memcpy(&upper, page + 14, 2);
        int nodes = (lower - 16) / 2;
        if (pgno != (uint64_t)p || flags != 0x02 /* a leaf */ || lower < 16 || lower > upper || upper > psize ||
            nodes < 2)
            continue;
        if (how == TH_NODES_OVERLAP) memcpy(page + 16 + 2 * (nodes - 1), page + 16, 2);
        else page[10] |= 0x10; /* P_DIRTY */
        if (pwrite(fd, page, (size_t)psize, (off_t)p * psize) != (ssize_t)psize) n = -1;
        else n++;
    }
    free(page);
    if (fd >= 0) close(fd);
    return n;
}

int th_junk_bytes(const char *path, long start, long n, unsigned seed) {
    int fd = open(path, O_WRONLY);
    if (fd < 0) return -1;
    char buf[4096];
    unsigned x = seed;
    int rc = 0;
    for (long off = 0; off < n && rc == 0; off += (long)sizeof buf) {
        for (size_t i = 0; i < sizeof buf; i++) {
            x = x * 1103515245u + 12345u;
            buf[i] = seed ? (char)(x >> 16) : 0;
        }
        size_t len = n - off < (long)sizeof buf ? (size_t)(n - off) : sizeof buf;
        if (pwrite(fd, buf, len, start + off) != (ssize_t)len) rc = -1;
    }
    close(fd);
    return rc;
}

void th_junk_each_eighth(const char *(*make)(char *data, size_t cap), int (*use)(const char *dir)) {
    for (int at = 0; at < 8; at++) {
        for (unsigned seed = 1; seed <= 2; seed++) {
            char data[600];
            const char *dir = make(data, sizeof data);
            if (!dir) return;
            long used = th_lmdb_used_bytes(data, NULL);
            REQUIRE(used > 0);
            REQUIRE(th_junk_bytes(data, at * used / 8, used / 8, seed * 7919u + (unsigned)at) == 0);
            int st = use(dir);
            if (st != 0) printf("  junk over eighth %d, seed %u: child status %d\n", at, seed, st);
            CHECK_EQ(st, 0);
        }
    }
}

/* ---- nginx over TLS (scripts/tls-fixture) ------------------------------------------------------ */

extern char **environ;

static pid_t nginx_pids[4];
static int nginx_count;

static void stop_nginx(void) {
    for (int i = 0; i < nginx_count; i++) {
        if (nginx_pids[i] <= 0) continue;
        kill(nginx_pids[i], SIGTERM);
        waitpid(nginx_pids[i], NULL, 0);
        nginx_pids[i] = 0;
    }
}

static const char *nginx_path(void) {
    static const char *const candidates[] = {"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx",
                                             "/opt/homebrew/bin/nginx", "/usr/local/bin/nginx"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++)
        if (access(candidates[i], X_OK) == 0) return candidates[i];
    return NULL;
}

int th_tls_nginx(th_nginx *out, int h2) {
    const char *nginx = nginx_path();
    if (!nginx) return 77;
    if (nginx_count >= (int)(sizeof nginx_pids / sizeof nginx_pids[0])) return 1;
    snprintf(out->dir, sizeof out->dir, "%s/tls", th_tmpdir());
    out->port = th_free_port();
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/tls-fixture' '%s' %d%s", COURIER_SOURCE_DIR, out->dir, out->port,
             h2 == 2 ? " h2c" : h2 ? " h2" : "");
    if (system(cmd) != 0) return 1;
    char conf[700], log[700];
    snprintf(conf, sizeof conf, "%s/nginx.conf", out->dir);
    snprintf(log, sizeof log, "%s/error.log", out->dir);
    char *argv[] = {(char *)nginx, "-p", out->dir, "-e", log, "-c", conf, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, nginx, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return 1;
    if (nginx_count == 0) atexit(stop_nginx);
    nginx_pids[nginx_count++] = pid;
    for (int i = 0; i < 1000 && !th_can_connect(out->port); i++) usleep(10000);
    return th_can_connect(out->port) ? 0 : 1;
}

const char *th_nginx_file(const th_nginx *n, const char *name) {
    static char paths[8][700];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 700, "%s/%s", n->dir, name);
    return p;
}

/* ---- Redis ----------------------------------------------------------------------------------- */

static char th_redis_dir[600];
static char th_redis_buf[300];
static pid_t th_redis_owner;

static int th_redis_fixture(const char *verb) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/redis-fixture' %s '%s' >/dev/null", COURIER_SOURCE_DIR, verb,
             th_redis_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* At exit, without a shell (under TSan a fork at exit may not run): SIGTERM to the pid the
 * fixture wrote, wait for it to go (up to 10 s), then SIGKILL. */
static void th_redis_atexit(void) {
    if (th_redis_owner != getpid() || !th_redis_dir[0]) return;
    char path[700];
    snprintf(path, sizeof path, "%s/redis.pid", th_redis_dir);
    FILE *f = fopen(path, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1) pid = 0;
        fclose(f);
    }
    if (pid <= 0 || kill(pid, SIGTERM) != 0) return;
    for (int i = 0; i < 400 && kill(pid, 0) == 0; i++) usleep(25000);
    kill(pid, SIGKILL);
}

const char *th_redis_url(void) {
    if (th_redis_buf[0]) return th_redis_buf;
    if (!th_redis_dir[0]) snprintf(th_redis_dir, sizeof th_redis_dir, "%s/redis", th_tmpdir());
    if (th_redis_fixture("start") != 0) {
        th_fail(__FILE__, __LINE__, "redis-server did not start (scripts/redis-fixture; scripts/setup installs it)");
        return NULL;
    }
    if (!th_redis_owner) atexit(th_redis_atexit);
    th_redis_owner = getpid();
    char path[700];
    snprintf(path, sizeof path, "%s/redis.url", th_redis_dir);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(th_redis_buf, sizeof th_redis_buf, f)) {
        if (f) fclose(f);
        th_fail(__FILE__, __LINE__, "scripts/redis-fixture wrote no URL");
        return NULL;
    }
    fclose(f);
    th_redis_buf[strcspn(th_redis_buf, "\r\n")] = '\0';
    return th_redis_buf;
}

int th_redis_flush(void) {
#ifdef COURIER_TEST_REDIS
    const char *url = th_redis_url();
    const char *colon = url ? strrchr(url, ':') : NULL;
    if (!colon) return -1;
    redisContext *c = redisConnect("127.0.0.1", atoi(colon + 1));
    if (!c || c->err) {
        if (c) redisFree(c);
        return -1;
    }
    redisReply *r = redisCommand(c, "FLUSHDB");
    int rc = r && r->type == REDIS_REPLY_STATUS ? 0 : -1;
    if (r) freeReplyObject(r);
    redisFree(c);
    return rc;
#else
    return -1;
#endif
}

int th_redis_command(const char *command, long long *out) {
    if (out) *out = 0;
#ifdef COURIER_TEST_REDIS
    const char *url = th_redis_url();
    const char *colon = url ? strrchr(url, ':') : NULL;
    if (!colon) return -1;
    redisContext *c = redisConnect("127.0.0.1", atoi(colon + 1));
    if (!c || c->err) {
        if (c) redisFree(c);
        return -1;
    }
    redisReply *r = redisCommand(c, command); /* (no % in the tests' commands: a plain format) */
    int rc = r && r->type != REDIS_REPLY_ERROR ? 0 : -1;
    if (r && out) *out = r->type == REDIS_REPLY_INTEGER ? r->integer : r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : 0;
    if (r) freeReplyObject(r);
    redisFree(c);
    return rc;
#else
    (void)command;
    return -1;
#endif
}

int th_redis_stop(void) { return th_redis_dir[0] ? th_redis_fixture("stop") : 0; }

int th_redis_restart(void) { return th_redis_dir[0] ? th_redis_fixture("restart") : -1; }

int th_redis_kill(void) { return th_redis_dir[0] ? th_redis_fixture("kill") : -1; }

static char th_cluster_dir[600];
static char th_cluster_buf[300];
static pid_t th_cluster_owner;
static int th_cluster_ports[6];

static void th_cluster_atexit(void) {
    if (th_cluster_owner != getpid() || !th_cluster_dir[0]) return;
    /* The cache's tests on a cluster (COURIER_TEST_CACHE_REDIS=cluster): no command of theirs may
     * have crossed slots (a URL's entries and Vary record share a hash tag). */
    long long crossslot = 0;
#ifdef COURIER_TEST_REDIS
    for (int i = 0; i < 6 && getenv("COURIER_TEST_CACHE_REDIS"); i++) {
        redisContext *c = redisConnect("127.0.0.1", th_cluster_ports[i]);
        redisReply *r = c && !c->err ? redisCommand(c, "INFO errorstats") : NULL;
        const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "errorstat_CROSSSLOT:count=") : NULL;
        if (p) crossslot += atoll(p + 26);
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
    }
#endif
    int pids[6] = {0};
    for (int i = 0; i < 6; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/node%d/redis.pid", th_cluster_dir, i);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%d", &pids[i]) != 1) pids[i] = 0;
            fclose(f);
        }
        if (pids[i] > 0 && kill(pids[i], SIGTERM) != 0) pids[i] = 0;
    }
    for (int i = 0; i < 6; i++) {
        if (pids[i] <= 0) continue;
        for (int k = 0; k < 400 && kill(pids[i], 0) == 0; k++) usleep(25000);
        kill(pids[i], SIGKILL);
    }
    if (crossslot) {
        fprintf(stderr, "FAIL: the Redis Cluster answered CROSSSLOT %lld times\n", crossslot);
        _exit(1);
    }
}

const char *th_redis_cluster_url(void) {
    if (th_cluster_buf[0]) return th_cluster_buf;
    if (!th_cluster_dir[0]) snprintf(th_cluster_dir, sizeof th_cluster_dir, "%s/redis-cluster", th_tmpdir());
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/redis-fixture' cluster '%s' >/dev/null", COURIER_SOURCE_DIR, th_cluster_dir);
    if (!th_cluster_owner) atexit(th_cluster_atexit);
    th_cluster_owner = getpid();
    if (system(cmd) != 0) {
        th_fail(__FILE__, __LINE__, "the Redis Cluster did not start (scripts/redis-fixture cluster)");
        return NULL;
    }
    char path[700];
    snprintf(path, sizeof path, "%s/cluster.ports", th_cluster_dir);
    FILE *f = fopen(path, "r");
    for (int i = 0; f && i < 6; i++)
        if (fscanf(f, "%d", &th_cluster_ports[i]) != 1) th_cluster_ports[i] = 0;
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/redis.url", th_cluster_dir);
    f = fopen(path, "r");
    if (!f || !fgets(th_cluster_buf, sizeof th_cluster_buf, f)) {
        if (f) fclose(f);
        th_fail(__FILE__, __LINE__, "scripts/redis-fixture cluster wrote no URL");
        return NULL;
    }
    fclose(f);
    th_cluster_buf[strcspn(th_cluster_buf, "\r\n")] = '\0';
    return th_cluster_buf;
}

int th_redis_cluster_port(int i) { return i >= 0 && i < 6 ? th_cluster_ports[i] : 0; }

const char *th_redis_cluster_dir(void) { return th_cluster_dir[0] ? th_cluster_dir : NULL; }

int th_redis_cluster_node(int i, const char *verb) {
    if (!th_cluster_dir[0]) return -1;
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/redis-fixture' %s '%s/node%d' >/dev/null", COURIER_SOURCE_DIR, verb,
             th_cluster_dir, i);
    return system(cmd) == 0 ? 0 : -1;
}

int th_redis_cluster_flush(void) {
#ifdef COURIER_TEST_REDIS
    if (!th_redis_cluster_url()) return -1;
    int rc = 0;
    for (int i = 0; i < 6; i++) {
        redisContext *c = redisConnect("127.0.0.1", th_cluster_ports[i]);
        if (!c || c->err) { /* a node killed by the test */
            if (c) redisFree(c);
            continue;
        }
        redisReply *role = redisCommand(c, "ROLE");
        bool master = role && role->type == REDIS_REPLY_ARRAY && role->elements && strcmp(role->element[0]->str, "master") == 0;
        if (role) freeReplyObject(role);
        if (master) {
            redisReply *r = redisCommand(c, "FLUSHALL");
            if (!r || r->type != REDIS_REPLY_STATUS) rc = -1;
            if (r) freeReplyObject(r);
        }
        redisFree(c);
    }
    return rc;
#else
    return -1;
#endif
}

int th_redis_built(void) {
#ifdef COURIER_TEST_REDIS
    return 1;
#else
    return 0;
#endif
}
