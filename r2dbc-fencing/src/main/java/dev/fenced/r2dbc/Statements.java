package dev.fenced.r2dbc;

import io.r2dbc.spi.Result;
import io.r2dbc.spi.Statement;
import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** Running the fenced statements: what the fenced write and the fence table share. */
final class Statements {

    private Statements() {
    }

    /** The token and owner a row (or fence) holds, and, for a fence, the lock whose tokens it holds. */
    record Stored(@Nullable Long token, @Nullable String owner, @Nullable String lockId) {
    }

    /**
     * Executes a write and sums the rows it updated.
     *
     * @param statement the statement, bound
     * @param schema what the statement expects of the schema, for error messages
     * @return the rows updated
     */
    static Mono<Long> rowsUpdated(Statement statement, String schema) {
        return Flux.from(statement.execute())
                .flatMap(Result::getRowsUpdated)
                .reduce(0L, Long::sum)
                .onErrorMap(e -> SqlErrors.classify(e, schema));
    }

    /**
     * Executes a query of {@code token} (then, optionally, {@code owner} and {@code lock_id}) and reads its first row.
     *
     * @param select the query, bound
     * @param schema what the query expects of the schema, for error messages
     * @return the stored values, or empty when no row matches
     */
    static Mono<Stored> stored(Statement select, String schema) {
        return Flux.from(select.execute())
                .flatMap(result -> result.map((row, meta) -> {
                    int columns = meta.getColumnMetadatas().size();
                    return new Stored(row.get(0, Long.class), columns > 1 ? row.get(1, String.class) : null,
                            columns > 2 ? row.get(2, String.class) : null);
                }))
                .next()
                .onErrorMap(e -> SqlErrors.classify(e, schema));
    }
}
