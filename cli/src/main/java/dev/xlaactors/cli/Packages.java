package dev.xlaactors.cli;

import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.runtime.model.ModelPackage;
import java.nio.file.Files;
import java.nio.file.Path;

/** Opens the model packages named on a command line, turning what is wrong with one into a usage error. */
final class Packages {
  private Packages() {}

  /** The package in directory {@code dir}, checked ({@link ModelPackage#open}). */
  static ModelPackage open(String command, String dir) throws UsageException {
    Path path = Path.of(dir);
    if (!Files.isDirectory(path)) {
      throw new UsageException(command + ": " + dir + " is not a directory (give a model package: bin/xla-actors import hf makes one)");
    }
    try {
      return ModelPackage.open(path);
    } catch (InvalidArgumentException e) {
      throw new UsageException(command + ": " + e.getMessage());
    }
  }
}
