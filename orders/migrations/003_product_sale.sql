-- What a product is sold through, and how much one buyer may take.
-- queue: the waiting-room queue whose admission tokens may buy the product; NULL = not on
-- sale through the order API (an operator names the queue after upgrading).
-- max_per_order / max_per_ticket: the most units in one order / over all orders of one
-- ticket. Old instances (one release back) select named columns and ignore these.
ALTER TABLE products ADD COLUMN queue text;
ALTER TABLE products ADD COLUMN max_per_order integer NOT NULL DEFAULT 4 CHECK (max_per_order >= 1);
ALTER TABLE products ADD COLUMN max_per_ticket integer NOT NULL DEFAULT 4 CHECK (max_per_ticket >= 1);
CREATE INDEX orders_ticket_product_idx ON orders (ticket, product_id);
