# API tests against NVIDIA's own headers (tests/api): ABI dumps, static ABI checks, run time.
# The reference is NCCL 2.32.3 from PyPI (nvidia-nccl-cu13), fetched by scripts/fetch_nccl_ref.sh
# into $(API_REF) when `make test` runs online; CUDA's own nccl.h (2.28.9) is the older caller.
# Only headers are used; every program links Weft's libnccl.so.2. Programs whose reference is
# missing are built as stubs that report SKIP.

API_DIR := $(BUILD)/tests/api
API_REF := $(BUILD)/ref/nccl-2.32.3
API_REF_OK := $(wildcard $(API_REF)/stamp)
# CUDA's nccl.h (2.28.9): same search as the Makefile's CUDA detection, then /usr/local/cuda.
API_NV_HOME := $(firstword $(foreach d,$(CUDA_HOME) /usr/local/cuda,$(if $(wildcard $(d)/include/nccl.h),$(d))))
API_CFLAGS := -std=gnu11 $(OPT) -Wall -Wextra -pthread $(SANFLAGS)
# RPATH (not RUNPATH) so that LD_LIBRARY_PATH or ld.so.cache cannot bring in NVIDIA's library.
API_LINK := -L$(BUILD)/lib -lnccl -Wl,--disable-new-dtags -Wl,-rpath,'$$ORIGIN/../../lib'
API_REF_TESTS := $(API_DIR)/test_abi_static $(API_DIR)/test_api_runtime_232
API_OLD_TESTS := $(API_DIR)/test_api_runtime

tests: $(API_REF_TESTS) $(API_OLD_TESTS)

# Weft's own dump: always built, the reference dump is compared against it.
tests: $(API_DIR)/abi_dump_weft
$(API_DIR)/abi_dump_weft: tests/api/abi_dump.c tests/api/abi_common.h include/nccl.h
	@mkdir -p $(dir $@)
	$(CC) -Iinclude -Itests/api $(API_CFLAGS) -o $@ $<

define api_skip_stub
	@mkdir -p $(dir $@)
	$(CC) $(API_CFLAGS) -o $@ tests/api/skip_main.c -DWHY='$(1)'
endef

ifneq ($(API_REF_OK),)
# NVIDIA's 2.32.3 nccl.h includes cuda_runtime.h; NCCL_OS_LINUX gives its Linux declarations.
API_REF_INC := -I$(API_REF)/include $(if $(API_NV_HOME),-I$(API_NV_HOME)/include) -DNCCL_OS_LINUX

tests: $(API_DIR)/abi_dump_nvidia
$(API_DIR)/abi_dump_nvidia: tests/api/abi_dump.c tests/api/abi_common.h $(API_REF)/stamp
	@mkdir -p $(dir $@)
	$(CC) $(API_REF_INC) -Itests/api $(API_CFLAGS) -o $@ $<

$(API_DIR)/abi_expect.h: $(API_DIR)/abi_dump_weft
	$< > $@.tmp && mv $@.tmp $@

# Weft's prototypes, as written in include/nccl.h, for redeclaration under NVIDIA's header.
$(API_DIR)/weft_protos.h: include/nccl.h
	@mkdir -p $(dir $@)
	awk '/^#define WEFT_DECLARE/ {on = 1} on {print} /^#undef WEFT_DECLARE/ {on = 0}' $< > $@.tmp
	grep -q ncclCommInitRank $@.tmp && mv $@.tmp $@

$(API_DIR)/test_abi_static: tests/api/test_abi_static.c tests/api/abi_common.h $(API_DIR)/abi_expect.h $(API_DIR)/weft_protos.h
	$(CC) $(API_REF_INC) -Itests/api -I$(API_DIR) $(API_CFLAGS) -o $@ $<

$(API_DIR)/test_api_runtime_232: tests/api/test_api_runtime.c $(SHLIB)
	@mkdir -p $(dir $@)
	$(CC) $(API_REF_INC) $(API_CFLAGS) -o $@ $< $(API_LINK) -ldl
else
$(API_REF_TESTS):
	$(call api_skip_stub,"no NCCL 2.32.3 reference headers in $(API_REF) (scripts/fetch_nccl_ref.sh; offline?)")
endif

ifneq ($(API_NV_HOME),)
$(API_DIR)/test_api_runtime: tests/api/test_api_runtime.c $(SHLIB)
	@mkdir -p $(dir $@)
	$(CC) -I$(API_NV_HOME)/include $(API_CFLAGS) -o $@ $< $(API_LINK) -ldl
else
$(API_OLD_TESTS):
	$(call api_skip_stub,"no nccl.h from the CUDA toolkit (nvcc, CUDA_HOME, /usr/local/cuda)")
endif
