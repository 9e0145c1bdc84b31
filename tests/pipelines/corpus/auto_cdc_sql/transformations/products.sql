CREATE STREAMING TABLE product_changes
AS SELECT * FROM STREAM(change_files);

CREATE STREAMING TABLE products;

CREATE FLOW products_cdc AS AUTO CDC INTO products
FROM STREAM product_changes
KEYS (product_id)
APPLY AS DELETE WHEN op = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (op, seq)
STORED AS SCD TYPE 1;

CREATE MATERIALIZED VIEW products_per_category AS
SELECT category, count(*) AS n, sum(price) AS value FROM products GROUP BY category;
