CREATE MATERIALIZED VIEW even_numbers AS
SELECT id, label FROM numbers_mv
WHERE id % 2 = 0
