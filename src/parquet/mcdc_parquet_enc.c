/*
 * mcdc_parquet_enc.c - RLE/bit-packing hybrid and DELTA_BINARY_PACKED
 * (formats.md B5). Decoders never read past their input: a short or
 * malformed stream is MCDC_E_CORRUPT.
 */
#include "mcdc_parquet_int.h"

/* ---- helpers --------------------------------------------------------------- */

static int put_varint(mcdc_buf *out, uint64_t v, mcdc_error *err) {
    uint8_t tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    return mcdc_buf_append(out, tmp, n, err);
}

/* Reads a varint at *pp (< end); false when malformed or truncated. */
static bool get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out) {
    const uint8_t *p = *pp;
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (p >= end) return false;
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return true;
        }
    }
    return false;
}

static int64_t unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* Packs n values (padded with zeros to a multiple of 8) of width bits. */
static int bitpack_append(mcdc_buf *out, const uint32_t *v, int64_t n, int width,
                          mcdc_error *err) {
    int64_t groups = (n + 7) / 8;
    size_t bytes = (size_t)(groups * width);
    int rc = mcdc_buf_reserve(out, bytes, err);
    if (rc) return rc;
    uint8_t *dst = out->data + out->len;
    uint64_t acc = 0;
    int bits = 0;
    size_t o = 0;
    int64_t total = groups * 8;
    for (int64_t i = 0; i < total; i++) {
        uint64_t x = i < n ? v[i] : 0;
        acc |= x << bits;
        bits += width;
        while (bits >= 8) {
            dst[o++] = (uint8_t)acc;
            acc >>= 8;
            bits -= 8;
        }
    }
    MCDC_ASSERT(o == bytes && bits == 0);
    out->len += bytes;
    return MCDC_OK;
}

static int rle_run_append(mcdc_buf *out, uint32_t value, int64_t run, int width,
                          mcdc_error *err) {
    int rc = put_varint(out, (uint64_t)run << 1, err);
    if (rc) return rc;
    uint8_t tmp[4];
    int nb = (width + 7) / 8;
    for (int i = 0; i < nb; i++) tmp[i] = (uint8_t)(value >> (8 * i));
    return mcdc_buf_append(out, tmp, (size_t)nb, err);
}

static int bp_run_append(mcdc_buf *out, const uint32_t *v, int64_t n, int width,
                         mcdc_error *err) {
    int64_t groups = (n + 7) / 8;
    int rc = put_varint(out, ((uint64_t)groups << 1) | 1, err);
    if (rc) return rc;
    return bitpack_append(out, v, n, width, err);
}

/* ---- encoder --------------------------------------------------------------- */

int mcdc_pq_rle_encode(mcdc_buf *out, const uint32_t *v, int64_t n, int width,
                       mcdc_error *err) {
    MCDC_ASSERT(width >= 0 && width <= 32 && n >= 0);
    int rc = MCDC_OK;
    int64_t bp_start = 0, i = 0;
    /* A run of at least 16 equal values becomes an RLE run (after giving up
     * to 7 of them to round the pending bit-packed values up to a group). */
    while (i < n) {
        uint32_t x = v[i];
        int64_t j = i + 1;
        while (j < n && v[j] == x) j++;
        if (j - i >= 16) {
            int64_t pend = i - bp_start;
            int64_t pad = (8 - pend % 8) % 8;
            int64_t bp_end = i + pad;
            if (bp_end > bp_start) rc = bp_run_append(out, v + bp_start, bp_end - bp_start, width, err);
            if (rc) return rc;
            rc = rle_run_append(out, x, j - bp_end, width, err);
            if (rc) return rc;
            bp_start = j;
        }
        i = j;
    }
    if (n > bp_start) rc = bp_run_append(out, v + bp_start, n - bp_start, width, err);
    return rc;
}

int mcdc_pq_rle_encode_bitmap(mcdc_buf *out, const uint8_t *bits, int64_t n, mcdc_error *err) {
    if (n == 0) return MCDC_OK;
    int64_t full = n / 8, rem = n % 8;
    bool all1 = true, all0 = true;
    for (int64_t i = 0; i < full && (all1 || all0); i++) {
        if (bits[i] != 0xFF) all1 = false;
        if (bits[i] != 0x00) all0 = false;
    }
    if (rem) {
        uint8_t mask = (uint8_t)((1u << rem) - 1);
        uint8_t b = bits[full] & mask;
        if (b != mask) all1 = false;
        if (b != 0) all0 = false;
    }
    if (all1 || all0) return rle_run_append(out, all1 ? 1 : 0, n, 1, err);
    int64_t groups = (n + 7) / 8;
    int rc = put_varint(out, ((uint64_t)groups << 1) | 1, err);
    if (rc) return rc;
    rc = mcdc_buf_append(out, bits, (size_t)groups, err);
    if (rc) return rc;
    if (rem) out->data[out->len - 1] &= (uint8_t)((1u << rem) - 1);
    return MCDC_OK;
}

/* ---- decoders -------------------------------------------------------------- */

int mcdc_pq_unpack(const uint8_t *p, size_t n, int width, uint32_t *out, int64_t count) {
    if (width < 0 || width > 32) return MCDC_E_CORRUPT;
    if (width == 0) {
        memset(out, 0, (size_t)count * sizeof *out);
        return MCDC_OK;
    }
    if ((uint64_t)count * (uint64_t)width > (uint64_t)n * 8) return MCDC_E_CORRUPT;
    uint64_t mask = (width == 32) ? 0xFFFFFFFFu : ((1u << width) - 1);
    uint64_t bitpos = 0;
    int64_t i = 0;
    /* Fast path while 8 bytes can be loaded. */
    for (; i < count; i++, bitpos += (uint64_t)width) {
        uint64_t byte = bitpos >> 3;
        if (byte + 8 > n) break;
        out[i] = (uint32_t)((pq_le64(p + byte) >> (bitpos & 7)) & mask);
    }
    for (; i < count; i++, bitpos += (uint64_t)width) {
        uint64_t v = 0;
        int got = 0;
        uint64_t bp = bitpos;
        while (got < width) {
            int off = (int)(bp & 7);
            int take = 8 - off;
            if (take > width - got) take = width - got;
            uint64_t b = (uint64_t)(p[bp >> 3] >> off) & ((1u << take) - 1);
            v |= b << got;
            got += take;
            bp += (uint64_t)take;
        }
        out[i] = (uint32_t)v;
    }
    return MCDC_OK;
}

int mcdc_pq_unpack_msb(const uint8_t *p, size_t n, int width, uint32_t *out, int64_t count) {
    if (width < 0 || width > 32) return MCDC_E_CORRUPT;
    if ((uint64_t)count * (uint64_t)width > (uint64_t)n * 8) return MCDC_E_CORRUPT;
    uint64_t bitpos = 0;
    for (int64_t i = 0; i < count; i++) {
        uint32_t v = 0;
        for (int k = 0; k < width; k++, bitpos++)
            v = (v << 1) | (((uint32_t)p[bitpos >> 3] >> (7 - (bitpos & 7))) & 1u);
        out[i] = v;
    }
    return MCDC_OK;
}

int mcdc_pq_rle_decode(const uint8_t *p, size_t n, int width, uint32_t *out, int64_t count,
                       size_t *used) {
    if (width < 0 || width > 32) return MCDC_E_CORRUPT;
    const uint8_t *q = p, *end = p + n;
    int nb = (width + 7) / 8;
    int64_t i = 0;
    uint64_t limit = width == 32 ? 0xFFFFFFFFull : ((1ull << width) - 1);
    while (i < count) {
        uint64_t h;
        if (!get_varint(&q, end, &h)) return MCDC_E_CORRUPT;
        if (h & 1) {
            uint64_t groups = h >> 1;
            if (groups == 0 || groups > (1u << 28)) return MCDC_E_CORRUPT;
            uint64_t nvals = groups * 8;
            uint64_t nbytes = groups * (uint64_t)width;
            int64_t take = (int64_t)nvals < count - i ? (int64_t)nvals : count - i;
            uint64_t avail = (uint64_t)(end - q);
            /* The final run may be cut after the last value we need. */
            uint64_t need = ((uint64_t)take * (uint64_t)width + 7) / 8;
            if (need > avail) return MCDC_E_CORRUPT;
            int rc = mcdc_pq_unpack(q, (size_t)(nbytes < avail ? nbytes : avail), width,
                                    out + i, take);
            if (rc) return rc;
            q += nbytes < avail ? nbytes : avail;
            i += take;
        } else {
            uint64_t run = h >> 1;
            if (run == 0 || run > INT32_MAX) return MCDC_E_CORRUPT;
            if ((size_t)(end - q) < (size_t)nb) return MCDC_E_CORRUPT;
            uint64_t val = 0;
            for (int k = 0; k < nb; k++) val |= (uint64_t)q[k] << (8 * k);
            q += nb;
            if (val > limit) return MCDC_E_CORRUPT;
            int64_t take = (int64_t)run < count - i ? (int64_t)run : count - i;
            uint32_t v32 = (uint32_t)val;
            for (int64_t k = 0; k < take; k++) out[i + k] = v32;
            i += take;
        }
    }
    if (used) *used = (size_t)(q - p);
    return MCDC_OK;
}

/* ---- DELTA_BINARY_PACKED ---------------------------------------------------- */

/* Unpacks count values of width 0..64 (LSB-first) from p (n bytes). */
static int unpack64(const uint8_t *p, size_t n, int width, uint64_t *out, int64_t count) {
    if ((uint64_t)count * (uint64_t)width > (uint64_t)n * 8) return MCDC_E_CORRUPT;
    if (width == 0) {
        memset(out, 0, (size_t)count * sizeof *out);
        return MCDC_OK;
    }
    uint64_t bitpos = 0;
    uint64_t mask = width == 64 ? ~(uint64_t)0 : ((uint64_t)1 << width) - 1;
    for (int64_t i = 0; i < count; i++) {
        size_t byte = (size_t)(bitpos >> 3);
        int off = (int)(bitpos & 7);
        if (byte + 9 <= n) { /* fast path: one (or one and a bit) word */
            uint64_t v = pq_le64(p + byte) >> off;
            if (off + width > 64) v |= (uint64_t)p[byte + 8] << (64 - off);
            out[i] = v & mask;
            bitpos += (uint64_t)width;
            continue;
        }
        uint64_t v = 0;
        int got = 0;
        while (got < width) {
            int bo = (int)(bitpos & 7);
            int take = 8 - bo;
            if (take > width - got) take = width - got;
            uint64_t b = (uint64_t)(p[bitpos >> 3] >> bo) & ((1u << take) - 1);
            v |= b << got;
            got += take;
            bitpos += (uint64_t)take;
        }
        out[i] = v;
    }
    return MCDC_OK;
}

int mcdc_pq_delta_decode(const uint8_t *p, size_t n, int64_t *out, int64_t count_max,
                         int64_t *count, size_t *used) {
    const uint8_t *q = p, *end = p + n;
    uint64_t block, mbs, total, first;
    if (!get_varint(&q, end, &block) || !get_varint(&q, end, &mbs) ||
        !get_varint(&q, end, &total) || !get_varint(&q, end, &first))
        return MCDC_E_CORRUPT;
    if (block == 0 || block % 128 != 0 || block > (1u << 20) || mbs == 0 || mbs > block ||
        block % mbs != 0 || (block / mbs) % 32 != 0)
        return MCDC_E_CORRUPT;
    if (total > (uint64_t)count_max) return MCDC_E_CORRUPT;
    uint64_t per_mb = block / mbs;
    int64_t got = 0;
    if (total > 0) out[got++] = unzigzag(first);
    uint64_t prev = (uint64_t)unzigzag(first);
    uint64_t tmp[512];
    while ((uint64_t)got < total) {
        uint64_t md;
        if (!get_varint(&q, end, &md)) return MCDC_E_CORRUPT;
        uint64_t min_delta = (uint64_t)unzigzag(md);
        if ((uint64_t)(end - q) < mbs) return MCDC_E_CORRUPT;
        const uint8_t *widths = q;
        q += mbs;
        for (uint64_t m = 0; m < mbs && (uint64_t)got < total; m++) {
            int w = widths[m];
            if (w > 64) return MCDC_E_CORRUPT;
            uint64_t nbytes = per_mb * (uint64_t)w / 8;
            uint64_t avail = (uint64_t)(end - q);
            uint64_t left = per_mb;
            const uint8_t *mp = q;
            /* The last miniblock should be padded; accept a cut one. */
            q += nbytes < avail ? nbytes : avail;
            size_t mp_len = (size_t)(nbytes < avail ? nbytes : avail);
            uint64_t done = 0;
            while (left > 0 && (uint64_t)got < total) {
                uint64_t chunk = left < 512 ? left : 512;
                if (chunk > total - (uint64_t)got) chunk = total - (uint64_t)got;
                /* chunk values start at bit done*w; done is a multiple of 8 */
                size_t off = (size_t)(done * (uint64_t)w / 8);
                if (off > mp_len) return MCDC_E_CORRUPT;
                int rc = unpack64(mp + off, mp_len - off, w, tmp, (int64_t)chunk);
                if (rc) return rc;
                for (uint64_t k = 0; k < chunk; k++) {
                    prev = prev + min_delta + tmp[k];
                    out[got++] = (int64_t)prev;
                }
                done += chunk;
                left -= chunk;
            }
        }
    }
    *count = (int64_t)total;
    if (used) *used = (size_t)(q - p);
    return MCDC_OK;
}

/* Packs the 32 values x[0..32) (each < 2^w) LSB-first: 4*w bytes at dst. */
static void pack_miniblock(uint8_t *dst, const uint64_t *x, int w) {
    if (w == 0) return;
    if (w <= 8) {
        /* 8 values of w bits are w whole bytes: one word each, no branch
         * per value (lengths, small deltas) */
        for (int g = 0; g < 4; g++, x += 8) {
            uint64_t acc = 0;
            for (int j = 0; j < 8; j++) acc |= x[j] << (j * w);
            uint8_t tmp[8];
            pq_put_le64(tmp, acc);
            memcpy(dst + g * w, tmp, (size_t)w);
        }
        return;
    }
    uint64_t acc = 0;
    int nb = 0;
    size_t o = 0;
    for (int k = 0; k < 32; k++) {
        uint64_t v = x[k];
        acc |= v << nb;
        int room = 64 - nb;
        if (w >= room) {
            pq_put_le64(dst + o, acc);
            o += 8;
            acc = room < 64 ? v >> room : 0;
            nb = w - room;
        } else {
            nb += w;
        }
    }
    for (int b = 0; b < nb; b += 8, acc >>= 8) dst[o++] = (uint8_t)acc;
    MCDC_ASSERT(o == (size_t)(4 * w));
}

/* One 64-bit value of a PLAIN stream of `width` (4: int32, sign-extended). */
static int64_t plain_at(const uint8_t *p, int64_t i, int width) {
    if (width == 4) return (int32_t)pq_le32(p + (size_t)i * 4);
    return (int64_t)pq_le64(p + (size_t)i * 8);
}

int mcdc_pq_delta_encode_plain(mcdc_buf *out, const uint8_t *plain, int64_t n, int width,
                               mcdc_error *err) {
    enum { BLOCK = 128, MBS = 4, PER_MB = 32 };
    MCDC_ASSERT(width == 4 || width == 8);
    int rc = put_varint(out, BLOCK, err);
    if (!rc) rc = put_varint(out, MBS, err);
    if (!rc) rc = put_varint(out, (uint64_t)n, err);
    int64_t first = n > 0 ? plain_at(plain, 0, width) : 0;
    if (!rc) rc = put_varint(out, ((uint64_t)first << 1) ^ (uint64_t)(first >> 63), err);
    int64_t i = 1, prev = first;
    while (!rc && i < n) {
        int64_t cnt = n - i < BLOCK ? n - i : BLOCK;
        uint64_t d[BLOCK];
        int64_t min = INT64_MAX;
        /* INT32 deltas wrap in 32 bits (what INT32 readers compute with). */
        if (width == 4) {
            for (int64_t k = 0; k < cnt; k++) {
                int64_t x = plain_at(plain, i + k, 4);
                int64_t dd = (int32_t)(uint32_t)((uint64_t)x - (uint64_t)prev);
                prev = x;
                d[k] = (uint64_t)dd;
                if (dd < min) min = dd;
            }
        } else {
            for (int64_t k = 0; k < cnt; k++) {
                int64_t x = plain_at(plain, i + k, 8);
                d[k] = (uint64_t)x - (uint64_t)prev;
                prev = x;
                if ((int64_t)d[k] < min) min = (int64_t)d[k];
            }
        }
        for (int64_t k = cnt; k < BLOCK; k++) d[k] = (uint64_t)min;
        /* each miniblock's bits in a register of its own (an OR into mx[k /
         * 32] went through memory, a store-to-load chain per value: 2.9 ->
         * 1.75 ns a value for short lengths, 3.4 -> 2.3 for 56-bit ones) */
        uint64_t mx[MBS];
        for (int m = 0; m < MBS; m++) {
            uint64_t acc = 0, *x = d + m * PER_MB;
            for (int j = 0; j < PER_MB; j++) {
                x[j] -= (uint64_t)min;
                acc |= x[j];
            }
            mx[m] = acc;
        }
        rc = put_varint(out, ((uint64_t)min << 1) ^ (uint64_t)(min >> 63), err);
        uint8_t widths[MBS];
        size_t body = 0;
        int used_mbs = (int)((cnt + PER_MB - 1) / PER_MB);
        for (int m = 0; m < MBS; m++) {
            widths[m] = m < used_mbs ? (uint8_t)pq_bit_width(mx[m]) : 0;
            body += (size_t)(4 * widths[m]);
        }
        if (!rc) rc = mcdc_buf_append(out, widths, MBS, err);
        if (!rc) rc = mcdc_buf_reserve(out, body, err);
        if (rc) break;
        for (int m = 0; m < used_mbs; m++) {
            pack_miniblock(out->data + out->len, d + m * PER_MB, widths[m]);
            out->len += (size_t)(4 * widths[m]);
        }
        i += cnt;
    }
    return rc;
}

int mcdc_pq_delta_encode(mcdc_buf *out, const int64_t *v, int64_t n, mcdc_error *err) {
    return mcdc_pq_delta_encode_plain(out, (const uint8_t *)v, n, 8, err);
}

int mcdc_pq_strs_reserve(pq_strs *s, int64_t n, size_t bytes, mcdc_error *err) {
    /* pre and len are written by index (s->n); their len stays 0 */
    size_t need = (size_t)(s->n + n) * 4;
    int rc = mcdc_buf_reserve(&s->len, need, err);
    if (!rc && s->prefix) rc = mcdc_buf_reserve(&s->pre, need, err);
    if (s->bytes.len < s->head) s->bytes.len = s->head; /* a new page */
    /* room past the suffixes for the 16-byte pieces (at most 16 past
     * their end, 32 to be plain about it) */
    if (!rc) rc = mcdc_buf_reserve(&s->bytes, bytes + 32, err);
    return rc;
}

int mcdc_pq_strs_keep_last(pq_strs *s, mcdc_error *err) {
    if (s->prev == NULL || s->prev == s->last.data) return MCDC_OK;
    s->last.len = 0;
    int rc = mcdc_buf_append(&s->last, s->prev, s->prev_n, err);
    if (!rc) rc = mcdc_buf_reserve(&s->last, 8, err);
    if (rc) return rc;
    s->prev = s->last.data;
    return MCDC_OK;
}

/* Starts a new page. */
static void strs_restart(pq_strs *s) {
    s->n = 0;
    s->pre.len = s->len.len = 0;
    s->bytes.len = s->head;
    s->prev = NULL;
}

/* The page's prefix-length and length streams, appended to out. */
static int strs_emit_lengths(pq_strs *s, mcdc_buf *out, mcdc_error *err) {
    int rc = MCDC_OK;
    if (s->prefix) rc = mcdc_pq_delta_encode_plain(out, s->pre.data, s->n, 4, err);
    if (!rc) rc = mcdc_pq_delta_encode_plain(out, s->len.data, s->n, 4, err);
    return rc;
}

int mcdc_pq_strs_emit(pq_strs *s, mcdc_buf *out, mcdc_error *err) {
    int rc = strs_emit_lengths(s, out, err);
    if (!rc && s->bytes.len > s->head)
        rc = mcdc_buf_append(out, s->bytes.data + s->head, s->bytes.len - s->head, err);
    strs_restart(s);
    return rc;
}

int mcdc_pq_strs_emit_body(pq_strs *s, mcdc_buf *out, size_t from, const uint8_t **body,
                           size_t *body_n, mcdc_error *err) {
    MCDC_ASSERT(from <= out->len);
    if (s->bytes.data == NULL || s->bytes.len < s->head) { /* no room kept yet */
        int rc = mcdc_pq_strs_emit(s, out, err);
        *body = out->data + from;
        *body_n = out->len - from;
        return rc;
    }
    int rc = strs_emit_lengths(s, out, err);
    if (rc) {
        strs_restart(s);
        return rc;
    }
    size_t front = out->len - from, suffixes = s->bytes.len - s->head;
    if (front <= s->head) {
        uint8_t *b = s->bytes.data + s->head - front;
        memcpy(b, out->data + from, front);
        *body = b;
        *body_n = front + suffixes;
    } else {
        rc = mcdc_buf_append(out, s->bytes.data + s->head, suffixes, err);
        *body = out->data + from;
        *body_n = out->len - from;
    }
    strs_restart(s);
    return rc;
}

void mcdc_pq_strs_free(pq_strs *s) {
    mcdc_buf_free(&s->pre);
    mcdc_buf_free(&s->len);
    mcdc_buf_free(&s->bytes);
    mcdc_buf_free(&s->last);
}

int mcdc_pq_delta_strings_encode(mcdc_buf *out, const uint8_t *plain, size_t plain_n, int64_t n,
                                 bool prefix, pq_strs *s, mcdc_error *err) {
    MCDC_ASSERT(n >= 0 && (uint64_t)n * 4 <= plain_n);
    s->prefix = prefix;
    strs_restart(s);
    int rc = mcdc_pq_strs_reserve(s, n, plain_n, err);
    if (rc) return rc;
    const uint8_t *q = plain, *end = plain + plain_n;
    pq_strs_cur k = pq_strs_open(s);
    for (int64_t i = 0; i < n; i++) {
        size_t len = pq_le32(q);
        mcdc_pq_strs_add(&k, q + 4, len, (size_t)(end - q) >= len + 4 + 32);
        q += 4 + len;
    }
    pq_strs_close(s, &k);
    MCDC_ASSERT(q == end);
    return mcdc_pq_strs_emit(s, out, err);
}
