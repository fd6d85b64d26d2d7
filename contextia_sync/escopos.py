"""
O escopo (a empresa) como texto: a mesma empresa não pode virar duas chaves.

E o que um código de empresa pode ser. O código vem do cadastro do ERP e vira
o primeiro campo de uma linha do arquivo de chaves (TSV), o `external_id` do
projeto, um argumento das ferramentas, um pedaco da URL do webhook e texto de
log e de status. Um TAB ou uma quebra de linha nele injetaria linhas no
arquivo de chaves (`'Z\\tctx_x\\n555'` virava a linha `555<TAB><chave de outro
projeto>`) e forjaria linhas de log. Por isso o código e conferido onde entra
(a leitura do cadastro, o arquivo de chaves, `--scope`) contra um conjunto
fechado -- o que `problema_no_escopo` diz:

  * letras ASCII (A-Z, a-z), dígitos (0-9) e os sinais `-`, `_` e `.`;
  * começando por letra ou dígito (`..`, `-1` e `.x` não são código);
  * até `padroes.ESCOPO_MAXIMO` caracteres;
  * os espaços ASCII das pontas já saíram em `texto_escopo` (o CHAR com
    preenchimento do Protheus, `'01  '`, e a empresa `01`) -- e SÓ eles.

`texto_escopo` e a forma canônica, a única: cadastro, linhas de dados, arquivo
de chaves, `--scope`, provisionamento, ouvinte, connector e carregar-todas
passam por ela. Ela nunca faz dois valores guardados diferentes virarem o
mesmo código: nada de `str.strip()` (que tira também `\u00a0`, `\u2003` e os
separadores `\x1c`-`\x1f`: `'10\x1c'` virava a empresa 10 e sobrescrevia um
registro dela), nada de NFKC (`'１０'` não é `10`). O que sobra fora do
alfabeto é recusado por `problema_no_escopo` e dito por `codigo_invalido`,
escapado: `código de empresa inválido: '10\x1c' (U+001C)`.

Fora dele ficam o espaço no meio (`'01 02'` e `'01  02'` pareceriam a mesma
empresa no log) e as letras acentuadas e de outros alfabetos (`'SÃO'` em NFC e
em NFD são textos diferentes que parecem iguais; um `А` cirílico parece o `A`):
com eles a empresa pareceria outra -- o problema que o arquivo de chaves já
recusa para o BOM. Código de ERP de verdade (`01`, `0101`, `297`, `MATRIZ`,
`SP-01`, `EMP_01`, `1.2`) passa.

Módulo puro (só biblioteca padrão): o `--autoteste` roda num `python3 -S`.
"""

import decimal
import re
import unicodedata

from contextia_sync import padroes
from contextia_sync.erros import ErroConfiguracao

PERMITIDOS = 'letras ASCII (A-Z, a-z), dígitos (0-9), hífen (-), sublinhado (_) e ponto (.)'
"""O conjunto permitido, como as mensagens o dizem ao operador."""

REGRA = 'Um código de empresa só pode ter %s, começando por letra ou dígito, até %d caracteres' % (
    PERMITIDOS,
    padroes.ESCOPO_MAXIMO,
)
"""A regra inteira numa frase (sem ponto final), para as mensagens."""

_PERMITIDO = re.compile(r'[A-Za-z0-9._-]')
_INICIO = re.compile(r'[A-Za-z0-9]')


def texto_escopo(valor: object) -> str:
    """
    O escopo como a chave do arquivo de chaves o escreve: texto, sem espaços.

    O ERP devolve 297 (int), Decimal('297') (Oracle NUMBER), 297.0 (float de
    driver), '297 ' (CHAR com preenchimento). São a mesma empresa; se cada
    forma virasse um texto diferente, a empresa 297 pareceria nova a cada
    ciclo e ninguém receberia os dados dela. Devolve '' para vazio.
    """
    if valor is None:
        return ''
    if isinstance(valor, bool):
        return str(int(valor))
    if isinstance(valor, float) and valor.is_integer():
        return str(int(valor))
    if isinstance(valor, decimal.Decimal) and valor == valor.to_integral_value():
        return str(valor.quantize(decimal.Decimal(1)))
    # So o espaco ASCII: o resto do que str.strip() tira (NBSP, EM SPACE, os
    # separadores de arquivo/grupo) e outro valor guardado, e fica para a recusa.
    return str(valor).strip(' ')


def problema_no_escopo(escopo: str) -> str | None:
    """
    Por que `escopo` (já passado por `texto_escopo`) não serve de código de
    empresa, numa frase que completa "o código ..."; None se serve. Vazio e
    problema de quem chama (a regra de projeto o recusa como "vazio").
    """
    if len(escopo) > padroes.ESCOPO_MAXIMO:
        return 'tem %d caracteres (o máximo é %d)' % (len(escopo), padroes.ESCOPO_MAXIMO)
    for caractere in escopo:
        if not _PERMITIDO.fullmatch(caractere):
            return 'tem o caractere %s, fora do permitido' % _descrever(caractere)
    if escopo and not _INICIO.fullmatch(escopo[0]):
        return 'começa com %r (o código começa com letra ou dígito)' % escopo[0]
    return None


def codigo_invalido(escopo: str, com_motivo: bool = True) -> str | None:
    """
    "código de empresa inválido: '10\\x1c' (U+001C)" se `escopo` (já canônico) não
    serve de código, com o valor escapado para o terminal e, com `com_motivo`,
    o porquê ("-- o código tem o caractere ..."); None se serve (ou vazio).

    A frase com que linha de dados, cadastro, carga e quarentena nomeiam a recusa.
    """
    problema = problema_no_escopo(escopo) if escopo else None
    if problema is None:
        return None
    from contextia_sync.registro import limpo

    fora = next((c for c in escopo if not _PERMITIDO.fullmatch(c)), None)
    texto = "código de empresa inválido: '%s'%s" % (
        limpo(escopo),
        ' (U+%04X)' % ord(fora) if fora is not None else '',
    )
    return '%s -- o código %s' % (texto, problema) if com_motivo else texto


def exigir_escopo(escopo: str, onde: str) -> str:
    """
    `escopo` (de uma opção de linha de comando, `onde`) se ele serve de código de
    empresa; ErroConfiguracao (saída 2, nada feito) se não serve.
    """
    problema = problema_no_escopo(escopo)
    if problema:
        from contextia_sync.registro import limpo

        raise ErroConfiguracao(
            "%s: o código '%s' %s. %s; nada foi feito." % (onde, limpo(escopo), problema, REGRA)
        )
    return escopo


def _descrever(caractere: str) -> str:
    """'U+000A, LINE FEED' para os invisíveis; "'É' (U+00C9)" para os que se veem."""
    codigo = 'U+%04X' % ord(caractere)
    if caractere.isprintable() and caractere != ' ':
        return '%r (%s)' % (caractere, codigo)
    nomes = {'\t': 'TAB', '\n': 'LINE FEED', '\r': 'CARRIAGE RETURN', ' ': 'espaço'}
    nome = nomes.get(caractere) or unicodedata.name(caractere, '')
    if not nome:
        categoria = unicodedata.category(caractere)
        nome = 'controle' if categoria == 'Cc' else categoria
    return '%s, %s' % (codigo, nome)
