package dev.xlaactors.http;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.runtime.KnownConfigKeys;
import dev.xlaactors.runtime.SettingRanges;
import java.time.Duration;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * How chat templates are rendered ({@code xla-actors.http.chat-template}, see the http module's
 * reference.conf), read once and range-checked; a bad value fails naming the key. A template is code from
 * the model's checkpoint and runs over data from the client: these bounds keep a template that loops away
 * (or a conversation that makes it) from holding a thread or memory for long.
 *
 * @param renderTimeout the longest one render may take; a render past it fails (400 naming the key)
 * @param maxOutputChars the most characters a rendered prompt may have; a render past it fails (400 naming the key)
 * @param dispatcher the config path of the dispatcher renders run on (never Pekko's default one)
 */
public record ChatTemplateSettings(Duration renderTimeout, long maxOutputChars, String dispatcher) {
  static final String ROOT = HttpSettings.ROOT + ".chat-template";
  private static final long MAX_OUTPUT = 1L << 30;

  public ChatTemplateSettings {
    if (renderTimeout == null || renderTimeout.isNegative() || renderTimeout.isZero() || renderTimeout.compareTo(Duration.ofMinutes(1)) > 0) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + ".render-timeout must be a duration > 0 and <= 1m, got " + renderTimeout);
    }
    SettingRanges.check(maxOutputChars, ROOT + ".max-output-chars", String.valueOf(maxOutputChars), 1024, MAX_OUTPUT,
        "characters of one rendered prompt, 1024 to 2^30");
    if (dispatcher == null || dispatcher.isBlank()) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + ".dispatcher must be the config path of a dispatcher section, got \""
          + dispatcher + "\"");
    }
  }

  /** The reference.conf defaults, for tests and code without an actor system. */
  public static final ChatTemplateSettings DEFAULTS = new ChatTemplateSettings(Duration.ofSeconds(2), 4L << 20, ROOT + ".render-dispatcher");

  /** Settings from the actor system's config. */
  public static ChatTemplateSettings create(ActorSystem<?> system) {
    return fromConfig(system.settings().config());
  }

  /** Settings from {@code config} (which must hold the http module's reference.conf). */
  public static ChatTemplateSettings fromConfig(Config config) {
    KnownConfigKeys.check(config);
    try {
      Config c = config.getConfig(ROOT);
      return new ChatTemplateSettings(
          SettingRanges.duration(c, "render-timeout", ROOT + ".render-timeout", false, Duration.ofMinutes(1), "1m"),
          SettingRanges.count(c, "max-output-chars", ROOT + ".max-output-chars", 1024, (int) MAX_OUTPUT,
              "characters of one rendered prompt, 1024 to 2^30"),
          c.getString("dispatcher"));
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad configuration under " + ROOT + ": " + e.getMessage(), e);
    }
  }
}
