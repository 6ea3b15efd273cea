-- The fence table of Fenced's r2dbc-fencing: one row per fenced resource, holding the newest fencing
-- token (and its owner) that storage has accepted for it, and the lock whose tokens it holds
-- (FencedLease.lockId(): key prefix and name). Rows are only ever moved forward, and only by that lock.
CREATE TABLE IF NOT EXISTS fenced_fence (
    resource   text        PRIMARY KEY,
    last_token bigint      NOT NULL,
    last_owner text        NOT NULL,
    lock_id    text,
    updated_at timestamptz NOT NULL DEFAULT now()
)
