-- A queue's history for the operators' charts and reports (package analytics).
-- One row per queue and step: step_seconds 10 (written by the queue's leading instance at
-- each 10-s step's end, kept 48 h) or 60 (the minute rolled up from its 10-s rows, kept 90
-- days). Gauges are the step's peaks; counts what happened in the step; *_total the queue's
-- cumulative counters read at the step's end (the next row's deltas are taken from them,
-- so a leader change or a row lost in an outage counts nothing twice and loses nothing).
-- wait_buckets: wait-time histogram of the users admitted in the step, the bucket bounds
-- of analytics (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, +Inf s).
-- The primary key makes one queue's range query an index range scan; the second index
-- serves the retention deletes across queues. A new table: no lock on anything live.
CREATE TABLE queue_history (
    queue           text             NOT NULL,
    step_seconds    integer          NOT NULL CHECK (step_seconds IN (10, 60)),
    t               timestamptz      NOT NULL,
    waiting         bigint           NOT NULL DEFAULT 0,
    prequeue        bigint           NOT NULL DEFAULT 0,
    sse_connections bigint           NOT NULL DEFAULT 0,
    joined          bigint           NOT NULL DEFAULT 0,
    admitted        bigint           NOT NULL DEFAULT 0,
    abandoned       bigint           NOT NULL DEFAULT 0,
    expired         bigint           NOT NULL DEFAULT 0,
    left_places     bigint           NOT NULL DEFAULT 0,
    joined_total    bigint           NOT NULL DEFAULT 0,
    admitted_total  bigint           NOT NULL DEFAULT 0,
    abandoned_total bigint           NOT NULL DEFAULT 0,
    expired_total   bigint           NOT NULL DEFAULT 0,
    left_total      bigint           NOT NULL DEFAULT 0,
    wait_count      bigint           NOT NULL DEFAULT 0,
    wait_buckets    bigint[]         NOT NULL DEFAULT '{}',
    wait_p50        double precision,
    wait_p95        double precision,
    rate_per_second double precision,
    rate_reason     text             NOT NULL DEFAULT '',
    PRIMARY KEY (queue, step_seconds, t)
);
CREATE INDEX queue_history_retention_idx ON queue_history (step_seconds, t);
