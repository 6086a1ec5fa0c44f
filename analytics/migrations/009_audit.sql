-- The audit log of admin changes (package analytics, AuditLog): who (actor: the admin
-- token's name), what (action, e.g. queue.update), on what (target, e.g. queue:drop), when
-- (at: when the change was answered), and the target's state before and after as JSON
-- (null when it did not exist or is not kept). queue is the queue the change is about (its
-- settings, logo, invites, or the queue a product is sold through), null for keys and
-- limits. Never holds a token, a secret or an invite code. A new table: no lock on anything
-- live. (at desc) serves the newest-first list, (queue, at desc) the list of one queue.
CREATE TABLE audit_log (
    id     bigserial   PRIMARY KEY,
    at     timestamptz NOT NULL,
    actor  text        NOT NULL,
    action text        NOT NULL,
    target text        NOT NULL,
    queue  text,
    before jsonb,
    after  jsonb
);
CREATE INDEX audit_log_at_idx ON audit_log (at DESC);
CREATE INDEX audit_log_queue_at_idx ON audit_log (queue, at DESC);
