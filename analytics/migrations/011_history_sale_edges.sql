-- The edges of a sale in the history (package analytics): the places dropped when a sale
-- ends, and when the queue sold out and was restocked.
-- dropped / dropped_total follow the other counts of 008 (the step's delta, the queue's
-- running total at the step's end). dropped_total has no default: a row written by an
-- instance that does not know the counter (a rolling deploy) leaves it NULL, and the next
-- row's delta is taken from the latest row that has it. Adding a column with a constant
-- default rewrites nothing (PostgreSQL 11+): the lock is held for an instant.
ALTER TABLE queue_history
    ADD COLUMN dropped       bigint NOT NULL DEFAULT 0,
    ADD COLUMN dropped_total bigint;

-- One row per sold-out period of a queue: sold_out_at the instant the queue's sold-out flag
-- was set (Redis TIME, soldout.lua), restocked_at the instant it was cleared (NULL while
-- it lasts). Written by the queue's recording instance at its 10-s steps.
CREATE TABLE queue_sellouts (
    queue        text        NOT NULL,
    sold_out_at  timestamptz NOT NULL,
    restocked_at timestamptz,
    PRIMARY KEY (queue, sold_out_at)
);
