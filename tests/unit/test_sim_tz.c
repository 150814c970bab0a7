/* test_sim_tz.c - Windows zone names, TZif offsets and AT TIME ZONE. */
#include "sim_tz.h"
#include "test_sim_helpers.h"

TEST(sim_tz_offsets) {
    sim_tz_retain();
    mcdc_error err = MCDC_ERROR_INIT;
    const sim_tz *ny = sim_tz_get("eastern standard time", &err);
    CHECK(ny != NULL);
    CHECK_EQ_STR(sim_tz_name(ny), "Eastern Standard Time");
    int64_t jan = mcdc_days_from_civil(2024, 1, 15) * 86400, jul = mcdc_days_from_civil(2024, 7, 15) * 86400;
    CHECK_EQ_INT(sim_tz_offset_at(ny, jan), -5 * 3600);
    CHECK_EQ_INT(sim_tz_offset_at(ny, jul), -4 * 3600);
    /* far future: from the POSIX rule of the TZif footer */
    int64_t jul2090 = mcdc_days_from_civil(2090, 7, 15) * 86400;
    CHECK_EQ_INT(sim_tz_offset_at(ny, jul2090), -4 * 3600);
    /* fall-back 2024-11-03 01:30 local is repeated: the pre-change offset */
    int64_t rep = mcdc_days_from_civil(2024, 11, 3) * 86400 + 5400;
    CHECK_EQ_INT(sim_tz_offset_for_local(ny, rep), -4 * 3600);
    /* spring-forward 2024-03-10 02:30 local does not exist: pre-change offset */
    int64_t gap = mcdc_days_from_civil(2024, 3, 10) * 86400 + 9000;
    CHECK_EQ_INT(sim_tz_offset_for_local(ny, gap), -5 * 3600);
    const sim_tz *sp = sim_tz_get("E. South America Standard Time", &err);
    CHECK(sp != NULL);
    CHECK_EQ_INT(sim_tz_offset_at(sp, jan), -3 * 3600);
    const sim_tz *syd = sim_tz_get("AUS Eastern Standard Time", &err);
    CHECK(syd != NULL);
    CHECK_EQ_INT(sim_tz_offset_at(syd, jan), 11 * 3600);
    CHECK_EQ_INT(sim_tz_offset_at(syd, jul), 10 * 3600);
    CHECK(sim_tz_get("Mars Standard Time", &err) == NULL);
    sim_tz_release();
}

TEST(sim_tz_at_time_zone_sql) {
    char dir[64];
    test_tmpdir(dir, sizeof dir);
    sim_server *srv = test_server(dir, 0);
    sim_session *s = test_login(srv, "sa", "Sa_Passw0rd", NULL);
    coll *c = calloc(1, sizeof *c);
    CHECK_EQ_STR(scalar(s, c, "SELECT CAST('2024-11-03 01:30:00' AS datetime2(0)) AT TIME ZONE 'Eastern Standard Time'"),
                 "2024-11-03 01:30:00 -04:00");
    CHECK_EQ_INT(c->cols[0].type.id, SIM_T_DATETIMEOFFSET);
    CHECK_EQ_STR(scalar(s, c, "SELECT CAST('2024-03-10 02:30:00' AS datetime2(0)) AT TIME ZONE 'Eastern Standard Time'"),
                 "2024-03-10 03:30:00 -04:00");
    CHECK_EQ_STR(scalar(s, c, "SELECT CAST('2024-11-03 06:30:00 +00:00' AS datetimeoffset(0)) AT TIME ZONE 'Eastern Standard Time'"),
                 "2024-11-03 01:30:00 -05:00");
    CHECK_EQ_STR(scalar(s, c, "SELECT CONVERT(datetime2(3), (CAST('2024-07-01 12:00:00' AS datetime) AT TIME ZONE N'Central European Standard Time') AT TIME ZONE 'UTC')"),
                 "2024-07-01 10:00:00.000");
    CHECK_EQ_STR(scalar(s, c, "SELECT DATEPART(TZOFFSET, CAST('2024-01-01' AS datetime2) AT TIME ZONE 'E. South America Standard Time')"), "-180");
    run(s, c, "SELECT CAST('2024-01-01' AS datetime2) AT TIME ZONE 'Nowhere Standard Time'");
    CHECK_EQ_INT(c->err_number, 9820);
    CHECK_EQ_STR(scalar(s, c, "SELECT DATEADD(minute, -180, CAST('2024-01-01 01:00:00.123' AS datetime2(3)))"), "2023-12-31 22:00:00.123");
    CHECK_EQ_STR(scalar(s, c, "SELECT DATEDIFF(day, '2024-01-01', '2024-03-01')"), "60");
    CHECK_EQ_STR(scalar(s, c, "SELECT CONVERT(varchar(23), CAST('2024-05-06 07:08:09' AS datetime), 126)"), "2024-05-06T07:08:09");
    CHECK_EQ_STR(scalar(s, c, "SELECT CONVERT(varchar(23), CAST('2024-05-06 07:08:09.1234' AS datetime), 126)"), "2024-05-06T07:08:09.123");
    CHECK_EQ_STR(scalar(s, c, "SELECT CAST('2024-05-06 07:08:09.002' AS datetime)"), "2024-05-06 07:08:09.003");
    sim_session_close(s);
    sim_server_close(srv);
    test_rmdir(dir);
    free(c);
}
