# Sanitizers over the test suite (`make test-san`), each in its own build directory:
#   build-asan/  AddressSanitizer + UndefinedBehaviorSanitizer (-fno-sanitize-recover: any UB
#                report fails its test), LeakSanitizer on: the whole suite but what cannot run
#                instrumented (SAN_SKIP), then test_mpirun.sh without leak checks, as Open MPI
#                keeps its state (dlclosed components, so no suppression can name them) until exit
#   build-tsan/  ThreadSanitizer over the suites whose ranks are threads of one process
#                (TSAN_TESTS); processes' ranks share nothing TSan could see
# SAN_PART=asan|tsan runs one half; make test-san-ci is the part .ci/run runs (see README).
SAN_ASAN_BUILD ?= build-asan
SAN_TSAN_BUILD ?= build-tsan
# Python loads the library into an uninstrumented interpreter; the fuzz targets carry their own
# sanitizers; nvcc and the emulated GPU have their own builds (make emu-tsan).
SAN_SKIP ?= tests/gpuemu/|test_python_clients|test_fuzz_xml|test_fuzz_wire|test_cuda_build|test_algo_nvcc|test_mpirun
TSAN_TESTS ?= build-tsan/tests/(integration/test_(coll_threads|coll_direct|coll_left|coll_comms|coll_config_call|window|teams|comm|deterministic)|unit/test_(prims_ring|prims_wait|proxy|net|shm|bootstrap|bootstrap_msg))$$
# CI's part of the ASan+UBSan half (make test-san-ci, .ci/run): the unit tests (the network's over
# Socket and IB), the security tests, the plugin tests and the fastest collective suites of thread
# and process ranks (about 4 minutes instrumented); the rest runs under ASan by hand (make
# test-asan). Left out of CI too: test_encryption_wire.sh counts every clear header crossing lo, so
# another job's traffic on a shared machine fails it (it runs uninstrumented in make test).
SAN_CI_TESTS ?= tests/(unit|security|plugin)/|integration/test_(coll_threads|coll_procs|coll_direct|coll_left|coll_mismatch|coll_env_mismatch|coll_fail|comm|encryption)$$
SAN_CI_SKIP ?= $(SAN_SKIP)|test_encryption_wire
SAN_ENV := EMU_TESTS=0 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
TSAN_ENV := EMU_TESTS=0 TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1"
SAN_PART ?= asan tsan

.PHONY: test-san test-asan test-tsan test-san-ci san-asan-build san-tsan-build
test-san: $(SAN_PART:%=test-%)

# CI's sanitizer step: ASan+UBSan over SAN_CI_TESTS, then the whole TSan half; one after the other
# (recipe lines, not prerequisites) so that make -j2 parallelises the builds, never the tests.
test-san-ci:
	@$(MAKE) --no-print-directory san-asan-build
	@echo "== AddressSanitizer + UndefinedBehaviorSanitizer, CI subset ($(SAN_ASAN_BUILD))"
	@BUILD=$(SAN_ASAN_BUILD) $(SAN_ENV) TESTS='$(SAN_CI_TESTS)' TESTS_SKIP='$(SAN_CI_SKIP)' bash tests/run.sh
	@$(MAKE) --no-print-directory test-tsan

san-asan-build:
	@$(MAKE) --no-print-directory BUILD=$(SAN_ASAN_BUILD) CUDA=0 SAN=address,undefined \
	  SANFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" tests
san-tsan-build:
	@$(MAKE) --no-print-directory BUILD=$(SAN_TSAN_BUILD) CUDA=0 SAN=thread tests

test-asan: san-asan-build
	@echo "== AddressSanitizer + UndefinedBehaviorSanitizer ($(SAN_ASAN_BUILD))"
	@BUILD=$(SAN_ASAN_BUILD) $(SAN_ENV) TESTS_SKIP='$(SAN_SKIP)' bash tests/run.sh
	@BUILD=$(SAN_ASAN_BUILD) $(SAN_ENV) ASAN_OPTIONS=detect_leaks=0 TESTS='test_mpirun' bash tests/run.sh

test-tsan: san-tsan-build
	@echo "== ThreadSanitizer, thread-rank suites ($(SAN_TSAN_BUILD))"
	@BUILD=$(SAN_TSAN_BUILD) $(TSAN_ENV) TESTS='$(TSAN_TESTS)' bash tests/run.sh
