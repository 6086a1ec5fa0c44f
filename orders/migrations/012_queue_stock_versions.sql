-- One row per queue whose products' stock has been judged (sold out or not): the version
-- of the latest judgement. A transaction that changes a queue's stock updates the queue's
-- row before it judges, so the row lock orders the judgements of one queue and each sees
-- the stock the ones before it left; the version (microseconds, always above the last one)
-- lets the queue's sold-out flag in Redis refuse a judgement older than the one it holds.
CREATE TABLE IF NOT EXISTS queue_stock_versions (
    queue   text PRIMARY KEY,
    version bigint NOT NULL
);
