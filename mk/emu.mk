# The emulated GPU (tests/gpuemu): `make emu` builds the whole library for it into build-emu/,
# with the CUDA sources (.cu) compiled as host C++ through tests/gpuemu/device.h and linked to
# the emulated runtime build-emu/lib/libcudart.so.13, plus the GPU tests and the emulator's own.
# A program built against CUDA's cuda_runtime.h and nccl.h runs on it with
# LD_LIBRARY_PATH=build-emu/lib. EMU_SAN=thread adds ThreadSanitizer (build-emu-tsan/).
EMU_BUILD ?= build-emu
.PHONY: emu emu-tsan
emu:
	@$(MAKE) --no-print-directory BUILD=$(EMU_BUILD) EMU=1 CUDA=1 lib tools perf tests

# Only what tests/gpuemu/test_emu_tsan.sh runs: the library, the emulator's and the GPU tests.
emu-tsan:
	@$(MAKE) --no-print-directory BUILD=build-emu-tsan EMU=1 CUDA=1 SAN=thread lib emu-test-bins

ifeq ($(EMU),1)
CXX := g++
EMU_DIR := tests/gpuemu
EMU_CUDART := $(BUILD)/lib/libcudart.so.13
EMU_RT_SRC := $(filter-out $(EMU_DIR)/test_%,$(wildcard $(EMU_DIR)/*.c))
EMU_CXXFLAGS := -std=c++17 $(OPT) -ffp-contract=off -Wall -Wextra -Wno-unknown-pragmas -Wno-class-memaccess \
  -fPIC -pthread $(SANFLAGS) -D_GNU_SOURCE -DWEFT_CUDA=1 -DWEFT_GPU_EMU=1 -I$(EMU_DIR) -isystem $(CUDA_HOME)/include \
  -isystem $(CUDA_HOME)/include/cccl -include $(EMU_DIR)/device.h
LDLIBS += -lstdc++

$(EMU_CUDART): $(EMU_RT_SRC) $(wildcard $(EMU_DIR)/*.h) $(EMU_DIR)/libcudart.map
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) -Wall -Wextra -fPIC -pthread -fvisibility=hidden $(SANFLAGS) -D_GNU_SOURCE \
	  -isystem $(CUDA_HOME)/include -I$(EMU_DIR) -shared -o $@ $(EMU_RT_SRC) -Wl,-soname,libcudart.so.13 \
	  -Wl,--version-script=$(EMU_DIR)/libcudart.map -ldl -lrt
	ln -sf libcudart.so.13 $(BUILD)/lib/libcudart.so

# A device source becomes C++ with a registration for each of its __global__ functions, so
# that the emulated cudaLaunchKernel can call them.
$(CU_OBJ): $(EMU_DIR)/device.h $(EMU_DIR)/emu.h
$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	{ echo '#include "$<"'; sed -n 's/^__global__.*[ )]\([A-Za-z_][A-Za-z0-9_]*\)(.*/WEFT_EMU_KERNEL(\1);/p' $<; } > $@.cpp
	$(CXX) $(EMU_CXXFLAGS) -I. -Iinclude -Isrc -fvisibility=hidden -c $@.cpp -o $@

$(SHLIB) $(TOOL_BINS) $(UNIT_BINS): $(EMU_CUDART)

EMU_TEST_CU := $(wildcard $(EMU_DIR)/test_*.cu)
EMU_TEST_C := $(wildcard $(EMU_DIR)/test_*.c)
EMU_TEST_BINS := $(EMU_TEST_CU:%.cu=$(BUILD)/%) $(EMU_TEST_C:%.c=$(BUILD)/%)
tests: $(EMU_TEST_BINS)
.PHONY: emu-test-bins
emu-test-bins: $$(EMU_TEST_BINS) $$(GPU_TEST_BINS)
$(BUILD)/$(EMU_DIR)/%: $(EMU_DIR)/%.cu $(EMU_CUDART)
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -Iinclude -Isrc -x c++ $< -x none -o $@ $(CUDART_STATIC) $(LDLIBS)
$(BUILD)/$(EMU_DIR)/%: $(EMU_DIR)/%.c $(EMU_CUDART) $(SHLIB)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) -Wall -Wextra -pthread $(SANFLAGS) -D_GNU_SOURCE -Iinclude -I$(EMU_DIR) \
	  -isystem $(CUDA_HOME)/include -o $@ $< -L$(BUILD)/lib -lnccl $(CUDART_STATIC) $(LDLIBS)
endif
