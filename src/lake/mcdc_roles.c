/* mcdc_roles.c - one place, one role: the locations a command is given
 * (tables, a checkpoint, a copy to read) are apart from one another. */
#include <string.h>

#include "mcdc_lake.h"

/* Where a location lies, as one is compared with another (a local path in
 * its canonical form, a URI with its store's aliases folded). Owned. */
static int place_of(char **out, const char *path, mcdc_error *err) {
    return mcdc_location_place(out, path, err);
}

/* No two of the n places (NULL: none) are one or lie inside one another;
 * role[i] and name[i] say which in the message. */
static int places_apart(char *const *place, const char *const *role, const char *const *name,
                        int n, mcdc_error *err) {
    int rc = MCDC_OK;
    for (int i = 0; i < n && rc == MCDC_OK; i++)
        for (int j = i + 1; j < n && rc == MCDC_OK; j++) {
            if (place[i] == NULL || place[j] == NULL) continue;
            bool same = strcmp(place[i], place[j]) == 0;
            if (same || mcdc_path_within(place[i], place[j]) || mcdc_path_within(place[j], place[i]))
                rc = mcdc_error_set(err, MCDC_E_MISMATCH,
                                    "%s %s and %s %s %s: each needs a place of its own (one "
                                    "table in two roles mixes their rows and schemas). Nothing "
                                    "was written",
                                    role[i], name[i], role[j], name[j],
                                    same ? "are one location" : "lie inside one another");
        }
    return rc;
}

int mcdc_roles_check(const mcdc_role *r, int n, const char *warehouse, char **canon,
                     mcdc_error *err) {
    MCDC_ASSERT(r && n >= 0 && n <= MCDC_ROLES_MAX);
    char *c[MCDC_ROLES_MAX] = {NULL};
    const char *role[MCDC_ROLES_MAX] = {NULL}, *name[MCDC_ROLES_MAX] = {NULL};
    int rc = MCDC_OK;
    for (int i = 0; i < n && rc == MCDC_OK; i++) {
        role[i] = r[i].role;
        name[i] = r[i].given;
        if (r[i].given == NULL) continue;
        char *path = NULL;
        if (r[i].table) rc = mcdc_table_resolve(&path, r[i].given, warehouse, err);
        else if ((path = mcdc_strdup(r[i].given)) == NULL)
            rc = mcdc_error_set(err, MCDC_E_NOMEM, "out of memory");
        if (rc == MCDC_OK) rc = place_of(&c[i], path, err);
        if (rc) mcdc_error_wrap(err, "%s %s", r[i].role, r[i].given);
        mcdc_free(path);
    }
    if (rc == MCDC_OK) rc = places_apart(c, role, name, n, err);
    for (int i = 0; i < n; i++) {
        if (rc == MCDC_OK && canon) canon[i] = c[i];
        else mcdc_free(c[i]);
    }
    return rc;
}

int mcdc_roles_check_tables(mcdc_table *const *t, const char *const *role, int n,
                            mcdc_error *err) {
    MCDC_ASSERT(t && role && n >= 0 && n <= MCDC_ROLES_MAX);
    char *c[MCDC_ROLES_MAX] = {NULL};
    const char *name[MCDC_ROLES_MAX] = {NULL};
    int rc = MCDC_OK;
    for (int i = 0; i < n && rc == MCDC_OK; i++) {
        if (t[i] == NULL) continue;
        name[i] = mcdc_table_name(t[i]);
        rc = place_of(&c[i], mcdc_table_path(t[i]), err);
    }
    if (rc == MCDC_OK) rc = places_apart(c, role, name, n, err);
    for (int i = 0; i < n; i++) mcdc_free(c[i]);
    return rc;
}
