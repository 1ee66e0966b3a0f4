-- A schema with every column type and the awkward values dumps must carry.
CREATE TABLE every_type (
  id INT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  ti TINYINT, si SMALLINT UNSIGNED, mi MEDIUMINT, bi BIGINT, bu BIGINT UNSIGNED,
  de DECIMAL(30,10), fl FLOAT, db DOUBLE, bt BIT(13), bo BOOLEAN,
  dt DATE, tm TIME(3), dtt DATETIME(6), ts TIMESTAMP NULL DEFAULT NULL, yr YEAR,
  ch CHAR(10), vc VARCHAR(300), tx TEXT, mt MEDIUMTEXT, lt LONGTEXT,
  bn BINARY(4), vb VARBINARY(64), bl BLOB, lb LONGBLOB,
  en ENUM('a','b','c d'), st SET('x','y','z'),
  js JSON, ip INET6, uu UUID,
  gm POINT,
  KEY idx_vc (vc(20)), KEY idx_de_dt (de, dt)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

INSERT INTO every_type (ti,si,mi,bi,bu,de,fl,db,bt,bo,dt,tm,dtt,ts,yr,ch,vc,tx,mt,lt,bn,vb,bl,lb,en,st,js,ip,uu,gm) VALUES
 (-128, 65535, -8388608, -9223372036854775808, 18446744073709551615, -12345678901234567890.0123456789, 3.5, -2.25e-300, b'1010101010101', TRUE,
  '2024-02-29', '-838:59:59.999', '1970-01-01 00:00:01.000001', '2038-01-19 03:14:07', 2155,
  'ab''c', 'quote '' and "double" and back\\slash and tab\tnewline\nand cr\r and zero\0end', 'emoji 😀🚀 ünïcödé 日本語', REPEAT('m', 70000), REPEAT('long;text', 20000),
  0x00FF0A27, 0x5C275C0D0A1A00, 0x00010203FF, REPEAT(0xDEADBEEF00, 5000),
  'c d', 'x,z', '{"k": [1, "two", null, {"n": 3.5}], "s": "semi;colon"}', '::ffff:1.2.3.4', '123e4567-e89b-12d3-a456-426655440000',
  ST_GeomFromText('POINT(1 2)')),
 (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (0, 0, 0, 0, 0, 0, 0, 0, b'0', FALSE, '1000-01-01', '00:00:00', '9999-12-31 23:59:59.999999', NULL, 1901,
  '', '', '', '', '', 0x00000000, '', '', '', 'a', '', '[]', '::', '00000000-0000-0000-0000-000000000000', NULL),
 (1, 2, 3, 4, 5, 6.5, 7.25, 8.125, b'1', TRUE, '2000-01-01', '12:34:56', '2000-01-01 12:00:00', '2000-01-01 12:00:00', 2000,
  'NULL', 'N', '\\N', '--  not a comment', '/* nor this */ # nor this', 0x4E554C4C, 'DELIMITER ;;', ';;', '*/', 'b', 'y', '"str"', '2001:db8::1', 'ffffffff-ffff-ffff-ffff-ffffffffffff', NULL);

-- Enough rows to make several extended INSERT statements.
CREATE TABLE many (
  id INT NOT NULL PRIMARY KEY,
  k INT NOT NULL,
  c CHAR(120) NOT NULL,
  pad CHAR(60) NOT NULL,
  KEY k_1 (k)
) ENGINE=InnoDB;
INSERT INTO many SELECT seq, seq * 7 % 1000, CONCAT('row-', seq, '-', REPEAT('x', seq % 100)), REPEAT(CHAR(65 + seq % 26), 60) FROM seq_1_to_20000;

CREATE TABLE `we``ird name` (`col; with` VARCHAR(20) PRIMARY KEY, `üñí` INT) ENGINE=InnoDB;
INSERT INTO `we``ird name` VALUES ('a;b', 1), ('c''d', 2), ('e\\f', NULL);

CREATE TABLE audit (id INT AUTO_INCREMENT PRIMARY KEY, msg VARCHAR(100)) ENGINE=InnoDB;
INSERT INTO audit (msg) VALUES ('pre-existing');

CREATE TABLE parent (id INT PRIMARY KEY) ENGINE=InnoDB;
CREATE TABLE child (id INT PRIMARY KEY, parent_id INT, KEY (parent_id), CONSTRAINT fk_p FOREIGN KEY (parent_id) REFERENCES parent (id)) ENGINE=InnoDB;
INSERT INTO parent VALUES (1), (2);
INSERT INTO child VALUES (10, 1), (11, 2), (12, NULL);

CREATE TABLE myisam_t (id INT PRIMARY KEY, v VARCHAR(10)) ENGINE=MyISAM;
INSERT INTO myisam_t VALUES (1, 'mi');

-- A trigger that would double-count if it fired on the dump's rows.
DELIMITER ;;
CREATE TRIGGER many_ai AFTER INSERT ON many FOR EACH ROW BEGIN
  INSERT INTO audit (msg) VALUES (CONCAT('inserted; ', NEW.id));
END;;
CREATE PROCEDURE p_count(OUT n INT) BEGIN
  SELECT COUNT(*) INTO n FROM many; -- a comment; with a semicolon
  SELECT 'a '';'' string';
END;;
CREATE FUNCTION f_double(x INT) RETURNS INT DETERMINISTIC RETURN x * 2;;
CREATE EVENT ev_nothing ON SCHEDULE EVERY 1 DAY STARTS '2030-01-01 00:00:00' DISABLE DO UPDATE audit SET msg = msg WHERE 0;;
DELIMITER ;

CREATE VIEW v_many AS SELECT k, COUNT(*) AS n FROM many GROUP BY k;
CREATE VIEW v_on_view AS SELECT SUM(n) AS total FROM v_many;
