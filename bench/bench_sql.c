/* bench_sql - runs T-SQL through our own client, for the bench scripts'
 * setup (a database, a table under CDC, a bulk load).
 *
 *   mcdc-bench-sql CONNSTR SQL     one batch
 *   mcdc-bench-sql CONNSTR -       each line of stdin is one batch
 *
 * Exits 0, or 1 with the server's message on stderr. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcdc_driver.h"

/* All of stdin, NUL-terminated (caller frees); NULL when out of memory. */
static char *read_all(FILE *in) {
    size_t cap = 1 << 20, n = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n - 1, in)) > 0;) {
        n += k;
        if (n + 1 == cap) {
            char *more = realloc(buf, cap *= 2);
            if (more == NULL) free(buf);
            buf = more;
        }
    }
    if (buf) buf[n] = 0;
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s CONNSTR SQL|-\n", argv[0]);
        return 64;
    }
    bool lines = strcmp(argv[2], "-") == 0;
    char *sql = lines ? read_all(stdin) : argv[2];
    if (sql == NULL) {
        fprintf(stderr, "bench_sql: out of memory reading stdin\n");
        return 1;
    }
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_connstr *cs = NULL;
    mcdc_conn *c = NULL;
    int rc = 0;
    if (mcdc_connstr_parse(&cs, argv[1], &e) || mcdc_conn_open(&c, cs, NULL, &e)) rc = 1;
    for (char *line = sql, *nl; rc == 0 && line && *line; line = nl) {
        nl = lines ? strchr(line, '\n') : NULL;
        if (nl) *nl++ = 0;
        if (*line && mcdc_conn_run(c, line, NULL, 0, &e)) rc = 1;
    }
    if (rc) fprintf(stderr, "bench_sql: %s\n", e.message);
    mcdc_conn_close(c);
    mcdc_connstr_free(cs);
    if (lines) free(sql);
    return rc;
}
