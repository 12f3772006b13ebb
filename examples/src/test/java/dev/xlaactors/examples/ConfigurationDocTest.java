package dev.xlaactors.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import com.typesafe.config.ConfigResolveOptions;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * docs/configuration.md's tables list exactly the keys the modules' reference.conf files define under
 * {@code xla-actors}: a key added to a reference.conf without a row, or a row for a key no module
 * defines, fails with the keys named. (This module sees every module's reference.conf.)
 */
class ConfigurationDocTest {
  private static final Pattern ROW_KEY = Pattern.compile("^\\| `(xla-actors\\.[^`]+)`");

  @Test
  void theConfigurationPageListsEveryReferenceKeyAndNoOther() throws IOException {
    Config reference =
        ConfigFactory.defaultReferenceUnresolved().resolve(ConfigResolveOptions.defaults().setAllowUnresolved(true));
    Set<String> defined = new TreeSet<>();
    reference.getConfig("xla-actors").entrySet().forEach(e -> defined.add("xla-actors." + e.getKey()));

    Set<String> documented = new TreeSet<>();
    List<String> lines = Files.readAllLines(Path.of("../docs/configuration.md"));
    for (String line : lines) {
      Matcher m = ROW_KEY.matcher(line);
      if (m.find()) {
        documented.add(m.group(1));
      }
    }
    Set<String> missing = new TreeSet<>(defined);
    missing.removeAll(documented);
    Set<String> unknown = new TreeSet<>();
    for (String key : documented) {
      // A row for an open section (callbacks.timeouts.<name>) stands for the keys a user adds there.
      String section = key.contains(".<") ? key.substring(0, key.indexOf(".<")) : null;
      boolean known = section != null ? reference.hasPath(section) : defined.contains(key);
      if (!known) {
        unknown.add(key);
      }
    }
    assertEquals(Set.of(), missing, "keys of a reference.conf with no row in docs/configuration.md");
    assertEquals(Set.of(), unknown, "rows of docs/configuration.md for keys no reference.conf defines");
  }
}
