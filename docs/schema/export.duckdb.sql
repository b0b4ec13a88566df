-- relaytrace export --format jsonl read by DuckDB with explicit column types (docs/COLUMNS.md),
-- so nothing is guessed: json stays JSON (not a MAP), id stays VARCHAR (not a UUID), ts is a TIMESTAMP.
-- Load it with `.read docs/schema/export.duckdb.sql` (CLI) or duckdb.sql(open(...).read()) (python), then:
--   select method, quantile_cont(latencyMs, 0.99) from relaytrace_export('fleet.jsonl') group by method;
CREATE OR REPLACE MACRO relaytrace_export(path) AS TABLE
SELECT * FROM read_json(path, format = 'newline_delimited', columns = {
    'trace': 'VARCHAR',
    'traceId': 'VARCHAR',
    'index': 'BIGINT',
    't': 'DOUBLE',
    'ts': 'TIMESTAMP',
    'kind': 'VARCHAR',
    'channel': 'VARCHAR',
    'gen': 'BIGINT',
    'dir': 'VARCHAR',
    'summary': 'VARCHAR',
    'payload': 'VARCHAR',
    'json': 'JSON',
    'type': 'VARCHAR',
    'eventType': 'VARCHAR',
    'method': 'VARCHAR',
    'id': 'VARCHAR',
    'eventId': 'BIGINT',
    'latencyMs': 'DOUBLE',
    'text': 'VARCHAR',
    'jsonError': 'VARCHAR',
    'bytes': 'BIGINT',
    'session': 'VARCHAR',
    'dataBytes': 'BIGINT',
    'preview': 'VARCHAR',
    'dataHex': 'VARCHAR'
});
