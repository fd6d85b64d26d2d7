"""
O gerador de movimento: o expediente de um ERP, comprimido em segundos.

Cada método faz UMA mudança numa transação curta (como o ERP faria), grava
`ALTERADO_EM` com a hora do commit e devolve uma `Mudanca` que diz o que o
Contextia deve mostrar quando ela chegar -- e isso que a demo confere lendo o
servidor, para medir quanto tempo o dado levou para ficar visível.
"""

import datetime
import decimal
import itertools
import random
import time

import erp

CENTAVO = decimal.Decimal('0.01')


def reais(valor):
    """Decimal('1234.5') -> 'R$ 1.234,50'."""
    texto = '{:,.2f}'.format(decimal.Decimal(str(valor)).quantize(CENTAVO))
    return 'R$ ' + texto.replace(',', '_').replace('.', ',').replace('_', '.')


class Mudanca:
    """Uma alteração feita no ERP e o que se espera ver no Contextia por causa dela."""

    _numeros = itertools.count(1)

    def __init__(
        self, tipo, dataset, escopos, chave, descricao, esperado=None, remocao=False, ao_vivo=True
    ):
        self.numero = next(self._numeros)
        self.tipo = tipo  # 'inclusao', 'baixa', 'cancelamento', ...
        self.dataset = dataset  # nome normalizado no Contextia
        self.escopos = [str(e) for e in escopos]
        self.chave = chave  # valor de ID
        self.descricao = descricao
        self.esperado = esperado or {}  # campo -> valor que tem de aparecer
        self.remocao = remocao  # DELETE fisico: espera-se que SUMA
        self.ao_vivo = ao_vivo  # False: so a varredura leva
        self.feita_em = time.monotonic()
        self.vista_em = {}  # escopo -> monotonic em que ficou visivel

    @property
    def entregue(self):
        return all(e in self.vista_em for e in self.escopos)

    def latencia(self):
        if not self.entregue or not self.vista_em:
            return None
        return max(self.vista_em.values()) - self.feita_em


class Gerador:
    """Muda o ERP de demonstração. Uma conexão de escrita, transações curtas."""

    def __init__(self, caminho, empresas, semente=7):
        self.conexao = erp.conectar(caminho)
        self.fabrica = erp.Fabrica(semente)
        self.aleatorio = random.Random(semente)
        self.empresas = [int(e) for e in empresas]
        self.tocados = set()  # (tabela, id): uma mudanca por linha, para medir limpo
        self.sequencia = itertools.count(900001)

    def fechar(self):
        self.conexao.close()

    # -- utilidades ----------------------------------------------------------

    def _agora(self):
        momento = datetime.datetime.now()
        return momento, erp.texto_data_hora(momento)

    def _escolher(self, tabela, empresa, onde):
        """Uma linha ainda não tocada pela demo, para cada mudança ser medida sozinha."""
        linhas = self.conexao.execute(
            'SELECT ID FROM %s WHERE EMPRESA_ID = ? AND %s ORDER BY RANDOM() LIMIT 20'
            % (tabela, onde),
            (empresa,),
        ).fetchall()
        for (linha_id,) in linhas:
            if (tabela, linha_id) not in self.tocados:
                self.tocados.add((tabela, linha_id))
                return linha_id
        return None

    def _empresa(self):
        return self.aleatorio.choice(self.empresas)

    def _inserir(self, tabela, valores):
        cursor = self.conexao.execute(erp.INSERTS[tabela], valores)
        self.tocados.add((tabela, cursor.lastrowid))
        return cursor.lastrowid

    # -- as mudancas ----------------------------------------------------------

    def titulo_novo(self):
        empresa = self._empresa()
        momento, _ = self._agora()
        cliente = self.conexao.execute(
            'SELECT ID FROM CLIENTES WHERE EMPRESA_ID = ? ORDER BY RANDOM() LIMIT 1', (empresa,)
        ).fetchone()[0]
        linha = self.fabrica.titulo_receber(
            empresa, cliente, next(self.sequencia), momento, aberto=True
        )
        novo = self._inserir('TITULOS_RECEBER', linha)
        return Mudanca(
            'inclusao',
            'titulos_a_receber',
            [empresa],
            novo,
            'título a receber novo %s de %s' % (linha[2], reais(linha[6])),
            {'SITUACAO': 'A', 'VALOR': linha[6]},
        )

    def baixa(self):
        empresa = self._empresa()
        linha_id = self._escolher('TITULOS_RECEBER', empresa, "SITUACAO = 'A'")
        if linha_id is None:
            return self.titulo_novo()
        _, agora = self._agora()
        self.conexao.execute(
            "UPDATE TITULOS_RECEBER SET SITUACAO = 'P', VALOR_PAGO = VALOR,"
            ' DATA_PAGAMENTO = ?, ALTERADO_EM = ? WHERE ID = ?',
            (agora[:10], agora, linha_id),
        )
        numero, valor = self.conexao.execute(
            'SELECT NUMERO, VALOR FROM TITULOS_RECEBER WHERE ID = ?', (linha_id,)
        ).fetchone()
        return Mudanca(
            'baixa',
            'titulos_a_receber',
            [empresa],
            linha_id,
            'baixa do título %s, %s recebidos (SITUACAO A -> P)' % (numero, reais(valor)),
            {'SITUACAO': 'P', 'VALOR_PAGO': valor},
        )

    def cancelamento(self):
        empresa = self._empresa()
        linha_id = self._escolher('TITULOS_RECEBER', empresa, "SITUACAO = 'A'")
        if linha_id is None:
            return self.titulo_novo()
        _, agora = self._agora()
        self.conexao.execute(
            "UPDATE TITULOS_RECEBER SET SITUACAO = 'C', ALTERADO_EM = ? WHERE ID = ?",
            (agora, linha_id),
        )
        numero = self.conexao.execute(
            'SELECT NUMERO FROM TITULOS_RECEBER WHERE ID = ?', (linha_id,)
        ).fetchone()[0]
        return Mudanca(
            'cancelamento',
            'titulos_a_receber',
            [empresa],
            linha_id,
            "cancelamento do título %s (SITUACAO = 'C': e ALTERACAO, vai ao vivo)" % numero,
            {'SITUACAO': 'C'},
        )

    def conta_a_pagar(self):
        empresa = self._empresa()
        momento, _ = self._agora()
        linha = self.fabrica.titulo_pagar(empresa, next(self.sequencia), momento)
        novo = self._inserir('TITULOS_PAGAR', linha)
        return Mudanca(
            'inclusao',
            'titulos_a_pagar',
            [empresa],
            novo,
            'conta a pagar %s: %s, %s' % (linha[3], linha[1], reais(linha[6])),
            {'VALOR': linha[6]},
        )

    def pagamento(self):
        empresa = self._empresa()
        linha_id = self._escolher('TITULOS_PAGAR', empresa, "SITUACAO = 'A'")
        if linha_id is None:
            return self.conta_a_pagar()
        _, agora = self._agora()
        self.conexao.execute(
            "UPDATE TITULOS_PAGAR SET SITUACAO = 'P', VALOR_PAGO = VALOR,"
            ' DATA_PAGAMENTO = ?, ALTERADO_EM = ? WHERE ID = ?',
            (agora[:10], agora, linha_id),
        )
        numero, valor = self.conexao.execute(
            'SELECT NUMERO, VALOR FROM TITULOS_PAGAR WHERE ID = ?', (linha_id,)
        ).fetchone()
        return Mudanca(
            'baixa',
            'titulos_a_pagar',
            [empresa],
            linha_id,
            'pagamento da duplicata %s, %s' % (numero, reais(valor)),
            {'SITUACAO': 'P', 'VALOR_PAGO': valor},
        )

    def pedido_novo(self):
        empresa = self._empresa()
        momento, _ = self._agora()
        cliente = self.conexao.execute(
            'SELECT ID FROM CLIENTES WHERE EMPRESA_ID = ? ORDER BY RANDOM() LIMIT 1', (empresa,)
        ).fetchone()[0]
        linha = self.fabrica.pedido(empresa, cliente, next(self.sequencia), momento)
        novo = self._inserir('PEDIDOS', linha)
        return Mudanca(
            'inclusao',
            'pedidos_de_venda',
            [empresa],
            novo,
            'pedido %s de %s' % (linha[2], reais(linha[4])),
            {'VALOR_TOTAL': linha[4]},
        )

    def pedido_avanca(self):
        empresa = self._empresa()
        linha_id = self._escolher('PEDIDOS', empresa, 'STATUS_ID IN (1, 2, 3)')
        if linha_id is None:
            return self.pedido_novo()
        _, agora = self._agora()
        self.conexao.execute(
            'UPDATE PEDIDOS SET STATUS_ID = STATUS_ID + 1, ALTERADO_EM = ? WHERE ID = ?',
            (agora, linha_id),
        )
        numero, status = self.conexao.execute(
            'SELECT NUMERO, STATUS_ID FROM PEDIDOS WHERE ID = ?', (linha_id,)
        ).fetchone()
        return Mudanca(
            'alteracao',
            'pedidos_de_venda',
            [empresa],
            linha_id,
            'pedido %s avançou para %s' % (numero, dict(erp.STATUS)[status]),
            {'STATUS_ID': status},
        )

    def cliente_novo(self):
        empresa = self._empresa()
        momento, _ = self._agora()
        linha = self.fabrica.cliente(empresa, momento)
        novo = self._inserir('CLIENTES', linha)
        return Mudanca(
            'inclusao',
            'clientes',
            [empresa],
            novo,
            'cliente novo %s (%s)' % (linha[1], linha[3]),
            {'CPF_CNPJ': linha[3]},
        )

    def limite_de_credito(self):
        empresa = self._empresa()
        linha_id = self._escolher('CLIENTES', empresa, '1 = 1')
        if linha_id is None:
            return self.cliente_novo()
        _, agora = self._agora()
        novo = str((decimal.Decimal(self.aleatorio.randint(1000, 80000)) / 1).quantize(CENTAVO))
        self.conexao.execute(
            'UPDATE CLIENTES SET LIMITE_CREDITO = ?, ALTERADO_EM = ? WHERE ID = ?',
            (novo, agora, linha_id),
        )
        nome = self.conexao.execute(
            'SELECT NOME FROM CLIENTES WHERE ID = ?', (linha_id,)
        ).fetchone()[0]
        return Mudanca(
            'alteracao',
            'clientes',
            [empresa],
            linha_id,
            'limite de credito de %s -> %s' % (nome, reais(novo)),
            {'LIMITE_CREDITO': novo},
        )

    def reajuste_de_preco(self, escopos):
        """Tabela de DOMINIO: a mesma mudança tem de aparecer em TODAS as empresas."""
        linha_id, descricao, preco = self.conexao.execute(
            'SELECT ID, DESCRICAO, PRECO FROM PRODUTOS ORDER BY RANDOM() LIMIT 1'
        ).fetchone()
        novo = (decimal.Decimal(str(preco)) * decimal.Decimal('1.05')).quantize(CENTAVO)
        _, agora = self._agora()
        self.conexao.execute(
            'UPDATE PRODUTOS SET PRECO = ?, ALTERADO_EM = ? WHERE ID = ?',
            (str(novo), agora, linha_id),
        )
        return Mudanca(
            'alteracao',
            'produtos',
            escopos,
            linha_id,
            'reajuste de 5%% em %s: %s -> %s (domínio: vai para as %d empresas)'
            % (descricao, reais(preco), reais(novo), len(escopos)),
            {'PRECO': str(novo)},
        )

    def exclusao_fisica(self):
        """DELETE de verdade: nenhuma coluna de mudanca registra, so a varredura ve."""
        empresa = self._empresa()
        linha_id = self._escolher('TITULOS_RECEBER', empresa, "SITUACAO = 'A'")
        numero = self.conexao.execute(
            'SELECT NUMERO FROM TITULOS_RECEBER WHERE ID = ?', (linha_id,)
        ).fetchone()[0]
        self.conexao.execute('DELETE FROM TITULOS_RECEBER WHERE ID = ?', (linha_id,))
        return Mudanca(
            'exclusao',
            'titulos_a_receber',
            [empresa],
            linha_id,
            'DELETE fisico do titulo %s (ID %s)' % (numero, linha_id),
            remocao=True,
            ao_vivo=False,
        )

    def status_sem_coluna(self, escopos):
        """Tabela sem coluna de mudança: a alteração só viaja na varredura."""
        self.conexao.execute(
            'UPDATE STATUS_PEDIDO SET DESCRICAO = ? WHERE ID = 4', ('Faturado (NF-e autorizada)',)
        )
        return Mudanca(
            'alteracao',
            'status_de_pedido',
            escopos,
            4,
            "STATUS_PEDIDO 4 'Faturado' -> 'Faturado (NF-e autorizada)'"
            ' (tabela SEM coluna de mudança)',
            {'DESCRICAO': 'Faturado (NF-e autorizada)'},
            ao_vivo=False,
        )

    def empresa_nova(self, escala):
        """Cadastra a empresa 50 com clientes e titulos. Devolve {dataset: linhas}."""
        dados = list(erp.EMPRESA_NOVA)
        _, agora = self._agora()
        self.conexao.execute(
            'INSERT INTO EMPRESAS VALUES (?,?,?,?,?,?,?,?,?)',
            self.fabrica.empresa(dados)[:-1] + (agora,),
        )
        momento = datetime.datetime.now()
        quantos = erp.popular_empresa(self.conexao, self.fabrica, dados[0], escala, momento)
        return {
            'clientes': quantos['CLIENTES'],
            'titulos_a_receber': quantos['TITULOS_RECEBER'],
            'titulos_a_pagar': quantos['TITULOS_PAGAR'],
            'pedidos_de_venda': quantos['PEDIDOS'],
        }

    def qualquer(self, escopos_com_chave):
        """Uma mudança sorteada com pesos de expediente: muita baixa, pouco cadastro."""
        opcoes = [
            (self.baixa, 5),
            (self.titulo_novo, 4),
            (self.cancelamento, 2),
            (self.conta_a_pagar, 2),
            (self.pagamento, 2),
            (self.pedido_novo, 3),
            (self.pedido_avanca, 3),
            (self.cliente_novo, 1),
            (self.limite_de_credito, 1),
            (lambda: self.reajuste_de_preco(escopos_com_chave), 1),
        ]
        funcoes = [f for f, peso in opcoes for _ in range(peso)]
        return self.aleatorio.choice(funcoes)()
