package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The SQL a fenced write sends, and the input it refuses before sending anything. */
class FencedWriteTest {

    private static final SqlDialect PG = SqlDialect.POSTGRESQL;
    private static final SqlDialect MARIADB = SqlDialect.MARIADB;

    private final FencedWrite settle = FencedWrite.into("invoices").key("id", 42).set("status", "PAID").set("amount", 10);

    @Test
    void updateGuardsOnTheTokenAndOwner() {
        assertThat(settle.updateSql(PG).text()).isEqualTo("UPDATE \"invoices\" SET \"status\" = $1, \"amount\" = $2, "
                + "\"fencing_token\" = $4, \"fencing_owner\" = $5 WHERE \"id\" = $3 AND (\"fencing_token\" IS NULL OR "
                + "\"fencing_token\" < $4 OR (\"fencing_token\" = $4 AND \"fencing_owner\" = $5))");
    }

    @Test
    void sameShapeAgreesWithTheShapeTextForEveryPartOfIt() {
        FencedWrite base = FencedWrite.into("invoices").key("id", 1L).set("status", "PAID").set("amount", 10);
        List<FencedWrite> variants = List.of(base,
                FencedWrite.into("invoices").key("id", 2L).set("status", "VOID").set("amount", 0),
                FencedWrite.into("ledger").key("id", 1L).set("status", "PAID").set("amount", 10),
                FencedWrite.into("invoices").key("id", 1L).set("amount", 10).set("status", "PAID"),
                FencedWrite.into("invoices").key("id", 1L).set("status", "PAID"),
                FencedWrite.into("invoices").key("id", 1L).key("tenant", 3L).set("status", "PAID").set("amount", 10),
                FencedWrite.into("invoices").key("tenant", 1L).set("status", "PAID").set("amount", 10),
                base.rule(FencingRule.STRICTLY_NEWER),
                base.fencingColumns("tok", "fencing_owner"),
                base.fencingColumns("fencing_token", "own"),
                base.fencingColumn("fencing_token"),
                base.setNull("note", String.class));
        for (FencedWrite a : variants) {
            for (FencedWrite b : variants) {
                assertThat(a.sameShape(b)).as("%s against %s", a, b)
                        .isEqualTo(a.shape("UPDATE", PG).equals(b.shape("UPDATE", PG)));
            }
        }
    }

    @Test
    void aMultiRowTextIsBuiltOncePerShapeAndRowCountInABoundOfItsOwn() {
        String shape = FencedWrite.into("multi_row_cache_probe").key("id", 1L).shape("UPDATE", PG);
        java.util.concurrent.atomic.AtomicInteger builds = new java.util.concurrent.atomic.AtomicInteger();
        java.util.function.Supplier<Sql> build = () -> {
            builds.incrementAndGet();
            return new Sql.Builder(PG).append("SELECT 1").build();
        };
        Sql first = SqlCache.getMultiRow(shape, 3, build);
        assertThat(SqlCache.getMultiRow(shape, 3, build)).isSameAs(first);
        assertThat(builds).hasValue(1);
        SqlCache.getMultiRow(shape, 4, build);
        assertThat(builds).hasValue(2);
        // Past the multi-row bound, single-row shapes are still kept.
        for (int rows = 5; rows < 5 + SqlCache.MULTI_ROW_LIMIT + 10; rows++) {
            SqlCache.getMultiRow(shape, rows, build);
        }
        String single = FencedWrite.into("single_row_cache_probe").key("id", 1L).shape("UPDATE", PG);
        Sql kept = SqlCache.get(single, build);
        assertThat(SqlCache.get(single, build)).isSameAs(kept);
    }

    @Test
    void strictRuleAcceptsOnlyNewerTokens() {
        assertThat(settle.rule(FencingRule.STRICTLY_NEWER).updateSql(PG).text()).endsWith(
                "WHERE \"id\" = $3 AND (\"fencing_token\" IS NULL OR \"fencing_token\" < $4)");
    }

    @Test
    void upsertGuardsTheConflictUpdate() {
        assertThat(settle.upsertSql(PG).text()).isEqualTo("INSERT INTO \"invoices\" (\"id\", \"status\", \"amount\", "
                + "\"fencing_token\", \"fencing_owner\") VALUES ($1, $2, $3, $4, $5) ON CONFLICT (\"id\") DO UPDATE SET "
                + "\"status\" = EXCLUDED.\"status\", \"amount\" = EXCLUDED.\"amount\", \"fencing_token\" = "
                + "EXCLUDED.\"fencing_token\", \"fencing_owner\" = EXCLUDED.\"fencing_owner\" WHERE "
                + "(\"invoices\".\"fencing_token\" IS NULL OR \"invoices\".\"fencing_token\" < EXCLUDED.\"fencing_token\" OR "
                + "(\"invoices\".\"fencing_token\" = EXCLUDED.\"fencing_token\" AND \"invoices\".\"fencing_owner\" = "
                + "EXCLUDED.\"fencing_owner\"))");
    }

    @Test
    void customColumnsAndSchemaAreQuoted() {
        assertThat(FencedWrite.into("billing.ledger").key("id", 1).fencingColumns("tok", "own").updateSql(PG).text())
                .startsWith("UPDATE \"billing\".\"ledger\" SET \"tok\" = $2, \"own\" = $3 WHERE \"id\" = $1");
    }

    @Test
    void identifiersWithQuotesOrSemicolonsAreRefused() {
        assertThatThrownBy(() -> FencedWrite.into("invoices; DROP TABLE x"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("Not a valid table name: 'invoices; DROP TABLE x' (use letters, digits and underscores, not "
                        + "starting with a digit, at most 63 characters; a table may be schema-qualified)");
        assertThatThrownBy(() -> settle.set("na\"me", 1))
                .hasMessageStartingWith("Not a valid column: 'na\"me'");
        assertThatThrownBy(() -> settle.key("1id", 1)).hasMessageStartingWith("Not a valid key column: '1id'");
        assertThatThrownBy(() -> settle.fencingColumns("token;", "owner")).hasMessageStartingWith("Not a valid token column");
        assertThatThrownBy(() -> FenceTable.named("fence\"")).hasMessageStartingWith("Not a valid fence table name");
    }

    @Test
    void columnsMayAppearOnlyOnce() {
        assertThatThrownBy(() -> settle.set("status", "VOID"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("Column status appears twice in the fenced write of invoices (the token and owner columns are "
                        + "set by the write itself)");
        assertThatThrownBy(() -> settle.set("fencing_token", 5)).hasMessageStartingWith("Column fencing_token appears twice");
    }

    @Test
    void nullValuesMustSayTheirType() {
        assertThatThrownBy(() -> settle.set("note", null))
                .isInstanceOf(NullPointerException.class)
                .hasMessage("value of note must not be null; use setNull(column, type)");
        assertThat(settle.setNull("note", String.class).updateSql(PG).text()).contains("\"note\" = $3");
    }

    @Test
    void specsAreImmutable() {
        FencedWrite base = FencedWrite.into("invoices").key("id", 1);
        base.set("status", "PAID");
        assertThat(base.updateSql(PG).text()).startsWith("UPDATE \"invoices\" SET \"fencing_token\" = $2");
    }

    @Test
    void theSqlOfAShapeIsBuiltOnceAndSharedByEveryWriteOfThatShape() {
        FencedWrite first = FencedWrite.into("invoices").key("id", 1).set("status", "PAID");
        FencedWrite second = FencedWrite.into("invoices").key("id", 2).set("status", "VOID");

        assertThat(second.updateSql(PG).text()).isSameAs(first.updateSql(PG).text());
        assertThat(second.upsertSql(PG).text()).isSameAs(first.upsertSql(PG).text());
        // Any difference in columns, their order, the table or the rule is another shape.
        assertThat(FencedWrite.into("invoices").set("status", "PAID").key("id", 1).updateSql(PG).text()).isEqualTo(first.updateSql(PG).text());
        assertThat(FencedWrite.into("invoices").key("id", 1).set("note", "x").updateSql(PG).text()).isNotEqualTo(first.updateSql(PG).text());
        assertThat(FencedWrite.into("invoices").key("id", 1).set("status", "PAID").set("amount", 3).updateSql(PG).text())
                .isNotEqualTo(first.updateSql(PG).text());
        assertThat(first.rule(FencingRule.STRICTLY_NEWER).updateSql(PG).text()).isNotEqualTo(first.updateSql(PG).text());
        assertThat(FencedWrite.into("orders").key("id", 1).set("status", "PAID").updateSql(PG).text()).isNotEqualTo(first.updateSql(PG).text());
    }

    @Test
    void mariaDbQuotesWithBackticksAndBindsAValueOncePerMarker() {
        Sql update = settle.updateSql(MARIADB);
        assertThat(update.text()).isEqualTo("UPDATE `invoices` SET `status` = ?, `amount` = ?, `fencing_token` = ?, "
                + "`fencing_owner` = ? WHERE `id` = ? AND (`fencing_token` IS NULL OR `fencing_token` < ? OR "
                + "(`fencing_token` = ? AND `fencing_owner` = ?))");
        // Values: status 0, amount 1, id 2, token 3, owner 4; every use of the token takes it again.
        assertThat(update.slots()).containsExactly(0, 1, 3, 4, 2, 3, 3, 4);
        assertThat(settle.updateSql(PG).slots()).containsExactly(0, 1, 2, 3, 4);
        assertThat(settle.insertSql(MARIADB).text()).isEqualTo("INSERT INTO `invoices` (`id`, `status`, `amount`, "
                + "`fencing_token`, `fencing_owner`) VALUES (?, ?, ?, ?, ?)");
    }

    @Test
    void theSeedsTokenColumnAloneIsGuardedByTheStrictRule() {
        FencedWrite seed = FencedWrite.into("invoices").key("id", 42).set("status", "PROCESSED").set("total_amount", 10)
                .fencingColumn("last_fencing_token");
        assertThat(seed.updateSql(PG).text()).isEqualTo("UPDATE \"invoices\" SET \"status\" = $1, \"total_amount\" = $2, "
                + "\"last_fencing_token\" = $4 WHERE \"id\" = $3 AND (\"last_fencing_token\" IS NULL OR "
                + "\"last_fencing_token\" < $4)");
        assertThat(seed.upsertSql(PG).text()).endsWith("ON CONFLICT (\"id\") DO UPDATE SET \"status\" = EXCLUDED.\"status\", "
                + "\"total_amount\" = EXCLUDED.\"total_amount\", \"last_fencing_token\" = EXCLUDED.\"last_fencing_token\" "
                + "WHERE (\"invoices\".\"last_fencing_token\" IS NULL OR \"invoices\".\"last_fencing_token\" < "
                + "EXCLUDED.\"last_fencing_token\")");
        assertThat(seed.updateSql(MARIADB).slots()).containsExactly(0, 1, 3, 2, 3);
        assertThatThrownBy(() -> seed.rule(FencingRule.SAME_LEASE_OR_NEWER))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("A fenced write of invoices with the token column last_fencing_token alone can only use "
                        + "FencingRule.STRICTLY_NEWER: SAME_LEASE_OR_NEWER needs an owner column (fencingColumns(token, owner))");
        assertThat(seed.rule(FencingRule.STRICTLY_NEWER).updateSql(PG)).isSameAs(seed.updateSql(PG));
    }

    @Test
    void guardNamesFollowTheRuleOfLockNamesWithItsMessages() {
        String tooLong = "n".repeat(1025);
        for (java.util.function.Consumer<String> guard : List.<java.util.function.Consumer<String>>of(
                name -> settle.guardedBy(name), name -> FenceTable.defaultTable().guardedBy(name))) {
            assertThatThrownBy(() -> guard.accept("a{b}")).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("Lock name must not contain braces, was 'a{b}'");
            assertThatThrownBy(() -> guard.accept("a\u0007b")).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("Lock name must not contain control characters, was 'a?b'");
            assertThatThrownBy(() -> guard.accept(tooLong)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("Lock name must be at most 1024 characters, was 1025");
            assertThatThrownBy(() -> guard.accept(" ")).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("Lock name must not be blank");
            assertThatThrownBy(() -> guard.accept(null)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("Lock name must not be null");
        }
        assertThat(settle.guardedBy("n".repeat(1024)).toString()).contains("guardedBy=" + "n".repeat(1024));
    }
}
