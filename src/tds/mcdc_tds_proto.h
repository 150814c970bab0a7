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
#include "mcdc_util.h"

/* ---- packets ------------------------------------------------------------- */
#define TDS_HEADER_BYTES 8
#define TDS_PKT_SQL_BATCH 0x01
#define TDS_PKT_RPC 0x03
#define TDS_PKT_REPLY 0x04
#define TDS_PKT_ATTENTION 0x06
#define TDS_PKT_LOGIN7 0x10
#define TDS_PKT_PRELOGIN 0x12
#define TDS_STATUS_EOM 0x01

#define TDS_VERSION_74 0x74000004u

/* ---- tokens -------------------------------------------------------------- */
#define TDS_TOK_RETURNSTATUS 0x79
#define TDS_TOK_COLMETADATA 0x81
#define TDS_TOK_ALTMETADATA 0x88
#define TDS_TOK_TABNAME 0xA4
#define TDS_TOK_COLINFO 0xA5
#define TDS_TOK_ORDER 0xA9
#define TDS_TOK_ERROR 0xAA
#define TDS_TOK_INFO 0xAB
#define TDS_TOK_RETURNVALUE 0xAC
#define TDS_TOK_LOGINACK 0xAD
#define TDS_TOK_FEATUREEXTACK 0xAE
#define TDS_TOK_ROW 0xD1
#define TDS_TOK_NBCROW 0xD2
#define TDS_TOK_ALTROW 0xD3
#define TDS_TOK_ENVCHANGE 0xE3
#define TDS_TOK_SESSIONSTATE 0xE4
#define TDS_TOK_SSPI 0xED
#define TDS_TOK_FEDAUTHINFO 0xEE
#define TDS_TOK_DONE 0xFD
#define TDS_TOK_DONEPROC 0xFE
#define TDS_TOK_DONEINPROC 0xFF

#define TDS_DONE_MORE 0x0001
#define TDS_DONE_ERROR 0x0002
#define TDS_DONE_COUNT 0x0010
#define TDS_DONE_ATTN 0x0020
#define TDS_DONE_SRVERROR 0x0100

/* ---- data types ---------------------------------------------------------- */
#define TDS_NULLTYPE 0x1F
#define TDS_INT1 0x30
#define TDS_BIT 0x32
#define TDS_INT2 0x34
#define TDS_INT4 0x38
#define TDS_DATETIM4 0x3A
#define TDS_FLT4 0x3B
#define TDS_MONEY 0x3C
#define TDS_DATETIME 0x3D
#define TDS_FLT8 0x3E
#define TDS_MONEY4 0x7A
#define TDS_INT8 0x7F
#define TDS_GUID 0x24
#define TDS_INTN 0x26
#define TDS_DECIMAL 0x37 /* legacy */
#define TDS_NUMERIC 0x3F /* legacy */
#define TDS_BITN 0x68
#define TDS_DECIMALN 0x6A
#define TDS_NUMERICN 0x6C
#define TDS_FLTN 0x6D
#define TDS_MONEYN 0x6E
#define TDS_DATETIMN 0x6F
#define TDS_DATEN 0x28
#define TDS_TIMEN 0x29
#define TDS_DATETIME2N 0x2A
#define TDS_DATETIMEOFFSETN 0x2B
#define TDS_BIGVARBINARY 0xA5
#define TDS_BIGVARCHAR 0xA7
#define TDS_BIGBINARY 0xAD
#define TDS_BIGCHAR 0xAF
#define TDS_NVARCHAR 0xE7
#define TDS_NCHAR 0xEF
#define TDS_XML 0xF1
#define TDS_UDT 0xF0
#define TDS_TEXT 0x23
#define TDS_IMAGE 0x22
#define TDS_NTEXT 0x63
#define TDS_SSVARIANT 0x62

#define TDS_PLP_NULL UINT64_MAX
#define TDS_PLP_UNKNOWN (UINT64_MAX - 1)

/* Days from 0001-01-01 to 1970-01-01 and from 1900-01-01 to 1970-01-01. */
#define TDS_DAYS_0001_TO_1970 719162
#define TDS_DAYS_1900_TO_1970 25567
#define TDS_US_PER_DAY 86400000000LL

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
