# Collective integration tests share a header-only helper: rebuild them when it changes.
$(filter $(BUILD)/tests/integration/test_coll%,$(INTEG_BINS)): tests/integration/coll_util.h
