// mysql2 (Node) through the relay: execute() uses server-side prepared
// statements; transactions; an error. Prints OK and the count.
const mysql = require('mysql2/promise');

(async () => {
  const c = await mysql.createConnection({
    host: process.env.RELAY_HOST,
    port: Number(process.env.RELAY_PORT),
    user: process.env.RELAY_USER,
    password: process.env.RELAY_PASSWORD,
    database: process.env.RELAY_DB,
  });
  await c.query('CREATE TABLE lang_js (id INT PRIMARY KEY, s VARCHAR(50), n DOUBLE)');
  for (const r of [[1, 'a', 1.5], [2, null, 2.5], [3, "c'q\u00e9", 3.5]]) {
    await c.execute('INSERT INTO lang_js VALUES (?, ?, ?)', r);
  }
  await c.beginTransaction();
  await c.query("INSERT INTO lang_js VALUES (4, 'x', 0)");
  await c.rollback();
  await c.beginTransaction();
  await c.query("INSERT INTO lang_js VALUES (5, 'y', 0)");
  await c.commit();
  const [[{ n }]] = await c.query('SELECT COUNT(*) AS n FROM lang_js');
  const [[row]] = await c.execute('SELECT s, n FROM lang_js WHERE id = ?', [3]);
  if (row.s !== "c'q\u00e9" || row.n !== 3.5) throw new Error('wrong row ' + JSON.stringify(row));
  try {
    await c.query('SELECT * FROM missing_table');
    throw new Error('no error for a missing table');
  } catch (e) {
    if (e.errno !== 1146) throw e;
  }
  await c.query('SELECT 1');
  await c.end();
  console.log('OK', n);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
