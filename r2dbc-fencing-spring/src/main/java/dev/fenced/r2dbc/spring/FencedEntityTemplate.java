package dev.fenced.r2dbc.spring;

import dev.fenced.lock.FencedLease;
import dev.fenced.lock.PostgresLeaseTable;
import dev.fenced.r2dbc.FencedWrite;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.springframework.data.mapping.PersistentPropertyAccessor;
import org.springframework.data.mapping.model.ConvertingPropertyAccessor;
import org.springframework.data.mapping.model.EntityInstantiators;
import org.springframework.data.mapping.model.InstantiationAwarePropertyAccessor;
import org.springframework.data.r2dbc.convert.R2dbcConverter;
import org.springframework.data.r2dbc.core.R2dbcEntityTemplate;
import org.springframework.data.r2dbc.mapping.OutboundRow;
import org.springframework.data.relational.core.mapping.RelationalPersistentEntity;
import org.springframework.data.relational.core.mapping.RelationalPersistentProperty;
import org.springframework.data.relational.core.sql.IdentifierProcessing;
import org.springframework.data.relational.core.sql.SqlIdentifier;
import org.springframework.r2dbc.core.Parameter;
import reactor.core.publisher.Mono;

/**
 * Fenced updates and saves of entities mapped with Spring Data R2DBC. The entity's {@link FencingToken} property
 * (and {@link FencingOwner} property, if it has one) map the token columns; {@link #update} writes every mapped
 * column of the entity's row, keyed by its {@code @Id}, with the guard in the {@code WHERE} clause, through a
 * {@link FencedWrite}, so the rule, the errors and the databases are those of fenced writes:
 *
 * <pre>{@code
 * @Table("invoices")
 * record Invoice(@Id long id, String status, long totalAmount, @FencingToken Long lastFencingToken) {}
 *
 * FencedEntityTemplate entities = FencedEntityTemplate.of(r2dbcEntityTemplate);
 * locks.withLease("invoice:42", lease -> entities.update(invoice, lease));   // the invoice, with the lease's token
 * }</pre>
 *
 * <p>A stale token fails with {@link dev.fenced.lock.StaleFencingTokenException} (as {@code @Version} fails with
 * {@code OptimisticLockingFailureException}), a missing row with {@link dev.fenced.r2dbc.FencedRowNotFoundException},
 * and the lease is told of a newer holder; a write the database cannot serialize with a concurrent transaction
 * (PostgreSQL {@code REPEATABLE READ}/{@code SERIALIZABLE}, deadlocks) with
 * {@link dev.fenced.r2dbc.FencedWriteConflictException}. Writes go through the template's {@code DatabaseClient}, so they join
 * the subscriber's Spring transaction ({@code TransactionalOperator}, {@code @Transactional}) and otherwise commit
 * on their own. Every method is cold. Immutable and thread-safe.
 */
public final class FencedEntityTemplate {

    private final R2dbcConverter converter;
    private final FencedDatabaseClient client;
    private final EntityInstantiators instantiators = new EntityInstantiators();
    private final @Nullable PostgresLeaseTable leaseCheck;

    private FencedEntityTemplate(R2dbcConverter converter, FencedDatabaseClient client, @Nullable PostgresLeaseTable leaseCheck) {
        this.converter = converter;
        this.client = client;
        this.leaseCheck = leaseCheck;
    }

    /**
     * Fenced writes with the mapping and the database client of {@code template}.
     *
     * @param template the template
     * @return the fenced template
     */
    public static FencedEntityTemplate of(R2dbcEntityTemplate template) {
        Objects.requireNonNull(template, "template must not be null");
        return new FencedEntityTemplate(template.getConverter(), FencedDatabaseClient.of(template.getDatabaseClient()), null);
    }

    /**
     * The same template, checking the lease before every write ({@link FencedWrite#checkLease}): in the write's
     * transaction, the lease's row in the lease table of a lock client on PostgreSQL must show the lease as held,
     * and stays locked until the transaction ends, so no other owner can be granted the lock before the write
     * commits; a refusal fails with {@link dev.fenced.r2dbc.LeaseCheckFailedException} and nothing is written. The
     * writes must then run in a Spring transaction ({@code TransactionalOperator}, {@code @Transactional}): outside
     * one the template's client hands out a connection in auto-commit mode, and the write is refused with
     * {@link IllegalStateException} before any SQL; on MariaDB/MySQL every write fails with it too.
     *
     * @param leases the lease table of the lock client that granted the leases
     * @return a new template
     */
    public FencedEntityTemplate checkLease(PostgresLeaseTable leases) {
        return new FencedEntityTemplate(converter, client, Objects.requireNonNull(leases, "leases must not be null"));
    }

    /**
     * Updates the entity's row under the lease: every mapped column takes the entity's value, and the token (and
     * owner) columns the lease's, if the rule accepts the lease's token.
     *
     * @param entity the entity, with its id
     * @param lease the lease that guards the row
     * @param <T> the entity type
     * @return the entity with the lease's token (and owner) set: the same instance for a mutable entity, a new one
     *     for an immutable one; {@link dev.fenced.lock.StaleFencingTokenException} when the row holds a newer token,
     *     {@link dev.fenced.r2dbc.FencedRowNotFoundException} when there is no row with the id
     */
    public <T> Mono<T> update(T entity, FencedLease lease) {
        return write(entity, lease, false);
    }

    /**
     * Saves the entity under the lease: inserts its row if there is none, else updates it as {@link #update} does.
     *
     * @param entity the entity, with its id
     * @param lease the lease that guards the row
     * @param <T> the entity type
     * @return the entity with the lease's token (and owner) set; {@link dev.fenced.lock.StaleFencingTokenException}
     *     when the row holds a newer token
     */
    public <T> Mono<T> save(T entity, FencedLease lease) {
        return write(entity, lease, true);
    }

    private <T> Mono<T> write(T entity, FencedLease lease, boolean upsert) {
        return Mono.defer(() -> {
            Objects.requireNonNull(entity, "entity must not be null");
            Objects.requireNonNull(lease, "lease must not be null");
            @SuppressWarnings("unchecked")
            RelationalPersistentEntity<T> meta = (RelationalPersistentEntity<T>) converter.getMappingContext()
                    .getRequiredPersistentEntity(entity.getClass());
            Mapping mapping = mapping(meta);
            FencedWrite write = spec(meta, mapping, entity);
            Mono<Long> rows = upsert ? client.upsert(write, lease) : client.update(write, lease);
            return rows.then(Mono.fromSupplier(() -> withFencing(meta, mapping, entity, lease)));
        });
    }

    /** The id and token properties of an entity type, and its owner property if it has one. */
    private record Mapping(RelationalPersistentProperty id, RelationalPersistentProperty token,
            @Nullable RelationalPersistentProperty owner) {
    }

    private static Mapping mapping(RelationalPersistentEntity<?> meta) {
        RelationalPersistentProperty id = meta.getIdProperty();
        RelationalPersistentProperty token = meta.getPersistentProperty(FencingToken.class);
        if (id == null || token == null) {
            throw new IllegalArgumentException("A fenced write of entity " + meta.getType().getName() + " needs an @Id "
                    + "property and a @FencingToken property");
        }
        return new Mapping(id, token, meta.getPersistentProperty(FencingOwner.class));
    }

    // OutboundRow, the converter's output, still speaks the deprecated r2dbc.core.Parameter.
    @SuppressWarnings("deprecation")
    private FencedWrite spec(RelationalPersistentEntity<?> meta, Mapping mapping, Object entity) {
        OutboundRow row = new OutboundRow();
        converter.write(entity, row);
        Parameter id = row.get(mapping.id().getColumnName());
        Object idValue = id == null ? null : id.getValue();
        if (idValue == null) {
            throw new IllegalArgumentException("A fenced write of entity " + meta.getType().getName() + " needs its id set");
        }
        FencedWrite write = FencedWrite.into(meta.getQualifiedTableName().toSql(IdentifierProcessing.NONE))
                .key(name(mapping.id().getColumnName()), idValue);
        RelationalPersistentProperty owner = mapping.owner();
        for (Map.Entry<SqlIdentifier, Parameter> column : row.entrySet()) {
            SqlIdentifier name = column.getKey();
            if (name.equals(mapping.id().getColumnName()) || name.equals(mapping.token().getColumnName())
                    || (owner != null && name.equals(owner.getColumnName()))) {
                continue;
            }
            Parameter value = column.getValue();
            Object v = value.getValue();
            write = v != null ? write.set(name(name), v) : write.setNull(name(name), value.getType());
        }
        String token = name(mapping.token().getColumnName());
        write = owner == null ? write.fencingColumn(token) : write.fencingColumns(token, name(owner.getColumnName()));
        return leaseCheck == null ? write : write.checkLease(leaseCheck);
    }

    private <T> T withFencing(RelationalPersistentEntity<T> meta, Mapping mapping, T entity, FencedLease lease) {
        PersistentPropertyAccessor<T> accessor = new ConvertingPropertyAccessor<>(
                new InstantiationAwarePropertyAccessor<>(entity, meta::getPropertyAccessor, instantiators),
                converter.getConversionService());
        accessor.setProperty(mapping.token(), lease.token());
        RelationalPersistentProperty owner = mapping.owner();
        if (owner != null) {
            accessor.setProperty(owner, lease.ownerId());
        }
        return accessor.getBean();
    }

    private static String name(SqlIdentifier identifier) {
        return identifier.toSql(IdentifierProcessing.NONE);
    }

    @Override
    public String toString() {
        return "FencedEntityTemplate{" + client + (leaseCheck == null ? "" : ", checkLease=" + leaseCheck.name()) + "}";
    }
}
