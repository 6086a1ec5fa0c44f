-- The currency a product is priced in (ISO 4217, upper-case); price stays an integer in the
-- currency's minor units (0 decimals for KRW and JPY, 2 for USD and EUR, 3 for KWD).
-- Existing rows take 'USD': their prices were always shown with two decimals, so reading
-- them as US cents keeps what buyers saw. Rows inserted by an old instance (one release
-- back, which names no currency) take the same default. The CHECK is the shape only; the
-- allow-list lives in the application (orders/currency.go) so it can grow without a
-- migration. A column with a constant default changes no row: the lock is brief.
ALTER TABLE products ADD COLUMN currency text NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$');
