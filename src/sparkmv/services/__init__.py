"""Services: one implementation of DDL and of status/freshness, used by client and front ends."""
