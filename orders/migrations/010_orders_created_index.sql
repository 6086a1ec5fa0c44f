-- migrate: no transaction
-- The history's and report's orders per step (package analytics): the orders of one
-- queue's products in a time range, read as an index range scan per product. Built
-- CONCURRENTLY so that orders keep flowing on a live table while it builds; its own file
-- because a file that runs outside a transaction is sent as one statement. The history and
-- audit tables are analytics' own migrations.
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_product_created_idx ON orders (product_id, created_at);
