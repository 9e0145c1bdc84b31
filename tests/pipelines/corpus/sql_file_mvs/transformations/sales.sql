CREATE TEMPORARY VIEW sales_clean AS
SELECT region, item, qty, price, qty * price AS revenue
FROM parquet.`${corpus.data}/sales`
WHERE qty IS NOT NULL;

CREATE MATERIALIZED VIEW revenue_by_region
PARTITIONED BY (region)
COMMENT 'revenue per region and item'
AS SELECT region, item, sum(revenue) AS revenue, count(*) AS n
FROM sales_clean
GROUP BY region, item;

CREATE MATERIALIZED VIEW sales_with_items AS
SELECT s.region, s.item, s.qty, i.category
FROM sales_clean s JOIN json.`${corpus.data}/items` i ON s.item = i.item;

CREATE MATERIALIZED VIEW top_region AS
SELECT region, revenue FROM revenue_by_region
WHERE revenue = (SELECT max(revenue) FROM revenue_by_region);
