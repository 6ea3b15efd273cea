-- The fence table of Fenced's r2dbc-fencing on MariaDB/MySQL: one row per fenced resource, holding the newest
-- fencing token (and its owner) that storage has accepted for it, and the lock whose tokens it holds
-- (FencedLease.lockId(): key prefix and name). Rows are only ever moved forward, and only by that lock.
CREATE TABLE IF NOT EXISTS fenced_fence (
    resource   varchar(512) NOT NULL PRIMARY KEY,
    last_token bigint       NOT NULL,
    last_owner varchar(512) NOT NULL,
    lock_id    varchar(512),
    updated_at timestamp(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
)
