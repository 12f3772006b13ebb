/**
 * Models: compiled programs with parameters bound to device-resident buffers ({@link
 * dev.xlaactors.runtime.model.Model}), the per-run {@link dev.xlaactors.runtime.model.Argument}s (host
 * tensors, device buffers, donated buffers), and loading weights and programs from model artifacts.
 */
package dev.xlaactors.runtime.model;
