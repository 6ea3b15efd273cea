package dev.fenced.lock.internal;

import dev.fenced.lock.LossReason;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;
import reactor.core.scheduler.Scheduler;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * Renews every held lease of a client from one timer on one scheduler worker, with no thread per lease.
 *
 * <p>The timer fires at the earliest renewal or deadline among the held leases. A tick renews, in one
 * store call, every lease that is due, together with those that would be due within the next quarter of
 * their renewal period, so that leases taken around the same time share round trips. A "not held" reply
 * loses the lease at once; a failed call is retried until the lease's local deadline, where the lease is
 * lost. All of this runs on the worker, which serializes it.
 */
final class Renewer {

    private static final Logger log = Loggers.getLogger(Renewer.class);

    private final LeasingLockClient client;
    private final Scheduler.Worker worker;
    private final Set<HeldLease> leases = ConcurrentHashMap.newKeySet();

    // Confined to the worker.
    private @Nullable Disposable timer;
    private long timerAt;

    Renewer(LeasingLockClient client, Scheduler scheduler) {
        this.client = client;
        this.worker = scheduler.createWorker();
    }

    void track(HeldLease lease) {
        leases.add(lease);
        run(this::reschedule);
    }

    void forget(HeldLease lease) {
        leases.remove(lease);
    }

    List<HeldLease> held() {
        return new ArrayList<>(leases);
    }

    void stop() {
        worker.dispose();
    }

    private void run(Runnable task) {
        try {
            worker.schedule(task);
        } catch (RejectedExecutionException e) {
            log.debug("Renewer stopped; dropped a task");
        }
    }

    private void tick() {
        timer = null;
        long now = client.now();
        List<HeldLease> due = new ArrayList<>();
        for (HeldLease lease : leases) {
            if (!lease.isActive()) {
                leases.remove(lease);
            } else if (now - lease.deadline() >= 0) {
                lease.markLost(LossReason.EXPIRED);
            } else if (!lease.renewing && !lease.isFrozen()) {
                long window = lease.retrying ? 0 : lease.renewEveryNanos() / 4;
                if (now - (lease.renewAt - window) >= 0) {
                    due.add(lease);
                }
            }
        }
        if (!due.isEmpty()) {
            send(due, now);
        }
        reschedule();
    }

    private void send(List<HeldLease> due, long sentAt) {
        List<LeaseStore.RenewRequest> requests = new ArrayList<>(due.size());
        for (HeldLease lease : due) {
            lease.renewing = true;
            requests.add(new LeaseStore.RenewRequest(lease.name(), lease.ownerId(), lease.token(), lease.leaseMillis()));
        }
        client.store().renew(requests).subscribe(
                held -> run(() -> renewed(due, held, sentAt)),
                error -> run(() -> failed(due, error)));
    }

    private void renewed(List<HeldLease> due, List<Boolean> held, long sentAt) {
        int extended = 0;
        for (int i = 0; i < due.size(); i++) {
            HeldLease lease = due.get(i);
            lease.renewing = false;
            boolean stillHeld = i < held.size() && held.get(i);
            if (!lease.isActive()) {
                if (stillHeld && lease.loss() != null) {
                    // Lost by our clock while the renewal was in flight, yet Redis extended it: free it.
                    client.store().release(lease.name(), lease.ownerId(), lease.token()).subscribe(null, e -> { });
                }
                continue;
            }
            if (stillHeld) {
                extended++;
                lease.retrying = false;
                lease.extendTo(sentAt + lease.leaseNanos() - ClientSettings.driftNanos(lease.leaseNanos()));
                lease.renewAt = sentAt + lease.renewEveryNanos();
            } else {
                lease.markLost(LossReason.NOT_HELD);
            }
        }
        if (extended > 0) {
            client.observer().leasesRenewed(extended);
        }
        reschedule();
    }

    private void failed(List<HeldLease> due, Throwable error) {
        client.observer().renewalFailed(due.size());
        long now = client.now();
        int firstFailures = 0;
        for (HeldLease lease : due) {
            if (!lease.retrying) {
                firstFailures++;
            }
            lease.renewing = false;
            if (!lease.isActive()) {
                continue;
            }
            if (now - lease.deadline() >= 0) {
                lease.markLost(LossReason.EXPIRED);
            } else {
                lease.retrying = true;
                lease.renewAt = now + Math.max(TimeUnit.MILLISECONDS.toNanos(1), lease.renewEveryNanos() / 3);
            }
        }
        // Warn when leases start failing, not on every retry of the same outage.
        if (firstFailures > 0) {
            log.warn("Renewal of {} lease(s) failed; retrying until their deadlines: {}", firstFailures, error.toString());
        } else {
            log.debug("Renewal retry of {} lease(s) failed: {}", due.size(), error.toString());
        }
        reschedule();
    }

    private void reschedule() {
        long next = Long.MAX_VALUE;
        boolean any = false;
        for (HeldLease lease : leases) {
            if (!lease.isActive()) {
                continue;
            }
            long at = lease.renewing || lease.isFrozen() ? lease.deadline() : Math.min(lease.deadline(), lease.renewAt);
            next = any ? Math.min(next, at) : at;
            any = true;
        }
        Disposable current = timer;
        if (!any) {
            if (current != null) {
                current.dispose();
                timer = null;
            }
            return;
        }
        if (current != null && !current.isDisposed() && timerAt - next <= 0) {
            return;
        }
        if (current != null) {
            current.dispose();
        }
        timerAt = next;
        long delay = Math.max(0, next - client.now());
        try {
            timer = worker.schedule(this::tick, delay, TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException e) {
            timer = null;
        }
    }
}
