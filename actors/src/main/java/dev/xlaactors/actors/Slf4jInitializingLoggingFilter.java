package dev.xlaactors.actors;

import org.apache.pekko.actor.ActorSystem;
import org.apache.pekko.event.EventStream;
import org.apache.pekko.event.slf4j.Slf4jLoggingFilter;
import org.slf4j.LoggerFactory;

/**
 * Pekko's {@link Slf4jLoggingFilter} that first initializes SLF4J on the thread creating the actor
 * system. Without it, Pekko's logger actor and the creating thread initialize SLF4J at the same time, and
 * SLF4J prints a three-line "replay" warning in every JVM. Set as {@code pekko.logging-filter} in this
 * module's reference.conf.
 */
public final class Slf4jInitializingLoggingFilter extends Slf4jLoggingFilter {
  /** Called by Pekko with the system's settings and event stream. */
  public Slf4jInitializingLoggingFilter(ActorSystem.Settings settings, EventStream eventStream) {
    super(initialized(settings), eventStream);
  }

  private static ActorSystem.Settings initialized(ActorSystem.Settings settings) {
    LoggerFactory.getILoggerFactory(); // blocks until SLF4J and its backend are configured
    return settings;
  }
}
