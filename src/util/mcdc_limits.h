/*
 * mcdc_limits.h - every ceiling of the engine and the simulator, in one place,
 * each with its reason. Exceeding a limit is an error (MCDC_E_LIMIT), never
 * silent growth.
 */
#ifndef MCDC_LIMITS_H
#define MCDC_LIMITS_H

/* TDS: SQL Server accepts packet sizes up to 32767 bytes; the 8-byte header
 * is included. 512 is the protocol minimum. */
#define MCDC_TDS_PACKET_BYTES_MIN 512
#define MCDC_TDS_PACKET_BYTES_MAX 32767
#define MCDC_TDS_PACKET_BYTES_DEFAULT 4096

/* TDS: one client request (SQL batch or RPC) assembled from packets. Our
 * queries are a few KiB; scenario scripts a few hundred KiB. 64 MiB leaves
 * room for multi-row INSERTs of bulk loads and stops a lying peer early. */
#define MCDC_TDS_MESSAGE_BYTES_MAX (64u * 1024u * 1024u)

/* LOGIN7 is at most 128 KiB by the MS-TDS specification. */
#define MCDC_TDS_LOGIN7_BYTES_MAX (128u * 1024u)
/* A PRELOGIN message is a table of a few short options (~50 bytes); a
 * server buffers no more than this of one (the TLS handshake inside PRELOGIN
 * packets has its own bound, tds_tls.c). */
#define MCDC_TDS_PRELOGIN_BYTES_MAX 4096u

/* SQL Server allows 1024 columns in a table (4096 in a wide-table SELECT).
 * A change table adds 7 metadata columns; 4096 bounds any result we read. */
#define MCDC_COLUMNS_MAX 4096

/* One value of a (max) type. SQL Server's own ceiling is 2 GiB; holding that
 * in a columnar batch is not sensible. 64 MiB per value, and a batch is
 * flushed before it would pass MCDC_BATCH_BYTES_MAX. */
#define MCDC_VALUE_BYTES_MAX (64u * 1024u * 1024u)

/* A columnar batch: rows and bytes, whichever comes first. 64k rows keep the
 * batch in L2-friendly column chunks; 256 MiB bounds memory with wide rows. */
#define MCDC_BATCH_ROWS_DEFAULT 65536
#define MCDC_BATCH_BYTES_MAX (256u * 1024u * 1024u)

/* Identifiers: SQL Server sysname is 128 characters; a capture instance name
 * is at most 100 (the reference validates that). UTF-8 bytes: 4 per char. */
#define MCDC_SYSNAME_CHARS_MAX 128
#define MCDC_CAPTURE_INSTANCE_CHARS_MAX 100
#define MCDC_IDENT_BYTES_MAX (4 * MCDC_SYSNAME_CHARS_MAX)

/* Connection strings users write are well under 1 KiB; 8 KiB stops abuse. */
#define MCDC_CONNSTR_BYTES_MAX 8192
/* A storage option's value (a key, a session token, a SAS token, an Azure
 * connection string): STS session tokens run to ~2 KiB, connection strings
 * with a SAS to a few; 8 KiB bounds them as it does a connection string
 * (and an options file line holds one). */
#define MCDC_STORAGE_OPTION_BYTES_MAX 8192
/* An options file holds a few lines; 1 MiB is far past any real one and
 * bounds what a wrong path (a log, a device) makes us read. */
#define MCDC_OPTIONS_FILE_BYTES_MAX (1024 * 1024)
/* connectTimeout / queryTimeout: a day is already no timeout at all, and the
 * value travels as an int of seconds. */
#define MCDC_TIMEOUT_S_MAX 86400
/* arrowBatchSize: rows per reader batch. 2^20 rows of a wide table is
 * already past MCDC_BATCH_BYTES_MAX; the reference's default is 10,000. */
#define MCDC_ARROW_BATCH_ROWS_MAX (1024 * 1024)

/* Transient errors: the reference retries 3 times with 1-2, 2-4, 4-8 s
 * backoff (about 14 s in all). */
#define MCDC_RETRIES_MAX 3
#define MCDC_RETRY_BACKOFF_MS_FIRST 1000
/* The tests' shorter (or longer) first backoff (mssqlcdc_testing.h): a
 * minute, doubled three times, is already far past what any test waits. */
#define MCDC_RETRY_BACKOFF_MS_MAX 60000

/* A Delta txn appId is any string; ours carry suffixes (#facts, #snap.<lsn>,
 * .g<n>: the table in src/pipeline/mcdc_txn.h) and land in every commit and
 * facts row, so 256 bytes is plenty. */
#define MCDC_APP_ID_BYTES_MAX 256

/* processingTime triggers: a week between batches is already absurd; more
 * would overflow microsecond arithmetic long before it made sense. */
#define MCDC_PROCESSING_TIME_MS_MAX (7LL * 24 * 3600 * 1000)

/* Pipeline: batches queued between reading threads and the encoder. Two per
 * reader keeps both busy; more only costs memory. */
#define MCDC_QUEUE_DEPTH_MAX 8
#define MCDC_PARTITIONS_MAX 64

/* A range token (mcdc_range_plan_token) is about 350 bytes; a capture
 * instance of 100 characters written as \uXXXX surrogate pairs brings it
 * near 1.6 KiB. 4 KiB bounds what the token parser reads. */
#define MCDC_RANGE_TOKEN_BYTES_MAX 4096
/* Capture instances of one table a stream follows at once: SQL Server
 * allows two; a listing with more is refused, not cut. A batch reads one
 * piece per instance at most. */
#define MCDC_TABLE_INSTANCES_MAX 8
/* The bytes of a DDL statement a schema_change facts row keeps (the
 * reference keeps 500 characters of it). */
#define MCDC_DDL_DETAIL_BYTES_MAX 500
/* Snapshot keys (reference §3.7): SQL Server allows 32 key columns in an
 * index; snapshotKeys naming more is a mistake. A bound's value text: the
 * widest sortable key SQL Server indexes is 1700 bytes, but snapshotKeys may
 * name a varchar(8000) or binary(8000) column (16,002 bytes of hex): 16 KiB. */
#define MCDC_SNAPSHOT_KEYS_MAX 32
#define MCDC_KEY_BOUND_BYTES_MAX 16384
/* Slices of an integer key counted by one GROUP BY while planning chunks
 * (reference §3.7): rows of that many counts cross the network at once. */
#define MCDC_KEY_SLICES_MAX 100000
/* A snapshot chunk token carries its two bounds: every key column's value
 * twice, escaped, is far below 4 MiB. */
#define MCDC_SNAPSHOT_TOKEN_BYTES_MAX (4 * 1024 * 1024)
/* Chunks of one chunked snapshot: a billion rows in chunks of 1,000 rows.
 * More means chunk_rows is far too small for the table. */
#define MCDC_SNAPSHOT_CHUNKS_MAX 1000000
/* A seed's key check (mcdc_keycheck.h): the key hashes held before a
 * sorted run of them is spilled (8 bytes a row, as much again while the run
 * is sorted: 64 MiB holds 4M rows), the runs read at once (each holds one
 * frame of KEYCHECK_FRAME_ROWS hashes while read; more runs are merged into
 * one first), and the hashes seen twice whose rows a second read compares
 * (two rows of one key are a copy's mistake: the first few tell it). */
#define MCDC_KEYCHECK_BYTES_DEFAULT (64LL * 1024 * 1024)
#define MCDC_KEYCHECK_BYTES_MIN (64LL * 1024)
#define MCDC_KEYCHECK_RUNS_MAX 64
#define MCDC_KEYCHECK_FRAME_ROWS 8192
#define MCDC_KEYCHECK_SUSPECTS_MAX 1024
/* Batches an Arrow stream of mcdc_range_read holds between its reading
 * thread and get_next: two keep both sides busy; more only costs memory. */
#define MCDC_ARROW_STREAM_QUEUE_BATCHES 2
/* Batches a table scan's decoder thread queues ahead of the caller's fn
 * (mcdc_table_scan_run): two keep both cores busy, as above; the decoder
 * holds one more while it decodes. */
#define MCDC_SCAN_AHEAD_BATCHES 2
/* A scan reads ahead when its files hold this many bytes in all: below it,
 * a thread's start and a hand-over per batch (about 0.1-0.3 ms on a busy
 * machine) cost more than decoding overlaps. 1 MiB of Parquet takes a few
 * milliseconds to decode. */
#define MCDC_SCAN_AHEAD_BYTES_MIN (1024 * 1024)

/* Parquet: row group and page sizes of our writer. */
#define MCDC_PARQUET_ROW_GROUP_BYTES_DEFAULT (64u * 1024u * 1024u)
#define MCDC_PARQUET_PAGE_BYTES_DEFAULT (1024u * 1024u)
#define MCDC_PARQUET_DICT_BYTES_MAX (1024u * 1024u)
/* Buffer capacity a Parquet writer leaves for the next data file's writer
 * of the same job (mcdc_parquet_spare) at most: a writer at the defaults
 * holds about one row group of column chunks (64 MiB uncompressed, their
 * doubling growth up to twice that) and a page per column. A writer that
 * grew past it (huge values) frees the rest as before. */
#define MCDC_PARQUET_SPARE_BYTES_MAX (128u * 1024u * 1024u)
/* Data files an appender keeps open at once (mcdc_table_props.lanes: a
 * snapshot's readers, each writing its rows into files of its own). The
 * lanes share one writer's row-group budget, so at 8 a lane's row groups
 * are 8 MiB of batch bytes: fewer would cost each column chunk's
 * dictionary and compression. A snapshot on more connections writes its
 * batches into one file as they come (mcdc_snapshot_job.c). */
#define MCDC_APPENDER_LANES_MAX 8
/* A footer larger than this is a lie or a file we do not want. */
#define MCDC_PARQUET_FOOTER_BYTES_MAX (64u * 1024u * 1024u)
/* Thrift nesting in Parquet metadata is shallow (depth < 10). */
#define MCDC_THRIFT_DEPTH_MAX 32

/* WKB: geometries nested in a spatial value (a collection in a collection,
 * a curve polygon's rings). SQL Server's own values nest a few levels; 32
 * bounds the stack of the EWKB rewrite (mcdc_ewkb.c) on any bytes. */
#define MCDC_WKB_DEPTH_MAX 32

/* Delta: one commit file. Checkpoints carry the bulk; a commit of ours holds
 * a few actions. Foreign commits with many adds fit in 256 MiB. */
#define MCDC_DELTA_COMMIT_BYTES_MAX (256u * 1024u * 1024u)
/* A single-file Parquet checkpoint at most this large (its size known from
 * the listing) is read with one GET and decoded in memory, instead of one
 * ranged GET per column chunk: on an object store each request costs a round
 * trip, and a checkpoint of ours is a few KiB to a few MiB. */
#define MCDC_DELTA_CHECKPOINT_WHOLE_READ_MAX (8u * 1024u * 1024u)
/* Delta: _delta_log/_last_checkpoint, a one-line JSON hint of a few dozen
 * bytes (more with a checkpoint schema in it); a larger one is damage. */
#define MCDC_DELTA_LAST_CHECKPOINT_BYTES_MAX (1u * 1024u * 1024u)
/* Concurrent writers: retries of a lost put-if-absent race. */
#define MCDC_DELTA_COMMIT_RETRIES_MAX 50

/* The in-memory storage (tests): one object at most 1 GiB (a data file rolls
 * at 128 MiB uncompressed), and the last 1024 commits remembered so that a
 * test can lose them after the fact (mcdc_storage_mem_lose_last). */
#define MCDC_STORAGE_MEM_OBJECT_BYTES_MAX (1024u * 1024u * 1024u)
#define MCDC_STORAGE_MEM_JOURNAL_MAX 1024

/* The HTTP layer of the object stores (src/storage/mcdc_http.c). Request
 * headers: a signed S3 request carries about ten. Response headers kept
 * whole: ETags, request ids and error codes are short; longer values are
 * cut. An error answer's body is a small XML document; more is dropped.
 * Easy handles kept per pool: connections come from the pool's shared
 * cache, so this bounds idle handles, not connections. */
#define MCDC_HTTP_HEADERS_MAX 24
#define MCDC_HTTP_CAPTURE_MAX 4
#define MCDC_HTTP_HEADER_VALUE_MAX 160
#define MCDC_HTTP_ERROR_BODY_MAX (64u * 1024u)
#define MCDC_HTTP_POOL_HANDLES_MAX 16
/* Defaults of a pool (mcdc_http_config): a connection within 10 s, no
 * attempt silent for 30 s, a request (every attempt and wait) within 5
 * minutes, at most 8 attempts, waits of 100 ms doubling up to 10 s with
 * full jitter (AWS's advice for throttling), a Retry-After honoured up to
 * 30 s. */
#define MCDC_HTTP_CONNECT_TIMEOUT_MS_DEFAULT 10000
#define MCDC_HTTP_STALL_TIMEOUT_MS_DEFAULT 30000
#define MCDC_HTTP_DEADLINE_MS_DEFAULT (5 * 60 * 1000)
#define MCDC_HTTP_ATTEMPTS_DEFAULT 8
#define MCDC_HTTP_BACKOFF_BASE_MS_DEFAULT 100
#define MCDC_HTTP_BACKOFF_MAX_MS_DEFAULT 10000
#define MCDC_HTTP_RETRY_AFTER_MS_MAX 30000
/* The largest MCDC_HTTP_*_MS storage option (one hour). */
#define MCDC_HTTP_TIMEOUT_MS_MAX (60 * 60 * 1000)
/* S3 and Azure writers: full parts (blocks) go out on threads of their own
 * while the writer fills the next, at most this many at once and at most
 * this many bytes of them (a part larger than that: one at a time); the
 * writer then waits for the oldest. */
#define MCDC_PARTS_IN_FLIGHT_MAX 4
#define MCDC_PARTS_IN_FLIGHT_BYTES (32u * 1024u * 1024u)
/* S3: a writer holds the parts in flight and the one it fills; an object up to this size goes
 * as one PutObject, a larger one as a multipart upload of parts this size
 * (S3 wants at least 5 MiB a part but the last, and at most 10,000 parts:
 * 80 GB at 8 MiB). MCDC_S3_PART_BYTES (a storage option) sets it within
 * the bounds. AWS profile files larger than 1 MiB are refused. */
#define MCDC_S3_PART_BYTES_DEFAULT (8u * 1024u * 1024u)
#define MCDC_S3_PART_BYTES_MIN (5u * 1024u * 1024u)
#define MCDC_S3_PART_BYTES_MAX (512u * 1024u * 1024u)
#define MCDC_S3_PARTS_MAX 10000
/* One page of a listing (1,000 keys of up to 1 KiB each, in XML). */
#define MCDC_S3_LIST_PAGE_BYTES_MAX (16u * 1024u * 1024u)
#define MCDC_AWS_PROFILE_FILE_BYTES_MAX (1024u * 1024u)
/* AWS credentials from a service (STS, the container endpoint, instance
 * metadata): an answer is a few KiB; keys are renewed 5 minutes before
 * they expire (AWS's tools renew 5 to 15 minutes ahead). */
#define MCDC_AWS_CREDS_ANSWER_BYTES_MAX (64u * 1024u)
#define MCDC_AWS_CREDS_RENEW_AHEAD_MS (5 * 60 * 1000)
/* Entra ID tokens (Azure): an answer or a federated token file is a few
 * KiB; tokens are renewed 5 minutes before they expire (they last an hour
 * or more). */
#define MCDC_AZ_TOKEN_ANSWER_BYTES_MAX (64u * 1024u)
#define MCDC_AZ_TOKEN_RENEW_AHEAD_MS (5 * 60 * 1000)

/* Simulator: sessions at once, and T-SQL text nesting. */
#define MCDC_SIM_SESSIONS_MAX 256
#define MCDC_TSQL_DEPTH_MAX 64
/* T-SQL rewritten before translation (APPLY, column alias lists): APPLYs
 * in one statement, and the tokens the rewrite may grow it to. */
#define MCDC_TSQL_APPLY_MAX 64
#define MCDC_TSQL_REWRITE_TOKENS_MAX (1 << 20)
#define MCDC_SIM_CAPTURE_INSTANCES_PER_TABLE 2
/* Simulator SNAPSHOT isolation: the row versions (before-images) kept for
 * open transactions and for snapshots older than later commits, as SQL
 * Server's tempdb version store; a write that would pass the limit fails
 * (commit or roll back long transactions, end long snapshots). */
#define MCDC_SIM_ROW_VERSIONS_MAX (16 * 1024 * 1024)
/* Simulator bulk loaders (sim.bulk_load, sim.bulk_load_table): rows of one
 * call; a billion-row table is past what a test or benchmark needs. */
#define MCDC_SIM_BULK_ROWS_MAX (100LL * 1000 * 1000)
/* Simulator: tables one EXEC sim.create_tables makes. */
#define MCDC_SIM_CREATE_TABLES_MAX 10000

/* One deletion vector's serialized bitmap (sizeInBytes). A DV of a file of
 * 2^31 rows, every row deleted and no runs, is 256 MiB; larger is refused
 * as damage before anything is allocated. */
#define MCDC_DV_BYTES_MAX (256u * 1024u * 1024u)

/* Azure Blob (mcdc_storage_azure.c): a writer buffers one block (and the
 * blocks in flight: MCDC_PARTS_IN_FLIGHT_MAX); an object
 * up to a block goes as one Put Blob, a larger one as Put Block + Put Block
 * List. Azure takes up to 4000 MiB a block and 50,000 blocks a blob; 8 MiB
 * keeps a writer's memory small and still allows 400 GB objects (a data
 * file rolls at 128 MiB). MCDC_AZURE_BLOCK_BYTES may set 1 KiB to 256 MiB. */
#define MCDC_AZ_BLOCK_BYTES (8u * 1024u * 1024u)
#define MCDC_AZ_BLOCK_BYTES_MAX (256u * 1024u * 1024u)
#define MCDC_AZ_BLOCKS_MAX 50000
/* One page of List Blobs (5,000 entries at most by the service) is about
 * 2 MiB of XML. */
#define MCDC_AZ_LIST_PAGE_BYTES_MAX (16u * 1024u * 1024u)

/* Leases (mcdc_storage_lease.c: the hold of a key on an object store). A
 * lease lives 60 s unless renewed, and is renewed every third of that: a
 * holder must miss two renewals in a row before anyone can take over, and a
 * killed holder's lease is taken over about a minute later. The storage
 * option MCDC_LEASE_TTL_MS sets 1 s to an hour. The grace covers clocks
 * that disagree (expiry is the store's write time + ttl, judged by ours). */
#define MCDC_LEASE_TTL_MS_DEFAULT 60000
#define MCDC_LEASE_TTL_MS_MAX 3600000
#define MCDC_LEASE_GRACE_MS 5000
/* A lease link's key ("<key>.lease.<20 digits>") and body (a header line
 * and the holder's note: pid, host, since, app id). */
#define MCDC_STORAGE_LEASE_KEY_MAX 1024
#define MCDC_STORAGE_LEASE_BYTES_MAX (64u * 1024u)
/* Older links deleted after a take (a chain is one or two links; more are
 * leftovers of holders killed between a renewal and its delete). */
#define MCDC_STORAGE_LEASE_LINKS_MAX 64
/* Rounds of list + read + put-if-absent a take makes while others race it. */
#define MCDC_STORAGE_LEASE_TAKE_ROUNDS 4
/* A stream polling through its database's shared probe plans no batch
 * while its change table has nothing new; but at least this often while
 * the database moves it plans one anyway (an empty batch), so that its
 * position, facts and verdict keep up with the database rather than stay
 * where its table last changed (CDC cleanup moves min_lsn on the database's
 * clock). A minute: idle tables of a busy database cost one empty batch a
 * minute each, not one per commit. */
#define MCDC_PROBE_IDLE_ADVANCE_MS 60000
/* An idle stream of a runtime sleeps until its database's probe finds
 * rows for it (mcdc_runtime_probe_wait); a stop request cannot wake it:
 * the probe's driver, awake each slot, looks for the sleepers asked to
 * stop every tenth of this, and one other sleeper, the deputy, this often
 * (were the driver held up elsewhere, the deputy takes the drive). */
#define MCDC_PROBE_WAIT_LOOK_MS 1000
/* A database's shared probe the login was refused is tried again after
 * this long, then after twice as long each time it is refused again, up
 * to the most: a later GRANT serves its streams from one probe again
 * without a restart, and a login never granted costs one refused round
 * every few minutes. */
#define MCDC_PROBE_RETRY_FIRST_MS 2000
#define MCDC_PROBE_RETRY_MOST_MS 300000

/* A Parquet file this size or smaller is read whole by the ranged read
 * that opens it (mcdc_parquet_reader_open): small tables (facts, control)
 * then cost one request per file on an object store, not one per footer
 * and column chunk. Larger files pay this much read at open, then ranges. */
#define MCDC_PARQUET_READ_WHOLE_BYTES ((size_t)128u * 1024u)

#endif /* MCDC_LIMITS_H */
