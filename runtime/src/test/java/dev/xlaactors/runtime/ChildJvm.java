package dev.xlaactors.runtime;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Runs a test class's {@code main} in a fresh JVM with this test's classpath. */
final class ChildJvm {
  private ChildJvm() {}

  /** What the child printed (stdout and stderr together) and how it ended. */
  record Result(int exitCode, String output) {}

  static Result run(Class<?> mainClass, List<String> jvmOptions, String... args)
      throws IOException, InterruptedException {
    return run(mainClass, jvmOptions, java.util.Map.of(), args);
  }

  /** As {@link #run(Class, List, String...)}, with {@code environment} added to the child's environment. */
  static Result run(Class<?> mainClass, List<String> jvmOptions, java.util.Map<String, String> environment, String... args)
      throws IOException, InterruptedException {
    return run(mainClass, jvmOptions, environment, System.getProperty("java.class.path"), args);
  }

  /** As {@link #run(Class, List, String...)}, on {@code classPath} instead of this test's (say, without a library). */
  static Result runWithClassPath(Class<?> mainClass, String classPath, String... args)
      throws IOException, InterruptedException {
    return run(mainClass, List.of(), java.util.Map.of(), classPath, args);
  }

  private static Result run(Class<?> mainClass, List<String> jvmOptions, java.util.Map<String, String> environment,
      String classPath, String... args) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.addAll(jvmOptions);
    command.add("-cp");
    command.add(classPath);
    command.add(mainClass.getName());
    command.addAll(List.of(args));
    ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
    builder.environment().putAll(environment);
    Process process = builder.start();
    // Read while waiting, so a chatty child cannot block on a full pipe.
    byte[] output = process.getInputStream().readAllBytes();
    if (!process.waitFor(180, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      throw new AssertionError("child JVM did not finish in 180 s");
    }
    return new Result(process.exitValue(), new String(output, StandardCharsets.UTF_8));
  }
}
