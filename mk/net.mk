# Multi-host test bed (tests/net): the rank program the scripts launch, per rank, on emulated
# hosts (WEFT_HOSTID over loopback) or inside network namespaces. Public API only.
NET_RANKS := $(BUILD)/tests/net/net_ranks
tests: $(NET_RANKS)
$(NET_RANKS): tests/net/net_ranks.c tests/integration/coll_util.h $(TEST_COMMON) $(SHLIB)
	@mkdir -p $(dir $@)
	$(CC) -Iinclude -Itests/common -Itests/integration -std=gnu11 $(OPT) -Wall -Wextra -pthread $(SANFLAGS) -o $@ $< $(TEST_COMMON) -L$(BUILD)/lib -lnccl -Wl,-rpath,'$$ORIGIN/../../lib' $(LDLIBS)
