/*
 * tds_wire.h - the simulator's TDS codec, server side: packets in and out,
 * PRELOGIN and LOGIN7 decoding, the login response, SQL batch and RPC request
 * decoding, and the token writers. Pure byte work: no sockets (tds_server.c
 * owns those) and no engine calls, so it is unit-tested and fuzzed alone.
 *
 * Facts: spec/formats.md PART C2 (MS-TDS 7.4).
 */
#ifndef TDS_WIRE_H
#define TDS_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcdc_tds_consts.h"
#include "mcdc_util.h"
#include "sim_engine.h"

/* ---- packets -------------------------------------------------------------- */
/* Packet, token, ENVCHANGE and type numbers: src/tds/mcdc_tds_consts.h,
 * shared with our client. */

/* Product build announced in PRELOGIN and LOGINACK (major.0.4135), the
 * build the engine reports in @@VERSION (SQL Server 2022 CU). */
#define TDS_PRODUCT_BUILD 4135

/* SQL Server accepts at most 2100 parameters in one request. */
#define TDS_RPC_PARAMS_MAX 2100
/* What it answers a request with more (severity 16), counting every
 * parameter of the RPC (sp_executesql's @stmt and @params too). */
#define TDS_ERR_TOO_MANY_PARAMS 8003

/* Largest region of packets sent in one write (sim_tds_out_hold): beyond a
 * few hundred KiB a bigger write saves no more system calls worth having. */
#define TDS_OUT_HOLD_BYTES_MAX (1u << 20)

/* Reads exactly n bytes; returns 0, or non-zero on EOF / error. */
typedef int (*sim_tds_read_fn)(void *ctx, uint8_t *p, size_t n);
/* Writes all n bytes; returns 0, or non-zero when the peer is gone. */
typedef int (*sim_tds_write_fn)(void *ctx, const uint8_t *p, size_t n);

/* One client message assembled from its packets. */
typedef struct sim_tds_msg {
    uint8_t type;    /* packet type of every packet of the message */
    uint8_t status;  /* status byte of the first packet (RESETCONNECTION bits) */
    mcdc_buf payload; /* owned; sim_tds_msg_free releases it */
    bool login_phase; /* set by the caller until LOGIN7 succeeded */
} sim_tds_msg;

/* Reads one message: packets until EOM. Each packet must be 8..32767 bytes and
 * of the same type; the whole payload at most MCDC_TDS_PRELOGIN_BYTES_MAX for
 * PRELOGIN, MCDC_TDS_LOGIN7_BYTES_MAX for LOGIN7 and MCDC_TDS_MESSAGE_BYTES_MAX
 * otherwise. In the login phase a message of another type, or past its bound,
 * is MCDC_E_PROTOCOL at its first header past the bound, before the rest is
 * read: an unauthenticated client makes the server hold a few KiB at most.
 * Returns MCDC_E_IO when the peer closed before the first byte (err says
 * "closed"), MCDC_E_PROTOCOL or MCDC_E_LIMIT on bad input. m->payload is
 * reused across calls. */
int sim_tds_msg_read(sim_tds_msg *m, sim_tds_read_fn rd, void *ctx, mcdc_error *err);
void sim_tds_msg_free(sim_tds_msg *m);

/* Splits one message in the buffer `buf` into packets. By default each full
 * packet is written at once. With sim_tds_out_hold, finished packets lie
 * together in one region and go out in one write per region (or at the
 * message's end, or on sim_tds_out_push): fewer system calls per row. */
typedef struct sim_tds_out {
    uint8_t *buf;      /* the packet being filled: region + held */
    size_t size;       /* packet size in use (negotiated), header included */
    size_t pos;        /* bytes in buf, header included */
    uint8_t type;
    uint8_t packet_id;
    uint16_t spid;
    sim_tds_write_fn write;
    void *wctx;
    int failed;        /* sticky: a write failed; later output is dropped */
    uint8_t *region;   /* owned: region_bytes (>= MCDC_TDS_PACKET_BYTES_MAX) */
    size_t region_bytes;
    size_t held;       /* bytes of finished packets at region[0..held), not yet written */
    bool holding;      /* sim_tds_out_hold ran: packets wait in the region */
} sim_tds_out;

int sim_tds_out_init(sim_tds_out *o, sim_tds_write_fn w, void *wctx, mcdc_error *err);
void sim_tds_out_free(sim_tds_out *o);
/* Lets finished packets wait in a region of region_bytes (at most
 * TDS_OUT_HOLD_BYTES_MAX) and go out together. Call between messages. */
int sim_tds_out_hold(sim_tds_out *o, size_t region_bytes, mcdc_error *err);
/* Writes the finished packets held now (not the one being filled). */
int sim_tds_out_push(sim_tds_out *o);
/* Starts a message of packet type `type` (0x04 for every server reply). */
void sim_tds_out_begin(sim_tds_out *o, uint8_t type);
/* Finishes the full packet in buf (status 0) and starts the next one; writes
 * it, or holds it while the region has room for another packet. */
int sim_tds_out_flush(sim_tds_out *o);
/* Ends the message: sends the held packets and the last one, with EOM. */
int sim_tds_out_end(sim_tds_out *o);
int sim_tds_out_bytes_slow(sim_tds_out *o, const void *p, size_t n);

static inline int sim_tds_out_bytes(sim_tds_out *o, const void *p, size_t n) {
    if (o->size - o->pos >= n) {
        if (n) memcpy(o->buf + o->pos, p, n);
        o->pos += n;
        return 0;
    }
    return sim_tds_out_bytes_slow(o, p, n);
}
static inline int sim_tds_out_u8(sim_tds_out *o, uint8_t v) {
    if (o->pos < o->size) {
        o->buf[o->pos++] = v;
        return 0;
    }
    return sim_tds_out_bytes_slow(o, &v, 1);
}
static inline int sim_tds_out_u16(sim_tds_out *o, uint16_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    return sim_tds_out_bytes(o, b, 2);
}
static inline int sim_tds_out_u32(sim_tds_out *o, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return sim_tds_out_bytes(o, b, 4);
}
static inline int sim_tds_out_u64(sim_tds_out *o, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    return sim_tds_out_bytes(o, b, 8);
}

/* ---- text ------------------------------------------------------------------ */
/* UTF-16LE (n bytes) -> UTF-8 appended to b; lone surrogates become U+FFFD. */
int sim_tds_utf16_to_utf8(mcdc_buf *b, const uint8_t *p, size_t n, mcdc_error *err);
/* Number of UTF-16 code units of UTF-8 text (invalid bytes count as U+FFFD). */
size_t sim_tds_utf8_utf16_units(const uint8_t *s, size_t n);
/* Writes UTF-8 text as UTF-16LE: exactly min(max_units, units of the text)
 * code units (a surrogate pair cut by the limit becomes a space). */
int sim_tds_out_utf16(sim_tds_out *o, const uint8_t *s, size_t n, size_t max_units);
/* Length in CP1252 bytes of UTF-8 text, and the writer: '?' for what CP1252
 * lacks, at most max_bytes bytes. */
size_t sim_tds_utf8_cp1252_len(const uint8_t *s, size_t n);
int sim_tds_out_cp1252(sim_tds_out *o, const uint8_t *s, size_t n, size_t max_bytes);
/* CP1252 bytes -> UTF-8 appended to b. */
int sim_tds_cp1252_to_utf8(mcdc_buf *b, const uint8_t *p, size_t n, mcdc_error *err);

/* ---- PRELOGIN ---------------------------------------------------------------- */
typedef struct sim_tds_prelogin {
    int encryption; /* the client's ENCRYPTION byte, -1 if absent */
    int mars;       /* -1 if absent */
} sim_tds_prelogin;

int sim_tds_prelogin_parse(sim_tds_prelogin *out, const uint8_t *p, size_t n, mcdc_error *err);
/* Writes the PRELOGIN reply message: VERSION major.0.build, ENCRYPTION (the
 * negotiated byte, see sim_tls_negotiate), INSTOPT 0, THREADID empty, MARS 0. */
int sim_tds_prelogin_reply(sim_tds_out *o, int version_major, int encryption);

/* ---- LOGIN7 --------------------------------------------------------------------- */
#define TDS_LOGIN_STR_BYTES (MCDC_IDENT_BYTES_MAX + 1)

typedef struct sim_tds_login7 {
    uint32_t tds_version;   /* as sent (LE value), e.g. 0x74000004 */
    uint32_t packet_size;   /* requested; 0 = server default */
    uint8_t option_flags1, option_flags2, type_flags, option_flags3;
    bool integrated_security;
    bool feature_ext;       /* the client sent a FeatureExt block */
    char host[TDS_LOGIN_STR_BYTES];
    char user[TDS_LOGIN_STR_BYTES];
    char password[TDS_LOGIN_STR_BYTES]; /* de-obfuscated; wipe with sim_tds_login7_wipe */
    char app[TDS_LOGIN_STR_BYTES];
    char server[TDS_LOGIN_STR_BYTES];
    char library[TDS_LOGIN_STR_BYTES];
    char language[TDS_LOGIN_STR_BYTES];
    char database[TDS_LOGIN_STR_BYTES];
} sim_tds_login7;

int sim_tds_login7_parse(sim_tds_login7 *out, const uint8_t *p, size_t n, mcdc_error *err);
void sim_tds_login7_wipe(sim_tds_login7 *l);
/* The packet size the server grants for a request: 0 -> 4096, else clamped to
 * 512..32767. */
int sim_tds_packet_size_negotiate(uint32_t requested);

/* ---- tokens ---------------------------------------------------------------------- */
/* SQL_Latin1_General_CP1_CI_AS. */
extern const uint8_t sim_tds_collation_default[5];
/* The ServerName field of ERROR/INFO tokens. */
#define TDS_SERVER_NAME "MCDCSIM"

int sim_tds_tok_envchange_str(sim_tds_out *o, uint8_t type, const char *new_v, const char *old_v);
int sim_tds_tok_envchange_bytes(sim_tds_out *o, uint8_t type, const uint8_t *new_v, uint8_t new_n,
                            const uint8_t *old_v, uint8_t old_n);
int sim_tds_tok_message(sim_tds_out *o, bool is_error, int32_t number, uint8_t state, uint8_t cls,
                    const char *text, const char *proc, int32_t line);
int sim_tds_tok_loginack(sim_tds_out *o, int version_major);
int sim_tds_tok_done(sim_tds_out *o, uint8_t token, uint16_t status, uint16_t curcmd, uint64_t rows);
int sim_tds_tok_returnstatus(sim_tds_out *o, int32_t status);

/* The whole successful login reply (ENVCHANGEs, INFOs, LOGINACK,
 * [FEATUREEXTACK], DONE) as one message. old_packet_size is what the client
 * asked for; new_packet_size what it gets. ENVCHANGE 4 is sent even when the
 * two are equal, as SQL Server does: python-tds sizes its reader only from it.
 * Does not switch o->size: the caller does, after. */
int sim_tds_login_reply(sim_tds_out *o, const char *database, int old_packet_size, int new_packet_size,
                    bool feature_ext, int version_major);
/* The failed-login reply: ERROR 18456 class 14 + DONE(ERROR). */
int sim_tds_login_fail_reply(sim_tds_out *o, int number, int state, int cls, const char *text);

/* ---- requests ------------------------------------------------------------------------ */
/* Skips ALL_HEADERS (if present) at p; sets *pos past it. */
int sim_tds_skip_all_headers(const uint8_t *p, size_t n, size_t *pos, mcdc_error *err);
/* SQL batch payload -> UTF-8 text in b (NUL-terminated, len excludes it). */
int sim_tds_batch_decode(mcdc_buf *b, const uint8_t *p, size_t n, mcdc_error *err);

/* Transaction manager request (packet type 0x0E) -> the T-SQL it means:
 * "BEGIN TRANSACTION", "COMMIT TRANSACTION", "ROLLBACK TRANSACTION", with
 * "; BEGIN TRANSACTION" appended when the request asks to begin a new one
 * (fBeginXact), "SAVE TRANSACTION x". Writes a NUL-terminated statement into
 * sql (cap bytes). MCDC_E_UNSUPPORTED for DTC requests. */
int sim_tds_tm_decode(char *sql, size_t cap, const uint8_t *p, size_t n, mcdc_error *err);

/* One RPC of a request message. Reused across calls; sim_tds_rpc_free releases. */
typedef struct sim_tds_rpc {
    char proc_name[TDS_LOGIN_STR_BYTES]; /* UTF-8; ProcIDs map to their names */
    uint16_t proc_id;                    /* 0 when sent by name */
    uint16_t option_flags;
    sim_param *params;                   /* owned array, nparams valid */
    int nparams;
    int params_cap;
    size_t *name_off;                    /* per param: offset of name in arena */
    size_t *val_off;                     /* per param: offset of value bytes */
    mcdc_buf arena;                      /* names (NUL-terminated) and values */
    mcdc_buf scratch;                    /* PLP chunks before conversion */
} sim_tds_rpc;

/* Decodes the RPC starting at *pos (the caller skipped ALL_HEADERS before the
 * first one) and moves *pos past it and past a following 0xFF/0xFE batch
 * separator. *more says whether another RPC follows. Pointers in rpc->params
 * are valid until the next call or sim_tds_rpc_free. */
int sim_tds_rpc_decode(sim_tds_rpc *rpc, const uint8_t *p, size_t n, size_t *pos, bool *more,
                   mcdc_error *err);
void sim_tds_rpc_free(sim_tds_rpc *rpc);
/* "sp_executesql" for 10, ...; NULL for an unknown id. */
const char *sim_tds_proc_id_name(uint16_t id);

/* ---- value text forms shared by the decoder and encoder ----------------------------- */
/* Formats a scaled integer (magnitude in 4 LE 32-bit limbs) as "-123.4500". */
size_t sim_tds_decimal_format(char *out, size_t cap, bool negative, const uint32_t mag[4], int scale);
/* Parses decimal text into a magnitude scaled to `scale` (rounded half away
 * from zero). Returns false for text that is not a number or overflows
 * `precision` digits. */
bool sim_tds_decimal_parse(const uint8_t *s, size_t n, int precision, int scale, bool *negative,
                       uint32_t mag[4]);

/* Date/time text: "YYYY-MM-DD", "HH:MM:SS[.f{1,7}]", "YYYY-MM-DD HH:MM:SS[.f]"
 * ('T' accepted too), optionally followed by " +hh:mm" / "-hh:mm" / "Z". */
typedef struct sim_tds_dt {
    int64_t days;      /* since 0001-01-01 (local date) */
    int64_t time_100ns; /* since local midnight */
    int offset_min;    /* -840..840 */
    bool has_date, has_time, has_offset;
} sim_tds_dt;
bool sim_tds_dt_parse(sim_tds_dt *out, const uint8_t *s, size_t n);
/* Formats parts: date "YYYY-MM-DD", time with `frac` digits (0-7), offset
 * " +hh:mm". out needs 48 bytes. Returns the length. */
size_t sim_tds_dt_format(char *out, const sim_tds_dt *dt, int frac);
/* Days since 0001-01-01 of a civil date. */
int64_t sim_tds_days_from_civil0001(int64_t y, unsigned m, unsigned d);

/* GUID text "6F9619FF-8B86-D011-B42D-00C04FC964FF" <-> 16 wire bytes. */
bool sim_tds_guid_parse(uint8_t out[16], const uint8_t *s, size_t n);
void sim_tds_guid_format(char out[37], const uint8_t wire[16]);

#endif /* TDS_WIRE_H */
