# CUDA backend (src/collectives/cuda, transport/p2p.c, util/cuda.c): host files that call the
# runtime see the toolkit headers; nvcc compiles the kernels for the architectures in CUDA_ARCH
# with a thread per architecture. GPU tests (tests/gpu/test_*.c) link the shared library and the
# static runtime; they report SKIP on a machine without a GPU.
ifeq ($(CUDA),1)
CUDA_HOST_OBJ := $(BUILD)/obj/src/util/cuda.o $(BUILD)/obj/src/transport/p2p.o \
  $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/collectives/cuda/*.c))
$(CUDA_HOST_OBJ): CPPFLAGS += -isystem $(CUDA_HOME)/include
NVCCFLAGS += --threads 2 -DWEFT_CUDA=1 -Xcompiler -fno-exceptions,-fno-rtti,-fno-threadsafe-statics
$(CU_OBJ): $(wildcard src/collectives/cuda/*.h src/collectives/cuda/*.cuh src/collectives/algo/*.h) \
  src/collectives/reduce.h src/collectives/dev_types.h src/collectives/progress.h src/transport/connector.h

GPU_TEST_SRC := $(wildcard tests/gpu/*.c)
GPU_TEST_BINS := $(GPU_TEST_SRC:%.c=$(BUILD)/%)
tests: $(GPU_TEST_BINS)
$(BUILD)/tests/gpu/%: tests/gpu/%.c $(wildcard tests/gpu/*.h) tests/integration/coll_util.h tests/integration/trace_util.h $(TEST_COMMON) $(SHLIB)
	@mkdir -p $(dir $@)
	$(CC) -Iinclude -Itests/common -Itests/integration -isystem $(CUDA_HOME)/include -std=gnu11 $(OPT) -Wall -Wextra \
	  -pthread $(SANFLAGS) -o $@ $< $(TEST_COMMON) -L$(BUILD)/lib -lnccl -Wl,-rpath,'$$ORIGIN/../../lib' \
	  $(CUDART_STATIC) $(LDLIBS)
endif
