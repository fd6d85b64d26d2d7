"""
A tabela de casos das regras da marca de água: a mesma para o autoteste
(`ouvinte.py --autoteste`, num `python3 -S`) e para o pytest
(tests/test_marca_agua.py). Um caso novo aqui vale nos dois.

Cada caso: (rótulo, função de marca_agua.py, argumentos, argumentos nomeados,
esperado). Módulo puro.
"""

from __future__ import annotations

import datetime

_DT = datetime.datetime(2026, 9, 2, 10, 0, 0)
_UTC = datetime.timezone.utc
_LIDAS = [
    {'ID': 1, 'ALT': datetime.datetime(2026, 9, 2, 10, 0, 0)},
    {'ID': 2, 'ALT': datetime.datetime(2026, 9, 2, 10, 5, 0)},
    {'ID': 3, 'ALT': None},
]
_DEPOIS = datetime.datetime(2026, 9, 2, 10, 5, 0)

Caso = tuple[str, str, tuple[object, ...], dict[str, object], object]


CASOS: list[Caso] = [
    # -- recuar: o valor do WHERE
    (
        'datetime recua os segundos da folga',
        'recuar',
        (_DT, 180),
        {},
        datetime.datetime(2026, 9, 2, 9, 57, 0),
    ),
    (
        'texto ISO do estado volta a datetime e recua',
        'recuar',
        ('2026-09-02T10:00:00', 60),
        {},
        datetime.datetime(2026, 9, 2, 9, 59, 0),
    ),
    (
        'timestamptz do estado (com fuso) também recua',
        'recuar',
        ('2026-09-02T10:00:00+00:00', 60),
        {},
        datetime.datetime(2026, 9, 2, 9, 59, tzinfo=_UTC),
    ),
    (
        'coluna de DIA recua um dia inteiro',
        'recuar',
        (datetime.date(2026, 9, 2), 180),
        {},
        datetime.date(2026, 9, 1),
    ),
    ('número (sequence) não recua', 'recuar', (918273, 180), {}, 918273),
    ('texto opaco não recua', 'recuar', ('opaco', 180), {}, 'opaco'),
    # -- avancar: sobre o maior lido
    ('avança para o MAIOR valor lido', 'avancar', (_LIDAS, 'ALT', _DT), {}, _DEPOIS),
    ('nenhuma linha: a marca velha continua', 'avancar', ([], 'ALT', _DT), {}, _DT),
    (
        'só linha sem valor: a marca velha continua',
        'avancar',
        ([{'ID': 9, 'ALT': None}], 'ALT', _DT),
        {},
        _DT,
    ),
    (
        'não retrocede quando o lido é menor',
        'avancar',
        ([{'ALT': datetime.datetime(2026, 9, 1, 8, 0, 0)}], 'ALT', _DT),
        {},
        _DT,
    ),
    (
        'date e datetime na mesma coluna não explodem',
        'avancar',
        ([{'ALT': datetime.date(2026, 9, 3)}, {'ALT': _DEPOIS}], 'ALT', _DT),
        {},
        datetime.date(2026, 9, 3),
    ),
    # -- primeira vista: so fixa o ponto de partida
    ('sem marca: primeira vez (nada e enviado)', 'primeira_vez', (None, False), {}, True),
    ('com marca: não é primeira vez', 'primeira_vez', (_DT, False), {}, False),
    ('tabela vista vazia: a próxima leitura traz tudo', 'primeira_vez', (None, True), {}, False),
    ('tabela nascida vazia lê desde o início', 'desde', (None, 180), {}, None),
    (
        'com marca, lê desde a marca menos a folga',
        'desde',
        (_DT, 60),
        {},
        datetime.datetime(2026, 9, 2, 9, 59, 0),
    ),
    # -- teto por ciclo
    ('no teto ainda é incremental', 'passa_do_teto', (20000, 20000), {}, False),
    ('acima do teto vai para a varredura', 'passa_do_teto', (20001, 20000), {}, True),
    # -- depois do envio
    (
        'tudo entregue: avança sobre as LIDAS',
        'marca_apos_envio',
        (_LIDAS, 'ALT', _DT),
        {'todos_ok': True, 'seco': False},
        _DEPOIS,
    ),
    (
        'um envio falhou: a marca NÃO avança',
        'marca_apos_envio',
        (_LIDAS, 'ALT', _DT),
        {'todos_ok': False, 'seco': False},
        _DT,
    ),
    (
        'modo seco nunca avança',
        'marca_apos_envio',
        (_LIDAS, 'ALT', _DT),
        {'todos_ok': True, 'seco': True},
        _DT,
    ),
    # -- depois da varredura
    (
        'varredura fechou o dataset: a marca pula para o MAX lido antes dela',
        'marca_apos_varredura',
        (_DT, _DEPOIS, 'ALT'),
        {'fechou': True},
        _DEPOIS,
    ),
    (
        'varredura não fechou: a marca fica',
        'marca_apos_varredura',
        (_DT, _DEPOIS, 'ALT'),
        {'fechou': False},
        _DT,
    ),
    (
        'o pulo nunca é para trás',
        'marca_apos_varredura',
        (_DEPOIS, _DT, 'ALT'),
        {'fechou': True},
        _DEPOIS,
    ),
    (
        'tabela vazia na varredura: a marca fica',
        'marca_apos_varredura',
        (_DT, None, 'ALT'),
        {'fechou': True},
        _DT,
    ),
    # -- o relogio da origem: carimbo no futuro e relogio que volta
    (
        'limite = hora da origem + tolerância',
        'limite_do_relogio',
        (_DT, 'datetime', 300),
        {},
        datetime.datetime(2026, 9, 2, 10, 5, 0),
    ),
    (
        'coluna de dia: o limite e amanhã na origem',
        'limite_do_relogio',
        (_DT, 'date', 300),
        {},
        datetime.date(2026, 9, 3),
    ),
    ('número não tem relógio: sem limite', 'limite_do_relogio', (_DT, 'numerico', 300), {}, None),
    (
        'carimbo em 2099 está no futuro',
        'no_futuro',
        (datetime.datetime(2099, 3, 1), datetime.datetime(2026, 9, 2, 10, 5)),
        {},
        True,
    ),
    (
        'carimbo de agora não está',
        'no_futuro',
        (_DT, datetime.datetime(2026, 9, 2, 10, 5)),
        {},
        False,
    ),
    (
        'sem limite nada está no futuro',
        'no_futuro',
        (datetime.datetime(2099, 3, 1), None),
        {},
        False,
    ),
    (
        'marca no futuro puxada de volta ao limite',
        'marca_limitada',
        ('2099-03-01T00:00:00', _DEPOIS),
        {},
        _DEPOIS,
    ),
    ('marca normal fica', 'marca_limitada', (_DT, _DEPOIS), {}, _DT),
    # -- a marca que parte do MAX da origem (inicial, salto da varredura, marcar max)
    (
        'MAX no futuro: a marca para na hora da origem AGORA, sem a tolerância',
        'marca_do_maximo',
        (datetime.datetime(2099, 3, 1), _DT, 'datetime'),
        {},
        _DT,
    ),
    (
        'MAX dentro da tolerância também para em agora',
        'marca_do_maximo',
        (_DEPOIS, _DT, 'datetime'),
        {},
        _DT,
    ),
    (
        'MAX do passado fica',
        'marca_do_maximo',
        (datetime.datetime(2026, 9, 2, 9, 0), _DT, 'datetime'),
        {},
        datetime.datetime(2026, 9, 2, 9, 0),
    ),
    (
        'MAX em texto ISO do futuro também para em agora',
        'marca_do_maximo',
        ('2099-03-01T00:00:00', _DT, 'datetime'),
        {},
        _DT,
    ),
    (
        'coluna de dia: MAX no futuro para em hoje na origem',
        'marca_do_maximo',
        (datetime.date(2099, 3, 1), _DT, 'date'),
        {},
        datetime.date(2026, 9, 2),
    ),
    (
        'número não tem relógio: o MAX como veio',
        'marca_do_maximo',
        (918273, _DT, 'numerico'),
        {},
        918273,
    ),
    (
        'sem a hora da origem: o MAX como veio',
        'marca_do_maximo',
        (datetime.datetime(2099, 3, 1), None, 'datetime'),
        {},
        datetime.datetime(2099, 3, 1),
    ),
    (
        'relógio que voltou uma hora (fim do horário de verao)',
        'recuo_do_relogio',
        (datetime.datetime(2026, 2, 22, 1, 59), datetime.datetime(2026, 2, 22, 1, 0)),
        {},
        3540.0,
    ),
    ('relógio que andou não recua', 'recuo_do_relogio', (_DT, _DEPOIS), {}, 0.0),
    (
        'menos de 2 s e ruido',
        'recuo_do_relogio',
        (_DT, _DT - datetime.timedelta(seconds=1)),
        {},
        0.0,
    ),
]
