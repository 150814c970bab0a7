/*
 * test_driver_fake.h - a scripted connection for unit tests of everything
 * above the driver seam. Replies are matched, in the order added, by a
 * substring of the SQL text (NULL matches anything); a reply is used once.
 * Every SQL text sent is logged (parameters inlined) for pinning.
 *
 * Columns: "name:type,name:type" with type one of utf8 i16 i32 i64 bool
 * f64 ts date bin dec(p,s). Rows: lines separated by '\n', cells by '|',
 * "\N" = NULL.
 */
#ifndef TEST_DRIVER_FAKE_H
#define TEST_DRIVER_FAKE_H

#include "mcdc_driver.h"

typedef struct fake_db fake_db;

fake_db *fake_new(void);
void fake_free(fake_db *f);
void fake_reply(fake_db *f, const char *match, const char *cols, const char *rows);
/* An error reply: status code, SQL Server number and message. */
void fake_error(fake_db *f, const char *match, int code, int server_number, const char *text);
/* Delivers `rows_before` rows of the reply, then fails with a transient
 * connection loss (the connection is dead afterwards). */
void fake_drop_after(fake_db *f, const char *match, const char *cols, const char *rows,
                     int rows_before);
/* A new connection over f (f outlives it). */
mcdc_conn *fake_connect(fake_db *f);
/* All SQL sent, each text followed by "\n;;\n". Borrowed. */
const char *fake_log(const fake_db *f);
/* The i-th SQL text sent (0-based), or NULL. Borrowed until the next call. */
const char *fake_sql(fake_db *f, int i);
int fake_exec_count(const fake_db *f);
int fake_unused_replies(const fake_db *f);
void fake_clear_log(fake_db *f);

#endif
