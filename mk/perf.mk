# Perf binaries on GPUs (perf/device.c): with CUDA on they are built with WEFT_PERF_CUDA and the
# shared CUDA runtime, as nccl-tests is. They still run without a GPU or driver: perf/device.c
# probes at run time and falls back to host buffers (WEFT_BACKEND=host forces that).
ifeq ($(CUDA),1)
PERF_CUDA_FLAGS := -DWEFT_PERF_CUDA -isystem $(CUDA_HOME)/include
PERF_CUDA_LIBS = $(CUDART_SHARED)
endif
