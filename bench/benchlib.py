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
    """One finished child: wall seconds, exit code, its own peak RSS (MB), its CPU
    seconds, stdout and stderr."""

    def __init__(self, secs, rc, rss_mb, cpu_s, out, err):
        self.secs, self.rc, self.rss_mb, self.cpu_s, self.out, self.err = \
            secs, rc, rss_mb, cpu_s, out, err


def run_child(args, env=None, ok=(0,)):
    """Runs args to its end under GNU time (scripts/install-deps.sh installs it);
    returns a Run. An exit code outside ok stops the benchmark with the child's
    stderr.

    Why GNU time: Linux starts a new program's ru_maxrss at the high-water mark of
    the memory it replaced, and Python spawns with vfork, so a child's ru_maxrss
    (wait4, RUSAGE_CHILDREN) is never below this Python process's own peak RSS,
    pyarrow's tables included. time forks the program from a process of a few MB."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("r") as usage:
        t0 = time.perf_counter()
        rc = subprocess.run(["/usr/bin/time", "-q", "-f", "%M %U %S", "-o", usage.name, *args],
                            stdout=out, stderr=err, env=env).returncode
        secs = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        maxrss_kb, user, system = usage.read().split()[-3:]
        run = Run(secs, rc, int(maxrss_kb) / 1024.0, float(user) + float(system), out.read(),
                  err.read())
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
