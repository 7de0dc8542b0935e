/*
 * lmdb_file.c — a look at an LMDB data file from outside LMDB: before it is mapped, and at open.
 *
 * LMDB maps data.mdb and trusts its meta pages: a file cut short (a restored backup, a copy
 * interrupted, a disk that filled during a copy) whose newest meta page names pages past the end
 * of the file opens without an error, and the first read of such a page raises SIGBUS, which
 * takes the whole process down. The two meta pages are read here with pread (never mapped) and
 * the file's size compared with what the newer one claims; the cache and the journal move such a
 * store aside (a line on stderr) instead of opening it. Once open, the file is padded past its
 * last page and watched for getting shorter (cr_lmdb_file_pad, cr_lmdb_file_intact, below), and
 * every page LMDB would trust is walked (cr_lmdb_walk, at the end).
 *
 * The meta page layout (LMDB 0.9, data format 1, 64-bit): a 16-byte page header, then
 *   16 u32 magic 0xBEEFC0DE   20 u32 version (1)   24 address   32 size_t mapsize
 *   40 two MDB_db records of 48 bytes (the first's u32 md_pad holds the page size)
 *  136 pgno last_pg   144 txnid
 * The first meta page is at offset 0, the second at offset page size.
 */
#include "base/base.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LM_MAGIC 0xBEEFC0DEu
#define LM_OFF_MAGIC 16
#define LM_OFF_VERSION 20
#define LM_OFF_PSIZE 40
#define LM_OFF_LAST 136
#define LM_OFF_TXNID 144
#define LM_META_END 152
/* Pages past the end of the file taken for unwritten free pages, not a cut: 1/16 of the pages in
 * use, at least 4, at most 64 (3 of 133 seen after a full disk). */
static uint64_t loose_pages(uint64_t used_pages) {
    uint64_t n = used_pages / 16;
    return n < 4 ? 4 : n > 64 ? 64 : n;
}

static uint32_t rd32(const uint8_t *b) {
    uint32_t v;
    memcpy(&v, b, 4);
    return v;
}

static uint64_t rd64(const uint8_t *b) {
    uint64_t v;
    memcpy(&v, b, 8);
    return v;
}

int cr_lmdb_file_check(const char *dir, const char **why) {
    *why = NULL;
    if (sizeof(size_t) != 8) return 0; /* the layout above is the 64-bit one */
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/data.mdb", dir) >= (int)sizeof path) return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : errno; /* no file: a new store */
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int os = errno;
        close(fd);
        return os;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    }
    int rc = 0;
    if (st.st_size == 0) goto out; /* LMDB initializes an empty file */
    uint8_t m0[LM_META_END];
    ssize_t n = pread(fd, m0, sizeof m0, 0);
    if (n < 0) {
        rc = errno;
        goto out;
    }
    if (n < (ssize_t)sizeof m0 || rd32(m0 + LM_OFF_MAGIC) != LM_MAGIC) {
        *why = "its data file does not start with an LMDB meta page";
        goto out;
    }
    uint32_t psize = rd32(m0 + LM_OFF_PSIZE);
    if (psize < 512 || psize > 65536 || (psize & (psize - 1)) != 0) {
        *why = "its meta page names an impossible page size";
        goto out;
    }
    uint8_t m1[LM_META_END];
    n = pread(fd, m1, sizeof m1, psize);
    if (n < 0) {
        rc = errno;
        goto out;
    }
    const uint8_t *meta = m0;
    if (n == (ssize_t)sizeof m1 && rd32(m1 + LM_OFF_MAGIC) == LM_MAGIC &&
        rd64(m1 + LM_OFF_TXNID) > rd64(m0 + LM_OFF_TXNID))
        meta = m1;
    else if (n < (ssize_t)sizeof m1) {
        *why = "its data file is shorter than its two meta pages";
        goto out;
    }
    if (rd32(meta + LM_OFF_VERSION) != 1) goto out; /* another data format: LMDB itself says so */
    uint64_t last = rd64(meta + LM_OFF_LAST);
    if (last > (uint64_t)INT64_MAX / psize - 1) {
        *why = "its meta page names an impossible last page";
        goto out;
    }
    /* Pages at the end that the file does not have: either never written (LMDB counts pages that a
     * commit took from the end of the file and freed again, "loose" pages, in the last page without
     * writing them: seen after writes failed on a full disk, and after an eviction's commit), or
     * cut off (a restored backup, an interrupted copy). Nothing may map them while they are missing
     * (a read there is SIGBUS), and the size alone cannot tell the two apart: the file is padded
     * with a hole up to the meta page's last page, and the page walk at open (cr_lmdb_walk) judges
     * the pages the trees reach. A cut that took any of them leaves zero pages there, which the
     * walk reports as damage (the store is moved aside or kept aside); a shortfall of free pages
     * only opens as the store it is. Where the file cannot be written (a read-only file), the old
     * rule stands: a shortfall beyond a few pages is a cut. */
    int64_t want = (int64_t)((last + 1) * psize);
    if (st.st_size < want) {
        int wfd = open(path, O_WRONLY | O_CLOEXEC);
        bool padded = wfd >= 0 && ftruncate(wfd, (off_t)want) == 0;
        if (wfd >= 0) close(wfd);
        if (!padded && st.st_size + (int64_t)(loose_pages(last + 1) * psize) < want)
            *why = "its data file is shorter than its meta page says (truncated)";
    }
out:
    close(fd);
    return rc ? rc : *why ? MDB_INVALID : 0;
}

/*
 * Reading past the end of the file. LMDB checks that a page number is below the transaction's
 * next page (mdb_page_get: MDB_PAGE_NOTFOUND otherwise), and that a page reached from a branch
 * is a branch or a leaf (mdb_page_search_root: MDB_CORRUPTED otherwise), but it trusts the
 * offsets inside a page: a node offset (16 bits) and a key size (16 bits) of a damaged page can
 * point up to 128 KiB past the page's start. For one of the last pages of the file that is past
 * its end, where the map has no file behind it: SIGBUS. The file is padded at open with a hole
 * (ftruncate: no disk blocks) of LM_PAD bytes past its last used page, so such a read finds
 * zeros (which LMDB reports as MDB_CORRUPTED or the cache as a damaged entry) instead. The file
 * never shrinks afterwards (LMDB only writes pages), so pages damaged before the open stay
 * covered; pages LMDB writes later are whole.
 */
#define LM_PAD ((off_t)256 << 10)

/* The bytes of the pages LMDB uses, from the newest meta page (read through the map). */
static int used_bytes(MDB_env *env, off_t *used, off_t *psize) {
    MDB_envinfo info;
    MDB_stat st;
    int rc = mdb_env_info(env, &info);
    if (rc == 0) rc = mdb_env_stat(env, &st);
    if (rc) return rc;
    *psize = (off_t)st.ms_psize;
    *used = (off_t)(info.me_last_pgno + 1) * *psize;
    return 0;
}

/* Extends the file to `want` if it is shorter; the size it has then, or -1. */
static off_t pad_to(int fd, off_t want) {
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    if (st.st_size >= want) return st.st_size;
    return ftruncate(fd, want) == 0 ? want : -1;
}

int cr_lmdb_file_pad(struct MDB_env *env, int64_t *largest) {
    int fd = -1;
    off_t used = 0, psize = 0;
    int rc = mdb_env_get_fd(env, &fd);
    if (rc == 0) rc = used_bytes(env, &used, &psize);
    if (rc) return rc;
    off_t size = pad_to(fd, used + LM_PAD);
    if (size < 0) return errno;
    __atomic_store_n(largest, (int64_t)size, __ATOMIC_RELAXED);
    return 0;
}

/* The bytes of the pages the newer meta page counts, read from the file with pread, never through
 * the map: a reader checks while another thread of the process may be remapping it for a map that
 * grew (adopt_map_size in cache/store.c; mdb_env_info there read a page that was being unmapped:
 * SIGSEGV under load). 0 when the meta pages do not read. */
static off_t file_used_bytes(int fd) {
    uint8_t m0[LM_META_END], m1[LM_META_END];
    if (pread(fd, m0, sizeof m0, 0) != (ssize_t)sizeof m0 || rd32(m0 + LM_OFF_MAGIC) != LM_MAGIC) return 0;
    uint32_t psize = rd32(m0 + LM_OFF_PSIZE);
    if (psize < 512 || psize > 65536 || (psize & (psize - 1)) != 0) return 0;
    const uint8_t *meta = m0;
    if (pread(fd, m1, sizeof m1, psize) == (ssize_t)sizeof m1 && rd32(m1 + LM_OFF_MAGIC) == LM_MAGIC &&
        rd64(m1 + LM_OFF_TXNID) > rd64(m0 + LM_OFF_TXNID))
        meta = m1;
    uint64_t last = rd64(meta + LM_OFF_LAST);
    if (last > (uint64_t)INT64_MAX / psize - 1) return 0;
    return (off_t)((last + 1) * psize);
}

/* The file's size, without asking for its times: a stat that reads the change time marks it as
 * seen, so the file's next write stamps a fine-grained time and dirties the inode (Linux's
 * multigrain timestamps, 6.13 and later), which ext4 then writes synchronously inside the next
 * `fdatasync`. Run before every transaction, fstat cost the journal one more synchronous write in
 * ~96% of its commits (a raw LMDB commit: 23%, when the file grows), about 50 us of a single freeze's
 * ~350 (Benchmarks/README.md, "Frozen requests: freezes"). statx asked for the size alone does not
 * mark it. */
static int file_size(int fd, struct stat *st) {
#if defined(__linux__) && defined(STATX_SIZE)
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx) == 0 && (sx.stx_mask & STATX_SIZE)) {
        st->st_size = (off_t)sx.stx_size;
        return 0;
    }
#endif
    return fstat(fd, st);
}

int cr_lmdb_file_intact(struct MDB_env *env, int64_t *largest) {
    int fd = -1;
    struct stat st;
    /* The most seen is read before the size: another thread may record a larger size (the file
     * grew) between an fstat and the read, and a size older than the most seen would look cut
     * (stress and cache_store_test met it: a live store taken for cut under load). Read in this
     * order, a size can only be smaller than the most seen when the file got shorter. */
    int64_t seen = __atomic_load_n(largest, __ATOMIC_ACQUIRE);
    /* Only the file descriptor and its size: nothing here reads the map (see file_used_bytes). */
    if (mdb_env_get_fd(env, &fd) != 0 || file_size(fd, &st) != 0) return 0;
    /* LMDB only ever writes pages: a data file never gets shorter unless someone cut it. The size
     * is held against the most seen (the open padded it past the last page), not against the meta
     * page's last page: a commit leaves the pages it allocated and freed again (loose pages) unwritten,
     * and an eviction's commit can end with more of them than any fixed allowance (stress_test's
     * threads on one engine met that: a read then took a whole store for cut). */
    if ((int64_t)st.st_size >= seen) {
        while (seen < (int64_t)st.st_size &&
               !__atomic_compare_exchange_n(largest, &seen, (int64_t)st.st_size, false, __ATOMIC_RELEASE,
                                            __ATOMIC_ACQUIRE)) {
        }
        return 0;
    }
    /* Cut short: the missing pages read as zeros for every process still reading them, up to the
     * most seen or the meta page's last page and the open's padding, whichever is further. */
    off_t used = file_used_bytes(fd);
    pad_to(fd, (off_t)seen > used + LM_PAD ? (off_t)seen : used + LM_PAD);
    return MDB_CORRUPTED;
}

/*
 * The records at the ends of a tree, by the shapes a store writes (the page walk below checks
 * what LMDB needs; this what the store needs of its first and last records): the cache's trees
 * and the journal's names are looked at when a store opens, before anything is written.
 */
int cr_lmdb_check_ends(struct MDB_txn *txn, unsigned dbi, bool (*ok)(const struct MDB_val *k, const struct MDB_val *v)) {
    MDB_cursor *c = NULL;
    int rc = mdb_cursor_open(txn, dbi, &c);
    static const MDB_cursor_op ends[] = {MDB_FIRST, MDB_LAST};
    for (size_t e = 0; e < 2 && rc == 0; e++) {
        MDB_val k, v;
        rc = mdb_cursor_get(c, &k, &v, ends[e]);
        if (rc == 0 && ok && !ok(&k, &v)) rc = MDB_CORRUPTED;
    }
    if (c) mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* A named database's record: a name, and LMDB's 48-byte description of the database. */
static bool name_record_ok(const MDB_val *k, const MDB_val *v) {
    return k->mv_size > 0 && k->mv_size <= 511 && v->mv_size == 48;
}

int cr_lmdb_check_names(struct MDB_txn *txn) {
    MDB_dbi main_db;
    int rc = mdb_dbi_open(txn, NULL, 0, &main_db);
    return rc ? rc : cr_lmdb_check_ends(txn, main_db, name_record_ok);
}

/*
 * The page walk (what mdb_chk does, for the pages LMDB would trust). LMDB checks the number and
 * the kind of a page it reaches, nothing inside it: a node offset, a key or data size, a branch's
 * child, an overflow page's count and the page numbers in the free list are used as they are
 * (mdb.c 0.9.24). A damaged page then makes LMDB read or write past the page: a write into its
 * copy of the page overruns the heap (ASan), its assertions abort (`mp_upper >= mp_lower` in
 * mdb_node_add), or a later transaction fails (MDB_BAD_TXN). So at open, under the writer lock
 * (no commit moves the pages meanwhile), every page reachable from the newer meta page is read
 * through a read-only map of our own, bounded by the file's size, and must be what LMDB writes:
 *   - its number in range (2 .. the meta page's last page, and inside the file), reached once
 *     (no page twice, none both in a tree and in the free list), its header naming that number;
 *   - its flags exactly a branch, a leaf or an overflow page (never "dirty": LMDB would write it
 *     in place), branches above the tree's depth, leaves at it (at most 32 levels, LMDB's cursor);
 *   - lower and upper bounds in order inside the page; every node inside [upper, page end), no two
 *     nodes overlapping, keys at most LMDB's largest, a leaf node's data no larger than LMDB keeps
 *     in a page (larger goes to overflow pages), node flags LMDB sets for that tree;
 *   - an overflow value's first page an overflow page whose count covers the value and stays in
 *     range; a named database's record 48 bytes, its flags LMDB's, its tree walked the same way;
 *   - the free list's records a transaction id and a counted list of page numbers in range.
 * Databases with duplicates (none here) are walked to their leaves; their duplicates are bounded
 * as a node's data, not walked. Values are not read (the cache checks its own).
 */
#define LM_HDR 16
#define LM_P_BRANCH 0x01
#define LM_P_LEAF 0x02
#define LM_P_OVERFLOW 0x04
#define LM_F_BIGDATA 0x01
#define LM_F_SUBDATA 0x02
#define LM_F_DUPDATA 0x04
#define LM_DUPSORT 0x04      /* MDB_DUPSORT in a database's flags */
#define LM_DB_FLAGS 0x7e     /* the flags a database may keep (REVERSEKEY .. REVERSEDUP) */
#define LM_MAX_DEPTH 32      /* LMDB's cursor stack */
#define LM_INVALID UINT64_MAX /* the root of an empty tree */

typedef struct lm_walk {
    const uint8_t *map;
    uint64_t last;     /* pages the meta page counts (free-list numbers must be below) */
    uint64_t readable; /* pages inside the file (tree pages must be below) */
    uint32_t psize;
    uint32_t nodemax;  /* the largest node LMDB keeps in a leaf */
    uint32_t maxkey;
    uint8_t *seen;     /* a bit a page */
    uint64_t *spans;   /* a page's nodes: start << 32 | end */
    const char *why;
} lm_walk;

enum { LM_TREE_FREE, LM_TREE_MAIN, LM_TREE_NAMED };

static uint16_t rd16(const uint8_t *b) {
    uint16_t v;
    memcpy(&v, b, 2);
    return v;
}

static int damaged(lm_walk *w, const char *why) {
    if (!w->why) w->why = why;
    return MDB_CORRUPTED;
}

/* Pages first .. first + n - 1, reached now: each for the first time. */
static int reach(lm_walk *w, uint64_t first, uint64_t n, uint64_t bound) {
    if (first < 2 || n == 0 || first >= bound || n > bound - first)
        return damaged(w, "a page number outside the file (the page walk at open)");
    for (uint64_t p = first; p < first + n; p++) {
        if (w->seen[p >> 3] & (1u << (p & 7))) return damaged(w, "a page reached twice (the page walk at open)");
        w->seen[p >> 3] |= (uint8_t)(1u << (p & 7));
    }
    return 0;
}

/* Sorts a page's node spans (a few dozen at most but for tiny keys; insertion sort: no calls). */
static void sort_spans(uint64_t *a, unsigned n) {
    for (unsigned i = 1; i < n; i++) {
        uint64_t x = a[i];
        unsigned j = i;
        for (; j > 0 && a[j - 1] > x; j--) a[j] = a[j - 1];
        a[j] = x;
    }
}

static int walk_tree(lm_walk *w, const uint8_t *db, int tree);

/* A value kept in overflow pages: its first page's header, and the pages it covers reached. */
static int walk_overflow(lm_walk *w, uint64_t pg, uint64_t dsize, const uint8_t **data) {
    if (pg < 2 || pg >= w->readable) return damaged(w, "an overflow page outside the file (the page walk at open)");
    const uint8_t *p = w->map + pg * w->psize;
    uint64_t need = (LM_HDR - 1 + dsize) / w->psize + 1, count = rd32(p + 12);
    if (rd64(p) != pg || rd16(p + 10) != LM_P_OVERFLOW || count < need)
        return damaged(w, "a damaged overflow page (the page walk at open)");
    int rc = reach(w, pg, count, w->readable);
    *data = p + LM_HDR;
    return rc;
}

/* A free-list record: a count of page numbers and at least that many, each in range. */
static int walk_free_record(lm_walk *w, uint16_t ksize, const uint8_t *data, uint64_t dsize) {
    uint64_t n = dsize >= 8 ? rd64(data) : 0;
    if (ksize != 8 || dsize < 8 || dsize % 8 || n > dsize / 8 - 1)
        return damaged(w, "a damaged record in LMDB's free list (the page walk at open)");
    for (uint64_t i = 1; i <= n; i++) {
        int rc = reach(w, rd64(data + 8 * i), 1, w->last);
        if (rc) return rc;
    }
    return 0;
}

static int walk_page(lm_walk *w, uint64_t pg, unsigned level, unsigned depth, int tree, uint16_t dbflags) {
    int rc = reach(w, pg, 1, w->readable);
    if (rc) return rc;
    const uint8_t *p = w->map + pg * w->psize;
    uint16_t flags = rd16(p + 10), lower = rd16(p + 12), upper = rd16(p + 14);
    bool branch = level < depth;
    if (rd64(p) != pg) return damaged(w, "a page whose header names another page (the page walk at open)");
    if (flags != (branch ? LM_P_BRANCH : LM_P_LEAF))
        return damaged(w, "a page of the wrong kind in a tree (the page walk at open)");
    if (lower < LM_HDR || lower > upper || upper > w->psize || (lower - LM_HDR) % 2)
        return damaged(w, "a page whose bounds are out of order (the page walk at open)");
    unsigned nkeys = (lower - LM_HDR) / 2u;
    /* LMDB asserts a branch has two keys (but in the free list, while it rebalances it) and
     * reads the first node of a leaf it lands on; it never commits an empty leaf (an empty tree's
     * root is "none"). */
    if (nkeys < (branch ? (tree == LM_TREE_FREE ? 1u : 2u) : 1u))
        return damaged(w, "a page with too few nodes (the page walk at open)");
    /* Every node inside [upper, page end), none overlapping. */
    for (unsigned i = 0; i < nkeys; i++) {
        uint32_t off = rd16(p + LM_HDR + 2 * i);
        if (off < upper || off + 8u > w->psize) return damaged(w, "a node outside its page (the page walk at open)");
        const uint8_t *n = p + off;
        uint32_t ksize = rd16(n + 6), nflags = rd16(n + 4);
        uint64_t dsize = branch ? 0 : (uint64_t)rd16(n) | (uint64_t)rd16(n + 2) << 16;
        uint64_t size = 8u + ksize + (branch ? 0 : nflags & LM_F_BIGDATA ? 8 : dsize);
        if (ksize > w->maxkey || (!branch && !(nflags & LM_F_BIGDATA) && size > w->nodemax) ||
            off + size > w->psize)
            return damaged(w, "a node larger than its page allows (the page walk at open)");
        w->spans[i] = (uint64_t)off << 32 | (off + size + 1) / 2 * 2;
    }
    sort_spans(w->spans, nkeys);
    for (unsigned i = 1; i < nkeys; i++)
        if ((w->spans[i] >> 32) < (w->spans[i - 1] & 0xffffffffu))
            return damaged(w, "nodes overlapping in a page (the page walk at open)");
    /* What the nodes point to. */
    for (unsigned i = 0; i < nkeys && rc == 0; i++) {
        const uint8_t *n = p + rd16(p + LM_HDR + 2 * i);
        uint16_t ksize = rd16(n + 6), nflags = rd16(n + 4);
        if (branch) {
            uint64_t child = (uint64_t)rd16(n) | (uint64_t)rd16(n + 2) << 16 | (uint64_t)nflags << 32;
            rc = walk_page(w, child, level + 1, depth, tree, dbflags);
            continue;
        }
        uint64_t dsize = (uint64_t)rd16(n) | (uint64_t)rd16(n + 2) << 16;
        const uint8_t *data = n + 8 + ksize;
        bool dups = dbflags & LM_DUPSORT;
        if (nflags & ~(LM_F_BIGDATA | LM_F_SUBDATA | LM_F_DUPDATA) ||
            ((nflags & LM_F_BIGDATA) && (nflags & ~LM_F_BIGDATA)) || ((nflags & LM_F_DUPDATA) && !dups) ||
            (nflags == LM_F_SUBDATA && tree != LM_TREE_MAIN) || ((nflags & LM_F_SUBDATA) && dsize != 48))
            return damaged(w, "a node with flags LMDB does not write there (the page walk at open)");
        if (nflags & LM_F_BIGDATA) rc = walk_overflow(w, rd64(data), dsize, &data);
        if (rc == 0 && tree == LM_TREE_FREE) rc = walk_free_record(w, ksize, data, dsize);
        else if (rc == 0 && nflags == LM_F_SUBDATA) rc = walk_tree(w, data, LM_TREE_NAMED);
    }
    return rc;
}

/* A tree from its 48-byte description (flags at 4, depth at 6, root at 40). */
static int walk_tree(lm_walk *w, const uint8_t *db, int tree) {
    uint16_t flags = rd16(db + 4), depth = rd16(db + 6);
    uint64_t root = rd64(db + 40);
    if (flags & ~LM_DB_FLAGS) return damaged(w, "a database with flags LMDB does not keep (the page walk at open)");
    if (root == LM_INVALID) return 0;
    if (depth == 0 || depth > LM_MAX_DEPTH) return damaged(w, "a tree of an impossible depth (the page walk at open)");
    return walk_page(w, root, 1, depth, tree, flags);
}

int cr_lmdb_walk(struct MDB_env *env, const char **why) {
    *why = NULL;
    if (sizeof(size_t) != 8) return 0; /* the layout above is the 64-bit one */
    int fd = -1;
    MDB_stat ms;
    struct stat st;
    int rc = mdb_env_get_fd(env, &fd);
    if (rc == 0) rc = mdb_env_stat(env, &ms);
    if (rc) return rc;
    if (fstat(fd, &st) != 0) return errno;
    lm_walk w = {.psize = ms.ms_psize, .maxkey = (uint32_t)mdb_env_get_maxkeysize(env)};
    /* LMDB's me_nodemax: half a page's room, even, less one pointer. */
    w.nodemax = (((w.psize - LM_HDR) / 2) & ~1u) - 2;
    if ((uint64_t)st.st_size < 2 * (uint64_t)w.psize) return 0; /* not initialized yet */
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) return errno;
    w.map = map;
    /* The newer meta page: the one this environment's transactions start from (the caller holds
     * the writer lock, so no commit changes it meanwhile). */
    const uint8_t *meta = w.map;
    if (rd64(w.map + w.psize + LM_OFF_TXNID) > rd64(w.map + LM_OFF_TXNID)) meta = w.map + w.psize;
    w.last = rd64(meta + LM_OFF_LAST) + 1;
    w.readable = (uint64_t)st.st_size / w.psize;
    if (w.readable > w.last) w.readable = w.last;
    w.seen = calloc((size_t)(w.last / 8 + 1), 1);
    w.spans = malloc((w.psize / 2) * sizeof *w.spans);
    if (w.last > (uint64_t)INT64_MAX / w.psize) rc = damaged(&w, "its meta page names an impossible last page");
    else if (!w.seen || !w.spans) rc = ENOMEM;
    else if ((rc = walk_tree(&w, meta + LM_OFF_PSIZE, LM_TREE_FREE)) == 0) /* the meta's two trees */
        rc = walk_tree(&w, meta + LM_OFF_PSIZE + 48, LM_TREE_MAIN);
    free(w.seen);
    free(w.spans);
    munmap(map, (size_t)st.st_size);
    *why = w.why;
    return rc;
}

/* ---- the marker of a store that has opened once ------------------------------------------------ */

static int size_of(const char *dir, const char *name, off_t *size) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path) return -1;
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    *size = st.st_size;
    return 0;
}

bool cr_lmdb_data_lost(const char *dir, const char *marker) {
    off_t marker_size = 0, data_size = 0;
    if (size_of(dir, marker, &marker_size) != 0) return false; /* never opened: a fresh store */
    return size_of(dir, "data.mdb", &data_size) != 0 || data_size == 0;
}

void cr_lmdb_mark(const char *dir, const char *marker, const char *text) {
    off_t size;
    if (size_of(dir, marker, &size) == 0) return;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, marker) >= (int)sizeof path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return;
    ssize_t w = write(fd, text, strlen(text));
    (void)w;
    fsync(fd);
    close(fd);
}
