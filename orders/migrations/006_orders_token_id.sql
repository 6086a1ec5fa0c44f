-- The admission token an order was bought with: the token's stable id (the id Redis stores,
-- which a signed token carries as its jti, so the same admission presented signed or bare is
-- one id). The order store is the durable record of a token's use: Redis's mark of a used
-- token can be lost in a failover (replication is asynchronous), and 007's unique index on
-- this column then refuses the token's second order. NULL for orders placed before this
-- release, by an old instance (one release back, which names no token) and for orders
-- without a token. A nullable column without a default changes no row: the lock is brief.
ALTER TABLE orders ADD COLUMN token_id text;
