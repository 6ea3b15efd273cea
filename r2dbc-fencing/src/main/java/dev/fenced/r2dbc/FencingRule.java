package dev.fenced.r2dbc;

import org.jspecify.annotations.Nullable;

/**
 * When storage accepts a write carrying a fencing token, compared with the token (and owner) it holds.
 *
 * <table>
 *   <caption>What each rule accepts</caption>
 *   <tr><th>situation</th><th>{@link #SAME_LEASE_OR_NEWER} (default)</th><th>{@link #STRICTLY_NEWER}</th></tr>
 *   <tr><td>one lease writes the same row several times</td><td>accepted</td><td>only the first write</td></tr>
 *   <tr><td>a write is retried after an unknown outcome</td><td>accepted (idempotent)</td><td>rejected if the
 *       first attempt committed</td></tr>
 *   <tr><td>the lock service re-issues a token after losing data, to another owner</td><td>only the first
 *       owner's writes</td><td>only the first write</td></tr>
 * </table>
 */
public enum FencingRule {

    /**
     * Accept iff {@code token > stored_token OR (token = stored_token AND owner = stored_owner)}; a row
     * never written under a lease (stored token {@code NULL}) accepts any token.
     */
    SAME_LEASE_OR_NEWER,

    /** Accept iff {@code token > stored_token} (the classic recipe); {@code NULL} accepts any token. */
    STRICTLY_NEWER;

    /**
     * Appends the SQL condition, with the stored columns and the presented values as given.
     *
     * @param sql the statement being built
     * @param storedToken the stored token column
     * @param storedOwner the stored owner column, or {@code null} for a table with the token column alone
     *     (only {@link #STRICTLY_NEWER} reads no owner)
     * @param token the presented token
     * @param owner the presented owner, or {@code null} with {@code storedOwner}
     */
    void appendCondition(Sql.Builder sql, Sql.Operand storedToken, Sql.@Nullable Operand storedOwner, Sql.Operand token,
            Sql.@Nullable Operand owner) {
        sql.append("(").operand(storedToken).append(" IS NULL OR ").operand(storedToken).append(" < ").operand(token);
        if (this == SAME_LEASE_OR_NEWER) {
            if (storedOwner == null || owner == null) {
                throw new IllegalStateException("The rule SAME_LEASE_OR_NEWER needs an owner column");
            }
            sql.append(" OR (").operand(storedToken).append(" = ").operand(token).append(" AND ").operand(storedOwner)
                    .append(" = ").operand(owner).append(")");
        }
        sql.append(")");
    }

    /**
     * Whether a write with {@code token}/{@code owner} would be accepted over the stored values.
     *
     * @param storedToken the stored token, or {@code null}
     * @param storedOwner the stored owner, or {@code null}
     * @param token the presented token
     * @param owner the presented owner
     * @return whether the rule accepts it
     */
    boolean accepts(@Nullable Long storedToken, @Nullable String storedOwner, long token, String owner) {
        if (storedToken == null || storedToken < token) {
            return true;
        }
        return this == SAME_LEASE_OR_NEWER && storedToken == token && owner.equals(storedOwner);
    }
}
