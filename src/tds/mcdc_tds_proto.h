/*
 * mcdc_tds_proto.h - our own TDS 7.4 client: wire constants and the internal
 * API shared by the packet stream (mcdc_tds_stream.c), the request builders
 * (mcdc_tds_login.c), the token decoder (mcdc_tds_decode.c) and the backend
 * (mcdc_driver_native.c). Facts from spec/formats.md C2 (MS-TDS).
 *
 * Design: parsers ask mcdc_tds_need(n) for n contiguous payload bytes at
 * buf + pos; the common case is one compare. The slow path points buf
 * straight at the received bytes of the current packet when they hold the
 * n bytes (no copy), else gathers them in one bounded window (headers
 * stripped), so tokens and values that straddle packet boundaries are
 * handled in one place. (max)/text values are read in pieces into a reused
 * scratch buffer, so the window stays small.
 */
#ifndef MCDC_TDS_PROTO_H
#define MCDC_TDS_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_tds_consts.h"
#include "mcdc_util.h"

/* Packet, token and type numbers: mcdc_tds_consts.h (shared with the
 * simulator). */

/* ---- the packet stream ----------------------------------------------------- */
/* Where raw bytes come from: a socket, or (tests, fuzzing, benchmarks) memory
 * holding whole packets. */
typedef struct mcdc_tds_stream {
    int fd;                 /* -1: memory source */
    const uint8_t *mem;     /* memory source (borrowed) */
    size_t mem_len, mem_pos;
    size_t mem_read_max;    /* memory source: bytes per read at most (0: all that fit),
                             * to act like short socket reads (tests) */
    int timeout_ms;         /* per wait for data; 0 = forever */
    int64_t deadline_us;    /* monotonic; 0 = none (login uses one) */
    /* raw received bytes */
    uint8_t *raw;
    size_t raw_cap, raw_pos, raw_len;
    /* unconsumed payload bytes are buf[pos, len): buf is the window (win,
     * cap bytes, owned) or points into raw at bytes of one packet */
    const uint8_t *buf;
    uint8_t *win;
    size_t cap, pos, len;
    size_t pkt_left;        /* payload bytes of the current packet not yet moved */
    bool pkt_eom;           /* the current packet ends the message */
    bool in_packet;         /* a header has been read for the current packet */
    bool msg_done;          /* every payload byte of the message is in buf */
    uint16_t spid;          /* from the last reply header */
    uint8_t pkt_type;       /* of the last reply packet */
    bool dead;              /* lost, timed out or out of sync */
    uint64_t bytes_in;      /* payload bytes received (metrics) */
    uint64_t reply_bytes0;  /* bytes_in when the current reply began */
    /* sending */
    uint8_t *out;
    size_t out_cap;
    int packet_bytes;       /* negotiated; 4096 before login */
    uint8_t packet_id;
    /* scratch for (max)/text values, reused */
    mcdc_buf scratch;
    char where[300];        /* "host:port" for messages */
    int record_fd;          /* > 0: raw reply bytes are appended here (fixtures) */
    struct mcdc_tds_tls *tls; /* owned; non-NULL while bytes go through TLS (mcdc_tds_tls.h) */
} mcdc_tds_stream;

/* A stream over a connected socket (fd owned: closed by mcdc_tds_stream_free)
 * or, with fd = -1, over mem (borrowed; whole packets). */
int mcdc_tds_stream_init(mcdc_tds_stream *s, int fd, const uint8_t *mem, size_t mem_len,
                         mcdc_error *err);
void mcdc_tds_stream_free(mcdc_tds_stream *s);
/* Starts reading the reply to the request just sent. */
void mcdc_tds_begin_reply(mcdc_tds_stream *s);
/* Makes n payload bytes contiguous at buf + pos. MCDC_E_PROTOCOL when the
 * message ends first, MCDC_E_TRANSIENT on loss or timeout (stream dead). */
int mcdc_tds_need_slow(mcdc_tds_stream *s, size_t n, mcdc_error *err);
static inline int mcdc_tds_need(mcdc_tds_stream *s, size_t n, mcdc_error *err) {
    if (__builtin_expect(s->len - s->pos >= n, 1)) return MCDC_OK;
    return mcdc_tds_need_slow(s, n, err);
}
/* True when every byte of the reply has been consumed (may read a packet). */
int mcdc_tds_at_end(mcdc_tds_stream *s, bool *out_end, mcdc_error *err);
/* Sends one message of the given packet type, split into packets of
 * s->packet_bytes. */
int mcdc_tds_send(mcdc_tds_stream *s, uint8_t type, const uint8_t *payload, size_t n,
                  mcdc_error *err);

static inline uint16_t tds_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t tds_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static inline uint64_t tds_u64(const uint8_t *p) {
    return (uint64_t)tds_u32(p) | ((uint64_t)tds_u32(p + 4) << 32);
}

/* ---- request builders (mcdc_tds_login.c) ------------------------------------ */
typedef struct mcdc_tds_login_params {
    const char *host, *user, *password, *app, *server, *database, *library;
    int packet_bytes;
} mcdc_tds_login_params;
/* PRELOGIN payload with the given ENCRYPTION byte (mcdc_tds_tls.h). */
int mcdc_tds_build_prelogin(mcdc_buf *out, int encryption, mcdc_error *err);
/* Encryption byte of a PRELOGIN reply payload, or MCDC_E_PROTOCOL. */
int mcdc_tds_parse_prelogin(const uint8_t *p, size_t n, int *out_encryption, mcdc_error *err);
/* LOGIN7 payload (TDS 7.4, password obfuscated). */
int mcdc_tds_build_login7(mcdc_buf *out, const mcdc_tds_login_params *lp, mcdc_error *err);
/* SQL batch payload: ALL_HEADERS (transaction descriptor) + UTF-16LE text. */
int mcdc_tds_build_sql_batch(mcdc_buf *out, const char *sql, uint64_t txn_descriptor,
                             mcdc_error *err);
/* Appends UTF-8 text as UTF-16LE (invalid UTF-8 bytes become U+FFFD). */
int mcdc_tds_utf16_append(mcdc_buf *out, const char *s, size_t n, mcdc_error *err);

/* ---- tokens and values (mcdc_tds_decode.c) ----------------------------------- */
struct mcdc_tds_col;
/* Decodes one value of the column at the stream into c (NULL included). */
typedef int (*mcdc_tds_dec_fn)(mcdc_tds_stream *s, mcdc_column *c,
                               const struct mcdc_tds_col *tc, mcdc_error *err);

/* Converts one whole non-NULL value (len bytes at p) into c. */
typedef int (*mcdc_tds_conv_fn)(mcdc_column *c, const uint8_t *p, uint32_t len,
                                const struct mcdc_tds_col *tc, mcdc_error *err);

typedef enum { TDS_WIRE_FIXED, TDS_WIRE_BYTELEN, TDS_WIRE_USHORTLEN, TDS_WIRE_PLP,
               TDS_WIRE_LONGLEN, TDS_WIRE_VARIANT } mcdc_tds_wire;

typedef struct mcdc_tds_col {
    uint8_t type;        /* TDS type id */
    mcdc_tds_wire wire;
    uint32_t max_len;    /* TYPE_INFO length (fixed: value size) */
    uint8_t precision, scale;
    uint8_t collation[5];
    bool utf16;          /* nchar/nvarchar/ntext/xml */
    bool utf8;           /* collation has the UTF-8 flag */
    bool nullable;
    /* natural batch type */
    mcdc_type_id nat_type;         /* the batch type (mcdc_sql_types.h) */
    int32_t nat_precision, nat_scale;
    bool chars;                    /* character data (mcdc_sql_type.chars) */
    char *name;          /* owned, UTF-8 */
    mcdc_tds_dec_fn dec; /* chosen for the bound target */
    mcdc_tds_conv_fn conv; /* (max), text and variant values: after gathering */
    int8_t null_w;       /* how the bound target writes a NULL (mcdc_tds_decode.c) */
    bool ssse3;          /* the SSSE3 paths (UTF-16 packing, uniqueidentifier text): the CPU
                          * has it; tests clear it for the SSE2 ones */
} mcdc_tds_col;

typedef struct mcdc_tds_meta {
    int ncols;
    mcdc_tds_col *cols;  /* owned */
} mcdc_tds_meta;
void mcdc_tds_meta_clear(mcdc_tds_meta *m);

/* What the non-row tokens told us. */
typedef struct mcdc_tds_events {
    /* first error (class > 10) of the current request */
    bool error;
    int number, state, klass, line;
    char text[512];
    /* login */
    bool loginack;
    uint32_t tds_version;
    int packet_bytes;      /* ENVCHANGE 4, 0 = none */
    char database[130];
    uint64_t txn;          /* transaction descriptor (ENVCHANGE 8/9/10/17) */
    /* last DONE */
    uint16_t done_status;
    uint64_t done_rows;
} mcdc_tds_events;

/* Reads COLMETADATA after its token byte into m (replacing it). */
int mcdc_tds_read_colmetadata(mcdc_tds_stream *s, mcdc_tds_meta *m, mcdc_error *err);
/* Parses one token other than ROW/NBCROW/COLMETADATA (its byte already
 * consumed) into ev; skips what we do not need. */
int mcdc_tds_read_token(mcdc_tds_stream *s, uint8_t tok, const mcdc_tds_meta *m,
                        mcdc_tds_events *ev, mcdc_error *err);
/* Skips one ROW or NBCROW of m (token byte consumed). */
int mcdc_tds_skip_row(mcdc_tds_stream *s, uint8_t tok, const mcdc_tds_meta *m,
                      mcdc_error *err);
/* Chooses each column's decoder for target fields f[0..ncols) (casts per
 * mcdc_driver.h); MCDC_E_SCHEMA names the column that cannot be read. */
int mcdc_tds_bind(mcdc_tds_meta *m, const mcdc_field *f, mcdc_error *err);
/* Decodes one ROW / NBCROW (token byte consumed) into cols[0..ncols). */
int mcdc_tds_decode_row(mcdc_tds_stream *s, uint8_t tok, const mcdc_tds_meta *m,
                        mcdc_column *cols, mcdc_error *err);

/* ---- tests, fuzzing, benchmarks ------------------------------------------------- */
struct mcdc_conn;
/* A native connection whose replies come from memory (whole reply packets,
 * one message per request, borrowed): no socket, no login; requests are
 * discarded. Close with mcdc_conn_close. */
int mcdc_tds_conn_open_memory(struct mcdc_conn **out, const uint8_t *replies, size_t n,
                              mcdc_error *err);

#endif /* MCDC_TDS_PROTO_H */
