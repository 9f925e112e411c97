-- The source table of the CDC demo (scripts/cluster.sh and docker-compose.yml create it).
-- A primary key is required: it is the Kafka key and the Iceberg table's identifier field.
CREATE TABLE IF NOT EXISTS public.source (pk bigint PRIMARY KEY, v text, n bigint);
