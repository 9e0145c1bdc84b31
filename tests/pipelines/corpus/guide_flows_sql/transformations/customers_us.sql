-- the target of both flows
CREATE STREAMING TABLE customers_us;

CREATE FLOW append_customers_us_west
AS INSERT INTO customers_us BY NAME
SELECT customer_id, name, city, 'west' AS coast FROM STREAM(customers_us_west);

CREATE FLOW append_customers_us_east
AS INSERT INTO customers_us BY NAME
SELECT customer_id, name, city, 'east' AS coast FROM STREAM(customers_us_east);

CREATE MATERIALIZED VIEW customers_per_city AS
SELECT coast, city, count(*) AS customers, count(DISTINCT customer_id) AS ids
FROM customers_us GROUP BY coast, city;
