package dev.fenced.lock.internal.memory;

import dev.fenced.lock.internal.FleetPages;
import dev.fenced.lock.internal.LeaseStore;
import dev.fenced.lock.internal.NamePattern;
import dev.fenced.lock.LockServiceException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;

/**
 * A lease store in memory, with the semantics of the Redis scripts, whose expiries follow the
 * scheduler's clock: with a {@code VirtualTimeScheduler}, tests of renewal, expiry and waiting are exact
 * and take no real time.
 *
 * <p>For tests it can also misbehave: {@link #setUnavailable(boolean) fail every command} (as during a
 * partition) and {@link #setReplyDelay(Duration) delay replies} while applying commands at once (as a
 * command already on the wire).
 *
 * <p>Thread-safe.
 */
public final class InMemoryLeaseStore implements LeaseStore {

    private final Scheduler clock;
    private final Map<String, Held> locks = new HashMap<>();
    private final Map<String, Long> counters = new HashMap<>();
    private final Map<String, Channel> channels = new HashMap<>();
    private final Map<String, List<Long>> issued = new HashMap<>();
    private final java.util.Deque<Mono<AcquireReply>> nextAcquireReplies = new java.util.ArrayDeque<>();
    private final Sinks.Many<String> serverChanges = Sinks.many().multicast().directBestEffort();
    private volatile boolean unavailable;
    private volatile Duration replyDelay = Duration.ZERO;
    private volatile @Nullable String holderLabel;
    private final @Nullable Duration commandTimeout;

    /**
     * A store whose clock is {@code clock.now()}, whose commands never time out.
     *
     * @param clock the scheduler that is the clock, and on which delayed replies are delivered
     */
    public InMemoryLeaseStore(Scheduler clock) {
        this(clock, null);
    }

    /**
     * A store whose clock is {@code clock.now()} and whose commands fail as the Redis store's do when no reply
     * comes within {@code commandTimeout} (see {@link #hangNextAcquire()}).
     *
     * @param clock the scheduler that is the clock, and on which delayed replies are delivered
     * @param commandTimeout how long a command may go unanswered, or {@code null} for ever
     */
    public InMemoryLeaseStore(Scheduler clock, @Nullable Duration commandTimeout) {
        this.clock = clock;
        this.commandTimeout = commandTimeout;
    }

    @Override
    public Mono<AcquireReply> acquire(String name, String owner, long leaseMillis, long floor) {
        Mono<AcquireReply> scripted;
        synchronized (this) {
            scripted = nextAcquireReplies.poll();
        }
        if (scripted != null) {
            return withTimeout(scripted, name, "acquire");
        }
        return command(name, "acquire", () -> take(name, owner, leaseMillis, floor));
    }

    private synchronized AcquireReply take(String name, String owner, long leaseMillis, long floor) {
        Held current = live(name);
        if (current != null) {
            if (current.owner.equals(owner)) {
                locks.put(name, new Held(owner, current.token, expiry(leaseMillis), current.label));
                return AcquireReply.acquired(current.token);
            }
            return AcquireReply.busy(TimeUnit.NANOSECONDS.toMillis(current.expiresAt - now()));
        }
        long token = Math.max(counters.getOrDefault(name, 0L), floor) + 1;
        counters.put(name, token);
        issued.computeIfAbsent(name, n -> new ArrayList<>()).add(token);
        locks.put(name, new Held(owner, token, expiry(leaseMillis), holderLabel));
        return AcquireReply.acquired(token);
    }

    /** In one step, as Redis's script does: the lock passes to the next owner without a release notification. */
    @Override
    public Mono<Handoff> handOff(String name, String owner, long token, String nextOwner, long leaseMillis, long floor) {
        return command(name, "release", () -> {
            synchronized (this) {
                Held current = live(name);
                boolean released = current != null && current.owner.equals(owner) && current.token == token;
                if (released) {
                    locks.remove(name);
                }
                return new Handoff(released, take(name, nextOwner, leaseMillis, floor), null);
            }
        });
    }

    @Override
    public Mono<List<Boolean>> renew(List<RenewRequest> leases) {
        String what = leases.size() == 1 ? leases.get(0).name() : "";
        return command(what, "renew " + leases.size() + " lease(s)", () -> {
            synchronized (this) {
                List<Boolean> result = new ArrayList<>(leases.size());
                for (RenewRequest r : leases) {
                    Held current = live(r.name());
                    boolean held = current != null && current.owner.equals(r.owner()) && current.token == r.token();
                    if (held) {
                        locks.put(r.name(), new Held(r.owner(), r.token(), expiry(r.leaseMillis()), current.label));
                    }
                    result.add(held);
                }
                return result;
            }
        });
    }

    @Override
    public Mono<Boolean> release(String name, String owner, @Nullable Long token) {
        return command(name, "release", () -> {
            Channel channel;
            synchronized (this) {
                Held current = live(name);
                if (current == null || !current.owner.equals(owner) || (token != null && current.token != token)) {
                    return false;
                }
                locks.remove(name);
                channel = channel(name);
            }
            channel.notifyRelease();
            return true;
        });
    }

    @Override
    public Flux<Long> releases(String name) {
        return Flux.defer(() -> {
            Channel channel;
            synchronized (this) {
                channel = channel(name);
            }
            return channel.counts.asFlux();
        });
    }

    /**
     * Sets the holder label that later grants store, as a client's label does on a real store.
     *
     * @param label the label, or {@code null} for none
     */
    public void setHolderLabel(@Nullable String label) {
        this.holderLabel = label;
    }

    /** In pages of {@link FleetPages#PAGE_SIZE} in name order, each read on demand, as the real stores page. */
    @Override
    public Flux<LockState> locks(NamePattern pattern) {
        return FleetPages.stream("", after -> command("", "list locks", () -> {
            synchronized (this) {
                List<String> names = new ArrayList<>(locks.keySet());
                java.util.Collections.sort(names);
                List<LockState> page = new ArrayList<>();
                String last = null;
                for (String name : names) {
                    if (name.compareTo(after) <= 0 || !pattern.matches(name)) {
                        continue;
                    }
                    LockState state = state(name);
                    if (state != null) {
                        page.add(state);
                        last = name;
                        if (page.size() == FleetPages.PAGE_SIZE) {
                            break;
                        }
                    }
                }
                return new FleetPages.Page<>(page, page.size() < FleetPages.PAGE_SIZE ? null : last);
            }
        }));
    }

    @Override
    public Mono<LockState> lock(String name) {
        return command(name, "inspect lock", () -> Optional.ofNullable(state(name)))
                .flatMap(Mono::justOrEmpty);
    }

    private synchronized @Nullable LockState state(String name) {
        Held current = live(name);
        return current == null ? null : new LockState(name, current.token,
                TimeUnit.NANOSECONDS.toMillis(current.expiresAt - now()), current.label);
    }

    @Override
    public Mono<Broken> breakLock(String name, long expectedToken) {
        return command(name, "force-release", () -> {
            Channel channel;
            Held broken;
            synchronized (this) {
                broken = live(name);
                if (broken == null || expectedToken != 0 && broken.token != expectedToken) {
                    return Broken.NOTHING;
                }
                locks.remove(name);
                counters.merge(name, broken.token, Math::max);
                channel = channel(name);
            }
            channel.notifyRelease();
            return new Broken(true, broken.token, broken.label);
        });
    }

    @Override
    public Flux<String> serverChanges() {
        return serverChanges.asFlux();
    }

    /**
     * Restarts the store as a Redis without persistence restarts: every lock and token counter is gone, and
     * the change of server is reported (as the Redis store reports a changed {@code run_id} on reconnect).
     */
    public void restart() {
        synchronized (this) {
            locks.clear();
            counters.clear();
        }
        serverChanges.tryEmitNext("restarted (simulated)");
    }

    @Override
    public Mono<Void> ping() {
        return command("", "ping", () -> Boolean.TRUE).then();
    }

    @Override
    public Mono<Void> close() {
        return Mono.empty();
    }

    /**
     * Makes every command fail at once with {@link LockServiceException}, as if Redis were unreachable.
     *
     * @param unavailable whether commands fail
     */
    public void setUnavailable(boolean unavailable) {
        this.unavailable = unavailable;
    }

    /**
     * Delays every reply by {@code delay} of the clock; the command itself takes effect at once.
     *
     * @param delay the delay, zero for none
     */
    public void setReplyDelay(Duration delay) {
        this.replyDelay = delay;
    }

    /**
     * Deletes a lock without notifying anyone, as its key expiring in Redis (or an operator deleting it) would.
     *
     * @param name the lock name
     */
    public synchronized void forceRelease(String name) {
        locks.remove(name);
    }

    /**
     * The value of the lock, {@code owner:token}, if it is held now.
     *
     * @param name the lock name
     * @return the value, or empty when free
     */
    public synchronized Optional<String> holder(String name) {
        Held current = live(name);
        return current == null ? Optional.empty() : Optional.of(current.owner + ":" + current.token);
    }

    /**
     * How long the lock has left before it expires, as Redis's {@code PTTL} reports it.
     *
     * @param name the lock name
     * @return the remaining time, or empty when free
     */
    public synchronized Optional<Duration> remainingTime(String name) {
        Held current = live(name);
        return current == null ? Optional.empty() : Optional.of(Duration.ofNanos(current.expiresAt - now()));
    }

    /**
     * Makes the next acquire (of any lock) fail with {@code error}, without taking effect.
     *
     * @param error the error
     */
    public synchronized void failNextAcquire(Throwable error) {
        nextAcquireReplies.add(Mono.error(error));
    }

    /** Makes the next acquire (of any lock) never answer, as a command lost on the way. */
    public synchronized void hangNextAcquire() {
        nextAcquireReplies.add(Mono.never());
    }

    /**
     * Every token issued for the lock, in order.
     *
     * @param name the lock name
     * @return the tokens
     */
    public synchronized List<Long> issuedTokens(String name) {
        return List.copyOf(issued.getOrDefault(name, List.of()));
    }

    /**
     * Deletes the lock without notifying anyone, as when its key is lost on the server.
     *
     * @param name the lock name
     */
    public synchronized void deleteLock(String name) {
        locks.remove(name);
    }

    private <T> Mono<T> command(String name, String operation, Callable<T> body) {
        return Mono.defer(() -> {
            if (unavailable) {
                return Mono.error(LockServiceException.of(name, operation, "the in-memory store is unavailable (simulated)",
                        new Unreachable()));
            }
            Mono<T> reply = Mono.fromCallable(body);
            Duration delay = replyDelay;
            return withTimeout(delay.isZero() ? reply : reply.delayElement(delay, clock), name, operation);
        });
    }

    private <T> Mono<T> withTimeout(Mono<T> reply, String name, String operation) {
        Duration timeout = commandTimeout;
        if (timeout == null) {
            return reply;
        }
        return reply.timeout(timeout, clock).onErrorMap(java.util.concurrent.TimeoutException.class,
                e -> LockServiceException.of(name, operation, "no reply within the command timeout of " + timeout.toMillis() + " ms", e));
    }

    private @Nullable Held live(String name) {
        Held current = locks.get(name);
        if (current != null && current.expiresAt - now() <= 0) {
            locks.remove(name);
            return null;
        }
        return current;
    }

    private Channel channel(String name) {
        return channels.computeIfAbsent(name, n -> new Channel());
    }

    private long expiry(long leaseMillis) {
        return now() + TimeUnit.MILLISECONDS.toNanos(leaseMillis);
    }

    private long now() {
        return clock.now(TimeUnit.NANOSECONDS);
    }

    @Override
    public boolean neverSent(Throwable error) {
        // A command refused while unavailable never reached the store, like one refused while disconnected.
        return error.getCause() instanceof Unreachable;
    }

    private record Held(String owner, long token, long expiresAt, @Nullable String label) {
    }

    /** The cause of every command refused while the store is unavailable. */
    private static final class Unreachable extends RuntimeException {

        private static final long serialVersionUID = 1L;

        Unreachable() {
            super("unreachable (simulated)", null, false, false);
        }
    }

    private static final class Channel {

        private final Sinks.Many<Long> counts = Sinks.many().replay().latest();
        private long count;

        Channel() {
            counts.tryEmitNext(0L);
        }

        synchronized void notifyRelease() {
            counts.tryEmitNext(++count);
        }
    }
}
