/*
 * mcdc_parquet.h - Parquet files written and read by our own code
 * (formats.md PART B). Library-internal API used by the Delta writer/reader.
 *
 * Files live in a storage (src/storage): the writer streams into a storage
 * writer, the reader reads by ranges; neither touches a file itself.
 *
 * Writer: flat schemas (one leaf per mcdc_field), streaming with bounded
 * memory: open -> write(batch) any number of times -> close (footer). Row
 * groups are flushed when they reach options.row_group_bytes; only the
 * current row group's encoded column chunks are held in memory.
 *
 *   mcdc_type           Parquet physical  annotation (LogicalType + ConvertedType)
 *   BOOL                BOOLEAN           -
 *   INT8 / INT16        INT32             INT(8|16, signed) / INT_8|INT_16
 *   INT32 / INT64       INT32 / INT64     -
 *   FLOAT / DOUBLE      FLOAT / DOUBLE    -
 *   DECIMAL(p,s)        INT32 p<=9, INT64 p<=18, else FLBA(minimal bytes, BE)
 *                                         DECIMAL(p,s) / DECIMAL
 *   UTF8                BYTE_ARRAY        STRING / UTF8
 *   BINARY              BYTE_ARRAY        -
 *   FIXED_BINARY(n)     FLBA(n)           -
 *   DATE32              INT32             DATE / DATE
 *   TIMESTAMP_NTZ       INT64             TIMESTAMP(false, MICROS) / TIMESTAMP_MICROS
 *   TIMESTAMP_UTC       INT64             TIMESTAMP(true, MICROS) / TIMESTAMP_MICROS
 *
 * Reader: any flat file of the writers Delta meets (Spark, pyarrow, delta-rs,
 * DuckDB, ours): all encodings of formats.md B10, pages v1/v2, codecs
 * uncompressed/snappy/gzip/zstd/lz4_raw/lz4; INT96 -> TIMESTAMP_UTC; millis/
 * nanos timestamps -> micros; unsigned ints widened. Columns can be
 * projected; row groups skipped by simple predicates. Nested columns (Delta
 * checkpoints) are reachable through the leaf API at the end of this file:
 * every leaf column chunk with its definition and repetition levels.
 *
 * Every error names the file; bad input never crashes (fuzzed).
 */
#ifndef MCDC_PARQUET_H
#define MCDC_PARQUET_H

#include <stdbool.h>
#include <stdint.h>

#include "mcdc_batch.h"
#include "mcdc_storage.h"
#include "mcdc_util.h"

/* Compression codecs (the Parquet CompressionCodec numbers). */
typedef enum mcdc_parquet_codec {
    MCDC_PARQUET_UNCOMPRESSED = 0,
    MCDC_PARQUET_SNAPPY = 1,
    MCDC_PARQUET_GZIP = 2,
    MCDC_PARQUET_LZ4 = 5,     /* read only (Hadoop framing) */
    MCDC_PARQUET_ZSTD = 6,
    MCDC_PARQUET_LZ4_RAW = 7
} mcdc_parquet_codec;

/* "zstd", "snappy", "gzip", "lz4_raw", "uncompressed" (also "none", "lz4" =
 * lz4_raw as Delta's delta.parquet.compression.codec spells them). */
int mcdc_parquet_codec_parse(mcdc_parquet_codec *out, const char *name, mcdc_error *err);
const char *mcdc_parquet_codec_name(mcdc_parquet_codec c);

/* ---- writer ----------------------------------------------------------------- */

#define MCDC_PARQUET_WRITE_OPTIONS_VERSION 1

typedef struct mcdc_parquet_write_options {
    int32_t version;           /* MCDC_PARQUET_WRITE_OPTIONS_VERSION */
    mcdc_parquet_codec codec;  /* default ZSTD (Delta: writers SHOULD default to zstd) */
    /* Codec level, 0 = default: zstd 1, gzip 6. zstd 1 rather than the library's
     * 3: on Parquet pages (already dictionary/columnar-packed) level 3 gains a
     * few percent of size for ~1.5x the CPU (performance.md (c): 510 vs 353
     * MB/s), and compression is our most expensive per-byte stage. */
    int32_t level;
    int64_t row_group_bytes;   /* uncompressed target; 0 = MCDC_PARQUET_ROW_GROUP_BYTES_DEFAULT */
    int64_t page_bytes;        /* 0 = 256 KiB (see PQ_PAGE_BYTES_DEFAULT) */
    int64_t dict_bytes_max;    /* 0 = MCDC_PARQUET_DICT_BYTES_MAX */
    /* Dictionary-encode (all types but BOOL) where it pays: each column's
     * encoding is chosen once per file on its first ~16K values (dictionary,
     * PLAIN, or DELTA_BINARY_PACKED for INT32/INT64, by trial compression)
     * and kept for the file's later row groups, or taken from `choices`. */
    bool dictionary;
    bool data_page_v2;         /* write DATA_PAGE_V2 instead of v1 */
    /* Encode/compress column chunks on N threads (1..16); 0 = auto: half
     * the online CPUs, at most 4 (1 on 2 cores). Measured on the 2-core
     * bench machine (1M CDC rows): with the other core idle 2 threads cut
     * the wall time 0.68 -> 0.53 s for +3% CPU; with the machine loaded
     * (other processes, or in the stream the source's reader threads) they
     * gained nothing. So the writer takes at most half the cores. */
    int32_t threads;
    const char *created_by;    /* NULL = "mssql-cdc version <x.y.z>" */
    /* NULL, or one SchemaElement.field_id per column (Delta column mapping
     * writes the column id there); copied at open. */
    const int32_t *field_ids;
    /* NULL, or the choices a writer of the previous file of the same schema
     * and codec made (mcdc_parquet_writer_choices): the columns it chose for
     * start with its encodings instead of trial-compressing a sample again
     * (about 6% of the writer's CPU on a 600K-row file). Choices that do not
     * fit (another schema or codec) are ignored. Copied at open. */
    const struct mcdc_parquet_choices *choices;
    /* NULL, or a spare (mcdc_parquet_spare_create, the caller's): the writer
     * starts with the buffers the last writer given it kept (column chunks,
     * pages, scratch, compression contexts) and gives its own back when
     * freed, instead of freeing them and growing new ones, file after file.
     * One writer at a time uses a spare. */
    struct mcdc_parquet_spare *spare;
} mcdc_parquet_write_options;

#define MCDC_PARQUET_WRITE_OPTIONS_INIT \
    {MCDC_PARQUET_WRITE_OPTIONS_VERSION, MCDC_PARQUET_ZSTD, 0, 0, 0, 0, true, false, 0, NULL, NULL, \
     NULL, NULL}

/* Buffers kept from one writer to the next of the same job
 * (mcdc_parquet_write_options.spare): their capacity, not their contents,
 * at most bytes_max of it (0: MCDC_PARQUET_SPARE_BYTES_MAX). Owned by the
 * caller, who frees it after the last writer that used it. Not shared
 * between threads at once. */
typedef struct mcdc_parquet_spare mcdc_parquet_spare;
int mcdc_parquet_spare_create(mcdc_parquet_spare **out, size_t bytes_max, mcdc_error *err);
void mcdc_parquet_spare_free(mcdc_parquet_spare *s); /* NULL-safe */
/* Bytes of buffer capacity s keeps now (0 while a writer holds them). */
size_t mcdc_parquet_spare_bytes(const mcdc_parquet_spare *s);

/* The encoding choices of a writer's columns (for the next file's writer,
 * mcdc_parquet_write_options.choices). */
typedef struct mcdc_parquet_choices mcdc_parquet_choices;

/* A typed statistic value. Which member is meaningful follows the field type:
 *   i: BOOL (0/1), INT8..INT64, DATE32, TIMESTAMP_* (microseconds)
 *   d: FLOAT, DOUBLE
 *   dec_lo/dec_hi: DECIMAL (128-bit two's complement unscaled value)
 *   bytes/len: UTF8, BINARY, FIXED_BINARY (borrowed, owned by the writer) */
typedef struct mcdc_parquet_value {
    int64_t i;
    double d;
    uint64_t dec_lo;
    int64_t dec_hi;
    const uint8_t *bytes;
    int64_t len;
} mcdc_parquet_value;

typedef struct mcdc_parquet_column_stats {
    int64_t null_count;
    bool has_min_max;          /* false when every value is NULL (or NaN) */
    mcdc_parquet_value min;
    mcdc_parquet_value max;
} mcdc_parquet_column_stats;

/* What the Delta writer needs for `add` (size, numRecords, min/max/nullCount). */
typedef struct mcdc_parquet_file_info {
    int64_t file_bytes;
    int64_t rows;
    int32_t row_groups;
    int32_t n_columns;
    const mcdc_parquet_column_stats *columns; /* n_columns, owned by the writer */
} mcdc_parquet_file_info;

typedef struct mcdc_parquet_writer mcdc_parquet_writer;

/* Writes the file key of storage st (borrowed: it must outlive the writer)
 * through a storage writer: nothing is visible under key until close
 * publishes it whole (as put: create or replace). Takes a reference to
 * schema. opts may be NULL. */
int mcdc_parquet_writer_open(mcdc_parquet_writer **out, mcdc_storage *st, const char *key,
                             mcdc_schema *schema, const mcdc_parquet_write_options *opts,
                             mcdc_error *err);
/* Convenience for tools and tests: the file at a local path (a local storage
 * on its directory, owned by the writer). */
int mcdc_parquet_writer_open_path(mcdc_parquet_writer **out, const char *path,
                                  mcdc_schema *schema, const mcdc_parquet_write_options *opts,
                                  mcdc_error *err);
/* Appends all rows of b (its schema must match the writer's field by field). */
int mcdc_parquet_writer_write(mcdc_parquet_writer *w, const mcdc_batch *b, mcdc_error *err);
/* Flushes the last row group, writes the footer and publishes the file (the
 * storage writer's commit: durable, then visible). On failure nothing is
 * published. After success, mcdc_parquet_writer_info is valid. */
int mcdc_parquet_writer_close(mcdc_parquet_writer *w, mcdc_error *err);
/* The same but for the publication: *out gets the storage writer holding
 * the whole file, for the caller to commit (MCDC_STORAGE_PUT: durable, then
 * visible) or abort, on any thread; after the writer is freed only when
 * it was opened on the caller's storage (not open_path's own). On
 * failure *out is NULL and nothing is published. mcdc_parquet_writer_info
 * is valid after success. */
int mcdc_parquet_writer_close_unpublished(mcdc_parquet_writer *w, mcdc_storage_writer **out,
                                          mcdc_error *err);
/* Valid after a successful close, until free. */
const mcdc_parquet_file_info *mcdc_parquet_writer_info(const mcdc_parquet_writer *w);
/* The encoding choices w's columns made (for the next file's writer:
 * mcdc_parquet_write_options.choices); NULL when out of memory. */
mcdc_parquet_choices *mcdc_parquet_writer_choices(const mcdc_parquet_writer *w);
void mcdc_parquet_choices_free(mcdc_parquet_choices *ch); /* NULL-safe */
/* Where the writer's CPU time goes (bench-parquet's profile): the CPU time
 * of the thread doing each stage, per column, summed over the file. */
typedef enum mcdc_parquet_stage {
    MCDC_PARQUET_STAGE_LEVELS = 0, /* validity: non-null rows listed, page bitmap, RLE levels */
    MCDC_PARQUET_STAGE_CONVERT,    /* values to their PLAIN form (the page's copy) */
    MCDC_PARQUET_STAGE_STATS,      /* min/max */
    MCDC_PARQUET_STAGE_DICT,       /* dictionary lookups and the encoding choice */
    MCDC_PARQUET_STAGE_ENCODE,     /* page values: RLE indices, DELTA, booleans; headers */
    MCDC_PARQUET_STAGE_COMPRESS,   /* the codec */
    MCDC_PARQUET_STAGE_COPY,       /* pages appended to their column chunk */
    MCDC_PARQUET_STAGE_WRITE,      /* column chunks handed to the storage writer */
    MCDC_PARQUET_STAGES
} mcdc_parquet_stage;
const char *mcdc_parquet_stage_name(mcdc_parquet_stage s);
/* Turns the profile on (before the first write; off by default: it reads
 * the thread's CPU clock twice per stage, per slice of a page). */
void mcdc_parquet_writer_profile_enable(mcdc_parquet_writer *w);
/* Nanoseconds of CPU per stage for column i (MCDC_PARQUET_STAGES entries,
 * owned by the writer), or NULL when the profile is off. */
const int64_t *mcdc_parquet_writer_profile(const mcdc_parquet_writer *w, int32_t column);
/* Frees; an unclosed writer publishes nothing (its storage writer is
 * aborted). NULL-safe. */
void mcdc_parquet_writer_free(mcdc_parquet_writer *w);

/* ---- reader ----------------------------------------------------------------- */

typedef struct mcdc_parquet_reader mcdc_parquet_reader;

#define MCDC_PARQUET_READ_OPTIONS_VERSION 1
typedef struct mcdc_parquet_read_options {
    int32_t version;      /* MCDC_PARQUET_READ_OPTIONS_VERSION */
    int64_t batch_rows;   /* rows per batch of _next, 0 = MCDC_BATCH_ROWS_DEFAULT */
    /* a file up to this size is read whole at open; 0 =
     * MCDC_PARQUET_READ_WHOLE_BYTES, -1 = never (ranged reads only) */
    int64_t whole_bytes;
} mcdc_parquet_read_options;
#define MCDC_PARQUET_READ_OPTIONS_INIT {MCDC_PARQUET_READ_OPTIONS_VERSION, 0, 0}

/* Opens the file key of storage st (borrowed: it must outlive the reader)
 * and decodes its footer. A small file (opts->whole_bytes) is read whole by
 * the first read; else everything is read by ranged reads: the footer, then
 * each selected column chunk of the row group being read. opts may be
 * NULL. A missing key is MCDC_E_NOTFOUND. */
int mcdc_parquet_reader_open(mcdc_parquet_reader **out, mcdc_storage *st, const char *key,
                             const mcdc_parquet_read_options *opts, mcdc_error *err);
/* Convenience for tools and tests: the file at a local path. */
int mcdc_parquet_reader_open_path(mcdc_parquet_reader **out, const char *path,
                                  const mcdc_parquet_read_options *opts, mcdc_error *err);
/* Over caller memory (borrowed until free); name appears in errors. */
int mcdc_parquet_reader_open_mem(mcdc_parquet_reader **out, const void *data, size_t len,
                                 const char *name, const mcdc_parquet_read_options *opts,
                                 mcdc_error *err);
void mcdc_parquet_reader_free(mcdc_parquet_reader *r);

int64_t mcdc_parquet_reader_rows(const mcdc_parquet_reader *r);
int32_t mcdc_parquet_reader_row_groups(const mcdc_parquet_reader *r);
int64_t mcdc_parquet_reader_row_group_rows(const mcdc_parquet_reader *r, int32_t rg);
/* "created_by" of the footer, or "" (borrowed). */
const char *mcdc_parquet_reader_created_by(const mcdc_parquet_reader *r);

/* The flat schema: one field per top-level primitive (non-repeated) column,
 * in file order; nested columns (groups, lists, maps) are left out of it and
 * are read with the leaf API. Borrowed. MCDC_E_UNSUPPORTED when the file has
 * no top-level primitive column at all (e.g. a Delta checkpoint). */
int mcdc_parquet_reader_schema(const mcdc_schema **out, mcdc_parquet_reader *r,
                               mcdc_error *err);
/* Reads only these columns (by name, in this order); before the first _next.
 * n = 0 resets to all columns. */
int mcdc_parquet_reader_select(mcdc_parquet_reader *r, const char *const *names, int32_t n,
                               mcdc_error *err);

typedef enum mcdc_parquet_op {
    MCDC_PARQUET_EQ = 0, MCDC_PARQUET_LT, MCDC_PARQUET_LE, MCDC_PARQUET_GT, MCDC_PARQUET_GE
} mcdc_parquet_op;
/* Skips row groups whose statistics prove no row can satisfy
 * `column op value` (value typed as in mcdc_parquet_value, for ints/dates/
 * timestamps/float/double/strings/binary/decimals). Several filters AND.
 * Rows of kept row groups are NOT filtered: this is pruning, not a WHERE. */
int mcdc_parquet_reader_filter(mcdc_parquet_reader *r, const char *column, mcdc_parquet_op op,
                               const mcdc_parquet_value *value, mcdc_error *err);
/* Whether row group rg would be read (after filters). */
bool mcdc_parquet_reader_row_group_selected(const mcdc_parquet_reader *r, int32_t rg);

/* Next batch of at most batch_rows rows of the selected columns (schema of
 * the selection). *out = NULL at the end. Caller frees the batch. */
int mcdc_parquet_reader_next(mcdc_batch **out, mcdc_parquet_reader *r, mcdc_error *err);
/* Gives a batch from _next back instead of mcdc_batch_free: the next _next
 * refills it, so a read loop allocates (and page-faults) no batch memory
 * per batch. b must not be used afterwards; NULL is a no-op. */
void mcdc_parquet_reader_recycle(mcdc_parquet_reader *r, mcdc_batch *b);

/* ---- leaf (column chunk) API: nested files such as Delta checkpoints ------
 *
 * Leaves are the primitive columns in schema order. path is the dotted path
 * from the root ("add.partitionValues.key_value.key"); max_def/max_rep the
 * maximum levels; field the leaf mapped to an mcdc type (name = last path
 * element, nullable = max_def > 0).
 *
 * Reading a leaf of a row group gives one entry per level entry:
 *   def[i], rep[i]   (NULL when max_def / max_rep is 0, meaning all max / all 0)
 *   values: a one-column batch with n entries; entry i is null unless
 *   def[i] == max_def.
 * Rows of a flat column = entries; for a repeated leaf, rep[i] == 0 starts a
 * new row.
 *
 * Reading a Delta checkpoint (one action per row; add/remove/metaData/
 * protocol/txn are optional structs): a leaf under structs only (max_rep 0)
 * has exactly one entry per row, so leaves of the same struct zip by row
 * index: "add.path" def == max_def -> the row is an add with that path; a
 * lower def says which optional ancestor is null (def 0: no add in this
 * row). A map such as "add.partitionValues.key_value.key"/".value" (max_rep
 * 1) has one entry per map entry and one entry for each row whose map is
 * empty or absent: walk entries, rep == 0 starts the next row; def ==
 * max_def of the key means a real entry (the value leaf has the same entry
 * positions; value null when its def < its max_def). Paths use the file's
 * names ("key_value" for maps, "list"/"element" for 3-level lists; 2-level
 * legacy lists show their own names); find them with
 * mcdc_parquet_reader_find_leaf. See tests/interop/test_parquet_interop.py
 * (test_delta_rs_checkpoint_leaves) for a worked example. */
typedef struct mcdc_parquet_leaf {
    const char *path;        /* owned by the reader */
    int16_t max_def;
    int16_t max_rep;
    int32_t physical_type;   /* Parquet Type number */
    const mcdc_field *field; /* owned by the reader */
} mcdc_parquet_leaf;

typedef struct mcdc_parquet_leaf_data {
    int64_t n;
    int16_t *def;            /* owned; mcdc_parquet_leaf_data_free */
    int16_t *rep;
    mcdc_batch *values;      /* owned */
} mcdc_parquet_leaf_data;

int32_t mcdc_parquet_reader_leaves(const mcdc_parquet_reader *r);
const mcdc_parquet_leaf *mcdc_parquet_reader_leaf(const mcdc_parquet_reader *r, int32_t i);
/* Index of the leaf with this dotted path, or -1. */
int32_t mcdc_parquet_reader_find_leaf(const mcdc_parquet_reader *r, const char *path);
int mcdc_parquet_reader_read_leaf(mcdc_parquet_leaf_data *out, mcdc_parquet_reader *r,
                                  int32_t rg, int32_t leaf, mcdc_error *err);
void mcdc_parquet_leaf_data_free(mcdc_parquet_leaf_data *d);

#endif /* MCDC_PARQUET_H */
