package dev.xlaactors.runtime;

/**
 * What a compiled program needs in its device's memory, as XLA planned it when compiling (PJRT's
 * {@code PJRT_Executable_GetCompiledMemoryStats}): see {@link Executable#compiledMemoryStats()}. On the
 * CPU plugin, the device's memory is host memory.
 *
 * @param generatedCodeBytes the compiled code
 * @param argumentBytes the parameters, as the caller passes them
 * @param outputBytes the results
 * @param aliasBytes the part of the parameters reused for results
 * @param tempBytes the buffers XLA allocates for each run and frees after it (intermediate values)
 * @param peakBytes the most live at once during a run, where the plugin reports it (0 where it does not)
 */
public record CompiledMemoryStats(
    long generatedCodeBytes, long argumentBytes, long outputBytes, long aliasBytes, long tempBytes, long peakBytes) {}
