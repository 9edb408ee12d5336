# Weft: one Makefile for the library, tools, perf binaries and tests.
#   make            library (build/lib), header (build/include), tools (build/bin)
#   make test       dependencies, build, then every test; ends with "N passed, N failed"
#   make run        dependencies, build, then the main demo job
#   make CUDA=0     host-only build; DEBUG=1 for -O0 -g; SAN=address|undefined|thread
#   make emu        the library and its GPU tests for the emulated GPU, in build-emu/ (mk/emu.mk)

NCCL_MAJOR := 2
NCCL_MINOR := 32
NCCL_PATCH := 3
LIBVER := $(NCCL_MAJOR).$(NCCL_MINOR).$(NCCL_PATCH)

BUILD ?= build
CC ?= gcc
ifeq ($(origin CC),default)
CC := gcc
endif

# CUDA is found on PATH, in CUDA_HOME or in /usr/local/cuda; CUDA=0 turns it off.
NVCC ?= $(shell command -v nvcc 2>/dev/null || { [ -n "$(CUDA_HOME)" ] && [ -x "$(CUDA_HOME)/bin/nvcc" ] && echo "$(CUDA_HOME)/bin/nvcc"; } || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
ifeq ($(NVCC),)
CUDA ?= 0
else
CUDA ?= 1
endif
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= 80 90 100

OPT := -O2 -g
ifeq ($(DEBUG),1)
OPT := -O0 -g
endif
SANFLAGS :=
ifneq ($(SAN),)
SANFLAGS := -fsanitize=$(SAN) -fno-omit-frame-pointer
endif

CPPFLAGS := -Iinclude -Isrc -D_GNU_SOURCE
CFLAGS := -std=gnu11 $(OPT) -Wall -Wextra -fPIC -pthread -fvisibility=hidden $(SANFLAGS)
LDLIBS := -pthread -ldl -lrt -lm
ifeq ($(CUDA),1)
CPPFLAGS += -DWEFT_CUDA=1
endif

LIB_SRC := $(shell find src -name '*.c' | sort)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CU_SRC := $(if $(filter 1,$(CUDA)),$(shell find src -name '*.cu' | sort))
CU_OBJ := $(CU_SRC:%.cu=$(BUILD)/obj/%.cu.o)
# The CUDA runtime: the toolkit's, or with EMU=1 the emulated GPU's libcudart.so.13 (mk/emu.mk).
ifeq ($(EMU),1)
CUDART_STATIC = -L$(BUILD)/lib -l:libcudart.so.13 -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/../lib' -Wl,-rpath,'$$ORIGIN/../../lib'
CUDART_SHARED = $(CUDART_STATIC)
else
CUDART_STATIC = -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib -lcudart_static
CUDART_SHARED = -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/lib -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart
endif
CU_LIBS = $(if $(CU_SRC),$(CUDART_STATIC))
NVCCFLAGS := -O2 -Xcompiler -fPIC,-fvisibility=hidden -Iinclude -Isrc $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a))

SONAME := libnccl.so.$(NCCL_MAJOR)
SHLIB := $(BUILD)/lib/libnccl.so.$(LIBVER)
STLIB := $(BUILD)/lib/libnccl_static.a
HEADER := $(BUILD)/include/nccl.h
DEVICE_HEADERS := $(patsubst include/%,$(BUILD)/include/%,$(wildcard include/nccl_device.h include/nccl_device/*.h))
WEFT_HEADER := $(BUILD)/include/weft.h

TOOLS := $(patsubst tools/%/,%,$(sort $(dir $(wildcard tools/*/*.c))))
TOOL_BINS := $(TOOLS:%=$(BUILD)/bin/%)

PERF_MAIN := $(wildcard perf/*_perf.c)
PERF_COMMON := $(filter-out $(PERF_MAIN),$(wildcard perf/*.c))
PERF_BINS := $(PERF_MAIN:perf/%.c=$(BUILD)/bin/%)

TEST_COMMON := $(wildcard tests/common/*.c)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
INTEG_SRC := $(wildcard tests/integration/test_*.c)
UNIT_BINS := $(UNIT_SRC:%.c=$(BUILD)/%)
INTEG_BINS := $(INTEG_SRC:%.c=$(BUILD)/%)

.PHONY: all lib tools perf tests test run deps format format-check clean
all: lib tools perf

lib: $(SHLIB) $(STLIB) $(HEADER) $(DEVICE_HEADERS) $(WEFT_HEADER)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

# util/hwloc.h and util/ibverbs.h compile hwloc and verbs in only when their headers exist
# (__has_include), so objects built before `make deps` installed libhwloc-dev and libibverbs-dev
# would keep going without them: which headers exist is a prerequisite of every library object
# (a rebuild when it changes, which is rare).
OPTIONAL_HEADERS := $(if $(wildcard /usr/include/hwloc.h),hwloc,nohwloc)-$(if $(wildcard /usr/include/infiniband/verbs.h),verbs,noverbs)
HEADERS_STAMP := $(BUILD)/headers-$(OPTIONAL_HEADERS).stamp
$(LIB_OBJ): $(HEADERS_STAMP)
$(HEADERS_STAMP):
	@mkdir -p $(@D) && rm -f $(BUILD)/headers-*.stamp $(BUILD)/hwloc-header-*.stamp && touch $@

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(SHLIB): $(LIB_OBJ) $(CU_OBJ) src/libnccl.map
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(LIB_OBJ) $(CU_OBJ) -Wl,-soname,$(SONAME) -Wl,--version-script=src/libnccl.map $(SANFLAGS) $(CU_LIBS) $(LDLIBS)
	ln -sf libnccl.so.$(LIBVER) $(BUILD)/lib/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/lib/libnccl.so

$(STLIB): $(LIB_OBJ) $(CU_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(HEADER) $(DEVICE_HEADERS) $(WEFT_HEADER): $(BUILD)/include/%: include/%
	@mkdir -p $(dir $@)
	cp $< $@

# Tools link the static library: some (weft-info, weft-topo) use internal interfaces.
tools: $(TOOL_BINS)
.SECONDEXPANSION:
$(BUILD)/bin/%: $$(wildcard tools/%/*.c) $(STLIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fvisibility=default -o $@ $(filter %.c,$^) $(STLIB) $(CU_LIBS) $(LDLIBS)

# Perf binaries are ordinary users of libnccl.so.2.
perf: $(PERF_BINS)
$(BUILD)/bin/%_perf: perf/%_perf.c $(PERF_COMMON) $(wildcard perf/*.h) $(SHLIB)
	@mkdir -p $(dir $@)
	$(PERF_LINK)

tests: all $(UNIT_BINS) $(INTEG_BINS)

# Unit tests see internal functions through the static library.
$(BUILD)/tests/unit/%: tests/unit/%.c $(TEST_COMMON) $(wildcard tests/common/*.h tests/unit/*.h) $(STLIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests/common $(CFLAGS) -fvisibility=default -o $@ $< $(TEST_COMMON) $(STLIB) $(CU_LIBS) $(LDLIBS)

# Integration tests use only the public API of the shared library.
$(BUILD)/tests/integration/%: tests/integration/%.c $(TEST_COMMON) $(wildcard tests/common/*.h tests/integration/*.h) $(SHLIB)
	@mkdir -p $(dir $@)
	$(CC) -Iinclude -Itests/common -std=gnu11 $(OPT) -Wall -Wextra -pthread $(SANFLAGS) -o $@ $< $(TEST_COMMON) -L$(BUILD)/lib -lnccl -Wl,-rpath,'$$ORIGIN/../../lib' $(LDLIBS)

deps:
	@bash scripts/deps.sh

test: deps
	@bash scripts/fetch_nccl_ref.sh $(BUILD)/ref/nccl-2.32.3
	@$(MAKE) --no-print-directory tests
	@$(MAKE) --no-print-directory emu
	@$(MAKE) --no-print-directory emu-tsan
	@bash tests/run.sh

run: deps
	@$(MAKE) --no-print-directory all
	@bash scripts/run.sh

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' '*.cu' 2>/dev/null)
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD)

# Fragments for parts with their own rules (fuzz targets, API tests).
-include $(wildcard mk/*.mk)
-include $(LIB_OBJ:.o=.d)
