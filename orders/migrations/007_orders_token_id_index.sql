-- migrate: no transaction
-- One order per admission token (006): a second order with a token that already bought
-- conflicts here (the insert's ON CONFLICT DO NOTHING, then orders.ErrTokenUsed). Partial:
-- orders without a token do not collide. Built CONCURRENTLY so that orders keep flowing on
-- a live table while it builds; a separate file from 006 because a file that runs outside a
-- transaction is sent as one statement.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS orders_token_id_key ON orders (token_id) WHERE token_id IS NOT NULL;
