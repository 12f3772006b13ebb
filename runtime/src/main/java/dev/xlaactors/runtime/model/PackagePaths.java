package dev.xlaactors.runtime.model;

import dev.xlaactors.error.InvalidArgumentException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;

/** Resolves a file a package names, refusing any that is not a file inside the package's directory. */
final class PackagePaths {
  private PackagePaths() {}

  /**
   * {@code name} resolved against {@code directory}: refused, naming {@code what}, when it is absolute, has a
   * {@code ..} segment, does not exist or is not a regular file, or resolves (through links) outside the
   * directory, since a package must be one folder that can be copied and served as it is.
   */
  static Path inside(Path directory, String name, String what) {
    Path relative;
    try {
      relative = Path.of(name);
    } catch (InvalidPathException e) {
      throw new InvalidArgumentException(what + ": '" + name + "' is not a file name (" + e.getMessage() + ")");
    }
    if (name.isEmpty() || relative.isAbsolute() || name.startsWith("/") || name.startsWith("\\")) {
      throw new InvalidArgumentException(what + ": '" + name + "' must be a path relative to the package directory "
          + directory + ", not absolute or empty: copy the file into the package and name it from there");
    }
    for (Path segment : relative) {
      if (segment.toString().equals("..")) {
        throw new InvalidArgumentException(what + ": '" + name + "' leaves the package directory (a '..' segment): "
            + "every file of a package lives inside " + directory + "; copy the file in and name it from there");
      }
    }
    Path file = directory.resolve(relative).normalize();
    if (!Files.isRegularFile(file)) {
      throw new InvalidArgumentException(what + ": file '" + name + "' does not exist in " + directory
          + (Files.exists(file) ? " as a regular file (it is a directory or a special file)" : "")
          + ": put it there, or fix the name");
    }
    try {
      Path real = file.toRealPath();
      Path realDirectory = directory.toRealPath();
      if (!real.startsWith(realDirectory)) {
        throw new InvalidArgumentException(what + ": '" + name + "' is a link to " + real + ", outside the package "
            + "directory " + realDirectory + ": copy the file into the package instead of linking it");
      }
    } catch (IOException e) {
      throw new InvalidArgumentException(what + ": '" + name + "' in " + directory + " cannot be resolved: " + e);
    }
    return file;
  }
}
