# Test plugins (tests/plugin): separate shared objects that the library loads by NCCL's variables,
# as users' plugins are; and the job the plugin tests run (an ordinary user of libnccl.so.2).
TUNER_PLUGIN_DIR := $(BUILD)/tests/plugin
TUNER_PLUGIN_VERSIONS := 6 5 4 3 2
TUNER_PLUGINS := $(TUNER_PLUGIN_VERSIONS:%=$(TUNER_PLUGIN_DIR)/libnccl-tuner-force%.so) \
  $(TUNER_PLUGIN_DIR)/libnccl-tuner-nosym.so
tests: $(TUNER_PLUGINS) $(TUNER_PLUGIN_DIR)/tuner_job
$(TUNER_PLUGIN_DIR)/libnccl-tuner-force%.so: tests/plugin/tuner_force.c include/nccl.h
	@mkdir -p $(dir $@)
	$(CC) -Iinclude -std=gnu11 $(OPT) -Wall -Wextra -fPIC -shared $(SANFLAGS) -DTUNER_VERSION=$* -o $@ $<
$(TUNER_PLUGIN_DIR)/libnccl-tuner-nosym.so: tests/plugin/tuner_nosym.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) -fPIC -shared -o $@ $<
$(TUNER_PLUGIN_DIR)/tuner_job: tests/plugin/tuner_job.c $(TEST_COMMON) $(SHLIB)
	@mkdir -p $(dir $@)
	$(CC) -Iinclude -Itests/common -std=gnu11 $(OPT) -Wall -Wextra -pthread $(SANFLAGS) -o $@ $< $(TEST_COMMON) -L$(BUILD)/lib -lnccl -Wl,-rpath,'$$ORIGIN/../../lib' $(LDLIBS)
