-- The lease table of Fenced's PostgreSQL lock store: one row per lock (lock_id is the key prefix and the
-- lock name, as FencedLease.lockId()). The row is never deleted: its token is the lock's counter, which
-- only ever grows. owner is NULL while the lock is free; expires_at is set from the database's clock;
-- holder is the holder label of the latest grant (the fleet view shows it while the lock is held).
CREATE TABLE IF NOT EXISTS fenced_lease (
    lock_id    text        PRIMARY KEY,
    owner      text,
    token      bigint      NOT NULL,
    expires_at timestamptz NOT NULL,
    holder     text
)
