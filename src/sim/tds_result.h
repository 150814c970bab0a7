/*
 * tds_result.h - the engine's result sink, encoded as TDS tokens: COLMETADATA
 * with per-column encoders chosen once per result set, ROW values converted
 * straight into the packet buffer, DONE/DONEINPROC/DONEPROC with the right
 * status bits, ERROR/INFO, ENVCHANGE, RETURNSTATUS.
 *
 * A DONE is held back until the next token shows whether more follows
 * (DONE_MORE) or the request ends (the final one has no DONE_MORE).
 */
#ifndef TDS_RESULT_H
#define TDS_RESULT_H

#include "tds_wire.h"

/* How one result column is written. Fixed at COLMETADATA time. */
typedef struct sim_tds_col_enc {
    uint8_t kind;      /* TDS_ENC_* (internal) */
    uint8_t fixed;     /* NOT NULL fixed-length type: no length prefix */
    uint8_t scale;     /* decimal scale; time scale 0-7 */
    uint8_t precision; /* decimal precision */
    uint8_t nbytes;    /* value bytes: ints, floats, money, decimal (with sign), time part */
    uint8_t nullable;
    uint16_t type_id;  /* SIM_T_* of the column */
    uint8_t null_bytes; /* bytes a NULL takes in a ROW token (0: cannot be NULL) */
    int32_t max_bytes; /* var types: the TYPE_INFO max length in bytes; -1 = (max) */
    int32_t pad_bytes; /* char(n)/nchar(n)/binary(n): values are padded to this */
} sim_tds_col_enc;

typedef struct sim_tds_result sim_tds_result;

/* Called by the sink: what 0 = before a row, 1 = at a statement boundary
 * (a result set starts or a statement ends). Returns non-zero to stop the
 * request (attention, a dropped connection); the sink then returns that. */
typedef int (*sim_tds_result_check_fn)(void *ctx, sim_tds_result *r, int what);

struct sim_tds_result {
    sim_tds_out *out;            /* borrowed */
    sim_tds_col_enc *cols;       /* owned */
    int ncols, cols_cap;
    bool in_rpc;
    bool nbcrow;             /* client is TDS 7.3B+: rows with NULLs may use NBCROW */
    bool pending;            /* a DONE token waits for its DONE_MORE decision */
    uint8_t pend_tok;
    uint16_t pend_status;
    uint64_t pend_rows;
    bool any_error;          /* an ERROR token (class > 10) in this request */
    bool got_status;         /* RETURNSTATUS sent by the engine */
    bool has_handle;         /* end_rpc sends the prepared handle as RETURNVALUE */
    int32_t handle;
    uint16_t handle_ordinal;
    char handle_name[TDS_LOGIN_STR_BYTES];
    bool handle_sent;        /* the handle went out before the engine's output parameters */
    int rv_ordinal_shift;    /* added to the engine's output-parameter ordinals (the RPC as
                                sent vs the sp_executesql it was rewritten to) */
    bool in_xact;            /* between ENVCHANGE 8 and 9/10 */
    bool attention;          /* the check hook saw an ATTENTION */
    bool fatal;              /* an error of class >= 20: the connection ends after */
    bool stopped;            /* a callback asked to stop */
    int conversion_warnings; /* values that could not be converted (sent as NULL) */
    uint64_t rows_total;
    sim_tds_result_check_fn check;
    void *check_ctx;
    /* Rows from cells with up to 64 columns: the bytes NBCROW saves, by
     * NULL bitmap byte and its value (set at the first such row of a
     * result set). */
    bool null_sum_ready;
    uint16_t null_sum[8][256];
    /* the session whose database a CLR type's TYPE_INFO names (NULL:
     * "master") */
    const sim_session *sess;
};

int sim_tds_result_init(sim_tds_result *r, sim_tds_out *out, mcdc_error *err);
void sim_tds_result_free(sim_tds_result *r);
/* The sink whose ctx is r. */
void sim_tds_result_sink(sim_tds_result *r, sim_sink *sink);
/* A request starts: resets per-request state and begins a reply message
 * (only when begin_message; several RPCs share one message). */
void sim_tds_result_begin(sim_tds_result *r, bool in_rpc, bool begin_message);
/* Ends a SQL batch: the final DONE (a DONE(0) if the engine sent none) and
 * the end of the message. */
int sim_tds_result_end_batch(sim_tds_result *r);
/* Ends one RPC: RETURNSTATUS (0 unless the engine sent one), the handle
 * RETURNVALUE when has_handle (sp_prepare/sp_prepexec) and DONEPROC; last
 * ends the message. */
int sim_tds_result_end_rpc(sim_tds_result *r, bool last);
/* The request was stopped by an ATTENTION: DONE(DONE_ATTN), end of message.
 * Held-back tokens are dropped (the client discards them anyway). */
int sim_tds_result_attention_ack(sim_tds_result *r);

/* RETURNVALUE token of an output parameter, the value encoded as a column of
 * type t would be (for a sink callback the engine seam may grow). */
int sim_tds_result_return_value(sim_tds_result *r, uint16_t ordinal, const char *name,
                                const sim_type *t, const sim_value *v);

/* Exposed for tests and the benchmark: the column encoders a result set
 * gets, and one row written with them. */
int sim_tds_result_columns(sim_tds_result *r, const sim_column *cols, int ncols);
int sim_tds_result_row(sim_tds_result *r, const sim_value *vals, int ncols);

/* Pre-encoded cells (the engine's change store): a column's encoder as
 * COLMETADATA would plan it, and one value encoded as a ROW token holds it
 * for that column (length prefix included; a NULL as ROW writes it), the
 * same bytes sim_tds_result_row writes. */
void sim_tds_col_plan(sim_tds_col_enc *e, const sim_column *c);

typedef struct sim_tds_cellenc {
    sim_tds_out out;    /* scratch packet: values are encoded into it */
    sim_tds_result res; /* for the encoder's conversion warnings */
    mcdc_buf *spill;    /* where a value larger than a packet goes */
} sim_tds_cellenc;

int sim_tds_cellenc_init(sim_tds_cellenc *c, mcdc_error *err);
void sim_tds_cellenc_free(sim_tds_cellenc *c);
/* Appends the encoded bytes of v (column planned as e) to out. */
int sim_tds_cellenc_put(sim_tds_cellenc *c, const sim_tds_col_enc *e, const sim_value *v, mcdc_buf *out,
                        mcdc_error *err);
/* One row of pre-encoded cells (for the columns of the current result set). */
int sim_tds_result_row_cells(sim_tds_result *r, const sim_cell *cells, int ncells, const uint8_t *nulls, int ncols);

#endif /* TDS_RESULT_H */
