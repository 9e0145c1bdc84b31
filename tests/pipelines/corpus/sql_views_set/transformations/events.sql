SET spark.sql.ansi.enabled = false;

CREATE MATERIALIZED VIEW events
PARTITIONED BY (day, kind)
AS SELECT id, kind, day, value FROM json.`${corpus.data}/events`;

-- a persisted view over a pipeline dataset
CREATE VIEW big_events AS SELECT id, kind, day, value FROM events WHERE value > 5;

SET spark.sql.shuffle.partitions = 3;

CREATE MATERIALIZED VIEW rollup_by_kind AS
SELECT kind, sum(value) AS total, count(*) AS n
FROM events GROUP BY ROLLUP(kind);

CREATE MATERIALIZED VIEW latest_day AS
SELECT * FROM events WHERE day = (SELECT max(day) FROM events);
