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
 * The http module's settings, read once from {@code xla-actors.http} (see its reference.conf) and
 * range-checked; a bad value fails naming the key.
 *
 * @param host the address to bind
 * @param port the TCP port, 0 for a free one
 * @param maxBodyBytes the largest infer request body accepted (413 beyond)
 * @param readyTimeout how long {@code GET /ready} waits for each server's status
 * @param maxGenerateBodyBytes the largest generate request body accepted (413 beyond)
 * @param requestTimeoutMargin how much longer than a request's deadline the HTTP layer waits for its answer
 * @param maxRequestTimeout the longest deadline a request may ask for; a connection's idle timeout is kept above it
 * @param sseKeepAlive how long a server-sent event stream stays silent before a keep-alive comment is sent
 */
public record HttpSettings(String host, int port, long maxBodyBytes, Duration readyTimeout, long maxGenerateBodyBytes,
    Duration requestTimeoutMargin, Duration maxRequestTimeout, Duration sseKeepAlive) {
  static final String ROOT = "xla-actors.http";
  private static final long MIN_BODY = 1024;
  private static final long MAX_BODY = 1L << 30;

  public HttpSettings {
    if (host == null || host.isBlank()) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + ".host must be an address to bind, e.g. \"127.0.0.1\", got \"" + host + "\"");
    }
    SettingRanges.check(port, ROOT + ".port", String.valueOf(port), 0, 65535, "TCP port, 0 = a free one");
    SettingRanges.check(maxBodyBytes, ROOT + ".max-body-bytes", String.valueOf(maxBodyBytes), MIN_BODY, MAX_BODY,
        "bytes of one request body, 1 KiB to 1 GiB");
    SettingRanges.check(maxGenerateBodyBytes, ROOT + ".max-generate-body-bytes", String.valueOf(maxGenerateBodyBytes), MIN_BODY, MAX_BODY,
        "bytes of one generate request body, 1 KiB to 1 GiB");
    if (readyTimeout == null || readyTimeout.isNegative() || readyTimeout.isZero() || readyTimeout.compareTo(Duration.ofMinutes(1)) > 0) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + ".ready-timeout must be a duration > 0 and <= 1m, got " + readyTimeout);
    }
    if (requestTimeoutMargin == null || requestTimeoutMargin.isNegative() || requestTimeoutMargin.compareTo(Duration.ofHours(1)) > 0) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + ".request-timeout-margin must be a duration >= 0 and <= 1h, got "
          + requestTimeoutMargin);
    }
    if (maxRequestTimeout == null || maxRequestTimeout.compareTo(Duration.ofSeconds(1)) < 0 || maxRequestTimeout.compareTo(Duration.ofHours(24)) > 0) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + ".max-request-timeout must be a duration from 1s to 24h, got "
          + maxRequestTimeout);
    }
    if (sseKeepAlive == null || sseKeepAlive.compareTo(Duration.ofMillis(100)) < 0 || sseKeepAlive.compareTo(Duration.ofMinutes(10)) > 0) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + ".sse-keep-alive must be a duration from 100ms to 10m, got " + sseKeepAlive);
    }
  }

  /** Settings from the actor system's config. */
  public static HttpSettings create(ActorSystem<?> system) {
    return fromConfig(system.settings().config());
  }

  /** Settings from {@code config} (which must hold the http module's reference.conf). */
  public static HttpSettings fromConfig(Config config) {
    KnownConfigKeys.check(config);
    try {
      Config c = config.getConfig(ROOT);
      return new HttpSettings(c.getString("host"),
          SettingRanges.count(c, "port", ROOT + ".port", 0, 65535, "TCP port, 0 = a free one"),
          bytes(c, "max-body-bytes"),
          SettingRanges.duration(c, "ready-timeout", ROOT + ".ready-timeout", false, Duration.ofMinutes(1), "1m"),
          bytes(c, "max-generate-body-bytes"),
          SettingRanges.duration(c, "request-timeout-margin", ROOT + ".request-timeout-margin", true, Duration.ofHours(1), "1h"),
          SettingRanges.duration(c, "max-request-timeout", ROOT + ".max-request-timeout", false, Duration.ofHours(24), "24h"),
          SettingRanges.duration(c, "sse-keep-alive", ROOT + ".sse-keep-alive", false, Duration.ofMinutes(10), "10m"));
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad configuration under " + ROOT + ": " + e.getMessage(), e);
    }
  }

  private static long bytes(Config c, String key) {
    try {
      return c.getBytes(key);
    } catch (ConfigException.BadValue e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, ROOT + "." + key + " must be a size such as 8 MiB, got "
          + SettingRanges.asWritten(c, key), e);
    }
  }

  /** These settings on {@code port} (0: a free one). */
  public HttpSettings withPort(int port) {
    return new HttpSettings(host, port, maxBodyBytes, readyTimeout, maxGenerateBodyBytes, requestTimeoutMargin, maxRequestTimeout,
        sseKeepAlive);
  }

  /** These settings with {@code host} as the interface to bind. */
  public HttpSettings withHost(String host) {
    return new HttpSettings(host, port, maxBodyBytes, readyTimeout, maxGenerateBodyBytes, requestTimeoutMargin, maxRequestTimeout,
        sseKeepAlive);
  }

  /** These settings with {@code bytes} as the largest infer request body. */
  public HttpSettings withMaxBodyBytes(long bytes) {
    return new HttpSettings(host, port, bytes, readyTimeout, maxGenerateBodyBytes, requestTimeoutMargin, maxRequestTimeout,
        sseKeepAlive);
  }

  /** These settings with {@code timeout} as the longest deadline a request may ask for (and below the idle timeout). */
  public HttpSettings withMaxRequestTimeout(Duration timeout) {
    return new HttpSettings(host, port, maxBodyBytes, readyTimeout, maxGenerateBodyBytes, requestTimeoutMargin, timeout, sseKeepAlive);
  }

  /** These settings with {@code every} as the silence after which a server-sent event stream gets a keep-alive comment. */
  public HttpSettings withSseKeepAlive(Duration every) {
    return new HttpSettings(host, port, maxBodyBytes, readyTimeout, maxGenerateBodyBytes, requestTimeoutMargin, maxRequestTimeout, every);
  }

  /** These settings with {@code bytes} as the largest generate request body. */
  public HttpSettings withMaxGenerateBodyBytes(long bytes) {
    return new HttpSettings(host, port, maxBodyBytes, readyTimeout, bytes, requestTimeoutMargin, maxRequestTimeout, sseKeepAlive);
  }
}
