package dev.xlaactors.runtime;

/**
 * A device's memory statistics ({@code PJRT_Device_MemoryStats}); a field the plugin does not report is -1.
 *
 * @param bytesInUse bytes allocated now
 * @param peakBytesInUse the most bytes allocated at once
 * @param allocations allocations made
 * @param largestAllocation the largest single allocation, in bytes
 * @param bytesLimit the most bytes the device can allocate
 */
public record MemoryStats(
    long bytesInUse, long peakBytesInUse, long allocations, long largestAllocation, long bytesLimit) {}
