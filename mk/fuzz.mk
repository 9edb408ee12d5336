# libFuzzer targets (clang -fsanitize=fuzzer), built by `make fuzz` and run briefly by
# tests/fuzz/test_fuzz_*.sh: the topology/graph XML parser, and every bootstrap and socket-network
# message parser. Not part of `all`: gcc builds do not need clang.
FUZZ_CC ?= clang
FUZZ_FLAGS = $(CPPFLAGS) -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
# graph/ plus the util/ files it uses (others may not build standalone while in progress).
FUZZ_SRC := $(wildcard src/graph/*.c) src/util/hwloc.c src/util/log.c src/util/param.c src/util/sysfs.c
FUZZ_BIN := $(BUILD)/fuzz/fuzz_xml
FUZZ_WIRE_SRC := $(wildcard src/bootstrap/*.c) src/transport/net_socket_wire.c src/util/auth.c src/util/log.c \
  src/util/param.c src/util/psk.c src/util/sha256.c src/util/socket.c src/util/name_list.c src/util/tls.c
FUZZ_WIRE_BIN := $(BUILD)/fuzz/fuzz_wire

.PHONY: fuzz
fuzz: $(FUZZ_BIN) $(FUZZ_WIRE_BIN)

$(FUZZ_BIN): tests/fuzz/fuzz_xml.c $(FUZZ_SRC) $(wildcard src/graph/*.h src/util/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_xml.c $(FUZZ_SRC) $(LDLIBS)

$(FUZZ_WIRE_BIN): tests/fuzz/fuzz_wire.c $(FUZZ_WIRE_SRC) $(wildcard src/bootstrap/*.h src/transport/*.h src/util/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ tests/fuzz/fuzz_wire.c $(FUZZ_WIRE_SRC) $(LDLIBS)
