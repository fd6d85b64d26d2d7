"""
O mapeamento (`mappings/<cliente>.json`): carregar, validar e ler com heranca.

Duas metades com exigencias diferentes:

    carregar_mapeamento     valida com jsonschema (import tardio) e com as regras
                            que o schema nao exprime (key fora de columns, nome
                            de dataset repetido depois de normalizar...). Reporta
                            TODOS os problemas de uma vez -- os do schema e os das
                            regras na mesma recusa: quem corrige um por execucao
                            desiste no terceiro.
    funcoes puras           valor_herdado, coluna_de_recorte, semantica,
                            chave_de, chunk_de, grupo_de. So biblioteca padrao,
                            porque o `ouvinte.py --autoteste` as usa num
                            `python3 -S` sem pacote nenhum.

O dict devolvido e o JSON como foi escrito -- o `defaults` NAO e copiado para
dentro dos datasets. O ouvinte precisa distinguir `watch_column` DECLARADA no
dataset (erro se fora de columns) de HERDADA (o dataset so sai do ao-vivo), e
essa diferenca some se a heranca for materializada aqui.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Literal, cast, overload

from contextia_sync import padroes, segredos
from contextia_sync.erros import ErroConfiguracao

if TYPE_CHECKING:  # o jsonschema e tardio: o autoteste nao o tem
    from jsonschema.exceptions import ValidationError

    # Só para o mypy: tipos.py importa o sqlalchemy, que o autoteste não tem.
    from contextia_sync.tipos import DatasetDoMapa, Filtro, JsonDecodificado, Mapa

    # Cada tradução recebe o erro (e o schema, para a alternativa que vira outro
    # erro) e devolve as frases, ou None sem nada a dizer além da mensagem crua.
    _Traducao = Callable[[ValidationError, Mapping[str, object]], list[str] | None]

# Dentro do pacote (vai junto no `pip install`); mappings/mapeamento.schema.json
# e um link para ele, para o editor de quem escreve o mapeamento achar.
CAMINHO_SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'mapeamento.schema.json')

# Hosts onde webhook em http:// e aceitavel: so a propria maquina (teste, demo).
_HOSTS_LOCAIS = re.compile(r'^http://(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?(/|$)')


class ErroMapeamento(ErroConfiguracao):
    """O mapeamento tem problemas; `.problemas` lista todos ('caminho: problema -- correção')."""

    def __init__(self, caminho: str, problemas: Iterable[str]) -> None:
        self.caminho = caminho
        self.problemas = list(problemas)
        super().__init__(
            'Mapeamento %s tem %d problema(s):\n%s'
            % (caminho, len(self.problemas), '\n'.join('  - %s' % p for p in self.problemas))
        )


# ---------------------------------------------------------------------------
# Funcoes puras (sem jsonschema: o autoteste roda sem pacote nenhum)
# ---------------------------------------------------------------------------


# Os campos do dataset que o `defaults` pode dar (PadroesDoMapa).
CampoHerdado = Literal['scope_column', 'key', 'watch_column', 'group', 'chunk', 'deleted_when']


@overload
def valor_herdado(
    mapa: Mapa, row: DatasetDoMapa, campo: Literal['scope_column', 'key', 'watch_column', 'group']
) -> str | None: ...
@overload
def valor_herdado(mapa: Mapa, row: DatasetDoMapa, campo: Literal['chunk']) -> int | None: ...
@overload
def valor_herdado(
    mapa: Mapa, row: DatasetDoMapa, campo: Literal['deleted_when']
) -> Filtro | None: ...
def valor_herdado(mapa: Mapa, row: DatasetDoMapa, campo: CampoHerdado) -> str | int | Filtro | None:
    """
    O valor de `campo` para o dataset `row`: o declarado nele, ou o do `defaults`.

    `null` declarado no dataset vence o `defaults` -- e o jeito de desligar o
    herdado (tabela de domínio sem empresa, view cuja coluna de mudança não presta).
    """
    if campo in row:
        return row[campo]
    return (mapa.get('defaults') or {}).get(campo)


def normalizar_dataset(nome: object) -> str:
    """'Títulos a Receber' -> 'titulos_a_receber': ASCII minusculo, deterministico."""
    sem_acento = unicodedata.normalize('NFKD', str(nome)).encode('ascii', 'ignore').decode()
    normalizado = re.sub(r'[^a-z0-9]+', '_', sem_acento.lower()).strip('_')
    if not normalizado:
        raise ValueError(
            'nome de dataset %r fica vazio depois de normalizado; use letras'
            ' ou números no "dataset" do mapeamento.' % (nome,)
        )
    return normalizado[:120]


def coluna_de_recorte(mapa: Mapa, row: DatasetDoMapa) -> str | None:
    """A coluna que separa as empresas neste dataset; None = domínio (vai para todas)."""
    return valor_herdado(mapa, row, 'scope_column') or None


def semantica(
    mapa: Mapa,  # noqa: ARG001
    row: DatasetDoMapa,  # noqa: ARG001 - o mapa e do contrato
) -> tuple[str | None, dict[str, str] | None]:
    """(description, fields) do dataset, para o Contextia entender o que recebe."""
    campos = row.get('fields') or None
    return row.get('description') or None, dict(campos) if campos else None


def chave_de(mapa: Mapa, row: DatasetDoMapa) -> str | None:
    """
    A coluna de upsert, ou None se não há ou se ela não está em `columns`.

    Herdada e ausente da view vira None (dedup por hash no servidor); declarada
    e ausente já foi recusada por carregar_mapeamento.
    """
    chave = valor_herdado(mapa, row, 'key')
    return chave if chave and chave in row.get('columns', ()) else None


def chunk_de(mapa: Mapa, row: DatasetDoMapa) -> int:
    """Registros por lote: o do dataset, o do defaults, ou padroes.CHUNK."""
    return int(valor_herdado(mapa, row, 'chunk') or padroes.CHUNK)


def grupo_de(mapa: Mapa, row: DatasetDoMapa) -> str | None:
    """O grupo de datasets no Contextia (ou None)."""
    return valor_herdado(mapa, row, 'group') or None


def escopos_excluidos(mapa: Mapa) -> set[str]:
    """As empresas que nunca viram projeto nem recebem carga, como texto."""
    from contextia_sync.escopos import texto_escopo

    return {texto_escopo(e) for e in (mapa.get('source') or {}).get('excluded_scopes') or ()}


# ---------------------------------------------------------------------------
# Carregar e validar
# ---------------------------------------------------------------------------


def carregar_mapeamento(caminho: str) -> Mapa:
    """
    Lê, valida e devolve o mapeamento. Levanta ErroMapeamento com TODOS os problemas.

    Cada problema diz onde (caminho JSON), o que é, e como corrigir. Chave
    desconhecida e erro: `wacth_column` ignorado em silêncio deixaria o dataset
    fora do ao-vivo sem ninguém saber por que.
    """
    try:
        with open(caminho, encoding='utf-8') as arquivo:
            texto = arquivo.read()
    except FileNotFoundError:
        raise ErroMapeamento(
            caminho,
            [
                '(arquivo): %s não existe -- confira --mapping (caminho relativo e a partir'
                ' de onde o comando roda)' % caminho
            ],
        ) from None
    except (OSError, UnicodeDecodeError) as erro:
        raise ErroMapeamento(
            caminho,
            [
                '(arquivo): não foi possível ler (%s: %s) -- confira permissão e que o'
                ' arquivo e texto UTF-8' % (type(erro).__name__, erro)
            ],
        ) from None

    repetidas: list[str] = []

    def sem_repetidas(
        pares: list[tuple[str, JsonDecodificado]], _repetidas: list[str] = repetidas
    ) -> dict[str, JsonDecodificado]:
        # O json do Python fica com a ULTIMA chave repetida, calado. Duas `key`
        # no mesmo dataset e erro de edicao, nao escolha.
        objeto: dict[str, JsonDecodificado] = {}
        for nome, valor in pares:
            if nome in objeto:
                _repetidas.append(nome)
            objeto[nome] = valor
        return objeto

    try:
        mapa: JsonDecodificado = json.loads(texto, object_pairs_hook=sem_repetidas)
    except json.JSONDecodeError as erro:
        raise ErroMapeamento(
            caminho,
            [
                '(linha %d, coluna %d): JSON inválido (%s) -- virgula sobrando ou faltando,'
                ' aspas simples ou comentário são os suspeitos de sempre; JSON não tem'
                ' comentário (use "$comment")' % (erro.lineno, erro.colno, erro.msg)
            ],
        ) from None

    problemas = [
        '(arquivo): chave %r aparece duas vezes no mesmo objeto -- o JSON fica'
        ' só com a última; apague a que não vale' % nome
        for nome in repetidas
    ]
    problemas += problemas_do_mapa(mapa)
    if problemas:
        raise ErroMapeamento(caminho, problemas)
    # O schema exige um objeto na raiz: sem problemas, o JSON lido é um Mapa.
    validado: Mapa = mapa
    return validado


def problemas_do_mapa(mapa: object) -> list[str]:
    """
    Os problemas de um mapeamento já lido (o schema e as regras entre campos).

    O `descobrir` confere com esta mesma função o esqueleto que vai gravar.
    """
    problemas = _problemas_de_schema(mapa)
    if isinstance(mapa, dict):
        # Schema e regras entre campos numa passada so: quem corrige um problema
        # por execucao desiste no terceiro. Cada regra confere a forma do que le
        # e fica calada onde a forma esta errada -- ali o schema ja falou, e
        # falar de novo seria o mesmo problema com outras palavras.
        problemas += [p for p in _problemas_semanticos(mapa) if p not in problemas]
    return problemas


def _schema() -> Mapping[str, object]:
    with open(CAMINHO_SCHEMA, encoding='utf-8') as arquivo:
        schema: Mapping[str, object] = json.load(arquivo)
    return schema


def caminho_json(partes: Iterable[str | int]) -> str:
    """['datasets', 3, 'key'] -> 'datasets[3].key'."""
    texto = ''
    for parte in partes:
        if isinstance(parte, int):
            texto += '[%d]' % parte
        else:
            texto += ('.' if texto else '') + str(parte)
    return texto or '(raiz)'


_TIPOS = {
    'string': 'texto',
    'integer': 'inteiro',
    'number': 'numero',
    'boolean': 'true/false',
    'null': 'null',
    'array': 'lista [...]',
    'object': 'objeto {...}',
}


def _nome_tipo(valor: object) -> str:
    if valor is None:
        return 'null'
    if isinstance(valor, bool):
        return 'true/false'
    if isinstance(valor, int):
        return 'inteiro'
    if isinstance(valor, float):
        return 'numero'
    if isinstance(valor, str):
        return 'texto'
    if isinstance(valor, list):
        return 'lista'
    return 'objeto'


# Correcao especifica para campos obrigatorios, quando ha o que dizer alem de "acrescente".
_DICA_OBRIGATORIO = {
    'client': 'acrescente "client": "<nome curto do cliente>"',
    'datasets': 'acrescente "datasets": [ { "dataset": ..., "source_object": ...,'
    ' "columns": [...] } ]',
    'projects': 'acrescente a regra de projeto: "projects": {"source_object": "<cadastro de'
    ' empresas>", "scope_column": ..., "name_column": ...} (docs/mapeamento.md)',
    'dataset': 'acrescente "dataset": "<nome no Contextia>"',
    'source_object': 'acrescente "source_object": "<view ou tabela da origem>"',
    'columns': 'acrescente "columns": ["COLUNA", ...] com as colunas lidas da view',
    'column': 'acrescente "column": "<coluna do cadastro>"',
    'url': 'acrescente "url": "https://..." (o endereço que recebe os eventos)',
    'secret_env': 'acrescente "secret_env": "CONTEXTIA_WEBHOOK_SEGREDO" e exporte o segredo'
    ' nessa variável (o segredo nunca vai no mapeamento)',
}


def _problemas_de_schema(mapa: object) -> list[str]:
    import jsonschema  # tardio: autoteste nao tem

    schema = _schema()
    validador = jsonschema.Draft202012Validator(schema)
    problemas: list[str] = []
    for erro in sorted(validador.iter_errors(mapa), key=lambda e: list(map(str, e.absolute_path))):
        problemas.extend(_traduzir(erro, schema))
    # A mesma frase por dois caminhos de anyOf nao ajuda ninguem.
    return list(dict.fromkeys(problemas))


def _traduzir(erro: ValidationError, schema: Mapping[str, object]) -> list[str]:
    """Um erro do jsonschema em 'caminho: problema -- correção' (`_TRADUCOES`, por validador)."""
    traducao = _TRADUCOES.get(str(erro.validator))
    frases = traducao(erro, schema) if traducao is not None else None
    if frases is None:
        return [
            '%s: %s -- confira com mappings/mapeamento.schema.json'
            % (caminho_json(erro.absolute_path), erro.message)
        ]
    return frases


def _chave_desconhecida(erro: ValidationError, _schema: Mapping[str, object]) -> list[str] | None:
    valor = _valor(erro)
    if not isinstance(valor, dict):
        return None
    conhecidas = sorted(_propriedades(erro))
    saida = []
    for nome in sorted(set(valor) - set(conhecidas)):
        parecida = difflib.get_close_matches(nome, conhecidas, n=1, cutoff=0.6)
        dica = (
            ('você quis dizer %r?' % parecida[0])
            if parecida
            else ('as validas aqui: %s' % ', '.join(c for c in conhecidas if c != '$comment'))
        )
        saida.append(
            '%s: chave desconhecida %r -- %s (comentário vai em "$comment")'
            % (caminho_json([*erro.absolute_path, nome]), nome, dica)
        )
    return saida


def _valor(erro: ValidationError) -> JsonDecodificado:
    """O valor recusado, como veio do JSON do mapeamento."""
    return erro.instance


def _esperado(erro: ValidationError) -> JsonDecodificado:
    """O que o schema pedia (o tipo, a lista, o mínimo...), como está no schema."""
    return erro.validator_value


def _propriedades(erro: ValidationError) -> Mapping[str, object]:
    """As `properties` do pedaço do schema que recusou (nenhuma, se ele não é objeto)."""
    pedaco = erro.schema
    return pedaco.get('properties', {}) if isinstance(pedaco, Mapping) else {}


def _do_schema(erro: ValidationError, campo: str, falta: object = None) -> object:
    """Um campo do pedaço do schema que recusou (`falta` se ele não o tem)."""
    pedaco = erro.schema
    return pedaco.get(campo, falta) if isinstance(pedaco, Mapping) else falta


def _obrigatorio(erro: ValidationError, _schema: Mapping[str, object]) -> list[str]:
    caminho = caminho_json(erro.absolute_path)
    faltando = re.findall(r"'([^']+)' is a required property", erro.message)
    saida = []
    for nome in faltando or [erro.message]:
        saida.append(
            '%s: falta %r -- %s'
            % (
                caminho_json([*erro.absolute_path, nome]) if faltando else caminho,
                nome,
                _DICA_OBRIGATORIO.get(nome, 'acrescente %r' % nome),
            )
        )
    return saida


def _alternativas(erro: ValidationError, schema: Mapping[str, object]) -> list[str]:
    caminho = caminho_json(erro.absolute_path)
    if erro.validator == 'oneOf' and 'filters' in erro.absolute_path:
        return [
            '%s: um filtro e "column" mais EXATAMENTE uma condição (equals, not_equals,'
            ' in, not_in, not_empty) -- separe em dois filtros ou acrescente a condição' % caminho
        ]
    if list(erro.absolute_path)[-1:] == ['deleted_when'] and isinstance(_valor(erro), dict):
        return _marca_de_apagado(erro, schema)
    # coluna_ou_nulo, grupo_ou_nulo: diga o que a alternativa nao-nula exige.
    for sub in erro.context or ():
        if sub.validator in ('pattern', 'minLength'):
            return _traduzir(sub, schema)
    esperado = ' ou '.join(
        sorted(
            {
                _TIPOS.get(_esperado(s), str(_esperado(s)))
                for s in erro.context or ()
                if s.validator == 'type'
            }
        )
    )
    return [
        '%s: esperava %s, veio %s %r -- corrija o valor'
        % (caminho, esperado or 'outro valor', _nome_tipo(_valor(erro)), _valor(erro))
    ]


def _marca_de_apagado(erro: ValidationError, schema: Mapping[str, object]) -> list[str]:
    """`deleted_when` objeto que não é condição: o que a alternativa da condição recusou."""
    caminho = caminho_json(erro.absolute_path)
    frases: list[str] = []
    for sub in erro.context or ():
        if sub.validator == 'oneOf':
            frases.append(
                '%s: a marca de apagado é "column" mais EXATAMENTE uma condição (equals,'
                ' not_equals, in, not_in, not_empty), como um filtro de projects -- ex.:'
                ' {"column": "D_E_L_E_T_", "equals": "*"}' % caminho
            )
        elif sub.validator != 'type' or list(sub.absolute_path) != list(erro.absolute_path):
            frases += _traduzir(sub, schema)
    return frases or [
        '%s: esperava uma condição ({"column": ..., "equals": ...}) ou null -- corrija o valor'
        % caminho
    ]


def _tipo_errado(erro: ValidationError, _schema: Mapping[str, object]) -> list[str]:
    valor = _valor(erro)
    esperado = _esperado(erro)
    esperados = esperado if isinstance(esperado, list) else [esperado]
    return [
        '%s: esperava %s, veio %s %r -- corrija o valor%s'
        % (
            caminho_json(erro.absolute_path),
            ' ou '.join(_TIPOS.get(e, str(e)) for e in esperados),
            _nome_tipo(valor),
            valor,
            ' (número vai sem aspas)' if 'integer' in esperados and isinstance(valor, str) else '',
        )
    ]


def _padrao(erro: ValidationError, _schema: Mapping[str, object]) -> list[str]:
    ultimo = erro.absolute_path[-1] if erro.absolute_path else ''
    if ultimo in ('source_object',):
        dica = 'use o nome da view como o banco o conhece (VIEW ou ESQUEMA.VIEW), sem espaços'
    elif ultimo == 'group' or 'grupo' in str(_do_schema(erro, 'description', '')).lower():
        dica = 'grupo e um slug: minúsculas, dígitos, - e _ (ex.: "financeiro")'
    elif ultimo == 'url':
        dica = 'comece com https:// (http:// só para 127.0.0.1/localhost)'
    elif ultimo == 'secret_env':
        dica = 'e o NOME da variável de ambiente (ex.: CONTEXTIA_WEBHOOK_SEGREDO), nunca o segredo'
    else:
        dica = (
            'nome de coluna: letra ou _ seguida de letras, dígitos, _, $ ou #, sem'
            ' espaços nem aspas; use o nome exato que a view devolve'
        )
    return ['%s: %r não é válido -- %s' % (caminho_json(erro.absolute_path), _valor(erro), dica)]


def _fora_da_lista(erro: ValidationError, _schema: Mapping[str, object]) -> list[str]:
    return [
        '%s: %r não é um dos valores aceitos -- use um de: %s'
        % (caminho_json(erro.absolute_path), _valor(erro), ', '.join(map(str, _esperado(erro))))
    ]


def _fora_do_intervalo(erro: ValidationError, _schema: Mapping[str, object]) -> list[str]:
    return [
        '%s: %r fora do intervalo -- use de %s a %s'
        % (
            caminho_json(erro.absolute_path),
            _valor(erro),
            _do_schema(erro, 'minimum', '-'),
            _do_schema(erro, 'maximum', '-'),
        )
    ]


def _lista_vazia(erro: ValidationError, _schema: Mapping[str, object]) -> list[str]:
    return [
        '%s: lista vazia -- precisa de pelo menos %d item(ns)'
        % (caminho_json(erro.absolute_path), _esperado(erro))
    ]


def _repetido(erro: ValidationError, _schema: Mapping[str, object]) -> list[str]:
    valor = _valor(erro)
    repetidos = sorted({repr(v) for v in valor if valor.count(v) > 1})
    return [
        '%s: valor repetido %s -- deixe cada um uma vez só'
        % (caminho_json(erro.absolute_path), ', '.join(repetidos))
    ]


def _texto_vazio(erro: ValidationError, _schema: Mapping[str, object]) -> list[str]:
    return ['%s: texto vazio -- preencha ou apague a chave' % caminho_json(erro.absolute_path)]


def _constante(erro: ValidationError, _schema: Mapping[str, object]) -> list[str]:
    return [
        '%s: %s não é aceito -- use %s ou apague a chave'
        % (caminho_json(erro.absolute_path), json.dumps(_valor(erro)), json.dumps(_esperado(erro)))
    ]


def _nome_de_campo(erro: ValidationError, _schema: Mapping[str, object]) -> list[str]:
    return [
        '%s: %s -- as chaves de fields são nomes de coluna'
        % (caminho_json(erro.absolute_path), erro.message)
    ]


# O validador do jsonschema que recusou -> a frase que o operador lê.
_TRADUCOES: dict[str, _Traducao] = {
    'additionalProperties': _chave_desconhecida,
    'required': _obrigatorio,
    'anyOf': _alternativas,
    'oneOf': _alternativas,
    'type': _tipo_errado,
    'pattern': _padrao,
    'enum': _fora_da_lista,
    'minimum': _fora_do_intervalo,
    'maximum': _fora_do_intervalo,
    'minItems': _lista_vazia,
    'uniqueItems': _repetido,
    'minLength': _texto_vazio,
    'const': _constante,
    'propertyNames': _nome_de_campo,
}


def _texto(valor: object) -> str | None:
    """O valor se for texto não vazio; None se falta ou tem outro tipo (o schema diz)."""
    return valor if isinstance(valor, str) and valor else None


# O `coluna` do schema: nome fora dele o schema ja recusou, com a dica de nome.
_NOME_DE_COLUNA = re.compile(r'^[A-Za-z_][A-Za-z0-9_$#]*$')


def _coluna(valor: object) -> str | None:
    """O valor se for um nome de coluna que o schema aceita; None se não (o schema diz)."""
    return valor if isinstance(valor, str) and _NOME_DE_COLUNA.match(valor) else None


def _objeto(valor: object) -> dict[str, object]:
    """O valor se for objeto; {} se falta ou tem outro tipo (o schema diz)."""
    return valor if isinstance(valor, dict) else {}


def _problemas_semanticos(mapa: Mapping[str, object]) -> list[str]:
    """
    O que o schema não exprime: relações entre campos (`_REGRAS_DO_MAPA`, na ordem).

    Roda sobre um JSON que pode estar meio errado (o schema relata a forma na
    mesma passada): cada regra só julga o que tem a forma que ela precisa --
    `columns` que não é lista de texto, `key` que não é texto, `defaults` que
    não é objeto ficam com o problema do schema e nada mais.
    """
    problemas: list[str] = []
    for regra in _REGRAS_DO_MAPA:
        problemas += regra(mapa)
    return problemas


def _problemas_dos_datasets(mapa: Mapping[str, object]) -> list[str]:
    """Cada dataset: o nome depois de normalizado, e as colunas contra `columns`."""

    defaults = _objeto(mapa.get('defaults'))
    datasets = mapa.get('datasets')
    lista: list[object] = datasets if isinstance(datasets, list) else []
    problemas: list[str] = []
    vistos: dict[str, int] = {}
    for indice, row in enumerate(lista):
        if not isinstance(row, dict):
            continue
        onde = 'datasets[%d]' % indice
        problemas += _problema_do_nome(
            onde, row.get('dataset'), indice, lista, vistos, normalizar_dataset
        )
        colunas_cruas = row.get('columns')
        if isinstance(colunas_cruas, list):
            # Sem lista de colunas nao ha contra o que julgar key, watch_column,
            # scope_column e fields: o schema ja disse o que falta.
            colunas = [c for c in colunas_cruas if isinstance(c, str)]
            problemas += _problemas_das_colunas(onde, row, colunas, defaults)
    return problemas


def _problema_do_nome(
    onde: str,
    nome: object,
    indice: int,
    lista: list[object],
    vistos: dict[str, int],
    normalizar: Callable[[str], str],
) -> list[str]:
    """O nome que fica vazio, ou que vira o de outro dataset, depois de normalizado."""
    texto = _texto(nome)
    if texto is None:
        return []
    try:
        normalizado = normalizar(texto)
    except ValueError:
        normalizado = ''
    if not normalizado:
        return [
            '%s.dataset: %r fica vazio depois de normalizado -- use'
            ' letras ou dígitos no nome' % (onde, nome)
        ]
    if normalizado in vistos:
        # Em `vistos` só entra o índice de um dataset objeto (os outros ficam de fora).
        anterior = cast('Mapping[str, object]', lista[vistos[normalizado]])
        return [
            '%s.dataset: %r vira %r, o mesmo nome de datasets[%d] (%r) -- no'
            ' Contextia seriam UM dataset e uma carga apagaria a outra; de nomes'
            ' diferentes' % (onde, nome, normalizado, vistos[normalizado], anterior['dataset'])
        ]
    vistos[normalizado] = indice
    return []


def _problemas_das_colunas(
    onde: str, row: Mapping[str, object], colunas: list[str], defaults: Mapping[str, object]
) -> list[str]:
    """key, watch_column, scope_column e fields de um dataset contra o `columns` dele."""
    problemas: list[str] = []
    nome = row.get('dataset')
    for campo, porque in (
        ('key', 'sem ela na projeção o upsert não tem por onde casar'),
        ('watch_column', 'sem ela na projeção a marca de água nunca avança'),
    ):
        valor = _coluna(row.get(campo))
        if valor is not None and valor not in colunas:
            problemas.append(
                '%s.%s: %r não está em columns (dataset %r) -- %s; acrescente-a a'
                ' columns ou corrija o nome%s'
                % (onde, campo, valor, nome, porque, _sugestao(valor, colunas))
            )

    declarada = 'scope_column' in row
    recorte = _coluna(row['scope_column'] if declarada else defaults.get('scope_column'))
    if recorte is not None and recorte not in colunas:
        origem = 'declarada' if declarada else 'herdada do defaults'
        # Herdada OU declarada, e erro: sem a coluna da empresa o conector
        # nao tem como filtrar, e a view inteira -- de TODAS as empresas --
        # iria para o projeto de uma so.
        problemas.append(
            '%s.scope_column: %r (%s) não está em columns (dataset %r) -- sem ela os'
            ' dados de todas as empresas iriam para cada projeto; acrescente-a a'
            ' columns ou, se e tabela de domínio (igual para todas), declare'
            ' "scope_column": null%s' % (onde, recorte, origem, nome, _sugestao(recorte, colunas))
        )

    chave = _coluna(row['key'] if 'key' in row else defaults.get('key'))
    problemas += _problemas_das_tabelas_base(onde, row, colunas, chave)
    problemas += _problema_da_marca_de_apagado(onde, row, colunas, defaults)
    for coluna in sorted(c for c in _objeto(row.get('fields')) if _coluna(c)):
        if coluna not in colunas:
            problemas.append(
                '%s.fields.%s: descreve uma coluna que não está em columns (dataset %r)'
                ' -- acrescente-a a columns ou apague a descrição%s'
                % (onde, coluna, nome, _sugestao(coluna, colunas))
            )
    return problemas


def _problema_da_marca_de_apagado(
    onde: str, row: Mapping[str, object], colunas: list[str], defaults: Mapping[str, object]
) -> list[str]:
    """
    `deleted_when` (declarada ou herdada): a coluna da marca está em columns.

    Herdada e fora de columns também é erro: ignorada em silêncio, a linha que
    o ERP apagou seguiria no Contextia como viva.
    """
    declarada = 'deleted_when' in row
    marca = _objeto(row['deleted_when'] if declarada else defaults.get('deleted_when'))
    coluna = _coluna(marca.get('column'))
    if coluna is None or coluna in colunas:
        return []
    origem = 'declarada' if declarada else 'herdada do defaults'
    return [
        '%s.deleted_when.column: %r (%s) não está em columns (dataset %r) -- sem ela na'
        ' projeção a linha marcada como apagada não seria reconhecida e seguiria viva no'
        ' Contextia; acrescente-a a columns ou, se este dataset não tem a marca, declare'
        ' "deleted_when": null%s'
        % (onde, coluna, origem, row.get('dataset'), _sugestao(coluna, colunas))
    ]


def _problemas_das_tabelas_base(
    onde: str, row: Mapping[str, object], colunas: list[str], chave: str | None
) -> list[str]:
    """
    `base_tables`: o `dataset_column` de cada uma está em columns, e uma ao menos
    chega pela key -- só com cabeçalhos, a inclusão e a exclusão de uma linha
    do dataset nunca viriam do log. Sem `key` o dataset nem fica ao vivo pelo log.
    """
    tabelas = row.get('base_tables')
    if not isinstance(tabelas, list) or not tabelas or chave is None or chave not in colunas:
        return []
    problemas: list[str] = []
    pela_chave = False
    for indice, item in enumerate(tabelas):
        objeto = _objeto(item)
        do_dataset = _coluna(objeto.get('dataset_column')) or chave
        pela_chave = pela_chave or do_dataset == chave
        if do_dataset not in colunas:
            problemas.append(
                '%s.base_tables[%d].dataset_column: %r não está em columns (dataset %r) --'
                ' a mudança em %s relê as linhas do dataset por ela; acrescente-a a'
                ' columns ou corrija o nome%s'
                % (
                    onde,
                    indice,
                    do_dataset,
                    row.get('dataset'),
                    objeto.get('table') or item,
                    _sugestao(do_dataset, colunas),
                )
            )
    if not pela_chave:
        problemas.append(
            '%s.base_tables: nenhuma tabela chega pela key %r (dataset %r) -- a inclusão e'
            ' a exclusão de uma linha do dataset nunca viriam do log; acrescente a tabela'
            ' das linhas (o nome dela, com a key de mesmo nome, ou {"table": ..., "column":'
            ' <a coluna dela com a key>})' % (onde, chave, row.get('dataset'))
        )
    return problemas


def _problemas_do_cadastro(mapa: Mapping[str, object]) -> list[str]:
    """A regra de projeto: a coluna do código da empresa, e o nome que não é ela."""
    projetos = mapa.get('projects')
    if not isinstance(projetos, dict):
        return []
    defaults = _objeto(mapa.get('defaults'))
    problemas: list[str] = []
    escopo_projeto = _texto(projetos.get('scope_column')) or _texto(defaults.get('scope_column'))
    # Declarada com o tipo errado o schema ja recusou; aqui so a ausencia.
    if projetos.get('scope_column') is None and defaults.get('scope_column') is None:
        problemas.append(
            'projects.scope_column: não declarada e sem defaults.scope_column -- diga'
            ' qual coluna do cadastro %r tem o código da empresa' % projetos.get('source_object')
        )
    nome_projeto = _texto(projetos.get('name_column'))
    if nome_projeto is not None and nome_projeto == escopo_projeto:
        problemas.append(
            'projects.name_column: e a mesma coluna do escopo (%r) -- os projetos se'
            ' chamariam pelo código; aponte para a razão social/nome fantasia' % nome_projeto
        )
    return problemas


def _problemas_do_webhook(mapa: Mapping[str, object]) -> list[str]:
    """O endereço (https fora desta máquina, só o marcador {escopo}) e o nome do segredo."""
    webhook = mapa.get('webhook')
    if not isinstance(webhook, dict):
        return []
    problemas: list[str] = []
    url = _texto(webhook.get('url'))
    if url is not None and url.startswith('http://') and not _HOSTS_LOCAIS.match(url):
        problemas.append(
            'webhook.url: %r usa http:// fora desta máquina -- o evento e o segredo de'
            ' assinatura passariam sem criptografia; use https://' % url
        )
    nome_do_segredo = _texto(webhook.get('secret_env'))
    if nome_do_segredo is not None and re.match(r'^[A-Z_][A-Z0-9_]*$', nome_do_segredo):
        # (Nome fora do formato de variavel o schema ja recusou.)
        problema = segredos.problema_do_secret_env(nome_do_segredo)
        if problema:
            problemas.append('webhook.secret_env: %s' % problema)
    if url is not None:
        sobra = re.sub(r'\{escopo\}', '', url)
        if '{' in sobra or '}' in sobra:
            problemas.append(
                'webhook.url: %r tem chaves {...} que não são {escopo} -- o único marcador'
                ' trocado e {escopo} (o código da empresa)' % url
            )
    return problemas


def _problemas_dos_excluidos(mapa: Mapping[str, object]) -> list[str]:
    """`source.excluded_scopes`: o item vazio e a mesma empresa duas vezes."""
    excluidos = _objeto(mapa.get('source')).get('excluded_scopes')
    problemas: list[str] = []
    textos: dict[str, int] = {}
    for indice, escopo in enumerate(excluidos if isinstance(excluidos, list) else ()):
        if isinstance(escopo, bool) or not isinstance(escopo, (str, int)):
            continue  # tipo errado: o schema ja disse
        texto = str(escopo).strip()
        if not texto:
            problemas.append('source.excluded_scopes[%d]: escopo vazio -- apague o item' % indice)
        elif texto in textos:
            problemas.append(
                'source.excluded_scopes[%d]: %r e a mesma empresa que o item [%d] -- deixe'
                ' um só' % (indice, escopo, textos[texto])
            )
        else:
            textos[texto] = indice
    return problemas


# As regras entre campos, na ordem em que os problemas saem.
_REGRAS_DO_MAPA: tuple[Callable[[Mapping[str, object]], list[str]], ...] = (
    _problemas_dos_datasets,
    _problemas_do_cadastro,
    _problemas_do_webhook,
    _problemas_dos_excluidos,
)


def _sugestao(nome: str, colunas: Iterable[str]) -> str:
    parecida = difflib.get_close_matches(nome, list(colunas), n=1, cutoff=0.6)
    return ' (em columns há %r; era essa?)' % parecida[0] if parecida else ''
