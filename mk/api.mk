# API tests against NVIDIA's own nccl.h (tests/api): ABI dumps, static ABI checks, run time.
# Only the toolkit's include directory is used; every program links Weft's libnccl.so.2.
# Without a toolkit header the test programs are built as stubs that report SKIP.

API_DIR := $(BUILD)/tests/api
# Same search as the Makefile's CUDA detection (nvcc on PATH, CUDA_HOME), then /usr/local/cuda.
API_NV_HOME := $(firstword $(foreach d,$(CUDA_HOME) /usr/local/cuda,$(if $(wildcard $(d)/include/nccl.h),$(d))))
API_CFLAGS := -std=gnu11 $(OPT) -Wall -Wextra -pthread $(SANFLAGS)
# RPATH (not RUNPATH) so that LD_LIBRARY_PATH or ld.so.cache cannot bring in NVIDIA's library.
API_LINK := -L$(BUILD)/lib -lnccl -Wl,--disable-new-dtags -Wl,-rpath,'$$ORIGIN/../../lib'
API_TESTS := $(API_DIR)/test_abi_static $(API_DIR)/test_api_runtime

tests: $(API_TESTS)

ifneq ($(API_NV_HOME),)
API_NV_INC := -I$(API_NV_HOME)/include

tests: $(API_DIR)/abi_dump_nvidia $(API_DIR)/abi_dump_weft

$(API_DIR)/abi_dump_nvidia: tests/api/abi_dump.c tests/api/abi_common.h $(API_NV_HOME)/include/nccl.h
	@mkdir -p $(dir $@)
	$(CC) $(API_NV_INC) -Itests/api $(API_CFLAGS) -o $@ $<

$(API_DIR)/abi_dump_weft: tests/api/abi_dump.c tests/api/abi_common.h include/nccl.h
	@mkdir -p $(dir $@)
	$(CC) -Iinclude -Itests/api $(API_CFLAGS) -o $@ $<

$(API_DIR)/abi_expect.h: $(API_DIR)/abi_dump_weft
	$< > $@.tmp && mv $@.tmp $@

# Weft's prototypes, as written in include/nccl.h, for redeclaration under NVIDIA's header.
$(API_DIR)/weft_protos.h: include/nccl.h
	@mkdir -p $(dir $@)
	awk '/^#define WEFT_DECLARE/ {on = 1} on {print} /^#undef WEFT_DECLARE/ {on = 0}' $< > $@.tmp
	grep -q ncclCommInitRank $@.tmp && mv $@.tmp $@

$(API_DIR)/test_abi_static: tests/api/test_abi_static.c tests/api/abi_common.h $(API_DIR)/abi_expect.h $(API_DIR)/weft_protos.h
	$(CC) $(API_NV_INC) -Itests/api -I$(API_DIR) $(API_CFLAGS) -o $@ $<

$(API_DIR)/test_api_runtime: tests/api/test_api_runtime.c $(SHLIB)
	@mkdir -p $(dir $@)
	$(CC) $(API_NV_INC) $(API_CFLAGS) -o $@ $< $(API_LINK) -ldl
else
$(API_TESTS): tests/api/skip_main.c
	@mkdir -p $(dir $@)
	$(CC) $(API_CFLAGS) -o $@ $< -DWHY='"no nccl.h from the CUDA toolkit (nvcc, CUDA_HOME, /usr/local/cuda)"'
endif
