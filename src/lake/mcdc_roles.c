/* mcdc_roles.c - one place, one role: the locations a command is given
 * (tables, a checkpoint, a copy to read) are apart from one another. */
#include <string.h>

#include "mcdc_lake.h"

int mcdc_roles_check(const mcdc_role *r, int n, const char *warehouse, char **canon,
                     mcdc_error *err) {
    MCDC_ASSERT(r && n >= 0 && n <= MCDC_ROLES_MAX);
    char *c[MCDC_ROLES_MAX] = {NULL};
    int rc = MCDC_OK;
    for (int i = 0; i < n && rc == MCDC_OK; i++) {
        if (r[i].given == NULL) continue;
        char *path = NULL;
        if (r[i].table) rc = mcdc_table_resolve(&path, r[i].given, warehouse, err);
        else if ((path = mcdc_strdup(r[i].given)) == NULL)
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        /* A local path in its canonical form; a URI (mem://) as given. */
        if (rc == MCDC_OK && strstr(path, "://") == NULL)
            rc = mcdc_path_canonical(&c[i], path, err);
        else if (rc == MCDC_OK && (c[i] = mcdc_strdup(path)) == NULL)
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        if (rc) mcdc_error_wrap(err, "%s %s", r[i].role, r[i].given);
        mcdc_free(path);
    }
    for (int i = 0; i < n && rc == MCDC_OK; i++)
        for (int j = i + 1; j < n && rc == MCDC_OK; j++) {
            if (c[i] == NULL || c[j] == NULL) continue;
            bool same = strcmp(c[i], c[j]) == 0;
            if (same || mcdc_path_within(c[i], c[j]) || mcdc_path_within(c[j], c[i]))
                rc = mcdc_error_set(err, MCDC_E_MISMATCH,
                                    "%s %s and %s %s %s: each needs a place of its own (one "
                                    "table in two roles mixes their rows and schemas). Nothing "
                                    "was written",
                                    r[i].role, r[i].given, r[j].role, r[j].given,
                                    same ? "are one location" : "lie inside one another");
        }
    for (int i = 0; i < n; i++) {
        if (rc == MCDC_OK && canon) canon[i] = c[i];
        else mcdc_free(c[i]);
    }
    return rc;
}
