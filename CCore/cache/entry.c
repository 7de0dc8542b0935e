/*
 * entry.c — a cached entry as every store keeps it (LMDB, store.c; Redis, store_redis.c): the value
 * layout below, its encoding and decoding (with the checksum), and a listing item made from it.
 */
#include "cache/store.h"

#include <stdlib.h>
#include <string.h>

/*
 * Value layout (host byte order; the magic catches a foreign byte order):
 *   0 u32 magic   4 u16 format   6 u16 header size (96)   8 u32 flags   12 i32 status
 *  16 i64 created   24 i64 expires   32 i64 discard   40 u64 seq
 *  48 u32 initial age   52 u32 stale-while-revalidate   56 u32 stale-if-error
 *  60 u32 key len   64 u32 method len   68 u32 url len   72 u32 etag len   76 u32 last-modified len
 *  80 u32 header block len   84 u32 checksum   88 u64 body len
 *  96 key, method, url, etag, last-modified, header block ("name\0value\0"...), body
 * The checksum (low 32 bits of a 64-bit hash of the payload seeded with a hash of bytes 0..83)
 * catches a torn or damaged value: such an entry reads as a miss and is replaced by the next write.
 */

static size_t header_block_len(const cr_store_put *p) {
    if (!p->headers) return p->entry.headers_len;
    size_t n = 0;
    for (size_t i = 0; i < p->headers->count; i++)
        n += strlen(p->headers->items[i].name) + 1 + strlen(p->headers->items[i].value) + 1;
    return n;
}

static size_t entry_size(const cr_store_put *p, size_t hb) {
    const cr_entry *e = &p->entry;
    return CR_ENTRY_HDR + e->key_len + e->method_len + e->url_len + e->etag_len + e->last_modified_len + hb +
           e->body_len;
}

bool cr_store_too_large(const cr_store_put *p, int64_t limit_bytes) {
    uint64_t limit = limit_bytes > 0 ? (uint64_t)limit_bytes : UINT64_MAX;
    /* One entry may take at most an eighth of the limit, so a large body never empties the cache. */
    return !p->remove_only && (uint64_t)entry_size(p, header_block_len(p)) + 16 > limit / 8;
}

static void w32(uint8_t *b, size_t off, uint32_t v) { memcpy(b + off, &v, 4); }
static void w64(uint8_t *b, size_t off, uint64_t v) { memcpy(b + off, &v, 8); }
static void entry_encode(const cr_store_put *p, size_t hb, uint8_t *out, size_t size) {
    const cr_entry *e = &p->entry;
    memset(out, 0, CR_ENTRY_HDR);
    w32(out, 0, CR_ENTRY_MAGIC);
    uint16_t fmt = CR_ENTRY_FORMAT, hs = CR_ENTRY_HDR;
    memcpy(out + 4, &fmt, 2);
    memcpy(out + 6, &hs, 2);
    w32(out, 8, e->flags);
    w32(out, 12, (uint32_t)e->status);
    w64(out, 16, (uint64_t)e->created_ms);
    w64(out, 24, (uint64_t)e->expires_ms);
    w64(out, 32, (uint64_t)e->discard_ms);
    w64(out, 40, e->seq);
    w32(out, 48, e->initial_age_s);
    w32(out, 52, e->swr_s);
    w32(out, 56, e->sie_s);
    w32(out, 60, (uint32_t)e->key_len);
    w32(out, 64, (uint32_t)e->method_len);
    w32(out, 68, (uint32_t)e->url_len);
    w32(out, 72, (uint32_t)e->etag_len);
    w32(out, 76, (uint32_t)e->last_modified_len);
    w32(out, 80, (uint32_t)hb);
    w64(out, 88, (uint64_t)e->body_len);
    uint8_t *q = out + CR_ENTRY_HDR;
#define PUT(ptr, len)                         \
    do {                                      \
        if (len) memcpy(q, (ptr), (len));     \
        q += (len);                           \
    } while (0)
    PUT(e->key, e->key_len);
    PUT(e->method, e->method_len);
    PUT(e->url, e->url_len);
    PUT(e->etag, e->etag_len);
    PUT(e->last_modified, e->last_modified_len);
    if (p->headers) {
        for (size_t i = 0; i < p->headers->count; i++) {
            const cr_kv *kv = &p->headers->items[i];
            size_t nl = strlen(kv->name) + 1, vl = strlen(kv->value) + 1;
            PUT(kv->name, nl);
            PUT(kv->value, vl);
        }
    } else {
        PUT(e->headers, e->headers_len);
    }
    PUT(e->body, e->body_len);
#undef PUT
    uint64_t seed = cr_hash64(out, 84, 0x636f7572696572ULL);
    w32(out, 84, (uint32_t)cr_hash64(out + CR_ENTRY_HDR, size - CR_ENTRY_HDR, seed));
}

size_t cr_entry_encoded_size(const cr_store_put *p) { return entry_size(p, header_block_len(p)); }

void cr_entry_encode(const cr_store_put *p, uint8_t *out, size_t size) { entry_encode(p, header_block_len(p), out, size); }

bool cr_entry_decode(const void *data, size_t len, bool verify, cr_entry *out) {
    const uint8_t *b = data;
    if (len < CR_ENTRY_HDR || cr_entry_u32(b, 0) != CR_ENTRY_MAGIC) return false;
    uint16_t fmt, hs;
    memcpy(&fmt, b + 4, 2);
    memcpy(&hs, b + 6, 2);
    if (fmt != CR_ENTRY_FORMAT || hs != CR_ENTRY_HDR) return false;
    memset(out, 0, sizeof *out);
    out->flags = cr_entry_u32(b, 8);
    out->status = (int)cr_entry_u32(b, 12);
    out->created_ms = (int64_t)cr_entry_u64(b, 16);
    out->expires_ms = (int64_t)cr_entry_u64(b, 24);
    out->discard_ms = (int64_t)cr_entry_u64(b, 32);
    out->seq = cr_entry_u64(b, 40);
    out->initial_age_s = cr_entry_u32(b, 48);
    out->swr_s = cr_entry_u32(b, 52);
    out->sie_s = cr_entry_u32(b, 56);
    out->key_len = cr_entry_u32(b, 60);
    out->method_len = cr_entry_u32(b, 64);
    out->url_len = cr_entry_u32(b, 68);
    out->etag_len = cr_entry_u32(b, 72);
    out->last_modified_len = cr_entry_u32(b, 76);
    out->headers_len = cr_entry_u32(b, 80);
    uint64_t body_len = cr_entry_u64(b, 88);
    uint64_t total = (uint64_t)CR_ENTRY_HDR + out->key_len + out->method_len + out->url_len + out->etag_len +
                     out->last_modified_len + out->headers_len;
    if (body_len > len || total + body_len != len) return false;
    out->body_len = (size_t)body_len;
    if (verify) {
        uint64_t seed = cr_hash64(b, 84, 0x636f7572696572ULL);
        if ((uint32_t)cr_hash64(b + CR_ENTRY_HDR, len - CR_ENTRY_HDR, seed) != cr_entry_u32(b, 84)) return false;
    }
    const char *q = (const char *)b + CR_ENTRY_HDR;
    out->key = q;
    q += out->key_len;
    out->method = q;
    q += out->method_len;
    out->url = q;
    q += out->url_len;
    out->etag = q;
    q += out->etag_len;
    out->last_modified = q;
    q += out->last_modified_len;
    out->headers = q;
    q += out->headers_len;
    out->body = (const uint8_t *)q;
    if (out->headers_len && out->headers[out->headers_len - 1] != '\0') return false;
    out->stored_size = len + 16;
    return true;
}

/* ---- listing items ---- */

int cr_list_item_fill(cr_list_item *it, const cr_entry *e, const uint8_t hash[16]) {
    memset(it, 0, sizeof *it);
    it->key = cr_strndup(e->key, e->key_len);
    it->url = cr_strndup(e->url, e->url_len);
    if (!it->key || !it->url) return COURIER_E_NO_MEMORY;
    cr_key_hex(hash, it->id);
    it->status = e->status;
    it->size = (int64_t)e->stored_size;
    it->created_ms = e->created_ms;
    it->expires_ms = e->expires_ms;
    it->discard_ms = e->discard_ms;
    return COURIER_OK;
}

void cr_list_items_free(cr_list_item *items, size_t count) {
    for (size_t i = 0; i < count; i++) {
        free(items[i].key);
        free(items[i].url);
    }
    free(items);
}
