#!/usr/bin/env node
// read-base.mjs — read a walkeeper base table with DuckDB, exactly as docs/FORMAT.md §2 tells
// an outside reader to: union the Parquet runs the latest base manifest lists, keep the
// newest row per key (largest _seq, ties: largest _shard), drop the key if that row is a
// tombstone (_deleted), and return the user columns.
//
// Usage:
//   node read-base.mjs KEY PATHS
//
//   KEY    the key column ("id" for generic and rollout stores, "event_id" for datagen)
//   PATHS  a JSON array of Parquet file paths, or "-" to read that array from stdin
//
// Prints one JSON array of row objects, ordered by key, with the user columns only:
//   string -> string, int64 -> decimal string (JSON numbers cannot hold every int64),
//   float64 -> number, bool -> boolean, binary -> base64 string,
//   timestamp -> RFC 3339 string in UTC with microseconds, null -> null.
// Exit status: 0 on success, 1 on a query error, 2 on bad usage.

import { DuckDBInstance } from '@duckdb/node-api';
import { readFileSync } from 'node:fs';

const SYSTEM_COLUMNS = new Set(['_seq', '_shard', '_deleted']);

function usage(msg) {
  process.stderr.write(`read-base.mjs: ${msg}\nusage: node read-base.mjs KEY PATHS_JSON|-\n`);
  process.exit(2);
}

const ident = (s) => '"' + s.replaceAll('"', '""') + '"';
const literal = (s) => "'" + s.replaceAll("'", "''") + "'";

// micros (bigint, since the Unix epoch, UTC) -> "YYYY-MM-DDTHH:MM:SS.ffffffZ"
function rfc3339Micros(micros) {
  let secs = micros / 1000000n;
  let frac = micros % 1000000n;
  if (frac < 0n) {
    frac += 1000000n;
    secs -= 1n;
  }
  const iso = new Date(Number(secs) * 1000).toISOString(); // ...T..:..:..000Z
  return iso.slice(0, iso.length - 5) + '.' + frac.toString().padStart(6, '0') + 'Z';
}

async function main() {
  const [key, pathsArg] = process.argv.slice(2);
  if (!key || !pathsArg || process.argv.length > 4) usage('want exactly two arguments');
  let paths;
  try {
    paths = JSON.parse(pathsArg === '-' ? readFileSync(0, 'utf8') : pathsArg);
  } catch (e) {
    usage(`PATHS is not JSON: ${e.message}`);
  }
  if (!Array.isArray(paths) || !paths.every((p) => typeof p === 'string')) {
    usage('PATHS must be a JSON array of strings');
  }
  if (paths.length === 0) {
    process.stdout.write('[]\n'); // version 0: the empty table
    return;
  }

  const instance = await DuckDBInstance.create(':memory:');
  const conn = await instance.connect();
  try {
    const source = `read_parquet([${paths.map(literal).join(', ')}])`;

    // The runs' schema: user columns in schema order, then _seq, _shard, _deleted.
    const described = await conn.runAndReadAll(`DESCRIBE SELECT * FROM ${source}`);
    const columns = described.getRowObjectsJson().map((r) => ({ name: r.column_name, type: r.column_type }));
    for (const c of [key, ...SYSTEM_COLUMNS]) {
      if (!columns.some((col) => col.name === c)) throw new Error(`column ${c} missing from the runs`);
    }
    const user = columns.filter((c) => !SYSTEM_COLUMNS.has(c.name));
    const timestamps = new Set();
    const select = user.map((c) => {
      if (c.type === 'BLOB') return `base64(${ident(c.name)}) AS ${ident(c.name)}`;
      if (c.type.startsWith('TIMESTAMP')) {
        timestamps.add(c.name);
        return `epoch_us(${ident(c.name)}) AS ${ident(c.name)}`;
      }
      return ident(c.name);
    });

    // docs/FORMAT.md §2, base only.
    const sql = `
      SELECT ${select.join(', ')} FROM (
        SELECT *, row_number() OVER (
          PARTITION BY ${ident(key)} ORDER BY _seq DESC, _shard DESC) AS __rn
        FROM ${source})
      WHERE __rn = 1 AND NOT _deleted
      ORDER BY ${ident(key)}`;
    const reader = await conn.runAndReadAll(sql);
    const rows = reader.getRowObjectsJson(); // BIGINT -> decimal string, DOUBLE -> number
    for (const row of rows) {
      for (const name of timestamps) {
        if (row[name] !== null) row[name] = rfc3339Micros(BigInt(row[name]));
      }
    }
    process.stdout.write(JSON.stringify(rows) + '\n');
  } finally {
    conn.closeSync();
    instance.closeSync();
  }
}

main().catch((e) => {
  process.stderr.write(`read-base.mjs: ${e.stack || e}\n`);
  process.exit(1);
});
