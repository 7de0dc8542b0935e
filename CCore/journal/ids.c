/*
 * ids.c — what the journal's ids and claims are made of, with no LMDB: random bytes and hex (a
 * generated freeze id, an Idempotency-Key, a journal's nonce), and who a process is (its start time
 * in /proc/<pid>/stat, the boot id), which a claim's owner records and the scan checks.
 */
#include "journal/journal_internal.h"

#if defined(__APPLE__)
/* macOS has no getrandom: arc4random_buf (stdlib.h) fills the buffer and never fails. */
static ssize_t getrandom(void *buf, size_t n, unsigned flags) {
    (void)flags;
    arc4random_buf(buf, n);
    return (ssize_t)n;
}
#else
#include <sys/random.h>
#endif

void cj_random_bytes(void *out, size_t n) {
    uint8_t *p = out;
    while (n) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            /* No entropy source: time and address bits, still unique enough for ids. */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)(uintptr_t)p ^
                         ((uint64_t)getpid() << 40);
            for (; n; n--, p++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *p = (uint8_t)x;
            }
            return;
        }
        p += got;
        n -= (size_t)got;
    }
}

/* 64 bits from a per-thread splitmix64 sequence seeded once from the system's random source (a
 * bijection of a counter: never repeats within a thread; random seeds keep threads and processes
 * apart). Cheaper than a system call per id on the freeze path. */
static uint64_t random64(void) {
    static _Thread_local uint64_t state;
    static _Thread_local int seeded;
    if (!seeded) {
        cj_random_bytes(&state, sizeof state);
        seeded = 1;
    }
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* 32 lowercase hex digits of 128 random bits. */
void cj_random_hex(char out[33]) {
    static const char hex[] = "0123456789abcdef";
    uint8_t b[16];
    uint64_t a = random64(), c = random64();
    memcpy(b, &a, 8);
    memcpy(b + 8, &c, 8);
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[32] = '\0';
}

/* Reads /proc/<pid>/stat: the state letter and the start time. -1 when the process is absent. */
int cj_proc_stat(long pid, char *state, uint64_t *start) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT || errno == ESRCH ? -1 : -2;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p || !p[1] || !p[2]) return -2;
    p += 2; /* field 3: state */
    *state = *p;
    int field = 3;
    while (*p && field < 22) {
        if (*p == ' ') field++;
        p++;
    }
    *start = field == 22 ? strtoull(p, NULL, 10) : 0;
    return 0;
}

uint64_t cj_boot_hash(void) {
    char buf[64];
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    if (n <= 0) return 0;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) n--;
    return cr_fnv1a64(buf, (size_t)n) | 1;
}
