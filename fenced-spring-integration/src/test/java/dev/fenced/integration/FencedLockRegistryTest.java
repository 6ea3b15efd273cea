package dev.fenced.integration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.fenced.lock.test.FencedLockTestKit;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import reactor.test.scheduler.VirtualTimeScheduler;

/** Building a registry and obtaining locks: validation, and nothing sent before a lock is used. */
class FencedLockRegistryTest {

    private final FencedLockTestKit kit = FencedLockTestKit.create(VirtualTimeScheduler.create());

    @AfterEach
    void close() {
        kit.close();
    }

    @Test
    void obtainSendsNothingAndMapsTheKeyAfterThePrefix() {
        FencedLockRegistry registry = FencedLockRegistry.builder(kit.client()).lockNamePrefix("orders:").build();
        FencedDistributedLock lock = registry.obtain("42");
        assertThat(kit.issuedTokens("orders:42")).isEmpty();
        assertThat(lock.tryLock()).isTrue();
        try {
            assertThat(lock.lease().name()).isEqualTo("orders:42");
            assertThat(kit.holder("orders:42")).isPresent();
        } finally {
            lock.unlock();
        }
        assertThat(kit.holder("orders:42")).isEmpty();
    }

    @Test
    void keysMustBeStringsThatMakeValidLockNames() {
        FencedLockRegistry registry = FencedLockRegistry.of(kit.client());
        assertThatThrownBy(() -> registry.obtain(42)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("lockKey must be a String, was java.lang.Integer");
        assertThatThrownBy(() -> registry.obtain("a{b}")).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("Lock key 'a{b}' cannot be used as Fenced lock name 'a{b}': "
                        + "Lock name must not contain braces, was 'a{b}'");
        assertThatThrownBy(() -> registry.obtain(" ")).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("Lock key ' ' cannot be used as Fenced lock name ' ': Lock name must not be blank");
    }

    @Test
    void theBuilderValidatesEverySetting() {
        FencedLockRegistry.Builder builder = FencedLockRegistry.builder(kit.client());
        assertThatThrownBy(() -> builder.lockNamePrefix("a}")).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("lockNamePrefix 'a}' is not valid: Lock name must not contain braces, was 'a}x'");
        assertThatThrownBy(() -> builder.lockNamePrefix("x".repeat(1001))).isInstanceOf(IllegalArgumentException.class)
                .hasMessageEndingWith("is not valid: it is longer than 1000 characters");
        assertThatThrownBy(() -> builder.leaseTime(Duration.ofMillis(5))).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("leaseTime must be between 10 ms and 1 day, was PT0.005S");
        assertThatThrownBy(() -> FencedLockRegistry.builder(null)).isInstanceOf(NullPointerException.class)
                .hasMessage("client must not be null");
    }

    @Test
    void theLeaseTimeOfTheRegistryIsUsedWhenNoTtlIsGiven() {
        FencedLockRegistry registry = FencedLockRegistry.builder(kit.client()).leaseTime(Duration.ofSeconds(20)).build();
        FencedDistributedLock lock = registry.obtain("lease-time");
        assertThat(lock.tryLock()).isTrue();
        try {
            assertThat(lock.lease().leaseTime()).isEqualTo(Duration.ofSeconds(20));
        } finally {
            lock.unlock();
        }
    }

    @Test
    void aTtlTheClientRefusesFailsTheLockWithTheClientsError() {
        FencedDistributedLock lock = FencedLockRegistry.of(kit.client()).obtain("short");
        assertThatThrownBy(() -> lock.tryLock(Duration.ZERO, Duration.ofSeconds(3)))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("leaseTime (PT3S) must be longer than the command timeout (PT5S): a lease that can run out "
                        + "before a reply arrives cannot be renewed");
        assertThat(lock.tryLock()).as("the refused call left the lock free in the process").isTrue();
        lock.unlock();
    }

    @Test
    void theLongestWaitOfAnyUnitIsAcceptedWithoutOverflow() throws InterruptedException {
        FencedDistributedLock lock = FencedLockRegistry.of(kit.client()).obtain("forever");
        assertThat(lock.tryLock(Long.MAX_VALUE, TimeUnit.DAYS)).isTrue();
        lock.unlock();
    }

    @Test
    void renewLockWithAnOutOfRangeTtlIsRefused() {
        FencedLockRegistry registry = FencedLockRegistry.of(kit.client());
        assertThatThrownBy(() -> registry.renewLock("x", Duration.ZERO)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("leaseTime must be between 10 ms and 1 day, was PT0S");
    }

    @Test
    void anAttemptGrantedAsTheInterruptArrivesReleasesTheGrantedLease() {
        // The race of an interrupt and a grant, made exact: the attempt has completed with a lease when the waiting
        // thread, interrupted, tries to cancel it; cancelling fails, and the lease must not be dropped held.
        dev.fenced.lock.FencedLease granted = kit.client()
                .acquire("granted-late", dev.fenced.lock.AcquireOptions.tryOnce()).block();
        assertThat(granted).isNotNull();
        assertThat(RegistryLock.cancelOrRelease(java.util.concurrent.CompletableFuture.completedFuture(granted)))
                .isTrue();
        assertThat(granted.isHeld()).isFalse();
        assertThat(kit.heldLeases()).isEmpty();
        FencedDistributedLock lock = FencedLockRegistry.of(kit.client()).obtain("granted-late");
        assertThat(lock.tryLock()).as("the lock is free").isTrue();
        lock.unlock();
        assertThat(RegistryLock.cancelOrRelease(java.util.concurrent.CompletableFuture.completedFuture(null)))
                .isFalse();
        assertThat(RegistryLock.cancelOrRelease(new java.util.concurrent.CompletableFuture<>())).isFalse();
    }
}
