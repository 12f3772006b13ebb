package dev.xlaactors.runtime.model;

import java.nio.file.Path;
import java.util.Objects;

/**
 * One program of a {@link ModelPackage}, as its manifest names it and as {@link ModelPackage#open} checked
 * it against its role's contract.
 *
 * @param role what the program does
 * @param size its {@code batch} or {@code slots} ({@link Role#sizeKey()})
 * @param length its {@code length}, 0 where the role has none
 * @param batch its {@code batch} of rows where the role has one beside its slots ({@link Role#hasBatch()}), else 0
 * @param file the {@code jax.export} artifact, inside the package directory
 * @param export the artifact, read
 */
public record ProgramSpec(Role role, int size, int length, int batch, Path file, JaxExport export) {
  public ProgramSpec {
    Objects.requireNonNull(role, "role");
    Objects.requireNonNull(file, "file");
    Objects.requireNonNull(export, "export");
  }

  /** As the manifest would say it, e.g. {@code prefill_chunk (slots 4, length 128, prefill_chunk_s4_c128.jax)}. */
  public String describe() {
    return role.jsonName() + " (" + role.sizeKey() + " " + size + (role.hasBatch() ? ", batch " + batch : "")
        + (role.hasLength() ? ", length " + length : "") + ", " + file.getFileName() + ")";
  }
}
