# External net plugins for the tests (tests/net/plugin): one TCP plugin source built as a separate
# library for each ABI version Weft takes (6 to 12), and once exporting no plugin symbol. They are loaded the way a
# user loads one, with NCCL_NET_PLUGIN, by tests/net/test_net_plugin.sh and test_net_conformance.
NET_PLUGIN_DIR := $(BUILD)/tests/net/plugin
NET_PLUGINS := $(foreach v,6 7 8 9 10 11 12,$(NET_PLUGIN_DIR)/libnccl-net-tcptest$(v).so) \
               $(NET_PLUGIN_DIR)/libnccl-net-nosym.so
tests: $(NET_PLUGINS)
$(BUILD)/tests/unit/test_net_conformance: | $(NET_PLUGINS)
$(NET_PLUGIN_DIR)/libnccl-net-tcptest%.so: tests/net/plugin/tcp_net_plugin.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) -Wall -Wextra -fPIC -shared $(SANFLAGS) -DTCPTEST_VERSION=$* -o $@ $<
$(NET_PLUGIN_DIR)/libnccl-net-nosym.so: tests/net/plugin/tcp_net_plugin.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) -Wall -Wextra -fPIC -shared $(SANFLAGS) -DTCPTEST_VERSION=0 -o $@ $<
