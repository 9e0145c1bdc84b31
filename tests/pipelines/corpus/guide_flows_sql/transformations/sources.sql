CREATE STREAMING TABLE customers_us_west
AS SELECT customer_id, name, city FROM STREAM(west_files);

CREATE STREAMING TABLE customers_us_east
AS SELECT customer_id, name, city FROM STREAM(east_files) WHERE customer_id IS NOT NULL;
