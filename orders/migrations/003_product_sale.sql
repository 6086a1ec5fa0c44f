-- What a product is sold through, and how much one buyer may take.
-- queue: the waiting-room queue whose admission tokens may buy the product; NULL = not on
-- sale through the order API. Products made before this release name none (an operator
-- names it, or WR_UNBOUND_PRODUCTS_QUEUE sells them through one queue meanwhile); the demo
-- product, which only a server with demo data makes, is the demo queue's.
-- max_per_order / max_per_ticket: the most units in one order / over all orders of one
-- ticket. Old instances (one release back) select named columns and ignore these. Adding
-- nullable columns and columns with a constant default changes no row: the lock is brief.
ALTER TABLE products ADD COLUMN queue text;
ALTER TABLE products ADD COLUMN max_per_order integer NOT NULL DEFAULT 4 CHECK (max_per_order >= 1);
ALTER TABLE products ADD COLUMN max_per_ticket integer NOT NULL DEFAULT 4 CHECK (max_per_ticket >= 1);
UPDATE products SET queue = 'demo' WHERE id = 'demo' AND name = 'Limited sneaker drop';
