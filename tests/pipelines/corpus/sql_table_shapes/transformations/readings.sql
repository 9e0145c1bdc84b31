CREATE MATERIALIZED VIEW readings (
  sensor STRING COMMENT 'sensor id',
  site STRING COMMENT 'where it is',
  reading DOUBLE COMMENT 'the measured value',
  ts BIGINT
)
CLUSTER BY (site, sensor)
COMMENT 'every reading'
TBLPROPERTIES ('quality' = 'bronze')
AS SELECT sensor, site, reading, ts FROM parquet.`${corpus.data}/readings`;

CREATE MATERIALIZED VIEW site_stats
CLUSTER BY (site)
AS SELECT site, count(*) AS n, avg(reading) AS mean, max(ts) AS last_ts
FROM readings GROUP BY site;

CREATE STREAMING TABLE readings_feed (
  sensor STRING COMMENT 'sensor id',
  reading DOUBLE
)
CLUSTER BY (sensor)
AS SELECT sensor, reading FROM STREAM(reading_files) WHERE reading IS NOT NULL;
