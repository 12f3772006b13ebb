package dev.xlaactors.actors.jobs;

import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.AskPattern;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * The batch job of {@link ResumeAfterKillTest}, as a program a child JVM runs: scores items 0 to count-1
 * with {@link JobPrograms#twicePlusOne} into the output file, sleeping {@code delayMs} per item so the
 * parent can kill it half way. Usage: {@code BatchJobMain <output> <count> <delayMs>}; exits 0 when the
 * job completed.
 */
public final class BatchJobMain {
  private BatchJobMain() {}

  public static void main(String[] args) throws Exception {
    Path output = Path.of(args[0]);
    int count = Integer.parseInt(args[1]);
    long delayMs = Long.parseLong(args[2]);
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "batch-job-child");
    int exit = 1;
    try (XlaClient client = XlaClient.create()) {
      JobSettings settings = JobSettings.create(system);
      BatchScoring work = BatchScoring.create(count, i -> {
        Thread.sleep(delayMs);
        return List.of(JobPrograms.itemInput(i));
      }, output, settings);
      ActorRef<InferenceJob.Command> job =
          system.systemActorOf(InferenceJob.create("resumable", JobPrograms.twicePlusOne(), client, null, work, settings),
              "resumable", Props.empty());
      JobResult result =
          AskPattern.<InferenceJob.Command, JobResult>ask(job, InferenceJob.Start::new, Duration.ofMinutes(5), system.scheduler())
              .toCompletableFuture()
              .get();
      System.out.println("result: " + result);
      exit = result instanceof JobResult.Completed ? 0 : 1;
    } finally {
      system.terminate();
    }
    System.exit(exit);
  }
}
