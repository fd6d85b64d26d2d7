"""
O ERP de demonstracao: um banco SQLite com cara de ERP brasileiro.

Feito para exercitar tudo o que o SDK encontra num cliente de verdade:

    EMPRESAS          o cadastro de onde saem os projetos (a regra de projeto)
                      -- 10, 20, 30 ativas; 40 inativa (a regra recusa);
                         99 "empresa modelo" (em `excluded_scopes`)
    CLIENTES          por empresa, CPF/CNPJ com digito verificador valido
    TITULOS_RECEBER   por empresa; SITUACAO A (aberto), P (pago), C (cancelado)
    TITULOS_PAGAR     por empresa
    PEDIDOS           por empresa
    PRODUTOS          tabela de DOMINIO: sem empresa, vai para todas
    STATUS_PEDIDO     dominio SEM coluna de mudanca: so a varredura a leva

Datas como TEXT 'YYYY-MM-DD HH:MM:SS' com tipo declarado DATETIME (o que um
ERP em SQLite faz, e o que o adaptador sabe comparar); valores como
DECIMAL(14,2) com centavos.

    python3 demo/erp.py --saida demo/saida/erp.sqlite [--escala 1.0]
"""

import argparse
import datetime
import decimal
import os
import random
import sqlite3
import sys

# Empresas: (id, razao social, fantasia, cidade, uf, grupo, ativa).
EMPRESAS = [
    (
        10,
        'Comercial Ipiranga de Alimentos Ltda',
        'Ipiranga Alimentos',
        'São Paulo',
        'SP',
        'varejo',
        'S',
    ),
    (
        20,
        'Distribuidora Serra Azul S.A.',
        'Serra Azul',
        'Belo Horizonte',
        'MG',
        'distribuicao',
        'S',
    ),
    (30, 'Agropecuaria Cerrado Verde Ltda', 'Cerrado Verde', 'Rio Verde', 'GO', 'agro', 'S'),
    (
        40,
        'Metalurgica Vale do Aco Ltda (ENCERRADA)',
        'Vale do Aco',
        'Ipatinga',
        'MG',
        'industria',
        'N',
    ),
    (99, 'EMPRESA MODELO - NÃO USAR', 'Modelo', 'São Paulo', 'SP', None, 'S'),
]

# A empresa que o gerador de movimento cadastra no meio da demo.
EMPRESA_NOVA = (50, 'Farmacias Boa Saúde Ltda', 'Boa Saúde', 'Curitiba', 'PR', 'varejo', 'S')

STATUS = [
    (1, 'Digitado'),
    (2, 'Aprovado'),
    (3, 'Separacao'),
    (4, 'Faturado'),
    (5, 'Entregue'),
    (6, 'Cancelado'),
]

CIDADES = [
    ('São Paulo', 'SP'),
    ('Campinas', 'SP'),
    ('Santos', 'SP'),
    ('Ribeirao Preto', 'SP'),
    ('Rio de Janeiro', 'RJ'),
    ('Niteroi', 'RJ'),
    ('Belo Horizonte', 'MG'),
    ('Uberlandia', 'MG'),
    ('Juiz de Fora', 'MG'),
    ('Curitiba', 'PR'),
    ('Londrina', 'PR'),
    ('Maringa', 'PR'),
    ('Porto Alegre', 'RS'),
    ('Caxias do Sul', 'RS'),
    ('Florianopolis', 'SC'),
    ('Joinville', 'SC'),
    ('Blumenau', 'SC'),
    ('Salvador', 'BA'),
    ('Feira de Santana', 'BA'),
    ('Recife', 'PE'),
    ('Fortaleza', 'CE'),
    ('Goiania', 'GO'),
    ('Anapolis', 'GO'),
    ('Brasilia', 'DF'),
    ('Manaus', 'AM'),
    ('Belem', 'PA'),
    ('Vitoria', 'ES'),
    ('Cuiaba', 'MT'),
    ('Campo Grande', 'MS'),
    ('Natal', 'RN'),
    ('Joao Pessoa', 'PB'),
    ('Maceio', 'AL'),
    ('Teresina', 'PI'),
    ('São Luis', 'MA'),
]

NOMES = [
    'Ana',
    'Maria',
    'Jose',
    'Joao',
    'Antonio',
    'Francisco',
    'Carlos',
    'Paulo',
    'Pedro',
    'Lucas',
    'Luiz',
    'Marcos',
    'Gabriel',
    'Rafael',
    'Daniel',
    'Marcelo',
    'Bruno',
    'Eduardo',
    'Felipe',
    'Juliana',
    'Fernanda',
    'Patricia',
    'Aline',
    'Camila',
    'Bruna',
    'Leticia',
    'Beatriz',
    'Larissa',
    'Vanessa',
    'Mariana',
    'Adriana',
    'Sandra',
    'Claudia',
    'Helena',
    'Rodrigo',
    'Tiago',
    'Vinicius',
]
SOBRENOMES = [
    'Silva',
    'Santos',
    'Oliveira',
    'Souza',
    'Rodrigues',
    'Ferreira',
    'Alves',
    'Pereira',
    'Lima',
    'Gomes',
    'Costa',
    'Ribeiro',
    'Martins',
    'Carvalho',
    'Almeida',
    'Lopes',
    'Soares',
    'Fernandes',
    'Vieira',
    'Barbosa',
    'Rocha',
    'Dias',
    'Nascimento',
    'Andrade',
    'Moreira',
    'Nunes',
    'Marques',
    'Machado',
    'Mendes',
    'Freitas',
    'Cardoso',
    'Ramos',
    'Goncalves',
    'Santana',
    'Teixeira',
]
RAMOS = [
    'Comercio',
    'Distribuidora',
    'Industria',
    'Transportes',
    'Servicos',
    'Atacadista',
    'Supermercado',
    'Construtora',
    'Auto Peças',
    'Farmacia',
    'Padaria',
    'Papelaria',
    'Materiais de Construção',
    'Confeccoes',
    'Laticinios',
    'Agropecuaria',
]
SUFIXOS = ['Ltda', 'Ltda', 'Ltda', 'S.A.', 'ME', 'EIRELI', 'EPP']
FORNECEDORES = [
    'Energisa',
    'Sabesp',
    'Vivo Empresas',
    'Claro',
    'Correios',
    'Transportadora Rápido Sul',
    'Embalagens Paulista',
    'Grafica Central',
    'Contabilidade Exata',
    'Seguradora Porto Forte',
    'Locadora Frota Viva',
    'Papel e Cia Distribuidora',
    'Cooperativa Agricola Uniao',
    'Atacado Bom Preço',
    'Manutenção Predial Alfa',
    'Software Gestao Total',
]
PRODUTOS = [
    ('Arroz tipo 1 5kg', 'UN', '1006.30.21', '24.90'),
    ('Feijao carioca 1kg', 'UN', '0713.33.19', '8.49'),
    ('Oleo de soja 900ml', 'UN', '1507.90.11', '7.29'),
    ('Acucar cristal 5kg', 'UN', '1701.99.00', '19.90'),
    ('Cafe torrado 500g', 'UN', '0901.21.00', '17.80'),
    ('Leite UHT integral 1L', 'UN', '0401.20.10', '4.99'),
    ('Farinha de trigo 1kg', 'UN', '1101.00.10', '5.49'),
    ('Macarrao espaguete 500g', 'UN', '1902.19.00', '4.29'),
    ('Sabao em po 1kg', 'UN', '3402.20.00', '12.90'),
    ('Papel higienico 12 rolos', 'PCT', '4818.10.00', '21.90'),
    ('Parafuso sextavado M8', 'CX', '7318.15.00', '38.50'),
    ('Cimento CP II 50kg', 'SC', '2523.29.10', '36.90'),
    ('Racao bovina 40kg', 'SC', '2309.90.90', '89.00'),
    ('Adubo NPK 50kg', 'SC', '3105.20.00', '142.00'),
    ('Dipirona 500mg 10cp', 'CX', '3004.90.99', '6.75'),
    ('Camiseta algodao', 'UN', '6109.10.00', '29.90'),
]

ESQUEMA = """
CREATE TABLE EMPRESAS (
    EMPRESA_ID     INTEGER PRIMARY KEY,
    RAZAO_SOCIAL   VARCHAR(120) NOT NULL,
    NOME_FANTASIA  VARCHAR(60),
    CNPJ           CHAR(18) NOT NULL,
    CIDADE         VARCHAR(60),
    UF             CHAR(2),
    GRUPO          VARCHAR(30),
    ATIVA          CHAR(1) NOT NULL,
    ALTERADO_EM    DATETIME NOT NULL
);
CREATE TABLE CLIENTES (
    ID             INTEGER PRIMARY KEY,
    EMPRESA_ID     INTEGER NOT NULL,
    NOME           VARCHAR(120) NOT NULL,
    TIPO_PESSOA    CHAR(1) NOT NULL,
    CPF_CNPJ       VARCHAR(18) NOT NULL,
    CIDADE         VARCHAR(60),
    UF             CHAR(2),
    EMAIL          VARCHAR(120),
    TELEFONE       VARCHAR(20),
    LIMITE_CREDITO DECIMAL(14,2),
    ALTERADO_EM    DATETIME NOT NULL
);
CREATE TABLE TITULOS_RECEBER (
    ID             INTEGER PRIMARY KEY,
    EMPRESA_ID     INTEGER NOT NULL,
    CLIENTE_ID     INTEGER NOT NULL,
    NUMERO         VARCHAR(20) NOT NULL,
    PARCELA        INTEGER NOT NULL,
    EMISSAO        DATE NOT NULL,
    VENCIMENTO     DATE NOT NULL,
    VALOR          DECIMAL(14,2) NOT NULL,
    VALOR_PAGO     DECIMAL(14,2),
    DATA_PAGAMENTO DATE,
    SITUACAO       CHAR(1) NOT NULL,
    ALTERADO_EM    DATETIME NOT NULL
);
CREATE TABLE TITULOS_PAGAR (
    ID              INTEGER PRIMARY KEY,
    EMPRESA_ID      INTEGER NOT NULL,
    FORNECEDOR      VARCHAR(120) NOT NULL,
    CNPJ_FORNECEDOR CHAR(18) NOT NULL,
    NUMERO          VARCHAR(20) NOT NULL,
    EMISSAO         DATE NOT NULL,
    VENCIMENTO      DATE NOT NULL,
    VALOR           DECIMAL(14,2) NOT NULL,
    VALOR_PAGO      DECIMAL(14,2),
    DATA_PAGAMENTO  DATE,
    SITUACAO        CHAR(1) NOT NULL,
    ALTERADO_EM     DATETIME NOT NULL
);
CREATE TABLE PEDIDOS (
    ID             INTEGER PRIMARY KEY,
    EMPRESA_ID     INTEGER NOT NULL,
    CLIENTE_ID     INTEGER NOT NULL,
    NUMERO         VARCHAR(20) NOT NULL,
    DATA_PEDIDO    DATE NOT NULL,
    VALOR_TOTAL    DECIMAL(14,2) NOT NULL,
    STATUS_ID      INTEGER NOT NULL,
    ALTERADO_EM    DATETIME NOT NULL
);
CREATE TABLE PRODUTOS (
    ID             INTEGER PRIMARY KEY,
    CODIGO         VARCHAR(20) NOT NULL,
    DESCRICAO      VARCHAR(120) NOT NULL,
    UNIDADE        CHAR(3) NOT NULL,
    NCM            CHAR(10) NOT NULL,
    PRECO          DECIMAL(14,2) NOT NULL,
    ALTERADO_EM    DATETIME NOT NULL
);
CREATE TABLE STATUS_PEDIDO (
    ID             INTEGER PRIMARY KEY,
    DESCRICAO      VARCHAR(60) NOT NULL
);
CREATE INDEX IX_CLIENTES_ALT ON CLIENTES (ALTERADO_EM);
CREATE INDEX IX_TITREC_ALT ON TITULOS_RECEBER (ALTERADO_EM);
CREATE INDEX IX_TITREC_EMP ON TITULOS_RECEBER (EMPRESA_ID);
CREATE INDEX IX_TITPAG_ALT ON TITULOS_PAGAR (ALTERADO_EM);
CREATE INDEX IX_TITPAG_EMP ON TITULOS_PAGAR (EMPRESA_ID);
CREATE INDEX IX_PEDIDOS_ALT ON PEDIDOS (ALTERADO_EM);
CREATE INDEX IX_PEDIDOS_EMP ON PEDIDOS (EMPRESA_ID);
CREATE INDEX IX_CLIENTES_EMP ON CLIENTES (EMPRESA_ID);
CREATE INDEX IX_PRODUTOS_ALT ON PRODUTOS (ALTERADO_EM);
"""

# Linhas por empresa com --escala 1.0. Cinco empresas: ~57 mil linhas no total.
VOLUME = {
    'CLIENTES': 1200,
    'TITULOS_RECEBER': 5000,
    'TITULOS_PAGAR': 2500,
    'PEDIDOS': 2500,
    'PRODUTOS': 1500,
}

CENTAVO = decimal.Decimal('0.01')


# ---------------------------------------------------------------------------
# Documentos com digito verificador valido
# ---------------------------------------------------------------------------


def _digito(numeros, pesos):
    resto = sum(n * p for n, p in zip(numeros, pesos, strict=False)) % 11
    return 0 if resto < 2 else 11 - resto


def cpf(aleatorio):
    """Um CPF com os dois dígitos verificadores certos, formatado."""
    base = [aleatorio.randint(0, 9) for _ in range(9)]
    base.append(_digito(base, range(10, 1, -1)))
    base.append(_digito(base, range(11, 1, -1)))
    t = ''.join(map(str, base))
    return '%s.%s.%s-%s' % (t[:3], t[3:6], t[6:9], t[9:])


def cnpj(aleatorio, filial=1):
    """Um CNPJ (matriz 0001 por padrão) com dígitos verificadores certos, formatado."""
    base = [aleatorio.randint(0, 9) for _ in range(8)] + [int(c) for c in '%04d' % filial]
    base.append(_digito(base, [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]))
    base.append(_digito(base, [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]))
    t = ''.join(map(str, base))
    return '%s.%s.%s/%s-%s' % (t[:2], t[2:5], t[5:8], t[8:12], t[12:])


def documento_valido(texto):
    """Confere os dígitos verificadores de um CPF ou CNPJ formatado."""
    d = [int(c) for c in texto if c.isdigit()]
    if len(d) == 11:
        return d[9] == _digito(d[:9], range(10, 1, -1)) and d[10] == _digito(
            d[:10], range(11, 1, -1)
        )
    if len(d) == 14:
        return d[12] == _digito(d[:12], [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]) and d[13] == _digito(
            d[:13], [6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]
        )
    return False


# ---------------------------------------------------------------------------
# Valores
# ---------------------------------------------------------------------------


def texto_data_hora(momento):
    """Como o ERP grava: 'YYYY-MM-DD HH:MM:SS' (TEXT com tipo declarado DATETIME)."""
    return momento.strftime('%Y-%m-%d %H:%M:%S')


def agora_texto():
    return texto_data_hora(datetime.datetime.now())


def dinheiro(aleatorio, minimo, maximo):
    """Decimal com centavos, gravado como texto para o SQLite não arredondar em float."""
    centavos = aleatorio.randint(int(minimo * 100), int(maximo * 100))
    return str((decimal.Decimal(centavos) / 100).quantize(CENTAVO))


def nome_pessoa(aleatorio):
    return '%s %s %s' % (
        aleatorio.choice(NOMES),
        aleatorio.choice(SOBRENOMES),
        aleatorio.choice(SOBRENOMES),
    )


def nome_empresa(aleatorio):
    return '%s %s %s' % (
        aleatorio.choice(RAMOS),
        aleatorio.choice(SOBRENOMES),
        aleatorio.choice(SUFIXOS),
    )


def telefone(aleatorio):
    return '(%02d) 9%04d-%04d' % (
        aleatorio.choice([11, 21, 31, 41, 51, 61, 62, 71, 81, 85]),
        aleatorio.randint(0, 9999),
        aleatorio.randint(0, 9999),
    )


def _sem_acento_minusculo(texto):
    return ''.join(c for c in texto.lower() if c.isalnum() or c == ' ').replace(' ', '.')


# ---------------------------------------------------------------------------
# Linhas
# ---------------------------------------------------------------------------


class Fabrica:
    """Gera linhas coerentes entre si (cliente existe, título aponta para cliente)."""

    def __init__(self, semente=2026, hoje=None):
        self.aleatorio = random.Random(semente)
        self.hoje = hoje or datetime.datetime.now().replace(microsecond=0)

    def momento_passado(self, dias=720):
        """Um instante nos últimos `dias`, sempre antes de agora."""
        segundos = self.aleatorio.randint(60, dias * 86400)
        return self.hoje - datetime.timedelta(seconds=segundos)

    def empresa(self, dados):
        empresa_id, razao, fantasia, cidade, uf, grupo, ativa = dados
        return (
            empresa_id,
            razao,
            fantasia,
            cnpj(self.aleatorio),
            cidade,
            uf,
            grupo,
            ativa,
            texto_data_hora(self.momento_passado(1500)),
        )

    def cliente(self, empresa_id, momento=None):
        a = self.aleatorio
        cidade, uf = a.choice(CIDADES)
        if a.random() < 0.6:
            nome = nome_pessoa(a)
            tipo, documento = 'F', cpf(a)
        else:
            nome = nome_empresa(a)
            tipo, documento = 'J', cnpj(a, filial=a.choice([1, 1, 1, 2, 3]))
        email = '%s@%s' % (
            _sem_acento_minusculo(nome.split()[0] + ' ' + nome.split()[1]),
            a.choice(['gmail.com', 'outlook.com', 'uol.com.br', 'empresa.com.br', 'terra.com.br']),
        )
        return [
            empresa_id,
            nome,
            tipo,
            documento,
            cidade,
            uf,
            email,
            telefone(a),
            dinheiro(a, 500, 50000),
            texto_data_hora(momento or self.momento_passado()),
        ]

    def titulo_receber(self, empresa_id, cliente_id, sequencia, momento=None, aberto=False):
        a = self.aleatorio
        emissao = (momento or self.momento_passado(540)).date()
        vencimento = emissao + datetime.timedelta(days=a.choice([15, 28, 30, 45, 60, 90]))
        valor = dinheiro(a, 35, 18000)
        if aberto or vencimento > self.hoje.date():
            situacao, pago, data_pago = 'A', None, None
        else:
            sorteio = a.random()
            if sorteio < 0.80:
                situacao, pago = 'P', valor
                data_pago = vencimento + datetime.timedelta(days=a.randint(-5, 20))
                data_pago = min(data_pago, self.hoje.date()).isoformat()
            elif sorteio < 0.90:
                situacao, pago, data_pago = 'C', None, None
            else:
                situacao, pago, data_pago = 'A', None, None
        # A ultima alteracao de um titulo baixado e a baixa, nao a emissao.
        dia = datetime.date.fromisoformat(data_pago) if data_pago else emissao
        alterado = momento or min(
            self.hoje - datetime.timedelta(seconds=1),
            datetime.datetime.combine(dia, datetime.time(8))
            + datetime.timedelta(seconds=a.randint(0, 36000)),
        )
        return [
            empresa_id,
            cliente_id,
            'NF %06d' % sequencia,
            a.randint(1, 3),
            emissao.isoformat(),
            vencimento.isoformat(),
            valor,
            pago,
            data_pago,
            situacao,
            texto_data_hora(alterado),
        ]

    def titulo_pagar(self, empresa_id, sequencia, momento=None):
        a = self.aleatorio
        emissao = (momento or self.momento_passado(540)).date()
        vencimento = emissao + datetime.timedelta(days=a.choice([10, 15, 30, 60]))
        valor = dinheiro(a, 80, 45000)
        if momento is not None or vencimento > self.hoje.date() or a.random() < 0.1:
            situacao, pago, data_pago = 'A', None, None
        else:
            situacao, pago, data_pago = 'P', valor, vencimento.isoformat()
        return [
            empresa_id,
            '%s %s' % (a.choice(FORNECEDORES), a.choice(SUFIXOS)),
            cnpj(a),
            'DUP %07d' % sequencia,
            emissao.isoformat(),
            vencimento.isoformat(),
            valor,
            pago,
            data_pago,
            situacao,
            texto_data_hora(momento or self.momento_passado(540)),
        ]

    def pedido(self, empresa_id, cliente_id, sequencia, momento=None):
        a = self.aleatorio
        quando = momento or self.momento_passado(365)
        return [
            empresa_id,
            cliente_id,
            'PV-%d-%06d' % (empresa_id, sequencia),
            quando.date().isoformat(),
            dinheiro(a, 50, 25000),
            1 if momento is not None else a.choice([2, 3, 4, 5, 5, 5, 5, 6]),
            texto_data_hora(quando),
        ]

    def produto(self, indice):
        a = self.aleatorio
        descricao, unidade, ncm, preco = PRODUTOS[indice % len(PRODUTOS)]
        if indice >= len(PRODUTOS):
            descricao = '%s - lote %d' % (descricao, indice // len(PRODUTOS))
            preco = str(
                (decimal.Decimal(preco) * decimal.Decimal(a.randint(80, 130)) / 100).quantize(
                    CENTAVO
                )
            )
        return [
            indice + 1,
            'P%05d' % (indice + 1),
            descricao,
            unidade,
            ncm,
            preco,
            texto_data_hora(self.momento_passado(900)),
        ]


INSERTS = {
    'CLIENTES': 'INSERT INTO CLIENTES (EMPRESA_ID, NOME, TIPO_PESSOA, CPF_CNPJ, CIDADE, UF,'
    ' EMAIL, TELEFONE, LIMITE_CREDITO, ALTERADO_EM) VALUES (?,?,?,?,?,?,?,?,?,?)',
    'TITULOS_RECEBER': 'INSERT INTO TITULOS_RECEBER (EMPRESA_ID, CLIENTE_ID, NUMERO, PARCELA,'
    ' EMISSAO, VENCIMENTO, VALOR, VALOR_PAGO, DATA_PAGAMENTO, SITUACAO,'
    ' ALTERADO_EM) VALUES (?,?,?,?,?,?,?,?,?,?,?)',
    'TITULOS_PAGAR': 'INSERT INTO TITULOS_PAGAR (EMPRESA_ID, FORNECEDOR, CNPJ_FORNECEDOR,'
    ' NUMERO, EMISSAO, VENCIMENTO, VALOR, VALOR_PAGO, DATA_PAGAMENTO,'
    ' SITUACAO, ALTERADO_EM) VALUES (?,?,?,?,?,?,?,?,?,?,?)',
    'PEDIDOS': 'INSERT INTO PEDIDOS (EMPRESA_ID, CLIENTE_ID, NUMERO, DATA_PEDIDO, VALOR_TOTAL,'
    ' STATUS_ID, ALTERADO_EM) VALUES (?,?,?,?,?,?,?)',
}


def conectar(caminho):
    """Conexão de ESCRITA do ERP (a demo e dona dele; o SDK só lê)."""
    conexao = sqlite3.connect(caminho, timeout=30, isolation_level=None)
    # WAL: o gerador escreve enquanto o ouvinte e o conector leem, sem um
    # bloquear o outro -- como num banco de producao.
    conexao.execute('PRAGMA journal_mode=WAL')
    conexao.execute('PRAGMA busy_timeout=30000')
    return conexao


def popular_empresa(conexao, fabrica, empresa_id, escala=1.0, momento=None):
    """Clientes, titulos e pedidos de uma empresa. Devolve {tabela: linhas}."""
    quantos = {t: max(1, int(VOLUME[t] * escala)) for t in VOLUME}
    conexao.execute('BEGIN')
    try:
        primeiro = conexao.execute('SELECT COALESCE(MAX(ID), 0) FROM CLIENTES').fetchone()[0]
        conexao.executemany(
            INSERTS['CLIENTES'],
            (fabrica.cliente(empresa_id, momento) for _ in range(quantos['CLIENTES'])),
        )
        clientes = range(primeiro + 1, primeiro + quantos['CLIENTES'] + 1)
        a = fabrica.aleatorio
        conexao.executemany(
            INSERTS['TITULOS_RECEBER'],
            (
                fabrica.titulo_receber(empresa_id, a.choice(clientes), n, momento)
                for n in range(1, quantos['TITULOS_RECEBER'] + 1)
            ),
        )
        conexao.executemany(
            INSERTS['TITULOS_PAGAR'],
            (
                fabrica.titulo_pagar(empresa_id, n, momento)
                for n in range(1, quantos['TITULOS_PAGAR'] + 1)
            ),
        )
        conexao.executemany(
            INSERTS['PEDIDOS'],
            (
                fabrica.pedido(empresa_id, a.choice(clientes), n, momento)
                for n in range(1, quantos['PEDIDOS'] + 1)
            ),
        )
        conexao.execute('COMMIT')
    except BaseException:
        conexao.execute('ROLLBACK')
        raise
    quantos.pop('PRODUTOS')
    return quantos


def construir(caminho, escala=1.0, semente=2026):
    """Recria o ERP do zero em `caminho`. Devolve {tabela: linhas}."""
    for sufixo in ('', '-wal', '-shm', '-journal'):
        try:
            os.unlink(caminho + sufixo)
        except FileNotFoundError:
            pass
    os.makedirs(os.path.dirname(os.path.abspath(caminho)), exist_ok=True)
    fabrica = Fabrica(semente)
    conexao = conectar(caminho)
    try:
        conexao.executescript(ESQUEMA)
        conexao.executemany(
            'INSERT INTO EMPRESAS VALUES (?,?,?,?,?,?,?,?,?)',
            [fabrica.empresa(e) for e in EMPRESAS],
        )
        conexao.executemany('INSERT INTO STATUS_PEDIDO VALUES (?,?)', STATUS)
        conexao.executemany(
            'INSERT INTO PRODUTOS VALUES (?,?,?,?,?,?,?)',
            [fabrica.produto(i) for i in range(max(1, int(VOLUME['PRODUTOS'] * escala)))],
        )
        for dados in EMPRESAS:
            popular_empresa(conexao, fabrica, dados[0], escala)
        return contar(conexao)
    finally:
        conexao.close()


def contar(conexao):
    return {
        t: conexao.execute('SELECT COUNT(*) FROM %s' % t).fetchone()[0]
        for t in (
            'EMPRESAS',
            'CLIENTES',
            'TITULOS_RECEBER',
            'TITULOS_PAGAR',
            'PEDIDOS',
            'PRODUTOS',
            'STATUS_PEDIDO',
        )
    }


def main(argv=None):
    p = argparse.ArgumentParser(description='Cria o ERP de demonstração (SQLite).')
    p.add_argument(
        '--saida',
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), 'saida', 'erp.sqlite'),
        help='arquivo SQLite a (re)criar (padrão demo/saida/erp.sqlite)',
    )
    p.add_argument(
        '--escala', type=float, default=1.0, help='multiplica o volume (1.0 = ~57 mil linhas)'
    )
    args = p.parse_args(argv)
    totais = construir(args.saida, args.escala)
    for tabela, n in totais.items():
        print('%-16s %7d linhas' % (tabela, n))
    print('%-16s %7d linhas em %s' % ('total', sum(totais.values()), args.saida))
    return 0


if __name__ == '__main__':
    sys.exit(main())
