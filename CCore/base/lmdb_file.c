/*
 * lmdb_file.c — a look at an LMDB data file before LMDB maps it.
 *
 * LMDB maps data.mdb and trusts its meta pages: a file cut short (a restored backup, a copy
 * interrupted, a disk that filled during a copy) whose newest meta page names pages past the end
 * of the file opens without an error, and the first read of such a page raises SIGBUS, which
 * takes the whole process down. The two meta pages are read here with pread (never mapped) and
 * the file's size compared with what the newer one claims; the cache and the journal move such a
 * store aside (a line on stderr) instead of opening it.
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
#include <unistd.h>

#define LM_MAGIC 0xBEEFC0DEu
#define LM_OFF_MAGIC 16
#define LM_OFF_VERSION 20
#define LM_OFF_PSIZE 40
#define LM_OFF_LAST 136
#define LM_OFF_TXNID 144
#define LM_META_END 152

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
    if (st.st_size < (int64_t)((last + 1) * psize)) *why = "its data file is shorter than its meta page says (truncated)";
out:
    close(fd);
    return rc ? rc : *why ? MDB_INVALID : 0;
}
