/* mcdc_delta_dv.c - deletion vectors: see mcdc_delta_dv.h. */
#include "mcdc_delta_dv.h"

#include <roaring/roaring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "mcdc_limits.h"

/* ---- Z85 (rfc.zeromq.org/spec/32) ------------------------------------------ */

static const char k_z85[] =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

void mcdc_z85_encode(char *out, const uint8_t *in, size_t n) {
    MCDC_ASSERT(n % 4 == 0);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = (uint32_t)in[i] << 24 | (uint32_t)in[i + 1] << 16 |
                     (uint32_t)in[i + 2] << 8 | in[i + 3];
        for (int k = 4; k >= 0; k--) {
            out[o + (size_t)k] = k_z85[v % 85];
            v /= 85;
        }
        o += 5;
    }
    out[o] = 0;
}

bool mcdc_z85_decode(uint8_t *out, const char *in, size_t n) {
    /* The reverse table, built per call (85 stores): a table shared by
     * every caller would be process-wide state written by racing threads. */
    int8_t rev[256];
    memset(rev, -1, sizeof rev);
    for (int i = 0; i < 85; i++) rev[(unsigned char)k_z85[i]] = (int8_t)i;
    if (n % 5 != 0) return false;
    for (size_t i = 0, o = 0; i < n; i += 5, o += 4) {
        uint64_t v = 0;
        for (size_t k = 0; k < 5; k++) {
            int d = rev[(unsigned char)in[i + k]];
            if (d < 0) return false;
            v = v * 85 + (uint64_t)d;
        }
        if (v > UINT32_MAX) return false;
        out[o] = (uint8_t)(v >> 24);
        out[o + 1] = (uint8_t)(v >> 16);
        out[o + 2] = (uint8_t)(v >> 8);
        out[o + 3] = (uint8_t)v;
    }
    return true;
}

/* ---- descriptors ------------------------------------------------------------ */

static int bad_desc(mcdc_error *err, const char *what, const char *why) {
    return mcdc_error_set(err, MCDC_E_CORRUPT,
                          "%s: its deletionVector descriptor %s; the log was not written by a "
                          "Delta writer we can read (check the table with Spark)",
                          what, why);
}

/* A 'u' prefix: a directory name of letters and digits (Spark's random
 * prefixes); anything else could leave the table. */
static bool prefix_ok(const char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') ||
              (p[i] >= '0' && p[i] <= '9')))
            return false;
    return true;
}

int mcdc_dv_check_descriptor(char **out_uid, const mcdc_delta_dv *dv, const char *what,
                             mcdc_error *err) {
    *out_uid = NULL;
    const char *pod = dv->path_or_inline;
    if (dv->storage_type != 'u' && dv->storage_type != 'i' && dv->storage_type != 'p')
        return bad_desc(err, what, "has a storageType other than \"u\", \"i\" or \"p\"");
    if (pod == NULL || pod[0] == 0) return bad_desc(err, what, "has an empty pathOrInlineDv");
    if (dv->size_bytes < 12) /* magic + bucket count */
        return bad_desc(err, what, "has a sizeInBytes too small for a bitmap");
    if ((uint32_t)dv->size_bytes > MCDC_DV_BYTES_MAX)
        return bad_desc(err, what, "has a sizeInBytes above MCDC_DV_BYTES_MAX");
    if (dv->cardinality < 0) return bad_desc(err, what, "has a negative cardinality");
    if (dv->max_row_index < -1) return bad_desc(err, what, "has a negative maxRowIndex");
    size_t n = strlen(pod);
    if (dv->storage_type == 'i') {
        if (dv->offset >= 0) return bad_desc(err, what, "is inline but has an offset");
        if (n != ((size_t)dv->size_bytes + 3) / 4 * 5)
            return bad_desc(err, what, "is inline with a length that does not match sizeInBytes");
    } else {
        if (dv->offset < 1) return bad_desc(err, what, "is stored in a file but has no offset >= 1");
        if (dv->storage_type == 'u' &&
            (n < MCDC_DV_UUID_Z85_LEN || !prefix_ok(pod, n - MCDC_DV_UUID_Z85_LEN)))
            return bad_desc(err, what, "of type \"u\" is not <letters/digits prefix><20 Z85 chars>");
        if (dv->storage_type == 'u') {
            uint8_t id[16];
            if (!mcdc_z85_decode(id, pod + n - MCDC_DV_UUID_Z85_LEN, MCDC_DV_UUID_Z85_LEN))
                return bad_desc(err, what, "of type \"u\" does not end with a Z85 UUID");
        }
    }
    *out_uid = dv->offset >= 0
                   ? mcdc_asprintf("%c%s@%lld", dv->storage_type, pod, (long long)dv->offset)
                   : mcdc_asprintf("%c%s", dv->storage_type, pod);
    if (*out_uid == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    return MCDC_OK;
}

json_t *mcdc_dv_descriptor_json(const mcdc_delta_dv *dv) {
    json_t *o = json_object();
    char st[2] = {dv->storage_type, 0};
    bool bad = o == NULL;
    if (!bad) {
        bad |= json_object_set_new(o, "storageType", json_string(st)) != 0;
        bad |= json_object_set_new(o, "pathOrInlineDv", json_string(dv->path_or_inline)) != 0;
        if (dv->offset >= 0) bad |= json_object_set_new(o, "offset", json_integer(dv->offset)) != 0;
        bad |= json_object_set_new(o, "sizeInBytes", json_integer(dv->size_bytes)) != 0;
        bad |= json_object_set_new(o, "cardinality", json_integer(dv->cardinality)) != 0;
        if (dv->max_row_index >= 0)
            bad |= json_object_set_new(o, "maxRowIndex", json_integer(dv->max_row_index)) != 0;
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int mcdc_dv_file_key(char **out, const mcdc_delta_dv *dv, mcdc_error *err) {
    *out = NULL;
    if (dv->storage_type == 'p') {
        *out = mcdc_strdup(dv->path_or_inline);
    } else if (dv->storage_type == 'u') {
        size_t n = strlen(dv->path_or_inline);
        uint8_t id[16];
        if (n < MCDC_DV_UUID_Z85_LEN ||
            !mcdc_z85_decode(id, dv->path_or_inline + n - MCDC_DV_UUID_Z85_LEN,
                             MCDC_DV_UUID_Z85_LEN))
            return mcdc_error_set(err, MCDC_E_CORRUPT,
                                  "deletion vector %s does not end with a Z85 UUID",
                                  dv->path_or_inline);
        int pl = (int)(n - MCDC_DV_UUID_Z85_LEN);
        char u[37];
        static const char hx[] = "0123456789abcdef";
        for (int i = 0, o = 0; i < 16; i++) {
            if (i == 4 || i == 6 || i == 8 || i == 10) u[o++] = '-';
            u[o++] = hx[id[i] >> 4];
            u[o++] = hx[id[i] & 15];
        }
        u[36] = 0;
        *out = pl > 0 ? mcdc_asprintf("%.*s/deletion_vector_%s.bin", pl, dv->path_or_inline, u)
                      : mcdc_asprintf("deletion_vector_%s.bin", u);
    } else {
        return mcdc_error_set(err, MCDC_E_INVALID, "an inline deletion vector has no file");
    }
    if (*out == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    return MCDC_OK;
}

/* ---- bitmaps ---------------------------------------------------------------------- */

typedef struct dv_bucket {
    uint32_t key; /* the rows' upper 32 bits */
    roaring_bitmap_t *bm;
} dv_bucket;

struct mcdc_dv_bitmap {
    dv_bucket *b; /* ascending keys, no empty bucket after a parse */
    size_t n, cap;
};

int mcdc_dv_bitmap_create(mcdc_dv_bitmap **out, mcdc_error *err) {
    *out = mcdc_calloc(1, sizeof **out);
    return *out ? MCDC_OK : mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
}

void mcdc_dv_bitmap_free(mcdc_dv_bitmap *b) {
    if (b == NULL) return;
    for (size_t i = 0; i < b->n; i++) roaring_bitmap_free(b->b[i].bm);
    mcdc_free(b->b);
    mcdc_free(b);
}

static const dv_bucket *find_bucket(const mcdc_dv_bitmap *b, uint32_t key) {
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->b[mid].key < key) lo = mid + 1;
        else hi = mid;
    }
    return lo < b->n && b->b[lo].key == key ? &b->b[lo] : NULL;
}

/* The bucket of key, created (empty) in order when missing. */
static roaring_bitmap_t *bucket_for(mcdc_dv_bitmap *b, uint32_t key, mcdc_error *err) {
    const dv_bucket *hit = find_bucket(b, key);
    if (hit) return hit->bm;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1;
        dv_bucket *nb = mcdc_realloc(b->b, cap * sizeof *nb);
        if (nb == NULL) {
            mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
            return NULL;
        }
        b->b = nb;
        b->cap = cap;
    }
    roaring_bitmap_t *bm = roaring_bitmap_create();
    if (bm == NULL) {
        mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        return NULL;
    }
    size_t at = 0;
    while (at < b->n && b->b[at].key < key) at++;
    memmove(&b->b[at + 1], &b->b[at], (b->n - at) * sizeof *b->b);
    b->b[at] = (dv_bucket){key, bm};
    b->n++;
    return bm;
}

int mcdc_dv_bitmap_add(mcdc_dv_bitmap *b, uint64_t row, mcdc_error *err) {
    if (row >> 63)
        return mcdc_error_set(err, MCDC_E_INVALID, "row position %llu is beyond a deletion vector",
                              (unsigned long long)row);
    roaring_bitmap_t *bm = bucket_for(b, (uint32_t)(row >> 32), err);
    if (bm == NULL) return err ? err->code : MCDC_E_NOMEM;
    roaring_bitmap_add(bm, (uint32_t)row);
    return MCDC_OK;
}

int mcdc_dv_bitmap_add_all(mcdc_dv_bitmap *b, const mcdc_dv_bitmap *src, mcdc_error *err) {
    for (size_t i = 0; i < src->n; i++) {
        roaring_bitmap_t *bm = bucket_for(b, src->b[i].key, err);
        if (bm == NULL) return err ? err->code : MCDC_E_NOMEM;
        roaring_bitmap_or_inplace(bm, src->b[i].bm);
    }
    return MCDC_OK;
}

bool mcdc_dv_bitmap_contains(const mcdc_dv_bitmap *b, uint64_t row) {
    const dv_bucket *k = find_bucket(b, (uint32_t)(row >> 32));
    return k && roaring_bitmap_contains(k->bm, (uint32_t)row);
}

uint64_t mcdc_dv_bitmap_cardinality(const mcdc_dv_bitmap *b) {
    uint64_t n = 0;
    for (size_t i = 0; i < b->n; i++) n += roaring_bitmap_get_cardinality(b->b[i].bm);
    return n;
}

uint64_t mcdc_dv_bitmap_range_count(const mcdc_dv_bitmap *b, uint64_t lo, uint64_t hi) {
    uint64_t n = 0;
    for (size_t i = 0; i < b->n && lo < hi; i++) {
        uint64_t base = (uint64_t)b->b[i].key << 32, end = base + (1ULL << 32);
        if (end <= lo || base >= hi) continue;
        uint64_t a = lo > base ? lo - base : 0, z = (hi < end ? hi : end) - base;
        n += roaring_bitmap_range_cardinality(b->b[i].bm, a, z);
    }
    return n;
}

int64_t mcdc_dv_bitmap_max(const mcdc_dv_bitmap *b) {
    for (size_t i = b->n; i-- > 0;)
        if (!roaring_bitmap_is_empty(b->b[i].bm))
            return (int64_t)((uint64_t)b->b[i].key << 32 | roaring_bitmap_maximum(b->b[i].bm));
    return -1;
}

void mcdc_dv_bitmap_keep(const mcdc_dv_bitmap *b, uint64_t first, int32_t n, int32_t *keep,
                         int32_t *n_keep) {
    MCDC_ASSERT(n >= 0);
    int32_t k = 0, at = 0; /* at: the next position not yet decided */
    uint64_t end = first + (uint64_t)n;
    for (size_t i = 0; i < b->n && at < n; i++) {
        uint64_t base = (uint64_t)b->b[i].key << 32;
        if (base + (1ULL << 32) <= first || base >= end) continue;
        roaring_uint32_iterator_t it;
        roaring_init_iterator(b->b[i].bm, &it);
        uint32_t lo = first + (uint64_t)at > base ? (uint32_t)(first + (uint64_t)at - base) : 0;
        if (!roaring_move_uint32_iterator_equalorlarger(&it, lo)) continue;
        while (it.has_value) {
            uint64_t row = base | it.current_value;
            if (row >= end) break;
            int32_t del = (int32_t)(row - first);
            while (at < del) keep[k++] = at++;
            at = del + 1; /* skip the deleted one */
            roaring_advance_uint32_iterator(&it);
        }
    }
    while (at < n) keep[k++] = at++;
    *n_keep = k;
    MCDC_ASSERT(k <= n);
}

static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint32_t get_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put_be32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
}

int mcdc_dv_bitmap_serialize(mcdc_buf *out, const mcdc_dv_bitmap *b, mcdc_error *err) {
    size_t nb = 0;
    for (size_t i = 0; i < b->n; i++) nb += !roaring_bitmap_is_empty(b->b[i].bm);
    uint8_t head[12];
    put_le32(head, MCDC_DV_MAGIC);
    put_le32(head + 4, (uint32_t)nb);
    put_le32(head + 8, (uint32_t)((uint64_t)nb >> 32));
    int rc = mcdc_buf_append(out, head, sizeof head, err);
    for (size_t i = 0; rc == MCDC_OK && i < b->n; i++) {
        roaring_bitmap_t *bm = b->b[i].bm;
        if (roaring_bitmap_is_empty(bm)) continue;
        roaring_bitmap_run_optimize(bm); /* runs compress clustered deletes */
        size_t sz = roaring_bitmap_portable_size_in_bytes(bm);
        uint8_t key[4];
        put_le32(key, b->b[i].key);
        rc = mcdc_buf_append(out, key, 4, err);
        if (rc == MCDC_OK) rc = mcdc_buf_reserve(out, sz, err);
        if (rc) break;
        size_t w = roaring_bitmap_portable_serialize(bm, (char *)out->data + out->len);
        MCDC_ASSERT(w == sz);
        out->len += w;
    }
    return rc;
}

static int bad_bitmap(mcdc_error *err, const char *label, const char *why, size_t at) {
    return mcdc_error_set(err, MCDC_E_CORRUPT,
                          "deletion vector %s is damaged: %s (at byte %zu); the table's rows "
                          "cannot be told from deleted ones (restore the DV file or run "
                          "REORG TABLE ... APPLY (PURGE) in Spark if Spark can read it)",
                          label, why, at);
}

static uint16_t get_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* The length of the portable 32-bit roaring bitmap at p (RoaringFormatSpec)
 * when every byte of it is sound, else 0. CRoaring 0.2.66's "safe"
 * deserialization checks bounds only (an empty run container or an array
 * out of order crashes or corrupts later lookups), so the whole layout is
 * checked here first: cookie, container count, keys ascending, offsets
 * where they are, array values ascending, runs ascending and disjoint,
 * every container's cardinality equal to its header's. */
static size_t portable_len(const uint8_t *p, size_t n) {
    enum { COOKIE_NO_RUNS = 12346, COOKIE_RUNS = 12347, OFFSETS_FROM = 4 };
    if (n < 4) return 0;
    uint32_t cookie = get_le32(p);
    size_t at = 4, count;
    const uint8_t *runs = NULL; /* the run flags, one bit per container */
    bool offsets;
    if ((cookie & 0xFFFF) == COOKIE_RUNS) {
        count = (cookie >> 16) + 1;
        if (n - at < (count + 7) / 8) return 0;
        runs = p + at;
        at += (count + 7) / 8;
        offsets = count >= OFFSETS_FROM;
    } else if (cookie == COOKIE_NO_RUNS) {
        if (n - at < 4) return 0;
        count = get_le32(p + at);
        at += 4;
        if (count > 65536) return 0;
        offsets = true;
    } else {
        return 0;
    }
    if ((n - at) / 4 < count) return 0; /* the descriptive header */
    const uint8_t *desc = p + at;
    at += 4 * count;
    const uint8_t *offs = NULL;
    if (offsets) {
        if ((n - at) / 4 < count) return 0;
        offs = p + at;
        at += 4 * count;
    }
    for (size_t i = 0; i < count; i++) {
        uint32_t key = get_le16(desc + 4 * i), card = (uint32_t)get_le16(desc + 4 * i + 2) + 1;
        if (i > 0 && key <= get_le16(desc + 4 * (i - 1))) return 0;
        if (offs && get_le32(offs + 4 * i) != at) return 0;
        if (runs && (runs[i / 8] >> (i % 8) & 1)) {
            if (n - at < 2) return 0;
            size_t nr = get_le16(p + at);
            at += 2;
            if (nr == 0 || (n - at) / 4 < nr) return 0;
            uint32_t total = 0, next = 0; /* next: the least value a run may start at */
            for (size_t r = 0; r < nr; r++) {
                uint32_t start = get_le16(p + at + 4 * r), len = get_le16(p + at + 4 * r + 2);
                if (start < next || start + len > 65535) return 0;
                next = start + len + 1;
                total += len + 1;
            }
            if (total != card) return 0;
            at += 4 * nr;
        } else if (card <= 4096) {
            if ((n - at) / 2 < card) return 0;
            for (uint32_t k = 1; k < card; k++)
                if (get_le16(p + at + 2 * k) <= get_le16(p + at + 2 * (k - 1))) return 0;
            at += 2 * (size_t)card;
        } else {
            if (n - at < 8192) return 0;
            uint32_t bits = 0;
            for (size_t k = 0; k < 8192; k++) bits += (uint32_t)__builtin_popcount(p[at + k]);
            if (bits != card) return 0;
            at += 8192;
        }
    }
    return at;
}

/* One 32-bit bucket of exactly (or, with exact false, at most) n bytes. */
static roaring_bitmap_t *parse_bucket(const uint8_t *p, size_t n, bool exact, size_t *used) {
    size_t sz = portable_len(p, n);
    *used = sz;
    if (sz == 0 || (exact && sz != n)) return NULL;
    return roaring_bitmap_portable_deserialize_safe((const char *)p, sz);
}

int mcdc_dv_bitmap_parse(mcdc_dv_bitmap **out, const void *data, size_t n, const char *label,
                         mcdc_error *err) {
    *out = NULL;
    const uint8_t *p = data;
    if (n < 8) return bad_bitmap(err, label, "shorter than its header", 0);
    /* The portable format (magic LE, what Delta writes), or the older
     * "native" one Delta still reads (magic - 1, big-endian framing, keys
     * 0, 1, ... implicit, each bucket preceded by its size). */
    bool native = get_be32(p) == MCDC_DV_MAGIC - 1;
    if (!native && get_le32(p) != MCDC_DV_MAGIC)
        return bad_bitmap(err, label, "not a RoaringBitmapArray (wrong magic number)", 0);
    if (!native && n < 12) return bad_bitmap(err, label, "shorter than its header", 0);
    uint64_t nb = native ? get_be32(p + 4) : (get_le32(p + 4) | (uint64_t)get_le32(p + 8) << 32);
    size_t at = native ? 8 : 12;
    if (nb > (n - at) / 12) /* a bucket is a key or size and an 8-byte header at least */
        return bad_bitmap(err, label, "more buckets than its bytes can hold", 4);
    mcdc_dv_bitmap *b;
    int rc = mcdc_dv_bitmap_create(&b, err);
    if (rc) return rc;
    if (nb > 0 && (b->b = mcdc_calloc((size_t)nb, sizeof *b->b)) == NULL)
        rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    b->cap = (size_t)nb;
    for (uint64_t i = 0; rc == MCDC_OK && i < nb; i++) {
        if (n - at < 4) {
            rc = bad_bitmap(err, label, "ends inside a bucket header", at);
            break;
        }
        uint32_t key = native ? (uint32_t)i : get_le32(p + at);
        size_t want = native ? get_be32(p + at) : n - at - 4;
        if (key >> 31) rc = bad_bitmap(err, label, "a bucket key has its high bit set", at);
        else if (b->n > 0 && key <= b->b[b->n - 1].key)
            rc = bad_bitmap(err, label, "bucket keys are not ascending", at);
        else if (want > n - at - 4) rc = bad_bitmap(err, label, "a bucket overruns the bitmap", at);
        if (rc) break;
        at += 4;
        size_t used = 0;
        roaring_bitmap_t *bm = parse_bucket(p + at, want, native, &used);
        if (bm == NULL) {
            rc = bad_bitmap(err, label, "a bucket is not a sound portable roaring bitmap", at);
            break;
        }
        b->b[b->n++] = (dv_bucket){key, bm};
        at += used;
    }
    if (rc == MCDC_OK && at != n) rc = bad_bitmap(err, label, "bytes after the last bucket", at);
    if (rc) {
        mcdc_dv_bitmap_free(b);
        return rc;
    }
    *out = b;
    return MCDC_OK;
}

/* ---- reading ------------------------------------------------------------------------ */

/* The DV at d (its dataSize field), of which n bytes were read. */
static int parse_at(mcdc_dv_bitmap **out, const uint8_t *d, size_t n, int64_t offset,
                    int32_t expected_size, const char *label, mcdc_error *err) {
    if (expected_size < 0 || n < 8 || n - 8 < (size_t)expected_size)
        return bad_bitmap(err, label, "the file ends before the deletion vector its offset and "
                          "sizeInBytes name", (size_t)offset + n);
    uint32_t size = get_be32(d);
    if (size != (uint32_t)expected_size)
        return bad_bitmap(err, label, "its size field differs from the descriptor's sizeInBytes",
                          (size_t)offset);
    uint32_t want = get_be32(d + 4 + size);
    if ((uint32_t)crc32(0L, d + 4, (uInt)size) != want)
        return bad_bitmap(err, label, "its CRC-32 does not match", (size_t)offset + 4 + size);
    return mcdc_dv_bitmap_parse(out, d + 4, size, label, err);
}

int mcdc_dv_file_parse(mcdc_dv_bitmap **out, const void *file, size_t len, int64_t offset,
                       int32_t expected_size, const char *label, mcdc_error *err) {
    *out = NULL;
    const uint8_t *p = file;
    if (len < 1 || p[0] != MCDC_DV_FILE_VERSION)
        return bad_bitmap(err, label, "the file does not start with format version 1", 0);
    if (offset < 1 || (uint64_t)offset > len)
        return bad_bitmap(err, label, "its offset is past the end of the file", len);
    return parse_at(out, p + offset, len - (size_t)offset, offset, expected_size, label, err);
}

int mcdc_dv_inline_parse(mcdc_dv_bitmap **out, const mcdc_delta_dv *dv, const char *label,
                         mcdc_error *err) {
    *out = NULL;
    size_t n = strlen(dv->path_or_inline);
    if (dv->size_bytes < 0 || n % 5 != 0 || n / 5 * 4 < (size_t)dv->size_bytes ||
        n / 5 * 4 - (size_t)dv->size_bytes > 3)
        return bad_bitmap(err, label, "its inline length does not match sizeInBytes", 0);
    uint8_t *raw = mcdc_malloc(n / 5 * 4 + 1);
    if (raw == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    int rc = mcdc_z85_decode(raw, dv->path_or_inline, n)
                 ? mcdc_dv_bitmap_parse(out, raw, (size_t)dv->size_bytes, label, err)
                 : bad_bitmap(err, label, "its inline text is not Z85", 0);
    mcdc_free(raw);
    return rc;
}

/* The bitmap of f against its descriptor and the file's row count. */
static int validate(const mcdc_dv_bitmap *b, const mcdc_delta_file *f, int64_t file_rows,
                    const char *label, mcdc_error *err) {
    uint64_t card = mcdc_dv_bitmap_cardinality(b);
    int64_t max = mcdc_dv_bitmap_max(b);
    char why[160];
    if (card != (uint64_t)f->dv.cardinality)
        snprintf(why, sizeof why, "it holds %llu rows, its descriptor says cardinality %lld",
                 (unsigned long long)card, (long long)f->dv.cardinality);
    else if (f->dv.max_row_index >= 0 && max > f->dv.max_row_index)
        snprintf(why, sizeof why, "row %lld is above its descriptor's maxRowIndex %lld",
                 (long long)max, (long long)f->dv.max_row_index);
    else if (file_rows >= 0 && max >= file_rows)
        snprintf(why, sizeof why, "row %lld is beyond the %lld rows of the data file",
                 (long long)max, (long long)file_rows);
    else
        return MCDC_OK;
    return bad_bitmap(err, label, why, 0);
}

int mcdc_dv_load(mcdc_dv_bitmap **out, mcdc_storage *st, const char *root,
                 const mcdc_delta_file *f, int64_t file_rows, mcdc_error *err) {
    *out = NULL;
    MCDC_ASSERT(f->dv.storage_type != 0);
    char *uid = NULL;
    char what[600];
    snprintf(what, sizeof what, "data file %s", f->path);
    int rc = mcdc_dv_check_descriptor(&uid, &f->dv, what, err);
    mcdc_free(uid);
    if (rc) return rc;
    char label[1200];
    mcdc_dv_bitmap *b = NULL;
    if (f->dv.storage_type == 'i') {
        snprintf(label, sizeof label, "of data file %s (inline)", f->path);
        rc = mcdc_dv_inline_parse(&b, &f->dv, label, err);
    } else {
        char *key = NULL;
        rc = mcdc_dv_file_key(&key, &f->dv, err);
        if (rc == MCDC_OK && f->dv.storage_type == 'p') {
            /* An absolute location: read it through the table's storage
             * when it is under the root, else refuse (no second storage). */
            size_t rl = strlen(root);
            while (rl > 0 && root[rl - 1] == '/') rl--;
            const char *k = key;
            if (strncmp(k, "file://", 7) == 0 && strncmp(root, "file:", 5) != 0) k += 7;
            if (strncmp(k, root, rl) == 0 && k[rl] == '/') {
                memmove(key, k + rl + 1, strlen(k + rl + 1) + 1);
            } else {
                rc = mcdc_error_set(err, MCDC_E_UNSUPPORTED,
                                    "data file %s has its deletion vector at %s, outside the "
                                    "table %s; mssql-cdc reads DV files under the table only",
                                    f->path, key, root);
            }
        }
        if (rc == MCDC_OK) snprintf(label, sizeof label, "%s of data file %s", key, f->path);
        size_t need = 8 + (size_t)f->dv.size_bytes, got = 0, got0 = 0;
        uint8_t *buf = rc ? NULL : mcdc_malloc(need + 1);
        if (rc == MCDC_OK && buf == NULL) rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        /* The version byte, then the DV's range (one read when adjacent). */
        if (rc == MCDC_OK && f->dv.offset == 1) {
            rc = mcdc_storage_get_range(st, key, 0, need + 1, buf, &got0, NULL, err);
            got = got0 > 0 ? got0 - 1 : 0;
        } else if (rc == MCDC_OK) {
            rc = mcdc_storage_get_range(st, key, 0, 1, buf, &got0, NULL, err);
            if (rc == MCDC_OK)
                rc = mcdc_storage_get_range(st, key, f->dv.offset, need, buf + 1, &got, NULL, err);
        }
        if (rc == MCDC_E_INVALID) { /* a range past the end: the file is short */
            mcdc_error_clear(err);
            rc = MCDC_OK;
        }
        if (rc == MCDC_OK && (got0 < 1 || buf[0] != MCDC_DV_FILE_VERSION))
            rc = bad_bitmap(err, label, "the file does not start with format version 1", 0);
        if (rc == MCDC_OK) rc = parse_at(&b, buf + 1, got, f->dv.offset, f->dv.size_bytes, label, err);
        else if (rc == MCDC_E_NOTFOUND)
            mcdc_error_wrap(err, "the deletion vector of data file %s is missing", f->path);
        mcdc_free(buf);
        mcdc_free(key);
    }
    if (rc == MCDC_OK) rc = validate(b, f, file_rows, label, err);
    if (rc) {
        mcdc_dv_bitmap_free(b);
        return rc;
    }
    *out = b;
    return MCDC_OK;
}

/* ---- writing ------------------------------------------------------------------------ */

struct mcdc_dv_writer {
    mcdc_buf data;                 /* the file so far */
    char z85[MCDC_DV_UUID_Z85_LEN + 1];
    char key[64];                  /* deletion_vector_<uuid>.bin */
};

int mcdc_dv_writer_create(mcdc_dv_writer **out, mcdc_error *err) {
    mcdc_dv_writer *w = mcdc_calloc(1, sizeof *w);
    if (w == NULL) return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
    char u[37];
    mcdc_uuid4(u);
    uint8_t id[16];
    for (int i = 0, o = 0; i < 36; i++) {
        if (u[i] == '-') continue;
        int hv = u[i] <= '9' ? u[i] - '0' : u[i] - 'a' + 10;
        if (o % 2 == 0) id[o / 2] = (uint8_t)(hv << 4);
        else id[o / 2] = (uint8_t)(id[o / 2] | hv);
        o++;
    }
    mcdc_z85_encode(w->z85, id, 16);
    snprintf(w->key, sizeof w->key, "deletion_vector_%s.bin", u);
    uint8_t v = MCDC_DV_FILE_VERSION;
    int rc = mcdc_buf_append(&w->data, &v, 1, err);
    if (rc) {
        mcdc_dv_writer_free(w);
        return rc;
    }
    *out = w;
    return MCDC_OK;
}

void mcdc_dv_writer_free(mcdc_dv_writer *w) {
    if (w == NULL) return;
    mcdc_buf_free(&w->data);
    mcdc_free(w);
}

int mcdc_dv_writer_add(mcdc_dv_writer *w, const mcdc_dv_bitmap *b, mcdc_delta_dv *out,
                       mcdc_error *err) {
    size_t at = w->data.len;
    uint8_t four[4] = {0};
    int rc = mcdc_buf_append(&w->data, four, 4, err);
    if (rc == MCDC_OK) rc = mcdc_dv_bitmap_serialize(&w->data, b, err);
    size_t size = w->data.len - at - 4;
    if (rc == MCDC_OK && size > MCDC_DV_BYTES_MAX)
        rc = mcdc_error_set(err, MCDC_E_LIMIT, "a deletion vector above MCDC_DV_BYTES_MAX");
    if (rc) return rc;
    put_be32(w->data.data + at, (uint32_t)size);
    uint8_t crc[4];
    put_be32(crc, (uint32_t)crc32(0L, w->data.data + at + 4, (uInt)size));
    rc = mcdc_buf_append(&w->data, crc, 4, err);
    if (rc) return rc;
    int64_t max = mcdc_dv_bitmap_max(b);
    *out = (mcdc_delta_dv){.storage_type = 'u', .path_or_inline = w->z85, .offset = (int64_t)at,
                           .size_bytes = (int32_t)size,
                           .cardinality = (int64_t)mcdc_dv_bitmap_cardinality(b),
                           .max_row_index = max};
    return MCDC_OK;
}

int mcdc_dv_writer_finish(mcdc_dv_writer *w, mcdc_storage *st, const char **key,
                          mcdc_error *err) {
    if (key) *key = w->key;
    if (w->data.len <= 1) return MCDC_OK;
    return mcdc_storage_put_if_absent(st, w->key, w->data.data, w->data.len, err);
}
