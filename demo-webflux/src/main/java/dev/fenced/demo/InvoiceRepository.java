package dev.fenced.demo;

import dev.fenced.lock.FencedLease;
import dev.fenced.r2dbc.FencedWrite;
import io.r2dbc.spi.ConnectionFactory;
import io.r2dbc.spi.Readable;
import org.springframework.r2dbc.core.DatabaseClient;
import org.springframework.stereotype.Repository;
import reactor.core.publisher.Mono;

/**
 * Reads invoices and writes them through {@link FencedWrite}, so that every write carries its lease's token. The
 * writes join a surrounding Spring transaction on the connection factory when there is one.
 */
@Repository
class InvoiceRepository {

    static final String TABLE = "invoices";

    static final String SCHEMA = """
            CREATE TABLE IF NOT EXISTS invoices (
              id bigint PRIMARY KEY,
              customer text NOT NULL,
              status text NOT NULL,
              amount bigint NOT NULL,
              ledger_total bigint NOT NULL DEFAULT 0,
              times_processed integer NOT NULL DEFAULT 0,
              settlements integer NOT NULL DEFAULT 0,
              processed_by text,
              fencing_token bigint,
              fencing_owner text
            )""";

    private static final String COLUMNS =
            "id, customer, status, amount, ledger_total, times_processed, settlements, processed_by, fencing_token, fencing_owner";

    private final DatabaseClient db;
    private final ConnectionFactory connectionFactory;

    InvoiceRepository(DatabaseClient db, ConnectionFactory connectionFactory) {
        this.db = db;
        this.connectionFactory = connectionFactory;
    }

    Mono<Invoice> find(long id) {
        return db.sql("SELECT " + COLUMNS + " FROM invoices WHERE id = :id")
                .bind("id", id)
                .map(InvoiceRepository::invoice)
                .one();
    }

    /**
     * The first step of a read-modify-write under {@code lease}: claims the invoice's row with the lease's token,
     * then reads it. From then on a holder with an older token can no longer write the row, so what is computed
     * from this read cannot be lost to a stalled holder that read before.
     *
     * @return the invoice as claimed; {@code FencedRowNotFoundException} when there is none
     */
    Mono<Invoice> claim(long id, FencedLease lease) {
        return FencedWrite.into(TABLE).key("id", id).claim(connectionFactory, lease, InvoiceRepository::invoice);
    }

    /** Books the amount to the ledger once more, under {@code lease}. */
    Mono<Long> process(Invoice invoice, FencedLease lease, String processedBy) {
        return FencedWrite.into(TABLE).key("id", invoice.id())
                .set("status", "PROCESSED")
                .set("ledger_total", invoice.ledgerTotal() + invoice.amount())
                .set("times_processed", invoice.timesProcessed() + 1)
                .set("processed_by", processedBy)
                .update(connectionFactory, lease);
    }

    /** Settles the invoice, under {@code lease}. */
    Mono<Long> settle(Invoice invoice, FencedLease lease) {
        return FencedWrite.into(TABLE).key("id", invoice.id())
                .set("status", "SETTLED")
                .set("ledger_total", invoice.ledgerTotal() + invoice.amount())
                .set("settlements", invoice.settlements() + 1)
                .set("processed_by", "settle")
                .update(connectionFactory, lease);
    }

    /** Creates the table if needed and inserts the seed invoices that are missing. */
    Mono<Void> createAndSeed(int seedInvoices) {
        return db.sql(SCHEMA).then()
                .then(db.sql("CREATE SEQUENCE IF NOT EXISTS scenario_invoice_seq START 900000001").then())
                .then(db.sql("""
                        INSERT INTO invoices (id, customer, status, amount)
                        SELECT n, 'customer-' || (n % 7), 'OPEN', 1000 + n * 25 FROM generate_series(1, :count) n
                        ON CONFLICT (id) DO NOTHING""").bind("count", seedInvoices).then());
    }

    /** Inserts a fresh invoice for one run of the scenario, so every replay starts from a row never written. */
    Mono<Long> insertScenarioInvoice() {
        return db.sql("""
                INSERT INTO invoices (id, customer, status, amount)
                VALUES (nextval('scenario_invoice_seq'), 'scenario', 'OPEN', 4200) RETURNING id""")
                .map(row -> row.get(0, Long.class))
                .one();
    }

    static Invoice invoice(Readable row) {
        return new Invoice(
                value(row, "id", Long.class),
                value(row, "customer", String.class),
                value(row, "status", String.class),
                value(row, "amount", Long.class),
                value(row, "ledger_total", Long.class),
                value(row, "times_processed", Integer.class),
                value(row, "settlements", Integer.class),
                row.get("processed_by", String.class),
                row.get("fencing_token", Long.class),
                row.get("fencing_owner", String.class));
    }

    private static <T> T value(Readable row, String column, Class<T> type) {
        T value = row.get(column, type);
        if (value == null) {
            throw new IllegalStateException("Column " + column + " of invoices is NULL");
        }
        return value;
    }
}
