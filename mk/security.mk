# Security tests (tests/security): strangers written with raw sockets attack a real job on
# loopback. They see internal functions (keys, wire formats) through the static library.
SEC_SRC := $(wildcard tests/security/test_*.c)
SEC_BINS := $(SEC_SRC:%.c=$(BUILD)/%)
tests: $(SEC_BINS)
$(BUILD)/tests/security/%: tests/security/%.c $(TEST_COMMON) $(wildcard tests/common/*.h tests/security/*.h) $(STLIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/common $(CFLAGS) -fvisibility=default -o $@ $< $(TEST_COMMON) $(STLIB) $(CU_LIBS) $(LDLIBS)
