// Loads `profreport --export rows` files into DuckDB (npm's @duckdb/node-api) and checks them
// against profreport's own merge of the same traces. Arguments:
//   NODE_MODULES ROWS.ndjson ROWS.csv REPORT.json MEMORY.json PARQUET
// REPORT.json is `profreport --format json` of the traces, MEMORY.json `profreport --memory
// --format json` of those with allocations. Each function's summed ncalls and primitive calls
// must equal the report's exactly, its summed tottime and cumtime within rounding; the same
// through the CSV; allocation calls and bytes summed over the sites equal the memory report's;
// the rows survive COPY ... TO parquet. Prints one line per mismatch and exits 1, or a JSON
// summary and exits 0.
'use strict';
const fs = require('fs');
const [modules, ndjson, csv, reportPath, memoryPath, parquet] = process.argv.slice(2);
const { DuckDBInstance } = require(modules + '/@duckdb/node-api');

const quote = (s) => "'" + s.replace(/'/g, "''") + "'";

(async () => {
  const db = await DuckDBInstance.create(':memory:');
  const c = await db.connect();
  const rows = async (sql) => (await c.runAndReadAll(sql)).getRowObjectsJson();
  await c.run(`CREATE TABLE j AS SELECT * FROM read_ndjson_auto(${quote(ndjson)})`);
  await c.run(`CREATE TABLE c AS SELECT * FROM read_csv_auto(${quote(csv)}, header = true)`);
  const problems = [];
  const report = JSON.parse(fs.readFileSync(reportPath, 'utf8'));
  const memory = JSON.parse(fs.readFileSync(memoryPath, 'utf8'));
  const close = (x, y) => Math.abs(x - y) <= 1e-7 + 1e-9 * Math.abs(y);
  for (const table of ['j', 'c']) {
    const sums = await rows(`SELECT function, file, line, sum(ncalls) AS ncalls,
        sum(primitive_calls) AS pcalls, sum(tottime) AS tottime, sum(cumtime) AS cumtime
      FROM ${table} WHERE kind = 'function' GROUP BY ALL`);
    const byKey = new Map(sums.map((r) => [`${r.function}|${r.file ?? ''}|${r.line ?? 0}`, r]));
    if (sums.length !== report.functions.length)
      problems.push(`${table}: ${sums.length} functions, the report has ${report.functions.length}`);
    for (const f of report.functions) {
      const r = byKey.get(`${f.name}|${f.file}|${f.line}`);
      if (!r) {
        problems.push(`${table}: no rows of ${f.name}`);
        continue;
      }
      if (Number(r.ncalls) !== f.ncalls || Number(r.pcalls) !== f.primitive_calls)
        problems.push(`${table}: ${f.name}: ${r.ncalls}/${r.pcalls} calls, report ${f.ncalls}/${f.primitive_calls}`);
      if (!close(Number(r.tottime), f.tottime) || !close(Number(r.cumtime), f.cumtime))
        problems.push(`${table}: ${f.name}: times ${r.tottime} ${r.cumtime}, report ${f.tottime} ${f.cumtime}`);
    }
    const [total] = await rows(`SELECT sum(ncalls) AS calls FROM ${table} WHERE kind = 'function'`);
    if (Number(total.calls) !== report.total_calls)
      problems.push(`${table}: ${total.calls} calls in all, report ${report.total_calls}`);
    const [mem] = await rows(`SELECT sum(alloc_calls) AS calls, sum(alloc_bytes) AS bytes
      FROM ${table} WHERE kind = 'memory_site'`);
    if (Number(mem.calls) !== memory.summary.allocations ||
        Number(mem.bytes) !== memory.summary.bytes_allocated)
      problems.push(`${table}: ${mem.calls} allocations of ${mem.bytes} bytes, memory report ` +
                    `${memory.summary.allocations} of ${memory.summary.bytes_allocated}`);
  }
  const [procs] = await rows(`SELECT count(DISTINCT pid) AS n, count(*) AS rows FROM j`);
  await c.run(`COPY j TO ${quote(parquet)} (FORMAT parquet)`);
  const [back] = await rows(`SELECT count(*) AS rows FROM read_parquet(${quote(parquet)})`);
  if (Number(back.rows) !== Number(procs.rows))
    problems.push(`parquet: ${back.rows} rows read back of ${procs.rows}`);
  for (const p of problems) console.log(p);
  if (problems.length) process.exit(1);
  console.log(JSON.stringify({ functions: report.functions.length, rows: Number(procs.rows),
                               processes: Number(procs.n) }));
})().catch((e) => {
  console.log(`duckdb: ${e.message}`);
  process.exit(1);
});
