-- Um Protheus em miniatura no PostgreSQL e as views que mappings/protheus.json le.
--
-- As tabelas imitam o Protheus: uma por EMPRESA (SE1010 = empresa 01, SE1990 =
-- empresa 99), filial em coluna, apagar e marcar D_E_L_E_T_ = '*', CHAR com
-- preenchimento, S_T_A_M_P_ mantida pelo DBAccess. As views no esquema CTX sao
-- o que o DBA do cliente cria para o usuario somente-leitura do SDK (em SQL
-- Server, troque || por + e o tipo do S_T_A_M_P_ por datetime).

CREATE TABLE "SYS_COMPANY" ("M0_CODIGO" CHAR(2), "M0_CODFIL" CHAR(2), "M0_FILIAL" VARCHAR(41),
    "M0_NOME" VARCHAR(41), "M0_NOMECOM" VARCHAR(60), "M0_CGC" CHAR(14),
    "D_E_L_E_T_" CHAR(1) DEFAULT ' ', "R_E_C_N_O_" SERIAL);
-- Bloqueio de filial nao e coluna padrao do SYS_COMPANY: cada cliente marca de
-- um jeito. Aqui, uma tabela do proprio cliente.
CREATE TABLE "ZZ_FILIAL_BLOQUEADA" ("ZZ_EMPFIL" CHAR(4));

CREATE TABLE "SE1010" ("E1_FILIAL" CHAR(2), "E1_PREFIXO" CHAR(3), "E1_NUM" CHAR(9),
    "E1_PARCELA" CHAR(1), "E1_TIPO" CHAR(3), "E1_CLIENTE" CHAR(6), "E1_LOJA" CHAR(2),
    "E1_NOMCLI" VARCHAR(20), "E1_NATUREZ" CHAR(10), "E1_EMISSAO" CHAR(8), "E1_VENCREA" CHAR(8),
    "E1_VALOR" NUMERIC(16,2), "E1_SALDO" NUMERIC(16,2), "E1_BAIXA" CHAR(8), "E1_HIST" VARCHAR(40),
    "D_E_L_E_T_" CHAR(1) DEFAULT ' ', "R_E_C_N_O_" SERIAL, "S_T_A_M_P_" TIMESTAMP);
CREATE TABLE "SE1990" (LIKE "SE1010" INCLUDING DEFAULTS);
CREATE TABLE "SE2010" ("E2_FILIAL" CHAR(2), "E2_PREFIXO" CHAR(3), "E2_NUM" CHAR(9),
    "E2_PARCELA" CHAR(1), "E2_TIPO" CHAR(3), "E2_FORNECE" CHAR(6), "E2_LOJA" CHAR(2),
    "E2_NOMFOR" VARCHAR(20), "E2_NATUREZ" CHAR(10), "E2_EMISSAO" CHAR(8), "E2_VENCREA" CHAR(8),
    "E2_VALOR" NUMERIC(16,2), "E2_SALDO" NUMERIC(16,2), "E2_BAIXA" CHAR(8),
    "D_E_L_E_T_" CHAR(1) DEFAULT ' ', "R_E_C_N_O_" SERIAL, "S_T_A_M_P_" TIMESTAMP);
-- SA1 compartilhada: A1_FILIAL em branco.
CREATE TABLE "SA1010" ("A1_FILIAL" CHAR(2) DEFAULT '  ', "A1_COD" CHAR(6), "A1_LOJA" CHAR(2),
    "A1_NOME" VARCHAR(60), "A1_NREDUZ" VARCHAR(20), "A1_CGC" CHAR(14), "A1_MUN" VARCHAR(60),
    "A1_EST" CHAR(2), "A1_LC" NUMERIC(14,2), "A1_MSBLQL" CHAR(1),
    "D_E_L_E_T_" CHAR(1) DEFAULT ' ', "R_E_C_N_O_" SERIAL, "S_T_A_M_P_" TIMESTAMP);
CREATE TABLE "SC5010" ("C5_FILIAL" CHAR(2), "C5_NUM" CHAR(6), "C5_CLIENTE" CHAR(6),
    "C5_LOJACLI" CHAR(2), "C5_EMISSAO" CHAR(8), "C5_CONDPAG" CHAR(3), "C5_NOTA" CHAR(9),
    "C5_SERIE" CHAR(3), "D_E_L_E_T_" CHAR(1) DEFAULT ' ', "R_E_C_N_O_" SERIAL,
    "S_T_A_M_P_" TIMESTAMP);
CREATE TABLE "SC6010" ("C6_FILIAL" CHAR(2), "C6_NUM" CHAR(6), "C6_ITEM" CHAR(2),
    "C6_VALOR" NUMERIC(16,2), "D_E_L_E_T_" CHAR(1) DEFAULT ' ', "R_E_C_N_O_" SERIAL);
CREATE TABLE "SX5010" ("X5_FILIAL" CHAR(2) DEFAULT '  ', "X5_TABELA" CHAR(2),
    "X5_CHAVE" CHAR(6), "X5_DESCRI" VARCHAR(55), "D_E_L_E_T_" CHAR(1) DEFAULT ' ',
    "R_E_C_N_O_" SERIAL);

INSERT INTO "SYS_COMPANY" ("M0_CODIGO", "M0_CODFIL", "M0_FILIAL", "M0_NOME", "M0_NOMECOM",
                           "M0_CGC", "D_E_L_E_T_") VALUES
    ('01', '01', 'MATRIZ', 'DISTRIBUIDORA EXEMPLO', 'DISTRIBUIDORA EXEMPLO LTDA - MATRIZ', '11222333000181', ' '),
    ('01', '02', 'FILIAL CAMPINAS', 'DISTRIBUIDORA EXEMPLO', 'DISTRIBUIDORA EXEMPLO LTDA - CAMPINAS', '11222333000262', ' '),
    ('01', '03', 'FILIAL FECHADA', 'DISTRIBUIDORA EXEMPLO', 'DISTRIBUIDORA EXEMPLO LTDA - SANTOS', '11222333000343', ' '),
    ('01', '04', 'FILIAL APAGADA', 'DISTRIBUIDORA EXEMPLO', 'DISTRIBUIDORA EXEMPLO LTDA - VELHA', '11222333000424', '*'),
    ('99', '01', 'TESTE', 'EMPRESA TESTE', 'EMPRESA TESTE', '00000000000000', ' ');
INSERT INTO "ZZ_FILIAL_BLOQUEADA" VALUES ('0103');

INSERT INTO "SE1010" ("E1_FILIAL", "E1_PREFIXO", "E1_NUM", "E1_PARCELA", "E1_TIPO", "E1_CLIENTE",
    "E1_LOJA", "E1_NOMCLI", "E1_NATUREZ", "E1_EMISSAO", "E1_VENCREA", "E1_VALOR", "E1_SALDO",
    "E1_BAIXA", "E1_HIST", "D_E_L_E_T_", "S_T_A_M_P_") VALUES
    ('01', '1  ', '000000101', 'A', 'NF ', '000001', '01', 'MERCADO BOM', '1101      ', '20260901', '20261001', 1500.00, 1500.00, '        ', 'VENDA', ' ', '2026-09-01 10:00:00'),
    ('01', '1  ', '000000101', 'B', 'NF ', '000001', '01', 'MERCADO BOM', '1101      ', '20260901', '20261101', 1500.00, 0.00, '20261030', 'VENDA', ' ', '2026-10-30 16:20:00'),
    ('01', '1  ', '000000102', ' ', 'NF ', '000002', '01', 'PADARIA SOL', '1101      ', '20260905', '20260905', 320.50, 0.00, '20260905', 'A VISTA', ' ', '2026-09-05 09:00:00'),
    ('01', '1  ', '000000103', ' ', 'NF ', '000002', '01', 'PADARIA SOL', '1101      ', '20260906', '20261006', 99.90, 99.90, '        ', 'CANCELADA', '*', '2026-09-07 08:00:00'),
    ('02', '2  ', '000000050', ' ', 'DP ', '000001', '02', 'MERCADO BOM', '1101      ', '20260910', '20261010', 780.00, 780.00, '        ', 'DUPLICATA', ' ', '2026-09-10 11:00:00');
INSERT INTO "SE1990" ("E1_FILIAL", "E1_PREFIXO", "E1_NUM", "E1_PARCELA", "E1_TIPO", "E1_CLIENTE",
    "E1_LOJA", "E1_NOMCLI", "E1_NATUREZ", "E1_EMISSAO", "E1_VENCREA", "E1_VALOR", "E1_SALDO",
    "E1_BAIXA", "E1_HIST", "S_T_A_M_P_") VALUES
    ('01', 'TST', '000000001', ' ', 'NF ', '999999', '01', 'TESTE', '1101      ', '20260901', '20261001', 1.00, 1.00, '        ', 'TESTE', '2026-09-01 10:00:00');
INSERT INTO "SE2010" ("E2_FILIAL", "E2_PREFIXO", "E2_NUM", "E2_PARCELA", "E2_TIPO", "E2_FORNECE",
    "E2_LOJA", "E2_NOMFOR", "E2_NATUREZ", "E2_EMISSAO", "E2_VENCREA", "E2_VALOR", "E2_SALDO",
    "E2_BAIXA", "S_T_A_M_P_") VALUES
    ('01', 'NFE', '000004567', ' ', 'NF ', '000010', '01', 'FORNECEDOR A', '2101      ', '20260902', '20261002', 5000.00, 5000.00, '        ', '2026-09-02 14:00:00');
INSERT INTO "SA1010" ("A1_COD", "A1_LOJA", "A1_NOME", "A1_NREDUZ", "A1_CGC", "A1_MUN", "A1_EST",
    "A1_LC", "A1_MSBLQL", "S_T_A_M_P_") VALUES
    ('000001', '01', 'MERCADO BOM PRECO LTDA', 'MERCADO BOM', '44555666000199', 'SAO PAULO', 'SP', 10000.00, '2', '2026-08-01 08:00:00'),
    ('000001', '02', 'MERCADO BOM PRECO LTDA - LOJA 2', 'MERCADO BOM', '44555666000270', 'CAMPINAS', 'SP', 5000.00, '2', '2026-08-01 08:00:00'),
    ('000002', '01', 'PADARIA SOL NASCENTE ME', 'PADARIA SOL', '77888999000155', 'SAO PAULO', 'SP', 800.00, '1', '2026-08-15 17:30:00');
INSERT INTO "SC5010" ("C5_FILIAL", "C5_NUM", "C5_CLIENTE", "C5_LOJACLI", "C5_EMISSAO", "C5_CONDPAG",
    "C5_NOTA", "C5_SERIE", "S_T_A_M_P_") VALUES
    ('01', '000321', '000001', '01', '20260901', '030', '000000101', '1  ', '2026-09-01 10:00:00'),
    ('01', '000322', '000002', '01', '20260920', '001', '         ', '   ', '2026-09-20 15:00:00');
INSERT INTO "SC6010" ("C6_FILIAL", "C6_NUM", "C6_ITEM", "C6_VALOR") VALUES
    ('01', '000321', '01', 2000.00), ('01', '000321', '02', 1000.00), ('01', '000322', '01', 45.00);
INSERT INTO "SX5010" ("X5_TABELA", "X5_CHAVE", "X5_DESCRI") VALUES
    ('05', 'NF    ', 'NOTA FISCAL'), ('05', 'DP    ', 'DUPLICATA'),
    ('05', 'RA    ', 'RECEBIMENTO ANTECIPADO'), ('05', 'NCC   ', 'NOTA DE CREDITO AO CLIENTE'),
    ('13', 'XX    ', 'OUTRA TABELA DO SX5');

-- ---------------------------------------------------------------- as views
CREATE SCHEMA "CTX";

CREATE VIEW "CTX"."VW_CTX_FILIAIS" AS
SELECT c."M0_CODIGO" || c."M0_CODFIL" AS "CTX_ESCOPO", c."M0_NOME", c."M0_NOMECOM",
       c."M0_FILIAL", c."M0_CGC", c."D_E_L_E_T_",
       CASE WHEN b."ZZ_EMPFIL" IS NULL THEN 'N' ELSE 'S' END AS "CTX_BLOQUEADA"
  FROM "SYS_COMPANY" c
  LEFT JOIN "ZZ_FILIAL_BLOQUEADA" b ON b."ZZ_EMPFIL" = c."M0_CODIGO" || c."M0_CODFIL";

-- Uma linha por tabela fisica de empresa, com o codigo da empresa acrescentado.
-- As linhas apagadas (D_E_L_E_T_ = '*') ficam NA view, com a marca: o mapeamento
-- declara "deleted_when" e o SDK as manda como remocao assim que a marca muda o
-- S_T_A_M_P_ (o ao-vivo ve a exclusao so com SELECT). Filtrada aqui, a linha
-- apagada so sairia do Contextia na varredura.
CREATE VIEW "CTX"."VW_CTX_SE1" AS
SELECT '01' || "E1_FILIAL" AS "CTX_ESCOPO",
       "E1_PREFIXO" || "E1_NUM" || "E1_PARCELA" || "E1_TIPO" AS "CTX_CHAVE",
       "E1_PREFIXO", "E1_NUM", "E1_PARCELA", "E1_TIPO", "E1_CLIENTE", "E1_LOJA", "E1_NOMCLI",
       "E1_NATUREZ", "E1_EMISSAO", "E1_VENCREA", "E1_VALOR", "E1_SALDO", "E1_BAIXA", "E1_HIST",
       "D_E_L_E_T_", "S_T_A_M_P_"
  FROM "SE1010"
UNION ALL
SELECT '99' || "E1_FILIAL", "E1_PREFIXO" || "E1_NUM" || "E1_PARCELA" || "E1_TIPO",
       "E1_PREFIXO", "E1_NUM", "E1_PARCELA", "E1_TIPO", "E1_CLIENTE", "E1_LOJA", "E1_NOMCLI",
       "E1_NATUREZ", "E1_EMISSAO", "E1_VENCREA", "E1_VALOR", "E1_SALDO", "E1_BAIXA", "E1_HIST",
       "D_E_L_E_T_", "S_T_A_M_P_"
  FROM "SE1990";

CREATE VIEW "CTX"."VW_CTX_SE2" AS
SELECT '01' || "E2_FILIAL" AS "CTX_ESCOPO",
       "E2_PREFIXO" || "E2_NUM" || "E2_PARCELA" || "E2_TIPO" AS "CTX_CHAVE",
       "E2_PREFIXO", "E2_NUM", "E2_PARCELA", "E2_TIPO", "E2_FORNECE", "E2_LOJA", "E2_NOMFOR",
       "E2_NATUREZ", "E2_EMISSAO", "E2_VENCREA", "E2_VALOR", "E2_SALDO", "E2_BAIXA",
       "D_E_L_E_T_", "S_T_A_M_P_"
  FROM "SE2010";

-- SA1 e compartilhada: repetida para cada filial da empresa 01.
CREATE VIEW "CTX"."VW_CTX_SA1" AS
SELECT c."M0_CODIGO" || c."M0_CODFIL" AS "CTX_ESCOPO", a."A1_COD" || a."A1_LOJA" AS "CTX_CHAVE",
       a."A1_COD", a."A1_LOJA", a."A1_NOME", a."A1_NREDUZ", a."A1_CGC", a."A1_MUN", a."A1_EST",
       a."A1_LC", a."A1_MSBLQL", a."D_E_L_E_T_", a."S_T_A_M_P_"
  FROM "SA1010" a
  JOIN "SYS_COMPANY" c ON c."M0_CODIGO" = '01' AND c."D_E_L_E_T_" = ' ';

-- O total soma so os itens vivos; o pedido apagado fica, com a marca.
CREATE VIEW "CTX"."VW_CTX_SC5" AS
SELECT '01' || p."C5_FILIAL" AS "CTX_ESCOPO", p."C5_NUM" AS "CTX_CHAVE", p."C5_NUM",
       p."C5_CLIENTE", p."C5_LOJACLI", p."C5_EMISSAO", p."C5_CONDPAG", p."C5_NOTA", p."C5_SERIE",
       (SELECT COALESCE(SUM(i."C6_VALOR"), 0) FROM "SC6010" i
         WHERE i."C6_FILIAL" = p."C5_FILIAL" AND i."C6_NUM" = p."C5_NUM"
           AND i."D_E_L_E_T_" = ' ') AS "CTX_VALOR_TOTAL",
       p."D_E_L_E_T_", p."S_T_A_M_P_"
  FROM "SC5010" p;

CREATE VIEW "CTX"."VW_CTX_TIPOS_TITULO" AS
SELECT TRIM("X5_CHAVE") AS "X5_CHAVE", "X5_DESCRI"
  FROM "SX5010" WHERE "X5_TABELA" = '05' AND "D_E_L_E_T_" = ' ';
