package dev.xlaactors.actors;

import dev.xlaactors.runtime.HostCall;

/**
 * A host call that went straight from the XLA thread to the callback threads (the fast path): what its
 * run's {@link RunSupervisor} and the runtime's {@link DirectCallWatchdog} need to fail it, time it out
 * and count it, without a message per call.
 *
 * @param call the call
 * @param execution its function's execution on the callback threads
 * @param arrivedNanos when it reached Java
 * @param deadlineNanos when it times out (its callback's timeout from arrival)
 */
record DirectCall(HostCall call, CallbackExecution execution, long arrivedNanos, long deadlineNanos) {}
