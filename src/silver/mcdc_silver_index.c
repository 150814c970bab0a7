/*
 * mcdc_silver_index.c - silver's key index (see mcdc_silver.h): one file per
 * version the merge committed, _mssql_cdc_index/<version, 20 digits>.idx
 * in the table's directory.
 *
 * Why it stays true whatever else writes the table: an entry describes one
 * data file by its path, and Delta data files are never changed once
 * written (a DELETE or UPDATE of delta-rs or Spark removes files and adds
 * new ones). So an entry is right for as long as its path is live, in any
 * version; paths no longer live are ignored, and live files it does not
 * know are read to make their entries (mcdc_silver_merge.c). Even an index
 * file whose commit never happened is right about every file still live.
 *
 * Layout, little-endian:
 *   "MCDCSIX1"  u32 format (1)
 *   u32 keys    per key: u16 name bytes, name, u8 type (mcdc_type_id)
 *   i64 built_at (the version it was written for)
 *   u64 entries per entry: u16 path bytes, path, i64 rows,
 *               u32 + min key, u32 + max key, u8 flags (1 sorted,
 *               2 min_lsn follows), [10 bytes min_lsn], u64 bloom bits
 *               (a multiple of 64), its words
 *   u32 CRC-32 of everything before it
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "mcdc_silver.h"

#define MAGIC "MCDCSIX1"
#define FORMAT 1
#define FLAG_SORTED 1u
#define FLAG_MIN_LSN 2u
/* A bloom filter of more bits than this is no index of ours. */
#define BLOOM_BITS_MAX (1ULL << 40)

void silver_entry_clear(silver_entry *e) {
    if (e == NULL) return;
    mcdc_free(e->path);
    mcdc_free(e->min_key);
    mcdc_free(e->max_key);
    silver_bloom_free(&e->bloom);
    memset(e, 0, sizeof *e);
}

void silver_index_clear(silver_index *ix) {
    if (ix == NULL) return;
    for (int32_t i = 0; ix->key_names && i < ix->n_keys; i++) mcdc_free(ix->key_names[i]);
    mcdc_free(ix->key_names);
    mcdc_free(ix->key_types);
    for (int64_t i = 0; i < ix->n; i++) silver_entry_clear(&ix->entries[i]);
    mcdc_free(ix->entries);
    memset(ix, 0, sizeof *ix);
}

/* ---- encoding -------------------------------------------------------------------- */

static int put(mcdc_buf *b, const void *p, size_t n, mcdc_error *err) {
    return mcdc_buf_append(b, p, n, err);
}
static int put_u16(mcdc_buf *b, uint16_t v, mcdc_error *err) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    return put(b, x, 2, err);
}
static int put_u32(mcdc_buf *b, uint32_t v, mcdc_error *err) {
    uint8_t x[4];
    for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    return put(b, x, 4, err);
}
static int put_u64(mcdc_buf *b, uint64_t v, mcdc_error *err) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    return put(b, x, 8, err);
}

int silver_index_encode(mcdc_buf *out, const silver_index *ix, mcdc_error *err) {
    int rc = put(out, MAGIC, 8, err);
    if (rc == MCDC_OK) rc = put_u32(out, FORMAT, err);
    if (rc == MCDC_OK) rc = put_u32(out, (uint32_t)ix->n_keys, err);
    for (int32_t k = 0; rc == MCDC_OK && k < ix->n_keys; k++) {
        size_t l = strlen(ix->key_names[k]);
        rc = put_u16(out, (uint16_t)l, err);
        if (rc == MCDC_OK) rc = put(out, ix->key_names[k], l, err);
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, (uint8_t)ix->key_types[k], err);
    }
    if (rc == MCDC_OK) rc = put_u64(out, (uint64_t)ix->built_at, err);
    if (rc == MCDC_OK) rc = put_u64(out, (uint64_t)ix->n, err);
    for (int64_t i = 0; rc == MCDC_OK && i < ix->n; i++) {
        const silver_entry *e = &ix->entries[i];
        size_t l = strlen(e->path);
        rc = put_u16(out, (uint16_t)l, err);
        if (rc == MCDC_OK) rc = put(out, e->path, l, err);
        if (rc == MCDC_OK) rc = put_u64(out, (uint64_t)e->rows, err);
        if (rc == MCDC_OK) rc = put_u32(out, e->min_len, err);
        if (rc == MCDC_OK && e->min_len) rc = put(out, e->min_key, e->min_len, err);
        if (rc == MCDC_OK) rc = put_u32(out, e->max_len, err);
        if (rc == MCDC_OK && e->max_len) rc = put(out, e->max_key, e->max_len, err);
        uint8_t flags = (uint8_t)((e->sorted ? FLAG_SORTED : 0) | (e->has_min_lsn ? FLAG_MIN_LSN : 0));
        if (rc == MCDC_OK) rc = mcdc_buf_append_byte(out, flags, err);
        if (rc == MCDC_OK && e->has_min_lsn) rc = put(out, e->min_lsn, 10, err);
        if (rc == MCDC_OK) rc = put_u64(out, e->bloom.nbits, err);
        for (uint64_t w = 0; rc == MCDC_OK && w < e->bloom.nbits / 64; w++)
            rc = put_u64(out, e->bloom.words[w], err);
    }
    if (rc == MCDC_OK) {
        uint32_t crc = (uint32_t)crc32(0L, (const Bytef *)out->data, (uInt)out->len);
        rc = put_u32(out, crc, err);
    }
    return rc;
}

/* ---- decoding ---------------------------------------------------------------------- */

typedef struct {
    const uint8_t *p;
    size_t n, at;
    const char *what; /* the first thing found wrong */
} rd;

static bool take(rd *r, void *dst, size_t n, const char *what) {
    if (r->what) return false;
    if (n > r->n - r->at) {
        r->what = what;
        return false;
    }
    if (dst) memcpy(dst, r->p + r->at, n);
    r->at += n;
    return true;
}
static uint64_t get_le(rd *r, int bytes, const char *what) {
    uint8_t x[8] = {0};
    if (!take(r, x, (size_t)bytes, what)) return 0;
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | x[i];
    return v;
}

static int corrupt(mcdc_error *err, const char *what, size_t at) {
    return mcdc_error_set(err, MCDC_E_CORRUPT,
                          "silver key index: %s (at byte %zu); it is ignored and rebuilt from "
                          "the table's files",
                          what, at);
}

int silver_index_decode(silver_index *out, const uint8_t *p, size_t n, mcdc_error *err) {
    memset(out, 0, sizeof *out);
    if (n < 8 + 4 + 4 || memcmp(p, MAGIC, 8) != 0) return corrupt(err, "not an index file", 0);
    uint32_t want = (uint32_t)p[n - 4] | (uint32_t)p[n - 3] << 8 | (uint32_t)p[n - 2] << 16 |
                    (uint32_t)p[n - 1] << 24;
    if ((uint32_t)crc32(0L, (const Bytef *)p, (uInt)(n - 4)) != want)
        return corrupt(err, "its checksum does not match (a torn or altered file)", n - 4);
    rd r = {p, n - 4, 8, NULL};
    if (get_le(&r, 4, "truncated format") != FORMAT) return corrupt(err, "an unknown format", 8);
    uint64_t nk = get_le(&r, 4, "truncated key count");
    if (nk == 0 || nk > SILVER_KEYS_MAX) return corrupt(err, "a bad number of key columns", r.at);
    out->n_keys = (int32_t)nk;
    out->key_names = mcdc_calloc(nk, sizeof *out->key_names);
    out->key_types = mcdc_calloc(nk, sizeof *out->key_types);
    if (!out->key_names || !out->key_types) {
        silver_index_clear(out);
        return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    }
    int rc = MCDC_OK;
    for (uint64_t k = 0; rc == MCDC_OK && k < nk && !r.what; k++) {
        size_t l = (size_t)get_le(&r, 2, "truncated key name");
        char *name = mcdc_calloc(l + 1, 1);
        if (name == NULL) {
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            break;
        }
        take(&r, name, l, "truncated key name");
        out->key_names[k] = name;
        if (!r.what && (l == 0 || memchr(name, 0, l))) r.what = "a bad key name";
        uint8_t t = (uint8_t)get_le(&r, 1, "truncated key type");
        if (!silver_key_type_ok((mcdc_type_id)t) && !r.what) r.what = "a bad key type";
        out->key_types[k] = (mcdc_type_id)t;
    }
    out->built_at = (int64_t)get_le(&r, 8, "truncated version");
    uint64_t ne = get_le(&r, 8, "truncated entry count");
    if (!r.what && ne > SILVER_INDEX_FILES_MAX) r.what = "too many entries";
    /* every entry takes at least 39 bytes: a count beyond that is a lie */
    if (!r.what && ne > (r.n - r.at) / 39 + 1) r.what = "more entries than bytes";
    if (rc == MCDC_OK && !r.what && ne) {
        out->entries = mcdc_calloc(ne, sizeof *out->entries);
        if (out->entries == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        out->cap = (int64_t)ne;
    }
    for (uint64_t i = 0; rc == MCDC_OK && i < ne && !r.what; i++) {
        silver_entry *e = &out->entries[out->n];
        size_t l = (size_t)get_le(&r, 2, "truncated path");
        if (!r.what && (l == 0 || l > r.n - r.at)) r.what = "a bad path";
        if (r.what) break;
        if ((e->path = mcdc_calloc(l + 1, 1)) == NULL) {
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            break;
        }
        out->n++;
        take(&r, e->path, l, "truncated path");
        if (!r.what && memchr(e->path, 0, l)) r.what = "a path holding a NUL byte";
        e->rows = (int64_t)get_le(&r, 8, "truncated row count");
        if (!r.what && e->rows < 0) r.what = "a negative row count";
        for (int side = 0; side < 2 && !r.what; side++) {
            uint64_t kl = get_le(&r, 4, "truncated key");
            if (!r.what && (kl > SILVER_KEY_BYTES_MAX || kl > r.n - r.at)) r.what = "a bad key length";
            if (r.what || kl == 0) continue;
            uint8_t *k = mcdc_malloc(kl);
            if (k == NULL) {
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
                break;
            }
            take(&r, k, kl, "truncated key");
            if (side == 0) e->min_key = k, e->min_len = (uint32_t)kl;
            else e->max_key = k, e->max_len = (uint32_t)kl;
        }
        if (!r.what && e->rows > 0 && (e->min_key == NULL || e->max_key == NULL))
            r.what = "an entry with rows but no key range";
        if (!r.what && e->min_key &&
            silver_key_cmp(e->min_key, e->min_len, e->max_key, e->max_len) > 0)
            r.what = "an entry whose first key is after its last";
        uint8_t flags = (uint8_t)get_le(&r, 1, "truncated flags");
        if (!r.what && (flags & ~(FLAG_SORTED | FLAG_MIN_LSN))) r.what = "unknown flags";
        e->sorted = flags & FLAG_SORTED;
        e->has_min_lsn = flags & FLAG_MIN_LSN;
        if (e->has_min_lsn) take(&r, e->min_lsn, 10, "truncated min_lsn");
        uint64_t bits = get_le(&r, 8, "truncated bloom filter");
        if (!r.what && (bits % 64 || bits > BLOOM_BITS_MAX || bits / 8 > r.n - r.at))
            r.what = "a bad bloom filter size";
        if (rc == MCDC_OK && !r.what && bits) {
            e->bloom.words = mcdc_malloc(bits / 8);
            if (e->bloom.words == NULL) {
                rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
                break;
            }
            e->bloom.nbits = bits;
            for (uint64_t w = 0; w < bits / 64; w++) e->bloom.words[w] = get_le(&r, 8, "truncated bloom filter");
        }
        if (!r.what && i > 0 && strcmp(out->entries[out->n - 2].path, e->path) >= 0)
            r.what = "entries out of order";
    }
    if (rc == MCDC_OK && !r.what && r.at != r.n) r.what = "bytes after the last entry";
    if (rc == MCDC_OK && r.what) rc = corrupt(err, r.what, r.at);
    if (rc) silver_index_clear(out);
    return rc;
}

/* ---- entries ------------------------------------------------------------------------- */

static int by_path(const void *a, const void *b) {
    return strcmp(((const silver_entry *)a)->path, ((const silver_entry *)b)->path);
}

void silver_index_sort(silver_index *ix) {
    if (ix->n > 1) qsort(ix->entries, (size_t)ix->n, sizeof *ix->entries, by_path);
}

const silver_entry *silver_index_find(const silver_index *ix, const char *path) {
    int64_t lo = 0, hi = ix->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ix->entries[mid].path, path);
        if (c == 0) return &ix->entries[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

int silver_index_add(silver_index *ix, silver_entry *e, mcdc_error *err) {
    if (ix->n == ix->cap) {
        int64_t cap = ix->cap ? ix->cap * 2 : 16;
        silver_entry *v = mcdc_realloc(ix->entries, (size_t)cap * sizeof *v);
        if (v == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        ix->entries = v;
        ix->cap = cap;
    }
    ix->entries[ix->n++] = *e;
    memset(e, 0, sizeof *e);
    return MCDC_OK;
}

/* ---- the files --------------------------------------------------------------------- */

static bool is_index_name(const char *name) {
    size_t l = strlen(name);
    if (l != 24 || strcmp(name + 20, ".idx") != 0) return false;
    for (int i = 0; i < 20; i++)
        if (name[i] < '0' || name[i] > '9') return false;
    return true;
}

static bool same_keys(const silver_index *ix, const mcdc_schema *keys) {
    if (ix->n_keys != keys->n_fields) return false;
    for (int32_t k = 0; k < ix->n_keys; k++)
        if (strcmp(ix->key_names[k], keys->fields[k].name) != 0 ||
            ix->key_types[k] != keys->fields[k].type)
            return false;
    return true;
}

int silver_index_load(silver_index *out, mcdc_storage *st, const mcdc_schema *keys,
                      mcdc_error *err) {
    memset(out, 0, sizeof *out);
    mcdc_storage_listing l = {0};
    int rc = mcdc_storage_list(st, SILVER_INDEX_DIR, &l, err);
    const char *newest = NULL;
    for (size_t i = 0; rc == MCDC_OK && i < l.count; i++)
        if (is_index_name(l.entries[i].name)) newest = l.entries[i].name; /* sorted: the last */
    mcdc_buf b = {0};
    if (rc == MCDC_OK && newest) {
        char key[64];
        snprintf(key, sizeof key, "%s%s", SILVER_INDEX_DIR, newest);
        mcdc_error e = MCDC_ERROR_INIT;
        int r = mcdc_storage_get(st, key, (size_t)SILVER_INDEX_BYTES_MAX, &b, &e);
        if (r == MCDC_OK) r = silver_index_decode(out, (const uint8_t *)b.data, b.len, &e);
        if (r == MCDC_E_NOMEM) rc = mcdc_error_set(err, r, "%s", e.message);
        else if (r)
            mcdc_log(MCDC_LOG_WARN, "%s/%s: %s", st->root, key, e.message);
        else if (!same_keys(out, keys))
            silver_index_clear(out); /* built for other key columns */
    }
    mcdc_buf_free(&b);
    mcdc_storage_listing_free(&l);
    if (rc) silver_index_clear(out);
    return rc;
}

int silver_index_store(mcdc_storage *st, const silver_index *ix, int64_t version,
                       mcdc_error *err) {
    mcdc_buf b = {0};
    int rc = silver_index_encode(&b, ix, err);
    char key[64];
    snprintf(key, sizeof key, "%s%020lld.idx", SILVER_INDEX_DIR, (long long)version);
    if (rc == MCDC_OK) rc = mcdc_storage_put(st, key, b.data, b.len, err);
    mcdc_buf_free(&b);
    if (rc) return rc;
    /* Older ones are kept one deep (a reader of the previous version may
     * still use it); the rest go. */
    mcdc_storage_listing l = {0};
    if (mcdc_storage_list(st, SILVER_INDEX_DIR, &l, NULL) == MCDC_OK) {
        size_t idx = 0;
        for (size_t i = 0; i < l.count; i++) idx += is_index_name(l.entries[i].name);
        for (size_t i = 0, seen = 0; i < l.count; i++) {
            if (!is_index_name(l.entries[i].name)) continue;
            if (++seen + 2 > idx) break;
            char old[64];
            snprintf(old, sizeof old, "%s%s", SILVER_INDEX_DIR, l.entries[i].name);
            if (strcmp(old, key) != 0) mcdc_storage_delete(st, old, NULL);
        }
    }
    mcdc_storage_listing_free(&l);
    return MCDC_OK;
}
