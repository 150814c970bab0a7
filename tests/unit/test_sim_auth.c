/* test_sim_auth.c - login passwords kept as salted SHA-512 hashes, an older
 * build's plaintext converted on open, and the data directory owner-only. */
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_sim_helpers.h"

/* Whether file path holds s, as UTF-8 or as UTF-16LE. */
static bool file_has(const char *path, const char *s) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    static unsigned char buf[4 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    size_t k = strlen(s);
    unsigned char w[256];
    for (size_t i = 0; i < k && i < 128; i++) { w[2 * i] = (unsigned char)s[i]; w[2 * i + 1] = 0; }
    for (size_t i = 0; i + k <= n; i++) {
        if (memcmp(buf + i, s, k) == 0) return true;
        if (i + 2 * k <= n && memcmp(buf + i, w, 2 * k) == 0) return true;
    }
    return false;
}

static bool files_have(const char *dir, const char *s) {
    static const char *const F[] = {"master.db", "master.db-wal", "master.db-shm", NULL};
    char p[512];
    for (int k = 0; F[k]; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, F[k]);
        if (file_has(p, s)) return true;
    }
    return false;
}

static int mode_of(const char *dir, const char *name) {
    char p[512];
    struct stat st;
    snprintf(p, sizeof p, "%s%s%s", dir, name[0] ? "/" : "", name);
    return stat(p, &st) == 0 ? (int)(st.st_mode & 0777) : -1;
}

static bool login_ok(sim_server *srv, const char *user, const char *pw) {
    sim_session *s = NULL;
    mcdc_error err = MCDC_ERROR_INIT;
    if (sim_login(srv, &s, user, pw, NULL, "test", &err) != MCDC_OK) return false;
    sim_session_close(s);
    return true;
}

TEST(sim_passwords_are_salted_hashes_in_owner_only_files) {
    char dir[64];
    coll *c = calloc(1, sizeof *c);
    test_tmpdir(dir, sizeof dir);
    rmdir(dir); /* the server creates it */
    sim_server *srv = test_server(dir, 0);
    CHECK(srv != NULL);
    CHECK_EQ_INT(mode_of(dir, ""), 0700);
    CHECK_EQ_INT(mode_of(dir, "master.db"), 0600);
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    run(s, c, "CREATE LOGIN bob WITH PASSWORD = 'Bob_Secret_77'; CREATE DATABASE lab");
    CHECK_EQ_INT(c->nerrors, 0);
    run(s, c, "CREATE LOGIN bob WITH PASSWORD = 'other'");
    CHECK_EQ_INT(c->err_number, 15025);
    CHECK(login_ok(srv, "bob", "Bob_Secret_77"));
    CHECK(!login_ok(srv, "bob", "Bob_Secret_78"));
    CHECK(!login_ok(srv, "bob", ""));
    CHECK(!login_ok(srv, "sa", "sa_passw0rd")); /* passwords are case-sensitive */
    CHECK_EQ_INT(mode_of(dir, "lab.db"), 0600);
    CHECK_EQ_INT(mode_of(dir, "master.db-wal"), 0600);
    sim_session_close(s);
    sim_server_close(srv);
    /* neither password is in the files; the hashes are SQL Server's layout */
    CHECK(!files_have(dir, "Sa_Passw0rd"));
    CHECK(!files_have(dir, "Bob_Secret_77"));
    char p[512];
    snprintf(p, sizeof p, "%s/master.db", dir);
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(p, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    int prc = sqlite3_prepare_v2(db, "SELECT count(*), sum(password IS NULL), sum(length(password_hash) = 70 AND"
                                     " substr(hex(password_hash), 1, 4) = '0200') FROM __sim_logins", -1, &st, NULL);
    CHECK_EQ_INT(prc, SQLITE_OK);
    CHECK_EQ_INT(sqlite3_step(st), SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(st, 0), 2);
    CHECK_EQ_INT(sqlite3_column_int(st, 1), 2);
    CHECK_EQ_INT(sqlite3_column_int(st, 2), 2);
    sqlite3_finalize(st);
    /* two logins with one password have two salts */
    sqlite3_close(db);
    srv = test_server(dir, 0);
    s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    run(s, c, "CREATE LOGIN bob2 WITH PASSWORD = 'Bob_Secret_77'");
    sim_session_close(s);
    CHECK(login_ok(srv, "bob", "Bob_Secret_77"));
    CHECK(login_ok(srv, "bob2", "Bob_Secret_77"));
    sim_server_close(srv);
    CHECK_EQ_INT(sqlite3_open(p, &db), SQLITE_OK);
    prc = sqlite3_prepare_v2(db, "SELECT count(DISTINCT password_hash) FROM __sim_logins WHERE name LIKE 'bob%'", -1, &st, NULL);
    CHECK_EQ_INT(prc, SQLITE_OK);
    CHECK_EQ_INT(sqlite3_step(st), SQLITE_ROW);
    CHECK_EQ_INT(sqlite3_column_int(st, 0), 2);
    sqlite3_finalize(st);
    sqlite3_close(db);
    test_rmdir(dir);
    free(c);
}

TEST(sim_plaintext_passwords_of_an_older_build_are_converted) {
    char dir[64], p[512];
    test_tmpdir(dir, sizeof dir);
    chmod(dir, 0755);
    snprintf(p, sizeof p, "%s/master.db", dir);
    /* master.db as an older build left it: the passwords as text, 0644 */
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(p, &db), SQLITE_OK);
    int erc = sqlite3_exec(db, "PRAGMA journal_mode=WAL;"
                               "CREATE TABLE __sim_logins(name TEXT PRIMARY KEY COLLATE NOCASE, password TEXT, is_admin INT);"
                               "INSERT INTO __sim_logins VALUES ('sa', 'Old_Plain_9', 1), ('carol', 'Carol_Plain_5', 0);"
                               "CREATE TABLE __sim_databases(name TEXT PRIMARY KEY COLLATE NOCASE);",
                           NULL, NULL, NULL);
    CHECK_EQ_INT(erc, SQLITE_OK);
    sqlite3_close(db);
    chmod(p, 0644);
    CHECK(files_have(dir, "Carol_Plain_5")); /* the test's premise */
    sim_config cfg = {dir, "Old_Plain_9", "UTC", 16, 0, 0, 500};
    sim_server *srv = NULL;
    mcdc_error err = MCDC_ERROR_INIT;
    CHECK_EQ_INT(sim_server_open(&srv, &cfg, &err), MCDC_OK);
    CHECK(login_ok(srv, "carol", "Carol_Plain_5"));
    CHECK(!login_ok(srv, "carol", "Old_Plain_9"));
    CHECK(login_ok(srv, "sa", "Old_Plain_9"));
    sim_server_close(srv);
    CHECK(!files_have(dir, "Carol_Plain_5"));
    CHECK(!files_have(dir, "Old_Plain_9"));
    CHECK_EQ_INT(mode_of(dir, ""), 0700);
    CHECK_EQ_INT(mode_of(dir, "master.db"), 0600);
    /* a new --password for sa replaces its hash; the old one no longer logs in */
    cfg.sa_password = "New_Sa_Pw_1";
    CHECK_EQ_INT(sim_server_open(&srv, &cfg, &err), MCDC_OK);
    CHECK(login_ok(srv, "sa", "New_Sa_Pw_1"));
    CHECK(!login_ok(srv, "sa", "Old_Plain_9"));
    CHECK(login_ok(srv, "carol", "Carol_Plain_5"));
    sim_server_close(srv);
    test_rmdir(dir);
}
