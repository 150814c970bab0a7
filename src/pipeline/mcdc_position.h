/*
 * mcdc_position.h - a job's position: where one of its units starts and
 * where it ends, as the job frame plans, stores and compares it
 * (mcdc_frame.h). One tagged struct per shape of job:
 *
 *   OFFSET  the stream's: the last commit processed and its UTC commit
 *           time, and the capture instance read up to it
 *             {"lsn": "0x...", "commit_ts": "YYYY-MM-DDTHH:MM:SS.fff" or "",
 *              ["capture_instance": name]}
 *   WAVE    a backfill wave's: its first chunk (a start), or one past its
 *           last and each chunk's key bounds (an end)
 *             {"chunk": first}   {"chunk": stop, "chunks": [[i, lo, hi], ...]}
 *   APPLY   apply's: silver's cells of its control row; an end adds the
 *           versions of bronze and the facts the pass read, and bronze's
 *           verdict
 *             {"applied_lsn", "snapshot_lsn", "open_snapshot_lsn",
 *              "snapshot_wave", ["bronze_version", "facts_version"],
 *              ["verdict_lsn", "verdict_us"]}
 *   STAMP   a one-unit job's: the LSN it is stamped with (none at its
 *           start) and that LSN's commit time
 *             {["lsn": "0x...", "commit_ts": "..." or ""]}
 *
 * The JSON is what checkpoints (offsets/<n>, metadata's "start"), the plans
 * of a lake ledger and the "planned" of a commit's userMetadata hold; it is
 * written by mcdc_pos_json and read by mcdc_pos_parse only, which reads
 * every position earlier builds wrote. Two positions are compared on their
 * fields (mcdc_pos_eq), never on their text.
 */
#ifndef MCDC_POSITION_H
#define MCDC_POSITION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcdc_lsn.h"
#include "mcdc_util.h"

typedef enum mcdc_pos_kind {
    MCDC_POS_NONE = 0, /* no position (a zeroed struct) */
    MCDC_POS_OFFSET,
    MCDC_POS_WAVE,
    MCDC_POS_APPLY,
    MCDC_POS_STAMP,
} mcdc_pos_kind;

/* An LSN that may be absent (a position never recorded): none is lower
 * than every LSN. */
typedef struct mcdc_lsn_opt {
    bool set;
    mcdc_lsn v;
} mcdc_lsn_opt;

typedef struct mcdc_pos_offset {
    mcdc_lsn lsn;
    bool has_ts;
    int64_t commit_us;
    char ci[MCDC_IDENT_BYTES_MAX + 1]; /* the capture instance read up to lsn ("": unknown) */
} mcdc_pos_offset;

typedef struct mcdc_pos_chunk {
    int64_t chunk;
    char *lo, *hi; /* owned: the bound's compact JSON (keys sorted); NULL: open */
} mcdc_pos_chunk;

typedef struct mcdc_pos_wave {
    int64_t chunk;           /* a start: its first chunk; an end: one past its last */
    bool has_chunks;         /* an end: the chunks below */
    int32_t n;
    mcdc_pos_chunk *chunks;  /* owned, in chunk order */
} mcdc_pos_wave;

/* Silver's cells of its control row (apply's state). */
typedef struct mcdc_apply_cells {
    mcdc_lsn_opt applied, snapshot, open;
    bool has_wave;
    int64_t wave;
} mcdc_apply_cells;

typedef struct mcdc_pos_apply {
    mcdc_apply_cells cells;
    bool has_versions;       /* an end: the versions its pass read */
    int64_t bronze_version, facts_version;
    bool has_verdict;        /* bronze's verdict, passed on after the pass */
    char verdict_lsn[32];
    int64_t verdict_us;
} mcdc_pos_apply;

typedef struct mcdc_pos_stamp {
    bool has_lsn;
    mcdc_lsn lsn;
    bool has_ts;
    int64_t commit_us;
} mcdc_pos_stamp;

typedef struct mcdc_pos {
    mcdc_pos_kind kind;
    union {
        mcdc_pos_offset offset;
        mcdc_pos_wave wave;
        mcdc_pos_apply apply;
        mcdc_pos_stamp stamp;
    };
} mcdc_pos;

/* Frees what p owns and leaves it NONE (NULL-safe). */
void mcdc_pos_free(mcdc_pos *p);
/* *dst (NONE, or freed first) becomes a copy of src. */
int mcdc_pos_copy(mcdc_pos *dst, const mcdc_pos *src, mcdc_error *err);
/* The same kind and the same fields (a wave's bounds by their text). */
bool mcdc_pos_eq(const mcdc_pos *a, const mcdc_pos *b);
bool mcdc_apply_cells_eq(const mcdc_apply_cells *a, const mcdc_apply_cells *b);

/* p as its JSON (a new reference; NULL: out of memory). */
json_t *mcdc_pos_json(const mcdc_pos *p);
/* j read as a position of kind k into *out (NONE on entry). MCDC_E_CORRUPT
 * when j is no such position (the caller's message says where it was). */
int mcdc_pos_parse(mcdc_pos *out, mcdc_pos_kind k, const json_t *j, mcdc_error *err);
/* p's compact JSON for a message ("(none)" for NULL or NONE). */
const char *mcdc_pos_text(const mcdc_pos *p, char *buf, size_t cap);

/* A wave position's chunk list: n chunks (zeroed, owned by p). */
int mcdc_pos_wave_alloc(mcdc_pos *p, int64_t chunk, int32_t n, mcdc_error *err);
/* The compact JSON of a bound (NULL or JSON null: open, *out NULL). */
int mcdc_pos_bound_text(char **out, const json_t *bound, mcdc_error *err);
/* A bound's JSON back from its text (NULL: JSON null). A new reference. */
json_t *mcdc_pos_bound_json(const char *text);

#endif /* MCDC_POSITION_H */
