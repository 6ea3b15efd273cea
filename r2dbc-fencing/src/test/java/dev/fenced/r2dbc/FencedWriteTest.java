package dev.fenced.r2dbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** The SQL a fenced write sends, and the input it refuses before sending anything. */
class FencedWriteTest {

    private final FencedWrite settle = FencedWrite.into("invoices").key("id", 42).set("status", "PAID").set("amount", 10);

    @Test
    void updateGuardsOnTheTokenAndOwner() {
        assertThat(settle.updateSql()).isEqualTo("UPDATE \"invoices\" SET \"status\" = $1, \"amount\" = $2, "
                + "\"fencing_token\" = $4, \"fencing_owner\" = $5 WHERE \"id\" = $3 AND (\"fencing_token\" IS NULL OR "
                + "\"fencing_token\" < $4 OR (\"fencing_token\" = $4 AND \"fencing_owner\" = $5))");
    }

    @Test
    void strictRuleAcceptsOnlyNewerTokens() {
        assertThat(settle.rule(FencingRule.STRICTLY_NEWER).updateSql()).endsWith(
                "WHERE \"id\" = $3 AND (\"fencing_token\" IS NULL OR \"fencing_token\" < $4)");
    }

    @Test
    void upsertGuardsTheConflictUpdate() {
        assertThat(settle.upsertSql()).isEqualTo("INSERT INTO \"invoices\" (\"id\", \"status\", \"amount\", "
                + "\"fencing_token\", \"fencing_owner\") VALUES ($1, $2, $3, $4, $5) ON CONFLICT (\"id\") DO UPDATE SET "
                + "\"status\" = EXCLUDED.\"status\", \"amount\" = EXCLUDED.\"amount\", \"fencing_token\" = "
                + "EXCLUDED.\"fencing_token\", \"fencing_owner\" = EXCLUDED.\"fencing_owner\" WHERE "
                + "(\"invoices\".\"fencing_token\" IS NULL OR \"invoices\".\"fencing_token\" < EXCLUDED.\"fencing_token\" OR "
                + "(\"invoices\".\"fencing_token\" = EXCLUDED.\"fencing_token\" AND \"invoices\".\"fencing_owner\" = "
                + "EXCLUDED.\"fencing_owner\"))");
    }

    @Test
    void customColumnsAndSchemaAreQuoted() {
        assertThat(FencedWrite.into("billing.ledger").key("id", 1).fencingColumns("tok", "own").updateSql())
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
        assertThat(settle.setNull("note", String.class).updateSql()).contains("\"note\" = $3");
    }

    @Test
    void specsAreImmutable() {
        FencedWrite base = FencedWrite.into("invoices").key("id", 1);
        base.set("status", "PAID");
        assertThat(base.updateSql()).startsWith("UPDATE \"invoices\" SET \"fencing_token\" = $2");
    }

    @Test
    void theSqlOfAShapeIsBuiltOnceAndSharedByEveryWriteOfThatShape() {
        FencedWrite first = FencedWrite.into("invoices").key("id", 1).set("status", "PAID");
        FencedWrite second = FencedWrite.into("invoices").key("id", 2).set("status", "VOID");

        assertThat(second.updateSql()).isSameAs(first.updateSql());
        assertThat(second.upsertSql()).isSameAs(first.upsertSql());
        // Any difference in columns, their order, the table or the rule is another shape.
        assertThat(FencedWrite.into("invoices").set("status", "PAID").key("id", 1).updateSql()).isEqualTo(first.updateSql());
        assertThat(FencedWrite.into("invoices").key("id", 1).set("note", "x").updateSql()).isNotEqualTo(first.updateSql());
        assertThat(FencedWrite.into("invoices").key("id", 1).set("status", "PAID").set("amount", 3).updateSql())
                .isNotEqualTo(first.updateSql());
        assertThat(first.rule(FencingRule.STRICTLY_NEWER).updateSql()).isNotEqualTo(first.updateSql());
        assertThat(FencedWrite.into("orders").key("id", 1).set("status", "PAID").updateSql()).isNotEqualTo(first.updateSql());
    }
}
