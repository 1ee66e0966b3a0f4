// mysql2 (Node): the connect-time variable reads in RELAY_VARS_FILE on two
// connections one after the other, each column's metadata and value
// printed (the output must be the same directly and through the relay,
// which answers the second connection's reads itself).
const fs = require('fs');
const mysql = require('mysql2/promise');

(async () => {
  const stmts = fs.readFileSync(process.env.RELAY_VARS_FILE, 'utf8').split('\n').filter((l) => l);
  for (let n = 0; n < 2; n++) {
    const c = await mysql.createConnection({
      host: process.env.RELAY_HOST,
      port: Number(process.env.RELAY_PORT),
      user: process.env.RELAY_USER,
      password: process.env.RELAY_PASSWORD,
    });
    for (const s of stmts) {
      const [rows, fields] = await c.query(s);
      for (const f of fields) {
        console.log(n, f.name, f.columnType, f.characterSet, f.columnLength, f.flags, f.decimals, f.encoding);
      }
      console.log(n, JSON.stringify(rows));
    }
    await c.end();
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
