// The configuration matrix's program for mysql2 (Node): the same statements
// directly and through the relay (execute() = server-side prepared
// statements, multi-results, LOAD DATA LOCAL), every result printed; the
// two outputs must be equal line for line.
const fs = require('fs');
const mysql = require('mysql2/promise');

const text = (v) => (v === null ? 'NULL' : Buffer.isBuffer(v) ? v.toString('hex') : v instanceof Date ? v.toISOString() : typeof v === 'object' ? JSON.stringify(v) : String(v));

function show(label, rows, fields) {
  // A multi-result reply is an array of results, each rows or an OK.
  const sets = Array.isArray(rows) && rows.length && (Array.isArray(rows[0]) || (rows[0] && rows[0].constructor && rows[0].constructor.name === 'ResultSetHeader')) && Array.isArray(fields) && Array.isArray(fields[0]) ? rows.map((r, i) => [r, fields[i]]) : [[rows, fields]];
  sets.forEach(([r, f], n) => {
    if (!Array.isArray(r)) {
      console.log(label, n, 'affected', r.affectedRows);
      return;
    }
    console.log(label, n, 'columns', (f || []).map((c) => c.name).join(','));
    for (const row of r) console.log(label, n, Object.values(row).map(text).join('|'));
  });
}

(async () => {
  const c = await mysql.createConnection({
    host: process.env.RELAY_HOST,
    port: Number(process.env.RELAY_PORT),
    user: process.env.RELAY_USER,
    password: process.env.RELAY_PASSWORD,
    database: process.env.RELAY_DB,
    multipleStatements: true,
    dateStrings: true,
    supportBigNumbers: true,
  });
  await c.query('CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20), d DECIMAL(10,2), b VARBINARY(8), j JSON, ts DATETIME(3))');
  for (const r of [['a', '1.50', Buffer.from([0, 255]), '{"k": 1}', '2026-11-26 10:00:00.123'], ['\u00e9', null, null, null, null], ['c', '-2.25', Buffer.alloc(0), '[1, 2]', '2026-01-01 00:00:00']]) {
    const [res] = await c.execute('INSERT INTO t (v, d, b, j, ts) VALUES (?, ?, ?, ?, ?)', r);
    console.log('insert id', res.insertId);
  }
  show('select', ...(await c.query('SELECT id, v, d, HEX(b), j, ts FROM t ORDER BY id')));
  show('param select', ...(await c.execute('SELECT id, v, d, ts FROM t WHERE id > ? ORDER BY id', [1])));
  // An OK's info text (mysql2 reads changedRows from it).
  const [upd] = await c.query('UPDATE t SET v = v WHERE id = 1');
  console.log('update', upd.affectedRows, upd.changedRows, `[${upd.info}]`);
  await c.query('CREATE PROCEDURE p() BEGIN SELECT COUNT(*) AS n FROM t; SELECT v FROM t ORDER BY id; END');
  show('call', ...(await c.query('CALL p()')));
  show('multi', ...(await c.query('SELECT 1 AS one; SELECT 2 AS two')));
  await c.beginTransaction();
  await c.query("INSERT INTO t (v) VALUES ('gone')");
  await c.rollback();
  show('after rollback', ...(await c.query('SELECT COUNT(*) FROM t')));
  try {
    await c.query("INSERT INTO t (id, v) VALUES (1, 'dup')");
    console.log('duplicate accepted');
  } catch (e) {
    console.log('error', e.errno);
  }
  show('cast', ...(await c.query("SELECT CAST('12abc' AS INT)")));
  show('warnings', ...(await c.query('SHOW WARNINGS')));
  const [loaded] = await c.query({
    sql: "LOAD DATA LOCAL INFILE 'matrix.csv' INTO TABLE t FIELDS TERMINATED BY ',' (v, d)",
    infileStreamFactory: () => fs.createReadStream(process.env.MATRIX_CSV),
  });
  console.log('loaded', loaded.affectedRows);
  show('after load', ...(await c.query('SELECT COUNT(*), SUM(d) FROM t')));
  show('empty', ...(await c.query('SELECT v FROM t WHERE 0')));
  await c.end();
  console.log('done');
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
