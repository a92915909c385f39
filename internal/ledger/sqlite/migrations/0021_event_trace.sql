-- +goose Up
-- An event keeps the W3C trace context of the span that published it
-- (issue #46): traceparent and tracestate as received in the headers of
-- those names, '' when tracing was off. It is written once, with the event;
-- each attempt's span continues it, so an attempt writes nothing more.
ALTER TABLE events ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN trace_state TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE events DROP COLUMN trace_state;
ALTER TABLE events DROP COLUMN trace_parent;
