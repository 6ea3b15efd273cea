package dev.fenced.bench;

import dev.fenced.lock.AcquireOptions;
import dev.fenced.lock.FencedLease;
import dev.fenced.lock.FencedLockClient;
import dev.fenced.r2dbc.FencedWrite;
import io.r2dbc.spi.Connection;
import io.r2dbc.spi.Result;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * The storage workloads on PostgreSQL over R2DBC: a token-guarded {@code UPDATE} ({@link FencedWrite}) against
 * the same plain {@code UPDATE}, and a batch that locks every item (acquire, fenced write, release) against the
 * same batch without locks, and the batch API (one acquire call, one multi-row fenced write and one release call per
 * {@value #BATCH} items, two batches in flight). Both sides of a comparison share the pool, the rows and the concurrency.
 */
final class StorageWorkloads {

    /** Operations in flight in both storage workloads. */
    static final int CONCURRENCY = 64;

    /**
     * Items in one batch of the batch API: two batches in flight hold the same {@link #CONCURRENCY} items in flight as
     * the other batches, and one's statement runs in PostgreSQL while the other's lock calls run in Redis.
     */
    static final int BATCH = CONCURRENCY / 2;

    private final BenchPostgres db;
    private final int rows;

    StorageWorkloads(BenchPostgres db, int rows) {
        this.db = db;
        this.rows = rows;
    }

    /** A run of writes: how many, how fast, and the latency of each (including the wait for a connection). */
    record Writes(String kind, int count, double perSecond, double p50Micros, double p99Micros) {
    }

    /**
     * {@code count} plain updates of the balance, on distinct rows in turn.
     *
     * @param count how many
     * @param round distinguishes rounds (the balance written)
     * @return the measurement
     */
    Writes plainUpdates(int count, int round) {
        return run("plain UPDATE", count, i -> plainUpdate(i % rows, round));
    }

    /**
     * {@code count} token-guarded updates of the balance by one held lease, on distinct rows in turn: the
     * storage rule's cost alone, with no lock traffic.
     *
     * @param lease the lease whose token every write carries
     * @param count how many
     * @param round distinguishes rounds (the balance written)
     * @return the measurement
     */
    Writes fencedUpdates(FencedLease lease, int count, int round) {
        FencedWrite write = FencedWrite.into(db.table);
        return run("fenced UPDATE", count, i -> write.key("id", (long) (i % rows)).set("balance", (long) round)
                .update(db.connections, lease).then());
    }

    /**
     * A batch of {@code items} accounts, each updated once, without locks.
     *
     * @param items how many items
     * @param round distinguishes rounds
     * @return the measurement
     */
    Writes unlockedBatch(int items, int round) {
        return run("batch without locks", items, i -> plainUpdate(i % rows, round));
    }

    /**
     * The same batch, each item under its own lock: acquire {@code account-<id>}, fenced update, release.
     *
     * @param locks the lock client
     * @param items how many items
     * @param round distinguishes rounds
     * @return the measurement
     */
    Writes lockedBatch(FencedLockClient locks, int items, int round) {
        FencedWrite write = FencedWrite.into(db.table);
        return run("batch, acquire + fenced write + release", items, i -> {
            long id = i % rows;
            return locks.withLease("account-" + id, AcquireOptions.defaults(),
                            lease -> write.key("id", id).set("balance", (long) round).update(db.connections, lease))
                    .then();
        });
    }

    /**
     * The same batch through the batch API, {@link #BATCH} items a batch and two batches in flight (the same bound on
     * what is in flight as the other two, {@link #CONCURRENCY} items): per batch one {@code tryAcquireAll} (one acquire-script call), one
     * {@link FencedWrite#updateAll} (one multi-row statement), one {@code releaseAll}; the batches one after the
     * other within each of the two lanes. Every item's latency is its batch's.
     *
     * @param locks the lock client
     * @param items how many items
     * @param round distinguishes rounds
     * @return the measurement
     */
    Writes batchApi(FencedLockClient locks, int items, int round) {
        FencedWrite write = FencedWrite.into(db.table);
        return pages("batch API: one acquire call + one fenced multi-row write + one release call, " + BATCH
                + " items a batch, " + CONCURRENCY / BATCH + " batches in flight", items, chunk -> {
                    List<String> names = chunk.stream().map(i -> "account-" + (i % rows)).toList();
                    return locks.tryAcquireAll(names).flatMap(batch -> {
                        if (!batch.busy().isEmpty()) {
                            return batch.releaseAll().then(Mono.<Void>error(BenchmarkException.notAcquired("Fenced batch",
                                    batch.busy().get(0))));
                        }
                        List<FencedWrite.Item> rowsToWrite = new ArrayList<>(chunk.size());
                        for (int i : chunk) {
                            long id = i % rows;
                            FencedLease lease = java.util.Objects.requireNonNull(batch.lease("account-" + id));
                            rowsToWrite.add(new FencedWrite.Item(write.key("id", id).set("balance", (long) round), lease));
                        }
                        return FencedWrite.updateAll(db.connections, rowsToWrite)
                                .flatMap(outcomes -> batch.releaseAll().then(Mono.defer(() -> {
                                    for (FencedWrite.ItemOutcome outcome : outcomes) {
                                        if (!outcome.written()) {
                                            return Mono.<Void>error(new IllegalStateException("The batch API's fenced "
                                                    + "write refused a row of " + db.table, outcome.refusal()));
                                        }
                                    }
                                    return Mono.<Void>empty();
                                })));
                    });
                });
    }

    /**
     * The batch without locks in the batch API's pages: per page one plain multi-row
     * {@code UPDATE … SET balance = v.balance FROM (VALUES …) AS v (id, balance) WHERE id = v.id} in auto-commit,
     * {@link #BATCH} rows a page, two pages in flight; the baseline that shares the batch API's statement shape, so
     * their ratio is the cost of the locks and the fencing alone.
     *
     * @param items how many items
     * @param round distinguishes rounds
     * @return the measurement
     */
    Writes unlockedMultiRow(int items, int round) {
        return pages("batch without locks, one multi-row UPDATE a page, " + BATCH + " items a page, " + CONCURRENCY / BATCH
                + " pages in flight", items, chunk -> multiRowUpdate(chunk.stream().map(i -> (long) (i % rows)).toList(),
                        round, false)
                        .flatMap(updated -> updated == chunk.size() ? Mono.<Void>empty()
                                : Mono.error(BenchmarkException.rowMissing(db.table, chunk.get(0) % rows))));
    }

    /**
     * One plain multi-row {@code UPDATE … SET balance = v.balance FROM (VALUES …) AS v (id, balance) WHERE id = v.id}
     * of the rows {@code ids}, on a connection of the pool: in auto-commit, or between {@code BEGIN} and
     * {@code COMMIT}.
     *
     * @param ids the rows
     * @param balance the balance written
     * @param inTransaction whether to run it in a transaction of its own
     * @return the rows updated
     */
    Mono<Long> multiRowUpdate(List<Long> ids, long balance, boolean inTransaction) {
        StringBuilder sql = new StringBuilder("UPDATE " + db.table + " SET balance = v.balance FROM (VALUES ");
        for (int r = 0; r < ids.size(); r++) {
            sql.append(r == 0 ? "" : ", ").append("($").append(2 * r + 1).append("::bigint, $").append(2 * r + 2)
                    .append("::bigint)");
        }
        sql.append(") AS v (id, balance) WHERE " + db.table + ".id = v.id");
        return Mono.usingWhen(db.connections.create(), (Connection c) -> {
            io.r2dbc.spi.Statement statement = c.createStatement(sql.toString());
            for (int r = 0; r < ids.size(); r++) {
                statement.bind(2 * r, ids.get(r)).bind(2 * r + 1, balance);
            }
            Mono<Long> run = Flux.from(statement.execute()).flatMap(Result::getRowsUpdated).reduce(0L, Long::sum);
            return inTransaction
                    ? Mono.from(c.beginTransaction()).then(run).flatMap(n -> Mono.from(c.commitTransaction()).thenReturn(n))
                    : run;
        }, Connection::close);
    }

    /**
     * {@code items} in pages of {@link #BATCH}, {@link #CONCURRENCY} / {@link #BATCH} pages in flight, each page one
     * run of {@code page}; every item's latency is its page's.
     */
    private static Writes pages(String kind, int items, java.util.function.Function<List<Integer>, Mono<Void>> page) {
        Latencies latencies = new Latencies(items);
        long start = System.nanoTime();
        Flux.range(0, items)
                .buffer(BATCH)
                .flatMap(chunk -> Mono.defer(() -> {
                    long t0 = System.nanoTime();
                    return page.apply(chunk).doOnSuccess(v -> chunk.forEach(i -> latencies.record(System.nanoTime() - t0)));
                }), CONCURRENCY / BATCH)
                .blockLast(Duration.ofMinutes(10));
        double seconds = (System.nanoTime() - start) / 1e9;
        return new Writes(kind, items, items / seconds, latencies.percentileMicros(50), latencies.percentileMicros(99));
    }

    private Mono<Void> plainUpdate(long id, long balance) {
        return Mono.usingWhen(db.connections.create(),
                        (Connection c) -> Flux.from(c.createStatement("UPDATE " + db.table + " SET balance = $1 WHERE id = $2")
                                        .bind(0, balance).bind(1, id).execute())
                                .flatMap(Result::getRowsUpdated)
                                .reduce(0L, Long::sum),
                        Connection::close)
                .flatMap(updated -> updated == 1 ? Mono.<Void>empty() : Mono.error(BenchmarkException.rowMissing(db.table, id)));
    }

    private static Writes run(String kind, int count, java.util.function.IntFunction<Mono<Void>> write) {
        Latencies latencies = new Latencies(count);
        long start = System.nanoTime();
        Flux.range(0, count)
                .flatMap(i -> Mono.defer(() -> {
                    long t0 = System.nanoTime();
                    return write.apply(i).doOnSuccess(v -> latencies.record(System.nanoTime() - t0));
                }), CONCURRENCY)
                .blockLast(Duration.ofMinutes(10));
        double seconds = (System.nanoTime() - start) / 1e9;
        return new Writes(kind, count, count / seconds, latencies.percentileMicros(50), latencies.percentileMicros(99));
    }
}
