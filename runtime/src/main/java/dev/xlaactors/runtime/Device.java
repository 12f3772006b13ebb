package dev.xlaactors.runtime;

/**
 * One addressable device of a client.
 *
 * @param index position in {@link XlaClient#devices()}, used to place buffers
 * @param id the device id PJRT reports
 * @param kind the device kind PJRT reports, e.g. {@code cpu}
 */
public record Device(int index, String id, String kind) {}
