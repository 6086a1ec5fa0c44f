-- Products: the protected resource. Prices are integers in minor units; the CHECK is the
-- last line of defence against overselling (the guarded UPDATE in PlaceOrder is the first).
CREATE TABLE products (
    id         text        PRIMARY KEY,
    name       text        NOT NULL,
    price      bigint      NOT NULL DEFAULT 0 CHECK (price >= 0),
    stock      integer     NOT NULL DEFAULT 0 CHECK (stock >= 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);
