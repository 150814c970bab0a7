/* sim_tz.c - TZif parsing and Windows zone names (see sim_tz.h). */
#include "sim_tz.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TZ_TRANS_MAX 4096
#define TZ_TYPES_MAX 64
#define TZ_FILE_BYTES_MAX (512 * 1024)

/* POSIX TZ rule from the TZif footer ("EST5EDT,M3.2.0,M11.1.0"). */
typedef struct tz_rule_date { int kind; int m, w, d, jday; int32_t secs; } tz_rule_date;

struct sim_tz {
    char win[64];
    int ntrans;
    int64_t *trans;     /* transition instants */
    int32_t *trans_off; /* offset after each transition */
    int32_t off0;       /* offset before the first transition */
    bool has_rule, rule_dst;
    int32_t std_off, dst_off;
    tz_rule_date start, end;
    sim_tz *next;
};

static const struct { const char *win, *iana; } WIN_MAP[] = {
    {"UTC", ""}, {"Coordinated Universal Time", ""}, {"GMT Standard Time", "Europe/London"},
    {"Greenwich Standard Time", "Atlantic/Reykjavik"},
    {"Eastern Standard Time", "America/New_York"}, {"Central Standard Time", "America/Chicago"},
    {"Mountain Standard Time", "America/Denver"}, {"US Mountain Standard Time", "America/Phoenix"},
    {"Pacific Standard Time", "America/Los_Angeles"}, {"Alaskan Standard Time", "America/Anchorage"},
    {"Hawaiian Standard Time", "Pacific/Honolulu"}, {"Atlantic Standard Time", "America/Halifax"},
    {"E. South America Standard Time", "America/Sao_Paulo"},
    {"Argentina Standard Time", "America/Argentina/Buenos_Aires"},
    {"SA Pacific Standard Time", "America/Bogota"}, {"Pacific SA Standard Time", "America/Santiago"},
    {"Central Standard Time (Mexico)", "America/Mexico_City"},
    {"Central European Standard Time", "Europe/Warsaw"},
    {"Central Europe Standard Time", "Europe/Budapest"},
    {"W. Europe Standard Time", "Europe/Berlin"}, {"Romance Standard Time", "Europe/Paris"},
    {"E. Europe Standard Time", "Europe/Chisinau"}, {"FLE Standard Time", "Europe/Kiev"},
    {"GTB Standard Time", "Europe/Bucharest"}, {"Russian Standard Time", "Europe/Moscow"},
    {"Turkey Standard Time", "Europe/Istanbul"}, {"Israel Standard Time", "Asia/Jerusalem"},
    {"South Africa Standard Time", "Africa/Johannesburg"}, {"Arabian Standard Time", "Asia/Dubai"},
    {"India Standard Time", "Asia/Kolkata"}, {"China Standard Time", "Asia/Shanghai"},
    {"Singapore Standard Time", "Asia/Singapore"}, {"Tokyo Standard Time", "Asia/Tokyo"},
    {"Korea Standard Time", "Asia/Seoul"}, {"AUS Eastern Standard Time", "Australia/Sydney"},
    {"E. Australia Standard Time", "Australia/Brisbane"},
    {"Cen. Australia Standard Time", "Australia/Adelaide"},
    {"W. Australia Standard Time", "Australia/Perth"},
    {"New Zealand Standard Time", "Pacific/Auckland"}, {"Newfoundland Standard Time", "America/St_Johns"},
    {"Morocco Standard Time", "Africa/Casablanca"}, {"Iran Standard Time", "Asia/Tehran"},
    {"Nepal Standard Time", "Asia/Kathmandu"}, {"Cape Verde Standard Time", "Atlantic/Cape_Verde"},
    {"Azores Standard Time", "Atlantic/Azores"}, {"Samoa Standard Time", "Pacific/Apia"},
    {"Line Islands Standard Time", "Pacific/Kiritimati"}, {"Dateline Standard Time", "Etc/GMT+12"},
};

static pthread_mutex_t g_tz_mu = PTHREAD_MUTEX_INITIALIZER;
static sim_tz *g_tz_list;

static int64_t be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}
static int32_t be32(const uint8_t *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

/* ---- POSIX TZ strings --------------------------------------------------- */
static const char *parse_name(const char *s) {
    if (*s == '<') { while (*s && *s != '>') s++; return *s ? s + 1 : NULL; }
    const char *b = s;
    while (isalpha((unsigned char)*s)) s++;
    return s - b >= 3 ? s : NULL;
}
static const char *parse_hms(const char *s, int32_t *out) {
    int sign = 1, h = 0, m = 0, sec = 0;
    if (*s == '+') s++; else if (*s == '-') { sign = -1; s++; }
    if (!isdigit((unsigned char)*s)) return NULL;
    while (isdigit((unsigned char)*s)) h = h * 10 + (*s++ - '0');
    if (*s == ':') { s++; while (isdigit((unsigned char)*s)) m = m * 10 + (*s++ - '0'); }
    if (*s == ':') { s++; while (isdigit((unsigned char)*s)) sec = sec * 10 + (*s++ - '0'); }
    *out = sign * (h * 3600 + m * 60 + sec);
    return s;
}
static const char *parse_rdate(const char *s, tz_rule_date *d) {
    memset(d, 0, sizeof *d);
    d->secs = 7200;
    if (*s == 'M') {
        d->kind = 'M';
        s++;
        d->m = (int)strtol(s, (char **)&s, 10);
        if (*s++ != '.') return NULL;
        d->w = (int)strtol(s, (char **)&s, 10);
        if (*s++ != '.') return NULL;
        d->d = (int)strtol(s, (char **)&s, 10);
    } else if (*s == 'J') {
        d->kind = 'J';
        s++;
        d->jday = (int)strtol(s, (char **)&s, 10);
    } else if (isdigit((unsigned char)*s)) {
        d->kind = 'N';
        d->jday = (int)strtol(s, (char **)&s, 10);
    } else return NULL;
    if (*s == '/') { s = parse_hms(s + 1, &d->secs); if (!s) return NULL; }
    return s;
}
static bool parse_posix(sim_tz *z, const char *s) {
    int32_t off;
    s = parse_name(s);
    if (!s || !(s = parse_hms(s, &off))) return false;
    z->std_off = -off;
    z->has_rule = true;
    if (!*s || *s == '\n') { z->rule_dst = false; return true; }
    s = parse_name(s);
    if (!s) return false;
    z->dst_off = z->std_off + 3600;
    if (*s && *s != ',') { if (!(s = parse_hms(s, &off))) return false; z->dst_off = -off; }
    if (*s != ',') return false;
    if (!(s = parse_rdate(s + 1, &z->start)) || *s != ',') return false;
    if (!(s = parse_rdate(s + 1, &z->end))) return false;
    z->rule_dst = true;
    return true;
}
/* Local seconds since 1970 of a rule date in year y (at its wall time). */
static int64_t rule_local(const tz_rule_date *d, int64_t y) {
    int64_t day;
    if (d->kind == 'M') {
        int64_t first = mcdc_days_from_civil(y, (unsigned)d->m, 1);
        int64_t wd = (first + 4) % 7; /* 1970-01-01 was Thursday (4) */
        if (wd < 0) wd += 7;
        int64_t dd = (d->d - wd + 7) % 7;
        day = first + dd + (d->w - 1) * 7;
        unsigned nm = d->m == 12 ? 1 : (unsigned)d->m + 1;
        int64_t next = mcdc_days_from_civil(d->m == 12 ? y + 1 : y, nm, 1);
        while (day >= next) day -= 7;
    } else if (d->kind == 'J') {
        day = mcdc_days_from_civil(y, 1, 1) + d->jday - 1;
        bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        if (leap && d->jday >= 60) day++;
    } else {
        day = mcdc_days_from_civil(y, 1, 1) + d->jday;
    }
    return day * 86400 + d->secs;
}
static int rule_offset(const sim_tz *z, int64_t utc) {
    if (!z->rule_dst) return z->std_off;
    int64_t y;
    unsigned m, dd;
    mcdc_civil_from_days((utc + z->std_off) / 86400 - ((utc + z->std_off) % 86400 < 0), &y, &m, &dd);
    int64_t s = rule_local(&z->start, y) - z->std_off; /* DST starts (wall time in std) */
    int64_t e = rule_local(&z->end, y) - z->dst_off;   /* DST ends (wall time in dst) */
    if (s < e) return utc >= s && utc < e ? z->dst_off : z->std_off;
    return utc >= e && utc < s ? z->std_off : z->dst_off; /* southern hemisphere */
}

static int load_tzif(sim_tz *z, const char *iana, mcdc_error *err) {
    char path[256];
    snprintf(path, sizeof path, "/usr/share/zoneinfo/%s", iana);
    FILE *f = fopen(path, "rb");
    if (!f) return mcdc_error_set(err, MCDC_E_NOTFOUND, "time zone file %s not found: install tzdata", path);
    uint8_t *buf = mcdc_malloc(TZ_FILE_BYTES_MAX);
    if (!buf) { fclose(f); return mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); }
    size_t n = fread(buf, 1, TZ_FILE_BYTES_MAX, f);
    fclose(f);
    int rc = MCDC_E_CORRUPT;
    if (n < 44 || memcmp(buf, "TZif", 4) != 0) goto bad;
    /* v1 header, skip v1 data, use v2 (64-bit) block when present */
    size_t p = 0;
    int ver = buf[4];
    for (int pass = 0; pass < 2; pass++) {
        if (p + 44 > n) goto bad;
        int32_t isutc = be32(buf + p + 20), isstd = be32(buf + p + 24), leap = be32(buf + p + 28);
        int32_t timecnt = be32(buf + p + 32), typecnt = be32(buf + p + 36), charcnt = be32(buf + p + 40);
        if (timecnt < 0 || timecnt > TZ_TRANS_MAX || typecnt <= 0 || typecnt > TZ_TYPES_MAX ||
            charcnt < 0 || leap < 0 || isutc < 0 || isstd < 0)
            goto bad;
        size_t tsz = pass == 0 ? 4 : 8;
        size_t body = (size_t)timecnt * tsz + (size_t)timecnt + (size_t)typecnt * 6 + (size_t)charcnt +
                      (size_t)leap * (tsz + 4) + (size_t)isstd + (size_t)isutc;
        if (p + 44 + body > n) goto bad;
        if (pass == 0 && ver >= '2') { p += 44 + body; continue; }
        const uint8_t *q = buf + p + 44;
        z->trans = mcdc_malloc(((size_t)timecnt + 1) * sizeof(int64_t));
        z->trans_off = mcdc_malloc(((size_t)timecnt + 1) * sizeof(int32_t));
        if (!z->trans || !z->trans_off) { rc = MCDC_E_NOMEM; goto bad; }
        const uint8_t *idx = q + (size_t)timecnt * tsz, *types = idx + timecnt;
        for (int i = 0; i < timecnt; i++) {
            z->trans[i] = tsz == 8 ? be64(q + (size_t)i * 8) : be32(q + (size_t)i * 4);
            if (idx[i] >= typecnt) goto bad;
            z->trans_off[i] = be32(types + idx[i] * 6);
        }
        z->ntrans = timecnt;
        /* offset before the first transition: first non-DST type */
        z->off0 = be32(types);
        for (int t = 0; t < typecnt; t++)
            if (!types[t * 6 + 4]) { z->off0 = be32(types + t * 6); break; }
        if (pass == 1) {
            const char *foot = (const char *)q + body;
            size_t left = n - (p + 44 + body);
            if (left > 2 && foot[0] == '\n') {
                char tzs[128];
                size_t k = 0;
                while (k + 1 < left && k < sizeof tzs - 1 && foot[k + 1] != '\n') { tzs[k] = foot[k + 1]; k++; }
                tzs[k] = 0;
                if (k) parse_posix(z, tzs);
            }
        }
        break;
    }
    mcdc_free(buf);
    return MCDC_OK;
bad:
    mcdc_free(buf);
    return mcdc_error_set(err, rc, "time zone file %s is not a valid TZif file", path);
}

const sim_tz *sim_tz_get(const char *name, mcdc_error *err) {
    const char *iana = NULL, *win = NULL;
    for (size_t i = 0; i < sizeof WIN_MAP / sizeof WIN_MAP[0]; i++)
        if (mcdc_str_ieq(WIN_MAP[i].win, name)) { iana = WIN_MAP[i].iana; win = WIN_MAP[i].win; break; }
    if (!iana) {
        mcdc_error_set(err, MCDC_E_NOTFOUND,
                       "The time zone parameter '%s' provided to AT TIME ZONE clause is invalid.", name);
        return NULL;
    }
    pthread_mutex_lock(&g_tz_mu);
    for (sim_tz *z = g_tz_list; z; z = z->next)
        if (strcmp(z->win, win) == 0) { pthread_mutex_unlock(&g_tz_mu); return z; }
    sim_tz *z = mcdc_calloc(1, sizeof *z);
    if (!z) { pthread_mutex_unlock(&g_tz_mu); mcdc_error_set(err, MCDC_E_NOMEM, "out of memory"); return NULL; }
    snprintf(z->win, sizeof z->win, "%s", win);
    if (iana[0] && load_tzif(z, iana, err) != MCDC_OK) {
        mcdc_free(z->trans);
        mcdc_free(z->trans_off);
        mcdc_free(z);
        pthread_mutex_unlock(&g_tz_mu);
        return NULL;
    }
    z->next = g_tz_list;
    g_tz_list = z;
    pthread_mutex_unlock(&g_tz_mu);
    return z;
}

const char *sim_tz_name(const sim_tz *z) { return z->win; }

int sim_tz_offset_at(const sim_tz *z, int64_t utc) {
    if (z->ntrans == 0) return z->has_rule ? rule_offset(z, utc) : z->off0;
    if (utc < z->trans[0]) return z->off0;
    if (utc >= z->trans[z->ntrans - 1] && z->has_rule) return rule_offset(z, utc);
    int lo = 0, hi = z->ntrans - 1; /* last transition <= utc */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (z->trans[mid] <= utc) lo = mid; else hi = mid - 1;
    }
    return z->trans_off[lo];
}

int sim_tz_offset_for_local(const sim_tz *z, int64_t local) {
    int before = sim_tz_offset_at(z, local - 86400), after = sim_tz_offset_at(z, local + 86400);
    if (sim_tz_offset_at(z, local - before) == before) return before; /* valid or repeated */
    if (sim_tz_offset_at(z, local - after) == after) return after;
    return before; /* skipped hour: the pre-change offset moves it forward */
}

static int g_tz_refs;

void sim_tz_retain(void) {
    pthread_mutex_lock(&g_tz_mu);
    g_tz_refs++;
    pthread_mutex_unlock(&g_tz_mu);
}

void sim_tz_release(void) {
    pthread_mutex_lock(&g_tz_mu);
    bool last = --g_tz_refs <= 0;
    pthread_mutex_unlock(&g_tz_mu);
    if (last) sim_tz_shutdown();
}

void sim_tz_shutdown(void) {
    pthread_mutex_lock(&g_tz_mu);
    while (g_tz_list) {
        sim_tz *z = g_tz_list;
        g_tz_list = z->next;
        mcdc_free(z->trans);
        mcdc_free(z->trans_off);
        mcdc_free(z);
    }
    pthread_mutex_unlock(&g_tz_mu);
}
