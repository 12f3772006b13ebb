package dev.xlaactors.actors.jobs;

import dev.xlaactors.runtime.HostTensor;
import java.util.List;

/**
 * Receives the outputs of one finished item of a batch job, after they are in the output file. Runs on a
 * blocking dispatcher; an exception fails the item's attempt (it is retried, and its line is not written
 * twice).
 */
@FunctionalInterface
public interface ItemSink {
  void accept(long index, List<HostTensor> outputs) throws Exception;
}
