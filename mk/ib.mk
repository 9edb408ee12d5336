# The test-only verbs provider (tests/ibemu): what the IB transport's tests load in place of
# libibverbs.so.1 through WEFT_IBVERBS_LIB. Needs verbs' header (Debian libibverbs-dev).
FAKE_VERBS := $(BUILD)/tests/lib/libweft_fake_verbs.so
ifneq ($(wildcard /usr/include/infiniband/verbs.h),)
tests: $(FAKE_VERBS)
$(BUILD)/tests/unit/test_ib_devices: $(FAKE_VERBS)
endif
$(FAKE_VERBS): $(wildcard tests/ibemu/*.c tests/ibemu/*.h) tests/gpuemu/emu_dmabuf.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) -Wall -Wextra -fPIC -shared -pthread $(SANFLAGS) -o $@ $(filter %.c,$^)
ifneq ($(wildcard /usr/include/infiniband/verbs.h),)
$(BUILD)/tests/unit/test_net $(BUILD)/tests/unit/test_net_conformance $(BUILD)/tests/unit/test_ibemu: $(FAKE_VERBS)
endif
