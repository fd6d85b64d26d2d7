"""
`python3 ouvinte.py --autoteste` -- prova a lógica que não da para ver a olho.

São justamente as partes onde um erro perde dado em silêncio: a marca de
água, o repartir por empresa e a montagem do WHERE. Roda num `python3 -S` sem
pacote nenhum, na máquina de quem escreve o mapeamento, antes de tocar na
origem do cliente: prova que da trabalho não é rodada.
"""

from __future__ import annotations

import datetime
import functools
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # so o mypy: o `python3 -S` nem le isto
    from collections.abc import Callable, Iterable

    from contextia_sync.tipos import DatasetDoMapa, Mapa


class _Placar:
    """As falhas do autoteste; cada prova imprime a sua linha (ok/FALHOU)."""

    def __init__(self) -> None:
        self.falhas: list[str] = []

    def igual(self, rotulo: str, obtido: object, esperado: object) -> None:
        if obtido != esperado:
            self.falhas.append('%s: obtido %r, esperado %r' % (rotulo, obtido, esperado))
            print('  FALHOU  %s' % rotulo)
        else:
            print('  ok      %s' % rotulo)

    def recusa(
        self,
        rotulo: str,
        funcao: Callable[[], object],
        excecao: type[BaseException],
        contem: Iterable[str] = (),
    ) -> None:
        try:
            funcao()
        except excecao as erro:
            faltam = [c for c in contem if c not in str(erro)]
            if faltam:
                self.falhas.append('%s: recusou sem dizer %r' % (rotulo, faltam))
                print('  FALHOU  %s' % rotulo)
            else:
                print('  ok      %s' % rotulo)
            return
        self.falhas.append('%s: NÃO recusou' % rotulo)
        print('  FALHOU  %s' % rotulo)


def _marca(p: _Placar) -> None:
    """As regras da marca de água: a mesma tabela que o pytest usa (casos_marca.py)."""
    from contextia_sync.captura import marca_agua
    from contextia_sync.captura.casos_marca import CASOS

    print('marca de água')
    for rotulo, funcao, args, nomeados, esperado in CASOS:
        p.igual(rotulo, getattr(marca_agua, funcao)(*args, **nomeados), esperado)


def _atrasadas(p: _Placar) -> None:
    from contextia_sync.captura.marca_agua import atraso_preocupante, contar_atrasadas, identidade

    print('\nchegadas atrasadas')
    marca = datetime.datetime(2026, 9, 2, 10, 0, 0)
    ja = {'ID': 1, 'ALT': datetime.datetime(2026, 9, 2, 9, 59)}
    vistos = {identidade(ja, 'ALT', 'ID'): '2026-09-02T09:59:00'}
    lidas = [
        ja,
        {'ID': 2, 'ALT': datetime.datetime(2026, 9, 2, 9, 58)},  # atrasada 120s
        {'ID': 3, 'ALT': datetime.datetime(2026, 9, 2, 10, 1)},
    ]  # normal
    quantas, maior, novas = contar_atrasadas(lidas, 'ALT', 'ID', marca, vistos)
    p.igual('releitura da mesma linha não conta; a nova abaixo da marca conta', quantas, 1)
    p.igual('o maior atraso e marca - valor', maior, 120.0)
    p.igual('só as ainda não vistas entram na memória', len(novas), 2)
    alterada = {'ID': 1, 'ALT': datetime.datetime(2026, 9, 2, 9, 59, 30)}
    p.igual(
        'mesma chave com valor novo e outra versão da linha',
        contar_atrasadas([alterada], 'ALT', 'ID', marca, vistos)[0],
        1,
    )
    p.igual(
        'sem memória (primeiro ciclo) não conta nada',
        contar_atrasadas(lidas, 'ALT', 'ID', marca, None)[0],
        0,
    )
    p.igual(
        'atraso acima de metade da folga e preocupante', atraso_preocupante(100, marca, 180), True
    )
    p.igual('abaixo da metade, não', atraso_preocupante(80, marca, 180), False)


def _escopos(p: _Placar) -> None:
    from contextia_sync.captura.ao_vivo import ErroAoVivo, agrupar_por_escopo, datasets_ao_vivo

    print('\nrepartir por empresa')
    mapa: Mapa = {'defaults': {'scope_column': 'EMPRESA_ID', 'key': 'ID'}, 'datasets': []}
    row: DatasetDoMapa
    row = {'dataset': 'contas', 'source_object': 'V', 'columns': ['ID', 'EMPRESA_ID']}
    chaves = {'297': 'ctx_a', '301': 'ctx_b'}
    reparticao = agrupar_por_escopo(
        [
            {'ID': 1, 'EMPRESA_ID': 297},
            {'ID': 2, 'EMPRESA_ID': '301'},
            {'ID': 3, 'EMPRESA_ID': 999},
            {'ID': 4, 'EMPRESA_ID': None},
            {'ID': 5, 'EMPRESA_ID': 297.0},
            {'ID': 6, 'EMPRESA_ID': '297 '},
            {'ID': 7, 'EMPRESA_ID': '297\x1c'},
            {'ID': 8, 'EMPRESA_ID': '297\u00a0'},
            {'ID': 9, 'EMPRESA_ID': '\uff12\uff19\uff17'},
        ],
        mapa,
        row,
        chaves,
    )
    grupos = reparticao.grupos
    p.igual('número 297 casa com a chave "297"', sorted(grupos), ['297', '301'])
    p.igual('297, 297.0 e "297 " são a mesma empresa', len(grupos['297']), 3)
    p.igual('escopo sem chave não inventa destino', reparticao.sem_chave, ['(vazio)', '999'])
    p.igual(
        '"297\\x1c", "297\\xa0" e "２９７" não são a 297: código inválido',
        sorted(reparticao.invalidos),
        ['297\x1c', '297\xa0', '\uff12\uff19\uff17'],
    )
    dominio: DatasetDoMapa
    dominio = {'dataset': 'status', 'source_object': 'V', 'scope_column': None, 'columns': ['ID']}
    grupos = agrupar_por_escopo(iter([{'ID': 1}]), mapa, dominio, chaves).grupos
    p.igual('tabela de domínio vai para TODAS as empresas', sorted(grupos), ['297', '301'])
    p.igual(
        'e com o mesmo registro em cada uma', [len(v) for _, v in sorted(grupos.items())], [1, 1]
    )

    print('\nque datasets ficam ao vivo')
    mapa2: Mapa = {
        'defaults': {'watch_column': 'ALT'},
        'datasets': [
            {'dataset': 'a', 'source_object': 'V', 'columns': ['ID', 'ALT']},
            {'dataset': 'b', 'source_object': 'V', 'columns': ['ID'], 'watch_column': None},
            {'dataset': 'c', 'source_object': 'V', 'columns': ['ID', 'M'], 'watch_column': 'M'},
            {'dataset': 'd', 'source_object': 'V', 'columns': ['ID', 'OUTRA']},
        ],
    }
    vivos, fora = datasets_ao_vivo(mapa2)
    p.igual(
        'herda do defaults e aceita o especifico', [d.row['dataset'] for d in vivos], ['a', 'c']
    )
    p.igual(
        'null no dataset desliga; view sem a coluna herdada sai sem derrubar',
        [n for n, _ in fora],
        ['b', 'd'],
    )
    p.igual('e o motivo diz que a coluna foi herdada', 'herdada' in dict(fora)['d'], True)
    p.recusa(
        'watch_column DECLARADA fora de columns ABORTA',
        lambda: datasets_ao_vivo(
            {
                'defaults': {},
                'datasets': [
                    {'dataset': 'x', 'source_object': 'V', 'columns': ['ID'], 'watch_column': 'ALT'}
                ],
            }
        ),
        ErroAoVivo,
        contem=('columns',),
    )


def _where(p: _Placar) -> None:
    """O WHERE que o adaptador monta: plano puro, e os dialetos reais se houver SQLAlchemy."""
    print('\nWHERE montado pelo adaptador')
    try:
        from contextia_sync.origem import filtro
    except ImportError as erro:
        p.falhas.append('contextia_sync/filtro.py não importa (%s)' % erro)
        print('  FALHOU  contextia_sync/filtro.py não importa: %s' % erro)
        return
    _provar_where(p, filtro)


def _provar_where(p: _Placar, filtro: ModuleType) -> None:
    casos = [
        (
            'só escopo (identico ao de antes do ouvinte)',
            ('EMPRESA_ID', 297),
            None,
            'EMPRESA_ID = %s',
            (297,),
            'EMPRESA_ID = :escopo',
            {'escopo': 297},
        ),
        ('só mudança', None, ('ALT', 'x'), 'ALT > %s', ('x',), 'ALT > :desde', {'desde': 'x'}),
        (
            'os dois, escopo primeiro',
            ('E', 1),
            ('ALT', 'x'),
            'E = %s AND ALT > %s',
            (1, 'x'),
            'E = :escopo AND ALT > :desde',
            {'escopo': 1, 'desde': 'x'},
        ),
    ]
    for rotulo, escopo, desde, sql_f, val_f, sql_n, val_n in casos:
        condicoes = filtro.plano(scope=escopo, since=desde)
        p.igual('mysql (%%s): %s' % rotulo, filtro.descrever(condicoes, 'format'), (sql_f, val_f))
        p.igual(
            'oracle (nomeado): %s' % rotulo, filtro.descrever(condicoes, 'named'), (sql_n, val_n)
        )
    p.igual('sem filtro nenhum: WHERE vazio', filtro.descrever(filtro.plano(), 'format'), ('', ()))
    p.recusa(
        'escopo None recusado (`= NULL` nunca casa)',
        lambda: filtro.plano(scope=('E', None)),
        filtro.ErroIdentificador,
        contem=('NULL',),
    )
    p.recusa(
        'coluna com aspas/ponto-e-virgula recusada',
        lambda: filtro.plano(since=('ALT; DROP TABLE X', 1)),
        filtro.ErroIdentificador,
        contem=('recusado',),
    )
    _compilar_dialetos(p)


def _compilar_dialetos(p: _Placar) -> None:
    """Com SQLAlchemy instalado, o SQL real de cada banco; sem ele, "pulado"."""
    try:
        from sqlalchemy.dialects import mssql, mysql, oracle, postgresql, sqlite
    except ImportError:
        print(
            '  pulado  SQL dos dialetos reais (SQLAlchemy não instalado aqui;'
            ' o plano acima e o que o adaptador segue)'
        )
        return
    from contextia_sync.origem import consultas as sql

    objeto = sql.objeto_sem_reflexao('ERP.TITULOS', ['ID', 'EMPRESA_ID', 'ALTERADO_EM'])
    consultas = {
        'fetch': sql.consulta_fetch(
            objeto, ['ID', 'ALTERADO_EM'], scope=('EMPRESA_ID', 297), since=('ALTERADO_EM', 'x')
        )[0],
        'sonda': sql.consulta_contar(objeto, scope=('EMPRESA_ID', 297), since=('ALTERADO_EM', 'x')),
    }
    for nome, modulo in (
        ('oracle', oracle),
        ('mssql', mssql),
        ('mysql', mysql),
        ('postgresql', postgresql),
        ('sqlite', sqlite),
    ):
        for tipo, consulta in sorted(consultas.items()):
            compilado = consulta.compile(dialect=modulo.dialect())
            onde = str(compilado).split('WHERE', 1)[1]
            certo = (
                onde.index('EMPRESA_ID') < onde.index('ALTERADO_EM')
                and ' > ' in onde
                and '>=' not in onde
                and '297' not in onde
                and compilado.params == {'escopo': 297, 'desde': 'x'}
            )
            p.igual(
                '%s, %s do adaptador compilada: escopo primeiro, `>` estrito,'
                ' valores por bind' % (nome, tipo),
                certo,
                True,
            )


def _agenda(p: _Placar) -> None:
    from contextia_sync.ouvinte.agenda import (
        ErroVarredura,
        espera_apos_falhas,
        hora_de_varrer,
        ler_hora,
    )

    print('\nhora da varredura')
    casos = [
        ('antes da hora, não varre', None, 180, (3, 29), False),
        ('na hora, varre', None, 180, (3, 30), True),
        ('já varreu hoje: não repete', '2026-09-02', 180, (23, 0), False),
        ('FORA da janela não varre (subida as 18h com estado zerado)', None, 180, (18, 0), False),
        ('dentro da janela recupera atraso (subiu 05:00)', None, 180, (5, 0), True),
        ('no limite da janela ainda varre', None, 180, (6, 30), True),
        ('um minuto depois do limite, não', None, 180, (6, 31), False),
        ('varreu ontem, e está na janela: varre de novo', '2026-09-01', 180, (4, 0), True),
    ]
    for rotulo, feita, janela, (h, m), esperado in casos:
        p.igual(
            rotulo,
            hora_de_varrer((3, 30), janela, feita, datetime.datetime(2026, 9, 2, h, m)),
            esperado,
        )
    p.igual(
        'desligada nunca varre',
        hora_de_varrer(None, 180, None, datetime.datetime(2026, 9, 2, 23, 0)),
        False,
    )

    print('\nespera depois de falha')
    p.igual('sem falha, o intervalo', espera_apos_falhas(60, 0), 60)
    p.igual(
        'dobra a cada falha seguida',
        [espera_apos_falhas(60, n) for n in (1, 2, 3)],
        [120, 240, 480],
    )
    p.igual('e para em 15 minutos', espera_apos_falhas(60, 50), 900)

    print('\nhora invalida na linha de comando')
    for ruim in ('25:00', '3h30', '03:70', 'abc', '3:30:00', '-1:30'):
        p.recusa(
            '--varredura=%s aborta' % ruim,
            functools.partial(ler_hora, ruim),
            ErroVarredura,
            contem=('HH:MM',),
        )
    p.igual('"nao" desliga', ler_hora('nao'), None)
    p.igual('03:30 vira (3, 30)', ler_hora('03:30'), (3, 30))


def _estrategias(p: _Placar) -> None:
    from contextia_sync.captura.estrategias import (
        ESTRATEGIAS,
        ErroEstrategia,
        exigir_estrategia,
        implementada,
        resolver_estrategia,
    )

    print('\nestrategias')
    for nome in ('coluna', 'reconciliacao', 'coluna+reconciliacao', 'binlog', 'slot_logico'):
        p.igual('%s (implementada) resolve' % nome, 'exige' in exigir_estrategia(nome), True)
    for nome in ('change_tracking', 'flashback'):
        # A recusa tem de ENSINAR: sem o "exigiria", manda a pessoa procurar.
        p.recusa(
            '%s recusa dizendo o que exigiria' % nome,
            functools.partial(exigir_estrategia, nome),
            ErroEstrategia,
            contem=('exigiria', ESTRATEGIAS[nome]['exige'][:20], 'vê DELETE'),
        )
    p.recusa(
        'nome inventado lista as que existem',
        lambda: exigir_estrategia('inventada'),
        ErroEstrategia,
        contem=('coluna', 'binlog'),
    )
    p.igual(
        'implementadas: coluna, reconciliacao, as duas juntas, binlog e slot_logico',
        sorted(n for n in ESTRATEGIAS if implementada(n)),
        ['binlog', 'coluna', 'coluna+reconciliacao', 'reconciliacao', 'slot_logico'],
    )
    p.igual(
        'e todas dizem se veem DELETE', all('ve_delete' in v for v in ESTRATEGIAS.values()), True
    )
    mapa: Mapa = {'listener': {'strategy': 'binlog'}}
    p.igual('linha de comando vence o mapeamento', resolver_estrategia('coluna', mapa)[0], 'coluna')
    p.igual('sem linha de comando vale o mapeamento', resolver_estrategia(None, mapa)[0], 'binlog')
    p.igual('sem nenhum dos dois, `coluna`', resolver_estrategia(None, {})[0], 'coluna')


def _conjuntos(p: _Placar) -> None:
    """A diferença dos conjuntos de chaves (a reconciliacao): o que sai, o que entra, a ordem."""
    from contextia_sync.captura.conjuntos import (
        Contagem,
        ErroConjunto,
        aplicar,
        codificar,
        comparar,
        decodificar,
        juntar,
    )

    print('\nconjuntos de chaves (reconciliacao)')
    contagem = Contagem()
    p.igual(
        'o que sumiu sai, o que apareceu entra',
        list(comparar([1, 2, 3, 5], [2, 3, 4, 5, 6], contagem)),
        [('-', 1), ('+', 4), ('+', 6)],
    )
    p.igual(
        'e as contagens batem',
        (contagem.anteriores, contagem.atuais, contagem.removidas, contagem.incluidas),
        (4, 5, 1, 2),
    )
    p.igual(
        'origem vazia: tudo sai',
        list(comparar(['a', 'b'], [], Contagem())),
        [('-', 'a'), ('-', 'b')],
    )
    p.igual(
        'número antes de texto, texto por code point (B < a)',
        list(comparar([], [7, 'B', 'a', 'b'], Contagem())),
        [('+', 7), ('+', 'B'), ('+', 'a'), ('+', 'b')],
    )
    p.recusa(
        'origem fora de ordem (a collation sem caixa do banco) e recusada',
        lambda: list(comparar([], ['a', 'B'], Contagem())),
        ErroConjunto,
        contem=('fora de ordem', 'collation'),
    )
    p.igual(
        'chave repetida na origem (na mesma empresa) entra uma vez',
        list(comparar([], [1, 1, 2], Contagem())),
        [('+', 1), ('+', 2)],
    )
    p.recusa(
        'chave repetida no conjunto entregue e recusada',
        lambda: list(comparar([1, 1], [], Contagem())),
        ErroConjunto,
        contem=('repetida',),
    )
    p.igual(
        'o conjunto novo: o anterior menos o removido, mais o incluído',
        list(aplicar([1, 3, 5], [4, 2], [3])),
        [1, 2, 4, 5],
    )
    p.igual(
        'o diário da coluna entra na comparação: a entregue e apagada sai',
        list(comparar(juntar([1, 5], [3]), [1, 5], Contagem())),
        [('-', 3)],
    )
    for valor in (297, 'a\nb', datetime.date(2026, 9, 2), datetime.datetime(2026, 9, 2, 10)):
        p.igual('%r volta do disco igual' % (valor,), decodificar(codificar(valor)), valor)


def rodar() -> int:
    """Roda tudo; 0 se passou, 1 se algo falhou."""
    p = _Placar()
    for parte in (_marca, _atrasadas, _escopos, _where, _agenda, _estrategias, _conjuntos):
        try:
            parte(p)
        except Exception as erro:  # noqa: BLE001
            # Uma parte quebrada nao esconde o resultado das outras.
            p.falhas.append('%s quebrou: %s: %s' % (parte.__name__, type(erro).__name__, erro))
            print('  FALHOU  %s quebrou: %s: %s' % (parte.__name__, type(erro).__name__, erro))
    print()
    if p.falhas:
        print('%d FALHA(S):' % len(p.falhas))
        for falha in p.falhas:
            print('  - %s' % falha)
        return 1
    print('tudo passou.')
    return 0
