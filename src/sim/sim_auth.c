/*
 * sim_auth.c - logins and their passwords, kept as SQL Server keeps them: a
 * salted SHA-512 hash (0x0200, a 4-byte random salt, then SHA-512 of the
 * password in UTF-16LE followed by the salt; sys.sql_logins.password_hash),
 * never the text. A login compares the hash. master's writer connection has
 * secure_delete on, so a replaced hash leaves no old bytes in free pages;
 * a data directory of an older build, which kept the text in
 * __sim_logins.password, is converted when it opens (then VACUUMed and its
 * WAL truncated, so no copy of the text stays in the files).
 */
#include "sim_engine_int.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <string.h>

#include "mcdc_tds_proto.h"

#define PW_SALT_BYTES 4
#define PW_DIGEST_BYTES 64

/* SHA-512(UTF-16LE(pw) || salt). */
static int pw_digest(const char *pw, const uint8_t salt[PW_SALT_BYTES], uint8_t out[PW_DIGEST_BYTES], mcdc_error *err) {
    mcdc_buf b = {0};
    int rc = mcdc_tds_utf16_append(&b, pw, strlen(pw), err);
    if (rc == MCDC_OK) rc = mcdc_buf_append(&b, salt, PW_SALT_BYTES, err);
    if (rc == MCDC_OK && gnutls_hash_fast(GNUTLS_DIG_SHA512, b.data, b.len, out) < 0)
        rc = mcdc_error_set(err, MCDC_E_IO, "SHA-512 is not available from GnuTLS");
    if (b.data) explicit_bzero(b.data, b.cap);
    mcdc_buf_free(&b);
    return rc;
}

int sim_pw_hash(const char *pw, uint8_t out[SIM_PW_HASH_BYTES], mcdc_error *err) {
    out[0] = 0x02;
    out[1] = 0x00;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, out + 2, PW_SALT_BYTES) < 0)
        return mcdc_error_set(err, MCDC_E_IO, "no random bytes for a password salt (GnuTLS)");
    return pw_digest(pw, out + 2, out + 2 + PW_SALT_BYTES, err);
}

bool sim_pw_matches(const char *pw, const void *stored, size_t n) {
    const uint8_t *h = stored;
    uint8_t d[PW_DIGEST_BYTES];
    if (!pw || !h || n != SIM_PW_HASH_BYTES || h[0] != 0x02 || h[1] != 0x00) return false;
    if (pw_digest(pw, h + 2, d, NULL) != MCDC_OK) return false;
    uint8_t diff = 0; /* in constant time */
    for (size_t k = 0; k < PW_DIGEST_BYTES; k++) diff |= (uint8_t)(d[k] ^ h[2 + PW_SALT_BYTES + k]);
    explicit_bzero(d, sizeof d);
    return diff == 0;
}

/* Stores login name's hash of pw (replace: an existing row's too). */
static int put_login(sqlite3 *w, const char *name, const char *pw, bool admin, bool replace, mcdc_error *err) {
    uint8_t h[SIM_PW_HASH_BYTES];
    int rc = sim_pw_hash(pw, h, err);
    sqlite3_stmt *st = NULL;
    if (rc == MCDC_OK &&
        sqlite3_prepare_v2(w, replace ? "INSERT OR REPLACE INTO __sim_logins(name, password, is_admin, password_hash) VALUES (?, NULL, ?, ?)"
                                      : "INSERT INTO __sim_logins(name, password, is_admin, password_hash) VALUES (?, NULL, ?, ?)",
                           -1, &st, NULL) != SQLITE_OK)
        rc = sim_sqlite_err(w, SQLITE_ERROR, err);
    if (rc == MCDC_OK) {
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, admin ? 1 : 0);
        sqlite3_bind_blob(st, 3, h, (int)sizeof h, SQLITE_STATIC);
        int s = sqlite3_step(st);
        if (s == SQLITE_CONSTRAINT) rc = sim_err(err, 15025, "The server principal '%s' already exists.", name);
        else if (s != SQLITE_DONE) rc = sim_sqlite_err(w, s, err);
    }
    sqlite3_finalize(st);
    explicit_bzero(h, sizeof h);
    return rc;
}

/* Converts an older build's plaintext passwords (*converted: how many). */
static int migrate_plaintext(sqlite3 *w, int *converted, mcdc_error *err) {
    *converted = 0;
    bool has_hash = false;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(w, "SELECT 1 FROM pragma_table_info('__sim_logins') WHERE name = 'password_hash'", -1, &st,
                           NULL) != SQLITE_OK)
        return sim_sqlite_err(w, SQLITE_ERROR, err);
    has_hash = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    int rc = has_hash ? MCDC_OK : sim_sql(w, err, "ALTER TABLE __sim_logins ADD COLUMN password_hash BLOB");
    if (rc != MCDC_OK) return rc;
    int n = 0;
    rc = sim_sql(w, err, "BEGIN IMMEDIATE");
    while (rc == MCDC_OK) { /* one row at a time: each leaves the text behind */
        char name[SIM_NAME_MAX], pw[SIM_PASSWORD_BYTES_MAX + 1];
        if (sqlite3_prepare_v2(w, "SELECT name, password FROM __sim_logins WHERE password IS NOT NULL LIMIT 1", -1, &st,
                               NULL) != SQLITE_OK) {
            rc = sim_sqlite_err(w, SQLITE_ERROR, err);
            break;
        }
        bool row = sqlite3_step(st) == SQLITE_ROW;
        if (row) {
            snprintf(name, sizeof name, "%s", (const char *)sqlite3_column_text(st, 0));
            snprintf(pw, sizeof pw, "%s", (const char *)sqlite3_column_text(st, 1));
        }
        sqlite3_finalize(st);
        if (!row) break;
        uint8_t h[SIM_PW_HASH_BYTES];
        rc = sim_pw_hash(pw, h, err);
        explicit_bzero(pw, sizeof pw);
        if (rc == MCDC_OK && sqlite3_prepare_v2(w, "UPDATE __sim_logins SET password = NULL, password_hash = ? WHERE name = ?",
                                                -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_blob(st, 1, h, (int)sizeof h, SQLITE_STATIC);
            sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
            if (sqlite3_step(st) != SQLITE_DONE) rc = sim_sqlite_err(w, SQLITE_ERROR, err);
            sqlite3_finalize(st);
        }
        explicit_bzero(h, sizeof h);
        n++;
    }
    sim_sql(w, NULL, rc == MCDC_OK ? "COMMIT" : "ROLLBACK");
    if (rc == MCDC_OK) *converted = n;
    return rc;
}

/* An older build's table has no is_disabled column: every login enabled. */
static int add_disabled_column(sqlite3 *w, mcdc_error *err) {
    sqlite3_stmt *st;
    bool has = false;
    if (sqlite3_prepare_v2(w, "SELECT 1 FROM pragma_table_info('__sim_logins') WHERE name = 'is_disabled'", -1, &st,
                           NULL) != SQLITE_OK)
        return sim_sqlite_err(w, SQLITE_ERROR, err);
    has = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return has ? MCDC_OK : sim_sql(w, err, "ALTER TABLE __sim_logins ADD COLUMN is_disabled INT NOT NULL DEFAULT 0");
}

int sim_logins_open(sim_db *m, const char *sa_password, mcdc_error *err) {
    sqlite3 *w = m->w;
    int rc = sim_sql(w, err, "PRAGMA secure_delete = ON;"
                             "CREATE TABLE IF NOT EXISTS __sim_logins(name TEXT PRIMARY KEY COLLATE NOCASE, password TEXT,"
                             " is_admin INT, password_hash BLOB)");
    int converted = 0;
    if (rc == MCDC_OK) rc = migrate_plaintext(w, &converted, err);
    if (rc == MCDC_OK) rc = add_disabled_column(w, err);
    /* 'sa' takes the password it was started with (kept when it is the same) */
    bool same = false;
    sqlite3_stmt *st;
    if (rc == MCDC_OK && sqlite3_prepare_v2(w, "SELECT password_hash FROM __sim_logins WHERE name = 'sa' AND is_admin = 1",
                                            -1, &st, NULL) == SQLITE_OK) {
        if (sqlite3_step(st) == SQLITE_ROW)
            same = sim_pw_matches(sa_password, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0));
        sqlite3_finalize(st);
    }
    if (rc == MCDC_OK && !same) rc = put_login(w, "sa", sa_password, true, true, err);
    if (rc == MCDC_OK && converted) {
        /* rewrite the file: the text of the old rows goes from every page */
        rc = sim_sql(w, err, "VACUUM; PRAGMA wal_checkpoint(TRUNCATE)");
        if (rc == MCDC_OK)
            mcdc_log(MCDC_LOG_WARN, "sim: %d login password(s) of an older build were kept as text: now salted"
                                    " SHA-512 hashes", converted);
    }
    return rc;
}

/* The login's row: checks password when it is not NULL. */
static bool login_row(sim_db *m, const char *user, const char *password, bool *admin, bool *disabled) {
    sqlite3_stmt *st;
    bool ok = false;
    *admin = *disabled = false;
    if (!user ||
        sqlite3_prepare_v2(m->w, "SELECT password_hash, is_admin, is_disabled FROM __sim_logins WHERE name = ? COLLATE NOCASE",
                           -1, &st, NULL) != SQLITE_OK)
        return false;
    sqlite3_bind_text(st, 1, user, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) {
        ok = password == NULL ||
             sim_pw_matches(password, sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0));
        *admin = sqlite3_column_int(st, 1) != 0;
        *disabled = sqlite3_column_int(st, 2) != 0;
    }
    sqlite3_finalize(st);
    return ok;
}

bool sim_logins_check(sim_db *m, const char *user, const char *password, bool *admin, bool *disabled) {
    if (!password) {
        *admin = *disabled = false;
        return false;
    }
    return login_row(m, user, password, admin, disabled);
}

bool sim_logins_find(sim_db *m, const char *user, bool *admin, bool *disabled) {
    return login_row(m, user, NULL, admin, disabled);
}

int sim_logins_alter(sim_db *m, const char *name, int disable, const char *password, mcdc_error *err) {
    bool admin, disabled;
    if (!sim_logins_find(m, name, &admin, &disabled))
        return sim_err(err, 15151, "Cannot alter the login '%s', because it does not exist or you do not have"
                                   " permission.", name);
    int rc = MCDC_OK;
    if (password) rc = put_login(m->w, name, password, admin, true, err);
    /* a replaced row starts enabled: keep what it was unless told */
    if (rc == MCDC_OK && (disable >= 0 || (password && disabled)))
        rc = sim_sql(m->w, err, "UPDATE __sim_logins SET is_disabled = %d WHERE name = %Q COLLATE NOCASE",
                     disable >= 0 ? disable : 1, name);
    return rc;
}

int sim_logins_create(sim_db *m, const char *name, const char *password, mcdc_error *err) {
    return put_login(m->w, name, password, false, false, err);
}
