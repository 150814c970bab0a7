"""What the Python benchmarks share: a child run with its own peak RSS and CPU,
a process's CPU seconds from /proc, and the reference's local SparkSession.
Nothing here asserts."""
import os
import shutil
import subprocess
import sys
import tempfile
import time


class Run:
    """One finished child: wall seconds, exit code, its own peak RSS (MB, the
    kernel's ru_maxrss from wait4 of that process alone), its CPU seconds,
    stdout and stderr."""

    def __init__(self, secs, rc, rss_mb, cpu_s, out, err):
        self.secs, self.rc, self.rss_mb, self.cpu_s, self.out, self.err = \
            secs, rc, rss_mb, cpu_s, out, err


def run_child(args, env=None, ok=(0,)):
    """Runs args to its end; returns a Run. An exit code outside ok stops the
    benchmark with the child's stderr."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(args, stdout=out, stderr=err, env=env, text=True)
        # wait4 on this pid: the rusage of this child alone (RUSAGE_CHILDREN
        # would be the largest of every child waited for so far)
        _, status, ru = os.wait4(p.pid, 0)
        secs = time.perf_counter() - t0
        p.returncode = rc = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        run = Run(secs, rc, ru.ru_maxrss / 1024.0, ru.ru_utime + ru.ru_stime, out.read(), err.read())
    if rc not in ok:
        raise SystemExit(f"{os.path.basename(args[0])} {args[1]} failed ({rc}): {run.err[-2000:]}")
    return run


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU seconds of a running process (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)


def wait_idle(pid, quiet_s=1.0, limit_s=120.0):
    """Waits until the process used no CPU for quiet_s (a load's background
    work would count as the next measurement's)."""
    deadline = time.monotonic() + limit_s
    quiet_since = time.monotonic()
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = cpu_seconds(pid)
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return


def reference_missing(rows, knob):
    """Why the reference (mssql-cdc-pyspark on local Spark) cannot run here, or None."""
    if rows <= 0:
        return f"{knob}=0"
    if shutil.which("java") is None:
        return "no java on PATH"
    try:
        import delta  # noqa: F401
        import mssql_cdc  # noqa: F401
        import mssql_python  # noqa: F401
    except ImportError as e:
        return (f"the reference is not importable ({e}); tests/requirements.txt has it "
                "(mssql-cdc-pyspark, pyspark, delta-spark): make deps")
    return None


def local_spark(app_name):
    """A local[2] SparkSession with Delta, in UTC, for the reference."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # its data sources run in workers
    os.environ["TZ"] = "UTC"
    time.tzset()
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master("local[2]").appName(app_name)
               .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog",
                       "org.apache.spark.sql.delta.catalog.DeltaCatalog")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
               .config("spark.sql.shuffle.partitions", "2"))
    spark = configure_spark_with_delta_pip(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
