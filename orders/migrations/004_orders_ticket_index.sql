-- migrate: no transaction
-- What one ticket bought of a product (max_per_ticket), read by every order. Built
-- CONCURRENTLY so that orders keep flowing on a live table while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_ticket_product_idx ON orders (ticket, product_id);
