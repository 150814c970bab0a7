/*
 * mssqlcdc.h - the public interface of libmssqlcdc.
 *
 * One header, one prefix (mcdc_). Handles are opaque; every function that
 * can fail returns an int status (MCDC_OK or a negative mcdc_status) and
 * writes the detail into a caller-owned mcdc_error (which may be NULL).
 * Out-parameters come first. Free functions accept NULL.
 *
 * This header compiles as C17 and as C++.
 */
#ifndef MSSQLCDC_H
#define MSSQLCDC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MCDC_VERSION_MAJOR 0
#define MCDC_VERSION_MINOR 1
#define MCDC_VERSION_PATCH 0
#define MCDC_VERSION_STRING "0.1.0"
/* Bumped whenever a public struct or signature changes. */
#define MCDC_API_VERSION 1

#if defined(__GNUC__) || defined(__clang__)
#define MCDC_API __attribute__((visibility("default")))
#else
#define MCDC_API
#endif

/*
 * Status codes. Pinned and append-only: a value is never renumbered or
 * reused. The reference library's error kinds map onto them
 * (mcdc_status_kind() gives the reference name).
 */
typedef enum mcdc_status {
    MCDC_OK = 0,
    MCDC_E_INVALID = -1,     /* bad argument or option: ValueError */
    MCDC_E_NOMEM = -2,       /* allocation failed */
    MCDC_E_IO = -3,          /* file or socket I/O failed */
    MCDC_E_PROTOCOL = -4,    /* peer broke the wire protocol */
    MCDC_E_SERVER = -5,      /* SQL Server returned an error token */
    MCDC_E_LIMIT = -6,       /* a limit of mcdc_limits.h was exceeded */
    MCDC_E_CONFLICT = -7,    /* Delta commit lost a race that cannot be retried */
    MCDC_E_CANCELLED = -8,   /* stopped by a signal or a cancel request */
    MCDC_E_DATALOSS = -9,    /* DataLossError: unread changes were purged */
    MCDC_E_SCHEMA = -10,     /* SchemaChangedError */
    MCDC_E_PERMISSION = -11, /* PermissionError: a missing grant */
    MCDC_E_TRANSIENT = -12,  /* connection lost, timeout, deadlock victim */
    MCDC_E_NOTFOUND = -13,   /* object (table, capture instance, file) missing */
    MCDC_E_CORRUPT = -14,    /* a file on disk is not what its format says */
    MCDC_E_UNSUPPORTED = -15 /* valid input we do not handle (yet) */
} mcdc_status;

#define MCDC_ERROR_MESSAGE_MAX 1024

/*
 * Caller-owned error detail. Zero-initialise it (MCDC_ERROR_INIT); a failing
 * call fills it. server_* fields carry a SQL Server error token when
 * code == MCDC_E_SERVER (or a transient/permission error that came from one),
 * else they are 0. The message never contains a password.
 */
typedef struct mcdc_error {
    int code;
    int server_number;
    int server_state;
    int server_class;
    int server_line;
    char message[MCDC_ERROR_MESSAGE_MAX];
} mcdc_error;

#define MCDC_ERROR_INIT {0, 0, 0, 0, 0, {0}}

/* Static string: "ok", "invalid", ... */
MCDC_API const char *mcdc_status_name(int code);
/* The reference library's error kind: "DataLossError", "SchemaChangedError",
 * "PermissionError", "ValueError", "RuntimeError"... Static string. */
MCDC_API const char *mcdc_status_kind(int code);
MCDC_API const char *mcdc_version(void);

/* ------------------------------------------------------------------------
 * Arrow C Data Interface. The struct layouts are fixed by the Arrow
 * specification (ABI); the include guards are the ones the specification
 * asks for so that another project's definitions do not clash.
 * ---------------------------------------------------------------------- */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

#endif /* ARROW_C_DATA_INTERFACE */

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE

struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};

#endif /* ARROW_C_STREAM_INTERFACE */

#ifdef __cplusplus
}
#endif

#endif /* MSSQLCDC_H */
