/* A library named like a tuner plugin that exports no ncclTunerPlugin_vN symbol (tests the WARN). */
int weft_test_not_a_tuner = 1;
