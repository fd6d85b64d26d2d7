"""
Os valores padrao do SDK, cada um num lugar so.

A ajuda do argparse, o `Contexto` do ouvinte, o transporte HTTP e as tabelas da
documentacao leem daqui (um teste confere as tabelas de docs/ contra estes
numeros). Quem muda um padrao muda aqui, e o resto acompanha.

Modulo puro (so constantes): o `ouvinte.py --autoteste` roda num `python3 -S`.
"""

# -- ouvinte: ciclos --------------------------------------------------------
INTERVALO_DADOS = 60
"""Segundos entre leituras do que mudou (`--intervalo-dados`)."""

INTERVALO_PROJETOS = 300
"""Segundos entre buscas por empresa nova (`--intervalo-projetos`)."""

HORA_VARREDURA = '03:30'
"""Hora da carga completa diaria, a unica que remove (`--varredura`)."""

JANELA_VARREDURA = 180
"""Minutos depois da hora em que a varredura ainda pode disparar (`--janela-varredura`)."""

FOLGA = 180
"""Segundos que a leitura recua atras da marca de agua (`--folga`)."""

MAXIMO_POR_CICLO = 20000
"""Linhas mudadas num ciclo acima das quais o dataset vai para a varredura
(`--maximo-por-ciclo`)."""

TIMEOUT_FERRAMENTA = 7200
"""Tempo maximo, em segundos, de uma ferramenta rodada pelo ouvinte (`--timeout-ferramenta`)."""

INATIVIDADE_FERRAMENTA = 1800
"""Segundos sem nenhuma linha de saida apos os quais a ferramenta e encerrada
(`--inatividade-ferramenta`)."""

TETO_ESPERA = 900
"""Teto, em segundos, da espera entre falhas seguidas do ciclo (dobra a cada falha)."""

ESTRATEGIA = 'coluna'
"""Estrategia de captura quando nem `--estrategia` nem `listener.strategy` dizem outra."""

# -- carga e envio ----------------------------------------------------------
CHUNK = 500
"""Registros por lote enviado ao intake (`chunk` no mapeamento)."""

MAX_REMOCAO = 0.5
"""Fracao de um dataset que uma carga pode remover sem permissao explicita (`--max-remocao`)."""

INTERVALO_PROGRESSO = 30.0
"""Segundos entre linhas de progresso do conector sem terminal (`CONTEXTIA_PROGRESSO_SEGUNDOS`)."""

SOURCE = 'generic'
"""O adaptador de origem (`--source`)."""

# -- origem -----------------------------------------------------------------
TIMEOUT_ORIGEM = 300
"""Segundos por consulta na origem (`CONTEXTIA_ORIGEM_TIMEOUT`; 0 desliga)."""

# -- transporte HTTP (a politica de retentativas, ver intake/transporte.py) --
TIMEOUT_CONEXAO = 5
"""Segundos para conectar ao Contextia, por tentativa."""

TIMEOUT_LEITURA = 120
"""Segundos esperando a resposta de um pedido, por tentativa."""

RETENTATIVAS = 6
"""Tentativas a mais por pedido (conexao, leitura e status somados)."""

BACKOFF = 0.5
"""Espera inicial entre tentativas; dobra a cada uma."""

BACKOFF_MAXIMO = 8.0
"""Teto da espera entre duas tentativas."""

PRAZO_RETENTATIVAS = 120
"""Prazo total de um pedido, tentativas e esperas somadas: passado ele, o lote conta como falho."""

STATUS_RETENTAVEIS = (429, 502, 503, 504)
"""Status HTTP que passam sozinhos (sobrecarga, gateway): re-tentados dentro do prazo."""
