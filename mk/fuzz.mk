# libFuzzer target for the topology/graph XML parser (clang -fsanitize=fuzzer); tests/fuzz/test_fuzz_xml.sh
# builds it with `make fuzz` and runs it briefly. Not part of `all`: gcc builds do not need clang.
FUZZ_CC ?= clang
# graph/ plus the util/ files it uses (others may not build standalone while in progress).
FUZZ_SRC := $(wildcard src/graph/*.c) src/util/log.c src/util/param.c
FUZZ_BIN := $(BUILD)/fuzz/fuzz_xml

.PHONY: fuzz
fuzz: $(FUZZ_BIN)

$(FUZZ_BIN): tests/fuzz/fuzz_xml.c $(FUZZ_SRC) $(wildcard src/graph/*.h src/util/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -o $@ tests/fuzz/fuzz_xml.c $(FUZZ_SRC) $(LDLIBS)
