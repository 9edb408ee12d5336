# Profiler plugin tests (tests/plugin): the counting plugin built as separate libraries, one per
# ABI version it can speak (libnccl-profiler-count.so is v6, -count5 v5, ..., -count2 v2)
# and one without any ncclProfiler_vN table, plus the job they profile (public API only).
PROF_DIR := $(BUILD)/tests/plugin
PROF_PLUGINS := $(PROF_DIR)/libnccl-profiler-count.so $(PROF_DIR)/libnccl-profiler-count5.so \
                $(PROF_DIR)/libnccl-profiler-count4.so $(PROF_DIR)/libnccl-profiler-count3.so \
                $(PROF_DIR)/libnccl-profiler-count2.so \
                $(PROF_DIR)/libnccl-profiler-nosym.so
tests: $(PROF_PLUGINS) $(PROF_DIR)/prof_job

PROF_PLUGIN_CFLAGS = -Iinclude -Isrc -std=gnu11 $(OPT) -Wall -Wextra -fPIC -shared -pthread $(SANFLAGS)
$(PROF_DIR)/libnccl-profiler-count.so: PROF_V := 6
$(PROF_DIR)/libnccl-profiler-count5.so: PROF_V := 5
$(PROF_DIR)/libnccl-profiler-count4.so: PROF_V := 4
$(PROF_DIR)/libnccl-profiler-count3.so: PROF_V := 3
$(PROF_DIR)/libnccl-profiler-count2.so: PROF_V := 2
$(PROF_DIR)/libnccl-profiler-nosym.so: PROF_V := 0 -Wno-unused-function
$(PROF_PLUGINS): tests/plugin/profiler_count.c src/collectives/profiler_abi.h include/nccl.h
	@mkdir -p $(dir $@)
	$(CC) $(PROF_PLUGIN_CFLAGS) -DPROF_VERSION=$(PROF_V) -o $@ $<

$(PROF_DIR)/prof_job: tests/plugin/prof_job.c $(TEST_COMMON) $(SHLIB)
	@mkdir -p $(dir $@)
	$(CC) -Iinclude -Itests/common -std=gnu11 $(OPT) -Wall -Wextra -pthread $(SANFLAGS) -o $@ $< $(TEST_COMMON) -L$(BUILD)/lib -lnccl -Wl,-rpath,'$$ORIGIN/../../lib' $(LDLIBS)
