/* range_reader - a program of libmssqlcdc's users: it includes only
 * <mssqlcdc.h> and is built with only `pkg-config --cflags --libs mssqlcdc`
 * against an installed copy (tests/e2e/range_stream.sh).
 *
 *   range_reader plan <connstr> <capture instance> <ranges_max> [from to]
 *       one token per line, then "# columns name:format,..." on stderr
 *   range_reader read <connstr> <token>
 *       the range's rows through its ArrowArrayStream, one per line, the
 *       columns joined by '|' in the text tests/e2e/range_arrow.py writes too
 *   range_reader cancel <connstr> <token>
 *       takes one batch, releases the stream mid-range, prints "released"
 *   range_reader info <token>
 *       the token's fields as mcdc_range_token_parse reads them
 * An error prints "ERROR <kind>: <message>" on stderr and exits 2.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mssqlcdc.h>

static int fail(const mcdc_error *e) {
    fprintf(stderr, "ERROR %s: %s\n", mcdc_status_kind(e->code), e->message);
    return 2;
}

static int options(mcdc_opts **o, const char *connstr, const char *ci, mcdc_error *e) {
    int rc = mcdc_opts_create(o, e);
    if (rc == MCDC_OK) rc = mcdc_opts_set(*o, "connectionString", connstr, NULL, e);
    if (rc == MCDC_OK && ci) rc = mcdc_opts_set(*o, "captureInstance", ci, NULL, e);
    if (rc == MCDC_OK) rc = mcdc_opts_set(*o, "arrowBatchSize", "7000", NULL, e);
    /* An option whose text the library keeps using after this program
     * freed its options (mcdc_range_read copies them). */
    if (rc == MCDC_OK) rc = mcdc_opts_set(*o, "backend", "native", NULL, e);
    return rc;
}

/* ---- one value as text ------------------------------------------------------ */
static bool is_valid(const struct ArrowArray *c, int64_t i) {
    const uint8_t *bits = c->buffers[0];
    i += c->offset;
    return bits == NULL || ((bits[i >> 3] >> (i & 7)) & 1);
}

static void put_text(const uint8_t *p, int32_t n) {
    for (int32_t k = 0; k < n; k++) {
        if (p[k] == '|' || p[k] == '\\') putchar('\\');
        if (p[k] == '\n') fputs("\\n", stdout);
        else putchar(p[k]);
    }
}

static void put_decimal(const uint8_t *v, int scale) {
    unsigned __int128 u;
    __int128 x;
    memcpy(&x, v, 16);
    bool neg = x < 0;
    u = neg ? (unsigned __int128)(-(x + 1)) + 1 : (unsigned __int128)x;
    char d[64];
    int n = 0;
    do {
        d[n++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u || n <= scale);
    if (neg) putchar('-');
    for (int k = n - 1; k >= 0; k--) {
        putchar(d[k]);
        if (k == scale && scale > 0) putchar('.');
    }
}

static void put_value(const struct ArrowSchema *f, const struct ArrowArray *c, int64_t r) {
    if (!is_valid(c, r)) {
        fputs("NULL", stdout);
        return;
    }
    int64_t i = r + c->offset;
    const uint8_t *v = c->buffers[1];
    const char *fmt = f->format;
    char t[MCDC_TS_TEXT_SIZE];
    if (strcmp(fmt, "u") == 0 || strcmp(fmt, "z") == 0) {
        const int32_t *off = c->buffers[1];
        const uint8_t *data = c->buffers[2];
        if (fmt[0] == 'u') {
            put_text(data + off[i], off[i + 1] - off[i]);
        } else {
            fputs("0x", stdout);
            for (int32_t k = off[i]; k < off[i + 1]; k++) printf("%02X", data[k]);
        }
    } else if (strcmp(fmt, "b") == 0) {
        fputs((v[i >> 3] >> (i & 7)) & 1 ? "true" : "false", stdout);
    } else if (strcmp(fmt, "c") == 0) {
        printf("%d", (int)(int8_t)v[i]);
    } else if (strcmp(fmt, "s") == 0) {
        int16_t x;
        memcpy(&x, v + 2 * i, 2);
        printf("%d", x);
    } else if (strcmp(fmt, "i") == 0) {
        int32_t x;
        memcpy(&x, v + 4 * i, 4);
        printf("%" PRId32, x);
    } else if (strcmp(fmt, "l") == 0) {
        int64_t x;
        memcpy(&x, v + 8 * i, 8);
        printf("%" PRId64, x);
    } else if (strcmp(fmt, "g") == 0) {
        double x;
        memcpy(&x, v + 8 * i, 8);
        printf("%.17g", x);
    } else if (strcmp(fmt, "f") == 0) {
        float x;
        memcpy(&x, v + 4 * i, 4);
        printf("%.9g", (double)x);
    } else if (strncmp(fmt, "d:", 2) == 0) {
        int p = 0, s = 0;
        sscanf(fmt + 2, "%d,%d", &p, &s);
        put_decimal(v + 16 * i, s);
    } else if (strcmp(fmt, "tdD") == 0) {
        int32_t days;
        memcpy(&days, v + 4 * i, 4);
        mcdc_ts_format(t, sizeof t, (int64_t)days * 86400000000LL, 0, NULL);
        printf("%.10s", t);
    } else if (strncmp(fmt, "tsu:", 4) == 0) {
        int64_t us;
        memcpy(&us, v + 8 * i, 8);
        if (mcdc_ts_format(t, sizeof t, us, 6, NULL) == MCDC_OK) fputs(t, stdout);
        else printf("%" PRId64 "us", us);
    } else {
        printf("?%s", fmt);
    }
}

/* ---- commands ----------------------------------------------------------------- */
static int plan(int argc, char **argv) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *o = NULL;
    mcdc_lsn_value from, to;
    if (options(&o, argv[2], argv[3], &e)) return fail(&e);
    if (argc > 6 && (mcdc_lsn_value_parse(&from, argv[5], &e) ||
                     mcdc_lsn_value_parse(&to, argv[6], &e)))
        return fail(&e);
    mcdc_range_plan *p = NULL;
    if (mcdc_range_plan_create(&p, o, argc > 6 ? &from : NULL, argc > 6 ? &to : NULL,
                               atoi(argv[4]), &e))
        return fail(&e);
    for (size_t i = 0; i < mcdc_range_plan_count(p); i++) puts(mcdc_range_plan_token(p, i));
    struct ArrowSchema s;
    if (mcdc_range_plan_schema(&s, p, &e)) return fail(&e);
    fputs("# columns ", stderr);
    for (int64_t k = 0; k < s.n_children; k++)
        fprintf(stderr, "%s%s:%s", k ? "," : "", s.children[k]->name, s.children[k]->format);
    fputc('\n', stderr);
    s.release(&s);
    mcdc_range_plan_free(p);
    mcdc_opts_free(o);
    return 0;
}

static int read_range(const char *connstr, const char *token, bool cancel) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_opts *o = NULL;
    if (options(&o, connstr, NULL, &e)) return fail(&e);
    struct ArrowArrayStream st;
    if (mcdc_range_read(&st, o, token, &e)) return fail(&e);
    mcdc_opts_free(o); /* the stream keeps what it needs */
    struct ArrowSchema s;
    if (st.get_schema(&st, &s) != 0) {
        fprintf(stderr, "ERROR %s\n", st.get_last_error(&st));
        return 2;
    }
    int64_t rows = 0, batches = 0;
    for (;;) {
        struct ArrowArray a;
        int rc = st.get_next(&st, &a);
        if (rc != 0) {
            fprintf(stderr, "ERROR %s\n", st.get_last_error(&st));
            s.release(&s);
            st.release(&st);
            return 2;
        }
        if (a.release == NULL) break;
        batches++;
        for (int64_t r = 0; r < a.length; r++) {
            for (int64_t k = 0; k < a.n_children; k++) {
                if (k) putchar('|');
                put_value(s.children[k], a.children[k], r);
            }
            putchar('\n');
        }
        rows += a.length;
        a.release(&a);
        if (cancel) break;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    st.release(&st);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s.release(&s);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    fprintf(stderr, "# rows=%" PRId64 " batches=%" PRId64 " release_ms=%.1f\n", rows, batches, ms);
    if (cancel) printf("released\n");
    return 0;
}

static int info(const char *token) {
    mcdc_error e = MCDC_ERROR_INIT;
    mcdc_range_info i = MCDC_RANGE_INFO_INIT;
    if (mcdc_range_token_parse(&i, token, &e)) return fail(&e);
    char f[MCDC_LSN_TEXT_SIZE], t[MCDC_LSN_TEXT_SIZE];
    mcdc_lsn_value_format(f, sizeof f, &i.from_lsn, NULL);
    mcdc_lsn_value_format(t, sizeof t, &i.to_lsn, NULL);
    printf("%s %s %s %" PRId64 " %d/%d\n", i.capture_instance, f, t, i.rows_estimate,
           (int)i.index, (int)i.count);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 5 && strcmp(argv[1], "plan") == 0) return plan(argc, argv);
    if (argc == 4 && strcmp(argv[1], "read") == 0) return read_range(argv[2], argv[3], false);
    if (argc == 4 && strcmp(argv[1], "cancel") == 0) return read_range(argv[2], argv[3], true);
    if (argc == 3 && strcmp(argv[1], "info") == 0) return info(argv[2]);
    fprintf(stderr, "usage: range_reader plan|read|cancel|info ... (see the source)\n");
    return 64;
}
