/*
 * lmdb_file.c — a look at an LMDB data file before LMDB maps it.
 *
 * LMDB maps data.mdb and trusts its meta pages: a file cut short (a restored backup, a copy
 * interrupted, a disk that filled during a copy) whose newest meta page names pages past the end
 * of the file opens without an error, and the first read of such a page raises SIGBUS, which
 * takes the whole process down. The two meta pages are read here with pread (never mapped) and
 * the file's size compared with what the newer one claims; the cache and the journal move such a
 * store aside (a line on stderr) instead of opening it. Once open, the file is padded past its
 * last page and watched for getting shorter (cr_lmdb_file_pad, cr_lmdb_file_intact, below).
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
#include <sys/stat.h>
#include <stdbool.h>
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
    /* A few pages at the end may never have been written: LMDB counts pages that a transaction took
     * from the end of the file and freed again ("loose" pages, seen after writes failed on a full
     * disk) in the last page but does not write them. Nothing reads them; the open pads them. */
    if (st.st_size + (int64_t)(loose_pages(last + 1) * psize) < (int64_t)((last + 1) * psize))
        *why = "its data file is shorter than its meta page says (truncated)";
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

int cr_lmdb_file_intact(struct MDB_env *env, int64_t *largest) {
    int fd = -1;
    off_t used = 0, psize = 0;
    struct stat st;
    /* The meta page before the size: a commit (of any process) writes its pages, which extends
     * the file, before the meta page that names them, so a size read after it is never short of
     * it but for a few unwritten free pages (loose_pages, see cr_lmdb_file_check). */
    if (mdb_env_get_fd(env, &fd) != 0 || used_bytes(env, &used, &psize) != 0 || fstat(fd, &st) != 0) return 0;
    int64_t seen = __atomic_load_n(largest, __ATOMIC_RELAXED);
    /* LMDB only ever writes pages: a data file never gets shorter unless someone cut it. */
    if ((int64_t)st.st_size >= seen && st.st_size + (off_t)loose_pages((uint64_t)(used / psize)) * psize >= used) {
        while (seen < (int64_t)st.st_size &&
               !__atomic_compare_exchange_n(largest, &seen, (int64_t)st.st_size, false, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED)) {
        }
        return 0;
    }
    /* Cut short: the missing pages read as zeros for every process still reading them. */
    pad_to(fd, (off_t)seen > used + LM_PAD ? (off_t)seen : used + LM_PAD);
    return MDB_CORRUPTED;
}

/*
 * The records at the ends of a tree. LMDB checks the kind of a page it reaches, not what the page
 * holds: a damaged page (junk, or zeros read through the padding) gives records of impossible
 * shapes, and a write into such a page overruns LMDB's copy of it. The first and last records
 * of the trees a commit starts from (the main database, LMDB's free list) are looked at when a
 * store opens, before anything is written.
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

/* A free-list record: a transaction id, then a count of page numbers and at least that many. */
static bool free_record_ok(const MDB_val *k, const MDB_val *v) {
    size_t n = 0;
    if (k->mv_size != sizeof(size_t) || v->mv_size < sizeof n || v->mv_size % sizeof n) return false;
    memcpy(&n, v->mv_data, sizeof n);
    return n < v->mv_size / sizeof n;
}

/* A named database's record: a name, and LMDB's 48-byte description of the database. */
static bool name_record_ok(const MDB_val *k, const MDB_val *v) {
    return k->mv_size > 0 && k->mv_size <= 511 && v->mv_size == 48;
}

int cr_lmdb_check_free_list(struct MDB_env *env) {
    MDB_txn *txn = NULL;
    int rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn); /* LMDB allows no cursor on it in a write */
    if (rc) return rc;
    rc = cr_lmdb_check_ends(txn, 0, free_record_ok);
    mdb_txn_abort(txn);
    return rc;
}

int cr_lmdb_check_names(struct MDB_txn *txn) {
    MDB_dbi main_db;
    int rc = mdb_dbi_open(txn, NULL, 0, &main_db);
    return rc ? rc : cr_lmdb_check_ends(txn, main_db, name_record_ok);
}
